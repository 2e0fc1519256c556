#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/internal.h"

void nl__errs_init(nl__errs_t *e, const char *origin) {
  *e = (nl__errs_t){.origin = origin, .path = NL_BUF_INIT, .out = NL_BUF_INIT};
}

size_t nl__path_key(nl__errs_t *e, const char *key) {
  size_t mark = e->path.len;
  if (mark) nl_buf_puts(&e->path, ".");
  nl_buf_puts(&e->path, key);
  return mark;
}

size_t nl__path_idx(nl__errs_t *e, size_t i) {
  size_t mark = e->path.len;
  nl_buf_printf(&e->path, "[%zu]", i);
  return mark;
}

size_t nl__path_map(nl__errs_t *e, const char *key) {
  size_t mark = e->path.len;
  nl_buf_printf(&e->path, "[%s]", key);
  return mark;
}

void nl__path_pop(nl__errs_t *e, size_t mark) {
  e->path.len = mark;
  if (e->path.data) e->path.data[mark] = 0;
}

void nl__errf(nl__errs_t *e, const char *fmt, ...) {
  if (++e->count > NL__MAX_ERRORS) {
    if (e->count == NL__MAX_ERRORS + 1)
      nl_buf_printf(&e->out, "%s%s(more errors not shown)\n", e->origin ? e->origin : "",
                    e->origin ? ": " : "");
    return;
  }
  if (e->origin) nl_buf_printf(&e->out, "%s: ", e->origin);
  if (e->path.len) nl_buf_printf(&e->out, "%s: ", e->path.data);
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) abort();
  va_end(ap);
  nl_buf_puts(&e->out, msg);
  nl_buf_puts(&e->out, "\n");
  free(msg);
}

int nl__errs_finish(nl__errs_t *e, nl_err_t **err) {
  int rc = 0;
  if (e->count) {
    e->out.data[--e->out.len] = 0; /* the last newline */
    nl_err_set(err, NL_EINVAL, "%s", e->out.data);
    rc = -1;
  }
  nl_buf_free(&e->path);
  nl_buf_free(&e->out);
  return rc;
}

/* Insertion sort: stable (so the last of equal keys wins, as in Go's decoding of
 * a JSON object into a map), and maps here are small. */
#define SORT_DEDUP(T, items, n, KEY)                                   \
  do {                                                                 \
    for (size_t i = 1; i < (n); i++) {                                 \
      T t = (items)[i];                                                \
      size_t j = i;                                                    \
      while (j > 0 && strcmp((items)[j - 1].KEY, t.KEY) > 0) {         \
        (items)[j] = (items)[j - 1];                                   \
        j--;                                                           \
      }                                                                \
      (items)[j] = t;                                                  \
    }                                                                  \
    size_t w = 0;                                                      \
    for (size_t i = 0; i < (n); i++) {                                 \
      if (w && strcmp((items)[w - 1].KEY, (items)[i].KEY) == 0)        \
        (items)[w - 1] = (items)[i];                                   \
      else                                                             \
        (items)[w++] = (items)[i];                                     \
    }                                                                  \
    (n) = w;                                                           \
  } while (0)

void nl__kvlist_sort(nl_kvlist_t *l) { SORT_DEDUP(nl_kv_t, l->items, l->n, key); }

void nl__resource_list_sort(nl_resource_list_t *l) {
  SORT_DEDUP(nl_resource_t, l->items, l->n, name);
}
