/* libFuzzer target: arbitrary bytes as a ListPodSandbox or ListContainers
 * answer decoded brief (cri/brief.c), against protobuf-c decoding the same
 * bytes with the same descriptor. Checks: no crash or sanitizer report; the
 * brief decoder accepts exactly what protobuf-c accepts, and then reads the
 * same ids, states, times and io.kubernetes.* labels; the answer's fingerprint
 * (what lets an unchanged relist skip the decoding) is taken of every answer
 * the decoder accepts. */
#include <stdlib.h>
#include <string.h>

#include "cri/brief.h"
#include "cri/brief.pb-c.h"
#include "cri/pbarena.h"

static const char *first(void *const *entries, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++) {
    const Runtime__V1__Brief__Container__LabelsEntry *e = entries[i];
    if (!strcmp(e->key, key)) return e->value;
  }
  return NULL;
}

static void same_labels(void *const *a, size_t na, void *const *b, size_t nb) {
  /* every kept label is protobuf-c's first of its key, and every
   * io.kubernetes.* key protobuf-c saw is kept (up to the cap) */
  for (size_t i = 0; i < na; i++) {
    const Runtime__V1__Brief__Container__LabelsEntry *e = a[i];
    const char *v = first(b, nb, e->key);
    if (!v || strcmp(v, e->value) || strncmp(e->key, "io.kubernetes.", 14)) abort();
  }
  for (size_t i = 0; i < nb && na < 8; i++) {
    const Runtime__V1__Brief__Container__LabelsEntry *e = b[i];
    if (!strncmp(e->key, "io.kubernetes.", 14) && !first(a, na, e->key)) abort();
  }
}

static void check(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t size) {
  nl_pb_arena_t *arena = NULL;
  ProtobufCMessage *m = nl_pb_arena_unpack(d, NULL, data, size, &arena);
  ProtobufCMessage *ref = protobuf_c_message_unpack(d, NULL, size, data);
  if (!m != !ref) abort();
  if (m && !nl_cri_brief_fingerprint(d, data, size)) abort();
  if (m && d == &runtime__v1__brief__list_containers_response__descriptor) {
    Runtime__V1__Brief__ListContainersResponse *x = (void *)m, *y = (void *)ref;
    if (x->n_containers != y->n_containers) abort();
    for (size_t i = 0; i < x->n_containers; i++) {
      const Runtime__V1__Brief__Container *a = x->containers[i], *b = y->containers[i];
      if (strcmp(a->id, b->id) || strcmp(a->pod_sandbox_id, b->pod_sandbox_id) ||
          a->state != b->state || a->created_at != b->created_at)
        abort();
      same_labels((void *)a->labels, a->n_labels, (void *)b->labels, b->n_labels);
    }
  } else if (m) {
    Runtime__V1__Brief__ListPodSandboxResponse *x = (void *)m, *y = (void *)ref;
    if (x->n_items != y->n_items) abort();
    for (size_t i = 0; i < x->n_items; i++) {
      const Runtime__V1__Brief__PodSandbox *a = x->items[i], *b = y->items[i];
      if (strcmp(a->id, b->id) || a->state != b->state || a->created_at != b->created_at) abort();
      same_labels((void *)a->labels, a->n_labels, (void *)b->labels, b->n_labels);
    }
  }
  if (m) nl_pb_arena_free(arena);
  if (ref) protobuf_c_message_free_unpacked(ref, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check(&runtime__v1__brief__list_pod_sandbox_response__descriptor, data, size);
  check(&runtime__v1__brief__list_containers_response__descriptor, data, size);
  return 0;
}
