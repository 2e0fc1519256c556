/* The HTTP/2 connection driver on a real unix socket, against an nghttp2
 * server session in the same loop: connect and exchange, the keepalive PING
 * that gets no ACK, reconnecting with back-off, GOAWAY and draining, one
 * closed callback; every test ends with the loop closing cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reactor/h2conn.h"
#include "reactor/xalloc.h"

enum mode { ANSWER, SILENT, GOAWAY_FIRST, HANG_UP };

typedef struct srv_conn {
  uv_pipe_t pipe;
  nghttp2_session *h2;
  struct server *srv;
  bool closing;
} srv_conn_t;

typedef struct server {
  uv_pipe_t listener;
  bool listening;
  char path[108];
  enum mode mode;
  int accepted, requests;
  srv_conn_t *conn;
} server_t;

static uv_loop_t loop;

/* ---- the server ------------------------------------------------------------ */

static void srv_conn_closed(uv_handle_t *h) { free(h->data); }

static void srv_conn_close(srv_conn_t *c) {
  if (c->closing) return;
  c->closing = true;
  if (c->srv->conn == c) c->srv->conn = NULL;
  nghttp2_session_del(c->h2);
  uv_close((uv_handle_t *)&c->pipe, srv_conn_closed);
}

static void written(uv_write_t *w, int status) {
  (void)status;
  free(w->data);
  free(w);
}

static void srv_flush(srv_conn_t *c) {
  const uint8_t *d;
  ssize_t n;
  while (!c->closing && (n = nghttp2_session_mem_send(c->h2, &d)) > 0) {
    uv_write_t *w = malloc(sizeof *w);
    w->data = malloc((size_t)n);
    memcpy(w->data, d, (size_t)n);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    uv_write(w, (uv_stream_t *)&c->pipe, &b, 1, written);
  }
}

static ssize_t srv_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)s, (void)id, (void)length, (void)src, (void)ud;
  memcpy(buf, "hello", 5);
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return 5;
}

static int srv_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  srv_conn_t *c = ud;
  if (f->hd.type != NGHTTP2_HEADERS || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
  c->srv->requests++;
  if (c->srv->mode == GOAWAY_FIRST)
    nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR, NULL, 0);
  nghttp2_nv h[] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0}};
  nghttp2_data_provider prd = {.read_callback = srv_body};
  nghttp2_submit_response(s, f->hd.stream_id, h, 1, &prd);
  return 0;
}

static void srv_alloc(uv_handle_t *h, size_t n, uv_buf_t *b) {
  (void)h;
  *b = uv_buf_init(malloc(n), (unsigned)n);
}

static void srv_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  srv_conn_t *c = s->data;
  if (n < 0) srv_conn_close(c);
  else if (n > 0 && !c->closing && c->srv->mode != SILENT) {
    nghttp2_session_mem_recv(c->h2, (uint8_t *)b->base, (size_t)n);
    srv_flush(c);
  }
  free(b->base);
}

static void srv_accept(uv_stream_t *l, int status) {
  assert_int_equal(status, 0);
  server_t *srv = l->data;
  srv_conn_t *c = calloc(1, sizeof *c);
  c->srv = srv;
  uv_pipe_init(&loop, &c->pipe, 0);
  c->pipe.data = c;
  assert_int_equal(uv_accept(l, (uv_stream_t *)&c->pipe), 0);
  srv->accepted++;
  srv->conn = c;
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_frame);
  nghttp2_session_server_new(&c->h2, cb, c);
  nghttp2_session_callbacks_del(cb);
  nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, NULL, 0);
  if (srv->mode == HANG_UP) {
    srv_conn_close(c);
    return;
  }
  uv_read_start((uv_stream_t *)&c->pipe, srv_alloc, srv_read);
  srv_flush(c);
}

static void srv_listen(server_t *srv) {
  unlink(srv->path);
  uv_pipe_init(&loop, &srv->listener, 0);
  srv->listener.data = srv;
  assert_int_equal(uv_pipe_bind(&srv->listener, srv->path), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&srv->listener, 8, srv_accept), 0);
  srv->listening = true;
}

static void srv_init(server_t *srv, enum mode mode) {
  memset(srv, 0, sizeof *srv);
  snprintf(srv->path, sizeof srv->path, "/tmp/nl-h2conn-%d.sock", (int)getpid());
  srv->mode = mode;
}

static void srv_stop(server_t *srv) {
  if (srv->conn) srv_conn_close(srv->conn);
  if (srv->listening) uv_close((uv_handle_t *)&srv->listener, NULL);
  srv->listening = false;
  unlink(srv->path);
}

/* ---- the owner -------------------------------------------------------------- */

typedef struct owner {
  nl_h2conn_t conn;
  server_t *srv;
  int ready, lost, goaways, closed, idles, turns;
  char lost_msg[256];
  bool lost_null;
  bool connected_at_lost;
  /* one request */
  nl_h2_stream_t st;
  bool submit_on_ready;
  int st_closes;
  bool st_complete;
  size_t got;
  bool listen_on_lost; /* the server comes up after the first failed dial */
  bool close_on_lost;
} owner_t;

static void st_data(nl_h2_stream_t *h, const uint8_t *d, size_t n) {
  (void)d;
  container_of(h, owner_t, st)->got += n;
}

static void st_close(nl_h2_stream_t *h, uint32_t code, bool refused) {
  (void)code, (void)refused;
  owner_t *o = container_of(h, owner_t, st);
  o->st_closes++;
  o->st_complete = h->complete;
}

static const nl_h2_stream_cbs_t st_cbs = {.on_data = st_data, .on_close = st_close};

static void submit(owner_t *o) {
  nghttp2_nv nv[] = {{(uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0},
                     {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
                     {(uint8_t *)":path", (uint8_t *)"/", 5, 1, 0},
                     {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0}};
  o->st.cbs = &st_cbs;
  assert_int_equal(nl_h2_submit(o->conn.h2, &o->st, nv, 4, NULL, 0), 0);
  nl_h2conn_flush(&o->conn);
}

static void on_ready(nl_h2conn_t *c, bool h2) {
  owner_t *o = c->data;
  assert_true(h2);
  assert_true(nl_h2conn_ready(c));
  o->ready++;
  if (o->submit_on_ready) submit(o);
}

static void on_lost(nl_h2conn_t *c, const nl_err_t *err) {
  owner_t *o = c->data;
  o->lost++;
  o->lost_null = !err;
  o->connected_at_lost = c->connected;
  snprintf(o->lost_msg, sizeof o->lost_msg, "%s", err ? err->msg : "");
  if (c->h2) { /* the owner ends its streams */
    nl_h2_stream_t *h;
    while ((h = nl_h2_first_stream(c->h2))) nl_h2_stream_detach(h);
  }
  if (o->listen_on_lost && !o->srv->listening) srv_listen(o->srv);
  if (o->close_on_lost) nl_h2conn_close(c);
}

static void on_goaway(nl_h2conn_t *c) {
  owner_t *o = c->data;
  o->goaways++;
  assert_int_equal(c->state, NL_H2CONN_DRAINING);
}

static void on_idle(nl_h2conn_t *c) { ((owner_t *)c->data)->idles++; }
static void on_turn(nl_h2conn_t *c) { ((owner_t *)c->data)->turns++; }
static void on_closed(nl_h2conn_t *c) { ((owner_t *)c->data)->closed++; }

static const nl_h2conn_cbs_t cbs = {.ready = on_ready, .lost = on_lost, .goaway = on_goaway,
                                    .idle = on_idle, .turn = on_turn, .closed = on_closed};

static void owner_start(owner_t *o, server_t *srv, nl_h2conn_opts_t *opts) {
  memset(o, 0, sizeof *o);
  o->srv = srv;
  opts->dial.unix_path = srv->path;
  o->conn.data = o;
  nl_h2conn_init(&o->conn, &loop, opts, &cbs);
  nl_h2conn_start(&o->conn);
}

/* Runs the loop until cond or about two seconds. */
#define RUN_UNTIL(cond)                                                       \
  do {                                                                        \
    for (int i_ = 0; i_ < 2000 && !(cond); i_++) {                            \
      uv_run(&loop, UV_RUN_NOWAIT);                                           \
      usleep(1000);                                                           \
    }                                                                         \
    assert_true(cond);                                                        \
  } while (0)

static void finish(owner_t *o, server_t *srv) {
  nl_h2conn_close(&o->conn);
  srv_stop(srv);
  RUN_UNTIL(o->closed == 1);
  assert_int_equal(o->conn.state, NL_H2CONN_STOPPED);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(o->closed, 1);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static int setup(void **state) {
  (void)state;
  return uv_loop_init(&loop);
}

/* ---- tests ------------------------------------------------------------------- */

static void connect_exchange(void **state) {
  (void)state;
  server_t srv;
  srv_init(&srv, ANSWER);
  srv_listen(&srv);
  owner_t o;
  nl_h2conn_opts_t opts = {.words = NL_H2CONN_WORDS_GRPC};
  owner_start(&o, &srv, &opts);
  o.submit_on_ready = true;
  assert_int_equal(o.conn.state, NL_H2CONN_DIALING);
  assert_int_equal(o.ready, 0); /* never from inside start */
  RUN_UNTIL(o.st_closes == 1);
  assert_true(o.st_complete);
  assert_int_equal(o.got, 5);
  assert_int_equal(srv.requests, 1);
  assert_int_equal(o.ready, 1);
  nl_h2conn_defer(&o.conn);
  RUN_UNTIL(o.turns == 1);
  /* the server hangs up: lost, in grpc-go's words */
  o.close_on_lost = true;
  srv_conn_close(srv.conn);
  RUN_UNTIL(o.lost == 1);
  assert_string_equal(o.lost_msg, "error reading from server: EOF");
  assert_true(o.connected_at_lost);
  finish(&o, &srv);
}

static void ping_timeout(void **state) {
  (void)state;
  server_t srv;
  srv_init(&srv, SILENT);
  srv_listen(&srv);
  owner_t o;
  nl_h2conn_opts_t opts = {.words = NL_H2CONN_WORDS_HTTP2, .ping_after_ms = 20,
                           .ping_timeout_ms = 30};
  owner_start(&o, &srv, &opts);
  o.close_on_lost = true;
  RUN_UNTIL(o.ready == 1);
  RUN_UNTIL(o.lost == 1);
  assert_string_equal(o.lost_msg, "http2: client connection lost");
  finish(&o, &srv);
}

/* Pings only with streams open: an idle connection to a silent peer stays. */
static void ping_only_active(void **state) {
  (void)state;
  server_t srv;
  srv_init(&srv, SILENT);
  srv_listen(&srv);
  owner_t o;
  nl_h2conn_opts_t opts = {.words = NL_H2CONN_WORDS_GRPC, .ping_after_ms = 10,
                           .ping_timeout_ms = 10, .ping_only_active = true};
  owner_start(&o, &srv, &opts);
  RUN_UNTIL(o.ready == 1);
  for (int i = 0; i < 100; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
  assert_int_equal(o.lost, 0);
  o.close_on_lost = true;
  submit(&o);
  RUN_UNTIL(o.lost == 1);
  assert_string_equal(o.lost_msg, "keepalive ping failed to receive ACK within timeout");
  finish(&o, &srv);
}

static void reconnect_backoff(void **state) {
  (void)state;
  server_t srv;
  srv_init(&srv, ANSWER);
  unlink(srv.path);
  owner_t o;
  nl_h2conn_opts_t opts = {.words = NL_H2CONN_WORDS_GRPC, .reconnect = true,
                           .backoff_initial_ms = 30, .backoff_max_ms = 60};
  owner_start(&o, &srv, &opts);
  o.listen_on_lost = true;
  RUN_UNTIL(o.lost == 1);
  assert_false(o.connected_at_lost);
  assert_non_null(strstr(o.lost_msg, "dial unix"));
  uint64_t t0 = uv_now(&loop);
  RUN_UNTIL(o.conn.state == NL_H2CONN_BACKOFF);
  RUN_UNTIL(o.ready == 1);
  assert_true(uv_now(&loop) - t0 >= 20); /* after the back-off (30 ms, jitter 0.2) */
  assert_int_equal(srv.accepted, 1);
  /* a ready connection lost: dialed again at once */
  srv_conn_close(srv.conn);
  RUN_UNTIL(o.ready == 2);
  assert_int_equal(o.lost, 2);
  assert_string_equal(o.lost_msg, "error reading from server: EOF");
  assert_int_equal(srv.accepted, 2);
  finish(&o, &srv);
}

static void goaway_drain(void **state) {
  (void)state;
  server_t srv;
  srv_init(&srv, GOAWAY_FIRST);
  srv_listen(&srv);
  owner_t o;
  nl_h2conn_opts_t opts = {.words = NL_H2CONN_WORDS_HTTP2};
  owner_start(&o, &srv, &opts);
  o.submit_on_ready = true;
  RUN_UNTIL(o.lost == 1);
  assert_int_equal(o.goaways, 1);
  assert_int_equal(o.st_closes, 1); /* the open stream finished first */
  assert_true(o.st_complete);
  assert_true(o.lost_null); /* drained: no error in Go's http2 words */
  RUN_UNTIL(o.conn.state == NL_H2CONN_IDLE);
  assert_null(o.conn.h2);
  finish(&o, &srv);
}

/* A local drain without streams is lost at once; an idle connection tells. */
static void drain_and_idle(void **state) {
  (void)state;
  server_t srv;
  srv_init(&srv, ANSWER);
  srv_listen(&srv);
  owner_t o;
  nl_h2conn_opts_t opts = {.words = NL_H2CONN_WORDS_GRPC, .idle_ms = 20};
  owner_start(&o, &srv, &opts);
  RUN_UNTIL(o.idles == 1);
  assert_int_equal(o.conn.state, NL_H2CONN_READY);
  nl_h2conn_drain(&o.conn);
  assert_int_equal(o.lost, 1);
  assert_string_equal(o.lost_msg, "server sent GOAWAY");
  finish(&o, &srv);
}

/* Closing while dialing, and after a hang-up without reconnect: one closed
 * callback each time, no other. */
static void close_counts(void **state) {
  (void)state;
  server_t srv;
  srv_init(&srv, HANG_UP);
  srv_listen(&srv);
  owner_t o;
  nl_h2conn_opts_t opts = {.words = NL_H2CONN_WORDS_HTTP2};
  owner_start(&o, &srv, &opts);
  nl_h2conn_close(&o.conn);
  nl_h2conn_close(&o.conn); /* a no-op */
  RUN_UNTIL(o.closed == 1);
  assert_int_equal(o.ready + o.lost, 0);
  owner_start(&o, &srv, &opts);
  RUN_UNTIL(o.lost == 1);
  assert_string_equal(o.lost_msg, "unexpected EOF");
  RUN_UNTIL(o.conn.state == NL_H2CONN_IDLE);
  finish(&o, &srv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(connect_exchange, setup),
      cmocka_unit_test_setup(ping_timeout, setup),
      cmocka_unit_test_setup(ping_only_active, setup),
      cmocka_unit_test_setup(reconnect_backoff, setup),
      cmocka_unit_test_setup(goaway_drain, setup),
      cmocka_unit_test_setup(drain_and_idle, setup),
      cmocka_unit_test_setup(close_counts, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
