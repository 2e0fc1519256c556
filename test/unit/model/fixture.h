/* Reading fixture files for the model tests. */
#ifndef TEST_MODEL_FIXTURE_H
#define TEST_MODEL_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "reactor/buf.h"

static inline char *fixture_read(const char *name, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", FIXTURES, name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  nl_buf_t b = NL_BUF_INIT;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) nl_buf_append(&b, chunk, n);
  fclose(f);
  *len = b.len;
  return nl_buf_steal(&b);
}

#endif
