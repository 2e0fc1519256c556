/* KillPod (upstream killPodWithSyncResult: containers in parallel, then every
 * sandbox) and removal of a terminated pod's containers, sandboxes and dirs. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cri/runtime.h"
#include "managers/hooks.h"
#include "managers/runtime_internal.h"
#include "managers/volumes.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

int64_t nl__grace_for(const nl_pod_t *pod, const nl_container_t *spec, const char *reason) {
  int64_t g = NL_RUNTIME_MIN_GRACE_SECONDS;
  if (pod && pod->spec.termination_grace_period_seconds.set) {
    g = pod->spec.termination_grace_period_seconds.v;
    const nl_probe_t *p = NULL;
    if (spec && reason && strcmp(reason, "LivenessProbe") == 0) p = spec->liveness_probe;
    if (spec && reason && strcmp(reason, "StartupProbe") == 0) p = spec->startup_probe;
    if (p && p->termination_grace_period_seconds.set) g = p->termination_grace_period_seconds.v;
  }
  /* always give containers a minimal shutdown window */
  return g < NL_RUNTIME_MIN_GRACE_SECONDS ? NL_RUNTIME_MIN_GRACE_SECONDS : g;
}

/* What is left of a grace period after a preStop hook, as StopContainer gets it. */
static int64_t min_grace(int64_t g) {
  return g < NL_RUNTIME_MIN_GRACE_SECONDS ? NL_RUNTIME_MIN_GRACE_SECONDS : g;
}

/* One container or sandbox being stopped in a parallel group. */
typedef struct item {
  nl_runtime_op_t *op;
  size_t step; /* index into op->result.steps */
  char *id;
  nl_pod_t *restored; /* an orphan's pod, restored for its preStop hook */
  int64_t grace;      /* a sidecar waiting for its turn: the grace left after its hook */
  uint64_t since_ms;  /* ... and when it began to wait */
} item_t;

/* upstream terminationOrdering: the preStop hooks all run at once, but a
 * sidecar (restartable init container) is stopped only once every running
 * main container and every running sidecar after it in the spec have
 * terminated, so that it serves them (e.g. their preStop hooks) to the end.
 * One entry per running container of the pod being killed. */
typedef struct nl__kill_order {
  size_t n;
  struct order_entry {
    const char *name; /* borrowed from op->status */
    int rank;         /* -1: a main container; its index among the init containers for a
                       * sidecar; -2 for anything else (a regular init or an ephemeral
                       * container: nobody waits for those) */
    bool done;        /* terminated (or given up on) */
    item_t *waiting;  /* a sidecar waiting for its turn */
  } e[];
} kill_order_t;

static int sidecar_rank(const nl_pod_t *pod, const char *name) {
  for (size_t i = 0; i < pod->spec.n_containers; i++)
    if (strcmp(pod->spec.containers[i].name, name) == 0) return -1;
  for (size_t i = 0; i < pod->spec.n_init_containers; i++) {
    const nl_container_t *c = &pod->spec.init_containers[i];
    if (strcmp(c->name, name) == 0)
      return c->restart_policy && strcmp(c->restart_policy, "Always") == 0 ? (int)i : -2;
  }
  return -2;
}

static void order_build(nl_runtime_op_t *op) {
  free(op->kill_order);
  op->kill_order = NULL;
  bool sidecars = false;
  for (size_t i = 0; op->pod && i < op->pod->spec.n_init_containers; i++) {
    const char *p = op->pod->spec.init_containers[i].restart_policy;
    if (p && strcmp(p, "Always") == 0) sidecars = true;
  }
  if (!sidecars || !op->status) return;
  kill_order_t *o = nl_xcalloc(1, sizeof *o + op->status->n_containers * sizeof o->e[0]);
  for (size_t i = 0; i < op->status->n_containers; i++) {
    const nl_rt_container_t *c = &op->status->containers[i];
    if (c->state != NL_RT_CONTAINER_RUNNING) continue;
    o->e[o->n++] = (struct order_entry){c->name, sidecar_rank(op->pod, c->name), false, NULL};
  }
  op->kill_order = o;
}

static struct order_entry *order_find(kill_order_t *o, const char *name) {
  for (size_t i = 0; o && i < o->n; i++)
    if (!o->e[i].done && strcmp(o->e[i].name, name) == 0) return &o->e[i];
  return NULL;
}

/* A sidecar of rank r may stop once no main container nor later sidecar runs. */
static bool order_turn(const kill_order_t *o, int r) {
  for (size_t i = 0; i < o->n; i++)
    if (!o->e[i].done && (o->e[i].rank == -1 || o->e[i].rank > r)) return false;
  return true;
}

static item_t *item_new(nl_runtime_op_t *op, nl_sync_action_t a, const char *target,
                        const char *id) {
  item_t *it = nl_xcalloc(1, sizeof *it);
  it->op = op;
  nl__result_add(&op->result, a, target, false);
  it->step = op->result.n_steps - 1;
  it->id = nl_xstrdup(id);
  op->kill_todo++;
  op->pending++;
  return it;
}

static void stop_sandboxes(nl_runtime_op_t *op);

/* Returns false when the op is gone or the group is not complete. */
static bool item_done(item_t *it, const nl_grpc_status_t *st, const char *reason) {
  nl_runtime_op_t *op = it->op;
  bool alive = nl__op_resume(op);
  if (alive && st->code != NL_GRPC_OK && st->code != NL_GRPC_NOT_FOUND) {
    char *e = nl_grpc_status_format(st);
    nl_sync_step_t *s = &op->result.steps[it->step];
    nl__step_fail(s, reason, "%s", e);
    if (!op->result.err)
      nl_err_set(&op->result.err, NL_ERUNTIME, "pod %s: %s %s: %s", op->desc,
                 nl_sync_action_name(s->action), s->target, e);
    free(e);
  }
  free(it->id);
  nl_pod_free(it->restored);
  free(it);
  return alive && --op->kill_todo == 0;
}

static void stop_container(item_t *it, int64_t grace);

/* The item of container name has ended: it no longer holds back the sidecars;
 * those whose turn has come are stopped with the grace they have left (at
 * least the minimum), or, when the kill is abandoned, let go. Returns
 * item_done's answer for it. */
static bool kill_item_done(item_t *it, const nl_grpc_status_t *st, const char *reason) {
  nl_runtime_op_t *op = it->op;
  kill_order_t *o = op->kill_order;
  bool going = !op->cancelled && !op->finished;
  struct order_entry *e = order_find(o, op->result.steps[it->step].target);
  size_t n = 0;
  item_t **ready = NULL;
  if (e) {
    e->done = true;
    ready = nl_xcalloc(o->n, sizeof *ready);
    for (size_t i = 0; i < o->n; i++) {
      if (!o->e[i].waiting || !order_turn(o, o->e[i].rank)) continue;
      ready[n++] = o->e[i].waiting;
      o->e[i].waiting = NULL;
    }
  }
  /* the ready items still hold the op: it outlives this */
  bool last = item_done(it, st, reason);
  uint64_t now = n ? uv_now(op->rt->loop) : 0;
  for (size_t i = 0; i < n; i++) {
    item_t *w = ready[i];
    if (going) {
      int64_t left = w->grace - (int64_t)((now - w->since_ms) / 1000);
      stop_container(w, left < NL_RUNTIME_MIN_GRACE_SECONDS ? NL_RUNTIME_MIN_GRACE_SECONDS : left);
    } else {
      /* abandoned: never the last that goes on. Given up on as if it had
       * ended, so that a sidecar waiting for this one is let go too (the
       * op is freed only once every item has let go of it). */
      nl_grpc_status_t ok = {NL_GRPC_OK, ""};
      kill_item_done(w, &ok, NULL);
    }
  }
  free(ready);
  return last;
}

static void kill_finish(nl_runtime_op_t *op) {
  void (*after)(nl_runtime_op_t *, bool) = op->after_kill;
  after(op, op->result.err == NULL);
}

static void sandbox_stopped(const nl_grpc_status_t *st, Runtime__V1__StopPodSandboxResponse *r,
                            void *ctx) {
  (void)r;
  item_t *it = ctx;
  nl_runtime_op_t *op = it->op;
  if (item_done(it, st, NL_REASON_KILL_POD_SANDBOX)) kill_finish(op);
}

static void stop_sandboxes(nl_runtime_op_t *op) {
  if (op->result.err) { /* upstream: don't stop sandboxes when a container survived */
    kill_finish(op);
    return;
  }
  op->kill_todo = 1;
  for (size_t i = 0; op->status && i < op->status->n_sandboxes; i++) {
    const nl_rt_sandbox_t *sb = &op->status->sandboxes[i];
    item_t *it = item_new(op, NL_SYNC_KILL_POD_SANDBOX, op->desc, sb->id);
    Runtime__V1__StopPodSandboxRequest req = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;
    req.pod_sandbox_id = it->id;
    nl_cri_stop_pod_sandbox(op->rt->cri, &req, sandbox_stopped, it);
  }
  if (--op->kill_todo == 0) kill_finish(op);
}

static void container_stopped(const nl_grpc_status_t *st, Runtime__V1__StopContainerResponse *r,
                              void *ctx) {
  (void)r;
  item_t *it = ctx;
  nl_runtime_op_t *op = it->op;
  if (kill_item_done(it, st, NL_REASON_KILL_CONTAINER)) stop_sandboxes(op);
}

static void stop_container(item_t *it, int64_t grace) {
  nl_runtime_op_t *op = it->op;
  nl_info("pod %s: stopping container %s (%s), grace period %llds", op->desc,
          op->result.steps[it->step].target, it->id, (long long)grace);
  nl__stop_container(op->rt, it->id, grace, container_stopped, it);
}

static const nl_container_t *spec_of(const nl_pod_t *pod, const char *name) {
  if (!pod) return NULL;
  for (size_t i = 0; i < pod->spec.n_containers; i++)
    if (strcmp(pod->spec.containers[i].name, name) == 0) return &pod->spec.containers[i];
  for (size_t i = 0; i < pod->spec.n_init_containers; i++)
    if (strcmp(pod->spec.init_containers[i].name, name) == 0) return &pod->spec.init_containers[i];
  return NULL;
}

static void prestop_done(nl_runtime_op_t *op, void *ctx, int64_t grace) {
  item_t *it = ctx;
  op->pending--; /* the hook's hold; the item keeps its own */
  if (op->cancelled || op->finished) {
    nl_grpc_status_t ok = {NL_GRPC_OK, ""};
    if (kill_item_done(it, &ok, NULL)) stop_sandboxes(op);
    return;
  }
  struct order_entry *e = order_find(op->kill_order, op->result.steps[it->step].target);
  /* upstream waits for its turn only with grace left: a sidecar whose hook
   * took the whole grace period is stopped at once, with the others */
  if (e && e->rank >= 0 && grace > 0 && !order_turn(op->kill_order, e->rank)) {
    nl_vlog(3, "pod %s: sidecar %s waits for the containers it serves to stop", op->desc,
            e->name);
    it->grace = grace;
    it->since_ms = uv_now(op->rt->loop);
    e->waiting = it;
    return;
  }
  stop_container(it, min_grace(grace));
}

/* For a pod no source knows: the grace period and the preStop hook from the
 * container's annotations (upstream restoreSpecsFromContainerLabels). */
static void orphan_status(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *resp,
                          void *ctx) {
  item_t *it = ctx;
  nl_runtime_op_t *op = it->op;
  int64_t grace = NL_RUNTIME_MIN_GRACE_SECONDS;
  if (st->code == NL_GRPC_OK && resp->status) {
    const char *g = NL_RT_ANNOTATION(resp->status, NL_ANN_POD_TERMINATION_GRACE);
    if (g) grace = strtoll(g, NULL, 10);
    if (grace < NL_RUNTIME_MIN_GRACE_SECONDS) grace = NL_RUNTIME_MIN_GRACE_SECONDS;
  }
  if (op->cancelled || op->finished) { /* let the group count down */
    nl_grpc_status_t ok = {NL_GRPC_OK, ""};
    if (item_done(it, &ok, NULL)) stop_sandboxes(op);
    return;
  }
  it->restored = st->code == NL_GRPC_OK && resp->status ? nl__restore_pod(resp->status) : NULL;
  if (it->restored) {
    const char *name = it->restored->spec.containers[0].name;
    nl__op_event(op, it->restored, name, NL_EVENT_NORMAL, "Killing", "Stopping container %s",
                 name);
    nl__prestop_run(op, it->restored, &it->restored->spec.containers[0], it->id,
                    op->status && op->status->n_ips ? op->status->ips[0] : NULL, grace,
                    prestop_done, it);
    return;
  }
  stop_container(it, grace);
}

void nl__kill_pod_start(nl_runtime_op_t *op, void (*after)(nl_runtime_op_t *, bool)) {
  op->after_kill = after;
  order_build(op);
  op->kill_todo = 1; /* held while launching */
  for (size_t i = 0; op->status && i < op->status->n_containers; i++) {
    const nl_rt_container_t *c = &op->status->containers[i];
    if (c->state != NL_RT_CONTAINER_RUNNING) continue;
    item_t *it = item_new(op, NL_SYNC_KILL_CONTAINER, c->name, c->id);
    if (op->pod) { /* preStop first (upstream killContainer) */
      const nl_container_t *spec = spec_of(op->pod, c->name);
      nl__op_event(op, op->pod, c->name, NL_EVENT_NORMAL, "Killing", "Stopping container %s",
                   c->name);
      int64_t grace =
          op->grace_override >= 0 ? op->grace_override : nl__grace_for(op->pod, spec, "");
      nl__prestop_run(op, op->pod, spec, c->id, op->status->n_ips ? op->status->ips[0] : NULL,
                      grace, prestop_done, it);
    } else if (op->grace_override >= 0) {
      stop_container(it, op->grace_override);
    } else {
      Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
      req.container_id = it->id;
      nl_cri_container_status(op->rt->cri, &req, orphan_status, it);
    }
  }
  if (--op->kill_todo == 0) stop_sandboxes(op);
}

/* ---- removal ---- */

static void remove_sandboxes(nl_runtime_op_t *op);
static void remove_dirs(nl_runtime_op_t *op);

static void sandbox_removed(const nl_grpc_status_t *st, Runtime__V1__RemovePodSandboxResponse *r,
                            void *ctx) {
  (void)r;
  item_t *it = ctx;
  nl_runtime_op_t *op = it->op;
  if (item_done(it, st, "RemovePodSandboxError")) remove_dirs(op);
}

static void container_removed(const nl_grpc_status_t *st, Runtime__V1__RemoveContainerResponse *r,
                              void *ctx) {
  (void)r;
  item_t *it = ctx;
  nl_runtime_op_t *op = it->op;
  if (item_done(it, st, NL_REASON_REMOVE_CONTAINER)) remove_sandboxes(op);
}

void nl__remove_start(nl_runtime_op_t *op) {
  op->kill_todo = 1;
  for (size_t i = 0; op->status && i < op->status->n_containers; i++) {
    const nl_rt_container_t *c = &op->status->containers[i];
    item_t *it = item_new(op, NL_SYNC_REMOVE_CONTAINER, c->name, c->id);
    Runtime__V1__RemoveContainerRequest req = RUNTIME__V1__REMOVE_CONTAINER_REQUEST__INIT;
    req.container_id = it->id;
    nl_cri_remove_container(op->rt->cri, &req, container_removed, it);
  }
  if (--op->kill_todo == 0) remove_sandboxes(op);
}

static void remove_sandboxes(nl_runtime_op_t *op) {
  op->kill_todo = 1;
  for (size_t i = 0; op->status && i < op->status->n_sandboxes; i++) {
    item_t *it = item_new(op, NL_SYNC_REMOVE_POD_SANDBOX, op->desc, op->status->sandboxes[i].id);
    Runtime__V1__RemovePodSandboxRequest req = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
    req.pod_sandbox_id = it->id;
    nl_cri_remove_pod_sandbox(op->rt->cri, &req, sandbox_removed, it);
  }
  if (--op->kill_todo == 0) remove_dirs(op);
}

typedef struct rmdirs {
  uv_work_t w;
  nl_runtime_op_t *op;
  char *root, *uid, *logdir;
  const nl_cgroups_t *cgroups; /* NULL: no pod cgroups */
  nl_err_t *err;
} rmdirs_t;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

static void rmdirs_work(uv_work_t *w) {
  rmdirs_t *r = container_of(w, rmdirs_t, w);
  /* The pod cgroup first (the runtime has removed the containers' own): the
   * pod directory stays until it is gone, so a crash in between leaves the
   * housekeeping something to find and finish. */
  if (r->cgroups && nl_cgroups_pod_destroy(r->cgroups, r->uid, &r->err) < 0) return;
  if (nl__volumes_teardown_sync(r->root, r->uid, &r->err) < 0) return;
  if (r->logdir && nftw(r->logdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 &&
      errno != ENOENT)
    nl_err_set(&r->err, errno, "remove %s: %s", r->logdir, strerror(errno));
}

static void rmdirs_done(uv_work_t *w, int status) {
  rmdirs_t *r = container_of(w, rmdirs_t, w);
  nl_runtime_op_t *op = r->op;
  if (status < 0 && !r->err) nl_err_set(&r->err, -status, "%s", uv_strerror(status));
  if (nl__op_resume(op)) {
    if (r->err && !op->result.err) nl_err_set(&op->result.err, r->err->code, "pod %s: %s",
                                              op->desc, r->err->msg);
    nl__op_finish(op);
  }
  nl_err_free(&r->err);
  free(r->root);
  free(r->uid);
  free(r->logdir);
  free(r);
}

static void remove_dirs(nl_runtime_op_t *op) {
  if (!op->remove_dirs || !op->uid || !*op->uid) {
    nl__op_finish(op);
    return;
  }
  rmdirs_t *r = nl_xcalloc(1, sizeof *r);
  r->op = op;
  r->root = nl_xstrdup(op->rt->opts.root_dir);
  r->uid = nl_xstrdup(op->uid);
  r->cgroups = op->rt->opts.cgroups;
  const nl_rt_pod_status_t *s = op->status;
  if (s && s->name && *s->name && s->namespace_ && *s->namespace_)
    r->logdir = nl_xasprintf("%s/%s_%s_%s", op->rt->opts.pod_logs_dir, s->namespace_, s->name,
                             op->uid);
  op->pending++;
  int e = uv_queue_work(op->rt->loop, &r->w, rmdirs_work, rmdirs_done);
  if (e < 0) {
    op->pending--;
    free(r->root);
    free(r->uid);
    free(r->logdir);
    free(r);
    nl__op_fail(op, -e, "pod %s: %s", op->desc, uv_strerror(e));
  }
}
