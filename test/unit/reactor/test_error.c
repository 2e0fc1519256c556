#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reactor/error.h"

static int start_container(const char *name, nl_err_t **err) {
  nl_err_set(err, 2, "rpc error: code = Unknown desc = %s", "no such image");
  return nl_err_wrap(err, "start container \"%s\"", name);
}

static void context_is_added_on_the_way_up(void **state) {
  nl_err_t *err = NULL;
  assert_int_equal(start_container("httpd", &err), -1);
  nl_err_wrap(&err, "pod %s/%s", "edge", "web");
  assert_string_equal(nl_err_msg(err),
                      "pod edge/web: start container \"httpd\": rpc error: code = Unknown desc = no such image");
  assert_int_equal(err->code, 2);
  nl_err_free(&err);
  assert_null(err);
  assert_string_equal(nl_err_msg(err), "");
}

static void null_err_is_allowed(void **state) {
  assert_int_equal(nl_err_set(NULL, 1, "x"), -1);
  assert_int_equal(nl_err_wrap(NULL, "y"), -1);
  nl_err_t *err = NULL;
  assert_int_equal(nl_err_wrap(&err, "y"), -1);
  assert_null(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(context_is_added_on_the_way_up),
      cmocka_unit_test(null_err_is_allowed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
