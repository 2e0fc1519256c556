#include "reactor/map.h"

#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

static unsigned hash_str(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

void nl_map_init(nl_map_t *m) {
  m->buckets = NULL;
  m->nbuckets = 0;
  m->size = 0;
}

void nl_map_free(nl_map_t *m, void (*free_value)(void *)) {
  for (size_t i = 0; i < m->nbuckets; i++) {
    nl_map_entry_t *e = m->buckets[i];
    while (e) {
      nl_map_entry_t *next = e->next;
      if (free_value) free_value(e->value);
      free(e);
      e = next;
    }
  }
  free(m->buckets);
  nl_map_init(m);
}

static nl_map_entry_t **find(const nl_map_t *m, const char *key, unsigned h) {
  if (!m->nbuckets) return NULL;
  nl_map_entry_t **pp = &m->buckets[h & (m->nbuckets - 1)];
  for (; *pp; pp = &(*pp)->next)
    if ((*pp)->hash == h && strcmp((*pp)->key, key) == 0) return pp;
  return NULL;
}

void *nl_map_get(const nl_map_t *m, const char *key) {
  nl_map_entry_t **pp = find(m, key, hash_str(key));
  return pp ? (*pp)->value : NULL;
}

bool nl_map_has(const nl_map_t *m, const char *key) {
  return find(m, key, hash_str(key)) != NULL;
}

static void grow(nl_map_t *m) {
  size_t n = m->nbuckets ? m->nbuckets * 2 : 16;
  nl_map_entry_t **b = nl_xcalloc(n, sizeof *b);
  for (size_t i = 0; i < m->nbuckets; i++) {
    nl_map_entry_t *e = m->buckets[i];
    while (e) {
      nl_map_entry_t *next = e->next;
      e->next = b[e->hash & (n - 1)];
      b[e->hash & (n - 1)] = e;
      e = next;
    }
  }
  free(m->buckets);
  m->buckets = b;
  m->nbuckets = n;
}

void *nl_map_put(nl_map_t *m, const char *key, void *value) {
  unsigned h = hash_str(key);
  nl_map_entry_t **pp = find(m, key, h);
  if (pp) {
    void *old = (*pp)->value;
    (*pp)->value = value;
    return old;
  }
  if (m->size + 1 > m->nbuckets * 3 / 4) grow(m);
  size_t klen = strlen(key);
  nl_map_entry_t *e = nl_xmalloc(sizeof *e + klen + 1);
  memcpy(e->key, key, klen + 1);
  e->hash = h;
  e->value = value;
  e->next = m->buckets[h & (m->nbuckets - 1)];
  m->buckets[h & (m->nbuckets - 1)] = e;
  m->size++;
  return NULL;
}

void *nl_map_del(nl_map_t *m, const char *key) {
  nl_map_entry_t **pp = find(m, key, hash_str(key));
  if (!pp) return NULL;
  nl_map_entry_t *e = *pp;
  void *v = e->value;
  *pp = e->next;
  free(e);
  m->size--;
  return v;
}

static nl_map_entry_t *advance(nl_map_iter_t *it) {
  while (it->bucket < it->map->nbuckets) {
    nl_map_entry_t *e = it->map->buckets[it->bucket++];
    if (e) return e;
  }
  return NULL;
}

void nl_map_iter_init(nl_map_iter_t *it, const nl_map_t *m) {
  it->map = m;
  it->bucket = 0;
  it->next = advance(it);
}

bool nl_map_iter_next(nl_map_iter_t *it, const char **key, void **value) {
  nl_map_entry_t *e = it->next;
  if (!e) return false;
  /* Look ahead before handing e out, so the caller may delete it. */
  it->next = e->next ? e->next : advance(it);
  if (key) *key = e->key;
  if (value) *value = e->value;
  return true;
}
