/* Graceful node shutdown on a fake clock: non-critical pods are stopped first,
 * within shutdownGracePeriod - shutdownGracePeriodCriticalPods, critical pods
 * after them within shutdownGracePeriodCriticalPods, and the sequence ends
 * within shutdownGracePeriod however slow the pods are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "managers/shutdown.h"

#define S(x) ((int64_t)(x) * 1000000000)

typedef struct kills {
  int n;
  char uid[8][16];
  int64_t grace[8];
  uint64_t at[8];
  uint64_t now;           /* the fake clock */
  nl_shutdown_t *m;
  const char *done_inside; /* a pod reported done from inside its kill */
} kills_t;

static void on_kill(void *ctx, const nl_shutdown_pod_t *p, int64_t grace) {
  kills_t *k = ctx;
  snprintf(k->uid[k->n], sizeof k->uid[0], "%s", p->uid);
  k->grace[k->n] = grace;
  k->at[k->n++] = k->now;
  if (k->done_inside && strcmp(k->done_inside, p->uid) == 0) nl_shutdown_pod_done(k->m, p->uid, k->now);
}

static const nl_shutdown_pod_t pods[] = {
    {"crit", "kube-system", "crit", NL_PRIORITY_SYSTEM_NODE_CRITICAL, 30},
    {"web", "default", "web", 0, 30},
    {"quick", "default", "quick", 1000, 2}, /* a shorter terminationGracePeriodSeconds */
};

static void critical_pods_last(void **state) {
  (void)state;
  kills_t k = {0};
  nl_shutdown_t m;
  k.m = &m;
  nl_shutdown_init(&m, S(20), S(5), on_kill, &k);
  assert_true(nl_shutdown_enabled(&m));
  assert_int_equal(nl_shutdown_period_s(&m), 20);
  k.now = 1000;
  nl_shutdown_begin(&m, pods, 3, k.now);
  /* The non-critical group first, with 15 s each (quick: its own 2 s). */
  assert_int_equal(m.state, NL_SHUTDOWN_KILLING);
  assert_int_equal(k.n, 2);
  assert_string_equal(k.uid[0], "web");
  assert_int_equal(k.grace[0], 15);
  assert_string_equal(k.uid[1], "quick");
  assert_int_equal(k.grace[1], 2);
  assert_int_equal(nl_shutdown_deadline(&m), 1000 + 15000);
  /* One stopped: the critical pod still waits for the other. */
  k.now = 3000;
  nl_shutdown_pod_done(&m, "quick", k.now);
  nl_shutdown_pod_done(&m, "quick", k.now); /* a repeat changes nothing */
  nl_shutdown_tick(&m, k.now);
  assert_int_equal(k.n, 2);
  /* Both stopped before the deadline: the critical group starts at once. */
  k.now = 9000;
  nl_shutdown_pod_done(&m, "web", k.now);
  assert_int_equal(k.n, 3);
  assert_string_equal(k.uid[2], "crit");
  assert_int_equal(k.grace[2], 5);
  assert_int_equal(k.at[2], 9000);
  assert_int_equal(nl_shutdown_deadline(&m), 9000 + 5000);
  nl_shutdown_pod_done(&m, "crit", 10000);
  assert_int_equal(m.state, NL_SHUTDOWN_DONE);
  assert_int_equal(m.ended_ms - m.started_ms, 9000);
  assert_int_equal(nl_shutdown_deadline(&m), 0);
  nl_shutdown_free(&m);
}

static void budget_bounds_slow_pods(void **state) {
  (void)state;
  kills_t k = {0};
  nl_shutdown_t m;
  k.m = &m;
  nl_shutdown_init(&m, S(10), S(4), on_kill, &k);
  k.now = 0;
  nl_shutdown_begin(&m, pods, 2, k.now);
  assert_int_equal(k.n, 1); /* web */
  k.now = 5999;
  nl_shutdown_tick(&m, k.now);
  assert_int_equal(k.n, 1);
  /* The group's period ran out: critical pods go on without waiting for web. */
  k.now = 6000;
  nl_shutdown_tick(&m, k.now);
  assert_int_equal(k.n, 2);
  assert_string_equal(k.uid[1], "crit");
  assert_int_equal(k.grace[1], 4);
  nl_shutdown_pod_done(&m, "web", 7000); /* late: changes nothing */
  assert_int_equal(m.state, NL_SHUTDOWN_KILLING);
  k.now = 10000;
  nl_shutdown_tick(&m, k.now);
  assert_int_equal(m.state, NL_SHUTDOWN_DONE);
  assert_true(m.ended_ms - m.started_ms <= 10000); /* shutdownGracePeriod */
  nl_shutdown_free(&m);
}

static void empty_groups_take_no_time(void **state) {
  (void)state;
  kills_t k = {0};
  nl_shutdown_t m;
  k.m = &m;
  /* Only a critical pod, stopped from inside its kill: done at once. */
  nl_shutdown_init(&m, S(30), S(10), on_kill, &k);
  k.done_inside = "crit";
  k.now = 500;
  nl_shutdown_begin(&m, pods, 1, k.now);
  assert_int_equal(k.n, 1);
  assert_int_equal(k.at[0], 500);
  assert_int_equal(m.state, NL_SHUTDOWN_DONE);
  nl_shutdown_free(&m);
  /* No pods at all. */
  nl_shutdown_init(&m, S(30), S(10), on_kill, &k);
  nl_shutdown_begin(&m, NULL, 0, 0);
  assert_int_equal(m.state, NL_SHUTDOWN_DONE);
  nl_shutdown_free(&m);
}

static void disabled_and_critical_only(void **state) {
  (void)state;
  kills_t k = {0};
  nl_shutdown_t m;
  k.m = &m;
  nl_shutdown_init(&m, 0, 0, on_kill, &k);
  assert_false(nl_shutdown_enabled(&m));
  nl_shutdown_begin(&m, pods, 3, 0);
  assert_int_equal(m.state, NL_SHUTDOWN_DONE);
  assert_int_equal(k.n, 0);
  nl_shutdown_free(&m);
  /* Every second to critical pods: the others get a grace period of 0. */
  nl_shutdown_init(&m, S(8), S(8), on_kill, &k);
  nl_shutdown_begin(&m, pods, 2, 0);
  assert_string_equal(k.uid[0], "web");
  assert_int_equal(k.grace[0], 0);
  assert_int_equal(k.n, 2); /* a period of 0 is over at once */
  assert_int_equal(k.grace[1], 8);
  nl_shutdown_free(&m);
}

static void priority_of_pods(void **state) {
  (void)state;
  nl_pod_t pod;
  memset(&pod, 0, sizeof pod);
  assert_int_equal(nl_shutdown_pod_priority(&pod), 0);
  pod.spec.priority_class_name = "system-node-critical";
  assert_int_equal(nl_shutdown_pod_priority(&pod), NL_PRIORITY_SYSTEM_NODE_CRITICAL);
  pod.spec.priority_class_name = "system-cluster-critical";
  assert_int_equal(nl_shutdown_pod_priority(&pod), NL_PRIORITY_SYSTEM_CRITICAL);
  pod.spec.priority = (nl_opt_i32_t){true, 7};
  assert_int_equal(nl_shutdown_pod_priority(&pod), 7); /* the API's word wins */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(critical_pods_last),
      cmocka_unit_test(budget_bounds_slow_pods),
      cmocka_unit_test(empty_groups_take_no_time),
      cmocka_unit_test(disabled_and_critical_only),
      cmocka_unit_test(priority_of_pods),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
