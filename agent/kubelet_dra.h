/* Dynamic Resource Allocation in the agent (agent/kubelet_dra.c): the plugin
 * manager on <root-dir>/plugins_registry with the DRA manager as its DRAPlugin
 * handler; the runtime manager prepares a pod's claims before its sandbox and
 * hands each container the CDI devices of its claims; housekeeping
 * unprepares what no pod uses. */
#ifndef NL_KUBELET_DRA_H
#define NL_KUBELET_DRA_H

#include "agent/kubelet.h"

/* Starts both managers. Returns 0, or -1 with *err (the registration
 * directory cannot be made). */
int nl__kubelet_dra_start(nl_kubelet_t *k, nl_err_t **err);
/* Before the runtime manager: preparations in flight are answered. */
void nl__kubelet_dra_stop(nl_kubelet_t *k);
/* The runtime manager's hooks (nl_runtime_opts_t.dra_prepare, .devices: the
 * device plugins' answers and the container's CDI devices of its claims). */
bool nl__kubelet_dra_prepare(void *ctx, const nl_pod_t *pod,
                             void (*done)(void *arg, const char *err), void *arg);
bool nl__kubelet_container_devices(void *ctx, const nl_pod_t *pod, const nl_container_t *c,
                                   void (*done)(void *arg,
                                                V1beta1__ContainerAllocateResponse *const *resps,
                                                size_t n, const char *err),
                                   void *arg);
void nl__kubelet_dra_housekeeping(nl_kubelet_t *k);
/* The health of the pod's claims' devices in its container statuses
 * (allocatedResourcesStatus), when the ResourceHealthStatus gate is on. */
void nl__kubelet_dra_status(nl_kubelet_t *k, const nl_pod_t *pod, nl_pod_status_t *st);
/* The pod's containers are stopped: its claims are unprepared now, before its
 * final status (upstream's syncTerminatingPod). Returns true when done will
 * run (once the drivers answered), false when there was nothing to do. */
bool nl__kubelet_dra_unprepare(nl_kubelet_t *k, const char *uid, void (*done)(void *ctx),
                               void *ctx);

#endif
