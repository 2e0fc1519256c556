/* In-place resize in SyncPod (upstream kuberuntime_manager.go:
 * computePodResizeAction, doPodResizeAction, updatePodContainerResources;
 * kuberuntime_container.go updatePodSandboxResources). The plan is pure; the
 * actuation is a small state machine of the sync operation, run between the
 * init containers and the regular ones (upstream's step 8). */
#include <stdint.h>
#include <string.h>

#include "managers/runtime_internal.h"
#include "reactor/buf.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* ---- the plan ---- */

static bool restart_for(const nl_container_t *c, const char *resource) {
  for (size_t i = 0; i < c->n_resize_policy; i++) {
    const nl_resize_policy_t *p = &c->resize_policy[i];
    if (p->resource_name && strcmp(p->resource_name, resource) == 0)
      return p->restart_policy && strcmp(p->restart_policy, "RestartContainer") == 0;
  }
  return false; /* the implicit default is NotRequired */
}

static int sign(int64_t d) { return d > 0 ? 1 : d < 0 ? -1 : 0; }

/* By the limit when it changes, else by the request (markContainerForUpdate). */
static int dir(int64_t want_lim, int64_t cur_lim, int64_t want_req, int64_t cur_req) {
  return want_lim != cur_lim ? sign(want_lim - cur_lim) : sign(want_req - cur_req);
}

static bool being_killed(const nl_pod_actions_t *a, const char *id) {
  for (size_t i = 0; i < a->n_to_kill; i++)
    if (strcmp(a->to_kill[i].id, id) == 0) return true;
  return false;
}

static void one(const nl_pod_t *pod, const nl_container_t *c, size_t idx, bool init,
                const nl_rt_pod_status_t *s, const nl_resize_t *rs, nl_pod_actions_t *a) {
  const nl_rt_container_t *st = nl_rt_pod_status_find(s, c->name);
  if (!st || st->state != NL_RT_CONTAINER_RUNNING || being_killed(a, st->id)) return;
  nl_rsz_res_t pl = nl_rsz_reqs_res(pod->spec.resources);
  nl_rsz_res_t want = nl_rsz_effective(nl_rsz_res_of(c), &pl), cur;
  if (!nl_resize_actuated(rs, pod->metadata.uid, c->name, &cur) || nl_rsz_res_equal(&want, &cur))
    return;
  bool mem = want.mem_lim != cur.mem_lim || want.mem_req != cur.mem_req;
  bool cpu = want.cpu_lim != cur.cpu_lim || want.cpu_req != cur.cpu_req;
  a->resize = true;
  if ((mem && restart_for(c, "memory")) || (cpu && restart_for(c, "cpu"))) {
    nl__to_kill(a, st, c, init, "", nl_xasprintf("Container %s resize requires restart", c->name));
    if (init) nl__push_idx(&a->init_to_start, &a->n_init_to_start, idx);
    else nl__push_idx(&a->to_start, &a->n_to_start, idx);
    return;
  }
  a->to_update = nl_xrealloc(a->to_update, (a->n_to_update + 1) * sizeof *a->to_update);
  a->to_update[a->n_to_update++] = (nl_resize_update_t){
      .id = nl_xstrdup(st->id),
      .spec = c,
      .want = want,
      .cur = cur,
      .cpu_dir = dir(want.cpu_lim, cur.cpu_lim, want.cpu_req, cur.cpu_req),
      .mem_dir = dir(want.mem_lim, cur.mem_lim, want.mem_req, cur.mem_req)};
}

void nl_runtime_resize_actions(const nl_pod_t *pod, const nl_rt_pod_status_t *s,
                               const nl_resize_t *rs, nl_pod_actions_t *a) {
  /* computePodActions computes resizes only for the containers it keeps
   * running: the init containers computeInitContainerActions keeps (the one
   * that runs while the pod initializes, and the sidecars), and the regular
   * ones once the pod has initialized */
  if (!rs || !s || a->kill_pod || a->create_sandbox) return;
  for (size_t k = 0; k < a->n_init_to_resize; k++) {
    size_t i = a->init_to_resize[k];
    one(pod, &pod->spec.init_containers[i], i, true, s, rs, a);
  }
  if (!a->initialized) return;
  for (size_t i = 0; i < pod->spec.n_containers; i++)
    one(pod, &pod->spec.containers[i], i, false, s, rs, a);
  /* computePodLevelResourcesResizeAction: the allocation against what the pod
   * cgroup was last given (nothing on record: taken as applied) */
  nl_rsz_res_t want = nl_rsz_reqs_res(pod->spec.resources), cur;
  if (pod->spec.resources && nl_resize_pod_actuated(rs, pod->metadata.uid, &cur) &&
      !nl_rsz_res_equal(&want, &cur))
    a->resize = a->resize_pod_level = true;
}

static void push(nl_resize_step_t **v, size_t *n, nl_resize_step_t st) {
  *v = nl_xrealloc(*v, (*n + 1) * sizeof **v);
  (*v)[(*n)++] = st;
}

static void push_containers(const nl_pod_actions_t *a, bool memory, nl_resize_step_t **v,
                            size_t *n) {
  for (int d = -1; d <= 1; d += 2) /* decreases first */
    for (size_t i = 0; i < a->n_to_update; i++)
      if ((memory ? a->to_update[i].mem_dir : a->to_update[i].cpu_dir) == d)
        push(v, n, (nl_resize_step_t){.update = i, .memory = memory});
}

/* No limit (0 for memory, -1 for a quota) is above every limit. */
static int64_t lim(int64_t v) { return v <= 0 ? INT64_MAX : v; }

nl_resize_step_t *nl_runtime_resize_steps(const nl_pod_actions_t *a, const nl_cgroup_res_t *cur,
                                          const nl_cgroup_res_t *want, size_t *n) {
  nl_resize_step_t *v = NULL;
  *n = 0;
  bool mem = a->resize, cpu = a->resize;
  for (size_t i = 0; i < a->n_to_update; i++) {
    mem |= a->to_update[i].mem_dir != 0;
    cpu |= a->to_update[i].cpu_dir != 0;
  }
  bool pod = cur && want;
  if (mem) {
    /* an unset pod limit stays as it is (upstream: limits are not removed) */
    int64_t c = pod ? cur->memory : 0, w = pod && want->memory ? want->memory : c;
    if (pod && lim(w) > lim(c)) push(&v, n, (nl_resize_step_t){.pod = true, .res = {.memory = w}});
    push_containers(a, true, &v, n);
    if (pod && lim(w) < lim(c)) push(&v, n, (nl_resize_step_t){.pod = true, .res = {.memory = w}});
  }
  if (cpu) {
    int64_t cq = pod ? cur->cpu_quota : 0, wq = pod && want->cpu_quota ? want->cpu_quota : cq;
    int64_t cs = pod ? cur->cpu_shares : 0, ws = pod && want->cpu_shares ? want->cpu_shares : cs;
    int64_t period = pod && want->cpu_period ? want->cpu_period : NL_CGROUPS_QUOTA_PERIOD;
    nl_resize_step_t quota = {.pod = true, .res = {.cpu_quota = wq, .cpu_period = period}};
    nl_resize_step_t shares = {.pod = true, .res = {.cpu_shares = ws}};
    /* limits grow before requests and shrink after them */
    if (pod && lim(wq) > lim(cq)) push(&v, n, quota);
    if (pod && ws > cs) push(&v, n, shares);
    push_containers(a, false, &v, n);
    if (pod && ws < cs) push(&v, n, shares);
    if (pod && lim(wq) < lim(cq)) push(&v, n, quota);
  }
  return v;
}

/* ---- the actuation ---- */

struct nl__resize_run {
  nl_runtime_op_t *op;
  void (*next)(nl_runtime_op_t *op);
  size_t step_idx;           /* the ResizePodInPlace step in op->result */
  uv_work_t work;
  bool writing;              /* the job writes (else it reads) the pod cgroup */
  nl_cgroup_res_t cur, want; /* the pod cgroup as it is, and as allocated */
  nl_cgroup_res_t merged;    /* cur with the step in flight applied */
  bool have_pod;
  nl_err_t *err;             /* the job's */
  nl_resize_step_t *steps;
  size_t n_steps, i;
  nl_rsz_res_t *cur_res;     /* per to_update: what the container runs with */
  int64_t pod_usage;         /* the pod cgroup's memory usage, -1 unknown */
  size_t check;              /* the container whose memory usage is being read */
  nl_buf_t why;              /* the memory limits that cannot go down, "; "-joined */
  int n_why;
};

void nl__resize_run_free(nl__resize_run_t *run) {
  if (!run) return;
  nl_buf_free(&run->why);
  nl_err_free(&run->err);
  free(run->steps);
  free(run->cur_res);
  free(run);
}

static void run_next(nl__resize_run_t *run);
static void check_memory(nl__resize_run_t *run);

/* upstream: the resize result fails; the containers to start are started all
 * the same, and the next sync retries what is left. */
static void fail(nl__resize_run_t *run, char *msg /* taken */) {
  nl_runtime_op_t *op = run->op;
  nl_sync_step_t *s = &op->result.steps[run->step_idx];
  nl__step_fail(s, NL_REASON_RESIZE_POD, "%s", msg);
  free(msg);
  nl_error("pod %s: resize: %s", op->desc, s->message);
  if (!op->result.err)
    nl_err_set(&op->result.err, NL_ERUNTIME,
               "failed to \"ResizePodInPlace\" for \"%s\" with %s: %s", op->desc,
               NL_REASON_RESIZE_POD, s->message);
  run->next(op);
}

static void job(uv_work_t *w) {
  nl__resize_run_t *run = container_of(w, nl__resize_run_t, work);
  const nl_cgroups_t *cg = run->op->rt->opts.cgroups; /* op->pod is immutable meanwhile */
  if (run->writing) {
    nl_cgroups_pod_write(cg, run->op->pod, &run->steps[run->i - 1].res, &run->err);
  } else {
    nl_cgroups_pod_read(cg, run->op->pod, &run->cur, &run->err);
    run->pod_usage = nl_cgroups_pod_memory_usage(cg, run->op->pod);
  }
}

static void job_done(uv_work_t *w, int status) {
  nl__resize_run_t *run = container_of(w, nl__resize_run_t, work);
  if (!nl__op_resume(run->op)) return;
  if (status < 0 && !run->err) nl_err_set(&run->err, -status, "%s", uv_strerror(status));
  if (run->err) {
    fail(run, nl_xasprintf(run->writing ? "failed to set the pod cgroup: %s"
                                        : "unable to get the pod cgroup config: %s",
                           run->err->msg));
    return;
  }
  if (run->writing) {
    run->cur = run->merged;
  } else {
    const nl_runtime_opts_t *o = &run->op->rt->opts;
    run->want = nl_cgroups_pod_res(run->op->pod, o->cgroups->cfs_quota, o->cgroups->pod_pids_limit);
    run->have_pod = true;
    run->steps = nl_runtime_resize_steps(&run->op->actions, &run->cur, &run->want, &run->n_steps);
    check_memory(run);
    return;
  }
  run_next(run);
}

static void queue_job(nl__resize_run_t *run, bool writing) {
  run->writing = writing;
  run->op->pending++;
  int r = uv_queue_work(run->op->rt->loop, &run->work, job, job_done);
  if (r < 0) {
    run->op->pending--;
    fail(run, nl_xasprintf("queue work: %s", uv_strerror(r)));
  }
}

static Runtime__V1__LinuxContainerResources *linux_of(const nl_cgroup_res_t *r) {
  Runtime__V1__LinuxContainerResources *l =
      NL__NEW(Runtime__V1__LinuxContainerResources, RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT);
  l->cpu_shares = r->cpu_shares;
  l->cpu_quota = r->cpu_quota;
  l->cpu_period = r->cpu_period;
  l->memory_limit_in_bytes = r->memory;
  return l;
}

static void sandbox_updated(const nl_grpc_status_t *st,
                            Runtime__V1__UpdatePodSandboxResourcesResponse *resp, void *ctx) {
  (void)resp;
  nl__resize_run_t *run = ctx;
  if (!nl__op_resume(run->op)) return;
  /* best effort: a runtime without it (containerd before 2.1) goes on; so did
   * containerd 2.2's "not implemented yet" with code Unknown */
  bool unimplemented = st->code == NL_GRPC_UNIMPLEMENTED ||
                       (st->code == NL_GRPC_UNKNOWN && strstr(st->message, "not implemented"));
  if (st->code != NL_GRPC_OK && !unimplemented) {
    char *e = nl_grpc_status_format(st);
    fail(run, nl_xasprintf("failed to notify runtime for UpdatePodSandboxResources; resize "
                           "rejected: %s", e));
    free(e);
    return;
  }
  if (unimplemented)
    nl_vlog(3, "pod %s: UpdatePodSandboxResources: unimplemented; going on", run->op->desc);
  queue_job(run, true);
}

static void merge(nl_cgroup_res_t *into, const nl_cgroup_res_t *r) {
  if (r->cpu_shares) into->cpu_shares = r->cpu_shares;
  if (r->cpu_quota || r->cpu_period) {
    into->cpu_quota = r->cpu_quota;
    into->cpu_period = r->cpu_period;
  }
  if (r->memory) into->memory = r->memory;
}

static void pod_step(nl__resize_run_t *run, const nl_resize_step_t *st) {
  nl_runtime_op_t *op = run->op;
  run->merged = run->cur;
  merge(&run->merged, &st->res);
  Runtime__V1__UpdatePodSandboxResourcesRequest req =
      RUNTIME__V1__UPDATE_POD_SANDBOX_RESOURCES_REQUEST__INIT;
  req.pod_sandbox_id = op->sandbox_id ? op->sandbox_id : (char *)"";
  req.resources = linux_of(&run->merged);
  op->pending++;
  nl_cri_update_pod_sandbox_resources(op->rt->cri, &req, sandbox_updated, run);
  protobuf_c_message_free_unpacked(&req.resources->base, NULL);
}

/* cur with the amounts of one resource (memory or cpu) as want has them. */
static nl_rsz_res_t with_resource(nl_rsz_res_t cur, const nl_rsz_res_t *want, bool memory) {
  unsigned bits = memory ? NL_RSZ_MEM_REQ | NL_RSZ_MEM_LIM : NL_RSZ_CPU_REQ | NL_RSZ_CPU_LIM;
  if (memory) {
    cur.mem_req = want->mem_req;
    cur.mem_lim = want->mem_lim;
  } else {
    cur.cpu_req = want->cpu_req;
    cur.cpu_lim = want->cpu_lim;
  }
  cur.set = (cur.set & ~bits) | (want->set & bits);
  return cur;
}

static void container_updated(const nl_grpc_status_t *st,
                              Runtime__V1__UpdateContainerResourcesResponse *resp, void *ctx) {
  (void)resp;
  nl__resize_run_t *run = ctx;
  nl_runtime_op_t *op = run->op;
  if (!nl__op_resume(op)) return;
  const nl_resize_step_t *step = &run->steps[run->i - 1];
  nl_resize_update_t *u = &op->actions.to_update[step->update];
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    fail(run, nl_xasprintf("container %s: UpdateContainerResources: %s", u->spec->name, e));
    free(e);
    return;
  }
  /* accepted: what the container runs with now (the runtime's status may lag) */
  nl_rsz_res_t *r = &run->cur_res[step->update];
  *r = with_resource(*r, &u->want, step->memory);
  nl_resize_set_actuated(op->rt->opts.resize, op->uid, u->spec->name, r);
  nl_info("pod %s: container %s: %s resized in place", op->desc, u->spec->name,
          step->memory ? "memory" : "cpu");
  run_next(run);
}

static void container_step(nl__resize_run_t *run, const nl_resize_step_t *st) {
  nl_runtime_op_t *op = run->op;
  nl_resize_update_t *u = &op->actions.to_update[st->update];
  /* the resource of this step as allocated, the other as the container runs */
  nl_rsz_res_t r = with_resource(run->cur_res[st->update], &u->want, st->memory);
  nl_container_t c = *u->spec;
  nl_rsz_reqs_build(&u->spec->resources, &r, &c.resources);
  Runtime__V1__UpdateContainerResourcesRequest req =
      RUNTIME__V1__UPDATE_CONTAINER_RESOURCES_REQUEST__INIT;
  req.container_id = u->id;
  req.linux = nl__container_resources(&op->rt->opts, op->pod, &c);
  nl_rsz_reqs_free(&c.resources);
  op->pending++;
  nl_cri_update_container_resources(op->rt->cri, &req, container_updated, run);
  protobuf_c_message_free_unpacked(&req.linux->base, NULL);
}

/* ---- upstream validateMemoryResizeAction: no memory limit goes below what
 * is in use (the kernel would refuse it, or reclaim and OOM) ---- */

static void why(nl__resize_run_t *run, char *msg /* taken */) {
  nl_buf_printf(&run->why, "%s%s", run->n_why++ ? ", " : "", msg);
  free(msg);
}

/* A limit that is set and goes down, or is added. */
static bool lowered(int64_t want, int64_t cur) { return want > 0 && (cur <= 0 || want < cur); }

static void check_next(nl__resize_run_t *run);

static void stats_done(const nl_grpc_status_t *st, Runtime__V1__ContainerStatsResponse *resp,
                       void *ctx) {
  nl__resize_run_t *run = ctx;
  if (!nl__op_resume(run->op)) return;
  const nl_resize_update_t *u = &run->op->actions.to_update[run->check];
  const Runtime__V1__MemoryUsage *m = st->code == NL_GRPC_OK && resp && resp->stats
                                          ? resp->stats->memory : NULL;
  if (!m || !m->usage_bytes)
    why(run, nl_xasprintf("missing container \"%s\" memory usage", u->spec->name));
  else if (m->usage_bytes->value >= (uint64_t)u->want.mem_lim)
    why(run, nl_xasprintf("attempting to set container \"%s\" memory limit (%lld) below current "
                          "usage (%llu)", u->spec->name, (long long)u->want.mem_lim,
                          (unsigned long long)m->usage_bytes->value));
  run->check++;
  check_next(run);
}

static void check_next(nl__resize_run_t *run) {
  const nl_pod_actions_t *a = &run->op->actions;
  for (; run->check < a->n_to_update; run->check++) {
    const nl_resize_update_t *u = &a->to_update[run->check];
    if (!lowered(u->want.mem_lim, u->cur.mem_lim)) continue;
    Runtime__V1__ContainerStatsRequest req = RUNTIME__V1__CONTAINER_STATS_REQUEST__INIT;
    req.container_id = u->id;
    run->op->pending++;
    nl_cri_container_stats(run->op->rt->cri, &req, stats_done, run);
    return;
  }
  if (run->n_why) {
    char *list = nl_buf_steal(&run->why);
    /* one error as it is, several as Go's aggregate prints them */
    fail(run, nl_xasprintf(run->n_why > 1 ? "cannot decrease memory limits: [%s]"
                                          : "cannot decrease memory limits: %s", list));
    free(list);
    return;
  }
  run_next(run);
}

static void check_memory(nl__resize_run_t *run) {
  const nl_pod_actions_t *a = &run->op->actions;
  bool any = false;
  for (size_t i = 0; i < a->n_to_update; i++)
    any |= lowered(a->to_update[i].want.mem_lim, a->to_update[i].cur.mem_lim);
  if (run->have_pod && lowered(run->want.memory, run->cur.memory)) {
    any = true;
    if (run->pod_usage < 0)
      why(run, nl_xstrdup("missing pod memory usage"));
    else if (run->pod_usage >= run->want.memory)
      why(run, nl_xasprintf("attempting to set pod memory limit (%lld) below current usage (%lld)",
                            (long long)run->want.memory, (long long)run->pod_usage));
  }
  if (!any) {
    run_next(run);
    return;
  }
  run->check = 0;
  check_next(run);
}

static void run_next(nl__resize_run_t *run) {
  if (run->i == run->n_steps) {
    nl_runtime_op_t *op = run->op;
    if (op->actions.resize_pod_level) { /* every step done: the pod-level resources too */
      nl_rsz_res_t r = nl_rsz_reqs_res(op->pod->spec.resources);
      nl_resize_set_pod_actuated(op->rt->opts.resize, op->uid, &r);
    }
    nl_vlog(3, "pod %s: resize actuated (%zu steps)", run->op->desc, run->n_steps);
    run->next(run->op);
    return;
  }
  const nl_resize_step_t *st = &run->steps[run->i++];
  if (st->pod) pod_step(run, st);
  else container_step(run, st);
}

void nl__resize_start(nl_runtime_op_t *op, void (*next)(nl_runtime_op_t *op)) {
  const nl_pod_actions_t *a = &op->actions;
  if (!a->resize || op->resize_run) {
    next(op);
    return;
  }
  nl__resize_run_t *run = nl_xcalloc(1, sizeof *run);
  op->resize_run = run;
  run->op = op;
  run->next = next;
  nl__result_add(&op->result, NL_SYNC_RESIZE_POD, op->desc, false);
  run->step_idx = op->result.n_steps - 1;
  run->cur_res = nl_xcalloc(a->n_to_update + 1, sizeof *run->cur_res);
  for (size_t i = 0; i < a->n_to_update; i++) run->cur_res[i] = a->to_update[i].cur;
  const nl_cgroups_t *cg = op->rt->opts.cgroups;
  if (cg && cg->per_qos) {
    queue_job(run, false); /* the pod cgroup as it is, then the steps */
    return;
  }
  run->steps = nl_runtime_resize_steps(a, NULL, NULL, &run->n_steps);
  run->pod_usage = -1;
  check_memory(run);
}
