/* In-place pod resize in the kubelet (upstream kubelet.go HandlePodUpdates'
 * resize handling, the allocation manager's retries, the status additions;
 * managers/resize.h holds the state): which pod the workers sync, the
 * allocation decision, the resize conditions and status fields. */
#ifndef NL_KUBELET_RESIZE_H
#define NL_KUBELET_RESIZE_H

#include "agent/kubelet.h"
#include "managers/status.h"

/* Reads the checkpoint (start-up, before the runtime manager is made). */
int nl__kubelet_resize_init(nl_kubelet_t *k, nl_err_t **err);
/* After the runtime manager has stopped (its last user): the write in flight
 * ends first. */
void nl__kubelet_resize_stop(nl_kubelet_t *k);

/* The pod as allocated, for the pod workers: pod itself, or a copy with the
 * allocated cpu and memory in *hold (release it with nl_pod_free once handed
 * over). */
const nl_pod_t *nl__kubelet_resize_pod(nl_kubelet_t *k, const nl_pod_t *pod, nl_pod_t **hold);
/* A pod was admitted: its allocation is its spec, unless one is on record
 * (an agent restart), in which case a difference is a resize to decide. */
void nl__kubelet_resize_admitted(nl_kubelet_t *k, const nl_pod_t *pod);
/* The source updated a pod: a resize is decided (allocated, Deferred or
 * Infeasible), a reverted one forgotten. */
void nl__kubelet_resize_updated(nl_kubelet_t *k, const nl_pod_t *pod);
/* Pending resizes are decided again (a pod went away: room was made). */
void nl__kubelet_resize_retry(nl_kubelet_t *k);
/* Every 2 s: the periodic retry (30 s), and the state of pods gone
 * everywhere is dropped (only once the sources are ready). */
void nl__kubelet_resize_housekeeping(nl_kubelet_t *k, bool sources_ready);
/* A sync ended: a failed resize sets PodResizeInProgress to Error with the
 * runtime's message (upstream), and an event. */
void nl__kubelet_resize_synced(nl_kubelet_t *k, const nl_pod_t *pod, const nl_sync_result_t *res);
/* Adds to a generated status: the containers' allocatedResources and
 * resources, and the resize conditions (PodResizeInProgress set or cleared
 * from the runtime's view first, with the ResizeCompleted event). */
void nl__kubelet_resize_status(nl_kubelet_t *k, const nl_pod_t *pod, const nl_rt_pod_status_t *rt,
                               nl_pod_status_t *st, int64_t now_ns);

#endif
