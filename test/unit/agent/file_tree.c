/* Fixture file trees for the stats tests (file_tree.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_tree.h"
#include "reactor/xalloc.h"

void put_file(const char *root, const char *rel, const char *text) {
  char *path = nl_xasprintf("%s/%s", root, rel);
  char *dir = nl_xstrdup(path);
  *strrchr(dir, '/') = 0;
  char *cmd = nl_xasprintf("mkdir -p '%s'", dir);
  assert_int_equal(system(cmd), 0);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  free(cmd), free(dir), free(path);
}

void rm_tree(char *root) {
  char *cmd = nl_xasprintf("rm -rf '%s'", root);
  assert_int_equal(system(cmd), 0);
  free(cmd), free(root);
}
