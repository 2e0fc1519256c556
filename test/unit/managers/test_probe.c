/* Probes: every handler against local listeners (an HTTP server, a gRPC health
 * server on nghttp2, a listener that hangs and one that sends garbage) and the
 * fake CRI server (exec), then the workers' threshold arithmetic, the liveness
 * hold, startup gating, initial delay, and the status inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <nghttp2/nghttp2.h>

#include "reactor/arena.h"
#include "cri/runtime.h"
#include "managers/hooks.h"
#include "managers/probe.h"
#include "reactor/http_server.h"
#include "test/fakes/fake_cri_harness.h"

/* ---- a raw listener: garbage, silent, or a gRPC health server ---- */

typedef enum { RAW_GARBAGE, RAW_SILENT, RAW_GRPC } raw_mode_t;

typedef struct raw_srv {
  uv_tcp_t tcp;
  raw_mode_t mode;
  int port;
  nl_list_t conns;
} raw_srv_t;

typedef struct raw_conn {
  uv_tcp_t tcp;
  nl_list_t link;
  raw_srv_t *srv;
  nghttp2_session *h2;
  char buf[4096];
  char path[128];
  char service[128];
  uint8_t resp[16];
  size_t resp_len, resp_off;
} raw_conn_t;

static void raw_wdone(uv_write_t *w, int st) {
  (void)st;
  free(w);
}

static void raw_write(raw_conn_t *c, const void *p, size_t n) {
  uv_write_t *w = malloc(sizeof *w + n);
  memcpy(w + 1, p, n);
  uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)n);
  if (uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, raw_wdone) < 0) free(w);
}

static ssize_t h2_send(nghttp2_session *s, const uint8_t *d, size_t n, int f, void *u) {
  (void)s;
  (void)f;
  raw_write(u, d, n);
  return (ssize_t)n;
}

static int h2_header(nghttp2_session *s, const nghttp2_frame *fr, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *u) {
  (void)s;
  (void)fr;
  (void)flags;
  raw_conn_t *c = u;
  if (nl == 5 && memcmp(name, ":path", 5) == 0)
    snprintf(c->path, sizeof c->path, "%.*s", (int)vl, value);
  return 0;
}

static int h2_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                   void *u) {
  (void)s;
  (void)flags;
  (void)id;
  raw_conn_t *c = u; /* 5-byte prefix, then field 1 (tag, 1-byte length) */
  if (n > 7) snprintf(c->service, sizeof c->service, "%.*s", (int)(n - 7), d + 7);
  return 0;
}

static ssize_t h2_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                       nghttp2_data_source *src, void *u) {
  (void)src;
  raw_conn_t *c = u;
  size_t n = c->resp_len - c->resp_off;
  if (n > len) n = len;
  memcpy(buf, c->resp + c->resp_off, n);
  c->resp_off += n;
  if (c->resp_off == c->resp_len) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    nghttp2_nv t[] = {{(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, 0}};
    nghttp2_submit_trailer(s, id, t, 1);
  }
  return (ssize_t)n;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), 0}

static int h2_frame(nghttp2_session *s, const nghttp2_frame *fr, void *u) {
  raw_conn_t *c = u;
  if (!(fr->hd.flags & NGHTTP2_FLAG_END_STREAM) || fr->hd.type == NGHTTP2_SETTINGS) return 0;
  int32_t id = fr->hd.stream_id;
  if (strcmp(c->service, "hang") == 0) return 0;
  if (strcmp(c->path, "/grpc.health.v1.Health/Check") != 0 || strcmp(c->service, "unimpl") == 0) {
    nghttp2_nv h[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                      NV("grpc-status", "12"), NV("grpc-message", "unknown service")};
    nghttp2_submit_response(s, id, h, 4, NULL);
    return 0;
  }
  int status = strcmp(c->service, "bad") == 0 ? 2 : 1;
  uint8_t msg[] = {0, 0, 0, 0, 2, 0x08, (uint8_t)status};
  memcpy(c->resp, msg, sizeof msg);
  c->resp_len = sizeof msg;
  c->resp_off = 0;
  nghttp2_nv h[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
  nghttp2_data_provider dp = {.read_callback = h2_read};
  nghttp2_submit_response(s, id, h, 2, &dp);
  return 0;
}

static void raw_closed(uv_handle_t *h) {
  raw_conn_t *c = container_of((uv_tcp_t *)h, raw_conn_t, tcp);
  if (c->h2) nghttp2_session_del(c->h2);
  free(c);
}

static void raw_alloc(uv_handle_t *h, size_t s, uv_buf_t *b) {
  (void)s;
  raw_conn_t *c = container_of((uv_tcp_t *)h, raw_conn_t, tcp);
  *b = uv_buf_init(c->buf, sizeof c->buf);
}

static void raw_close(raw_conn_t *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  nl_list_remove(&c->link);
  uv_close((uv_handle_t *)&c->tcp, raw_closed);
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  raw_conn_t *c = container_of((uv_tcp_t *)s, raw_conn_t, tcp);
  if (n < 0) {
    raw_close(c);
    return;
  }
  if (c->h2) {
    nghttp2_session_mem_recv(c->h2, (const uint8_t *)b->base, (size_t)n);
    nghttp2_session_send(c->h2);
  }
}

static void raw_accept(uv_stream_t *l, int st) {
  assert_int_equal(st, 0);
  raw_srv_t *srv = container_of((uv_tcp_t *)l, raw_srv_t, tcp);
  raw_conn_t *c = calloc(1, sizeof *c);
  c->srv = srv;
  uv_tcp_init(l->loop, &c->tcp);
  assert_int_equal(uv_accept(l, (uv_stream_t *)&c->tcp), 0);
  nl_list_insert_tail(&srv->conns, &c->link);
  if (srv->mode == RAW_GARBAGE) raw_write(c, "\x01\x02garbage\r\n\r\n", 13);
  if (srv->mode == RAW_GRPC) {
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, h2_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_frame);
    nghttp2_session_server_new(&c->h2, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, NULL, 0);
    nghttp2_session_send(c->h2);
  }
  uv_read_start((uv_stream_t *)&c->tcp, raw_alloc, raw_read);
}

static void raw_start(uv_loop_t *loop, raw_srv_t *s, raw_mode_t mode) {
  memset(s, 0, sizeof *s);
  s->mode = mode;
  nl_list_init(&s->conns);
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", 0, &a);
  uv_tcp_init(loop, &s->tcp);
  assert_int_equal(uv_tcp_bind(&s->tcp, (struct sockaddr *)&a, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&s->tcp, 64, raw_accept), 0);
  struct sockaddr_in got;
  int len = sizeof got;
  uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&got, &len);
  s->port = ntohs(got.sin_port);
}

static void raw_stop(raw_srv_t *s) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &s->conns) raw_close(nl_list_entry(pos, raw_conn_t, link));
  uv_close((uv_handle_t *)&s->tcp, NULL);
}

/* ---- an HTTP server whose answers the test sets per path ---- */

typedef struct web {
  nl_http_server_t srv;
  int port;
  int code_ok, code_l, code_s, code_r; /* /ok, /l, /s, /r */
  int hits_l, hits_s, hits_r;
  nl_http_resp_t *hung;
  bool stopped;
} web_t;

static void h_code(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  web_t *w = ctx;
  const char *p = req->path;
  if (strcmp(p, "/ok") == 0) nl_http_resp_send_str(resp, 200, "fine");
  else if (strcmp(p, "/fail") == 0) nl_http_resp_send_str(resp, 500, "broken");
  else if (strcmp(p, "/l") == 0) w->hits_l++, nl_http_resp_send_str(resp, w->code_l, "l");
  else if (strcmp(p, "/s") == 0) w->hits_s++, nl_http_resp_send_str(resp, w->code_s, "s");
  else if (strcmp(p, "/r") == 0) w->hits_r++, nl_http_resp_send_str(resp, w->code_r, "r");
  else if (strcmp(p, "/redir") == 0) {
    nl_http_resp_header(resp, "Location", "http://other.invalid/x");
    nl_http_resp_send_str(resp, 302, "moved");
  } else if (strcmp(p, "/hdr") == 0) {
    char b[512];
    const char *ua = nl_http_headers_get(req->headers, "User-Agent");
    const char *x = nl_http_headers_get(req->headers, "X-Custom");
    const char *h = nl_http_headers_get(req->headers, "Host");
    const char *a = nl_http_headers_get(req->headers, "Accept");
    snprintf(b, sizeof b, "%s|%s|%s|%s", ua ? ua : "", x ? x : "", h ? h : "", a ? a : "");
    nl_http_resp_send_str(resp, 200, b);
  } else if (strcmp(p, "/hang") == 0) {
    if (w->hung) nl_http_resp_send_str(w->hung, 200, "late");
    w->hung = resp;
  } else
    nl_http_resp_send_str(resp, 404, "no");
}

static void web_stopped(nl_http_server_t *s, void *ctx) {
  (void)s;
  ((web_t *)ctx)->stopped = true;
}

static void web_start(uv_loop_t *loop, web_t *w) {
  memset(w, 0, sizeof *w);
  w->code_l = w->code_s = w->code_r = 200;
  nl_err_t *err = NULL;
  assert_int_equal(nl_http_server_init(&w->srv, loop, NULL, &err), 0);
  nl_http_server_route(&w->srv, NULL, "/", h_code, w);
  if (nl_http_server_listen(&w->srv, "127.0.0.1", 0, &err) < 0) fail_msg("%s", nl_err_msg(err));
  w->port = nl_http_server_port(&w->srv);
}

static void web_stop(web_t *w) {
  if (w->hung) nl_http_resp_send_str(w->hung, 200, "late");
  w->hung = NULL;
  nl_http_server_stop(&w->srv, web_stopped, w);
}

/* ---- running one check ---- */

typedef struct outcome {
  int done;
  nl_check_result_t r;
  char out[1024];
} outcome_t;

static void on_check(void *ctx, nl_check_result_t r, const char *out) {
  outcome_t *o = ctx;
  o->r = r;
  snprintf(o->out, sizeof o->out, "%s", out);
  o->done++;
}

static outcome_t run(harness_t *h, nl_check_env_t *env, const nl_handler_t *hd,
                     const nl_container_t *c, const char *cid, uint64_t timeout_ms, bool hook) {
  outcome_t o = {0};
  nl_check_req_t req = {.handler = hd, .container = c, .container_id = cid,
                        .pod_ip = "127.0.0.1", .timeout_ms = timeout_ms, .hook = hook};
  nl_check_start(env, &req, on_check, &o);
  assert_int_equal(o.done, 0); /* never inside the call */
  harness_wait(h, &o.done, 1, 10000);
  return o;
}

static nl_handler_t http_h(nl_http_get_action_t *a, const char *path, int port) {
  memset(a, 0, sizeof *a);
  a->path = (char *)path;
  a->port = (nl_intorstr_t){.set = true, .num = port};
  a->scheme = "HTTP";
  return (nl_handler_t){.http_get = a};
}

static void test_http(void **state) {
  (void)state;
  harness_t h;
  harness_init(&h);
  web_t w;
  web_start(&h.loop, &w);
  raw_srv_t garbage, silent;
  raw_start(&h.loop, &garbage, RAW_GARBAGE);
  raw_start(&h.loop, &silent, RAW_SILENT);
  nl_check_env_t env = {.loop = &h.loop};
  nl_http_get_action_t a;
  nl_handler_t hd = http_h(&a, "/ok", w.port);
  outcome_t o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_SUCCESS);
  assert_string_equal(o.out, "fine");

  hd = http_h(&a, "/fail", w.port);
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_string_equal(o.out, "HTTP probe failed with statuscode: 500");
  o = run(&h, &env, &hd, NULL, NULL, 1000, true); /* hooks ignore the status */
  assert_int_equal(o.r, NL_CHECK_SUCCESS);

  hd = http_h(&a, "/redir", w.port); /* another host: not followed, a warning */
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_WARNING);
  assert_string_equal(o.out, "Probe terminated redirects, Response body: moved");

  /* headers, Host override, default User-Agent and Accept, named port */
  nl_kv_t hdrs[] = {{"X-Custom", "v1"}, {"Host", "example.test"}};
  hd = http_h(&a, "hdr", 0);
  a.port = (nl_intorstr_t){.set = true, .is_str = true, .str = "web"};
  a.headers = hdrs;
  a.n_headers = 2;
  nl_container_port_t ports[] = {{.name = "web", .container_port = w.port, .protocol = "TCP"}};
  nl_container_t c = {.name = "c", .ports = ports, .n_ports = 1};
  o = run(&h, &env, &hd, &c, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_SUCCESS);
  assert_string_equal(o.out, "kube-probe/1.30|v1|example.test|*/*");
  a.port.str = "nope"; /* an unknown port name: an error, not a failure */
  o = run(&h, &env, &hd, &c, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_ERROR);
  assert_string_equal(o.out, "port nope not found");
  a.headers = NULL;
  a.n_headers = 0;

  hd = http_h(&a, "/hang", w.port); /* the target hangs: the timeout */
  uint64_t t0 = uv_now(&h.loop);
  o = run(&h, &env, &hd, NULL, NULL, 300, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_non_null(strstr(o.out, "Client.Timeout exceeded"));
  assert_true(uv_now(&h.loop) - t0 >= 290);

  hd = http_h(&a, "/", silent.port); /* accepts, never answers */
  o = run(&h, &env, &hd, NULL, NULL, 300, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);

  hd = http_h(&a, "/", garbage.port); /* garbage instead of HTTP */
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_non_null(strstr(o.out, "malformed"));

  raw_stop(&garbage);
  raw_stop(&silent);
  int closed_port = garbage.port;
  harness_sleep(&h, 20);
  hd = http_h(&a, "/", closed_port);
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_non_null(strstr(o.out, "connection refused"));

  web_stop(&w);
  harness_finish(&h);
  assert_true(w.stopped);
}

static void test_https(void **state) {
  (void)state;
  harness_t h;
  harness_init(&h);
  nl_err_t *err = NULL;
  nl_tls_config_t *scfg;
  nl_tls_config_opts_t so = {.server = true,
                             .cert_file = FIXTURES "/tls/server.crt",
                             .key_file = FIXTURES "/tls/server.key"};
  if (nl_tls_config_new(&scfg, &so, &err) < 0) fail_msg("%s", nl_err_msg(err));
  web_t w;
  memset(&w, 0, sizeof w);
  nl_http_server_opts_t o = {.tls = scfg};
  assert_int_equal(nl_http_server_init(&w.srv, &h.loop, &o, &err), 0);
  nl_http_server_route(&w.srv, NULL, "/", h_code, &w);
  assert_int_equal(nl_http_server_listen(&w.srv, "127.0.0.1", 0, &err), 0);
  nl_tls_config_unref(scfg);
  nl_check_env_t env = {.loop = &h.loop}; /* no config: the check makes one */
  nl_http_get_action_t a;
  nl_handler_t hd = http_h(&a, "/ok", nl_http_server_port(&w.srv));
  a.scheme = "HTTPS";
  outcome_t r = run(&h, &env, &hd, NULL, NULL, 2000, false);
  assert_int_equal(r.r, NL_CHECK_SUCCESS); /* certificates are not verified */
  assert_string_equal(r.out, "fine");
  nl_http_server_stop(&w.srv, web_stopped, &w);
  harness_finish(&h);
}

static void test_tcp(void **state) {
  (void)state;
  harness_t h;
  harness_init(&h);
  raw_srv_t s;
  raw_start(&h.loop, &s, RAW_SILENT);
  nl_check_env_t env = {.loop = &h.loop};
  nl_tcp_socket_action_t a = {.port = {.set = true, .num = s.port}};
  nl_handler_t hd = {.tcp_socket = &a};
  outcome_t o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_SUCCESS);
  a.host = "localhost";
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_SUCCESS);
  a.host = NULL;
  raw_stop(&s);
  harness_sleep(&h, 20);
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  char want[64];
  snprintf(want, sizeof want, "dial tcp 127.0.0.1:%d: connect: connection refused", s.port);
  assert_string_equal(o.out, want);
  a.port.num = 70000;
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_ERROR);
  assert_string_equal(o.out, "invalid port number: 70000");
  harness_finish(&h);
}

static void test_grpc(void **state) {
  (void)state;
  harness_t h;
  harness_init(&h);
  raw_srv_t g, garbage;
  raw_start(&h.loop, &g, RAW_GRPC);
  raw_start(&h.loop, &garbage, RAW_GARBAGE);
  nl_check_env_t env = {.loop = &h.loop};
  nl_grpc_action_t a = {.port = g.port};
  nl_handler_t hd = {.grpc = &a};
  outcome_t o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_SUCCESS);
  assert_string_equal(o.out, "service healthy");
  a.service = "bad";
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_string_equal(o.out, "service unhealthy (responded with \"NOT_SERVING\")");
  a.service = "unimpl";
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_string_equal(o.out, "error: this server does not implement the grpc health protocol "
                             "(grpc.health.v1.Health): unknown service");
  a.service = "hang";
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_string_equal(o.out, "timeout: health rpc did not complete within 1s");
  a.service = NULL;
  a.port = garbage.port;
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  if (!strstr(o.out, "error: health rpc probe failed")) fail_msg("%s", o.out);
  raw_stop(&g);
  raw_stop(&garbage);
  harness_sleep(&h, 20);
  a.port = g.port;
  o = run(&h, &env, &hd, NULL, NULL, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_non_null(strstr(o.out, "connection refused"));
  harness_finish(&h);
}

static void test_grpc_wire(void **state) {
  (void)state;
  size_t n;
  uint8_t *p = nl_probe_grpc_encode_request("svc", &n);
  assert_int_equal(n, 5);
  assert_memory_equal(p, "\x0a\x03svc", 5);
  free(p);
  p = nl_probe_grpc_encode_request("", &n);
  assert_int_equal(n, 0);
  free(p);
  int s;
  assert_int_equal(nl_probe_grpc_decode_response((const uint8_t *)"\x08\x01", 2, &s), 0);
  assert_int_equal(s, 1);
  assert_int_equal(nl_probe_grpc_decode_response((const uint8_t *)"", 0, &s), 0);
  assert_int_equal(s, 0);
  /* unknown fields are skipped */
  assert_int_equal(nl_probe_grpc_decode_response((const uint8_t *)"\x12\x01x\x08\x02", 5, &s), 0);
  assert_int_equal(s, 2);
  assert_int_equal(nl_probe_grpc_decode_response((const uint8_t *)"\x08", 1, &s), -1);
  assert_int_equal(nl_probe_grpc_decode_response((const uint8_t *)"\x12\x05x", 3, &s), -1);
  assert_int_equal(nl_probe_grpc_decode_response((const uint8_t *)"\x0f", 1, &s), -1);
}

/* ---- exec through the fake CRI server ---- */

typedef struct crun {
  char id[128];
} crun_t;

/* A running container in the fake; returns its id in c->id. */
static void make_container(harness_t *h, crun_t *c) {
  assert_int_equal(
      fake_cri_add_container(h->fake, "p", "c", "localhost/busybox:1.36", c->id, sizeof c->id), 0);
}

static void test_exec(void **state) {
  (void)state;
  harness_t h;
  harness_start(&h, NULL);
  crun_t ct;
  make_container(&h, &ct);
  nl_check_env_t env = {.loop = &h.loop, .cri = &h.client};
  char *cmd[] = {"cat", "/tmp/healthy"};
  nl_exec_action_t ex = {.command = {cmd, 2}};
  nl_handler_t hd = {.exec = &ex};
  outcome_t o = run(&h, &env, &hd, NULL, ct.id, 1000, false);
  assert_int_equal(o.r, NL_CHECK_SUCCESS);
  assert_string_equal(o.out, "cat /tmp/healthy\n"); /* the fake echoes the command */

  fake_cri_fault_t f = {.kind = FAKE_CRI_STATUS, .code = 4, .message = "timeout", .times = 1};
  fake_cri_set_fault(h.fake, "ExecSync", &f);
  o = run(&h, &env, &hd, NULL, ct.id, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_string_equal(o.out, "command \"cat /tmp/healthy\" timed out");

  f = (fake_cri_fault_t){.kind = FAKE_CRI_STALL, .times = 1}; /* the runtime hangs */
  fake_cri_set_fault(h.fake, "ExecSync", &f);
  uint64_t t0 = uv_now(&h.loop);
  o = run(&h, &env, &hd, NULL, ct.id, 1000, false);
  assert_int_equal(o.r, NL_CHECK_FAILURE);
  assert_string_equal(o.out, "command \"cat /tmp/healthy\" timed out");
  assert_true(uv_now(&h.loop) - t0 >= 1900);

  f = (fake_cri_fault_t){.kind = FAKE_CRI_STATUS, .code = 2, .message = "boom", .times = 1};
  fake_cri_set_fault(h.fake, "ExecSync", &f);
  o = run(&h, &env, &hd, NULL, ct.id, 1000, false);
  assert_int_equal(o.r, NL_CHECK_ERROR); /* thrown away by the worker */
  assert_string_equal(o.out, "rpc error: code = Unknown desc = boom");
  o = run(&h, &env, &hd, NULL, "nosuch", 1000, true); /* a hook: a failure */
  assert_int_equal(o.r, NL_CHECK_FAILURE);

  f = (fake_cri_fault_t){.kind = FAKE_CRI_BAD_MESSAGE, .times = 1}; /* garbage answer */
  fake_cri_set_fault(h.fake, "ExecSync", &f);
  o = run(&h, &env, &hd, NULL, ct.id, 1000, false);
  assert_int_equal(o.r, NL_CHECK_ERROR);

  /* a cancelled check never calls back, also when its CRI call ends later */
  outcome_t oc = {0};
  nl_check_req_t req = {.handler = &hd, .container_id = ct.id, .timeout_ms = 1000};
  nl_check_cancel(nl_check_start(&env, &req, on_check, &oc));
  harness_sleep(&h, 100);
  assert_int_equal(oc.done, 0);
  harness_finish(&h);
}

/* ---- workers ---- */

typedef struct world {
  harness_t h;
  web_t web;
  nl_probe_manager_t m;
  nl_rt_pod_status_t rt;
  nl_rt_container_t c;
  char *ips[1];
  int64_t now;
  int changes;
  nl_probe_type_t last_type;
  nl_probe_result_t last;
  int failures[3]; /* Failure reports per probe type */
  char last_event[256];
  int events;
  bool stopped;
} world_t;

static const nl_rt_pod_status_t *w_status(void *ctx, const char *uid) {
  world_t *w = ctx;
  return strcmp(uid, "u1") == 0 ? &w->rt : NULL;
}

static void w_changed(void *ctx, const char *uid, const char *c, nl_probe_type_t t,
                      nl_probe_result_t r) {
  world_t *w = ctx;
  assert_string_equal(uid, "u1");
  assert_string_equal(c, "c");
  w->changes++;
  w->last_type = t;
  w->last = r;
  if (r == NL_PROBE_RESULT_FAILURE) w->failures[t]++;
}

static void w_event(void *ctx, const nl_pod_t *pod, const char *c, const char *type,
                    const char *reason, const char *msg) {
  (void)pod;
  (void)c;
  world_t *w = ctx;
  snprintf(w->last_event, sizeof w->last_event, "%s %s %s", type, reason, msg);
  w->events++;
}

static int64_t w_now(void *ctx) { return ((world_t *)ctx)->now; }

static void world_start(world_t *w) {
  memset(w, 0, sizeof *w);
  harness_init(&w->h);
  web_start(&w->h.loop, &w->web);
  w->now = (int64_t)1700000000 * 1000000000;
  w->ips[0] = "127.0.0.1";
  w->c = (nl_rt_container_t){.id = "c1", .name = "c", .state = NL_RT_CONTAINER_RUNNING,
                             .started_at = w->now - (int64_t)100 * 1000000000};
  w->rt = (nl_rt_pod_status_t){.uid = "u1", .containers = &w->c, .n_containers = 1,
                               .ips = w->ips, .n_ips = 1};
  nl_probe_manager_opts_t o = {.status = w_status, .status_ctx = w, .changed = w_changed,
                               .event = w_event, .ctx = w, .now_ns = w_now, .now_ctx = w,
                               .no_jitter = 1, .ms_per_period_second = 20};
  nl_err_t *err = NULL;
  assert_int_equal(nl_probe_manager_init(&w->m, &w->h.loop, NULL, &o, &err), 0);
}

static void w_stopped(nl_probe_manager_t *m) {
  world_t *w = container_of(m, world_t, m);
  w->stopped = true;
}

static void world_finish(world_t *w) {
  nl_probe_manager_stop(&w->m, w_stopped);
  web_stop(&w->web);
  harness_finish(&w->h);
  assert_true(w->stopped);
}

static nl_pod_t *probe_pod(int port, const char *probes) {
  char y[2048];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
           "spec:\n  containers:\n  - name: c\n    image: busybox\n%s",
           probes);
  char z[2400];
  /* the port placeholder PORT */
  char *p = strstr(y, "PORT");
  size_t n = 0;
  z[0] = 0;
  while (p) {
    n += (size_t)snprintf(z + n, sizeof z - n, "%.*s%d", (int)(p - y), y, port);
    memmove(y, p + 4, strlen(p + 4) + 1);
    p = strstr(y, "PORT");
  }
  snprintf(z + n, sizeof z - n, "%s", y);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(z, strlen(z), "t.yaml", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_pod_set_defaults(pod);
  return pod;
}

static void wait_checks(world_t *w, uint64_t n) {
  int target = 1, cur = 0;
  w->h.timed_out = false;
  uv_timer_start(&w->h.guard, harness_guard_fired, 5000, 0);
  while (w->m.checks_done < n && !w->h.timed_out) uv_run(&w->h.loop, UV_RUN_ONCE);
  uv_timer_stop(&w->h.guard);
  if (w->m.checks_done < n) fail_msg("only %llu checks", (unsigned long long)w->m.checks_done);
  (void)target;
  (void)cur;
}

/* Runs the loop until n results have been reported (each report comes from a
 * worker's tick): no sleeping, whatever the machine's load. */
static void wait_changes(world_t *w, int n) {
  w->h.timed_out = false;
  uv_timer_start(&w->h.guard, harness_guard_fired, 5000, 0);
  while (w->changes < n && !w->h.timed_out) uv_run(&w->h.loop, UV_RUN_ONCE);
  uv_timer_stop(&w->h.guard);
  if (w->changes < n) fail_msg("only %d results reported", w->changes);
}

/* The PLEG cache can show a container created and not yet started: the sync
 * that starts a pod's containers one after the other runs while a relist
 * lists them (on containerd 2 about 200 ms from CreateContainer to the end of
 * StartContainer). A worker that ticks then must not judge the container: a
 * liveness Failure set for it is kept under its id, and the sync that follows
 * its start (PLEG's ContainerStarted) kills it at once, before any check of
 * the running container; startup gating or initialDelaySeconds keep the
 * worker from checking it and so from clearing that Failure. The ticks are
 * awaited by their reports, the start is a change of the status source: the
 * same order every run. */
static void test_not_started_yet(void **state) {
  (void)state;
  static const char *const cases[] = {
      /* a startup-gated liveness probe (e2e's "slow") */
      "    startupProbe:\n      httpGet: {path: /s, port: PORT}\n"
      "      periodSeconds: 1\n      failureThreshold: 30\n"
      "    livenessProbe:\n      httpGet: {path: /l, port: PORT}\n"
      "      periodSeconds: 1\n      failureThreshold: 1\n"
      "    readinessProbe:\n      httpGet: {path: /r, port: PORT}\n"
      "      periodSeconds: 1\n",
      /* a liveness probe with an initial delay (e2e's "tcp") */
      "    livenessProbe:\n      tcpSocket: {port: PORT}\n"
      "      initialDelaySeconds: 2\n      periodSeconds: 1\n      failureThreshold: 1\n",
      /* a plain one whose next tick comes after the start (e2e's "reused") */
      "    livenessProbe:\n      tcpSocket: {port: PORT}\n"
      "      periodSeconds: 2\n      failureThreshold: 1\n",
  };
  static const int workers[] = {3, 1, 1};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    world_t w;
    world_start(&w);
    w.web.code_s = w.web.code_l = 500;
    w.c.state = NL_RT_CONTAINER_CREATED;
    w.c.started_at = 0; /* as the cache has it before the start */
    nl_pod_t *pod = probe_pod(w.web.port, cases[i]);
    nl_probe_status_ctx_t sc = {&w.m, pod};
    nl_probe_manager_add_pod(&w.m, pod);
    /* every worker has ticked and taken the instance (its initial result) */
    wait_changes(&w, workers[i] - (pod->spec.containers[0].startup_probe ? 1 : 0));
    harness_sleep(&w.h, 100); /* and ticks again: 5 periods */
    assert_int_equal(w.failures[NL_PROBE_TYPE_LIVENESS], 0);
    assert_int_equal(w.failures[NL_PROBE_TYPE_STARTUP], 0);
    assert_int_equal(nl_probe_manager_runtime_result(&w.m, "c1", NL_PROBE_LIVENESS),
                     NL_PROBE_RESULT_SUCCESS);
    assert_int_equal(w.m.checks_done, 0); /* nothing probed a container not started */
    if (pod->spec.containers[0].startup_probe) {
      assert_int_equal(nl_probe_manager_status_probe(&sc, "c", "c1", true),
                       NL_STATUS_PROBE_PENDING);
      assert_int_equal(nl_probe_manager_result(&w.m, "c1", NL_PROBE_TYPE_READINESS),
                       NL_PROBE_RESULT_FAILURE);
    }
    /* the start, as PLEG's next relist writes it: what computePodActions reads
     * in the sync it triggers is a live container's Success */
    w.c.state = NL_RT_CONTAINER_RUNNING;
    w.c.started_at = w.now;
    assert_int_equal(nl_probe_manager_runtime_result(&w.m, "c1", NL_PROBE_LIVENESS),
                     NL_PROBE_RESULT_SUCCESS);
    if (i < 2) { /* gated or delayed: nothing judges the running container yet */
      harness_sleep(&w.h, 100);
      assert_int_equal(w.failures[NL_PROBE_TYPE_LIVENESS], 0);
      assert_int_equal(nl_probe_manager_runtime_result(&w.m, "c1", NL_PROBE_LIVENESS),
                       NL_PROBE_RESULT_SUCCESS);
    }
    /* a container that exited is still a failure (upstream) */
    w.c.state = NL_RT_CONTAINER_EXITED;
    w.c.finished_at = w.now;
    harness_sleep(&w.h, 100);
    assert_int_equal(nl_probe_manager_runtime_result(&w.m, "c1", NL_PROBE_LIVENESS),
                     NL_PROBE_RESULT_FAILURE);
    nl_probe_manager_remove_pod(&w.m, "u1");
    nl_pod_free(pod);
    world_finish(&w);
  }
}

static void test_readiness_thresholds(void **state) {
  (void)state;
  world_t w;
  world_start(&w);
  nl_pod_t *pod = probe_pod(w.web.port,
                            "    readinessProbe:\n      httpGet: {path: /r, port: PORT}\n"
                            "      periodSeconds: 1\n      successThreshold: 2\n"
                            "      failureThreshold: 3\n");
  nl_probe_status_ctx_t sc = {&w.m, pod};
  /* before any result: pending, and a container without the probe kind: none */
  assert_int_equal(nl_probe_manager_status_probe(&sc, "c", "c1", false), NL_STATUS_PROBE_PENDING);
  assert_int_equal(nl_probe_manager_status_probe(&sc, "c", "c1", true), NL_STATUS_PROBE_NONE);
  nl_probe_manager_add_pod(&w.m, pod);
  wait_checks(&w, 1);
  /* readiness starts as failure, and one success is below the threshold */
  assert_int_equal(nl_probe_manager_result(&w.m, "c1", NL_PROBE_TYPE_READINESS),
                   NL_PROBE_RESULT_FAILURE);
  assert_int_equal(w.changes, 1);
  wait_checks(&w, 2);
  assert_int_equal(w.changes, 2);
  assert_int_equal(w.last, NL_PROBE_RESULT_SUCCESS);
  assert_int_equal(nl_probe_manager_status_probe(&sc, "c", "c1", false), NL_STATUS_PROBE_SUCCESS);
  /* failures: the result flips on the third */
  w.web.code_r = 503;
  uint64_t base = w.m.checks_done;
  wait_checks(&w, base + 2);
  assert_int_equal(w.changes, 2);
  wait_checks(&w, base + 3);
  assert_int_equal(w.changes, 3);
  assert_int_equal(w.last, NL_PROBE_RESULT_FAILURE);
  assert_string_equal(w.last_event,
                      "Warning Unhealthy Readiness probe failed: HTTP probe failed with statuscode: 503");
  /* readiness keeps probing after failures (no hold) */
  wait_checks(&w, base + 5);
  assert_int_equal(w.changes, 3);
  nl_probe_manager_remove_pod(&w.m, "u1");
  assert_int_equal(nl_probe_manager_result(&w.m, "c1", NL_PROBE_TYPE_READINESS),
                   NL_PROBE_RESULT_NONE);
  nl_pod_free(pod);
  world_finish(&w);
}

/* A warning (a redirect to another host) is a success with an event of
 * upstream's reason, ProbeWarning (events.ContainerProbeWarning). */
static void test_warning_event(void **state) {
  (void)state;
  world_t w;
  world_start(&w);
  nl_pod_t *pod = probe_pod(w.web.port, "    readinessProbe:\n      httpGet: {path: /redir, port: PORT}\n"
                                        "      periodSeconds: 1\n");
  nl_probe_manager_add_pod(&w.m, pod);
  wait_checks(&w, 1);
  assert_string_equal(w.last_event, "Warning ProbeWarning Readiness probe warning: Probe "
                                    "terminated redirects, Response body: moved");
  assert_int_equal(w.last, NL_PROBE_RESULT_SUCCESS);
  nl_probe_manager_remove_pod(&w.m, "u1");
  nl_pod_free(pod);
  world_finish(&w);
}

static void test_liveness_hold(void **state) {
  (void)state;
  world_t w;
  world_start(&w);
  w.web.code_l = 500;
  nl_pod_t *pod = probe_pod(w.web.port,
                            "    livenessProbe:\n      httpGet: {path: /l, port: PORT}\n"
                            "      periodSeconds: 1\n      failureThreshold: 2\n");
  nl_probe_manager_add_pod(&w.m, pod);
  nl_pod_free(pod); /* the manager keeps its own copy */
  wait_checks(&w, 1);
  /* liveness starts as success and the first failure is under the threshold */
  assert_int_equal(nl_probe_manager_runtime_result(&w.m, "c1", NL_PROBE_LIVENESS),
                   NL_PROBE_RESULT_SUCCESS);
  wait_checks(&w, 2);
  assert_int_equal(nl_probe_manager_runtime_result(&w.m, "c1", NL_PROBE_LIVENESS),
                   NL_PROBE_RESULT_FAILURE);
  assert_int_equal(w.last, NL_PROBE_RESULT_FAILURE);
  /* on hold: no more probes of this instance */
  harness_sleep(&w.h, 150);
  assert_int_equal(w.m.checks_done, 2);
  assert_int_equal(w.web.hits_l, 2);
  /* a new instance resets the result to success and probing resumes */
  w.c.id = "c2";
  w.web.code_l = 200;
  wait_checks(&w, 3);
  assert_int_equal(nl_probe_manager_runtime_result(&w.m, "c2", NL_PROBE_LIVENESS),
                   NL_PROBE_RESULT_SUCCESS);
  assert_int_equal(nl_probe_manager_runtime_result(&w.m, "c1", NL_PROBE_LIVENESS),
                   NL_PROBE_RESULT_NONE);
  /* an exited container counts as failed (upstream) and is not probed */
  w.c.state = NL_RT_CONTAINER_EXITED;
  harness_sleep(&w.h, 100);
  assert_int_equal(nl_probe_manager_runtime_result(&w.m, "c2", NL_PROBE_LIVENESS),
                   NL_PROBE_RESULT_FAILURE);
  world_finish(&w);
}

static void test_startup_gates(void **state) {
  (void)state;
  world_t w;
  world_start(&w);
  w.web.code_s = 500;
  nl_pod_t *pod = probe_pod(w.web.port,
                            "    startupProbe:\n      httpGet: {path: /s, port: PORT}\n"
                            "      periodSeconds: 1\n      failureThreshold: 100\n"
                            "    livenessProbe:\n      httpGet: {path: /l, port: PORT}\n"
                            "      periodSeconds: 1\n"
                            "    readinessProbe:\n      httpGet: {path: /r, port: PORT}\n"
                            "      periodSeconds: 1\n");
  nl_probe_status_ctx_t sc = {&w.m, pod};
  nl_probe_manager_add_pod(&w.m, pod);
  wait_checks(&w, 4);
  /* only the startup probe runs while it fails */
  assert_int_equal(w.web.hits_s, 4);
  assert_int_equal(w.web.hits_l + w.web.hits_r, 0);
  assert_int_equal(nl_probe_manager_status_probe(&sc, "c", "c1", true), NL_STATUS_PROBE_PENDING);
  w.web.code_s = 200;
  int s0 = w.web.hits_s;
  wait_checks(&w, 8);
  assert_int_equal(nl_probe_manager_status_probe(&sc, "c", "c1", true), NL_STATUS_PROBE_SUCCESS);
  assert_true(w.web.hits_l > 0);
  assert_true(w.web.hits_r > 0);
  /* once started, the startup probe stops */
  harness_sleep(&w.h, 100);
  assert_int_equal(w.web.hits_s, s0 + 1);
  nl_probe_manager_remove_pod(&w.m, "u1");
  nl_pod_free(pod);
  world_finish(&w);
}

/* upstream UpdatePodStatus' manual trigger: once the startup probe has
 * succeeded, the status generated for that result runs the readiness probe at
 * once, not a readiness period later. */
static void test_readiness_right_after_startup(void **state) {
  (void)state;
  world_t w;
  world_start(&w);
  w.web.code_s = 500;
  nl_pod_t *pod = probe_pod(w.web.port,
                            "    startupProbe:\n      httpGet: {path: /s, port: PORT}\n"
                            "      periodSeconds: 1\n      failureThreshold: 100\n"
                            "    readinessProbe:\n      httpGet: {path: /r, port: PORT}\n"
                            "      periodSeconds: 100\n"); /* 2 s here */
  nl_probe_status_ctx_t sc = {&w.m, pod};
  nl_probe_manager_add_pod(&w.m, pod);
  wait_checks(&w, 2);
  w.web.code_s = 200;
  wait_checks(&w, 3);
  assert_int_equal(nl_probe_manager_status_probe(&sc, "c", "c1", true), NL_STATUS_PROBE_SUCCESS);
  assert_int_equal(w.web.hits_r, 0); /* its first tick came before the start */
  uint64_t t0 = uv_now(&w.h.loop);
  assert_int_equal(nl_probe_manager_status_probe(&sc, "c", "c1", false), NL_STATUS_PROBE_FAILURE);
  wait_checks(&w, 4);
  assert_int_equal(w.web.hits_r, 1);
  assert_true(uv_now(&w.h.loop) - t0 < 1000);
  assert_int_equal(nl_probe_manager_status_probe(&sc, "c", "c1", false), NL_STATUS_PROBE_SUCCESS);
  nl_probe_manager_remove_pod(&w.m, "u1");
  nl_pod_free(pod);
  world_finish(&w);
}

static void test_reconcile_takes_the_latest_version(void **state) {
  (void)state;
  world_t w;
  world_start(&w);
  const char *probe = "    readinessProbe:\n      httpGet: {path: /r, port: PORT}\n"
                      "      periodSeconds: 1\n";
  nl_pod_t *first = probe_pod(w.web.port, probe), *latest = probe_pod(w.web.port, probe);
  nl_pod_t *other = probe_pod(w.web.port, "    livenessProbe:\n      tcpSocket: {port: PORT}\n");
  nl_probe_manager_add_pod(&w.m, first);
  wait_checks(&w, 1);
  assert_int_equal(first->arena->refs, 2);
  nl_probe_manager_reconcile_pod(&w.m, latest);
  assert_int_equal(first->arena->refs, 1); /* let go: one copy of the pod is kept */
  assert_int_equal(latest->arena->refs, 2);
  nl_pod_free(first);
  /* the workers probe from the version they now hold */
  wait_checks(&w, 3);
  assert_int_equal(w.web.hits_r, 3);
  /* a version whose probes differ is not taken */
  nl_probe_manager_reconcile_pod(&w.m, other);
  assert_int_equal(other->arena->refs, 1);
  assert_int_equal(latest->arena->refs, 2);
  wait_checks(&w, 4);
  assert_int_equal(w.web.hits_r, 4);
  nl_pod_free(latest);
  nl_pod_free(other);
  world_finish(&w);
}

static void test_initial_delay_and_errors(void **state) {
  (void)state;
  world_t w;
  world_start(&w);
  nl_pod_t *pod = probe_pod(w.web.port,
                            "    livenessProbe:\n      httpGet: {path: /l, port: PORT}\n"
                            "      periodSeconds: 1\n      initialDelaySeconds: 3600\n"
                            "    readinessProbe:\n      httpGet: {path: /r, port: nope}\n"
                            "      periodSeconds: 1\n");
  nl_probe_manager_add_pod(&w.m, pod);
  harness_sleep(&w.h, 120);
  assert_int_equal(w.web.hits_l, 0); /* initial delay */
  /* an unresolvable port is an error: reported, result unchanged */
  assert_true(w.m.checks_done > 0);
  assert_non_null(strstr(w.last_event, "Readiness probe errored: port nope not found"));
  assert_int_equal(nl_probe_manager_result(&w.m, "c1", NL_PROBE_TYPE_READINESS),
                   NL_PROBE_RESULT_FAILURE);
  w.now += (int64_t)3600 * 1000000000;
  harness_sleep(&w.h, 80);
  assert_true(w.web.hits_l > 0);
  /* terminating: liveness stops and counts as success (a check already sent
   * may still reach the server: counted from when it had time to) */
  nl_probe_manager_stop_liveness(&w.m, "u1");
  harness_sleep(&w.h, 80);
  int l = w.web.hits_l;
  harness_sleep(&w.h, 1200);
  assert_int_equal(w.web.hits_l, l);
  assert_int_equal(nl_probe_manager_result(&w.m, "c1", NL_PROBE_TYPE_LIVENESS),
                   NL_PROBE_RESULT_SUCCESS);
  nl_pod_free(pod);
  world_finish(&w); /* stop with workers still registered */
}


/* ---- lifecycle hooks ---- */

typedef struct hres {
  int done;
  bool ok;
  char err[512];
} hres_t;

static void on_hook(void *ctx, const char *err) {
  hres_t *r = ctx;
  r->ok = err == NULL;
  snprintf(r->err, sizeof r->err, "%s", err ? err : "");
  r->done++;
}

static void test_hooks(void **state) {
  (void)state;
  harness_t h;
  harness_start(&h, NULL);
  crun_t ct;
  make_container(&h, &ct);
  nl_pod_t *pod = probe_pod(1, "");
  const nl_container_t *c = &pod->spec.containers[0];
  char *cmd[] = {"touch", "/tmp/started"};
  nl_exec_action_t ex = {.command = {cmd, 2}};
  nl_handler_t hd = {.exec = &ex};
  nl_hook_req_t req = {.pod = pod, .container = c, .container_id = ct.id, .handler = &hd,
                       .pod_ip = "127.0.0.1"};
  hres_t r = {0};
  nl_hook_run(&h.loop, &h.client, &req, on_hook, &r);
  assert_int_equal(r.done, 0);
  harness_wait(&h, &r.done, 1, 5000);
  assert_true(r.ok);

  fake_cri_fault_t f = {.kind = FAKE_CRI_STATUS, .code = 2, .message = "exec failed", .times = 1};
  fake_cri_set_fault(h.fake, "ExecSync", &f);
  memset(&r, 0, sizeof r);
  nl_hook_run(&h.loop, &h.client, &req, on_hook, &r);
  harness_wait(&h, &r.done, 1, 5000);
  assert_false(r.ok);
  assert_string_equal(r.err, "Exec lifecycle hook ([touch /tmp/started]) for Container \"c\" in "
                             "Pod \"p_default(u1)\" failed - error: rpc error: code = Unknown "
                             "desc = exec failed");

  /* an exec hook that hangs is abandoned at the limit (preStop's grace period) */
  f = (fake_cri_fault_t){.kind = FAKE_CRI_STALL, .times = 1};
  fake_cri_set_fault(h.fake, "ExecSync", &f);
  memset(&r, 0, sizeof r);
  req.limit_ms = 200;
  uint64_t t0 = uv_now(&h.loop);
  nl_hook_run(&h.loop, &h.client, &req, on_hook, &r);
  harness_wait(&h, &r.done, 1, 5000);
  assert_true(r.ok);
  assert_true(uv_now(&h.loop) - t0 >= 190);

  /* httpGet: any answer is fine, a refused connection is not */
  web_t w;
  web_start(&h.loop, &w);
  nl_http_get_action_t a;
  nl_handler_t hh = http_h(&a, "/fail", w.port);
  req.handler = &hh;
  req.limit_ms = 0;
  memset(&r, 0, sizeof r);
  nl_hook_run(&h.loop, &h.client, &req, on_hook, &r);
  harness_wait(&h, &r.done, 1, 5000);
  assert_true(r.ok);
  web_stop(&w);
  harness_sleep(&h, 20);
  memset(&r, 0, sizeof r);
  nl_hook_run(&h.loop, &h.client, &req, on_hook, &r);
  harness_wait(&h, &r.done, 1, 5000);
  assert_false(r.ok);
  assert_non_null(strstr(r.err, "HTTP lifecycle hook (/fail) for Container \"c\" in Pod "
                                "\"p_default(u1)\" failed - error: Get \"http://127.0.0.1:"));
  assert_non_null(strstr(r.err, "connection refused"));

  /* sleep: cut short by the limit; cancel: the callback still comes, once */
  nl_sleep_action_t sl = {.seconds = 30};
  nl_handler_t hs = {.sleep = &sl};
  req.handler = &hs;
  req.limit_ms = 100;
  memset(&r, 0, sizeof r);
  t0 = uv_now(&h.loop);
  nl_hook_run(&h.loop, &h.client, &req, on_hook, &r);
  harness_wait(&h, &r.done, 1, 5000);
  assert_true(r.ok);
  assert_true(uv_now(&h.loop) - t0 < 1000);
  req.limit_ms = 0;
  memset(&r, 0, sizeof r);
  nl_hook_t *k = nl_hook_run(&h.loop, &h.client, &req, on_hook, &r);
  nl_hook_cancel(k);
  nl_hook_cancel(k);
  harness_wait(&h, &r.done, 1, 5000);
  assert_string_equal(r.err, "cancelled");
  harness_sleep(&h, 50);
  assert_int_equal(r.done, 1);
  nl_pod_free(pod);
  harness_finish(&h);
  assert_true(w.stopped);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_http),
      cmocka_unit_test(test_https),
      cmocka_unit_test(test_tcp),
      cmocka_unit_test(test_grpc),
      cmocka_unit_test(test_grpc_wire),
      cmocka_unit_test(test_exec),
      cmocka_unit_test(test_readiness_thresholds),
      cmocka_unit_test(test_liveness_hold),
      cmocka_unit_test(test_warning_event),
      cmocka_unit_test(test_startup_gates),
      cmocka_unit_test(test_readiness_right_after_startup),
      cmocka_unit_test(test_reconcile_takes_the_latest_version),
      cmocka_unit_test(test_initial_delay_and_errors),
      cmocka_unit_test(test_not_started_yet),
      cmocka_unit_test(test_hooks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
