#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "reactor/metrics.h"

static void expect_float(double v, const char *want) {
  nl_buf_t b = NL_BUF_INIT;
  nl_metrics_format_float(&b, v);
  assert_string_equal(b.data, want);
  nl_buf_free(&b);
}

/* strconv.FormatFloat(v, 'g', -1, 64), as client_golang writes values. */
static void floats_as_go(void **state) {
  (void)state;
  expect_float(0, "0");
  expect_float(1, "1");
  expect_float(-1, "-1");
  expect_float(0.005, "0.005");
  expect_float(2.5, "2.5");
  expect_float(0.0001, "0.0001");
  expect_float(0.00001, "1e-05");
  expect_float(123456, "123456");
  expect_float(1e6, "1e+06");
  expect_float(1234567, "1.234567e+06");
  expect_float(1.7e9 + 0.12, "1.70000000012e+09");
  expect_float(0.1 + 0.2, "0.30000000000000004");
  expect_float(INFINITY, "+Inf");
  expect_float(-INFINITY, "-Inf");
  expect_float(NAN, "NaN");
  double b[14];
  nl_metrics_exponential_buckets(b, .005, 2.5, 14);
  expect_float(b[1], "0.0125");
  expect_float(b[6], "1.220703125");
  expect_float(b[13], "745.0580596923828");
}

static const char golden[] =
    "# HELP a_runs_total [ALPHA] Runs by \"kind\".\\nSecond line \\\\ end.\n"
    "# TYPE a_runs_total counter\n"
    "a_runs_total{kind=\"x\\\"y\\\\z\\n\",phase=\"1\"} 3\n"
    "a_runs_total{kind=\"plain\",phase=\"2\"} 0.5\n"
    "# HELP b_duration_seconds Durations.\n"
    "# TYPE b_duration_seconds histogram\n"
    "b_duration_seconds_bucket{op=\"sync\",le=\"0.1\"} 1\n"
    "b_duration_seconds_bucket{op=\"sync\",le=\"1\"} 3\n"
    "b_duration_seconds_bucket{op=\"sync\",le=\"2.5\"} 3\n"
    "b_duration_seconds_bucket{op=\"sync\",le=\"+Inf\"} 4\n"
    "b_duration_seconds_sum{op=\"sync\"} 12.35\n"
    "b_duration_seconds_count{op=\"sync\"} 4\n"
    "# HELP c_plain Plain.\n"
    "# TYPE c_plain histogram\n"
    "c_plain_bucket{le=\"1\"} 0\n"
    "c_plain_bucket{le=\"+Inf\"} 0\n"
    "c_plain_sum 0\n"
    "c_plain_count 0\n"
    "# HELP d_up Up.\n"
    "# TYPE d_up gauge\n"
    "d_up 0\n"
    "# HELP f_up Up.\n"
    "# TYPE f_up gauge\n"
    "f_up 1\n";

static void collect(void *ctx) { (*(int *)ctx)++; }

/* Families sorted by name; vectors without series are left out; a family
 * without labels prints its zero; escaping of HELP and label values;
 * histograms cumulative with le on the bound itself. */
static void text_format_golden(void **state) {
  (void)state;
  nl_metrics_t r;
  nl_metrics_init(&r);
  int collected = 0;
  r.collect = collect;
  r.collect_ctx = &collected;
  nl_metrics_gauge(&r, "d_up", "Up.", NULL);
  const char *op[] = {"op", NULL};
  double bk[] = {0.1, 1, 2.5};
  nl_metric_family_t *h = nl_metrics_histogram(&r, "b_duration_seconds", "Durations.", op, bk, 3);
  const char *kp[] = {"kind", "phase", NULL};
  nl_metric_family_t *c =
      nl_metrics_counter(&r, "a_runs_total", "[ALPHA] Runs by \"kind\".\nSecond line \\ end.", kp);
  nl_metrics_counter(&r, "e_empty_total", "Never used.", op);
  double one[] = {1};
  nl_metrics_histogram(&r, "c_plain", "Plain.", NULL, one, 1);

  const char *v1[] = {"x\"y\\z\n", "1"}, *v2[] = {"plain", "2"};
  nl_metric_t *m1 = nl_metric_series(c, v1);
  nl_metric_add(m1, 2);
  nl_metric_inc(nl_metric_series(c, v1));
  nl_metric_add(nl_metric_series(c, v2), 0.5);
  nl_metric_t *s = nl_metric_series1(h, "sync");
  nl_metric_observe(s, 0.1); /* on the bound: le="0.1" */
  nl_metric_observe(s, 0.25);
  nl_metric_observe(s, 1);
  nl_metric_observe(s, 11);
  assert_ptr_equal(nl_metric_series(c, v1), m1);
  nl_metric_family_t *up = nl_metrics_gauge(&r, "f_up", "Up.", NULL);
  assert_ptr_equal(nl_metric_series(up, NULL), nl_metric_series(up, NULL));
  nl_metric_set(nl_metric_series(up, NULL), 1);
  assert_true(nl_metric_value(m1) == 3);

  nl_buf_t out = NL_BUF_INIT;
  nl_metrics_encode(&r, &out);
  assert_string_equal(out.data, golden);
  assert_int_equal(collected, 1);
  nl_buf_free(&out);
  nl_metrics_free(&r);
}

static void remove_and_reset(void **state) {
  (void)state;
  nl_metrics_t r;
  nl_metrics_init(&r);
  const char *l[] = {"pod", NULL};
  nl_metric_family_t *g = nl_metrics_gauge(&r, "g", "G.", l);
  nl_metric_set(nl_metric_series1(g, "a"), 1);
  nl_metric_set(nl_metric_series1(g, "b"), 2);
  nl_metric_set(nl_metric_series1(g, "c"), 3);
  const char *b[] = {"b"}, *c[] = {"c"}, *z[] = {"z"};
  nl_metric_remove(g, b);
  nl_metric_remove(g, z);
  nl_metric_remove(g, c); /* the last one: a new series appends after "a" */
  nl_metric_set(nl_metric_series1(g, "d"), -4);
  nl_buf_t out = NL_BUF_INIT;
  nl_metrics_encode(&r, &out);
  assert_string_equal(out.data, "# HELP g G.\n# TYPE g gauge\ng{pod=\"a\"} 1\ng{pod=\"d\"} -4\n");
  nl_metric_reset(g);
  out.len = 0;
  nl_metrics_encode(&r, &out);
  assert_int_equal(out.len, 0);
  nl_buf_free(&out);
  nl_metrics_free(&r);
}

/* Every series with a value at one label goes, the others stay in order,
 * and the last one removed leaves the next new series appended right. */
static void remove_where(void **state) {
  (void)state;
  nl_metrics_t r;
  nl_metrics_init(&r);
  const char *l[] = {"driver", "code", NULL};
  nl_metric_family_t *c = nl_metrics_counter(&r, "c", "C.", l);
  const char *a1[] = {"a", "OK"}, *b1[] = {"b", "OK"}, *a2[] = {"a", "Unknown"},
             *b2[] = {"b", "Internal"}, *x[] = {"x", "OK"};
  nl_metric_inc(nl_metric_series(c, a1));
  nl_metric_inc(nl_metric_series(c, b1));
  nl_metric_inc(nl_metric_series(c, a2));
  nl_metric_remove_where(c, 0, "a");
  nl_metric_remove_where(c, 0, "z");
  nl_metric_add(nl_metric_series(c, b2), 2);
  nl_metric_inc(nl_metric_series(c, a1)); /* made again from 0 */
  nl_metric_remove_where(c, 1, "Internal");
  nl_metric_inc(nl_metric_series(c, x));
  nl_buf_t out = NL_BUF_INIT;
  nl_metrics_encode(&r, &out);
  assert_string_equal(out.data, "# HELP c C.\n# TYPE c counter\nc{driver=\"b\",code=\"OK\"} 1\n"
                                "c{driver=\"a\",code=\"OK\"} 1\nc{driver=\"x\",code=\"OK\"} 1\n");
  nl_buf_free(&out);
  nl_metrics_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(floats_as_go),
      cmocka_unit_test(text_format_golden),
      cmocka_unit_test(remove_and_reset),
      cmocka_unit_test(remove_where),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
