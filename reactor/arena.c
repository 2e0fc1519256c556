#include "reactor/arena.h"

#include <stdint.h>
#include <string.h>

#include "reactor/xalloc.h"

struct nl_arena_chunk {
  struct nl_arena_chunk *prev;
  size_t size; /* bytes in data */
  size_t used;
  _Alignas(8) unsigned char data[];
};

#define ARENA_MAX_CHUNK 16384

static struct nl_arena_chunk *chunk_new(nl_arena_t *a, size_t size) {
  struct nl_arena_chunk *c = nl_xmalloc(sizeof *c + size);
  c->prev = a->head;
  c->size = size;
  c->used = 0;
  a->head = c;
  a->total += sizeof *c + size;
  return c;
}

nl_arena_t *nl_arena_new(size_t first) {
  nl_arena_t *a = nl_xcalloc(1, sizeof *a);
  a->next_size = first < 64 ? 64 : first;
  a->total = sizeof *a;
  a->refs = 1;
  return a;
}

nl_arena_t *nl_arena_new_steady(size_t chunk) {
  nl_arena_t *a = nl_arena_new(chunk);
  a->steady = true;
  return a;
}

/* A piece of its own, put behind the head so that the head's room stays in use. */
static void *alone(nl_arena_t *a, size_t n) {
  struct nl_arena_chunk *head = a->head;
  struct nl_arena_chunk *c = chunk_new(a, n);
  c->used = n;
  if (head) {
    a->head = head;
    c->prev = head->prev;
    head->prev = c;
  }
  memset(c->data, 0, n);
  return c->data;
}

void nl_arena_free(nl_arena_t *a) {
  if (!a) return;
  struct nl_arena_chunk *c = a->head;
  while (c) {
    struct nl_arena_chunk *p = c->prev;
    free(c);
    c = p;
  }
  free(a);
}

void *nl_arena_alloc(nl_arena_t *a, size_t n) {
  n = (n + 7) & ~(size_t)7;
  if (n == 0) n = 8;
  struct nl_arena_chunk *c = a->head;
  if (!c || c->size - c->used < n) {
    if (a->steady && n > a->next_size / 4) return alone(a, n);
    size_t size = a->next_size;
    if (!a->steady && a->next_size < ARENA_MAX_CHUNK) a->next_size *= 2;
    if (size < n) size = n;
    c = chunk_new(a, size);
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

char *nl_arena_strndup(nl_arena_t *a, const char *s, size_t n) {
  char *p = nl_arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *nl_arena_strdup(nl_arena_t *a, const char *s) {
  return s ? nl_arena_strndup(a, s, strlen(s)) : NULL;
}
