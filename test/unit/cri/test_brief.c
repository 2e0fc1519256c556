/* cri/brief.c: the brief list answers decoded without protobuf-c must read
 * what protobuf-c reads from the same bytes (full cri/api.proto messages with
 * every field PLEG skips set), and refuse what it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cri/brief.h"
#include "cri/pbarena.h"

static uint8_t *pack(const ProtobufCMessage *m, size_t *len) {
  uint8_t *b = malloc(protobuf_c_message_get_packed_size(m) + 1);
  *len = protobuf_c_message_pack(m, b);
  return b;
}

static const char *label(void *const *entries, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++) {
    const Runtime__V1__Brief__PodSandbox__LabelsEntry *e = entries[i];
    if (!strcmp(e->key, key)) return e->value;
  }
  return NULL;
}

static void sandboxes_as_protobuf_c_reads_them(void **state) {
  (void)state;
  Runtime__V1__PodSandbox sb[2] = {RUNTIME__V1__POD_SANDBOX__INIT, RUNTIME__V1__POD_SANDBOX__INIT};
  Runtime__V1__PodSandbox *items[] = {&sb[0], &sb[1]};
  Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  md.name = "web", md.uid = "u1", md.namespace_ = "ns", md.attempt = 2;
  Runtime__V1__PodSandbox__LabelsEntry l[4] = {
      RUNTIME__V1__POD_SANDBOX__LABELS_ENTRY__INIT, RUNTIME__V1__POD_SANDBOX__LABELS_ENTRY__INIT,
      RUNTIME__V1__POD_SANDBOX__LABELS_ENTRY__INIT, RUNTIME__V1__POD_SANDBOX__LABELS_ENTRY__INIT};
  l[0].key = "app", l[0].value = "web"; /* a pod's own label: not kept */
  l[1].key = "io.kubernetes.pod.uid", l[1].value = "u1";
  l[2].key = "io.kubernetes.pod.name", l[2].value = "web";
  l[3].key = "io.kubernetes.pod.uid", l[3].value = "second"; /* the first wins */
  Runtime__V1__PodSandbox__LabelsEntry *lp[] = {&l[0], &l[1], &l[2], &l[3]};
  Runtime__V1__PodSandbox__AnnotationsEntry a = RUNTIME__V1__POD_SANDBOX__ANNOTATIONS_ENTRY__INIT;
  a.key = "io.kubernetes.not-a-label", a.value = "x";
  Runtime__V1__PodSandbox__AnnotationsEntry *ap[] = {&a};
  sb[0].id = "sb0", sb[0].metadata = &md, sb[0].created_at = INT64_C(1700000000123456789);
  sb[0].state = RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY;
  sb[0].labels = lp, sb[0].n_labels = 4, sb[0].annotations = ap, sb[0].n_annotations = 1;
  sb[0].runtime_handler = "runc";
  sb[1].id = "sb1"; /* nothing else: the defaults */
  Runtime__V1__ListPodSandboxResponse r = RUNTIME__V1__LIST_POD_SANDBOX_RESPONSE__INIT;
  r.items = items, r.n_items = 2;
  size_t len;
  uint8_t *buf = pack(&r.base, &len);
  nl_pb_arena_t *arena = NULL;
  Runtime__V1__Brief__ListPodSandboxResponse *b = (void *)nl_pb_arena_unpack(
      &runtime__v1__brief__list_pod_sandbox_response__descriptor, NULL, buf, len, &arena);
  assert_non_null(b);
  assert_int_equal(b->n_items, 2);
  assert_string_equal(b->items[0]->id, "sb0");
  assert_int_equal(b->items[0]->state, RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY);
  assert_true(b->items[0]->created_at == INT64_C(1700000000123456789));
  assert_int_equal(b->items[0]->n_labels, 2);
  assert_string_equal(label((void *)b->items[0]->labels, 2, "io.kubernetes.pod.uid"), "u1");
  assert_string_equal(label((void *)b->items[0]->labels, 2, "io.kubernetes.pod.name"), "web");
  assert_null(label((void *)b->items[0]->labels, 2, "app"));
  assert_string_equal(b->items[1]->id, "sb1");
  assert_int_equal(b->items[1]->state, RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY);
  assert_int_equal(b->items[1]->n_labels, 0);
  nl_pb_arena_free(arena);
  free(buf);
}

static void containers_as_protobuf_c_reads_them(void **state) {
  (void)state;
  Runtime__V1__Container c = RUNTIME__V1__CONTAINER__INIT;
  Runtime__V1__Container *items[] = {&c};
  Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
  md.name = "main", md.attempt = 4;
  Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
  img.image = "busybox";
  Runtime__V1__Container__LabelsEntry l = RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT;
  l.key = "io.kubernetes.container.name", l.value = "main";
  Runtime__V1__Container__LabelsEntry *lp[] = {&l};
  c.id = "c0", c.pod_sandbox_id = "sb0", c.metadata = &md, c.image = &img;
  c.image_ref = "sha256:1", c.image_id = "sha256:2", c.created_at = 7;
  c.state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
  c.labels = lp, c.n_labels = 1;
  Runtime__V1__ListContainersResponse r = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
  r.containers = items, r.n_containers = 1;
  size_t len;
  uint8_t *buf = pack(&r.base, &len);
  nl_pb_arena_t *arena = NULL;
  Runtime__V1__Brief__ListContainersResponse *b = (void *)nl_pb_arena_unpack(
      &runtime__v1__brief__list_containers_response__descriptor, NULL, buf, len, &arena);
  assert_non_null(b);
  assert_int_equal(b->n_containers, 1);
  assert_string_equal(b->containers[0]->id, "c0");
  assert_string_equal(b->containers[0]->pod_sandbox_id, "sb0");
  assert_int_equal(b->containers[0]->state, RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
  assert_int_equal(b->containers[0]->created_at, 7);
  assert_int_equal(b->containers[0]->n_labels, 1);
  assert_string_equal(b->containers[0]->labels[0]->value, "main");
  nl_pb_arena_free(arena);
  /* Every shorter prefix cuts a field (or is the empty list): each decodes
   * exactly when protobuf-c decodes it. */
  for (size_t n = 0; n < len; n++) {
    ProtobufCMessage *ref =
        protobuf_c_message_unpack(&runtime__v1__brief__list_containers_response__descriptor, NULL, n, buf);
    ProtobufCMessage *m =
        nl_pb_arena_unpack(&runtime__v1__brief__list_containers_response__descriptor, NULL, buf, n, &arena);
    assert_int_equal(ref != NULL, m != NULL);
    if (ref) protobuf_c_message_free_unpacked(ref, NULL);
    if (m) nl_pb_arena_free(arena);
  }
  free(buf);
}

static void malformed_answers_are_refused(void **state) {
  (void)state;
  static const struct {
    const char *what;
    uint8_t bytes[16];
    size_t len;
  } bad[] = {
      {"item as a varint", {0x08, 0x01}, 2},
      {"id as a varint", {0x0a, 0x02, 0x08, 0x01}, 4},
      {"state as bytes", {0x0a, 0x03, 0x30, 0x01, 0x00}, 5},
      {"label entry key as a varint", {0x0a, 0x04, 0x42, 0x02, 0x08, 0x01}, 6},
      {"a group", {0x0b}, 1},
      {"field number 0", {0x02, 0x00}, 2},
      {"length past the end", {0x0a, 0x05, 0x0a}, 3},
      {"varint of 11 bytes", {0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 12},
      {"fixed64 cut short", {0x11, 0x01, 0x02}, 3},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    nl_pb_arena_t *arena = NULL;
    ProtobufCMessage *m = nl_pb_arena_unpack(&runtime__v1__brief__list_containers_response__descriptor,
                                             NULL, bad[i].bytes, bad[i].len, &arena);
    ProtobufCMessage *ref = protobuf_c_message_unpack(
        &runtime__v1__brief__list_containers_response__descriptor, NULL, bad[i].len, bad[i].bytes);
    if (m || ref) fail_msg("%s: decoded (protobuf-c: %s)", bad[i].what, ref ? "decoded" : "refused");
  }
  /* Skipped fields of every wire type are fine. */
  static const uint8_t ok[] = {0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x15, 1, 2, 3, 4, 0x18, 0x05};
  nl_pb_arena_t *arena = NULL;
  Runtime__V1__Brief__ListContainersResponse *m = (void *)nl_pb_arena_unpack(
      &runtime__v1__brief__list_containers_response__descriptor, NULL, ok, sizeof ok, &arena);
  assert_non_null(m);
  assert_int_equal(m->n_containers, 0);
  nl_pb_arena_free(arena);
  /* A key of 5 bytes whose number overflows 32 bits: protobuf-c keeps the low
   * bits (an unknown field here) and so must this (found by fuzz_cri_brief). */
  static const uint8_t big_key[] = {0xb8, 0xb8, 0xb8, 0xf5, 0x3a, 0x3b};
  m = (void *)nl_pb_arena_unpack(&runtime__v1__brief__list_containers_response__descriptor, NULL,
                                 big_key, sizeof big_key, &arena);
  assert_non_null(m);
  nl_pb_arena_free(arena);
}

#define FP(b, len) nl_cri_brief_fingerprint(&runtime__v1__brief__list_containers_response__descriptor, b, len)

/* The same items in another order are the same answer; a changed item, one
 * more or one less, or bytes that are not protobuf, are not. */
static void fingerprints(void **state) {
  (void)state;
  Runtime__V1__Container c[3] = {RUNTIME__V1__CONTAINER__INIT, RUNTIME__V1__CONTAINER__INIT,
                                 RUNTIME__V1__CONTAINER__INIT};
  c[0].id = "a", c[1].id = "b", c[2].id = "c";
  c[0].state = c[1].state = c[2].state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
  Runtime__V1__Container *abc[] = {&c[0], &c[1], &c[2]}, *cab[] = {&c[2], &c[0], &c[1]};
  Runtime__V1__ListContainersResponse r = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
  size_t len;
  r.containers = abc, r.n_containers = 3;
  uint8_t *b = pack(&r.base, &len);
  uint64_t f_abc = FP(b, len);
  assert_int_not_equal(f_abc, 0);
  free(b);
  r.containers = cab;
  b = pack(&r.base, &len);
  assert_true(FP(b, len) == f_abc);
  b[len - 1] ^= 1; /* the last item's last byte */
  assert_true(FP(b, len) != f_abc);
  assert_int_equal(FP(b, len - 1), 0); /* cut short */
  free(b);
  c[1].state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
  b = pack(&r.base, &len);
  uint64_t f_exited = FP(b, len);
  assert_true(f_exited != f_abc && f_exited != 0);
  free(b);
  r.n_containers = 2;
  b = pack(&r.base, &len);
  assert_true(FP(b, len) != f_exited);
  free(b);
  /* an empty answer has one too */
  assert_int_not_equal(FP((const uint8_t *)"", 0), 0);
}

/* containerd 1.6 writes an item's labels in Go's map order, a new one at each
 * list: the same labels in another order are the same item; another label
 * value, or a value moved to another key, is not. */
static void fingerprint_of_labels_in_any_order(void **state) {
  (void)state;
  Runtime__V1__Container__LabelsEntry l[3] = {RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT,
                                              RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT,
                                              RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT};
  l[0].key = "io.kubernetes.pod.uid", l[0].value = "u1";
  l[1].key = "io.kubernetes.pod.name", l[1].value = "web";
  l[2].key = "io.kubernetes.container.name", l[2].value = "main";
  Runtime__V1__Container__LabelsEntry *order1[] = {&l[0], &l[1], &l[2]};
  Runtime__V1__Container__LabelsEntry *order2[] = {&l[2], &l[0], &l[1]};
  Runtime__V1__Container c = RUNTIME__V1__CONTAINER__INIT;
  c.id = "a";
  c.labels = order1, c.n_labels = 3;
  Runtime__V1__Container *one[] = {&c};
  Runtime__V1__ListContainersResponse r = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
  r.containers = one, r.n_containers = 1;
  size_t len;
  uint8_t *b = pack(&r.base, &len);
  uint64_t f1 = FP(b, len);
  free(b);
  c.labels = order2;
  b = pack(&r.base, &len);
  assert_true(FP(b, len) == f1);
  free(b);
  /* what the decoding skips is not read: annotations, the image */
  Runtime__V1__Container__AnnotationsEntry an = RUNTIME__V1__CONTAINER__ANNOTATIONS_ENTRY__INIT;
  Runtime__V1__Container__AnnotationsEntry *ap[] = {&an};
  an.key = "io.kubernetes.container.restartCount", an.value = "0";
  c.annotations = ap, c.n_annotations = 1, c.image_ref = "sha256:0123";
  b = pack(&r.base, &len);
  assert_true(FP(b, len) == f1);
  free(b);
  l[1].value = "db";
  b = pack(&r.base, &len);
  assert_true(FP(b, len) != f1);
  free(b);
  l[1].value = "main", l[2].value = "web"; /* the two values swapped between keys */
  b = pack(&r.base, &len);
  assert_true(FP(b, len) != f1);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sandboxes_as_protobuf_c_reads_them),
      cmocka_unit_test(fingerprint_of_labels_in_any_order),
      cmocka_unit_test(containers_as_protobuf_c_reads_them),
      cmocka_unit_test(malformed_answers_are_refused),
      cmocka_unit_test(fingerprints),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
