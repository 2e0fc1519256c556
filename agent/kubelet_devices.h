/* The device manager of the agent (agent/kubelet_devices.c): device plugins
 * register on <root-dir>/device-plugins/kubelet.sock; their resources reach
 * the Node's status, admission and the containers' configs, and the pod
 * resources API (<root-dir>/pod-resources/kubelet.sock) tells node agents
 * which pod holds which device. */
#ifndef NL_KUBELET_DEVICES_H
#define NL_KUBELET_DEVICES_H

#include "agent/kubelet.h"

/* Serves the Registration service. Returns 0, or -1 with *err (the socket
 * cannot be served: upstream's kubelet does not start either). */
int nl__kubelet_devices_start(nl_kubelet_t *k, nl_err_t **err);
/* The pod resources API on <root-dir>/pod-resources/kubelet.sock, after the
 * device manager and the DRA manager. Returns 0, or -1 with *err (upstream's
 * kubelet exits too). */
int nl__kubelet_podres_start(nl_kubelet_t *k, nl_err_t **err);
/* Before the device manager and the DRA manager, whose assignments and claims
 * it reads. */
void nl__kubelet_podres_stop(nl_kubelet_t *k);
/* Before the runtime manager: container requests in flight are answered. */
void nl__kubelet_devices_stop(nl_kubelet_t *k);
/* The runtime manager's hook (nl_runtime_opts_t.devices). */
bool nl__kubelet_devices_container(void *ctx, const nl_pod_t *pod, const nl_container_t *c,
                                   void (*done)(void *arg,
                                                V1beta1__ContainerAllocateResponse *const *resps,
                                                size_t n, const char *err),
                                   void *arg);
/* The node manager's hook (nl_node_deps_t.extended). */
nl_node_extended_t *nl__kubelet_devices_extended(nl_kubelet_t *k, size_t *n);
/* The health of the pod's devices in its container statuses
 * (allocatedResourcesStatus), when the ResourceHealthStatus gate is on. */
void nl__kubelet_devices_status(nl_kubelet_t *k, const nl_pod_t *pod, nl_pod_status_t *st);
/* Admission: true, or false with the reason and an allocated message. */
bool nl__kubelet_devices_admit(nl_kubelet_t *k, const nl_pod_t *pod, const char **reason,
                               char **msg);

#endif
