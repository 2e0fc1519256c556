#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "reactor/buf.h"

static void append_printf_consume(void **state) {
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_puts(&b, "hello ");
  nl_buf_printf(&b, "%s %d", "world", 42);
  assert_string_equal(b.data, "hello world 42");
  nl_buf_consume(&b, 6);
  assert_string_equal(b.data, "world 42");
  for (int i = 0; i < 1000; i++) nl_buf_append(&b, "0123456789", 10);
  assert_int_equal(b.len, 8 + 10000);
  char *s = nl_buf_steal(&b);
  assert_null(b.data);
  assert_int_equal(strlen(s), 10008);
  free(s);
  s = nl_buf_steal(&b);
  assert_string_equal(s, "");
  free(s);
}

/* A kept text holds its length, not the capacity the buffer grew to. */
static void steal_trims(void **state) {
  (void)state;
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_reserve(&b, 4000);
  nl_buf_puts(&b, "{\"phase\":\"Running\"}");
  char *s = nl_buf_steal(&b);
  assert_string_equal(s, "{\"phase\":\"Running\"}");
  assert_true(malloc_usable_size(s) < 64);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(append_printf_consume),
                                     cmocka_unit_test(steal_trims)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
