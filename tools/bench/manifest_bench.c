/* Manifest decoding benchmark: time per decode of a typical ~3 KiB manifest (YAML
 * and JSON), per full static-pod load, and the memory a decoded pod holds.
 *   ./build/tools/bench/manifest_bench [FILE] [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reactor/arena.h"
#include "agent/model/pod.h"
#include "reactor/tree.h"
#include "tools/bench/slurp.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void bench(const char *what, const char *data, size_t len, int iters, int mode) {
  nl_static_source_t src = {"file", "bench.yaml", "node1"};
  double best = 1e18;
  for (int round = 0; round < 5; round++) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
      nl_pod_t *pod = NULL;
      nl_err_t *err = NULL;
      int rc = mode ? nl_pod_load_static(data, len, &src, &pod, &err)
                    : nl_pod_decode(data, len, "bench", &pod, &err);
      if (rc < 0) {
        fprintf(stderr, "%s\n", nl_err_msg(err));
        exit(1);
      }
      nl_pod_free(pod);
    }
    double per = (now_us() - t0) / iters;
    if (per < best) best = per;
  }
  printf("%-34s %8.1f us  (%zu bytes, best of 5 x %d)\n", what, best, len, iters);
}

/* The YAML -> generic tree step alone, through either reader (mode 0: the fast
 * reader, which must take the file; 1: libyaml, as for input outside its subset). */
static void bench_tree(const char *what, const char *data, size_t len, int iters, int mode) {
  double best = 1e18;
  for (int round = 0; round < 5; round++) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
      nl_arena_t *a = nl_arena_new(4096);
      nl_err_t *err = NULL;
      nl_tnode_t *root = mode ? nl_tree_parse_libyaml(a, data, len, &err)
                              : nl_tree_parse_yaml_fast(a, data, len);
      if (!root) {
        fprintf(stderr, "%s: %s\n", what, err ? nl_err_msg(err) : "not in the fast subset");
        exit(1);
      }
      nl_arena_free(a);
    }
    double per = (now_us() - t0) / iters;
    if (per < best) best = per;
  }
  printf("%-34s %8.1f us  (%zu bytes, best of 5 x %d)\n", what, best, len, iters);
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "test/fixtures/manifests/typical-3k.yaml";
  int iters = argc > 2 ? atoi(argv[2]) : 20000;
  size_t len;
  char *yaml = slurp(path, &len);
  if (!yaml) {
    perror(path);
    return 1;
  }
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(yaml, len, path, &pod, &err) < 0) {
    fprintf(stderr, "%s\n", nl_err_msg(err));
    return 1;
  }
  nl_buf_t json = NL_BUF_INIT;
  nl_pod_encode_json(pod, &json, 0);
  printf("decoded pod holds %zu bytes (arena, headers included)\n", pod->arena->total);
  nl_pod_set_defaults(pod);
  nl_static_source_t src = {"file", path, "node1"};
  nl_pod_apply_static(pod, &src);
  printf("defaulted static pod holds %zu bytes\n", pod->arena->total);
  nl_pod_free(pod);
  bench("decode YAML", yaml, len, iters, 0);
  bench_tree("  YAML -> tree, fast reader", yaml, len, iters, 0);
  bench_tree("  YAML -> tree, libyaml (forced)", yaml, len, iters, 1);
  bench("decode JSON", json.data, json.len, iters, 0);
  bench("load static (decode+default+validate)", yaml, len, iters, 1);
  nl_buf_free(&json);
  free(yaml);
  return 0;
}
