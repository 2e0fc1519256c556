#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "agent/model/quantity.h"

/* Canonical forms as upstream's resource.Quantity.String() gives them. */
static void canonical_forms(void **state) {
  struct {
    const char *in, *out;
    int64_t milli;
  } cases[] = {
      {"0", "0", 0},
      {"100m", "100m", 100},
      {"1.5", "1500m", 1500},
      {"0.5", "500m", 500},
      {"1", "1", 1000},
      {"64Mi", "64Mi", 64LL * 1048576 * 1000},
      {"1G", "1G", 1000000000000LL},
      {"1e3", "1e3", 1000000},
      {"1E3", "1e3", 1000000},
      {"1000", "1k", 1000000},
      {"1.5Gi", "1536Mi", 1610612736000LL},
      {"0.5Gi", "512Mi", 536870912000LL},
      {"0.1Gi", "107374182400m", 107374182400LL},
      {"1024", "1024", 1024000},
      {"1Ki", "1Ki", 1024000},
      {"0.5Ki", "512", 512000},
      {"12e6", "12e6", 12000000000LL},
      {"1n", "1n", 1},
      {"0.0000000001", "1n", 1},
      {"-100m", "-100m", -100},
      {"+2", "2", 2000},
      {"007", "7", 7000},
      {"1.", "1", 1000},
      {".5", "500m", 500},
      {"2e-3", "2e-3", 2},
      {"1u", "1u", 1},
      {"1500u", "1500u", 2},
      {"5Ti", "5Ti", 5LL * 1099511627776LL * 1000},
      {"1Ei", "1Ei", INT64_MAX},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nl_quantity_t q;
    nl_err_t *err = NULL;
    char buf[NL_QUANTITY_STRLEN];
    int rc = nl_quantity_parse(cases[i].in, &q, &err);
    if (rc != 0) fail_msg("%s: %s", cases[i].in, nl_err_msg(err));
    if (strcmp(nl_quantity_format(&q, buf), cases[i].out) != 0)
      fail_msg("%s: got %s, want %s", cases[i].in, buf, cases[i].out);
    if (nl_quantity_milli_value(&q) != cases[i].milli)
      fail_msg("%s: milli %lld, want %lld", cases[i].in, (long long)nl_quantity_milli_value(&q),
               (long long)cases[i].milli);
  }
}

static void value_rounds_up(void **state) {
  nl_quantity_t q;
  assert_int_equal(nl_quantity_parse("100m", &q, NULL), 0);
  assert_int_equal(nl_quantity_value(&q), 1); /* ceil, as upstream Value() */
  assert_int_equal(nl_quantity_parse("1.5Gi", &q, NULL), 0);
  assert_int_equal(nl_quantity_value(&q), 1610612736);
  assert_int_equal(nl_quantity_parse("10Gi", &q, NULL), 0);
  assert_int_equal(nl_quantity_scaled_value(&q, -9), INT64_MAX); /* saturates */
}

static void rejects_garbage(void **state) {
  const char *bad[] = {"", "64MB", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i",
                       "-3.01e-", "1 ", " 1", "1e", "1Gb", "1e99999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    nl_quantity_t q = {42, 0, 0};
    nl_err_t *err = NULL;
    if (nl_quantity_parse(bad[i], &q, &err) != -1) fail_msg("accepted %s", bad[i]);
    assert_non_null(err);
    assert_int_equal(q.value, 42);
    nl_err_free(&err);
  }
}

static void compares_numerically(void **state) {
  nl_quantity_t a, b;
  assert_int_equal(nl_quantity_parse("1", &a, NULL), 0);
  assert_int_equal(nl_quantity_parse("1000m", &b, NULL), 0);
  assert_int_equal(nl_quantity_cmp(&a, &b), 0);
  assert_int_equal(nl_quantity_parse("1Ki", &b, NULL), 0);
  assert_int_equal(nl_quantity_cmp(&a, &b), -1);
  assert_int_equal(nl_quantity_cmp(&b, &a), 1);
  assert_int_equal(nl_quantity_parse("1e30", &b, NULL), 0);
  assert_int_equal(nl_quantity_cmp(&a, &b), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(canonical_forms),
      cmocka_unit_test(value_rounds_up),
      cmocka_unit_test(rejects_garbage),
      cmocka_unit_test(compares_numerically),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
