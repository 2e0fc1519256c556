#include "agent/kubelet_pods.h"
#include "agent/kubelet_userns.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kubelet_devices.h"
#include "agent/kubelet_dra.h"
#include "agent/kubelet_node.h"
#include "agent/kubelet_preempt.h"
#include "agent/kubelet_resize.h"
#include "agent/kubelet_shutdown.h"
#include "managers/admission.h"
#include "managers/apparmor.h"
#include "managers/status.h"
#include "managers/volumes.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* What the kubelet keeps per pod besides the spec: the status it reports, the
 * waiting reasons of its containers (upstream's reasonCache) and when it last
 * synced (upstream's podSyncStatus.lastSyncTime). */
typedef struct reason {
  char *container, *reason, *message;
} reason_t;

typedef struct pod_state {
  nl_pod_status_t *status;
  reason_t *reasons;
  size_t n_reasons;
  int64_t last_sync_ns;
  uint64_t first_seen;   /* uv_hrtime() when the kubelet first handled the pod */
  char *rejected_reason; /* admission said no, or the pod was evicted: it never
                         * runs (again) */
  char *rejected_message;
  char *killed_reason;   /* killed by the kubelet itself (node shutdown, */
  char *killed_message;  /* preemption): the terminal status says why */
  char *killed_condition; /* (TerminatePodOptions); NULL: the message */
} pod_state_t;

/* A syncer call in flight: waiting for fresh runtime status, then a runtime op. */
typedef struct sync_call {
  nl_list_t link;
  nl_kubelet_t *k;
  nl_pod_work_t *w;
  nl_runtime_op_t *op; /* the kill in flight (sync_terminating), for a shorter grace */
  uint64_t relists;    /* the pleg's finished relists when sync_pod's actions began */
  nl_err_t *err;       /* sync_pod's error, kept while its status waits for a relist */
  bool reset;          /* sync_pod removed the containers for an in-place restart */
} sync_call_t;

/* A housekeeping kill of a runtime pod that no source wants. */
typedef struct orphan {
  nl_kubelet_t *k;
  char *uid;
  nl_runtime_op_t *op;
} orphan_t;

static int64_t now_ns(void) { return nl_pleg_realtime_ns(NULL); }
/* The PLEG cache's clock (monotonic): the sync ordering compares with it. */
static int64_t cache_now_ns(void) { return nl_pleg_monotonic_ns(NULL); }

static void state_free(void *p) {
  pod_state_t *ps = p;
  if (!ps) return;
  nl_pod_status_free(ps->status);
  for (size_t i = 0; i < ps->n_reasons; i++) {
    free(ps->reasons[i].container);
    free(ps->reasons[i].reason);
    free(ps->reasons[i].message);
  }
  free(ps->reasons);
  free(ps->rejected_reason);
  free(ps->rejected_message);
  free(ps->killed_reason);
  free(ps->killed_message);
  free(ps->killed_condition);
  free(ps);
}

static pod_state_t *state_get(nl_kubelet_t *k, const char *uid) {
  pod_state_t *ps = nl_map_get(&k->pod_states, uid);
  if (!ps) {
    ps = nl_xcalloc(1, sizeof *ps);
    ps->first_seen = uv_hrtime();
    nl_map_put(&k->pod_states, uid, ps);
  }
  return ps;
}

static void orphan_free(void *p) {
  orphan_t *o = p;
  if (o->op) nl_runtime_cancel(o->op);
  free(o->uid);
  free(o);
}

int nl__kubelet_pods_init(nl_kubelet_t *k, nl_err_t **err) {
  nl_pod_manager_init(&k->pods);
  nl_map_init(&k->pod_states);
  nl_map_init(&k->orphans);
  nl_map_init(&k->static_terminating);
  nl_map_init(&k->preempt_waits);
  nl_list_init(&k->calls);
  nl_pod_config_init(&k->pod_config, nl__kubelet_pods_update, k);
  k->apparmor_host = nl_apparmor_host_enabled();
  nl_pod_workers_init(&k->workers, k->loop, &nl__kubelet_syncer, k,
                      (uint64_t)(k->cfg->sync_frequency / 1000000), 10000);
  const nl_config_list_t *u = &k->cfg->allowed_unsafe_sysctls;
  if (nl_sysctl_allowlist_init(&k->sysctls, u->v, u->n, err) < 0)
    return nl_err_wrap(err, "allowedUnsafeSysctls");
  return 0;
}

void nl__kubelet_pods_free(nl_kubelet_t *k) {
  /* Workers first: it orphans their tokens, which completing then only frees. */
  nl_pod_workers_free(&k->workers);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &k->calls) {
    sync_call_t *c = nl_list_entry(pos, sync_call_t, link);
    nl_list_remove(&c->link);
    nl_pod_workers_complete(c->w, NULL, false);
    nl_err_free(&c->err);
    free(c);
  }
  nl_map_free(&k->orphans, orphan_free);
  nl_map_free(&k->static_terminating, free);
  nl__kubelet_preempt_free(k);
  nl_map_free(&k->pod_states, state_free);
  nl_pod_manager_free(&k->pods);
  nl_pod_config_free(&k->pod_config);
  nl_sysctl_allowlist_free(&k->sysctls);
}

/* ---- status ---- */

/* upstream reasonCache.Update: a failed start records its reason; a started
 * container forgets it. */
static void update_reasons(pod_state_t *ps, const nl_sync_result_t *res) {
  for (size_t i = 0; i < res->n_steps; i++) {
    const nl_sync_step_t *st = &res->steps[i];
    if (st->action != NL_SYNC_START_CONTAINER && st->action != NL_SYNC_INIT_CONTAINER) continue;
    size_t j;
    for (j = 0; j < ps->n_reasons; j++)
      if (strcmp(ps->reasons[j].container, st->target) == 0) break;
    if (j < ps->n_reasons) {
      free(ps->reasons[j].container);
      free(ps->reasons[j].reason);
      free(ps->reasons[j].message);
      ps->reasons[j] = ps->reasons[--ps->n_reasons];
    }
    if (!st->reason) continue;
    ps->reasons = nl_xrealloc(ps->reasons, (ps->n_reasons + 1) * sizeof *ps->reasons);
    ps->reasons[ps->n_reasons++] = (reason_t){nl_xstrdup(st->target), nl_xstrdup(st->reason),
                                              nl_xstrdup(st->message ? st->message : "")};
  }
}

/* ---- probes (the wiring of managers/probe.h) ---- */

/* The status generator's inputs for one pod: started/ready from the probes, and
 * whether it is being deleted. */
static const nl_status_opts_t *probe_status_opts(nl_kubelet_t *k, const nl_pod_t *pod,
                                                 nl_probe_status_ctx_t *pctx,
                                                 nl_status_opts_t *o) {
  *o = (nl_status_opts_t){.deleted = pod->metadata.deletion_timestamp != NULL,
                          .supports_rro = nl_runtime_supports_rro(&k->runtime.opts, pod)};
  if (!k->probes_up) return o;
  *pctx = (nl_probe_status_ctx_t){&k->probes, pod};
  o->probe = nl_probe_manager_status_probe;
  o->probe_ctx = pctx;
  return o;
}

static const nl_rt_pod_status_t *probe_pod_status(void *ctx, const char *uid) {
  nl_kubelet_t *k = ctx;
  return nl_pleg_get(&k->pleg, uid);
}

/* upstream syncLoopIteration's liveness/readiness/startup cases: sync the pod,
 * which kills a container that failed (computePodActions reads the results) or
 * regenerates the status with the new readiness. */
static void probe_changed(void *ctx, const char *uid, const char *container, nl_probe_type_t type,
                          nl_probe_result_t result) {
  nl_kubelet_t *k = ctx;
  nl_vlog(2, "probe: pod %s container %s: %s %s", uid, container, nl_probe_type_name(type),
          result == NL_PROBE_RESULT_SUCCESS ? "success" : result == NL_PROBE_RESULT_FAILURE ? "failure" : "unknown");
  if (k->stopping) return;
  nl_pod_workers_sync_now(&k->workers, uid);
}

static void probe_event(void *ctx, const nl_pod_t *pod, const char *container, const char *type,
                        const char *reason, const char *message) {
  nl_kubelet_t *k = ctx;
  char fp[320];
  nl_event_ref_t ref = nl_event_container_ref(pod, container, fp, sizeof fp);
  nl_events_record(&k->events, &ref, type, reason, message);
}

int nl__kubelet_probes_init(nl_kubelet_t *k, nl_err_t **err) {
  nl_probe_manager_opts_t o = {
      .status = probe_pod_status,
      .status_ctx = k,
      .changed = probe_changed,
      .event = probe_event,
      .ctx = k,
      .host_ip = k->cfg->node_ip,
      .metrics = &k->metrics,
  };
  if (nl_probe_manager_init(&k->probes, k->loop, &k->cri, &o, err) < 0) return -1;
  k->probes_up = true;
  k->cri_users++;
  nl_runtime_set_probe_source(&k->runtime, nl_probe_manager_runtime_result, &k->probes);
  return 0;
}

/* upstream activeDeadlineHandler: the pod has been active (since its status'
 * startTime) for spec.activeDeadlineSeconds or longer. */
#define DEADLINE_REASON "DeadlineExceeded"
#define DEADLINE_MESSAGE "Pod was active on the node longer than the specified deadline"
static bool past_active_deadline(const nl_pod_t *pod, int64_t start_time) {
  const nl_opt_i64_t *d = &pod->spec.active_deadline_seconds;
  return d->set && start_time > 0 && now_ns() / 1000000000 - start_time >= d->v;
}

static nl_pod_status_t *generate(nl_kubelet_t *k, const nl_pod_t *pod, pod_state_t *ps,
                                 bool terminal) {
  nl_status_reason_t items[ps->n_reasons + 1];
  for (size_t i = 0; i < ps->n_reasons; i++)
    items[i] = (nl_status_reason_t){ps->reasons[i].container, ps->reasons[i].reason,
                                    ps->reasons[i].message};
  nl_status_reasons_t reasons = {items, ps->n_reasons};
  const nl_rt_pod_status_t *rt = nl_pleg_get(&k->pleg, pod->metadata.uid);
  nl_probe_status_ctx_t pctx;
  nl_status_opts_t sopts;
  nl_pod_status_t *st = nl_pod_status_generate(pod, rt, &reasons, ps->status, terminal, now_ns(),
                                               k->cfg->node_ip,
                                               probe_status_opts(k, pod, &pctx, &sopts));
  nl__kubelet_devices_status(k, pod, st);
  nl__kubelet_dra_status(k, pod, st);
  if (ps->rejected_reason) {
    st->phase = NL_POD_FAILED;
    free(st->reason);
    free(st->message);
    st->reason = nl_xstrdup(ps->rejected_reason);
    st->message = nl_xstrdup(ps->rejected_message);
  } else if (past_active_deadline(pod, st->start_time)) {
    /* upstream's pod sync handlers (ShouldEvict), whatever the phase from the
     * containers: a container that exits 0 when killed for the deadline (pause
     * does) would make it Succeeded, without the reason. Failed, and so
     * terminated. */
    st->phase = NL_POD_FAILED;
    free(st->reason);
    free(st->message);
    st->reason = nl_xstrdup(DEADLINE_REASON);
    st->message = nl_xstrdup(DEADLINE_MESSAGE);
  }
  /* Once its containers have stopped (upstream sends no terminal phase before). */
  if (ps->killed_reason && (terminal || st->phase == NL_POD_FAILED))
    nl_pod_status_terminated_by_kubelet(st, ps->status, ps->killed_reason, ps->killed_message,
                                        ps->killed_condition, now_ns());
  nl__kubelet_resize_status(k, pod, rt, st, now_ns());
  return st;
}

/* A pod from a file or URL (upstream kubetypes.IsStaticPod: any source but the
 * API server). */
static bool pod_is_static(const nl_pod_t *pod) {
  const char *src = nl_kvlist_get(&pod->metadata.annotations, NL_ANNOTATION_CONFIG_SOURCE);
  return !src || strcmp(src, "api") != 0;
}

bool nl__kubelet_pod_is_static(const nl_pod_t *pod) { return pod_is_static(pod); }

/* The status manager's view of a pod. finished: its worker has terminated it
 * and no container can run any more (upstream podIsFinished): only then is a
 * terminal phase written, and a deleted pod deleted from the API. */
static void report_status(nl_kubelet_t *k, const nl_pod_t *pod, const nl_pod_status_t *st,
                          bool finished) {
  if (!k->node_up) return;
  nl_status_pod_t sp = {
      .uid = pod->metadata.uid,
      .namespace_ = pod->metadata.namespace_,
      .name = pod->metadata.name,
      .is_static = pod_is_static(pod),
      .deleting = pod->metadata.deletion_timestamp != NULL,
      /* a pod without a worker (refused at admission) never ran a container */
      .finished = finished || !nl_pod_workers_get(&k->workers, pod->metadata.uid),
  };
  nl_status_manager_set(&k->statuses, &sp, st);
}

static bool refresh_status(nl_kubelet_t *k, const nl_pod_t *pod, bool terminal) {
  pod_state_t *ps = state_get(k, pod->metadata.uid);
  nl_pod_status_t *st = generate(k, pod, ps, terminal);
  if (st->phase == NL_POD_RUNNING && (!ps->status || ps->status->phase != NL_POD_RUNNING))
    nl_kmetrics_pod_started(&k->metrics, (double)(uv_hrtime() - ps->first_seen) / 1e9);
  if (st->reason && !strcmp(st->reason, DEADLINE_REASON) &&
      (!ps->status || !ps->status->reason || strcmp(ps->status->reason, DEADLINE_REASON))) {
    nl_info("pod %s/%s: %s", pod->metadata.namespace_, pod->metadata.name, DEADLINE_MESSAGE);
    nl_event_ref_t ref = nl_event_pod_ref(pod);
    nl_events_record(&k->events, &ref, NL_EVENT_NORMAL, DEADLINE_REASON, DEADLINE_MESSAGE);
  }
  nl_kmetrics_count_terminations(&k->metrics, ps->status, st);
  nl_pod_status_free(ps->status);
  ps->status = st;
  report_status(k, pod, st, false);
  return st->phase == NL_POD_SUCCEEDED || st->phase == NL_POD_FAILED;
}

/* Upstream's OnPodSandboxReady: once a sync's new sandbox is up with its
 * network, before the images are pulled, the status the pod has (or a first
 * one) with PodReadyToStartContainers True. The status at the sync's end is
 * made from a relist after the sandbox (on_synced), which keeps it True and
 * its transition time. */
void nl__kubelet_sandbox_ready(void *ctx, const nl_pod_t *pod) {
  nl_kubelet_t *k = ctx;
  pod_state_t *ps = state_get(k, pod->metadata.uid);
  nl_pod_status_t *st = ps->status ? nl_pod_status_dup(ps->status) : generate(k, pod, ps, false);
  nl_pod_condition_t *c = nl_pod_status_condition(st, "PodReadyToStartContainers");
  if (!c || !strcmp(c->status, "True")) { /* no such condition (terminal), or True already */
    nl_pod_status_free(st);
    return;
  }
  c->status = "True";
  free(c->reason);
  free(c->message);
  c->reason = c->message = NULL;
  c->last_transition_time = (int64_t)(now_ns() / 1000000000);
  c->observed_generation = pod->metadata.generation;
  nl_pod_status_free(ps->status);
  ps->status = st;
  report_status(k, pod, st, false);
}

void nl__kubelet_pods_json(void *ctx, nl_buf_t *out) {
  nl_kubelet_t *k = ctx;
  size_t n;
  const nl_pod_t **pods = nl_pod_manager_list(&k->pods, &n);
  const nl_pod_status_t **sts = nl_xcalloc(n + 1, sizeof *sts);
  nl_pod_status_t **fresh = nl_xcalloc(n + 1, sizeof *fresh);
  for (size_t i = 0; i < n; i++) {
    pod_state_t *ps = nl_map_get(&k->pod_states, pods[i]->metadata.uid);
    if (ps && ps->status) {
      sts[i] = ps->status;
    } else { /* not synced yet: Pending */
      pod_state_t empty = {0};
      sts[i] = fresh[i] = generate(k, pods[i], ps ? ps : &empty, false);
    }
  }
  nl_pod_list_encode_json(pods, sts, n, out);
  for (size_t i = 0; i < n; i++) nl_pod_status_free(fresh[i]);
  free(fresh);
  free(sts);
  free(pods);
}

bool nl__kubelet_supports_rro(void *ctx, const char *handler) {
  nl_kubelet_t *k = ctx;
  return k->node_up && nl_node_supports_rro(&k->node, handler);
}

void nl__kubelet_allocatable(void *ctx, nl_runtime_allocatable_t *out) {
  nl_kubelet_t *k = ctx;
  const json_t *obj = k->node_up ? nl_node_object(&k->node) : NULL;
  if (!obj) return;
  nl_admit_node_t node;
  nl_admit_node_from_json(&node, obj);
  *out = (nl_runtime_allocatable_t){node.cpu_milli, node.memory, node.ephemeral_storage};
  nl_admit_node_free(&node);
}

/* ---- source updates (upstream HandlePodAdditions/Updates/Removes) ---- */

const nl_pod_t **nl__kubelet_pods_admitted(nl_kubelet_t *k, const char *except_uid, size_t *n,
                                          nl_pod_t ***holds) {
  size_t all, m = 0;
  const nl_pod_t **pods = nl_pod_manager_list(&k->pods, &all);
  *holds = nl_xcalloc(all + 1, sizeof **holds);
  for (size_t i = 0; i < all; i++) {
    const char *uid = pods[i]->metadata.uid;
    if (except_uid && strcmp(uid, except_uid) == 0) continue;
    pod_state_t *ps = nl_map_get(&k->pod_states, uid);
    if (ps && ps->rejected_reason) continue;
    if (nl_pod_workers_is_terminating(&k->workers, uid)) continue;
    pods[m] = nl__kubelet_resize_pod(k, pods[i], &(*holds)[m]); /* upstream getAllocatedPods */
    m++;
  }
  *n = m;
  return pods;
}

void nl__kubelet_pods_admitted_free(const nl_pod_t **pods, nl_pod_t **holds, size_t n) {
  for (size_t i = 0; i < n; i++) nl_pod_free(holds[i]);
  free(holds);
  free(pods);
}

void nl__kubelet_admit_node(nl_kubelet_t *k, nl_admit_node_t *node) {
  const json_t *obj = k->node_up ? nl_node_object(&k->node) : NULL;
  if (obj)
    nl_admit_node_from_json(node, obj);
  else
    nl_admit_node_local(node, k->node_name, k->cfg->max_pods);
}

/* upstream canAdmitPod with the predicate admit handler (managers/admission.h)
 * against the Node as the API server has it, or, standalone, as the
 * configuration describes it; the other pods are those admitted and not
 * terminating. */
/* Marks the pod Failed for good with reason and message (owned by the caller). */
static void fail_pod(nl_kubelet_t *k, const nl_pod_t *pod, const char *reason, char *message) {
  pod_state_t *ps = state_get(k, pod->metadata.uid);
  free(ps->rejected_reason);
  free(ps->rejected_message);
  ps->rejected_reason = nl_xstrdup(reason);
  ps->rejected_message = message;
}

/* upstream rejectPod: a Warning event with the reason and message, and Failed
 * for good with "Pod was rejected: <message>" (message is taken). Returns
 * false. */
static bool reject(nl_kubelet_t *k, const nl_pod_t *pod, const char *reason, char *message) {
  nl_event_ref_t ref = nl_event_pod_ref(pod);
  nl_events_record(&k->events, &ref, NL_EVENT_WARNING, reason, message);
  fail_pod(k, pod, reason, nl_xasprintf("Pod was rejected: %s", message));
  free(message);
  pod_state_t *ps = state_get(k, pod->metadata.uid);
  nl_warn("pod %s/%s rejected: %s: %s", pod->metadata.namespace_, pod->metadata.name,
          ps->rejected_reason, ps->rejected_message);
  refresh_status(k, pod, true);
  return false;
}

static bool admit(nl_kubelet_t *k, const nl_pod_t *pod) {
  size_t active = 0;
  /* upstream's eviction admit handler comes before the predicates */
  const char *why;
  char *msg;
  if (k->eviction_up && !nl_eviction_admit(&k->eviction, pod, &why, &msg))
    return reject(k, pod, why, msg);
  /* then the sysctls allowlist (upstream's second admit handler) */
  if (!nl_sysctl_admit(&k->sysctls, pod, &msg)) return reject(k, pod, NL_SYSCTL_FORBIDDEN_REASON, msg);
  /* then the resource allocator (device plugins' devices), before the predicates */
  if (!nl__kubelet_devices_admit(k, pod, &why, &msg)) return reject(k, pod, why, msg);
  nl_pod_t **holds;
  const nl_pod_t **pods = nl__kubelet_pods_admitted(k, pod->metadata.uid, &active, &holds);
  nl_admit_node_t node;
  nl__kubelet_admit_node(k, &node);
  nl_admit_pods_t others = {pods, active};
  nl_admit_result_t r = {0};
  /* after a restart, at the resources allocated then (upstream AddPod) */
  nl_pod_t *alloc;
  nl_preempt_need_t need[NL_ADMIT_RESOURCES];
  size_t n_need;
  bool ok = nl_admit_pod_critical(&node, nl__kubelet_resize_pod(k, pod, &alloc), &others,
                                  pod_is_static(pod), need, &n_need, &r);
  nl_pod_free(alloc);
  nl_err_t *err = NULL;
  if (ok && n_need && nl__kubelet_preempt(k, pod, &others, need, n_need, &err) < 0) {
    r = (nl_admit_result_t){"UnexpectedAdmissionError",
                            nl_xasprintf("Unexpected error while attempting to recover from "
                                         "admission failure: %s",
                                         nl_err_msg(err))};
    nl_err_free(&err);
    ok = false;
  }
  /* then AppArmor (upstream's next handler), for a pod not yet running */
  const char *phase = pod->status && pod->status->phase ? pod->status->phase : "Pending";
  if (ok && !strcmp(phase, "Pending") && !nl_apparmor_admit(pod, k->apparmor_host, &msg)) {
    nl_admit_result_free(&r);
    r = (nl_admit_result_t){NL_APPARMOR_REASON, msg};
    ok = false;
  }
  if (ok && nl__kubelet_shutting_down(k)) { /* upstream's shutdown admit handler */
    nl_admit_result_free(&r);
    r = (nl_admit_result_t){"NodeShutdown",
                            nl_xstrdup("Pod was rejected as the node is shutting down.")};
    ok = false;
  }
  nl_admit_node_free(&node);
  nl__kubelet_pods_admitted_free(pods, holds, active);
  if (ok) return true;
  nl__kubelet_preempt_forget(k, pod->metadata.uid); /* refused after preempting, as upstream */
  return reject(k, pod, r.reason, r.message); /* the reason is static */
}

/* ---- static pods of one name, one at a time (upstream allowStaticPodStart) ---- */

static char *full_name(const nl_pod_t *pod) {
  return nl_xasprintf("%s/%s", pod->metadata.namespace_, pod->metadata.name);
}

/* A static pod waits while another static pod of its name (or its own uid,
 * removed and added again) is terminating. */
static bool static_must_wait(nl_kubelet_t *k, const nl_pod_t *pod) {
  if (!pod_is_static(pod)) return false;
  char *key = full_name(pod);
  bool wait = nl_map_has(&k->static_terminating, key);
  free(key);
  return wait;
}

/* Starts an admitted pod's worker. */
static void start_pod(nl_kubelet_t *k, const nl_pod_t *pod) {
  if (k->node_up && pod_is_static(pod)) nl_mirror_manager_set(&k->mirrors, pod);
  /* upstream updates the QoS cgroups before a new pod's cgroup */
  if (k->cgroups_up) nl_cgroups_update_qos(&k->cgroups);
  nl__kubelet_resize_admitted(k, pod);
  nl_pod_t *hold;
  nl_pod_workers_update(&k->workers, nl__kubelet_resize_pod(k, pod, &hold), NL_SYNC_CREATE, -1);
  nl_pod_free(hold);
  if (k->probes_up) nl_probe_manager_add_pod(&k->probes, pod);
}

/* A static pod a source no longer wants: killed; its mirror pod goes once it
 * has terminated and no static pod of its name is wanted (static_finished). */
static void static_removed(nl_kubelet_t *k, const nl_pod_t *pod) {
  const nl_pod_worker_t *w = nl_pod_workers_get(&k->workers, pod->metadata.uid);
  char *key = full_name(pod);
  if (w && !w->finished) {
    nl_pod_workers_update(&k->workers, pod, NL_SYNC_KILL, -1);
    free(nl_map_del(&k->static_terminating, key));
    nl_map_put(&k->static_terminating, key, nl_xstrdup(pod->metadata.uid));
    free(key);
    return;
  }
  /* Nothing of it runs (finished, refused, or waiting to start): its mirror
   * pod goes now, unless a pod of its name is wanted or still terminating. */
  if (k->node_up && !nl_map_has(&k->static_terminating, key) &&
      !nl_pod_manager_get_by_name(&k->pods, pod->metadata.namespace_, pod->metadata.name))
    nl_mirror_manager_remove(&k->mirrors, pod->metadata.namespace_, pod->metadata.name);
  free(key);
}

/* Returns true when the pod of uid itself starts again. */
static bool static_finished(nl_kubelet_t *k, const char *uid) {
  nl_map_iter_t it;
  const char *key;
  void *v;
  char *name = NULL;
  nl_map_iter_init(&it, &k->static_terminating);
  while (!name && nl_map_iter_next(&it, &key, &v))
    if (strcmp(v, uid) == 0) name = nl_xstrdup(key);
  if (!name) return false;
  free(nl_map_del(&k->static_terminating, name));
  char *slash = strchr(name, '/');
  *slash = 0;
  bool again = false;
  const nl_pod_t *next = nl_pod_manager_get_by_name(&k->pods, name, slash + 1);
  pod_state_t *ps = next ? nl_map_get(&k->pod_states, next->metadata.uid) : NULL;
  if (!next || !pod_is_static(next) || next->metadata.deletion_timestamp ||
      (ps && ps->rejected_reason)) {
    if (k->node_up) nl_mirror_manager_remove(&k->mirrors, name, slash + 1);
  } else {
    nl_info("static pod %s/%s (%s) starts: the pod of its name before it has terminated", name,
            slash + 1, next->metadata.uid);
    again = strcmp(next->metadata.uid, uid) == 0;
    if (again) { /* the same uid again (upstream restartRequested): a new life */
      nl_pod_workers_forget(&k->workers, uid);
      state_free(nl_map_del(&k->pod_states, uid));
    }
    start_pod(k, next);
  }
  free(name);
  return again;
}

/* The status the API has for a pod as its watch delivered it, for the status
 * manager's comparison every sync period (upstream's syncBatch reads the pod
 * manager's copy in needsReconcile): a status another writer changed (the node
 * lifecycle controller's Ready False for every pod of a node it saw go
 * NotReady) is written back even though ours has not changed. */
static void observe_status(nl_kubelet_t *k, const nl_pod_t *pod) {
  if (!k->node_up || !pod->status) return;
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_encode_json(pod, &b, NL_POD_JSON_STATUS | NL_POD_JSON_FULL);
  json_t *j = json_loadb(b.data, b.len, 0, NULL);
  nl_buf_free(&b);
  assert(j); /* our own encoding */
  json_t *st = json_object_get(j, "status");
  if (st)
    nl_status_manager_observe(&k->statuses, pod->metadata.namespace_, pod->metadata.name,
                              pod->metadata.uid, st);
  json_decref(j);
}

/* A deletion that comes after the pod's worker finished (its containers all
 * exited before the delete, and the API did not have the terminal phase yet,
 * or it would have deleted the object at once): no worker reports the pod any
 * more, so the status manager learns of the deletion here, and deletes the
 * object once the terminal phase is written (upstream's status manager reads
 * the deletion from the pod manager at each sync). */
static void deletion_after_finish(nl_kubelet_t *k, const nl_pod_t *pod) {
  const nl_pod_worker_t *w = nl_pod_workers_get(&k->workers, pod->metadata.uid);
  pod_state_t *ps = nl_map_get(&k->pod_states, pod->metadata.uid);
  if (!pod->metadata.deletion_timestamp || !w || !w->finished || !ps || !ps->status) return;
  report_status(k, pod, ps->status, true);
}

/* upstream handleMirrorPod: a mirror pod never runs; its static pod is synced so
 * that the mirror is checked (recreated when outdated or gone). */
static void mirror_update(nl_kubelet_t *k, nl_pod_op_t op, const nl_pod_t *mirror) {
  if (op == NL_POD_REMOVE) nl_pod_manager_remove(&k->pods, mirror->metadata.uid);
  else nl_pod_manager_set(&k->pods, mirror);
  if (op != NL_POD_REMOVE && op != NL_POD_ADD) observe_status(k, mirror);
  const nl_pod_t *st = nl_pod_manager_get_by_name(&k->pods, mirror->metadata.namespace_,
                                                  mirror->metadata.name);
  if (st) nl_pod_workers_sync_now(&k->workers, st->metadata.uid);
}

void nl__kubelet_pods_update(nl_pod_op_t op, const char *source, const nl_pod_t *const *pods,
                             size_t n, void *ctx) {
  nl_kubelet_t *k = ctx;
  for (size_t i = 0; i < n; i++) {
    const nl_pod_t *pod = pods[i];
    nl_vlog(2, "%s pod %s/%s (%s) from source %s", nl_pod_op_name(op), pod->metadata.namespace_,
            pod->metadata.name, pod->metadata.uid, source);
    if (nl_pod_is_mirror(pod)) {
      mirror_update(k, op, pod);
      continue;
    }
    nl__kubelet_objects_update(k, op, pod);
    switch (op) {
    case NL_POD_ADD:
      nl_pod_manager_set(&k->pods, pod);
      if (pod->metadata.deletion_timestamp) { /* deleted while the agent was away */
        if (k->node_up && pod_is_static(pod)) nl_mirror_manager_set(&k->mirrors, pod);
        nl_pod_workers_update(&k->workers, pod, NL_SYNC_KILL, -1);
      } else if (static_must_wait(k, pod)) {
        nl_info("static pod %s/%s (%s) waits for the pod of its name to terminate",
                pod->metadata.namespace_, pod->metadata.name, pod->metadata.uid);
      } else if (admit(k, pod)) {
        if (!nl__kubelet_preempt_waiting(k, pod->metadata.uid)) start_pod(k, pod);
      } else if (k->node_up && pod_is_static(pod)) {
        nl_mirror_manager_set(&k->mirrors, pod); /* its rejection is reported there */
      }
      break;
    case NL_POD_UPDATE: {
      nl_pod_manager_set(&k->pods, pod);
      observe_status(k, pod);
      if ((pod_is_static(pod) || nl__kubelet_preempt_waiting(k, pod->metadata.uid)) &&
          !nl_pod_workers_get(&k->workers, pod->metadata.uid))
        break; /* waiting to start */
      if (k->node_up && pod_is_static(pod)) nl_mirror_manager_set(&k->mirrors, pod);
      nl__kubelet_resize_updated(k, pod); /* the workers get the pod as allocated */
      nl_pod_t *hold;
      nl_pod_workers_update(&k->workers, nl__kubelet_resize_pod(k, pod, &hold), NL_SYNC_UPDATE, -1);
      nl_pod_free(hold);
      deletion_after_finish(k, pod);
      break;
    }
    case NL_POD_DELETE:
      /* upstream: DELETE is an update (graceful deletion). The pod stays wanted
       * (the status manager reports it) until its API object goes: REMOVE. */
      nl_info("pod %s/%s is being deleted (grace period %llds)", pod->metadata.namespace_,
              pod->metadata.name,
              (long long)(pod->metadata.deletion_grace_period_seconds.set
                              ? pod->metadata.deletion_grace_period_seconds.v : -1));
      nl_pod_manager_set(&k->pods, pod);
      observe_status(k, pod);
      nl_pod_workers_update(&k->workers, pod, NL_SYNC_KILL, -1);
      deletion_after_finish(k, pod);
      break;
    case NL_POD_REMOVE:
      nl_pod_manager_remove(&k->pods, pod->metadata.uid);
      if (pod_is_static(pod)) static_removed(k, pod);
      else nl_pod_workers_update(&k->workers, pod, NL_SYNC_KILL, -1);
      if (k->probes_up) nl_probe_manager_remove_pod(&k->probes, pod->metadata.uid);
      nl__kubelet_resize_retry(k); /* upstream: pods removed */
      break;
    case NL_POD_RECONCILE: /* the API's status changed: keep the latest */
      if (!nl_pod_manager_get(&k->pods, pod->metadata.uid)) break;
      nl_pod_manager_set(&k->pods, pod);
      observe_status(k, pod);
      /* ... everywhere: the holders of the previous version let it go (the
       * workers hold the pod as allocated) */
      nl_pod_t *hold;
      nl_pod_workers_reconcile(&k->workers, nl__kubelet_resize_pod(k, pod, &hold));
      nl_pod_free(hold);
      /* a readiness gate's condition changed: Ready is to be regenerated */
      if (nl_pod_status_ready_needs_reconcile(pod))
        nl_pod_workers_sync_now(&k->workers, pod->metadata.uid);
      if (k->probes_up) nl_probe_manager_reconcile_pod(&k->probes, pod);
      break;
    }
  }
}

void nl__kubelet_pleg_event(const nl_pleg_event_t *ev, void *ctx) {
  nl_kubelet_t *k = ctx;
  nl_vlog(4, "pleg: %s %s %s", ev->uid, nl_pleg_event_type_name(ev->type),
          ev->container_id ? ev->container_id : "");
  /* upstream isSyncPodWorthy: a removed container changes nothing to act on. */
  if (ev->type == NL_PLEG_CONTAINER_REMOVED) return;
  nl_pod_workers_sync_now(&k->workers, ev->uid);
}

typedef struct overdue {
  nl_kubelet_t *k;
  char **uids;
  size_t n;
} overdue_t;

static void find_overdue(const nl_pod_t *pod, void *ctx) {
  overdue_t *o = ctx;
  if (!pod->spec.active_deadline_seconds.set ||
      nl_pod_workers_is_terminating(&o->k->workers, pod->metadata.uid))
    return;
  const pod_state_t *ps = nl_map_get(&o->k->pod_states, pod->metadata.uid);
  if (!ps || !ps->status || ps->status->phase == NL_POD_SUCCEEDED ||
      ps->status->phase == NL_POD_FAILED || !past_active_deadline(pod, ps->status->start_time))
    return;
  o->uids = nl_xrealloc(o->uids, (o->n + 1) * sizeof *o->uids);
  o->uids[o->n++] = nl_xstrdup(pod->metadata.uid);
}

/* The 1 s sync tick: pods whose resync is due, and (upstream's PodSyncLoopHandlers)
 * running pods past their activeDeadlineSeconds, so that they are failed on time.
 * The pods are scanned as they are (no sorted copy each second), and synced
 * after the scan. */
void nl__kubelet_pods_sync_tick(nl_kubelet_t *k) {
  nl_pod_workers_sync_due(&k->workers);
  overdue_t o = {.k = k};
  nl_pod_manager_foreach(&k->pods, find_overdue, &o);
  for (size_t i = 0; i < o.n; i++) {
    nl_pod_workers_sync_now(&k->workers, o.uids[i]);
    free(o.uids[i]);
  }
  free(o.uids);
}

/* ---- the syncer ---- */

static sync_call_t *call_new(nl_kubelet_t *k, nl_pod_work_t *w) {
  sync_call_t *c = nl_xcalloc(1, sizeof *c);
  c->k = k;
  c->w = w;
  nl_list_insert_tail(&k->calls, &c->link);
  return c;
}

static void call_finish(sync_call_t *c, const nl_err_t *err, bool terminal) {
  nl_list_remove(&c->link);
  nl_pod_work_t *w = c->w;
  nl_err_t *own = c->err;
  free(c);
  nl_pod_workers_complete(w, err, terminal);
  nl_err_free(&own);
}

/* Every sync reads runtime status newer than the last sync (upstream's
 * podCache.GetNewerThan), so it never acts on a view that misses what the
 * previous sync started; the first waits for a relist after start-up, which is
 * what adopts running pods after an agent restart instead of recreating them.
 * A relist is forced only when the cache is older than that: a periodic resync
 * or a sync that a relist's event started reads the cache as it is. */
static void wait_for_status(sync_call_t *c, nl_pleg_newer_cb cb) {
  nl_kubelet_t *k = c->k;
  pod_state_t *ps = state_get(k, c->w->uid);
  int64_t after = ps->last_sync_ns ? ps->last_sync_ns : k->started_ns;
  if (!nl_pleg_is_newer(&k->pleg, c->w->uid, after)) nl_pleg_force_relist(&k->pleg);
  nl_pleg_when_newer(&k->pleg, c->w->uid, after, cb, c);
}

static void log_result(const nl_pod_work_t *w, const char *what, const nl_sync_result_t *res) {
  if (!res->err) return;
  nl_info("%s pod %s/%s: %s", what, w->pod->metadata.namespace_, w->pod->metadata.name,
          nl_err_msg(res->err));
}

static void on_synced_status(const nl_rt_pod_status_t *st, void *ctx) {
  (void)st;
  sync_call_t *c = ctx;
  call_finish(c, c->err, refresh_status(c->k, c->w->pod, false));
}

/* The sync made a sandbox: the view from before it has none, and would turn
 * the PodReadyToStartContainers of nl__kubelet_sandbox_ready back to False. */
static bool made_sandbox(const nl_sync_result_t *res) {
  for (size_t i = 0; i < res->n_steps; i++)
    if (res->steps[i].action == NL_SYNC_CREATE_POD_SANDBOX && !res->steps[i].reason) return true;
  return false;
}

/* The status after a sync carries its reasons (ErrImagePull, CrashLoopBackOff)
 * at once, where upstream's waits for the next sync. It is made from a view of
 * the runtime from before the sync's actions or from after them, never from
 * a relist that ran between a container's create and its start: that one shows
 * the container created and not started, a Waiting state with no reason, which
 * upstream never publishes (its pod worker reads only a cache newer than the
 * end of the last sync). */
static void on_synced(const nl_sync_result_t *res, void *ctx) {
  sync_call_t *c = ctx;
  nl_kubelet_t *k = c->k;
  pod_state_t *ps = state_get(k, c->w->uid);
  ps->last_sync_ns = cache_now_ns();
  update_reasons(ps, res);
  nl__kubelet_resize_synced(k, c->w->pod, res);
  nl__kubelet_userns_synced(k, c->w->pod, res);
  log_result(c->w, "sync", res);
  /* A container in its crash-loop back-off: the pod syncs again when the
   * back-off ends, not after the pod workers' 10 s (upstream requeues at
   * MinBackoffExpiration), which a back-off shorter than 10 s needs
   * (crashLoopBackOff.maxContainerRestartPeriod). */
  if (res->backoff_until_ms) {
    uint64_t now = k->runtime.now_ms(k->runtime.now_ctx);
    c->w->retry_in_ms = res->backoff_until_ms > now ? (int64_t)(res->backoff_until_ms - now) : 0;
  }
  if (res->cancelled || (k->pleg.relists == c->relists && !made_sandbox(res))) {
    call_finish(c, res->err, !res->cancelled && refresh_status(k, c->w->pod, false));
    return;
  }
  if (res->err) c->err = nl_err_newf(res->err->code, "%s", nl_err_msg(res->err));
  nl_pleg_force_relist(&k->pleg);
  nl_pleg_when_newer(&k->pleg, c->w->uid, ps->last_sync_ns, on_synced_status, c);
}

static void on_sync_status(const nl_rt_pod_status_t *st, void *ctx);

/* The containers of an in-place restart are gone: the same sync goes on at
 * once with a view of the runtime without them, where the status says the
 * restart has begun and the pod starts again (upstream requeues the pod). */
static void on_reset(const nl_sync_result_t *res, void *ctx) {
  sync_call_t *c = ctx;
  nl_kubelet_t *k = c->k;
  pod_state_t *ps = state_get(k, c->w->uid);
  ps->last_sync_ns = cache_now_ns();
  log_result(c->w, "restart all containers of", res);
  if (res->cancelled || res->err) {
    call_finish(c, res->err, false);
    return;
  }
  nl_pleg_force_relist(&k->pleg);
  nl_pleg_when_newer(&k->pleg, c->w->uid, ps->last_sync_ns, on_sync_status, c);
}

static void on_sync_status(const nl_rt_pod_status_t *st, void *ctx) {
  sync_call_t *c = ctx;
  nl_kubelet_t *k = c->k;
  /* upstream generates the status from what the runtime showed before acting */
  if (refresh_status(k, c->w->pod, false) && st) {
    /* Terminal already (restartPolicy Never/OnFailure and done): nothing to run. */
    call_finish(c, NULL, true);
    return;
  }
  c->relists = k->pleg.relists;
  pod_state_t *ps = state_get(k, c->w->uid);
  if (nl_pod_status_restarting_all(ps->status)) {
    if (c->reset) { /* removed, yet the runtime still shows some: try again later */
      nl_err_t *err = nl_err_newf(NL_ERUNTIME, "pod %s/%s: containers left after their removal for the in-place restart",
                                  c->w->pod->metadata.namespace_, c->w->pod->metadata.name);
      call_finish(c, err, false);
      nl_err_free(&err);
      return;
    }
    c->reset = true;
    nl_info("pod %s/%s: a container's exit restarts all its containers in place",
            c->w->pod->metadata.namespace_, c->w->pod->metadata.name);
    nl_runtime_reset_pod(&k->runtime, c->w->pod, st, on_reset, c);
    return;
  }
  nl_runtime_sync_pod(&k->runtime, c->w->pod, st, on_synced, c);
}

static void sync_pod(nl_pod_work_t *w, void *ctx) {
  nl_kubelet_t *k = ctx;
  sync_call_t *c = call_new(k, w);
  if (k->stopping) return; /* completed when the pod state is freed */
  pod_state_t *ps = nl_map_get(&k->pod_states, w->uid);
  if (ps && ps->rejected_reason) {
    call_finish(c, NULL, true);
    return;
  }
  wait_for_status(c, on_sync_status);
}

static void on_killed_status(const nl_rt_pod_status_t *st, void *ctx) {
  (void)st;
  sync_call_t *c = ctx;
  if (nl_pod_manager_get(&c->k->pods, c->w->uid)) refresh_status(c->k, c->w->pod, true);
  call_finish(c, NULL, false);
}

/* upstream syncTerminatingPod: once the containers are stopped, the terminal
 * status comes from the runtime as it is then (GetPodStatus again), not from
 * the view before the kill: a container that exited on SIGTERM is terminated
 * with its own exit code, not "could not be located" (137), which is what the
 * containers still running in that view would get. */
/* The pod's DRA claims were unprepared (or that failed and was logged:
 * housekeeping tries again); its final status follows. */
static void on_unprepared(void *ctx) {
  sync_call_t *c = ctx;
  if (c->k->stopping) return; /* the call is freed with the others */
  wait_for_status(c, on_killed_status);
}

static void on_killed(const nl_sync_result_t *res, void *ctx) {
  sync_call_t *c = ctx;
  c->op = NULL;
  state_get(c->k, c->w->uid)->last_sync_ns = cache_now_ns();
  log_result(c->w, "kill", res);
  if (!res->cancelled && !res->err) {
    /* upstream: resources are unprepared after every container stopped and
     * before the pod's status changes on the API server */
    if (nl__kubelet_dra_unprepare(c->k, c->w->uid, on_unprepared, c)) return;
    wait_for_status(c, on_killed_status);
    return;
  }
  if (!res->cancelled && nl_pod_manager_get(&c->k->pods, c->w->uid))
    refresh_status(c->k, c->w->pod, true);
  call_finish(c, res->err, false);
}

static void on_terminating_status(const nl_rt_pod_status_t *st, void *ctx) {
  sync_call_t *c = ctx;
  /* the worker's: it may have shrunk since the token was made */
  int64_t grace = nl_pod_workers_grace(&c->k->workers, c->w->uid);
  if (grace < 0) grace = c->w->grace_seconds;
  nl_info("killing pod %s/%s with a grace period of %llds", c->w->pod->metadata.namespace_,
          c->w->pod->metadata.name, (long long)grace);
  c->op = nl_runtime_kill_pod(&c->k->runtime, c->w->pod, st, grace, on_killed, c);
}

/* A shorter grace period (a force delete): abandon the kill in flight; the
 * worker starts another with the new one, whose StopContainer calls shorten
 * the runtime's wait. */
static bool cancel_terminating(nl_pod_work_t *w, void *ctx) {
  nl_kubelet_t *k = ctx;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &k->calls) {
    sync_call_t *c = nl_list_entry(pos, sync_call_t, link);
    if (c->w != w || !c->op) continue;
    nl_runtime_cancel(c->op);
    call_finish(c, NULL, false);
    return true;
  }
  return false;
}

static void sync_terminating(nl_pod_work_t *w, void *ctx) {
  nl_kubelet_t *k = ctx;
  sync_call_t *c = call_new(k, w);
  if (k->stopping) return;
  wait_for_status(c, on_terminating_status);
}

static void on_removed(const nl_sync_result_t *res, void *ctx) {
  sync_call_t *c = ctx;
  log_result(c->w, "remove", res);
  if (!res->err && !nl_pod_manager_get(&c->k->pods, c->w->uid))
    state_free(nl_map_del(&c->k->pod_states, c->w->uid));
  call_finish(c, res->err, false);
}

static void on_terminated_status(const nl_rt_pod_status_t *st, void *ctx) {
  sync_call_t *c = ctx;
  if (!st) {
    on_removed(&(nl_sync_result_t){0}, c);
    return;
  }
  /* The pod's final status (upstream syncTerminatedPod), from the runtime as it
   * is now, with every container stopped and before they are removed: a
   * terminal phase, which a deleted pod needs before its API object goes. */
  if (nl_pod_manager_get(&c->k->pods, c->w->uid)) refresh_status(c->k, c->w->pod, true);
  nl_runtime_remove_pod(&c->k->runtime, st, true, on_removed, c);
}

static void on_volumes_released(const nl_err_t *err, void *ctx) {
  sync_call_t *c = ctx;
  nl_kubelet_t *k = c->k;
  if (err) nl_warn("pod %s: release volumes: %s", c->w->uid, nl_err_msg(err));
  call_finish(c, NULL, false);
  nl__kubelet_release(k); /* held over the thread-pool work */
}

/* A finished pod that a source still lists keeps its dead containers for logs
 * and status; one that no source wants, or that is being deleted (upstream's
 * ShouldPodContentBeRemoved), is removed with its sandbox and directories. */
static void sync_terminated(nl_pod_work_t *w, void *ctx) {
  nl_kubelet_t *k = ctx;
  sync_call_t *c = call_new(k, w);
  if (k->stopping) return;
  /* upstream syncTerminatedPod: its containers are stopped, its user
   * namespace's ids can go to another pod */
  nl__kubelet_userns_release(k, w->uid);
  const nl_pod_t *wanted = nl_pod_manager_get(&k->pods, w->uid);
  if (wanted && !wanted->metadata.deletion_timestamp) {
    /* A terminated pod gives its volumes back (upstream's syncTerminatedPod
     * waits for the volume manager to unmount them; an emptyDir's data goes
     * with it, a memory-backed one's memory too, and the pressure that evicted
     * a pod with it). */
    if (nl_volumes_release(k->loop, k->cfg->root_dir, w->uid, on_volumes_released, c) == 0) {
      k->pending++;
      return;
    }
    call_finish(c, NULL, false);
    return;
  }
  wait_for_status(c, on_terminated_status);
}

static void pod_finished(const char *uid, void *ctx) {
  nl_kubelet_t *k = ctx;
  nl__kubelet_shutdown_pod_finished(k, uid);
  nl__kubelet_resize_retry(k); /* upstream: a pod terminated */
  if (static_finished(k, uid)) {
    nl__kubelet_preempt_pod_finished(k, start_pod);
    return;
  }
  /* Its final status (upstream TerminatePod: a terminal phase even for a pod
   * that never ran); a deleted API pod whose containers are gone is then
   * deleted from the API by the status manager. */
  const nl_pod_t *pod = nl_pod_manager_get(&k->pods, uid);
  pod_state_t *ps = pod ? nl_map_get(&k->pod_states, uid) : NULL;
  if (pod && ps && ps->status) {
    /* (a pod refused at admission never reaches upstream's pod workers) */
    if (!ps->rejected_reason || !strcmp(ps->rejected_reason, "Evicted"))
      nl_pod_status_terminate(ps->status, pod);
    report_status(k, pod, ps->status, true);
  }
  /* the critical pods that waited for it start after its final status */
  nl__kubelet_preempt_pod_finished(k, start_pod);
}

/* The kubelet kills the pod itself: its status says why, with DisruptionTarget. */
static void mark_killed(nl_kubelet_t *k, const nl_pod_t *pod, const char *reason,
                        const char *message, const char *condition) {
  pod_state_t *ps = state_get(k, pod->metadata.uid);
  free(ps->killed_reason);
  free(ps->killed_message);
  free(ps->killed_condition);
  ps->killed_reason = nl_xstrdup(reason);
  ps->killed_message = nl_xstrdup(message);
  ps->killed_condition = condition ? nl_xstrdup(condition) : NULL;
}

void nl__kubelet_pods_terminate(nl_kubelet_t *k, const nl_pod_t *pod, int64_t grace_seconds,
                                const char *reason, const char *message, const char *condition) {
  mark_killed(k, pod, reason, message, condition);
  nl_pod_workers_update(&k->workers, pod, NL_SYNC_KILL, grace_seconds);
}

const nl_pod_syncer_t nl__kubelet_syncer = {sync_pod, sync_terminating, sync_terminated,
                                             cancel_terminating, pod_finished};

/* ---- housekeeping ---- */

static void orphan_done(orphan_t *o) { orphan_free(nl_map_del(&o->k->orphans, o->uid)); }

static void on_orphan_removed(const nl_sync_result_t *res, void *ctx) {
  orphan_t *o = ctx;
  o->op = NULL;
  if (res->err) nl_warn("remove orphaned pod %s: %s", o->uid, nl_err_msg(res->err));
  orphan_done(o);
}

static void on_orphan_killed(const nl_sync_result_t *res, void *ctx) {
  orphan_t *o = ctx;
  o->op = NULL;
  const nl_rt_pod_status_t *st = res->cancelled ? NULL : nl_pleg_get(&o->k->pleg, o->uid);
  if (res->err || !st) {
    if (res->err) nl_warn("kill orphaned pod %s: %s", o->uid, nl_err_msg(res->err));
    orphan_done(o);
    return;
  }
  o->op = nl_runtime_remove_pod(&o->k->runtime, st, true, on_orphan_removed, o);
}

/* ctx of kill_orphan: the agent and the pod directories under its root-dir. */
typedef struct orphan_scan {
  nl_kubelet_t *k;
  nl_map_t *dirs;
} orphan_scan_t;

static bool kill_orphan(const nl_rt_pod_status_t *st, void *ctx) {
  orphan_scan_t *sc = ctx;
  nl_kubelet_t *k = sc->k;
  if (nl_pod_manager_get(&k->pods, st->uid) || nl_pod_workers_get(&k->workers, st->uid) ||
      nl_map_has(&k->orphans, st->uid))
    return true;
  /* Every pod this agent creates has <root-dir>/pods/<uid> from before its
   * sandbox until after its removal; a runtime pod without one was made by
   * another agent sharing the runtime (another root-dir) and is not ours to
   * stop. Upstream assumes one kubelet per runtime and stops them all. */
  if (!nl_map_has(sc->dirs, st->uid)) return true;
  nl_info("pod %s/%s (%s) is not wanted by any source: stopping and removing it",
          st->namespace_ ? st->namespace_ : "", st->name ? st->name : "", st->uid);
  orphan_t *o = nl_xcalloc(1, sizeof *o);
  o->k = k;
  o->uid = nl_xstrdup(st->uid);
  nl_map_put(&k->orphans, o->uid, o);
  o->op = nl_runtime_kill_pod(&k->runtime, NULL, st, -1, on_orphan_killed, o);
  return true;
}

static bool pod_is_wanted(void *ctx, const char *uid) {
  return nl_pod_manager_get(&((nl_kubelet_t *)ctx)->pods, uid) != NULL;
}

static bool pod_is_known(nl_kubelet_t *k, const char *uid) {
  return nl_pod_manager_get(&k->pods, uid) || nl_pod_workers_get(&k->workers, uid) ||
         nl_map_has(&k->orphans, uid) || nl_pleg_get(&k->pleg, uid);
}

/* upstream killing of unwanted runtime pods, then cleanupOrphanedPodDirs: a
 * directory under <root-dir>/pods whose pod is neither wanted, nor worked on,
 * nor in the runtime is removed (volumes torn down first), e.g. one left by a
 * pod removed while the agent was down. */
static void on_pods_dir_scanned(uv_fs_t *req) {
  nl_kubelet_t *k = container_of(req, nl_kubelet_t, pods_dir_scan);
  uv_dirent_t ent;
  nl_map_t dirs;
  nl_map_init(&dirs);
  k->pods_dir_scanning = false;
  while (req->result > 0 && uv_fs_scandir_next(req, &ent) != UV_EOF)
    if (ent.type == UV_DIRENT_DIR) nl_map_put(&dirs, ent.name, (void *)1);
  uv_fs_req_cleanup(req);
  if (!k->stopping) {
    /* Runtime pods first: an orphan being killed keeps its directory. */
    nl_pleg_foreach(&k->pleg, kill_orphan, &(orphan_scan_t){k, &dirs});
    nl_map_iter_t it;
    const char *uid;
    nl_map_iter_init(&it, &dirs);
    while (nl_map_iter_next(&it, &uid, NULL)) {
      if (pod_is_known(k, uid)) continue;
      nl_info("removing the directory of orphaned pod %s", uid);
      orphan_t *o = nl_xcalloc(1, sizeof *o);
      o->k = k;
      o->uid = nl_xstrdup(uid);
          nl_map_put(&k->orphans, o->uid, o);
      nl_rt_pod_status_t st = {.uid = o->uid};
      o->op = nl_runtime_remove_pod(&k->runtime, &st, true, on_orphan_removed, o);
    }
  }
  nl_map_free(&dirs, NULL);
  nl__kubelet_release(k);
}

static void scan_pods_dir(nl_kubelet_t *k) {
  if (k->pods_dir_scanning) return;
  char *dir = nl_xasprintf("%s/pods", k->cfg->root_dir);
  if (uv_fs_scandir(k->loop, &k->pods_dir_scan, dir, 0, on_pods_dir_scanned) == 0) {
    k->pods_dir_scanning = true;
    k->pending++;
  }
  free(dir);
}

/* upstream GetActivePods for the device manager: known, admitted, not
 * terminal. */
bool nl__kubelet_pod_active(void *ctx, const char *uid) {
  nl_kubelet_t *k = ctx;
  if (!nl_pod_manager_get(&k->pods, uid)) return false;
  pod_state_t *ps = nl_map_get(&k->pod_states, uid);
  if (!ps) return true;
  if (ps->rejected_reason) return false;
  return !ps->status || (ps->status->phase != NL_POD_SUCCEEDED && ps->status->phase != NL_POD_FAILED);
}

void nl__kubelet_pods_housekeeping(nl_kubelet_t *k) {
  if (k->devices_up) nl_devices_release_inactive(&k->devices);
  nl__kubelet_dra_housekeeping(k);
  /* Nothing is deleted on the strength of a partial view of what is wanted. */
  bool ready = nl_pod_config_sources_ready(&k->pod_config) && k->pleg.relists;
  nl__kubelet_resize_housekeeping(k, ready);
  if (!ready) return;
  nl_pod_workers_sync_known(&k->workers, pod_is_wanted, k);
  scan_pods_dir(k); /* then the orphaned runtime pods and directories */
  nl__kubelet_userns_cleanup(k, pod_is_known);
  /* Forget the state of pods that are gone everywhere. */
  nl_map_iter_t it;
  const char *uid;
  nl_map_iter_init(&it, &k->pod_states);
  while (nl_map_iter_next(&it, &uid, NULL)) {
    if (nl_pod_manager_get(&k->pods, uid) || nl_pod_workers_get(&k->workers, uid)) continue;
    char *id = nl_xstrdup(uid); /* the map's key goes with the entry */
    state_free(nl_map_del(&k->pod_states, id));
    if (k->node_up) nl_status_manager_remove(&k->statuses, id);
    if (k->tokens_up) nl_tokens_forget_pod(&k->tokens, id);
    free(id);
  }
}

bool nl__kubelet_pod_finished(nl_kubelet_t *k, const nl_pod_t *pod) {
  pod_state_t *ps = nl_map_get(&k->pod_states, pod->metadata.uid);
  return ps && (ps->rejected_reason || (ps->status && (ps->status->phase == NL_POD_SUCCEEDED ||
                                                       ps->status->phase == NL_POD_FAILED)));
}

/* ---- eviction ---- */

const nl_pod_t **nl__kubelet_pods_active(nl_kubelet_t *k, size_t *n) {
  size_t all, m = 0;
  const nl_pod_t **pods = nl_pod_manager_list(&k->pods, &all);
  for (size_t i = 0; i < all; i++) {
    pod_state_t *ps = nl_map_get(&k->pod_states, pods[i]->metadata.uid);
    if ((ps && ps->rejected_reason) || nl_pod_workers_is_terminating(&k->workers, pods[i]->metadata.uid) ||
        !nl_pod_workers_get(&k->workers, pods[i]->metadata.uid))
      continue;
    pods[m++] = pods[i];
  }
  *n = m;
  return pods;
}

void nl__kubelet_pods_evict(nl_kubelet_t *k, const nl_pod_t *pod, int64_t grace_seconds,
                            const char *message, const nl_kvlist_t *annotations,
                            bool condition) {
  fail_pod(k, pod, "Evicted", nl_xstrdup(message));
  if (condition) mark_killed(k, pod, "Evicted", message, NULL); /* DisruptionTarget */
  nl_event_ref_t ref = nl_event_pod_ref(pod);
  nl_events_record_annotated(&k->events, &ref, annotations, NL_EVENT_WARNING, "Evicted",
                             message);
  refresh_status(k, pod, true);
  nl_pod_workers_update(&k->workers, pod, NL_SYNC_KILL, grace_seconds);
}

/* ---- --runonce ---- */

size_t nl__kubelet_pods_not_running(nl_kubelet_t *k, size_t *total) {
  size_t n, waiting = 0;
  const nl_pod_t **pods = nl_pod_manager_list(&k->pods, &n);
  for (size_t i = 0; i < n; i++) {
    pod_state_t *ps = nl_map_get(&k->pod_states, pods[i]->metadata.uid);
    if (!ps || !ps->status || ps->rejected_reason ||
        (ps->status->phase != NL_POD_RUNNING && ps->status->phase != NL_POD_SUCCEEDED))
      waiting++;
  }
  free(pods);
  *total = n;
  return waiting;
}

/* ---- /containerLogs (upstream validateContainerLogStatus) ---------------- */

static char *cri_id(const char *container_id) {
  const char *p = strstr(container_id, "://");
  return nl_xstrdup(p ? p + 3 : container_id);
}

static bool has_id(const nl_cstate_t *s) {
  return s->kind == NL_CSTATE_TERMINATED && s->container_id && *s->container_id;
}

int nl__kubelet_container_for_logs(nl_kubelet_t *k, const char *ns, const char *name,
                                   const char *container, bool previous, char **id, char **msg) {
  *id = *msg = NULL;
  const nl_pod_t *pod = nl_pod_manager_get_by_name(&k->pods, ns, name);
  if (!pod) {
    *msg = nl_xasprintf("pod \"%s\" does not exist", name);
    return 404;
  }
  bool in_spec = false;
  for (size_t i = 0; i < pod->spec.n_containers; i++)
    if (strcmp(pod->spec.containers[i].name, container) == 0) in_spec = true;
  for (size_t i = 0; i < pod->spec.n_init_containers; i++)
    if (strcmp(pod->spec.init_containers[i].name, container) == 0) in_spec = true;
  for (size_t i = 0; i < pod->spec.n_ephemeral_containers; i++)
    if (strcmp(pod->spec.ephemeral_containers[i].name, container) == 0) in_spec = true;
  if (!in_spec) {
    *msg = nl_xasprintf("container \"%s\" not found in pod \"%s\"", container, name);
    return 404;
  }
  pod_state_t *ps = nl_map_get(&k->pod_states, pod->metadata.uid);
  const nl_container_status_t *cs = NULL;
  if (ps && ps->status) {
    const nl_pod_status_t *st = ps->status;
    for (size_t i = 0; i < st->n_container_statuses; i++)
      if (strcmp(st->container_statuses[i].name, container) == 0) cs = &st->container_statuses[i];
    for (size_t i = 0; i < st->n_init_container_statuses; i++)
      if (strcmp(st->init_container_statuses[i].name, container) == 0)
        cs = &st->init_container_statuses[i];
    for (size_t i = 0; i < st->n_ephemeral_container_statuses; i++)
      if (strcmp(st->ephemeral_container_statuses[i].name, container) == 0)
        cs = &st->ephemeral_container_statuses[i];
  }
  if (!cs) {
    *msg = nl_xasprintf("container \"%s\" in pod \"%s\" is not available", container, name);
    return 400;
  }
  const nl_cstate_t *last = &cs->last_state, *now = &cs->state;
  if (previous) {
    if (!has_id(last)) {
      *msg = nl_xasprintf("previous terminated container \"%s\" in pod \"%s\" not found",
                          container, name);
      return 400;
    }
    *id = cri_id(last->container_id);
  } else if (now->kind == NL_CSTATE_RUNNING && cs->container_id) {
    *id = cri_id(cs->container_id);
  } else if (now->kind == NL_CSTATE_TERMINATED || last->kind == NL_CSTATE_TERMINATED) {
    const nl_cstate_t *t = has_id(now) ? now : has_id(last) ? last : NULL;
    if (!t) {
      *msg = nl_xasprintf("container \"%s\" in pod \"%s\" is terminated", container, name);
      return 400;
    }
    *id = cri_id(t->container_id);
  } else if (now->kind == NL_CSTATE_WAITING) {
    const char *r = now->reason ? now->reason : "";
    const char *why = strcmp(r, "ErrImagePull") == 0       ? "image can't be pulled"
                      : strcmp(r, "ImagePullBackOff") == 0 ? "trying and failing to pull image"
                                                           : r;
    *msg = nl_xasprintf("container \"%s\" in pod \"%s\" is waiting to start: %s", container,
                        name, why);
    return 400;
  } else {
    *msg = nl_xasprintf("container \"%s\" in pod \"%s\" is waiting to start - no logs yet",
                        container, name);
    return 400;
  }
  return 0;
}
