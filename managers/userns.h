/* Pod user namespaces (upstream pkg/kubelet/userns, feature
 * UserNamespacesSupport): the node's range of ids for them, split in slots of
 * idsPerPod ids; a pod with `spec.hostUsers: false` gets one slot, the same
 * for its uids and gids, mapped from 0 inside, kept in the pod's directory
 * (<root-dir>/pods/<uid>/userns, upstream's JSON) so that an agent restart
 * keeps it, and given back when the pod has terminated.
 *
 * The allocator is the loop's (no lock); the file is written and removed on
 * the thread pool by its callers, read once at start (nl_userns_load). */
#ifndef NL_MANAGERS_USERNS_H
#define NL_MANAGERS_USERNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reactor/error.h"
#include "reactor/map.h"

/* upstream userNsUnitLength: idsPerPod is a multiple of it */
#define NL_USERNS_UNIT 65536u
/* the pod directory's file (upstream mappingsFile) */
#define NL_USERNS_FILE "userns"

typedef struct nl_userns {
  uint32_t off;         /* the range's first slot: its first id / ids_per_pod */
  uint32_t len;         /* its slots */
  uint32_t ids_per_pod; /* the ids of a slot */
  uint8_t *used;        /* a bit per slot */
  nl_map_t pods;        /* pod UID -> slot index + 1 (uintptr_t) */
  uint64_t rng;         /* where a search for a free slot starts, as upstream's random scan */
} nl_userns_t;

/* upstream getKubeletMappings' default, when the node has no `kubelet` user or
 * no getsubids: every id from ids_per_pod up to 2^32 - 1. */
void nl_userns_default_range(uint32_t ids_per_pod, uint32_t *first, uint32_t *len);

/* The output of `getsubids kubelet` (or -g): one line "0: kubelet FIRST
 * COUNT", upstream's parseGetSubIdsOutput. */
int nl_userns_parse_getsubids(const char *out, size_t n, uint32_t *first, uint32_t *count,
                              nl_err_t **err);

/* upstream MakeUserNsManager's checks of the range against idsPerPod and
 * maxPods; the allocator empty. */
int nl_userns_init(nl_userns_t *m, uint32_t first, uint32_t count, uint32_t ids_per_pod,
                   int32_t max_pods, nl_err_t **err);
void nl_userns_free(nl_userns_t *m);

/* The pod directory's file: {"uidMappings":[{"hostId":H,"containerId":0,
 * "length":L}],"gidMappings":[the same]}. parse checks what upstream's
 * parseUserNsFileAndRecord does (one mapping, uids and gids identical, 0
 * mapped) and returns the host id and length. */
int nl_userns_file_parse(const char *data, size_t n, uint32_t *host_id, uint32_t *length,
                         nl_err_t **err);
char *nl_userns_file_format(uint32_t host_id, uint32_t length);

/* upstream record(): the pod has [from, from+length), which must be a free
 * slot of the range (or the one it has already). */
int nl_userns_record(nl_userns_t *m, const char *uid, uint32_t from, uint32_t length,
                     nl_err_t **err);

/* The pod's first host id: the slot it has, or a free one (*fresh: the caller
 * persists it, or releases it when it cannot). Fails when the range is full. */
int nl_userns_allocate(nl_userns_t *m, const char *uid, uint32_t *host_id, bool *fresh,
                       nl_err_t **err);
/* The pod's first host id, if it has a slot. */
bool nl_userns_get(const nl_userns_t *m, const char *uid, uint32_t *host_id);
/* Frees the pod's slot; false when it had none. */
bool nl_userns_release(nl_userns_t *m, const char *uid);
static inline size_t nl_userns_count(const nl_userns_t *m) { return nl_map_size(&m->pods); }

/* At start (blocking): records the file of every pod directory under
 * <root_dir>/pods that has one. A file that cannot be read or recorded fails
 * the start, as upstream: the slot may still be in use by the pod's
 * containers. */
int nl_userns_load(nl_userns_t *m, const char *root_dir, nl_err_t **err);

#endif
