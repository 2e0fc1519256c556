/* The recorder: logs each event, queues it (bounded) and sends it off the hot
 * path, one request at a time, as client-go's broadcaster and recordToSink.
 * One state enum and one step(); the request callback and the timers record
 * what happened and call step(). */
#include "managers/events.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/kube/status.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define DEFAULT_RETRY_MS 10000
#define DEFAULT_TIMEOUT_MS 10000
#define DROP_LOG_MS 60000 /* drops are logged at most once a minute */

typedef struct nl_events_item {
  nl_list_t link;
  nl_event_t ev;
  nl_event_action_t act; /* once correlated */
  int tries;
} item_t;

static void step(nl_events_t *e);
static void on_timer(uv_timer_t *t) { step(container_of(t, nl_events_t, timer)); }

static int64_t now_ns(const nl_events_t *e) {
  if (e->opts.now_ns) return e->opts.now_ns(e->opts.now_ctx);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void item_free(item_t *it) {
  nl_event_free(&it->ev);
  free(it);
}

static const char *const state_names[] = {"Idle", "Wait", "Sending", "Closing", "Stopped"};

static void set_state(nl_events_t *e, nl_events_state_t s) {
  nl_vlog(5, "events: %s -> %s", state_names[e->state], state_names[s]);
  e->state = s;
}

void nl_events_init(nl_events_t *e, uv_loop_t *loop, nl_kube_client_t *kube,
                    const nl_events_opts_t *opts) {
  *e = (nl_events_t){.loop = loop, .kube = kube, .opts = *opts};
  e->opts.component = nl_xstrdup(opts->component ? opts->component : "kubelet");
  e->opts.host = nl_xstrdup(opts->host ? opts->host : "");
  if (!e->opts.max_queued) e->opts.max_queued = NL_EVENTS_MAX_QUEUED;
  if (!e->opts.retry_ms) e->opts.retry_ms = DEFAULT_RETRY_MS;
  if (!e->opts.timeout_ms) e->opts.timeout_ms = DEFAULT_TIMEOUT_MS;
  nl_event_correlator_opts_t co = opts->correlator;
  co.component = e->opts.component;
  co.host = e->opts.host;
  nl_event_correlator_init(&e->corr, &co);
  nl_kube_ratelimit_init(&e->rl, opts->qps, opts->burst, uv_now(loop));
  nl_list_init(&e->queue);
  uv_timer_init(loop, &e->timer);
  uv_timer_init(loop, &e->stop_timer);
  e->rng = (uint64_t)now_ns(e) | 1;
}

nl_event_sink_t nl_events_sink(nl_events_t *e) {
  return (nl_event_sink_t){.fn = nl_events_record_annotated, .ctx = e};
}

/* Drops are counted always and logged at a bounded rate. */
static void note_drop(nl_events_t *e, size_t n) {
  e->dropped += n;
  uint64_t now = uv_now(e->loop);
  if (e->dropped_logged && now - e->drop_log_ms < DROP_LOG_MS && !e->stopping) return;
  nl_warn("events: %llu events dropped so far (%llu since the last report): the API server "
          "is not taking them and %zu are queued",
          (unsigned long long)e->dropped, (unsigned long long)(e->dropped - e->dropped_logged),
          e->n_queued);
  e->dropped_logged = e->dropped;
  e->drop_log_ms = now;
}

void nl_events_record(void *ctx, const nl_event_ref_t *obj, const char *type, const char *reason,
                      const char *message) {
  nl_events_record_annotated(ctx, obj, NULL, type, reason, message);
}

void nl_events_record_annotated(void *ctx, const nl_event_ref_t *obj,
                                const nl_kvlist_t *annotations, const char *type,
                                const char *reason, const char *message) {
  nl_events_t *e = ctx;
  nl_event_log(obj, type, reason, message);
  e->recorded++;
  if (!e->kube || e->stopping) return;
  if (e->n_queued >= e->opts.max_queued) {
    note_drop(e, 1);
    return;
  }
  item_t *it = nl_xcalloc(1, sizeof *it);
  nl_event_make(&it->ev, obj, annotations, type, reason, message, now_ns(e));
  nl_list_insert_tail(&e->queue, &it->link);
  e->n_queued++;
  if (e->state == NL_EVENTS_IDLE) {
    /* Off the hot path: the send starts from a timer, on a later loop turn. */
    set_state(e, NL_EVENTS_WAIT);
    uv_timer_start(&e->timer, on_timer, 0, 0);
  }
}

/* ---- sending ---- */

static void on_done(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err);
static void close_all(nl_events_t *e);

static void send_cur(nl_events_t *e) {
  item_t *it = e->cur;
  char path[512];
  nl_kube_request_opts_t o = {.timeout_ms = e->opts.timeout_ms, .no_rate_limit = true};
  char *body;
  if (it->act == NL_EVENT_PATCH) {
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events/%s", it->ev.namespace_,
             it->ev.name);
    o.method = "PATCH";
    o.content_type = "application/strategic-merge-patch+json";
    body = nl_event_patch_json(&it->ev);
  } else {
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", it->ev.namespace_);
    o.method = "POST";
    body = nl_event_json(&it->ev, e->opts.component, e->opts.host);
  }
  o.path = path;
  o.body = body;
  o.body_len = strlen(body);
  it->tries++;
  set_state(e, NL_EVENTS_SENDING);
  e->req = nl_kube_request(e->kube, &o, on_done, e);
  free(body);
}

static void finish_cur(nl_events_t *e) {
  item_free(e->cur);
  e->cur = NULL;
}

/* upstream recordEvent: true when the event is done with (sent or refused). */
static bool record_result(nl_events_t *e, const nl_kube_response_t *resp, const nl_err_t *err) {
  item_t *it = e->cur;
  if (!err && resp->status / 100 == 2) {
    e->sent++;
    return true;
  }
  if (!err && it->act == NL_EVENT_PATCH && resp->status == 404) {
    it->act = NL_EVENT_CREATE; /* the event is gone: create it again */
    it->tries = 0;
    return false;
  }
  if (!err) {
    nl_err_t *serr = NULL;
    nl_kube_status_err(resp, &serr);
    if (nl_kube_status_reason(resp) == NL_KUBE_REASON_ALREADY_EXISTS)
      nl_vlog(5, "events: server rejected event %s/%s (will not retry!): %s", it->ev.namespace_,
              it->ev.name, nl_err_msg(serr));
    else
      nl_error("events: server rejected event %s/%s (will not retry!): %s", it->ev.namespace_,
               it->ev.name, nl_err_msg(serr));
    nl_err_free(&serr);
    e->failed++;
    return true;
  }
  if (it->tries >= NL_EVENTS_MAX_TRIES) {
    nl_error("events: unable to write event %s/%s (retry limit exceeded!): %s",
             it->ev.namespace_, it->ev.name, nl_err_msg(err));
    e->failed++;
    return true;
  }
  nl_vlog(4, "events: unable to write event %s/%s (may retry after sleeping): %s",
          it->ev.namespace_, it->ev.name, nl_err_msg(err));
  return false;
}

static void on_done(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  nl_events_t *e = ctx;
  assert(e->state == NL_EVENTS_SENDING && e->cur);
  e->req = NULL;
  if (err && err->code == NL_ECLOSED && e->stopping) {
    close_all(e); /* the stop bound passed (or the client went first) */
    return;
  }
  if (record_result(e, resp, err)) {
    finish_cur(e);
    set_state(e, NL_EVENTS_IDLE);
    step(e);
    return;
  }
  uint64_t delay = e->opts.retry_ms;
  if (e->cur->tries == 0) delay = 0; /* a PATCH found nothing: POST at once */
  else if (e->cur->tries == 1) { /* the first retry after a random part of it */
    e->rng ^= e->rng << 13, e->rng ^= e->rng >> 7, e->rng ^= e->rng << 17;
    delay = e->rng % (delay + 1);
  }
  if (e->stopping) delay = 0; /* the stop bound ends it */
  set_state(e, NL_EVENTS_WAIT);
  uv_timer_start(&e->timer, on_timer, delay, 0);
}

static void closed(uv_handle_t *h) {
  nl_events_t *e = h->data;
  if (--e->closing) return;
  set_state(e, NL_EVENTS_STOPPED);
  nl_events_done_cb done = e->done;
  if (done) done(e);
}

static void close_all(nl_events_t *e) {
  size_t left = e->n_queued + (e->cur ? 1 : 0);
  if (e->cur) finish_cur(e);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &e->queue) {
    nl_list_remove(pos);
    item_free(nl_list_entry(pos, item_t, link));
  }
  e->n_queued = 0;
  if (left) note_drop(e, left);
  nl_event_correlator_free(&e->corr);
  free((char *)e->opts.component);
  free((char *)e->opts.host);
  set_state(e, NL_EVENTS_CLOSING);
  e->closing = 2;
  e->timer.data = e->stop_timer.data = e;
  uv_close((uv_handle_t *)&e->timer, closed);
  uv_close((uv_handle_t *)&e->stop_timer, closed);
}

static void step(nl_events_t *e) {
  if (e->state == NL_EVENTS_SENDING || e->state >= NL_EVENTS_CLOSING) return;
  if (e->state == NL_EVENTS_WAIT && uv_is_active((uv_handle_t *)&e->timer)) return;
  if (!e->cur && nl_list_empty(&e->queue)) {
    if (e->stopping) close_all(e);
    else set_state(e, NL_EVENTS_IDLE);
    return;
  }
  if (!e->cur) {
    item_t *it = nl_list_entry(e->queue.next, item_t, link);
    nl_list_remove(&it->link);
    e->n_queued--;
    it->act = nl_event_correlate(&e->corr, &it->ev, now_ns(e));
    if (it->act == NL_EVENT_SKIP) {
      nl_vlog(4, "events: %s %s on %s/%s filtered as spam", it->ev.type, it->ev.reason,
              it->ev.obj_namespace ? it->ev.obj_namespace : "", it->ev.obj_name);
      e->skipped++;
      item_free(it);
      set_state(e, NL_EVENTS_WAIT);
      uv_timer_start(&e->timer, on_timer, 0, 0);
      return;
    }
    e->cur = it;
  }
  uint64_t wait = 0;
  if (!nl_kube_ratelimit_reserve(&e->rl, uv_now(e->loop), UINT64_MAX, &wait)) wait = 0;
  if (wait) {
    set_state(e, NL_EVENTS_WAIT);
    uv_timer_start(&e->timer, on_timer, wait, 0);
    return;
  }
  send_cur(e);
}

static void on_stop_bound(uv_timer_t *t) {
  nl_events_t *e = container_of(t, nl_events_t, stop_timer);
  if (e->state >= NL_EVENTS_CLOSING) return;
  if (e->req) {
    nl_kube_req_cancel(e->req); /* on_done closes */
    return;
  }
  uv_timer_stop(&e->timer);
  close_all(e);
}

void nl_events_stop(nl_events_t *e, uint64_t flush_ms, nl_events_done_cb done) {
  if (e->stopping) return;
  e->stopping = true;
  e->done = done;
  if (e->n_queued || e->cur)
    nl_vlog(2, "events: flushing %zu events before stopping", e->n_queued + (e->cur ? 1 : 0));
  uv_timer_start(&e->stop_timer, on_stop_bound, flush_ms, 0);
  if (e->state == NL_EVENTS_WAIT) {
    uv_timer_stop(&e->timer); /* retries and rate waits end now: the bound rules */
    set_state(e, NL_EVENTS_IDLE);
  }
  step(e);
}
