#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "reactor/duration.h"

static void parses_go_durations(void **state) {
  struct {
    const char *in;
    int64_t ns;
  } ok[] = {
      {"0", 0}, {"20s", 20 * NL_NS_PER_S}, {"1m30s", 90 * NL_NS_PER_S},
      {"1.5h", 5400 * NL_NS_PER_S}, {"300ms", 300 * NL_NS_PER_MS}, {"2m", 120 * NL_NS_PER_S},
      {"-1s", -NL_NS_PER_S}, {"1h2m3s4ms5us6ns", 3723004005006}, {".5s", NL_NS_PER_S / 2},
      {"1\xc2\xb5s", 1000},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    int64_t v = -42;
    nl_err_t *err = NULL;
    assert_int_equal(nl_duration_parse(ok[i].in, &v, &err), 0);
    assert_null(err);
    assert_int_equal(v, ok[i].ns);
  }
}

static void rejects_garbage(void **state) {
  const char *bad[] = {"", "banana", "10", "1x", "s", "1s2", "--1s", "."};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v = 0;
    nl_err_t *err = NULL;
    assert_int_equal(nl_duration_parse(bad[i], &v, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err->msg, "duration"));
    nl_err_free(&err);
  }
}

static void formats_like_go(void **state) {
  char buf[64];
  assert_string_equal(nl_duration_format(0, buf, sizeof buf), "0s");
  assert_string_equal(nl_duration_format(60 * NL_NS_PER_S, buf, sizeof buf), "1m0s");
  assert_string_equal(nl_duration_format(90 * NL_NS_PER_S, buf, sizeof buf), "1m30s");
  assert_string_equal(nl_duration_format(1500 * NL_NS_PER_MS, buf, sizeof buf), "1.5s");
  assert_string_equal(nl_duration_format(300 * NL_NS_PER_MS, buf, sizeof buf), "300ms");
  assert_string_equal(nl_duration_format(7200 * NL_NS_PER_S, buf, sizeof buf), "2h0m0s");
  assert_string_equal(nl_duration_format(-NL_NS_PER_S, buf, sizeof buf), "-1s");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parses_go_durations),
      cmocka_unit_test(rejects_garbage),
      cmocka_unit_test(formats_like_go),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
