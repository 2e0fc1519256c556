#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/internal.h"

void nl__errs_init(nl__errs_t *e, const char *origin) {
  e->origin = origin;
  e->depth = 0;
  e->out = (nl_buf_t)NL_BUF_INIT;
  e->count = 0;
}

static size_t push(nl__errs_t *e, const char *key, size_t idx, bool map) {
  size_t mark = e->depth;
  if (e->depth < NL__MAX_PATH) e->segs[e->depth] = (nl__seg_t){key, idx, map};
  e->depth++;
  return mark;
}

size_t nl__path_key(nl__errs_t *e, const char *key) { return push(e, key, 0, false); }
size_t nl__path_idx(nl__errs_t *e, size_t i) { return push(e, NULL, i, false); }
size_t nl__path_map(nl__errs_t *e, const char *key) { return push(e, key, 0, true); }

void nl__errf(nl__errs_t *e, const char *fmt, ...) {
  if (++e->count > NL__MAX_ERRORS) {
    if (e->count == NL__MAX_ERRORS + 1)
      nl_buf_printf(&e->out, "%s%s(more errors not shown)\n", e->origin ? e->origin : "",
                    e->origin ? ": " : "");
    return;
  }
  if (e->origin) nl_buf_printf(&e->out, "%s: ", e->origin);
  size_t n = e->depth < NL__MAX_PATH ? e->depth : NL__MAX_PATH;
  for (size_t i = 0; i < n; i++) {
    const nl__seg_t *s = &e->segs[i];
    if (!s->key) nl_buf_printf(&e->out, "[%zu]", s->idx);
    else if (s->map) nl_buf_printf(&e->out, "[%s]", s->key);
    else nl_buf_printf(&e->out, "%s%s", i ? "." : "", s->key);
  }
  if (e->depth > NL__MAX_PATH) nl_buf_puts(&e->out, "...");
  if (e->depth) nl_buf_puts(&e->out, ": ");
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
