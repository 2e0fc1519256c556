/* cri_bench: unary round trips per second and client CPU per call of the CRI
 * client (cri/conn.h), against the fake CRI server run as a separate helper
 * process (so its CPU is not counted) and against a real containerd; and the
 * client's memory per in-flight call.
 *
 *   cri_bench [--fake PATH] [--calls N] [--method Version|ListPodSandbox]
 *             [--inflight N] [--refill callback|check] [--no-fake] [--no-containerd]
 *
 * The containerd endpoint comes from NANOLET_TEST_CRI_ENDPOINT (default
 * unix:///var/lib/nanolet-testenv/run/containerd.sock). Client CPU is
 * getrusage(RUSAGE_SELF) user+system over the measured calls divided by their
 * number: this process runs only the client. Memory: with the fake stalling
 * every call, K calls are put in flight; the bytes the client's counting
 * allocator (nghttp2 + protobuf-c) holds and the growth of the whole heap
 * (mallinfo2: call structs, framed requests, buffers) are divided by K. */
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cri/runtime.h"
#include "reactor/xalloc.h"

#define DEFAULT_ENDPOINT "unix:///var/lib/nanolet-testenv/run/containerd.sock"

extern char **environ;

typedef struct bench {
  uv_loop_t loop;
  nl_cri_client_t client;
  nl_grpc_mem_t mem;
  bool list; /* ListPodSandbox instead of Version */
  uint64_t started, completed, failed, target;
  int last_code;
  char last_msg[256];
  bool stopped;
  int inflight;
  bool refill_in_check; /* --refill check: top up from a check handle */
  uv_check_t refill;     /* tops the calls in flight back up after each loop turn */
} bench_t;

static void start_one(bench_t *b);
static void top_up(bench_t *b);

static void on_done(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  bench_t *b = ctx;
  b->completed++;
  if (b->completed == b->target) uv_stop(&b->loop);
  if (st->code != 0) {
    b->failed++;
    b->last_code = st->code;
    snprintf(b->last_msg, sizeof(b->last_msg), "%s", st->message);
  }
  if (!b->refill_in_check) top_up(b);
}

static void start_one(bench_t *b) {
  b->started++;
  if (b->list) {
    Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
    nl_cri_client_call(&b->client, "/runtime.v1.RuntimeService/ListPodSandbox", &req.base,
                       &runtime__v1__list_pod_sandbox_response__descriptor, 0, on_done, b);
  } else {
    Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
    req.version = "v1";
    nl_cri_client_call(&b->client, "/runtime.v1.RuntimeService/Version", &req.base,
                       &runtime__v1__version_response__descriptor, 0, on_done, b);
  }
}

/* New calls start from the completion callback, as the agent's pod workers
 * start their next step; with --refill check, from a check handle after the
 * loop turn (at da0730d the bench had to: a callback that started a call
 * crashed the client). */
static void top_up(bench_t *b) {
  while (b->started < b->target && b->started - b->completed < (uint64_t)b->inflight)
    start_one(b);
}

static void refill(uv_check_t *h) { top_up(container_of(h, bench_t, refill)); }

/* Runs n calls keeping `inflight` outstanding. Returns false on any failure. */
static bool run_calls(bench_t *b, uint64_t n, int inflight) {
  b->started = b->completed = b->failed = 0;
  b->target = n;
  b->inflight = inflight;
  top_up(b);
  if (b->refill_in_check) uv_check_start(&b->refill, refill);
  /* UV_RUN_DEFAULT as the agent's main loop: with UV_RUN_ONCE, libuv >= 1.44
   * polls without blocking in any turn that starts with an idle handle active,
   * a cost the agent does not pay. */
  while (b->completed < n) uv_run(&b->loop, UV_RUN_DEFAULT);
  uv_check_stop(&b->refill);
  return b->failed == 0;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static void stopped(nl_cri_client_t *c) {
  bench_t *b = container_of(c, bench_t, client);
  b->stopped = true;
}

static bool bench_open(bench_t *b, const char *endpoint, bool list) {
  memset(b, 0, sizeof(*b));
  uv_loop_init(&b->loop);
  nl_grpc_mem_init(&b->mem);
  uv_check_init(&b->loop, &b->refill);
  b->list = list;
  nl_cri_opts_t o = {.timeout_ms = 10000, .connect_wait_ms = 2000, .mem = &b->mem};
  nl_err_t *err = NULL;
  if (nl_cri_client_init(&b->client, &b->loop, endpoint, &o, &err) < 0) {
    fprintf(stderr, "cri_bench: %s\n", nl_err_msg(err));
    nl_err_free(&err);
    uv_close((uv_handle_t *)&b->refill, NULL);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    uv_loop_close(&b->loop);
    return false;
  }
  return true;
}

static void bench_close(bench_t *b) {
  uv_close((uv_handle_t *)&b->refill, NULL);
  nl_cri_client_stop(&b->client, stopped);
  uv_run(&b->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&b->loop) != 0) fprintf(stderr, "cri_bench: loop not closed cleanly\n");
}

static int only_inflight; /* --inflight N: measure only that depth (0: 1 and 64) */
static bool refill_in_check; /* --refill check */

static void measure(const char *target, const char *endpoint, bool list, uint64_t calls) {
  bench_t b;
  if (!bench_open(&b, endpoint, list)) return;
  b.refill_in_check = refill_in_check;
  if (!run_calls(&b, 200, 8)) { /* warm-up: connection, allocator, caches */
    printf("%-11s unavailable: code %d: %s\n", target, b.last_code, b.last_msg);
    bench_close(&b);
    return;
  }
  int levels[] = {1, 64};
  for (size_t i = 0; i < 2; i++) {
    if (only_inflight) {
      if (i) break;
      levels[0] = only_inflight;
    }
    double c0 = cpu_seconds();
    uint64_t t0 = uv_hrtime();
    bool ok = run_calls(&b, calls, levels[i]);
    double wall = (double)(uv_hrtime() - t0) / 1e9;
    double cpu = cpu_seconds() - c0;
    printf("%-11s %-15s inflight=%-3d calls=%-6llu wall=%7.3f s  %8.0f calls/s  client "
           "CPU %6.2f us/call%s\n",
           target, list ? "ListPodSandbox" : "Version", levels[i], (unsigned long long)calls,
           wall, calls / wall, cpu * 1e6 / calls, ok ? "" : "  (FAILURES)");
    if (!ok) printf("  last error: code %d: %s\n", b.last_code, b.last_msg);
  }
  bench_close(&b);
}

/* ---- the fake as a helper process ------------------------------------------ */

typedef struct helper {
  pid_t pid;
  FILE *out; /* its stdout */
  char dir[64], sock[128], control[128], endpoint[160];
} helper_t;

/* Reads helper lines until one starts with prefix (blocking: set-up, not
 * measured, and no loop is running yet). */
static bool helper_expect(helper_t *h, const char *prefix) {
  char line[512];
  while (fgets(line, sizeof(line), h->out))
    if (strncmp(line, prefix, strlen(prefix)) == 0) return true;
  return false;
}

static bool helper_start(helper_t *h, const char *exe) {
  snprintf(h->dir, sizeof(h->dir), "/tmp/nl-cribench-XXXXXX");
  if (!mkdtemp(h->dir)) return false;
  snprintf(h->sock, sizeof(h->sock), "%s/cri.sock", h->dir);
  snprintf(h->control, sizeof(h->control), "%s/faults", h->dir);
  snprintf(h->endpoint, sizeof(h->endpoint), "unix://%s", h->sock);
  int fds[2];
  if (pipe(fds) < 0) return false;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  char *argv[] = {(char *)exe, "--socket", h->sock, "--control", h->control, NULL};
  int rc = posix_spawn(&h->pid, exe, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    fprintf(stderr, "cri_bench: spawn %s: %s\n", exe, strerror(rc));
    close(fds[0]);
    return false;
  }
  h->out = fdopen(fds[0], "r");
  return helper_expect(h, "fake-cri: listening");
}

static bool helper_faults(helper_t *h, const char *text) {
  FILE *fp = fopen(h->control, "w");
  if (!fp) return false;
  fputs(text, fp);
  fclose(fp);
  kill(h->pid, SIGUSR1);
  return helper_expect(h, "fake-cri: ");
}

static void helper_stop(helper_t *h) {
  int status;
  kill(h->pid, SIGTERM);
  waitpid(h->pid, &status, 0);
  fclose(h->out);
  unlink(h->control);
  rmdir(h->dir);
}

static void measure_memory(helper_t *h) {
  const int k = 256;
  bench_t b;
  if (!bench_open(&b, h->endpoint, false)) return;
  run_calls(&b, 200, 8);
  helper_faults(h, "* stall\n");
  size_t mem0 = b.mem.in_use;
  size_t heap0 = mallinfo2().uordblks;
  b.started = b.completed = 0;
  b.target = k;
  b.inflight = k;
  top_up(&b);
  /* Until every call is a stream on the wire. */
  for (int spin = 0; spin < 10000; spin++) {
    uv_run(&b.loop, UV_RUN_NOWAIT);
    const nl_h2conn_t *conn = &b.client.conn;
    if (conn->h2 && nl_h2_active(conn->h2) == (size_t)k && !conn->flush_wanted &&
        conn->w.pending.len == 0 && !conn->w.busy)
      break;
  }
  size_t mem1 = b.mem.in_use;
  size_t heap1 = mallinfo2().uordblks;
  printf("memory      %d calls in flight: counting allocator (nghttp2+protobuf-c) %zu B/call, "
         "whole heap %zu B/call; sizeof(nl_cri_client_t) %zu B\n",
         k, (mem1 - mem0) / k, (heap1 - heap0) / k, sizeof(nl_cri_client_t));
  printf("memory      allocator peak over the run %zu B, in use idle %zu B\n", b.mem.peak, mem0);
  helper_faults(h, "clear\n");
  bench_close(&b); /* cancels the stalled calls */
}

int main(int argc, char **argv) {
  const char *fake = FAKE_CRI_EXE;
  uint64_t calls = 20000;
  bool list = false, do_fake = true, do_containerd = true;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--fake") && i + 1 < argc) fake = argv[++i];
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--method") && i + 1 < argc) list = !strcmp(argv[++i], "ListPodSandbox");
    else if (!strcmp(argv[i], "--inflight") && i + 1 < argc) only_inflight = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--refill") && i + 1 < argc) refill_in_check = !strcmp(argv[++i], "check");
    else if (!strcmp(argv[i], "--no-fake")) do_fake = false;
    else if (!strcmp(argv[i], "--no-containerd")) do_containerd = false;
    else {
      fprintf(stderr, "usage: cri_bench [--fake PATH] [--calls N] [--method Version|ListPodSandbox] "
                      "[--inflight N] [--refill callback|check] [--no-fake] "
                      "[--no-containerd]\n");
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  if (do_fake) {
    helper_t h;
    if (!helper_start(&h, fake)) {
      fprintf(stderr, "cri_bench: cannot start the fake CRI server %s\n", fake);
      return 1;
    }
    measure("fake", h.endpoint, list, calls);
    measure_memory(&h);
    helper_stop(&h);
  }
  if (do_containerd) {
    const char *ep = getenv("NANOLET_TEST_CRI_ENDPOINT");
    measure("containerd", ep && *ep ? ep : DEFAULT_ENDPOINT, list, calls / 4);
  }
  return 0;
}
