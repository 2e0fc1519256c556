/* The API client's requests over the HTTP/2 engine (reactor/h2.h), doing no
 * I/O, as cri/grpc.h does for gRPC: bytes read from the server go in with
 * nl_kube_h2_recv(), bytes to send come out through the write callback of
 * nl_kube_h2_flush(). Each request is a stream (nl_kube_h2_stream_t) the
 * caller embeds in its request struct. Responses are plain HTTP: a status, a
 * few headers, a body in pieces. Session set-up, windows, PINGs, GOAWAY and
 * resets are the engine's; this file adds the request's header block and
 * reads the response's head.
 *
 * Re-entrancy: stream callbacks run inside nl_kube_h2_recv(). They may submit
 * and cancel streams but must not free the session. */
#ifndef NL_KUBE_H2_H
#define NL_KUBE_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reactor/h2.h"

/* The session is the engine's: nl_h2_recv(), nl_h2_flush(), nl_h2_ping(),
 * nl_h2_active(), nl_h2_max_streams() and nl_h2_free_streams() work on it. */
typedef nl_h2_t nl_kube_h2_t;
typedef struct nl_kube_h2_stream nl_kube_h2_stream_t;

/* The head of the response arrived (st->status, content_type, retry_after). */
typedef void (*nl_kube_h2_head_cb)(nl_kube_h2_stream_t *st);
/* A piece of the body; borrowed until the callback returns. */
typedef void (*nl_kube_h2_data_cb)(nl_kube_h2_stream_t *st, const uint8_t *p, size_t n);
/* The stream ended: st->complete when the whole response arrived (its
 * END_STREAM), else error_code is the RST_STREAM code, which may be
 * NGHTTP2_NO_ERROR too (a server that resets a response it did not finish).
 * refused: the server never processed the request
 * (REFUSED_STREAM, or above a GOAWAY's last stream id), so it may be sent
 * again. Called once per submitted stream unless it was cancelled; the engine
 * no longer touches st afterwards. */
typedef void (*nl_kube_h2_close_cb)(nl_kube_h2_stream_t *st, uint32_t error_code, bool refused);

/* Embedded by the caller. The caller sets the callbacks, and h2.head_only
 * for a request whose 2xx answer's body it does not want (reactor/h2.h; the
 * body of any other status is let in); the rest is the engine's and valid
 * while the stream is open. */
struct nl_kube_h2_stream {
  nl_kube_h2_head_cb on_head;
  nl_kube_h2_data_cb on_data;
  nl_kube_h2_close_cb on_close;
  /* engine-private from here */
  nl_h2_stream_t h2;   /* the HTTP/2 stream: its session (NULL when not open),
                        * id, whether it was sent */
  int status;          /* :status, 0 until the head */
  char *content_type;  /* owned, NULL when none */
  char *retry_after;   /* owned, NULL when none */
  bool head_done;      /* the final head arrived; later HEADERS are trailers */
  bool complete;       /* the response's END_STREAM arrived */
};

typedef struct nl_kube_h2_header {
  const char *name, *value; /* lower-case names */
} nl_kube_h2_header_t;

/* The session's options (nl_h2_new(), or the connection driver's
 * reactor/h2conn.h): window is the receive window per stream and for the
 * connection; head-only streams. The server's PINGs are acknowledged at once
 * (no cbs.ping). */
nl_h2_opts_t nl_kube_h2_opts(uint32_t window);
/* Forgets the streams still open on s without a callback (the caller has
 * failed them, retrying those not sent), before the session is freed. */
void nl_kube_h2_forget(nl_kube_h2_t *s);

/* Starts a request. body (may be NULL) is borrowed until the stream ends.
 * Returns 0, NL_KUBE_H2_EBUSY when the session takes no new stream now
 * (GOAWAY, or the server's concurrent-stream limit), or a negative nghttp2
 * error. No callback follows a failure. */
int nl_kube_h2_submit(nl_kube_h2_t *s, nl_kube_h2_stream_t *st, const char *method,
                      const char *path, const char *authority,
                      const nl_kube_h2_header_t *hdrs, size_t n_hdrs, const void *body,
                      size_t body_len);
#define NL_KUBE_H2_EBUSY NL_H2_EBUSY
/* Abandons a stream: RST_STREAM(CANCEL) is queued, no callback follows. */
void nl_kube_h2_cancel(nl_kube_h2_stream_t *st);

#endif
