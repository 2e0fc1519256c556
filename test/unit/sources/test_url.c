/* The URL source against a local HTTP server on the test's loop: a single pod
 * and a PodList in YAML and JSON, static-pod names and uids, the headers sent,
 * unchanged bodies, empty bodies, and failures that keep the last set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "reactor/http_server.h"
#include "reactor/xalloc.h"
#include "sources/url.h"

static const char *POD_YAML =
    "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: edge}\n"
    "spec:\n  containers: [{name: c, image: busybox}]\n";
static const char *LIST_JSON =
    "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":["
    "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}},"
    "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}]}";

static struct {
  uv_loop_t loop;
  nl_http_server_t srv;
  int status;
  const char *body;
  char auth[64];
  int hits;
  /* what the source sent */
  int sets;
  size_t last_n;
  char names[4][64];
  char uid0[40], source0[16];
} t;

static void serve(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  (void)ctx;
  t.hits++;
  const char *a = nl_http_headers_get(req->headers, "Authorization");
  snprintf(t.auth, sizeof t.auth, "%s", a ? a : "");
  nl_http_resp_send_str(resp, t.status, t.body);
}

static void on_pods(nl_pod_t **pods, size_t n, void *ctx) {
  (void)ctx;
  t.sets++;
  t.last_n = n;
  for (size_t i = 0; i < n && i < 4; i++)
    snprintf(t.names[i], sizeof t.names[i], "%s/%s", pods[i]->metadata.namespace_,
             pods[i]->metadata.name);
  if (n) {
    snprintf(t.uid0, sizeof t.uid0, "%s", pods[0]->metadata.uid);
    const char *s = nl_kvlist_get(&pods[0]->metadata.annotations, "kubernetes.io/config.source");
    snprintf(t.source0, sizeof t.source0, "%s", s ? s : "");
  }
  for (size_t i = 0; i < n; i++) nl_pod_free(pods[i]);
  free(pods);
}

static void run_until_hits(int hits) {
  for (int i = 0; i < 2000 && t.hits < hits; i++) uv_run(&t.loop, UV_RUN_ONCE);
  /* let the answer reach the source */
  for (int i = 0; i < 50; i++) uv_run(&t.loop, UV_RUN_NOWAIT);
  assert_true(t.hits >= hits);
}

static bool stopped;
static void on_stopped(nl_url_source_t *s) {
  (void)s;
  stopped = true;
}

static void on_srv_stopped(nl_http_server_t *s, void *ctx) {
  (void)s;
  (void)ctx;
}

static void start(nl_url_source_t *src, const nl_http_header_t *h, size_t nh) {
  memset(&t, 0, sizeof t);
  t.status = 200;
  t.body = POD_YAML;
  assert_int_equal(uv_loop_init(&t.loop), 0);
  assert_int_equal(nl_http_server_init(&t.srv, &t.loop, NULL, NULL), 0);
  nl_http_server_route(&t.srv, "GET", "/pods", serve, NULL);
  assert_int_equal(nl_http_server_listen(&t.srv, "127.0.0.1", 0, NULL), 0);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/pods", nl_http_server_port(&t.srv));
  assert_int_equal(nl_url_source_init(src, &t.loop, url, h, nh, 30, "Node1", on_pods, NULL, NULL), 0);
  nl_url_source_start(src);
}

static void finish(nl_url_source_t *src) {
  stopped = false;
  nl_url_source_stop(src, on_stopped);
  nl_http_server_stop(&t.srv, on_srv_stopped, NULL);
  uv_run(&t.loop, UV_RUN_DEFAULT);
  assert_true(stopped);
  assert_int_equal(uv_loop_close(&t.loop), 0);
}

static void test_single_pod_and_headers(void **state) {
  (void)state;
  nl_url_source_t src;
  nl_http_header_t h[] = {{"Authorization", "Bearer s3cret"}};
  start(&src, h, 1);
  run_until_hits(1);
  assert_string_equal(t.auth, "Bearer s3cret");
  assert_int_equal(t.sets, 1);
  assert_int_equal(t.last_n, 1);
  assert_string_equal(t.names[0], "edge/web-node1");
  assert_string_equal(t.source0, "http");
  assert_int_equal(strlen(t.uid0), 32);
  /* the same body again: nothing sent */
  run_until_hits(3);
  assert_int_equal(t.sets, 1);
  finish(&src);
}

static void test_list_and_failures_keep_the_set(void **state) {
  (void)state;
  nl_url_source_t src;
  start(&src, NULL, 0);
  t.body = LIST_JSON;
  run_until_hits(1);
  assert_int_equal(t.sets, 1);
  assert_int_equal(t.last_n, 2);
  assert_string_equal(t.names[0], "default/a-node1");
  assert_string_equal(t.names[1], "default/b-node1");
  /* a 404, then a body that is no pod: the set stays */
  t.status = 404;
  t.body = "gone";
  run_until_hits(2);
  t.status = 200;
  t.body = "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c}]}\n";
  run_until_hits(3);
  assert_int_equal(t.sets, 1);
  assert_int_equal(src.errors, 2);
  /* back to a good body: sent again */
  t.body = POD_YAML;
  run_until_hits(4);
  assert_int_equal(t.sets, 2);
  assert_int_equal(src.failure_logs, 0);
  /* an empty body is the empty set */
  t.body = "";
  run_until_hits(5);
  assert_int_equal(t.sets, 3);
  assert_int_equal(t.last_n, 0);
  finish(&src);
}

static void test_server_down(void **state) {
  (void)state;
  nl_url_source_t src;
  start(&src, NULL, 0);
  run_until_hits(1);
  assert_int_equal(t.sets, 1);
  nl_http_server_stop(&t.srv, on_srv_stopped, NULL);
  uint64_t errors = src.errors;
  for (int i = 0; i < 200 && src.errors < errors + 2; i++) uv_run(&t.loop, UV_RUN_ONCE);
  assert_true(src.errors >= errors + 2);
  assert_int_equal(t.sets, 1);
  stopped = false;
  nl_url_source_stop(&src, on_stopped);
  uv_run(&t.loop, UV_RUN_DEFAULT);
  assert_true(stopped);
  assert_int_equal(uv_loop_close(&t.loop), 0);
}

static void test_parse_errors(void **state) {
  (void)state;
  nl_pod_t **pods;
  size_t n;
  nl_err_t *err = NULL;
  const char *bad = "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":["
                    "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                    "\"image\":\"busybox\"}]}},"
                    "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}]}";
  /* one bad pod spoils the list */
  assert_int_equal(nl_url_source_parse(bad, strlen(bad), "http://h/p", "n", &pods, &n, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "http://h/p: "));
  assert_non_null(strstr(nl_err_msg(err), "image"));
  nl_err_free(&err);
  assert_int_equal(nl_url_source_init(&(nl_url_source_t){0}, NULL, "ftp://x/y", NULL, 0, 0, "n",
                                      on_pods, NULL, &err), -1);
  nl_err_free(&err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_pod_and_headers),
      cmocka_unit_test(test_list_and_failures_keep_the_set),
      cmocka_unit_test(test_server_down),
      cmocka_unit_test(test_parse_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
