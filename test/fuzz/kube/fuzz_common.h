/* Shared by the API client's HTTP/2 fuzz target and its seed generator: the
 * requests the client has in flight when the fuzzed server bytes arrive. */
#ifndef NL_FUZZ_KUBE_COMMON_H
#define NL_FUZZ_KUBE_COMMON_H

#include <string.h>

#include "agent/kube/h2.h"

/* A small receive window, so that flow control (WINDOW_UPDATE, a server that
 * overruns the window) is reached with small inputs. */
#define FUZZ_WINDOW 16384

/* Stream 1: a buffered GET, stream 3: a POST with a body whose 2xx answer's
 * body is not wanted (head_only), stream 5: a watch whose body is streamed. */
#define FUZZ_NREQ 3
static const char *const fuzz_method[FUZZ_NREQ] = {"GET", "POST", "GET"};
static const char *const fuzz_path[FUZZ_NREQ] = {
    "/api/v1/nodes/n1", "/api/v1/namespaces/default/events",
    "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=true&resourceVersion=7"};
static const char fuzz_post_body[] = "{\"kind\":\"Event\",\"apiVersion\":\"v1\"}";

/* The server's connection preface the target puts before the fuzzed bytes: an
 * empty SETTINGS frame, so that the fuzzer starts past the handshake. */
static const uint8_t fuzz_server_preface[] = {0, 0, 0, 0x4, 0, 0, 0, 0, 0};

/* Input layout: byte 0 picks how the rest is cut into recv() calls (0: at
 * once; n: pieces of n * 7 bytes), the rest is what the server sends. */

static inline int fuzz_submit(nl_kube_h2_t *s, nl_kube_h2_stream_t *st, int i) {
  static const nl_kube_h2_header_t hdrs[] = {
      {"user-agent", "nanolet/fuzz (linux/amd64)"},
      {"accept", "application/json, */*"},
      {"content-type", "application/json"},
  };
  bool post = i == 1;
  st->h2.head_only = post;
  return nl_kube_h2_submit(s, st, fuzz_method[i], fuzz_path[i], "10.0.0.1:6443", hdrs,
                           post ? 3 : 2, post ? fuzz_post_body : NULL,
                           post ? strlen(fuzz_post_body) : 0);
}

#endif
