/* The benchmarks' whole-file read (blocking; benchmarks only). */
#ifndef NL_BENCH_SLURP_H
#define NL_BENCH_SLURP_H

#include <stdio.h>

#include "reactor/buf.h"

/* The file's bytes in a new NUL-terminated buffer (free()), or NULL. */
static inline char *slurp(const char *path, size_t *len) {
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
