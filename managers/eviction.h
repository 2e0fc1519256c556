/* The eviction manager (upstream pkg/kubelet/eviction): every 10 s
 * (evictionMonitoringPeriod), and at once when memory crosses a threshold
 * (memcg_notify.h), the node's signals are observed and compared with the hard
 * and soft thresholds; a threshold met (a soft one for its whole grace
 * period) makes its pressure condition true, which stays so for
 * evictionPressureTransitionPeriod after the last time it was met. While a
 * threshold is met, the node first reclaims by itself (disk: dead containers,
 * then unused images), and when that is not enough one pod is evicted per
 * round, ranked as upstream ranks them:
 *   memory:  usage over requests first, then lower priority, then the larger
 *            usage above requests;
 *   disk:    the same with the disk usage the signal counts;
 *   pids:    lower priority, then more processes.
 * Before the thresholds, every round, local storage limits (upstream
 * localStorageEviction; eviction_local.c): each pod over an emptyDir's
 * sizeLimit, its ephemeral-storage limit or a container's is evicted at once.
 * Critical pods (static, mirror, priority >= 2000000000) are never evicted. The
 * evicted pod's status says phase Failed, reason Evicted, message "The node was
 * low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. Container
 * x was using 300Mi, request is 0, has larger consumption of memory. ", and the
 * next round waits (at most 30 s) for its containers to be gone.
 *
 * Admission under pressure (upstream's eviction admit handler): with memory
 * pressure alone only BestEffort pods are rejected (unless they tolerate the
 * memory-pressure taint); with any other pressure every pod is; critical pods
 * always pass.
 *
 * The pure parts (thresholds, observations, ranking, messages) are in
 * eviction_helpers.c; the figures come from the agent (nl_eviction_deps_t). */
#ifndef NL_EVICTION_H
#define NL_EVICTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent/model/pod.h"
#include "managers/memcg_notify.h"
#include "reactor/error.h"

typedef enum {
  NL_EV_MEMORY,        /* memory.available */
  NL_EV_NODEFS,        /* nodefs.available */
  NL_EV_NODEFS_INODES, /* nodefs.inodesFree */
  NL_EV_IMAGEFS,       /* imagefs.available */
  NL_EV_IMAGEFS_INODES,/* imagefs.inodesFree */
  NL_EV_PID,           /* pid.available */
  NL_EV_ALLOC_MEMORY,  /* allocatableMemory.available: the pods cgroup's */
  NL_EV_NSIGNALS,
} nl_ev_signal_t;

const char *nl_ev_signal_name(nl_ev_signal_t s);
/* memory.available and allocatableMemory.available: one node condition
 * (MemoryPressure), one ranking, one resource. */
static inline bool nl_ev_is_memory(nl_ev_signal_t s) { return s == NL_EV_MEMORY || s == NL_EV_ALLOC_MEMORY; }

/* A quantity, or a fraction (float32, as upstream) of the capacity. */
typedef struct nl_ev_value {
  int64_t quantity;
  float percentage; /* 0..1; used when quantity is 0 */
} nl_ev_value_t;

typedef struct nl_ev_threshold {
  nl_ev_signal_t signal;
  nl_ev_value_t value;
  bool hard;
  int64_t grace_ns;       /* soft only */
  nl_ev_value_t min_reclaim; /* zero: none */
} nl_ev_threshold_t;

/* upstream ParseThresholdConfig: evictionHard, evictionSoft (each needs its
 * evictionSoftGracePeriod), evictionMinimumReclaim, as key/value arrays.
 * "0%" and "100%" are ignored. Fills *out (owned; free()) and *n. Returns 0 or
 * -1 with *err naming the setting and signal. */
typedef struct nl_ev_config_map {
  const char *const *keys;
  const char *const *values;
  size_t n;
} nl_ev_config_map_t;

/* enforce_pods (enforceNodeAllocatable has "pods"): each hard memory.available
 * threshold is copied as an allocatableMemory.available one, as upstream's
 * addAllocatableThresholds. */
int nl_ev_parse_thresholds(nl_ev_config_map_t hard, nl_ev_config_map_t soft,
                           nl_ev_config_map_t grace, nl_ev_config_map_t min_reclaim,
                           bool enforce_pods, nl_ev_threshold_t **out, size_t *n,
                           nl_err_t **err);

typedef struct nl_ev_observation {
  bool ok;
  int64_t available, capacity;
} nl_ev_observation_t;

/* upstream GetThresholdQuantity: the quantity, or capacity * percentage. */
int64_t nl_ev_quantity(const nl_ev_value_t *v, int64_t capacity);
/* available < threshold (+ min reclaim when enforce_min_reclaim). */
bool nl_ev_threshold_met(const nl_ev_threshold_t *t, const nl_ev_observation_t *obs,
                         bool enforce_min_reclaim);

/* What the agent measured of one running container and one pod. -1: unknown. */
typedef struct nl_ev_container_stats {
  char *name;
  int64_t memory;  /* working set */
  int64_t rootfs;  /* writable layer */
  int64_t logs;
} nl_ev_container_stats_t;

/* One local volume: an emptyDir on the node's disk (not medium Memory). */
typedef struct nl_ev_volume_stats {
  char *name;
  int64_t used; /* bytes; -1: unknown */
} nl_ev_volume_stats_t;

typedef struct nl_ev_pod_stats {
  char *uid;
  int64_t memory;        /* the containers' working sets */
  int64_t volumes;       /* local volumes (emptyDir): bytes */
  int64_t volume_inodes;
  int64_t procs;
  nl_ev_container_stats_t *containers;
  size_t n_containers;
  nl_ev_volume_stats_t *vols; /* each local volume */
  size_t n_vols;
  /* Measured only for a pod with local storage limits
   * (nl_ev_local_storage_limited): the files of its log directory itself and
   * its etc-hosts, which upstream's pod total counts too. 0: none. */
  int64_t pod_logs, etc_hosts;
} nl_ev_pod_stats_t;

typedef struct nl_ev_stats {
  nl_ev_observation_t obs[NL_EV_NSIGNALS];
  int64_t memory_inactive_file; /* of the root memory cgroup: usage - working set */
  bool dedicated_imagefs; /* the images are on another filesystem than nodefs */
  nl_ev_pod_stats_t *pods;
  size_t n_pods;
} nl_ev_stats_t;

void nl_ev_stats_free(nl_ev_stats_t *s);

/* The pods a rank sees, with what ranking needs. */
typedef struct nl_ev_candidate {
  const nl_pod_t *pod;            /* borrowed */
  const nl_ev_pod_stats_t *stats; /* NULL: none found (ranked first, as upstream) */
} nl_ev_candidate_t;

/* Sorts c for the signal (upstream rankMemoryPressure, rankPIDPressure,
 * rankDiskPressureFunc), first to evict first. */
void nl_ev_rank(nl_ev_signal_t signal, bool dedicated_imagefs, nl_ev_candidate_t *c, size_t n);
/* The pod's usage of what the signal measures: bytes, inodes or processes. */
int64_t nl_ev_pod_usage(nl_ev_signal_t signal, bool dedicated_imagefs, const nl_ev_pod_stats_t *s);

/* upstream evictionMessage (eviction_message.c): the message (caller frees)
 * and, in *annotations (sorted by key; nl_ev_annotations_free), the Evicted
 * event's: starved_resource (the signal's resource: memory,
 * ephemeral-storage, inodes, pids), offending_containers and
 * offending_containers_usage (the regular and init containers using more of
 * it than they request, comma-joined in the order of the figures, the usages
 * as quantities such as "123Mi": the working set for memory, the writable
 * layer and logs for ephemeral storage; empty strings when none), and for
 * memory, with a pod-level memory request (PodLevelResources), offending_pod
 * and offending_pod_usage. Without the pod's figures (stats NULL), no
 * annotations at all, as upstream. */
char *nl_ev_message(nl_ev_signal_t signal, const nl_ev_threshold_t *t,
                    const nl_ev_observation_t *obs, const nl_pod_t *pod,
                    const nl_ev_pod_stats_t *stats, nl_kvlist_t *annotations);
void nl_ev_annotations_free(nl_kvlist_t *a);

/* ---- local storage limits (upstream localStorageEviction) ---- */

/* A local volume: an emptyDir whose medium is not Memory (upstream
 * IsLocalEphemeralVolume, gitRepo and configMap aside). */
bool nl_ev_local_volume(const nl_volume_t *v);

/* Whether the pod has anything to check: an emptyDir on disk with a
 * sizeLimit, or an ephemeral-storage limit (a container's, an init
 * container's). Pods without pay for no measurement beyond the node's. */
bool nl_ev_local_storage_limited(const nl_pod_t *pod);

/* The pod's ephemeral storage as upstream's summary counts it: the running
 * containers' writable layers and logs, the local volumes, the pod's own log
 * files and its etc-hosts. */
int64_t nl_ev_pod_ephemeral_usage(const nl_ev_pod_stats_t *s);

/* upstream emptyDirLimitEviction, podEphemeralStorageLimitEviction and
 * containerEphemeralStorageLimitEviction, in that order: NULL when the pod is
 * within its limits; else the signal kubelet_evictions counts it under
 * ("emptydirfs.limit", "ephemeralpodfs.limit", "ephemeralcontainerfs.limit")
 * with *message set (caller frees): `Usage of EmptyDir volume "data" exceeds
 * the limit "10Mi". `, `Pod ephemeral local storage usage exceeds the total
 * limit of containers 10Mi. `, `Container c exceeded its local ephemeral
 * storage limit "5Mi". `. With a dedicated image filesystem a container's own
 * figure is its logs alone, as upstream. */
const char *nl_ev_local_storage_exceeded(const nl_pod_t *pod, const nl_ev_pod_stats_t *s,
                                         bool dedicated_imagefs, char **message);

/* upstream IsCriticalPod: static, mirror, or priority >= 2000000000. */
bool nl_ev_pod_is_critical(const nl_pod_t *pod);

/* ---- the manager ---- */

typedef struct nl_eviction nl_eviction_t;
typedef void (*nl_eviction_done_fn)(void *done_ctx);

typedef struct nl_eviction_deps {
  /* Fills *out (cleared first; the manager frees it) and calls done once,
   * from the loop, never from inside the call. The pods' figures (out->pods)
   * are wanted only when pods is true (a threshold to act on ranks them) or
   * when a pod has a local storage limit: without them a round is the node's
   * figures alone, and the pods' decoding and disk walks are most of an idle
   * round's work. */
  void (*collect)(void *ctx, bool pods, nl_ev_stats_t *out, nl_eviction_done_fn done,
                  void *done_ctx);
  /* The pods that may be evicted (admitted, not terminating); caller frees the
   * array, not the pods. */
  const nl_pod_t **(*active_pods)(void *ctx, size_t *n);
  /* Kills the pod with the grace period and marks it Failed/Evicted with the
   * message, and with the DisruptionTarget condition when condition (a
   * threshold's eviction; upstream gives none to a local storage limit's);
   * records the Evicted event with annotations (may be NULL). */
  void (*evict)(void *ctx, const nl_pod_t *pod, int64_t grace_seconds, const char *message,
                const nl_kvlist_t *annotations, bool condition);
  /* The evicted pod's containers are all gone. */
  bool (*pod_cleaned_up)(void *ctx, const char *uid);
  /* Node-level reclaim: dead containers, and unused images when images; calls
   * done once, never from inside the call. NULL: none. */
  void (*reclaim)(void *ctx, bool images, nl_eviction_done_fn done, void *done_ctx);
  void *ctx;
  int64_t (*now_ns)(void *ctx); /* wall clock; NULL: the real one */
  /* The root memory cgroup (v1) whose threshold notifications start a round
   * at once (upstream kernelMemcgNotification); NULL: polling only. */
  const char *memcg_dir;
  /* kubelet_evictions{eviction_signal} counts each eviction; NULL: none. */
  struct nl_kmetrics *metrics;
} nl_eviction_deps_t;

typedef enum {
  NL_EV_IDLE,      /* the timer runs */
  NL_EV_COLLECT,   /* the figures are read */
  NL_EV_RECLAIM,   /* node-level reclaim */
  NL_EV_RECOLLECT, /* the figures again, after reclaim */
  NL_EV_CLEANUP,   /* an evicted pod's containers are going */
  NL_EV_STOPPED,
} nl_ev_state_t;

struct nl_eviction {
  uv_loop_t *loop;
  nl_eviction_deps_t deps;
  nl_ev_threshold_t *thresholds; /* owned */
  size_t n_thresholds;
  int64_t transition_ns;         /* evictionPressureTransitionPeriod */
  int64_t max_pod_grace_s;       /* evictionMaxPodGracePeriod */
  uint64_t period_ms;
  nl_ev_state_t state;
  bool stopping;
  uv_timer_t timer;
  uint64_t generation;           /* of collections: a stale one is dropped */
  nl_ev_stats_t stats;           /* the latest figures */
  bool want_pods;                /* the next collection with the pods' figures */
  bool stats_pods;               /* stats were collected with want_pods */
  bool met[64];                  /* thresholds met last round (upstream thresholdsMet) */
  int64_t first_observed[64];    /* per threshold, 0: not met */
  int64_t condition_observed[3]; /* Memory, Disk, PID pressure: last seen met */
  bool pressure[3];              /* reported conditions */
  int reclaim_threshold;         /* index being reclaimed */
  char **evicted_uids;           /* waited for in CLEANUP (local storage evicts several) */
  size_t n_evicted;
  int cleanup_checks;
  nl_eviction_done_fn done_cb;
  void *done_ctx;
  int closing;                   /* handles (timer, notifier) not yet closed */
  /* memory threshold notifications: armed again at most every 10 s */
  nl_memcg_notify_t memcg;
  bool memcg_up, poked;          /* poked: a round is due as soon as idle */
  int64_t memcg_armed_ns;
  /* for tests and the bench */
  uint64_t rounds, evictions;
  int64_t last_eviction_ns;
};

/* Parses the thresholds (see nl_ev_parse_thresholds). period_ms 0: 10 s.
 * Returns 0 or -1 with *err. */
int nl_eviction_init(nl_eviction_t *m, uv_loop_t *loop, const nl_ev_threshold_t *thresholds,
                     size_t n, int64_t transition_ns, int64_t max_pod_grace_s,
                     uint64_t period_ms, const nl_eviction_deps_t *deps);
void nl_eviction_start(nl_eviction_t *m);
/* A round now (a memory threshold notification), or as soon as the round in
 * progress ends. */
void nl_eviction_poke(nl_eviction_t *m);
void nl_eviction_stop(nl_eviction_t *m, nl_eviction_done_fn done, void *done_ctx);

/* The conditions now. */
bool nl_eviction_memory_pressure(const nl_eviction_t *m);
bool nl_eviction_disk_pressure(const nl_eviction_t *m);
bool nl_eviction_pid_pressure(const nl_eviction_t *m);

/* upstream's eviction admit handler: true to admit; else *reason ("Evicted",
 * static) and *message (owned) are set. */
bool nl_eviction_admit(const nl_eviction_t *m, const nl_pod_t *pod, const char **reason,
                       char **message);

#endif
