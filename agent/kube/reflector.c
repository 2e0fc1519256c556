/* One state machine: completions record an outcome and call step(), which picks
 * the next request or the back-off. Each request carries the generation it was
 * started in; stop and every restart bump the generation, so a late completion
 * only drops its context (the reflector lives until the last one came). */
#include "agent/kube/reflector.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kube/internal.h"
#include "agent/kube/pb.h"
#include "reactor/backoff.h"
#include "reactor/buf.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define MIN_WATCH_TIMEOUT_MS 300000 /* client-go's minWatchTimeout: 5 min */
#define BACKOFF_INITIAL_MS 800
#define BACKOFF_MAX_MS 30000
#define BACKOFF_RESET_MS 120000 /* a quiet 2 min starts the back-off over */
/* A watch the server leaves open this long after its timeoutSeconds is dead
 * (a half-open connection): give up on it and re-watch. */
#define WATCH_GRACE_MS 60000
/* client-go: a watch that closes within 1 s with no event is an error, so that a
 * misbehaving server is not hammered. */
#define SHORT_WATCH_MS 1000
#define MAX_ERROR_BODY 4096

typedef enum outcome {
  GO,             /* started, or the back-off is over */
  LIST_DONE,      /* a list was delivered */
  LIST_EXPIRED,   /* 410 for the resourceVersion asked */
  LIST_FAILED,
  WATCH_ENDED,    /* the server closed the stream normally */
  WATCH_EXPIRED,  /* 410: re-list */
  WATCH_FAILED,   /* an HTTP error or an ERROR event: back off, re-list */
  WATCH_BROKEN,   /* no response, a torn or malformed stream: back off, re-watch */
  WATCH_DEADLINE, /* open far past its timeout: re-watch */
  /* The request never had a connection (the link is down): the same again at
   * once, waiting for the client's next dial, whose back-off (jittered, 7 s at
   * most) paces it; the reflector's own back-off does not grow, so the link's
   * return is not followed by up to a minute of it. */
  LIST_NO_LINK,
  WATCH_NO_LINK,
} outcome_t;

struct nl_reflector {
  uv_loop_t *loop;
  nl_kube_client_t *client;
  char *path;
  char *selectors; /* "fieldSelector=...&labelSelector=..." escaped, or "" */
  nl_reflector_opts_t opts;
  nl_reflector_cbs_t cbs;
  void *ctx;

  nl_reflector_state_t state;
  uv_timer_t timer; /* the back-off, and the watch's deadline */
  nl_kube_req_t *req;
  uint64_t gen;     /* of the request in flight */
  unsigned pending; /* requests whose completion has not run */
  bool timer_closed;

  char *rv;            /* NULL before the first list */
  bool rv_unavailable; /* a list said 410: list from storage (no resourceVersion) */
  bool synced;
  bool relist;         /* what the back-off leads to */
  nl_backoff_t backoff;
  uint64_t last_backoff_ms;

  /* the watch in flight */
  bool watch_protobuf; /* ask for it (opts.kind known to pb.c, the client prefers it) */
  nl_kube_watch_decoder_t dec;
  int watch_status;
  char *watch_type;    /* the response's Content-Type */
  nl_buf_t error_body; /* a non-200 watch's body, for its Status */
  uint64_t watch_started_ms;
  unsigned watch_events;
  outcome_t watch_outcome; /* set when an event ends the stream */
  char *watch_error;

  void (*done)(void *ctx);
  void *done_ctx;
};

typedef struct req_ctx {
  nl_reflector_t *r;
  uint64_t gen;
} req_ctx_t;

static const char *const state_names[] = {"idle", "listing", "watching", "backoff", "stopping"};

const char *nl_reflector_state_name(nl_reflector_state_t s) { return state_names[s]; }
nl_reflector_state_t nl_reflector_state(const nl_reflector_t *r) { return r->state; }
bool nl_reflector_synced(const nl_reflector_t *r) { return r->synced; }
const char *nl_reflector_resource_version(const nl_reflector_t *r) { return r->rv ? r->rv : ""; }

static void step(nl_reflector_t *r, outcome_t o);

static void set_state(nl_reflector_t *r, nl_reflector_state_t s) {
  if (r->state != s) nl_vlog(4, "reflector %s: %s -> %s", r->path, state_names[r->state], state_names[s]);
  r->state = s;
}

static void set_rv(nl_reflector_t *r, const char *rv) {
  if (!*rv) return;
  free(r->rv);
  r->rv = nl_xstrdup(rv);
}

/* url.Values.Encode's escaping (QueryEscape). */
static void query_escape(nl_buf_t *b, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
        strchr("-_.~", c))
      nl_buf_append(b, s, 1);
    else if (c == ' ')
      nl_buf_puts(b, "+");
    else
      nl_buf_printf(b, "%%%02X", c);
  }
}

static req_ctx_t *new_req_ctx(nl_reflector_t *r) {
  req_ctx_t *c = nl_xmalloc(sizeof *c);
  c->r = r;
  c->gen = ++r->gen;
  r->pending++;
  return c;
}

/* Frees a request's context; *stale when the request is no longer the current one. */
static nl_reflector_t *take_ctx(void *ctx, bool *stale) {
  req_ctx_t *c = ctx;
  nl_reflector_t *r = c->r;
  *stale = c->gen != r->gen;
  free(c);
  return r;
}

static void maybe_free(nl_reflector_t *r) {
  if (r->state != NL_REFLECTOR_STOPPING || !r->timer_closed || r->pending) return;
  void (*done)(void *) = r->done;
  void *done_ctx = r->done_ctx;
  nl_kube_watch_decoder_free(&r->dec);
  nl_buf_free(&r->error_body);
  free(r->watch_error);
  free(r->watch_type);
  free(r->rv);
  free(r->path);
  free(r->selectors);
  free(r);
  if (done) done(done_ctx);
}

/* Ends the request in flight: its completion will be stale. */
static void abandon(nl_reflector_t *r) {
  r->gen++;
  if (r->req) nl_kube_req_cancel(r->req);
  r->req = NULL;
}

/* ---- LIST ---- */

static void on_list(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err);

static void start_list(nl_reflector_t *r) {
  set_state(r, NL_REFLECTOR_LISTING);
  nl_buf_t url = NL_BUF_INIT;
  nl_buf_printf(&url, "%s?%s", r->path, r->selectors);
  /* client-go's relistResourceVersion: "0" (any cached state) first, the last
   * version seen later, and none (from storage) after a 410 */
  if (!r->rv_unavailable) {
    nl_buf_puts(&url, *r->selectors ? "&resourceVersion=" : "resourceVersion=");
    query_escape(&url, r->rv ? r->rv : "0");
  }
  if (url.data[url.len - 1] == '?') url.data[--url.len] = 0;
  nl_kube_request_opts_t o = {.method = "GET", .path = url.data, .fail_on_dial = true};
  r->req = nl_kube_request(r->client, &o, on_list, new_req_ctx(r));
  nl_buf_free(&url);
}

static int deliver_list(nl_reflector_t *r, const nl_kube_response_t *resp, nl_err_t **err) {
  nl_arena_t *a = nl_arena_new(resp->body_len / 2 + 1024);
  int rc = -1;
  nl_tnode_t *root = nl_tree_parse_json(a, resp->body, resp->body_len, err);
  if (!root) {
    nl_err_wrap(err, "malformed list");
    goto out;
  }
  const nl_tnode_t *items = nl_tree_get(root, "items");
  const nl_tnode_t *meta = nl_tree_get(root, "metadata");
  const nl_tnode_t *rv = nl_tree_get(meta, "resourceVersion");
  if (root->kind != NL_T_MAP || (items && items->kind != NL_T_SEQ && items->kind != NL_T_NULL) ||
      !rv || rv->kind != NL_T_STR || !rv->len || strlen(rv->s) != rv->len) {
    nl_err_set(err, NL_EINVAL, "malformed list: no items or no metadata.resourceVersion");
    goto out;
  }
  size_t n = items && items->kind == NL_T_SEQ ? items->n : 0, i = 0;
  nl_kube_raw_t *raw = nl_arena_alloc(a, n * sizeof *raw);
  for (const nl_tentry_t *e = n ? items->first : NULL; e; e = e->next, i++) {
    if (e->val->kind != NL_T_MAP) {
      nl_err_set(err, NL_EINVAL, "malformed list: items[%zu] is not an object", i);
      goto out;
    }
    raw[i] = (nl_kube_raw_t){e->val->s, e->val->len};
  }
  set_rv(r, rv->s);
  r->rv_unavailable = false;
  r->synced = true;
  rc = 0;
  if (r->cbs.on_list) r->cbs.on_list(r->ctx, raw, n, rv->s);
out:
  nl_arena_free(a);
  return rc;
}

static void on_list(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  bool stale;
  nl_reflector_t *r = take_ctx(ctx, &stale);
  if (!stale) {
    assert(r->state == NL_REFLECTOR_LISTING);
    nl_kube_req_t *req = r->req;
    r->req = NULL;
    nl_err_t *e = NULL;
    outcome_t o = LIST_FAILED;
    if (err) {
      nl_err_set(&e, err->code, "%s", err->msg);
      if (!nl_kube_req_had_conn(req)) o = LIST_NO_LINK;
    } else if (resp->status / 100 != 2) {
      nl_kube_status_err(resp, &e);
      nl_kube_reason_t why = nl_kube_status_reason(resp);
      if (!r->rv_unavailable &&
          (resp->status == 410 || why == NL_KUBE_REASON_EXPIRED || why == NL_KUBE_REASON_GONE))
        o = LIST_EXPIRED;
    } else if (deliver_list(r, resp, &e) == 0) {
      o = LIST_DONE;
    }
    if (r->state != NL_REFLECTOR_STOPPING) { /* on_list may have stopped us */
      if (o == LIST_EXPIRED)
        nl_vlog(4, "reflector %s: list: %s; listing from storage", r->path, nl_err_msg(e));
      else if (o == LIST_NO_LINK)
        nl_vlog(2, "reflector %s: list failed: %s; again with the next connection", r->path,
                nl_err_msg(e));
      else if (o != LIST_DONE)
        nl_warn("reflector %s: list failed: %s", r->path, nl_err_msg(e));
      if ((o == LIST_FAILED || o == LIST_NO_LINK) && r->cbs.on_list_error)
        r->cbs.on_list_error(r->ctx, err ? 0 : resp->status, e);
      if (r->state != NL_REFLECTOR_STOPPING) step(r, o);
    }
    nl_err_free(&e);
  }
  r->pending--;
  maybe_free(r);
}

/* ---- WATCH ---- */

static void on_watch_head(void *ctx, int status, const char *content_type);
static void on_watch_data(void *ctx, const char *data, size_t len);
static void on_watch_done(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err);
static void on_timer(uv_timer_t *t);

/* An event from a watch (a change, a bookmark, or a 410: the server working as
 * it should) proves the server and the link healthy again: the back-off,
 * grown while they failed, starts over, so that the re-list of a 410 after an
 * outage (the version compacted away meanwhile) waits 0.8-1.6 s, not what the
 * outage left. client-go starts over only after 2 minutes without a back-off.
 * A watch closed at once with nothing in it, or an error event, does not: a
 * misbehaving server still sees the back-off grow. */
static int on_event(void *ctx, const nl_kube_watch_event_t *ev) {
  nl_reflector_t *r = ctx;
  r->watch_events++;
  bool gone = ev->type == NL_KUBE_WATCH_ERROR &&
              (ev->code == 410 || ev->reason == NL_KUBE_REASON_EXPIRED ||
               ev->reason == NL_KUBE_REASON_GONE);
  if (ev->type != NL_KUBE_WATCH_ERROR || gone) nl_backoff_reset(&r->backoff);
  if (ev->type == NL_KUBE_WATCH_ERROR) {
    r->watch_outcome = gone ? WATCH_EXPIRED : WATCH_FAILED;
    free(r->watch_error);
    r->watch_error = nl_xasprintf("watch error event: %s (%d %s)",
                                  *ev->message ? ev->message : "no message", ev->code,
                                  nl_kube_reason_name(ev->reason));
    return 1;
  }
  set_rv(r, ev->resource_version);
  if (ev->type != NL_KUBE_WATCH_BOOKMARK && r->cbs.on_event) {
    r->cbs.on_event(r->ctx, ev);
    if (r->state != NL_REFLECTOR_WATCHING) return 1; /* stopped from the callback */
  }
  return 0;
}

static void start_watch(nl_reflector_t *r) {
  assert(r->rv);
  set_state(r, NL_REFLECTOR_WATCHING);
  nl_kube_watch_decoder_free(&r->dec);
  nl_kube_watch_decoder_init(&r->dec, r->opts.max_event, on_event, r);
  nl_buf_reset(&r->error_body);
  r->watch_status = 0;
  free(r->watch_type);
  r->watch_type = NULL;
  r->watch_events = 0;
  r->watch_outcome = WATCH_ENDED;
  r->watch_started_ms = uv_now(r->loop);
  double f = nl_backoff_random(&r->backoff);
  uint64_t timeout_s = (uint64_t)((double)r->opts.min_watch_timeout_ms * (1.0 + f) / 1000.0);
  if (!timeout_s) timeout_s = 1;
  nl_buf_t url = NL_BUF_INIT;
  nl_buf_printf(&url, "%s?allowWatchBookmarks=true%s%s&resourceVersion=", r->path,
                *r->selectors ? "&" : "", r->selectors);
  query_escape(&url, r->rv);
  nl_buf_printf(&url, "&timeoutSeconds=%llu&watch=true", (unsigned long long)timeout_s);
  /* Its head may wait as long as the watch may last (client-go's watch has no
   * deadline but the server's): while the link is down it waits for the client
   * to connect, and goes out with the first connection instead of timing out
   * just before it (the reflector's back-off would follow). A dead connection
   * fails it sooner (the client's PING health check). */
  nl_kube_request_opts_t o = {.method = "GET", .path = url.data, .on_head = on_watch_head,
                              .on_data = on_watch_data, .timeout_ms = timeout_s * 1000,
                              .accept_protobuf = r->watch_protobuf};
  r->req = nl_kube_request(r->client, &o, on_watch_done, new_req_ctx(r));
  nl_buf_free(&url);
  uv_timer_start(&r->timer, on_timer, timeout_s * 1000 + WATCH_GRACE_MS, 0);
}

static void on_watch_head(void *ctx, int status, const char *content_type) {
  req_ctx_t *c = ctx;
  nl_reflector_t *r = c->r;
  if (c->gen != r->gen) return;
  r->watch_status = status;
  free(r->watch_type);
  r->watch_type = nl_xstrdup(content_type);
  /* The server chooses: JSON when it has no protobuf for the kind. */
  if (status == 200 && nl_kube_watch_is_protobuf(content_type))
    nl_kube_watch_decoder_protobuf(&r->dec);
}

/* A 410 is routine (the version was compacted away): client-go logs it at -v=4. */
static void log_watch_end(nl_reflector_t *r, outcome_t o) {
  if (o == WATCH_EXPIRED) nl_vlog(4, "reflector %s: %s; re-listing", r->path, r->watch_error);
  else if (o != WATCH_ENDED) nl_warn("reflector %s: %s", r->path, r->watch_error);
}

/* An event or the stream decided how the watch ends: leave it now. */
static void end_watch(nl_reflector_t *r, outcome_t o) {
  uv_timer_stop(&r->timer);
  abandon(r);
  log_watch_end(r, o);
  step(r, o);
}

static void on_watch_data(void *ctx, const char *data, size_t len) {
  req_ctx_t *c = ctx;
  nl_reflector_t *r = c->r;
  if (c->gen != r->gen) return;
  assert(r->state == NL_REFLECTOR_WATCHING);
  if (r->watch_status && r->watch_status != 200) { /* a Status, kept for the message */
    size_t room = MAX_ERROR_BODY - r->error_body.len;
    nl_buf_append(&r->error_body, data, len < room ? len : room);
    return;
  }
  nl_err_t *err = NULL;
  int rc = nl_kube_watch_decoder_feed(&r->dec, data, len, &err);
  if (r->state != NL_REFLECTOR_WATCHING) return; /* stopped from on_event */
  if (rc < 0) {
    free(r->watch_error);
    r->watch_error = nl_xstrdup(nl_err_msg(err));
    nl_err_free(&err);
    end_watch(r, WATCH_BROKEN);
  } else if (rc > 0) {
    end_watch(r, r->watch_outcome);
  }
}

static void on_watch_done(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  bool stale;
  nl_reflector_t *r = take_ctx(ctx, &stale);
  if (!stale) {
    assert(r->state == NL_REFLECTOR_WATCHING);
    nl_kube_req_t *req = r->req;
    r->req = NULL;
    uv_timer_stop(&r->timer);
    nl_err_t *e = NULL;
    outcome_t o = WATCH_ENDED;
    int status = resp ? resp->status : 0;
    if (err) {
      nl_err_set(&e, err->code, "watch: %s", err->msg);
      o = nl_kube_req_had_conn(req) ? WATCH_BROKEN : WATCH_NO_LINK;
    } else if (status != 200) {
      nl_kube_response_t full = {status, r->error_body.data ? r->error_body.data : "",
                                 r->error_body.len,
                                 r->watch_type && *r->watch_type ? r->watch_type : "application/json"};
      nl_kube_status_err(&full, &e);
      nl_err_wrap(&e, "watch: HTTP %d", status);
      nl_kube_reason_t why = nl_kube_status_reason(&full);
      o = status == 410 || why == NL_KUBE_REASON_EXPIRED || why == NL_KUBE_REASON_GONE
              ? WATCH_EXPIRED : WATCH_FAILED;
    } else if (nl_kube_watch_decoder_finish(&r->dec, &e) < 0) {
      o = WATCH_BROKEN;
    } else if (!r->watch_events && uv_now(r->loop) - r->watch_started_ms < SHORT_WATCH_MS) {
      nl_err_set(&e, NL_EINVAL, "very short watch: the server closed it within 1 s, "
                 "with no event");
      o = WATCH_BROKEN;
    }
    if (o == WATCH_NO_LINK) {
      nl_vlog(2, "reflector %s: %s; again with the next connection", r->path, nl_err_msg(e));
    } else if (o != WATCH_ENDED) {
      free(r->watch_error);
      r->watch_error = nl_xstrdup(nl_err_msg(e));
      log_watch_end(r, o);
    }
    nl_err_free(&e);
    step(r, o);
  }
  r->pending--;
  maybe_free(r);
}

/* ---- the machine ---- */

/* client-go's ExponentialBackoffManager: 800 ms doubling to 30 s, jitter 1.0,
 * starting over after 2 min without a back-off. */
static void wait_then(nl_reflector_t *r, bool relist) {
  uint64_t now = uv_now(r->loop);
  if (r->last_backoff_ms && now - r->last_backoff_ms > BACKOFF_RESET_MS)
    nl_backoff_reset(&r->backoff);
  r->last_backoff_ms = now ? now : 1;
  uint64_t d = nl_backoff_next(&r->backoff);
  r->relist = relist || !r->rv;
  set_state(r, NL_REFLECTOR_BACKOFF);
  nl_vlog(2, "reflector %s: %s in %llu ms", r->path, r->relist ? "listing" : "watching",
          (unsigned long long)d);
  uv_timer_start(&r->timer, on_timer, d, 0);
}

static void step(nl_reflector_t *r, outcome_t o) {
  assert(r->state != NL_REFLECTOR_STOPPING && r->state != NL_REFLECTOR_IDLE);
  assert(!r->req);
  switch (o) {
  case GO:
    if (r->relist) start_list(r);
    else start_watch(r);
    break;
  case LIST_DONE:
  case WATCH_ENDED:
  case WATCH_DEADLINE:
    start_watch(r);
    break;
  case LIST_EXPIRED:
    r->rv_unavailable = true; /* the same list again, from storage, now */
    start_list(r);
    break;
  case LIST_NO_LINK:
    start_list(r);
    break;
  case WATCH_NO_LINK:
    start_watch(r);
    break;
  case LIST_FAILED:
  case WATCH_EXPIRED:
  case WATCH_FAILED:
    wait_then(r, true);
    break;
  case WATCH_BROKEN:
    wait_then(r, false);
    break;
  }
}

static void on_timer(uv_timer_t *t) {
  nl_reflector_t *r = container_of(t, nl_reflector_t, timer);
  if (r->state == NL_REFLECTOR_WATCHING) {
    nl_warn("reflector %s: watch open %llu s past its timeout; re-watching", r->path,
            (unsigned long long)WATCH_GRACE_MS / 1000);
    abandon(r);
    step(r, WATCH_DEADLINE);
    return;
  }
  assert(r->state == NL_REFLECTOR_BACKOFF);
  step(r, GO);
}

int nl_reflector_new(nl_reflector_t **out, uv_loop_t *loop, nl_kube_client_t *client,
                     const nl_reflector_opts_t *opts, const nl_reflector_cbs_t *cbs, void *ctx,
                     nl_err_t **err) {
  if (!opts->path || opts->path[0] != '/' || strchr(opts->path, '?'))
    return nl_err_set(err, NL_EINVAL, "reflector: path must be absolute with no query, got \"%s\"",
                      opts->path ? opts->path : "");
  nl_reflector_t *r = nl_xcalloc(1, sizeof *r);
  r->loop = loop;
  r->client = client;
  r->path = nl_xstrdup(opts->path);
  r->opts = *opts;
  r->opts.path = r->path;
  if (!r->opts.min_watch_timeout_ms) r->opts.min_watch_timeout_ms = MIN_WATCH_TIMEOUT_MS;
  nl_buf_t q = NL_BUF_INIT;
  if (opts->field_selector && *opts->field_selector) {
    nl_buf_puts(&q, "fieldSelector=");
    query_escape(&q, opts->field_selector);
  }
  if (opts->label_selector && *opts->label_selector) {
    nl_buf_puts(&q, q.len ? "&labelSelector=" : "labelSelector=");
    query_escape(&q, opts->label_selector);
  }
  r->selectors = nl_buf_steal(&q);
  r->watch_protobuf = opts->api_version && opts->kind && nl_kube_client_protobuf(client) &&
                      nl_kube_pb_known(opts->api_version, opts->kind);
  /* not kept */
  r->opts.field_selector = r->opts.label_selector = r->opts.api_version = r->opts.kind = NULL;
  r->cbs = *cbs;
  r->ctx = ctx;
  r->relist = true;
  nl_backoff_init(&r->backoff, opts->backoff_initial_ms ? opts->backoff_initial_ms : BACKOFF_INITIAL_MS,
                  opts->backoff_max_ms ? opts->backoff_max_ms : BACKOFF_MAX_MS, 1.0);
  nl_kube_watch_decoder_init(&r->dec, opts->max_event, on_event, r);
  uv_timer_init(loop, &r->timer);
  *out = r;
  return 0;
}

void nl_reflector_start(nl_reflector_t *r) {
  assert(r->state == NL_REFLECTOR_IDLE);
  set_state(r, NL_REFLECTOR_BACKOFF); /* as if a wait had just ended */
  step(r, GO);
}

static void on_timer_close(uv_handle_t *h) {
  nl_reflector_t *r = container_of((uv_timer_t *)h, nl_reflector_t, timer);
  r->timer_closed = true;
  maybe_free(r);
}

void nl_reflector_stop(nl_reflector_t *r, void (*done)(void *ctx), void *ctx) {
  assert(r->state != NL_REFLECTOR_STOPPING);
  set_state(r, NL_REFLECTOR_STOPPING);
  r->done = done;
  r->done_ctx = ctx;
  abandon(r);
  uv_close((uv_handle_t *)&r->timer, on_timer_close);
}
