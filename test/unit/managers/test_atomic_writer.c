/* The atomic writer: content and modes behind the user-visible symlinks, the
 * ..data swap to a new timestamped directory, nothing written when nothing
 * changed, stale paths removed, bad paths refused, fsGroup ownership. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "managers/atomic_writer.h"
#include "reactor/xalloc.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/nanolet-aw-test-XXXXXX");
  assert_non_null(mkdtemp(dir));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char *cmd = nl_xasprintf("rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  return 0;
}

static char *slurp(const char *rel) {
  char *p = nl_xasprintf("%s/%s", dir, rel);
  FILE *f = fopen(p, "r");
  free(p);
  if (!f) return NULL;
  char buf[256];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  return nl_xstrndup(buf, n);
}

static void assert_file(const char *rel, const char *content, mode_t mode) {
  char *c = slurp(rel);
  assert_non_null(c);
  assert_string_equal(c, content);
  free(c);
  char *p = nl_xasprintf("%s/%s", dir, rel);
  struct stat st;
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, mode);
  free(p);
}

static char *data_target(void) {
  char *p = nl_xasprintf("%s/..data", dir);
  char buf[256];
  ssize_t n = readlink(p, buf, sizeof buf - 1);
  free(p);
  assert_true(n > 0);
  return nl_xstrndup(buf, (size_t)n);
}

static bool exists(const char *rel) {
  char *p = nl_xasprintf("%s/%s", dir, rel);
  struct stat st;
  bool r = lstat(p, &st) == 0;
  free(p);
  return r;
}

/* The entries of dir whose names start with "..2" (timestamped directories). */
static int n_ts_dirs(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, "..2", 3) == 0) n++;
  closedir(d);
  return n;
}

static void add(nl_aw_file_t **f, size_t *n, const char *path, const char *data, uint32_t mode) {
  nl_aw_files_add(f, n, path, data, strlen(data), mode);
}

static void test_write_update_unchanged_stale(void **state) {
  (void)state;
  nl_aw_file_t *f = NULL;
  size_t n = 0;
  nl_err_t *err = NULL;
  add(&f, &n, "a", "one", 0644);
  add(&f, &n, "sub/b", "two", 0400);
  assert_int_equal(nl_atomic_write(dir, f, n, -1, "vol", &err), 1);
  assert_file("a", "one", 0644);
  assert_file("sub/b", "two", 0400);
  assert_file("..data/a", "one", 0644);
  char *ts1 = data_target();
  assert_true(strncmp(ts1, "..2", 3) == 0); /* ..YYYY_MM_DD_HH_MM_SS.xxxxxx */
  char buf[64];
  char *link = nl_xasprintf("%s/a", dir);
  ssize_t k = readlink(link, buf, sizeof buf - 1);
  free(link);
  assert_true(k > 0);
  buf[k] = 0;
  assert_string_equal(buf, "..data/a"); /* the user-visible symlink */

  /* the same payload: nothing written, the same directory */
  assert_int_equal(nl_atomic_write(dir, f, n, -1, "vol", &err), 0);
  char *same = data_target();
  assert_string_equal(same, ts1);
  free(same);

  /* a mode change alone is a change */
  f[0].mode = 0600;
  assert_int_equal(nl_atomic_write(dir, f, n, -1, "vol", &err), 1);
  assert_file("a", "one", 0600);

  /* new content and a path fewer: a new directory, the old one and "sub" gone */
  nl_aw_files_free(f, n);
  f = NULL;
  n = 0;
  add(&f, &n, "a", "three", 0644);
  add(&f, &n, "c", "", 0644); /* empty files are files */
  char *before = data_target();
  assert_int_equal(nl_atomic_write(dir, f, n, -1, "vol", &err), 1);
  char *ts2 = data_target();
  assert_string_not_equal(ts2, before);
  assert_file("a", "three", 0644);
  assert_file("c", "", 0644);
  assert_false(exists("sub"));
  assert_false(exists(before));
  assert_false(exists("..data_tmp"));
  assert_int_equal(n_ts_dirs(), 1);
  free(before);
  free(ts1);
  free(ts2);

  /* an empty payload (an optional object that is gone) leaves no file */
  assert_int_equal(nl_atomic_write(dir, NULL, 0, -1, "vol", &err), 1);
  assert_false(exists("a"));
  assert_false(exists("c"));
  assert_true(exists("..data"));
  assert_int_equal(nl_atomic_write(dir, NULL, 0, -1, "vol", &err), 0);
  nl_aw_files_free(f, n);
}

static void test_bad_paths(void **state) {
  (void)state;
  const char *bad[] = {"/abs", "..x", "a/../b", "..", ""};
  const char *why[] = {"must be relative path", "must not start with '..'",
                       "must not contain '..'", "must not start with '..'", "must not be empty"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    nl_aw_file_t *f = NULL;
    size_t n = 0;
    nl_err_t *err = NULL;
    add(&f, &n, "ok", "x", 0644);
    add(&f, &n, bad[i], "x", 0644);
    assert_int_equal(nl_atomic_write(dir, f, n, -1, "pod ns/p volume v", &err), -1);
    assert_non_null(strstr(err->msg, why[i]));
    assert_non_null(strstr(err->msg, "pod ns/p volume v: invalid path"));
    nl_err_free(&err);
    nl_aw_files_free(f, n);
    assert_false(exists("ok")); /* nothing written */
  }
}

static void test_fs_group(void **state) {
  (void)state;
  /* another group needs root; without it, one's own group (the modes still show) */
  gid_t g = getuid() == 0 ? 4242 : getgid();
  nl_aw_file_t *f = NULL;
  size_t n = 0;
  nl_err_t *err = NULL;
  add(&f, &n, "token", "t", 0600);
  add(&f, &n, "d/x", "x", 0400);
  assert_int_equal(nl_atomic_write(dir, f, n, g, "vol", &err), 1);
  struct stat st;
  char *p = nl_xasprintf("%s/..data/token", dir);
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_gid, g);
  assert_int_equal(st.st_mode & 07777, 0640); /* group read added */
  free(p);
  p = nl_xasprintf("%s/..data/d", dir);
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_gid, g);
  assert_true(st.st_mode & S_ISGID);
  free(p);
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_gid, g);
  /* what the ownership pass changed is no change of the payload */
  assert_int_equal(nl_atomic_write(dir, f, n, g, "vol", &err), 0);
  nl_aw_files_free(f, n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_write_update_unchanged_stale, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_paths, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fs_group, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
