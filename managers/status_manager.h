/* The status manager (upstream pkg/kubelet/status/status_manager.go): writes
 * each pod's status to the API server and, for a pod deleted gracefully, deletes
 * its API object once the pod has finished.
 *
 * Per pod it keeps the latest generated status (a new version only when it
 * differs from the last one as the kubelet compares statuses) and what the API
 * has (the status of the last PATCH response, or of the watched pod through
 * nl_status_manager_observe). One request per pod at a time; a status that
 * arrives meanwhile replaces the pending one, so a pod's statuses reach the API
 * in order and only the latest is ever queued. A send is a strategic merge
 * patch of pods/<name>/status with the uid as a precondition
 * (managers/status_patch.h), skipped when it would change nothing; when nothing
 * is known of the API's status yet, the pod is read first (GET), as upstream
 * does; a patch the apiserver refuses reads the pod again before the next
 * try (our copy of its status may be another writer's past). Static pods
 * report through their mirror pods, each only through the one made from its
 * own version of the manifest (deps.mirror_uid; no mirror pod, no report):
 * instances of a static pod still terminating after an edit write nothing
 * there. Every sync period (10 s) every pod is checked again: a version not
 * yet acknowledged, an API status that differs from ours
 * (isPodStatusByKubeletEqual), or a pod that can be deleted is sent.
 * A failed request backs off per pod (jittered, doubling up to the sync
 * period): with the apiserver down, each pod keeps one pending status and one
 * request at most, so nothing grows without bound.
 *
 * Graceful deletion (upstream canBeDeleted): a pod with a deletion timestamp,
 * not a mirror pod, whose API phase is terminal and which has finished (its
 * containers are gone: the kubelet says so with nl_status_pod_t.finished) is
 * deleted after its final status: DELETE with gracePeriodSeconds 0 and its uid
 * as a precondition.
 *
 * Ownership: embedded by its owner; borrows the kube client and deps.ctx, which
 * must outlive nl_status_manager_stop()'s done callback. */
#ifndef NL_STATUS_MANAGER_H
#define NL_STATUS_MANAGER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent/kube/client.h"
#include "managers/status.h"
#include "reactor/map.h"

typedef struct nl_status_manager_deps {
  nl_kube_client_t *kube;
  /* The uid of the mirror pod of static pod uid in the API server, or NULL
   * while it has none made from that version of the manifest (upstream
   * GetMirrorPodByPod and TranslatePodUID). Borrowed for the call. */
  const char *(*mirror_uid)(void *ctx, const char *namespace_, const char *name,
                            const char *uid);
  /* The pod's API object is gone: deleted by us after graceful termination.
   * May be NULL. */
  void (*deleted)(void *ctx, const char *uid);
  void *ctx;
} nl_status_manager_deps_t;

typedef struct nl_status_manager_opts {
  uint64_t sync_period_ms;     /* the full reconcile; 0: 10 s (upstream syncPeriod) */
  uint64_t backoff_initial_ms; /* per pod after a failed request; 0: 500 ms */
  uint64_t backoff_max_ms;     /* 0: the sync period */
  uint64_t timeout_ms;         /* per request; 0: the client's default */
} nl_status_manager_opts_t;

/* What the manager needs to know of a pod (borrowed for the call). */
typedef struct nl_status_pod {
  const char *uid; /* the pod's uid as its source gave it (a static pod's own) */
  const char *namespace_, *name;
  bool is_static;  /* reports through its mirror pod */
  bool deleting;   /* the API object has a deletionTimestamp */
  bool finished;   /* termination is complete: no container can run any more;
                    * a terminal phase is written only then
                    * (upstream podIsFinished with podDeletionSafety) */
} nl_status_pod_t;

typedef enum nl_status_sync_state {
  NL_STATUS_IDLE,
  NL_STATUS_GET,     /* reading the pod: nothing known of the API's status */
  NL_STATUS_PATCH,   /* PATCH pods/<name>/status */
  NL_STATUS_DELETE,  /* DELETE after termination */
  NL_STATUS_BACKOFF, /* a request failed; waiting */
} nl_status_sync_state_t;

typedef struct nl_status_manager nl_status_manager_t;

/* One pod's sync (internal; in the header for the tests' eyes). */
typedef struct nl_status_entry {
  nl_status_manager_t *sm;
  char *uid, *namespace_, *name;
  bool is_static, deleting, finished;
  /* Statuses are kept as compact JSON text (a jansson tree costs several times
   * its text) and parsed only to build a patch or compare. */
  /* the status as last generated (nl_pod_status_encode_json): only compared
   * with the next, so its SHA-256 stands for it (1-2 KiB a pod) */
  unsigned char generated[32];
  bool has_generated;
  char *want;               /* the latest status to write: generated, merged */
  uint64_t version;         /* of want */
  uint64_t acked;           /* the last version the API acknowledged */
  uint64_t in_flight;       /* the version of the request in flight */
  char *api_uid;            /* the API object the status goes to */
  char *api;                /* its status as last seen; NULL: unknown */
  bool api_terminal;        /* api's phase is Succeeded or Failed */
  bool api_checked;         /* api_same holds for the current api and want */
  bool api_same;            /* want merged into api changes nothing */
  bool deleted;             /* the API object is gone (our DELETE) */
  bool removed;             /* forgotten: freed once its request is done */
  bool calling_out;         /* inside deps.deleted */
  nl_status_sync_state_t state;
  nl_kube_req_t *req;
  uint64_t retry_at_ms;     /* BACKOFF until then */
  uint64_t backoff_ms;      /* the current back-off; 0: none */
} nl_status_entry_t;

struct nl_status_manager {
  uv_loop_t *loop;
  nl_status_manager_deps_t deps;
  nl_status_manager_opts_t opts;
  nl_map_t pods;            /* uid -> nl_status_entry_t (owned) */
  uv_timer_t timer;         /* the next back-off end or reconcile */
  uint64_t next_reconcile_ms;
  uint64_t rng;             /* jitter */
  bool started, stopping;
  int pending;              /* requests and the timer still closing */
  void (*done)(void *ctx);
  void *done_ctx;
  /* Figures for tests and metrics. */
  uint64_t gets, patches, deletes, failures;
};

void nl_status_manager_init(nl_status_manager_t *sm, uv_loop_t *loop,
                            const nl_status_manager_deps_t *deps,
                            const nl_status_manager_opts_t *opts);
void nl_status_manager_start(nl_status_manager_t *sm);
/* Cancels requests in flight, closes the timer, frees everything and then
 * calls done (may be NULL). */
void nl_status_manager_stop(nl_status_manager_t *sm, void (*done)(void *ctx), void *ctx);

/* upstream SetPodStatus / TerminatePod: records the pod's generated status
 * (copied) and sends it when it differs from the last one. A terminal phase
 * recorded before is kept. */
void nl_status_manager_set(nl_status_manager_t *sm, const nl_status_pod_t *pod,
                           const nl_pod_status_t *status);
/* The status the API server has for the object with api_uid, e.g. from the pod
 * watch (a mirror pod's for a static pod; status borrowed). The next reconcile
 * resends ours when it differs. A status whose every field (an empty one
 * standing for an absent one) is what the API last answered changes nothing:
 * the watch's pods carry only the fields the pod model keeps. Unknown pods and
 * pods with a request in flight are ignored. */
void nl_status_manager_observe(nl_status_manager_t *sm, const char *namespace_,
                               const char *name, const char *api_uid, const json_t *status);
/* Tries every pod now (e.g. a mirror pod appeared). */
void nl_status_manager_sync(nl_status_manager_t *sm);
/* Forgets a pod (upstream RemoveOrphanedStatuses for one uid). */
void nl_status_manager_remove(nl_status_manager_t *sm, const char *uid);
/* The entry of a pod, or NULL. */
const nl_status_entry_t *nl_status_manager_entry(const nl_status_manager_t *sm, const char *uid);

const char *nl_status_sync_state_name(nl_status_sync_state_t s);

#endif
