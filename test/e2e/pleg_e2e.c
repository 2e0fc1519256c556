/* PLEG against the real containerd (suite e2e). The endpoint comes from
 * NANOLET_TEST_CRI_ENDPOINT (or NANOLET_TEST_CRI_SOCKET); without one the test
 * FAILS. It creates a sandbox and a container itself, with the labels the
 * kubelet puts on them, and watches PLEG report them: ContainerStarted,
 * ContainerDied (exit code in the cache), ContainerRemoved, then the pod gone.
 * Everything is labelled nanolet-e2e-pleg=1 and removed at start and end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "managers/pleg.h"
#include "managers/status.h"
#include "reactor/xalloc.h"
#include "test/e2e/cri_sync.h"

#define LABEL_KEY "nanolet-e2e-pleg"
#define BUSYBOX "localhost/busybox:latest"

static nl_pleg_t pleg;
static bool pleg_stopped;

/* ---- recorded events ---- */
typedef struct rec_event {
  char *uid;
  nl_pleg_event_type_t type;
  char *id;
} rec_event_t;
static rec_event_t events[256];
static size_t n_events;

static void on_event(const nl_pleg_event_t *ev, void *ctx) {
  (void)ctx;
  assert_true(n_events < 256);
  assert_int_not_equal(ev->type, NL_PLEG_CONTAINER_CHANGED); /* never delivered */
  events[n_events++] = (rec_event_t){strdup(ev->uid), ev->type, strdup(ev->container_id)};
}

static bool seen(const char *uid, nl_pleg_event_type_t type, const char *id) {
  for (size_t i = 0; i < n_events; i++)
    if (!strcmp(events[i].uid, uid) && events[i].type == type && !strcmp(events[i].id, id))
      return true;
  return false;
}

static size_t count(const char *uid, nl_pleg_event_type_t type, const char *id) {
  size_t n = 0;
  for (size_t i = 0; i < n_events; i++)
    n += !strcmp(events[i].uid, uid) && events[i].type == type && !strcmp(events[i].id, id);
  return n;
}

static size_t count_uid(const char *uid) {
  size_t n = 0;
  for (size_t i = 0; i < n_events; i++) n += !strcmp(events[i].uid, uid);
  return n;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  return remove(path) < 0 ? -1 : 0;
}

/* The sandboxes, then the log directory the containers wrote (lifecycle's). */
static void cleanup(void) {
  cri_sync_remove_labelled(LABEL_KEY);
  char logdir[128];
  snprintf(logdir, sizeof logdir, "/tmp/nanolet-e2e-pleg-%d", (int)getpid());
  nftw(logdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void on_pleg_stopped(nl_pleg_t *p) { pleg_stopped = true; }

static int setup(void **state) {
  nl_cri_opts_t o = {.timeout_ms = 60000};
  cri_sync_open(&o);
  cleanup();
  return 0;
}

static int teardown(void **state) {
  cleanup();
  assert_true(cri_sync_stop());
  assert_int_equal(uv_loop_close(&loop), 0);
  for (size_t i = 0; i < n_events; i++) {
    free(events[i].uid);
    free(events[i].id);
  }
  return 0;
}

typedef struct newer {
  bool called;
  bool had_status;
  int64_t timestamp;
} newer_t;

static void on_newer(const nl_rt_pod_status_t *st, void *ctx) {
  newer_t *n = ctx;
  n->called = true;
  n->had_status = st != NULL;
  n->timestamp = st ? st->timestamp : 0;
}

/* The v1 status generated from the real cache for a pod with container "app". */
static nl_pod_status_t *v1_status(const char *name, const char *uid, const nl_rt_pod_status_t *rt,
                                  const nl_pod_status_t *old) {
  char y[512];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: nanolet-e2e, uid: %s}\n"
           "spec:\n  restartPolicy: Never\n  containers:\n  - {name: app, image: %s}\n",
           name, uid, BUSYBOX);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(y, strlen(y), "e2e", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_pod_set_defaults(pod);
  nl_pod_status_t *s =
      nl_pod_status_generate(pod, rt, NULL, old, false, nl_pleg_realtime_ns(NULL), NULL, NULL);
  nl_pod_free(pod);
  return s;
}

static void lifecycle(void **state) {
  char name[64], uid[64], logdir[128];
  snprintf(name, sizeof name, "nanolet-e2e-pleg-%d", (int)getpid());
  snprintf(uid, sizeof uid, "00000000-e2e0-91e9-0000-%012d", (int)getpid());
  snprintf(logdir, sizeof logdir, "/tmp/%s", name);

  assert_int_equal(nl_pleg_init(&pleg, &loop, &client, 200, on_event, NULL), 0);
  nl_err_t *err = NULL;
  assert_false(nl_pleg_healthy(&pleg, nl_pleg_monotonic_ns(NULL), &err));
  assert_string_equal(nl_err_msg(err), "pleg has yet to be successful");
  nl_err_free(&err);
  nl_pleg_start(&pleg);
  RUN_UNTIL(pleg.relists > 0, 20, "the first relist");
  assert_int_equal(pleg.relist_failures, 0);
  assert_true(nl_pleg_healthy(&pleg, nl_pleg_monotonic_ns(NULL), NULL));
  /* 3 minutes later without a relist: upstream's message */
  assert_false(nl_pleg_healthy(&pleg, pleg.relist_time + INT64_C(181) * 1000000000, &err));
  assert_string_equal(nl_err_msg(err), "pleg was last seen active 3m1s ago; threshold is 3m0s");
  nl_err_free(&err);

  /* ---- a sandbox and a container with the kubelet's labels ---- */
  cri_sync_sandbox_t sb;
  cri_sync_sandbox_init(&sb, name, uid, "nanolet-e2e", "nanolet-e2e-pleg", logdir);
  Runtime__V1__PodSandboxConfig *cfg = &sb.cfg;
  Runtime__V1__PodSandboxConfig__LabelsEntry sl[4];
  Runtime__V1__PodSandboxConfig__LabelsEntry *slp[4];
  const char *skv[4][2] = {{LABEL_KEY, "1"}, {NL_LABEL_POD_UID, uid}, {NL_LABEL_POD_NAME, name},
                           {NL_LABEL_POD_NAMESPACE, "nanolet-e2e"}};
  for (int i = 0; i < 4; i++) {
    Runtime__V1__PodSandboxConfig__LabelsEntry e = RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT;
    e.key = (char *)skv[i][0];
    e.value = (char *)skv[i][1];
    sl[i] = e;
    slp[i] = &sl[i];
  }
  cfg->n_labels = 4;
  cfg->labels = slp;
  char *sandbox_id = cri_sync_run_sandbox(cfg);
  res_t r = {0};

  Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
  img.image = BUSYBOX;
  Runtime__V1__ContainerMetadata cmd = RUNTIME__V1__CONTAINER_METADATA__INIT;
  cmd.name = "app";
  Runtime__V1__ContainerConfig__LabelsEntry cl[4];
  Runtime__V1__ContainerConfig__LabelsEntry *clp[4];
  const char *ckv[4][2] = {{NL_LABEL_CONTAINER_NAME, "app"}, {NL_LABEL_POD_UID, uid},
                           {NL_LABEL_POD_NAME, name}, {NL_LABEL_POD_NAMESPACE, "nanolet-e2e"}};
  for (int i = 0; i < 4; i++) {
    Runtime__V1__ContainerConfig__LabelsEntry e = RUNTIME__V1__CONTAINER_CONFIG__LABELS_ENTRY__INIT;
    e.key = (char *)ckv[i][0];
    e.value = (char *)ckv[i][1];
    cl[i] = e;
    clp[i] = &cl[i];
  }
  Runtime__V1__ContainerConfig__AnnotationsEntry ca[2];
  Runtime__V1__ContainerConfig__AnnotationsEntry *cap[2];
  const char *akv[2][2] = {{NL_ANN_CONTAINER_HASH, "1a2b3c"}, {NL_ANN_CONTAINER_RESTART_COUNT, "2"}};
  for (int i = 0; i < 2; i++) {
    Runtime__V1__ContainerConfig__AnnotationsEntry e =
        RUNTIME__V1__CONTAINER_CONFIG__ANNOTATIONS_ENTRY__INIT;
    e.key = (char *)akv[i][0];
    e.value = (char *)akv[i][1];
    ca[i] = e;
    cap[i] = &ca[i];
  }
  char *argv[] = {"sleep", "1000"};
  Runtime__V1__ContainerConfig cc = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  cc.metadata = &cmd;
  cc.image = &img;
  cc.n_command = 2;
  cc.command = argv;
  cc.log_path = "app/2.log";
  cc.n_labels = 4;
  cc.labels = clp;
  cc.n_annotations = 2;
  cc.annotations = cap;
  char *cid = cri_sync_create_container(sandbox_id, cfg, &cc, true);
  int64_t t_started = nl_pleg_realtime_ns(NULL);

  /* ---- ContainerStarted for the sandbox and the container ---- */
  nl_pleg_force_relist(&pleg);
  RUN_UNTIL(seen(uid, NL_PLEG_CONTAINER_STARTED, cid), 20, "ContainerStarted");
  assert_true(seen(uid, NL_PLEG_CONTAINER_STARTED, sandbox_id));
  const nl_rt_pod_status_t *st = nl_pleg_get(&pleg, uid);
  assert_non_null(st);
  assert_string_equal(st->uid, uid);
  assert_string_equal(st->name, name);
  assert_string_equal(st->namespace_, "nanolet-e2e");
  assert_int_equal(st->n_sandboxes, 1);
  assert_string_equal(st->sandboxes[0].id, sandbox_id);
  assert_int_equal(st->sandboxes[0].state, NL_RT_SANDBOX_READY);
  assert_false(st->sandboxes[0].host_network);
  assert_non_null(st->sandboxes[0].ip);
  /* in the test runtime's CNI subnet (NANOLET_TESTENV_SUBNET, setup.sh's default) */
  const char *subnet = getenv("NANOLET_TESTENV_SUBNET");
  if (!subnet) subnet = "10.88.0.0/24";
  size_t net = strlen(subnet) - strlen("0/24"); /* "10.88.0." */
  assert_int_equal(strncmp(st->sandboxes[0].ip, subnet, net), 0);
  assert_int_equal(st->n_ips, 1);
  assert_string_equal(st->ips[0], st->sandboxes[0].ip);
  assert_int_equal(st->n_containers, 1);
  const nl_rt_container_t *c = nl_rt_pod_status_find(st, "app");
  assert_non_null(c);
  assert_string_equal(c->id, cid);
  assert_int_equal(c->state, NL_RT_CONTAINER_RUNNING);
  assert_int_equal(c->hash, 0x1a2b3c);
  assert_int_equal(c->restart_count, 2);
  assert_string_equal(c->sandbox_id, sandbox_id);
  assert_non_null(c->image);
  assert_non_null(c->image_ref);
  assert_true(c->created_at > 0 && c->started_at >= c->created_at);
  assert_true(c->started_at <= t_started + INT64_C(1000000000));
  assert_int_equal(c->finished_at, 0);
  int64_t cached_at = nl_pleg_cache_time(&pleg, uid);
  nl_pod_status_t *v1 = v1_status(name, uid, st, NULL);
  assert_int_equal(v1->phase, NL_POD_RUNNING);
  assert_string_equal(v1->pod_ip, st->ips[0]);
  assert_int_equal(v1->n_container_statuses, 1);
  char want_id[128];
  snprintf(want_id, sizeof want_id, "containerd://%s", cid);
  assert_string_equal(v1->container_statuses[0].container_id, want_id);
  assert_int_equal(v1->container_statuses[0].state.kind, NL_CSTATE_RUNNING);
  assert_int_equal(v1->container_statuses[0].state.started_at, c->started_at / 1000000000);
  assert_int_equal(v1->container_statuses[0].restart_count, 2);
  assert_true(v1->container_statuses[0].ready);
  assert_string_equal(v1->conditions[2].type, "Ready");
  assert_string_equal(v1->conditions[2].status, "True");
  assert_string_equal(v1->conditions[0].status, "True"); /* PodReadyToStartContainers */
  assert_true(cached_at > 0);

  /* Nothing changed: no new events, the cache entry is not re-read, but a
   * waiter for fresher status is satisfied by the next relist. */
  size_t before = count_uid(uid); /* other pods on this containerd may change */
  newer_t nw = {0};
  int64_t t0 = nl_pleg_monotonic_ns(NULL);
  nl_pleg_when_newer(&pleg, uid, t0, on_newer, &nw);
  assert_false(nw.called); /* never from inside the call */
  newer_t cancelled = {0};
  uint64_t cid_w = nl_pleg_when_newer(&pleg, uid, t0, on_newer, &cancelled);
  assert_true(nl_pleg_cancel_when_newer(&pleg, cid_w));
  RUN_UNTIL(nw.called, 10, "when_newer");
  assert_true(nw.had_status);
  assert_false(cancelled.called);
  assert_int_equal(count_uid(uid), before);
  assert_int_equal(nl_pleg_cache_time(&pleg, uid), cached_at);
  /* Already newer: called back on the next loop turn. */
  newer_t now_ = {0};
  nl_pleg_when_newer(&pleg, uid, cached_at - 1, on_newer, &now_);
  assert_false(now_.called);
  RUN_UNTIL(now_.called, 5, "when_newer (already satisfied)");

  /* ---- ContainerDied with the exit code in the cache ---- */
  Runtime__V1__StopContainerRequest stop = RUNTIME__V1__STOP_CONTAINER_REQUEST__INIT;
  stop.container_id = cid;
  stop.timeout = 0;
  CALL(stop_container, &stop, &r);
  if (r.code) fail_msg("StopContainer: %s", r.msg);
  res_free(&r);
  RUN_UNTIL(seen(uid, NL_PLEG_CONTAINER_DIED, cid), 20, "ContainerDied");
  st = nl_pleg_get(&pleg, uid);
  c = nl_rt_pod_status_find(st, "app");
  assert_non_null(c);
  assert_int_equal(c->state, NL_RT_CONTAINER_EXITED);
  assert_int_equal(c->exit_code, 137); /* SIGKILL */
  assert_non_null(c->reason);
  assert_string_equal(c->reason, "Error");
  assert_true(c->finished_at >= c->started_at && c->started_at > 0);
  assert_true(nl_pleg_cache_time(&pleg, uid) > cached_at);
  assert_int_equal(count(uid, NL_PLEG_CONTAINER_DIED, cid), 1);
  assert_false(seen(uid, NL_PLEG_CONTAINER_REMOVED, cid));
  nl_pod_status_t *v2 = v1_status(name, uid, st, v1);
  assert_int_equal(v2->phase, NL_POD_FAILED); /* Never, exit code 137 */
  const nl_container_status_t *cs2 = &v2->container_statuses[0];
  assert_int_equal(cs2->state.kind, NL_CSTATE_TERMINATED);
  assert_int_equal(cs2->state.exit_code, 137);
  assert_string_equal(cs2->state.reason, "Error");
  assert_string_equal(cs2->state.container_id, want_id);
  assert_false(cs2->ready);
  assert_string_equal(v2->conditions[2].reason, "PodFailed");
  assert_int_equal(v2->start_time, v1->start_time);
  nl_buf_t json = NL_BUF_INIT;
  nl_pod_status_encode_json(v2, &json);
  printf("# %s\n", json.data);
  nl_buf_free(&json);
  nl_pod_status_free(v1);

  /* ---- ContainerRemoved (died was already reported: only removed) ---- */
  Runtime__V1__RemoveContainerRequest rm = RUNTIME__V1__REMOVE_CONTAINER_REQUEST__INIT;
  rm.container_id = cid;
  CALL(remove_container, &rm, &r);
  if (r.code) fail_msg("RemoveContainer: %s", r.msg);
  res_free(&r);
  RUN_UNTIL(seen(uid, NL_PLEG_CONTAINER_REMOVED, cid), 20, "ContainerRemoved");
  assert_int_equal(count(uid, NL_PLEG_CONTAINER_DIED, cid), 1);
  st = nl_pleg_get(&pleg, uid);
  assert_non_null(st); /* the sandbox is still there */
  assert_int_equal(st->n_containers, 0);
  assert_null(nl_rt_pod_status_find(st, "app"));
  char *ip = strdup(st->ips[0]);
  /* The container is gone, the old status keeps the pod Failed with its record. */
  nl_pod_status_t *v3 = v1_status(name, uid, st, v2);
  assert_int_equal(v3->phase, NL_POD_FAILED);
  assert_int_equal(v3->container_statuses[0].state.kind, NL_CSTATE_TERMINATED);
  assert_int_equal(v3->container_statuses[0].state.exit_code, 137);
  assert_string_equal(v3->pod_ip, ip);
  nl_pod_status_free(v2);
  nl_pod_status_free(v3);

  /* ---- the sandbox stops: the pod keeps its IP; then it is removed ---- */
  Runtime__V1__StopPodSandboxRequest ss = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;
  ss.pod_sandbox_id = sandbox_id;
  CALL(stop_pod_sandbox, &ss, &r);
  if (r.code) fail_msg("StopPodSandbox: %s", r.msg);
  res_free(&r);
  RUN_UNTIL(seen(uid, NL_PLEG_CONTAINER_DIED, sandbox_id), 20, "sandbox died");
  st = nl_pleg_get(&pleg, uid);
  assert_int_equal(st->sandboxes[0].state, NL_RT_SANDBOX_NOTREADY);
  assert_int_equal(st->n_ips, 1);
  assert_string_equal(st->ips[0], ip);
  Runtime__V1__RemovePodSandboxRequest rs = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
  rs.pod_sandbox_id = sandbox_id;
  CALL(remove_pod_sandbox, &rs, &r);
  if (r.code) fail_msg("RemovePodSandbox: %s", r.msg);
  res_free(&r);
  RUN_UNTIL(seen(uid, NL_PLEG_CONTAINER_REMOVED, sandbox_id), 20, "sandbox removed");
  assert_null(nl_pleg_get(&pleg, uid));
  assert_int_equal(nl_pleg_cache_time(&pleg, uid), 0);
  /* A pod the runtime does not know: a waiter gets NULL after a relist. */
  newer_t gone = {0};
  nl_pleg_when_newer(&pleg, uid, nl_pleg_monotonic_ns(NULL), on_newer, &gone);
  RUN_UNTIL(gone.called, 10, "when_newer for a gone pod");
  assert_false(gone.had_status);
  assert_int_equal(pleg.relist_failures, 0);
  printf("# relists: %llu, last relist took %lld us\n", (unsigned long long)pleg.relists,
         (long long)(pleg.relist_duration_ns / 1000));

  /* A waiter left pending is dropped by stop, never called. */
  newer_t pending = {0};
  nl_pleg_when_newer(&pleg, uid, INT64_MAX - 1, on_newer, &pending);
  nl_pleg_stop(&pleg, on_pleg_stopped);
  RUN_UNTIL(pleg_stopped, 5, "pleg stop");
  assert_false(pending.called);
  free(ip);
  free(cid);
  free(sandbox_id);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(lifecycle, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
