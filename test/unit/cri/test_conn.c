/* The CRI connection on a real unix socket, against a small in-test gRPC server
 * (nghttp2 server session on a uv_pipe_t in the same loop): asynchronous
 * completion, deadlines, waiting for a connection, reconnecting, stopping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/runtime.h"
#include "reactor/buf.h"

/* SILENT_ONCE: the first connection is accepted and never served (as a proxy
 * that holds it until its far side comes), the next ones answer. */
enum mode { ANSWER, HANG, CLOSE_ONCE, SILENT_ONCE };

typedef struct srv_conn {
  uv_pipe_t pipe;
  nghttp2_session *h2;
  struct server *srv;
  bool closing;
} srv_conn_t;

typedef struct server {
  uv_pipe_t listener;
  char path[108];
  enum mode mode;
  int requests;
  int rsts;
  int accepted;
  srv_conn_t *conn;
  srv_conn_t *silent;  /* SILENT_ONCE's first connection */
  bool bdp_pings;      /* PING with each answer while none is outstanding, as grpc-go */
  bool ping_out;
  int pings, ping_acks, bad_acks;
  uint8_t resp[256];
  size_t resp_len, resp_off;
} server_t;

static uv_loop_t loop;

static void conn_closed(uv_handle_t *h) { free(h->data); }

static void conn_close(srv_conn_t *c) {
  if (c->closing) return;
  c->closing = true;
  if (c->srv->conn == c) c->srv->conn = NULL;
  nghttp2_session_del(c->h2);
  c->h2 = NULL;
  uv_close((uv_handle_t *)&c->pipe, conn_closed);
}

static void written(uv_write_t *w, int status) {
  free(w->data);
  free(w);
}

static void conn_flush(srv_conn_t *c) {
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

static ssize_t srv_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *ud) {
  server_t *srv = ((srv_conn_t *)ud)->srv;
  memcpy(buf, srv->resp, srv->resp_len);
  *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
  nghttp2_nv tr[] = {{(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, 0}};
  nghttp2_submit_trailer(s, id, tr, 1);
  return (ssize_t)srv->resp_len;
}

static int srv_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  srv_conn_t *c = ud;
  if (f->hd.type == NGHTTP2_RST_STREAM) c->srv->rsts++;
  if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK)) {
    char want[16];
    snprintf(want, sizeof want, "bdp%05d", c->srv->pings);
    if (!c->srv->ping_out || memcmp(f->ping.opaque_data, want, 8)) c->srv->bad_acks++;
    c->srv->ping_out = false;
    c->srv->ping_acks++;
  }
  if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    c->srv->requests++;
    if (c->srv->mode == ANSWER) {
      nghttp2_nv h[] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
                        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0}};
      nghttp2_data_provider prd = {.read_callback = srv_read};
      nghttp2_submit_response(s, f->hd.stream_id, h, 2, &prd);
      if (c->srv->bdp_pings && !c->srv->ping_out) {
        char payload[16];
        snprintf(payload, sizeof payload, "bdp%05d", ++c->srv->pings);
        nghttp2_submit_ping(s, NGHTTP2_FLAG_NONE, (const uint8_t *)payload);
        c->srv->ping_out = true;
      }
    }
  }
  return 0;
}

static void srv_alloc(uv_handle_t *h, size_t n, uv_buf_t *b) {
  static char buf[65536];
  *b = uv_buf_init(buf, sizeof buf);
}

static void srv_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  srv_conn_t *c = s->data;
  if (n < 0) {
    conn_close(c);
    return;
  }
  if (n == 0 || c->closing) return;
  nghttp2_session_mem_recv(c->h2, (uint8_t *)b->base, (size_t)n);
  if (c->srv->mode == CLOSE_ONCE && c->srv->requests > 0) {
    c->srv->mode = ANSWER;
    conn_close(c);
    return;
  }
  conn_flush(c);
}

static void on_conn(uv_stream_t *l, int status) {
  server_t *srv = l->data;
  srv_conn_t *c = calloc(1, sizeof *c);
  c->srv = srv;
  uv_pipe_init(&loop, &c->pipe, 0);
  c->pipe.data = c;
  assert_int_equal(uv_accept(l, (uv_stream_t *)&c->pipe), 0);
  srv->accepted++;
  if (srv->mode == SILENT_ONCE) {
    srv->mode = ANSWER;
    srv->silent = c;
    return;
  }
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_frame);
  nghttp2_option *opt;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_ping_ack(opt, 1); /* the client never pings here */
  nghttp2_session_server_new2(&c->h2, cb, c, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, NULL, 0);
  srv->conn = c;
  uv_read_start((uv_stream_t *)&c->pipe, srv_alloc, srv_on_read);
  conn_flush(c);
}

static void server_start(server_t *srv, enum mode mode) {
  memset(srv, 0, sizeof *srv);
  snprintf(srv->path, sizeof srv->path, "/tmp/nanolet-test-cri-%d.sock", (int)getpid());
  unlink(srv->path);
  srv->mode = mode;
  Runtime__V1__VersionResponse v = RUNTIME__V1__VERSION_RESPONSE__INIT;
  v.runtime_name = "fake";
  v.runtime_api_version = "v1";
  srv->resp_len = nl_grpc_frame_size(&v.base);
  nl_grpc_frame(&v.base, srv->resp);
  uv_pipe_init(&loop, &srv->listener, 0);
  srv->listener.data = srv;
  assert_int_equal(uv_pipe_bind(&srv->listener, srv->path), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&srv->listener, 16, on_conn), 0);
}

static void server_stop(server_t *srv) {
  if (srv->conn) conn_close(srv->conn);
  if (srv->silent) uv_close((uv_handle_t *)&srv->silent->pipe, conn_closed);
  uv_close((uv_handle_t *)&srv->listener, NULL);
  unlink(srv->path);
}

/* ---- client helpers ---- */

typedef struct res {
  int calls;
  int code;
  char msg[256];
  char runtime_name[32];
} res_t;

static void on_version(const nl_grpc_status_t *st, Runtime__V1__VersionResponse *resp, void *ctx) {
  res_t *r = ctx;
  r->calls++;
  r->code = st->code;
  snprintf(r->msg, sizeof r->msg, "%s", st->message);
  if (resp) snprintf(r->runtime_name, sizeof r->runtime_name, "%s", resp->runtime_name);
  else assert_int_not_equal(st->code, NL_GRPC_OK);
}

static bool stopped;
static void on_stopped(nl_cri_client_t *c) { stopped = true; }

static void version(nl_cri_client_t *c, res_t *r) {
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  nl_cri_version(c, &req, on_version, r);
  assert_int_equal(r->calls, 0); /* never from inside the call */
}

static void run_until(int *counter, int want) {
  for (int i = 0; i < 100000 && *counter < want; i++) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(*counter, want);
}

static void finish(nl_cri_client_t *c, server_t *srv) {
  stopped = false;
  nl_cri_client_stop(c, on_stopped);
  if (srv) server_stop(srv);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(stopped);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static int setup(void **state) { return uv_loop_init(&loop); }

/* ---- tests ---- */

static void unary_call(void **state) {
  server_t srv;
  server_start(&srv, ANSWER);
  nl_cri_client_t c;
  char ep[128];
  snprintf(ep, sizeof ep, "unix://%s", srv.path);
  assert_int_equal(nl_cri_client_init(&c, &loop, ep, NULL, NULL), 0);
  res_t r = {0}, r2 = {0};
  version(&c, &r);  /* made while connecting: waits for the connection */
  run_until(&r.calls, 1);
  assert_int_equal(r.code, NL_GRPC_OK);
  assert_string_equal(r.runtime_name, "fake");
  assert_true(nl_cri_client_ready(&c));
  version(&c, &r2); /* made while ready */
  run_until(&r2.calls, 1);
  assert_int_equal(r2.code, NL_GRPC_OK);
  assert_int_equal(nl_cri_client_pending(&c), 0);
  finish(&c, &srv);
  assert_int_equal(r.calls, 1);
}

static void deadline_fires(void **state) {
  server_t srv;
  server_start(&srv, HANG);
  nl_cri_client_t c;
  nl_cri_opts_t o = {.timeout_ms = 50};
  assert_int_equal(nl_cri_client_init(&c, &loop, srv.path, &o, NULL), 0); /* bare path */
  res_t r = {0};
  uint64_t t0 = uv_now(&loop);
  version(&c, &r);
  run_until(&r.calls, 1);
  assert_int_equal(r.code, NL_GRPC_DEADLINE_EXCEEDED);
  assert_string_equal(r.msg, "context deadline exceeded");
  assert_true(uv_now(&loop) - t0 >= 50);
  run_until(&srv.rsts, 1); /* the server is told: RST_STREAM(CANCEL) */
  finish(&c, &srv);
}

static void no_server_waits_then_unavailable(void **state) {
  nl_cri_client_t c;
  nl_cri_opts_t o = {.connect_wait_ms = 100, .backoff_initial_ms = 20, .backoff_max_ms = 40};
  assert_int_equal(nl_cri_client_init(&c, &loop, "unix:///tmp/nanolet-test-cri-absent.sock", &o,
                                       NULL), 0);
  res_t r = {0};
  version(&c, &r);
  run_until(&r.calls, 1);
  assert_int_equal(r.code, NL_GRPC_UNAVAILABLE);
  assert_non_null(strstr(r.msg, "dial unix /tmp/nanolet-test-cri-absent.sock"));
  finish(&c, NULL);
}

static void reconnects_after_loss(void **state) {
  server_t srv;
  server_start(&srv, CLOSE_ONCE);
  nl_cri_client_t c;
  assert_int_equal(nl_cri_client_init(&c, &loop, srv.path, NULL, NULL), 0);
  res_t r = {0};
  version(&c, &r);
  run_until(&r.calls, 1);
  /* The server read the request and hung up: the call may have run. */
  assert_int_equal(r.code, NL_GRPC_UNAVAILABLE);
  res_t r2 = {0};
  version(&c, &r2);
  run_until(&r2.calls, 1);
  assert_int_equal(r2.code, NL_GRPC_OK);
  assert_int_equal(srv.accepted, 2);
  finish(&c, &srv);
}

static void count_fire(uv_timer_t *t) { ++*(int *)t->data; }

/* A socket that connects and is never served: the call fails UNAVAILABLE at
 * the handshake timeout, not at its deadline, and the next call goes on a new
 * connection. Before, every call waited for its deadline on the same one. */
static void silent_server_is_dialed_again(void **state) {
  server_t srv;
  server_start(&srv, SILENT_ONCE);
  nl_cri_client_t c;
  nl_cri_opts_t o = {.timeout_ms = 10000, .handshake_timeout_ms = 50};
  assert_int_equal(nl_cri_client_init(&c, &loop, srv.path, &o, NULL), 0);
  res_t r = {0};
  uint64_t t0 = uv_now(&loop);
  version(&c, &r);
  run_until(&r.calls, 1);
  assert_int_equal(r.code, NL_GRPC_UNAVAILABLE);
  assert_string_equal(r.msg, "connection error: timed out waiting for server handshake");
  assert_true(uv_now(&loop) - t0 >= 50 && uv_now(&loop) - t0 < 5000);
  res_t r2 = {0};
  version(&c, &r2);
  run_until(&r2.calls, 1);
  assert_int_equal(r2.code, NL_GRPC_OK);
  assert_int_equal(srv.accepted, 2);
  /* a served connection outlives the handshake timeout many times over */
  uv_timer_t t;
  int fired = 0;
  uv_timer_init(&loop, &t);
  t.data = &fired;
  uv_timer_start(&t, count_fire, 300, 0);
  run_until(&fired, 1);
  uv_close((uv_handle_t *)&t, NULL);
  res_t r3 = {0};
  version(&c, &r3);
  run_until(&r3.calls, 1);
  assert_int_equal(r3.code, NL_GRPC_OK);
  assert_int_equal(srv.accepted, 2);
  finish(&c, &srv);
}

static void stop_cancels_pending(void **state) {
  server_t srv;
  server_start(&srv, HANG);
  nl_cri_client_t c;
  assert_int_equal(nl_cri_client_init(&c, &loop, srv.path, NULL, NULL), 0);
  res_t r[3] = {{0}};
  for (int i = 0; i < 3; i++) version(&c, &r[i]);
  run_until(&srv.requests, 3);
  stopped = false;
  nl_cri_client_stop(&c, on_stopped);
  for (int i = 0; i < 3; i++) assert_int_equal(r[i].calls, 0); /* not from inside stop */
  res_t late = {0};
  version(&c, &late); /* between stop and done: cancelled too */
  server_stop(&srv);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(stopped);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(r[i].calls, 1);
    assert_int_equal(r[i].code, NL_GRPC_CANCELLED);
  }
  assert_int_equal(late.calls, 1);
  assert_int_equal(late.code, NL_GRPC_CANCELLED);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* A server that PINGs with its answers (grpc-go's bandwidth probe) gets every
 * PING acknowledged with its payload, a few ms later rather than in the same
 * write as the next request; calls go on meanwhile. */
static void server_pings_are_acknowledged(void **state) {
  server_t srv;
  server_start(&srv, ANSWER);
  srv.bdp_pings = true;
  nl_cri_client_t c;
  assert_int_equal(nl_cri_client_init(&c, &loop, srv.path, NULL, NULL), 0);
  res_t r[20] = {{0}};
  for (int i = 0; i < 20; i++) {
    version(&c, &r[i]);
    run_until(&r[i].calls, 1);
    assert_int_equal(r[i].code, NL_GRPC_OK);
  }
  run_until(&srv.ping_acks, srv.pings);
  assert_true(srv.pings >= 1);
  assert_int_equal(srv.bad_acks, 0);
  assert_false(srv.ping_out);
  finish(&c, &srv);
}

static void endpoints(void **state) {
  char *p = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_cri_parse_endpoint("unix:///run/containerd/containerd.sock", &p, &err), 0);
  assert_string_equal(p, "/run/containerd/containerd.sock");
  free(p);
  assert_int_equal(nl_cri_parse_endpoint("/run/x.sock", &p, &err), 0);
  assert_string_equal(p, "/run/x.sock");
  free(p);
  assert_int_equal(nl_cri_parse_endpoint("tcp://1.2.3.4:5", &p, &err), -1);
  assert_int_equal(err->code, NL_EINVAL);
  assert_string_equal(err->msg, "endpoint tcp://1.2.3.4:5: only unix:// endpoints are supported");
  nl_err_free(&err);
  assert_int_equal(nl_cri_parse_endpoint("unix://", &p, &err), -1);
  nl_err_free(&err);
  assert_int_equal(nl_cri_parse_endpoint("relative.sock", &p, &err), -1);
  nl_err_free(&err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(unary_call, setup),
      cmocka_unit_test_setup(deadline_fires, setup),
      cmocka_unit_test_setup(no_server_waits_then_unavailable, setup),
      cmocka_unit_test_setup(reconnects_after_loss, setup),
      cmocka_unit_test_setup(silent_server_is_dialed_again, setup),
      cmocka_unit_test_setup(stop_cancels_pending, setup),
      cmocka_unit_test_setup(server_pings_are_acknowledged, setup),
      cmocka_unit_test(endpoints),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
