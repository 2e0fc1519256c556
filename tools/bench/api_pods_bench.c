/* API pod decoding and the checkpoint: time to decode one pod object as the API
 * server sends it (test/fixtures/api/pod-deleting.json: ~4.5 KiB with
 * managedFields and status), the memory a decoded pod holds, and the cost of
 * writing and verifying the checkpoint of 110 such pods (encode + sha256 and
 * verify + split, on the thread pool in the agent).
 *   ./build/tools/bench/api_pods_bench [FILE] [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reactor/arena.h"
#include "agent/model/pod.h"
#include "sources/checkpoint.h"
#include "sources/config.h"
#include "tools/bench/slurp.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

#define BEST_OF(label, bytes, iters, ...)                                  \
  do {                                                                      \
    double best = 1e18;                                                     \
    for (int round = 0; round < 5; round++) {                               \
      double t0 = now_us();                                                 \
      for (int i = 0; i < (iters); i++) { __VA_ARGS__; }                         \
      double per = (now_us() - t0) / (iters);                               \
      if (per < best) best = per;                                           \
    }                                                                       \
    printf("%-40s %9.1f us  (%zu bytes, best of 5 x %d)\n", label, best,    \
           (size_t)(bytes), (iters));                                       \
  } while (0)

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "test/fixtures/api/pod-deleting.json";
  int iters = argc > 2 ? atoi(argv[2]) : 20000;
  size_t len;
  char *json = slurp(path, &len);
  if (!json) {
    perror(path);
    return 1;
  }
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode_api(json, len, &pod, &err) < 0) {
    fprintf(stderr, "%s\n", nl_err_msg(err));
    return 1;
  }
  printf("decoded API pod holds %zu bytes (arena, headers included)\n", pod->arena->total);
  nl_pod_free(pod);

  BEST_OF("decode API pod JSON", len, iters, {
    nl_pod_t *p = NULL;
    if (nl_pod_decode_api(json, len, &p, &err) < 0) abort();
    nl_pod_free(p);
  });
  BEST_OF("decode + defaults (the API source's)", len, iters, {
    nl_pod_t *p = NULL;
    if (nl_pod_decode_api(json, len, &p, &err) < 0) abort();
    nl_pod_set_defaults(p);
    nl_pod_free(p);
  });
  nl_pod_decode_api(json, len, &pod, &err);
  BEST_OF("copy (nl_pod_dup, a JSON round trip)", len, iters, nl_pod_free(nl_pod_dup(pod)));
  BEST_OF("share (nl_pod_ref + nl_pod_free)", len, iters, nl_pod_free(nl_pod_ref(pod)));
  nl_pod_t *other = nl_pod_dup(pod);
  BEST_OF("semantic comparison (nl_pod_config_differ)", len, iters,
          if (nl_pod_config_differ(pod, other)) abort());
  nl_pod_free(other);
  nl_pod_free(pod);

  enum { N = 110 };
  nl_kube_raw_t items[N];
  for (int i = 0; i < N; i++) items[i] = (nl_kube_raw_t){json, len};
  nl_buf_t file = NL_BUF_INIT;
  nl_pod_checkpoint_encode(items, N, &file);
  int it2 = iters / 100 ? iters / 100 : 1;
  BEST_OF("checkpoint of 110 pods: encode + sha256", file.len, it2, {
    nl_buf_t b = NL_BUF_INIT;
    nl_pod_checkpoint_encode(items, N, &b);
    nl_buf_free(&b);
  });
  BEST_OF("checkpoint of 110 pods: verify + split", file.len, it2, {
    size_t off, n;
    nl_kube_raw_t *got;
    if (nl_pod_checkpoint_verify(file.data, file.len, &off, &err) < 0 ||
        nl_pod_checkpoint_items(file.data + off, file.len - off, &got, &n, &err) < 0 || n != N)
      abort();
    free(got);
  });
  nl_buf_free(&file);
  free(json);
  return 0;
}
