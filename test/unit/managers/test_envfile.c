/* Env files (fileKeyRef): upstream's format, line by line, as a user writes
 * it from a shell; the file read below its volume without following links. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "managers/envfile.h"

static int find(const char *data, const char *key, char **v, nl_err_t **err) {
  return nl_envfile_find(data, strlen(data), key, v, err);
}

static void want_value(const char *data, const char *key, const char *want) {
  char *v = NULL;
  nl_err_t *err = NULL;
  int rc = find(data, key, &v, &err);
  if (rc != 1) fail_msg("%s in [%s]: rc %d (%s)", key, data, rc, err ? err->msg : "");
  assert_string_equal(v, want);
  free(v);
}

static void want_absent(const char *data, const char *key) {
  char *v = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(find(data, key, &v, &err), 0);
  assert_null(v);
  assert_null(err);
}

static void want_error(const char *data, const char *key, const char *msg) {
  char *v = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(find(data, key, &v, &err), -1);
  assert_null(v);
  assert_non_null(err);
  if (!strstr(err->msg, msg)) fail_msg("[%s]: %s, want %s", data, err->msg, msg);
  nl_err_free(&err);
}

static void format(void **state) {
  (void)state;
  const char *f = "# settings\n\nCONFIG_1='value1'\n  CONFIG_2='two words'   # trailing comment\n"
                  "MULTI='line 1\nline 2'\nEMPTY=''\nSHELL= 'ignored'\nLAST='x'";
  want_value(f, "CONFIG_1", "value1");
  want_value(f, "CONFIG_2", "two words");
  want_value(f, "MULTI", "line 1\nline 2");
  want_value(f, "LAST", "x"); /* no newline at the end */
  want_absent(f, "EMPTY");    /* empty is "not found", as upstream */
  want_absent(f, "SHELL");    /* a blank after '=': empty, as a shell */
  want_absent(f, "NOPE");
  want_absent(f, "CONFIG"); /* a prefix of a name is not the name */
  want_value("A='a'\nB='b'\n", "B", "b"); /* a later line is reached */
  want_absent("", "A");
}

static void format_errors(void **state) {
  (void)state;
  want_error("A=one\n", "A", "line 1: value must be enclosed in single quotes");
  want_error("# c\nA\n", "A", "line 2: missing '='");
  want_error("=x\n", "A", "line 1: empty variable name");
  want_error("A ='x'\n", "A", "line 1: whitespace before '=' is not allowed");
  want_error("A='x' y\n", "A", "line 1: unexpected content after closing quote");
  want_error("\nA='open\nstill\n", "A", "line 2: unclosed single quote");
  {
    char *v = NULL;
    nl_err_t *err = NULL;
    static const char nul[] = "A='x\0y'\n";
    assert_int_equal(nl_envfile_find(nul, sizeof nul - 1, "A", &v, &err), -1);
    assert_non_null(strstr(err->msg, "line 1: the value holds a NUL byte"));
    nl_err_free(&err);
  }
  /* a bad line before the key is an error even for another key */
  want_error("A=one\nB='b'\n", "B", "line 1");
  /* and one after it is not read (upstream stops at the key) */
  want_value("B='b'\nA=one\n", "B", "b");
}

static char dir[] = "/tmp/nl-envfile-XXXXXX";

static void put(const char *rel, const char *content) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
}

static void read_below_root(void **state) {
  (void)state;
  assert_non_null(mkdtemp(dir));
  char sub[256], link[256], big[256];
  snprintf(sub, sizeof sub, "%s/app", dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  put("app/config.env", "K='v'\n");
  char *v = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_envfile_read(dir, "app/config.env", "K", &v, &err), 1);
  assert_string_equal(v, "v");
  free(v);
  assert_int_equal(nl_envfile_read(dir, "app/config.env", "X", &v, &err), 0);
  /* no link is followed, not even one that stays inside */
  snprintf(link, sizeof link, "%s/link.env", dir);
  assert_int_equal(symlink("app/config.env", link), 0);
  assert_int_equal(nl_envfile_read(dir, "link.env", "K", &v, &err), -1);
  assert_non_null(strstr(err->msg, "symbolic link"));
  nl_err_free(&err);
  assert_int_equal(nl_envfile_read(dir, "../etc/passwd", "K", &v, &err), -1);
  assert_non_null(strstr(err->msg, "'..'"));
  nl_err_free(&err);
  assert_int_equal(nl_envfile_read(dir, "/etc/passwd", "K", &v, &err), -1);
  nl_err_free(&err);
  assert_int_equal(nl_envfile_read(dir, "missing.env", "K", &v, &err), -1);
  assert_non_null(strstr(err->msg, "No such file"));
  nl_err_free(&err);
  assert_int_equal(nl_envfile_read(dir, "app", "K", &v, &err), -1); /* a directory */
  nl_err_free(&err);
  snprintf(big, sizeof big, "%s/big.env", dir);
  FILE *f = fopen(big, "w");
  assert_non_null(f);
  assert_int_equal(ftruncate(fileno(f), NL_ENVFILE_MAX_BYTES + 1), 0);
  fclose(f);
  assert_int_equal(nl_envfile_read(dir, "big.env", "K", &v, &err), -1);
  assert_non_null(strstr(err->msg, "larger than"));
  nl_err_free(&err);
  unlink(big);
  unlink(link);
  snprintf(link, sizeof link, "%s/app/config.env", dir);
  unlink(link);
  rmdir(sub);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(format),
      cmocka_unit_test(format_errors),
      cmocka_unit_test(read_below_root),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
