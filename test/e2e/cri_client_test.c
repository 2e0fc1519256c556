/* The CRI client against the real containerd (suite e2e). The endpoint comes
 * from NANOLET_TEST_CRI_ENDPOINT (or NANOLET_TEST_CRI_SOCKET, as
 * tools/testenv/env.sh exports it); without one the test FAILS. Everything it
 * creates is named nanolet-e2e-cri-* and labelled nanolet-e2e-cri=1, and is
 * removed at the start and the end of the run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/e2e/cri_sync.h"

#define LABEL_KEY "nanolet-e2e-cri"
#define BUSYBOX "localhost/busybox:latest"

static int setup(void **state) {
  nl_cri_opts_t o = {.timeout_ms = 60000, .pull_timeout_ms = 60000};
  cri_sync_open(&o);
  return 0;
}

/* Removes every sandbox this test labelled (also from earlier, failed runs). */
static void cleanup(void) { cri_sync_remove_labelled(LABEL_KEY); }

static int teardown(void **state) {
  cleanup();
  assert_true(cri_sync_stop());
  assert_int_equal(uv_loop_close(&loop), 0);
  return 0;
}

static void version(void **state) {
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  req.version = "v1";
  res_t r = {0};
  CALL(version, &req, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  Runtime__V1__VersionResponse *v = (void *)r.resp;
  assert_string_equal(v->runtime_name, "containerd");
  assert_string_equal(v->runtime_api_version, "v1");
  assert_true(strlen(v->runtime_version) > 0);
  res_free(&r);

  Runtime__V1__StatusRequest sreq = RUNTIME__V1__STATUS_REQUEST__INIT;
  CALL(status, &sreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  Runtime__V1__StatusResponse *s = (void *)r.resp;
  bool runtime_ready = false;
  for (size_t i = 0; s->status && i < s->status->n_conditions; i++)
    if (!strcmp(s->status->conditions[i]->type, "RuntimeReady"))
      runtime_ready = s->status->conditions[i]->status;
  assert_true(runtime_ready);
  res_free(&r);
}

static void sandbox_and_container(void **state) {
  cleanup();
  char name[64], logdir[128], uid[64];
  snprintf(name, sizeof name, "nanolet-e2e-cri-%d", (int)getpid());
  snprintf(uid, sizeof uid, "00000000-e2e0-cr10-0000-%012d", (int)getpid());
  snprintf(logdir, sizeof logdir, "/tmp/%s", name);

  cri_sync_sandbox_t sb;
  cri_sync_sandbox_init(&sb, name, uid, "default", "nanolet-e2e-cri", logdir);
  Runtime__V1__PodSandboxConfig *cfg = &sb.cfg;
  Runtime__V1__PodSandboxConfig__LabelsEntry l1 = RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT;
  l1.key = LABEL_KEY;
  l1.value = "1";
  Runtime__V1__PodSandboxConfig__LabelsEntry *labels[] = {&l1};
  Runtime__V1__PodSandboxConfig__AnnotationsEntry a1 =
      RUNTIME__V1__POD_SANDBOX_CONFIG__ANNOTATIONS_ENTRY__INIT;
  a1.key = "nanolet.io/test";
  a1.value = "percent % and \"quotes\"";
  Runtime__V1__PodSandboxConfig__AnnotationsEntry *annos[] = {&a1};
  cfg->n_labels = 1;
  cfg->labels = labels;
  cfg->n_annotations = 1;
  cfg->annotations = annos;

  char *sandbox_id = cri_sync_run_sandbox(cfg);
  res_t r = {0};

  /* PodSandboxStatus: every field the status code reads. */
  Runtime__V1__PodSandboxStatusRequest psreq = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
  psreq.pod_sandbox_id = sandbox_id;
  CALL(pod_sandbox_status, &psreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  Runtime__V1__PodSandboxStatus *ps = ((Runtime__V1__PodSandboxStatusResponse *)r.resp)->status;
  assert_non_null(ps);
  assert_string_equal(ps->id, sandbox_id);
  assert_int_equal(ps->state, RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY);
  assert_true(ps->created_at > 0);
  assert_string_equal(ps->metadata->name, name);
  assert_string_equal(ps->metadata->uid, uid);
  assert_string_equal(ps->metadata->namespace_, "default");
  assert_non_null(ps->network);
  assert_true(strlen(ps->network->ip) > 0); /* the CNI bridge gave it an address */
  assert_non_null(ps->linux);
  assert_non_null(ps->linux->namespaces);
  assert_int_equal(ps->linux->namespaces->options->network, RUNTIME__V1__NAMESPACE_MODE__POD);
  assert_string_equal(cri_kv(ps->n_labels, (void **)ps->labels, LABEL_KEY), "1");
  assert_string_equal(cri_kv(ps->n_annotations, (void **)ps->annotations, "nanolet.io/test"),
                      "percent % and \"quotes\"");
  res_free(&r);

  /* The image is there (local, no registry). */
  Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
  img.image = BUSYBOX;
  Runtime__V1__ImageStatusRequest isreq = RUNTIME__V1__IMAGE_STATUS_REQUEST__INIT;
  isreq.image = &img;
  CALL(image_status, &isreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  assert_non_null(((Runtime__V1__ImageStatusResponse *)r.resp)->image);
  res_free(&r);

  /* A container running sh -c 'echo hi; sleep 1000'. */
  Runtime__V1__ContainerMetadata cmd = RUNTIME__V1__CONTAINER_METADATA__INIT;
  cmd.name = "c";
  Runtime__V1__ContainerConfig__LabelsEntry cl = RUNTIME__V1__CONTAINER_CONFIG__LABELS_ENTRY__INIT;
  cl.key = "io.kubernetes.container.name";
  cl.value = "c";
  Runtime__V1__ContainerConfig__LabelsEntry *clabels[] = {&cl};
  Runtime__V1__ContainerConfig__AnnotationsEntry ca =
      RUNTIME__V1__CONTAINER_CONFIG__ANNOTATIONS_ENTRY__INIT;
  ca.key = "io.kubernetes.container.restartCount";
  ca.value = "0";
  Runtime__V1__ContainerConfig__AnnotationsEntry *cannos[] = {&ca};
  char *argv[] = {"sh", "-c", "echo hi; sleep 1000"};
  Runtime__V1__ContainerConfig cc = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  cc.metadata = &cmd;
  cc.image = &img;
  cc.n_command = 3;
  cc.command = argv;
  cc.log_path = "c/0.log";
  cc.n_labels = 1;
  cc.labels = clabels;
  cc.n_annotations = 1;
  cc.annotations = cannos;
  char *cid = cri_sync_create_container(sandbox_id, cfg, &cc, true);


  /* ContainerStatus: every field the status code reads. */
  Runtime__V1__ContainerStatusRequest csreq = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
  csreq.container_id = cid;
  CALL(container_status, &csreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  Runtime__V1__ContainerStatus *cs = ((Runtime__V1__ContainerStatusResponse *)r.resp)->status;
  assert_string_equal(cs->id, cid);
  assert_string_equal(cs->metadata->name, "c");
  assert_int_equal(cs->metadata->attempt, 0);
  assert_int_equal(cs->state, RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING);
  assert_true(cs->created_at > 0);
  assert_true(cs->started_at >= cs->created_at);
  assert_int_equal(cs->finished_at, 0);
  assert_non_null(cs->image);
  assert_true(strlen(cs->image_ref) > 0);
  assert_non_null(strstr(cs->log_path, "c/0.log"));
  assert_string_equal(cri_kv(cs->n_labels, (void **)cs->labels, "io.kubernetes.container.name"),
                      "c");
  assert_string_equal(
      cri_kv(cs->n_annotations, (void **)cs->annotations, "io.kubernetes.container.restartCount"),
      "0");
  res_free(&r);

  /* ExecSync: output and exit code. */
  char *ecmd[] = {"sh", "-c", "echo out; echo err >&2; exit 3"};
  Runtime__V1__ExecSyncRequest ereq = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
  ereq.container_id = cid;
  ereq.n_cmd = 3;
  ereq.cmd = ecmd;
  ereq.timeout = 10;
  CALL(exec_sync, &ereq, &r);
  if (r.code) fail_msg("ExecSync: %s", r.msg);
  Runtime__V1__ExecSyncResponse *er = (void *)r.resp;
  assert_int_equal(er->exit_code, 3);
  assert_int_equal(er->stdout.len, 4);
  assert_memory_equal(er->stdout.data, "out\n", 4);
  assert_int_equal(er->stderr.len, 4);
  assert_memory_equal(er->stderr.data, "err\n", 4);
  res_free(&r);

  /* Concurrency: many calls in flight on the one connection. */
  enum { N = 64 };
  res_t many[N];
  memset(many, 0, sizeof many);
  for (int i = 0; i < N; i++) nl_cri_container_status(&client, &csreq, cb_container_status, &many[i]);
  for (int i = 0; i < N; i++) {
    wait_res(&many[i]);
    assert_int_equal(many[i].code, NL_GRPC_OK);
    res_free(&many[i]);
  }

  Runtime__V1__ContainerStatsRequest stq = RUNTIME__V1__CONTAINER_STATS_REQUEST__INIT;
  stq.container_id = cid;
  CALL(container_stats, &stq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  res_free(&r);

  Runtime__V1__ListContainersRequest lcreq = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
  Runtime__V1__ContainerFilter cf = RUNTIME__V1__CONTAINER_FILTER__INIT;
  cf.pod_sandbox_id = sandbox_id;
  lcreq.filter = &cf;
  CALL(list_containers, &lcreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  assert_int_equal(((Runtime__V1__ListContainersResponse *)r.resp)->n_containers, 1);
  res_free(&r);

  /* Stop (no grace): exited, with a finish time, exit code and reason. */
  Runtime__V1__StopContainerRequest stopreq = RUNTIME__V1__STOP_CONTAINER_REQUEST__INIT;
  stopreq.container_id = cid;
  stopreq.timeout = 0;
  CALL(stop_container, &stopreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  res_free(&r);
  CALL(container_status, &csreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  cs = ((Runtime__V1__ContainerStatusResponse *)r.resp)->status;
  assert_int_equal(cs->state, RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
  assert_true(cs->finished_at >= cs->started_at);
  assert_int_equal(cs->exit_code, 137);
  assert_true(strlen(cs->reason) > 0);
  res_free(&r);

  Runtime__V1__RemoveContainerRequest rmreq = RUNTIME__V1__REMOVE_CONTAINER_REQUEST__INIT;
  rmreq.container_id = cid;
  CALL(remove_container, &rmreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  res_free(&r);
  CALL(container_status, &csreq, &r);
  assert_int_equal(r.code, NL_GRPC_NOT_FOUND);
  assert_null(r.resp);
  res_free(&r);

  Runtime__V1__StopPodSandboxRequest spreq = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;
  spreq.pod_sandbox_id = sandbox_id;
  CALL(stop_pod_sandbox, &spreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  res_free(&r);
  Runtime__V1__RemovePodSandboxRequest rpreq = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
  rpreq.pod_sandbox_id = sandbox_id;
  CALL(remove_pod_sandbox, &rpreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  res_free(&r);

  /* Nothing left behind. */
  CALL(list_containers, &lcreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  assert_int_equal(((Runtime__V1__ListContainersResponse *)r.resp)->n_containers, 0);
  res_free(&r);
  CALL(pod_sandbox_status, &psreq, &r);
  assert_int_equal(r.code, NL_GRPC_NOT_FOUND);
  res_free(&r);
  free(cid);
  free(sandbox_id);
  char rm[200];
  snprintf(rm, sizeof rm, "rm -rf '%s'", logdir); /* the container log directory */
  assert_int_equal(system(rm), 0);
}

static void pull_unreachable(void **state) {
  const char *ref = "127.0.0.1:1/nanolet-e2e-cri/absent:latest";
  Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
  img.image = (char *)ref;
  Runtime__V1__PullImageRequest req = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
  req.image = &img;
  res_t r = {0};
  CALL(pull_image, &req, &r);
  assert_int_not_equal(r.code, NL_GRPC_OK);
  assert_null(r.resp);
  /* The runtime's own message, naming the image, reaches the caller. */
  assert_non_null(strstr(r.msg, ref));
  nl_grpc_status_t st = {r.code, r.msg};
  char *f = nl_grpc_status_format(&st);
  assert_true(!strncmp(f, "rpc error: code = ", 18));
  print_message("PullImage error: %s\n", f);
  free(f);
  res_free(&r);

  Runtime__V1__ImageFsInfoRequest fsreq = RUNTIME__V1__IMAGE_FS_INFO_REQUEST__INIT;
  CALL(image_fs_info, &fsreq, &r);
  assert_int_equal(r.code, NL_GRPC_OK);
  assert_true(((Runtime__V1__ImageFsInfoResponse *)r.resp)->n_image_filesystems > 0);
  res_free(&r);
}

static int events_ended, events_code;
static void on_event(const ProtobufCMessage *ev, void *ctx) {}
static void on_events_end(const nl_grpc_status_t *st, void *ctx) {
  events_ended++;
  events_code = st->code;
}

/* containerd 1.6 has no GetContainerEvents: the stream must end with
 * UNIMPLEMENTED (and not be retried); a newer runtime keeps it open. */
static void events_stream(void **state) {
  nl_cri_client_watch_events(&client, on_event, on_events_end, NULL);
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  res_t r = {0};
  CALL(version, &req, &r); /* a round trip after the events request */
  res_free(&r);
  for (int i = 0; i < 100 && !events_ended; i++) uv_run(&loop, UV_RUN_NOWAIT);
  if (events_ended) {
    assert_int_equal(events_ended, 1);
    assert_int_equal(events_code, NL_GRPC_UNIMPLEMENTED);
  }
  nl_cri_client_unwatch_events(&client);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(version, setup, teardown),
      cmocka_unit_test_setup_teardown(sandbox_and_container, setup, teardown),
      cmocka_unit_test_setup_teardown(pull_unreachable, setup, teardown),
      cmocka_unit_test_setup_teardown(events_stream, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
