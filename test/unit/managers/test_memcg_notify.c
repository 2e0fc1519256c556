/* Memory cgroup threshold notifications (managers/memcg_notify.c) on a
 * directory that stands in for the memory cgroup: what is written to
 * cgroup.event_control, a signalled eventfd reaching the callback, arming
 * again, the failure that leaves the owner polling, and stopping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <cmocka.h>

#include "managers/memcg_notify.h"

typedef struct fixture {
  uv_loop_t loop;
  nl_memcg_notify_t n;
  char dir[64];
  int crossed, stopped;
} fixture_t;

static void on_crossed(void *ctx) {
  fixture_t *f = ctx;
  f->crossed++;
  uv_stop(&f->loop);
}

static void on_stopped(void *ctx) { ((fixture_t *)ctx)->stopped++; }

static void put(const char *dir, const char *name) {
  char p[128];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fclose(f);
}

/* files: whether the cgroup files exist. */
static fixture_t *setup(bool files) {
  fixture_t *f = calloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/nl-memcg-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  if (files) {
    put(f->dir, "memory.usage_in_bytes");
    put(f->dir, "cgroup.event_control");
  }
  assert_int_equal(uv_loop_init(&f->loop), 0);
  nl_err_t *err = NULL;
  assert_int_equal(nl_memcg_notify_init(&f->n, &f->loop, f->dir, on_crossed, f, &err), 0);
  return f;
}

static void teardown(fixture_t *f) {
  nl_memcg_notify_stop(&f->n, on_stopped, f);
  assert_int_equal(f->stopped, 0); /* never from inside the call */
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(f->stopped, 1);
  assert_int_equal(f->n.state, NL_MEMCG_STOPPED);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
  assert_int_equal(system(cmd), 0);
  free(f);
}

/* Runs the loop until the notifier is no longer arming. */
static void settle(fixture_t *f) {
  while (f->n.state == NL_MEMCG_ARMING) uv_run(&f->loop, UV_RUN_ONCE);
}

/* The last registration: "<eventfd> <usage fd> <threshold>". */
static long long registered(fixture_t *f, int *efd) {
  char p[128], line[128] = "";
  snprintf(p, sizeof p, "%s/cgroup.event_control", f->dir);
  FILE *fp = fopen(p, "r");
  assert_non_null(fp);
  assert_non_null(fgets(line, sizeof line, fp));
  fclose(fp);
  int watch;
  long long t;
  assert_int_equal(sscanf(line, "%d %d %lld", efd, &watch, &t), 3);
  return t;
}

static void test_arm_and_cross(void **state) {
  (void)state;
  fixture_t *f = setup(true);
  int64_t t[] = {123456789};
  nl_memcg_notify_set(&f->n, t, 1);
  assert_int_equal(f->n.state, NL_MEMCG_ARMING); /* on the thread pool */
  settle(f);
  assert_int_equal(f->n.state, NL_MEMCG_ARMED);
  int efd;
  assert_int_equal(registered(f, &efd), 123456789);
  assert_int_equal(efd, f->n.efd);
  /* the kernel signals the eventfd when the usage crosses the threshold */
  assert_int_equal(eventfd_write(f->n.efd, 1), 0);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(f->crossed, 1);
  /* the same thresholds: nothing to do */
  nl_memcg_notify_set(&f->n, t, 1);
  assert_int_equal(f->n.state, NL_MEMCG_ARMED);
  /* new ones: a new eventfd, registered, in place of the old one */
  int64_t t2[] = {987654321};
  nl_memcg_notify_set(&f->n, t2, 1);
  settle(f);
  assert_int_equal(registered(f, &efd), 987654321);
  assert_int_equal(efd, f->n.efd);
  assert_int_equal(eventfd_write(f->n.efd, 1), 0);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(f->crossed, 2);
  assert_int_equal(f->n.crossings, 2);
  teardown(f);
}

/* Thresholds asked for while a registration runs are armed after it. */
static void test_set_while_arming(void **state) {
  (void)state;
  fixture_t *f = setup(true);
  int64_t a[] = {100}, b[] = {200, 300};
  nl_memcg_notify_set(&f->n, a, 1);
  nl_memcg_notify_set(&f->n, b, 2);
  settle(f);
  settle(f);
  assert_int_equal(f->n.n_armed, 2);
  assert_int_equal(f->n.armed[0], 200);
  assert_int_equal(f->n.armed[1], 300);
  teardown(f);
}

/* A crossing between the owner's reading and the registration is not lost:
 * over a threshold once registered, and not before, counts as a crossing. */
static void test_over_when_armed(void **state) {
  (void)state;
  fixture_t *f = setup(true);
  char p[128];
  snprintf(p, sizeof p, "%s/memory.usage_in_bytes", f->dir);
  FILE *fp = fopen(p, "w");
  fputs("5000\n", fp);
  fclose(fp);
  int64_t low[] = {1000}, lower[] = {2000}, high[] = {9000};
  nl_memcg_notify_set(&f->n, low, 1);
  settle(f);
  assert_int_equal(f->crossed, 1);
  nl_memcg_notify_set(&f->n, lower, 1); /* still over: no news */
  settle(f);
  assert_int_equal(f->crossed, 1);
  nl_memcg_notify_set(&f->n, high, 1); /* under */
  settle(f);
  nl_memcg_notify_set(&f->n, low, 1);  /* over again */
  settle(f);
  assert_int_equal(f->crossed, 2);
  teardown(f);
}

/* No memory cgroup (cgroup v2, or none): failed, and the owner polls. */
static void test_unavailable(void **state) {
  (void)state;
  fixture_t *f = setup(false);
  int64_t t[] = {1};
  nl_memcg_notify_set(&f->n, t, 1);
  settle(f);
  assert_int_equal(f->n.state, NL_MEMCG_FAILED);
  assert_int_equal(f->n.efd, -1);
  nl_memcg_notify_set(&f->n, t, 1);
  assert_int_equal(f->n.state, NL_MEMCG_FAILED);
  teardown(f);
}

/* Stopped while a registration runs: it ends first, nothing leaks. */
static void test_stop_while_arming(void **state) {
  (void)state;
  fixture_t *f = setup(true);
  int64_t t[] = {1};
  nl_memcg_notify_set(&f->n, t, 1);
  assert_int_equal(f->n.state, NL_MEMCG_ARMING);
  teardown(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arm_and_cross),
      cmocka_unit_test(test_set_while_arming),
      cmocka_unit_test(test_over_when_armed),
      cmocka_unit_test(test_unavailable),
      cmocka_unit_test(test_stop_while_arming),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
