#include "cri/conn.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cri/call.h"
#include "cri/pbarena.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* Every page of the read buffer that a read fills stays resident; the relist's
 * answers (tens of KiB every second) came in one read of a 64 KiB buffer, and
 * take a few reads of this one (a syscall costs about a microsecond). */
#define RBUF_SIZE (16 * 1024)
#define WBUF_KEEP 4096 /* a write buffer grown larger by a burst is freed once written */
#define MSG_CLOSING "grpc: the client connection is closing"
#define PING_ACK_DELAY_MS 10
#define PATH_EVENTS "/runtime.v1.RuntimeService/GetContainerEvents"

enum where { IN_WAITING, IN_ACTIVE, IN_DONE };

typedef struct nl_cri_call {
  nl_grpc_stream_t stream;
  nl_list_t link;
  nl_cri_client_t *client;
  const char *path;
  const ProtobufCMessageDescriptor *resp_desc;
  ProtobufCMessage *resp;
  nl_pb_arena_t *resp_arena; /* owns resp */
  nl_cri__deliver deliver;
  nl_cri__fn fn;
  void *ctx;
  uint64_t deadline;   /* loop ms; UINT64_MAX: none */
  uint64_t wait_until; /* give up waiting for a connection; UINT64_MAX: never */
  uint64_t timeout_ms; /* for grpc-timeout; 0: none */
  char *message;       /* final status message, owned */
  int code;
  uint8_t where;
  bool is_events;
  bool extra_message;  /* a unary call got a second message */
  uint64_t started;    /* uv_hrtime() at the call */
  size_t req_len;
  uint8_t req[];       /* the framed request */
} nl_cri_call_t;

typedef struct event_item {
  nl_list_t link;
  ProtobufCMessage *msg;
  nl_pb_arena_t *arena; /* owns msg */
} event_item_t;

static void connect_start(nl_cri_client_t *c);
static void close_conn(nl_cri_client_t *c, const char *reason);
static void drain(nl_cri_client_t *c);
static void events_start(nl_cri_client_t *c);
static void on_deadline(uv_timer_t *t);
static void on_conn_timer(uv_timer_t *t);
static void flush(nl_cri_client_t *c);
static void flush_now(nl_cri_client_t *c);

static void resp_free(nl_cri_call_t *call) {
  nl_pb_arena_free(call->resp_arena);
  call->resp_arena = NULL;
  call->resp = NULL;
}

/* ---- Endpoint ------------------------------------------------------------ */

int nl_cri_parse_endpoint(const char *endpoint, char **path, nl_err_t **err) {
  const char *p = endpoint ? endpoint : "";
  if (!strncmp(p, "unix://", 7)) {
    p += 7;
  } else if (strstr(p, "://")) {
    return nl_err_set(err, NL_EINVAL,
                      "endpoint %s: only unix:// endpoints are supported", endpoint);
  } else if (p[0] != '/') {
    return nl_err_set(err, NL_EINVAL,
                      "endpoint \"%s\": want unix:///path/to/socket or an absolute path", p);
  }
  if (!*p) return nl_err_set(err, NL_EINVAL, "endpoint %s: empty socket path", endpoint);
  *path = nl_xstrdup(p);
  return 0;
}

/* ---- Delivery ------------------------------------------------------------- */

static bool has_deliveries(const nl_cri_client_t *c) {
  return !nl_list_empty(&c->done) || !nl_list_empty(&c->events.queue);
}

/* Runs once per loop turn while there is output to write or a completion to
 * deliver. The idle phase comes after timers and before the poll's timeout is
 * computed (UV_RUN_DEFAULT), so output requested outside a read callback (call
 * functions, timers, check and close callbacks) leaves in one write before the
 * loop blocks, without a zero-timeout poll. */
static void on_deliver_idle(uv_idle_t *h) {
  nl_cri_client_t *c = container_of(h, nl_cri_client_t, deliver_idle);
  do {
    if (c->flush_wanted) flush_now(c);
    drain(c); /* callbacks may start calls: their output goes out at once */
  } while (c->flush_wanted && c->session);
  if (!c->flush_wanted && !has_deliveries(c) && c->state != NL_CRI_STOPPED)
    uv_idle_stop(&c->deliver_idle);
}

static void on_events_timer(uv_timer_t *t) {
  events_start(container_of(t, nl_cri_client_t, events_timer));
}

/* Starts the idle handle when it has work: output, unless on_read writes it
 * on its way out; completions, unless drain is running (it delivers those). */
static void kick(nl_cri_client_t *c) {
  if (c->state == NL_CRI_STOPPING || c->state == NL_CRI_STOPPED) return;
  bool work = (c->flush_wanted && !c->in_read) || (has_deliveries(c) && !c->delivering);
  if (work && !uv_is_active((uv_handle_t *)&c->deliver_idle))
    uv_idle_start(&c->deliver_idle, on_deliver_idle);
}

/* Moves a call to the done list with its final status (message copied). */
static void complete(nl_cri_call_t *call, int code, const char *message) {
  nl_cri_client_t *c = call->client;
  nl_list_remove(&call->link);
  call->code = code;
  free(call->message);
  call->message = message && *message ? nl_xstrdup(message) : NULL; /* NULL: "" */
  if (code != NL_GRPC_OK) resp_free(call);
  call->where = IN_DONE;
  nl_list_insert_tail(&c->done, &call->link);
}

static void call_free(nl_cri_client_t *c, nl_cri_call_t *call) {
  resp_free(call);
  free(call->message);
  free(call);
}

static void deliver_events_end(nl_cri_client_t *c, nl_cri_call_t *call,
                               const nl_grpc_status_t *st) {
  if (c->events.call != call) return; /* unwatched meanwhile */
  c->events.call = NULL;
  if (!c->events.wanted) return;
  if (c->events.on_end) c->events.on_end(st, c->events.ctx);
  if (!c->events.wanted || c->state == NL_CRI_STOPPING || c->state == NL_CRI_STOPPED) return;
  if (st->code == NL_GRPC_UNIMPLEMENTED) return; /* the runtime has no events */
  if (c->events.got_event) nl_backoff_reset(&c->events.backoff);
  uv_timer_start(&c->events_timer, on_events_timer,
                 nl_backoff_next(&c->events.backoff), 0);
}

/* Runs user callbacks; never from inside a call function, nghttp2 or stop. */
static void drain(nl_cri_client_t *c) {
  if (c->state != NL_CRI_STOPPED && !c->flush_wanted) uv_idle_stop(&c->deliver_idle);
  if (c->delivering) return;
  c->delivering = true;
  for (;;) {
    if (!nl_list_empty(&c->events.queue)) {
      event_item_t *ev = nl_list_entry(c->events.queue.next, event_item_t, link);
      nl_list_remove(&ev->link);
      if (c->events.wanted && c->events.on_event) c->events.on_event(ev->msg, c->events.ctx);
      nl_pb_arena_free(ev->arena);
      free(ev);
      continue;
    }
    if (nl_list_empty(&c->done)) break;
    nl_cri_call_t *call = nl_list_entry(c->done.next, nl_cri_call_t, link);
    nl_list_remove(&call->link);
    nl_grpc_status_t st = {call->code, call->message ? call->message : ""};
    if (c->observe && !call->is_events)
      c->observe(c->observe_ctx, call->path, call->code, uv_hrtime() - call->started);
    if (call->is_events) deliver_events_end(c, call, &st);
    else call->deliver(&st, call->code == NL_GRPC_OK ? call->resp : NULL, call->fn, call->ctx);
    call_free(c, call);
  }
  c->delivering = false;
}

/* ---- Deadlines ------------------------------------------------------------ */

static uint64_t call_key(const nl_cri_client_t *c, const nl_cri_call_t *call) {
  if (call->where == IN_WAITING && c->state != NL_CRI_READY)
    return call->deadline < call->wait_until ? call->deadline : call->wait_until;
  return call->deadline;
}

static void arm(nl_cri_client_t *c, uint64_t key) {
  if (key == UINT64_MAX || key >= c->armed_deadline) return;
  if (c->state == NL_CRI_STOPPING || c->state == NL_CRI_STOPPED) return;
  uint64_t now = uv_now(c->loop);
  c->armed_deadline = key;
  uv_timer_start(&c->deadline_timer, on_deadline, key > now ? key - now : 0, 0);
}

static void expire_list(nl_cri_client_t *c, nl_list_t *list, uint64_t now, uint64_t *next) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, list) {
    nl_cri_call_t *call = nl_list_entry(pos, nl_cri_call_t, link);
    if (now >= call->deadline) {
      if (call->where == IN_ACTIVE) nl_grpc_stream_cancel(&call->stream);
      complete(call, NL_GRPC_DEADLINE_EXCEEDED, "context deadline exceeded");
    } else if (call->where == IN_WAITING && c->state != NL_CRI_READY &&
               now >= call->wait_until) {
      complete(call, NL_GRPC_UNAVAILABLE,
               c->last_error ? c->last_error : "connection not ready");
    } else {
      uint64_t k = call_key(c, call);
      if (k < *next) *next = k;
    }
  }
}

static void on_deadline(uv_timer_t *t) {
  nl_cri_client_t *c = container_of(t, nl_cri_client_t, deadline_timer);
  uint64_t now = uv_now(c->loop), next = UINT64_MAX;
  c->armed_deadline = UINT64_MAX;
  expire_list(c, &c->waiting, now, &next);
  expire_list(c, &c->active, now, &next);
  flush(c); /* the RST_STREAMs */
  arm(c, next);
  drain(c);
}

/* ---- Writing ---------------------------------------------------------------- */

static void start_write(nl_cri_client_t *c);

/* Empties a written buffer, keeping its memory unless a burst grew it large. */
static void wbuf_done(nl_buf_t *b) {
  if (b->cap > WBUF_KEEP) nl_buf_free(b);
  else nl_buf_reset(b);
}

/* A runtime that hung up fails our write (EPIPE) before we have read its EOF
 * and what it sent before it: then we write no more and let the read side end
 * the connection, so calls get the server's answers, or "EOF" as in grpc-go. */
static bool peer_gone(nl_cri_client_t *c, int err) {
  if (err != UV_EPIPE && err != UV_ECONNRESET) return false;
  nl_vlog(4, "CRI connection to %s: write: %s; waiting for EOF", c->path, uv_strerror(err));
  c->w.dead = true;
  nl_buf_reset(&c->w.pending);
  return true;
}

static void on_written(uv_write_t *req, int status) {
  nl_cri_client_t *c = container_of(req, nl_cri_client_t, w.req);
  c->w.busy = false;
  wbuf_done(&c->w.inflight);
  if (status < 0) {
    if (status != UV_ECANCELED && c->state == NL_CRI_READY && !peer_gone(c, status)) {
      char *why = nl_xasprintf("write to server failed: %s", uv_strerror(status));
      close_conn(c, why);
      free(why);
      drain(c);
    }
    return;
  }
  if (c->state == NL_CRI_READY) start_write(c);
}

/* Writes what the socket takes now, as uv_try_write but with MSG_NOSIGNAL: a
 * runtime that went away must not kill the agent with SIGPIPE. Returns the
 * bytes written (0 when the socket is full) or a negative UV error. Only while
 * libuv has no write queued (!w.busy), so the bytes stay in order. */
static int try_send(nl_cri_client_t *c, const char *data, size_t len) {
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&c->dial.io.pipe, &fd) < 0) return UV_EBADF;
  ssize_t n;
  do n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n >= 0) return (int)n;
  return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : uv_translate_sys_error(errno);
}

static void start_write(nl_cri_client_t *c) {
  if (c->w.dead) nl_buf_reset(&c->w.pending);
  if (c->w.busy || c->w.pending.len == 0 || c->state != NL_CRI_READY) return;
  int n = try_send(c, c->w.pending.data, c->w.pending.len);
  if (n > 0) nl_buf_consume(&c->w.pending, (size_t)n);
  else if (n < 0 && !peer_gone(c, n)) {
    char *why = nl_xasprintf("write to server failed: %s", uv_strerror(n));
    close_conn(c, why);
    free(why);
    return;
  }
  if (c->w.pending.len == 0) {
    wbuf_done(&c->w.pending);
    return;
  }
  nl_buf_t t = c->w.inflight;
  c->w.inflight = c->w.pending;
  c->w.pending = t;
  uv_buf_t b = uv_buf_init(c->w.inflight.data, (unsigned)c->w.inflight.len);
  c->w.busy = true;
  int rc = uv_write(&c->w.req, (uv_stream_t *)&c->dial.io.pipe, &b, 1, on_written);
  if (rc < 0) {
    c->w.busy = false;
    nl_buf_reset(&c->w.inflight);
    if (peer_gone(c, rc)) return;
    char *why = nl_xasprintf("write to server failed: %s", uv_strerror(rc));
    close_conn(c, why);
    free(why);
  }
}

static int session_write(void *user, const uint8_t *data, size_t len) {
  nl_cri_client_t *c = user;
  nl_buf_append(&c->w.pending, data, len);
  return 0;
}

/* Asks for the session's output to be written before the loop next blocks:
 * at the end of on_read, or from the idle handle. So the frames produced
 * meanwhile (a PING ACK, a WINDOW_UPDATE, the HEADERS and DATA of the calls
 * that completion callbacks start) leave in one write, which wakes the runtime
 * once, instead of one write per frame batch. */
static void flush(nl_cri_client_t *c) {
  if (!c->session || c->flush_wanted) return;
  c->flush_wanted = true;
  kick(c);
}

/* Closes a session nghttp2 has given up on (a protocol error: it sent GOAWAY
 * and reads no more), or a drained one after the server's GOAWAY. */
static void check_session(nl_cri_client_t *c) {
  if (!c->session) return;
  if (c->draining && nl_grpc_session_active(c->session) == 0)
    close_conn(c, "server sent GOAWAY");
  else if (!nl_grpc_session_want_io(c->session))
    /* Fail the calls now rather than at their deadlines. */
    close_conn(c, "connection error: protocol error");
}

/* Drains the session's output into the pipe; drops the connection when the
 * session is broken. */
static void flush_now(nl_cri_client_t *c) {
  c->flush_wanted = false;
  if (!c->session) return;
  int rc = nl_grpc_session_flush(c->session);
  if (rc < 0) {
    char *why = nl_xasprintf("connection error: %s", nghttp2_strerror(rc));
    close_conn(c, why);
    free(why);
    return;
  }
  start_write(c);
  check_session(c);
}

/* ---- Calls ------------------------------------------------------------------- */

static void on_stream_message(nl_grpc_stream_t *st, const uint8_t *data, size_t len) {
  nl_cri_call_t *call = container_of(st, nl_cri_call_t, stream);
  nl_cri_client_t *c = call->client;
  nl_pb_arena_t *arena = NULL;
  ProtobufCMessage *m = nl_pb_arena_unpack(call->resp_desc, c->opts.mem, data, len, &arena);
  if (!m) {
    nl_grpc_stream_cancel(st);
    complete(call, NL_GRPC_INTERNAL,
             "grpc: failed to unmarshal the received message");
    return;
  }
  if (call->is_events) {
    event_item_t *ev = nl_xmalloc(sizeof *ev);
    ev->msg = m;
    ev->arena = arena;
    nl_list_insert_tail(&c->events.queue, &ev->link);
    c->events.got_event = true;
    return;
  }
  if (call->resp) {
    call->extra_message = true;
    nl_pb_arena_free(arena);
    return;
  }
  call->resp = m;
  call->resp_arena = arena;
}

static void on_stream_close(nl_grpc_stream_t *st, const nl_grpc_status_t *status, bool refused) {
  nl_cri_call_t *call = container_of(st, nl_cri_call_t, stream);
  nl_cri_client_t *c = call->client;
  if (c->state == NL_CRI_STOPPING) {
    complete(call, NL_GRPC_CANCELLED, MSG_CLOSING);
    return;
  }
  if (refused) {
    /* Never seen by the server (GOAWAY, REFUSED_STREAM): retry on a connection. */
    nl_list_remove(&call->link);
    call->where = IN_WAITING;
    call->wait_until = call->is_events ? UINT64_MAX : uv_now(c->loop) + c->opts.connect_wait_ms;
    nl_list_insert_tail(&c->waiting, &call->link);
    arm(c, call_key(c, call));
    return;
  }
  int code = status->code;
  const char *msg = status->message;
  if (code == NL_GRPC_OK && !call->is_events) {
    if (call->extra_message) {
      code = NL_GRPC_INTERNAL;
      msg = "cardinality violation: expected <EOF> for non server-streaming RPCs, "
            "but received another message";
    } else if (!call->resp) {
      code = NL_GRPC_INTERNAL;
      msg = "cardinality violation: received no response message from "
            "non-server-streaming RPC";
    }
  }
  complete(call, code, msg);
}

static bool submit(nl_cri_client_t *c, nl_cri_call_t *call) {
  call->stream.on_message = on_stream_message;
  call->stream.on_close = on_stream_close;
  call->stream.user = call;
  uint64_t timeout = 0;
  if (call->deadline != UINT64_MAX) {
    uint64_t now = uv_now(c->loop);
    timeout = call->deadline > now ? call->deadline - now : 1;
  }
  int rc = nl_grpc_session_submit(c->session, &call->stream, call->path, call->req,
                                  call->req_len, timeout);
  if (rc == NL_GRPC_EBUSY) return false;
  nl_list_remove(&call->link);
  if (rc < 0) {
    call->where = IN_WAITING; /* complete() moves it */
    complete(call, NL_GRPC_INTERNAL, nghttp2_strerror(rc));
    return true;
  }
  call->where = IN_ACTIVE;
  nl_list_insert_tail(&c->active, &call->link);
  return true;
}

static void submit_waiting(nl_cri_client_t *c) {
  if (c->state != NL_CRI_READY || !c->session || c->draining) return;
  bool any = false;
  while (!nl_list_empty(&c->waiting)) {
    nl_cri_call_t *call = nl_list_entry(c->waiting.next, nl_cri_call_t, link);
    if (!submit(c, call)) break;
    any = true;
  }
  if (any) flush(c);
}

static nl_cri_call_t *call_new(nl_cri_client_t *c, const char *path, const ProtobufCMessage *req,
                               const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms) {
  size_t n = nl_grpc_frame_size(req);
  nl_cri_call_t *call = nl_xmalloc(sizeof *call + n);
  memset(call, 0, sizeof *call);
  nl_grpc_frame(req, call->req);
  call->req_len = n;
  call->client = c;
  call->path = path;
  call->resp_desc = resp_desc;
  uint64_t now = uv_now(c->loop);
  if (timeout_ms == 0) timeout_ms = c->opts.timeout_ms;
  call->deadline = timeout_ms == UINT64_MAX ? UINT64_MAX : now + timeout_ms;
  call->wait_until = now + c->opts.connect_wait_ms;
  nl_list_init(&call->link);
  c->stats_calls++;
  return call;
}

/* Queues the call, or submits it at once when the connection is ready. */
static void call_start(nl_cri_client_t *c, nl_cri_call_t *call) {
  if (c->state == NL_CRI_STOPPING || c->state == NL_CRI_STOPPED) {
    call->where = IN_WAITING;
    complete(call, NL_GRPC_CANCELLED, MSG_CLOSING);
    return;
  }
  call->where = IN_WAITING;
  nl_list_insert_tail(&c->waiting, &call->link);
  if (c->state == NL_CRI_READY && !c->draining && nl_list_entry(c->waiting.next, nl_cri_call_t, link) == call)
    submit_waiting(c);
  if (call->where != IN_DONE) arm(c, call_key(c, call));
  kick(c);
}

void nl_cri__call(nl_cri_client_t *c, const char *path, const ProtobufCMessage *req,
                  const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                  nl_cri__deliver deliver, nl_cri__fn fn, void *ctx) {
  nl_cri_call_t *call = call_new(c, path, req, resp_desc, timeout_ms);
  call->started = uv_hrtime();
  call->deliver = deliver;
  call->fn = fn;
  call->ctx = ctx;
  call_start(c, call);
}

static void deliver_generic(const nl_grpc_status_t *st, ProtobufCMessage *resp, nl_cri__fn fn,
                            void *ctx) {
  ((nl_cri_unary_cb)fn)(st, resp, ctx);
}

void nl_cri_client_call(nl_cri_client_t *c, const char *path, const ProtobufCMessage *req,
                        const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                        nl_cri_unary_cb cb, void *ctx) {
  nl_cri__call(c, path, req, resp_desc, timeout_ms, deliver_generic, (nl_cri__fn)cb, ctx);
}

/* ---- Events ------------------------------------------------------------------ */

static void events_start(nl_cri_client_t *c) {
  uv_timer_stop(&c->events_timer);
  if (!c->events.wanted || c->events.call) return;
  if (c->state == NL_CRI_STOPPING || c->state == NL_CRI_STOPPED) return;
  Runtime__V1__GetEventsRequest req = RUNTIME__V1__GET_EVENTS_REQUEST__INIT;
  nl_cri_call_t *call = call_new(c, PATH_EVENTS, &req.base,
                                 &runtime__v1__container_event_response__descriptor,
                                 UINT64_MAX);
  call->is_events = true;
  call->wait_until = UINT64_MAX;
  c->events.call = call;
  c->events.got_event = false;
  call_start(c, call);
}

void nl_cri_client_watch_events(nl_cri_client_t *c, nl_cri_event_cb on_event,
                                nl_cri_events_end_cb on_end, void *ctx) {
  c->events.on_event = on_event;
  c->events.on_end = on_end;
  c->events.ctx = ctx;
  c->events.wanted = true;
  nl_backoff_reset(&c->events.backoff);
  if (!c->events.call && !uv_is_active((uv_handle_t *)&c->events_timer)) events_start(c);
}

void nl_cri_client_unwatch_events(nl_cri_client_t *c) {
  c->events.wanted = false;
  if (c->state != NL_CRI_STOPPED) uv_timer_stop(&c->events_timer);
  nl_cri_call_t *call = c->events.call;
  c->events.call = NULL;
  if (call && call->where != IN_DONE) {
    if (call->where == IN_ACTIVE) {
      nl_grpc_stream_cancel(&call->stream);
      flush(c);
    }
    nl_list_remove(&call->link);
    call_free(c, call);
  }
  /* A call already in the done list is freed by drain (no callback: not ours). */
  while (!nl_list_empty(&c->events.queue)) {
    event_item_t *ev = nl_list_entry(c->events.queue.next, event_item_t, link);
    nl_list_remove(&ev->link);
    nl_pb_arena_free(ev->arena);
    free(ev);
  }
}

/* ---- Connection -------------------------------------------------------------- */

static void on_ping_ack(void *user) {
  nl_cri_client_t *c = user;
  c->ping_outstanding = false;
  uv_timer_start(&c->conn_timer, on_conn_timer, c->opts.keepalive_time_ms, 0);
}

static void on_ping_ack_timer(uv_timer_t *t) {
  nl_cri_client_t *c = container_of(t, nl_cri_client_t, ping_ack_timer);
  if (!c->session) return;
  int rc = nl_grpc_session_ack_pings(c->session);
  if (rc < 0) {
    char *why = nl_xasprintf("connection error: %s", nghttp2_strerror(rc));
    close_conn(c, why);
    free(why);
    drain(c);
    return;
  }
  flush(c);
}

/* grpc-go servers (containerd, CRI-O) send a PING to estimate the bandwidth
 * after each DATA frame they receive while none is outstanding, with a
 * WINDOW_UPDATE before it: acknowledged at once, that is two more frames in
 * and one out per call when calls come one at a time. Acknowledged a few ms
 * later, one PING covers all the calls of that time. */
static void on_ping(void *user) {
  nl_cri_client_t *c = user;
  if (!uv_is_active((uv_handle_t *)&c->ping_ack_timer))
    uv_timer_start(&c->ping_ack_timer, on_ping_ack_timer, PING_ACK_DELAY_MS, 0);
}

static void on_goaway(void *user, uint32_t error_code, int32_t last_stream_id) {
  nl_cri_client_t *c = user;
  nl_vlog(2, "CRI runtime %s sent GOAWAY (%s)", c->path, nghttp2_http2_strerror(error_code));
  c->draining = true;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  nl_cri_client_t *c = container_of((uv_pipe_t *)h, nl_cri_client_t, dial.io.pipe);
  *buf = uv_buf_init((char *)c->rbuf, RBUF_SIZE);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  nl_cri_client_t *c = container_of((uv_pipe_t *)s, nl_cri_client_t, dial.io.pipe);
  if (n == 0) return;
  if (c->state != NL_CRI_READY) return;
  if (n < 0) {
    char *why = n == UV_EOF ? nl_xstrdup("error reading from server: EOF")
                            : nl_xasprintf("error reading from server: %s", uv_strerror((int)n));
    close_conn(c, why);
    free(why);
    drain(c);
    return;
  }
  c->rx_since_tick = true;
  c->in_read = true;
  int rc = nl_grpc_session_recv(c->session, (const uint8_t *)buf->base, (size_t)n);
  if (rc < 0) {
    char *why = nl_xasprintf("connection error: %s", nghttp2_strerror(rc));
    close_conn(c, why);
    free(why);
  } else {
    flush(c); /* replies (PING ACK, WINDOW_UPDATE) */
    check_session(c);
    submit_waiting(c);
  }
  drain(c); /* the calls its callbacks start join the replies */
  c->in_read = false;
  if (c->flush_wanted) {
    flush_now(c);
    drain(c);
  }
}

static void on_conn_timer(uv_timer_t *t) {
  nl_cri_client_t *c = container_of(t, nl_cri_client_t, conn_timer);
  if (c->state == NL_CRI_BACKOFF) {
    connect_start(c);
    return;
  }
  if (c->state != NL_CRI_READY) return;
  if (c->ping_outstanding) {
    close_conn(c, "keepalive ping failed to receive ACK within timeout");
    drain(c);
    return;
  }
  /* Ping only a silent connection with calls on it: grpc-go servers count pings
   * on idle connections (and pings closer than 5 minutes) as abuse. */
  if (c->rx_since_tick || nl_grpc_session_active(c->session) == 0) {
    c->rx_since_tick = false;
    uv_timer_start(&c->conn_timer, on_conn_timer, c->opts.keepalive_time_ms, 0);
    return;
  }
  if (nl_grpc_session_ping(c->session) == 0) {
    c->ping_outstanding = true;
    uv_timer_start(&c->conn_timer, on_conn_timer, c->opts.keepalive_timeout_ms, 0);
    flush(c);
  }
}

static void closed_one(nl_cri_client_t *c);

static void on_dial_closed(nl_dial_t *d) {
  nl_cri_client_t *c = container_of(d, nl_cri_client_t, dial);
  if (c->state == NL_CRI_STOPPING) {
    closed_one(c);
    return;
  }
  c->open_handles--;
  c->state = NL_CRI_BACKOFF;
  uint64_t delay = c->was_ready ? 0 : nl_backoff_next(&c->backoff);
  c->was_ready = false;
  nl_vlog(4, "CRI connection to %s: reconnect in %llu ms", c->path, (unsigned long long)delay);
  uv_timer_start(&c->conn_timer, on_conn_timer, delay, 0);
  /* Waiting calls now wait for a connection: their keys may be earlier. */
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &c->waiting) {
    arm(c, call_key(c, nl_list_entry(pos, nl_cri_call_t, link)));
  }
}

/* Ends the current connection: its open calls fail with UNAVAILABLE (refused
 * ones wait for the next connection); the pipe closes, then we reconnect. */
static void close_conn(nl_cri_client_t *c, const char *reason) {
  if (c->state != NL_CRI_READY && c->state != NL_CRI_CONNECTING) return;
  nl_vlog(2, "CRI connection to %s lost: %s", c->path, reason);
  if (c->state == NL_CRI_READY) c->was_ready = true;
  c->state = NL_CRI_CLOSING;
  free(c->last_error);
  c->last_error = nl_xstrdup(reason);
  if (c->session) {
    nl_grpc_session_t *s = c->session;
    c->session = NULL;
    nl_grpc_session_free(s, reason);
  }
  c->ping_outstanding = false;
  c->draining = false;
  c->flush_wanted = false;
  c->generation++;
  nl_buf_reset(&c->w.pending);
  uv_timer_stop(&c->conn_timer);
  uv_timer_stop(&c->ping_ack_timer);
  nl_dial_close(&c->dial, on_dial_closed);
  kick(c);
}

static void on_dialed(nl_dial_t *d, const nl_err_t *err) {
  nl_cri_client_t *c = container_of(d, nl_cri_client_t, dial);
  assert(c->state == NL_CRI_CONNECTING); /* stopping closes the dialer: no callback */
  if (err) {
    free(c->last_error);
    c->last_error = nl_xasprintf(
        "connection error: desc = \"transport: Error while dialing: %s\"", err->msg);
    nl_vlog(2, "CRI runtime %s: %s", c->path, c->last_error);
    c->state = NL_CRI_CLOSING;
    nl_dial_close(&c->dial, on_dial_closed);
    return;
  }
  nl_grpc_session_opts_t so = {.max_recv_msg_size = c->opts.max_recv_msg_size,
                               .mem = c->opts.mem};
  nl_grpc_session_cbs_t cbs = {.write = session_write, .ping_ack = on_ping_ack,
                               .goaway = on_goaway, .ping = on_ping};
  c->session = nl_grpc_session_new(&so, &cbs, c);
  if (!c->session) {
    c->state = NL_CRI_CLOSING;
    free(c->last_error);
    c->last_error = nl_xstrdup("connection error: out of memory");
    nl_dial_close(&c->dial, on_dial_closed);
    return;
  }
  c->state = NL_CRI_READY;
  c->w.dead = false;
  nl_backoff_reset(&c->backoff);
  nl_vlog(4, "CRI connection to %s ready", c->path);
  uv_read_start((uv_stream_t *)&c->dial.io.pipe, on_alloc, on_read);
  c->rx_since_tick = false;
  uv_timer_start(&c->conn_timer, on_conn_timer, c->opts.keepalive_time_ms, 0);
  flush(c);
  submit_waiting(c);
  if (c->events.wanted && !c->events.call && !uv_is_active((uv_handle_t *)&c->events_timer))
    events_start(c);
  kick(c);
}

static void connect_start(nl_cri_client_t *c) {
  c->open_handles++;
  c->state = NL_CRI_CONNECTING;
  nl_dial_opts_t o = {.unix_path = c->path, .raw = true};
  nl_dial_start(&c->dial, c->loop, &o, on_dialed);
}

/* ---- Life cycle --------------------------------------------------------------- */

int nl_cri_client_init(nl_cri_client_t *c, uv_loop_t *loop, const char *endpoint,
                       const nl_cri_opts_t *opts, nl_err_t **err) {
  memset(c, 0, sizeof *c);
  if (nl_cri_parse_endpoint(endpoint, &c->path, err) < 0) return -1;
  c->loop = loop;
  if (opts) c->opts = *opts;
  nl_cri_opts_t *o = &c->opts;
  if (!o->timeout_ms) o->timeout_ms = NL_CRI_DEFAULT_TIMEOUT_MS;
  if (!o->pull_timeout_ms) o->pull_timeout_ms = NL_CRI_DEFAULT_PULL_TIMEOUT_MS;
  if (!o->connect_wait_ms) o->connect_wait_ms = 5000;
  if (!o->backoff_initial_ms) o->backoff_initial_ms = 1000;
  if (!o->backoff_max_ms) o->backoff_max_ms = 30000;
  if (!o->keepalive_time_ms) o->keepalive_time_ms = 6 * 60 * 1000;
  if (!o->keepalive_timeout_ms) o->keepalive_timeout_ms = 20000;
  if (!o->max_recv_msg_size) o->max_recv_msg_size = NL_CRI_DEFAULT_MAX_RECV;
  nl_backoff_init(&c->backoff, o->backoff_initial_ms, o->backoff_max_ms, 0.2);
  nl_backoff_init(&c->events.backoff, 1000, 30000, 0.2);
  nl_list_init(&c->waiting);
  nl_list_init(&c->active);
  nl_list_init(&c->done);
  nl_list_init(&c->events.queue);
  c->armed_deadline = UINT64_MAX;
  c->rbuf = nl_xmalloc(RBUF_SIZE);
  uv_timer_init(loop, &c->deadline_timer);
  uv_timer_init(loop, &c->conn_timer);
  uv_timer_init(loop, &c->events_timer);
  uv_timer_init(loop, &c->ping_ack_timer);
  uv_idle_init(loop, &c->deliver_idle);
  c->open_handles = 5;
  connect_start(c);
  return 0;
}

static void closed_one(nl_cri_client_t *c) {
  if (--c->open_handles > 0) return;
  /* Everything is closed: deliver what is left, then hand back. */
  c->state = NL_CRI_STOPPED;
  drain(c);
  free(c->rbuf);
  c->rbuf = NULL;
  free(c->path);
  c->path = NULL;
  free(c->last_error);
  c->last_error = NULL;
  nl_buf_free(&c->w.pending);
  nl_buf_free(&c->w.inflight);
  if (c->stop_cb) c->stop_cb(c);
}

static void handle_closed(uv_handle_t *h) { closed_one(h->data); }

static void fail_all(nl_cri_client_t *c, nl_list_t *list) {
  while (!nl_list_empty(list)) {
    nl_cri_call_t *call = nl_list_entry(list->next, nl_cri_call_t, link);
    if (call->where == IN_ACTIVE) nl_grpc_stream_cancel(&call->stream);
    complete(call, NL_GRPC_CANCELLED, MSG_CLOSING);
  }
}

void nl_cri_client_stop(nl_cri_client_t *c, nl_cri_stop_cb done_cb) {
  if (c->state == NL_CRI_STOPPING || c->state == NL_CRI_STOPPED) return;
  nl_cri_conn_state_t prev = c->state;
  c->stop_cb = done_cb;
  nl_cri_client_unwatch_events(c);
  /* Output still queued (RST_STREAMs) is dropped: the pipe closes anyway. */
  c->flush_wanted = false;
  c->state = NL_CRI_STOPPING;
  fail_all(c, &c->waiting);
  fail_all(c, &c->active);
  if (c->session) {
    nl_grpc_session_free(c->session, MSG_CLOSING);
    c->session = NULL;
  }
  uv_handle_t *hs[] = {(uv_handle_t *)&c->deadline_timer, (uv_handle_t *)&c->conn_timer,
                       (uv_handle_t *)&c->events_timer, (uv_handle_t *)&c->ping_ack_timer,
                       (uv_handle_t *)&c->deliver_idle};
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
    hs[i]->data = c;
    uv_close(hs[i], handle_closed);
  }
  /* The pipe is open unless it is closing (its close callback counts then) or
   * we are between connections. */
  if (prev == NL_CRI_CONNECTING || prev == NL_CRI_READY) nl_dial_close(&c->dial, on_dial_closed);
}

bool nl_cri_client_ready(const nl_cri_client_t *c) { return c->state == NL_CRI_READY; }

size_t nl_cri_client_pending(const nl_cri_client_t *c) {
  size_t n = 0;
  const nl_list_t *lists[] = {&c->waiting, &c->active, &c->done};
  for (size_t i = 0; i < 3; i++)
    for (const nl_list_t *p = lists[i]->next; p != lists[i]; p = p->next) n++;
  return n;
}

void nl_cri_client_observe(nl_cri_client_t *c, nl_cri_observe_fn fn, void *ctx) {
  c->observe = fn;
  c->observe_ctx = ctx;
}
