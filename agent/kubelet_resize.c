/* In-place pod resize in the kubelet (agent/kubelet_resize.h). */
#include "agent/kubelet_resize.h"

#include <string.h>

#include "agent/kubelet_pods.h"
#include "managers/resize.h"
#include "reactor/buf.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* upstream's allocation manager retries pending resizes every 3 minutes
 * after a first 30 s; nanolet every 30 s, and whenever a pod goes away */
#define RETRY_MS 30000

#define REASON_DEFERRED "Deferred"
#define REASON_INFEASIBLE "Infeasible"
#define REASON_ERROR "Error"

static int64_t now_ns(void) { return nl_pleg_realtime_ns(NULL); }

static void on_stopped(nl_resize_t *rs) {
  nl__kubelet_release(container_of(rs, nl_kubelet_t, resize));
}

int nl__kubelet_resize_init(nl_kubelet_t *k, nl_err_t **err) {
  if (nl_resize_init(&k->resize, k->loop, k->cfg->root_dir, err) < 0) return -1;
  k->resize_up = true;
  k->pending++;
  return 0;
}

void nl__kubelet_resize_stop(nl_kubelet_t *k) {
  if (!k->resize_up) return;
  k->resize_up = false;
  nl_resize_stop(&k->resize, on_stopped);
}

const nl_pod_t *nl__kubelet_resize_pod(nl_kubelet_t *k, const nl_pod_t *pod, nl_pod_t **hold) {
  *hold = k->resize_up ? nl_resize_allocated_pod(&k->resize, pod) : NULL;
  return *hold ? *hold : pod;
}

/* msg is taken */
static void event(nl_kubelet_t *k, const nl_pod_t *pod, const char *type, const char *reason,
                  char *msg) {
  nl_event_ref_t ref = nl_event_pod_ref(pod);
  nl_events_record(&k->events, &ref, type, reason, msg);
  free(msg);
}

/* upstream handlePodResourcesResize: returns true when the resize was
 * allocated (the pod is then to be synced with its new allocation); *changed
 * says whether the pending condition changed (the status is to be written). */
static bool decide(nl_kubelet_t *k, const nl_pod_t *pod, bool *changed) {
  const char *uid = pod->metadata.uid;
  nl_pod_t *allocated = nl_resize_allocated_pod(&k->resize, pod);
  if (!allocated) { /* desired == allocated: nothing to decide (or reverted) */
    *changed = nl_resize_clear_pending(&k->resize, uid);
    return false;
  }
  size_t n;
  nl_pod_t **holds;
  const nl_pod_t **others = nl__kubelet_pods_admitted(k, uid, &n, &holds);
  nl_admit_node_t node;
  nl__kubelet_admit_node(k, &node);
  nl_admit_pods_t op = {others, n};
  char *msg = NULL;
  nl_resize_verdict_t v = nl_resize_admit(&node, pod, allocated, &op,
                                          nl__kubelet_pod_is_static(pod), &msg);
  nl_admit_node_free(&node);
  nl__kubelet_pods_admitted_free(others, holds, n);
  nl_pod_free(allocated);
  const char *ns = pod->metadata.namespace_, *name = pod->metadata.name;
  int64_t gen = pod->metadata.generation;
  if (v == NL_RESIZE_FITS) {
    nl_resize_allocate(&k->resize, pod);
    *changed = nl_resize_clear_pending(&k->resize, uid);
    /* errors of an earlier resize go; the generation is this one's */
    nl_resize_clear_in_progress(&k->resize, uid);
    nl_resize_set_in_progress(&k->resize, uid, "", NULL, gen, now_ns());
    *changed = true;
    nl_info("pod %s/%s: resize allocated (generation %lld)", ns, name, (long long)gen);
    if (k->cgroups_up) nl_cgroups_update_qos(&k->cgroups); /* the Burstable class's shares */
    event(k, pod, NL_EVENT_NORMAL, "ResizeStarted", nl_xstrdup("Pod resize started"));
    return true;
  }
  const char *reason = v == NL_RESIZE_INFEASIBLE ? REASON_INFEASIBLE : REASON_DEFERRED;
  *changed = nl_resize_set_pending(&k->resize, uid, reason, msg, gen, now_ns());
  if (*changed) {
    nl_info("pod %s/%s: resize %s: %s", ns, name, reason, msg);
    event(k, pod, NL_EVENT_WARNING,
          v == NL_RESIZE_INFEASIBLE ? "ResizeInfeasible" : "ResizeDeferred",
          nl_xasprintf("Pod resize %s: %s", reason, msg));
  }
  free(msg);
  return false;
}

/* The worker gets the pod as allocated now, and syncs (which writes the
 * status with the conditions). */
static void resync(nl_kubelet_t *k, const nl_pod_t *pod) {
  nl_pod_t *hold;
  const nl_pod_t *p = nl__kubelet_resize_pod(k, pod, &hold);
  nl_pod_workers_update(&k->workers, p, NL_SYNC_UPDATE, -1);
  nl_pod_free(hold);
}

void nl__kubelet_resize_admitted(nl_kubelet_t *k, const nl_pod_t *pod) {
  if (!k->resize_up) return;
  if (!nl_resize_known(&k->resize, pod->metadata.uid)) {
    nl_resize_allocate(&k->resize, pod); /* admitted as it is */
    return;
  }
  bool changed;
  decide(k, pod, &changed); /* a resize that came while the agent was away */
}

void nl__kubelet_resize_updated(nl_kubelet_t *k, const nl_pod_t *pod) {
  if (!k->resize_up || !nl_resize_known(&k->resize, pod->metadata.uid)) return;
  bool changed;
  if (decide(k, pod, &changed)) nl__kubelet_resize_retry(k); /* others may fit now */
}

void nl__kubelet_resize_retry(nl_kubelet_t *k) {
  if (!k->resize_up || k->stopping) return;
  k->resize_retry_ms = uv_now(k->loop);
  size_t n;
  const char **uids = nl_resize_pending_list(&k->resize, &n);
  for (size_t i = 0; i < n; i++) {
    const nl_pod_t *pod = nl_pod_manager_get(&k->pods, uids[i]);
    if (!pod) continue; /* the housekeeping drops its state */
    if (nl_pod_workers_is_terminating(&k->workers, uids[i]) || nl__kubelet_pod_finished(k, pod)) {
      nl_resize_clear_pending(&k->resize, uids[i]);
      continue;
    }
    bool changed;
    bool allocated = decide(k, pod, &changed);
    if (allocated || changed) resync(k, pod);
  }
  free(uids);
}

static bool known(void *ctx, const char *uid) {
  nl_kubelet_t *k = ctx;
  return nl_pod_manager_get(&k->pods, uid) || nl_pod_workers_get(&k->workers, uid);
}

void nl__kubelet_resize_housekeeping(nl_kubelet_t *k, bool sources_ready) {
  if (!k->resize_up) return;
  if (sources_ready) nl_resize_forget_others(&k->resize, known, k);
  if (uv_now(k->loop) - k->resize_retry_ms >= RETRY_MS) nl__kubelet_resize_retry(k);
}

void nl__kubelet_resize_synced(nl_kubelet_t *k, const nl_pod_t *pod, const nl_sync_result_t *res) {
  if (!k->resize_up || !res) return;
  for (size_t i = 0; i < res->n_steps; i++) {
    const nl_sync_step_t *s = &res->steps[i];
    if (s->action != NL_SYNC_RESIZE_POD || !s->reason) continue;
    if (nl_resize_set_in_progress(&k->resize, pod->metadata.uid, REASON_ERROR, s->message,
                                  pod->metadata.generation, now_ns()))
      event(k, pod, NL_EVENT_WARNING, "ResizeError",
            nl_xasprintf("Pod resize error: %s", s->message));
  }
}

/* ---- status ---- */

static void quantities(nl_buf_t *b, const nl_resource_list_t *l) {
  nl_buf_puts(b, "{");
  for (size_t i = 0; i < l->n; i++) {
    char q[NL_QUANTITY_STRLEN];
    nl_buf_printf(b, "%s\"%s\":\"%s\"", i ? "," : "", l->items[i].name,
                  nl_quantity_format(&l->items[i].q, q));
  }
  nl_buf_puts(b, "}");
}

/* {"limits":{...},"requests":{...}}, each when not empty (owned). */
static char *requirements_json(const nl_resource_requirements_t *r) {
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_puts(&b, "{");
  if (r->limits.n) {
    nl_buf_puts(&b, "\"limits\":");
    quantities(&b, &r->limits);
  }
  if (r->requests.n) {
    nl_buf_puts(&b, r->limits.n ? ",\"requests\":" : "\"requests\":");
    quantities(&b, &r->requests);
  }
  nl_buf_puts(&b, "}");
  return nl_buf_steal(&b);
}

/* upstream convertContainerStatusResources, with the actuated state standing
 * in for the runtime's report: the allocation, whose cpu and memory are what
 * a running container was last given. */
static void container_resources(nl_kubelet_t *k, const nl_pod_t *pod, nl_container_status_t *cs) {
  const nl_container_t *c = nl_rsz_find(pod, cs->name);
  if (!c || !cs->container_id) return; /* no runtime container: upstream sets neither */
  nl_rsz_res_t alloc = nl_rsz_res_of(c), act;
  nl_resize_allocated(&k->resize, pod->metadata.uid, c->name, &alloc);
  nl_resource_requirements_t allocated;
  nl_rsz_reqs_build(&c->resources, &alloc, &allocated);
  nl_rsz_res_t shown = alloc;
  if (cs->state.kind == NL_CSTATE_RUNNING &&
      nl_resize_actuated(&k->resize, pod->metadata.uid, c->name, &act)) {
    /* the amounts the allocation names, as they are applied */
    if (alloc.set & NL_RSZ_CPU_REQ) shown.cpu_req = act.cpu_req;
    if (alloc.set & NL_RSZ_CPU_LIM) shown.cpu_lim = act.cpu_lim;
    if (alloc.set & NL_RSZ_MEM_REQ) shown.mem_req = act.mem_req;
    if (alloc.set & NL_RSZ_MEM_LIM) shown.mem_lim = act.mem_lim;
  }
  nl_resource_requirements_t res;
  nl_rsz_reqs_build(&c->resources, &shown, &res);
  nl_buf_t b = NL_BUF_INIT;
  if (allocated.requests.n) {
    quantities(&b, &allocated.requests);
    free(cs->allocated_json);
    cs->allocated_json = nl_buf_steal(&b);
  }
  free(cs->resources_json);
  cs->resources_json = requirements_json(&res);
  nl_rsz_reqs_free(&allocated);
  nl_rsz_reqs_free(&res);
}

/* upstream IsPodResizeInProgress: a running container whose
 * actuated cpu or memory differs from its allocation (with the pod-level
 * limits where it has none), or pod-level resources whose pod cgroup has not
 * been given their allocation yet. */
static bool in_progress(nl_kubelet_t *k, const nl_pod_t *pod, const nl_rt_pod_status_t *rt) {
  nl_rsz_res_t pl = {0};
  bool has_pl = nl_resize_pod_allocated(&k->resize, pod->metadata.uid, &pl);
  for (int init = 0; init < 2; init++) {
    size_t n = init ? pod->spec.n_init_containers : pod->spec.n_containers;
    for (size_t i = 0; i < n; i++) {
      const nl_container_t *c = init ? &pod->spec.init_containers[i] : &pod->spec.containers[i];
      const nl_rt_container_t *st = rt ? nl_rt_pod_status_find(rt, c->name) : NULL;
      nl_rsz_res_t alloc, act;
      if (!st || st->state != NL_RT_CONTAINER_RUNNING ||
          !nl_resize_allocated(&k->resize, pod->metadata.uid, c->name, &alloc) ||
          !nl_resize_actuated(&k->resize, pod->metadata.uid, c->name, &act))
        continue;
      nl_rsz_res_t eff = nl_rsz_effective(alloc, &pl);
      if (!nl_rsz_res_equal(&eff, &act)) return true;
    }
  }
  nl_rsz_res_t act;
  return has_pl && nl_resize_pod_actuated(&k->resize, pod->metadata.uid, &act) &&
         !nl_rsz_res_equal(&pl, &act);
}

static void add_cond(nl_pod_status_t *st, const char *type, const nl_rsz_cond_t *c) {
  if (c) nl_pod_status_add_condition(st, type, "True", c->reason && *c->reason ? c->reason : NULL,
                                     c->message, c->since_ns / 1000000000);
}

/* The i-th list of requests of a pod: its containers', its init containers',
 * its pod-level ones and its overhead; NULL past the last. */
static const nl_resource_list_t *request_list(const nl_pod_t *pod, size_t i) {
  static const nl_resource_list_t none;
  const nl_pod_spec_t *s = &pod->spec;
  if (i < s->n_containers) return &s->containers[i].resources.requests;
  i -= s->n_containers;
  if (i < s->n_init_containers) return &s->init_containers[i].resources.requests;
  i -= s->n_init_containers;
  if (i == 0) return s->resources ? &s->resources->requests : &none;
  return i == 1 ? &s->overhead : NULL;
}

/* upstream's pod status with InPlacePodLevelResourcesVerticalScaling:
 * allocatedResources, the requests of the pod as allocated (PodRequests); and
 * for a pod with pod-level resources, resources: their allocation, with the
 * cpu and memory amounts last applied to the pod cgroup while it runs (upstream
 * reads them back from the cgroup files). */
static void pod_resources(nl_kubelet_t *k, const nl_pod_t *pod, nl_pod_status_t *st) {
  nl_pod_t *hold;
  const nl_pod_t *a = nl__kubelet_resize_pod(k, pod, &hold);
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_puts(&b, "{");
  int n = 0;
  const nl_resource_list_t *l;
  for (size_t li = 0; (l = request_list(a, li)); li++)
    for (size_t i = 0; i < l->n; i++) {
      const char *name = l->items[i].name;
      bool seen = false;
      for (size_t m = 0; m < li && !seen; m++)
        seen = nl_resource_list_get(request_list(a, m), name) != NULL;
      if (seen) continue;
      bool cpu = strcmp(name, "cpu") == 0;
      bool bin = strcmp(name, "memory") == 0 || strcmp(name, "ephemeral-storage") == 0 ||
                 strncmp(name, "hugepages-", 10) == 0;
      nl_quantity_t q = {nl_pod_request(a, name), cpu ? -3 : 0,
                         bin ? NL_QUANTITY_BINARY_SI : NL_QUANTITY_DECIMAL_SI};
      /* a pod-level request stands as written (PodRequests copies it: a
       * memory request of "10m" stays 10m, not a rounded byte) */
      const nl_quantity_t *pl = nl_pod_level_request(a, name);
      if (pl && !nl_resource_list_get(&a->spec.overhead, name)) q = *pl;
      char t[NL_QUANTITY_STRLEN];
      nl_buf_printf(&b, "%s\"%s\":\"%s\"", n++ ? "," : "", name, nl_quantity_format(&q, t));
    }
  nl_buf_puts(&b, "}");
  free(st->allocated_json);
  st->allocated_json = n ? nl_buf_steal(&b) : NULL;
  nl_buf_free(&b);
  free(st->resources_json);
  st->resources_json = NULL;
  nl_rsz_res_t alloc, act;
  if (a->spec.resources && nl_resize_pod_allocated(&k->resize, pod->metadata.uid, &alloc)) {
    nl_rsz_res_t shown = alloc;
    if (st->phase == NL_POD_RUNNING &&
        nl_resize_pod_actuated(&k->resize, pod->metadata.uid, &act)) {
      if (alloc.set & NL_RSZ_CPU_REQ) shown.cpu_req = act.cpu_req;
      if (alloc.set & NL_RSZ_CPU_LIM) shown.cpu_lim = act.cpu_lim;
      if (alloc.set & NL_RSZ_MEM_REQ) shown.mem_req = act.mem_req;
      if (alloc.set & NL_RSZ_MEM_LIM) shown.mem_lim = act.mem_lim;
    }
    nl_resource_requirements_t res;
    nl_rsz_reqs_build(a->spec.resources, &shown, &res);
    st->resources_json = requirements_json(&res);
    nl_rsz_reqs_free(&res);
  }
  nl_pod_free(hold);
}

void nl__kubelet_resize_status(nl_kubelet_t *k, const nl_pod_t *pod, const nl_rt_pod_status_t *rt,
                               nl_pod_status_t *st, int64_t now) {
  if (!k->resize_up || !nl_resize_known(&k->resize, pod->metadata.uid)) return;
  pod_resources(k, pod, st);
  for (size_t i = 0; i < st->n_init_container_statuses; i++)
    container_resources(k, pod, &st->init_container_statuses[i]);
  for (size_t i = 0; i < st->n_container_statuses; i++)
    container_resources(k, pod, &st->container_statuses[i]);
  const char *uid = pod->metadata.uid;
  bool terminal = st->phase == NL_POD_SUCCEEDED || st->phase == NL_POD_FAILED;
  if (!terminal && in_progress(k, pod, rt)) {
    nl_resize_set_in_progress(&k->resize, uid, "", NULL, pod->metadata.generation, now);
  } else if (nl_resize_in_progress(&k->resize, uid)) {
    int64_t gen = nl_resize_in_progress(&k->resize, uid)->generation;
    nl_resize_clear_in_progress(&k->resize, uid);
    if (!terminal) {
      nl_info("pod %s/%s: resize completed (generation %lld)", pod->metadata.namespace_,
              pod->metadata.name, (long long)gen);
      event(k, pod, NL_EVENT_NORMAL, "ResizeCompleted",
            nl_xasprintf("Pod resize completed (generation %lld)", (long long)gen));
    }
  }
  if (terminal) nl_resize_clear_pending(&k->resize, uid);
  add_cond(st, "PodResizePending", nl_resize_pending(&k->resize, uid));
  add_cond(st, "PodResizeInProgress", nl_resize_in_progress(&k->resize, uid));
}
