#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "reactor/map.h"

static void put_get_del(void **state) {
  nl_map_t m;
  nl_map_init(&m);
  assert_null(nl_map_get(&m, "a"));
  assert_null(nl_map_put(&m, "a", (void *)1));
  assert_ptr_equal(nl_map_put(&m, "a", (void *)2), (void *)1);
  assert_ptr_equal(nl_map_get(&m, "a"), (void *)2);
  assert_true(nl_map_has(&m, "a"));
  assert_ptr_equal(nl_map_del(&m, "a"), (void *)2);
  assert_false(nl_map_has(&m, "a"));
  assert_int_equal(nl_map_size(&m), 0);
  nl_map_free(&m, NULL);
}

static void grows_and_iterates_with_deletion(void **state) {
  nl_map_t m;
  nl_map_init(&m);
  char key[32];
  for (intptr_t i = 0; i < 5000; i++) {
    snprintf(key, sizeof key, "pod-%ld", (long)i);
    nl_map_put(&m, key, (void *)(i + 1));
  }
  assert_int_equal(nl_map_size(&m), 5000);
  nl_map_iter_t it;
  const char *k;
  void *v;
  size_t seen = 0;
  nl_map_iter_init(&it, &m);
  while (nl_map_iter_next(&it, &k, &v)) {
    seen++;
    if ((intptr_t)v % 2 == 0) nl_map_del(&m, k);
  }
  assert_int_equal(seen, 5000);
  assert_int_equal(nl_map_size(&m), 2500);
  assert_ptr_equal(nl_map_get(&m, "pod-0"), (void *)1);
  assert_null(nl_map_get(&m, "pod-1"));
  nl_map_free(&m, NULL);
}

static void frees_values(void **state) {
  nl_map_t m;
  nl_map_init(&m);
  nl_map_put(&m, "x", malloc(10));
  nl_map_put(&m, "y", malloc(10));
  nl_map_free(&m, free); /* ASan/valgrind catch a leak here */
  assert_int_equal(nl_map_size(&m), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(put_get_del),
      cmocka_unit_test(grows_and_iterates_with_deletion),
      cmocka_unit_test(frees_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
