/* Shared by the CRI response fuzz target and its seed generator: the two calls
 * the client has in flight when the fuzzed server bytes arrive. */
#ifndef NL_FUZZ_CRI_COMMON_H
#define NL_FUZZ_CRI_COMMON_H

#include "cri/api.pb-c.h"
#include "cri/grpc.h"

/* Stream 1 decodes a ListContainersResponse (nested messages, maps, repeated
 * fields), stream 3 a ContainerStatusResponse. */
#define FUZZ_PATH_1 "/runtime.v1.RuntimeService/ListContainers"
#define FUZZ_PATH_3 "/runtime.v1.RuntimeService/ContainerStatus"

/* The server's connection preface the target puts before the fuzzed bytes: an
 * empty SETTINGS frame, so that the fuzzer starts past the handshake. */
static const uint8_t fuzz_server_preface[] = {0, 0, 0, 0x4, 0, 0, 0, 0, 0};

/* Input layout: byte 0 picks how the rest is cut into recv() calls (0: at
 * once; n: pieces of n * 7 bytes), the rest is what the server sends. */

static inline size_t fuzz_request(uint8_t *buf, size_t cap, int which) {
  if (which == 1) {
    Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
    size_t n = nl_grpc_frame_size(&req.base);
    if (n <= cap) nl_grpc_frame(&req.base, buf);
    return n;
  }
  Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
  req.container_id = "c0ffee";
  size_t n = nl_grpc_frame_size(&req.base);
  if (n <= cap) nl_grpc_frame(&req.base, buf);
  return n;
}

#endif
