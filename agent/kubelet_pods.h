/* The pod side of the kubelet: the handlers of pod updates from the sources
 * (upstream HandlePodAdditions/Updates/Removes), admission, the pod workers'
 * syncer (SyncPod, SyncTerminatingPod, SyncTerminatedPod over the runtime, PLEG
 * and the status generator), housekeeping and the /pods list. Internal to agent/:
 * kubelet.c owns the handles and calls these. */
#ifndef NL_KUBELET_PODS_H
#define NL_KUBELET_PODS_H

#include "agent/kubelet.h"
#include "managers/admission.h"
#include "sources/config.h"

/* Sets up the pod state (no handles). */
int nl__kubelet_pods_init(nl_kubelet_t *k, nl_err_t **err);
/* Frees the pod state; every manager with handles has stopped by then. */
void nl__kubelet_pods_free(nl_kubelet_t *k);

/* sources/config.h callback. */
void nl__kubelet_pods_update(nl_pod_op_t op, const char *source, const nl_pod_t *const *pods,
                             size_t n, void *ctx);
/* managers/pleg.h callback. */
void nl__kubelet_pleg_event(const nl_pleg_event_t *ev, void *ctx);
/* The 1 s tick: pods due for resync. */
void nl__kubelet_pods_sync_tick(nl_kubelet_t *k);
/* The 2 s tick: forget what is gone, kill what no source wants. */
void nl__kubelet_pods_housekeeping(nl_kubelet_t *k);
/* The pod was rejected or has reached Succeeded or Failed. */
bool nl__kubelet_pod_finished(nl_kubelet_t *k, const nl_pod_t *pod);
/* --runonce: how many of the wanted pods are not Running (or Succeeded) yet. */
size_t nl__kubelet_pods_not_running(nl_kubelet_t *k, size_t *total);
/* The pods the eviction manager may evict (admitted, not terminating); the
 * caller frees the array. */
const nl_pod_t **nl__kubelet_pods_active(nl_kubelet_t *k, size_t *n);
/* upstream evictPod: the pod is Failed with reason Evicted and the message
 * (and the DisruptionTarget condition with it when condition), an Evicted
 * event is recorded with annotations (may be NULL), and the pod is killed with
 * the grace period. */
void nl__kubelet_pods_evict(nl_kubelet_t *k, const nl_pod_t *pod, int64_t grace_seconds,
                            const char *message, const nl_kvlist_t *annotations,
                            bool condition);
/* nl_runtime_opts_t.allocatable: the Node's status.allocatable as the API
 * server has it (nothing standalone or before registration). */
/* The admitted pods that are not terminating, but except_uid (may be NULL),
 * as allocated (upstream getAllocatedPods): borrowed pods, or copies in
 * holds[i]; release all with nl__kubelet_pods_admitted_free. */
const nl_pod_t **nl__kubelet_pods_admitted(nl_kubelet_t *k, const char *except_uid, size_t *n,
                                          nl_pod_t ***holds);
void nl__kubelet_pods_admitted_free(const nl_pod_t **pods, nl_pod_t **holds, size_t n);
/* The Node as admission sees it: the API's, or the configuration's when there
 * is none yet (free with nl_admit_node_free). */
void nl__kubelet_admit_node(nl_kubelet_t *k, nl_admit_node_t *node);
/* A pod from a file or URL (upstream kubetypes.IsStaticPod: any source but
 * the API server). */
bool nl__kubelet_pod_is_static(const nl_pod_t *pod);
void nl__kubelet_allocatable(void *ctx, nl_runtime_allocatable_t *out);
/* The runtime's sandbox_ready: the pod's PodReadyToStartContainers goes True
 * in its status at once (upstream's OnPodSandboxReady). */
void nl__kubelet_sandbox_ready(void *ctx, const nl_pod_t *pod);
/* nl_runtime_opts_t's supports_rro: what the node manager's last runtime
 * Status said of the handler; false without a node manager (standalone). */
bool nl__kubelet_supports_rro(void *ctx, const char *handler);
/* Whether a pod holds its devices (the device manager's pod_active). */
bool nl__kubelet_pod_active(void *ctx, const char *uid);
/* GET /pods. */
void nl__kubelet_pods_json(void *ctx, nl_buf_t *out);

/* /containerLogs: the CRI id of a pod's container (the previous instance with
 * previous), from the pod's status as upstream. Returns 0 with *id (owned), or
 * 404/400 with upstream's message in *msg (owned). */
int nl__kubelet_container_for_logs(nl_kubelet_t *k, const char *ns, const char *name,
                                   const char *container, bool previous, char **id, char **msg);

/* Probes: the manager (a CRI user: cri_users++), its results wired into the
 * runtime (liveness, startup) and status (startup, readiness). */
int nl__kubelet_probes_init(nl_kubelet_t *k, nl_err_t **err);

extern const nl_pod_syncer_t nl__kubelet_syncer;

/* upstream TerminatePodAbnormally: kills the pod (its worker's grace period
 * becomes at most grace_seconds) and, once its containers have stopped, reports
 * it Failed (unless it Succeeded) with reason and message (copied) and the
 * DisruptionTarget condition (its message condition, or message when NULL).
 * The pod never runs again. */
void nl__kubelet_pods_terminate(nl_kubelet_t *k, const nl_pod_t *pod, int64_t grace_seconds,
                                const char *reason, const char *message, const char *condition);

/* Drops one of the kubelet's pending stop counts (kubelet.c). */
void nl__kubelet_release(nl_kubelet_t *k);
/* One CRI user has stopped; the last one stops the CRI client. */
void nl__kubelet_cri_user_stopped(nl_kubelet_t *k);

#endif
