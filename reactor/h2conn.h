/* The one HTTP/2 connection driver: what a connection does around the engine
 * (reactor/h2.h), the same for the CRI client, the API client, the grpc probe
 * and the gRPC server's accepted connections (nl_h2conn_adopt()). It dials
 * through reactor/dial.h (a unix socket or TCP, TLS with ALPN or not), creates the session with the owner's options,
 * feeds it what the socket reads, writes what it produces, keeps the
 * connection alive with PINGs, drains it after GOAWAY, closes it when idle,
 * reconnects with back-off, and closes every handle it has. The owner adds
 * only its protocol: it submits its streams on c->h2 (the engine's session,
 * set while the connection is up) and hears of the connection through one
 * small callback table.
 *
 * Serving: nl_h2conn_adopt() takes a socket a listener accepted and serves
 * it with a server session: the peer's streams come to the owner through
 * cbs->stream, the client's preface and SETTINGS must come within
 * opts.handshake_ms (then opts.idle_ms runs while no stream is open), a peer
 * that does not read what it asked for stops being read (opts.write_high),
 * and nl_h2conn_goaway() parts in good order. The owner keeps its protocol
 * and its own limits (the gRPC server, cri/grpc_server.h).
 *
 * Writing: what the engine produces leaves in ONE write per loop turn: at the
 * end of the read callback that produced it, or from an idle handle (which
 * runs after timers and before the loop computes its poll timeout) for output
 * produced elsewhere; nl_h2conn_flush() asks for it. Plaintext goes out with
 * send(MSG_NOSIGNAL) while the socket takes it and uv_write for the rest; a
 * served connection only ever uses send(MSG_NOSIGNAL), again when its poll
 * handle says the socket has room (uv_write's writev raises SIGPIPE in a
 * process that does not ignore it). A write failing with EPIPE or
 * ECONNRESET stops the writing and lets the read side end the connection
 * (the peer's last answers and EOF are read first). TLS goes through the
 * dialer's stream (reactor/io.h).
 *
 * The life of one connection is one state machine (nl_h2conn_state_t, every
 * transition in enter() in h2conn.c):
 *
 *   IDLE -start-> DIALING -> READY -> DRAINING (GOAWAY, nl_h2conn_drain)
 *    |               |         ^ |        |
 *    +----adopt----------------+ |        |
 *                    +---------+----------+-> CLOSING (lost: the dialed
 *                                                 |    or served socket closes)
 *               BACKOFF <- (reconnect) -----------+-> IDLE (no reconnect)
 *                  |
 *                  +-> DIALING ...
 *   any -nl_h2conn_close()-> STOPPING -> STOPPED (cbs->closed)
 *
 * Errors the owner hears are worded as the Go code the owner stands for
 * (opts.words): grpc-go's transport ("error reading from server: EOF",
 * "keepalive ping failed to receive ACK within timeout") or Go's net/http2
 * ("unexpected EOF", "http2: client connection lost", "write tcp ..."); a
 * served connection's in plain words for the server's log.
 *
 * Handles: the dialer's (a served connection: a poll handle on its socket),
 * three timers and an idle handle, embedded here;
 * nl_h2conn_close() closes them and cbs->closed runs from the last close
 * callback, after which the owner may free the memory. */
#ifndef NL_REACTOR_H2CONN_H
#define NL_REACTOR_H2CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "reactor/backoff.h"
#include "reactor/buf.h"
#include "reactor/dial.h"
#include "reactor/error.h"
#include "reactor/h2.h"

typedef struct nl_h2conn nl_h2conn_t;

typedef enum nl_h2conn_state {
  NL_H2CONN_IDLE,     /* nothing dialed: before nl_h2conn_start(), or lost without reconnect */
  NL_H2CONN_DIALING,  /* lookup, connect, TLS handshake */
  NL_H2CONN_READY,    /* c->h2 takes streams */
  NL_H2CONN_DRAINING, /* GOAWAY (the peer's, or nl_h2conn_drain()): open streams finish,
                       * no new ones; lost (drained) when the last ends */
  NL_H2CONN_CLOSING,  /* lost: the dialed connection is closing; then BACKOFF or IDLE */
  NL_H2CONN_BACKOFF,  /* waiting to dial again (opts.reconnect) */
  NL_H2CONN_STOPPING, /* nl_h2conn_close(): the handles are closing */
  NL_H2CONN_STOPPED,  /* cbs->closed has run */
} nl_h2conn_state_t;

/* Whose words a lost connection is told in. */
typedef enum nl_h2conn_words {
  NL_H2CONN_WORDS_HTTP2, /* Go's net/http2 transport (the API client) */
  NL_H2CONN_WORDS_GRPC,  /* grpc-go's transport (the CRI client, the grpc probe) */
  NL_H2CONN_WORDS_SERVER, /* a served connection: what happened, for the server's log */
} nl_h2conn_words_t;

typedef struct nl_h2conn_opts {
  /* Where to dial (reactor/dial.h); io_cbs and raw are the driver's. The
   * strings and the TLS configuration are copied by each dial: they must stay
   * valid while the driver may dial (until closed, with reconnect). */
  nl_dial_opts_t dial;
  /* The session (reactor/h2.h): window, allocator, flow control. */
  nl_h2_opts_t h2;
  nl_h2conn_words_t words;
  /* PING after this long without a received frame; 0: never. */
  uint64_t ping_after_ms;
  /* With ping_after_ms: the connection is lost when the ACK has not come
   * this long after the PING. */
  uint64_t ping_timeout_ms;
  /* Ping only while streams are open (grpc-go servers count PINGs on an idle
   * connection as abuse). */
  bool ping_only_active;
  /* The peer's PINGs are acknowledged this long after the first one, one ACK
   * for all that came meanwhile; 0: at once. */
  uint64_t ping_ack_delay_ms;
  /* READY with no stream this long: cbs->idle (the owner may close); 0: never. */
  uint64_t idle_ms;
  /* Lost connections are dialed again by the driver: at once after a ready
   * one, after the back-off (backoff_initial_ms doubling to backoff_max_ms,
   * jitter 0.2) after a failed dial; reset by a ready connection. Otherwise
   * the driver rests in IDLE and the owner decides. */
  bool reconnect;
  uint64_t backoff_initial_ms, backoff_max_ms;
  /* Read buffer for plaintext; 0: 16 KiB. */
  size_t read_buf;
  /* A read buffer of read_buf bytes (non-zero) the owner shares between its
   * connections (one loop: a read's bytes are in the engine before the next
   * read), and frees after the last closed; NULL: each has its own. */
  uint8_t *read_buf_shared;
  /* Served connections: the client's preface and SETTINGS within this long
   * after nl_h2conn_adopt(); dialed ones: the server's SETTINGS within this
   * long after the socket connects (grpc-go's server handshake). Else the
   * connection is lost (and dialed again when reconnect is set); 0: no limit.
   * The idle timer runs from then on. A dialed connection is READY, and its
   * owner submits, before the SETTINGS come: this only bounds the wait. */
  uint64_t handshake_ms;
  /* Output handed to the socket but not yet taken by it, above which the
   * engine's output stays in the engine and the peer is not read until the
   * socket takes it: a peer that does not read stops being served. 0: no
   * bound (a client's own requests). */
  size_t write_high;
} nl_h2conn_opts_t;

/* What the owner hears; runs from the loop, never from inside the call that
 * caused it unless said. Each may call nl_h2conn_close(). */
typedef struct nl_h2conn_cbs {
  /* Connected. h2: c->h2 is the session, READY (its preface and SETTINGS are
   * on their way). !h2: TLS agreed on no h2 by ALPN: c->dial.io is the
   * owner's to use (HTTP/1.1) or to close with nl_h2conn_close(). Required
   * for a connection that dials. */
  void (*ready)(nl_h2conn_t *c, bool h2);
  /* The session moved: it read bytes from the peer (after the engine took
   * them; output the owner causes leaves with the replies), or its output
   * left (a RST_STREAM sent frees a stream's slot). The owner's streams may
   * have ended, so it submits what waits. May be NULL. */
  void (*moved)(nl_h2conn_t *c);
  /* The peer sent GOAWAY (c->goaway_code, c->goaway_last): now DRAINING.
   * From inside the engine: record, do not close. May be NULL. */
  void (*goaway)(nl_h2conn_t *c);
  /* The dial failed (!c->connected: err is the dialer's, Go's net.Dial
   * words), or the connection was lost (err in opts.words; NULL for a drained
   * one in HTTP/2 words). c->h2 is still set when there was a session: the
   * owner ends its open streams (those never sent may go again elsewhere);
   * the driver frees the session after this returns. Required. */
  void (*lost)(nl_h2conn_t *c, const nl_err_t *err);
  /* READY with no stream for opts.idle_ms. May be NULL. */
  void (*idle)(nl_h2conn_t *c);
  /* Runs from the idle handle of the loop turn after nl_h2conn_defer(),
   * before the output is written: the owner's deferred work (deliveries).
   * May be NULL. */
  void (*turn)(nl_h2conn_t *c);
  /* After nl_h2conn_close(): every handle is closed; the owner may free c.
   * Required. */
  void (*closed)(nl_h2conn_t *c);
  /* A served connection: the peer opens a stream; the owner returns its own
   * (reactor/h2.h's nl_h2_cbs_t.on_stream), or NULL to refuse it. From inside
   * the engine. Required for nl_h2conn_adopt(). */
  nl_h2_stream_t *(*stream)(nl_h2conn_t *c);
} nl_h2conn_cbs_t;

struct nl_h2conn {
  nl_h2_t *h2;            /* the session while READY or DRAINING, else NULL */
  nl_dial_t dial;         /* the connection (dial.peer names it, as Go prints it) */
  void *data;             /* the owner's */
  nl_h2conn_state_t state;
  bool connected;         /* the current (or last) dial reached READY */
  bool server;            /* adopted: a server session */
  bool handshaking;       /* the peer's SETTINGS (and a client's preface) not yet in */
  uint32_t goaway_code;   /* the peer's GOAWAY, when DRAINING because of it */
  int32_t goaway_last;
  /* private */
  uv_loop_t *loop;
  nl_h2conn_opts_t opts;
  const nl_h2conn_cbs_t *cbs;
  uv_timer_t ka_timer;    /* keepalive PING, its ACK's timeout, or the back-off */
  uv_timer_t ack_timer;   /* the deferred ACK of the peer's PINGs */
  uv_timer_t idle_timer;  /* opts.idle_ms */
  uv_idle_t turn;         /* writes the output (and runs cbs->turn) once per turn */
  nl_backoff_t backoff;
  uint8_t *rbuf;          /* plaintext read buffer, owned */
  uv_poll_t poll;         /* a served connection's socket (fd, ours) */
  int fd;
  int poll_events;        /* what poll waits for */
  struct nl_h2conn_wbuf {
    uv_write_t req;
    nl_buf_t pending;     /* the engine's output not yet handed to the socket */
    nl_buf_t inflight;    /* what uv_write holds */
    bool busy;
    bool dead;            /* the peer hung up (EPIPE): wait for its EOF */
  } w;
  int live;               /* handles (and the dialer) to come back when stopping */
  bool sock_open;         /* the dialer's handles, or the served socket's poll
                             handle, are open (closing included) */
  bool goaway;            /* DRAINING because the peer said so */
  bool rx;                /* frames arrived since the last keepalive tick */
  bool ping_outstanding;
  bool flush_wanted;      /* output waits for the end of the read or the idle handle */
  bool turn_wanted;       /* cbs->turn waits for the idle handle */
  bool in_read;           /* inside the read callback: it writes on its way out */
  bool in_recv;           /* inside nl_h2_recv: the session is freed after it */
  bool wrote;             /* the engine produced output in this flush */
  bool stalled;           /* opts.write_high reached: not read, the engine not drained */
};

/* Initializes c (embedded by the owner; found again with container_of) and
 * its handles, in IDLE. opts is copied (see nl_h2conn_opts_t.dial for what
 * must outlive it); cbs is borrowed. */
void nl_h2conn_init(nl_h2conn_t *c, uv_loop_t *loop, const nl_h2conn_opts_t *opts,
                    const nl_h2conn_cbs_t *cbs);
/* Dials (from IDLE); cbs->ready or cbs->lost follows, never from inside. */
void nl_h2conn_start(nl_h2conn_t *c);
/* Serves fd, a socket accepted from a listener (from IDLE): the driver owns
 * fd from now on, creates a server session with opts.h2 (its SETTINGS queued)
 * and enters READY; no cbs->ready follows. peer names the connection in the
 * log (the listener's path). Returns 0, or -1 with *err (fd could not be
 * served; it is closed): the owner then closes c as after a loss. */
int nl_h2conn_adopt(nl_h2conn_t *c, int fd, const char *peer, nl_err_t **err);
/* Closes everything from any state: the session is freed without telling
 * its streams (the owner has ended them), no other callback than cbs->closed
 * follows, from the last close callback. A no-op when already closing. */
void nl_h2conn_close(nl_h2conn_t *c);

/* Asks for the session's output to be written before the loop next blocks
 * (see Writing above). A no-op without a session. */
void nl_h2conn_flush(nl_h2conn_t *c);
/* Asks for cbs->turn from this loop turn's idle handle. */
void nl_h2conn_defer(nl_h2conn_t *c);
/* Takes no new streams (READY -> DRAINING): open ones finish, then the
 * connection is lost as drained; at once when none is open (cbs->lost then
 * runs from inside). */
void nl_h2conn_drain(nl_h2conn_t *c);

/* A server's goodbye: GOAWAY(NO_ERROR) naming the last stream the peer
 * opened, then as nl_h2conn_drain(); a connection drained is lost after one
 * last try to write what the engine has (the GOAWAY). */
void nl_h2conn_goaway(nl_h2conn_t *c);

/* READY: the session takes new streams (up to the peer's limit). */
bool nl_h2conn_ready(const nl_h2conn_t *c);

#endif
