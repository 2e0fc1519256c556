#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reactor/backoff.h"

static void doubling_to_max(void **state) {
  nl_backoff_t b;
  nl_backoff_init(&b, 10000, 300000, 0);
  uint64_t want[] = {10000, 20000, 40000, 80000, 160000, 300000, 300000};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    assert_int_equal(nl_backoff_next(&b), want[i]);
  nl_backoff_reset(&b);
  assert_int_equal(nl_backoff_next(&b), 10000);
}

static void jitter_stays_in_range(void **state) {
  nl_backoff_t b;
  nl_backoff_init(&b, 1000, 1000, 0.5);
  int above = 0;
  for (int i = 0; i < 200; i++) {
    uint64_t d = nl_backoff_next(&b);
    assert_true(d >= 1000 && d <= 1500);
    above += d > 1000;
  }
  assert_true(above > 150); /* jitter actually varies the delay */
}

static void table_like_crashloop(void **state) {
  nl_backoff_table_t t;
  nl_backoff_table_init(&t, 10000, 300000);
  assert_int_equal(nl_backoff_table_get(&t, "pod_c", 0), 0);
  assert_false(nl_backoff_table_in_backoff_since(&t, "pod_c", 0, 0));
  assert_int_equal(nl_backoff_table_next(&t, "pod_c", 1000), 10000);
  assert_true(nl_backoff_table_in_backoff_since(&t, "pod_c", 1000, 5000));
  assert_false(nl_backoff_table_in_backoff_since(&t, "pod_c", 1000, 11000));
  assert_int_equal(nl_backoff_table_next(&t, "pod_c", 12000), 20000);
  assert_int_equal(nl_backoff_table_next(&t, "other", 12000), 10000);
  /* idle for more than 2*max: starts over */
  assert_int_equal(nl_backoff_table_next(&t, "pod_c", 12000 + 600001), 10000);
  nl_backoff_table_gc(&t, 12000 + 600001 + 600001);
  assert_int_equal(nl_map_size(&t.entries), 0);
  nl_backoff_table_next(&t, "x", 0);
  nl_backoff_table_reset(&t, "x");
  assert_int_equal(nl_backoff_table_get(&t, "x", 0), 0);
  nl_backoff_table_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(doubling_to_max),
      cmocka_unit_test(jitter_stays_in_range),
      cmocka_unit_test(table_like_crashloop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
