/* The API client against the scripted fake API server (test/fakes), over real
 * loopback TLS on the test's loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>

#include "agent/kube/client.h"
#include "agent/kube/kubeconfig.h"
#include "agent/kube/pb.h"
#include "reactor/buf.h"
#include "test/fakes/fake_apiserver.h"

#define FIX(name) FIXTURES "/tls/" name

typedef struct result {
  int calls, status, err_code, heads, head_status;
  char head_type[128];
  char body[8192];
  char err[1024];
  nl_buf_t data;
} result_t;

static void on_done(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  result_t *r = ctx;
  r->calls++;
  if (err) {
    r->err_code = err->code;
    snprintf(r->err, sizeof r->err, "%s", err->msg);
  } else {
    r->status = resp->status;
    snprintf(r->body, sizeof r->body, "%s", resp->body);
  }
}

static void on_head(void *ctx, int status, const char *content_type) {
  result_t *r = ctx;
  r->heads++;
  r->head_status = status;
  snprintf(r->head_type, sizeof r->head_type, "%s", content_type);
}

static void on_data(void *ctx, const char *p, size_t n) { nl_buf_append(&((result_t *)ctx)->data, p, n); }

typedef struct world {
  uv_loop_t loop;
  nl_fake_as_t *fake;
  nl_kube_client_t *client;
  nl_kubeconfig_t kc;
  nl_kube_client_opts_t opts;
  bool stopped;
} world_t;

static void world_init(world_t *w, const nl_fake_as_opts_t *fo) {
  memset(w, 0, sizeof *w);
  assert_int_equal(uv_loop_init(&w->loop), 0);
  w->fake = nl_fake_as_start(&w->loop, fo);
  w->kc.server = (char *)nl_fake_as_url(w->fake);
  w->kc.ca_file = FIX("ca.crt");
  w->kc.cert_file = FIX("client.crt");
  w->kc.key_file = FIX("client.key");
  w->opts.kubeconfig = &w->kc;
  w->opts.default_timeout_ms = 5000;
}

static void client_start(world_t *w) {
  nl_err_t *err = NULL;
  if (nl_kube_client_new(&w->client, &w->loop, &w->opts, &err) < 0) fail_msg("%s", nl_err_msg(err));
}

static void stopped(void *ctx) { ((world_t *)ctx)->stopped = true; }

static void world_end(world_t *w) {
  if (w->client) nl_kube_client_stop(w->client, stopped, w);
  nl_fake_as_stop(w->fake);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  if (w->client) assert_true(w->stopped);
  assert_int_equal(uv_loop_close(&w->loop), 0);
}

static void run_until(world_t *w, int *counter, int want) {
  while (*counter < want) uv_run(&w->loop, UV_RUN_ONCE);
}

static nl_kube_req_t *req(world_t *w, const char *method, const char *path, const char *body,
                          uint64_t timeout_ms, result_t *r) {
  nl_kube_request_opts_t o = {.method = method, .path = path, .body = body,
                              .body_len = body ? strlen(body) : 0, .timeout_ms = timeout_ms};
  return nl_kube_request(w->client, &o, on_done, r);
}

static void get(world_t *w, const char *path, uint64_t timeout_ms, result_t *r) {
  req(w, "GET", path, NULL, timeout_ms, r);
  run_until(w, &r->calls, 1);
}

/* ---- requests ----------------------------------------------------------- */

/* GET and POST over h2 with a client certificate the server verifies and a
 * bearer token; the headers client-go sends arrive. */
static void requests_over_h2(void **state) {
  world_t w;
  nl_fake_as_opts_t fo = {.require_client_cert = true};
  world_init(&w, &fo);
  w.kc.token = "s3cret";
  client_start(&w);
  assert_false(nl_kube_client_connected(w.client));
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.method = "GET", .path = "/api/v1/nodes/n1",
                                              .body = "{\"kind\":\"Node\"}"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.method = "POST", .status = 201, .body = "{}"});
  result_t r = {0};
  get(&w, "/api/v1/nodes/n1", 0, &r);
  assert_int_equal(r.err_code, 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "{\"kind\":\"Node\"}");
  assert_true(nl_kube_client_connected(w.client));
  result_t p = {0};
  req(&w, "POST", "/api/v1/nodes", "{\"metadata\":{}}", 0, &p);
  run_until(&w, &p.calls, 1);
  assert_int_equal(p.status, 201);
  const nl_fake_as_req_t *a = nl_fake_as_req(w.fake, 0), *b = nl_fake_as_req(w.fake, 1);
  assert_string_equal(a->method, "GET");
  assert_string_equal(a->path, "/api/v1/nodes/n1");
  char auth[64];
  snprintf(auth, sizeof auth, "127.0.0.1:%d", nl_fake_as_port(w.fake));
  assert_string_equal(a->authority, auth);
  assert_string_equal(a->authorization, "Bearer s3cret");
  assert_string_equal(a->accept, "application/json, */*");
  assert_non_null(strstr(a->user_agent, "nanolet/"));
  assert_null(a->content_type);
  assert_string_equal(b->method, "POST");
  assert_string_equal(b->content_type, "application/json");
  assert_string_equal(b->body, "{\"metadata\":{}}");
  assert_int_equal(nl_fake_as_nconns(w.fake), 1);
  assert_int_equal(r.calls, 1);
  world_end(&w);
}

/* 50 requests at once share one TCP connection. */
static void concurrent_one_connection(void **state) {
  world_t w;
  world_init(&w, NULL);
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.repeat = true, .body = "ok", .delay_ms = 20});
  result_t r[50];
  int done = 0;
  memset(r, 0, sizeof r);
  for (int i = 0; i < 50; i++) req(&w, "GET", "/api/v1/pods", NULL, 0, &r[i]);
  while (done < 50) {
    uv_run(&w.loop, UV_RUN_ONCE);
    done = 0;
    for (int i = 0; i < 50; i++) done += r[i].calls;
  }
  for (int i = 0; i < 50; i++) {
    assert_int_equal(r[i].calls, 1);
    assert_int_equal(r[i].status, 200);
  }
  assert_int_equal(nl_fake_as_nconns(w.fake), 1);
  assert_int_equal(nl_fake_as_nreqs(w.fake), 50);
  world_end(&w);
}

/* TLS failures read as Go's and name the request. A certificate the client
 * cannot trust fails the request at once, not at its deadline (10 s here). */
static void tls_failures(void **state) {
  struct {
    const char *ca, *server_name, *want;
    int code;
    bool client_cert_required, no_cert;
  } cases[] = {
      {FIX("other-ca.crt"), NULL, "tls: failed to verify certificate: x509: certificate signed by unknown authority", EPROTO},
      {FIX("ca.crt"), "wrong.example", "tls: failed to verify certificate: x509: certificate is valid for localhost, not wrong.example", EPROTO},
      /* The server hangs up on a client without a certificate. */
      {FIX("ca.crt"), NULL, "EOF", ECONNRESET, true, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    world_t w;
    nl_fake_as_opts_t fo = {.require_client_cert = cases[i].client_cert_required};
    world_init(&w, &fo);
    w.kc.ca_file = (char *)cases[i].ca;
    w.kc.tls_server_name = (char *)cases[i].server_name;
    if (cases[i].no_cert) w.kc.cert_file = w.kc.key_file = NULL;
    client_start(&w);
    result_t r = {0};
    bool at_once = cases[i].code == EPROTO;
    uint64_t t0 = uv_now(&w.loop);
    get(&w, "/api/v1/nodes/n1", at_once ? 10000 : 300, &r);
    if (at_once && uv_now(&w.loop) - t0 > 2000) fail_msg("case %zu: failed only at the deadline", i);
    char want[512];
    snprintf(want, sizeof want, "Get \"%s/api/v1/nodes/n1\": %s", nl_fake_as_url(w.fake), cases[i].want);
    if (strncmp(r.err, want, strlen(want))) fail_msg("case %zu: %s", i, r.err);
    assert_int_equal(r.err_code, cases[i].code);
    world_end(&w);
  }
}

/* insecure-skip-tls-verify: any certificate, any name. */
static void insecure(void **state) {
  world_t w;
  world_init(&w, NULL);
  w.kc.ca_file = NULL;
  w.kc.insecure = true;
  w.kc.tls_server_name = "wrong.example";
  client_start(&w);
  result_t r = {0};
  get(&w, "/version", 0, &r);
  assert_int_equal(r.status, 404);
  assert_non_null(strstr(r.body, "NotFound"));
  world_end(&w);
}

static void config_errors(void **state) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_kubeconfig_t kc = {.path = "/etc/kubernetes/kubelet.conf", .server = "http://10.0.0.1:6443"};
  nl_kube_client_opts_t o = {.kubeconfig = &kc};
  nl_kube_client_t *c = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_client_new(&c, &loop, &o, &err), -1);
  assert_non_null(strstr(err->msg, "only https"));
  nl_err_free(&err);
  kc.server = "https://10.0.0.1:6443";
  assert_int_equal(nl_kube_client_new(&c, &loop, &o, &err), -1);
  assert_non_null(strstr(err->msg, "no certificate-authority"));
  nl_err_free(&err);
  kc.ca_file = "/nonexistent/ca.crt";
  assert_int_equal(nl_kube_client_new(&c, &loop, &o, &err), -1);
  assert_non_null(strstr(err->msg, "/nonexistent/ca.crt"));
  nl_err_free(&err);
  kc.ca_file = FIX("ca.crt");
  kc.cert_file = FIX("client.crt");
  kc.key_file = FIX("server.key");
  assert_int_equal(nl_kube_client_new(&c, &loop, &o, &err), -1);
  assert_non_null(strstr(err->msg, "does not match"));
  nl_err_free(&err);
  assert_null(c);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- timeouts and cancel ------------------------------------------------ */

static void timeout_and_cancel(void **state) {
  world_t w;
  world_init(&w, NULL);
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.repeat = true, .action = FAKE_AS_NOTHING});
  result_t r = {0}, c = {0};
  uint64_t t0 = uv_now(&w.loop);
  get(&w, "/slow", 200, &r);
  assert_true(uv_now(&w.loop) - t0 >= 200);
  assert_int_equal(r.err_code, NL_ETIMEOUT);
  char want[256];
  snprintf(want, sizeof want, "Get \"%s/slow\": context deadline exceeded", nl_fake_as_url(w.fake));
  assert_string_equal(r.err, want);
  nl_kube_req_t *q = req(&w, "GET", "/slow", NULL, 0, &c);
  nl_kube_req_cancel(q);
  assert_int_equal(c.calls, 0); /* never from inside cancel */
  run_until(&w, &c.calls, 1);
  assert_int_equal(c.err_code, NL_ECLOSED);
  assert_non_null(strstr(c.err, "context canceled"));
  world_end(&w);
}

/* The server grants a 16-byte window and never updates it: the body stalls. */
static void flow_control_stall(void **state) {
  world_t w;
  nl_fake_as_opts_t fo = {.stall_window = 16};
  world_init(&w, &fo);
  client_start(&w);
  /* Past the 64 KiB the connection window allows before any update. */
  static char body[100000];
  memset(body, 'x', sizeof body - 1);
  result_t r = {0};
  req(&w, "POST", "/api/v1/namespaces/default/events", body, 300, &r);
  run_until(&w, &r.calls, 1);
  assert_int_equal(r.err_code, NL_ETIMEOUT);
  assert_int_equal(nl_fake_as_nreqs(w.fake), 1);
  assert_null(nl_fake_as_req(w.fake, 0)->body); /* the request never completed */
  world_end(&w);
}

/* ---- retries ------------------------------------------------------------ */

static void retry_after(void **state) {
  world_t w;
  world_init(&w, NULL);
  client_start(&w);
  nl_fake_as_rule_t tmr = {.path = "/a", .status = 429, .retry_after = "0", .body = "{}"};
  nl_fake_as_add(w.fake, &tmr);
  nl_fake_as_add(w.fake, &tmr);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/a", .body = "done"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/b", .status = 503, .retry_after = "1"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/b", .body = "up"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/c", .status = 500, .body = "broken"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/d", .repeat = true, .status = 429, .retry_after = "0"});
  result_t a = {0}, b = {0}, c = {0}, d = {0};
  req(&w, "POST", "/a", "{\"x\":1}", 0, &a);
  run_until(&w, &a.calls, 1);
  assert_int_equal(a.status, 200);
  assert_string_equal(a.body, "done");
  assert_int_equal(nl_fake_as_nreqs(w.fake), 3);
  assert_string_equal(nl_fake_as_req(w.fake, 2)->body, "{\"x\":1}"); /* the body again */
  uint64_t t0 = uv_now(&w.loop);
  get(&w, "/b", 0, &b);
  assert_int_equal(b.status, 200);
  assert_true(uv_now(&w.loop) - t0 >= 1000); /* Retry-After: 1 */
  get(&w, "/c", 0, &c);
  assert_int_equal(c.status, 500); /* no Retry-After: the caller's */
  assert_string_equal(c.body, "broken");
  size_t before = nl_fake_as_nreqs(w.fake);
  get(&w, "/d", 0, &d);
  assert_int_equal(d.status, 429); /* after 10 retries, the last answer */
  assert_int_equal(nl_fake_as_nreqs(w.fake) - before, 11);
  world_end(&w);
}

/* GOAWAY: streams up to last-stream-id complete on the old connection; the
 * refused one is sent again on a new connection, transparently. */
static void goaway(void **state) {
  world_t w;
  world_init(&w, NULL);
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/first", .delay_ms = 100, .body = "1"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/second", .action = FAKE_AS_GOAWAY,
                                              .goaway_refuse = true});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/second", .body = "2"});
  result_t a = {0}, b = {0};
  req(&w, "GET", "/first", NULL, 0, &a);
  req(&w, "POST", "/second", "{}", 0, &b);
  run_until(&w, &a.calls, 1);
  run_until(&w, &b.calls, 1);
  assert_int_equal(a.status, 200);
  assert_string_equal(a.body, "1");
  assert_int_equal(b.status, 200);
  assert_string_equal(b.body, "2");
  assert_int_equal(nl_fake_as_nconns(w.fake), 2);
  assert_int_equal(nl_fake_as_req(w.fake, 2)->conn, 2);
  world_end(&w);
}

static void rst_stream(void **state) {
  world_t w;
  world_init(&w, NULL);
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.action = FAKE_AS_RST, .rst_code = 2});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.body = "fine"});
  result_t r = {0}, s = {0};
  get(&w, "/x", 0, &r);
  assert_int_equal(r.err_code, EPROTO);
  assert_non_null(strstr(r.err, "stream error: stream ID 1; INTERNAL_ERROR; received from peer"));
  get(&w, "/y", 0, &s); /* the connection is fine */
  assert_int_equal(s.status, 200);
  assert_int_equal(nl_fake_as_nconns(w.fake), 1);
  world_end(&w);
}

/* RST_STREAM(NO_ERROR) before the response ended is no response (Go: "stream
 * error: stream ID 1; NO_ERROR; received from peer"), not an empty 200. */
static void rst_stream_no_error(void **state) {
  world_t w;
  world_init(&w, NULL);
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.action = FAKE_AS_RST, .rst_code = 0});
  result_t r = {0};
  get(&w, "/x", 0, &r);
  assert_int_equal(r.err_code, EPROTO);
  assert_non_null(strstr(r.err, "stream error: stream ID 1; NO_ERROR; received from peer"));
  world_end(&w);
}

/* ---- streams ------------------------------------------------------------ */

static void watch_stream(void **state) {
  world_t w;
  world_init(&w, NULL);
  client_start(&w);
  static const char *const ev[] = {"{\"type\":\"ADDED\"}\n", "{\"type\":\"MODIFIED\"}\n"};
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/api/v1/pods?watch=1", .chunks = ev,
                                              .n_chunks = 2, .chunk_ms = 20,
                                              .content_type = "application/json;stream=watch"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/torn", .chunks = ev, .n_chunks = 1,
                                              .chunk_ms = 10, .action = FAKE_AS_CLOSE});
  result_t r = {0}, t = {0};
  nl_kube_request_opts_t o = {.path = "/api/v1/pods?watch=1", .on_head = on_head,
                              .on_data = on_data, .timeout_ms = 5000};
  nl_kube_request(w.client, &o, on_done, &r);
  run_until(&w, &r.calls, 1);
  assert_int_equal(r.heads, 1);
  assert_int_equal(r.head_status, 200);
  /* the head's Content-Type, which picks the watch decoder */
  assert_string_equal(r.head_type, "application/json;stream=watch");
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "");
  nl_buf_puts(&r.data, "");
  assert_string_equal(r.data.data, "{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n");
  /* A stream torn mid-watch ends with an error after the data it had. */
  o.path = "/torn";
  nl_kube_request(w.client, &o, on_done, &t);
  run_until(&w, &t.calls, 1);
  assert_int_equal(t.heads, 1);
  assert_int_not_equal(t.err_code, 0);
  assert_non_null(strstr(t.err, "Get \""));
  nl_buf_puts(&t.data, "");
  assert_string_equal(t.data.data, "{\"type\":\"ADDED\"}\n");
  nl_buf_free(&r.data);
  nl_buf_free(&t.data);
  world_end(&w);
}

/* ---- a new client certificate -------------------------------------------- */

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char *buf = calloc(1, 16384);
  size_t n = fread(buf, 1, 16383, f);
  fclose(f);
  buf[n] = 0;
  return buf;
}

/* Rotation: the watch in flight goes on to its end on the old connection and
 * loses no event; the next request opens a new connection with the new pair. */
static void new_certificate_drains(void **state) {
  world_t w;
  nl_fake_as_opts_t fo = {.require_client_cert = true};
  world_init(&w, &fo);
  client_start(&w);
  static const char *const ev[] = {"{\"type\":\"ADDED\"}\n", "{\"type\":\"MODIFIED\"}\n",
                                   "{\"type\":\"DELETED\"}\n"};
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/api/v1/pods?watch=1", .chunks = ev,
                                              .n_chunks = 3, .chunk_ms = 150});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/api/v1/nodes/n1", .repeat = true,
                                              .body = "{}"});
  result_t watch = {0}, a = {0}, b = {0};
  nl_kube_request_opts_t o = {.path = "/api/v1/pods?watch=1", .on_head = on_head,
                              .on_data = on_data, .timeout_ms = 5000};
  nl_kube_request(w.client, &o, on_done, &watch);
  run_until(&w, &watch.heads, 1);
  get(&w, "/api/v1/nodes/n1", 0, &a);
  assert_int_equal(a.status, 200);
  char *cert = slurp(FIX("client.crt")), *key = slurp(FIX("client.key"));
  nl_err_t *err = NULL;
  /* a key that is not the certificate's is refused; the old pair stays */
  char *other = slurp(FIX("server.key"));
  assert_int_equal(nl_kube_client_set_cert(w.client, cert, other, &err), -1);
  assert_non_null(err);
  nl_err_free(&err);
  assert_true(nl_kube_client_connected(w.client));
  assert_int_equal(nl_kube_client_set_cert(w.client, cert, key, &err), 0);
  assert_false(nl_kube_client_connected(w.client)); /* the open connection drains */
  get(&w, "/api/v1/nodes/n1", 0, &b);
  assert_int_equal(b.status, 200);
  run_until(&w, &watch.calls, 1);
  assert_int_equal(watch.err_code, 0);
  nl_buf_puts(&watch.data, "");
  assert_string_equal(watch.data.data,
                      "{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n{\"type\":\"DELETED\"}\n");
  assert_int_equal(nl_fake_as_req(w.fake, 0)->conn, 1); /* the watch */
  assert_int_equal(nl_fake_as_req(w.fake, 1)->conn, 1);
  assert_int_equal(nl_fake_as_req(w.fake, 2)->conn, 2); /* after the new certificate */
  nl_buf_free(&watch.data);
  free(cert);
  free(key);
  free(other);
  world_end(&w);
}

/* ---- connection health -------------------------------------------------- */

/* A peer that goes silent is noticed by the PING health check; the next
 * request gets a new connection. */
static void silent_server(void **state) {
  world_t w;
  world_init(&w, NULL);
  w.opts.read_idle_timeout_ms = 100;
  w.opts.ping_timeout_ms = 100;
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/hang", .action = FAKE_AS_SILENT});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/ok", .body = "ok"});
  result_t r = {0}, s = {0};
  get(&w, "/hang", 5000, &r);
  assert_int_equal(r.err_code, ETIMEDOUT);
  assert_non_null(strstr(r.err, "http2: client connection lost"));
  get(&w, "/ok", 0, &s);
  assert_int_equal(s.status, 200);
  assert_int_equal(nl_fake_as_nconns(w.fake), 2);
  world_end(&w);
}

static void on_timer_relisten(uv_timer_t *t) {
  nl_fake_as_listen(t->data);
  uv_close((uv_handle_t *)t, NULL);
}

/* Server down: requests wait for a connection until their timeout and fail
 * with the dial error; once it is back, the client connects (with back-off). */
static void server_down(void **state) {
  world_t w;
  world_init(&w, NULL);
  w.opts.backoff_initial_ms = 50;
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.repeat = true, .body = "ok"});
  result_t r = {0}, s = {0};
  get(&w, "/a", 0, &r);
  assert_int_equal(r.status, 200);
  nl_fake_as_down(w.fake);
  uv_run(&w.loop, UV_RUN_NOWAIT);
  result_t d = {0};
  get(&w, "/b", 300, &d);
  assert_int_equal(d.err_code, ECONNREFUSED);
  char want[256];
  snprintf(want, sizeof want, "Get \"%s/b\": dial tcp 127.0.0.1:%d: connect: connection refused",
           nl_fake_as_url(w.fake), nl_fake_as_port(w.fake));
  assert_string_equal(d.err, want);
  /* Back in 300 ms; a request waiting meanwhile succeeds. */
  uv_timer_t t;
  uv_timer_init(&w.loop, &t);
  t.data = w.fake;
  uv_timer_start(&t, on_timer_relisten, 300, 0);
  get(&w, "/c", 3000, &s);
  assert_int_equal(s.status, 200);
  assert_true(nl_kube_client_connected(w.client));
  world_end(&w);
}

/* A request with fail_on_dial hears of a refused connection at once, with the
 * dial error; one without it waits for the next attempt until its deadline. */
static void fail_on_dial(void **state) {
  world_t w;
  world_init(&w, NULL);
  w.opts.backoff_initial_ms = 50;
  client_start(&w);
  nl_fake_as_down(w.fake);
  result_t fast = {0}, patient = {0};
  nl_kube_request_opts_t o = {.method = "GET", .path = "/list", .timeout_ms = 5000,
                              .fail_on_dial = true};
  uint64_t t0 = uv_now(&w.loop);
  nl_kube_request(w.client, &o, on_done, &fast);
  req(&w, "GET", "/b", NULL, 400, &patient);
  run_until(&w, &fast.calls, 1);
  assert_true(uv_now(&w.loop) - t0 < 300);
  assert_int_equal(fast.err_code, ECONNREFUSED);
  assert_non_null(strstr(fast.err, "connect: connection refused"));
  assert_int_equal(patient.calls, 0);
  run_until(&w, &patient.calls, 1);
  assert_true(uv_now(&w.loop) - t0 >= 400);
  assert_int_equal(patient.err_code, ECONNREFUSED);
  world_end(&w);
}

/* ---- rate limit ---------------------------------------------------------- */

static void on_refilled(uv_timer_t *t) { (void)t; }

static void rate_limit(void **state) {
  world_t w;
  world_init(&w, NULL);
  w.opts.qps = 10;
  w.opts.burst = 2;
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.repeat = true, .body = "ok"});
  result_t r[5];
  memset(r, 0, sizeof r);
  /* Connected first (a TLS handshake under a sanitizer and load can take
   * longer than the burst's window), then a full bucket again. */
  result_t warm = {0};
  get(&w, "/x", 0, &warm);
  uv_timer_t refill;
  uv_timer_init(&w.loop, &refill);
  uv_timer_start(&refill, on_refilled, 300, 0);
  while (uv_is_active((uv_handle_t *)&refill)) uv_run(&w.loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&refill, NULL);
  uint64_t t0 = uv_now(&w.loop);
  for (int i = 0; i < 5; i++) req(&w, "GET", "/x", NULL, 0, &r[i]);
  run_until(&w, &r[1].calls, 1);
  assert_true(uv_now(&w.loop) - t0 < 100); /* the burst */
  run_until(&w, &r[4].calls, 1);
  uint64_t el = uv_now(&w.loop) - t0;
  assert_true(el >= 300 && el < 1000); /* then 100 ms apart */
  /* A wait past the request's timeout fails at once, as client-go. */
  result_t x = {0};
  for (int i = 0; i < 5; i++) req(&w, "GET", "/x", NULL, 0, &r[i]);
  req(&w, "GET", "/x", NULL, 50, &x);
  run_until(&w, &x.calls, 1);
  assert_non_null(strstr(x.err, "rate: Wait(n=1) would exceed context deadline"));
  for (int i = 0; i < 5; i++) run_until(&w, &r[i].calls, 2);
  world_end(&w);
}

/* ---- more streams than a connection allows -------------------------------- */

static void on_wait(uv_timer_t *t) { uv_close((uv_handle_t *)t, NULL); }

static void run_for(world_t *w, uint64_t ms) {
  uv_timer_t t;
  uv_timer_init(&w->loop, &t);
  uv_timer_start(&t, on_wait, ms, 0);
  while (uv_is_active((uv_handle_t *)&t)) uv_run(&w->loop, UV_RUN_ONCE);
  uv_run(&w->loop, UV_RUN_NOWAIT); /* its close callback */
}

static nl_kube_req_t *watch(world_t *w, const char *path, result_t *r) {
  nl_kube_request_opts_t o = {.path = path, .on_head = on_head, .on_data = on_data,
                              .timeout_ms = 5000};
  return nl_kube_request(w->client, &o, on_done, r);
}

/* Opens watches one after the other (so the server's SETTINGS are known). */
static void watches(world_t *w, nl_kube_req_t **q, result_t *r, int from, int to) {
  for (int i = from; i < to; i++) {
    q[i] = watch(w, "/w", &r[i]);
    run_until(w, &r[i].heads, 1);
  }
}

/* A server allowing 4 streams per connection: watches take 3 of them (one is
 * kept for short requests), the 4th watch opens a second connection, and at
 * the bound (2 connections) a 7th waits while a Lease-like PUT still goes
 * through at once. An extra connection closes when idle; the last one stays. */
static void streams_overflow(void **state) {
  world_t w;
  nl_fake_as_opts_t fo = {.max_streams = 4};
  world_init(&w, &fo);
  w.opts.max_conns = 2;
  w.opts.idle_conn_timeout_ms = 200;
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/w", .repeat = true, .hold = true});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/lease", .repeat = true, .body = "{}"});
  nl_kube_req_t *q[7];
  result_t r[7];
  memset(r, 0, sizeof r);
  watches(&w, q, r, 0, 3);
  assert_int_equal(nl_fake_as_nconns(w.fake), 1);
  watches(&w, q, r, 3, 6);
  assert_int_equal(nl_fake_as_nconns(w.fake), 2);
  for (int i = 0; i < 6; i++) assert_int_equal(nl_fake_as_req(w.fake, i)->conn, i < 3 ? 1 : 2);
  q[6] = watch(&w, "/w", &r[6]);
  result_t lease = {0};
  req(&w, "PUT", "/lease", "{}", 1000, &lease);
  run_until(&w, &lease.calls, 1);
  assert_int_equal(lease.status, 200);
  assert_int_equal(nl_fake_as_req(w.fake, 6)->conn, 1);
  assert_int_equal(r[6].heads, 0);
  assert_int_equal(nl_fake_as_nconns(w.fake), 2); /* the bound */
  /* A stream freed on the second connection goes to the waiting watch. */
  nl_kube_req_cancel(q[3]);
  run_until(&w, &r[6].heads, 1);
  assert_int_equal(nl_fake_as_req(w.fake, 7)->conn, 2);
  for (int i = 4; i < 7; i++) nl_kube_req_cancel(q[i]);
  run_until(&w, &r[6].calls, 1);
  assert_int_equal(r[6].err_code, NL_ECLOSED);
  assert_int_equal(nl_fake_as_nopen(w.fake), 2);
  run_for(&w, 400);
  assert_int_equal(nl_fake_as_nopen(w.fake), 1);
  for (int i = 0; i < 3; i++) nl_kube_req_cancel(q[i]);
  run_for(&w, 400);
  assert_int_equal(nl_fake_as_nopen(w.fake), 1);
  assert_true(nl_kube_client_connected(w.client));
  result_t again = {0};
  get(&w, "/lease", 0, &again);
  assert_int_equal(again.status, 200);
  assert_int_equal(nl_fake_as_nconns(w.fake), 2);
  for (int i = 0; i < 7; i++) {
    assert_int_equal(r[i].calls, 1);
    nl_buf_free(&r[i].data);
  }
  world_end(&w);
}

/* Short requests fill a connection too: the one beyond its streams opens
 * another instead of waiting behind slow answers. */
static void short_requests_overflow(void **state) {
  world_t w;
  nl_fake_as_opts_t fo = {.max_streams = 2};
  world_init(&w, &fo);
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/x", .body = "first"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/slow", .repeat = true, .delay_ms = 3000});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/x", .repeat = true, .body = "fast"});
  result_t first = {0}, slow[2], fast = {0};
  memset(slow, 0, sizeof slow);
  get(&w, "/x", 0, &first); /* the server's SETTINGS are in */
  for (int i = 0; i < 2; i++) req(&w, "GET", "/slow", NULL, 0, &slow[i]);
  get(&w, "/x", 1000, &fast);
  assert_int_equal(fast.status, 200);
  assert_string_equal(fast.body, "fast");
  assert_int_equal(slow[0].calls + slow[1].calls, 0);
  assert_int_equal(nl_fake_as_nconns(w.fake), 2);
  world_end(&w);
  for (int i = 0; i < 2; i++) assert_int_equal(slow[i].calls, 1);
}

/* A new certificate drains every connection; each watch ends on its own. */
static void new_certificate_drains_all(void **state) {
  world_t w;
  nl_fake_as_opts_t fo = {.max_streams = 2};
  world_init(&w, &fo);
  client_start(&w);
  static const char *const ev[] = {"{\"type\":\"ADDED\"}\n"};
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/w", .repeat = true, .chunks = ev,
                                              .n_chunks = 1, .chunk_ms = 300});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/n", .repeat = true, .body = "{}"});
  nl_kube_req_t *q[2];
  result_t r[2], a = {0};
  memset(r, 0, sizeof r);
  watches(&w, q, r, 0, 2);
  assert_int_equal(nl_fake_as_nconns(w.fake), 2);
  char *cert = slurp(FIX("client.crt")), *key = slurp(FIX("client.key"));
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_client_set_cert(w.client, cert, key, &err), 0);
  assert_false(nl_kube_client_connected(w.client));
  get(&w, "/n", 0, &a);
  assert_int_equal(a.status, 200);
  assert_int_equal(nl_fake_as_req(w.fake, 2)->conn, 3);
  for (int i = 0; i < 2; i++) {
    run_until(&w, &r[i].calls, 1);
    assert_int_equal(r[i].err_code, 0);
    nl_buf_puts(&r[i].data, "");
    assert_string_equal(r[i].data.data, "{\"type\":\"ADDED\"}\n");
    nl_buf_free(&r[i].data);
  }
  run_for(&w, 50);
  assert_int_equal(nl_fake_as_nopen(w.fake), 1);
  free(cert);
  free(key);
  world_end(&w);
}

/* ---- stop ----------------------------------------------------------------- */

static void stop_in_flight(void **state) {
  world_t w;
  world_init(&w, NULL);
  w.opts.qps = 1;
  w.opts.burst = 1;
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.repeat = true, .action = FAKE_AS_NOTHING});
  result_t r[4];
  memset(r, 0, sizeof r);
  for (int i = 0; i < 4; i++) req(&w, "GET", "/x", NULL, 0, &r[i]); /* one active, three throttled */
  while (nl_fake_as_nreqs(w.fake) < 1) uv_run(&w.loop, UV_RUN_ONCE);
  nl_kube_client_stop(w.client, stopped, &w);
  for (int i = 0; i < 4; i++) assert_int_equal(r[i].calls, 0);
  nl_fake_as_stop(w.fake);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  assert_true(w.stopped);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(r[i].calls, 1);
    assert_int_equal(r[i].err_code, NL_ECLOSED);
  }
  assert_int_equal(uv_loop_close(&w.loop), 0);
}

/* Stop with watches on two connections, one waiting and a third connection
 * being dialed: every request ends with NL_ECLOSED. */
static void stop_with_extra_connections(void **state) {
  world_t w;
  nl_fake_as_opts_t fo = {.max_streams = 2};
  world_init(&w, &fo);
  w.opts.max_conns = 3;
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/w", .repeat = true, .hold = true});
  nl_kube_req_t *q[4];
  result_t r[4];
  memset(r, 0, sizeof r);
  watches(&w, q, r, 0, 2);
  q[2] = watch(&w, "/w", &r[2]); /* the third connection is being dialed */
  q[3] = watch(&w, "/w", &r[3]);
  nl_kube_client_stop(w.client, stopped, &w);
  nl_fake_as_stop(w.fake);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  assert_true(w.stopped);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(r[i].calls, 1);
    assert_int_equal(r[i].err_code, NL_ECLOSED);
    nl_buf_free(&r[i].data);
  }
  assert_int_equal(uv_loop_close(&w.loop), 0);
}

/* ---- HTTP/1.1 fallback ----------------------------------------------------- */

static void http1_fallback(void **state) {
  world_t w;
  nl_fake_as_opts_t fo = {.http1_only = true};
  world_init(&w, &fo);
  w.kc.token = "t0k";
  client_start(&w);
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/api/v1/nodes/n1", .body = "{\"kind\":\"Node\"}"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/r", .status = 429, .retry_after = "0"});
  nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.path = "/r", .body = "again"});
  result_t r = {0}, p = {0}, q = {0};
  get(&w, "/api/v1/nodes/n1", 0, &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "{\"kind\":\"Node\"}");
  req(&w, "PATCH", "/api/v1/nodes/n1/status", "{}", 0, &p);
  run_until(&w, &p.calls, 1);
  assert_int_equal(p.status, 404);
  get(&w, "/r", 0, &q);
  assert_string_equal(q.body, "again");
  const nl_fake_as_req_t *a = nl_fake_as_req(w.fake, 0), *b = nl_fake_as_req(w.fake, 1);
  assert_string_equal(a->authorization, "Bearer t0k");
  assert_string_equal(b->method, "PATCH");
  assert_string_equal(b->content_type, "application/json");
  assert_string_equal(b->body, "{}");
  world_end(&w);
}

/* ---- protobuf (agent/kube/pb.h) --------------------------------------- */

typedef struct obj_result {
  int calls, status;
  char ctype[128];
  json_t *obj;
} obj_result_t;

static void on_obj(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  obj_result_t *r = ctx;
  r->calls++;
  assert_null(err);
  r->status = resp->status;
  snprintf(r->ctype, sizeof r->ctype, "%s", resp->content_type);
  nl_err_t *e = NULL;
  if (nl_kube_resp_json(resp, &r->obj, &e) < 0) fail_msg("%s", nl_err_msg(e));
}

static char *fixture(const char *name, size_t *len) {
  FILE *f = fopen(name, "rb");
  assert_non_null(f);
  char *buf = malloc(65536);
  *len = fread(buf, 1, 65536, f);
  fclose(f);
  return buf;
}

/* With contentType protobuf a Lease goes out and comes back as protobuf; a
 * kind pb.c does not know, and every kind with contentType JSON, stay JSON. */
static void protobuf_lease(void **state) {
  size_t plen;
  char *pb = fixture(FIXTURES "/api/lease.pb", &plen);
  json_t *lease = json_load_file(FIXTURES "/api/lease.json", 0, NULL);
  assert_non_null(lease);
  static const char path[] = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/edge-1";
  for (int json = 0; json < 2; json++) {
    world_t w;
    world_init(&w, NULL);
    w.opts.content_type = json ? "application/json" : NL_KUBE_PB_TYPE;
    client_start(&w);
    assert_int_equal(nl_kube_client_protobuf(w.client), !json);
    nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.method = "PUT", .path = path,
                                                .content_type = json ? NULL : NL_KUBE_PB_TYPE,
                                                .body = json ? "{\"kind\":\"Lease\"}" : pb,
                                                .body_len = json ? 0 : plen});
    nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.method = "GET", .body = "{\"kind\":\"Pod\"}"});
    nl_fake_as_add(w.fake, &(nl_fake_as_rule_t){.method = "PATCH", .path = path,
                                                .content_type = json ? NULL : NL_KUBE_PB_TYPE,
                                                .body = json ? "{\"kind\":\"Lease\"}" : pb,
                                                .body_len = json ? 0 : plen});
    obj_result_t a = {0}, b = {0}, c = {0};
    nl_kube_request_opts_t o = {.method = "PUT", .path = path};
    nl_kube_request_kind(w.client, &o, "coordination.k8s.io/v1", "Lease", lease, on_obj, &a);
    o = (nl_kube_request_opts_t){.method = "GET", .path = "/api/v1/namespaces/ns/pods/p"};
    nl_kube_request_kind(w.client, &o, "v1", "Pod", NULL, on_obj, &b);
    /* A merge patch stays JSON; its answer, the Lease's metadata only, is
     * negotiated (this server answers the whole Lease, as one that cannot). */
    json_t *patch = json_pack("{s:{s:s}}", "spec", "renewTime", "2026-11-26T20:07:44.000000Z");
    o = (nl_kube_request_opts_t){.method = "PATCH", .path = path,
                                 .content_type = "application/merge-patch+json",
                                 .accept_metadata = true};
    nl_kube_request_kind(w.client, &o, "coordination.k8s.io/v1", "Lease", patch, on_obj, &c);
    run_until(&w, &a.calls, 1);
    run_until(&w, &b.calls, 1);
    run_until(&w, &c.calls, 1);
    const nl_fake_as_req_t *pr = NULL;
    for (size_t i = 0; i < 3; i++)
      if (!strcmp(nl_fake_as_req(w.fake, i)->method, "PATCH")) pr = nl_fake_as_req(w.fake, i);
    assert_non_null(pr);
    assert_string_equal(pr->content_type, "application/merge-patch+json");
    assert_string_equal(pr->body, "{\"spec\":{\"renewTime\":\"2026-11-26T20:07:44.000000Z\"}}");
    assert_string_equal(pr->accept,
                        json ? "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, "
                               "application/json"
                             : "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;"
                               "g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;"
                               "g=meta.k8s.io;v=v1, application/json");
    assert_string_equal(json_string_value(json_object_get(c.obj, "kind")), "Lease");
    json_decref(c.obj);
    json_decref(patch);
    const nl_fake_as_req_t *put = NULL, *get_pod = NULL;
    for (size_t i = 0; i < 3; i++) {
      const nl_fake_as_req_t *q = nl_fake_as_req(w.fake, i);
      if (!strcmp(q->method, "PUT")) put = q;
      if (!strcmp(q->method, "GET")) get_pod = q;
    }
    assert_non_null(put);
    assert_non_null(get_pod);
    if (json) {
      assert_string_equal(put->accept, "application/json, */*");
      assert_string_equal(put->content_type, "application/json");
      json_t *sent = json_loadb(put->body, put->body_len, 0, NULL);
      assert_true(json_equal(sent, lease));
      json_decref(sent);
      assert_string_equal(json_string_value(json_object_get(a.obj, "kind")), "Lease");
    } else {
      assert_string_equal(put->accept, "application/vnd.kubernetes.protobuf, application/json");
      assert_string_equal(put->content_type, NL_KUBE_PB_TYPE);
      json_t *sent = NULL;
      nl_err_t *err = NULL;
      if (nl_kube_pb_to_json(put->body, put->body_len, &sent, &err) < 0) fail_msg("%s", nl_err_msg(err));
      assert_true(json_equal(sent, lease));
      json_decref(sent);
      assert_string_equal(a.ctype, NL_KUBE_PB_TYPE);
      assert_string_equal(json_string_value(json_object_get(json_object_get(a.obj, "spec"), "renewTime")),
                          "2026-11-26T20:07:34.123456Z");
    }
    assert_string_equal(get_pod->accept, "application/json, */*");
    assert_null(get_pod->content_type);
    assert_string_equal(json_string_value(json_object_get(b.obj, "kind")), "Pod");
    json_decref(a.obj);
    json_decref(b.obj);
    world_end(&w);
  }
  json_decref(lease);
  free(pb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(requests_over_h2),
      cmocka_unit_test(protobuf_lease),
      cmocka_unit_test(concurrent_one_connection),
      cmocka_unit_test(tls_failures),
      cmocka_unit_test(insecure),
      cmocka_unit_test(config_errors),
      cmocka_unit_test(timeout_and_cancel),
      cmocka_unit_test(flow_control_stall),
      cmocka_unit_test(retry_after),
      cmocka_unit_test(goaway),
      cmocka_unit_test(rst_stream),
      cmocka_unit_test(rst_stream_no_error),
      cmocka_unit_test(watch_stream),
      cmocka_unit_test(new_certificate_drains),
      cmocka_unit_test(silent_server),
      cmocka_unit_test(server_down),
      cmocka_unit_test(fail_on_dial),
      cmocka_unit_test(rate_limit),
      cmocka_unit_test(streams_overflow),
      cmocka_unit_test(short_requests_overflow),
      cmocka_unit_test(new_certificate_drains_all),
      cmocka_unit_test(stop_in_flight),
      cmocka_unit_test(stop_with_extra_connections),
      cmocka_unit_test(http1_fallback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
