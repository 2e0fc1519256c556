#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/cmd_manifest.h"

/* Runs the command with stdout and stderr in files; returns its exit code. */
static int run(char **argv, int argc, char *out, size_t outsz) {
  fflush(stdout);
  fflush(stderr);
  FILE *tmp = tmpfile();
  int so = dup(1), se = dup(2);
  dup2(fileno(tmp), 1);
  dup2(fileno(tmp), 2);
  int rc = nl_cmd_manifest(argc, argv);
  fflush(stdout);
  fflush(stderr);
  dup2(so, 1);
  dup2(se, 2);
  close(so);
  close(se);
  rewind(tmp);
  size_t n = fread(out, 1, outsz - 1, tmp);
  out[n] = 0;
  fclose(tmp);
  return rc;
}

static void good_file_prints_pod(void **state) {
  static char out[65536];
  char *argv[] = {"check", "--hostname-override=node-a", FIXTURES "/nginx.yaml", NULL};
  assert_int_equal(run(argv, 3, out, sizeof out), 0);
  assert_non_null(strstr(out, "\"name\": \"web-node-a\""));
  assert_non_null(strstr(out, "\"kubernetes.io/config.hash\""));
  assert_non_null(strstr(out, "\"uid\": \""));
  assert_non_null(strstr(out, "\"imagePullPolicy\": \"IfNotPresent\""));
  assert_non_null(strstr(out, "\"nodeName\": \"node-a\""));
}

static void bad_file_exits_1(void **state) {
  static char out[65536];
  char *argv[] = {"check", "--hostname-override", "n", FIXTURES "/nginx.yaml",
                  FIXTURES "/invalid/web.yaml", NULL};
  assert_int_equal(run(argv, 5, out, sizeof out), 1);
  assert_non_null(strstr(out, "web.yaml: spec.containers[1].ports[0].containerPort: must be "
                              "between 1 and 65535, got 70000"));
  assert_non_null(strstr(out, "\"name\": \"web-n\"")); /* the good one is still printed */
  char *missing[] = {"check", "/nonexistent.yaml", NULL};
  assert_int_equal(run(missing, 2, out, sizeof out), 1);
  char *usage[] = {"frobnicate", NULL};
  assert_int_equal(run(usage, 1, out, sizeof out), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(good_file_prints_pod),
      cmocka_unit_test(bad_file_exits_1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
