#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "reactor/utf8.h"

/* Go's json.Marshal of a string s, as text. */
static void json_is(const char *s, const char *want) {
  json_t *j = nl_json_str(s);
  char *out = nl_json_xdumps(j, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
  assert_string_equal(out, want);
  free(out);
  json_decref(j);
}

/* Each byte that does not start a valid sequence is one U+FFFD, as Go's
 * range over a string and json.Marshal do. */
static void invalid_bytes(void **state) {
  json_is("\xff\xfe", "\"\\uFFFD\\uFFFD\"");
  json_is("caf\xe9", "\"caf\\uFFFD\"");
  json_is("a\xe2\x82" "b", "\"a\\uFFFD\\uFFFDb\"");          /* truncated */
  json_is("\xed\xa0\x80", "\"\\uFFFD\\uFFFD\\uFFFD\"");       /* a surrogate */
  json_is("\xf4\x90\x80\x80", "\"\\uFFFD\\uFFFD\\uFFFD\\uFFFD\""); /* above U+10FFFF */
  json_is("\xe0\x80\xaf", "\"\\uFFFD\\uFFFD\\uFFFD\"");       /* overlong */
  json_is("caf\xc3\xa9 \xf0\x9f\x98\x80", "\"caf\\u00E9 \\uD83D\\uDE00\"");
  json_is("", "\"\"");
}

/* U+0000 inside a name survives as C0 80 and comes out as U+0000. */
static void embedded_nul(void **state) {
  char *s = nl_utf8_from_bytes("admin\0evil", 10);
  assert_string_equal(s, "admin\xc0\x80" "evil");
  assert_int_not_equal(strcmp(s, "admin"), 0);
  json_is(s, "\"admin\\u0000evil\"");
  free(s);
  s = nl_utf8_from_bytes("", 0);
  assert_string_equal(s, "");
  free(s);
  s = nl_utf8_from_bytes("\xff" "a", 2);
  assert_string_equal(s, "\xef\xbf\xbd" "a");
  free(s);
  json_t *j = json_stringn("x\0y", 3);
  s = nl_json_text(j);
  assert_string_equal(s, "x\xc0\x80y");
  free(s);
  json_decref(j);
  s = nl_json_text(NULL);
  assert_string_equal(s, "");
  free(s);
}

/* What a protobuf string may hold for Go: valid UTF-8 throughout, C0 80 not. */
static void valid(void **state) {
  assert_true(nl_utf8_valid(""));
  assert_true(nl_utf8_valid("gpu-0 caf\xc3\xa9 \xf0\x9f\x98\x80"));
  assert_false(nl_utf8_valid("gpu-\xff"));
  assert_false(nl_utf8_valid("a\xe2\x82"));        /* truncated */
  assert_false(nl_utf8_valid("\xed\xa0\x80"));    /* a surrogate */
  assert_false(nl_utf8_valid("admin\xc0\x80x"));   /* overlong NUL */
}

static void runes(void **state) {
  nl_buf_t b = NL_BUF_INIT;
  nl_utf8_append_rune(&b, 'a');
  nl_utf8_append_rune(&b, 0xe9);
  nl_utf8_append_rune(&b, 0x20ac);
  nl_utf8_append_rune(&b, 0x1f600);
  nl_utf8_append_rune(&b, 0xd800);
  nl_utf8_append_rune(&b, 0x110000);
  assert_string_equal(b.data, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbd\xef\xbf\xbd");
  nl_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(invalid_bytes),
      cmocka_unit_test(embedded_nul),
      cmocka_unit_test(runes),
      cmocka_unit_test(valid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
