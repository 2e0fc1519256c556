/* The desired pods (upstream pkg/kubelet/pod/pod_manager.go): what the sources
 * want on this node, by UID and by namespace/name. Owns a copy of each pod. */
#ifndef NL_POD_MANAGER_H
#define NL_POD_MANAGER_H

#include <stddef.h>

#include "agent/model/pod.h"
#include "reactor/map.h"

typedef struct nl_pod_manager {
  nl_map_t by_uid;      /* uid -> nl_pod_t* (owned) */
  nl_map_t by_fullname; /* "namespace/name" -> nl_pod_t* (borrowed from by_uid) */
} nl_pod_manager_t;

void nl_pod_manager_init(nl_pod_manager_t *m);
void nl_pod_manager_free(nl_pod_manager_t *m);
/* Adds or replaces the pod with its UID (copied). */
void nl_pod_manager_set(nl_pod_manager_t *m, const nl_pod_t *pod);
void nl_pod_manager_remove(nl_pod_manager_t *m, const char *uid);
/* Borrowed until the pod is set again or removed; NULL when absent. */
const nl_pod_t *nl_pod_manager_get(const nl_pod_manager_t *m, const char *uid);
const nl_pod_t *nl_pod_manager_get_by_name(const nl_pod_manager_t *m, const char *ns,
                                           const char *name);
size_t nl_pod_manager_count(const nl_pod_manager_t *m);
/* The pods in an array the caller frees (not the pods), sorted by namespace/name. */
const nl_pod_t **nl_pod_manager_list(const nl_pod_manager_t *m, size_t *n);

#endif
