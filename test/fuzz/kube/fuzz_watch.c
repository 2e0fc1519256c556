/* libFuzzer target over the watch stream decoder (agent/kube/watch_decode.c)
 * and, on the first line, the Status reader behind nl_kube_status_err().
 * Built with FUZZ_WATCH_PROTOBUF (fuzz_watch_pb): the protobuf stream instead
 * (length-prefixed metav1.WatchEvent frames, objects through agent/kube/pb.c).
 *
 * Input: byte 0 picks the piece size the stream is cut into (1 + byte 0); the
 * rest is the stream. The bound on one event is 4 KiB, so the fuzzer reaches it. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kube/status.h"
#include "agent/kube/watch_decode.h"

static int on_event(void *ctx, const nl_kube_watch_event_t *ev) {
  size_t *n = ctx;
  assert(ev->type <= NL_KUBE_WATCH_ERROR);
  assert(ev->object_len >= 2 && ev->object[0] == '{' && ev->object[ev->object_len - 1] == '}');
  assert(ev->resource_version && ev->message);
  (void)strlen(ev->resource_version);
  (void)strlen(ev->message);
  assert(nl_kube_reason_name(ev->reason));
  (*n)++;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t mode = data[0];
  size_t piece = 1 + mode;
  data++;
  size--;
  size_t events = 0;
  nl_kube_watch_decoder_t d;
  nl_kube_watch_decoder_init(&d, 4096, on_event, &events);
#ifdef FUZZ_WATCH_PROTOBUF
  nl_kube_watch_decoder_protobuf(&d);
#endif
  nl_err_t *err = NULL;
  int rc = 0;
  for (size_t off = 0; off < size && rc == 0; off += piece) {
    size_t n = size - off < piece ? size - off : piece;
    char *chunk = malloc(n); /* exactly n bytes: ASan sees any read past it */
    memcpy(chunk, data + off, n);
    rc = nl_kube_watch_decoder_feed(&d, chunk, n, &err);
    free(chunk);
  }
  if (rc == 0) rc = nl_kube_watch_decoder_finish(&d, &err);
  assert(rc == 0 ? !err : err && err->msg);
  nl_err_free(&err);
  nl_kube_watch_decoder_free(&d);
#ifdef FUZZ_WATCH_PROTOBUF
  return 0;
#endif

  const char *nl = memchr(data, '\n', size);
  nl_kube_response_t resp = {400 + mode % 200, "", nl ? (size_t)(nl - (const char *)data) : size, ""};
  char *body = malloc(resp.body_len + 1);
  memcpy(body, data, resp.body_len);
  body[resp.body_len] = 0;
  resp.body = body;
  assert(nl_kube_status_err(&resp, &err) == -1 && err && err->code == resp.status);
  nl_err_free(&err);
  (void)nl_kube_status_reason(&resp);
  free(body);
  return 0;
}
