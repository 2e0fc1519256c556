/* The API client's requests: rate limit, waiting for a connection, HTTP/2
 * streams or HTTP/1.1 calls, Retry-After retries, timeouts, delivery. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "agent/kube/client_int.h"
#include "agent/kube/pb.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static void arm(nl_kube_req_t *r);
static void throttle(nl_kube_req_t *r);

/* ---- results ------------------------------------------------------------ */

static void req_closed(uv_handle_t *h) {
  nl_kube_req_t *r = h->data;
  nl_kube_client_t *c = r->client;
  free(r->method);
  free(r->path);
  free(r->url);
  free(r->content_type);
  free(r->body);
  free(r->resp_type);
  nl_buf_free(&r->resp_body);
  nl_err_free(&r->err);
  free(r);
  nl_kube__client_put(c);
}

static const char *accept_header(const nl_kube_req_t *r) {
  if (r->accept_metadata) return r->accept_protobuf ? NL_KUBE_PB_ACCEPT_META : NL_KUBE_JSON_ACCEPT_META;
  return r->accept_protobuf ? NL_KUBE_PB_ACCEPT : "application/json, */*";
}

static void deliver(uv_timer_t *t) {
  nl_kube_req_t *r = t->data;
  nl_list_remove(&r->all);
  /* As client-go's round tripper logs at -v=6. */
  if (NL_V(6)) {
    uint64_t ms = uv_now(r->client->loop) - r->started;
    if (r->err)
      nl_vlog(6, "%s %s in %" PRIu64 " milliseconds: %s", r->method, r->url, ms, r->err->msg);
    else
      nl_vlog(6, "%s %s %d %s in %" PRIu64 " milliseconds", r->method, r->url, r->status,
              nl_http_status_text(r->status), ms);
  }
  /* As client-go logs request and response headers at -v=7 and -v=8. */
  if (NL_V(7))
    nl_vlog(7, "%s %s: Accept: %s, Content-Type: %s (%zu bytes); response Content-Type: %s (%zu bytes)",
            r->method, r->url, accept_header(r), r->body ? r->content_type : "-", r->body_len,
            r->resp_type ? r->resp_type : "-", r->resp_body.len);
  /* And the request's body at -v=8, as client-go; protobuf only by its size. */
  if (NL_V(8) && r->body && strstr(r->content_type, "json"))
    nl_vlog(8, "Request Body: %.*s", r->body_len > 65536 ? 65536 : (int)r->body_len, r->body);
  if (r->err) {
    r->cb(r->ctx, NULL, r->err);
  } else {
    nl_kube_response_t resp = {.status = r->status,
                               .body = r->resp_body.data ? r->resp_body.data : "",
                               .body_len = r->resp_body.len,
                               .content_type = r->resp_type ? r->resp_type : ""};
    r->cb(r->ctx, &resp, NULL);
  }
  uv_close((uv_handle_t *)&r->timer, req_closed);
}

/* Go's url.Error: `Get "https://host/path": cause`. */
static void wrap_op(nl_kube_req_t *r, nl_err_t **err) {
  char op[16];
  snprintf(op, sizeof op, "%s", r->method);
  for (char *p = op + 1; *p; p++) *p = (char)tolower((unsigned char)*p);
  nl_err_wrap(err, "%s \"%s\"", op, r->url);
}

/* Decides the result (err owned; NULL: the response) and detaches the request
 * from wherever it waits; the callback runs from the timer. */
static void finish(nl_kube_req_t *r, nl_err_t *err, bool wrap) {
  assert(r->state != RQ_DONE);
  nl_kube_req_state_t prev = r->state;
  r->state = RQ_DONE;
  if (err && wrap) wrap_op(r, &err);
  r->err = err;
  nl_list_remove(&r->link);
  bool freed = prev == RQ_ACTIVE && r->stream.h2.session;
  if (freed) {
    nl_kube_conn_t *conn = r->conn;
    nl_kube_h2_cancel(&r->stream);
    nl_kube__conn_flush(conn);
  }
  r->conn = NULL;
  uv_timer_stop(&r->timer);
  if (r->h1) {
    nl_http_cancel(r->h1); /* delivery waits for its callback */
    return;
  }
  uv_timer_start(&r->timer, deliver, 0, 0);
  /* The stream is free for a request waiting for one. */
  if (freed) nl_kube__step(r->client);
}

static void finish_errf(nl_kube_req_t *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finish_errf(nl_kube_req_t *r, int code, const char *fmt, ...) {
  nl_err_t *err = NULL;
  va_list ap;
  va_start(ap, fmt);
  nl_err_setv(&err, code, fmt, ap);
  va_end(ap);
  finish(r, err, true);
}

/* client-go's checkWait: a 429 or 5xx with Retry-After in whole seconds is
 * retried after that delay, at most maxRetries times. Returns the delay in ms,
 * or -1 when the answer is the caller's. */
static int64_t retry_delay(nl_kube_req_t *r, int status, const char *retry_after) {
  if (status != 429 && status < 500) return -1;
  if (!retry_after || r->retries >= NL_KUBE_MAX_RETRIES) return -1;
  char *end;
  errno = 0;
  long v = strtol(retry_after, &end, 10);
  if (end == retry_after || *end || errno) return -1;
  return v > 0 ? (int64_t)v * 1000 : 0;
}

static void retry(nl_kube_req_t *r, int64_t delay_ms) {
  nl_kube_client_t *c = r->client;
  r->retries++;
  nl_vlog(4, "kube: got a Retry-After %" PRId64 "s response for attempt %d to %s",
          delay_ms / 1000, r->retries, r->url);
  nl_list_remove(&r->link);
  r->conn = NULL;
  r->state = RQ_RETRY;
  r->status = 0;
  r->retry_pending = false;
  free(r->resp_type);
  r->resp_type = NULL;
  nl_buf_reset(&r->resp_body);
  r->wake = uv_now(c->loop) + (uint64_t)delay_ms;
  arm(r);
}

/* ---- the request timer -------------------------------------------------- */

static void on_timer(uv_timer_t *t) {
  nl_kube_req_t *r = container_of(t, nl_kube_req_t, timer);
  nl_kube_client_t *c = r->client;
  uint64_t now = uv_now(c->loop);
  if (r->deadline != UINT64_MAX && now >= r->deadline) {
    if (r->state == RQ_WAITING && !r->had_conn && c->last_err) {
      /* Never connected while it waited: say why, as a dial error would. */
      nl_err_t *err = NULL;
      nl_err_set(&err, c->last_err->code, "%s", c->last_err->msg);
      finish(r, err, true);
    } else {
      finish_errf(r, NL_ETIMEOUT, "context deadline exceeded");
    }
    return;
  }
  if ((r->state == RQ_THROTTLED || r->state == RQ_RETRY) && now >= r->wake) {
    if (r->state == RQ_RETRY) {
      throttle(r);
      return;
    }
    r->state = RQ_WAITING;
    nl_list_insert_tail(&c->waiting, &r->link);
    arm(r);
    nl_kube__step(c);
    return;
  }
  arm(r);
}

static void arm(nl_kube_req_t *r) {
  uint64_t now = uv_now(r->client->loop);
  uint64_t at = r->deadline;
  if ((r->state == RQ_THROTTLED || r->state == RQ_RETRY) && r->wake < at) at = r->wake;
  if (at == UINT64_MAX) {
    uv_timer_stop(&r->timer);
    return;
  }
  uv_timer_start(&r->timer, on_timer, at > now ? at - now : 0, 0);
}

/* The token bucket, before each attempt (client-go throttles retries too). */
static void throttle(nl_kube_req_t *r) {
  nl_kube_client_t *c = r->client;
  uint64_t now = uv_now(c->loop), wait = 0;
  uint64_t max_wait = r->deadline == UINT64_MAX ? UINT64_MAX : r->deadline - now;
  if (!r->no_rate_limit && !nl_kube_ratelimit_reserve(&c->rl, now, max_wait, &wait)) {
    finish_errf(r, NL_ETIMEOUT, "client rate limiter Wait returned an error: rate: Wait(n=1) "
                                "would exceed context deadline");
    return;
  }
  if (wait > 0) {
    nl_vlog(4, "kube: waited %" PRIu64 " ms due to client-side throttling: %s %s", wait,
            r->method, r->url);
  }
  r->state = RQ_THROTTLED;
  r->wake = now + wait;
  if (wait == 0) {
    r->state = RQ_WAITING;
    nl_list_insert_tail(&c->waiting, &r->link);
    nl_kube__step(c);
    if (r->state == RQ_DONE) return;
  }
  arm(r);
}

/* ---- HTTP/2 streams ----------------------------------------------------- */

/* A streaming request's head: the caller's unless it is to be retried; the
 * deadline no longer applies. */
static void stream_head(nl_kube_req_t *r, int status, const char *retry_after) {
  if (retry_delay(r, status, retry_after) >= 0) {
    r->retry_pending = true;
    return;
  }
  r->deadline = UINT64_MAX;
  uv_timer_stop(&r->timer);
  if (r->on_head) r->on_head(r->ctx, status, r->resp_type ? r->resp_type : "");
}

static void st_head(nl_kube_h2_stream_t *st) {
  nl_kube_req_t *r = container_of(st, nl_kube_req_t, stream);
  r->status = st->status;
  free(r->resp_type);
  r->resp_type = st->content_type ? nl_xstrdup(st->content_type) : NULL;
  if (r->on_data) stream_head(r, st->status, st->retry_after);
}

static void st_data(nl_kube_h2_stream_t *st, const uint8_t *p, size_t n) {
  nl_kube_req_t *r = container_of(st, nl_kube_req_t, stream);
  if (r->on_data && !r->retry_pending) {
    r->on_data(r->ctx, (const char *)p, n);
    return;
  }
  if (r->on_data) return; /* the body of an answer to be retried */
  if (r->resp_body.len + n > NL_KUBE_MAX_BODY) {
    finish_errf(r, EMSGSIZE, "response body exceeds %u bytes", NL_KUBE_MAX_BODY);
    return;
  }
  nl_buf_append(&r->resp_body, p, n);
}

static void st_close(nl_kube_h2_stream_t *st, uint32_t code, bool refused) {
  nl_kube_req_t *r = container_of(st, nl_kube_req_t, stream);
  nl_kube_client_t *c = r->client;
  if (refused) {
    /* The server never processed it (GOAWAY, REFUSED_STREAM): send it again. */
    nl_vlog(4, "kube: %s %s refused by the server; retrying on a new stream", r->method, r->url);
    nl_list_remove(&r->link);
    r->conn = NULL;
    r->state = RQ_WAITING;
    nl_list_insert_tail(&c->waiting, &r->link);
    return;
  }
  if (!st->complete) {
    finish_errf(r, EPROTO, "stream error: stream ID %d; %s; received from peer", st->h2.id,
                nghttp2_http2_strerror(code));
    return;
  }
  int64_t delay = retry_delay(r, st->status, st->retry_after);
  if (delay >= 0 && (!r->on_data || r->retry_pending)) {
    retry(r, delay);
    return;
  }
  finish(r, NULL, false);
}

void nl_kube__req_submit(nl_kube_req_t *r, nl_kube_conn_t *conn, int *rc) {
  nl_kube_client_t *c = r->client;
  nl_kube_h2_header_t h[5];
  size_t n = 0;
  h[n++] = (nl_kube_h2_header_t){"user-agent", c->user_agent};
  h[n++] = (nl_kube_h2_header_t){"accept", accept_header(r)};
  if (r->body) h[n++] = (nl_kube_h2_header_t){"content-type", r->content_type};
  if (c->authorization) h[n++] = (nl_kube_h2_header_t){"authorization", c->authorization};
  r->stream.on_head = st_head;
  r->stream.on_data = st_data;
  r->stream.on_close = st_close;
  r->stream.h2.head_only = r->head_only;
  *rc = nl_kube_h2_submit(conn->h2c.h2, &r->stream, r->method, r->path, c->authority, h, n, r->body,
                          r->body_len);
  if (*rc == NL_KUBE_H2_EBUSY) return;
  if (*rc < 0) {
    finish_errf(r, EPROTO, "http2: %s", nghttp2_strerror(*rc));
    return;
  }
  nl_list_remove(&r->link);
  r->state = RQ_ACTIVE;
  r->conn = conn;
  r->had_conn = true;
  nl_list_insert_tail(&conn->reqs, &r->link);
}

void nl_kube__req_conn_lost(nl_kube_req_t *r, const nl_err_t *err) {
  nl_kube_client_t *c = r->client;
  bool sent = r->stream.h2.sent;
  nl_kube_h2_cancel(&r->stream);
  nl_list_remove(&r->link);
  r->conn = NULL;
  if (!sent) {
    r->state = RQ_WAITING;
    nl_list_insert_tail(&c->waiting, &r->link);
    return;
  }
  nl_err_t *e = NULL;
  if (err) nl_err_set(&e, err->code, "%s", err->msg);
  else nl_err_set(&e, ECONNRESET, "http2: client connection lost");
  r->state = RQ_ACTIVE;
  finish(r, e, true);
}

void nl_kube__req_dial_failed(nl_kube_req_t *r, const nl_err_t *err) {
  assert(r->state == RQ_WAITING);
  if (r->had_conn) return;
  nl_err_t *e = NULL;
  nl_err_set(&e, err->code, "%s", err->msg);
  finish(r, e, true);
}

/* ---- HTTP/1.1 ----------------------------------------------------------- */

static void h1_head(void *ctx, const nl_http_response_t *resp) {
  nl_kube_req_t *r = ctx;
  if (r->state != RQ_ACTIVE) return;
  r->status = resp->status;
  const char *ct = nl_http_headers_get(&resp->headers, "Content-Type");
  free(r->resp_type);
  r->resp_type = ct ? nl_xstrdup(ct) : NULL;
  stream_head(r, resp->status, nl_http_headers_get(&resp->headers, "Retry-After"));
}

static void h1_chunk(void *ctx, const char *data, size_t len) {
  nl_kube_req_t *r = ctx;
  if (r->state == RQ_ACTIVE && !r->retry_pending) r->on_data(r->ctx, data, len);
}

static void h1_done(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {
  nl_kube_req_t *r = ctx;
  r->h1 = NULL;
  if (r->state == RQ_DONE) { /* cancelled, timed out or stopped meanwhile */
    uv_timer_start(&r->timer, deliver, 0, 0);
    return;
  }
  if (err) {
    nl_err_t *e = NULL;
    nl_err_set(&e, err->code, "%s", err->msg); /* already `Get "url": ...` */
    finish(r, e, false);
    return;
  }
  const char *ra = nl_http_headers_get(&resp->headers, "Retry-After");
  int64_t delay = retry_delay(r, resp->status, ra);
  if (delay >= 0 && (!r->on_data || r->retry_pending)) {
    r->state = RQ_ACTIVE;
    retry(r, delay);
    return;
  }
  r->status = resp->status;
  const char *ct = nl_http_headers_get(&resp->headers, "Content-Type");
  free(r->resp_type);
  r->resp_type = ct ? nl_xstrdup(ct) : NULL;
  if (resp->body) nl_buf_append(&r->resp_body, resp->body, resp->body_len);
  finish(r, NULL, false);
}

void nl_kube__req_h1_start(nl_kube_req_t *r) {
  nl_kube_client_t *c = r->client;
  nl_list_remove(&r->link);
  r->state = RQ_ACTIVE;
  r->had_conn = true;
  nl_http_header_t h[4];
  size_t n = 0;
  h[n++] = (nl_http_header_t){"User-Agent", c->user_agent};
  h[n++] = (nl_http_header_t){"Accept", (char *)accept_header(r)};
  if (r->body) h[n++] = (nl_http_header_t){"Content-Type", r->content_type};
  if (c->authorization) h[n++] = (nl_http_header_t){"Authorization", c->authorization};
  uint64_t now = uv_now(c->loop);
  nl_http_request_opts_t o = {
      .method = r->method, .url = r->url, .headers = h, .n_headers = n,
      .host = c->authority, .body = r->body, .body_len = r->body_len,
      .timeout_ms = r->deadline == UINT64_MAX ? 0 : r->deadline > now ? r->deadline - now : 1,
      .body_cap = NL_KUBE_MAX_BODY, .tls = c->tls, .server_name = c->server_name,
      .on_head = r->on_data ? h1_head : NULL, .on_chunk = r->on_data ? h1_chunk : NULL,
      .stream_ctx = r};
  r->h1 = nl_http_request(c->loop, &o, h1_done, r);
}

/* ---- public API --------------------------------------------------------- */

nl_kube_req_t *nl_kube_request(nl_kube_client_t *c, const nl_kube_request_opts_t *o,
                               nl_kube_done_fn cb, void *ctx) {
  nl_kube_req_t *r = nl_xcalloc(1, sizeof *r);
  r->client = c;
  r->cb = cb;
  r->ctx = ctx;
  r->on_head = o->on_head;
  r->on_data = o->on_data;
  r->method = nl_xstrdup(o->method ? o->method : "GET");
  const char *path = o->path ? o->path : "/";
  r->path = nl_xasprintf("%s%s", c->prefix, path);
  r->url = nl_xasprintf("%s%s", c->server, path);
  if (o->body && o->body_len) {
    r->body = nl_xmalloc(o->body_len);
    memcpy(r->body, o->body, o->body_len);
    r->body_len = o->body_len;
  } else if (o->body || !strcmp(r->method, "POST") || !strcmp(r->method, "PUT") ||
             !strcmp(r->method, "PATCH")) {
    r->body = nl_xstrdup("");
  }
  r->content_type = nl_xstrdup(o->content_type ? o->content_type : "application/json");
  r->no_rate_limit = o->no_rate_limit;
  r->fail_on_dial = o->fail_on_dial;
  r->accept_protobuf = o->accept_protobuf;
  r->accept_metadata = o->accept_metadata;
  r->head_only = o->head_only && !o->on_data;
  nl_list_init(&r->link);
  nl_list_insert_tail(&c->reqs, &r->all);
  uv_timer_init(c->loop, &r->timer);
  r->timer.data = r;
  c->live++;
  uint64_t timeout = o->timeout_ms ? o->timeout_ms : c->default_timeout_ms;
  r->started = uv_now(c->loop);
  r->deadline = r->started + timeout;
  r->state = RQ_THROTTLED;
  if (c->state == NL_KUBE_STOPPING) nl_kube__req_stop(r);
  else throttle(r);
  return r;
}

bool nl_kube_req_had_conn(const nl_kube_req_t *r) { return r->had_conn; }

void nl_kube_req_cancel(nl_kube_req_t *r) {
  if (r->state == RQ_DONE) return;
  finish_errf(r, NL_ECLOSED, "context canceled");
}

void nl_kube__req_stop(nl_kube_req_t *r) {
  if (r->state != RQ_DONE) finish_errf(r, NL_ECLOSED, "the client is stopped");
}
