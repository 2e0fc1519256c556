#include "reactor/h2conn.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "reactor/grid.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* Every page of the read buffer that a read fills stays resident; the CRI
 * relist's answers (tens of KiB every second) take a few reads of this one (a
 * syscall costs about a microsecond). */
#define RBUF_SIZE (16 * 1024)
#define WBUF_KEEP 4096 /* a write buffer grown larger by a burst is freed once written */

static void enter(nl_h2conn_t *c, nl_h2conn_state_t to);
static void flush_now(nl_h2conn_t *c);

static bool up(const nl_h2conn_t *c) {
  return c->state == NL_H2CONN_READY || c->state == NL_H2CONN_DRAINING;
}

bool nl_h2conn_ready(const nl_h2conn_t *c) { return c->state == NL_H2CONN_READY; }

/* ---- How a lost connection is told -------------------------------------- */

typedef enum why {
  WHY_EOF,      /* the peer closed */
  WHY_READ,     /* reading failed (detail: the io's error) */
  WHY_WRITE,    /* writing failed (detail) */
  WHY_ENGINE,   /* the engine failed (rc) */
  WHY_PROTOCOL, /* the engine gave up on the session (it sent GOAWAY, reads no more) */
  WHY_PING,     /* no PING ACK in time */
  WHY_DRAINED,  /* GOAWAY, and the last stream ended */
  WHY_NOMEM,    /* no session */
  WHY_HANDSHAKE, /* no preface (served) or SETTINGS from the peer in time */
} why_t;

/* The detail of an io error without its "read: "/"write: " prefix. */
static const char *detail_of(const nl_err_t *e) {
  const char *colon = strchr(e->msg, ':');
  if ((!strncmp(e->msg, "read: ", 6) || !strncmp(e->msg, "write: ", 7)) && colon) return colon + 2;
  return e->msg;
}

/* A served connection's end, for the server's log. */
static nl_err_t *served_error(why_t why, const nl_err_t *detail, int rc) {
  switch (why) {
  case WHY_EOF: return nl_err_newf(ECONNRESET, "the client closed the connection");
  case WHY_READ:
  case WHY_WRITE: return nl_err_newf(detail->code, "%s", detail->msg);
  case WHY_ENGINE: return nl_err_newf(EPROTO, "%s", nghttp2_strerror(rc));
  case WHY_PROTOCOL: return nl_err_newf(EPROTO, "the session ended");
  case WHY_PING: return nl_err_newf(ETIMEDOUT, "no PING ACK in time");
  case WHY_DRAINED: return NULL;
  case WHY_NOMEM: return nl_err_newf(ENOMEM, "out of memory");
  case WHY_HANDSHAKE:
    return nl_err_newf(NL_ETIMEOUT, "no HTTP/2 preface and SETTINGS within the handshake timeout");
  }
  return NULL;
}

/* The error for a lost connection in the owner's words; detail is the io's
 * error (borrowed, may be NULL), rc the engine's. */
static nl_err_t *lost_error(const nl_h2conn_t *c, why_t why, const nl_err_t *detail, int rc) {
  if (c->opts.words == NL_H2CONN_WORDS_SERVER) return served_error(why, detail, rc);
  bool grpc = c->opts.words == NL_H2CONN_WORDS_GRPC;
  switch (why) {
  case WHY_EOF:
    if (grpc) return nl_err_newf(ECONNRESET, "error reading from server: EOF");
    if (c->goaway)
      return nl_err_newf(ECONNRESET,
                         "http2: server sent GOAWAY and closed the connection; LastStreamID=%d, "
                         "ErrCode=%s, debug=\"\"",
                         c->goaway_last, nghttp2_http2_strerror(c->goaway_code));
    return nl_err_newf(ECONNRESET, "unexpected EOF");
  case WHY_READ:
    if (grpc) return nl_err_newf(detail->code, "error reading from server: %s", detail_of(detail));
    return nl_dial_io_error(&c->dial, detail);
  case WHY_WRITE:
    if (grpc) return nl_err_newf(detail->code, "write to server failed: %s", detail_of(detail));
    return nl_err_newf(detail->code, "write %s %s: %s", c->opts.dial.unix_path ? "unix" : "tcp",
                       c->dial.peer, detail->msg);
  case WHY_ENGINE:
    return grpc ? nl_err_newf(EPROTO, "connection error: %s", nghttp2_strerror(rc))
                : nl_err_newf(EPROTO, "http2: %s", nghttp2_strerror(rc));
  case WHY_PROTOCOL:
    return grpc ? nl_err_newf(EPROTO, "connection error: protocol error")
                : nl_err_newf(EPROTO, "http2: %s", nghttp2_strerror(NGHTTP2_ERR_PROTO));
  case WHY_PING:
    return grpc ? nl_err_newf(ETIMEDOUT, "keepalive ping failed to receive ACK within timeout")
                : nl_err_newf(ETIMEDOUT, "http2: client connection lost");
  case WHY_DRAINED:
    return grpc ? nl_err_newf(ECONNRESET, "server sent GOAWAY") : NULL;
  case WHY_NOMEM:
    return grpc ? nl_err_newf(ENOMEM, "connection error: out of memory")
                : nl_err_newf(ENOMEM, "http2: out of memory");
  case WHY_HANDSHAKE:
    return grpc ? nl_err_newf(NL_ETIMEOUT, "connection error: timed out waiting for server handshake")
                : nl_err_newf(NL_ETIMEOUT, "http2: no SETTINGS from the server within the handshake timeout");
  }
  return NULL;
}

/* Frees the session, unless the engine is running (a callback closed the
 * connection from inside nl_h2_recv): then after it returns. */
static void drop_session(nl_h2conn_t *c) {
  if (!c->h2 || c->in_recv) return;
  nl_h2_free(c->h2);
  c->h2 = NULL;
}

static void last_words(nl_h2conn_t *c);

/* The connection is lost: the owner hears why and ends its streams, then the
 * session goes and the socket closes (a drained one after the last words). */
static void lose(nl_h2conn_t *c, why_t why, const nl_err_t *detail, int rc) {
  assert(c->state == NL_H2CONN_DIALING || up(c));
  if (why == WHY_DRAINED) last_words(c);
  nl_err_t *err = lost_error(c, why, detail, rc);
  enter(c, NL_H2CONN_CLOSING);
  c->cbs->lost(c, err);
  nl_err_free(&err);
  drop_session(c);
}

/* ---- Writing ------------------------------------------------------------- */

static void start_write(nl_h2conn_t *c);

/* Empties a written buffer, keeping its memory unless a burst grew it large. */
static void wbuf_done(nl_buf_t *b) {
  if (b->cap > WBUF_KEEP) nl_buf_free(b);
  else nl_buf_reset(b);
}

/* A peer that hung up fails our write (EPIPE) before we have read its EOF
 * and what it sent before it: then we write no more and let the read side end
 * the connection, so streams get the server's answers, or "EOF" as in grpc-go. */
static bool peer_gone(nl_h2conn_t *c, int err) {
  if (err != UV_EPIPE && err != UV_ECONNRESET) return false;
  nl_vlog(4, "connection to %s: write: %s; waiting for EOF", c->dial.peer, uv_strerror(err));
  c->w.dead = true;
  nl_buf_reset(&c->w.pending);
  return true;
}

static void write_failed(nl_h2conn_t *c, int uverr) {
  nl_err_t *e = nl_err_newf(-uverr, "write: %s", uv_strerror(uverr));
  lose(c, WHY_WRITE, e, 0);
  nl_err_free(&e);
}

static void unstall(nl_h2conn_t *c);

static void on_written(uv_write_t *req, int status) {
  nl_h2conn_t *c = container_of(req, nl_h2conn_t, w.req);
  c->w.busy = false;
  wbuf_done(&c->w.inflight);
  if (status < 0) {
    if (status != UV_ECANCELED && up(c) && !peer_gone(c, status)) write_failed(c, status);
    return;
  }
  if (up(c)) start_write(c);
  if (up(c)) unstall(c);
}

/* Writes what the socket takes now, as uv_try_write but with MSG_NOSIGNAL.
 * Returns the bytes written (0 when the socket is full) or a negative UV
 * error. Only while libuv has no write queued (!w.busy): the bytes stay in
 * order. */
static int try_send(nl_h2conn_t *c, const char *data, size_t len) {
  uv_os_fd_t fd = c->fd;
  if (!c->server && uv_fileno((uv_handle_t *)&c->dial.io.tcp, &fd) < 0) return UV_EBADF;
  ssize_t n;
  do n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n >= 0) return (int)n;
  return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : uv_translate_sys_error(errno);
}

static void poll_update(nl_h2conn_t *c);

/* Plaintext: what the socket takes at once; the rest through uv_write (the
 * buffers swap: the engine's next output collects while one is in flight),
 * or on a served connection when the poll handle says the socket has room. */
static void start_write(nl_h2conn_t *c) {
  if (c->w.dead) nl_buf_reset(&c->w.pending);
  if (c->w.busy || c->w.pending.len == 0 || !up(c)) return;
  int n = try_send(c, c->w.pending.data, c->w.pending.len);
  if (n > 0) nl_buf_consume(&c->w.pending, (size_t)n);
  else if (n < 0 && !peer_gone(c, n)) {
    write_failed(c, n);
    return;
  }
  if (c->w.pending.len == 0) wbuf_done(&c->w.pending);
  if (c->server) {
    poll_update(c);
    return;
  }
  if (c->w.pending.len == 0) return;
  nl_buf_t t = c->w.inflight;
  c->w.inflight = c->w.pending;
  c->w.pending = t;
  uv_buf_t b = uv_buf_init(c->w.inflight.data, (unsigned)c->w.inflight.len);
  c->w.busy = true;
  int rc = uv_write(&c->w.req, (uv_stream_t *)&c->dial.io.tcp, &b, 1, on_written);
  if (rc < 0) {
    c->w.busy = false;
    nl_buf_reset(&c->w.inflight);
    if (!peer_gone(c, rc)) write_failed(c, rc);
  }
}

/* The one write path: the engine's output collected in w.pending goes to
 * the socket, through TLS when the dial set it up. */
static void write_out(nl_h2conn_t *c) {
  if (!c->dial.io.tls) {
    start_write(c);
    return;
  }
  if (c->w.pending.len == 0) return;
  nl_err_t *err = NULL;
  int rc = nl_io_write(&c->dial.io, c->w.pending.data, c->w.pending.len, &err);
  wbuf_done(&c->w.pending);
  if (rc < 0) lose(c, WHY_WRITE, err, 0);
  nl_err_free(&err);
}

static int session_write(void *user, const uint8_t *data, size_t len) {
  nl_h2conn_t *c = user;
  nl_buf_append(&c->w.pending, data, len);
  c->wrote = true;
  return 0;
}

/* ---- Back-pressure (opts.write_high) ------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static bool behind(const nl_h2conn_t *c) {
  return c->opts.write_high && c->w.pending.len + c->w.inflight.len >= c->opts.write_high;
}

/* Reads the peer unless stalled. */
static void read_follow(nl_h2conn_t *c) {
  if (c->server) poll_update(c);
  else if (c->stalled) uv_read_stop((uv_stream_t *)&c->dial.io.tcp);
  else uv_read_start((uv_stream_t *)&c->dial.io.tcp, on_alloc, on_read);
}

/* The output is behind: the engine keeps what it has (bounded by what the
 * owner queues) and the peer is not read until the socket takes what waits. */
static void stall(nl_h2conn_t *c) {
  if (c->stalled) return;
  c->stalled = true;
  read_follow(c);
}

/* The socket took part of what waits: read the peer and drain the engine
 * again. */
static void unstall(nl_h2conn_t *c) {
  if (!c->stalled || behind(c)) return;
  c->stalled = false;
  read_follow(c);
  nl_h2conn_flush(c);
}

/* One last try, without waiting, to write what the engine has for a peer we
 * part from in good order (a server's GOAWAY): plaintext only. */
static void last_words(nl_h2conn_t *c) {
  if (c->dial.io.tls || !c->h2 || c->in_recv || c->w.busy || c->w.dead) return;
  if (nl_h2_flush(c->h2) < 0) return;
  if (c->w.pending.len) try_send(c, c->w.pending.data, c->w.pending.len);
}

static void on_turn(uv_idle_t *h);

void nl_h2conn_flush(nl_h2conn_t *c) {
  if (!c->h2 || c->flush_wanted) return;
  c->flush_wanted = true;
  if (!c->in_read) uv_idle_start(&c->turn, on_turn);
}

void nl_h2conn_defer(nl_h2conn_t *c) {
  if (c->state == NL_H2CONN_STOPPING || c->state == NL_H2CONN_STOPPED) return;
  c->turn_wanted = true;
  uv_idle_start(&c->turn, on_turn);
}

/* Runs once per loop turn while there is output to write or owner work. The
 * idle phase comes after timers and before the poll's timeout is computed
 * (UV_RUN_DEFAULT), so output asked for outside a read callback (stream
 * starts, timers, check and close callbacks) leaves in one write before the
 * loop blocks, without a zero-timeout poll. */
static void on_turn(uv_idle_t *h) {
  nl_h2conn_t *c = container_of(h, nl_h2conn_t, turn);
  do {
    if (c->flush_wanted) flush_now(c);
    if (c->turn_wanted && c->cbs->turn) {
      c->turn_wanted = false;
      c->cbs->turn(c); /* may start streams: their output goes out at once */
    }
  } while (c->flush_wanted && c->h2);
  if (!c->flush_wanted && !c->turn_wanted && !uv_is_closing((uv_handle_t *)h)) uv_idle_stop(h);
}

static void on_idle(uv_timer_t *t);

/* After the engine moved: a drained connection is lost, as is a session the
 * engine gave up on (it sent GOAWAY and reads no more: fail the streams now
 * rather than at their deadlines); the idle timer follows the stream count. */
static void check(nl_h2conn_t *c) {
  if (!up(c)) return;
  size_t active = nl_h2_active(c->h2);
  if (c->state == NL_H2CONN_DRAINING && active == 0) {
    lose(c, WHY_DRAINED, NULL, 0);
    return;
  }
  if (!nl_h2_want_io(c->h2)) {
    lose(c, WHY_PROTOCOL, NULL, 0);
    return;
  }
  if (!c->opts.idle_ms || c->handshaking) return;
  if (c->state == NL_H2CONN_READY && active == 0) {
    if (!uv_is_active((uv_handle_t *)&c->idle_timer))
      uv_timer_start(&c->idle_timer, on_idle, c->opts.idle_ms, 0);
  } else {
    uv_timer_stop(&c->idle_timer);
  }
}

/* Drains the engine's output into the socket. Output can end streams (a
 * RST_STREAM frees its slot once sent): the owner hears that the session
 * moved. */
static void flush_now(nl_h2conn_t *c) {
  c->flush_wanted = false;
  if (!up(c)) return;
  if (behind(c)) {
    stall(c);
    return;
  }
  c->wrote = false;
  int rc = nl_h2_flush(c->h2);
  if (rc < 0) {
    lose(c, WHY_ENGINE, NULL, rc);
    return;
  }
  write_out(c);
  if (up(c) && behind(c)) stall(c);
  check(c);
  if (c->wrote && up(c) && c->cbs->moved) c->cbs->moved(c);
}

/* ---- Reading ------------------------------------------------------------- */

/* Bytes from the peer into the engine; what it answers, and what the owner
 * starts meanwhile, leaves in one write on the way out. */
static void feed(nl_h2conn_t *c, const uint8_t *p, size_t n) {
  if (!up(c)) return;
  c->rx = true;
  c->in_read = true;
  c->in_recv = true;
  int rc = nl_h2_recv(c->h2, p, n);
  c->in_recv = false;
  if (!up(c)) { /* closed from a callback (a stream's owner stopped) */
    c->in_read = false;
    drop_session(c);
    return;
  }
  if (rc < 0) {
    c->in_read = false;
    lose(c, WHY_ENGINE, NULL, rc);
    return;
  }
  if (c->handshaking && nl_h2_peer_settled(c->h2)) {
    c->handshaking = false;
    uv_timer_stop(&c->idle_timer);
  }
  nl_h2conn_flush(c); /* replies (PING ACK, WINDOW_UPDATE) */
  check(c);
  if (up(c) && c->cbs->moved) c->cbs->moved(c);
  c->in_read = false;
  if (c->flush_wanted) flush_now(c);
}

static void ended(nl_h2conn_t *c, const nl_err_t *err) {
  if (!up(c)) return;
  if (err) lose(c, WHY_READ, err, 0);
  else lose(c, WHY_EOF, NULL, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  nl_h2conn_t *c = container_of((uv_tcp_t *)h, nl_h2conn_t, dial.io.tcp);
  *buf = uv_buf_init((char *)c->rbuf, (unsigned)c->opts.read_buf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  nl_h2conn_t *c = container_of((uv_tcp_t *)s, nl_h2conn_t, dial.io.tcp);
  if (n == 0) return;
  if (n > 0) {
    feed(c, (const uint8_t *)buf->base, (size_t)n);
    return;
  }
  nl_err_t *e = n == UV_EOF ? NULL : nl_err_newf((int)-n, "read: %s", uv_strerror((int)n));
  ended(c, e);
  nl_err_free(&e);
}

/* ---- A served connection's socket ------------------------------------------ */

/* Served connections wait on a poll handle, read with recv() and write only
 * with send(MSG_NOSIGNAL) (a uv_write's writev could raise SIGPIPE in a
 * process that does not ignore it, when a client vanishes). */
static void on_poll(uv_poll_t *h, int status, int events);

/* The peer's bytes unless stalled; room to write while output waits. */
static void poll_update(nl_h2conn_t *c) {
  if (!up(c)) return;
  int ev = (c->stalled ? 0 : UV_READABLE) | (c->w.pending.len ? UV_WRITABLE : 0);
  if (ev == c->poll_events) return;
  c->poll_events = ev;
  if (ev) uv_poll_start(&c->poll, ev, on_poll);
  else uv_poll_stop(&c->poll);
}

static void served_read(nl_h2conn_t *c) {
  ssize_t n;
  do n = recv(c->fd, c->rbuf, c->opts.read_buf, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n > 0) {
    feed(c, c->rbuf, (size_t)n);
    return;
  }
  nl_err_t *e = n == 0 ? NULL : nl_err_newf(errno, "read: %s", strerror(errno));
  ended(c, e);
  nl_err_free(&e);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  nl_h2conn_t *c = container_of(h, nl_h2conn_t, poll);
  if (!up(c)) return;
  if (status < 0) {
    nl_err_t *e = nl_err_newf(-status, "read: %s", uv_strerror(status));
    ended(c, e);
    nl_err_free(&e);
    return;
  }
  if (events & UV_WRITABLE) {
    start_write(c);
    if (up(c)) unstall(c);
  }
  if (up(c) && !c->stalled && (events & UV_READABLE)) served_read(c);
  poll_update(c);
}

static void io_data(nl_io_t *io, const char *p, size_t n) {
  feed(container_of(io, nl_h2conn_t, dial.io), (const uint8_t *)p, n);
}

static void io_end(nl_io_t *io, nl_err_t *err) { ended(container_of(io, nl_h2conn_t, dial.io), err); }

static const nl_io_cbs_t io_cbs = {.on_data = io_data, .on_end = io_end};

/* ---- Engine callbacks ---------------------------------------------------- */

static void on_ka(uv_timer_t *t);

static void ka_start(nl_h2conn_t *c, uint64_t ms) {
  if (c->opts.ping_after_ms) uv_timer_start(&c->ka_timer, on_ka, ms, 0);
}

static void on_ping_ack(void *user) {
  nl_h2conn_t *c = user;
  c->ping_outstanding = false;
  ka_start(c, c->opts.ping_after_ms);
}

static void on_ack_timer(uv_timer_t *t) {
  nl_h2conn_t *c = container_of(t, nl_h2conn_t, ack_timer);
  if (!up(c)) return;
  int rc = nl_h2_ack_pings(c->h2);
  if (rc < 0) lose(c, WHY_ENGINE, NULL, rc);
  else nl_h2conn_flush(c);
}

/* grpc-go servers (containerd, CRI-O) send a PING to estimate the bandwidth
 * after each DATA frame they receive while none is outstanding, with a
 * WINDOW_UPDATE before it: acknowledged at once, that is two more frames in
 * and one out per call when calls come one at a time, and a wake-up for the
 * ACK's timer when it waits. Acknowledged later (the owner's delay), one PING
 * covers all the calls of that time; on the grid (reactor/grid.h), the ACK
 * leaves with the calls of the periodic work due then (the relist). */
static void on_peer_ping(void *user) {
  nl_h2conn_t *c = user;
  if (!uv_is_active((uv_handle_t *)&c->ack_timer))
    uv_timer_start(&c->ack_timer, on_ack_timer,
                   nl_grid_delay(uv_now(c->loop), c->opts.ping_ack_delay_ms, NL_GRID_MS), 0);
}

static void on_goaway(void *user, uint32_t code, int32_t last) {
  nl_h2conn_t *c = user;
  if (c->state != NL_H2CONN_READY) return;
  c->goaway = true;
  c->goaway_code = code;
  c->goaway_last = last;
  enter(c, NL_H2CONN_DRAINING);
  if (c->cbs->goaway) c->cbs->goaway(c);
}

/* ---- Timers --------------------------------------------------------------- */

/* Keepalive, as grpc-go's and Go's http2 health check: after ping_after_ms
 * without a frame, a PING; no ACK within ping_timeout_ms loses the
 * connection, so a peer that vanished without a FIN is noticed. In BACKOFF
 * the same timer dials again. */
static void on_ka(uv_timer_t *t) {
  nl_h2conn_t *c = container_of(t, nl_h2conn_t, ka_timer);
  if (c->state == NL_H2CONN_BACKOFF) {
    enter(c, NL_H2CONN_DIALING);
    return;
  }
  if (!up(c)) return;
  if (c->ping_outstanding) {
    lose(c, WHY_PING, NULL, 0);
    return;
  }
  if (c->rx || (c->opts.ping_only_active && nl_h2_active(c->h2) == 0)) {
    c->rx = false;
    ka_start(c, c->opts.ping_after_ms);
    return;
  }
  nl_vlog(4, "connection to %s: no frame for %llu ms: PING", c->dial.peer,
          (unsigned long long)c->opts.ping_after_ms);
  if (nl_h2_ping(c->h2) == 0) {
    c->ping_outstanding = true;
    ka_start(c, c->opts.ping_timeout_ms);
    nl_h2conn_flush(c);
  }
}

static void on_idle(uv_timer_t *t) {
  nl_h2conn_t *c = container_of(t, nl_h2conn_t, idle_timer);
  if (c->state != NL_H2CONN_READY || nl_h2_active(c->h2) > 0) return;
  if (c->cbs->idle) c->cbs->idle(c);
}

/* A served connection whose client said nothing (or not HTTP/2) in time, or
 * a dialed one whose server sent no SETTINGS: a socket can connect with
 * nothing serving behind it (a proxy that pairs it with its far side later, a
 * process stopped between accept and serve), and calls on it would wait for
 * their deadlines, one after another, on the same dead connection. */
static void on_handshake_timeout(uv_timer_t *t) {
  nl_h2conn_t *c = container_of(t, nl_h2conn_t, idle_timer);
  if (up(c) && c->handshaking) lose(c, WHY_HANDSHAKE, NULL, 0);
}

/* ---- The state machine ----------------------------------------------------- */

static void on_dialed(nl_dial_t *d, const nl_err_t *err) {
  nl_h2conn_t *c = container_of(d, nl_h2conn_t, dial);
  assert(c->state == NL_H2CONN_DIALING); /* closing the dialer calls no more */
  if (err) {
    enter(c, NL_H2CONN_CLOSING);
    c->cbs->lost(c, err);
    return;
  }
  const char *alpn = d->io.tls ? nl_tls_alpn(d->io.tls) : NULL;
  if (d->io.tls && (!alpn || strcmp(alpn, "h2") != 0)) {
    c->connected = true;
    c->cbs->ready(c, false);
    return;
  }
  nl_h2_cbs_t hc = {.write = session_write, .ping_ack = on_ping_ack, .goaway = on_goaway,
                    .ping = c->opts.ping_ack_delay_ms ? on_peer_ping : NULL};
  c->h2 = nl_h2_new(&c->opts.h2, &hc, c);
  if (!c->h2) {
    lose(c, WHY_NOMEM, NULL, 0);
    return;
  }
  enter(c, NL_H2CONN_READY);
  c->cbs->ready(c, true);
}

static void dial_closed(nl_dial_t *d);
static void close_socket(nl_h2conn_t *c);

static void handle_closed(uv_handle_t *h);

/* Every transition goes through here: the entry actions of each state, and
 * what it may be entered from. */
static void enter(nl_h2conn_t *c, nl_h2conn_state_t to) {
  nl_h2conn_state_t from = c->state;
  c->state = to;
  switch (to) {
  case NL_H2CONN_IDLE:
    assert(from == NL_H2CONN_CLOSING && !c->sock_open);
    break;
  case NL_H2CONN_DIALING: {
    assert((from == NL_H2CONN_IDLE || from == NL_H2CONN_BACKOFF) && !c->sock_open && !c->h2);
    nl_dial_opts_t o = c->opts.dial;
    o.raw = !o.tls;
    o.io_cbs = o.raw ? NULL : &io_cbs;
    c->sock_open = true;
    c->live++; /* the dialer, until its close callback */
    c->connected = false;
    c->goaway = false;
    c->w.dead = false;
    nl_dial_start(&c->dial, c->loop, &o, on_dialed);
    break;
  }
  case NL_H2CONN_READY:
    assert((from == NL_H2CONN_DIALING || (from == NL_H2CONN_IDLE && c->server)) && c->h2);
    c->connected = true;
    nl_backoff_reset(&c->backoff);
    c->stalled = false;
    if (!c->dial.io.tls) {
      if (!c->rbuf)
        c->rbuf = c->opts.read_buf_shared ? c->opts.read_buf_shared : nl_xmalloc(c->opts.read_buf);
      read_follow(c);
    }
    c->handshaking = c->server || c->opts.handshake_ms;
    if (c->opts.handshake_ms)
      uv_timer_start(&c->idle_timer, on_handshake_timeout, c->opts.handshake_ms, 0);
    c->rx = false;
    ka_start(c, c->opts.ping_after_ms);
    nl_h2conn_flush(c); /* the preface and SETTINGS */
    break;
  case NL_H2CONN_DRAINING:
    assert(from == NL_H2CONN_READY);
    uv_timer_stop(&c->idle_timer);
    break;
  case NL_H2CONN_CLOSING:
    assert(from == NL_H2CONN_DIALING || from == NL_H2CONN_READY || from == NL_H2CONN_DRAINING);
    c->ping_outstanding = false;
    c->flush_wanted = false;
    nl_buf_reset(&c->w.pending);
    uv_timer_stop(&c->ka_timer);
    uv_timer_stop(&c->ack_timer);
    uv_timer_stop(&c->idle_timer);
    close_socket(c);
    break;
  case NL_H2CONN_BACKOFF: {
    assert(from == NL_H2CONN_CLOSING && c->opts.reconnect);
    uint64_t delay = c->connected ? 0 : nl_backoff_next(&c->backoff);
    nl_vlog(4, "connection to %s: dialing again in %llu ms", c->dial.peer,
            (unsigned long long)delay);
    uv_timer_start(&c->ka_timer, on_ka, delay, 0);
    break;
  }
  case NL_H2CONN_STOPPING: {
    assert(from != NL_H2CONN_STOPPED);
    c->flush_wanted = c->turn_wanted = false;
    drop_session(c);
    uv_handle_t *hs[] = {(uv_handle_t *)&c->ka_timer, (uv_handle_t *)&c->ack_timer,
                         (uv_handle_t *)&c->idle_timer, (uv_handle_t *)&c->turn};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) uv_close(hs[i], handle_closed);
    /* The dialer is open unless it is closing (its close callback counts then). */
    if (c->sock_open && from != NL_H2CONN_CLOSING) close_socket(c);
    break;
  }
  case NL_H2CONN_STOPPED:
    assert(from == NL_H2CONN_STOPPING && c->live == 0 && !c->h2);
    if (c->rbuf != c->opts.read_buf_shared) free(c->rbuf);
    c->rbuf = NULL;
    nl_buf_free(&c->w.pending);
    nl_buf_free(&c->w.inflight);
    c->cbs->closed(c);
    break;
  }
}

static void closed_one(nl_h2conn_t *c) {
  assert(c->live > 0);
  if (--c->live == 0) enter(c, NL_H2CONN_STOPPED);
}

static void handle_closed(uv_handle_t *h) { closed_one(h->data); }

static void socket_closed(nl_h2conn_t *c) {
  assert(c->sock_open);
  c->sock_open = false;
  if (c->state == NL_H2CONN_STOPPING) {
    closed_one(c);
    return;
  }
  assert(c->state == NL_H2CONN_CLOSING);
  c->live--;
  enter(c, c->opts.reconnect ? NL_H2CONN_BACKOFF : NL_H2CONN_IDLE);
}

static void dial_closed(nl_dial_t *d) { socket_closed(container_of(d, nl_h2conn_t, dial)); }

static void poll_closed(uv_handle_t *h) {
  nl_h2conn_t *c = container_of((uv_poll_t *)h, nl_h2conn_t, poll);
  close(c->fd);
  c->fd = -1;
  socket_closed(c);
}

/* The dialer closes its handles; a served socket's poll handle closes, then
 * the socket. */
static void close_socket(nl_h2conn_t *c) {
  if (c->server) uv_close((uv_handle_t *)&c->poll, poll_closed);
  else nl_dial_close(&c->dial, dial_closed);
}

/* ---- Life cycle ------------------------------------------------------------ */

void nl_h2conn_init(nl_h2conn_t *c, uv_loop_t *loop, const nl_h2conn_opts_t *opts,
                    const nl_h2conn_cbs_t *cbs) {
  void *data = c->data;
  memset(c, 0, sizeof *c);
  assert(cbs && cbs->lost && cbs->closed);
  assert(!opts->read_buf_shared || opts->read_buf);
  c->data = data;
  c->loop = loop;
  c->opts = *opts;
  c->cbs = cbs;
  if (!c->opts.read_buf) c->opts.read_buf = RBUF_SIZE;
  if (!c->opts.backoff_initial_ms) c->opts.backoff_initial_ms = 1000;
  if (!c->opts.backoff_max_ms) c->opts.backoff_max_ms = 30000;
  nl_backoff_init(&c->backoff, c->opts.backoff_initial_ms, c->opts.backoff_max_ms, 0.2);
  uv_handle_t *hs[] = {(uv_handle_t *)&c->ka_timer, (uv_handle_t *)&c->ack_timer,
                       (uv_handle_t *)&c->idle_timer};
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
    uv_timer_init(loop, (uv_timer_t *)hs[i]);
    hs[i]->data = c;
  }
  uv_idle_init(loop, &c->turn);
  c->turn.data = c;
  c->live = 4;
  c->state = NL_H2CONN_IDLE;
}

void nl_h2conn_start(nl_h2conn_t *c) {
  assert(c->state == NL_H2CONN_IDLE);
  enter(c, NL_H2CONN_DIALING);
}

static nl_h2_stream_t *session_stream(void *user) {
  nl_h2conn_t *c = user;
  return c->cbs->stream(c);
}

int nl_h2conn_adopt(nl_h2conn_t *c, int fd, const char *peer, nl_err_t **err) {
  assert(c->state == NL_H2CONN_IDLE && !c->sock_open && c->cbs->stream);
  snprintf(c->dial.peer, sizeof c->dial.peer, "%s", peer);
  nl_h2_cbs_t hc = {.write = session_write, .ping_ack = on_ping_ack, .goaway = on_goaway,
                    .ping = c->opts.ping_ack_delay_ms ? on_peer_ping : NULL,
                    .on_stream = session_stream};
  c->h2 = nl_h2_server_new(&c->opts.h2, &hc, c);
  int rc = c->h2 ? uv_poll_init(c->loop, &c->poll, fd) : UV_ENOMEM;
  if (rc < 0) {
    close(fd);
    drop_session(c);
    return nl_err_set(err, -rc, "serve %s: %s", peer, uv_strerror(rc));
  }
  c->server = true;
  c->fd = fd;
  c->poll_events = 0;
  c->sock_open = true;
  c->live++; /* the poll handle, until its close callback */
  c->goaway = false;
  c->w.dead = false;
  enter(c, NL_H2CONN_READY);
  return 0;
}

void nl_h2conn_goaway(nl_h2conn_t *c) {
  if (c->state != NL_H2CONN_READY) return;
  nl_h2_goaway(c->h2, NGHTTP2_NO_ERROR);
  nl_h2conn_drain(c);
}

void nl_h2conn_close(nl_h2conn_t *c) {
  if (c->state == NL_H2CONN_STOPPING || c->state == NL_H2CONN_STOPPED) return;
  enter(c, NL_H2CONN_STOPPING);
}

void nl_h2conn_drain(nl_h2conn_t *c) {
  if (c->state != NL_H2CONN_READY) return;
  enter(c, NL_H2CONN_DRAINING);
  if (nl_h2_active(c->h2) == 0) lose(c, WHY_DRAINED, NULL, 0);
}
