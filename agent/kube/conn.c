/* One connection to the API server: resolve, connect, TLS (ALPN), HTTP/2, the
 * health check of Go's HTTP/2 transport (ReadIdleTimeout, PingTimeout), and
 * its idle timeout (IdleConnTimeout). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "agent/kube/client_int.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* Drops one of the handles and requests the connection waits for. */
static void conn_unref(nl_kube_conn_t *conn) {
  if (--conn->live > 0) return;
  nl_kube_client_t *c = conn->client;
  nl_kube_h2_free(conn->h2);
  nl_buf_free(&conn->out);
  free(conn);
  nl_kube__client_put(c);
}

static void handle_closed(uv_handle_t *h) { conn_unref(h->data); }

static void dial_closed(nl_dial_t *d) { conn_unref(d->data); }

static void close_with(nl_kube_conn_t *conn, nl_err_t *err) {
  nl_kube__conn_close(conn, err);
  nl_err_free(&err);
}

void nl_kube__conn_close(nl_kube_conn_t *conn, const nl_err_t *err) {
  if (conn->state == KC_CLOSED) return;
  nl_kube_client_t *c = conn->client;
  if (err) nl_vlog(2, "kube: connection to %s closed: %s", c->server, err->msg);
  conn->state = KC_CLOSED;
  nl_list_remove(&conn->link);
  while (!nl_list_empty(&conn->reqs))
    nl_kube__req_conn_lost(nl_list_entry(conn->reqs.next, nl_kube_req_t, link), err);
  if (!conn->in_recv) {
    nl_kube_h2_free(conn->h2);
    conn->h2 = NULL;
  }
  if (conn->dial_open) {
    conn->dial_open = false;
    nl_dial_close(&conn->dial, dial_closed);
  }
  uv_close((uv_handle_t *)&conn->health, handle_closed);
  uv_close((uv_handle_t *)&conn->idle, handle_closed);
  nl_kube__conn_gone(c, conn, err);
  nl_kube__step(c);
}

/* ---- HTTP/2 ------------------------------------------------------------- */

static int h2_write(void *user, const uint8_t *data, size_t len) {
  nl_kube_conn_t *conn = user;
  nl_buf_append(&conn->out, data, len);
  return 0;
}

static void on_idle(uv_timer_t *t);

void nl_kube__conn_flush(nl_kube_conn_t *conn) {
  if (conn->state == KC_CLOSED || !conn->h2 || conn->in_recv) return;
  int rc = nl_h2_flush(conn->h2);
  nl_err_t *err = NULL;
  if (rc < 0) {
    close_with(conn, nl_err_newf(EPROTO, "http2: %s", nghttp2_strerror(rc)));
    return;
  }
  if (conn->out.len > 0) {
    rc = nl_io_write(&conn->dial.io, conn->out.data, conn->out.len, &err);
    nl_buf_reset(&conn->out);
    if (rc < 0) {
      nl_err_wrap(&err, "write tcp %s", conn->dial.peer);
      close_with(conn, err);
      return;
    }
  }
  /* Every change to the connection's streams ends in a flush. */
  if (conn->state == KC_READY && nl_h2_active(conn->h2) == 0) {
    if (!uv_is_active((uv_handle_t *)&conn->idle))
      uv_timer_start(&conn->idle, on_idle, conn->client->idle_conn_ms, 0);
  } else {
    uv_timer_stop(&conn->idle);
  }
}

/* As Go's IdleConnTimeout: a connection without a stream that long closes,
 * so the extra connections a burst of watches opened do not stay; the last
 * ready one stays, as the agent's watches and Lease come back to it. */
static void on_idle(uv_timer_t *t) {
  nl_kube_conn_t *conn = container_of(t, nl_kube_conn_t, idle);
  nl_kube_client_t *c = conn->client;
  if (conn->state != KC_READY || nl_h2_active(conn->h2) > 0) return;
  if (nl_kube__client_nready(c) < 2) return;
  nl_vlog(4, "kube: connection to %s (%s) idle for %llu ms: closed", c->server, conn->dial.peer,
          (unsigned long long)c->idle_conn_ms);
  close_with(conn, NULL);
}

/* Streams a watch leaves free on a connection (a tenth, at least one): the
 * Lease, node status and events never wait behind watches for a new
 * connection to be dialed. */
static size_t reserved_streams(uint32_t max) {
  if (max < 2) return 0;
  return max / 10 > 0 ? max / 10 : 1;
}

bool nl_kube__conn_takes(const nl_kube_conn_t *conn, const nl_kube_req_t *r) {
  if (conn->state != KC_READY) return false;
  size_t free_streams = nl_h2_free_streams(conn->h2);
  if (!r->on_data) return free_streams > 0;
  return free_streams > reserved_streams(nl_h2_max_streams(conn->h2));
}

static void on_health(uv_timer_t *t);

static void health_start(nl_kube_conn_t *conn, uint64_t ms) {
  uv_timer_start(&conn->health, on_health, ms, 0);
}

/* As Go's http2 Transport: after ReadIdleTimeout without a frame, a PING; no
 * answer within PingTimeout closes the connection ("client connection lost"),
 * so a peer that vanished without a FIN is noticed. */
static void on_health(uv_timer_t *t) {
  nl_kube_conn_t *conn = container_of(t, nl_kube_conn_t, health);
  nl_kube_client_t *c = conn->client;
  if (conn->state != KC_READY && conn->state != KC_DRAINING) return;
  if (conn->ping_outstanding) {
    close_with(conn, nl_err_newf(ETIMEDOUT, "http2: client connection lost"));
    return;
  }
  if (conn->rx) {
    conn->rx = false;
    health_start(conn, c->read_idle_ms);
    return;
  }
  nl_vlog(4, "kube: connection to %s idle for %llu ms: PING", c->server,
          (unsigned long long)c->read_idle_ms);
  if (nl_h2_ping(conn->h2) == 0) {
    conn->ping_outstanding = true;
    health_start(conn, c->ping_timeout_ms);
    nl_kube__conn_flush(conn);
  }
}

static void h2_ping_ack(void *user) {
  nl_kube_conn_t *conn = user;
  conn->ping_outstanding = false;
  health_start(conn, conn->client->read_idle_ms);
}

static void h2_goaway(void *user, uint32_t code, int32_t last) {
  nl_kube_conn_t *conn = user;
  if (conn->state != KC_READY) return;
  nl_vlog(2, "kube: %s sent GOAWAY (last stream %d, %s)", conn->client->server, last,
          nghttp2_http2_strerror(code));
  conn->goaway = true;
  conn->goaway_code = code;
  conn->goaway_last = last;
  conn->state = KC_DRAINING;
  nl_kube__conn_gone(conn->client, conn, NULL);
}

void nl_kube__conn_drain(nl_kube_conn_t *conn) {
  if (conn->state != KC_READY) return;
  nl_vlog(4, "kube: connection to %s (%s) drains: new requests take a new connection",
          conn->client->server, conn->dial.peer);
  conn->state = KC_DRAINING;
  nl_kube__conn_gone(conn->client, conn, NULL);
  if (nl_h2_active(conn->h2) == 0) close_with(conn, NULL);
  else nl_kube__step(conn->client);
}

static const nl_kube_h2_cbs_t h2_cbs = {.write = h2_write, .ping_ack = h2_ping_ack,
                                        .goaway = h2_goaway};

/* ---- I/O ---------------------------------------------------------------- */

static void on_dialed(nl_dial_t *d, const nl_err_t *err) {
  nl_kube_conn_t *conn = d->data;
  nl_kube_client_t *c = conn->client;
  if (err) {
    nl_kube__conn_close(conn, err);
    return;
  }
  const char *alpn = nl_tls_alpn(d->io.tls);
  if (!alpn || strcmp(alpn, "h2") != 0) {
    nl_kube__conn_ready(c, conn, false);
    return;
  }
  conn->h2 = nl_kube_h2_new(NL_KUBE_WINDOW, &h2_cbs, conn);
  if (!conn->h2) {
    close_with(conn, nl_err_newf(ENOMEM, "http2: out of memory"));
    return;
  }
  conn->state = KC_READY;
  conn->was_ready = true;
  health_start(conn, c->read_idle_ms);
  nl_kube__conn_flush(conn);
  if (conn->state == KC_READY) nl_kube__conn_ready(c, conn, true);
}

static void io_data(nl_io_t *io, const char *p, size_t n) {
  nl_kube_conn_t *conn = container_of(io, nl_kube_conn_t, dial.io);
  nl_kube_client_t *c = conn->client;
  if (!conn->h2 || conn->state == KC_CLOSED) return;
  conn->rx = true;
  conn->in_recv = true;
  int rc = nl_h2_recv(conn->h2, (const uint8_t *)p, n);
  conn->in_recv = false;
  if (conn->state == KC_CLOSED) {
    /* Closed from a callback (a stream's user stopped the client). */
    nl_kube_h2_free(conn->h2);
    conn->h2 = NULL;
    return;
  }
  if (rc < 0) {
    close_with(conn, nl_err_newf(EPROTO, "http2: %s", nghttp2_strerror(rc)));
    return;
  }
  nl_kube__conn_flush(conn);
  if (conn->state == KC_DRAINING && nl_h2_active(conn->h2) == 0) {
    close_with(conn, NULL);
    return;
  }
  nl_kube__step(c);
}

static void io_end(nl_io_t *io, nl_err_t *err) {
  nl_kube_conn_t *conn = container_of(io, nl_kube_conn_t, dial.io);
  if (conn->state == KC_CLOSED) return;
  nl_err_t *e;
  if (conn->goaway) {
    e = nl_err_newf(ECONNRESET,
             "http2: server sent GOAWAY and closed the connection; LastStreamID=%d, "
             "ErrCode=%s, debug=\"\"",
             conn->goaway_last, nghttp2_http2_strerror(conn->goaway_code));
  } else if (!(e = nl_dial_io_error(&conn->dial, err))) {
    e = nl_err_newf(ECONNRESET, "unexpected EOF");
  }
  close_with(conn, e);
}

static const nl_io_cbs_t io_cbs = {.on_data = io_data, .on_end = io_end};

void nl_kube__conn_start(nl_kube_client_t *c) {
  nl_kube_conn_t *conn = nl_xcalloc(1, sizeof *conn);
  conn->client = c;
  nl_list_init(&conn->reqs);
  nl_list_insert_tail(&c->conns, &conn->link);
  c->dialing = conn; /* before anything can fail */
  c->live++;
  uv_timer_init(c->loop, &conn->health);
  conn->health.data = conn;
  uv_timer_init(c->loop, &conn->idle);
  conn->idle.data = conn;
  conn->live = 3;
  conn->state = KC_CONNECTING;
  conn->dial.data = conn;
  conn->dial_open = true;
  nl_dial_opts_t o = {.host = c->url.host, .port = c->url.port, .tls = c->tls,
                      .server_name = c->server_name, .timeout_ms = NL_KUBE_DIAL_TIMEOUT_MS,
                      .io_cbs = &io_cbs};
  nl_dial_start(&conn->dial, c->loop, &o, on_dialed);
}
