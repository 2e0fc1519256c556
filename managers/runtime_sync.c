/* SyncPod as a state machine (upstream kuberuntime_manager.go SyncPod and
 * kuberuntime_container.go startContainer). Each stage launches one async step
 * (op->pending++) and its completion calls the next; nl__op_resume() drops the
 * completion of a cancelled operation. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/image.h"
#include "cri/runtime.h"
#include "managers/hooks.h"
#include "managers/runtime_internal.h"
#include "managers/userns.h"
#include "managers/volumes_api.h"
#include "reactor/fs.h"
#include "reactor/duration.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static void prune(nl_runtime_op_t *op);
static void prepare(nl_runtime_op_t *op);
static void sandbox_step(nl_runtime_op_t *op);
static void dra_step(nl_runtime_op_t *op);
static void next_container(nl_runtime_op_t *op);

/* ---- step 2/3: kill ---- */

static void kill_one(nl_runtime_op_t *op);
static void kill_one_stop(nl_runtime_op_t *op, void *ctx, int64_t grace);

static void stopped_one(const nl_grpc_status_t *st, Runtime__V1__StopContainerResponse *resp,
                        void *ctx) {
  (void)resp;
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  nl_sync_step_t *s = &op->result.steps[op->cur_step_idx];
  if (st->code != NL_GRPC_OK && st->code != NL_GRPC_NOT_FOUND) {
    char *e = nl_grpc_status_format(st);
    nl__step_fail(s, NL_REASON_KILL_CONTAINER, "%s", e);
    nl__op_fail(op, NL_ERUNTIME, "pod %s: kill container %s: %s", op->desc, s->target, e);
    free(e);
    return;
  }
  op->cursor++;
  kill_one(op);
}

static void kill_one(nl_runtime_op_t *op) {
  if (op->cursor >= op->actions.n_to_kill) {
    prune(op);
    return;
  }
  nl_kill_info_t *k = &op->actions.to_kill[op->cursor];
  nl__result_add(&op->result, NL_SYNC_KILL_CONTAINER, k->name, k->init);
  op->cur_step_idx = op->result.n_steps - 1;
  int64_t grace = nl__grace_for(op->pod, k->spec, k->reason);
  nl_info("pod %s: killing container %s (%s) with a grace period of %llds: %s", op->desc,
          k->name, k->id, (long long)grace, k->message);
  if (k->message && *k->message)
    nl__op_event(op, op->pod, k->name, NL_EVENT_NORMAL, "Killing", "%s", k->message);
  else
    nl__op_event(op, op->pod, k->name, NL_EVENT_NORMAL, "Killing", "Stopping container %s",
                 k->name);
  const nl_rt_pod_status_t *st = op->status;
  nl__prestop_run(op, op->pod, k->spec, k->id, st && st->n_ips ? st->ips[0] : NULL, grace,
                  kill_one_stop, NULL);
}

/* After the preStop hook (upstream killContainer): StopContainer with what is
 * left of the grace period. */
static void kill_one_stop(nl_runtime_op_t *op, void *ctx, int64_t grace) {
  (void)ctx;
  if (!nl__op_resume(op)) return;
  op->pending++;
  if (grace < NL_RUNTIME_MIN_GRACE_SECONDS) grace = NL_RUNTIME_MIN_GRACE_SECONDS;
  nl__stop_container(op->rt, op->actions.to_kill[op->cursor].id, grace, stopped_one, op);
}

static void after_kill_pod(nl_runtime_op_t *op, bool ok) {
  if (!ok || !op->actions.create_sandbox) {
    /* Killed because everything is done (or failed to): nothing to start. */
    nl__op_finish(op);
    return;
  }
  prune(op);
}

void nl__sync_start(nl_runtime_op_t *op) {
  nl_runtime_t *rt = op->rt;
  nl_runtime_compute_actions(op->pod, op->status, rt->probe, rt->probe_ctx, &op->actions);
  nl_runtime_resize_actions(op->pod, op->status, rt->opts.resize, &op->actions);
  nl_pod_actions_t *a = &op->actions;
  nl_vlog(4, "pod %s: actions: kill_pod=%d create_sandbox=%d attempt=%u init=%zu start=%zu kill=%zu",
          op->desc, a->kill_pod, a->create_sandbox, a->attempt, a->n_init_to_start,
          a->n_to_start, a->n_to_kill);
  if (!a->create_sandbox && op->status && op->status->n_sandboxes) {
    const nl_rt_sandbox_t *sb = &op->status->sandboxes[0];
    if (sb->ip) nl__strv_push(&op->pod_ips, &op->n_pod_ips, sb->ip);
    for (size_t i = 0; i < sb->n_ips; i++)
      if (!nl__strv_has(op->pod_ips, op->n_pod_ips, sb->ips[i]))
        nl__strv_push(&op->pod_ips, &op->n_pod_ips, sb->ips[i]);
    op->sandbox_id = a->sandbox_id ? nl_xstrdup(a->sandbox_id) : NULL;
  }
  if (a->kill_pod) {
    if (a->create_sandbox && a->sandbox_id) {
      nl_info("pod %s: sandbox changed, it will be killed and re-created", op->desc);
      nl__op_event(op, op->pod, NULL, NL_EVENT_NORMAL, "SandboxChanged",
                   "Pod sandbox changed, it will be killed and re-created.");
    }
    nl__kill_pod_start(op, after_kill_pod);
    return;
  }
  op->cursor = 0;
  kill_one(op);
}

/* ---- prune dead instances (pruneInitContainersBeforeStart, purgeInitContainers,
 * and the container GC's one-dead-instance-per-container rule) ---- */

static void removed(const nl_grpc_status_t *st, Runtime__V1__RemoveContainerResponse *r, void *ctx) {
  (void)r;
  nl_runtime_op_t *op = ctx;
  if (st->code != NL_GRPC_OK && st->code != NL_GRPC_NOT_FOUND && !op->cancelled)
    nl_warn("pod %s: remove container: %s", op->desc, st->message);
  if (!nl__op_resume(op)) return;
  if (--op->kill_todo == 0) prepare(op);
}

static bool is_init(const nl_pod_t *pod, const char *name) {
  for (size_t i = 0; i < pod->spec.n_init_containers; i++)
    if (strcmp(pod->spec.init_containers[i].name, name) == 0) return true;
  return false;
}

/* How many dead instances of the container are newer than c (the list is
 * newest first). The container GC keeps maxPerPodContainer of them (upstream's
 * default 1, the one `kubectl logs --previous` reads); pruning to the same
 * number here spares a crash-looping pod a minute of growth between rounds. */
static size_t newer_dead(const nl_rt_pod_status_t *s, const nl_rt_container_t *c) {
  size_t n = 0;
  for (size_t i = 0; i < s->n_containers && &s->containers[i] != c; i++)
    if (s->containers[i].name && strcmp(s->containers[i].name, c->name) == 0 &&
        s->containers[i].state != NL_RT_CONTAINER_RUNNING)
      n++;
  return n;
}

static void prune(nl_runtime_op_t *op) {
  const nl_rt_pod_status_t *s = op->status;
  op->kill_todo = 1; /* held while launching */
  for (size_t i = 0; s && i < s->n_containers; i++) {
    const nl_rt_container_t *c = &s->containers[i];
    if (c->state == NL_RT_CONTAINER_RUNNING) continue;
    bool purge = op->actions.create_sandbox && is_init(op->pod, c->name);
    int keep = op->rt->opts.max_dead_per_container;
    bool older = keep >= 0 && newer_dead(s, c) >= (size_t)keep;
    if (!purge && !(older && c->state == NL_RT_CONTAINER_EXITED)) continue;
    nl_vlog(3, "pod %s: removing dead container %s (%s)", op->desc, c->name, c->id);
    Runtime__V1__RemoveContainerRequest req = RUNTIME__V1__REMOVE_CONTAINER_REQUEST__INIT;
    req.container_id = c->id;
    op->kill_todo++;
    op->pending++;
    nl_cri_remove_container(op->rt->cri, &req, removed, op);
  }
  if (--op->kill_todo == 0) prepare(op);
}

/* ---- step 4: volumes, directories, resolv.conf ----
 * The tokens of projected volumes are fetched first (asynchronously), then the
 * content of the API volumes is resolved on the loop (the caches are the
 * loop's), then everything is written on the thread pool. A running pod goes
 * through here on every sync: that is how changed ConfigMaps and Secrets and
 * refreshed tokens reach it, rewritten atomically, with no restart. */

typedef struct prep {
  uv_work_t w;
  nl_runtime_op_t *op;
  nl_api_volumes_t api;
  nl_err_t *err;
  char *resolv; /* contents, or NULL */
  size_t resolv_len;
  bool cgroup_failed; /* err is about the pod cgroup, not the volumes */
  char *userns;       /* a new user namespace allocation to persist in the pod's directory */
  nl_err_t *userns_err;
} prep_t;

static void prep_work(uv_work_t *w) {
  prep_t *p = container_of(w, prep_t, w);
  nl_runtime_op_t *op = p->op; /* op->pod is immutable while this runs */
  const nl_runtime_opts_t *o = &op->rt->opts;
  if (p->userns) {
    /* upstream writeMappingsToFile: atomic and durable before the runtime
     * hears of the mappings */
    char *dir = nl_runtime_pod_dir(o, op->pod->metadata.uid);
    char *path = nl_xasprintf("%s/%s", dir, NL_USERNS_FILE);
    const char *step = NULL;
    int e = nl_mkdir_p(dir, 0750);
    if (e < 0) e = -e, step = "create pod directory";
    if (!e) e = nl_fs_replace(path, p->userns, strlen(p->userns), &step);
    if (e) nl_err_set(&p->userns_err, e, "create user namespace: %s %s: %s", step, path, strerror(e));
    free(path);
    free(dir);
  }
  /* upstream makes the pod cgroup before the volumes, in SyncPod; a resize
   * changes its cpu and memory later, in its own order */
  if (o->cgroups &&
      (op->actions.resize ? nl_cgroups_pod_ensure_exists(o->cgroups, op->pod, &p->err)
                          : nl_cgroups_pod_ensure(o->cgroups, op->pod, &p->err)) < 0) {
    nl_err_wrap(&p->err, "failed to ensure that the pod: %s cgroups exist and are correctly applied",
                op->pod->metadata.uid);
    p->cgroup_failed = true;
    return;
  }
  if (nl__volumes_setup_sync(o->root_dir, op->pod, &p->api, &p->err) < 0) return;
  char *logdir = nl_runtime_pod_log_dir(o, op->pod);
  int r = nl_mkdir_p(logdir, 0755);
  if (r < 0) nl_err_set(&p->err, -r, "create pod log directory %s: %s", logdir, strerror(-r));
  free(logdir);
  if (r < 0) return;
  if (o->resolv_conf && *o->resolv_conf) {
    int fd = open(o->resolv_conf, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[16384];
      ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) {
        p->resolv = nl_xstrndup(buf, (size_t)n);
        p->resolv_len = (size_t)n;
      }
      close(fd);
    }
  }
}

static void prep_free(prep_t *p) {
  nl_api_volumes_free(&p->api);
  nl_err_free(&p->err);
  nl_err_free(&p->userns_err);
  free(p->userns);
  free(p->resolv);
  free(p);
}

static void prep_done(uv_work_t *w, int status) {
  prep_t *p = container_of(w, prep_t, w);
  nl_runtime_op_t *op = p->op;
  if (status < 0 && !p->err) nl_err_set(&p->err, -status, "%s", uv_strerror(status));
  /* not persisted: the slot goes back (upstream createUserNs), and the
   * sandbox is not made */
  if (p->userns_err) nl_userns_release(op->rt->opts.userns, op->pod->metadata.uid);
  if (nl__op_resume(op)) {
    if (p->userns_err) {
      nl_err_free(&op->userns_err);
      op->userns_err = p->userns_err;
      p->userns_err = NULL;
    }
    if (p->resolv) nl_runtime_parse_resolv_conf(p->resolv, p->resolv_len, &op->host_dns);
    if (p->err && p->cgroup_failed) {
      nl_error("pod %s: %s", op->desc, p->err->msg);
      nl__op_event(op, op->pod, NULL, NL_EVENT_WARNING, "FailedToCreatePodContainer",
                   "unable to ensure pod container exists: %s", p->err->msg);
      nl__op_fail(op, p->err->code, "pod %s: %s", op->desc, p->err->msg);
    } else if (p->err) {
      nl_error("pod %s: %s", op->desc, p->err->msg);
      /* upstream's words start the same; its lists of volumes are not kept */
      nl__op_event(op, op->pod, NULL, NL_EVENT_WARNING, "FailedMount",
                   "Unable to attach or mount volumes: %s", p->err->msg);
      nl__op_fail(op, p->err->code, "pod %s: unable to set up volumes: %s", op->desc,
                  p->err->msg);
    } else {
      if (p->api.changed) nl_vlog(4, "pod %s: volume content written", op->desc);
      dra_step(op);
    }
  }
  prep_free(p);
}

/* upstream's PrepareDynamicResources, before a new sandbox: the pod's DRA
 * claims prepared by their drivers. */
static void dra_done(void *arg, const char *err) {
  nl_runtime_op_t *op = arg;
  if (!nl__op_resume(op)) return;
  if (err) {
    nl_error("pod %s: %s", op->desc, err);
    nl__op_event(op, op->pod, NULL, NL_EVENT_WARNING, "FailedPrepareDynamicResources",
                 "Failed to prepare dynamic resources: %s", err);
    nl__op_fail(op, NL_EINVAL, "pod %s: %s", op->desc, err);
    return;
  }
  sandbox_step(op);
}

static void dra_step(nl_runtime_op_t *op) {
  const nl_runtime_opts_t *o = &op->rt->opts;
  if (op->actions.create_sandbox && o->dra_prepare) {
    op->pending++;
    if (o->dra_prepare(o->dra_ctx, op->pod, dra_done, op)) return;
    op->pending--;
  }
  sandbox_step(op);
}

/* upstream GetOrCreateUserNamespaceMappings' allocation, before the sandbox
 * and the containers' configs read it: a pod with `hostUsers: false` whose
 * runtime handler supports user namespaces gets its slot (a new one is
 * written to the pod's directory by prep_work); the refusals are the
 * configs' (nl__userns_for_pod). */
static void userns_allocate(nl_runtime_op_t *op, prep_t *p) {
  nl_userns_t *m = op->rt->opts.userns;
  nl_err_t *err = NULL;
  if (op->pod->spec.host_users != 0 || !m || nl__userns_check_handler(&op->rt->opts, op->pod, &err) < 0) {
    nl_err_free(&err);
    return;
  }
  uint32_t host_id;
  bool fresh;
  if (nl_userns_allocate(m, op->pod->metadata.uid, &host_id, &fresh, &err) < 0) {
    nl_err_wrap(&err, "create user namespace");
    nl_err_free(&op->userns_err);
    op->userns_err = err;
    return;
  }
  if (fresh) {
    nl_info("pod %s: user namespace: host ids %u-%u", op->desc, host_id,
            (uint32_t)(host_id + m->ids_per_pod - 1));
    p->userns = nl_userns_file_format(host_id, m->ids_per_pod);
  }
}

static void prepare_volumes(nl_runtime_op_t *op) {
  prep_t *p = nl_xcalloc(1, sizeof *p);
  p->op = op;
  if (nl_volumes_api_resolve(&op->rt->opts, op->pod, &p->api, &p->err) < 0) {
    nl_error("pod %s: %s", op->desc, p->err->msg);
    nl__op_event(op, op->pod, NULL, NL_EVENT_WARNING, "FailedMount", "%s", p->err->msg);
    nl__op_fail(op, p->err->code, "pod %s: %s", op->desc, p->err->msg);
    prep_free(p);
    return;
  }
  userns_allocate(op, p);
  op->pending++;
  int r = uv_queue_work(op->rt->loop, &p->w, prep_work, prep_done);
  if (r < 0) {
    op->pending--;
    if (p->userns) nl_userns_release(op->rt->opts.userns, op->pod->metadata.uid);
    prep_free(p);
    nl__op_fail(op, -r, "pod %s: queue work: %s", op->desc, uv_strerror(r));
  }
}

static void tokens_ready(void *ctx) {
  nl_runtime_op_t *op = ctx;
  if (nl__op_resume(op)) prepare_volumes(op);
}

static void prepare(nl_runtime_op_t *op) {
  const nl_tokens_source_t *t = &op->rt->opts.tokens;
  if (t->ensure && nl_volumes_api_wants_tokens(op->pod)) {
    op->pending++;
    t->ensure(t->ctx, op->pod, tokens_ready, op);
    return;
  }
  prepare_volumes(op);
}

/* ---- step 4: the sandbox ---- */

static void start_containers(nl_runtime_op_t *op) {
  /* Host-network pods have the node's IPs as theirs (upstream SyncPod takes
   * podStatus.IPs from the API status, which generateAPIPodStatus fills so):
   * status.podIP(s) in their environment. */
  const char *node_ip = op->rt->opts.node_ip;
  if (op->pod->spec.host_network && op->n_pod_ips == 0 && node_ip) {
    for (const char *p = node_ip; *p;) {
      size_t len = strcspn(p, ",");
      if (len) {
        char *ip = nl_xstrndup(p, len);
        nl__strv_push(&op->pod_ips, &op->n_pod_ips, ip);
        free(ip);
      }
      p += len + (p[len] == ',');
    }
  }
  op->in_ephemeral = op->actions.n_ephemeral_to_start > 0; /* upstream's step 5, then 6 and 7 */
  op->in_init = true;
  op->cursor = 0;
  nl__image_volumes_pull(op, next_container);
}

static void sandbox_status_done(const nl_grpc_status_t *st,
                                Runtime__V1__PodSandboxStatusResponse *resp, void *ctx) {
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  if (st->code != NL_GRPC_OK || !resp->status) {
    char *e = st->code != NL_GRPC_OK ? nl_grpc_status_format(st) : nl_xstrdup("pod sandbox status is nil");
    nl__op_fail(op, NL_ERUNTIME, "pod %s: sandbox status: %s", op->desc, e);
    free(e);
    return;
  }
  if (!op->pod->spec.host_network && resp->status->network) {
    Runtime__V1__PodSandboxNetworkStatus *n = resp->status->network;
    if (n->ip && *n->ip) nl__strv_push(&op->pod_ips, &op->n_pod_ips, n->ip);
    for (size_t i = 0; i < n->n_additional_ips; i++)
      if (n->additional_ips[i]->ip && *n->additional_ips[i]->ip)
        nl__strv_push(&op->pod_ips, &op->n_pod_ips, n->additional_ips[i]->ip);
  }
  if (op->rt->opts.sandbox_ready)
    op->rt->opts.sandbox_ready(op->rt->opts.sandbox_ready_ctx, op->pod);
  start_containers(op);
}

static void ran_sandbox(const nl_grpc_status_t *st, Runtime__V1__RunPodSandboxResponse *resp,
                        void *ctx) {
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  nl_sync_step_t *s = &op->result.steps[op->cur_step_idx];
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    nl__step_fail(s, NL_REASON_CREATE_POD_SANDBOX, "%s", e);
    nl_error("pod %s: CreatePodSandbox failed: %s", op->desc, e);
    nl__op_event(op, op->pod, NULL, NL_EVENT_WARNING, "FailedCreatePodSandBox",
                 "Failed to create pod sandbox: %s", e);
    nl__op_fail(op, NL_ERUNTIME, "pod %s: failed to create pod sandbox: %s", op->desc, e);
    free(e);
    return;
  }
  op->sandbox_id = nl_xstrdup(resp->pod_sandbox_id);
  nl_vlog(4, "pod %s: created sandbox %s", op->desc, op->sandbox_id);
  if (op->rt->opts.resize && op->pod->spec.resources) { /* UpdateActuatedPodLevelResources */
    nl_rsz_res_t r = nl_rsz_reqs_res(op->pod->spec.resources);
    nl_resize_set_pod_actuated(op->rt->opts.resize, op->uid, &r);
  }
  Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
  req.pod_sandbox_id = op->sandbox_id;
  op->pending++;
  nl_cri_pod_sandbox_status(op->rt->cri, &req, sandbox_status_done, op);
}

static void sandbox_step(nl_runtime_op_t *op) {
  nl_err_t *err = NULL;
  bool create = op->actions.create_sandbox;
  if (create) {
    nl__result_add(&op->result, NL_SYNC_CREATE_POD_SANDBOX, op->desc, false);
  } else {
    nl__result_add(&op->result, NL_SYNC_CONFIG_POD_SANDBOX, op->sandbox_id ? op->sandbox_id : "",
                   false);
  }
  op->cur_step_idx = op->result.n_steps - 1;
  /* upstream looks the pod's RuntimeClass up in its sandbox config (its
   * namespaces) and again for RunPodSandbox: a class not found fails both */
  const char *handler;
  if (op->userns_err) err = nl_err_newf(op->userns_err->code, "%s", op->userns_err->msg);
  if (err || nl_runtime_pod_handler(&op->rt->opts, op->pod, &handler, &err) < 0 ||
      nl_runtime_build_sandbox_config(&op->rt->opts, op->pod, op->actions.attempt, &op->host_dns,
                                      &op->sandbox_config, &err) < 0) {
    nl__step_fail(&op->result.steps[op->cur_step_idx],
                  create ? NL_REASON_CREATE_POD_SANDBOX : NL_REASON_CONFIG_POD_SANDBOX, "%s",
                  err->msg);
    if (create) /* upstream createPodSandbox fails before the runtime is asked */
      nl__op_event(op, op->pod, NULL, NL_EVENT_WARNING, "FailedCreatePodSandBox",
                   "Failed to create pod sandbox: %s", err->msg);
    nl__op_fail(op, NL_EINVAL, "pod %s: %s", op->desc, err->msg);
    nl_err_free(&err);
    return;
  }
  if (!create) {
    start_containers(op);
    return;
  }
  nl_info("pod %s: creating sandbox (attempt %u)", op->desc, op->actions.attempt);
  if (*handler) nl_vlog(2, "pod %s: running pod with runtime handler %s", op->desc, handler);
  Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
  req.config = op->sandbox_config;
  req.runtime_handler = (char *)handler; /* packed by the call, before the cache can change */
  op->pending++;
  nl_cri_run_pod_sandbox(op->rt->cri, &req, ran_sandbox, op);
}

/* ---- steps 6 and 8: start containers ---- */

static void container_done(nl_runtime_op_t *op, bool ok) {
  if (!ok && !op->result.err) {
    const nl_sync_step_t *s = &op->result.steps[op->cur_step_idx];
    nl_err_set(&op->result.err, NL_ERUNTIME, "failed to \"StartContainer\" for \"%s\" with %s: %s",
               op->cur->name, s->reason ? s->reason : "", s->message ? s->message : "");
  }
  free(op->cur_image_ref);
  op->cur_image_ref = NULL;
  free(op->cur_term_path);
  op->cur_term_path = NULL;
  free(op->cur_hosts_path);
  op->cur_hosts_path = NULL;
  nl_env_free(op->cur_file_env, op->n_cur_file_env);
  op->cur_file_env = NULL;
  op->n_cur_file_env = 0;
  free(op->cur_id);
  op->cur_id = NULL;
  free(op->cur_image_volumes);
  op->cur_image_volumes = NULL;
  op->n_cur_image_volumes = 0;
  if (op->in_init && !op->in_ephemeral && !ok && !nl__is_restartable_init(op->cur)) {
    /* An init container failed to start: the pod cannot initialize. */
    nl__op_finish(op);
    return;
  }
  op->cursor++;
  next_container(op);
}

static nl_sync_step_t *cur_step(nl_runtime_op_t *op) { return &op->result.steps[op->cur_step_idx]; }

/* upstream startContainer's Failed event: "Error: <the error's message>". */
static void fail_event(nl_runtime_op_t *op, const char *msg) {
  nl__op_event(op, op->pod, op->cur->name, NL_EVENT_WARNING, "Failed", "Error: %s", msg);
}

/* upstream startContainer step 4: a failed postStart hook kills the container
 * (reason FailedPostStartHook) and the start fails with PostStartHookError. */
static void post_killed(const nl_grpc_status_t *st, Runtime__V1__StopContainerResponse *r,
                        void *ctx) {
  (void)r;
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  if (st->code != NL_GRPC_OK && st->code != NL_GRPC_NOT_FOUND)
    nl_warn("pod %s: kill container %s after its PostStart hook failed: %s", op->desc,
            op->cur->name, st->message);
  container_done(op, false);
}

static void post_started(nl_runtime_op_t *op, const char *err) {
  if (!nl__op_resume(op)) return;
  if (!err) {
    container_done(op, true);
    return;
  }
  nl_warn("pod %s: container %s: Warning FailedPostStartHook: %s", op->desc, op->cur->name, err);
  nl__op_event(op, op->pod, op->cur->name, NL_EVENT_WARNING, "FailedPostStartHook", "%s", err);
  nl__step_fail(&op->result.steps[op->cur_step_idx], "PostStartHookError", "%s", err);
  int64_t grace = nl__grace_for(op->pod, op->cur, "FailedPostStartHook");
  nl_info("pod %s: killing container %s (%s) with a grace period of %llds: FailedPostStartHook",
          op->desc, op->cur->name, op->cur_id, (long long)grace);
  op->pending++;
  nl__stop_container(op->rt, op->cur_id, grace, post_killed, op);
}

/* upstream startContainer: the container's log is linked from the containers'
 * log links directory (/var/log/containers) for log shippers, once it has
 * started. Off the loop; a failure is logged and changes nothing else. */
typedef struct log_link {
  uv_work_t w;
  char *target, *link;
  int err;
} log_link_t;

static void log_link_work(uv_work_t *w) {
  log_link_t *l = container_of(w, log_link_t, w);
  char *dir = nl_xstrdup(l->link);
  *strrchr(dir, '/') = 0;
  int r = nl_mkdir_p(dir, 0755);
  free(dir);
  struct stat st;
  if (r == 0 && stat(l->target, &st) < 0 && errno == ENOENT) r = 0; /* no log file: no link */
  else if (r == 0 && symlink(l->target, l->link) < 0 && errno != EEXIST) r = -errno;
  l->err = r;
}

static void log_link_done(uv_work_t *w, int status) {
  log_link_t *l = container_of(w, log_link_t, w);
  if (status == 0 && l->err < 0)
    nl_error("failed to create legacy symbolic link %s to %s: %s", l->link, l->target, strerror(-l->err));
  free(l->target);
  free(l->link);
  free(l);
}

static void log_link(nl_runtime_op_t *op) {
  const nl_runtime_opts_t *o = &op->rt->opts;
  log_link_t *l = nl_xcalloc(1, sizeof *l);
  char *dir = nl_runtime_pod_log_dir(o, op->pod);
  char *rel = nl_runtime_container_log_path(op->cur, op->cur_restart);
  l->target = nl_xasprintf("%s/%s", dir, rel);
  free(dir);
  free(rel);
  char *links = nl_rt_log_links_dir(o->pod_logs_dir);
  l->link = nl_rt_log_link_path(links, op->pod->metadata.name, op->pod->metadata.namespace_,
                                op->cur->name, op->cur_id);
  free(links);
  if (uv_queue_work(op->rt->loop, &l->w, log_link_work, log_link_done) < 0) log_link_done(&l->w, -1);
}

static void started(const nl_grpc_status_t *st, Runtime__V1__StartContainerResponse *r, void *ctx) {
  (void)r;
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    nl__step_fail(cur_step(op), NL_REASON_RUN_CONTAINER, "%s", st->message);
    fail_event(op, st->message);
    nl_error("pod %s: start container %s: %s", op->desc, op->cur->name, e);
    if (!op->result.err)
      nl_err_set(&op->result.err, NL_ERUNTIME, "pod %s: start container %s: %s", op->desc,
                 op->cur->name, e);
    free(e);
    container_done(op, false);
    return;
  }
  nl_info("pod %s: started container %s", op->desc, op->cur->name);
  nl__op_event(op, op->pod, op->cur->name, NL_EVENT_NORMAL, "Started", "Container started");
  log_link(op);
  if (op->cur->lifecycle && op->cur->lifecycle->post_start) {
    nl__poststart_run(op, op->cur_id, op->n_pod_ips ? op->pod_ips[0] : NULL, post_started);
    return;
  }
  container_done(op, true);
}

static void created(const nl_grpc_status_t *st, Runtime__V1__CreateContainerResponse *resp,
                    void *ctx) {
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    nl__step_fail(cur_step(op), NL_REASON_CREATE_CONTAINER, "%s", st->message);
    fail_event(op, st->message);
    nl_error("pod %s: create container %s: %s", op->desc, op->cur->name, e);
    if (!op->result.err)
      nl_err_set(&op->result.err, NL_ERUNTIME, "pod %s: create container %s: %s", op->desc,
                 op->cur->name, e);
    free(e);
    container_done(op, false);
    return;
  }
  nl__op_event(op, op->pod, op->cur->name, NL_EVENT_NORMAL, "Created", "Container created");
  if (op->rt->opts.resize && !op->in_ephemeral) { /* upstream setActuatedContainerResources */
    /* with the pod-level limits it runs with where it has none of its own */
    nl_rsz_res_t pl = nl_rsz_reqs_res(op->pod->spec.resources);
    nl_rsz_res_t r = nl_rsz_effective(nl_rsz_res_of(op->cur), &pl);
    nl_resize_set_actuated(op->rt->opts.resize, op->uid, op->cur->name, &r);
  }
  Runtime__V1__StartContainerRequest req = RUNTIME__V1__START_CONTAINER_REQUEST__INIT;
  free(op->cur_id);
  op->cur_id = nl_xstrdup(resp->container_id);
  req.container_id = resp->container_id;
  op->pending++;
  nl_cri_start_container(op->rt->cri, &req, started, op);
}

static void create_with_devices(nl_runtime_op_t *op, V1beta1__ContainerAllocateResponse *const *devs,
                                size_t n_devs) {
  nl_container_input_t in = {
      .devices = devs,
      .n_devices = n_devs,
      .container = op->cur,
      .restart_count = op->cur_restart,
      .image_ref = op->cur_image_ref,
      .pod_ip = op->n_pod_ips ? op->pod_ips[0] : NULL,
      .pod_ips = op->pod_ips,
      .n_pod_ips = op->n_pod_ips,
      .termination_message_host_path = op->cur_term_path,
      .etc_hosts_host_path = op->cur_hosts_path,
      .image_volumes = op->cur_image_volumes,
      .n_image_volumes = op->n_cur_image_volumes,
      .file_env = op->cur_file_env,
      .n_file_env = op->n_cur_file_env,
  };
  const char *target = op->cur->target_container_name;
  const nl_rt_container_t *tc = target && *target ? nl_rt_pod_status_find(op->status, target) : NULL;
  if (tc && tc->state == NL_RT_CONTAINER_RUNNING) in.target_id = tc->id;
  Runtime__V1__ContainerConfig *cfg = NULL;
  nl_err_t *err = NULL;
  if (nl_runtime_build_container_config(&op->rt->opts, op->pod, &in, &cfg, &err) < 0) {
    nl__step_fail(cur_step(op), NL_REASON_CREATE_CONTAINER_CONFIG, "%s", err->msg);
    fail_event(op, err->msg);
    if (!op->result.err) nl_err_set(&op->result.err, NL_EINVAL, "pod %s: %s", op->desc, err->msg);
    nl_err_free(&err);
    container_done(op, false);
    return;
  }
  Runtime__V1__CreateContainerRequest req = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
  req.pod_sandbox_id = op->sandbox_id;
  req.config = cfg;
  req.sandbox_config = op->sandbox_config;
  op->pending++;
  nl_cri_create_container(op->rt->cri, &req, created, op);
  protobuf_c_message_free_unpacked(&cfg->base, NULL);
}

/* The device plugins answered (Allocate, PreStartContainer): a container never
 * starts without its devices. */
static void devices_done(void *arg, V1beta1__ContainerAllocateResponse *const *resps, size_t n,
                         const char *err) {
  nl_runtime_op_t *op = arg;
  if (!nl__op_resume(op)) return;
  if (err) {
    nl__step_fail(cur_step(op), NL_REASON_CREATE_CONTAINER_CONFIG, "%s", err);
    fail_event(op, err);
    nl_error("pod %s: container %s: %s", op->desc, op->cur->name, err);
    if (!op->result.err)
      nl_err_set(&op->result.err, NL_EINVAL, "pod %s: container %s: %s", op->desc, op->cur->name,
                 err);
    container_done(op, false);
    return;
  }
  create_with_devices(op, resps, n);
}

static void create_container(nl_runtime_op_t *op) {
  const nl_runtime_opts_t *o = &op->rt->opts;
  if (o->devices) {
    op->pending++;
    if (o->devices(o->devices_ctx, op->pod, op->cur, devices_done, op)) return;
    op->pending--;
  }
  create_with_devices(op, NULL, 0);
}

/* The container's log directory, restart count from the logs when the runtime
 * has no instance (calcRestartCountByLogDir), the termination-message file, and
 * the pod's etc-hosts (rewritten before each container, as upstream). */
typedef struct cprep {
  uv_work_t w;
  nl_runtime_op_t *op;
  char *log_dir, *term_dir;
  bool scan;
  int32_t restart;
  char *term_path;
  char *hosts_path;    /* NULL: no etc-hosts mount */
  char *hosts_content; /* the file, or the aliases block when node_hosts is set */
  const char *node_hosts;
  char **sub_roots, **sub_paths; /* subPaths of the container's volume mounts */
  size_t n_subs;
  nl__envfile_t *files; /* its fileKeyRefs (runtime_envfile.c) */
  size_t n_files;
  nl_err_t *err;
} cprep_t;

/* upstream makeMounts with SafeMakeDir: a subPath that does not exist is made
 * now, each missing directory with the volume root's mode (setgid and sticky
 * included, whatever the umask), so that the group of an fsGroup can write in
 * it; never through a symlink. */
static int make_subpath(const char *root, const char *sub, nl_err_t **err) {
  struct stat st;
  int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) < 0) {
    if (fd >= 0) close(fd);
    return nl_err_set(err, errno, "subPath %s: open %s: %s", sub, root, strerror(errno));
  }
  mode_t mode = st.st_mode & 07777;
  char *copy = nl_xstrdup(sub), *save = NULL;
  int r = 0;
  for (char *c = strtok_r(copy, "/", &save); c && r == 0; c = strtok_r(NULL, "/", &save)) {
    if (strcmp(c, ".") == 0) continue;
    bool made = mkdirat(fd, c, mode) == 0;
    if (!made && errno != EEXIST) {
      r = nl_err_set(err, errno, "subPath %s: mkdir %s: %s", sub, c, strerror(errno));
      break;
    }
    int next = openat(fd, c, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      r = nl_err_set(err, errno, "subPath %s: open %s: %s", sub, c, strerror(errno));
      break;
    }
    close(fd);
    fd = next;
    if (made && fchmod(fd, mode) < 0)
      r = nl_err_set(err, errno, "subPath %s: chmod %s: %s", sub, c, strerror(errno));
  }
  close(fd);
  free(copy);
  return r;
}

static void cprep_work(uv_work_t *w) {
  cprep_t *p = container_of(w, cprep_t, w);
  int r = nl_mkdir_p(p->log_dir, 0755);
  if (r < 0) {
    nl_err_set(&p->err, -r, "create container log directory %s: %s", p->log_dir, strerror(-r));
    return;
  }
  if (p->scan) {
    DIR *d = opendir(p->log_dir);
    struct dirent *e;
    int32_t max = -1;
    while (d && (e = readdir(d))) {
      char *end;
      long v = strtol(e->d_name, &end, 10);
      if (end != e->d_name && strcmp(end, ".log") == 0 && v > max && v < INT32_MAX) max = (int32_t)v;
    }
    if (d) closedir(d);
    p->restart = max + 1;
  }
  r = nl_mkdir_p(p->term_dir, 0750);
  if (r < 0) {
    nl_err_set(&p->err, -r, "create %s: %s", p->term_dir, strerror(-r));
    return;
  }
  unsigned char rnd[8];
  if (uv_random(NULL, NULL, rnd, sizeof rnd, 0, NULL) < 0) memset(rnd, 0, sizeof rnd);
  p->term_path = nl_xasprintf("%s/%02x%02x%02x%02x%02x%02x%02x%02x", p->term_dir, rnd[0], rnd[1],
                              rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
  int fd = open(p->term_path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0 || fchmod(fd, 0666) < 0) {
    nl_err_set(&p->err, errno, "create termination-message file %s: %s", p->term_path,
               strerror(errno));
    if (fd >= 0) close(fd);
    return;
  }
  close(fd);
  if (p->hosts_path &&
      nl__hosts_write(p->hosts_path, p->hosts_content, p->node_hosts, &p->err) < 0)
    return;
  for (size_t i = 0; i < p->n_subs && !p->err; i++) {
    struct stat st;
    char *full = nl_xasprintf("%s/%s", p->sub_roots[i], p->sub_paths[i]);
    if (lstat(full, &st) < 0 && errno == ENOENT) make_subpath(p->sub_roots[i], p->sub_paths[i], &p->err);
    free(full);
  }
  if (!p->err) nl__envfiles_read(p->files, p->n_files, &p->err);
}

static void cprep_free(cprep_t *p) {
  nl_err_free(&p->err);
  free(p->log_dir);
  free(p->term_dir);
  free(p->term_path);
  free(p->hosts_path);
  free(p->hosts_content);
  for (size_t i = 0; i < p->n_subs; i++) {
    free(p->sub_roots[i]);
    free(p->sub_paths[i]);
  }
  free(p->sub_roots);
  free(p->sub_paths);
  nl__envfiles_free(p->files, p->n_files);
  free(p);
}

/* The subPaths of the container's mounts over writable volumes, with their
 * volume's directory; subPathExpr expanded with the container's environment
 * (an environment that cannot be built fails the container's config later). */
static void plan_subpaths(nl_runtime_op_t *op, cprep_t *p) {
  const nl_container_t *c = op->cur;
  const nl_runtime_opts_t *o = &op->rt->opts;
  nl_env_t *env = NULL;
  size_t n_env = 0;
  bool env_done = false;
  for (size_t i = 0; i < c->n_volume_mounts; i++) {
    const nl_volume_mount_t *vm = &c->volume_mounts[i];
    char *sub = NULL;
    if (vm->sub_path && *vm->sub_path) {
      sub = nl_xstrdup(vm->sub_path);
    } else if (vm->sub_path_expr && *vm->sub_path_expr) {
      if (!env_done) {
        nl_err_t *err = NULL;
        env_done = true;
        if (nl_runtime_make_env(o, op->pod, c, op->n_pod_ips ? op->pod_ips[0] : NULL,
                                op->pod_ips, op->n_pod_ips, NULL, 0, &env, &n_env, &err) < 0)
          nl_err_free(&err);
      }
      sub = nl_runtime_expand(vm->sub_path_expr, env, n_env);
    }
    nl_err_t *err = NULL;
    bool ro = false;
    char *root = sub && nl_volumes_check_subpath(sub, &err) == 0
                     ? nl_volumes_host_path(o->root_dir, op->pod, vm->name, &ro, &err)
                     : NULL;
    nl_err_free(&err);
    if (!root || ro) { /* bad ones fail the container's config; API volumes are read-only */
      free(root);
      free(sub);
      continue;
    }
    p->sub_roots = nl_xrealloc(p->sub_roots, (p->n_subs + 1) * sizeof *p->sub_roots);
    p->sub_paths = nl_xrealloc(p->sub_paths, (p->n_subs + 1) * sizeof *p->sub_paths);
    p->sub_roots[p->n_subs] = root;
    p->sub_paths[p->n_subs++] = sub;
  }
  nl_env_free(env, n_env);
}

/* makeMounts' condition: the pod has IPs (host-network pods use the node's
 * file) and the container does not mount /etc/hosts itself. */
static int plan_hosts(nl_runtime_op_t *op, cprep_t *p, nl_err_t **err) {
  const nl_runtime_opts_t *o = &op->rt->opts;
  bool host_net = op->pod->spec.host_network;
  if ((!host_net && op->n_pod_ips == 0) || !nl_runtime_wants_etc_hosts(op->cur)) return 0;
  char *aliases = nl_runtime_hosts_aliases(op->pod);
  if (host_net) {
    p->hosts_content = aliases;
    p->node_hosts = o->hosts_file ? o->hosts_file : "/etc/hosts";
  } else {
    char *domain = NULL;
    char *hostname = nl_runtime_pod_hostname(o, op->pod, &domain, err);
    if (!hostname) {
      free(aliases);
      return -1;
    }
    p->hosts_content = nl_runtime_hosts_content(hostname, domain, op->pod_ips, op->n_pod_ips,
                                                aliases);
    free(hostname);
    free(domain);
    free(aliases);
  }
  p->hosts_path = nl_xasprintf("%s/pods/%s/etc-hosts", o->root_dir, op->uid);
  return 0;
}

static void cprep_done(uv_work_t *w, int status) {
  cprep_t *p = container_of(w, cprep_t, w);
  nl_runtime_op_t *op = p->op;
  if (status < 0 && !p->err) nl_err_set(&p->err, -status, "%s", uv_strerror(status));
  if (nl__op_resume(op)) {
    if (p->err) {
      nl__step_fail(cur_step(op), NL_REASON_CREATE_CONTAINER_CONFIG, "%s", p->err->msg);
      fail_event(op, p->err->msg);
      container_done(op, false);
    } else {
      if (p->scan) op->cur_restart = p->restart;
      op->cur_term_path = p->term_path;
      p->term_path = NULL;
      op->cur_hosts_path = p->hosts_path;
      p->hosts_path = NULL;
      op->cur_file_env = nl__envfiles_values(p->files, p->n_files, &op->n_cur_file_env);
      create_container(op);
    }
  }
  cprep_free(p);
}

static void prepare_container(nl_runtime_op_t *op);

/* generateContainerConfig's verifyRunAsNonRoot: a container that would run as
 * root against its runAsNonRoot fails with CreateContainerConfigError. */
static void verify_non_root(nl_runtime_op_t *op, const int64_t *image_uid, const char *image_user) {
  char *msg = nl_runtime_verify_non_root(op->pod, op->cur, image_uid, image_user);
  if (!msg) {
    prepare_container(op);
    return;
  }
  nl__step_fail(cur_step(op), NL_REASON_CREATE_CONTAINER_CONFIG, "%s", msg);
  fail_event(op, msg);
  if (!op->result.err) nl_err_set(&op->result.err, NL_EINVAL, "pod %s: %s", op->desc, msg);
  free(msg);
  container_done(op, false);
}

/* upstream getImageUser: the image's numeric user, else its user name, else
 * root (an image without a user runs as root). */
static void image_user_done(const nl_grpc_status_t *st, Runtime__V1__ImageStatusResponse *resp,
                            void *ctx) {
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    nl__step_fail(cur_step(op), NL_REASON_CREATE_CONTAINER_CONFIG, "%s", e);
    fail_event(op, e);
    if (!op->result.err)
      nl_err_set(&op->result.err, NL_ERUNTIME, "pod %s: image status of %s: %s", op->desc,
                 op->cur_image_ref, e);
    free(e);
    container_done(op, false);
    return;
  }
  const Runtime__V1__Image *img = resp ? resp->image : NULL;
  int64_t root = 0;
  if (img && img->uid) verify_non_root(op, &img->uid->value, NULL);
  else if (img && img->username && *img->username) verify_non_root(op, NULL, img->username);
  else verify_non_root(op, &root, NULL);
}

static void image_ready(const char *ref, const char *reason, const char *message, void *ctx) {
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  if (!ref) {
    nl__step_fail(cur_step(op), reason, "%s", message ? message : "");
    fail_event(op, reason); /* upstream: the error's text, which is its name */
    container_done(op, false);
    return;
  }
  op->cur_image_ref = nl_xstrdup(ref);
  if (nl_runtime_non_root_needs_image(op->pod, op->cur)) {
    Runtime__V1__ImageStatusRequest req = RUNTIME__V1__IMAGE_STATUS_REQUEST__INIT;
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    spec.image = op->cur_image_ref;
    req.image = &spec;
    op->pending++;
    nl_cri_image_status(op->rt->cri, &req, image_user_done, op);
    return;
  }
  verify_non_root(op, NULL, NULL);
}

static void prepare_container(nl_runtime_op_t *op) {
  const nl_runtime_opts_t *o = &op->rt->opts;
  const nl_rt_container_t *prev = nl_rt_pod_status_find(op->status, op->cur->name);
  cprep_t *p = nl_xcalloc(1, sizeof *p);
  p->op = op;
  char *pld = nl_runtime_pod_log_dir(o, op->pod);
  p->log_dir = nl_xasprintf("%s/%s", pld, op->cur->name);
  free(pld);
  p->term_dir = nl_xasprintf("%s/pods/%s/containers/%s", o->root_dir, op->uid, op->cur->name);
  p->scan = prev == NULL;
  op->cur_restart = prev ? prev->restart_count + 1 : 0;
  nl_err_t *err = NULL;
  if (plan_hosts(op, p, &err) < 0 ||
      nl__envfiles_plan(o, op->pod, op->cur, &p->files, &p->n_files, &err) < 0) {
    nl__step_fail(cur_step(op), NL_REASON_CREATE_CONTAINER_CONFIG, "%s", err->msg);
    fail_event(op, err->msg);
    nl_err_free(&err);
    cprep_free(p);
    container_done(op, false);
    return;
  }
  plan_subpaths(op, p);
  op->pending++;
  int r = uv_queue_work(op->rt->loop, &p->w, cprep_work, cprep_done);
  if (r < 0) { /* only with a bad loop: treat as a config error */
    op->pending--;
    cprep_free(p);
    nl__step_fail(cur_step(op), NL_REASON_CREATE_CONTAINER_CONFIG, "%s", uv_strerror(r));
    container_done(op, false);
  }
}

/* doBackOff: the latest exited instance's finish time starts the window. */
static bool in_backoff(nl_runtime_op_t *op, const nl_container_t *c, nl_sync_step_t *s) {
  const nl_rt_container_t *dead = NULL;
  for (size_t i = 0; op->status && i < op->status->n_containers && !dead; i++) {
    const nl_rt_container_t *x = &op->status->containers[i];
    if (strcmp(x->name, c->name) == 0 && x->state == NL_RT_CONTAINER_EXITED) dead = x;
  }
  if (!dead) return false;
  nl_runtime_t *rt = op->rt;
  char *key = nl_runtime_backoff_key(op->pod, c);
  uint64_t now = rt->now_ms(rt->now_ctx);
  uint64_t ts = dead->finished_at > 0 ? (uint64_t)(dead->finished_at / 1000000) : now;
  bool in = nl_backoff_table_in_backoff_since(&rt->backoff, key, ts, now);
  if (in) {
    uint64_t backoff_ms = nl_backoff_table_get(&rt->backoff, key, now);
    uint64_t until = ts + backoff_ms;
    if (!op->result.backoff_until_ms || until < op->result.backoff_until_ms)
      op->result.backoff_until_ms = until;
    char d[32];
    nl_duration_format((int64_t)backoff_ms * 1000000, d, sizeof d);
    nl__step_fail(s, NL_REASON_CRASH_LOOP_BACK_OFF,
                  "back-off %s restarting failed container=%s pod=%s", d, c->name, op->desc);
    nl__op_event(op, op->pod, c->name, NL_EVENT_WARNING, "BackOff",
                 "Back-off restarting failed container %s in pod %s", c->name, op->desc);
    nl_vlog(3, "pod %s: %s", op->desc, s->message);
  } else {
    nl_backoff_table_next(&rt->backoff, key, now);
  }
  free(key);
  return in;
}

/* upstream start(): after the back-off, the container's image volumes
 * ("we fail late here to populate ErrImagePull and ImagePullBackOff"), then
 * its image. */
static void ensure_image(nl_runtime_op_t *op) {
  if (nl__image_volumes_for(op, cur_step(op), &op->cur_image_volumes,
                            &op->n_cur_image_volumes) < 0) {
    container_done(op, false);
    return;
  }
  op->pending++;
  char fp[320];
  nl_event_ref_t ref = nl_event_container_ref(op->pod, op->cur->name, fp, sizeof fp);
  nl_images_ensure(&op->rt->images, &op->img, &ref, op->desc, op->cur->image,
                   op->cur->image_pull_policy, nl__op_pull_creds, image_ready, op);
}

static void next_container(nl_runtime_op_t *op) {
  const nl_pod_spec_t *spec = &op->pod->spec;
  if (op->in_ephemeral && op->cursor >= op->actions.n_ephemeral_to_start) {
    op->in_ephemeral = false;
    op->cursor = 0;
  }
  if (op->in_ephemeral) {
    op->cur = &spec->ephemeral_containers[op->actions.ephemeral_to_start[op->cursor]];
    nl__result_add(&op->result, NL_SYNC_START_CONTAINER, op->cur->name, false);
    op->cur_step_idx = op->result.n_steps - 1;
    ensure_image(op);
    return;
  }
  if (op->in_init && op->cursor >= op->actions.n_init_to_start) {
    op->in_init = false;
    op->cursor = 0;
    if (op->actions.resize && !op->resize_run) { /* upstream's step 8, before step 9 */
      nl__resize_start(op, next_container);
      return;
    }
  }
  if (!op->in_init && op->cursor >= op->actions.n_to_start) {
    nl__op_finish(op);
    return;
  }
  op->cur = op->in_init ? &spec->init_containers[op->actions.init_to_start[op->cursor]]
                        : &spec->containers[op->actions.to_start[op->cursor]];
  nl_sync_step_t *s = nl__result_add(&op->result, NL_SYNC_START_CONTAINER, op->cur->name,
                                     op->in_init);
  op->cur_step_idx = op->result.n_steps - 1;
  if (in_backoff(op, op->cur, s)) {
    container_done(op, false);
    return;
  }
  ensure_image(op);
}
