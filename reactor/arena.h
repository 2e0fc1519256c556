/* A bump allocator: one per decoded object (everything it points to) and one
 * per parse (the generic tree, dropped after the typed decode). */
#ifndef NL_REACTOR_ARENA_H
#define NL_REACTOR_ARENA_H

#include <stdbool.h>
#include <stddef.h>

struct nl_arena_chunk;

typedef struct nl_arena {
  struct nl_arena_chunk *head; /* the chunk being filled */
  size_t next_size;            /* size of the next chunk */
  size_t total;                /* bytes obtained from malloc, headers included */
  unsigned refs;               /* holders of the object that lives in it (a pod's) */
  bool steady;                 /* every chunk next_size (nl_arena_new_steady) */
} nl_arena_t;

/* first: size of the first chunk (later ones double, up to 16 KiB). */
nl_arena_t *nl_arena_new(size_t first);
/* For what is kept (a pod): every chunk has the size chunk, and a piece larger
 * than a quarter of it gets a block of its own size, so that at most a chunk's
 * room is unused at the end (doubling leaves up to half of all). */
nl_arena_t *nl_arena_new_steady(size_t chunk);
void nl_arena_free(nl_arena_t *a);
/* Zeroed, 8-byte aligned; aborts on OOM. n == 0 gives a valid unique pointer. */
void *nl_arena_alloc(nl_arena_t *a, size_t n);
char *nl_arena_strndup(nl_arena_t *a, const char *s, size_t n);
char *nl_arena_strdup(nl_arena_t *a, const char *s); /* NULL stays NULL */

#endif
