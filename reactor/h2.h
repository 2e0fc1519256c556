/* An HTTP/2 session engine on nghttp2, client or server, that does no I/O, as
 * nghttp2 itself: bytes read from the peer go in with nl_h2_recv(), bytes to send come
 * out through the write callback of nl_h2_flush(). It owns what every HTTP/2
 * client of the agent needs the same way: session set-up (preface, SETTINGS
 * without push, the receive windows, the allocator hook), PING and its
 * acknowledgement (at once, or deferred by the owner), GOAWAY, stream reset,
 * the peer's concurrent-stream limit, and per-stream back-pressure.
 *
 * What a stream means is its owner's: the CRI's gRPC calls (cri/grpc.c) and
 * the API client's requests and watches (agent/kube/h2.c) each embed an
 * nl_h2_stream_t in their own stream and read the response's header fields
 * and body pieces from its callbacks. The engine knows no gRPC and no
 * Kubernetes.
 *
 * The same engine serves (nl_h2_server_new(), below): the peer opens streams,
 * the owner attaches its own to each (cbs.on_stream), reads the request
 * through the same stream callbacks and answers with nl_h2_respond() and
 * friends. "One engine for both directions, no second one."
 *
 * Re-entrancy: stream and session callbacks run inside nl_h2_recv() or
 * nl_h2_flush(). They may submit, reset, cancel and ping, but must not free
 * the session. */
#ifndef NL_REACTOR_H2_H
#define NL_REACTOR_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "reactor/buf.h"
#include "reactor/list.h"

typedef struct nl_h2 nl_h2_t;
typedef struct nl_h2_stream nl_h2_stream_t;

/* What a stream's owner hears; one const table per kind of stream. */
typedef struct nl_h2_stream_cbs {
  /* A header field of a response HEADERS frame (a 1xx head, the final head
   * or trailers). Borrowed until the callback returns. May be NULL. */
  void (*on_header)(nl_h2_stream_t *st, const uint8_t *name, size_t namelen,
                    const uint8_t *value, size_t valuelen);
  /* A whole HEADERS frame has been received (after its on_header calls);
   * st->complete is set when it ended the stream. May be NULL. */
  void (*on_headers)(nl_h2_stream_t *st);
  /* A piece of the response body; borrowed until the callback returns. With
   * per-stream flow control (nl_h2_opts_t.stream_flow_control) the piece
   * counts against the stream's window until nl_h2_stream_consume(). */
  void (*on_data)(nl_h2_stream_t *st, const uint8_t *data, size_t len);
  /* The stream ended. st->complete when the response's END_STREAM arrived,
   * else error_code is the RST_STREAM code (NGHTTP2_NO_ERROR too, for a peer
   * that resets a response it did not finish). refused: the peer never
   * processed the request (REFUSED_STREAM before any response, which is also
   * how nghttp2 closes streams above a GOAWAY's last stream id): it may be
   * sent again. Called once per submitted stream unless the owner cancelled
   * or detached it; the engine has already forgotten st. Required. */
  void (*on_close)(nl_h2_stream_t *st, uint32_t error_code, bool refused);
  /* Server streams: the request ended (its END_STREAM arrived, after the last
   * on_headers or on_data); st->complete is set. May be NULL. */
  void (*on_end)(nl_h2_stream_t *st);
} nl_h2_stream_cbs_t;

/* Embedded by the owner in its own stream struct (found again with
 * container_of). The owner sets cbs; the rest is the engine's and stays
 * valid after the stream ends until the owner submits it again. Must stay at
 * the same address while the stream is open. */
struct nl_h2_stream {
  const nl_h2_stream_cbs_t *cbs;
  /* Set by the owner before submitting, on a session with head_only_streams:
   * the response's head is all the owner wants (a write whose answer would
   * only echo what was sent). The stream's receive window stays closed, so
   * the peer cannot send the body; after the final head the engine resets
   * the stream (CANCEL) and closes it as complete, unless the owner called
   * nl_h2_stream_want_body() from on_headers (an error's body, say). */
  bool head_only;
  /* engine-private from here (read-only for owners) */
  nl_h2_t *session;    /* NULL when not open */
  nl_list_t link;      /* in the session's open streams */
  const uint8_t *body; /* request body, borrowed until the stream ends */
  size_t body_len, body_off;
  size_t held;         /* received bytes not yet given back to the window */
  int32_t id;
  bool got_response;   /* any frame of the response seen (a refused one saw none) */
  bool final_head;     /* a final (not 1xx) head arrived */
  bool want_body;      /* head_only, and nl_h2_stream_want_body() was called */
  bool sent;           /* our HEADERS left the engine: the peer may act on it */
  bool complete;       /* the response's END_STREAM arrived (server: the request's) */
  /* server streams */
  nl_buf_t out;        /* response body queued by nl_h2_respond_data(), not yet framed */
  nghttp2_nv *trailers; /* copied by nl_h2_respond_end(), sent after out */
  size_t ntrailers;
  size_t head_bytes;   /* the header block being received, as SETTINGS_MAX_HEADER_LIST_SIZE counts */
  bool responded;      /* nl_h2_respond() was called */
  bool out_end;        /* nl_h2_respond_end() was called: out is all the body */
  bool deferred;       /* the body's provider waits for more (nghttp2_session_resume_data) */
  bool out_done;       /* our END_STREAM left the engine */
};

typedef struct nl_h2_opts {
  /* Receive window per stream (SETTINGS_INITIAL_WINDOW_SIZE) and for the
   * connection; 0: 16 MiB. */
  uint32_t window;
  /* Handed to nghttp2 for all its allocations (tests count and fail them);
   * NULL: malloc. Must outlive the session. */
  nghttp2_mem *mem;
  /* false: received DATA is given back to the windows as it arrives (nghttp2
   * sends WINDOW_UPDATEs by itself). true: the connection window is given
   * back on receipt, a stream's only by nl_h2_stream_consume(), so a reader
   * that stops consuming stops that stream's sender alone. */
  bool stream_flow_control;
  /* true: each stream's receive window opens on its own, once its HEADERS
   * have left (SETTINGS_INITIAL_WINDOW_SIZE 0, then a WINDOW_UPDATE of
   * `window` in the same flush), which is what lets head_only streams keep
   * theirs closed. */
  bool head_only_streams;
  /* Server sessions: SETTINGS_MAX_CONCURRENT_STREAMS (0: 32; nghttp2 refuses
   * the streams above it), and SETTINGS_MAX_HEADER_LIST_SIZE (0: 64 KiB; a
   * request or trailer block above it is reset, RST_STREAM(INTERNAL_ERROR),
   * without its owner hearing more of it). */
  uint32_t max_streams;
  size_t max_header_list;
} nl_h2_opts_t;

typedef struct nl_h2_cbs {
  /* Bytes for the peer; copy them. Return 0, or negative to fail the flush
   * (the session is then unusable). Required. */
  int (*write)(void *user, const uint8_t *data, size_t len);
  /* A PING we sent was acknowledged. May be NULL. */
  void (*ping_ack)(void *user);
  /* The peer sent GOAWAY: the session takes no new stream; those above
   * last_stream_id close as refused. May be NULL. */
  void (*goaway)(void *user, uint32_t error_code, int32_t last_stream_id);
  /* The peer sent a PING: the owner acknowledges it with nl_h2_ack_pings(),
   * now or a little later (a runtime that probes after every call gets one
   * ACK for many). NULL: every PING is acknowledged at once. */
  void (*ping)(void *user);
  /* Server sessions: the peer opens a stream (its request's HEADERS begin).
   * Return the owner's stream, cbs set, which the engine attaches (session,
   * id); its callbacks then tell the request and its end, and on_close
   * follows as for a submitted stream. NULL refuses the stream
   * (RST_STREAM(REFUSED_STREAM)). Required for a server. */
  nl_h2_stream_t *(*on_stream)(void *user);
} nl_h2_cbs_t;

/* Creates a client session and queues the preface and SETTINGS (flush to
 * send). opts may be NULL. Returns NULL only when the allocator fails. */
nl_h2_t *nl_h2_new(const nl_h2_opts_t *opts, const nl_h2_cbs_t *cbs, void *user);
/* Frees the session. Streams still open are forgotten without a callback: an
 * owner that must tell its streams goes through nl_h2_first_stream() first. */
void nl_h2_free(nl_h2_t *s);

/* Feeds bytes read from the peer. Returns 0, or a negative nghttp2 error when
 * the connection is broken (protocol error, allocation failure): the owner
 * drops it. Stream callbacks run from inside. */
int nl_h2_recv(nl_h2_t *s, const uint8_t *data, size_t len);
/* Drains all pending output through cbs->write. Returns 0 or negative as recv. */
int nl_h2_flush(nl_h2_t *s);

/* Starts a request with the header block nva (the owner's flags say which
 * names and values nghttp2 need not copy). body NULL: no DATA, the HEADERS
 * end the stream; else body (borrowed until the stream ends) is sent as DATA.
 * Returns 0, NL_H2_EBUSY when the session takes no new stream now (GOAWAY,
 * broken, or the peer's concurrent-stream limit: retry when a stream closes,
 * or on a new session), or a negative nghttp2 error. No callback follows a
 * failure. */
int nl_h2_submit(nl_h2_t *s, nl_h2_stream_t *st, const nghttp2_nv *nva, size_t nnv,
                 const void *body, size_t body_len);
#define NL_H2_EBUSY (-100000)

/* Resets the stream with error_code (RST_STREAM queued); the stream stays
 * the owner's and on_close follows when nghttp2 closes it. */
void nl_h2_stream_reset(nl_h2_stream_t *st, uint32_t error_code);
/* Abandons a stream: RST_STREAM(CANCEL) is queued and the engine forgets st
 * at once (no on_close). A no-op for a stream that is not open. */
void nl_h2_stream_cancel(nl_h2_stream_t *st);
/* Forgets st without telling the peer (the session is going away). */
void nl_h2_stream_detach(nl_h2_stream_t *st);
/* From on_headers of a head_only stream: the body is wanted after all; its
 * window opens (a WINDOW_UPDATE on the next flush) and the stream goes on as
 * any other. Returns 0 or a negative nghttp2 error. */
int nl_h2_stream_want_body(nl_h2_stream_t *st);
/* With stream_flow_control: gives n received bytes of st back to its window
 * (a WINDOW_UPDATE follows on the next flush when enough is due). Returns 0
 * or a negative nghttp2 error. */
int nl_h2_stream_consume(nl_h2_stream_t *st, size_t n);

/* Queues a PING; cbs->ping_ack follows. Returns 0 or negative. */
int nl_h2_ping(nl_h2_t *s);
/* Queues the ACKs of the peer's PINGs held for cbs->ping. Returns 0 or a
 * negative nghttp2 error. */
int nl_h2_ack_pings(nl_h2_t *s);
/* Queues GOAWAY(error_code) with the last stream the peer opened; the session
 * takes no new stream. Returns 0 or negative. */
int nl_h2_goaway(nl_h2_t *s, uint32_t error_code);

/* The oldest open stream with an owner, or NULL. */
nl_h2_stream_t *nl_h2_first_stream(const nl_h2_t *s);
/* Streams open with an owner attached. */
size_t nl_h2_active(const nl_h2_t *s);
/* The peer's SETTINGS_MAX_CONCURRENT_STREAMS (100 until its SETTINGS come). */
uint32_t nl_h2_max_streams(const nl_h2_t *s);
/* New streams the session takes now: 0 after GOAWAY or when broken; streams
 * cancelled but not yet closed count as taken, as in Go's transport. */
size_t nl_h2_free_streams(const nl_h2_t *s);
/* True while the session has output to write or input to read. */
bool nl_h2_want_io(const nl_h2_t *s);

/* ---- Server side ------------------------------------------------------------ */

/* Creates a server session and queues its SETTINGS (flush to send); the
 * client's preface is checked by nghttp2 as it arrives. cbs->on_stream is
 * required; PINGs, GOAWAY, resets and the allocator hook as for a client.
 * opts may be NULL. Returns NULL only when the allocator fails. */
nl_h2_t *nl_h2_server_new(const nl_h2_opts_t *opts, const nl_h2_cbs_t *cbs, void *user);
/* True once the peer's first SETTINGS arrived (a client's after its preface):
 * a peer that connected and said nothing has not. */
bool nl_h2_peer_settled(const nl_h2_t *s);

/* Answers the request on server stream st with the header block nva (":status"
 * first; names and values copied unless flagged otherwise). end: the HEADERS
 * end the stream (a bodyless answer, or gRPC's Trailers-Only). Else a body
 * follows: nl_h2_respond_data() any number of times, now or later (the stream
 * stays open: a server-streaming answer), and nl_h2_respond_end() once. When
 * our END_STREAM leaves before the request's, the engine resets the stream
 * with NO_ERROR (RFC 9113 8.1: the peer need send no more). Returns 0, or a
 * negative nghttp2 error (NGHTTP2_ERR_INVALID_STATE: not an open server
 * stream, or answered already). */
int nl_h2_respond(nl_h2_stream_t *st, const nghttp2_nv *nva, size_t nnv, bool end);
/* Queues len bytes of body (copied) after what is queued; a provider that was
 * waiting for more is resumed. Returns 0, or NGHTTP2_ERR_INVALID_STATE (not
 * responding with a body, or ended). */
int nl_h2_respond_data(nl_h2_stream_t *st, const void *data, size_t len);
/* Ends the body after what is queued, with the trailer block (copied) when
 * ntr > 0. Returns 0 or NGHTTP2_ERR_INVALID_STATE as above. */
int nl_h2_respond_end(nl_h2_stream_t *st, const nghttp2_nv *trailers, size_t ntr);
/* Body bytes queued and not yet framed (the peer's window, or the owner's
 * flush, holds them): a producer of a stream stops above its own mark. */
size_t nl_h2_respond_queued(const nl_h2_stream_t *st);

#endif
