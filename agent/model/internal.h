/* Shared by the model's .c files: the field-path error collector. Internal. */
#ifndef NL_MODEL_INTERNAL_H
#define NL_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "reactor/arena.h"
#include "agent/model/pod.h"
#include "reactor/buf.h"
#include "reactor/error.h"

#define NL__MAX_ERRORS 50

#define NL__MAX_PATH 160

/* Errors are lines `<origin>: <path>: <message>`. The path is a stack of segments
 * pushed and popped as the walkers descend (push returns a mark, pop restores it);
 * it is rendered only when an error is reported, so the happy path stays cheap.
 * Keys must stay valid while pushed. */
typedef struct nl__seg {
  const char *key; /* NULL: an index */
  size_t idx;
  bool map; /* "[key]" rather than ".key" */
} nl__seg_t;

typedef struct nl__errs {
  const char *origin;
  nl__seg_t segs[NL__MAX_PATH];
  size_t depth;
  nl_buf_t out;
  int count;
} nl__errs_t;

void nl__errs_init(nl__errs_t *e, const char *origin);
size_t nl__path_key(nl__errs_t *e, const char *key); /* ".key" (or "key" at the top) */
size_t nl__path_idx(nl__errs_t *e, size_t i);        /* "[i]" */
size_t nl__path_map(nl__errs_t *e, const char *key); /* "[key]", for map entries */
static inline void nl__path_pop(nl__errs_t *e, size_t mark) { e->depth = mark; }
void nl__errf(nl__errs_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns 0 when nothing was reported, else -1 with *err holding all lines; frees e. */
int nl__errs_finish(nl__errs_t *e, nl_err_t **err);

/* Sorting and de-duplication (last wins) of decoded maps. */
void nl__kvlist_sort(nl_kvlist_t *l);
void nl__resource_list_sort(nl_resource_list_t *l);

/* An empty pod with its arena. */
nl_pod_t *nl__pod_new(void);

/* JSON encoding. full: also emit empty strings, false and zero (everything that is
 * set), so that decoding the output gives back the same pod (dup, hashes).
 * with_status: also pod->status. */
void nl__pod_encode(const nl_pod_t *pod, nl_buf_t *out, bool pretty, bool full, bool with_status);

#endif
