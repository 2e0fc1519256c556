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

/* The edges of the int64 amount, negative amounts and every suffix. */
static void extreme_values(void **state) {
  struct {
    const char *in, *out;
    int64_t milli, nano;
  } cases[] = {
      {"9223372036854775807", "9223372036854775807", INT64_MAX, INT64_MAX},
      {"-9223372036854775807", "-9223372036854775807", INT64_MIN, INT64_MIN},
      {"9223372036854775807n", "9223372036854775807n", 9223372036855, INT64_MAX},
      {"-9223372036854775807n", "-9223372036854775807n", -9223372036854, INT64_MIN + 1},
      {"999999999999999999E", "999999999999999999E", INT64_MAX, INT64_MAX},
      /* upstream caps binary amounts at 2^63-1 */
      {"8Ei", "9223372036854775807", INT64_MAX, INT64_MAX},
      {"-8Ei", "-9223372036854775807", INT64_MIN, INT64_MIN},
      {"7.5Ei", "7680Pi", INT64_MAX, INT64_MAX},
      {"8.000000001Ei", "9223372036854775807", INT64_MAX, INT64_MAX},
      {"7Ei", "7Ei", INT64_MAX, INT64_MAX},
      {"-1.5Ei", "-1536Pi", INT64_MIN, INT64_MIN},
      /* past nano precision: rounded up, away from zero */
      {"1e-10", "1e-9", 1, 1},
      {"-1e-10", "-1e-9", 0, -1},
      {"0.000000000000000000000000000001", "1n", 1, 1},
      {"-0.0000000015", "-2n", 0, -2},
      {"1e-2147483648", "1e-9", 1, 1}, /* the smallest exponent, at once */
      {"0e-2147483648", "0", 0, 0},
      {"1e2147483647", "10e2147483646", INT64_MAX, INT64_MAX},
      /* more than 64 bits of digits, trailing zeros traded for scale */
      {"922337203685477580700000000000000000", "922337203685477580700P", INT64_MAX, INT64_MAX},
      {"1329227995784915872903807060280344570e-30", "1329227995784916e-9", 1329227996,
       1329227995784916},
      {"-1n", "-1n", 0, -1},
      {"-1u", "-1u", 0, -1000},
      {"-1m", "-1m", -1, -1000000},
      {"-1", "-1", -1000, -1000000000},
      {"-1k", "-1k", -1000000, -1000000000000},
      {"-1M", "-1M", -1000000000, -1000000000000000},
      {"-1G", "-1G", -1000000000000, -1000000000000000000},
      {"-1T", "-1T", -1000000000000000, INT64_MIN},
      {"-1P", "-1P", -1000000000000000000, INT64_MIN},
      {"-1E", "-1E", INT64_MIN, INT64_MIN},
      {"-1Ki", "-1Ki", -1024000, -1024000000000},
      {"-1Mi", "-1Mi", -1048576000, -1048576000000000},
      {"-1Gi", "-1Gi", -1073741824000, -1073741824000000000},
      {"-1Ti", "-1Ti", -1099511627776000, INT64_MIN},
      {"-1Pi", "-1Pi", -1125899906842624000, INT64_MIN},
      {"-1Ei", "-1Ei", INT64_MIN, INT64_MIN},
      {"-2e-3", "-2e-3", -2, -2000000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nl_quantity_t q;
    nl_err_t *err = NULL;
    char buf[NL_QUANTITY_STRLEN];
    if (nl_quantity_parse(cases[i].in, &q, &err) != 0)
      fail_msg("%s: %s", cases[i].in, nl_err_msg(err));
    if (strcmp(nl_quantity_format(&q, buf), cases[i].out) != 0)
      fail_msg("%s: got %s, want %s", cases[i].in, buf, cases[i].out);
    int64_t milli = nl_quantity_milli_value(&q), nano = nl_quantity_scaled_value(&q, -9);
    if (milli != cases[i].milli || nano != cases[i].nano)
      fail_msg("%s: milli %lld nano %lld, want %lld %lld", cases[i].in, (long long)milli,
               (long long)nano, (long long)cases[i].milli, (long long)cases[i].nano);
  }
  /* beyond an int64 at nano scale: rejected (upstream falls back to inf.Dec) */
  const char *big[] = {"9223372036854775808",
                       "-9223372036854775808",
                       "9223372036854775808n",
                       "9223372036854775808000000000000000",
                       "92233720368547758070000000000000000000",
                       "1329227995784915872903807060280344576"};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    nl_quantity_t q;
    nl_err_t *err = NULL;
    if (nl_quantity_parse(big[i], &q, &err) != -1) fail_msg("accepted %s", big[i]);
    assert_non_null(strstr(nl_err_msg(err), "too large"));
    nl_err_free(&err);
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
  /* past 2^100 at a common scale, and across signs */
  assert_int_equal(nl_quantity_parse("1e-9", &a, NULL), 0);
  assert_int_equal(nl_quantity_parse("1e2147483647", &b, NULL), 0);
  assert_int_equal(nl_quantity_cmp(&a, &b), -1);
  assert_int_equal(nl_quantity_cmp(&b, &a), 1);
  assert_int_equal(nl_quantity_parse("-999999999999999999E", &a, NULL), 0);
  assert_int_equal(nl_quantity_cmp(&a, &b), -1);
  assert_int_equal(nl_quantity_parse("-1n", &b, NULL), 0);
  assert_int_equal(nl_quantity_cmp(&a, &b), -1);
  assert_int_equal(nl_quantity_parse("-999999999999999998E", &b, NULL), 0);
  assert_int_equal(nl_quantity_cmp(&a, &b), -1);
  assert_int_equal(nl_quantity_cmp(&b, &a), 1);
  assert_int_equal(nl_quantity_parse("-0", &a, NULL), 0);
  assert_int_equal(nl_quantity_parse("0e-2147483648", &b, NULL), 0);
  assert_int_equal(nl_quantity_cmp(&a, &b), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(canonical_forms),
      cmocka_unit_test(extreme_values),
      cmocka_unit_test(value_rounds_up),
      cmocka_unit_test(rejects_garbage),
      cmocka_unit_test(compares_numerically),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
