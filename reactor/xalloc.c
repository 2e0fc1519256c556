#include "reactor/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void oom(size_t n) {
  fprintf(stderr, "nanolet: out of memory allocating %zu bytes\n", n);
  abort();
}

void *nl_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) oom(n);
  return p;
}

void *nl_xcalloc(size_t count, size_t n) {
  void *p = calloc(count ? count : 1, n ? n : 1);
  if (!p) oom(count * n);
  return p;
}

void *nl_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) oom(n);
  return q;
}

char *nl_xstrdup(const char *s) {
  return nl_xstrndup(s, strlen(s));
}

char *nl_xstrndup(const char *s, size_t n) {
  char *p = nl_xmalloc(n + 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *nl_xasprintf(const char *fmt, ...) {
  va_list ap;
  char *out = NULL;
  va_start(ap, fmt);
  int r = vasprintf(&out, fmt, ap);
  va_end(ap);
  if (r < 0) oom(strlen(fmt));
  return out;
}
