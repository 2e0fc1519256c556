/* The kubelet server on real sockets: the self-signed certificate, x509 client
 * certificates, anonymous requests, the route table (longest match, 404, 405,
 * HEAD), the read-only port (alone too), and bad TLS settings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <unistd.h>

#include "agent/kserver.h"
#include "reactor/http_client.h"

#define FIX(f) FIXTURES "/tls/" f

typedef struct world {
  uv_loop_t loop;
  nl_kserver_t *s;
  char dir[64];
  int pending, stopped;
  int status[8];
  char body[8][256];
} world_t;

static void echo_user(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                      nl_http_resp_t *resp) {
  char out[256];
  snprintf(out, sizeof out, "%s %s %s", (const char *)ctx, req->path, user->name);
  for (const char *const *g = user->groups; *g; g++)
    snprintf(out + strlen(out), sizeof out - strlen(out), ",%s", *g);
  nl_http_resp_send_str(resp, 200, out);
}

static void stopped(void *ctx) { ((world_t *)ctx)->stopped++; }

typedef struct call {
  world_t *w;
  int i;
} call_t;

static void done(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {
  call_t *c = ctx;
  world_t *w = c->w;
  if (err) {
    w->status[c->i] = -1;
    snprintf(w->body[c->i], sizeof w->body[c->i], "%s", err->msg);
  } else {
    w->status[c->i] = resp->status;
    snprintf(w->body[c->i], sizeof w->body[c->i], "%s", resp->body);
  }
  free(c);
  if (--w->pending == 0) nl_kserver_stop(w->s, stopped, w);
}

static void get(world_t *w, int i, nl_tls_config_t *tls, const char *method, int port,
                const char *path) {
  char url[128];
  snprintf(url, sizeof url, "%s://127.0.0.1:%d%s", tls ? "https" : "http", port, path);
  call_t *c = calloc(1, sizeof *c);
  c->w = w;
  c->i = i;
  nl_http_request_opts_t o = {.method = method, .url = url, .tls = tls, .timeout_ms = 5000};
  w->pending++;
  nl_http_request(&w->loop, &o, done, c);
}

static const nl_kserver_route_t routes[] = {
    {"GET", "/pods", echo_user, "pods", true},
    {"GET", "/a/", echo_user, "a-tree", false},
    {"GET", "/a/b/", echo_user, "ab-tree", false},
    {"POST", "/exec/", echo_user, "exec", false},
};

static void start(world_t *w, nl_kserver_opts_t *o) {
  nl_err_t *err = NULL;
  if (nl_kserver_new(&w->s, &w->loop, o, NULL, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_kserver_route(w->s, routes, sizeof routes / sizeof routes[0]);
  if (nl_kserver_listen(w->s, &err) < 0) fail_msg("%s", nl_err_msg(err));
}

static nl_tls_config_t *client_tls(bool with_cert) {
  nl_tls_config_opts_t t = {.verify = false};
  if (with_cert) {
    t.cert_file = FIX("client.crt");
    t.key_file = FIX("client.key");
  }
  nl_tls_config_t *c;
  nl_err_t *err = NULL;
  if (nl_tls_config_new(&c, &t, &err) < 0) fail_msg("%s", nl_err_msg(err));
  return c;
}

static void setup(world_t *w) {
  memset(w, 0, sizeof *w);
  assert_int_equal(uv_loop_init(&w->loop), 0);
  strcpy(w->dir, "/tmp/nl-kserver.XXXXXX");
  assert_non_null(mkdtemp(w->dir));
}

static void finish(world_t *w) {
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_int_equal(w->stopped, 1);
  assert_int_equal(uv_loop_close(&w->loop), 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", w->dir);
  assert_int_equal(system(cmd), 0);
}

/* No certificate configured: one is generated in the cert dir (and reused);
 * anonymous requests pass AlwaysAllow; the route table answers. */
static void anonymous_routes(void **state) {
  world_t w;
  setup(&w);
  char pki[96];
  snprintf(pki, sizeof pki, "%s/var/lib/kubelet/pki", w.dir); /* made with its parents */
  nl_kserver_opts_t o = {.node_name = "n1", .address = "127.0.0.1", .port = 0,
                         .cert_dir = pki, .hostname = "n1", .node_ip = "127.0.0.1",
                         .anonymous = true};
  start(&w, &o);
  char crt[128];
  snprintf(crt, sizeof crt, "%s/kubelet.crt", pki);
  assert_int_equal(access(crt, R_OK), 0);
  int port = nl_kserver_port(w.s);
  nl_tls_config_t *tls = client_tls(false);
  get(&w, 0, tls, "GET", port, "/pods");
  get(&w, 1, tls, "GET", port, "/a/b/c");
  get(&w, 2, tls, "GET", port, "/a/x");
  get(&w, 3, tls, "GET", port, "/nope");
  get(&w, 4, tls, "GET", port, "/exec/ns/p/c");
  get(&w, 5, tls, "POST", port, "/exec/ns/p/c");
  nl_tls_config_unref(tls);
  finish(&w);
  assert_int_equal(w.status[0], 200);
  assert_string_equal(w.body[0], "pods /pods system:anonymous,system:unauthenticated");
  assert_string_equal(w.body[1], "ab-tree /a/b/c system:anonymous,system:unauthenticated");
  assert_string_equal(w.body[2], "a-tree /a/x system:anonymous,system:unauthenticated");
  assert_int_equal(w.status[3], 404);
  assert_int_equal(w.status[4], 405);
  assert_int_equal(w.status[5], 200);
}

/* With clientCAFile: a certificate signed by it names the user (CN, groups O
 * and system:authenticated); none, with anonymous off, is 401. */
static void x509_clients(void **state) {
  world_t w;
  setup(&w);
  nl_kserver_opts_t o = {.node_name = "n1", .address = "127.0.0.1", .port = 0,
                         .cert_file = FIX("server.crt"), .key_file = FIX("server.key"),
                         .client_ca_file = FIX("ca.crt"), .tls_min_version = "VersionTLS12"};
  const char *suites[] = {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"};
  o.tls_cipher_suites = suites;
  o.n_tls_cipher_suites = 2;
  start(&w, &o);
  int port = nl_kserver_port(w.s);
  nl_tls_config_t *with = client_tls(true), *without = client_tls(false);
  get(&w, 0, with, "GET", port, "/pods");
  get(&w, 1, without, "GET", port, "/pods");
  nl_tls_config_unref(with);
  nl_tls_config_unref(without);
  finish(&w);
  assert_int_equal(w.status[0], 200);
  assert_non_null(strstr(w.body[0], "pods /pods "));
  assert_non_null(strstr(w.body[0], ",system:authenticated"));
  assert_int_equal(w.status[1], 401);
  assert_string_equal(w.body[1], "Unauthorized");
}

/* A free port for the read-only listener. */
static int free_port(world_t *w) {
  uv_tcp_t t;
  uv_tcp_init(&w->loop, &t);
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", 0, &sa);
  uv_tcp_bind(&t, (struct sockaddr *)&sa, 0);
  int len = sizeof sa;
  uv_tcp_getsockname(&t, (struct sockaddr *)&sa, &len);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  return ntohs(sa.sin_port);
}

/* readOnlyPort: plain HTTP, no authentication, only the read_only routes.
 * alone: standalone with webhook authentication (a configuration file's
 * defaults), so no certificate is made and the secure port stays closed. */
static void serve_read_only(bool alone) {
  world_t w;
  setup(&w);
  int ro = free_port(&w);
  nl_kserver_opts_t o = {.node_name = "n1", .address = "127.0.0.1", .port = 0,
                         .read_only_port = ro, .cert_dir = w.dir, .hostname = "n1",
                         .webhook = alone, .authz_webhook = alone, .read_only_only = alone};
  start(&w, &o);
  char crt[96];
  snprintf(crt, sizeof crt, "%s/kubelet.crt", w.dir);
  assert_int_equal(access(crt, F_OK), alone ? -1 : 0);
  assert_true(alone ? nl_kserver_port(w.s) == -1 : nl_kserver_port(w.s) > 0);
  get(&w, 0, NULL, "GET", ro, "/pods");
  get(&w, 1, NULL, "GET", ro, "/a/b");
  finish(&w);
  assert_int_equal(w.status[0], 200);
  assert_string_equal(w.body[0], "pods /pods system:anonymous,system:unauthenticated");
  assert_int_equal(w.status[1], 404);
}

static void read_only_port(void **state) {
  (void)state;
  serve_read_only(false);
}

static void read_only_only(void **state) {
  (void)state;
  serve_read_only(true);
}

static void bad_settings(void **state) {
  world_t w;
  setup(&w);
  nl_kserver_opts_t o = {.node_name = "n1", .port = 0, .cert_dir = w.dir, .hostname = "n1",
                         .tls_min_version = "VersionTLS13"};
  nl_err_t *err = NULL;
  assert_int_equal(nl_kserver_new(&w.s, &w.loop, &o, NULL, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "tlsMinVersion"));
  nl_err_free(&err);
  const char *suites[] = {"TLS_BOGUS"};
  o.tls_min_version = NULL;
  o.tls_cipher_suites = suites;
  o.n_tls_cipher_suites = 1;
  assert_int_equal(nl_kserver_new(&w.s, &w.loop, &o, NULL, &err), -1);
  assert_string_equal(nl_err_msg(err), "tlsCipherSuites: unsupported cipher suite \"TLS_BOGUS\"");
  nl_err_free(&err);
  o.n_tls_cipher_suites = 0;
  o.webhook = true;
  assert_int_equal(nl_kserver_new(&w.s, &w.loop, &o, NULL, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "authentication.webhook.enabled"));
  nl_err_free(&err);
  w.stopped = 1;
  finish(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(anonymous_routes),
      cmocka_unit_test(x509_clients),
      cmocka_unit_test(read_only_port),
      cmocka_unit_test(read_only_only),
      cmocka_unit_test(bad_settings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
