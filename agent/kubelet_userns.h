/* Pod user namespaces in the kubelet (upstream kubelet.go's usernsManager,
 * kubelet_pods.go getKubeletMappings, kuberuntime_manager.go's metrics):
 * the node's range from the subordinate ids of the user `kubelet`, the
 * allocations read back at start, released when a pod has terminated or is
 * gone, and kubelet_started_user_namespaced_pods{,_errors}_total. */
#ifndef NL_KUBELET_USERNS_H
#define NL_KUBELET_USERNS_H

#include "agent/kubelet.h"

/* At start, before the runtime manager: the range (getsubids, blocking: the
 * loop does not run yet), checked against idsPerPod and maxPods, and every
 * pod directory's allocation. Fails the start as upstream does. */
int nl__kubelet_userns_init(nl_kubelet_t *k, nl_err_t **err);
void nl__kubelet_userns_free(nl_kubelet_t *k);

/* The runtime manager's supports_userns (nl_runtime_opts_t). */
int nl__kubelet_supports_userns(void *ctx, const char *handler);

/* A sync ended: one that made (or tried to make) the sandbox of a pod with
 * `hostUsers: false` counts a started user-namespaced pod, and an error when
 * any of its steps failed (upstream SyncPod). */
void nl__kubelet_userns_synced(nl_kubelet_t *k, const nl_pod_t *pod, const nl_sync_result_t *res);

/* The pod terminated (upstream syncTerminatedPod): its slot goes back and its
 * file is removed (on the thread pool). */
void nl__kubelet_userns_release(nl_kubelet_t *k, const char *uid);

/* Housekeeping (upstream CleanupOrphanedPodUsernsAllocations): the slots of
 * pods no longer known (is_known: wanted, worked on or in the runtime) go
 * back; housekeeping removes their directories. */
void nl__kubelet_userns_cleanup(nl_kubelet_t *k, bool (*is_known)(nl_kubelet_t *k, const char *uid));

#endif
