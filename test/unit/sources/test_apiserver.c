/* The API source on the real loop and merger, against the test double of the
 * API client (test/unit/kube/fake_client.c), with a checkpoint in a temporary
 * directory. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "../kube/fake_client.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"
#include "sources/apiserver.h"
#include "sources/checkpoint.h"

typedef struct fixture {
  uv_loop_t loop;
  nl_pod_config_t cfg;
  nl_buf_t log; /* "OP ns/a ns/b" lines */
  nl_api_source_t *src;
  char dir[64], path[128];
  int done;
} fixture_t;

static void record(nl_pod_op_t op, const char *source, const nl_pod_t *const *pods, size_t n, void *ctx) {
  fixture_t *f = ctx;
  assert_string_equal(source, "api");
  nl_buf_puts(&f->log, nl_pod_op_name(op));
  for (size_t i = 0; i < n; i++)
    nl_buf_printf(&f->log, " %s/%s", pods[i]->metadata.namespace_, pods[i]->metadata.name);
  nl_buf_puts(&f->log, "\n");
}

/* The log so far, then forgotten. */
static void expect_log(fixture_t *f, const char *want) {
  assert_string_equal(f->log.data ? f->log.data : "", want);
  nl_buf_reset(&f->log);
}

/* A pod object as the API server sends it; `meta` and `status` are JSON members
 * to add ("" for none). */
static char *pod(const char *name, const char *uid, const char *meta, const char *status) {
  return nl_xasprintf("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"%s\","
                      "\"resourceVersion\":\"5\"%s},\"spec\":{\"nodeName\":\"node1\","
                      "\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]},"
                      "\"status\":{\"phase\":\"Pending\"%s}}",
                      name, uid, meta, status);
}

static char *list_of(const char *rv, int n, ...) {
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_printf(&b, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"%s\"},\"items\":[", rv);
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    char *p = va_arg(ap, char *);
    nl_buf_printf(&b, "%s%s", i ? "," : "", p);
    free(p);
  }
  va_end(ap);
  nl_buf_puts(&b, "]}");
  return nl_buf_steal(&b);
}

static void respond_free(fake_req_t *r, int status, char *body) {
  fake_respond(r, status, body);
  free(body);
}

static void event(fake_req_t *w, const char *type, char *obj) {
  char *line = nl_xasprintf("{\"type\":\"%s\",\"object\":%s}\n", type, obj);
  fake_data(w, line);
  free(line);
  free(obj);
}

/* Turns of the loop that never block (a UV_RUN_ONCE whose due timer starts the
 * awaited request would then sleep until the next timer, minutes away), 1 ms
 * apart, for at most 10 s. */
static void turn(fixture_t *f) {
  uv_run(&f->loop, UV_RUN_NOWAIT);
  usleep(1000);
}

static fake_req_t *run_until(fixture_t *f, size_t n) {
  for (int i = 0; fake_nreqs < n && i < 10000; i++) turn(f);
  assert_int_equal(fake_nreqs, n);
  return fake_reqs[n - 1];
}

static void run_while(fixture_t *f, bool (*cond)(fixture_t *)) {
  for (int i = 0; cond(f) && i < 10000; i++) turn(f);
  assert_false(cond(f));
}

static bool no_write_yet(fixture_t *f) { return nl_api_source_stats(f->src)->checkpoint_writes == 0; }
static bool not_restored(fixture_t *f) { return nl_api_source_stats(f->src)->restored == 0; }
static bool not_read(fixture_t *f) { return !nl_api_source_stats(f->src)->checkpoint_read; }

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  uv_loop_init(&f->loop);
  nl_pod_config_init(&f->cfg, record, f);
  snprintf(f->dir, sizeof f->dir, "/tmp/nl-apisrc-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->path, sizeof f->path, "%s/api-pods.checkpoint", f->dir);
  *state = f;
  return 0;
}

static void start(fixture_t *f, uint64_t offline_ms) {
  nl_reflector_opts_t ro = {.backoff_initial_ms = 1, .backoff_max_ms = 4};
  nl_api_source_opts_t o = {.node_name = "node1", .checkpoint_path = f->path,
                            .offline_wait_ms = offline_ms, .reflector = &ro};
  nl_err_t *err = NULL;
  assert_int_equal(nl_api_source_new(&f->src, &f->loop, NULL, &f->cfg, &o, &err), 0);
  nl_api_source_start(f->src);
}

static void on_done(void *ctx) { ((fixture_t *)ctx)->done++; }

static int teardown(void **state) {
  fixture_t *f = *state;
  if (f->src) nl_api_source_stop(f->src, on_done, f);
  fake_settle();
  uv_run(&f->loop, UV_RUN_DEFAULT);
  if (f->src) assert_int_equal(f->done, 1);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  fake_reset();
  nl_pod_config_free(&f->cfg);
  nl_buf_free(&f->log);
  unlink(f->path);
  rmdir(f->dir);
  free(f);
  return 0;
}

static void write_file(const char *path, const char *data, size_t len) {
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(data, 1, len, fp), len);
  fclose(fp);
}

static char *read_file(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  nl_buf_t b = NL_BUF_INIT;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) nl_buf_append(&b, chunk, n);
  fclose(fp);
  *len = b.len;
  return nl_buf_steal(&b);
}

static void write_checkpoint_of(const char *path, int n, ...) {
  nl_kube_raw_t items[8];
  char *objs[8];
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    objs[i] = va_arg(ap, char *);
    items[i] = (nl_kube_raw_t){objs[i], strlen(objs[i])};
  }
  va_end(ap);
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_checkpoint_encode(items, (size_t)n, &b);
  write_file(path, b.data, b.len);
  nl_buf_free(&b);
  for (int i = 0; i < n; i++) free(objs[i]);
}

/* LIST with the node's field selector; "seen" only after it; a bad pod is
 * skipped without disturbing the others; watch events become single-pod ops;
 * the checkpoint holds the pods but not mirror pods. */
static void list_then_events(void **state) {
  fixture_t *f = *state;
  start(f, 60000);
  fake_req_t *l = run_until(f, 1);
  assert_string_equal(l->path, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1&resourceVersion=0");
  assert_false(nl_pod_config_sources_ready(&f->cfg));
  char *bad = nl_xstrdup("{\"metadata\":{\"name\":\"bad\",\"namespace\":\"ns\",\"uid\":\"u9\"},"
                         "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":5}]}}");
  respond_free(l, 200, list_of("10", 2, pod("a", "u1", "", ""), bad));
  expect_log(f, "ADD ns/a\n");
  assert_int_equal(nl_api_source_stats(f->src)->bad_pods, 1);
  assert_true(nl_pod_config_sources_ready(&f->cfg));
  /* defaults are applied to what the API sent */
  assert_string_equal(nl_pod_config_get(&f->cfg, "api", "u1")->spec.containers[0].image_pull_policy, "Always");

  fake_req_t *w = run_until(f, 2);
  assert_non_null(strstr(w->path, "watch=true"));
  fake_head(w, 200);
  event(w, "ADDED", pod("b", "u2", "", ""));
  expect_log(f, "ADD ns/b\n");
  event(w, "MODIFIED", pod("a", "u1", "", ",\"podIP\":\"10.0.0.9\""));
  expect_log(f, "RECONCILE ns/a\n");
  assert_string_equal(nl_pod_config_get(&f->cfg, "api", "u1")->status->pod_ip, "10.0.0.9");
  event(w, "MODIFIED", pod("a", "u1", ",\"deletionTimestamp\":\"2024-01-01T00:00:00Z\","
                                      "\"deletionGracePeriodSeconds\":3", ""));
  expect_log(f, "DELETE ns/a\n");
  event(w, "MODIFIED", nl_xstrdup("{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\"},"
                                  "\"spec\":{\"containers\":\"no\"}}"));
  expect_log(f, "");
  assert_int_equal(nl_api_source_stats(f->src)->bad_pods, 2);
  event(w, "ADDED", pod("web-node1", "m1", ",\"annotations\":{\"kubernetes.io/config.mirror\":\"h\"}", ""));
  expect_log(f, "ADD ns/web-node1\n");
  event(w, "DELETED", pod("a", "u1", "", ""));
  expect_log(f, "REMOVE ns/a\n");

  run_while(f, no_write_yet);
  size_t len;
  char *data = NULL;
  /* writes coalesce: wait until the last one is the current state */
  for (int i = 0; i < 300; i++) turn(f);
  data = read_file(f->path, &len);
  assert_non_null(data);
  size_t off;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_checkpoint_verify(data, len, &off, &err), 0);
  assert_non_null(strstr(data + off, "\"uid\":\"u2\""));
  assert_null(strstr(data + off, "\"uid\":\"u1\""));
  assert_null(strstr(data + off, "\"uid\":\"m1\""));
  /* the pod comes back from the checkpoint as the merger has it */
  nl_kube_raw_t *items;
  size_t n;
  assert_int_equal(nl_pod_checkpoint_items(data + off, len - off, &items, &n, &err), 0);
  assert_int_equal(n, 1);
  nl_pod_t *back = NULL;
  assert_int_equal(nl_pod_decode_api(items[0].json, items[0].len, &back, &err), 0);
  assert_int_equal(nl_pod_hash(back), nl_pod_hash(nl_pod_config_get(&f->cfg, "api", "u2")));
  nl_pod_free(back);
  free(items);
  free(data);
}

static uint64_t writes(fixture_t *f) { return nl_api_source_stats(f->src)->checkpoint_writes; }

/* A change of status alone leaves the checkpoint as it is; a change of the
 * pod (here a label) rewrites it. */
static void only_pod_changes_rewrite_checkpoint(void **state) {
  fixture_t *f = *state;
  start(f, 60000);
  respond_free(run_until(f, 1), 200, list_of("10", 1, pod("a", "u1", "", "")));
  expect_log(f, "ADD ns/a\n");
  fake_req_t *w = run_until(f, 2);
  fake_head(w, 200);
  for (int i = 0; i < 300; i++) turn(f);
  assert_int_equal(writes(f), 1);
  event(w, "MODIFIED", pod("a", "u1", "", ",\"podIP\":\"10.0.0.9\""));
  expect_log(f, "RECONCILE ns/a\n");
  for (int i = 0; i < 300; i++) turn(f);
  assert_int_equal(writes(f), 1);
  event(w, "MODIFIED", pod("a", "u1", ",\"labels\":{\"k\":\"v\"}", ",\"podIP\":\"10.0.0.9\""));
  expect_log(f, "UPDATE ns/a\n");
  for (int i = 0; i < 300; i++) turn(f);
  assert_int_equal(writes(f), 2);
}

/* No list in time: the checkpoint's pods are ADDed (not a SET: the source stays
 * unseen); the list that comes later removes the pod deleted meanwhile and
 * leaves the other alone. */
static void offline_start_runs_checkpoint(void **state) {
  fixture_t *f = *state;
  write_checkpoint_of(f->path, 2, pod("a", "u1", "", ""), pod("b", "u2", "", ""));
  start(f, 20);
  fake_req_t *l = run_until(f, 1);
  run_while(f, not_restored);
  expect_log(f, "ADD ns/a ns/b\n");
  assert_int_equal(nl_api_source_stats(f->src)->restored, 2);
  assert_false(nl_pod_config_sources_ready(&f->cfg));
  fake_fail(l, NL_ETIMEOUT, "timeout"); /* the API server is away: back off, list again */
  l = run_until(f, 2);
  respond_free(l, 200, list_of("20", 1, pod("a", "u1", "", "")));
  expect_log(f, "REMOVE ns/b\nADD\n"); /* and the source is seen: the empty ADD */
  assert_true(nl_pod_config_sources_ready(&f->cfg));
}

/* The first list fails with no answer (connection refused): the checkpoint's
 * pods run at once, long before the wait is over. An HTTP error is an answer:
 * the list may yet come, so it does not. The list is sent with fail_on_dial. */
static void unreachable_runs_checkpoint_at_once(void **state) {
  fixture_t *f = *state;
  write_checkpoint_of(f->path, 2, pod("a", "u1", "", ""), pod("b", "u2", "", ""));
  start(f, 60000);
  fake_req_t *l = run_until(f, 1);
  assert_true(l->fail_on_dial);
  run_while(f, not_read);
  respond_free(l, 500, nl_xstrdup("{\"kind\":\"Status\",\"message\":\"etcd is slow\"}"));
  l = run_until(f, 2);
  for (int i = 0; i < 20; i++) turn(f);
  expect_log(f, "");
  fake_fail(l, ECONNREFUSED, "dial tcp 127.0.0.1:1: connect: connection refused");
  run_while(f, not_restored);
  expect_log(f, "ADD ns/a ns/b\n");
  assert_false(nl_pod_config_sources_ready(&f->cfg));
  l = run_until(f, 3);
  respond_free(l, 200, list_of("20", 1, pod("a", "u1", "", "")));
  expect_log(f, "REMOVE ns/b\nADD\n");
}

/* A list before the wait is over: the checkpoint is never delivered. */
static void list_in_time_ignores_checkpoint(void **state) {
  fixture_t *f = *state;
  write_checkpoint_of(f->path, 2, pod("a", "u1", "", ""), pod("b", "u2", "", ""));
  start(f, 60000);
  fake_req_t *l = run_until(f, 1);
  run_while(f, not_read);
  respond_free(l, 200, list_of("20", 1, pod("c", "u3", "", "")));
  expect_log(f, "ADD ns/c\n");
  assert_int_equal(nl_api_source_stats(f->src)->restored, 0);
}

/* A corrupt checkpoint is reported and ignored: nothing runs from it. */
static void corrupt_checkpoint_ignored(void **state) {
  fixture_t *f = *state;
  write_checkpoint_of(f->path, 1, pod("a", "u1", "", ""));
  size_t len;
  char *data = read_file(f->path, &len);
  data[len - 5] ^= 1;
  write_file(f->path, data, len);
  free(data);
  start(f, 20);
  run_until(f, 1);
  run_while(f, not_read);
  for (int i = 0; i < 60; i++) turn(f); /* well past the 20 ms wait */
  expect_log(f, "");
  assert_int_equal(nl_api_source_stats(f->src)->restored, 0);
}

static void needs_node_name(void **state) {
  fixture_t *f = *state;
  nl_api_source_opts_t o = {0};
  nl_err_t *err = NULL;
  nl_api_source_t *s = NULL;
  assert_int_equal(nl_api_source_new(&s, &f->loop, NULL, &f->cfg, &o, &err), -1);
  assert_string_equal(nl_err_msg(err), "api source: node name: required");
  nl_err_free(&err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(list_then_events, setup, teardown),
      cmocka_unit_test_setup_teardown(only_pod_changes_rewrite_checkpoint, setup, teardown),
      cmocka_unit_test_setup_teardown(offline_start_runs_checkpoint, setup, teardown),
      cmocka_unit_test_setup_teardown(unreachable_runs_checkpoint_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(list_in_time_ignores_checkpoint, setup, teardown),
      cmocka_unit_test_setup_teardown(corrupt_checkpoint_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(needs_node_name, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
