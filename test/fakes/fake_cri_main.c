/* nanolet-fake-cri: the fake CRI server as a helper process, for benchmarks and
 * end-to-end fault tests.
 *
 *   nanolet-fake-cri --socket PATH [--control FILE] [--fault RULE]... [--image REF]...
 *                    [--cgroup-driver systemd|cgroupfs]
 *
 * Without --cgroup-driver, RuntimeConfig is not implemented (as containerd
 * before 1.7); with it, RuntimeConfig answers that driver.
 * Prints "fake-cri: listening on PATH" on stdout once the socket accepts
 * connections. SIGUSR1 clears the faults and applies the control file's lines
 * (syntax of fake_cri_apply_line() in fake_cri.h) and prints "fake-cri: N
 * rule(s) applied" (or the error); SIGUSR2 prints the counters; SIGTERM and
 * SIGINT stop it cleanly (exit 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/buf.h"
#include "test/fakes/fake_cri.h"

typedef struct app {
  uv_loop_t loop;
  fake_cri_t *fake;
  const char *control;
  uv_signal_t sig_reload, sig_stats, sig_term, sig_int;
} app_t;

static void usage(void) {
  fprintf(stderr, "usage: nanolet-fake-cri --socket PATH [--control FILE] [--fault RULE]... "
                  "[--image REF]... [--cgroup-driver systemd|cgroupfs]\n");
  exit(2);
}

/* A control file is a few lines on a local disk: read it at once (this helper
 * is not the agent; its loop serves tests only). */
static void reload(uv_signal_t *h, int signum) {
  app_t *a = h->data;
  if (!a->control) {
    printf("fake-cri: no --control file\n");
    fflush(stdout);
    return;
  }
  FILE *fp = fopen(a->control, "r");
  nl_buf_t text = NL_BUF_INIT;
  if (fp) {
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) nl_buf_append(&text, chunk, n);
    fclose(fp);
  }
  nl_err_t *err = NULL;
  int n = fake_cri_apply_text(a->fake, text.data ? text.data : "", &err);
  if (n < 0)
    printf("fake-cri: %s: %s\n", a->control, nl_err_msg(err));
  else
    printf("fake-cri: %d rule(s) applied\n", n);
  fflush(stdout);
  nl_err_free(&err);
  nl_buf_free(&text);
}

static void stats(uv_signal_t *h, int signum) {
  app_t *a = h->data;
  fake_cri_stats_t s = fake_cri_stats(a->fake);
  printf("fake-cri: calls=%llu answered=%llu faults=%llu connections=%llu open_conns=%llu "
         "open_streams=%llu cancelled=%llu\n",
         (unsigned long long)s.calls, (unsigned long long)s.answered,
         (unsigned long long)s.faults, (unsigned long long)s.connections,
         (unsigned long long)s.open_conns, (unsigned long long)s.open_streams,
         (unsigned long long)s.cancelled);
  fflush(stdout);
}

static void stopped(void *ctx) {
  app_t *a = ctx;
  uv_close((uv_handle_t *)&a->sig_reload, NULL);
  uv_close((uv_handle_t *)&a->sig_stats, NULL);
  uv_close((uv_handle_t *)&a->sig_term, NULL);
  uv_close((uv_handle_t *)&a->sig_int, NULL);
}

static void terminate(uv_signal_t *h, int signum) {
  app_t *a = h->data;
  if (!a->fake) return;
  fake_cri_t *f = a->fake;
  a->fake = NULL;
  fake_cri_stop(f, stopped, a);
}

static void sig(app_t *a, uv_signal_t *h, uv_signal_cb cb, int signum) {
  uv_signal_init(&a->loop, h);
  h->data = a;
  uv_signal_start(h, cb, signum);
}

int main(int argc, char **argv) {
  app_t a = {0};
  const char *socket = NULL, *cgroup_driver = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--cgroup-driver") == 0 && i + 1 < argc &&
             (strcmp(argv[i + 1], "systemd") == 0 || strcmp(argv[i + 1], "cgroupfs") == 0))
      cgroup_driver = argv[++i];
    else if (strcmp(argv[i], "--control") == 0 && i + 1 < argc)
      a.control = argv[++i];
    else if ((strcmp(argv[i], "--fault") == 0 || strcmp(argv[i], "--image") == 0) && i + 1 < argc)
      i++; /* applied once the fake exists */
    else
      usage();
  }
  if (!socket) usage();
  uv_loop_init(&a.loop);
  nl_err_t *err = NULL;
  a.fake = fake_cri_new(&a.loop, socket, &err);
  if (!a.fake) {
    fprintf(stderr, "nanolet-fake-cri: %s\n", nl_err_msg(err));
    nl_err_free(&err);
    uv_run(&a.loop, UV_RUN_DEFAULT);
    uv_loop_close(&a.loop);
    return 1;
  }
  if (cgroup_driver) fake_cri_set_cgroup_driver(a.fake, cgroup_driver);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--fault") == 0 && fake_cri_apply_line(a.fake, argv[i + 1], &err) < 0) {
      fprintf(stderr, "nanolet-fake-cri: --fault: %s\n", nl_err_msg(err));
      return 2;
    }
    if (strcmp(argv[i], "--image") == 0) fake_cri_add_image(a.fake, argv[i + 1]);
    if (strcmp(argv[i], "--fault") == 0 || strcmp(argv[i], "--image") == 0 ||
        strcmp(argv[i], "--socket") == 0 || strcmp(argv[i], "--control") == 0 ||
        strcmp(argv[i], "--cgroup-driver") == 0)
      i++;
  }
  sig(&a, &a.sig_reload, reload, SIGUSR1);
  sig(&a, &a.sig_stats, stats, SIGUSR2);
  sig(&a, &a.sig_term, terminate, SIGTERM);
  sig(&a, &a.sig_int, terminate, SIGINT);
  printf("fake-cri: listening on %s\n", socket);
  fflush(stdout);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  return uv_loop_close(&a.loop) == 0 ? 0 : 1;
}
