/* PLEG internals shared by pleg.c (the state machine on the loop) and
 * pleg_convert.c (pure functions: CRI lists -> pod records, record diff ->
 * events, CRI statuses -> nl_rt_pod_status_t), and by the unit tests. */
#ifndef NL_PLEG_INTERNAL_H
#define NL_PLEG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cri/api.pb-c.h"
#include "cri/brief.pb-c.h"
#include "managers/pleg.h"
#include "managers/runtime_types.h"
#include "reactor/error.h"
#include "reactor/map.h"

/* Upstream's plegContainerState. */
typedef enum nl_pleg__cstate {
  NL_PLEG__RUNNING,
  NL_PLEG__EXITED,
  NL_PLEG__UNKNOWN,
  NL_PLEG__NONEXISTENT,
} nl_pleg__cstate_t;

/* One sandbox or container of a relist (kubecontainer.Container). */
typedef struct nl_pleg__item {
  char *id;
  char *sandbox_id; /* containers: their pod sandbox */
  char *name;       /* containers: the io.kubernetes.container.name label */
  nl_pleg__cstate_t state;
  int64_t created_at;
  bool sandbox;
  uint64_t seen; /* the last list that showed it unchanged (nl_pleg__*_unchanged) */
} nl_pleg__item_t;

/* One pod of a relist (kubecontainer.Pod): owns its strings and items. */
typedef struct nl_pleg__pod {
  char *uid;
  char *name;
  char *namespace_;
  nl_pleg__item_t *items; /* containers and sandboxes, in list order */
  size_t n_items, cap_items;
} nl_pleg__pod_t;

void nl_pleg__pod_free(nl_pleg__pod_t *pod);

/* A pod's records between relists (upstream podRecord): cur is what the last
 * relist listed (NULL: the pod is gone), old what the last inspection saw; they
 * may be the same object. */
typedef struct nl_pleg__record {
  nl_pleg__pod_t *old;
  nl_pleg__pod_t *cur;
} nl_pleg__record_t;

/* Whether a list answer shows exactly the records' current sandboxes (or
 * containers): every object of ours matches one of its pod's current items of
 * that kind in id, state, creation time, sandbox id and name, and none is
 * missing. Compares without allocating; gen (new for each relist) marks the
 * items matched. records: uid -> nl_pleg__record_t*. */
bool nl_pleg__sandboxes_unchanged(nl_map_t *records,
                                  const Runtime__V1__Brief__ListPodSandboxResponse *resp, uint64_t gen);
bool nl_pleg__containers_unchanged(nl_map_t *records,
                                   const Runtime__V1__Brief__ListContainersResponse *resp, uint64_t gen);
/* Adds copies of the records' current sandboxes (or containers) to snap: the
 * half of a snapshot whose list was unchanged while the other half changed. */
void nl_pleg__copy_current(nl_map_t *snap, const nl_map_t *records, bool sandboxes);
/* Adds the pods in a list response to snap (uid -> nl_pleg__pod_t*, owned). */
void nl_pleg__add_sandboxes(nl_map_t *snap, const Runtime__V1__Brief__ListPodSandboxResponse *resp);
void nl_pleg__add_containers(nl_map_t *snap, const Runtime__V1__Brief__ListContainersResponse *resp);
/* Frees a snapshot map and its pods. */
void nl_pleg__snapshot_free(nl_map_t *snap);

/* An event with owned strings. */
typedef struct nl_pleg__event {
  nl_pleg_event_type_t type;
  char *container_id;
} nl_pleg__event_t;

/* Upstream's generateEvents for one id: writes 0, 1 or 2 events to out (their
 * container_id points at cid, not copied) and returns the count. */
size_t nl_pleg__generate_events(const char *cid, nl_pleg__cstate_t old_state,
                                nl_pleg__cstate_t new_state, nl_pleg__event_t out[2]);
/* Events for a pod between two relists (either may be NULL), ids in upstream's
 * order (old pod's containers, sandboxes, then the new pod's). Returns the count
 * and an allocated array in *out (NULL when 0) whose container_id strings are
 * owned: free with nl_pleg__events_free. */
size_t nl_pleg__compute_events(const nl_pleg__pod_t *old, const nl_pleg__pod_t *cur,
                               nl_pleg__event_t **out);
void nl_pleg__events_free(nl_pleg__event_t *ev, size_t n);

/* CRI -> nl_rt conversions (upstream toKubeContainerStatus and the sandbox part
 * of GetPodStatus). Return 0, or -1 with *err when a required part is missing
 * (NL_EINVAL, e.g. "container abc: status has no metadata"). out is filled with
 * owned copies; free with the nl_rt_pod_status_free of the status they go in. */
int nl_pleg__convert_sandbox(const Runtime__V1__PodSandboxStatus *s, nl_rt_sandbox_t *out,
                             nl_err_t **err);
int nl_pleg__convert_container(const Runtime__V1__ContainerStatus *s, const char *sandbox_id,
                               nl_rt_container_t *out, nl_err_t **err);
/* Where an exited container's termination message comes from (upstream
 * convertToKubeContainerStatus + getTerminationMessage): *host_path, the host
 * file of its mount at the terminationMessagePath annotation (borrowed from s;
 * NULL when none), and *fallback, whether its log is the message when that
 * gives nothing (FallbackToLogsOnError, exit code not 0, reason not
 * ContainerCannotRun). Returns false when there is nothing to read (or s is
 * not exited). */
bool nl_pleg__termmsg_source(const Runtime__V1__ContainerStatus *s, const char **host_path,
                             bool *fallback);
/* Why a pod is inspected again at the next relist (nl_pleg_t.reinspect): its
 * inspection failed, or it showed a container whose exit reason may still
 * change (nl_pleg__unsettled), which is kept from the cache and the pod
 * workers until it settles. */
#define NL_PLEG__FAILED ((void *)1)
#define NL_PLEG__SETTLING ((void *)2)
/* Whether c's reason is the runtime's generic one: "Error", or none. */
bool nl_pleg__generic_reason(const nl_rt_container_t *c);
/* The first of the containers that was SIGKILLed (exit code 137) with the
 * runtime's generic reason ("Error", or none) less than NL_PLEG_OOM_SETTLE_NS
 * away from now, and not by the agent (its id not in stopping): the runtime
 * may yet learn that the kernel's OOM killer did it. NULL when there is none. */
nl_rt_container_t *nl_pleg__unsettled(nl_rt_container_t *c, size_t n, const nl_map_t *stopping,
                                      int64_t now_ns);
/* Appends a termination message to c's runtime message as upstream: "runtime
 * message: message", or the message alone; nothing when msg is empty. */
void nl_pleg__add_termmsg(nl_rt_container_t *c, const char *msg);

/* Assembles a pod status: takes ownership of the sandboxes and containers arrays
 * (sorted here, newest first), copies uid/name/namespace, sets the pod IPs from
 * the newest sandbox when it is ready, else keeps prev's IPs when no sandbox is
 * ready (upstream getPodIPs). prev may be NULL. */
nl_rt_pod_status_t *nl_pleg__build_status(const char *uid, const char *name, const char *ns,
                                          nl_rt_sandbox_t *sandboxes, size_t n_sandboxes,
                                          nl_rt_container_t *containers, size_t n_containers,
                                          const nl_rt_pod_status_t *prev, int64_t timestamp);

/* "1a2b" -> 0x1a2b as upstream's strconv.ParseUint(s, 16, 64) narrowed to the
 * 32 bits nanolet hashes have; 0 when absent or bad. */
uint32_t nl_pleg__parse_hash(const char *s);

#endif
