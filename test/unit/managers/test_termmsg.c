/* Termination messages: the file's last 4096 bytes, the log fallback with
 * upstream's limits, and upstream's messages for files that cannot be read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "managers/termmsg.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

static char root[64];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/nanolet-termmsg-XXXXXX");
  return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char *cmd = nl_xasprintf("rm -rf '%s'", root);
  int rc = system(cmd);
  free(cmd);
  return rc;
}

static void write_file(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fwrite(data, 1, len, f);
  fclose(f);
}

static void test_cri_log_tail(void **state) {
  (void)state;
  const char *log =
      "2024-01-01T00:00:00.000000000Z stdout F first\n"
      "2024-01-01T00:00:00.100000000Z stderr P part-\n"
      "2024-01-01T00:00:00.200000000Z stderr F two\n"
      "2024-01-01T00:00:00.300000000Z stdout F last line\n";
  char *m = nl_termmsg_tail_cri_log(log, strlen(log), 80, 2048);
  assert_string_equal(m, "first\npart-two\nlast line\n");
  free(m);
  m = nl_termmsg_tail_cri_log(log, strlen(log), 2, 2048);
  assert_string_equal(m, "part-two\nlast line\n");
  free(m);
  m = nl_termmsg_tail_cri_log(log, strlen(log), 80, 5);
  assert_string_equal(m, "line\n");
  free(m);
}

static char *got;
static int calls;
static void on_msg(const char *m, void *ctx) {
  (void)ctx;
  free(got);
  got = nl_xstrdup(m);
  calls++;
}

/* Runs one read to completion on its own loop; returns the message. */
static const char *read_msg(const char *file, bool fallback, const char *log) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  calls = 0;
  assert_int_equal(nl_termmsg_read(&loop, file, fallback, log, on_msg, NULL), 0);
  assert_int_equal(calls, 0); /* never from inside the call */
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(calls, 1);
  assert_int_equal(uv_loop_close(&loop), 0);
  return got;
}

static void test_file_and_fallback(void **state) {
  (void)state;
  char *f = nl_xasprintf("%s/term", root), *l = nl_xasprintf("%s/0.log", root);
  char *gone = nl_xasprintf("%s/none", root);
  write_file(l, "2024-01-01T00:00:00Z stderr F boom\n", 35);
  write_file(f, "", 0);
  /* empty file, failed under FallbackToLogsOnError: the log tail */
  assert_string_equal(read_msg(f, true, l), "boom\n");
  /* without the fallback: the (empty) file only */
  assert_string_equal(read_msg(f, false, l), "");
  /* no file (or no mount) falls back too, or gives nothing */
  assert_string_equal(read_msg(gone, true, l), "boom\n");
  assert_string_equal(read_msg(NULL, true, l), "boom\n");
  assert_string_equal(read_msg(gone, false, l), "");
  /* the file wins when it has content */
  write_file(f, "bye", 3);
  assert_string_equal(read_msg(f, true, l), "bye");
  assert_string_equal(read_msg(f, false, NULL), "bye");
  free(f);
  free(l);
  free(gone);
}

static void test_limits(void **state) {
  (void)state;
  char *f = nl_xasprintf("%s/big", root), *l = nl_xasprintf("%s/big.log", root);
  /* the last 4096 bytes of a larger file, as upstream's tail.ReadAtMost */
  char big[NL_TERMMSG_MAX_BYTES + 100];
  memset(big, 'a', 100);
  memset(big + 100, 'b', NL_TERMMSG_MAX_BYTES);
  write_file(f, big, sizeof big);
  const char *m = read_msg(f, false, NULL);
  assert_int_equal(strlen(m), NL_TERMMSG_MAX_BYTES);
  assert_null(strchr(m, 'a'));
  /* the log: its last 80 lines, then at most 2048 bytes */
  nl_buf_t log = NL_BUF_INIT;
  for (int i = 0; i < 200; i++)
    nl_buf_printf(&log, "2024-01-01T00:00:00Z stdout F line %d\n", i);
  write_file(l, log.data, log.len);
  m = read_msg(NULL, true, l);
  assert_true(strncmp(m, "line 120\n", 9) == 0);
  assert_non_null(strstr(m, "line 199\n"));
  nl_buf_free(&log);
  for (int i = 0; i < 80; i++)
    nl_buf_printf(&log, "2024-01-01T00:00:00Z stdout F %0100d\n", i);
  write_file(l, log.data, log.len);
  m = read_msg(NULL, true, l);
  assert_int_equal(strlen(m), NL_TERMMSG_MAX_LOG_BYTES);
  nl_buf_free(&log);
  free(f);
  free(l);
}

static void test_unreadable(void **state) {
  (void)state;
  /* a directory where the file should be: upstream's message, no fallback */
  char want[256];
  snprintf(want, sizeof want, "Error on reading termination log %s: Is a directory", root);
  assert_string_equal(read_msg(root, true, NULL), want);
  char *gone = nl_xasprintf("%s/none.log", root);
  snprintf(want, sizeof want,
           "Error on reading termination message from logs: failed to open log file \"%s\": "
           "No such file or directory",
           gone);
  assert_string_equal(read_msg(NULL, true, gone), want);
  free(gone);
  free(got);
  got = NULL;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cri_log_tail),
      cmocka_unit_test(test_file_and_fallback),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_unreadable),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
