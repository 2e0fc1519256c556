#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reactor/grid.h"

/* Due on the grid, within half a grid of the wanted delay. */
static void lands_on_the_grid(void **state) {
  (void)state;
  assert_int_equal(nl_grid_delay(12345, 10000, 1000), 9655);  /* due 22000 */
  assert_int_equal(nl_grid_delay(12700, 10000, 1000), 10300); /* due 23000 */
  assert_int_equal(nl_grid_delay(22001, 10000, 1000), 9999);  /* a run 1 ms late stays put */
  for (uint64_t now = 5000; now < 7000; now += 7) {
    uint64_t d = nl_grid_delay(now, 3000, 1000);
    assert_int_equal((now + d) % 1000, 0);
    assert_true(d + 500 >= 3000 && d <= 3000 + 500);
  }
}

/* Two timers armed at different times for the same period meet. */
static void timers_meet(void **state) {
  (void)state;
  assert_int_equal(100 + nl_grid_delay(100, 10000, 1000), 430 + nl_grid_delay(430, 10000, 1000));
}

static void left_alone(void **state) {
  (void)state;
  assert_int_equal(nl_grid_delay(12345, 0, 1000), 0);     /* at once */
  assert_int_equal(nl_grid_delay(12345, 50, 0), 50);      /* no grid */
  assert_int_equal(nl_grid_delay(12345, 400, 1000), 400); /* shorter than the grid's half */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lands_on_the_grid),
      cmocka_unit_test(timers_meet),
      cmocka_unit_test(left_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
