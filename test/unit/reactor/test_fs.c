#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/fs.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  strcpy(dir, "/tmp/nl-fs.XXXXXX");
  assert_non_null(mkdtemp(dir));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd);
}

static char *at(const char *rel) {
  static char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  return p;
}

static mode_t mode_of(const char *rel) {
  struct stat st;
  assert_int_equal(stat(at(rel), &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  return st.st_mode & 07777;
}

static void makes_missing_parents(void **state) {
  (void)state;
  assert_int_equal(nl_mkdir_p(at("a/b/c"), 0750), 0);
  assert_int_equal(mode_of("a"), 0750);
  assert_int_equal(mode_of("a/b/c"), 0750);
  /* there already: nothing changes, not even the mode */
  assert_int_equal(nl_mkdir_p(at("a/b/c"), 0700), 0);
  assert_int_equal(mode_of("a/b/c"), 0750);
  /* trailing and doubled slashes, as mkdir -p takes them */
  assert_int_equal(nl_mkdir_p(at("a//d/e/"), 0700), 0);
  assert_int_equal(mode_of("a/d/e"), 0700);
}

static void refuses_a_file_in_the_way(void **state) {
  (void)state;
  FILE *f = fopen(at("file"), "w");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(nl_mkdir_p(at("file"), 0700), -ENOTDIR);
  assert_int_equal(nl_mkdir_p(at("file/sub"), 0700), -ENOTDIR);
  assert_int_equal(nl_mkdir_p("", 0700), -ENAMETOOLONG);
}

static void follows_a_link_to_a_directory(void **state) {
  (void)state;
  assert_int_equal(nl_mkdir_p(at("real"), 0700), 0);
  char target[256];
  snprintf(target, sizeof target, "%s", at("real"));
  assert_int_equal(symlink(target, at("link")), 0);
  assert_int_equal(nl_mkdir_p(at("link/x"), 0700), 0);
  assert_int_equal(mode_of("real/x"), 0700);
  snprintf(target, sizeof target, "%s", at("nowhere"));
  assert_int_equal(symlink(target, at("dangling")), 0);
  assert_int_equal(nl_mkdir_p(at("dangling"), 0700), -ENOENT);
}

static void replaces_whole(void **state) {
  (void)state;
  const char *step = NULL;
  assert_int_equal(nl_fs_replace(at("f"), "one", 3, &step), 0);
  assert_int_equal(nl_fs_replace(at("f"), "second", 6, &step), 0);
  char buf[16] = {0};
  FILE *f = fopen(at("f"), "r");
  assert_non_null(f);
  assert_int_equal(fread(buf, 1, sizeof buf, f), 6);
  fclose(f);
  assert_string_equal(buf, "second");
  assert_int_equal(access(at("f.tmp"), F_OK), -1);
  assert_int_not_equal(nl_fs_replace(at("missing/f"), "x", 1, &step), 0);
  assert_string_equal(step, "create");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(makes_missing_parents, setup, teardown),
      cmocka_unit_test_setup_teardown(refuses_a_file_in_the_way, setup, teardown),
      cmocka_unit_test_setup_teardown(follows_a_link_to_a_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(replaces_whole, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
