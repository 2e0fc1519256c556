/* Exponential back-off with optional jitter, and a keyed table of back-offs as the
 * upstream kubelet's flowcontrol.Backoff (crash-loop and image-pull back-off).
 * Times are milliseconds on the caller's clock (uv_now), so tests drive them. */
#ifndef NL_BACKOFF_H
#define NL_BACKOFF_H

#include <stdbool.h>
#include <stdint.h>

#include "reactor/map.h"

typedef struct nl_backoff {
  uint64_t initial_ms;
  uint64_t max_ms;
  double jitter;       /* 0..1: each delay is stretched by up to this fraction */
  uint64_t current_ms; /* 0 before the first nl_backoff_next() */
  uint64_t rng;        /* xorshift state for the jitter */
} nl_backoff_t;

void nl_backoff_init(nl_backoff_t *b, uint64_t initial_ms, uint64_t max_ms, double jitter);
/* Returns the next delay (initial, then doubling up to max, jittered). */
uint64_t nl_backoff_next(nl_backoff_t *b);
void nl_backoff_reset(nl_backoff_t *b);
/* A uniform draw in [0, 1) from b's jitter state (for other jittered figures of
 * the same owner, e.g. a watch's randomised timeout). */
double nl_backoff_random(nl_backoff_t *b);

/* A keyed table: one back-off per id (e.g. "<pod uid>_<container>" or an image). */
typedef struct nl_backoff_table {
  uint64_t initial_ms;
  uint64_t max_ms;
  nl_map_t entries; /* id -> owned entry */
} nl_backoff_table_t;

void nl_backoff_table_init(nl_backoff_table_t *t, uint64_t initial_ms, uint64_t max_ms);
void nl_backoff_table_free(nl_backoff_table_t *t);
/* Records a failure of id at now and returns the new back-off. An entry idle for
 * more than 2*max is forgotten first, as upstream. */
uint64_t nl_backoff_table_next(nl_backoff_table_t *t, const char *id, uint64_t now_ms);
/* The current back-off of id (0 when none). */
uint64_t nl_backoff_table_get(const nl_backoff_table_t *t, const char *id, uint64_t now_ms);
/* True while now is within id's back-off window that started at event_ms. */
bool nl_backoff_table_in_backoff_since(const nl_backoff_table_t *t, const char *id,
                                       uint64_t event_ms, uint64_t now_ms);
void nl_backoff_table_reset(nl_backoff_table_t *t, const char *id);
/* Forgets entries idle for more than 2*max. */
void nl_backoff_table_gc(nl_backoff_table_t *t, uint64_t now_ms);

#endif
