#include "cri/pbarena.h"

#include <stdlib.h>

#include "cri/brief.h"

/* protobuf-c's structs hold nothing wider than 8 bytes (pointers, size_t,
 * int64, double): 8 wastes less than malloc's 16 on short strings. */
#define ALIGN 8
#define ROUND(n) (((n) + (ALIGN - 1)) & ~(size_t)(ALIGN - 1))
/* Allocations this large get a block of their own that free() really frees:
 * protobuf-c's scratch arrays while unpacking a message with many fields, which
 * would otherwise stay in the arena until the message goes. */
#define BIG 1024

typedef struct chunk {
  struct chunk *next; /* older chunk */
  size_t cap, used;
} chunk_t;

typedef struct big {
  struct big *next, *prev;
} big_t;

struct nl_pb_arena {
  nl_grpc_mem_t *mem;
  chunk_t *chunks; /* newest first; the oldest one holds this struct */
  big_t big;       /* list head of the big blocks */
  ProtobufCAllocator pa;
};

#define CHUNK_HDR ROUND(sizeof(chunk_t))
#define BIG_HDR ROUND(sizeof(big_t))
#define ARENA_HDR ROUND(sizeof(nl_pb_arena_t))

static void *raw_alloc(nl_grpc_mem_t *mem, size_t n) {
  return mem ? mem->protobuf.alloc(mem->protobuf.allocator_data, n) : malloc(n);
}

static void raw_free(nl_grpc_mem_t *mem, void *p) {
  if (mem) mem->protobuf.free(mem->protobuf.allocator_data, p);
  else free(p);
}

static void *arena_alloc(void *ud, size_t n) {
  nl_pb_arena_t *a = ud;
  if (n > SIZE_MAX / 4) return NULL;
  n = ROUND(n);
  if (n >= BIG) {
    big_t *b = raw_alloc(a->mem, BIG_HDR + n);
    if (!b) return NULL;
    b->next = a->big.next;
    b->prev = &a->big;
    b->next->prev = b;
    a->big.next = b;
    return (char *)b + BIG_HDR;
  }
  chunk_t *c = a->chunks;
  if (c->cap - c->used < n) {
    size_t cap = c->cap * 2 > n ? c->cap * 2 : n;
    chunk_t *nc = raw_alloc(a->mem, CHUNK_HDR + cap);
    if (!nc) return NULL;
    nc->next = c;
    nc->cap = cap;
    nc->used = 0;
    a->chunks = c = nc;
  }
  void *p = (char *)c + CHUNK_HDR + c->used;
  c->used += n;
  return p;
}

/* Pieces carved from a chunk go with the arena; big blocks go now. */
static void arena_dealloc(void *ud, void *p) {
  nl_pb_arena_t *a = ud;
  if (!p) return;
  for (big_t *b = a->big.next; b != &a->big; b = b->next) {
    if ((char *)b + BIG_HDR == p) {
      b->prev->next = b->next;
      b->next->prev = b->prev;
      raw_free(a->mem, b);
      return;
    }
  }
}

ProtobufCMessage *nl_pb_arena_unpack(const ProtobufCMessageDescriptor *desc, nl_grpc_mem_t *mem,
                                     const uint8_t *data, size_t len, nl_pb_arena_t **arena) {
  /* Unpacked, a message takes more room than on the wire (structs, pointers,
   * NULs: 2 to 4 times for CRI lists); too little costs one more chunk, twice
   * as large. */
  size_t cap = ROUND(ARENA_HDR + 256 + 2 * len);
  chunk_t *c = raw_alloc(mem, CHUNK_HDR + cap);
  if (!c) return NULL;
  c->next = NULL;
  c->cap = cap;
  c->used = ARENA_HDR;
  nl_pb_arena_t *a = (nl_pb_arena_t *)((char *)c + CHUNK_HDR);
  a->mem = mem;
  a->chunks = c;
  a->big.next = a->big.prev = &a->big;
  a->pa = (ProtobufCAllocator){arena_alloc, arena_dealloc, a};
  ProtobufCMessage *m = nl_cri_brief_is(desc) ? nl_cri_brief_unpack(desc, &a->pa, len, data)
                                               : protobuf_c_message_unpack(desc, &a->pa, len, data);
  if (!m) {
    nl_pb_arena_free(a);
    return NULL;
  }
  *arena = a;
  return m;
}

void nl_pb_arena_free(nl_pb_arena_t *a) {
  if (!a) return;
  nl_grpc_mem_t *mem = a->mem;
  while (a->big.next != &a->big) {
    big_t *b = a->big.next;
    a->big.next = b->next;
    raw_free(mem, b);
  }
  chunk_t *c = a->chunks; /* the last one freed holds a */
  while (c) {
    chunk_t *next = c->next;
    raw_free(mem, c);
    c = next;
  }
}
