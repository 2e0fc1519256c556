/* One connection to the API server on the HTTP/2 connection driver
 * (reactor/h2conn.h: TLS with ALPN h2, Go's http2 health check —
 * ReadIdleTimeout, PingTimeout — GOAWAY drain, and the idle timeout,
 * IdleConnTimeout). What is the API client's: which requests it carries, and
 * what its end means to the client's pool (client.c). */
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "agent/kube/client_int.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static nl_kube_conn_t *conn_of(nl_h2conn_t *h) { return container_of(h, nl_kube_conn_t, h2c); }

void nl_kube__conn_close(nl_kube_conn_t *conn, const nl_err_t *err) {
  if (conn->closed) return;
  nl_kube_client_t *c = conn->client;
  if (err) nl_vlog(2, "kube: connection to %s closed: %s", c->server, err->msg);
  conn->closed = true;
  nl_list_remove(&conn->link);
  while (!nl_list_empty(&conn->reqs))
    nl_kube__req_conn_lost(nl_list_entry(conn->reqs.next, nl_kube_req_t, link), err);
  if (conn->h2c.h2) nl_kube_h2_forget(conn->h2c.h2);
  nl_h2conn_close(&conn->h2c);
  nl_kube__conn_gone(c, conn, err);
  nl_kube__step(c);
}

void nl_kube__conn_flush(nl_kube_conn_t *conn) {
  if (!conn->closed) nl_h2conn_flush(&conn->h2c);
}

/* Streams a watch leaves free on a connection (a tenth, at least one): the
 * Lease, node status and events never wait behind watches for a new
 * connection to be dialed. */
static size_t reserved_streams(uint32_t max) {
  if (max < 2) return 0;
  return max / 10 > 0 ? max / 10 : 1;
}

bool nl_kube__conn_takes(const nl_kube_conn_t *conn, const nl_kube_req_t *r) {
  if (conn->closed || !nl_h2conn_ready(&conn->h2c)) return false;
  size_t free_streams = nl_h2_free_streams(conn->h2c.h2);
  if (!r->on_data) return free_streams > 0;
  return free_streams > reserved_streams(nl_h2_max_streams(conn->h2c.h2));
}

void nl_kube__conn_drain(nl_kube_conn_t *conn) {
  if (conn->closed || !nl_h2conn_ready(&conn->h2c)) return;
  nl_vlog(4, "kube: connection to %s (%s) drains: new requests take a new connection",
          conn->client->server, conn->h2c.dial.peer);
  nl_kube__conn_gone(conn->client, conn, NULL);
  nl_h2conn_drain(&conn->h2c); /* without streams: lost (closed) at once */
  if (!conn->closed) nl_kube__step(conn->client);
}

/* ---- the driver's callbacks ----------------------------------------------- */

static void h2c_ready(nl_h2conn_t *h, bool h2) {
  nl_kube_conn_t *conn = conn_of(h);
  conn->was_ready = h2;
  nl_kube__conn_ready(conn->client, conn, h2);
}

/* The session moved (answers read, output sent): waiting requests may go. */
static void h2c_moved(nl_h2conn_t *h) { nl_kube__step(conn_of(h)->client); }

static void h2c_goaway(nl_h2conn_t *h) {
  nl_kube_conn_t *conn = conn_of(h);
  nl_vlog(2, "kube: %s sent GOAWAY (last stream %d, %s)", conn->client->server, h->goaway_last,
          nghttp2_http2_strerror(h->goaway_code));
  nl_kube__conn_gone(conn->client, conn, NULL);
}

/* The dial failed, the connection broke, or it drained (err NULL). */
static void h2c_lost(nl_h2conn_t *h, const nl_err_t *err) { nl_kube__conn_close(conn_of(h), err); }

/* As Go's IdleConnTimeout: a connection without a stream that long closes,
 * so the extra connections a burst of watches opened do not stay; the last
 * ready one stays, as the agent's watches and Lease come back to it. */
static void h2c_idle(nl_h2conn_t *h) {
  nl_kube_conn_t *conn = conn_of(h);
  nl_kube_client_t *c = conn->client;
  if (nl_kube__client_nready(c) < 2) return;
  nl_vlog(4, "kube: connection to %s (%s) idle for %llu ms: closed", c->server, h->dial.peer,
          (unsigned long long)c->idle_conn_ms);
  nl_kube__conn_close(conn, NULL);
}

static void h2c_closed(nl_h2conn_t *h) {
  nl_kube_conn_t *conn = conn_of(h);
  nl_kube_client_t *c = conn->client;
  free(conn);
  nl_kube__client_put(c);
}

static const nl_h2conn_cbs_t h2c_cbs = {.ready = h2c_ready, .moved = h2c_moved,
                                        .goaway = h2c_goaway, .lost = h2c_lost,
                                        .idle = h2c_idle, .closed = h2c_closed};

void nl_kube__conn_start(nl_kube_client_t *c) {
  nl_kube_conn_t *conn = nl_xcalloc(1, sizeof *conn);
  conn->client = c;
  nl_list_init(&conn->reqs);
  nl_list_insert_tail(&c->conns, &conn->link);
  c->dialing = conn; /* before anything can fail */
  c->live++;
  nl_h2conn_opts_t o = {
      .dial = {.host = c->url.host, .port = c->url.port, .tls = c->tls,
               .server_name = c->server_name, .timeout_ms = NL_KUBE_DIAL_TIMEOUT_MS},
      .h2 = nl_kube_h2_opts(NL_KUBE_WINDOW),
      .words = NL_H2CONN_WORDS_HTTP2,
      .ping_after_ms = c->read_idle_ms,
      .ping_timeout_ms = c->ping_timeout_ms,
      .idle_ms = c->idle_conn_ms,
  };
  nl_h2conn_init(&conn->h2c, c->loop, &o, &h2c_cbs);
  nl_h2conn_start(&conn->h2c);
}
