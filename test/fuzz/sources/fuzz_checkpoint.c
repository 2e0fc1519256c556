/* libFuzzer target over the pod checkpoint reader (sources/checkpoint.c) and the
 * API pod decoder behind it (nl_pod_decode_api): the file on disk is outside
 * input (a power cut, a full disk, another program).
 *
 * The input is tried as a whole checkpoint file, and as a body whose checksum
 * is right (so that the fuzzer reaches the item split and the pod decoder
 * without having to forge sha256). Every item that decodes must survive a copy,
 * and re-encoding the items must verify and split into the same spans. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/pod.h"
#include "sources/checkpoint.h"

static void items_of(const char *body, size_t len) {
  nl_kube_raw_t *items = NULL;
  size_t n = 0;
  nl_err_t *err = NULL;
  if (nl_pod_checkpoint_items(body, len, &items, &n, &err) < 0) {
    assert(err && nl_err_msg(err)[0]);
    nl_err_free(&err);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    nl_pod_t *p = NULL;
    if (nl_pod_decode_api(items[i].json, items[i].len, &p, &err) < 0) {
      assert(!p && err);
      nl_err_free(&err);
      continue;
    }
    nl_pod_t *c = nl_pod_dup(p);
    assert(nl_pod_hash(c) == nl_pod_hash(p));
    nl_pod_free(c);
    nl_pod_free(p);
  }
  nl_buf_t again = NL_BUF_INIT;
  nl_pod_checkpoint_encode(items, n, &again);
  size_t off;
  int rc = nl_pod_checkpoint_verify(again.data, again.len, &off, &err);
  assert(rc == 0);
  nl_kube_raw_t *items2 = NULL;
  size_t n2 = 0;
  rc = nl_pod_checkpoint_items(again.data + off, again.len - off, &items2, &n2, &err);
  assert(rc == 0 && n2 == n);
  for (size_t i = 0; i < n; i++)
    assert(items2[i].len == items[i].len && memcmp(items2[i].json, items[i].json, items[i].len) == 0);
  free(items2);
  nl_buf_free(&again);
  free(items);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *copy = malloc(size + 1); /* exactly the input (and a NUL the reader adds too) */
  memcpy(copy, data, size);
  copy[size] = 0;
  size_t off;
  nl_err_t *err = NULL;
  if (nl_pod_checkpoint_verify(copy, size, &off, &err) == 0) items_of(copy + off, size - off);
  else nl_err_free(&err);
  items_of(copy, size);
  free(copy);
  return 0;
}
