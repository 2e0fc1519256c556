/* The agent's part in a cluster (kubelet_node.c): the API client and the node
 * manager when a kubeconfig is given. Internal to agent/. */
#ifndef NL_KUBELET_NODE_H
#define NL_KUBELET_NODE_H

#include "agent/kubelet.h"

/* creds NULL: standalone. Otherwise makes the API client (and the bootstrap
 * client and the client certificate manager when they are needed) and the node
 * manager (a CRI user). Returns 0, or -1 with *err (a kubeconfig item the
 * client cannot use, a bad taint or reservation). */
int nl__kubelet_node_init(nl_kubelet_t *k, const nl_kubelet_creds_t *creds, nl_err_t **err);
/* serverTLSBootstrap: the serving certificate manager, after the kubelet
 * server is made. Returns 0, or -1 with *err. */
int nl__kubelet_server_certs_init(nl_kubelet_t *k, const nl_kubelet_creds_t *creds,
                                  nl_err_t **err);
void nl__kubelet_node_start(nl_kubelet_t *k);
/* Registers (ADD, UPDATE, DELETE) or unregisters (REMOVE, or any operation on
 * a pod in phase Succeeded or Failed) the ConfigMaps and Secrets a pod
 * references; nothing when standalone. */
void nl__kubelet_objects_update(nl_kubelet_t *k, nl_pod_op_t op, const nl_pod_t *pod);
/* Stops the node manager, then the event recorder (flushing for at most a
 * second), then the API client; the node manager's stop releases one CRI user
 * (nl__kubelet_cri_user_stopped). */
void nl__kubelet_node_stop(nl_kubelet_t *k);

#endif
