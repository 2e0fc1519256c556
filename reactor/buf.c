#include "reactor/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

void nl_buf_reserve(nl_buf_t *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1) cap *= 2;
  b->data = nl_xrealloc(b->data, cap);
  b->cap = cap;
}

void nl_buf_append(nl_buf_t *b, const void *p, size_t n) {
  nl_buf_reserve(b, n);
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void nl_buf_puts(nl_buf_t *b, const char *s) { nl_buf_append(b, s, strlen(s)); }

void nl_buf_printf(nl_buf_t *b, const char *fmt, ...) {
  /* Format into the spare room first; grow and format again only when it did
   * not fit (this also keeps GCC's sanitizer builds from flagging a NULL
   * destination). */
  nl_buf_reserve(b, 128);
  size_t room = b->cap - b->len;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b->data + b->len, room, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->data[b->len] = '\0';
    return;
  }
  if ((size_t)n >= room) {
    nl_buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  b->len += (size_t)n;
}

void nl_buf_consume(nl_buf_t *b, size_t n) {
  if (n >= b->len) {
    b->len = 0;
  } else {
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
  }
  if (b->data) b->data[b->len] = '\0';
}

void nl_buf_reset(nl_buf_t *b) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
}

void nl_buf_free(nl_buf_t *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

/* Slack that nl_buf_steal gives back: a stolen text is often kept (a status,
 * an object's JSON) and the doubling leaves up to half the capacity unused. */
#define STEAL_SLACK 64

char *nl_buf_steal(nl_buf_t *b) {
  char *p = !b->data                          ? nl_xstrdup("")
            : b->cap - b->len - 1 > STEAL_SLACK ? nl_xrealloc(b->data, b->len + 1)
                                              : b->data;
  b->data = NULL;
  b->len = b->cap = 0;
  return p;
}
