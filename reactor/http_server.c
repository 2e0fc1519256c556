#include "reactor/http_server.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>
#include <time.h>

#include "reactor/buf.h"
#include "reactor/io.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define DEFAULT_READ_TIMEOUT_MS 60000
#define DEFAULT_HEADER_TIMEOUT_MS 10000
#define DEFAULT_MAX_CONNS 128
#define DEFAULT_MAX_BODY (1024 * 1024)
/* How long a closing connection may take to hand its last answer to a peer
 * that does not read, before it is cut. */
#define LINGER_MS 10000

typedef struct route {
  nl_list_t link;
  char *method; /* NULL: any */
  char *path;
  bool subtree;
  nl_http_handler_fn fn;
  void *ctx;
} route_t;

typedef struct conn conn_t;

struct nl_http_resp {
  conn_t *conn; /* NULL once the connection is gone */
  nl_http_headers_t headers;
  bool head_only;
  bool chunked; /* streaming with chunked coding (else close-delimited) */
  void (*abort_cb)(void *ctx);
  void *abort_ctx;
  void (*drain_cb)(void *ctx);
  void *drain_ctx;
};

struct nl_http_tunnel {
  const nl_http_tunnel_cbs_t *cbs;
  void *ctx;
};

/* READING: waiting for (idle) or receiving a request head; HANDLING: a
 * handler has it; BODY: the handler waits for the body (lazy_body); STREAMING:
 * the handler streams the body; TUNNEL: taken over; CLOSING: the last answer
 * goes out (at most LINGER_MS), or the handles are closing. */
enum conn_state { C_READING, C_HANDLING, C_BODY, C_STREAMING, C_TUNNEL, C_CLOSING };

struct conn {
  nl_list_t link;
  nl_http_server_t *srv;
  nl_io_t io;
  uv_timer_t timer;
  int open_handles;
  enum conn_state state;
  nl_http_parser_t parser;
  nl_buf_t body;
  nl_buf_t pending; /* received, not parsed yet */
  nl_http_resp_t *resp;
  char *path, *query;
  bool draining, peer_eof;
  bool reading;       /* the socket is read (back-pressure stops it) */
  bool lingering;     /* closing after its last writes: counts against max_conns */
  bool dead;          /* its handles are closing; in srv->dead */
  bool body_done;     /* the request in hand has no body left to read */
  bool body_too_big;  /* on_req_body refused more than body_max */
  uint64_t req_start; /* uv_now() of the current request's first byte; 0: none yet */
  uint64_t idle_since; /* uv_now() of accept or of the last answer */
  uint64_t nreqs;      /* requests answered */
  uint64_t spread_ms;  /* added to the head's deadline (set_spread) */
  size_t body_max;
  nl_http_body_fn body_cb; /* C_BODY */
  void *body_ctx;
  nl_http_tunnel_t tunnel; /* C_TUNNEL */
  char remote[64];
};

static void conn_close(conn_t *c);
static void drain(conn_t *c);

/* ---- routes ------------------------------------------------------------- */

void nl_http_server_route(nl_http_server_t *srv, const char *method, const char *path,
                          nl_http_handler_fn fn, void *ctx) {
  route_t *r = nl_xcalloc(1, sizeof(*r));
  r->method = method ? nl_xstrdup(method) : NULL;
  r->path = nl_xstrdup(path);
  size_t n = strlen(path);
  r->subtree = n > 0 && path[n - 1] == '/';
  r->fn = fn;
  r->ctx = ctx;
  nl_list_insert_tail(&srv->routes, &r->link);
}

static bool method_ok(const route_t *r, const char *method) {
  if (!r->method || strcmp(r->method, method) == 0) return true;
  return strcmp(r->method, "GET") == 0 && strcmp(method, "HEAD") == 0;
}

/* Longest matching path; *wrong_method when only other methods match it. */
static route_t *route_find(nl_http_server_t *srv, const char *path, const char *method,
                           bool *wrong_method) {
  route_t *best = NULL;
  size_t best_len = 0;
  bool path_seen = false;
  nl_list_t *pos, *tmp;
  *wrong_method = false;
  nl_list_foreach_safe(pos, tmp, &srv->routes) {
    route_t *r = nl_list_entry(pos, route_t, link);
    size_t n = strlen(r->path);
    bool match = r->subtree ? strncmp(path, r->path, n) == 0 : strcmp(path, r->path) == 0;
    if (!match || n < best_len) continue;
    if (!method_ok(r, method)) {
      if (n > best_len || !best) path_seen = true;
      continue;
    }
    if (!best || n > best_len) {
      best = r;
      best_len = n;
    }
  }
  *wrong_method = !best && path_seen;
  return best;
}

/* ---- server ------------------------------------------------------------- */

int nl_http_server_init(nl_http_server_t *srv, uv_loop_t *loop, const nl_http_server_opts_t *opts,
                        nl_err_t **err) {
  memset(srv, 0, sizeof(*srv));
  srv->loop = loop;
  if (opts) srv->opts = *opts;
  if (!srv->opts.read_timeout_ms) srv->opts.read_timeout_ms = DEFAULT_READ_TIMEOUT_MS;
  if (!srv->opts.header_timeout_ms) srv->opts.header_timeout_ms = DEFAULT_HEADER_TIMEOUT_MS;
  if (srv->opts.header_timeout_ms > srv->opts.read_timeout_ms)
    srv->opts.header_timeout_ms = srv->opts.read_timeout_ms;
  if (!srv->opts.idle_timeout_ms) srv->opts.idle_timeout_ms = srv->opts.read_timeout_ms;
  if (!srv->opts.max_conns) srv->opts.max_conns = DEFAULT_MAX_CONNS;
  if (!srv->opts.max_head) srv->opts.max_head = NL_HTTP_DEFAULT_MAX_HEAD;
  if (!srv->opts.max_body) srv->opts.max_body = DEFAULT_MAX_BODY;
  if (srv->opts.tls) nl_tls_config_ref(srv->opts.tls);
  nl_list_init(&srv->routes);
  nl_list_init(&srv->conns);
  nl_list_init(&srv->dead);
  int rc = uv_tcp_init(loop, &srv->listener);
  if (rc < 0) {
    nl_tls_config_unref(srv->opts.tls);
    return nl_err_set(err, -rc, "http server: %s", uv_strerror(rc));
  }
  srv->listener.data = srv;
  return 0;
}

void nl_http_server_set_tls(nl_http_server_t *srv, nl_tls_config_t *tls) {
  assert(srv->opts.tls && tls);
  nl_tls_config_ref(tls);
  nl_tls_config_unref(srv->opts.tls);
  srv->opts.tls = tls;
}

static void finish_stop(nl_http_server_t *srv) {
  if (!srv->listener_closed || srv->nconns > 0) return;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &srv->routes) {
    route_t *r = nl_list_entry(pos, route_t, link);
    nl_list_remove(&r->link);
    free(r->method);
    free(r->path);
    free(r);
  }
  free(srv->addr);
  srv->addr = NULL;
  nl_tls_config_unref(srv->opts.tls);
  srv->opts.tls = NULL;
  if (srv->done_cb) srv->done_cb(srv, srv->done_ctx);
}

static void listener_closed(uv_handle_t *h) {
  nl_http_server_t *srv = h->data;
  srv->listener_closed = true;
  finish_stop(srv);
}

void nl_http_server_stop(nl_http_server_t *srv, nl_http_server_done_fn done, void *ctx) {
  if (srv->stopping) return;
  srv->stopping = true;
  srv->done_cb = done;
  srv->done_ctx = ctx;
  uv_close((uv_handle_t *)&srv->listener, listener_closed);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &srv->conns) conn_close(nl_list_entry(pos, conn_t, link));
}

int nl_http_server_port(const nl_http_server_t *srv) {
  if (!srv->listening) return -1;
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  if (uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len) < 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void format_addr(const struct sockaddr *sa, char *out, size_t cap) {
  char ip[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    uv_ip4_name((const struct sockaddr_in *)sa, ip, sizeof(ip));
    port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
    snprintf(out, cap, "%s:%d", ip, port);
  } else {
    uv_ip6_name((const struct sockaddr_in6 *)sa, ip, sizeof(ip));
    port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    snprintf(out, cap, "[%s]:%d", ip, port);
  }
}

static void on_connection(uv_stream_t *l, int status);

int nl_http_server_listen(nl_http_server_t *srv, const char *host, int port, nl_err_t **err) {
  struct sockaddr_storage ss;
  char hostbuf[INET6_ADDRSTRLEN + 2];
  const char *h = host ? host : "";
  size_t hl = strlen(h);
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']' && hl - 2 < sizeof(hostbuf)) {
    memcpy(hostbuf, h + 1, hl - 2);
    hostbuf[hl - 2] = 0;
    h = hostbuf;
  }
  if (*h == 0) h = "0.0.0.0";
  else if (strcmp(h, "localhost") == 0) h = "127.0.0.1";
  if (port < 0 || port > 65535)
    return nl_err_set(err, NL_EINVAL, "listen tcp %s:%d: invalid port", h, port);
  if (srv->listening || srv->stopping)
    return nl_err_set(err, NL_EINVAL, "listen tcp %s:%d: server already listening or stopped", h, port);
  if (uv_ip4_addr(h, port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(h, port, (struct sockaddr_in6 *)&ss) != 0)
    return nl_err_set(err, NL_EINVAL,
                      "listen tcp %s:%d: address must be an IP literal or \"localhost\"", h, port);
  char addr[INET6_ADDRSTRLEN + 16];
  format_addr((struct sockaddr *)&ss, addr, sizeof(addr));
  int rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
  /* As Go, the kernel's own bound (somaxconn) for the accept queue: a burst
   * of connects must not leave the API server's SYN dropped behind it. */
  if (rc == 0) rc = uv_listen((uv_stream_t *)&srv->listener, 4096, on_connection);
  if (rc < 0) return nl_err_set(err, -rc, "listen tcp %s: %s", addr, uv_strerror(rc));
  srv->listening = true;
  if (port == 0) {
    snprintf(strrchr(addr, ':') + 1, 8, "%d", nl_http_server_port(srv));
  }
  srv->addr = nl_xstrdup(addr);
  nl_vlog(2, "http: listening on %s%s", addr, srv->opts.tls ? " (TLS)" : "");
  return 0;
}

/* ---- connections -------------------------------------------------------- */

static void close_handles(conn_t *c);

static void conn_handle_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  if (--c->open_handles > 0) {
    close_handles(c); /* the socket closed after its last writes: the timer too */
    return;
  }
  nl_http_server_t *srv = c->srv;
  if (c->tunnel.cbs && c->tunnel.cbs->on_close) c->tunnel.cbs->on_close(c->tunnel.ctx);
  nl_list_remove(&c->link);
  nl_io_release(&c->io);
  nl_http_parser_free(&c->parser);
  nl_buf_free(&c->body);
  nl_buf_free(&c->pending);
  free(c->path);
  free(c->query);
  free(c);
  srv->nconns--;
  if (srv->stopping) finish_stop(srv);
}

/* The handler loses its connection: its abort callback, then a body it waits
 * for arrives as NULL. */
static void resp_detach(conn_t *c) {
  nl_http_resp_t *r = c->resp;
  if (!r) return;
  c->resp = NULL;
  r->conn = NULL;
  if (r->abort_cb) {
    void (*cb)(void *) = r->abort_cb;
    r->abort_cb = NULL;
    cb(r->abort_ctx);
  }
  nl_http_body_fn body_cb = c->body_cb;
  c->body_cb = NULL;
  if (body_cb) body_cb(c->body_ctx, r, NULL, 0);
}

/* Idempotent: either handle may be closing already. The connection leaves
 * the list the bounds scan, and gives back its TLS session and buffers at
 * once: a burst of connects that evicts thousands in one turn of the loop
 * (their memory goes in close callbacks, on the next turn) neither slows each
 * eviction's scan nor holds their sessions. */
static void close_handles(conn_t *c) {
  if (c->lingering) {
    c->lingering = false;
    c->srv->nlinger--;
  }
  if (!c->dead) {
    c->dead = true;
    nl_list_remove(&c->link);
    nl_list_insert_tail(&c->srv->dead, &c->link);
    nl_io_release(&c->io);
    nl_buf_free(&c->pending);
    nl_buf_free(&c->body);
  }
  if (!uv_is_closing((uv_handle_t *)&c->timer)) {
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
  }
  nl_io_close(&c->io, conn_handle_closed);
}

static void leave_live(conn_t *c) {
  c->state = C_CLOSING;
  assert(c->srv->nlive > 0);
  c->srv->nlive--;
}

/* Closes both handles now; memory goes in the last close callback. */
static void conn_close(conn_t *c) {
  if (c->state != C_CLOSING) leave_live(c);
  close_handles(c);
  resp_detach(c);
}

static void on_linger(uv_timer_t *t) {
  conn_t *c = t->data;
  nl_vlog(4, "http: %s: the peer did not take the last answer within %d ms, closing", c->remote,
          LINGER_MS);
  close_handles(c);
}

/* Closes once what was written has been sent, or after LINGER_MS: a peer
 * that does not read cannot keep the answer's memory. */
static void conn_close_after_writes(conn_t *c) {
  if (c->state == C_CLOSING) return;
  leave_live(c);
  uv_timer_start(&c->timer, on_linger, LINGER_MS, 0);
  c->lingering = true;
  c->srv->nlinger++;
  nl_io_close_after_writes(&c->io, conn_handle_closed, true);
  resp_detach(c);
}

static void on_timeout(uv_timer_t *t) {
  conn_t *c = t->data;
  if (c->state == C_BODY)
    nl_vlog(4, "http: %s: no complete request within %" PRIu64 " ms, closing", c->remote,
            c->srv->opts.read_timeout_ms);
  else if (c->req_start)
    nl_vlog(4, "http: %s: no complete request head within %" PRIu64 " ms, closing", c->remote,
            c->srv->opts.header_timeout_ms + c->spread_ms);
  else
    nl_vlog(4, "http: %s: idle for %" PRIu64 " ms, closing", c->remote,
            c->srv->opts.idle_timeout_ms);
  conn_close(c);
}

/* The one timer of a live connection: idle until a request's first byte, then
 * the head's deadline, then (reading a body) the request's. A handler, a
 * stream and a tunnel have none. */
static void arm_timer(conn_t *c) {
  nl_http_server_opts_t *o = &c->srv->opts;
  uint64_t deadline;
  if (c->state == C_READING && !c->req_start) deadline = c->idle_since + o->idle_timeout_ms;
  else if (c->state == C_READING) deadline = c->req_start + o->header_timeout_ms + c->spread_ms;
  else if (c->state == C_BODY) deadline = c->req_start + o->read_timeout_ms;
  else {
    uv_timer_stop(&c->timer);
    return;
  }
  uint64_t now = uv_now(c->srv->loop);
  uv_timer_start(&c->timer, on_timeout, deadline > now ? deadline - now : 0, 0);
}

/* Back-pressure: the socket is read only while what waits to be parsed and
 * what waits to be sent are both under their bounds. */
static void update_reading(conn_t *c) {
  if (c->state == C_CLOSING || c->state == C_TUNNEL) return;
  bool want = c->pending.len < NL_HTTP_PENDING_HIGH &&
              nl_io_queued(&c->io) < NL_HTTP_OUT_HIGH;
  if (want == c->reading) return;
  c->reading = want;
  nl_io_read(&c->io, want);
}

/* Waiting for the next request: the idle timeout runs, or the head's deadline
 * when a pipelined request has begun. */
static void set_idle(conn_t *c) {
  c->idle_since = uv_now(c->srv->loop);
  c->req_start = c->pending.len > 0 ? c->idle_since : 0;
  arm_timer(c);
}

static void format_date(char *out, size_t cap) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* How a response's body is delimited. */
enum framing { FR_LENGTH, FR_CHUNKED, FR_CLOSE };

/* Appends a response head to b. */
static void put_head(nl_buf_t *b, int status, const nl_http_headers_t *headers,
                     enum framing framing, size_t len, bool keep) {
  char date[64];
  format_date(date, sizeof(date));
  nl_buf_printf(b, "HTTP/1.1 %d %s\r\n", status, nl_http_status_text(status));
  bool has_type = false;
  if (headers) {
    for (size_t i = 0; i < headers->n; i++) {
      const char *name = headers->v[i].name;
      if (!strcasecmp(name, "Content-Length") || !strcasecmp(name, "Connection") ||
          !strcasecmp(name, "Date") || !strcasecmp(name, "Transfer-Encoding"))
        continue;
      if (!strcasecmp(name, "Content-Type")) has_type = true;
      nl_buf_printf(b, "%s: %s\r\n", name, headers->v[i].value);
    }
  }
  bool bodyless = status < 200 || status == 204 || status == 304;
  if (!bodyless) {
    if (!has_type && (len > 0 || framing != FR_LENGTH))
      nl_buf_puts(b, "Content-Type: text/plain; charset=utf-8\r\n");
    if (framing == FR_LENGTH) nl_buf_printf(b, "Content-Length: %zu\r\n", len);
    if (framing == FR_CHUNKED) nl_buf_puts(b, "Transfer-Encoding: chunked\r\n");
  }
  nl_buf_printf(b, "Date: %s\r\n", date);
  if (!keep) nl_buf_puts(b, "Connection: close\r\n");
  nl_buf_puts(b, "\r\n");
}

static bool conn_write(conn_t *c, const void *data, size_t len) {
  nl_cleanup_err nl_err_t *err = NULL;
  if (nl_io_write(&c->io, data, len, &err) < 0) {
    nl_vlog(4, "http: %s: %s", c->remote, nl_err_msg(err));
    return false;
  }
  return true;
}

/* Whether the connection may carry another request after this answer: a
 * body left unread ends it (Go's server closes too when it will not read a
 * large unread body). */
static bool may_keep(const conn_t *c) {
  return c->parser.msg.keep_alive && c->body_done && !c->peer_eof && !c->srv->stopping;
}

/* The response is out: close, or wait for the next request. */
static void finish_response(conn_t *c, bool keep) {
  if (!keep) {
    conn_close_after_writes(c);
    return;
  }
  c->nreqs++;
  free(c->path);
  free(c->query);
  c->path = c->query = NULL;
  nl_buf_reset(&c->body);
  nl_http_parser_next(&c->parser);
  c->state = C_READING;
  set_idle(c);
  drain(c);
}

/* Writes a complete response; keep says whether the connection stays open. */
static void write_response(conn_t *c, int status, const nl_http_headers_t *headers, bool head_only,
                           const void *body, size_t len, bool keep) {
  nl_buf_t b = NL_BUF_INIT;
  put_head(&b, status, headers, FR_LENGTH, len, keep);
  bool bodyless = status < 200 || status == 204 || status == 304;
  if (!bodyless && !head_only && len > 0) nl_buf_append(&b, body, len);
  if (!conn_write(c, b.data, b.len)) keep = false;
  nl_buf_free(&b);
  finish_response(c, keep);
}

/* An error answer to a request we could not parse or accept; the connection
 * ends after it, as Go's server does for a bad request. A handler that waited
 * for the body gets NULL. */
static void reject(conn_t *c, int status, const char *msg) {
  nl_http_headers_t h = NL_HTTP_HEADERS_INIT;
  nl_http_headers_add(&h, "Content-Type", "text/plain; charset=utf-8");
  char body[256];
  int n = snprintf(body, sizeof(body), "%d %s: %s\n", status, nl_http_status_text(status), msg);
  write_response(c, status, &h, false, body, n < 0 ? 0 : (size_t)n, false);
  nl_http_headers_free(&h);
}

static void not_found(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_http_resp_send_str(resp, 404, "404 page not found\n");
}

static void bad_method(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_http_resp_send_str(resp, 405, "Method Not Allowed\n");
}

static void dispatch(conn_t *c) {
  nl_http_server_t *srv = c->srv;
  nl_http_msg_t *m = &c->parser.msg;
  const char *target = m->target;
  /* absolute-form (a proxy-style request): keep only the path. */
  if (strncasecmp(target, "http://", 7) == 0 || strncasecmp(target, "https://", 8) == 0) {
    const char *p = strchr(strstr(target, "//") + 2, '/');
    target = p ? p : "/";
  }
  const char *q = strchr(target, '?');
  c->path = q ? nl_xstrndup(target, (size_t)(q - target)) : nl_xstrdup(target);
  c->query = nl_xstrdup(q ? q + 1 : "");
  if (c->body.len == 0) nl_buf_puts(&c->body, "");
  nl_http_req_t req = {
      .method = m->method,
      .target = m->target,
      .path = c->path,
      .query = c->query,
      .headers = &m->headers,
      .body = c->body.data,
      .body_len = c->body.len,
      .remote = c->remote,
      .tls = c->io.tls,
  };
  bool wrong_method;
  route_t *r = route_find(srv, c->path, m->method, &wrong_method);
  nl_http_handler_fn fn = r ? r->fn : wrong_method ? bad_method : not_found;
  void *ctx = r ? r->ctx : NULL;
  nl_http_resp_t *resp = nl_xcalloc(1, sizeof(*resp));
  resp->conn = c;
  resp->head_only = strcmp(m->method, "HEAD") == 0;
  c->resp = resp;
  c->state = C_HANDLING;
  arm_timer(c);
  nl_vlog(5, "http: %s: %s %s", c->remote, m->method, m->target);
  fn(ctx, &req, resp);
}

static int on_req_head(void *ctx, nl_http_msg_t *m) {
  conn_t *c = ctx;
  /* Without a body (nor an Upgrade's bytes) the message completes at once. */
  bool has_body = m->chunked || m->content_length > 0;
  if (!c->srv->opts.lazy_body || !has_body) return 0;
  return NL_HTTP_HEAD_PAUSE;
}

static int on_req_body(void *ctx, const char *p, size_t n) {
  conn_t *c = ctx;
  if (c->srv->opts.lazy_body && c->body.len + n > c->body_max) {
    c->body_too_big = true;
    nl_http_parser_fail(&c->parser, EMSGSIZE, "http: body exceeds the limit of %zu",
                        c->body_max);
    return -1;
  }
  nl_buf_append(&c->body, p, n);
  return 0;
}

/* The body a handler asked for is complete. */
static void body_complete(conn_t *c) {
  c->state = C_HANDLING;
  c->body_done = true;
  arm_timer(c);
  nl_http_body_fn cb = c->body_cb;
  c->body_cb = NULL;
  if (c->body.len == 0) nl_buf_puts(&c->body, "");
  cb(c->body_ctx, c->resp, c->body.data, c->body.len);
}

/* True while queued output keeps the next request from being parsed. */
static bool out_full(const conn_t *c) { return nl_io_queued(&c->io) >= NL_HTTP_OUT_HIGH; }

/* Parses what was received while the connection can take it: the next request
 * only when none is in hand and the answers before it are mostly out. */
static void drain(conn_t *c) {
  if (c->draining) return; /* the outer loop goes on */
  c->draining = true;
  while (((c->state == C_READING && !out_full(c)) || c->state == C_BODY) && c->pending.len > 0) {
    size_t used = 0;
    nl_cleanup_err nl_err_t *err = NULL;
    int rc = nl_http_parser_feed(&c->parser, c->pending.data, c->pending.len, &used, &err);
    if (rc < 0) {
      nl_vlog(4, "http: %s: %s", c->remote, nl_err_msg(err));
      int kind = nl_http_parser_failure(&c->parser);
      int status = kind == NL_HTTP_PERR_HEAD_TOO_BIG                    ? 431
                   : kind == NL_HTTP_PERR_BODY_TOO_BIG || c->body_too_big ? 413
                                                                         : 400;
      reject(c, status, nl_err_msg(err));
      break;
    }
    nl_buf_consume(&c->pending, used);
    if (rc == NL_HTTP_FEED_HEAD) {
      c->body_done = false;
      dispatch(c);
    } else if (rc == NL_HTTP_FEED_DONE && c->state == C_BODY) {
      body_complete(c);
    } else if (rc == NL_HTTP_FEED_DONE) {
      /* An Upgrade not taken over by its handler ends with the answer. */
      if (c->parser.msg.upgrade) c->parser.msg.keep_alive = false;
      c->body_done = true;
      dispatch(c);
    }
  }
  c->draining = false;
  if (c->state == C_BODY && c->peer_eof) {
    conn_close(c); /* the body can never complete */
  } else if (c->state == C_READING && c->peer_eof) {
    /* The peer is done sending; a half-sent request can never complete. The
     * answers queued before go out first. */
    conn_close_after_writes(c);
  }
  update_reading(c);
}

static void on_first_byte(nl_io_t *io) {
  conn_t *c = container_of(io, conn_t, io);
  /* The first request's head deadline counts from here, the TLS handshake
   * included: a stalled handshake holds its session no longer. */
  if (c->state == C_READING && !c->req_start) {
    c->req_start = uv_now(c->srv->loop);
    arm_timer(c);
  }
}

static void on_data(nl_io_t *io, const char *p, size_t n) {
  conn_t *c = container_of(io, conn_t, io);
  if (c->state == C_CLOSING) return;
  if (c->state == C_TUNNEL) {
    c->tunnel.cbs->on_data(c->tunnel.ctx, p, n);
    return;
  }
  if (c->state == C_READING && !c->req_start) {
    /* The request has begun: from idle to the head's deadline. */
    c->req_start = uv_now(c->srv->loop);
    arm_timer(c);
  }
  /* At most one read over the bound: update_reading stops the socket. */
  nl_buf_append(&c->pending, p, n);
  drain(c);
}

static void on_end(nl_io_t *io, nl_err_t *err) {
  conn_t *c = container_of(io, conn_t, io);
  if (c->state == C_TUNNEL) {
    c->peer_eof = true;
    c->tunnel.cbs->on_end(c->tunnel.ctx, err);
    return;
  }
  if (err) {
    nl_vlog(4, "http: %s: %s", c->remote, nl_err_msg(err));
    conn_close(c);
    return;
  }
  /* A half-closed client still gets the answer to a request in flight; a
   * stream (a log follow) that may write nothing for hours ends, as Go's
   * server cancels the request when the client's side closes. */
  c->peer_eof = true;
  if (c->state == C_STREAMING) conn_close(c);
  else if (c->state == C_READING || c->state == C_BODY) drain(c);
}

static void on_drain(nl_io_t *io) {
  conn_t *c = container_of(io, conn_t, io);
  if (c->state == C_TUNNEL && c->tunnel.cbs->on_drain) c->tunnel.cbs->on_drain(c->tunnel.ctx);
  else if (c->state == C_STREAMING && c->resp && c->resp->drain_cb)
    c->resp->drain_cb(c->resp->drain_ctx);
  else if (c->state == C_READING) drain(c); /* pipelined requests held by the output */
  if (c->state != C_CLOSING && c->state != C_TUNNEL) update_reading(c);
}

static const nl_io_cbs_t conn_io_cbs = {.on_ready = NULL,
                                              .on_data = on_data,
                                              .on_end = on_end,
                                              .on_drain = on_drain,
                                              .on_first_byte = on_first_byte};

/* Unproven connections (none of their requests answered yet) above this many
 * make room the same way: each may hold a TLS session (~33 KiB in mbedtls)
 * and a partial head, so their number, not only max_conns, bounds memory. */
#define MAX_UNPROVEN 128
/* And from one address: fewer handshakes of one attacker in flight, so that
 * each turn of the loop gets to the others' sooner. */
#define MAX_UNPROVEN_PER_HOST 32
/* A TLS handshake (a first byte, on a plain listener) not done this long
 * after accept is stalled: a real client takes milliseconds. */
#define STALLED_MS 1000

static bool unproven(const conn_t *c) { return c->state == C_READING && c->nreqs == 0; }

static bool stalled(const conn_t *c, uint64_t now) {
  bool silent = c->srv->opts.tls ? nl_io_handshaking(&c->io) : !c->io.got_bytes;
  return silent && now - c->idle_since >= STALLED_MS;
}

/* "10.0.0.1" of "10.0.0.1:5300" (or of "[::1]:5300"): its length. */
static size_t host_len(const char *remote) {
  const char *colon = strrchr(remote, ':');
  return colon ? (size_t)(colon - remote) : strlen(remote);
}

static bool same_host(const conn_t *a, const conn_t *b) {
  size_t n = host_len(a->remote);
  return n == host_len(b->remote) && memcmp(a->remote, b->remote, n) == 0;
}

static int host_cmp(const void *a, const void *b) {
  const conn_t *x = *(conn_t *const *)a, *y = *(conn_t *const *)b;
  size_t nx = host_len(x->remote), ny = host_len(y->remote);
  int r = memcmp(x->remote, y->remote, nx < ny ? nx : ny);
  if (r || nx != ny) return r ? r : (nx > ny) - (nx < ny);
  return (x->idle_since > y->idle_since) - (x->idle_since < y->idle_since);
}

/* The unproven connections other than the newcomer, as a census: how many,
 * how many from the newcomer's address, and the address that holds the most
 * of them (its count and, there, the one to evict: a stalled one, then one
 * that has sent nothing yet, then the oldest). */
typedef struct {
  size_t n, same, most;
  conn_t *victim;
} census_t;

static void take_census(nl_http_server_t *srv, conn_t *newcomer, census_t *cs) {
  conn_t *cand[2 * MAX_UNPROVEN];
  size_t n = 0;
  memset(cs, 0, sizeof(*cs));
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &srv->conns) {
    conn_t *c = nl_list_entry(pos, conn_t, link);
    if (c == newcomer || !unproven(c)) continue;
    cs->n++;
    if (newcomer && same_host(c, newcomer)) cs->same++;
    if (n < sizeof(cand) / sizeof(cand[0])) cand[n++] = c;
  }
  /* Grouped by address, oldest first within one (idle_since of an unproven
   * connection is its accept), so that the crowd of each is one run: n log n,
   * not n squared, on every accept of a flood. */
  qsort(cand, n, sizeof(cand[0]), host_cmp);
  uint64_t now = uv_now(srv->loop);
  int victim_cost = 0;
  for (size_t i = 0; i < n;) {
    size_t k = i;
    while (k < n && same_host(cand[i], cand[k])) k++;
    size_t crowd = k - i;
    for (size_t j = i; j < k; j++) {
      int cost = stalled(cand[j], now) ? 0 : !cand[j]->io.got_bytes ? 1 : 2;
      if (!cs->victim || crowd > cs->most || (crowd == cs->most && cost < victim_cost)) {
        cs->victim = cand[j];
        cs->most = crowd;
        victim_cost = cost;
      }
    }
    i = k;
  }
}

static conn_t *unproven_victim(nl_http_server_t *srv, conn_t *newcomer) {
  census_t cs;
  take_census(srv, newcomer, &cs);
  return cs.victim;
}

/* At a bound, closes the least valuable connection other than the newcomer:
 * one closing after its last answer, then an unproven one (above), then the
 * one idle longest between requests, then the oldest with a request in hand.
 * Returns false when there is none. */
static bool evict(nl_http_server_t *srv, conn_t *newcomer) {
  conn_t *victim = NULL, *idle = NULL, *busy = NULL;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &srv->conns) {
    conn_t *c = nl_list_entry(pos, conn_t, link);
    if (c == newcomer) continue;
    if (c->lingering) {
      victim = c;
      break;
    }
    if (c->state == C_READING && c->nreqs > 0 && (!idle || c->idle_since < idle->idle_since))
      idle = c;
    if (c->state != C_READING && c->state != C_CLOSING && !busy) busy = c;
  }
  if (!victim) victim = unproven_victim(srv, newcomer);
  if (!victim) victim = idle ? idle : busy;
  if (!victim) return false;
  nl_vlog(4, "http: %s: %zu connections open, closing %s", srv->addr, srv->nlive + srv->nlinger,
          victim->remote);
  conn_close(victim);
  return true;
}

/* Whether the newcomer is admitted while the unproven connections are at a
 * bound (MAX_UNPROVEN on the listener, MAX_UNPROVEN_PER_HOST from its
 * address). With refuse_crowded, only when its address holds none of them, or
 * at least two fewer than the address that holds the most; else it is closed
 * at accept, before any TLS work: an attacker that reopens what is closed
 * costs an accept and a close, not a handshake each (admitting it and
 * evicting one of its peers' would only swap one stalled handshake for a new
 * one, without end). An admitted newcomer closes one of the most crowded
 * address's to make room. */
static bool admit(nl_http_server_t *srv, conn_t *newcomer) {
  census_t cs;
  take_census(srv, newcomer, &cs);
  if (cs.n < MAX_UNPROVEN && cs.same < MAX_UNPROVEN_PER_HOST) return true;
  if (srv->opts.refuse_crowded && cs.same > 0 && cs.same + 2 > cs.most) return false;
  if (cs.victim) {
    nl_vlog(4, "http: %s: %zu unproven connections, closing %s", srv->addr, cs.n,
            cs.victim->remote);
    conn_close(cs.victim);
  }
  return true;
}

static const nl_http_parser_cbs_t conn_parser_cbs = {.on_head = on_req_head,
                                                     .on_body = on_req_body};

static void on_connection(uv_stream_t *l, int status) {
  nl_http_server_t *srv = l->data;
  if (status < 0) {
    nl_warn("http: accept on %s: %s", srv->addr, uv_strerror(status));
    return;
  }
  conn_t *c = nl_xcalloc(1, sizeof(*c));
  c->srv = srv;
  if (nl_io_init(&c->io, srv->loop, &conn_io_cbs) < 0) {
    free(c);
    return;
  }
  c->io.tcp.data = c;
  uv_timer_init(srv->loop, &c->timer);
  c->timer.data = c;
  c->open_handles = 2;
  c->idle_since = uv_now(srv->loop);
  /* Up to a quarter more for the head's deadline, from the clock's low bits:
   * a flood's stalled connections, accepted in one burst, leave (and are
   * reopened, each a handshake) spread over seconds, not all in one turn. */
  c->spread_ms = uv_hrtime() / 1000 % (srv->opts.header_timeout_ms / 4 + 1);
  nl_list_insert_tail(&srv->conns, &c->link);
  srv->nconns++;
  srv->nlive++;
  nl_http_parser_limits_t lim = {.max_head = srv->opts.max_head,
                                 .max_body = srv->opts.lazy_body ? 0 : srv->opts.max_body};
  nl_http_parser_init(&c->parser, true, &lim, &conn_parser_cbs, c);
  strcpy(c->remote, "?");
  if (uv_accept(l, (uv_stream_t *)&c->io.tcp) < 0) {
    conn_close(c);
    return;
  }
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  if (uv_tcp_getpeername(&c->io.tcp, (struct sockaddr *)&ss, &len) == 0)
    format_addr((struct sockaddr *)&ss, c->remote, sizeof(c->remote));
  if (!admit(srv, c)) {
    nl_vlog(4, "http: %s: %s holds its share of unproven connections, closing the newcomer",
            srv->addr, c->remote);
    conn_close(c);
    return;
  }
  while (srv->nlive + srv->nlinger > srv->opts.max_conns && evict(srv, c)) {
  }
  if (srv->opts.tls) nl_io_set_tls_later(&c->io, srv->opts.tls);
  nl_cleanup_err nl_err_t *err = NULL;
  if (nl_io_start(&c->io, &err) < 0) {
    nl_vlog(4, "http: %s: %s", c->remote, nl_err_msg(err));
    conn_close(c);
    return;
  }
  c->reading = true;
  uv_tcp_nodelay(&c->io.tcp, 1);
  set_idle(c);
}

/* ---- responses ---------------------------------------------------------- */

void nl_http_resp_header(nl_http_resp_t *resp, const char *name, const char *value) {
  nl_http_headers_add(&resp->headers, name, value);
}

void nl_http_resp_on_abort(nl_http_resp_t *resp, void (*cb)(void *ctx), void *ctx) {
  resp->abort_cb = cb;
  resp->abort_ctx = ctx;
}

bool nl_http_resp_alive(const nl_http_resp_t *resp) { return resp->conn != NULL; }

void nl_http_resp_send(nl_http_resp_t *resp, int status, const void *body, size_t len) {
  conn_t *c = resp->conn;
  if (c) {
    assert(c->state == C_HANDLING);
    c->resp = NULL;
    write_response(c, status, &resp->headers, resp->head_only, body, len, may_keep(c));
  }
  nl_http_headers_free(&resp->headers);
  free(resp);
}

void nl_http_resp_read_body(nl_http_resp_t *resp, size_t max, nl_http_body_fn cb, void *ctx) {
  conn_t *c = resp->conn;
  if (!c) {
    cb(ctx, resp, NULL, 0);
    return;
  }
  assert(c->state == C_HANDLING && !c->body_cb);
  if (c->body_done) {
    cb(ctx, resp, c->body.data, c->body.len);
    return;
  }
  if (max > c->srv->opts.max_body) max = (size_t)c->srv->opts.max_body;
  c->body_cb = cb;
  c->body_ctx = ctx;
  c->body_max = max;
  int64_t cl = c->parser.msg.content_length;
  if (cl > 0 && (uint64_t)cl > max) {
    char msg[128];
    snprintf(msg, sizeof(msg), "http: body of %" PRId64 " bytes exceeds the limit of %zu", cl, max);
    nl_vlog(4, "http: %s: %s", c->remote, msg);
    c->state = C_BODY;
    reject(c, 413, msg); /* unread; cb gets NULL */
    return;
  }
  c->state = C_BODY;
  nl_http_parser_resume(&c->parser);
  arm_timer(c);
  drain(c);
}

void nl_http_resp_send_str(nl_http_resp_t *resp, int status, const char *body) {
  nl_http_resp_send(resp, status, body, strlen(body));
}

/* ---- streamed responses ------------------------------------------------- */

void nl_http_resp_stream(nl_http_resp_t *resp, int status) {
  conn_t *c = resp->conn;
  if (!c) return;
  assert(c->state == C_HANDLING);
  resp->chunked = c->parser.msg.major == 1 && c->parser.msg.minor >= 1;
  bool keep = resp->chunked && may_keep(c);
  if (!keep) c->parser.msg.keep_alive = false;
  nl_buf_t b = NL_BUF_INIT;
  put_head(&b, status, &resp->headers, resp->chunked ? FR_CHUNKED : FR_CLOSE, 0, keep);
  c->state = C_STREAMING;
  if (!conn_write(c, b.data, b.len)) conn_close(c);
  nl_buf_free(&b);
}

int nl_http_resp_write(nl_http_resp_t *resp, const void *data, size_t len) {
  conn_t *c = resp->conn;
  if (!c) return -1;
  assert(c->state == C_STREAMING);
  if (len == 0 || resp->head_only) return 0;
  nl_buf_t b = NL_BUF_INIT;
  if (resp->chunked) nl_buf_printf(&b, "%zx\r\n", len);
  nl_buf_append(&b, data, len);
  if (resp->chunked) nl_buf_puts(&b, "\r\n");
  bool ok = conn_write(c, b.data, b.len);
  nl_buf_free(&b);
  if (!ok) {
    conn_close(c);
    return -1;
  }
  return 0;
}

size_t nl_http_resp_queued(const nl_http_resp_t *resp) {
  return resp->conn ? nl_io_queued(&resp->conn->io) : 0;
}

void nl_http_resp_on_drain(nl_http_resp_t *resp, void (*cb)(void *ctx), void *ctx) {
  resp->drain_cb = cb;
  resp->drain_ctx = ctx;
}

void nl_http_resp_end(nl_http_resp_t *resp) {
  conn_t *c = resp->conn;
  if (c) {
    assert(c->state == C_STREAMING);
    c->resp = NULL;
    bool keep = resp->chunked && may_keep(c);
    bool ok = true;
    if (resp->chunked && !resp->head_only) ok = conn_write(c, "0\r\n\r\n", 5);
    finish_response(c, keep && ok);
  }
  nl_http_headers_free(&resp->headers);
  free(resp);
}

/* ---- takeover ----------------------------------------------------------- */

/* The bytes that followed the request head, handed over on a later turn. */
static void tunnel_flush_pending(uv_timer_t *t) {
  conn_t *c = t->data;
  if (c->state != C_TUNNEL) return;
  if (c->pending.len > 0) {
    nl_buf_t p = c->pending;
    c->pending = (nl_buf_t)NL_BUF_INIT;
    c->tunnel.cbs->on_data(c->tunnel.ctx, p.data, p.len);
    nl_buf_free(&p);
  }
  if (c->state == C_TUNNEL && c->peer_eof) c->tunnel.cbs->on_end(c->tunnel.ctx, NULL);
}

nl_http_tunnel_t *nl_http_resp_takeover(nl_http_resp_t *resp, const nl_http_tunnel_cbs_t *cbs,
                                        void *ctx) {
  conn_t *c = resp->conn;
  nl_http_headers_free(&resp->headers);
  free(resp);
  if (!c) return NULL;
  assert(c->state == C_HANDLING);
  c->resp = NULL;
  c->state = C_TUNNEL;
  if (!c->reading) nl_io_read(&c->io, true); /* the tunnel's owner decides from now on */
  c->reading = true;
  c->tunnel.cbs = cbs;
  c->tunnel.ctx = ctx;
  uv_timer_start(&c->timer, tunnel_flush_pending, 0, 0);
  return &c->tunnel;
}

static conn_t *tunnel_conn(nl_http_tunnel_t *t) { return container_of(t, conn_t, tunnel); }

int nl_http_tunnel_write(nl_http_tunnel_t *t, const void *data, size_t len, nl_err_t **err) {
  return nl_io_write(&tunnel_conn(t)->io, data, len, err);
}

size_t nl_http_tunnel_queued(const nl_http_tunnel_t *t) {
  return nl_io_queued(&tunnel_conn((nl_http_tunnel_t *)t)->io);
}

void nl_http_tunnel_read(nl_http_tunnel_t *t, bool on) { nl_io_read(&tunnel_conn(t)->io, on); }

void nl_http_tunnel_close(nl_http_tunnel_t *t) { conn_close_after_writes(tunnel_conn(t)); }
