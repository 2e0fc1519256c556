/* CPU per scrape of /metrics, /metrics/probes, /stats/summary and
 * /metrics/resource with many pods, and the streaming pump's throughput
 * (docs/PERFORMANCE.md, "Metrics, stats and streaming").
 *
 *   stats_bench metrics [PODS]          encode /metrics and /metrics/probes
 *   stats_bench summary [PODS]          build the Summary JSON and resource text
 *   stats_bench serve ENDPOINT [N]      N requests of each through the HTTP server
 *                                       and the CRI client against a runtime
 *   stats_bench pump [MIB]              copy MIB both ways through the pump */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "agent/stats.h"
#include "cri/conn.h"
#include "managers/metrics.h"
#include "reactor/http_client.h"
#include "reactor/http_server.h"
#include "reactor/log.h"
#include "reactor/pump.h"
#include "reactor/xalloc.h"

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static void bench_metrics(int pods) {
  nl_kmetrics_t m;
  nl_kmetrics_init(&m, "edge-1");
  static const char *const ops[] = {"Version", "Status", "ListPodSandbox", "ListContainers",
                                    "PodSandboxStatus", "ContainerStatus", "ExecSync",
                                    "RunPodSandbox", "CreateContainer", "StartContainer",
                                    "StopContainer", "ImageStatus", "PullImage"};
  char path[128], pod[64], uid[64];
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    snprintf(path, sizeof path, "/runtime.v1.RuntimeService/%s", ops[i]);
    for (int k = 0; k < 100; k++) nl_kmetrics_runtime_op(&m, path, k % 50 == 0, 1000000u * k);
  }
  for (int i = 0; i < pods; i++) {
    snprintf(pod, sizeof pod, "web-%d", i);
    snprintf(uid, sizeof uid, "0d6c5e1c-7f3a-4b8e-9a51-%012d", i);
    nl_kmetrics_probe(&m, "Readiness", "successful", "web", pod, "default", uid, 0.002);
    nl_kmetrics_probe(&m, "Liveness", "successful", "web", pod, "default", uid, 0.002);
    nl_kmetrics_pod_started(&m, 1.5);
    nl_kmetrics_pod_worker(&m, "sync", 2000000);
  }
  for (int which = 0; which < 2; which++) {
    nl_metrics_t *r = which ? &m.probes : &m.reg;
    nl_buf_t out = NL_BUF_INIT;
    int n = 2000;
    double t0 = cpu_s();
    for (int i = 0; i < n; i++) {
      out.len = 0;
      nl_metrics_encode(r, &out);
    }
    printf("%-16s %d pods: %zu bytes, %.1f us CPU per encoding\n",
           which ? "/metrics/probes" : "/metrics", pods, out.len, (cpu_s() - t0) / n * 1e6);
    nl_buf_free(&out);
  }
  nl_kmetrics_free(&m);
}

static void bench_summary(int pods) {
  /* pods with one container each, as ListPodSandboxStats gives them */
  Runtime__V1__ListPodSandboxStatsResponse resp = RUNTIME__V1__LIST_POD_SANDBOX_STATS_RESPONSE__INIT;
  Runtime__V1__PodSandboxStats **ps = nl_xcalloc((size_t)pods, sizeof *ps);
  Runtime__V1__UInt64Value v = RUNTIME__V1__UINT64_VALUE__INIT;
  v.value = 123456789;
  Runtime__V1__CpuUsage cpu = RUNTIME__V1__CPU_USAGE__INIT;
  cpu.timestamp = 1700000000000000000;
  cpu.usage_core_nano_seconds = &v;
  Runtime__V1__MemoryUsage mem = RUNTIME__V1__MEMORY_USAGE__INIT;
  mem.timestamp = cpu.timestamp;
  mem.working_set_bytes = mem.usage_bytes = mem.rss_bytes = &v;
  for (int i = 0; i < pods; i++) {
    Runtime__V1__PodSandboxStats *p = ps[i] = nl_xcalloc(1, sizeof *p);
    runtime__v1__pod_sandbox_stats__init(p);
    Runtime__V1__PodSandboxAttributes *a = nl_xcalloc(1, sizeof *a);
    runtime__v1__pod_sandbox_attributes__init(a);
    Runtime__V1__PodSandboxMetadata *md = nl_xcalloc(1, sizeof *md);
    runtime__v1__pod_sandbox_metadata__init(md);
    md->name = nl_xasprintf("web-%d", i);
    md->namespace_ = "default";
    md->uid = nl_xasprintf("uid-%d", i);
    a->id = nl_xasprintf("sandbox-%d", i);
    a->metadata = md;
    p->attributes = a;
    Runtime__V1__LinuxPodSandboxStats *l = nl_xcalloc(1, sizeof *l);
    runtime__v1__linux_pod_sandbox_stats__init(l);
    l->cpu = &cpu;
    l->memory = &mem;
    Runtime__V1__ContainerStats *c = nl_xcalloc(1, sizeof *c);
    runtime__v1__container_stats__init(c);
    Runtime__V1__ContainerAttributes *ca = nl_xcalloc(1, sizeof *ca);
    runtime__v1__container_attributes__init(ca);
    Runtime__V1__ContainerMetadata *cm = nl_xcalloc(1, sizeof *cm);
    runtime__v1__container_metadata__init(cm);
    cm->name = "web";
    ca->id = nl_xasprintf("container-%d", i);
    ca->metadata = cm;
    c->attributes = ca;
    c->cpu = &cpu;
    c->memory = &mem;
    l->containers = nl_xcalloc(1, sizeof *l->containers);
    l->containers[0] = c;
    l->n_containers = 1;
    p->linux = l;
  }
  resp.stats = ps;
  resp.n_stats = (size_t)pods;
  nl_node_sample_t node;
  bool v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
  nl_node_sample_read(&node, "/", NULL, "/sys/fs/cgroup", v2);
  nl_stats_t st;
  nl_stats_init(&st);
  int n = 500;
  nl_buf_t out = NL_BUF_INIT;
  double t0 = cpu_s();
  for (int i = 0; i < n; i++) {
    out.len = 0;
    cpu.timestamp += 10000000000; /* 10 s later each round: rates computed */
    nl_stats_summary_json(&st, "edge-1", &node, &resp, NULL, &out);
  }
  printf("%-16s %d pods: %zu bytes, %.1f us CPU per build\n", "/stats/summary", pods, out.len,
         (cpu_s() - t0) / n * 1e6);
  t0 = cpu_s();
  for (int i = 0; i < n; i++) {
    out.len = 0;
    nl_stats_resource_metrics(&node, &resp, NULL, false, &out);
  }
  printf("%-16s %d pods: %zu bytes, %.1f us CPU per build\n", "/metrics/resource", pods, out.len,
         (cpu_s() - t0) / n * 1e6);
  t0 = cpu_s();
  for (int i = 0; i < n; i++) nl_node_sample_read(&node, "/", NULL, "/sys/fs/cgroup", v2);
  printf("%-16s %.1f us CPU per read (thread pool)\n", "node figures", (cpu_s() - t0) / n * 1e6);
  nl_buf_free(&out);
  nl_stats_free(&st);
  exit(0); /* the fixture is left to the exit */
}

/* ---- serve: the whole request against a real runtime ----------------------- */

typedef struct serve {
  uv_loop_t loop;
  nl_cri_client_t cri;
  nl_http_server_t srv;
  nl_stats_server_t stats;
  int left, done;
  const char *path;
  size_t bytes;
  int status;
} serve_t;

static void summary_route(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_stats_summary_handler(ctx, req, NULL, resp);
}
static void resource_route(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_stats_resource_handler(ctx, req, NULL, resp);
}

static void next(serve_t *s);

static void got(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {
  serve_t *s = ctx;
  if (err) {
    fprintf(stderr, "%s\n", nl_err_msg(err));
    exit(1);
  }
  s->status = resp->status;
  s->bytes = strlen(resp->body);
  if (s->left == 1 && getenv("STATS_BENCH_PRINT")) puts(resp->body);
  if (--s->left > 0) return next(s);
  s->done = 1;
}

static void next(serve_t *s) {
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", nl_http_server_port(&s->srv), s->path);
  nl_http_request_opts_t o = {.url = url, .timeout_ms = 10000};
  nl_http_request(&s->loop, &o, got, s);
}

static void bench_serve(const char *endpoint, int n) {
  serve_t s = {0};
  nl_log_set_verbosity(2); /* runtime failures show */
  uv_loop_init(&s.loop);
  nl_err_t *err = NULL;
  if (nl_cri_client_init(&s.cri, &s.loop, endpoint, NULL, &err) < 0 ||
      nl_http_server_init(&s.srv, &s.loop, NULL, &err) < 0) {
    fprintf(stderr, "%s\n", nl_err_msg(err));
    exit(1);
  }
  nl_stats_server_init(&s.stats, &s.loop, &s.cri, "edge-1", "/");
  nl_http_server_route(&s.srv, "GET", "/stats/summary", summary_route, &s.stats);
  nl_http_server_route(&s.srv, "GET", "/metrics/resource", resource_route, &s.stats);
  nl_http_server_listen(&s.srv, "127.0.0.1", 0, &err);
  static const char *const paths[] = {"/stats/summary", "/metrics/resource"};
  for (int i = 0; i < 2; i++) {
    s.path = paths[i];
    s.left = 1; /* a warm-up request: connection and first samples */
    s.done = 0;
    next(&s);
    while (!s.done) uv_run(&s.loop, UV_RUN_ONCE);
    s.left = n;
    s.done = 0;
    double t0 = cpu_s();
    uint64_t w0 = uv_hrtime();
    next(&s);
    while (!s.done) uv_run(&s.loop, UV_RUN_ONCE);
    printf("%-18s status %d, %zu bytes: %.2f ms CPU and %.2f ms wall per request\n", s.path,
           s.status, s.bytes, (cpu_s() - t0) / n * 1e3, (double)(uv_hrtime() - w0) / n / 1e6);
  }
  exit(0); /* the handles are left to the exit */
}

/* ---- pump: bytes through two socket pairs ---------------------------------- */

typedef struct pump_bench {
  uv_pipe_t a, x, y, b;
  nl_pump_stream_t ex, ey;
  nl_pump_t pump;
  size_t total, sent, received;
  char *chunk;
  uv_write_t w;
} pump_bench_t;

static void pb_write(pump_bench_t *p);
static void pb_written(uv_write_t *w, int status) {
  (void)status;
  pb_write(w->data);
}
static void pb_write(pump_bench_t *p) {
  if (p->sent >= p->total) return;
  uv_buf_t b = uv_buf_init(p->chunk, 256 * 1024);
  p->sent += b.len;
  p->w.data = p;
  uv_write(&p->w, (uv_stream_t *)&p->a, &b, 1, pb_written);
}
static void pb_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)h, (void)hint;
  static char buf[256 * 1024];
  *b = uv_buf_init(buf, sizeof buf);
}
static void pb_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  (void)b;
  if (n > 0) ((pump_bench_t *)s->data)->received += (size_t)n;
}

static void pair(uv_loop_t *loop, uv_pipe_t *l, uv_pipe_t *r) {
  int fds[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
  uv_pipe_init(loop, l, 0);
  uv_pipe_init(loop, r, 0);
  uv_pipe_open(l, fds[0]);
  uv_pipe_open(r, fds[1]);
}

static void bench_pump(int mib) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  pump_bench_t p = {0};
  p.total = (size_t)mib << 20;
  p.chunk = nl_xcalloc(1, 256 * 1024);
  pair(&loop, &p.a, &p.x);
  pair(&loop, &p.y, &p.b);
  p.b.data = &p;
  nl_pump_stream_init(&p.ex, (uv_stream_t *)&p.x);
  nl_pump_stream_init(&p.ey, (uv_stream_t *)&p.y);
  nl_pump_init(&p.pump, &p.ex.end, &p.ey.end, 0, NULL, NULL);
  nl_pump_start(&p.pump);
  uv_read_start((uv_stream_t *)&p.b, pb_alloc, pb_read);
  double t0 = cpu_s();
  uint64_t w0 = uv_hrtime();
  pb_write(&p);
  while (p.received < p.total) uv_run(&loop, UV_RUN_ONCE);
  double wall = (double)(uv_hrtime() - w0) / 1e9, cpu = cpu_s() - t0;
  printf("pump: %d MiB in %.2f s = %.0f MiB/s; process CPU %.2f s (writer and reader "
         "included), largest queue %zu KiB\n",
         mib, wall, mib / wall, cpu, p.pump.max_queued[1] / 1024);
  exit(0);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  int n = argc > 2 ? atoi(argv[2]) : 0;
  if (strcmp(mode, "metrics") == 0) bench_metrics(n ? n : 110);
  else if (strcmp(mode, "summary") == 0) bench_summary(n ? n : 110);
  else if (strcmp(mode, "serve") == 0 && argc > 2) bench_serve(argv[2], argc > 3 ? atoi(argv[3]) : 100);
  else if (strcmp(mode, "pump") == 0) bench_pump(n ? n : 1024);
  else {
    fprintf(stderr, "usage: stats_bench metrics|summary [PODS] | serve ENDPOINT [N] | pump [MIB]\n");
    return 2;
  }
  return 0;
}
