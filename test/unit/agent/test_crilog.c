#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent/crilog.h"

#define S 1000000000LL

static void query(void **state) {
  nl_crilog_opts_t o;
  assert_int_equal(nl_crilog_opts_parse("", 0, &o), 0);
  assert_false(o.follow);
  assert_int_equal(o.tail_lines, -1);
  assert_int_equal(o.limit_bytes, -1);
  assert_int_equal(o.since_ns, 0);
  assert_int_equal(nl_crilog_opts_parse("follow=true&timestamps=1&previous=True&tailLines=10"
                                        "&limitBytes=500&container=c",
                                        0, &o),
                   0);
  assert_true(o.follow && o.timestamps && o.previous);
  assert_int_equal(o.tail_lines, 10);
  assert_int_equal(o.limit_bytes, 500);
  /* "tail", the old name, wins; "all" is no limit. */
  assert_int_equal(nl_crilog_opts_parse("tailLines=3&tail=5", 0, &o), 0);
  assert_int_equal(o.tail_lines, 5);
  assert_int_equal(nl_crilog_opts_parse("tailLines=3&tail=all", 0, &o), 0);
  assert_int_equal(o.tail_lines, -1);
  assert_int_equal(nl_crilog_opts_parse("sinceSeconds=10", 100 * S, &o), 0);
  assert_int_equal(o.since_ns, 90 * S);
  assert_int_equal(nl_crilog_opts_parse("sinceTime=2024-05-01T10%3A00%3A00%2B02%3A00", 0, &o), 0);
  assert_int_equal(o.since_ns, 1714550400LL * S);
  /* Decoding fails: 400; invalid options: 422. */
  assert_int_equal(nl_crilog_opts_parse("follow=yes", 0, &o), 400);
  assert_int_equal(nl_crilog_opts_parse("tailLines=x", 0, &o), 400);
  assert_int_equal(nl_crilog_opts_parse("sinceTime=yesterday", 0, &o), 400);
  assert_int_equal(nl_crilog_opts_parse("tailLines=-1", 0, &o), 422);
  assert_int_equal(nl_crilog_opts_parse("limitBytes=0", 0, &o), 422);
  assert_int_equal(nl_crilog_opts_parse("sinceSeconds=0", 0, &o), 422);
  assert_int_equal(
      nl_crilog_opts_parse("sinceSeconds=5&sinceTime=2024-05-01T10:00:00Z", 10 * S, &o), 422);
}

static void times(void **state) {
  int64_t ns;
  assert_true(nl_crilog_parse_time("1970-01-01T00:00:01.5Z", 22, &ns));
  assert_int_equal(ns, S + S / 2);
  const char *t = "2024-05-01T08:00:00.123456789+00:00";
  assert_true(nl_crilog_parse_time(t, strlen(t), &ns));
  assert_int_equal(ns, 1714550400LL * S + 123456789);
  t = "2024-05-01T08:00:00-01:30";
  assert_true(nl_crilog_parse_time(t, strlen(t), &ns));
  assert_int_equal(ns, (1714550400LL + 5400) * S);
  assert_false(nl_crilog_parse_time("2024-05-01 08:00:00Z", 20, &ns));
  assert_false(nl_crilog_parse_time("2024-05-01T08:00:00", 19, &ns));
}

/* Writes a file's lines through a writer. */
static char *run(const nl_crilog_opts_t *o, const char *file) {
  nl_crilog_writer_t w;
  nl_crilog_writer_init(&w, o);
  nl_buf_t out = NL_BUF_INIT;
  const char *p = file;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (!nl_crilog_write(&w, p, len, &out)) break;
    p += len + (nl ? 1 : 0);
  }
  nl_buf_puts(&out, "");
  return nl_buf_steal(&out);
}

static const char FILE1[] =
    "2024-05-01T08:00:01.000000001Z stdout F one\n"
    "not a record\n"
    "2024-05-01T08:00:02Z stderr P par\n"
    "2024-05-01T08:00:03Z stderr F tial\n"
    "2024-05-01T08:00:04Z stdout F \n"
    "2024-05-01T08:00:05Z stdout F:x tagged\n";

static void writer(void **state) {
  nl_crilog_opts_t o;
  nl_crilog_opts_parse("", 0, &o);
  char *s = run(&o, FILE1);
  assert_string_equal(s, "one\npartial\n\ntagged\n");
  free(s);
  /* The timestamp goes at the start of a line only, as written. */
  o.timestamps = true;
  s = run(&o, FILE1);
  assert_string_equal(s, "2024-05-01T08:00:01.000000001Z one\n2024-05-01T08:00:02Z partial\n"
                         "2024-05-01T08:00:04Z \n2024-05-01T08:00:05Z tagged\n");
  free(s);
  o.timestamps = false;
  nl_crilog_parse_time("2024-05-01T08:00:03Z", 20, &o.since_ns);
  s = run(&o, FILE1);
  assert_string_equal(s, "tial\n\ntagged\n");
  free(s);
  nl_crilog_opts_parse("limitBytes=6", 0, &o);
  s = run(&o, FILE1);
  assert_string_equal(s, "one\npa");
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(query),
      cmocka_unit_test(times),
      cmocka_unit_test(writer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
