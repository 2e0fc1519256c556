/* libFuzzer target: arbitrary bytes from the CRI server on the client's
 * response path. Two calls are in flight on a gRPC session (cri/grpc.h); the
 * input goes through nl_h2_recv() (HTTP/2 frames, HPACK, gRPC message
 * reassembly, size limits, trailers) and each complete message is decoded with
 * protobuf-c into an arena (cri/pbarena.h) as the connection does. Checks: no crash or sanitizer report,
 * every stream ends exactly once (on_close, or at session free), and every
 * byte allocated through the counting allocator is freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/pbarena.h"
#include "test/fuzz/cri/fuzz_common.h"

typedef struct call {
  nl_grpc_stream_t st;
  const ProtobufCMessageDescriptor *desc;
  nl_grpc_mem_t *mem;
  int closed;
  int messages;
} call_t;

static int discard(void *user, const uint8_t *data, size_t len) { return 0; }

/* PING ACKs are deferred as cri/conn.c does, and sent after every other chunk. */
static void on_ping(void *user) {}

static void on_message(nl_grpc_stream_t *st, const uint8_t *data, size_t len) {
  call_t *c = st->user;
  c->messages++;
  nl_pb_arena_t *a = NULL;
  if (nl_pb_arena_unpack(c->desc, c->mem, data, len, &a)) nl_pb_arena_free(a);
}

static void on_close(nl_grpc_stream_t *st, const nl_grpc_status_t *status, bool refused) {
  call_t *c = st->user;
  c->closed++;
  if (!status->message) abort();
  char *s = nl_grpc_status_format(status);
  free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  nl_grpc_mem_t mem;
  nl_grpc_mem_init(&mem);
  /* A 1 MiB limit lets the fuzzer reach the oversize path with small inputs. */
  nl_grpc_channel_t ch = {.max_recv_msg_size = 1 << 20};
  nl_h2_opts_t opts = {.window = NL_GRPC_WINDOW, .mem = &mem.nghttp2};
  nl_h2_cbs_t cbs = {.write = discard, .ping = on_ping};
  nl_h2_t *s = nl_h2_new(&opts, &cbs, NULL);
  if (!s) abort();
  uint8_t req1[64], req3[64];
  size_t n1 = fuzz_request(req1, sizeof(req1), 1), n3 = fuzz_request(req3, sizeof(req3), 3);
  call_t calls[2] = {
      {.desc = &runtime__v1__list_containers_response__descriptor, .mem = &mem},
      {.desc = &runtime__v1__container_status_response__descriptor, .mem = &mem},
  };
  for (int i = 0; i < 2; i++) {
    calls[i].st.on_message = on_message;
    calls[i].st.on_close = on_close;
    calls[i].st.user = &calls[i];
  }
  if (nl_grpc_submit(s, &ch, &calls[0].st, FUZZ_PATH_1, req1, n1, 1000) != 0) abort();
  if (nl_grpc_submit(s, &ch, &calls[1].st, FUZZ_PATH_3, req3, n3, 0) != 0) abort();
  int rc = nl_h2_flush(s);
  if (rc == 0) rc = nl_h2_recv(s, fuzz_server_preface, sizeof(fuzz_server_preface));
  size_t step = data[0] ? (size_t)data[0] * 7 : size;
  for (size_t off = 1, chunk = 0; rc == 0 && off < size; off += step, chunk++) {
    size_t n = size - off < step ? size - off : step;
    rc = nl_h2_recv(s, data + off, n);
    if (rc == 0 && chunk % 2) rc = nl_h2_ack_pings(s);
    if (rc == 0) rc = nl_h2_flush(s);
  }
  nl_grpc_fail_streams(s, "fuzz: end of input");
  nl_h2_free(s);
  for (int i = 0; i < 2; i++)
    if (calls[i].closed != 1) {
      fprintf(stderr, "stream %d closed %d times\n", i, calls[i].closed);
      abort();
    }
  if (mem.in_use != 0) {
    fprintf(stderr, "%zu bytes still allocated through the session allocator\n", mem.in_use);
    abort();
  }
  return 0;
}
