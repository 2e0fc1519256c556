#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dirent.h>
#include <unistd.h>

#include "managers/logrotate.h"

static char dir[64];

static void write_file(const char *name, size_t size) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (size_t i = 0; i < size; i++) fputc('x', f);
  fclose(f);
}

/* The directory's names, sorted, space separated. */
static char *listing(void) {
  static char out[1024];
  struct dirent **ents;
  int n = scandir(dir, &ents, NULL, alphasort);
  out[0] = 0;
  for (int i = 0; i < n; i++) {
    if (ents[i]->d_name[0] != '.')
      snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", out[0] ? " " : "",
               ents[i]->d_name);
    free(ents[i]);
  }
  free(ents);
  return out;
}

static int setup(void **state) {
  strcpy(dir, "/tmp/nl-logrotate.XXXXXX");
  assert_non_null(mkdtemp(dir));
  return 0;
}

static int teardown(void **state) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd);
}

static const time_t T0 = 1714550400; /* 2024-05-01 08:00:00 UTC */

static void small_file_stays(void **state) {
  write_file("0.log", 100);
  char path[256], *rotated = (char *)1;
  snprintf(path, sizeof path, "%s/0.log", dir);
  nl_err_t *err = NULL;
  assert_int_equal(nl_logrotate_files(path, 1024, 5, T0, &rotated, &err), 0);
  assert_null(rotated);
  assert_string_equal(listing(), "0.log");
  snprintf(path, sizeof path, "%s/gone.log", dir);
  assert_int_equal(nl_logrotate_files(path, 1024, 5, T0, &rotated, &err), 0);
}

/* Over the size: renamed with a UTC timestamp; the oldest rotated files go so
 * that, with the live file, containerLogMaxFiles remain; *.tmp leftovers go. */
static void rotates_and_prunes(void **state) {
  write_file("0.log", 2048);
  write_file("0.log.20240101-000000", 10);
  write_file("0.log.20240201-000000", 10);
  write_file("0.log.20240301-000000", 10);
  write_file("0.log.20240301-000000.tmp", 10);
  write_file("1.log", 10); /* another instance: not this file's */
  char path[256], *rotated = NULL;
  snprintf(path, sizeof path, "%s/0.log", dir);
  nl_err_t *err = NULL;
  assert_int_equal(nl_logrotate_files(path, 1024, 3, T0, &rotated, &err), 1);
  char want[256];
  snprintf(want, sizeof want, "%s/0.log.20240501-080000", dir);
  assert_string_equal(rotated, want);
  free(rotated);
  assert_string_equal(listing(), "0.log.20240301-000000 0.log.20240501-080000 1.log");
  /* The runtime reopens 0.log; the next rotation keeps one old file again. */
  write_file("0.log", 4096);
  assert_int_equal(nl_logrotate_files(path, 1024, 3, T0 + 10, &rotated, &err), 1);
  free(rotated);
  assert_string_equal(listing(), "0.log.20240501-080000 0.log.20240501-080010 1.log");
  /* containerLogMaxFiles 2: no older file survives a rotation. */
  write_file("0.log", 4096);
  assert_int_equal(nl_logrotate_files(path, 1024, 2, T0 + 20, &rotated, &err), 1);
  free(rotated);
  assert_string_equal(listing(), "0.log.20240501-080020 1.log");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(small_file_stays, setup, teardown),
      cmocka_unit_test_setup_teardown(rotates_and_prunes, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
