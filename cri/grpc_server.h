/* A gRPC server on a unix socket, on the one HTTP/2 engine (reactor/h2.h, its
 * server side) with cri/grpc.h's status codes: what the device plugin
 * Registration service (/var/lib/kubelet/device-plugins/kubelet.sock) and the
 * pod resources API (/var/lib/kubelet/pod-resources/kubelet.sock) sit on.
 * Each accepted connection runs on the one HTTP/2 connection driver
 * (reactor/h2conn.h, nl_h2conn_adopt()): its socket I/O, write batching,
 * handshake and idle deadlines and close are the driver's; this is the gRPC
 * layer above it.
 *
 * A method table maps "/pkg.Service/Method" to a handler, unary or server
 * streaming. The handler gets the request message's bytes (5-byte prefix
 * removed) and answers now or later, from any loop callback, through its
 * nl_grpc_call_t: nl_grpc_call_reply() for a unary call, nl_grpc_call_send()
 * any number of times then nl_grpc_call_finish() for a streaming one. Unknown
 * methods get UNIMPLEMENTED; grpc-timeout is honoured (the server answers
 * DEADLINE_EXCEEDED itself and tells the handler).
 *
 * Against hostile clients (docs/CRI.md, "The gRPC server"): at most
 * max_conns connections (a newcomer closes one that has no call, the oldest
 * that has not finished its handshake first, or is closed itself), each with
 * at most max_streams calls (SETTINGS_MAX_CONCURRENT_STREAMS) and header
 * blocks of at most max_header_list bytes (else RST_STREAM); a request message
 * over max_recv_msg_size is answered RESOURCE_EXHAUSTED without being read,
 * as is one that would take the connection's incomplete requests over twice
 * that, and a message's buffer grows with the bytes that arrive, never with
 * the length the prefix claims; a request not complete request_timeout_ms
 * after its HEADERS is answered CANCELLED; a client that says nothing (no preface and
 * SETTINGS within handshake_timeout_ms, no call for idle_timeout_ms) is
 * closed; a client that does not read stops being read. Writes are
 * send(MSG_NOSIGNAL) only: a client gone never raises SIGPIPE.
 *
 * Lifetime: nl_grpc_server_t is embedded in its owner. nl_grpc_server_stop()
 * closes the listener (and removes its socket file) and every connection
 * (calls still with their handlers are cancelled: see nl_grpc_call_on_cancel),
 * then calls done once every handle's close callback has run. */
#ifndef NL_CRI_GRPC_SERVER_H
#define NL_CRI_GRPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

#include "cri/grpc.h"
#include "reactor/error.h"
#include "reactor/list.h"

typedef struct nl_grpc_server nl_grpc_server_t;
typedef struct nl_grpc_call nl_grpc_call_t;

typedef enum nl_grpc_method_kind {
  NL_GRPC_UNARY,            /* one message in, one out */
  NL_GRPC_SERVER_STREAMING, /* one message in, any number out */
} nl_grpc_method_kind_t;

/* A call of a registered method, with its request message (borrowed until the
 * handler returns: copy or decode it). The handler must eventually answer the
 * call exactly once (nl_grpc_call_reply(), nl_grpc_call_finish()), also after
 * it was cancelled (then the answer only frees it). Runs from the loop, never
 * from inside a function of this server. */
typedef void (*nl_grpc_handler_fn)(void *ctx, nl_grpc_call_t *call, const uint8_t *req,
                                   size_t len);

typedef struct nl_grpc_server_opts {
  mode_t mode;                   /* of the socket file; 0: 0600 */
  size_t max_conns;              /* 0: 64 */
  uint32_t max_streams;          /* concurrent calls per connection; 0: 32 */
  size_t max_recv_msg_size;      /* 0: 4 MiB, grpc-go's default */
  size_t max_send_msg_size;      /* 0: 2 GiB - 1, grpc-go's default */
  size_t max_header_list;        /* 0: 16 KiB */
  uint64_t handshake_timeout_ms; /* accept to the client's SETTINGS; 0: 10 s */
  uint64_t idle_timeout_ms;      /* a connection without calls this long closes; 0: 10 min */
  uint64_t request_timeout_ms;   /* a request's HEADERS to its end; 0: 60 s */
  uint32_t window;               /* receive window, per call and per connection; 0: 1 MiB */
  nl_grpc_mem_t *mem;            /* nghttp2's allocator; NULL: malloc */
} nl_grpc_server_opts_t;

typedef void (*nl_grpc_server_done_fn)(nl_grpc_server_t *srv, void *ctx);

/* Embedded by its owner; fields are private. */
struct nl_grpc_server {
  uv_loop_t *loop;
  nl_grpc_server_opts_t opts; /* defaults filled in */
  uv_poll_t listener;         /* the listening socket (its fd, ours) */
  int lfd;
  char *path;                 /* the socket file, once listening */
  uint8_t *rbuf;              /* one read buffer for every connection */
  uv_timer_t deadlines;       /* the calls' deadlines, of every connection */
  dev_t sock_dev;             /* the socket file we made: removed at stop */
  ino_t sock_ino;             /* unless another server took the path since */
  nl_list_t methods;
  nl_list_t conns;            /* every connection not yet freed */
  size_t nconns;              /* in conns */
  size_t nlive;               /* those not closing */
  bool listening, stopping, listener_closed, deadlines_closed;
  nl_grpc_server_done_fn done_cb;
  void *done_ctx;
  uint64_t stats_calls;       /* calls dispatched to a handler (tests, metrics) */
};

/* opts may be NULL. Never fails: the listener is created by listen. */
void nl_grpc_server_init(nl_grpc_server_t *srv, uv_loop_t *loop,
                         const nl_grpc_server_opts_t *opts);

/* Serves path ("/pkg.Service/Method", copied) with fn. A path registered twice
 * keeps its first handler. */
void nl_grpc_server_method(nl_grpc_server_t *srv, const char *path, nl_grpc_method_kind_t kind,
                           nl_grpc_handler_fn fn, void *ctx);

/* Listens on the unix socket path: creates its directory (0750) when
 * missing, removes a stale socket file (as upstream's kubelet does; anything
 * else there is an error), binds, sets the file's mode. Returns 0, or -1 with
 * *err like "listen unix /x/kubelet.sock: address already in use". */
int nl_grpc_server_listen(nl_grpc_server_t *srv, const char *path, nl_err_t **err);

/* Closes the listener and every connection, removes the socket file, then
 * calls done (may be NULL) from a close callback once the server's memory is
 * freed. Calls held by handlers are cancelled (their cancel callbacks run
 * from inside this function) and stay theirs to answer. Calling it again is a
 * no-op; a server initialised but never listening must still be stopped. */
void nl_grpc_server_stop(nl_grpc_server_t *srv, nl_grpc_server_done_fn done, void *ctx);

/* Connections open (closing ones excluded). */
size_t nl_grpc_server_conns(const nl_grpc_server_t *srv);

/* ---- calls ------------------------------------------------------------------ */

/* "/pkg.Service/Method"; valid until the call is answered. */
const char *nl_grpc_call_path(const nl_grpc_call_t *call);
/* Milliseconds left before the client's grpc-timeout, UINT64_MAX when it set
 * none, 0 when past it. */
uint64_t nl_grpc_call_time_left(const nl_grpc_call_t *call);
/* True while an answer can still reach the client. */
bool nl_grpc_call_alive(const nl_grpc_call_t *call);

/* Asks to be told once when the call can no longer be answered (the client
 * reset it or went away, its deadline passed, the server stops): a streaming
 * handler stops producing. The handler must still answer to free the call. */
void nl_grpc_call_on_cancel(nl_grpc_call_t *call, void (*cb)(nl_grpc_call_t *call, void *ctx),
                            void *ctx);

/* Answers a unary call and releases it: code NL_GRPC_OK with the response
 * message (resp, len: copied), or an error code with message (NULL: none;
 * resp ignored). Also a streaming call's one-shot answer. */
void nl_grpc_call_reply(nl_grpc_call_t *call, int code, const char *message, const uint8_t *resp,
                        size_t len);
/* nl_grpc_call_reply() with a protobuf message, packed here. */
void nl_grpc_call_reply_msg(nl_grpc_call_t *call, const ProtobufCMessage *resp);

/* Sends one message of a streaming answer (copied; the response head goes
 * with the first). Returns 0, or -1 when the call can no longer be answered
 * (or the message is over max_send_msg_size: the call is then answered
 * RESOURCE_EXHAUSTED). */
int nl_grpc_call_send(nl_grpc_call_t *call, const uint8_t *msg, size_t len);
int nl_grpc_call_send_msg(nl_grpc_call_t *call, const ProtobufCMessage *msg);
/* Bytes of sent messages not yet taken by the client's window: a producer
 * stops above its own mark. */
size_t nl_grpc_call_queued(const nl_grpc_call_t *call);
/* Ends a streaming answer with its status (message NULL: none) and releases
 * the call. */
void nl_grpc_call_finish(nl_grpc_call_t *call, int code, const char *message);

#endif
