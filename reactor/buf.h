/* A growable byte buffer. The buffer owns `data`; nl_buf_steal hands it out. */
#ifndef NL_BUF_H
#define NL_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct nl_buf {
  char *data; /* always NUL-terminated after len when cap > 0 */
  size_t len;
  size_t cap;
} nl_buf_t;

#define NL_BUF_INIT {NULL, 0, 0}

void nl_buf_reserve(nl_buf_t *b, size_t extra);
void nl_buf_append(nl_buf_t *b, const void *p, size_t n);
void nl_buf_puts(nl_buf_t *b, const char *s);
void nl_buf_printf(nl_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes. */
void nl_buf_consume(nl_buf_t *b, size_t n);
void nl_buf_reset(nl_buf_t *b);
void nl_buf_free(nl_buf_t *b);
/* Returns the data (caller frees; never NULL), trimmed to its length, and
 * leaves b empty. */
char *nl_buf_steal(nl_buf_t *b);

#endif
