/* The response arena: a message unpacked into it equals protobuf-c's own
 * unpacking, big ones (more chunks, big scratch blocks) included; bad bytes and
 * every failed allocation leave nothing allocated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/api.pb-c.h"
#include "cri/pbarena.h"

/* n containers with two labels each, packed into an allocated buffer. */
static uint8_t *pack_containers(size_t n, size_t *len) {
  Runtime__V1__ListContainersResponse r = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
  r.n_containers = n;
  r.containers = calloc(n, sizeof *r.containers);
  char ids[64];
  for (size_t i = 0; i < n; i++) {
    Runtime__V1__Container *c = malloc(sizeof *c);
    *c = (Runtime__V1__Container)RUNTIME__V1__CONTAINER__INIT;
    snprintf(ids, sizeof ids, "container-%zu", i);
    c->id = strdup(ids);
    c->pod_sandbox_id = "sandbox";
    c->created_at = (int64_t)i * 1000;
    c->metadata = malloc(sizeof *c->metadata);
    *c->metadata = (Runtime__V1__ContainerMetadata)RUNTIME__V1__CONTAINER_METADATA__INIT;
    c->metadata->name = "web";
    c->metadata->attempt = (uint32_t)i;
    c->n_labels = 2;
    c->labels = calloc(2, sizeof *c->labels);
    for (size_t j = 0; j < 2; j++) {
      c->labels[j] = malloc(sizeof *c->labels[j]);
      *c->labels[j] =
          (Runtime__V1__Container__LabelsEntry)RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT;
      c->labels[j]->key = j ? "io.kubernetes.pod.name" : "io.kubernetes.pod.namespace";
      c->labels[j]->value = "value";
    }
    r.containers[i] = c;
  }
  *len = protobuf_c_message_get_packed_size(&r.base);
  uint8_t *buf = malloc(*len ? *len : 1);
  protobuf_c_message_pack(&r.base, buf);
  for (size_t i = 0; i < n; i++) {
    Runtime__V1__Container *c = r.containers[i];
    for (size_t j = 0; j < 2; j++) free(c->labels[j]);
    free(c->labels);
    free(c->metadata);
    free(c->id);
    free(c);
  }
  free(r.containers);
  return buf;
}

static void check_containers(const Runtime__V1__ListContainersResponse *r, size_t n) {
  assert_int_equal(r->n_containers, n);
  char ids[64];
  for (size_t i = 0; i < n; i++) {
    const Runtime__V1__Container *c = r->containers[i];
    snprintf(ids, sizeof ids, "container-%zu", i);
    assert_string_equal(c->id, ids);
    assert_string_equal(c->pod_sandbox_id, "sandbox");
    assert_int_equal(c->created_at, (int64_t)i * 1000);
    assert_string_equal(c->metadata->name, "web");
    assert_int_equal(c->metadata->attempt, i);
    assert_int_equal(c->n_labels, 2);
    assert_string_equal(c->labels[1]->key, "io.kubernetes.pod.name");
    assert_string_equal(c->labels[0]->value, "value");
    assert_true(((uintptr_t)c & 7) == 0);
  }
}

static void unpacks_small_and_large(void **state) {
  size_t sizes[] = {0, 1, 3, 50, 3000};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    nl_grpc_mem_t mem;
    nl_grpc_mem_init(&mem);
    size_t len;
    uint8_t *buf = pack_containers(sizes[k], &len);
    nl_pb_arena_t *a = NULL;
    ProtobufCMessage *m = nl_pb_arena_unpack(&runtime__v1__list_containers_response__descriptor,
                                             &mem, buf, len, &a);
    assert_non_null(m);
    assert_non_null(a);
    check_containers((Runtime__V1__ListContainersResponse *)m, sizes[k]);
    if (sizes[k] == 3000) assert_true(mem.nallocs > 2); /* grew, big blocks */
    else if (sizes[k] <= 1) assert_int_equal(mem.nallocs, 1); /* one chunk */
    nl_pb_arena_free(a);
    assert_int_equal(mem.in_use, 0);
    /* Without a counting allocator (the agent's case): malloc, ASan checks. */
    m = nl_pb_arena_unpack(&runtime__v1__list_containers_response__descriptor, NULL, buf, len,
                           &a);
    assert_non_null(m);
    check_containers((Runtime__V1__ListContainersResponse *)m, sizes[k]);
    nl_pb_arena_free(a);
    free(buf);
  }
  nl_pb_arena_free(NULL);
}

static void bad_bytes_leave_nothing(void **state) {
  nl_grpc_mem_t mem;
  nl_grpc_mem_init(&mem);
  size_t len;
  uint8_t *buf = pack_containers(20, &len);
  nl_pb_arena_t *a = NULL;
  /* Cut in the middle of a container: a truncated field. */
  ProtobufCMessage *m = nl_pb_arena_unpack(&runtime__v1__list_containers_response__descriptor,
                                           &mem, buf, len - 7, &a);
  assert_null(m);
  assert_null(a);
  assert_int_equal(mem.in_use, 0);
  free(buf);
}

/* Fails each allocation in turn, as test_grpc's failing_allocations. */
static void failing_allocations(void **state) {
  size_t len;
  uint8_t *buf = pack_containers(3000, &len);
  nl_grpc_mem_t mem;
  uint64_t i;
  for (i = 1; i < 1000; i++) {
    nl_grpc_mem_init(&mem);
    mem.fail_at = i;
    nl_pb_arena_t *a = NULL;
    ProtobufCMessage *m = nl_pb_arena_unpack(
        &runtime__v1__list_containers_response__descriptor, &mem, buf, len, &a);
    if (mem.nfailed == 0) {
      assert_non_null(m);
      check_containers((Runtime__V1__ListContainersResponse *)m, 3000);
      nl_pb_arena_free(a);
      assert_int_equal(mem.in_use, 0);
      break;
    }
    assert_null(m);
    assert_int_equal(mem.in_use, 0);
  }
  assert_true(i > 2 && i < 1000);
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unpacks_small_and_large),
      cmocka_unit_test(bad_bytes_leave_nothing),
      cmocka_unit_test(failing_allocations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
