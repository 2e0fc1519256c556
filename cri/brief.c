/* The brief list answers (cri/brief.proto) decoded straight from the wire.
 * protobuf-c unpacks each label as a message of its own and keeps every
 * skipped field as an unknown field; a relist of 110 pods spent 1.3 M
 * instructions there (tools/bench/relist_bench.c). This walks the bytes once,
 * keeps what PLEG reads and allocates from the caller's allocator (the
 * response arena). It accepts what protobuf-c accepts for these messages and
 * rejects what it rejects (bad wire types for known fields, truncation, groups);
 * test/fuzz/cri/fuzz_brief.c holds it to that. */
#include "cri/brief.h"

#include <assert.h>
#include <limits.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

typedef struct rd {
  const uint8_t *p, *end;
} rd_t;

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static bool varint(rd_t *r, uint64_t *v) {
  uint64_t x = 0;
  for (unsigned i = 0; i < 10; i++) {
    if (r->p == r->end) return false;
    uint8_t b = *r->p++;
    x |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return false;
}

/* A field's key, as protobuf-c reads it (parse_tag_and_wiretype): at most 5
 * bytes, bits past 32 dropped, a first byte without number bits refused. */
static bool key(rd_t *r, uint32_t *num, unsigned *wt) {
  size_t left = (size_t)(r->end - r->p), max = left > 5 ? 5 : left;
  const uint8_t *d = r->p;
  if (!left || (d[0] & 0xf8) == 0) return false;
  *wt = d[0] & 7;
  uint32_t t = (d[0] & 0x7f) >> 3;
  if (!(d[0] & 0x80)) {
    *num = t;
    r->p++;
    return true;
  }
  unsigned shift = 4;
  for (size_t i = 1; i < max; i++) {
    t |= (uint32_t)(d[i] & 0x7f) << shift;
    shift += 7;
    if (!(d[i] & 0x80)) {
      *num = t;
      r->p += i + 1;
      return true;
    }
  }
  return false;
}

/* A length prefix, as protobuf-c's scan_length_prefixed_data: at most 5 bytes,
 * at most INT_MAX, within the bytes left. */
static bool length(rd_t *r, size_t *n) {
  size_t left = (size_t)(r->end - r->p), max = left > 5 ? 5 : left, v = 0;
  for (size_t i = 0; i < max; i++) {
    v |= (size_t)(r->p[i] & 0x7f) << (7 * i);
    if (!(r->p[i] & 0x80)) {
      r->p += i + 1;
      *n = v;
      return v <= INT_MAX && v <= (size_t)(r->end - r->p);
    }
  }
  return false;
}

/* One field: its number and wire type; a LEN field's bytes in *sub, a VARINT's
 * value in *v; I64 and I32 are skipped. False when the bytes end early or the
 * wire type is a group or unknown, as protobuf-c. */
static bool field(rd_t *r, uint32_t *num, unsigned *wt, uint64_t *v, rd_t *sub) {
  if (!key(r, num, wt)) return false;
  size_t n;
  switch (*wt) {
  case WT_VARINT: return varint(r, v);
  case WT_I64: n = 8; break;
  case WT_I32: n = 4; break;
  case WT_LEN:
    if (!length(r, &n)) return false;
    sub->p = r->p;
    sub->end = r->p + n;
    *v = n;
    break;
  default: return false;
  }
  if ((size_t)(r->end - r->p) < n) return false;
  r->p += n;
  return true;
}

static char *str(ProtobufCAllocator *pa, const rd_t *s) {
  size_t n = (size_t)(s->end - s->p);
  char *c = pa->alloc(pa->allocator_data, n + 1);
  if (!c) return NULL;
  memcpy(c, s->p, n);
  c[n] = 0;
  return c;
}

/* What one item holds on the wire. */
typedef struct item {
  rd_t id, sandbox_id;
  bool has_id, has_sandbox_id;
  uint64_t state, created_at;
  rd_t keys[NL_CRI_BRIEF_MAX_LABELS], values[NL_CRI_BRIEF_MAX_LABELS];
  size_t n_labels;
} item_t;

/* Field numbers of an item: sandboxes and containers differ. */
typedef struct layout {
  uint32_t id, sandbox_id, state, created_at, labels;
} layout_t;

static const layout_t SANDBOX = {1, 0, 3, 4, 5}, CONTAINER = {1, 2, 6, 7, 8};

static bool kept_key(const rd_t *k) {
  static const char prefix[] = "io.kubernetes.";
  return (size_t)(k->end - k->p) >= sizeof prefix - 1 && !memcmp(k->p, prefix, sizeof prefix - 1);
}

static bool label(item_t *it, rd_t e) {
  rd_t k = {e.p, e.p}, v = {e.p, e.p}, sub;
  uint32_t num;
  unsigned wt;
  uint64_t x;
  while (e.p < e.end) {
    if (!field(&e, &num, &wt, &x, &sub)) return false;
    if (num == 1 || num == 2) {
      if (wt != WT_LEN) return false;
      *(num == 1 ? &k : &v) = sub; /* the last one wins, as protobuf-c's */
    }
  }
  if (!kept_key(&k)) return true;
  for (size_t i = 0; i < it->n_labels; i++) /* the first of a key wins, as nl_rt_kv_get */
    if (it->keys[i].end - it->keys[i].p == k.end - k.p && !memcmp(it->keys[i].p, k.p, (size_t)(k.end - k.p)))
      return true;
  if (it->n_labels == NL_CRI_BRIEF_MAX_LABELS) return true;
  it->keys[it->n_labels] = k;
  it->values[it->n_labels++] = v;
  return true;
}

static bool item(rd_t r, const layout_t *l, item_t *it) {
  memset(it, 0, sizeof *it);
  rd_t sub;
  uint32_t num;
  unsigned wt;
  uint64_t v;
  while (r.p < r.end) {
    if (!field(&r, &num, &wt, &v, &sub)) return false;
    if (num == l->id || (l->sandbox_id && num == l->sandbox_id) || num == l->labels) {
      if (wt != WT_LEN) return false;
      if (num == l->id) it->id = sub, it->has_id = true;
      else if (num == l->labels) {
        if (!label(it, sub)) return false;
      } else {
        it->sandbox_id = sub, it->has_sandbox_id = true;
      }
    } else if (num == l->state || num == l->created_at) {
      if (wt != WT_VARINT) return false;
      *(num == l->state ? &it->state : &it->created_at) = v;
    }
  }
  return true;
}

/* Copies an item's labels as entries of the given descriptor (both entry types
 * are {base, key, value}). */
typedef struct entry {
  ProtobufCMessage base;
  char *key, *value;
} entry_t;

static entry_t **labels(ProtobufCAllocator *pa, const item_t *it,
                        const ProtobufCMessageDescriptor *d) {
  if (!it->n_labels) return NULL;
  entry_t **a = pa->alloc(pa->allocator_data, it->n_labels * sizeof *a);
  entry_t *e = pa->alloc(pa->allocator_data, it->n_labels * sizeof *e);
  if (!a || !e) return NULL;
  for (size_t i = 0; i < it->n_labels; i++) {
    e[i] = (entry_t){PROTOBUF_C_MESSAGE_INIT(d), str(pa, &it->keys[i]), str(pa, &it->values[i])};
    if (!e[i].key || !e[i].value) return NULL;
    a[i] = &e[i];
  }
  return a;
}

/* Counts the top-level items (field 1) and checks the framing of the rest. */
static bool count(rd_t r, size_t *n) {
  rd_t sub;
  uint32_t num;
  unsigned wt;
  uint64_t v;
  *n = 0;
  while (r.p < r.end) {
    if (!field(&r, &num, &wt, &v, &sub)) return false;
    if (num == 1) {
      if (wt != WT_LEN) return false;
      ++*n;
    }
  }
  return true;
}

/* Fills one typed object from an item; false when an allocation failed. */
typedef bool (*fill_fn)(ProtobufCAllocator *pa, const item_t *it, void *obj);

/* Decodes the items (field 1) of a list answer into objects of `size` bytes
 * filled by fill: *out their pointers, *n_out their count. */
static bool items(ProtobufCAllocator *pa, rd_t r, const layout_t *l, size_t size, fill_fn fill,
                  void ***out, size_t *n_out) {
  size_t n;
  if (!count(r, &n)) return false;
  if (!n) return true;
  void **ptrs = pa->alloc(pa->allocator_data, n * sizeof *ptrs);
  char *objs = pa->alloc(pa->allocator_data, n * size);
  if (!ptrs || !objs) return false;
  rd_t sub;
  uint32_t num;
  unsigned wt;
  uint64_t v;
  item_t it;
  size_t k = 0;
  while (r.p < r.end) {
    field(&r, &num, &wt, &v, &sub); /* count() checked the framing */
    if (num != 1) continue;
    if (!item(sub, l, &it) || !fill(pa, &it, objs + k * size)) return false;
    ptrs[k] = objs + k * size;
    k++;
  }
  *out = ptrs;
  *n_out = k;
  return true;
}

static bool fill_sandbox(ProtobufCAllocator *pa, const item_t *it, void *obj) {
  Runtime__V1__Brief__PodSandbox *sb = obj;
  *sb = (Runtime__V1__Brief__PodSandbox)RUNTIME__V1__BRIEF__POD_SANDBOX__INIT;
  if (it->has_id && !(sb->id = str(pa, &it->id))) return false;
  sb->state = (Runtime__V1__PodSandboxState)(int32_t)it->state;
  sb->created_at = (int64_t)it->created_at;
  sb->n_labels = it->n_labels;
  sb->labels = (Runtime__V1__Brief__PodSandbox__LabelsEntry **)labels(
      pa, it, &runtime__v1__brief__pod_sandbox__labels_entry__descriptor);
  return !it->n_labels || sb->labels;
}

static bool fill_container(ProtobufCAllocator *pa, const item_t *it, void *obj) {
  Runtime__V1__Brief__Container *c = obj;
  *c = (Runtime__V1__Brief__Container)RUNTIME__V1__BRIEF__CONTAINER__INIT;
  if (it->has_id && !(c->id = str(pa, &it->id))) return false;
  if (it->has_sandbox_id && !(c->pod_sandbox_id = str(pa, &it->sandbox_id))) return false;
  c->state = (Runtime__V1__ContainerState)(int32_t)it->state;
  c->created_at = (int64_t)it->created_at;
  c->n_labels = it->n_labels;
  c->labels = (Runtime__V1__Brief__Container__LabelsEntry **)labels(
      pa, it, &runtime__v1__brief__container__labels_entry__descriptor);
  return !it->n_labels || c->labels;
}

/* ---- fingerprints ---- */

static uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static uint64_t hash_bytes(const uint8_t *p, size_t n, uint64_t key) {
  uint64_t h = key ^ (n * 0x9e3779b97f4a7c15ULL);
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h ^= w * 0x87c37b91114253d5ULL;
    h = ((h << 27) | (h >> 37)) * 5 + 0x52dce729;
  }
  uint64_t t = 0;
  memcpy(&t, p, n);
  return mix(h ^ t);
}

/* Keyed per process: names in the lists come from pod specs, and a key no one
 * knows keeps anyone from making two answers that collide on purpose. */
static uint64_t fp_key(void) {
  static uint64_t k;
  if (!k) {
    if (getrandom(&k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k)
      k = mix((uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&k);
    k |= 1;
  }
  return k;
}

/* One item: the fields the decoding keeps (id, sandbox id, state, created at,
 * labels), each hashed whole and summed, so in any order: containerd 1.6
 * writes an item's labels in Go's map order, a new one at each list. The
 * rest (metadata, image, annotations: most of the bytes) is skipped unread,
 * as the decoding skips it. False when the item is not framed as protobuf. */
static bool item_fp(rd_t r, const layout_t *l, uint64_t key, uint64_t *out) {
  uint64_t sum = 0, n = 0;
  while (r.p < r.end) {
    const uint8_t *start = r.p;
    uint32_t num;
    unsigned wt;
    uint64_t v;
    rd_t sub;
    /* Most fields are short strings and map entries: a key and a length of
     * one byte each, walked here without field()'s general case. */
    if (r.end - r.p >= 2 && r.p[0] < 0x80 && (r.p[0] & 7) == WT_LEN && r.p[0] >= 8 && r.p[1] < 0x80) {
      if (r.end - r.p - 2 < r.p[1]) return false;
      num = r.p[0] >> 3;
      r.p += 2 + r.p[1];
    } else if (!field(&r, &num, &wt, &v, &sub)) {
      return false;
    }
    if (num == l->id || (l->sandbox_id && num == l->sandbox_id) || num == l->state ||
        num == l->created_at || num == l->labels) {
      sum += hash_bytes(start, (size_t)(r.p - start), key);
      n++;
    }
  }
  *out = mix(sum ^ mix(n ^ key));
  return true;
}

uint64_t nl_cri_brief_fingerprint(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                  size_t len) {
  assert(nl_cri_brief_is(desc));
  const layout_t *l = desc == &runtime__v1__brief__list_pod_sandbox_response__descriptor ? &SANDBOX
                                                                                          : &CONTAINER;
  rd_t r = {data, data + len};
  uint64_t key = fp_key(), sum = 0, n = 0;
  while (r.p < r.end) {
    uint32_t num;
    unsigned wt;
    uint64_t v, h;
    rd_t sub;
    if (!field(&r, &num, &wt, &v, &sub)) return 0;
    if (num != 1) continue; /* not an item: the decoding skips it too */
    if (wt != WT_LEN || !item_fp(sub, l, key, &h)) return 0;
    sum += mix(h); /* the items in any order */
    n++;
  }
  uint64_t f = mix(sum ^ mix(n ^ key));
  return f ? f : 1;
}

bool nl_cri_brief_is(const ProtobufCMessageDescriptor *desc) {
  return desc == &runtime__v1__brief__list_pod_sandbox_response__descriptor ||
         desc == &runtime__v1__brief__list_containers_response__descriptor;
}

ProtobufCMessage *nl_cri_brief_unpack(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *pa,
                                      size_t len, const uint8_t *data) {
  rd_t r = {data, data + len};
  if (desc == &runtime__v1__brief__list_pod_sandbox_response__descriptor) {
    Runtime__V1__Brief__ListPodSandboxResponse *m = pa->alloc(pa->allocator_data, sizeof *m);
    if (!m) return NULL;
    *m = (Runtime__V1__Brief__ListPodSandboxResponse)RUNTIME__V1__BRIEF__LIST_POD_SANDBOX_RESPONSE__INIT;
    void **out = NULL;
    if (!items(pa, r, &SANDBOX, sizeof **m->items, fill_sandbox, &out, &m->n_items)) return NULL;
    m->items = (Runtime__V1__Brief__PodSandbox **)out;
    return &m->base;
  }
  if (desc == &runtime__v1__brief__list_containers_response__descriptor) {
    Runtime__V1__Brief__ListContainersResponse *m = pa->alloc(pa->allocator_data, sizeof *m);
    if (!m) return NULL;
    *m = (Runtime__V1__Brief__ListContainersResponse)RUNTIME__V1__BRIEF__LIST_CONTAINERS_RESPONSE__INIT;
    void **out = NULL;
    if (!items(pa, r, &CONTAINER, sizeof **m->containers, fill_container, &out, &m->n_containers))
      return NULL;
    m->containers = (Runtime__V1__Brief__Container **)out;
    return &m->base;
  }
  return NULL;
}
