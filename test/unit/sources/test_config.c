/* The PodConfig merger on its own: pods built from manifests in memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "reactor/buf.h"
#include "reactor/xalloc.h"
#include "sources/config.h"

typedef struct recorder {
  char *lines[64];
  size_t n;
  char seen[8][64]; /* config.seen of the pods of the last op */
  char source_ann[64];
} recorder_t;

static void record(nl_pod_op_t op, const char *source, const nl_pod_t *const *pods, size_t n, void *ctx) {
  recorder_t *r = ctx;
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_printf(&b, "%s %s", nl_pod_op_name(op), source);
  for (size_t i = 0; i < n; i++) {
    nl_buf_printf(&b, " %s/%s", pods[i]->metadata.namespace_, pods[i]->metadata.name);
    const char *seen = nl_kvlist_get(&pods[i]->metadata.annotations, NL_ANNOTATION_CONFIG_SEEN);
    if (i < 8) snprintf(r->seen[i], sizeof r->seen[i], "%s", seen ? seen : "");
    const char *s = nl_kvlist_get(&pods[i]->metadata.annotations, NL_ANNOTATION_CONFIG_SOURCE);
    snprintf(r->source_ann, sizeof r->source_ann, "%s", s ? s : "");
  }
  assert_true(r->n < 64);
  r->lines[r->n++] = nl_buf_steal(&b);
}

static void recorder_reset(recorder_t *r) {
  for (size_t i = 0; i < r->n; i++) free(r->lines[i]);
  r->n = 0;
}

static int64_t fake_now = 1700000000123456789;
static int64_t clock_fn(void *ctx) {
  (void)ctx;
  return fake_now;
}

/* A pod with a fixed uid; `extra` goes under metadata (labels, annotations). */
static nl_pod_t *mkpod(const char *name, const char *uid, const char *image, const char *extra) {
  char *y = nl_xasprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: ns\n  uid: %s\n%s"
                         "spec:\n  containers:\n  - name: c\n    image: %s\n",
                         name, uid, extra ? extra : "", image);
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  int rc = nl_pod_decode(y, strlen(y), "test", &p, &err);
  if (rc < 0) fprintf(stderr, "%s\n", nl_err_msg(err));
  assert_int_equal(rc, 0);
  free(y);
  return p;
}

static nl_pod_t **arr(size_t n, ...) {
  nl_pod_t **a = nl_xcalloc(n ? n : 1, sizeof *a);
  va_list ap;
  va_start(ap, n);
  for (size_t i = 0; i < n; i++) a[i] = va_arg(ap, nl_pod_t *);
  va_end(ap);
  return a;
}

static void expect_lines(recorder_t *r, size_t n, ...) {
  va_list ap;
  va_start(ap, n);
  for (size_t i = 0; i < n && i < r->n; i++) assert_string_equal(r->lines[i], va_arg(ap, const char *));
  va_end(ap);
  assert_int_equal(r->n, n);
  recorder_reset(r);
}

static void set_add_update_remove(void **state) {
  recorder_t r = {0};
  nl_pod_config_t cfg;
  nl_pod_config_init(&cfg, record, &r);
  cfg.now_ns = clock_fn;
  nl_pod_config_add_source(&cfg, "file");
  assert_false(nl_pod_config_sources_ready(&cfg));

  assert_int_equal(nl_pod_config_set(&cfg, "file", arr(2, mkpod("a", "u1", "busybox", NULL),
                                                         mkpod("b", "u2", "busybox", NULL)), 2, NULL), 0);
  expect_lines(&r, 1, "ADD file ns/a ns/b");
  assert_true(nl_pod_config_sources_ready(&cfg));
  const nl_pod_t *a = nl_pod_config_get(&cfg, "file", "u1");
  assert_non_null(a);
  assert_string_equal(nl_kvlist_get(&a->metadata.annotations, NL_ANNOTATION_CONFIG_SOURCE), "file");
  assert_string_equal(nl_kvlist_get(&a->metadata.annotations, NL_ANNOTATION_CONFIG_SEEN),
                      "2023-11-14T22:13:20.123456789Z");

  /* the same set again: nothing */
  fake_now += 1000000000;
  nl_pod_config_set(&cfg, "file", arr(2, mkpod("a", "u1", "busybox", NULL), mkpod("b", "u2", "busybox", NULL)),
                    2, NULL);
  expect_lines(&r, 0);

  /* a new image for a, b gone, c new: REMOVE, ADD, UPDATE in upstream's order */
  nl_pod_config_set(&cfg, "file", arr(2, mkpod("a", "u1", "nginx", NULL), mkpod("c", "u3", "busybox", NULL)), 2,
                    NULL);
  expect_lines(&r, 3, "REMOVE file ns/b", "ADD file ns/c", "UPDATE file ns/a");
  a = nl_pod_config_get(&cfg, "file", "u1");
  assert_string_equal(a->spec.containers[0].image, "nginx");
  /* first-seen time survives the update */
  assert_string_equal(nl_kvlist_get(&a->metadata.annotations, NL_ANNOTATION_CONFIG_SEEN),
                      "2023-11-14T22:13:20.123456789Z");
  assert_int_equal(nl_pod_config_count(&cfg, "file"), 2);

  /* empty set removes all, sorted by name */
  nl_pod_config_set(&cfg, "file", NULL, 0, NULL);
  expect_lines(&r, 1, "REMOVE file ns/a ns/c");
  assert_int_equal(nl_pod_config_count(&cfg, NULL), 0);
  nl_pod_config_free(&cfg);
}

static void labels_and_annotations(void **state) {
  recorder_t r = {0};
  nl_pod_config_t cfg;
  nl_pod_config_init(&cfg, record, &r);
  nl_pod_config_set(&cfg, "api", arr(1, mkpod("a", "u1", "busybox", "  labels:\n    app: one\n")), 1, NULL);
  expect_lines(&r, 1, "ADD api ns/a");
  /* a new generation is an update, even of a spec field the model does not
   * keep: the status reports the generation it was computed from */
  nl_pod_config_set(&cfg, "api", arr(1, mkpod("a", "u1", "busybox", "  labels:\n    app: one\n  generation: 2\n")),
                    1, NULL);
  expect_lines(&r, 1, "UPDATE api ns/a");
  assert_int_equal(nl_pod_config_get(&cfg, "api", "u1")->metadata.generation, 2);
  /* a label change is an update */
  nl_pod_config_set(&cfg, "api", arr(1, mkpod("a", "u1", "busybox", "  labels:\n    app: two\n")), 1, NULL);
  expect_lines(&r, 1, "UPDATE api ns/a");
  /* the kubelet's own annotations do not count */
  nl_pod_config_set(&cfg, "api",
                    arr(1, mkpod("a", "u1", "busybox",
                                 "  labels:\n    app: two\n  annotations:\n    kubernetes.io/config.seen: \"2020-01-01T00:00:00Z\"\n"
                                 "    kubernetes.io/config.source: other\n")),
                    1, NULL);
  expect_lines(&r, 0);
  /* any other annotation does */
  nl_pod_config_set(&cfg, "api",
                    arr(1, mkpod("a", "u1", "busybox", "  labels:\n    app: two\n  annotations:\n    team: t\n")), 1,
                    NULL);
  expect_lines(&r, 1, "UPDATE api ns/a");
  assert_string_equal(r.source_ann, "api");
  nl_pod_config_free(&cfg);
}

static void first_empty_set_and_ready(void **state) {
  recorder_t r = {0};
  nl_pod_config_t cfg;
  nl_pod_config_init(&cfg, record, &r);
  nl_pod_config_add_source(&cfg, "file");
  nl_pod_config_add_source(&cfg, "api");
  nl_pod_config_set(&cfg, "file", NULL, 0, NULL);
  expect_lines(&r, 1, "ADD file"); /* empty: the source is ready */
  assert_true(nl_pod_config_source_seen(&cfg, "file"));
  assert_false(nl_pod_config_sources_ready(&cfg));
  /* incremental changes do not make a source seen */
  nl_pod_config_update(&cfg, "api", NL_POD_ADD, arr(1, mkpod("a", "u1", "busybox", NULL)), 1, NULL);
  expect_lines(&r, 1, "ADD api ns/a");
  assert_false(nl_pod_config_sources_ready(&cfg));
  nl_pod_config_set(&cfg, "api", arr(1, mkpod("a", "u1", "busybox", NULL)), 1, NULL);
  expect_lines(&r, 1, "ADD api"); /* first SET, nothing changed: still one empty ADD */
  assert_true(nl_pod_config_sources_ready(&cfg));
  nl_pod_config_set(&cfg, "file", NULL, 0, NULL);
  expect_lines(&r, 0); /* not the first any more */
  nl_pod_config_free(&cfg);
}

static void incremental_ops(void **state) {
  recorder_t r = {0};
  nl_pod_config_t cfg;
  nl_pod_config_init(&cfg, record, &r);
  nl_pod_config_update(&cfg, "api", NL_POD_ADD, arr(2, mkpod("a", "u1", "busybox", NULL),
                                                    mkpod("b", "u2", "busybox", NULL)), 2, NULL);
  expect_lines(&r, 1, "ADD api ns/a ns/b");
  nl_pod_config_update(&cfg, "api", NL_POD_UPDATE, arr(1, mkpod("b", "u2", "nginx", NULL)), 1, NULL);
  expect_lines(&r, 1, "UPDATE api ns/b");
  nl_pod_config_update(&cfg, "api", NL_POD_UPDATE, arr(1, mkpod("b", "u2", "nginx", NULL)), 1, NULL);
  expect_lines(&r, 0);
  /* ADD of a known uid is an update, as upstream's updatePodsFunc */
  nl_pod_config_update(&cfg, "api", NL_POD_ADD, arr(1, mkpod("a", "u1", "nginx", NULL)), 1, NULL);
  expect_lines(&r, 1, "UPDATE api ns/a");
  nl_pod_config_update(&cfg, "api", NL_POD_REMOVE,
                       arr(2, mkpod("b", "u2", "nginx", NULL), mkpod("z", "u9", "nginx", NULL)), 2, NULL);
  expect_lines(&r, 1, "REMOVE api ns/b");
  assert_int_equal(nl_pod_config_count(&cfg, "api"), 1);
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_config_update(&cfg, "api", NL_POD_RECONCILE, arr(0), 0, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "RECONCILE"));
  nl_err_free(&err);
  assert_int_equal(nl_pod_config_set(&cfg, "", arr(1, mkpod("a", "u1", "x", NULL)), 1, &err), -1);
  nl_err_free(&err);
  nl_pod_config_free(&cfg);
}

static void duplicates_filtered(void **state) {
  recorder_t r = {0};
  nl_pod_config_t cfg;
  nl_pod_config_init(&cfg, record, &r);
  nl_pod_config_set(&cfg, "file",
                    arr(3, mkpod("a", "u1", "busybox", NULL), mkpod("a", "u2", "nginx", NULL),
                        mkpod("b", "u1", "nginx", NULL)),
                    3, NULL);
  expect_lines(&r, 1, "ADD file ns/a");
  assert_string_equal(nl_pod_config_get(&cfg, "file", "u1")->spec.containers[0].image, "busybox");
  /* the same pod from two sources is two pods (upstream keeps sources apart) */
  nl_pod_config_set(&cfg, "http", arr(1, mkpod("a", "u1", "busybox", NULL)), 1, NULL);
  expect_lines(&r, 1, "ADD http ns/a");
  assert_int_equal(nl_pod_config_count(&cfg, NULL), 2);
  nl_pod_config_free(&cfg);
}

/* API pods: a status-only change is a RECONCILE carrying the new status, a
 * deletion timestamp is a DELETE, a new resourceVersion alone is nothing. */
static void reconcile_and_delete(void **state) {
  (void)state;
  recorder_t r = {0};
  nl_pod_config_t cfg;
  nl_pod_config_init(&cfg, record, &r);
  cfg.now_ns = clock_fn;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_config_set(&cfg, NL_SOURCE_API, arr(1, mkpod("a", "u1", "img", "  resourceVersion: \"1\"\n")), 1, &err), 0);
  expect_lines(&r, 1, "ADD api ns/a");
  assert_int_equal(nl_pod_config_set(&cfg, NL_SOURCE_API, arr(1, mkpod("a", "u1", "img", "  resourceVersion: \"2\"\n")), 1, &err), 0);
  expect_lines(&r, 0);
  assert_int_equal(nl_pod_config_set(&cfg, NL_SOURCE_API,
                                     arr(1, mkpod("a", "u1", "img", "status:\n  phase: Running\n")), 1, &err), 0);
  expect_lines(&r, 1, "RECONCILE api ns/a");
  assert_string_equal(nl_pod_config_get(&cfg, NL_SOURCE_API, "u1")->status->phase, "Running");
  assert_int_equal(nl_pod_config_set(&cfg, NL_SOURCE_API,
                                     arr(1, mkpod("a", "u1", "img", "  deletionTimestamp: \"2024-01-01T00:00:00Z\"\n"
                                                  "  deletionGracePeriodSeconds: 5\nstatus:\n  phase: Running\n")),
                                     1, &err), 0);
  expect_lines(&r, 1, "DELETE api ns/a");
  /* a shorter grace period is a change too (kubectl delete --grace-period=0 after a delete) */
  assert_int_equal(nl_pod_config_update(&cfg, NL_SOURCE_API, NL_POD_UPDATE,
                                        arr(1, mkpod("a", "u1", "img", "  deletionTimestamp: \"2024-01-01T00:00:00Z\"\n"
                                                     "  deletionGracePeriodSeconds: 0\nstatus:\n  phase: Running\n")),
                                        1, &err), 0);
  expect_lines(&r, 1, "DELETE api ns/a");
  assert_int_equal(nl_pod_config_get(&cfg, NL_SOURCE_API, "u1")->metadata.deletion_grace_period_seconds.v, 0);
  nl_pod_config_free(&cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(set_add_update_remove), cmocka_unit_test(labels_and_annotations),
      cmocka_unit_test(first_empty_set_and_ready), cmocka_unit_test(incremental_ops),
      cmocka_unit_test(duplicates_filtered), cmocka_unit_test(reconcile_and_delete),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
