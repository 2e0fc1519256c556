/* Events, as client-go's tools/record does them for the kubelet.
 *
 * Three parts:
 *  - the sink (nl_event_sink_t): what managers record through, a function
 *    pointer and its context, so that each manager stays testable and runs
 *    standalone. Recording never blocks and never fails; a NULL sink logs.
 *  - the correlator (nl_event_correlator_t): pure, with the clock passed in.
 *    upstream's EventCorrelator: the aggregator (10 events of one reason on one
 *    object with different messages within 10 min become one event "(combined
 *    from similar events): ..."), the logger (a repeat of an event already sent
 *    is a PATCH of its count and lastTimestamp) and the spam filter (a token
 *    bucket of 25 per source and object, refilled one per 5 min).
 *  - the recorder (nl_events_t): logs every event at -v=3 (upstream's
 *    StartStructuredLogging(3)); with an API client it queues the event (at most
 *    1000; past that they are dropped and counted) and sends it from a timer,
 *    one request at a time, rate-limited by eventRecordQPS/eventBurst: POST a
 *    new event, PATCH a repeat (POST when the PATCH finds it gone). A request
 *    that got no answer is tried again 10 s later (the first retry after a
 *    random part of 10 s), 12 tries in all; an answer that refuses it drops it,
 *    as upstream's recordToSink.
 *
 * Annotations (upstream AnnotatedEventf, e.g. the eviction manager's
 * starved_resource) go into the Event's metadata.annotations when it is
 * created; as upstream's correlator, they are not part of any cache key, a
 * repeat's PATCH leaves them as the first event set them, and an aggregated
 * ("combined from similar events") event has none.
 *
 * Ownership: strings passed in are copied; nl_event_t owns its strings. */
#ifndef NL_MANAGERS_EVENTS_H
#define NL_MANAGERS_EVENTS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent/kube/client.h"
#include "agent/kube/ratelimit.h"
#include "agent/model/pod.h"
#include "reactor/list.h"
#include "reactor/map.h"

#define NL_EVENT_NORMAL "Normal"
#define NL_EVENT_WARNING "Warning"

/* core/v1 ObjectReference (involvedObject); NULL fields are left out. */
typedef struct nl_event_ref {
  const char *kind, *namespace_, *name, *uid, *api_version, *resource_version, *field_path;
} nl_event_ref_t;

/* ---- the sink managers record through ---- */

/* annotations may be NULL (none). */
typedef void (*nl_event_record_fn)(void *ctx, const nl_event_ref_t *obj,
                                   const nl_kvlist_t *annotations, const char *type,
                                   const char *reason, const char *message);
typedef struct nl_event_sink {
  nl_event_record_fn fn; /* NULL: the event is only logged at -v=3 */
  void *ctx;
} nl_event_sink_t;

/* Records an event (message printf-style) through s, which may be NULL. */
void nl_event_record(const nl_event_sink_t *s, const nl_event_ref_t *obj, const char *type,
                     const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void nl_event_vrecord(const nl_event_sink_t *s, const nl_event_ref_t *obj, const char *type,
                      const char *reason, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));
/* The same with annotations (upstream AnnotatedEventf); annotations may be
 * NULL. */
void nl_event_annotated_record(const nl_event_sink_t *s, const nl_event_ref_t *obj,
                               const nl_kvlist_t *annotations, const char *type,
                               const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* The reference of a pod (kind Pod, apiVersion v1). Borrows from pod. */
nl_event_ref_t nl_event_pod_ref(const nl_pod_t *pod);
/* The reference of one of its containers (upstream GenerateContainerRef):
 * fieldPath "spec.containers{name}" or "spec.initContainers{name}", written into
 * buf; a name the pod does not have gives the pod's reference. */
nl_event_ref_t nl_event_container_ref(const nl_pod_t *pod, const char *container, char *buf,
                                      size_t len);
/* The Node's reference as the kubelet makes it: kind Node, name and uid the
 * node name, no namespace. */
nl_event_ref_t nl_event_node_ref(const char *node_name);

/* An owned copy of r (for work that outlives the caller's objects); free with
 * nl_event_ref_free. */
nl_event_ref_t nl_event_ref_dup(const nl_event_ref_t *r);
void nl_event_ref_free(nl_event_ref_t *r);

/* The log line of one event (upstream StartStructuredLogging(3)'s "Event
 * occurred"). */
void nl_event_log(const nl_event_ref_t *obj, const char *type, const char *reason,
                  const char *message);

/* ---- one core/v1 Event ---- */

typedef struct nl_event {
  char *name, *namespace_;  /* metadata */
  char *kind, *obj_namespace, *obj_name, *uid, *api_version, *resource_version, *field_path;
  char *type, *reason, *message;
  nl_kv_t *annotations; /* metadata.annotations, sorted by key */
  size_t n_annotations;
  int64_t first_ns, last_ns;
  int32_t count;
} nl_event_t;

/* A new event (count 1, both timestamps now), named "<object>.<now in hex ns>"
 * in the object's namespace ("default" for cluster-scoped objects), with a
 * copy of annotations (may be NULL), as upstream's makeEvent. */
void nl_event_make(nl_event_t *ev, const nl_event_ref_t *obj, const nl_kvlist_t *annotations,
                   const char *type, const char *reason, const char *message, int64_t now_ns);
void nl_event_free(nl_event_t *ev);
/* Frees and clears its annotations. */
void nl_event_drop_annotations(nl_event_t *ev);
/* The Event's JSON (a POST body); source and reporting fields from component
 * and host. Caller frees. */
char *nl_event_json(const nl_event_t *ev, const char *component, const char *host);
/* The strategic merge patch of a repeat: count, lastTimestamp, message. */
char *nl_event_patch_json(const nl_event_t *ev);

/* ---- the correlator ---- */

typedef struct nl_event_lru {
  nl_map_t map;   /* key -> entry */
  nl_list_t order; /* most recently used last */
  size_t cap;
} nl_event_lru_t;

typedef struct nl_event_correlator_opts {
  const char *component, *host; /* the event source: "kubelet", the node name */
  /* 0 takes upstream's default: 4096 entries per cache; 10 events in 600 s;
   * burst 25, one token per 300 s. */
  size_t cache_size;
  int max_events;
  int64_t max_interval_ns;
  int spam_burst;
  double spam_qps;
} nl_event_correlator_opts_t;

typedef struct nl_event_correlator {
  char *component, *host;
  int max_events;
  int64_t max_interval_ns;
  int spam_burst;
  double spam_qps;
  nl_event_lru_t aggregate, observed, spam;
} nl_event_correlator_t;

typedef enum nl_event_action {
  NL_EVENT_SKIP,   /* the spam filter dropped it */
  NL_EVENT_CREATE, /* POST it */
  NL_EVENT_PATCH,  /* a repeat: PATCH count and lastTimestamp of ev->name */
} nl_event_action_t;

void nl_event_correlator_init(nl_event_correlator_t *c, const nl_event_correlator_opts_t *o);
void nl_event_correlator_free(nl_event_correlator_t *c);
/* upstream EventCorrelate: may rewrite *ev in place (an aggregated event
 * replaces it; a repeat takes the name, first timestamp and next count of the
 * one it repeats) and says what to do with it. */
nl_event_action_t nl_event_correlate(nl_event_correlator_t *c, nl_event_t *ev, int64_t now_ns);

/* ---- the recorder and sender ---- */

#define NL_EVENTS_MAX_QUEUED 1000 /* upstream maxQueuedEvents */
#define NL_EVENTS_MAX_TRIES 12    /* upstream maxTriesPerEvent */

typedef struct nl_events_opts {
  const char *component;   /* NULL: "kubelet" */
  const char *host;        /* the node name */
  double qps;              /* eventRecordQPS (50); 0: no limit */
  int burst;               /* eventBurst (100) */
  size_t max_queued;       /* 0: NL_EVENTS_MAX_QUEUED */
  uint64_t retry_ms;       /* 0: upstream's 10 s */
  uint64_t timeout_ms;     /* per request; 0: 10 s */
  int64_t (*now_ns)(void *ctx); /* wall clock; NULL: the real one */
  void *now_ctx;
  nl_event_correlator_opts_t correlator; /* component and host are filled in */
} nl_events_opts_t;

typedef struct nl_events nl_events_t;
typedef void (*nl_events_done_cb)(nl_events_t *e);

typedef enum nl_events_state {
  NL_EVENTS_IDLE,    /* queue empty */
  NL_EVENTS_WAIT,    /* timer: rate limit, retry delay, or the next turn */
  NL_EVENTS_SENDING, /* a request in flight */
  NL_EVENTS_CLOSING, /* timers closing */
  NL_EVENTS_STOPPED,
} nl_events_state_t;

struct nl_events {
  uv_loop_t *loop;
  nl_kube_client_t *kube; /* borrowed; NULL: log only */
  nl_events_opts_t opts;  /* component and host owned */
  nl_event_correlator_t corr;
  nl_kube_ratelimit_t rl;
  nl_events_state_t state;
  nl_list_t queue;        /* raw events waiting for the correlator and the sender */
  size_t n_queued;
  struct nl_events_item *cur; /* correlated, being sent or waiting to retry */
  nl_kube_req_t *req;
  uv_timer_t timer, stop_timer;
  uint64_t rng;
  /* counters */
  uint64_t recorded, sent, skipped, dropped, failed;
  uint64_t dropped_logged, drop_log_ms;
  bool stopping;
  int closing;
  nl_events_done_cb done;
};

/* Initialises e (embedded by its owner); kube may be NULL (standalone: events
 * are logged only). Strings in opts are copied. */
void nl_events_init(nl_events_t *e, uv_loop_t *loop, nl_kube_client_t *kube,
                    const nl_events_opts_t *opts);
/* The sink for managers' opts. */
nl_event_sink_t nl_events_sink(nl_events_t *e);
/* Records one event (the sink's function); annotations may be NULL. */
void nl_events_record_annotated(void *ctx, const nl_event_ref_t *obj,
                                const nl_kvlist_t *annotations, const char *type,
                                const char *reason, const char *message);
/* The same without annotations. */
void nl_events_record(void *ctx, const nl_event_ref_t *obj, const char *type, const char *reason,
                      const char *message);
/* Sends what is queued for at most flush_ms, then drops the rest (counted and
 * logged), cancels what is in flight, closes the timers and calls done. The API
 * client must outlive done. */
void nl_events_stop(nl_events_t *e, uint64_t flush_ms, nl_events_done_cb done);

#endif
