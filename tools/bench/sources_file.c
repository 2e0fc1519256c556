/* How long the file source takes over N manifests: the first read (read +
 * decode + merge), and the periodic safety-net re-read of unchanged files (read +
 * hash, nothing decoded). Usage: bench_sources_file [N] [rounds] */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "reactor/xalloc.h"
#include "sources/config.h"
#include "sources/file.h"

typedef struct bench {
  uv_loop_t loop;
  nl_file_source_t src;
  nl_pod_config_t cfg;
  size_t added;
  uint64_t t_first, t_rounds_start, t_rounds_end;
  uint64_t rounds, target_rounds, scans_at_start;
  long rss_loaded;
  int phase; /* 0: first read, 1: re-reads, 2: one file edited */
  char *edit_path;
  uint64_t t_edit, t_edit_seen, merge_ns, snapshots_at_edit;
} bench_t;

static void on_update(nl_pod_op_t op, const char *source, const nl_pod_t *const *pods, size_t n, void *ctx) {
  bench_t *b = ctx;
  if (op == NL_POD_ADD) b->added += n;
}

static void on_snapshot(nl_pod_t **pods, size_t n, void *ctx) {
  bench_t *b = ctx;
  uint64_t t = uv_hrtime();
  nl_pod_config_set(&b->cfg, NL_SOURCE_FILE, pods, n, NULL);
  b->merge_ns = uv_hrtime() - t;
}

static void edit_one(bench_t *b) {
  const char *m = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: edited\nspec:\n  containers:\n"
                  "  - name: web\n    image: busybox:1.37\n";
  int fd = open(b->edit_path, O_WRONLY | O_TRUNC);
  if (fd < 0 || write(fd, m, strlen(m)) != (ssize_t)strlen(m)) abort();
  close(fd);
  b->t_edit = uv_hrtime();
}

static void on_stopped(nl_file_source_t *src) { (void)src; }

static long rss_kib(void);

static void on_scan(nl_file_source_t *src, void *ctx) {
  bench_t *b = ctx;
  uint64_t now = uv_hrtime();
  if (!b->t_first) {
    b->t_first = now;
    b->rss_loaded = rss_kib();
    b->t_rounds_start = now;
    b->scans_at_start = src->scans;
    return;
  }
  if (b->phase == 0 && src->scans - b->scans_at_start >= b->target_rounds) {
    b->t_rounds_end = now;
    b->rounds = src->scans - b->scans_at_start;
    b->phase = 2;
    b->snapshots_at_edit = src->snapshots;
    edit_one(b);
  } else if (b->phase == 2 && src->snapshots > b->snapshots_at_edit) {
    b->t_edit_seen = now;
    nl_file_source_stop(src, on_stopped);
  }
}

static long rss_kib(void) {
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = -1;
  fclose(f);
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  bench_t b = {0};
  b.target_rounds = argc > 2 ? (uint64_t)atoi(argv[2]) : 20;
  char dir[] = "/tmp/nl-bench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  for (int i = 0; i < n; i++) {
    char *path = nl_xasprintf("%s/pod%05d.yaml", dir, i);
    char *m = nl_xasprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: pod%05d\n  labels:\n    app: bench\n"
                           "spec:\n  containers:\n  - name: web\n    image: busybox:1.36\n"
                           "    command: [\"httpd\", \"-f\", \"-p\", \"8080\"]\n    ports:\n"
                           "    - containerPort: 8080\n    resources:\n      limits:\n        memory: 64Mi\n",
                           i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, m, strlen(m)) != (ssize_t)strlen(m)) return 1;
    close(fd);
    free(path);
    free(m);
  }
  long rss0 = rss_kib();
  b.edit_path = nl_xasprintf("%s/pod%05d.yaml", dir, n / 2);
  uv_loop_init(&b.loop);
  nl_pod_config_init(&b.cfg, on_update, &b);
  /* 1 ms: the periodic re-read runs back to back after the first scan */
  nl_file_source_init(&b.src, &b.loop, dir, 1, "bench-node", on_snapshot, &b, NULL);
  b.src.on_scan = on_scan;
  uint64_t t0 = uv_hrtime();
  nl_file_source_start(&b.src, NULL);
  uv_run(&b.loop, UV_RUN_DEFAULT);
  printf("manifests: %d, pods added: %zu\n", n, b.added);
  printf("first read (read + decode + merge): %.1f ms\n", (double)(b.t_first - t0) / 1e6);
  printf("periodic re-read of unchanged files: %.2f ms per round (%llu rounds, incl. 1 ms timer)\n",
         (double)(b.t_rounds_end - b.t_rounds_start) / 1e6 / (double)b.rounds, (unsigned long long)b.rounds);
  printf("one file edited: snapshot applied %.1f ms after the write; merging the %zu-pod snapshot took %.2f ms\n",
         (double)(b.t_edit_seen - b.t_edit) / 1e6, nl_pod_config_count(&b.cfg, NULL), (double)b.merge_ns / 1e6);
  printf("RSS: %ld KiB before, %ld KiB with %zu pods held (source + merger)\n", rss0, b.rss_loaded, b.added);
  nl_pod_config_free(&b.cfg);
  uv_loop_close(&b.loop);
  nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  free(b.edit_path);
  return 0;
}
