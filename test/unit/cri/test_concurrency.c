/* Many concurrent calls of the CRI client on one connection to the fake CRI
 * server: each completes exactly once with its own answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cri/image.h"
#include "cri/runtime.h"
#include "test/fakes/fake_cri_harness.h"

#define N 200

typedef struct slot {
  int calls;
  int code;
  char msg[128];
  int kind;
  int *done;
} slot_t;

/* What every slot callback records before it checks its response and counts
 * itself done. */
static void slot_record(slot_t *s, const nl_grpc_status_t *st) {
  s->calls++;
  s->code = st->code;
  snprintf(s->msg, sizeof(s->msg), "%s", st->message);
}

static void on_version(const nl_grpc_status_t *st, Runtime__V1__VersionResponse *resp, void *ctx) {
  slot_t *s = ctx;
  slot_record(s, st);
  if (st->code == 0) assert_string_equal(resp->runtime_api_version, "v1");
  (*s->done)++;
}

static void on_status(const nl_grpc_status_t *st, Runtime__V1__StatusResponse *resp, void *ctx) {
  slot_t *s = ctx;
  slot_record(s, st);
  if (st->code == 0) assert_int_equal(resp->status->n_conditions, 2);
  (*s->done)++;
}

static void on_list(const nl_grpc_status_t *st, Runtime__V1__ListPodSandboxResponse *resp,
                    void *ctx) {
  slot_t *s = ctx;
  slot_record(s, st);
  (*s->done)++;
}

static void start_kind(harness_t *h, slot_t *s, int kind, int *done) {
  memset(s, 0, sizeof(*s));
  s->code = -1;
  s->kind = kind;
  s->done = done;
  if (kind == 0) {
    Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
    nl_cri_version(&h->client, &req, on_version, s);
  } else if (kind == 1) {
    Runtime__V1__StatusRequest req = RUNTIME__V1__STATUS_REQUEST__INIT;
    nl_cri_status(&h->client, &req, on_status, s);
  } else {
    Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
    nl_cri_list_pod_sandbox(&h->client, &req, on_list, s);
  }
}

static void test_200_concurrent(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  static slot_t slots[N];
  int done = 0;
  /* Started before the connection is up: they wait, then all go at once. */
  for (int i = 0; i < N; i++) start_kind(&h, &slots[i], i % 3, &done);
  assert_int_equal(done, 0);
  assert_int_equal(nl_cri_client_pending(&h.client), N);
  harness_wait(&h, &done, N, 5000);
  for (int i = 0; i < N; i++) {
    assert_int_equal(slots[i].calls, 1);
    if (slots[i].code != 0) fail_msg("call %d: code %d: %s", i, slots[i].code, slots[i].msg);
  }
  fake_cri_stats_t st = fake_cri_stats(h.fake);
  assert_int_equal(st.calls, N);
  assert_int_equal(st.connections, 1);
  assert_int_equal(nl_cri_client_pending(&h.client), 0);
  /* Again on the established connection, with every answer delayed so that all
   * 200 are in flight at once. */
  fake_cri_fault_t d = {.kind = FAKE_CRI_ANSWER, .delay_ms = 30};
  fake_cri_set_fault(h.fake, NULL, &d);
  done = 0;
  for (int i = 0; i < N; i++) start_kind(&h, &slots[i], i % 3, &done);
  int max_open = 0;
  while (done < N) {
    uv_run(&h.loop, UV_RUN_ONCE);
    int open = (int)fake_cri_stats(h.fake).open_streams;
    if (open > max_open) max_open = open;
  }
  assert_int_equal(max_open, N);
  for (int i = 0; i < N; i++) {
    assert_int_equal(slots[i].calls, 1);
    assert_int_equal(slots[i].code, 0);
  }
  harness_finish(&h);
}

/* Per-method faults among 200 concurrent calls: each call gets its own method's
 * outcome, and the stalled ones time out without disturbing the others. */
static void test_200_mixed_faults(void **state) {
  nl_cri_opts_t o = {.timeout_ms = 300, .backoff_initial_ms = 20, .backoff_max_ms = 100};
  harness_t h;
  harness_start(&h, &o);
  nl_err_t *err = NULL;
  assert_int_equal(fake_cri_apply_line(h.fake, "Status status 8 after=5 too many", &err), 0);
  assert_int_equal(fake_cri_apply_line(h.fake, "ListPodSandbox stall", &err), 0);
  assert_int_equal(fake_cri_apply_line(h.fake, "Version delay 10", &err), 0);
  static slot_t slots[N];
  int done = 0;
  for (int i = 0; i < N; i++) start_kind(&h, &slots[i], i % 3, &done);
  harness_wait(&h, &done, N, 5000);
  for (int i = 0; i < N; i++) {
    assert_int_equal(slots[i].calls, 1);
    int want = slots[i].kind == 0 ? 0 : slots[i].kind == 1 ? 8 : 4;
    if (slots[i].code != want)
      fail_msg("call %d (kind %d): want %d, got %d: %s", i, slots[i].kind, want, slots[i].code,
               slots[i].msg);
    if (slots[i].kind == 1) assert_string_equal(slots[i].msg, "too many");
  }
  fake_cri_clear_faults(h.fake);
  /* Let the cancellations reach the fake. */
  for (int spin = 0; spin < 100 && fake_cri_stats(h.fake).open_streams > 0; spin++)
    harness_sleep(&h, 5);
  fake_cri_stats_t st = fake_cri_stats(h.fake);
  assert_int_equal(st.open_streams, 0);
  assert_int_equal(st.cancelled, (N + 0) / 3);
  assert_int_equal(st.connections, 1);
  harness_finish(&h);
}

/* ---- pod lifecycles ------------------------------------------------------------- */

#define PODS 25

typedef struct pod {
  harness_t *h;
  int i;
  int step;
  char sandbox_id[80];
  char container_id[80];
  char name[32];
  int *done;
  char error[256];
} pod_t;

static void pod_next(pod_t *p);

static bool pod_check(pod_t *p, const nl_grpc_status_t *st, const char *what) {
  if (st->code == 0) return true;
  snprintf(p->error, sizeof(p->error), "pod %d: %s: code %d: %s", p->i, what, st->code,
           st->message);
  (*p->done)++;
  return false;
}

static void on_run(const nl_grpc_status_t *st, Runtime__V1__RunPodSandboxResponse *r, void *ctx) {
  pod_t *p = ctx;
  if (!pod_check(p, st, "RunPodSandbox")) return;
  snprintf(p->sandbox_id, sizeof(p->sandbox_id), "%s", r->pod_sandbox_id);
  pod_next(p);
}

static void on_create(const nl_grpc_status_t *st, Runtime__V1__CreateContainerResponse *r,
                      void *ctx) {
  pod_t *p = ctx;
  if (!pod_check(p, st, "CreateContainer")) return;
  snprintf(p->container_id, sizeof(p->container_id), "%s", r->container_id);
  pod_next(p);
}

static void on_start(const nl_grpc_status_t *st, Runtime__V1__StartContainerResponse *r,
                     void *ctx) {
  pod_t *p = ctx;
  if (pod_check(p, st, "StartContainer")) pod_next(p);
}

static void on_cstatus(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *r,
                       void *ctx) {
  pod_t *p = ctx;
  if (!pod_check(p, st, "ContainerStatus")) return;
  assert_int_equal(r->status->state, RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING);
  assert_string_equal(r->status->metadata->name, "app");
  assert_int_equal(r->status->n_labels, 1);
  assert_string_equal(r->status->labels[0]->value, p->name);
  pod_next(p);
}

static void on_exec(const nl_grpc_status_t *st, Runtime__V1__ExecSyncResponse *r, void *ctx) {
  pod_t *p = ctx;
  if (!pod_check(p, st, "ExecSync")) return;
  char want[64];
  snprintf(want, sizeof(want), "echo %s\n", p->name);
  assert_int_equal(r->stdout.len, strlen(want));
  assert_memory_equal(r->stdout.data, want, r->stdout.len);
  assert_int_equal(r->exit_code, 0);
  pod_next(p);
}

static void on_list_c(const nl_grpc_status_t *st, Runtime__V1__ListContainersResponse *r,
                      void *ctx) {
  pod_t *p = ctx;
  if (!pod_check(p, st, "ListContainers")) return;
  assert_int_equal(r->n_containers, 1);
  assert_string_equal(r->containers[0]->id, p->container_id);
  pod_next(p);
}

static void on_stop_sb(const nl_grpc_status_t *st, Runtime__V1__StopPodSandboxResponse *r,
                       void *ctx) {
  pod_t *p = ctx;
  if (pod_check(p, st, "StopPodSandbox")) pod_next(p);
}

static void on_sb_status(const nl_grpc_status_t *st, Runtime__V1__PodSandboxStatusResponse *r,
                         void *ctx) {
  pod_t *p = ctx;
  if (!pod_check(p, st, "PodSandboxStatus")) return;
  assert_int_equal(r->status->state, RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY);
  assert_string_equal(r->status->metadata->name, p->name);
  pod_next(p);
}

static void on_remove_sb(const nl_grpc_status_t *st, Runtime__V1__RemovePodSandboxResponse *r,
                         void *ctx) {
  pod_t *p = ctx;
  if (pod_check(p, st, "RemovePodSandbox")) pod_next(p);
}

static void pod_next(pod_t *p) {
  nl_cri_client_t *c = &p->h->client;
  Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  md.name = p->name;
  md.uid = p->name;
  md.namespace_ = "default";
  Runtime__V1__PodSandboxConfig cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
  cfg.metadata = &md;
  cfg.log_directory = "/var/log/pods/x";
  Runtime__V1__ContainerConfig__LabelsEntry lab = RUNTIME__V1__CONTAINER_CONFIG__LABELS_ENTRY__INIT;
  lab.key = "pod";
  lab.value = p->name;
  Runtime__V1__ContainerConfig__LabelsEntry *labs[] = {&lab};
  switch (p->step++) {
  case 0: {
    Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
    req.config = &cfg;
    nl_cri_run_pod_sandbox(c, &req, on_run, p);
    break;
  }
  case 1: {
    Runtime__V1__ContainerMetadata cm = RUNTIME__V1__CONTAINER_METADATA__INIT;
    cm.name = "app";
    Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
    img.image = "localhost/busybox:latest";
    Runtime__V1__ContainerConfig cc = RUNTIME__V1__CONTAINER_CONFIG__INIT;
    cc.metadata = &cm;
    cc.image = &img;
    cc.log_path = "app/0.log";
    cc.n_labels = 1;
    cc.labels = labs;
    Runtime__V1__CreateContainerRequest req = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
    req.pod_sandbox_id = p->sandbox_id;
    req.config = &cc;
    req.sandbox_config = &cfg;
    nl_cri_create_container(c, &req, on_create, p);
    break;
  }
  case 2: {
    Runtime__V1__StartContainerRequest req = RUNTIME__V1__START_CONTAINER_REQUEST__INIT;
    req.container_id = p->container_id;
    nl_cri_start_container(c, &req, on_start, p);
    break;
  }
  case 3: {
    Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
    req.container_id = p->container_id;
    nl_cri_container_status(c, &req, on_cstatus, p);
    break;
  }
  case 4: {
    char *cmd[] = {"echo", p->name};
    Runtime__V1__ExecSyncRequest req = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
    req.container_id = p->container_id;
    req.n_cmd = 2;
    req.cmd = cmd;
    req.timeout = 5;
    nl_cri_exec_sync(c, &req, on_exec, p);
    break;
  }
  case 5: {
    Runtime__V1__ContainerFilter f = RUNTIME__V1__CONTAINER_FILTER__INIT;
    f.pod_sandbox_id = p->sandbox_id;
    Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
    req.filter = &f;
    nl_cri_list_containers(c, &req, on_list_c, p);
    break;
  }
  case 6: {
    Runtime__V1__StopPodSandboxRequest req = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;
    req.pod_sandbox_id = p->sandbox_id;
    nl_cri_stop_pod_sandbox(c, &req, on_stop_sb, p);
    break;
  }
  case 7: {
    Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
    req.pod_sandbox_id = p->sandbox_id;
    nl_cri_pod_sandbox_status(c, &req, on_sb_status, p);
    break;
  }
  case 8: {
    Runtime__V1__RemovePodSandboxRequest req = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
    req.pod_sandbox_id = p->sandbox_id;
    nl_cri_remove_pod_sandbox(c, &req, on_remove_sb, p);
    break;
  }
  default:
    (*p->done)++;
  }
}

static void test_concurrent_pod_lifecycles(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  fake_cri_add_image(h.fake, "localhost/busybox:latest");
  static pod_t pods[PODS];
  int done = 0;
  for (int i = 0; i < PODS; i++) {
    pods[i] = (pod_t){.h = &h, .i = i, .done = &done};
    snprintf(pods[i].name, sizeof(pods[i].name), "pod-%d", i);
    pod_next(&pods[i]);
  }
  harness_wait(&h, &done, PODS, 10000);
  for (int i = 0; i < PODS; i++) {
    if (pods[i].error[0]) fail_msg("%s", pods[i].error);
    assert_int_equal(pods[i].step, 10);
  }
  assert_int_equal(fake_cri_sandbox_count(h.fake), 0);
  assert_int_equal(fake_cri_container_count(h.fake), 0);
  assert_int_equal(fake_cri_stats(h.fake).calls, PODS * 9);
  harness_finish(&h);
}

/* CreateContainer with an image the runtime does not have: NOT_FOUND naming it. */
static void on_create_missing(const nl_grpc_status_t *st, Runtime__V1__CreateContainerResponse *r,
                              void *ctx) {
  slot_t *s = ctx;
  slot_record(s, st);
  (*s->done)++;
}

static void test_not_found_errors(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  int done = 0;
  slot_t s = {.done = &done};
  Runtime__V1__CreateContainerRequest req = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
  req.pod_sandbox_id = "nope";
  nl_cri_create_container(&h.client, &req, on_create_missing, &s);
  harness_wait(&h, &done, 1, 3000);
  assert_int_equal(s.code, NL_GRPC_NOT_FOUND);
  assert_non_null(strstr(s.msg, "\"nope\""));
  harness_finish(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_200_concurrent),
      cmocka_unit_test(test_200_mixed_faults),
      cmocka_unit_test(test_concurrent_pod_lifecycles),
      cmocka_unit_test(test_not_found_errors),
  };
  /* NL_TEST_FILTER=test_name runs one test (cmocka glob). */
  if (getenv("NL_TEST_FILTER")) cmocka_set_test_filter(getenv("NL_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
