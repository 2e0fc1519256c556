#include "cri/grpc_server.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "reactor/buf.h"
#include "reactor/fs.h"
#include "reactor/h2.h"
#include "reactor/h2conn.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define DEFAULT_MODE 0600
#define DEFAULT_MAX_CONNS 64
#define DEFAULT_MAX_STREAMS 32
#define DEFAULT_MAX_RECV (4u * 1024 * 1024)
#define DEFAULT_MAX_SEND ((size_t)INT32_MAX)
#define DEFAULT_MAX_HEADER_LIST (16 * 1024)
#define DEFAULT_HANDSHAKE_MS 10000
#define DEFAULT_IDLE_MS (10 * 60 * 1000)
#define DEFAULT_REQUEST_MS 60000
#define DEFAULT_WINDOW (1u * 1024 * 1024)
#define RBUF_SIZE 65536
/* Output handed to the socket and not yet taken, over which the engine is
 * not drained and the connection not read: a client that does not read
 * stops being served (the driver's opts.write_high). */
#define OUT_HIGH (256 * 1024)
#define ACCEPTS_PER_TURN 16

typedef struct method {
  nl_list_t link;
  char *path;
  nl_grpc_method_kind_t kind;
  nl_grpc_handler_fn fn;
  void *ctx;
} method_t;

/* One accepted connection: the driver (reactor/h2conn.h) does its socket,
 * session, handshake and idle deadlines, writes and close; this is its gRPC
 * side. closed: the driver lost it or was told to close (its calls are let
 * go); its memory goes in the driver's closed callback. */
typedef struct conn {
  nl_list_t link; /* in srv->conns */
  nl_grpc_server_t *srv;
  nl_h2conn_t h2c;
  bool closed;
  nl_list_t calls;     /* calls whose stream the engine holds */
  nl_list_t ready;     /* of those, the ones whose request is complete */
  nl_list_t cancelled; /* calls let go whose handlers are yet to be told */
  bool delivering;     /* running handlers */
  uint64_t since;      /* accept, or when its last call ended */
  uint64_t due;        /* the earliest deadline of its calls; UINT64_MAX: none */
} conn_t;

/* HEAD: the request's header fields arrive; BODY: its message; READY: complete,
 * waiting for its handler; HANDLER: a unary handler has it; STREAMING: a
 * streaming handler has it; DONE: answered, the stream closes. */
enum call_state { CALL_HEAD, CALL_BODY, CALL_READY, CALL_HANDLER, CALL_STREAMING, CALL_DONE };

struct nl_grpc_call {
  nl_h2_stream_t h2;
  conn_t *conn;   /* NULL once the connection let it go */
  nl_list_t link; /* in conn->calls while attached */
  nl_list_t qlink; /* in conn->ready or conn->cancelled */
  enum call_state state;
  bool held;      /* a handler has it and owes an answer */
  bool head_sent; /* the response's HEADERS (a streaming answer's) */
  bool post, grpc_type, compressed_ok, bad_timeout;
  const method_t *method;
  char *path;
  uint64_t deadline; /* uv_now() ms; UINT64_MAX: none */
  uint64_t read_by;  /* the request must be complete by then (uv_now() ms) */
  uint8_t hdr[5];
  uint8_t hdr_len;   /* prefix bytes of the message being received */
  uint32_t mlen;
  bool got_msg;      /* the one request message is complete */
  nl_buf_t msg;
  void (*cancel_cb)(nl_grpc_call_t *call, void *ctx);
  void *cancel_ctx;
  bool cancel_told;
};

static void conn_close(conn_t *c, const char *why);
static void conn_arm(conn_t *c);

/* ---- calls: their lifetime ------------------------------------------------- */

static void call_free(nl_grpc_call_t *call) {
  nl_buf_free(&call->msg);
  free(call->path);
  free(call);
}

/* The connection lets the call go: its stream closed, or the connection goes.
 * A handler that holds it is told (from c->cancelled, outside the engine),
 * else it is freed. */
static void call_let_go(conn_t *c, nl_grpc_call_t *call) {
  assert(call->conn == c);
  nl_list_remove(&call->link);
  nl_list_remove(&call->qlink);
  call->conn = NULL;
  if (!call->held) {
    call_free(call);
  } else if (call->cancel_cb && !call->cancel_told) {
    nl_list_insert_tail(&c->cancelled, &call->qlink);
  }
  if (nl_list_empty(&c->calls)) c->since = uv_now(c->srv->loop);
}

/* Once; the callback may answer (and so free) the call. */
static void tell_cancel(nl_grpc_call_t *call) {
  if (call->cancel_told || !call->cancel_cb) return;
  call->cancel_told = true;
  call->cancel_cb(call, call->cancel_ctx);
}

/* The answer leaves with the connection's next write (this loop turn). */
static void conn_kick(conn_t *c) { nl_h2conn_flush(&c->h2c); }

/* ---- calls: answers ---------------------------------------------------------- */

/* grpc-message: percent-encoded outside printable ASCII, and '%' itself. */
static char *percent_encode(const char *s) {
  nl_buf_t b = NL_BUF_INIT;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p < 0x20 || *p > 0x7e || *p == '%') nl_buf_printf(&b, "%%%02X", *p);
    else nl_buf_append(&b, p, 1);
  }
  return nl_buf_steal(&b);
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), 0}

/* The status as trailers, or as the whole answer (Trailers-Only) when no
 * HEADERS went yet. The call is DONE. */
static void call_status(nl_grpc_call_t *call, int code, const char *message) {
  conn_t *c = call->conn;
  assert(c && call->state != CALL_DONE);
  char status[16];
  snprintf(status, sizeof status, "%d", code);
  nl_cleanup_free char *enc = percent_encode(message ? message : "");
  nghttp2_nv nv[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                     NV("grpc-status", status), NV("grpc-message", enc)};
  size_t n = enc[0] ? 4 : 3;
  int rc = call->head_sent ? nl_h2_respond_end(&call->h2, nv + 2, n - 2)
                           : nl_h2_respond(&call->h2, nv, n, true);
  if (rc < 0) nl_vlog(4, "grpc server: %s: status: %s", call->path ? call->path : "?",
                      nghttp2_strerror(rc));
  call->state = CALL_DONE;
  conn_kick(c);
}

/* One message of the answer, its HEADERS first. */
static int call_message(nl_grpc_call_t *call, const uint8_t *msg, size_t len) {
  conn_t *c = call->conn;
  if (len > c->srv->opts.max_send_msg_size) {
    char *why = nl_xasprintf("grpc: trying to send message larger than max (%zu vs. %zu)", len,
                             c->srv->opts.max_send_msg_size);
    call_status(call, NL_GRPC_RESOURCE_EXHAUSTED, why);
    free(why);
    return -1;
  }
  if (!call->head_sent) {
    nghttp2_nv nv[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
    if (nl_h2_respond(&call->h2, nv, 2, false) < 0) return -1;
    call->head_sent = true;
  }
  uint8_t prefix[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                       (uint8_t)len};
  if (nl_h2_respond_data(&call->h2, prefix, 5) < 0 || nl_h2_respond_data(&call->h2, msg, len) < 0)
    return -1;
  conn_kick(c);
  return 0;
}

/* ---- calls: the request ------------------------------------------------------- */

static nl_grpc_call_t *call_of(nl_h2_stream_t *h) { return container_of(h, nl_grpc_call_t, h2); }

static bool eq(const uint8_t *a, size_t alen, const char *lit) {
  return alen == strlen(lit) && memcmp(a, lit, alen) == 0;
}

/* "1S", "500m", "99999999n": at most 8 digits and a unit (gRPC over HTTP/2). */
static bool parse_timeout(const uint8_t *v, size_t len, uint64_t *ms) {
  if (len < 2 || len > 9) return false;
  uint64_t n = 0;
  for (size_t i = 0; i + 1 < len; i++) {
    if (v[i] < '0' || v[i] > '9') return false;
    n = n * 10 + (v[i] - '0');
  }
  switch (v[len - 1]) {
  case 'H': *ms = n * 3600000; break;
  case 'M': *ms = n * 60000; break;
  case 'S': *ms = n * 1000; break;
  case 'm': *ms = n; break;
  case 'u': *ms = (n + 999) / 1000; break;
  case 'n': *ms = (n + 999999) / 1000000; break;
  default: return false;
  }
  return true;
}

static void on_header(nl_h2_stream_t *h, const uint8_t *name, size_t namelen,
                      const uint8_t *value, size_t valuelen) {
  nl_grpc_call_t *call = call_of(h);
  if (call->state != CALL_HEAD) return; /* the client's trailers: nothing of ours */
  if (eq(name, namelen, ":method")) {
    call->post = eq(value, valuelen, "POST");
  } else if (eq(name, namelen, ":path")) {
    free(call->path);
    call->path = nl_xstrndup((const char *)value, valuelen);
  } else if (eq(name, namelen, "content-type")) {
    /* application/grpc, or application/grpc+proto, application/grpc;... */
    call->grpc_type = valuelen >= 16 && !memcmp(value, "application/grpc", 16) &&
                      (valuelen == 16 || value[16] == '+' || value[16] == ';');
  } else if (eq(name, namelen, "grpc-timeout")) {
    uint64_t ms;
    if (parse_timeout(value, valuelen, &ms)) {
      uint64_t now = uv_now(call->conn->srv->loop);
      call->deadline = ms > UINT64_MAX - now ? UINT64_MAX - 1 : now + ms;
    } else {
      call->bad_timeout = true;
    }
  }
}

static const method_t *method_find(nl_grpc_server_t *srv, const char *path) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &srv->methods) {
    method_t *m = nl_list_entry(pos, method_t, link);
    if (strcmp(m->path, path) == 0) return m;
  }
  return NULL;
}

/* A plain HTTP answer to what is no gRPC request at all. */
static void call_http_error(nl_grpc_call_t *call, const char *status) {
  nghttp2_nv nv[] = {NV(":status", status)};
  nl_h2_respond(&call->h2, nv, 1, true);
  call->state = CALL_DONE;
  conn_kick(call->conn);
}

/* The request's head is in: what it asks for, and whether we serve it. */
static void on_headers(nl_h2_stream_t *h) {
  nl_grpc_call_t *call = call_of(h);
  if (call->state != CALL_HEAD) return;
  nl_grpc_server_t *srv = call->conn->srv;
  if (!call->post) {
    call_http_error(call, "405");
    return;
  }
  if (!call->grpc_type) {
    call_http_error(call, "415");
    return;
  }
  if (call->bad_timeout) {
    call_status(call, NL_GRPC_INTERNAL, "malformed grpc-timeout");
    return;
  }
  const char *p = call->path ? call->path : "";
  const char *slash = p[0] == '/' ? strchr(p + 1, '/') : NULL;
  if (!slash || slash == p + 1 || !slash[1]) {
    char *why = nl_xasprintf("malformed method name: \"%s\"", p);
    call_status(call, NL_GRPC_UNIMPLEMENTED, why);
    free(why);
    return;
  }
  call->method = method_find(srv, p);
  if (!call->method) {
    /* grpc-go's wording: the service is known when one of its methods is. */
    bool service_known = false;
    size_t svc = (size_t)(slash - p);
    nl_list_t *pos, *tmp;
    nl_list_foreach_safe(pos, tmp, &srv->methods) {
      method_t *m = nl_list_entry(pos, method_t, link);
      if (strncmp(m->path, p, svc + 1) == 0) service_known = true;
    }
    char *why = service_known
                    ? nl_xasprintf("unknown method %s for service %.*s", slash + 1,
                                   (int)(svc - 1), p + 1)
                    : nl_xasprintf("unknown service %.*s", (int)(svc - 1), p + 1);
    call_status(call, NL_GRPC_UNIMPLEMENTED, why);
    free(why);
    return;
  }
  call->state = CALL_BODY;
  if (call->deadline != UINT64_MAX) conn_arm(call->conn);
}

static void call_fail(nl_grpc_call_t *call, int code, char *why) {
  call_status(call, code, why);
  free(why);
}

/* Bytes held for the connection's incomplete requests. */
static size_t conn_buffered(const conn_t *c) {
  size_t n = 0;
  nl_list_t *pos;
  for (pos = c->calls.next; pos != &c->calls; pos = pos->next) {
    const nl_grpc_call_t *call = nl_list_entry(pos, nl_grpc_call_t, link);
    if (call->state == CALL_BODY) n += call->msg.len;
  }
  return n;
}

/* Reassembles the one request message; its buffer grows with what arrives. */
static void on_data(nl_h2_stream_t *h, const uint8_t *p, size_t len) {
  nl_grpc_call_t *call = call_of(h);
  size_t max = call->conn->srv->opts.max_recv_msg_size;
  while (len > 0 && call->state == CALL_BODY) {
    if (call->hdr_len < 5) {
      if (call->got_msg) {
        call_fail(call, NL_GRPC_INTERNAL,
                  nl_xasprintf("grpc: more than one request message for %s", call->path));
        return;
      }
      size_t n = 5u - call->hdr_len < len ? 5u - call->hdr_len : len;
      memcpy(call->hdr + call->hdr_len, p, n);
      call->hdr_len += n;
      p += n;
      len -= n;
      if (call->hdr_len < 5) return;
      call->mlen = (uint32_t)call->hdr[1] << 24 | (uint32_t)call->hdr[2] << 16 |
                   (uint32_t)call->hdr[3] << 8 | call->hdr[4];
      if (call->hdr[0] & 1) {
        call_fail(call, NL_GRPC_UNIMPLEMENTED,
                  nl_xstrdup("grpc: compressed request messages are not supported"));
        return;
      }
      if (call->mlen > max) {
        call_fail(call, NL_GRPC_RESOURCE_EXHAUSTED,
                  nl_xasprintf("grpc: received message larger than max (%" PRIu32 " vs. %zu)",
                               call->mlen, max));
        return;
      }
    }
    size_t want = call->mlen - call->msg.len, n = want < len ? want : len;
    if (conn_buffered(call->conn) + n > 2 * max) {
      call_fail(call, NL_GRPC_RESOURCE_EXHAUSTED,
                nl_xasprintf("grpc: the connection's incomplete requests exceed %zu bytes",
                             2 * max));
      return;
    }
    nl_buf_append(&call->msg, p, n);
    p += n;
    len -= n;
    if (call->msg.len == call->mlen) {
      call->got_msg = true;
      call->hdr_len = 0;
    }
  }
}

/* The request ended: complete, the call waits for its handler. */
static void on_end(nl_h2_stream_t *h) {
  nl_grpc_call_t *call = call_of(h);
  if (call->state != CALL_BODY) return;
  if (call->hdr_len > 0) {
    call_fail(call, NL_GRPC_INTERNAL,
              nl_xstrdup("grpc: the request ended in the middle of a message"));
    return;
  }
  if (!call->got_msg) {
    call_fail(call, NL_GRPC_INTERNAL, nl_xstrdup("grpc: no request message"));
    return;
  }
  call->state = CALL_READY;
  nl_list_insert_tail(&call->conn->ready, &call->qlink);
}

static void on_close(nl_h2_stream_t *h, uint32_t error_code, bool refused) {
  nl_grpc_call_t *call = call_of(h);
  call_let_go(call->conn, call);
}

static const nl_h2_stream_cbs_t call_cbs = {.on_header = on_header,
                                            .on_headers = on_headers,
                                            .on_data = on_data,
                                            .on_close = on_close,
                                            .on_end = on_end};

/* ---- connections -------------------------------------------------------------- */

static conn_t *conn_of(nl_h2conn_t *h2c) { return container_of(h2c, conn_t, h2c); }

static nl_h2_stream_t *conn_on_stream(nl_h2conn_t *h2c) {
  conn_t *c = conn_of(h2c);
  nl_grpc_call_t *call = nl_xcalloc(1, sizeof *call);
  call->h2.cbs = &call_cbs;
  call->conn = c;
  call->deadline = UINT64_MAX;
  call->read_by = uv_now(c->srv->loop) + c->srv->opts.request_timeout_ms;
  nl_list_insert_tail(&c->calls, &call->link);
  nl_list_init(&call->qlink);
  return &call->h2;
}

/* Runs the handlers of complete requests, then tells those of calls let go;
 * outside the engine, so that they may answer, start and stop anything.
 * Their answers leave together, in the connection's next write. */
static void conn_deliver(conn_t *c) {
  if (c->delivering) return; /* the outer loop goes on */
  c->delivering = true;
  while (!c->closed && !nl_list_empty(&c->ready)) {
    nl_grpc_call_t *call = nl_list_entry(c->ready.next, nl_grpc_call_t, qlink);
    nl_list_remove(&call->qlink);
    assert(call->state == CALL_READY);
    call->state = call->method->kind == NL_GRPC_UNARY ? CALL_HANDLER : CALL_STREAMING;
    call->held = true;
    c->srv->stats_calls++;
    nl_buf_t m = call->msg; /* the handler may free the call */
    call->msg = (nl_buf_t)NL_BUF_INIT;
    const method_t *meth = call->method;
    meth->fn(meth->ctx, call, m.len ? (const uint8_t *)m.data : (const uint8_t *)"", m.len);
    nl_buf_free(&m);
  }
  while (!nl_list_empty(&c->cancelled)) {
    nl_grpc_call_t *call = nl_list_entry(c->cancelled.next, nl_grpc_call_t, qlink);
    nl_list_remove(&call->qlink);
    tell_cancel(call);
  }
  c->delivering = false;
}

/* The session moved (requests read, answers written, streams closed): the
 * handlers hear of it, and the deadlines follow the calls. */
static void conn_moved(nl_h2conn_t *h2c) {
  conn_t *c = conn_of(h2c);
  conn_deliver(c);
  conn_arm(c);
}

/* No call for idle_timeout_ms: GOAWAY, and the connection closes. */
static void conn_idle(nl_h2conn_t *h2c) { nl_h2conn_goaway(h2c); }

static void conn_lost(nl_h2conn_t *h2c, const nl_err_t *err) {
  conn_close(conn_of(h2c), err ? nl_err_msg(err) : "closed after GOAWAY");
}

static void finish_stop(nl_grpc_server_t *srv);

static void conn_closed(nl_h2conn_t *h2c) {
  conn_t *c = conn_of(h2c);
  nl_grpc_server_t *srv = c->srv;
  nl_list_remove(&c->link);
  srv->nconns--;
  free(c);
  if (srv->stopping) finish_stop(srv);
}

static const nl_h2conn_cbs_t conn_cbs = {.moved = conn_moved,
                                         .idle = conn_idle,
                                         .lost = conn_lost,
                                         .closed = conn_closed,
                                         .stream = conn_on_stream};

/* When the call is past its time: the client's deadline, or for a request
 * still arriving, ours. */
static uint64_t call_due(const nl_grpc_call_t *call) {
  if (call->state == CALL_DONE) return UINT64_MAX;
  if ((call->state == CALL_HEAD || call->state == CALL_BODY) && call->read_by < call->deadline)
    return call->read_by;
  return call->deadline;
}

/* The server's one deadline timer at the earliest call deadline of all its
 * connections. */
static void on_deadline(uv_timer_t *t);

static void srv_arm(nl_grpc_server_t *srv) {
  if (srv->stopping || !srv->listening) return;
  uint64_t due = UINT64_MAX;
  nl_list_t *pos;
  for (pos = srv->conns.next; pos != &srv->conns; pos = pos->next) {
    const conn_t *c = nl_list_entry(pos, conn_t, link);
    if (!c->closed && c->due < due) due = c->due;
  }
  if (due == UINT64_MAX) {
    uv_timer_stop(&srv->deadlines);
    return;
  }
  uint64_t now = uv_now(srv->loop);
  uv_timer_start(&srv->deadlines, on_deadline, due > now ? due - now : 0, 0);
}

/* The earliest deadline of the connection's calls. */
static uint64_t conn_due(const conn_t *c) {
  uint64_t due = UINT64_MAX;
  nl_list_t *pos;
  for (pos = c->calls.next; pos != &c->calls; pos = pos->next) {
    uint64_t d = call_due(nl_list_entry(pos, nl_grpc_call_t, link));
    if (d < due) due = d;
  }
  return due;
}

/* Calls came, went or changed: the server's timer follows. */
static void conn_arm(conn_t *c) {
  if (c->closed) return;
  uint64_t due = conn_due(c);
  if (due == c->due) return;
  c->due = due;
  srv_arm(c->srv);
}

/* The connection's calls past their deadline are answered, their handlers
 * told after. */
static void conn_expire(conn_t *c, uint64_t now) {
  const nl_grpc_server_opts_t *o = &c->srv->opts;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &c->calls) {
    nl_grpc_call_t *call = nl_list_entry(pos, nl_grpc_call_t, link);
    uint64_t due = call_due(call);
    if (due > now) continue;
    if (call->state == CALL_READY) nl_list_remove(&call->qlink);
    if (due == call->deadline) {
      call_status(call, NL_GRPC_DEADLINE_EXCEEDED, "context deadline exceeded");
    } else {
      char why[96];
      snprintf(why, sizeof why, "grpc: the request was not complete within %" PRIu64 " ms",
               o->request_timeout_ms);
      call_status(call, NL_GRPC_CANCELLED, why);
    }
    if (call->held && call->cancel_cb && !call->cancel_told)
      nl_list_insert_tail(&c->cancelled, &call->qlink);
  }
  conn_deliver(c);
}

static void on_deadline(uv_timer_t *t) {
  nl_grpc_server_t *srv = container_of(t, nl_grpc_server_t, deadlines);
  uint64_t now = uv_now(srv->loop);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &srv->conns) {
    conn_t *c = nl_list_entry(pos, conn_t, link);
    if (c->closed || c->due > now) continue;
    conn_expire(c, now);
    if (!c->closed) c->due = conn_due(c);
  }
  srv_arm(srv);
}

/* Closes the connection: its calls are let go (handlers that hold one are
 * told, from here), then the driver closes the session and the socket. */
static void conn_close(conn_t *c, const char *why) {
  if (c->closed) return;
  nl_vlog(4, "grpc server %s: connection closed: %s", c->srv->path, why);
  c->closed = true;
  assert(c->srv->nlive > 0);
  c->srv->nlive--;
  while (!nl_list_empty(&c->calls)) {
    nl_grpc_call_t *call = nl_list_entry(c->calls.next, nl_grpc_call_t, link);
    nl_h2_stream_detach(&call->h2);
    call_let_go(c, call);
  }
  while (!nl_list_empty(&c->cancelled)) {
    nl_grpc_call_t *call = nl_list_entry(c->cancelled.next, nl_grpc_call_t, qlink);
    nl_list_remove(&call->qlink);
    tell_cancel(call);
  }
  nl_h2conn_close(&c->h2c);
}

/* Still waiting for the client's preface and SETTINGS. */
static bool conn_handshaking(const conn_t *c) { return c->h2c.handshaking; }

/* At the bound, closes a connection without calls: the oldest still in its
 * handshake, else the one idle longest. Returns false when every one has a
 * call. */
static bool evict(nl_grpc_server_t *srv) {
  conn_t *victim = NULL;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &srv->conns) {
    conn_t *c = nl_list_entry(pos, conn_t, link);
    if (c->closed || !nl_list_empty(&c->calls)) continue;
    if (!victim || (conn_handshaking(c) && !conn_handshaking(victim)) ||
        (conn_handshaking(c) == conn_handshaking(victim) && c->since < victim->since))
      victim = c;
  }
  if (!victim) return false;
  conn_close(victim, "too many connections");
  return true;
}

static void conn_new(nl_grpc_server_t *srv, int fd) {
  if (srv->nlive >= srv->opts.max_conns && !evict(srv)) {
    nl_vlog(4, "grpc server %s: %zu connections, all with calls: refusing a new one", srv->path,
            srv->nlive);
    close(fd);
    return;
  }
  conn_t *c = nl_xcalloc(1, sizeof *c);
  c->srv = srv;
  c->since = uv_now(srv->loop);
  c->due = UINT64_MAX;
  nl_list_init(&c->calls);
  nl_list_init(&c->ready);
  nl_list_init(&c->cancelled);
  nl_list_insert_tail(&srv->conns, &c->link);
  srv->nconns++;
  srv->nlive++;
  const nl_grpc_server_opts_t *o = &srv->opts;
  nl_h2conn_opts_t ho = {
      .h2 = {.window = o->window,
             .mem = o->mem ? &o->mem->nghttp2 : NULL,
             .max_streams = o->max_streams,
             .max_header_list = o->max_header_list},
      .words = NL_H2CONN_WORDS_SERVER,
      .idle_ms = o->idle_timeout_ms,
      .handshake_ms = o->handshake_timeout_ms,
      .write_high = OUT_HIGH,
      .read_buf = RBUF_SIZE,
      .read_buf_shared = srv->rbuf,
  };
  nl_h2conn_init(&c->h2c, srv->loop, &ho, &conn_cbs);
  nl_err_t *err = NULL;
  if (nl_h2conn_adopt(&c->h2c, fd, srv->path, &err) < 0) conn_close(c, nl_err_msg(err));
  nl_err_free(&err);
}

static void on_listener(uv_poll_t *h, int status, int events) {
  nl_grpc_server_t *srv = h->data;
  if (status < 0) {
    nl_warn("grpc server %s: accept: %s", srv->path, uv_strerror(status));
    return;
  }
  for (int i = 0; i < ACCEPTS_PER_TURN && !srv->stopping; i++) {
    int fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      conn_new(srv, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      nl_warn("grpc server %s: accept: %s", srv->path, strerror(errno));
    return;
  }
}

/* ---- server ------------------------------------------------------------------- */

void nl_grpc_server_init(nl_grpc_server_t *srv, uv_loop_t *loop,
                         const nl_grpc_server_opts_t *opts) {
  memset(srv, 0, sizeof *srv);
  srv->loop = loop;
  if (opts) srv->opts = *opts;
  nl_grpc_server_opts_t *o = &srv->opts;
  if (!o->mode) o->mode = DEFAULT_MODE;
  if (!o->max_conns) o->max_conns = DEFAULT_MAX_CONNS;
  if (!o->max_streams) o->max_streams = DEFAULT_MAX_STREAMS;
  if (!o->max_recv_msg_size) o->max_recv_msg_size = DEFAULT_MAX_RECV;
  if (!o->max_send_msg_size) o->max_send_msg_size = DEFAULT_MAX_SEND;
  if (!o->max_header_list) o->max_header_list = DEFAULT_MAX_HEADER_LIST;
  if (!o->handshake_timeout_ms) o->handshake_timeout_ms = DEFAULT_HANDSHAKE_MS;
  if (!o->idle_timeout_ms) o->idle_timeout_ms = DEFAULT_IDLE_MS;
  if (!o->request_timeout_ms) o->request_timeout_ms = DEFAULT_REQUEST_MS;
  if (!o->window) o->window = DEFAULT_WINDOW;
  srv->lfd = -1;
  nl_list_init(&srv->methods);
  nl_list_init(&srv->conns);
}

void nl_grpc_server_method(nl_grpc_server_t *srv, const char *path, nl_grpc_method_kind_t kind,
                           nl_grpc_handler_fn fn, void *ctx) {
  if (method_find(srv, path)) return;
  method_t *m = nl_xcalloc(1, sizeof *m);
  m->path = nl_xstrdup(path);
  m->kind = kind;
  m->fn = fn;
  m->ctx = ctx;
  nl_list_insert_tail(&srv->methods, &m->link);
}

int nl_grpc_server_listen(nl_grpc_server_t *srv, const char *path, nl_err_t **err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (srv->listening || srv->stopping)
    return nl_err_set(err, NL_EINVAL, "listen unix %s: server already listening or stopped", path);
  if (strlen(path) >= sizeof sa.sun_path)
    return nl_err_set(err, NL_EINVAL, "listen unix %s: path too long", path);
  strcpy(sa.sun_path, path);
  char *slash = strrchr(path, '/');
  if (slash && slash != path) {
    nl_cleanup_free char *dir = nl_xstrndup(path, (size_t)(slash - path));
    int rc = nl_mkdir_p(dir, 0750);
    if (rc < 0) return nl_err_set(err, -rc, "listen unix %s: mkdir %s: %s", path, dir, strerror(-rc));
  }
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return nl_err_set(err, EEXIST, "listen unix %s: exists and is not a socket", path);
    if (unlink(path) < 0 && errno != ENOENT)
      return nl_err_set(err, errno, "listen unix %s: remove the stale socket: %s", path,
                        strerror(errno));
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return nl_err_set(err, errno, "listen unix %s: %s", path, strerror(errno));
  /* The mode is set before listen(): until then no client can connect. */
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(path, srv->opts.mode) < 0 ||
      listen(fd, 128) < 0) {
    int e = errno;
    close(fd);
    return nl_err_set(err, e, "listen unix %s: %s", path, strerror(e));
  }
  int rc = uv_poll_init(srv->loop, &srv->listener, fd);
  if (rc < 0) {
    close(fd);
    unlink(path);
    return nl_err_set(err, -rc, "listen unix %s: %s", path, uv_strerror(rc));
  }
  if (lstat(path, &st) == 0) {
    srv->sock_dev = st.st_dev;
    srv->sock_ino = st.st_ino;
  }
  srv->listener.data = srv;
  uv_timer_init(srv->loop, &srv->deadlines);
  srv->deadlines.data = srv;
  srv->lfd = fd;
  srv->path = nl_xstrdup(path);
  srv->rbuf = nl_xmalloc(RBUF_SIZE);
  srv->listening = true;
  uv_poll_start(&srv->listener, UV_READABLE, on_listener);
  nl_vlog(2, "grpc server: listening on %s", path);
  return 0;
}

static void finish_stop(nl_grpc_server_t *srv) {
  if (!srv->listener_closed || !srv->deadlines_closed || srv->nconns > 0) return;
  while (!nl_list_empty(&srv->methods)) {
    method_t *m = nl_list_entry(srv->methods.next, method_t, link);
    nl_list_remove(&m->link);
    free(m->path);
    free(m);
  }
  free(nl_steal(&srv->path));
  free(nl_steal(&srv->rbuf)); /* the connections' shared read buffer */
  if (srv->done_cb) srv->done_cb(srv, srv->done_ctx);
}

static void deadlines_closed(uv_handle_t *h) {
  nl_grpc_server_t *srv = h->data;
  srv->deadlines_closed = true;
  finish_stop(srv);
}

static void listener_closed(uv_handle_t *h) {
  nl_grpc_server_t *srv = h->data;
  close(srv->lfd);
  srv->lfd = -1;
  struct stat st;
  if (lstat(srv->path, &st) == 0 && st.st_dev == srv->sock_dev && st.st_ino == srv->sock_ino)
    unlink(srv->path);
  srv->listener_closed = true;
  finish_stop(srv);
}

void nl_grpc_server_stop(nl_grpc_server_t *srv, nl_grpc_server_done_fn done, void *ctx) {
  if (srv->stopping) return;
  srv->stopping = true;
  srv->done_cb = done;
  srv->done_ctx = ctx;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &srv->conns) {
    conn_t *c = nl_list_entry(pos, conn_t, link);
    conn_close(c, "server stopping");
  }
  if (srv->listening) {
    uv_poll_stop(&srv->listener);
    uv_close((uv_handle_t *)&srv->listener, listener_closed);
    uv_close((uv_handle_t *)&srv->deadlines, deadlines_closed);
  } else {
    srv->listener_closed = srv->deadlines_closed = true;
    finish_stop(srv);
  }
}

size_t nl_grpc_server_conns(const nl_grpc_server_t *srv) { return srv->nlive; }

/* ---- calls: the handler's side ------------------------------------------------- */

const char *nl_grpc_call_path(const nl_grpc_call_t *call) { return call->path; }

uint64_t nl_grpc_call_time_left(const nl_grpc_call_t *call) {
  if (call->deadline == UINT64_MAX) return UINT64_MAX;
  if (!call->conn) return 0;
  uint64_t now = uv_now(call->conn->srv->loop);
  return call->deadline > now ? call->deadline - now : 0;
}

bool nl_grpc_call_alive(const nl_grpc_call_t *call) {
  return call->conn && (call->state == CALL_HANDLER || call->state == CALL_STREAMING);
}

void nl_grpc_call_on_cancel(nl_grpc_call_t *call, void (*cb)(nl_grpc_call_t *call, void *ctx),
                            void *ctx) {
  call->cancel_cb = cb;
  call->cancel_ctx = ctx;
}

/* The handler gives the call back. */
static void call_release(nl_grpc_call_t *call) {
  assert(call->held);
  call->held = false;
  nl_list_remove(&call->qlink); /* (a cancellation not yet told) */
  if (!call->conn) call_free(call);
}

void nl_grpc_call_reply(nl_grpc_call_t *call, int code, const char *message, const uint8_t *resp,
                        size_t len) {
  call->cancel_told = true; /* answering: nothing to tell any more */
  if (nl_grpc_call_alive(call)) {
    int rc = code == NL_GRPC_OK ? call_message(call, resp ? resp : (const uint8_t *)"", len) : 0;
    if (call->state != CALL_DONE)
      call_status(call, rc == 0 ? code : NL_GRPC_INTERNAL,
                  rc == 0 ? message : "grpc: the response could not be queued");
  }
  call_release(call);
}

void nl_grpc_call_reply_msg(nl_grpc_call_t *call, const ProtobufCMessage *resp) {
  size_t n = protobuf_c_message_get_packed_size(resp);
  nl_cleanup_free uint8_t *buf = nl_xmalloc(n ? n : 1);
  protobuf_c_message_pack(resp, buf);
  nl_grpc_call_reply(call, NL_GRPC_OK, NULL, buf, n);
}

int nl_grpc_call_send(nl_grpc_call_t *call, const uint8_t *msg, size_t len) {
  assert(call->held);
  if (!nl_grpc_call_alive(call) || call->state != CALL_STREAMING) return -1;
  return call_message(call, msg, len);
}

int nl_grpc_call_send_msg(nl_grpc_call_t *call, const ProtobufCMessage *msg) {
  size_t n = protobuf_c_message_get_packed_size(msg);
  nl_cleanup_free uint8_t *buf = nl_xmalloc(n ? n : 1);
  protobuf_c_message_pack(msg, buf);
  return nl_grpc_call_send(call, buf, n);
}

size_t nl_grpc_call_queued(const nl_grpc_call_t *call) {
  return call->conn ? nl_h2_respond_queued(&call->h2) : 0;
}

void nl_grpc_call_finish(nl_grpc_call_t *call, int code, const char *message) {
  call->cancel_told = true;
  if (nl_grpc_call_alive(call)) call_status(call, code, message);
  call_release(call);
}
