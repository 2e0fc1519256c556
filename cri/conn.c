#include "cri/conn.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "cri/brief.h"
#include "cri/call.h"
#include "cri/pbarena.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define MSG_CLOSING "grpc: the client connection is closing"
/* A second: calls spread over time (an exec probe every 100 ms of a node
 * with 110 probed pods, the 1 s relist) then meet one grpc-go bandwidth PING
 * a second, not one each with its WINDOW_UPDATE and an ACK timer's wake-up
 * (docs/CRI.md, "the runtime's PINGs"). */
#define PING_ACK_DELAY_MS 1000
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
  bool is_stream;      /* server streaming: on_message per message, on_end once */
  bool wait_forever;   /* waits for a connection however long it takes */
  bool cancelled;      /* nl_cri_stream_cancel() while in the done list */
  bool extra_message;  /* a unary call got a second message */
  bool same;           /* the answer's fingerprint is same_fp: not decoded */
  uint64_t same_fp;    /* a brief list's last fingerprint (0: none) */
  uint64_t *fp;        /* where the answer's fingerprint goes, or NULL */
  nl_cri_stream_msg_cb on_msg;
  nl_cri_stream_end_cb on_end;
  size_t queued;       /* messages of this stream awaiting delivery */
  uint64_t started;    /* uv_hrtime() at the call */
  size_t req_len;
  uint8_t req[];       /* the framed request */
} nl_cri_call_t;

/* One received message of a streaming call, awaiting delivery. */
typedef struct stream_item {
  nl_list_t link;
  nl_cri_call_t *call;
  ProtobufCMessage *msg;
  nl_pb_arena_t *arena; /* owns msg */
} stream_item_t;

static void drain(nl_cri_client_t *c);
static void events_start(nl_cri_client_t *c);
static void on_deadline(uv_timer_t *t);

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
  return !nl_list_empty(&c->done) || !nl_list_empty(&c->streamq);
}

/* The connection takes new calls (READY, not draining). */
static bool ready(const nl_cri_client_t *c) {
  return c->state == NL_CRI_RUNNING && nl_h2conn_ready(&c->conn);
}

/* A connection is up (READY or draining): waiting calls wait for a stream,
 * not for a connection. */
static bool connected(const nl_cri_client_t *c) {
  return c->state == NL_CRI_RUNNING &&
         (c->conn.state == NL_H2CONN_READY || c->conn.state == NL_H2CONN_DRAINING);
}

static void on_events_timer(uv_timer_t *t) {
  events_start(container_of(t, nl_cri_client_t, events_timer));
}

/* Completions are delivered from the connection's idle handle (cbs->turn),
 * unless drain is running (it delivers those). */
static void kick(nl_cri_client_t *c) {
  if (c->state != NL_CRI_RUNNING) return;
  if (has_deliveries(c) && !c->delivering) nl_h2conn_defer(&c->conn);
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

/* Drops the undelivered messages of a streaming call. */
static void drop_items(nl_cri_client_t *c, nl_cri_call_t *call) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &c->streamq) {
    stream_item_t *it = nl_list_entry(pos, stream_item_t, link);
    if (it->call != call) continue;
    nl_list_remove(&it->link);
    nl_pb_arena_free(it->arena);
    free(it);
  }
  call->queued = 0;
}

static void call_free(nl_cri_client_t *c, nl_cri_call_t *call) {
  if (call->queued) drop_items(c, call);
  resp_free(call);
  free(call->message);
  free(call);
}

static void events_on_message(const ProtobufCMessage *msg, void *ctx) {
  nl_cri_client_t *c = ctx;
  c->events.got_event = true;
  if (c->events.wanted && c->events.on_event) c->events.on_event(msg, c->events.ctx);
}

static void events_on_end(const nl_grpc_status_t *st, void *ctx) {
  nl_cri_client_t *c = ctx;
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
  if (c->delivering) return;
  c->delivering = true;
  for (;;) {
    if (!nl_list_empty(&c->streamq)) {
      stream_item_t *it = nl_list_entry(c->streamq.next, stream_item_t, link);
      nl_list_remove(&it->link);
      assert(it->call->queued > 0);
      it->call->queued--;
      /* The callback may cancel its own stream: it holds no pointer to it after. */
      it->call->on_msg(it->msg, it->call->ctx);
      nl_pb_arena_free(it->arena);
      free(it);
      continue;
    }
    if (nl_list_empty(&c->done)) break;
    nl_cri_call_t *call = nl_list_entry(c->done.next, nl_cri_call_t, link);
    nl_list_remove(&call->link);
    nl_grpc_status_t st = {call->code, call->message ? call->message : ""};
    if (c->observe && !call->is_stream)
      c->observe(c->observe_ctx, call->path, call->code, uv_hrtime() - call->started);
    if (call->is_stream) {
      if (!call->cancelled) call->on_end(&st, call->ctx);
    } else call->deliver(&st, call->code == NL_GRPC_OK ? call->resp : NULL, call->fn, call->ctx);
    call_free(c, call);
  }
  c->delivering = false;
}

/* ---- Deadlines ------------------------------------------------------------ */

static uint64_t call_key(const nl_cri_client_t *c, const nl_cri_call_t *call) {
  if (call->where == IN_WAITING && !connected(c))
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
    } else if (call->where == IN_WAITING && !connected(c) &&
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
  nl_h2conn_flush(&c->conn); /* the RST_STREAMs */
  arm(c, next);
  drain(c);
}

/* ---- Calls ------------------------------------------------------------------- */

static void on_stream_message(nl_grpc_stream_t *st, const uint8_t *data, size_t len) {
  nl_cri_call_t *call = container_of(st, nl_cri_call_t, stream);
  nl_cri_client_t *c = call->client;
  nl_pb_arena_t *arena = NULL;
  if (call->fp && !call->resp && !call->same) {
    *call->fp = nl_cri_brief_fingerprint(call->resp_desc, data, len);
    if (*call->fp && *call->fp == call->same_fp) {
      call->same = true;
      return;
    }
  }
  ProtobufCMessage *m = nl_pb_arena_unpack(call->resp_desc, c->opts.mem, data, len, &arena);
  if (!m) {
    nl_grpc_stream_cancel(st);
    complete(call, NL_GRPC_INTERNAL,
             "grpc: failed to unmarshal the received message");
    return;
  }
  if (call->is_stream) {
    if (c->opts.max_stream_queue && call->queued >= c->opts.max_stream_queue) {
      nl_pb_arena_free(arena);
      nl_grpc_stream_cancel(st);
      complete(call, NL_GRPC_RESOURCE_EXHAUSTED,
               "grpc: the server sends messages faster than the client takes them");
      return;
    }
    stream_item_t *it = nl_xmalloc(sizeof *it);
    it->call = call;
    it->msg = m;
    it->arena = arena;
    call->queued++;
    nl_list_insert_tail(&c->streamq, &it->link);
    return;
  }
  if (call->resp || call->same) {
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
    call->wait_until = call->wait_forever ? UINT64_MAX : uv_now(c->loop) + c->opts.connect_wait_ms;
    nl_list_insert_tail(&c->waiting, &call->link);
    arm(c, call_key(c, call));
    return;
  }
  int code = status->code;
  const char *msg = status->message;
  if (code == NL_GRPC_OK && !call->is_stream) {
    if (call->extra_message) {
      code = NL_GRPC_INTERNAL;
      msg = "cardinality violation: expected <EOF> for non server-streaming RPCs, "
            "but received another message";
    } else if (!call->resp && !call->same) {
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
  int rc = nl_grpc_submit(c->conn.h2, &c->channel, &call->stream, call->path, call->req,
                          call->req_len, timeout);
  if (rc == NL_H2_EBUSY) return false;
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
  if (!ready(c)) return;
  bool any = false;
  while (!nl_list_empty(&c->waiting)) {
    nl_cri_call_t *call = nl_list_entry(c->waiting.next, nl_cri_call_t, link);
    if (!submit(c, call)) break;
    any = true;
  }
  if (any) nl_h2conn_flush(&c->conn);
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
  if (ready(c) && nl_list_entry(c->waiting.next, nl_cri_call_t, link) == call)
    submit_waiting(c);
  if (call->where != IN_DONE) arm(c, call_key(c, call));
  kick(c);
}

static void call_ex(nl_cri_client_t *c, const char *path, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms, uint64_t same,
                    uint64_t *fp, nl_cri__deliver deliver, nl_cri__fn fn, void *ctx) {
  nl_cri_call_t *call = call_new(c, path, req, resp_desc, timeout_ms);
  call->started = uv_hrtime();
  call->deliver = deliver;
  call->fn = fn;
  call->ctx = ctx;
  call->same_fp = same;
  call->fp = fp;
  call_start(c, call);
}

void nl_cri__call(nl_cri_client_t *c, const char *path, const ProtobufCMessage *req,
                  const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                  nl_cri__deliver deliver, nl_cri__fn fn, void *ctx) {
  call_ex(c, path, req, resp_desc, timeout_ms, 0, NULL, deliver, fn, ctx);
}

void nl_cri__call_fp(nl_cri_client_t *c, const char *path, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc, uint64_t same, uint64_t *fp,
                     nl_cri__deliver deliver, nl_cri__fn fn, void *ctx) {
  call_ex(c, path, req, resp_desc, 0, same, fp, deliver, fn, ctx);
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

/* ---- Server streaming ------------------------------------------------------- */

static nl_cri_call_t *stream_start(nl_cri_client_t *c, const char *path,
                                   const ProtobufCMessage *req,
                                   const ProtobufCMessageDescriptor *msg_desc,
                                   uint64_t timeout_ms, bool wait_forever,
                                   nl_cri_stream_msg_cb on_message,
                                   nl_cri_stream_end_cb on_end, void *ctx) {
  assert(on_message && on_end);
  nl_cri_call_t *call = call_new(c, path, req, msg_desc, timeout_ms ? timeout_ms : UINT64_MAX);
  call->started = uv_hrtime();
  call->is_stream = true;
  call->wait_forever = wait_forever;
  if (wait_forever) call->wait_until = UINT64_MAX;
  call->on_msg = on_message;
  call->on_end = on_end;
  call->ctx = ctx;
  call_start(c, call);
  return call;
}

nl_cri_stream_t *nl_cri_client_stream(nl_cri_client_t *c, const char *path,
                                      const ProtobufCMessage *req,
                                      const ProtobufCMessageDescriptor *msg_desc,
                                      uint64_t timeout_ms, nl_cri_stream_msg_cb on_message,
                                      nl_cri_stream_end_cb on_end, void *ctx) {
  return (nl_cri_stream_t *)stream_start(c, path, req, msg_desc, timeout_ms, false, on_message,
                                         on_end, ctx);
}

void nl_cri_stream_cancel(nl_cri_stream_t *s) {
  nl_cri_call_t *call = (nl_cri_call_t *)s;
  nl_cri_client_t *c = call->client;
  assert(call->is_stream && !call->cancelled);
  drop_items(c, call);
  if (call->where == IN_DONE) {
    call->cancelled = true; /* drain frees it without a callback */
    return;
  }
  if (call->where == IN_ACTIVE) {
    nl_grpc_stream_cancel(&call->stream);
    nl_h2conn_flush(&c->conn);
  }
  nl_list_remove(&call->link);
  call_free(c, call);
}

/* ---- Events: a server stream restarted after each end --------------------------- */

static void events_start(nl_cri_client_t *c) {
  uv_timer_stop(&c->events_timer);
  if (!c->events.wanted || c->events.call) return;
  if (c->state == NL_CRI_STOPPING || c->state == NL_CRI_STOPPED) return;
  Runtime__V1__GetEventsRequest req = RUNTIME__V1__GET_EVENTS_REQUEST__INIT;
  c->events.got_event = false;
  c->events.call = stream_start(c, PATH_EVENTS, &req.base,
                                &runtime__v1__container_event_response__descriptor,
                                UINT64_MAX, true, events_on_message, events_on_end, c);
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
  if (call) nl_cri_stream_cancel((nl_cri_stream_t *)call);
}

/* ---- Connection -------------------------------------------------------------- */

static nl_cri_client_t *client_of(nl_h2conn_t *conn) {
  return container_of(conn, nl_cri_client_t, conn);
}

static void conn_ready(nl_h2conn_t *conn, bool h2) {
  nl_cri_client_t *c = client_of(conn);
  assert(h2); /* a unix socket without TLS: always HTTP/2 */
  if (c->label) nl_vlog(4, "%s: connected", c->label);
  else nl_vlog(4, "CRI connection to %s ready", c->path);
  submit_waiting(c);
  if (c->events.wanted && !c->events.call && !uv_is_active((uv_handle_t *)&c->events_timer))
    events_start(c);
  kick(c);
}

/* The session moved (answers read, output sent): calls waiting for a stream go. */
static void conn_moved(nl_h2conn_t *conn) {
  nl_cri_client_t *c = client_of(conn);
  submit_waiting(c);
  drain(c); /* the calls its callbacks start join the replies */
}

static void conn_goaway(nl_h2conn_t *conn) {
  nl_cri_client_t *c = client_of(conn);
  const char *why = nghttp2_http2_strerror(conn->goaway_code);
  if (c->label) nl_vlog(2, "%s sent GOAWAY (%s)", c->label, why);
  else nl_vlog(2, "CRI runtime %s sent GOAWAY (%s)", c->path, why);
}

/* The dial failed, or the connection ended: its open calls fail with
 * UNAVAILABLE (refused ones wait for the next connection, which the driver
 * dials by itself). */
static void conn_lost(nl_h2conn_t *conn, const nl_err_t *err) {
  nl_cri_client_t *c = client_of(conn);
  free(c->last_error);
  if (!conn->connected) {
    c->last_error = nl_xasprintf(
        "connection error: desc = \"transport: Error while dialing: %s\"", err->msg);
    if (c->label) nl_vlog(2, "%s: %s", c->label, c->last_error);
    else nl_vlog(2, "CRI runtime %s: %s", c->path, c->last_error);
  } else {
    c->last_error = nl_xstrdup(err->msg);
    if (c->label) nl_vlog(2, "%s: connection lost: %s", c->label, err->msg);
    else nl_vlog(2, "CRI connection to %s lost: %s", c->path, err->msg);
    if (conn->h2) nl_grpc_fail_streams(conn->h2, err->msg);
  }
  /* Waiting calls now wait for a connection: their keys may be earlier. */
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &c->waiting) {
    arm(c, call_key(c, nl_list_entry(pos, nl_cri_call_t, link)));
  }
  kick(c);
}

static void conn_turn(nl_h2conn_t *conn) { drain(client_of(conn)); }

static void closed_one(nl_cri_client_t *c);

static void conn_closed(nl_h2conn_t *conn) { closed_one(client_of(conn)); }

static const nl_h2conn_cbs_t conn_cbs = {.ready = conn_ready, .moved = conn_moved,
                                         .goaway = conn_goaway, .lost = conn_lost,
                                         .turn = conn_turn, .closed = conn_closed};

/* ---- Life cycle --------------------------------------------------------------- */

int nl_cri_client_init(nl_cri_client_t *c, uv_loop_t *loop, const char *endpoint,
                       const nl_cri_opts_t *opts, nl_err_t **err) {
  memset(c, 0, sizeof *c);
  if (nl_cri_parse_endpoint(endpoint, &c->path, err) < 0) return -1;
  c->loop = loop;
  if (opts) c->opts = *opts;
  nl_cri_opts_t *o = &c->opts;
  if (o->label) c->label = nl_xstrdup(o->label);
  o->label = c->label;
  if (!o->timeout_ms) o->timeout_ms = NL_CRI_DEFAULT_TIMEOUT_MS;
  if (!o->pull_timeout_ms) o->pull_timeout_ms = NL_CRI_DEFAULT_PULL_TIMEOUT_MS;
  if (!o->connect_wait_ms) o->connect_wait_ms = 5000;
  if (!o->handshake_timeout_ms) o->handshake_timeout_ms = 20000;
  if (!o->backoff_initial_ms) o->backoff_initial_ms = 1000;
  if (!o->backoff_max_ms) o->backoff_max_ms = 30000;
  if (!o->keepalive_time_ms) o->keepalive_time_ms = 6 * 60 * 1000;
  if (!o->keepalive_timeout_ms) o->keepalive_timeout_ms = 20000;
  if (!o->max_recv_msg_size) o->max_recv_msg_size = NL_CRI_DEFAULT_MAX_RECV;
  nl_backoff_init(&c->events.backoff, 1000, 30000, 0.2);
  nl_list_init(&c->waiting);
  nl_list_init(&c->active);
  nl_list_init(&c->done);
  nl_list_init(&c->streamq);
  c->armed_deadline = UINT64_MAX;
  c->channel = (nl_grpc_channel_t){.max_recv_msg_size = o->max_recv_msg_size};
  uv_timer_init(loop, &c->deadline_timer);
  uv_timer_init(loop, &c->events_timer);
  nl_h2conn_opts_t co = {
      .dial = {.unix_path = c->path},
      .h2 = {.window = NL_GRPC_WINDOW, .mem = o->mem ? &o->mem->nghttp2 : NULL},
      .words = NL_H2CONN_WORDS_GRPC,
      .ping_after_ms = o->keepalive_time_ms,
      .ping_timeout_ms = o->keepalive_timeout_ms,
      .ping_only_active = true, /* grpc-go servers count pings on idle connections as abuse */
      .ping_ack_delay_ms = PING_ACK_DELAY_MS,
      .reconnect = true,
      .handshake_ms = o->handshake_timeout_ms,
      .backoff_initial_ms = o->backoff_initial_ms,
      .backoff_max_ms = o->backoff_max_ms,
  };
  nl_h2conn_init(&c->conn, loop, &co, &conn_cbs);
  c->open_handles = 3; /* the two timers and the connection */
  nl_h2conn_start(&c->conn);
  return 0;
}

static void closed_one(nl_cri_client_t *c) {
  if (--c->open_handles > 0) return;
  /* Everything is closed: deliver what is left, then hand back. */
  c->state = NL_CRI_STOPPED;
  drain(c);
  free(c->path);
  c->path = NULL;
  free(c->label);
  c->label = NULL;
  c->opts.label = NULL;
  free(c->last_error);
  c->last_error = NULL;
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
  if (c->state != NL_CRI_RUNNING) return;
  c->stop_cb = done_cb;
  nl_cri_client_unwatch_events(c);
  c->state = NL_CRI_STOPPING;
  fail_all(c, &c->waiting);
  fail_all(c, &c->active);
  if (c->conn.h2) nl_grpc_fail_streams(c->conn.h2, MSG_CLOSING);
  /* Output still queued (RST_STREAMs) is dropped: the socket closes anyway. */
  nl_h2conn_close(&c->conn);
  uv_handle_t *hs[] = {(uv_handle_t *)&c->deadline_timer, (uv_handle_t *)&c->events_timer};
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
    hs[i]->data = c;
    uv_close(hs[i], handle_closed);
  }
}

bool nl_cri_client_ready(const nl_cri_client_t *c) { return connected(c); }

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
