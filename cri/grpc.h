/* gRPC calls on the HTTP/2 engine (reactor/h2.h), doing no I/O: each call is
 * an HTTP/2 stream (nl_grpc_stream_t) that the caller embeds in its own call
 * struct and submits on the engine's session (nl_h2_t), whose connection is
 * the caller's (reactor/h2conn.h). HTTP/2 itself (session set-up, windows,
 * PINGs, GOAWAY, resets) is the engine's; this file adds gRPC's framing,
 * headers and status, and knows no sockets, loops or protobuf schema: a
 * request is a serialized message, a response is delivered as message bytes.
 * So it is tested on bytes alone and serves both the CRI client (cri/conn.h, a
 * unix socket) and the gRPC health probe over TCP.
 *
 * Re-entrancy: stream callbacks run inside nl_h2_recv() or nl_h2_flush().
 * They may submit, cancel and ping, but must not free the session; callers
 * queue completions and run user code after recv returns. */
#ifndef NL_CRI_GRPC_H
#define NL_CRI_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <protobuf-c/protobuf-c.h>

#include "reactor/error.h"
#include "reactor/h2.h"

/* gRPC status codes (grpc/codes). */
enum {
  NL_GRPC_OK = 0,
  NL_GRPC_CANCELLED = 1,
  NL_GRPC_UNKNOWN = 2,
  NL_GRPC_INVALID_ARGUMENT = 3,
  NL_GRPC_DEADLINE_EXCEEDED = 4,
  NL_GRPC_NOT_FOUND = 5,
  NL_GRPC_ALREADY_EXISTS = 6,
  NL_GRPC_PERMISSION_DENIED = 7,
  NL_GRPC_RESOURCE_EXHAUSTED = 8,
  NL_GRPC_FAILED_PRECONDITION = 9,
  NL_GRPC_ABORTED = 10,
  NL_GRPC_OUT_OF_RANGE = 11,
  NL_GRPC_UNIMPLEMENTED = 12,
  NL_GRPC_INTERNAL = 13,
  NL_GRPC_UNAVAILABLE = 14,
  NL_GRPC_DATA_LOSS = 15,
  NL_GRPC_UNAUTHENTICATED = 16,
};

/* The outcome of a call as the caller sees it. */
typedef struct nl_grpc_status {
  int code;            /* NL_GRPC_* */
  const char *message; /* percent-decoded grpc-message; never NULL ("" when none);
                        * borrowed, valid while the callback that got it runs */
} nl_grpc_status_t;

/* The code's name as grpc-go prints it ("Unknown", "DeadlineExceeded"), or NULL
 * for a code outside 0..16 (nl_grpc_status_format then prints "Code(N)"). */
const char *nl_grpc_code_name(int code);

/* "rpc error: code = <Name> desc = <message>" as upstream prints errors.
 * Returns an allocated string the caller frees; never NULL. */
char *nl_grpc_status_format(const nl_grpc_status_t *st);

/* For code OK returns 0 and leaves *err alone; otherwise sets *err (code = the
 * gRPC code, msg = nl_grpc_status_format()) and returns -1. */
int nl_grpc_status_to_err(const nl_grpc_status_t *st, nl_err_t **err);

/* Decodes %XX escapes of a grpc-message value in place of a fresh copy; invalid
 * escapes are kept verbatim, as grpc-go does. Returns an allocated string. */
char *nl_grpc_percent_decode(const char *s, size_t len);

/* ---- Counting allocator -------------------------------------------------- */

/* Handed to nghttp2 (nghttp2_mem) and protobuf-c (ProtobufCAllocator) so tests
 * can count allocations and fail the i-th one (nghttp2's failmalloc tests), and
 * benchmarks can read the bytes in use. Not thread-safe (one loop). */
typedef struct nl_grpc_mem {
  uint64_t nallocs;   /* allocations attempted so far */
  uint64_t fail_at;   /* when > 0, allocation number fail_at (1-based) fails */
  uint64_t nfailed;   /* allocations failed on purpose */
  size_t in_use;      /* bytes currently allocated through this allocator */
  size_t peak;
  nghttp2_mem nghttp2;
  ProtobufCAllocator protobuf;
} nl_grpc_mem_t;

void nl_grpc_mem_init(nl_grpc_mem_t *m);

/* ---- Streams --------------------------------------------------------------- */

#define NL_GRPC_DEFAULT_MAX_RECV (16 * 1024 * 1024) /* the kubelet's CRI client's */
#define NL_GRPC_WINDOW (32u * 1024 * 1024) /* receive window per stream and connection */

/* What the calls of one connection share; the caller's, borrowed by the
 * streams submitted with it until their session is freed. */
typedef struct nl_grpc_channel {
  const char *authority;    /* :authority; "localhost" when NULL */
  const char *user_agent;   /* NULL: "nanolet/<version> grpc-c/nghttp2" */
  size_t max_recv_msg_size; /* 0: NL_GRPC_DEFAULT_MAX_RECV */
} nl_grpc_channel_t;

typedef struct nl_grpc_stream nl_grpc_stream_t;

/* Called for each complete response message (5-byte prefix removed). data is
 * borrowed until the callback returns. */
typedef void (*nl_grpc_message_cb)(nl_grpc_stream_t *st, const uint8_t *data, size_t len);
/* Called exactly once per submitted stream, when it ends for any reason other
 * than nl_grpc_stream_cancel() or the session being freed without
 * nl_grpc_fail_streams(). After it the engine no longer touches st. `refused`
 * is true when the server never processed the stream (REFUSED_STREAM, or above
 * a GOAWAY's last stream id): safe to retry. */
typedef void (*nl_grpc_close_cb)(nl_grpc_stream_t *st, const nl_grpc_status_t *status,
                                 bool refused);

/* Embedded by the caller in its call struct. The caller sets on_message,
 * on_close and user; the rest is the engine's. Must stay at the same address
 * from nl_grpc_submit() until on_close, cancel, or the session's end. */
struct nl_grpc_stream {
  nl_grpc_message_cb on_message;
  nl_grpc_close_cb on_close;
  void *user;
  /* engine-private */
  nl_h2_stream_t h2;  /* the HTTP/2 stream (reactor/h2.h); open while h2.session is set */
  const nl_grpc_channel_t *channel; /* the one it was last submitted with */
  uint8_t *rx;        /* message being reassembled across DATA frames */
  uint32_t rx_len, rx_off;
  uint8_t hdr[5];
  uint8_t hdr_len;
  int16_t http_status;
  int16_t grpc_status; /* -1 until trailers (or Trailers-Only headers) */
  char *grpc_message;
  int local_code;      /* set when the engine fails the stream itself */
  char *local_message;
  char timeout[16];    /* grpc-timeout header value */
};

/* Starts a call on h2: POST path with the framed request (nl_grpc_frame_size()
 * bytes, written by nl_grpc_frame()), borrowed until the stream ends.
 * timeout_ms > 0 adds a grpc-timeout header (the caller still runs its own
 * deadline timer). Returns 0, NL_H2_EBUSY when the peer's
 * SETTINGS_MAX_CONCURRENT_STREAMS is reached or the session takes no new
 * streams (retry when a stream closes, or on a new session), or a negative
 * nghttp2 error; no callback follows a failure. */
int nl_grpc_submit(nl_h2_t *h2, const nl_grpc_channel_t *ch, nl_grpc_stream_t *st,
                   const char *path, const uint8_t *framed, size_t framed_len,
                   uint64_t timeout_ms);
/* Abandons a stream (deadline, caller gone): RST_STREAM(CANCEL) is queued and the
 * engine forgets st at once (no on_close). */
void nl_grpc_stream_cancel(nl_grpc_stream_t *st);
/* Ends every stream still open on h2 (its connection is lost, before the
 * session is freed): each gets on_close with UNAVAILABLE and `reason` as
 * message (e.g. "error reading from server: EOF"), refused only when its
 * HEADERS never left the engine (otherwise the server may have run it: a
 * RunPodSandbox must not run twice). */
void nl_grpc_fail_streams(nl_h2_t *h2, const char *reason);

/* Length-prefixed message framing: nl_grpc_frame_size(msg) bytes; nl_grpc_frame
 * packs msg after the 5-byte prefix into buf. */
size_t nl_grpc_frame_size(const ProtobufCMessage *msg);
void nl_grpc_frame(const ProtobufCMessage *msg, uint8_t *buf);

#endif
