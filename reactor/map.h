/* A string-keyed hash map (chained, FNV-1a). The map copies keys and owns them;
 * values are the caller's. Iteration may delete the entry it is on. */
#ifndef NL_MAP_H
#define NL_MAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct nl_map_entry {
  struct nl_map_entry *next;
  unsigned hash;
  void *value;
  char key[]; /* owned, NUL-terminated */
} nl_map_entry_t;

typedef struct nl_map {
  nl_map_entry_t **buckets;
  size_t nbuckets;
  size_t size;
} nl_map_t;

typedef struct nl_map_iter {
  const nl_map_t *map;
  size_t bucket;
  nl_map_entry_t *next;
} nl_map_iter_t;

void nl_map_init(nl_map_t *m);
/* Frees every entry; free_value (may be NULL) is called on each value. */
void nl_map_free(nl_map_t *m, void (*free_value)(void *));
void *nl_map_get(const nl_map_t *m, const char *key);
bool nl_map_has(const nl_map_t *m, const char *key);
/* Stores value under key and returns the value it replaces, or NULL. */
void *nl_map_put(nl_map_t *m, const char *key, void *value);
/* Removes key and returns its value, or NULL. */
void *nl_map_del(nl_map_t *m, const char *key);
static inline size_t nl_map_size(const nl_map_t *m) { return m->size; }

void nl_map_iter_init(nl_map_iter_t *it, const nl_map_t *m);
/* Returns false at the end. *key stays valid until that entry is deleted. */
bool nl_map_iter_next(nl_map_iter_t *it, const char **key, void **value);

#endif
