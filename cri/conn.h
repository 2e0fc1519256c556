/* The CRI client: one HTTP/2 connection to the runtime's unix socket
 * (reactor/h2conn.h: it reconnects with back-off when the socket closes,
 * keeps the connection alive with PINGs, acknowledges the runtime's PINGs
 * 10 ms late), carrying any number of concurrent gRPC calls (cri/grpc.h). The
 * client runs a deadline per call, queues calls while there is no connection,
 * and keeps the GetContainerEvents stream running across reconnects.
 *
 * Completion contract (all calls, typed wrappers in cri/runtime.h and
 * cri/image.h included): the callback is called exactly once, always from the
 * loop and never from inside the function that started the call, also when the
 * client is stopped (then with CANCELLED). The request is only read during the
 * call function (it is serialized at once): the caller keeps ownership and may
 * free it on return. The response passed to the callback is owned by the client
 * and freed when the callback returns (NULL unless status is OK); copy what you
 * keep. A callback may start new calls and may stop the client.
 *
 * Lifetime: nl_cri_client_t is embedded in its owner. nl_cri_client_stop()
 * fails what is pending, closes the handles, and calls done_cb once every close
 * callback has run; the owner may free the memory only then. */
#ifndef NL_CRI_CONN_H
#define NL_CRI_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "cri/api.h"
#include "cri/grpc.h"
#include "reactor/backoff.h"
#include "reactor/h2conn.h"
#include "reactor/error.h"
#include "reactor/list.h"

#define NL_CRI_DEFAULT_TIMEOUT_MS (2 * 60 * 1000)    /* runtimeRequestTimeout 2m */
#define NL_CRI_DEFAULT_PULL_TIMEOUT_MS (30 * 60 * 1000)
#define NL_CRI_DEFAULT_MAX_RECV NL_GRPC_DEFAULT_MAX_RECV /* the kubelet's maxMsgSize */

typedef struct nl_cri_opts {
  uint64_t timeout_ms;          /* per-call deadline; 0: 2 minutes */
  uint64_t pull_timeout_ms;     /* PullImage deadline; 0: 30 minutes */
  uint64_t connect_wait_ms;     /* how long a call waits for a connection; 0: 5 s */
  uint64_t handshake_timeout_ms;/* the server's SETTINGS within this long of the
                                 * socket's connect, else the connection is dialed
                                 * again and its calls fail UNAVAILABLE; 0: 20 s
                                 * (grpc-go's minimum connect timeout) */
  uint64_t backoff_initial_ms;  /* reconnect back-off; 0: 1 s (grpc-go) */
  uint64_t backoff_max_ms;      /* 0: 30 s */
  uint64_t keepalive_time_ms;   /* PING after this idle time; 0: 30 s */
  uint64_t keepalive_timeout_ms;/* connection dead without ACK; 0: 20 s */
  size_t max_recv_msg_size;     /* 0: 16 MiB */
  size_t max_stream_queue;      /* a stream with more messages received and not yet
                                 * delivered ends RESOURCE_EXHAUSTED; 0: no bound */
  nl_grpc_mem_t *mem;           /* allocator for nghttp2/protobuf-c; NULL: malloc */
  const char *label;            /* the peer in log lines (copied), e.g. "device plugin
                                 * example.com/resource (PATH)"; NULL: the runtime
                                 * ("CRI runtime PATH", "CRI connection to PATH") */
} nl_cri_opts_t;

/* The client's life; the connection's is conn.state (reactor/h2conn.h). */
typedef enum nl_cri_state {
  NL_CRI_RUNNING,
  NL_CRI_STOPPING,    /* nl_cri_client_stop(): the handles are closing */
  NL_CRI_STOPPED,
} nl_cri_state_t;

/* Generic unary completion (the typed wrappers use their own signatures). */
typedef void (*nl_cri_unary_cb)(const nl_grpc_status_t *status, ProtobufCMessage *resp,
                                void *ctx);
/* One GetContainerEvents message; ev is borrowed until the callback returns. */
typedef void (*nl_cri_event_cb)(const ProtobufCMessage *ev, void *ctx);
/* The events stream ended (status says why); the client restarts it by itself
 * unless the code is UNIMPLEMENTED (the runtime has no events: relist instead)
 * or the client is stopping. */
typedef void (*nl_cri_events_end_cb)(const nl_grpc_status_t *status, void *ctx);

typedef struct nl_cri_client nl_cri_client_t;
typedef void (*nl_cri_stop_cb)(nl_cri_client_t *c);

struct nl_cri_client {
  uv_loop_t *loop;
  char *path;                 /* socket path, owned */
  nl_cri_opts_t opts;         /* defaults filled in */
  nl_cri_state_t state;

  nl_h2conn_t conn;           /* the runtime's socket; conn.h2 while connected. Its
                               * idle handle delivers completions outside the call
                               * function (cbs->turn) and writes once per turn */
  nl_grpc_channel_t channel;  /* what the calls share (max_recv_msg_size) */
  uv_timer_t deadline_timer;  /* earliest call deadline */
  uv_timer_t events_timer;    /* restart of the events stream */
  int open_handles;           /* closed by stop; done_cb when back to 0 */
  char *last_error;           /* why the last connection attempt failed, owned */
  char *label;                /* opts.label's copy, owned; NULL for the runtime */

  nl_list_t waiting;          /* calls waiting for a connection */
  nl_list_t active;           /* calls with a stream on the session */
  nl_list_t done;             /* finished calls awaiting delivery */
  nl_list_t streamq;          /* received stream messages awaiting delivery */
  uint64_t armed_deadline;    /* deadline_timer due time, UINT64_MAX when idle */
  bool delivering;
  void (*observe)(void *ctx, const char *path, int code, uint64_t duration_ns);
  void *observe_ctx;

  struct nl_cri_events_state {
    nl_cri_event_cb on_event;
    nl_cri_events_end_cb on_end;
    void *ctx;
    struct nl_cri_call *call; /* the running stream, or NULL */
    bool got_event;           /* since the stream (re)started */
    bool wanted;
    nl_backoff_t backoff;
  } events;

  nl_cri_stop_cb stop_cb;
  uint64_t stats_calls;       /* calls started (for tests and benchmarks) */
};

/* Parses a kubelet-style endpoint: "unix:///run/containerd/containerd.sock" or a
 * bare absolute path. Returns 0 and an allocated *path, or -1 with *err
 * (NL_EINVAL) for another scheme or an empty path. */
int nl_cri_parse_endpoint(const char *endpoint, char **path, nl_err_t **err);

/* Initializes c (embedded by the caller) and starts connecting. opts may be
 * NULL. Returns 0, or -1 with *err when the endpoint is invalid (then nothing is
 * started and c needs no stop). */
int nl_cri_client_init(nl_cri_client_t *c, uv_loop_t *loop, const char *endpoint,
                       const nl_cri_opts_t *opts, nl_err_t **err);

/* Fails every pending call with CANCELLED (delivered before done_cb), closes all
 * handles, frees what the client owns, then calls done_cb (may be NULL). Calling
 * the client after done_cb is a bug; calls made between stop and done_cb fail
 * with CANCELLED. */
void nl_cri_client_stop(nl_cri_client_t *c, nl_cri_stop_cb done_cb);

/* Starts a unary call: path is "/runtime.v1.RuntimeService/Version" (static
 * storage), req is serialized at once (borrowed), resp_desc decodes the answer.
 * timeout_ms 0 uses opts.timeout_ms; UINT64_MAX means no deadline. */
void nl_cri_client_call(nl_cri_client_t *c, const char *path, const ProtobufCMessage *req,
                        const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                        nl_cri_unary_cb cb, void *ctx);

/* A server-streaming call (the events stream, a device plugin's ListAndWatch).
 * Each message, decoded as msg_desc, is passed to on_message (borrowed until it
 * returns), in order, from the loop; then on_end once with the final status
 * (CANCELLED when the client stops; RESOURCE_EXHAUSTED when opts.max_stream_queue
 * messages wait undelivered; INTERNAL for a message that does not decode). The
 * call waits opts.connect_wait_ms for a connection, as unary calls do;
 * timeout_ms 0 or UINT64_MAX: no deadline. The handle is valid until on_end
 * runs or until nl_cri_stream_cancel(), after which no callback runs. */
typedef struct nl_cri_stream nl_cri_stream_t;
typedef void (*nl_cri_stream_msg_cb)(const ProtobufCMessage *msg, void *ctx);
typedef void (*nl_cri_stream_end_cb)(const nl_grpc_status_t *status, void *ctx);
nl_cri_stream_t *nl_cri_client_stream(nl_cri_client_t *c, const char *path,
                                      const ProtobufCMessage *req,
                                      const ProtobufCMessageDescriptor *msg_desc,
                                      uint64_t timeout_ms, nl_cri_stream_msg_cb on_message,
                                      nl_cri_stream_end_cb on_end, void *ctx);
/* Ends the stream (RST_STREAM to the server) and drops what it has not
 * delivered; may be called from its own on_message, not from its on_end. */
void nl_cri_stream_cancel(nl_cri_stream_t *s);

/* Subscribes to GetContainerEvents (one subscription per client; a second call
 * replaces the callbacks). Events are delivered as they arrive; on_end (may be
 * NULL) reports each end of the stream before it is restarted after a back-off
 * (1 s doubling to 30 s, reset by a received event) or after a reconnect. */
void nl_cri_client_watch_events(nl_cri_client_t *c, nl_cri_event_cb on_event,
                                nl_cri_events_end_cb on_end, void *ctx);
/* Ends the subscription; no callback of it runs afterwards. */
void nl_cri_client_unwatch_events(nl_cri_client_t *c);

/* The typed wrappers (cri/runtime.h, cri/image.h) are generated from tables of
 * X(name, Method, Request, Response, response_snake, deadline kind). For each
 * row there is a callback type and a function:
 *   typedef void (*nl_cri_<name>_cb)(const nl_grpc_status_t *status,
 *                                    Runtime__V1__<Response> *resp, void *ctx);
 *   void nl_cri_<name>(nl_cri_client_t *c, const Runtime__V1__<Request> *req,
 *                      nl_cri_<name>_cb cb, void *ctx);
 * with the completion contract above (resp borrowed, NULL unless OK). */
enum nl_cri_deadline_kind {
  NL_CRI_DEADLINE_DEFAULT, /* opts.timeout_ms */
  NL_CRI_DEADLINE_PULL,    /* opts.pull_timeout_ms */
  NL_CRI_DEADLINE_EXEC,    /* opts.timeout_ms + the request's timeout seconds, or
                            * none when that is 0 (as the kubelet's ExecSync) */
};
#define NL_CRI__DECLARE_RPC(name, Method, Req, Resp, resp_snake, kind)              \
  typedef void (*nl_cri_##name##_cb)(const nl_grpc_status_t *status,              \
                                      Runtime__V1__##Resp *resp, void *ctx);       \
  void nl_cri_##name(nl_cri_client_t *c, const Runtime__V1__##Req *req,           \
                     nl_cri_##name##_cb cb, void *ctx);

/* Told of every finished unary call, just before its callback: the gRPC path
 * ("/runtime.v1.RuntimeService/Version"), the status code and the time since
 * the call was made (waiting for a connection included). For metrics. */
typedef void (*nl_cri_observe_fn)(void *ctx, const char *path, int code, uint64_t duration_ns);
void nl_cri_client_observe(nl_cri_client_t *c, nl_cri_observe_fn fn, void *ctx);

/* True while connected (READY). */
bool nl_cri_client_ready(const nl_cri_client_t *c);
/* Number of calls not yet delivered. */
size_t nl_cri_client_pending(const nl_cri_client_t *c);

#endif
