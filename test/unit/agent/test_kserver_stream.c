/* /exec, /attach and /portForward through the real HTTP server, the real CRI
 * client against the fake CRI, and a stand-in for the runtime's streaming
 * server on a local TCP port:
 *   client --HTTP--> nl_http_server --handler--> CRI Exec (fake) -> URL
 *          <==== bytes both ways, unchanged ====> streaming server (echo)
 * The streaming server checks the forwarded request, answers 101 and echoes;
 * the client checks the 101 head and a 4 MiB round trip byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/kserver_stream.h"
#include "reactor/http_server.h"
#include "test/fakes/fake_cri_harness.h"

#define BIG (4u << 20)

typedef struct streamer { /* the runtime's streaming server */
  uv_tcp_t listener, conn;
  bool accepted, upgraded;
  nl_buf_t head;
  char *request; /* the request head it got */
} streamer_t;

typedef struct client {
  uv_tcp_t tcp;
  uv_connect_t connect;
  nl_buf_t in;
  size_t head_len; /* of the response head, once complete */
  int status;
  bool eof;
} client_t;

typedef struct fx {
  harness_t h;
  nl_http_server_t srv;
  nl_kserver_stream_t ks;
  streamer_t st;
  client_t cl;
  char cid[65];
  int closed, srv_stopped, ks_stopped;
} fx_t;

static fx_t *F;

/* ---- the streaming server: reads the head, answers 101, echoes ------------ */

static void st_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)h;
  *b = uv_buf_init(nl_xmalloc(hint), (unsigned)hint);
}

static void st_written(uv_write_t *w, int status) {
  (void)status;
  free(w->data);
  free(w);
}

static void st_send(uv_stream_t *s, const char *p, size_t n) {
  uv_write_t *w = nl_xmalloc(sizeof *w);
  w->data = nl_xmalloc(n);
  memcpy(w->data, p, n);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
  assert_int_equal(uv_write(w, s, &b, 1, st_written), 0);
}

static void st_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  streamer_t *st = &F->st;
  if (n < 0) {
    uv_close((uv_handle_t *)s, NULL);
  } else if (st->upgraded) {
    st_send(s, b->base, (size_t)n);
  } else {
    nl_buf_append(&st->head, b->base, (size_t)n);
    char *end = strstr(st->head.data, "\r\n\r\n");
    if (end) {
      st->request = nl_xstrndup(st->head.data, (size_t)(end + 4 - st->head.data));
      st->upgraded = true;
      const char *ok = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                       "Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n";
      st_send(s, ok, strlen(ok));
      size_t rest = st->head.len - strlen(st->request);
      if (rest) st_send(s, end + 4, rest);
    }
  }
  free(b->base);
}

static void st_accept(uv_stream_t *l, int status) {
  assert_int_equal(status, 0);
  streamer_t *st = &F->st;
  uv_tcp_init(l->loop, &st->conn);
  assert_int_equal(uv_accept(l, (uv_stream_t *)&st->conn), 0);
  st->accepted = true;
  uv_read_start((uv_stream_t *)&st->conn, st_alloc, st_read);
}

/* ---- the client ------------------------------------------------------------ */

static void cl_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  client_t *c = &F->cl;
  if (n > 0) nl_buf_append(&c->in, b->base, (size_t)n);
  free(b->base);
  if (n < 0) {
    c->eof = true;
    uv_read_stop(s);
  }
  if (!c->head_len && c->in.len) {
    char *end = strstr(c->in.data, "\r\n\r\n");
    if (end) {
      c->head_len = (size_t)(end + 4 - c->in.data);
      c->status = atoi(c->in.data + 9);
    }
  }
}

static void cl_connected(uv_connect_t *req, int status) {
  assert_int_equal(status, 0);
  uv_read_start(req->handle, st_alloc, cl_read);
}

static void cl_send(const char *p, size_t n) {
  uv_write_t *w = nl_xmalloc(sizeof *w);
  w->data = nl_xmalloc(n);
  memcpy(w->data, p, n);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
  assert_int_equal(uv_write(w, (uv_stream_t *)&F->cl.tcp, &b, 1, st_written), 0);
}

/* ---- wiring ---------------------------------------------------------------- */

static int lookup(void *ctx, const char *ns, const char *pod, const char *uid,
                  const char *container, char **id, char **msg) {
  (void)ns, (void)uid;
  fx_t *f = ctx;
  if (strcmp(pod, "web") != 0) {
    *msg = nl_xstrdup("pod does not exist");
    return 404;
  }
  *id = nl_xstrdup(container && strcmp(container, "gone") == 0 ? "nosuchid" : f->cid);
  return 0;
}

static void exec_route(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_kserver_exec_handler(ctx, req, NULL, resp);
}

static void srv_done(nl_http_server_t *s, void *ctx) {
  (void)s;
  (*(int *)ctx)++;
}

static void ks_done(void *ctx) { (*(int *)ctx)++; }

static int tcp_port(uv_tcp_t *t) {
  struct sockaddr_in sa;
  int len = sizeof sa;
  uv_tcp_getsockname(t, (struct sockaddr *)&sa, &len);
  return ntohs(sa.sin_port);
}

static int setup(void **state) {
  fx_t *f = F = nl_xcalloc(1, sizeof *f);
  harness_start(&f->h, NULL);
  assert_int_equal(fake_cri_add_container(f->h.fake, "web", "c", "busybox", f->cid, sizeof f->cid), 0);
  uv_loop_t *loop = &f->h.loop;
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", 0, &sa);
  uv_tcp_init(loop, &f->st.listener);
  uv_tcp_bind(&f->st.listener, (struct sockaddr *)&sa, 0);
  assert_int_equal(uv_listen((uv_stream_t *)&f->st.listener, 8, st_accept), 0);
  char base[64];
  snprintf(base, sizeof base, "http://127.0.0.1:%d", tcp_port(&f->st.listener));
  fake_cri_set_stream_base(f->h.fake, base);

  nl_err_t *err = NULL;
  assert_int_equal(nl_http_server_init(&f->srv, loop, NULL, &err), 0);
  nl_kserver_stream_init(&f->ks, loop, &f->h.client, lookup, f);
  f->ks.high_water = 64 * 1024;
  nl_http_server_route(&f->srv, NULL, "/exec/", exec_route, &f->ks);
  assert_int_equal(nl_http_server_listen(&f->srv, "127.0.0.1", 0, &err), 0);
  uv_tcp_init(loop, &f->cl.tcp);
  uv_ip4_addr("127.0.0.1", nl_http_server_port(&f->srv), &sa);
  uv_tcp_connect(&f->cl.connect, &f->cl.tcp, (struct sockaddr *)&sa, cl_connected);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx_t *f = *state;
  nl_kserver_stream_stop(&f->ks, ks_done, &f->ks_stopped);
  nl_http_server_stop(&f->srv, srv_done, &f->srv_stopped);
  if (!uv_is_closing((uv_handle_t *)&f->cl.tcp)) uv_close((uv_handle_t *)&f->cl.tcp, NULL);
  uv_close((uv_handle_t *)&f->st.listener, NULL);
  if (f->st.accepted && !uv_is_closing((uv_handle_t *)&f->st.conn))
    uv_close((uv_handle_t *)&f->st.conn, NULL);
  harness_finish(&f->h);
  assert_int_equal(f->srv_stopped, 1);
  assert_int_equal(f->ks_stopped, 1);
  nl_buf_free(&f->cl.in);
  nl_buf_free(&f->st.head);
  free(f->st.request);
  free(f);
  return 0;
}

static bool spin_until(bool (*cond)(void)) {
  for (int i = 0; i < 200000 && !cond(); i++) uv_run(&F->h.loop, UV_RUN_ONCE);
  return cond();
}

static bool got_head(void) { return F->cl.head_len > 0; }
static bool got_all(void) { return F->cl.head_len && F->cl.in.len >= F->cl.head_len + BIG; }
static bool got_eof(void) { return F->cl.eof; }

static const char upgrade_req[] =
    "POST /exec/default/web/c?command=cat&command=-u&input=1&output=1&tty=1&error=1 HTTP/1.1\r\n"
    "Host: node:10250\r\nAuthorization: Bearer secret\r\nConnection: Upgrade\r\n"
    "Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n";

static void exec_proxies_both_ways(void **state) {
  fx_t *f = *state;
  cl_send(upgrade_req, strlen(upgrade_req));
  assert_true(spin_until(got_head));
  assert_int_equal(f->cl.status, 101);
  assert_non_null(strstr(f->cl.in.data, "X-Stream-Protocol-Version: v4.channel.k8s.io\r\n"));
  /* The runtime got the client's request on its own URL, without the credential. */
  char want[160];
  snprintf(want, sizeof want, "POST /exec/%s HTTP/1.1\r\nHost: 127.0.0.1:", f->cid);
  assert_memory_equal(f->st.request, want, strlen(want));
  assert_non_null(strstr(f->st.request, "\r\nUpgrade: SPDY/3.1\r\n"));
  assert_non_null(strstr(f->st.request, "\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n"));
  assert_null(strstr(f->st.request, "Authorization"));
  assert_null(strstr(f->st.request, "node:10250"));

  char *big = nl_xmalloc(BIG);
  for (size_t i = 0; i < BIG; i++) big[i] = (char)(i * 7 + i / 251);
  cl_send(big, BIG);
  assert_true(spin_until(got_all));
  assert_int_equal(f->cl.in.len, f->cl.head_len + BIG);
  assert_memory_equal(f->cl.in.data + f->cl.head_len, big, BIG);
  free(big);

  /* The runtime ends the stream (the process exited): the client sees EOF. */
  uv_close((uv_handle_t *)&f->st.conn, NULL);
  assert_true(spin_until(got_eof));
}

static void expect_answer(const char *req, int status, const char *body) {
  cl_send(req, strlen(req));
  assert_true(spin_until(got_head));
  assert_int_equal(F->cl.status, status);
  assert_non_null(strstr(F->cl.in.data + F->cl.head_len - 4, body));
}

static void unknown_pod_404(void **state) {
  (void)state;
  expect_answer("GET /exec/default/nope/c?command=ls&output=1 HTTP/1.1\r\nHost: x\r\n\r\n", 404,
                "pod does not exist");
}

static void no_streams_400(void **state) {
  (void)state;
  expect_answer("GET /exec/default/web/c?command=ls HTTP/1.1\r\nHost: x\r\n\r\n", 400,
                "you must specify at least 1 of stdin, stdout, stderr");
}

static void runtime_error_404(void **state) {
  (void)state;
  expect_answer("GET /exec/default/web/gone?command=ls&output=1 HTTP/1.1\r\nHost: x\r\n\r\n", 404,
                "rpc error: code = NotFound desc = an error occurred when try to find container");
}

static void runtime_unreachable_500(void **state) {
  fx_t *f = *state;
  fake_cri_set_stream_base(f->h.fake, "http://127.0.0.1:1");
  expect_answer("GET /exec/default/web/c?command=ls&output=1 HTTP/1.1\r\nHost: x\r\n\r\n", 500,
                "error dialing backend: dial tcp 127.0.0.1:1: connect: connection refused");
}

/* The path and query as upstream reads them. */
static void params(void **state) {
  (void)state;
  nl_stream_params_t p;
  char *msg;
  assert_int_equal(nl_stream_params_parse(&p, NL_STREAM_EXEC, "ns/pod/uid-1/ctr",
                                          "command=sh&command=-c&command=echo+a%26b&input=1",
                                          false, &msg), 0);
  assert_string_equal(p.uid, "uid-1");
  assert_string_equal(p.container, "ctr");
  assert_int_equal(p.n_cmd, 3);
  assert_string_equal(p.cmd[2], "echo a&b");
  assert_true(p.in && !p.out && !p.err && !p.tty);
  nl_stream_params_free(&p);

  assert_int_equal(nl_stream_params_parse(&p, NL_STREAM_PORT_FORWARD, "ns/pod", "port=80,8080&port=53",
                                          true, &msg), 0);
  assert_null(p.container);
  assert_int_equal(p.n_ports, 3);
  assert_int_equal(p.ports[1], 8080);
  assert_int_equal(p.ports[2], 53);
  nl_stream_params_free(&p);
  /* SPDY names its ports in the streams; the query is not read. */
  assert_int_equal(nl_stream_params_parse(&p, NL_STREAM_PORT_FORWARD, "ns/pod/uid", "", false, &msg), 0);
  assert_string_equal(p.uid, "uid");
  assert_int_equal(p.n_ports, 0);
  nl_stream_params_free(&p);

  static const struct {
    nl_stream_kind_t kind;
    const char *path, *query;
    bool ws;
    int status;
    const char *msg;
  } bad[] = {
      {NL_STREAM_PORT_FORWARD, "ns/pod", "", true, 400, "query parameter \"port\" is required"},
      {NL_STREAM_PORT_FORWARD, "ns/pod", "port=", true, 400, "query parameter \"port\" cannot be empty"},
      {NL_STREAM_PORT_FORWARD, "ns/pod", "port=80,x", true, 400, "unable to parse \"80,x\" as a port"},
      {NL_STREAM_PORT_FORWARD, "ns/pod", "port=0", true, 400, "unable to parse \"0\" as a port"},
      {NL_STREAM_PORT_FORWARD, "ns/pod", "port=65536", true, 400, "unable to parse \"65536\" as a port"},
      {NL_STREAM_EXEC, "ns/pod", "output=1", false, 404, "404 page not found"},
      {NL_STREAM_EXEC, "ns//c", "output=1", false, 404, "404 page not found"},
      {NL_STREAM_EXEC, "ns/a/b/c/d", "output=1", false, 404, "404 page not found"},
      {NL_STREAM_ATTACH, "ns/pod/c", "tty=1&error=1", false, 400,
       "you must specify at least 1 of stdin, stdout, stderr"},
      {NL_STREAM_ATTACH, "ns/pod/c", "output=%zz", false, 400,
       "you must specify at least 1 of stdin, stdout, stderr"}, /* the bad pair is skipped */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int st = nl_stream_params_parse(&p, bad[i].kind, bad[i].path, bad[i].query, bad[i].ws, &msg);
    assert_int_equal(st, bad[i].status);
    assert_string_equal(msg, bad[i].msg);
    free(msg);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(exec_proxies_both_ways, setup, teardown),
      cmocka_unit_test_setup_teardown(unknown_pod_404, setup, teardown),
      cmocka_unit_test_setup_teardown(no_streams_400, setup, teardown),
      cmocka_unit_test_setup_teardown(runtime_error_404, setup, teardown),
      cmocka_unit_test_setup_teardown(runtime_unreachable_500, setup, teardown),
      cmocka_unit_test(params),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
