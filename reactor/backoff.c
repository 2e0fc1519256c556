#include "reactor/backoff.h"

#include <stdlib.h>
#include <time.h>

#include "reactor/xalloc.h"

typedef struct entry {
  uint64_t backoff_ms;
  uint64_t last_update_ms;
} entry_t;

static uint64_t xorshift(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

void nl_backoff_init(nl_backoff_t *b, uint64_t initial_ms, uint64_t max_ms, double jitter) {
  b->initial_ms = initial_ms;
  b->max_ms = max_ms < initial_ms ? initial_ms : max_ms;
  b->jitter = jitter;
  b->current_ms = 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  b->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)b ^ 0x9e3779b97f4a7c15ull;
  if (!b->rng) b->rng = 1;
}

uint64_t nl_backoff_next(nl_backoff_t *b) {
  if (b->current_ms == 0)
    b->current_ms = b->initial_ms;
  else if (b->current_ms >= b->max_ms / 2)
    b->current_ms = b->max_ms;
  else
    b->current_ms *= 2;
  uint64_t d = b->current_ms;
  if (b->jitter > 0) d += (uint64_t)((double)d * b->jitter * nl_backoff_random(b));
  return d;
}

double nl_backoff_random(nl_backoff_t *b) {
  return (double)(xorshift(&b->rng) >> 11) / (double)(1ull << 53);
}

void nl_backoff_reset(nl_backoff_t *b) { b->current_ms = 0; }

void nl_backoff_table_init(nl_backoff_table_t *t, uint64_t initial_ms, uint64_t max_ms) {
  t->initial_ms = initial_ms;
  t->max_ms = max_ms;
  nl_map_init(&t->entries);
}

void nl_backoff_table_free(nl_backoff_table_t *t) { nl_map_free(&t->entries, free); }

static bool expired(const nl_backoff_table_t *t, const entry_t *e, uint64_t now_ms) {
  return now_ms > e->last_update_ms && now_ms - e->last_update_ms > 2 * t->max_ms;
}

uint64_t nl_backoff_table_next(nl_backoff_table_t *t, const char *id, uint64_t now_ms) {
  entry_t *e = nl_map_get(&t->entries, id);
  if (!e) {
    e = nl_xcalloc(1, sizeof *e);
    nl_map_put(&t->entries, id, e);
  }
  if (e->backoff_ms == 0 || expired(t, e, now_ms))
    e->backoff_ms = t->initial_ms;
  else
    e->backoff_ms = e->backoff_ms * 2 > t->max_ms ? t->max_ms : e->backoff_ms * 2;
  e->last_update_ms = now_ms;
  return e->backoff_ms;
}

uint64_t nl_backoff_table_get(const nl_backoff_table_t *t, const char *id, uint64_t now_ms) {
  entry_t *e = nl_map_get(&t->entries, id);
  if (!e || expired(t, e, now_ms)) return 0;
  return e->backoff_ms;
}

bool nl_backoff_table_in_backoff_since(const nl_backoff_table_t *t, const char *id,
                                       uint64_t event_ms, uint64_t now_ms) {
  entry_t *e = nl_map_get(&t->entries, id);
  if (!e || expired(t, e, now_ms)) return false;
  return now_ms < event_ms + e->backoff_ms;
}

void nl_backoff_table_reset(nl_backoff_table_t *t, const char *id) {
  free(nl_map_del(&t->entries, id));
}

void nl_backoff_table_gc(nl_backoff_table_t *t, uint64_t now_ms) {
  nl_map_iter_t it;
  const char *key;
  void *v;
  nl_map_iter_init(&it, &t->entries);
  while (nl_map_iter_next(&it, &key, &v))
    if (expired(t, v, now_ms)) free(nl_map_del(&t->entries, key));
}
