/* PLEG, the pod lifecycle event generator, as upstream's GenericPLEG
 * (pkg/kubelet/pleg/generic.go) with its pod cache (pkg/kubelet/container/cache.go).
 *
 * Every relist period it lists all sandboxes and containers (ListPodSandbox and
 * ListContainers, both in flight together), groups them into pods by the
 * io.kubernetes.pod.uid label (objects without it are not ours and ignored),
 * compares each pod with the previous relist and, for pods that changed only,
 * reads PodSandboxStatus and ContainerStatus of all their sandboxes and
 * containers (in parallel) to refresh the pod cache. Then it reports one event
 * per container (or sandbox) state change: ContainerStarted, ContainerDied,
 * ContainerRemoved. A relist that fails is logged and retried next period; a pod
 * whose inspection fails keeps its old record, so its events come again.
 * Nothing blocks: one relist at a time, the next one `period` after the end of
 * the previous one (upstream wait.Until).
 *
 * Lifetime: nl_pleg_t is embedded in its owner. nl_pleg_stop() abandons an
 * in-flight relist (its CRI completions are dropped), closes the timers and
 * calls done_cb once they are closed; the owner frees the memory only then.
 * The CRI client must outlive the pleg's use of it: stop the pleg first. */
#ifndef NL_PLEG_H
#define NL_PLEG_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "cri/conn.h"
#include "managers/runtime_types.h"
#include "reactor/error.h"
#include "reactor/list.h"
#include "reactor/map.h"

#define NL_PLEG_DEFAULT_RELIST_PERIOD_MS 1000          /* upstream genericPlegRelistPeriod */
#define NL_PLEG_RELIST_THRESHOLD_NS (INT64_C(180) * 1000000000) /* 3 minutes */
/* While the runtime's event stream works (upstream's Evented PLEG). */
#define NL_PLEG_EVENTED_RELIST_PERIOD_MS (300 * 1000)
#define NL_PLEG_EVENTED_RELIST_THRESHOLD_NS (INT64_C(600) * 1000000000)
/* How long a SIGKILLed container's "Error" may still turn into "OOMKilled":
 * containerd handles a task's exit and its OOM event apart, and may answer
 * ContainerStatus between the two (docs/PLEG.md). */
#define NL_PLEG_OOM_SETTLE_NS (INT64_C(2) * 1000000000)

typedef enum nl_pleg_event_type {
  NL_PLEG_CONTAINER_STARTED, /* a container or sandbox is running */
  NL_PLEG_CONTAINER_DIED,    /* it exited (or vanished without being seen exited) */
  NL_PLEG_CONTAINER_REMOVED, /* it is gone from the runtime */
  NL_PLEG_POD_SYNC,          /* sync the pod (not produced by relisting, as upstream) */
  NL_PLEG_CONTAINER_CHANGED, /* state unknown/created; computed, never delivered */
} nl_pleg_event_type_t;

typedef struct nl_pleg_event {
  const char *uid;          /* the pod's uid */
  nl_pleg_event_type_t type;
  const char *container_id; /* the CRI container (or sandbox) id */
} nl_pleg_event_t;

/* "ContainerStarted", ... (upstream's PodLifeCycleEventType names). */
const char *nl_pleg_event_type_name(nl_pleg_event_type_t t);

typedef struct nl_pleg nl_pleg_t;
/* ev and its strings are borrowed for the call. The callback may call any
 * nl_pleg_* function, including nl_pleg_stop(). */
typedef void (*nl_pleg_event_cb)(const nl_pleg_event_t *ev, void *ctx);
typedef void (*nl_pleg_stop_cb)(nl_pleg_t *p);
typedef bool (*nl_pleg_oom_fn)(void *ctx, const char *container_id);
/* status is the cached status (borrowed for the call), or NULL when the runtime
 * has nothing for the pod (upstream's empty default status). */
typedef void (*nl_pleg_newer_cb)(const nl_rt_pod_status_t *status, void *ctx);
/* For nl_pleg_foreach: status borrowed for the call. Return false to stop. */
typedef bool (*nl_pleg_iter_cb)(const nl_rt_pod_status_t *status, void *ctx);

typedef enum nl_pleg_state {
  NL_PLEG_IDLE,      /* initialized, not started */
  NL_PLEG_WAITING,   /* waiting for the relist timer */
  NL_PLEG_LISTING,   /* ListPodSandbox + ListContainers in flight */
  NL_PLEG_INSPECTING,/* status calls for changed pods in flight */
  NL_PLEG_STOPPING,
  NL_PLEG_STOPPED,
} nl_pleg_state_t;

struct nl_pleg__relist; /* private: one relist run */

struct nl_pleg {
  uv_loop_t *loop;
  nl_cri_client_t *cri;
  uint64_t period_ms;
  nl_pleg_event_cb event_cb;
  void *ctx;
  nl_pleg_state_t state;

  uv_timer_t relist_timer;
  uv_timer_t notify_timer;  /* delivers when_newer callbacks outside the caller */
  int open_handles;

  struct nl_pleg__relist *cur; /* the relist in flight, or NULL */
  bool relist_again;           /* a relist was forced while one ran */
  uint64_t list_gen;           /* relists started, for nl_pleg__*_unchanged */
  uint64_t sandboxes_fp, containers_fp; /* the lists the records hold (cri/runtime.h) */
  uint64_t lists_same_fp;      /* answers not decoded: their fingerprint was the records' */
  bool events_wanted;          /* nl_pleg_use_events() */
  bool events_up;              /* the event stream works: relist every 5 minutes */
  uint64_t events;             /* container events received */

  nl_map_t records;   /* uid -> struct nl_pleg__record (old/current pod) */
  nl_map_t cache;     /* uid -> struct nl_pleg__entry (status, modified) */
  nl_map_t reinspect; /* uid -> NL_PLEG__FAILED or NL_PLEG__SETTLING */
  nl_map_t stopping;  /* container id -> clock seconds (now): nl_pleg_stopping() */
  nl_pleg_oom_fn oom_killed;
  void *oom_ctx;
  int64_t cache_time; /* the cache's global timestamp (ns), 0 until a relist */

  nl_list_t waiters;  /* struct nl_pleg__waiter */
  uint64_t next_waiter_id;

  /* The clock of the cache's timestamps, of nl_pleg_when_newer's and of the
   * health check (ns): monotonic, as Go's time.Now() compares in upstream's
   * cache, so that a step of the wall clock never makes a status read now
   * look older than a sync made before the step (which would then wait for
   * the clock to catch up). Tests replace it. */
  int64_t (*now)(void *clock_ctx);
  void *clock_ctx;

  int64_t relist_time;        /* start of the last relist whose lists succeeded */
  int64_t relist_duration_ns; /* how long the last finished relist took */
  uint64_t relists;           /* relists finished (ok or not) */
  uint64_t relist_failures;
  struct nl_kmetrics *metrics; /* relist figures go there when set */

  nl_pleg_stop_cb stop_cb;
};

/* Initializes p (embedded by the caller). period_ms 0 means the default 1 s.
 * Nothing runs until nl_pleg_start(). Returns 0 (it cannot fail today; the
 * int is for the contract). */
int nl_pleg_init(nl_pleg_t *p, uv_loop_t *loop, nl_cri_client_t *cri, uint64_t period_ms,
                 nl_pleg_event_cb event_cb, void *ctx);
/* Starts relisting now (the first relist runs on the next loop iteration). */
void nl_pleg_start(nl_pleg_t *p);
/* Abandons any relist in flight, drops pending when_newer waiters without
 * calling them, frees the cache, closes the timers and calls done_cb (may be
 * NULL) once they are closed. */
void nl_pleg_stop(nl_pleg_t *p, nl_pleg_stop_cb done_cb);
/* Evented PLEG (upstream's EventedPLEG): call before nl_pleg_start(). Once
 * started, PLEG subscribes to the runtime's GetContainerEvents; each event
 * relists at once (the relist finds what changed and inspects that pod). While
 * the stream works the periodic relist runs every 5 minutes and the health
 * threshold is 10 minutes, as upstream's. When the stream ends (the runtime has
 * none, UNIMPLEMENTED, as containerd 1.6; or it broke), PLEG relists every
 * period_ms again until an event arrives on the stream the CRI client restarts. */
void nl_pleg_use_events(nl_pleg_t *p);

/* Relists as soon as possible: now when idle, right after the current relist
 * otherwise. */
void nl_pleg_force_relist(nl_pleg_t *p);
/* fn (may be NULL) tells whether the kernel's OOM killer ended a container;
 * it names a SIGKILLed container OOMKilled when its runtime cannot
 * (nl_oom_watcher_killed_in). */
void nl_pleg_set_oom_source(nl_pleg_t *p, nl_pleg_oom_fn fn, void *ctx);
/* The agent is stopping this container: a SIGKILL that ends it is its own
 * doing, and its status is read as it comes (no wait for a late OOMKilled). */
void nl_pleg_stopping(nl_pleg_t *p, const char *container_id);

/* The cached status of pod uid, or NULL. Borrowed: valid until the next relist
 * finishes (do not keep it across loop iterations). */
const nl_rt_pod_status_t *nl_pleg_get(const nl_pleg_t *p, const char *uid);
/* When the cached status of uid was read (ns), or 0 when nothing is cached. */
int64_t nl_pleg_cache_time(const nl_pleg_t *p, const char *uid);

/* Calls cb once the cache holds a status for uid read after after_ns, or a
 * relist that began after after_ns has finished (then the status may be NULL:
 * the runtime has nothing for the pod), as upstream's cache.GetNewerThan.
 * Always called from the loop, never from inside this function. Returns an id
 * (never 0) for nl_pleg_cancel_when_newer(). */
uint64_t nl_pleg_when_newer(nl_pleg_t *p, const char *uid, int64_t after_ns,
                            nl_pleg_newer_cb cb, void *ctx);
/* Whether nl_pleg_when_newer(p, uid, after_ns, ...) would be ready now: the
 * cache already holds what a waiter asks for, so no relist is needed. */
bool nl_pleg_is_newer(const nl_pleg_t *p, const char *uid, int64_t after_ns);
/* Forgets a waiter; its callback will not run. Returns false when id is
 * unknown (already called, cancelled, or the pleg stopped). */
bool nl_pleg_cancel_when_newer(nl_pleg_t *p, uint64_t id);

/* Upstream's Healthy(): false with *err (NL_ETIMEOUT) "pleg has yet to be
 * successful" before the first successful relist, or "pleg was last seen
 * active 3m0.5s ago; threshold is 3m0s" when the last one began more than
 * 3 minutes before now_ns (wall clock). err may be NULL. */
bool nl_pleg_healthy(const nl_pleg_t *p, int64_t now_ns, nl_err_t **err);

/* Calls cb for every cached pod status (any order). The cache must not be
 * changed from cb (it is not: relists complete only from the loop). */
void nl_pleg_foreach(const nl_pleg_t *p, nl_pleg_iter_cb cb, void *ctx);

/* The monotonic clock in ns (the default clock), and the wall clock in ns
 * since the epoch. */
int64_t nl_pleg_monotonic_ns(void *unused);
int64_t nl_pleg_realtime_ns(void *unused);

#endif
