#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/cmd_manifest.h"

/* Runs the command with stdout (and, unless stdout_only, stderr) in out;
 * returns its exit code. */
static int run_to(char **argv, int argc, char *out, size_t outsz, bool stdout_only) {
  fflush(stdout);
  fflush(stderr);
  FILE *tmp = tmpfile();
  int so = dup(1), se = dup(2);
  dup2(fileno(tmp), 1);
  if (!stdout_only) dup2(fileno(tmp), 2);
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

static int run(char **argv, int argc, char *out, size_t outsz) {
  return run_to(argv, argc, out, outsz, false);
}

static void good_file_prints_pod(void **state) {
  static char out[65536];
  char *argv[] = {"manifest", "check", "--hostname-override=node-a", FIXTURES "/nginx.yaml",
                  NULL};
  assert_int_equal(run(argv, 4, out, sizeof out), 0);
  assert_non_null(strstr(out, "\"name\": \"web-node-a\""));
  assert_non_null(strstr(out, "\"kubernetes.io/config.hash\""));
  assert_non_null(strstr(out, "\"uid\": \""));
  assert_non_null(strstr(out, "\"imagePullPolicy\": \"IfNotPresent\""));
  assert_non_null(strstr(out, "\"nodeName\": \"node-a\""));
}

static void bad_file_exits_1(void **state) {
  static char out[65536];
  /* flags after the files and the "--flag value" form, as pflag */
  char *argv[] = {"manifest", "check", FIXTURES "/nginx.yaml", FIXTURES "/invalid/web.yaml",
                  "--hostname-override", "n", NULL};
  assert_int_equal(run(argv, 6, out, sizeof out), 1);
  assert_non_null(strstr(out, "web.yaml: spec.containers[1].ports[0].containerPort: must be "
                              "between 1 and 65535, got 70000"));
  assert_non_null(strstr(out, "\"name\": \"web-n\"")); /* the good one is still printed */
  char *missing[] = {"manifest", "check", "/nonexistent.yaml", NULL};
  assert_int_equal(run(missing, 3, out, sizeof out), 1);
  assert_string_equal(out, "/nonexistent.yaml: cannot read: No such file or directory\n");
}

static void usage_errors_exit_2(void **state) {
  static char out[4096];
  struct {
    char *argv[5];
    const char *want;
  } cases[] = {
      {{"manifest", NULL}, "missing command (check)"},
      {{"manifest", "frobnicate", NULL}, "unknown command frobnicate"},
      {{"manifest", "check", NULL}, "no manifest files given"},
      {{"manifest", "check", "--bogus", "x.yaml", NULL}, "unknown flag: --bogus"},
      {{"manifest", "check", "x.yaml", "--hostname-override", NULL},
       "flag needs an argument: --hostname-override"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int argc = 0;
    while (cases[i].argv[argc]) argc++;
    assert_int_equal(run(cases[i].argv, argc, out, sizeof out), 2);
    if (!strstr(out, cases[i].want)) fail_msg("got \"%s\", want \"%s\"", out, cases[i].want);
  }
}

static void help_prints_usage_once_on_stdout(void **state) {
  static char out[4096];
  char *forms[][4] = {{"manifest", "--help", NULL},
                      {"manifest", "check", "-h", NULL},
                      {"manifest", "check", "x.yaml", "--help"}};
  for (size_t i = 0; i < 3; i++) {
    int argc = forms[i][3] ? 4 : forms[i][2] ? 3 : 2;
    int rc = run_to(forms[i], argc, out, sizeof out, true);
    assert_int_equal(rc, 0);
    const char *u = strstr(out, "usage: nanolet manifest check");
    assert_ptr_equal(u, out);
    assert_null(strstr(u + 1, "usage:"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(good_file_prints_pod),
      cmocka_unit_test(bad_file_exits_1),
      cmocka_unit_test(usage_errors_exit_2),
      cmocka_unit_test(help_prints_usage_once_on_stdout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
