/* The desired pods (upstream pkg/kubelet/pod/pod_manager.go): what the sources
 * want on this node, by UID and by namespace/name. Holds a reference to each
 * pod (nl_pod_ref), the version its source decoded.
 *
 * Mirror pods (API pods with the kubernetes.io/config.mirror annotation: the API
 * server's stand-ins for static pods, created by the status manager) are kept
 * apart: they never run, never appear in get/list, and are found by the static
 * pod's namespace/name (upstream GetMirrorPodByPod). */
#ifndef NL_POD_MANAGER_H
#define NL_POD_MANAGER_H

#include <stddef.h>

#include "agent/model/pod.h"
#include "reactor/map.h"

typedef struct nl_pod_index {
  nl_map_t by_uid;      /* uid -> nl_pod_t* (a reference) */
  nl_map_t by_fullname; /* "namespace/name" -> nl_pod_t* (borrowed from by_uid) */
} nl_pod_index_t;

/* Told after a mirror pod was added, changed (mirror set) or removed (mirror
 * NULL); ns and name are the mirror's, which are its static pod's. */
typedef void (*nl_pod_manager_mirror_cb)(void *ctx, const char *ns, const char *name,
                                         const nl_pod_t *mirror);

typedef struct nl_pod_manager {
  nl_pod_index_t pods;
  nl_pod_index_t mirrors;
  nl_pod_manager_mirror_cb mirror_cb;
  void *mirror_ctx;
} nl_pod_manager_t;

void nl_pod_manager_init(nl_pod_manager_t *m);
void nl_pod_manager_free(nl_pod_manager_t *m);
/* Adds or replaces the pod with its UID (referenced); a mirror pod goes with the
 * mirrors (and the mirror callback runs). */
void nl_pod_manager_set(nl_pod_manager_t *m, const nl_pod_t *pod);
/* Removes the pod or mirror pod with this uid, if any. */
void nl_pod_manager_remove(nl_pod_manager_t *m, const char *uid);
/* Borrowed until the pod is set again or removed; NULL when absent. Never a
 * mirror pod. */
const nl_pod_t *nl_pod_manager_get(const nl_pod_manager_t *m, const char *uid);
const nl_pod_t *nl_pod_manager_get_by_name(const nl_pod_manager_t *m, const char *ns,
                                           const char *name);
size_t nl_pod_manager_count(const nl_pod_manager_t *m);
/* The pods in an array the caller frees (not the pods), sorted by namespace/name. */
const nl_pod_t **nl_pod_manager_list(const nl_pod_manager_t *m, size_t *n);
/* fn on each pod, in no order, with nothing allocated (the periodic scans);
 * fn must not change the manager. */
void nl_pod_manager_foreach(const nl_pod_manager_t *m, void (*fn)(const nl_pod_t *pod, void *ctx),
                            void *ctx);

/* The mirror pod of the static pod ns/name (upstream GetMirrorPodByPod), with
 * the API's uid, annotations (config.mirror holds the static pod's hash),
 * deletionTimestamp and status; borrowed as nl_pod_manager_get. NULL when none. */
const nl_pod_t *nl_pod_manager_mirror_get(const nl_pod_manager_t *m, const char *ns,
                                          const char *name);
/* Every mirror pod, as nl_pod_manager_list (for upstream's orphaned mirror pods:
 * those whose static pod is gone). */
const nl_pod_t **nl_pod_manager_mirror_list(const nl_pod_manager_t *m, size_t *n);
/* Sets the mirror callback (NULL: none). */
void nl_pod_manager_on_mirror(nl_pod_manager_t *m, nl_pod_manager_mirror_cb cb, void *ctx);

#endif
