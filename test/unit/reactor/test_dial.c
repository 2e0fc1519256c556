/* The dialer on real loopback sockets: TCP and unix, refused and missing
 * peers, TLS with ALPN against a local TLS server, and the deadline against
 * a server that never answers the handshake. Every test ends with the loop
 * closing cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reactor/dial.h"
#include "reactor/xalloc.h"

#define FIX(name) FIXTURES "/tls/" name

typedef struct world {
  uv_loop_t loop;
  uv_tcp_t tcp_srv;
  uv_pipe_t pipe_srv;
  bool tcp_up, pipe_up;
  int port;
  char sock[108];
  /* the accepted connection */
  nl_io_t peer;
  bool peer_open, peer_ready;
  nl_tls_config_t *srv_tls; /* NULL: the peer stays silent (plain TCP) */
  /* the client */
  nl_dial_t dial;
  bool dial_open;
  int results;
  int code;
  char msg[256];
  char alpn[32];
  bool dial_closed;
  char got[64]; /* plaintext the client read once connected */
} world_t;

/* ---- the server side -------------------------------------------------------- */

static void peer_ready(nl_io_t *io) {
  world_t *w = container_of(io, world_t, peer);
  w->peer_ready = true;
  nl_err_t *err = NULL;
  nl_io_write(io, "hi", 2, &err);
  nl_err_free(&err);
}
static void peer_data(nl_io_t *io, const char *p, size_t n) {}
static void peer_end(nl_io_t *io, nl_err_t *err) {}
static const nl_io_cbs_t peer_cbs = {peer_ready, peer_data, peer_end, NULL};

static void peer_closed(uv_handle_t *h) {
  world_t *w = h->data;
  nl_io_release(&w->peer);
}

static void on_conn(uv_stream_t *srv, int status) {
  world_t *w = srv->data;
  assert_int_equal(status, 0);
  assert_false(w->peer_open);
  if (srv == (uv_stream_t *)&w->tcp_srv) nl_io_init(&w->peer, &w->loop, &peer_cbs);
  else nl_io_init_pipe(&w->peer, &w->loop, &peer_cbs);
  w->peer.tcp.data = w;
  w->peer_open = true;
  assert_int_equal(uv_accept(srv, (uv_stream_t *)&w->peer.tcp), 0);
  if (srv == (uv_stream_t *)&w->tcp_srv && !w->srv_tls) return; /* silent */
  if (w->srv_tls) nl_io_set_tls(&w->peer, nl_tls_new(w->srv_tls, NULL));
  nl_err_t *err = NULL;
  assert_int_equal(nl_io_start(&w->peer, &err), 0);
  if (!w->srv_tls) peer_ready(&w->peer);
}

static void world_init(world_t *w) {
  memset(w, 0, sizeof *w);
  assert_int_equal(uv_loop_init(&w->loop), 0);
}

static void listen_tcp(world_t *w) {
  uv_tcp_init(&w->loop, &w->tcp_srv);
  w->tcp_srv.data = w;
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", 0, &a);
  assert_int_equal(uv_tcp_bind(&w->tcp_srv, (struct sockaddr *)&a, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&w->tcp_srv, 8, on_conn), 0);
  struct sockaddr_storage ss;
  int len = sizeof ss;
  uv_tcp_getsockname(&w->tcp_srv, (struct sockaddr *)&ss, &len);
  w->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  w->tcp_up = true;
}

static void listen_unix(world_t *w) {
  snprintf(w->sock, sizeof w->sock, "/tmp/nl-dial-test-%d.sock", (int)getpid());
  unlink(w->sock);
  uv_pipe_init(&w->loop, &w->pipe_srv, 0);
  w->pipe_srv.data = w;
  assert_int_equal(uv_pipe_bind(&w->pipe_srv, w->sock), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&w->pipe_srv, 8, on_conn), 0);
  w->pipe_up = true;
}

/* ---- the client side -------------------------------------------------------- */

static void cli_data(nl_io_t *io, const char *p, size_t n) {
  world_t *w = container_of(io, world_t, dial.io);
  size_t have = strlen(w->got);
  snprintf(w->got + have, sizeof w->got - have, "%.*s", (int)n, p);
  uv_stop(&w->loop);
}
static void cli_end(nl_io_t *io, nl_err_t *err) { uv_stop(&container_of(io, world_t, dial.io)->loop); }
static const nl_io_cbs_t cli_cbs = {.on_data = cli_data, .on_end = cli_end};

static void on_dialed(nl_dial_t *d, const nl_err_t *err) {
  world_t *w = d->data;
  w->results++;
  w->code = err ? err->code : 0;
  snprintf(w->msg, sizeof w->msg, "%s", err ? err->msg : "");
  const char *alpn = err || !d->io.tls ? NULL : nl_tls_alpn(d->io.tls);
  snprintf(w->alpn, sizeof w->alpn, "%s", alpn ? alpn : "");
  uv_stop(&w->loop);
}

static void dial(world_t *w, const nl_dial_opts_t *o) {
  nl_dial_opts_t opts = *o;
  opts.io_cbs = &cli_cbs;
  w->dial.data = w;
  nl_dial_start(&w->dial, &w->loop, &opts, on_dialed);
  w->dial_open = true;
  assert_int_equal(w->results, 0); /* never from inside nl_dial_start */
  uv_run(&w->loop, UV_RUN_DEFAULT);
}

static void dial_closed(nl_dial_t *d) { ((world_t *)d->data)->dial_closed = true; }

static void world_end(world_t *w) {
  if (w->dial_open) nl_dial_close(&w->dial, dial_closed);
  if (w->peer_open) nl_io_close(&w->peer, peer_closed);
  if (w->tcp_up) uv_close((uv_handle_t *)&w->tcp_srv, NULL);
  if (w->pipe_up) uv_close((uv_handle_t *)&w->pipe_srv, NULL);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  if (w->dial_open) assert_true(w->dial_closed);
  assert_int_equal(uv_loop_close(&w->loop), 0);
  if (w->pipe_up) unlink(w->sock);
  nl_tls_config_unref(w->srv_tls);
}

static nl_tls_config_t *tls_cfg(bool server, const char *const *alpn) {
  nl_tls_config_t *c = NULL;
  nl_err_t *err = NULL;
  nl_tls_config_opts_t o = {.server = server, .verify = !server,
                            .ca_file = server ? NULL : FIX("ca.crt"),
                            .cert_file = server ? FIX("server.crt") : NULL,
                            .key_file = server ? FIX("server.key") : NULL, .alpn = alpn};
  if (nl_tls_config_new(&c, &o, &err) < 0) fail_msg("%s", nl_err_msg(err));
  return c;
}

/* ---- tests ----------------------------------------------------------------- */

static void tcp_connects(void **state) {
  world_t w;
  world_init(&w);
  listen_tcp(&w);
  dial(&w, &(nl_dial_opts_t){.host = "127.0.0.1", .port = w.port, .timeout_ms = 5000});
  assert_int_equal(w.results, 1);
  assert_string_equal(w.msg, "");
  char want[64];
  snprintf(want, sizeof want, "127.0.0.1:%d", w.port);
  assert_string_equal(w.dial.peer, want);
  world_end(&w);
}

static void tcp_refused(void **state) {
  world_t w;
  world_init(&w);
  listen_tcp(&w); /* take a free port, then close it */
  int port = w.port;
  uv_close((uv_handle_t *)&w.tcp_srv, NULL);
  w.tcp_up = false;
  uv_run(&w.loop, UV_RUN_DEFAULT);
  dial(&w, &(nl_dial_opts_t){.host = "127.0.0.1", .port = port});
  assert_int_equal(w.results, 1);
  assert_int_equal(w.code, ECONNREFUSED);
  char want[128];
  snprintf(want, sizeof want, "dial tcp 127.0.0.1:%d: connect: connection refused", port);
  assert_string_equal(w.msg, want);
  world_end(&w);
}

static void bad_address(void **state) {
  world_t w;
  world_init(&w);
  dial(&w, &(nl_dial_opts_t){.host = "", .port = 80});
  assert_int_equal(w.results, 1);
  assert_int_equal(w.code, NL_EINVAL);
  world_end(&w);
}

static void unix_connects_and_reads(void **state) {
  world_t w;
  world_init(&w);
  listen_unix(&w);
  dial(&w, &(nl_dial_opts_t){.unix_path = w.sock, .timeout_ms = 5000});
  assert_int_equal(w.results, 1);
  assert_string_equal(w.msg, "");
  assert_string_equal(w.dial.peer, w.sock);
  /* Once connected the owner's callbacks get the stream. */
  if (!w.got[0]) uv_run(&w.loop, UV_RUN_DEFAULT);
  assert_string_equal(w.got, "hi");
  world_end(&w);
}

static void unix_missing(void **state) {
  world_t w;
  world_init(&w);
  dial(&w, &(nl_dial_opts_t){.unix_path = "/tmp/nl-dial-test-nothing-here.sock"});
  assert_int_equal(w.results, 1);
  assert_int_equal(w.code, ENOENT);
  assert_string_equal(w.msg, "dial unix /tmp/nl-dial-test-nothing-here.sock: connect: "
                             "no such file or directory");
  world_end(&w);
}

/* A path as long as sun_path takes (a device plugin's under a deep root dir)
 * is named whole in the error. */
static void unix_long_path_named_whole(void **state) {
  world_t w;
  world_init(&w);
  char path[108];
  memset(path, 'p', sizeof path - 1);
  memcpy(path, "/tmp/", 5);
  path[sizeof path - 1] = 0;
  dial(&w, &(nl_dial_opts_t){.unix_path = path});
  assert_int_equal(w.results, 1);
  assert_int_equal(w.code, ENOENT);
  char want[256];
  snprintf(want, sizeof want, "dial unix %s: connect: no such file or directory", path);
  assert_string_equal(w.msg, want);
  world_end(&w);
}

static void tls_with_alpn(void **state) {
  static const char *const srv_alpn[] = {"h2", "http/1.1", NULL};
  static const char *const h2[] = {"h2", NULL};
  static const char *const h1[] = {"http/1.1", NULL};
  for (int i = 0; i < 2; i++) {
    world_t w;
    world_init(&w);
    w.srv_tls = tls_cfg(true, srv_alpn);
    listen_tcp(&w);
    nl_tls_config_t *cli = tls_cfg(false, i == 0 ? h2 : h1);
    dial(&w, &(nl_dial_opts_t){.host = "127.0.0.1", .port = w.port, .tls = cli,
                               .server_name = "localhost", .timeout_ms = 5000});
    nl_tls_config_unref(cli); /* the dialer holds its own reference */
    assert_int_equal(w.results, 1);
    assert_string_equal(w.msg, "");
    assert_string_equal(w.alpn, i == 0 ? "h2" : "http/1.1");
    if (!w.got[0]) uv_run(&w.loop, UV_RUN_DEFAULT);
    assert_string_equal(w.got, "hi"); /* plaintext through TLS */
    world_end(&w);
  }
}

static void tls_wrong_name(void **state) {
  world_t w;
  world_init(&w);
  w.srv_tls = tls_cfg(true, NULL);
  listen_tcp(&w);
  nl_tls_config_t *cli = tls_cfg(false, NULL);
  dial(&w, &(nl_dial_opts_t){.host = "127.0.0.1", .port = w.port, .tls = cli,
                             .server_name = "not-the-server.example", .timeout_ms = 5000});
  nl_tls_config_unref(cli);
  assert_int_equal(w.results, 1);
  assert_int_equal(w.code, EPROTO);
  assert_non_null(strstr(w.msg, "certificate is valid for localhost, not not-the-server.example"));
  world_end(&w);
}

static void handshake_deadline(void **state) {
  world_t w;
  world_init(&w);
  listen_tcp(&w); /* accepts, never answers */
  nl_tls_config_t *cli = tls_cfg(false, NULL);
  uint64_t t0 = uv_now(&w.loop);
  dial(&w, &(nl_dial_opts_t){.host = "127.0.0.1", .port = w.port, .tls = cli,
                             .server_name = "localhost", .timeout_ms = 200});
  nl_tls_config_unref(cli);
  assert_int_equal(w.results, 1);
  assert_int_equal(w.code, NL_ETIMEOUT);
  assert_string_equal(w.msg, "net/http: TLS handshake timeout");
  assert_true(uv_now(&w.loop) - t0 >= 190);
  world_end(&w);
}

/* Closed while the lookup or connect is under way: no callback, no leak. */
static void close_while_dialing(void **state) {
  world_t w;
  world_init(&w);
  listen_tcp(&w);
  w.dial.data = &w;
  nl_dial_start(&w.dial, &w.loop,
                &(nl_dial_opts_t){.host = "127.0.0.1", .port = w.port, .io_cbs = &cli_cbs},
                on_dialed);
  w.dial_open = true;
  world_end(&w);
  assert_int_equal(w.results, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tcp_connects),
      cmocka_unit_test(tcp_refused),
      cmocka_unit_test(bad_address),
      cmocka_unit_test(unix_connects_and_reads),
      cmocka_unit_test(unix_missing),
      cmocka_unit_test(unix_long_path_named_whole),
      cmocka_unit_test(tls_with_alpn),
      cmocka_unit_test(tls_wrong_name),
      cmocka_unit_test(handshake_deadline),
      cmocka_unit_test(close_while_dialing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
