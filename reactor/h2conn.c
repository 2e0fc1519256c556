#include "reactor/h2conn.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

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
} why_t;

/* The detail of an io error without its "read: "/"write: " prefix. */
static const char *detail_of(const nl_err_t *e) {
  const char *colon = strchr(e->msg, ':');
  if ((!strncmp(e->msg, "read: ", 6) || !strncmp(e->msg, "write: ", 7)) && colon) return colon + 2;
  return e->msg;
}

/* The error for a lost connection in the owner's words; detail is the io's
 * error (borrowed, may be NULL), rc the engine's. */
static nl_err_t *lost_error(const nl_h2conn_t *c, why_t why, const nl_err_t *detail, int rc) {
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

/* The connection is lost: the owner hears why and ends its streams, then the
 * session goes and the dialed connection closes. */
static void lose(nl_h2conn_t *c, why_t why, const nl_err_t *detail, int rc) {
  assert(c->state == NL_H2CONN_DIALING || up(c));
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

static void on_written(uv_write_t *req, int status) {
  nl_h2conn_t *c = container_of(req, nl_h2conn_t, w.req);
  c->w.busy = false;
  wbuf_done(&c->w.inflight);
  if (status < 0) {
    if (status != UV_ECANCELED && up(c) && !peer_gone(c, status)) write_failed(c, status);
    return;
  }
  if (up(c)) start_write(c);
}

/* Writes what the socket takes now, as uv_try_write but with MSG_NOSIGNAL.
 * Returns the bytes written (0 when the socket is full) or a negative UV
 * error. Only while libuv has no write queued (!w.busy): the bytes stay in
 * order. */
static int try_send(nl_h2conn_t *c, const char *data, size_t len) {
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&c->dial.io.tcp, &fd) < 0) return UV_EBADF;
  ssize_t n;
  do n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n >= 0) return (int)n;
  return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : uv_translate_sys_error(errno);
}

/* Plaintext: what the socket takes at once, the rest through uv_write (the
 * buffers swap: the engine's next output collects while one is in flight). */
static void start_write(nl_h2conn_t *c) {
  if (c->w.dead) nl_buf_reset(&c->w.pending);
  if (c->w.busy || c->w.pending.len == 0 || !up(c)) return;
  int n = try_send(c, c->w.pending.data, c->w.pending.len);
  if (n > 0) nl_buf_consume(&c->w.pending, (size_t)n);
  else if (n < 0 && !peer_gone(c, n)) {
    write_failed(c, n);
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
  if (!c->opts.idle_ms) return;
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
  c->wrote = false;
  int rc = nl_h2_flush(c->h2);
  if (rc < 0) {
    lose(c, WHY_ENGINE, NULL, rc);
    return;
  }
  write_out(c);
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

static void handle_closed(uv_handle_t *h);

/* Every transition goes through here: the entry actions of each state, and
 * what it may be entered from. */
static void enter(nl_h2conn_t *c, nl_h2conn_state_t to) {
  nl_h2conn_state_t from = c->state;
  c->state = to;
  switch (to) {
  case NL_H2CONN_IDLE:
    assert(from == NL_H2CONN_CLOSING && !c->dial_open);
    break;
  case NL_H2CONN_DIALING: {
    assert((from == NL_H2CONN_IDLE || from == NL_H2CONN_BACKOFF) && !c->dial_open && !c->h2);
    nl_dial_opts_t o = c->opts.dial;
    o.raw = !o.tls;
    o.io_cbs = o.raw ? NULL : &io_cbs;
    c->dial_open = true;
    c->live++; /* the dialer, until its close callback */
    c->connected = false;
    c->goaway = false;
    c->w.dead = false;
    nl_dial_start(&c->dial, c->loop, &o, on_dialed);
    break;
  }
  case NL_H2CONN_READY:
    assert(from == NL_H2CONN_DIALING && c->h2);
    c->connected = true;
    nl_backoff_reset(&c->backoff);
    if (!c->dial.io.tls) {
      if (!c->rbuf) c->rbuf = nl_xmalloc(c->opts.read_buf);
      uv_read_start((uv_stream_t *)&c->dial.io.tcp, on_alloc, on_read);
    }
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
    nl_dial_close(&c->dial, dial_closed);
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
    if (c->dial_open && from != NL_H2CONN_CLOSING) nl_dial_close(&c->dial, dial_closed);
    break;
  }
  case NL_H2CONN_STOPPED:
    assert(from == NL_H2CONN_STOPPING && c->live == 0 && !c->h2);
    free(c->rbuf);
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

static void dial_closed(nl_dial_t *d) {
  nl_h2conn_t *c = container_of(d, nl_h2conn_t, dial);
  assert(c->dial_open);
  c->dial_open = false;
  if (c->state == NL_H2CONN_STOPPING) {
    closed_one(c);
    return;
  }
  assert(c->state == NL_H2CONN_CLOSING);
  c->live--;
  enter(c, c->opts.reconnect ? NL_H2CONN_BACKOFF : NL_H2CONN_IDLE);
}

/* ---- Life cycle ------------------------------------------------------------ */

void nl_h2conn_init(nl_h2conn_t *c, uv_loop_t *loop, const nl_h2conn_opts_t *opts,
                    const nl_h2conn_cbs_t *cbs) {
  void *data = c->data;
  memset(c, 0, sizeof *c);
  assert(cbs && cbs->ready && cbs->lost && cbs->closed);
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

void nl_h2conn_close(nl_h2conn_t *c) {
  if (c->state == NL_H2CONN_STOPPING || c->state == NL_H2CONN_STOPPED) return;
  enter(c, NL_H2CONN_STOPPING);
}

void nl_h2conn_drain(nl_h2conn_t *c) {
  if (c->state != NL_H2CONN_READY) return;
  enter(c, NL_H2CONN_DRAINING);
  if (nl_h2_active(c->h2) == 0) lose(c, WHY_DRAINED, NULL, 0);
}
