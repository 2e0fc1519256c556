#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dirent.h>
#include <unistd.h>

#include "managers/logrotate.h"
#include "test/fakes/fake_cri_harness.h"

static char dir[64];

static void write_file(const char *name, size_t size) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (size_t i = 0; i < size; i++) fputc('x', f);
  fclose(f);
}

/* The directory's names, sorted, space separated. */
static char *listing(void) {
  static char out[1024];
  struct dirent **ents;
  int n = scandir(dir, &ents, NULL, alphasort);
  out[0] = 0;
  for (int i = 0; i < n; i++) {
    if (ents[i]->d_name[0] != '.')
      snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", out[0] ? " " : "",
               ents[i]->d_name);
    free(ents[i]);
  }
  free(ents);
  return out;
}

static int setup(void **state) {
  strcpy(dir, "/tmp/nl-logrotate.XXXXXX");
  assert_non_null(mkdtemp(dir));
  return 0;
}

static int teardown(void **state) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd);
}

static const time_t T0 = 1714550400; /* 2024-05-01 08:00:00 UTC */

static void small_file_stays(void **state) {
  write_file("0.log", 100);
  char path[256], *rotated = (char *)1;
  snprintf(path, sizeof path, "%s/0.log", dir);
  nl_err_t *err = NULL;
  assert_int_equal(nl_logrotate_files(path, 1024, 5, T0, &rotated, &err), 0);
  assert_null(rotated);
  assert_string_equal(listing(), "0.log");
  snprintf(path, sizeof path, "%s/gone.log", dir);
  assert_int_equal(nl_logrotate_files(path, 1024, 5, T0, &rotated, &err), 0);
}

/* Over the size: renamed with a UTC timestamp; the oldest rotated files go so
 * that, with the live file, containerLogMaxFiles remain; *.tmp leftovers go. */
static void rotates_and_prunes(void **state) {
  write_file("0.log", 2048);
  write_file("0.log.20240101-000000", 10);
  write_file("0.log.20240201-000000", 10);
  write_file("0.log.20240301-000000", 10);
  write_file("0.log.20240301-000000.tmp", 10);
  write_file("1.log", 10); /* another instance: not this file's */
  char path[256], *rotated = NULL;
  snprintf(path, sizeof path, "%s/0.log", dir);
  nl_err_t *err = NULL;
  assert_int_equal(nl_logrotate_files(path, 1024, 3, T0, &rotated, &err), 1);
  char want[256];
  snprintf(want, sizeof want, "%s/0.log.20240501-080000", dir);
  assert_string_equal(rotated, want);
  free(rotated);
  assert_string_equal(listing(), "0.log.20240301-000000 0.log.20240501-080000 1.log");
  /* The runtime reopens 0.log; the next rotation keeps one old file again. */
  write_file("0.log", 4096);
  assert_int_equal(nl_logrotate_files(path, 1024, 3, T0 + 10, &rotated, &err), 1);
  free(rotated);
  assert_string_equal(listing(), "0.log.20240501-080000 0.log.20240501-080010 1.log");
  /* containerLogMaxFiles 2: no older file survives a rotation. */
  write_file("0.log", 4096);
  assert_int_equal(nl_logrotate_files(path, 1024, 2, T0 + 20, &rotated, &err), 1);
  free(rotated);
  assert_string_equal(listing(), "0.log.20240501-080020 1.log");
}

/* ---- the rotator on a loop, against the fake CRI ---- */

typedef struct lr {
  harness_t h;
  nl_logrotate_t r;
  int replies, stopped;
  char sandbox[72], container[72];
} lr_t;

static void on_sandbox(const nl_grpc_status_t *st, Runtime__V1__RunPodSandboxResponse *resp, void *ctx) {
  lr_t *t = ctx;
  assert_int_equal(st->code, 0);
  snprintf(t->sandbox, sizeof t->sandbox, "%s", resp->pod_sandbox_id);
  t->replies++;
}

static void on_created(const nl_grpc_status_t *st, Runtime__V1__CreateContainerResponse *resp, void *ctx) {
  lr_t *t = ctx;
  assert_int_equal(st->code, 0);
  snprintf(t->container, sizeof t->container, "%s", resp->container_id);
  t->replies++;
}

static void on_started(const nl_grpc_status_t *st, Runtime__V1__StartContainerResponse *resp, void *ctx) {
  assert_int_equal(st->code, 0);
  ((lr_t *)ctx)->replies++;
}

static void on_rotator_stopped(nl_logrotate_t *r) { container_of(r, lr_t, r)->stopped++; }

/* A running container whose CRI log is <dir>/c.log. */
static void run_container(lr_t *t) {
  fake_cri_add_image(t->h.fake, "busybox");
  Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  md.name = md.uid = "p", md.namespace_ = "default";
  Runtime__V1__PodSandboxConfig sc = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
  sc.metadata = &md;
  sc.log_directory = dir;
  Runtime__V1__RunPodSandboxRequest rq = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
  rq.config = &sc;
  nl_cri_run_pod_sandbox(&t->h.client, &rq, on_sandbox, t);
  harness_wait(&t->h, &t->replies, 1, 5000);
  Runtime__V1__ContainerMetadata cm = RUNTIME__V1__CONTAINER_METADATA__INIT;
  cm.name = "c";
  Runtime__V1__ImageSpec im = RUNTIME__V1__IMAGE_SPEC__INIT;
  im.image = "busybox";
  Runtime__V1__ContainerConfig cc = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  cc.metadata = &cm, cc.image = &im, cc.log_path = "c.log";
  Runtime__V1__CreateContainerRequest cr = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
  cr.pod_sandbox_id = t->sandbox, cr.config = &cc, cr.sandbox_config = &sc;
  nl_cri_create_container(&t->h.client, &cr, on_created, t);
  harness_wait(&t->h, &t->replies, 2, 5000);
  Runtime__V1__StartContainerRequest st = RUNTIME__V1__START_CONTAINER_REQUEST__INIT;
  st.container_id = t->container;
  nl_cri_start_container(&t->h.client, &st, on_started, t);
  harness_wait(&t->h, &t->replies, 3, 5000);
}

/* Rotation rounds ask the runtime for a container's log path once: with
 * ContainerStatus failing after the first round, the file is still rotated. */
static void log_path_asked_once(void **state) {
  lr_t t;
  memset(&t, 0, sizeof t);
  harness_start(&t.h, NULL);
  run_container(&t);
  write_file("c.log", 100);
  nl_logrotate_init(&t.r, &t.h.loop, &t.h.client, 50, 5, 20);
  nl_logrotate_start(&t.r);
  harness_wait(&t.h, (const int *)&t.r.rotations, 1, 5000);
  nl_err_t *err = NULL;
  assert_int_equal(fake_cri_apply_line(t.h.fake, "ContainerStatus status 14 unavailable", &err), 0);
  write_file("c.log", 100);
  harness_wait(&t.h, (const int *)&t.r.rotations, 2, 5000);
  nl_logrotate_stop(&t.r, on_rotator_stopped);
  harness_wait(&t.h, &t.stopped, 1, 5000);
  harness_finish(&t.h);
}

/* A rotation the runtime cannot follow (ReopenContainerLog fails) is undone:
 * the runtime still writes to the file under its old name. */
static void failed_reopen_undone(void **state) {
  lr_t t;
  memset(&t, 0, sizeof t);
  harness_start(&t.h, NULL);
  run_container(&t);
  write_file("c.log", 100);
  nl_err_t *err = NULL;
  assert_int_equal(fake_cri_apply_line(t.h.fake, "ReopenContainerLog status 2 no log", &err), 0);
  nl_logrotate_init(&t.r, &t.h.loop, &t.h.client, 50, 5, 20);
  nl_logrotate_start(&t.r);
  harness_wait(&t.h, &t.r.rounds, 2, 5000);
  assert_int_equal(t.r.rotations, 0);
  assert_string_equal(listing(), "c.log");
  nl_logrotate_stop(&t.r, on_rotator_stopped);
  harness_wait(&t.h, &t.stopped, 1, 5000);
  harness_finish(&t.h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(small_file_stays, setup, teardown),
      cmocka_unit_test_setup_teardown(rotates_and_prunes, setup, teardown),
      cmocka_unit_test_setup_teardown(log_path_asked_once, setup, teardown),
      cmocka_unit_test_setup_teardown(failed_reopen_undone, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
