/* 500 probe workers on one loop: what they cost nanolet's process in CPU.
 *
 *   probes_bench [WORKERS=500] [SECONDS=60] [PERIOD_S=10]
 *
 * A child process serves the targets on its own loop (an HTTP server and a TCP
 * listener on 127.0.0.1, and the fake CRI server for exec), so the parent's
 * getrusage counts only the probe side: the manager, its timers, the HTTP
 * client, connects, and ExecSync over the CRI client. Workers are split evenly
 * between httpGet, tcpSocket and exec liveness probes. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cri/runtime.h"
#include "managers/probe.h"
#include "reactor/http_server.h"
#include "reactor/xalloc.h"
#include "test/fakes/fake_cri.h"

static void h_ok(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  (void)ctx;
  (void)req;
  nl_http_resp_send_str(resp, 200, "ok");
}

static void on_conn(uv_stream_t *l, int st) {
  if (st < 0) return;
  uv_tcp_t *c = malloc(sizeof *c);
  uv_tcp_init(l->loop, c);
  if (uv_accept(l, (uv_stream_t *)c) == 0) uv_close((uv_handle_t *)c, (uv_close_cb)free);
}

/* The child: targets until killed. Writes "http tcp\n" ports to fd. */
static void serve(int fd, const char *sock) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_err_t *err = NULL;
  nl_http_server_t srv;
  nl_http_server_opts_t o = {.max_conns = 4096};
  nl_http_server_init(&srv, &loop, &o, &err);
  nl_http_server_route(&srv, NULL, "/", h_ok, NULL);
  if (nl_http_server_listen(&srv, "127.0.0.1", 0, &err) < 0) exit(2);
  uv_tcp_t tcp;
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", 0, &a);
  uv_tcp_init(&loop, &tcp);
  uv_tcp_bind(&tcp, (struct sockaddr *)&a, 0);
  uv_listen((uv_stream_t *)&tcp, 1024, on_conn);
  int len = sizeof a;
  uv_tcp_getsockname(&tcp, (struct sockaddr *)&a, &len);
  fake_cri_t *f = fake_cri_new(&loop, sock, &err);
  if (!f) exit(2);
  /* one running container for every exec probe */
  char cid[128];
  if (fake_cri_add_container(f, "p", "c", "localhost/busybox:1.36", cid, sizeof cid)) exit(2);
  dprintf(fd, "%d %d %s\n", nl_http_server_port(&srv), ntohs(a.sin_port), cid);
  close(fd);
  uv_run(&loop, UV_RUN_DEFAULT);
  exit(0);
}

typedef struct bench {
  uv_loop_t loop;
  nl_cri_client_t cri;
  nl_probe_manager_t m;
  nl_rt_pod_status_t *st; /* one per pod */
  char cid[128];
} bench_t;

static bench_t B;

static const nl_rt_pod_status_t *status_of(void *ctx, const char *uid) {
  (void)ctx;
  return &B.st[atoi(uid)];
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static void on_timer(uv_timer_t *t) { uv_stop(t->loop); }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 500;
  int secs = argc > 2 ? atoi(argv[2]) : 60;
  int period = argc > 3 ? atoi(argv[3]) : 10;
  char dir[] = "/tmp/nl-probebench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char sock[128];
  snprintf(sock, sizeof sock, "%s/cri.sock", dir);
  int p[2];
  if (pipe(p) < 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    close(p[0]);
    serve(p[1], sock);
  }
  close(p[1]);
  char buf[256] = {0};
  if (read(p[0], buf, sizeof buf - 1) <= 0) return 1;
  int http_port, tcp_port;
  if (sscanf(buf, "%d %d %127s", &http_port, &tcp_port, B.cid) != 3) return 1;

  uv_loop_init(&B.loop);
  nl_err_t *err = NULL;
  char ep[160];
  snprintf(ep, sizeof ep, "unix://%s", sock);
  if (nl_cri_client_init(&B.cri, &B.loop, ep, NULL, &err) < 0) return 1;
  nl_probe_manager_opts_t o = {.status = status_of};
  nl_probe_manager_init(&B.m, &B.loop, &B.cri, &o, &err);
  B.st = nl_xcalloc((size_t)n, sizeof *B.st);
  static char *ips[] = {"127.0.0.1"};
  for (int i = 0; i < n; i++) {
    nl_rt_container_t *c = nl_xcalloc(1, sizeof *c);
    c->id = i % 3 == 2 ? B.cid : nl_xasprintf("c%d", i);
    c->name = "c";
    c->state = NL_RT_CONTAINER_RUNNING;
    c->started_at = 1;
    B.st[i] = (nl_rt_pod_status_t){.containers = c, .n_containers = 1, .ips = ips, .n_ips = 1};
    char y[1024];
    char pr[128];
    if (i % 3 == 0)
      snprintf(pr, sizeof pr, "httpGet: {path: /healthz, port: %d}", http_port);
    else if (i % 3 == 1)
      snprintf(pr, sizeof pr, "tcpSocket: {port: %d}", tcp_port);
    else
      snprintf(pr, sizeof pr, "exec: {command: [\"true\"]}");
    snprintf(y, sizeof y,
             "apiVersion: v1\nkind: Pod\nmetadata: {name: p%d, namespace: default, uid: '%d'}\n"
             "spec:\n  containers:\n  - name: c\n    image: busybox\n    livenessProbe:\n"
             "      %s\n      periodSeconds: %d\n",
             i, i, pr, period);
    nl_pod_t *pod = NULL;
    if (nl_pod_decode(y, strlen(y), "bench", &pod, &err) < 0) {
      fprintf(stderr, "%s\n", nl_err_msg(err));
      return 1;
    }
    nl_pod_set_defaults(pod);
    nl_probe_manager_add_pod(&B.m, pod);
    nl_pod_free(pod);
  }
  uv_timer_t t;
  uv_timer_init(&B.loop, &t);
  /* warm-up: one period (the first probes are spread over it) */
  uv_timer_start(&t, on_timer, (uint64_t)period * 1000, 0);
  uv_run(&B.loop, UV_RUN_DEFAULT);
  uint64_t c0 = B.m.checks_done;
  double cpu0 = cpu_s();
  uint64_t w0 = uv_hrtime();
  uv_timer_start(&t, on_timer, (uint64_t)secs * 1000, 0);
  uv_run(&B.loop, UV_RUN_DEFAULT);
  double cpu = cpu_s() - cpu0;
  double wall = (uv_hrtime() - w0) / 1e9;
  uint64_t checks = B.m.checks_done - c0;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("workers %d, period %d s, %.1f s measured: %llu checks (%.1f/s), CPU %.3f s = %.2f %% "
         "of one core, %.1f us per check, max RSS %ld KiB\n",
         n, period, wall, (unsigned long long)checks, checks / wall, cpu, 100 * cpu / wall,
         checks ? 1e6 * cpu / (double)checks : 0, ru.ru_maxrss);
  fflush(stdout);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  unlink(sock);
  rmdir(dir);
  _exit(0); /* the bench does not tear down 500 workers */
}
