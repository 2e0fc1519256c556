/* Pod workers (upstream pkg/kubelet/pod_workers.go): one state machine per pod
 * that serialises its work. At most one sync is in flight per pod; updates that
 * arrive meanwhile coalesce into the next one. A pod moves through
 *
 *   SYNCING --(killed, or its sync reports it terminal)--> TERMINATING
 *           --(containers stopped)--> TERMINATED --(forgotten by housekeeping)
 *
 * and never back: a terminated pod's uid does not run again unless its worker
 * is forgotten (nl_pod_workers_forget). The work itself is
 * the syncer's (agent/kubelet.c): sync_pod, sync_terminating and sync_terminated
 * each receive a work token and finish by calling nl_pod_workers_complete(),
 * possibly long after, possibly from inside the call.
 *
 * Generation rule: every transition bumps the worker's generation; a token whose
 * generation is stale when it completes is dropped (its result ignored) and the
 * worker moves on with its current state. A token stays valid (never freed under
 * the syncer) until nl_pod_workers_complete() is called with it. */
#ifndef NL_POD_WORKERS_H
#define NL_POD_WORKERS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent/model/pod.h"
#include "reactor/error.h"
#include "reactor/map.h"

typedef enum {
  NL_POD_SYNCING = 0,
  NL_POD_TERMINATING,
  NL_POD_TERMINATED,
} nl_pod_work_state_t;

typedef enum {
  NL_SYNC_CREATE = 0, /* first sync of a pod the agent has not seen */
  NL_SYNC_UPDATE,     /* the desired pod changed */
  NL_SYNC_SYNC,       /* periodic or event-driven resync */
  NL_SYNC_KILL,       /* the pod is to be terminated */
} nl_sync_type_t;

typedef struct nl_pod_workers nl_pod_workers_t;
typedef struct nl_pod_worker nl_pod_worker_t;

/* A unit of work handed to the syncer. Owned by the pod workers. */
typedef struct nl_pod_work {
  nl_pod_workers_t *workers;
  char *uid;              /* owned */
  nl_pod_t *pod;          /* the desired pod (a reference); valid until complete */
  nl_pod_work_state_t kind; /* which syncer function runs */
  nl_sync_type_t type;
  int64_t grace_seconds;  /* for TERMINATING: the grace period to use */
  uint64_t generation;
  uint64_t started;       /* uv_hrtime() when handed out */
  /* The syncer may set it before completing with an error: the retry's delay
   * in ms, in place of backoff_ms (a crash-loop back-off's end; no more than
   * resync_ms). -1 (as handed out): backoff_ms. */
  int64_t retry_in_ms;
} nl_pod_work_t;

typedef struct nl_pod_syncer {
  void (*sync_pod)(nl_pod_work_t *w, void *ctx);
  void (*sync_terminating)(nl_pod_work_t *w, void *ctx);
  void (*sync_terminated)(nl_pod_work_t *w, void *ctx);
  /* Optional: the grace period of a pod being killed was shortened (a force
   * delete after a graceful one). Abandon the in-flight sync_terminating w and
   * complete it now if the kill already started (return true; it then runs
   * again with the shorter grace), else return false (it has not read the grace
   * period yet: nl_pod_workers_grace tells the current one). */
  bool (*cancel_terminating)(nl_pod_work_t *w, void *ctx);
  /* Optional: the pod's worker finished (TERMINATED and sync_terminated done):
   * none of its containers runs (upstream: !CouldHaveRunningContainers). */
  void (*finished)(const char *uid, void *ctx);
} nl_pod_syncer_t;

struct nl_pod_worker {
  char *uid;
  nl_pod_t *pod; /* latest desired pod (a reference) */
  nl_pod_work_state_t state;
  uint64_t generation;
  nl_pod_work_t *inflight; /* NULL when idle */
  bool pending;            /* work is waiting for the in-flight one to end */
  nl_sync_type_t pending_type;
  int64_t grace_seconds;   /* set once killing is requested; only shrinks */
  bool kill_requested;
  bool finished;           /* TERMINATED and sync_terminated done */
  uint64_t next_sync_ms;   /* work queue: when a resync is due (0: not queued) */
  uint64_t started_ms;     /* when the worker was created */
};

struct nl_pod_workers {
  uv_loop_t *loop;
  nl_map_t workers; /* uid -> nl_pod_worker_t* */
  nl_pod_syncer_t syncer;
  void *ctx;
  uint64_t resync_ms;  /* after a successful sync: syncFrequency */
  uint64_t backoff_ms; /* after a failed sync: 10 s upstream */
  size_t inflight;     /* tokens not yet completed */
  struct nl_kmetrics *metrics; /* kubelet_pod_worker_duration_seconds, when set */
};

void nl_pod_workers_init(nl_pod_workers_t *pw, uv_loop_t *loop, const nl_pod_syncer_t *syncer,
                         void *ctx, uint64_t resync_ms, uint64_t backoff_ms);
/* Frees every worker. Tokens still in flight are orphaned: completing one later
 * only frees it. */
void nl_pod_workers_free(nl_pod_workers_t *pw);

/* Updates a pod (referenced). CREATE/UPDATE/SYNC run a sync unless the pod is
 * terminating; KILL starts termination with upstream's
 * calculateEffectiveGracePeriod: the shortest of the grace already chosen, the
 * pod's deletionGracePeriodSeconds (the API server's word) and grace_seconds
 * (when >= 0); failing all of them terminationGracePeriodSeconds (30 when
 * unset); never below 1 s (a force delete's 0 is 1). A pod with a
 * deletionTimestamp is killed whatever the type. */
void nl_pod_workers_update(nl_pod_workers_t *pw, const nl_pod_t *pod, nl_sync_type_t type,
                           int64_t grace_seconds);
/* The API's status of a pod changed and its spec did not (a RECONCILE): a
 * worker that is syncing holds this version (a reference) instead of the one it
 * had, so that one decoded copy of a running pod is kept, not two. Nothing
 * runs. No-op for unknown uids and terminating workers. */
void nl_pod_workers_reconcile(nl_pod_workers_t *pw, const nl_pod_t *pod);
/* Queues a resync now for uid (a PLEG event). No-op for unknown uids. */
void nl_pod_workers_sync_now(nl_pod_workers_t *pw, const char *uid);
/* Issues a SYNC to every SYNCING worker whose queued time has come (the 1 s
 * ticker). Returns how many were started. */
size_t nl_pod_workers_sync_due(nl_pod_workers_t *pw);

/* Ends a token. err (may be NULL) is the work's error: a failed sync is retried
 * after backoff_ms, or w->retry_in_ms. is_terminal (sync_pod only) says the
 * pod has finished (phase Succeeded/Failed) and should terminate. Frees the
 * token. */
void nl_pod_workers_complete(nl_pod_work_t *w, const nl_err_t *err, bool is_terminal);

/* Housekeeping (upstream SyncKnownPods): workers whose uid known() denies are
 * killed; finished ones are forgotten. */
typedef bool (*nl_pod_workers_known_fn)(void *ctx, const char *uid);
void nl_pod_workers_sync_known(nl_pod_workers_t *pw, nl_pod_workers_known_fn known, void *ctx);

/* Forgets a finished worker (no-op otherwise), so that its uid can run again
 * (upstream: a static pod removed and added back with the same uid, once the
 * first life has terminated). */
void nl_pod_workers_forget(nl_pod_workers_t *pw, const char *uid);

const nl_pod_worker_t *nl_pod_workers_get(const nl_pod_workers_t *pw, const char *uid);
/* The grace period chosen for a terminating pod (-1 when none was requested). */
int64_t nl_pod_workers_grace(const nl_pod_workers_t *pw, const char *uid);
/* upstream CouldHaveRunningContainers: false once the pod's worker finished;
 * true while it works, and for a pod without a worker (one the agent has not
 * seen: e.g. before the first relist). For the status manager: a pod being
 * deleted may be deleted from the API (grace 0) once this is false. */
bool nl_pod_workers_could_have_running_containers(const nl_pod_workers_t *pw, const char *uid);
/* True when the pod is terminating or terminated (upstream
 * IsPodTerminationRequested / ShouldPodContentBeRemoved building blocks). */
bool nl_pod_workers_is_terminating(const nl_pod_workers_t *pw, const char *uid);

#endif
