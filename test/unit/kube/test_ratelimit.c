#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/kube/ratelimit.h"

/* qps 5, burst 2: two at once, then one each 200 ms, in reservation order. */
static void spacing(void **state) {
  nl_kube_ratelimit_t rl;
  nl_kube_ratelimit_init(&rl, 5, 2, 1000);
  uint64_t w;
  assert_true(nl_kube_ratelimit_reserve(&rl, 1000, UINT64_MAX, &w));
  assert_int_equal(w, 0);
  assert_true(nl_kube_ratelimit_reserve(&rl, 1000, UINT64_MAX, &w));
  assert_int_equal(w, 0);
  assert_true(nl_kube_ratelimit_reserve(&rl, 1000, UINT64_MAX, &w));
  assert_int_equal(w, 200);
  assert_true(nl_kube_ratelimit_reserve(&rl, 1000, UINT64_MAX, &w));
  assert_int_equal(w, 400);
  /* A wait past the deadline reserves nothing. */
  assert_false(nl_kube_ratelimit_reserve(&rl, 1000, 500, &w));
  assert_true(nl_kube_ratelimit_reserve(&rl, 1000, 600, &w));
  assert_int_equal(w, 600);
  /* Idle time refills up to the burst, no further. */
  assert_true(nl_kube_ratelimit_reserve(&rl, 60000, UINT64_MAX, &w));
  assert_true(nl_kube_ratelimit_reserve(&rl, 60000, UINT64_MAX, &w));
  assert_int_equal(w, 0);
  assert_true(nl_kube_ratelimit_reserve(&rl, 60000, UINT64_MAX, &w));
  assert_int_equal(w, 200);
}

static void unlimited(void **state) {
  nl_kube_ratelimit_t rl;
  nl_kube_ratelimit_init(&rl, 0, 0, 0);
  uint64_t w = 1;
  for (int i = 0; i < 1000; i++) assert_true(nl_kube_ratelimit_reserve(&rl, 0, 0, &w));
  assert_int_equal(w, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(spacing), cmocka_unit_test(unlimited)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
