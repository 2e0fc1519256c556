/* The status manager against a test double of the API client
 * (test/unit/kube/fake_client.c): what it sends and when — the first read, the
 * patch bodies, one request per pod with the newest status coalesced, back-off
 * with a bounded queue while the apiserver is away, the terminal phase, mirror
 * pods, the periodic reconcile, and the DELETE that ends a graceful deletion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../kube/fake_client.h"
#include "managers/status_manager.h"
#include "reactor/xalloc.h"

typedef struct fx {
  uv_loop_t loop;
  nl_status_manager_t sm;
  const char *mirror;   /* the mirror pod's uid, or NULL */
  const char *mirror_of; /* the static pod it was made from; NULL: any */
  int deleted;
  bool stopped;
} fx_t;

static const char *mirror_uid(void *ctx, const char *ns, const char *name, const char *uid) {
  fx_t *f = ctx;
  (void)ns;
  (void)name;
  return !f->mirror_of || strcmp(f->mirror_of, uid) == 0 ? f->mirror : NULL;
}

static void on_deleted(void *ctx, const char *uid) {
  fx_t *f = ctx;
  f->deleted++;
  nl_status_manager_remove(&f->sm, uid);
}

static fx_t *setup(void) {
  fx_t *f = nl_xcalloc(1, sizeof *f);
  fake_reset();
  uv_loop_init(&f->loop);
  nl_status_manager_deps_t d = {.kube = NULL, .mirror_uid = mirror_uid, .deleted = on_deleted,
                                .ctx = f};
  nl_status_manager_opts_t o = {.sync_period_ms = 200, .backoff_initial_ms = 20,
                                .backoff_max_ms = 80};
  nl_status_manager_init(&f->sm, &f->loop, &d, &o);
  nl_status_manager_start(&f->sm);
  return f;
}

static void on_stopped(void *ctx) { ((fx_t *)ctx)->stopped = true; }

static void teardown(fx_t *f) {
  nl_status_manager_stop(&f->sm, on_stopped, f);
  fake_settle();
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_true(f->stopped);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  fake_reset();
  free(f);
}

static void run_for(fx_t *f, uint64_t ms) { fake_run_for(&f->loop, ms); }

static nl_pod_status_t st_of(nl_pod_phase_t phase, const char *pod_ip) {
  return (nl_pod_status_t){.phase = phase, .pod_ip = (char *)pod_ip, .qos_class = "BestEffort"};
}

static void set(fx_t *f, const nl_status_pod_t *p, nl_pod_phase_t phase, const char *ip) {
  nl_pod_status_t st = st_of(phase, ip);
  nl_status_manager_set(&f->sm, p, &st);
}

/* With podIPs, as a pod with a sandbox has. */
static void set_ip(fx_t *f, const nl_status_pod_t *p, nl_pod_phase_t phase, const char *ip) {
  nl_pod_status_t st = st_of(phase, ip);
  char *ips[] = {(char *)ip};
  st.pod_ips = ips;
  st.n_pod_ips = 1;
  nl_status_manager_set(&f->sm, p, &st);
}

static const nl_status_pod_t P = {.uid = "u1", .namespace_ = "ns", .name = "web"};

static fake_req_t *req(size_t i) {
  assert_true(i < fake_nreqs);
  return fake_reqs[i];
}

static void assert_req(size_t i, const char *method, const char *path, const char *body) {
  fake_req_t *r = req(i);
  assert_string_equal(r->method, method);
  assert_string_equal(r->path, path);
  if (body) {
    assert_non_null(r->body);
    assert_string_equal(r->body, body);
  }
}

#define POD_JSON(uid, status) \
  "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\",\"uid\":\"" uid "\"},\"status\":" status "}"

/* The first status: the pod is read (nothing is known of its API status), then
 * patched with what differs, as a strategic merge patch with the uid. */
static void first_status_reads_then_patches(void **state) {
  (void)state;
  fx_t *f = setup();
  set(f, &P, NL_POD_PENDING, NULL);
  assert_int_equal(fake_nreqs, 1);
  assert_req(0, "GET", "/api/v1/namespaces/ns/pods/web", NULL);
  fake_respond(req(0), 200, POD_JSON("u1", "{\"phase\":\"Pending\",\"qosClass\":\"BestEffort\","
                                           "\"conditions\":[{\"type\":\"DisruptionTarget\",\"status\":\"True\"}]}"));
  /* the API has it all already (others' conditions stay theirs): nothing to send */
  assert_int_equal(fake_nreqs, 1);
  set(f, &P, NL_POD_RUNNING, "10.88.0.4");
  assert_int_equal(fake_nreqs, 2);
  assert_req(1, "PATCH", "/api/v1/namespaces/ns/pods/web/status",
             "{\"metadata\":{\"uid\":\"u1\"},\"status\":{\"phase\":\"Running\",\"podIP\":\"10.88.0.4\"}}");
  assert_string_equal(req(1)->content_type, "application/strategic-merge-patch+json");
  fake_respond(req(1), 200, POD_JSON("u1", "{\"phase\":\"Running\",\"podIP\":\"10.88.0.4\","
                                           "\"qosClass\":\"BestEffort\"}"));
  const nl_status_entry_t *e = nl_status_manager_entry(&f->sm, "u1");
  assert_int_equal(e->acked, e->version);
  /* the same status again sends nothing */
  set(f, &P, NL_POD_RUNNING, "10.88.0.4");
  assert_int_equal(fake_nreqs, 2);
  teardown(f);
}

/* One request per pod; statuses that arrive meanwhile are coalesced into the
 * newest, sent after the one in flight. */
static void one_request_per_pod_newest_wins(void **state) {
  (void)state;
  fx_t *f = setup();
  nl_status_manager_observe(&f->sm, "ns", "web", "u1", NULL); /* unknown pod: ignored */
  set(f, &P, NL_POD_PENDING, NULL);
  fake_respond(req(0), 200, POD_JSON("u1", "{}"));
  assert_int_equal(fake_nreqs, 2); /* PATCH Pending */
  set(f, &P, NL_POD_RUNNING, "10.0.0.1");
  set(f, &P, NL_POD_RUNNING, "10.0.0.2");
  set(f, &P, NL_POD_RUNNING, "10.0.0.3");
  assert_int_equal(fake_nreqs, 2);
  fake_respond(req(1), 200, POD_JSON("u1", "{\"phase\":\"Pending\",\"qosClass\":\"BestEffort\"}"));
  assert_int_equal(fake_nreqs, 3);
  assert_req(2, "PATCH", "/api/v1/namespaces/ns/pods/web/status",
             "{\"metadata\":{\"uid\":\"u1\"},\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.3\"}}");
  fake_respond(req(2), 200, POD_JSON("u1", "{\"phase\":\"Running\",\"podIP\":\"10.0.0.3\",\"qosClass\":\"BestEffort\"}"));
  assert_int_equal(fake_nreqs, 3);
  assert_int_equal(f->sm.patches, 2);
  teardown(f);
}

/* With the apiserver away: one request at a time per pod, retried with a
 * growing back-off, and only the newest status is kept. */
static void backoff_while_the_apiserver_is_down(void **state) {
  (void)state;
  fx_t *f = setup();
  set(f, &P, NL_POD_PENDING, NULL);
  fake_fail(req(0), 111, "dial tcp: connection refused");
  const nl_status_entry_t *e = nl_status_manager_entry(&f->sm, "u1");
  assert_int_equal(e->state, NL_STATUS_BACKOFF);
  for (int i = 0; i < 100; i++) {
    char ip[32];
    snprintf(ip, sizeof ip, "10.0.%d.%d", i / 250, i % 250);
    set(f, &P, NL_POD_RUNNING, ip);
  }
  assert_int_equal(fake_nreqs, 1); /* nothing sent during the back-off */
  size_t failed = 1;
  uint64_t start = uv_now(&f->loop);
  while (uv_now(&f->loop) - start < 400) {
    run_for(f, 5);
    for (size_t i = failed; i < fake_nreqs; i++) {
      assert_string_equal(req(i)->method, "GET");
      fake_fail(req(i), 111, "dial tcp: connection refused");
      failed++;
    }
  }
  /* 20, 40, 80, 80, 80 ms (+ up to 25% jitter): a handful, not one per loop turn */
  assert_in_range(failed, 4, 8);
  assert_int_equal(e->backoff_ms, 80);
  /* back: the newest status goes out, and only it */
  while (fake_nreqs == failed) run_for(f, 5);
  fake_respond(req(failed), 200, POD_JSON("u1", "{}"));
  assert_int_equal(fake_nreqs, failed + 2);
  assert_non_null(strstr(req(failed + 1)->body, "\"podIP\":\"10.0.0.99\""));
  assert_int_equal(e->state, NL_STATUS_PATCH);
  teardown(f);
}

/* A terminal phase never goes back, neither in what we keep nor in what the API
 * has. */
static void terminal_phase_is_sticky(void **state) {
  (void)state;
  fx_t *f = setup();
  set(f, &P, NL_POD_FAILED, NULL);
  set(f, &P, NL_POD_RUNNING, "10.0.0.1");
  const nl_status_entry_t *e = nl_status_manager_entry(&f->sm, "u1");
  assert_non_null(strstr(e->want, "\"phase\":\"Failed\""));
  fake_respond(req(0), 200, POD_JSON("u1", "{\"phase\":\"Succeeded\"}"));
  /* the API said Succeeded first: it stays */
  assert_int_equal(fake_nreqs, 2);
  assert_null(strstr(req(1)->body, "\"phase\""));
  teardown(f);
}

/* A static pod reports through its mirror pod, with the mirror pod's uid; no
 * mirror pod, no report. */
static void static_pods_report_through_their_mirror(void **state) {
  (void)state;
  fx_t *f = setup();
  nl_status_pod_t sp = {.uid = "static-1", .namespace_ = "ns", .name = "web", .is_static = true};
  set(f, &sp, NL_POD_RUNNING, NULL);
  run_for(f, 250); /* even across a reconcile */
  assert_int_equal(fake_nreqs, 0);
  f->mirror = "mirror-1";
  run_for(f, 250);
  assert_int_equal(fake_nreqs, 1);
  assert_req(0, "GET", "/api/v1/namespaces/ns/pods/web", NULL);
  fake_respond(req(0), 200, POD_JSON("mirror-1", "{\"phase\":\"Pending\"}"));
  assert_req(1, "PATCH", "/api/v1/namespaces/ns/pods/web/status",
             "{\"metadata\":{\"uid\":\"mirror-1\"},\"status\":{\"phase\":\"Running\",\"qosClass\":\"BestEffort\"}}");
  fake_respond(req(1), 200, POD_JSON("mirror-1", "{\"phase\":\"Running\",\"qosClass\":\"BestEffort\"}"));
  /* the mirror pod is recreated: the new one gets the status */
  f->mirror = "mirror-2";
  run_for(f, 250);
  assert_int_equal(fake_nreqs, 3);
  fake_respond(req(2), 200, POD_JSON("mirror-2", "{}"));
  assert_non_null(strstr(req(3)->body, "{\"uid\":\"mirror-2\"}"));
  /* a static pod is never deleted through the status manager */
  sp.deleting = sp.finished = true;
  set(f, &sp, NL_POD_SUCCEEDED, NULL);
  fake_respond(req(3), 200, POD_JSON("mirror-2", "{\"phase\":\"Running\",\"qosClass\":\"BestEffort\"}"));
  fake_respond(req(4), 200, POD_JSON("mirror-2", "{\"phase\":\"Succeeded\",\"qosClass\":\"BestEffort\"}"));
  assert_int_equal(fake_nreqs, 5);
  assert_int_equal(f->sm.deletes, 0);
  teardown(f);
}

/* A static pod edited while its old version still terminates: each version has
 * its own sandbox IP, and only the version the mirror pod was made from writes
 * there. Were both to write, the mirror pod's podIPs would collect both
 * addresses (a merge list keyed by ip) and the apiserver would refuse it. */
static void static_pod_versions_do_not_share_their_mirror(void **state) {
  (void)state;
  fx_t *f = setup();
  nl_status_pod_t v1 = {.uid = "hash-1", .namespace_ = "ns", .name = "web", .is_static = true};
  nl_status_pod_t v2 = {.uid = "hash-2", .namespace_ = "ns", .name = "web", .is_static = true};
  f->mirror = "mirror-1";
  f->mirror_of = "hash-1";
  set_ip(f, &v1, NL_POD_RUNNING, "10.88.0.35");
  fake_respond(req(0), 200, POD_JSON("mirror-1", "{}"));
  assert_non_null(strstr(req(1)->body, "\"podIP\":\"10.88.0.35\""));
  fake_respond(req(1), 200, POD_JSON("mirror-1", "{\"phase\":\"Running\",\"podIP\":\"10.88.0.35\","
                                                 "\"podIPs\":[{\"ip\":\"10.88.0.35\"}],"
                                                 "\"qosClass\":\"BestEffort\"}"));
  /* the manifest changes: v2 starts while v1 terminates; the mirror pod of v2
   * replaces the one of v1 */
  set(f, &v2, NL_POD_PENDING, NULL);
  f->mirror = "mirror-2";
  f->mirror_of = "hash-2";
  set_ip(f, &v1, NL_POD_RUNNING, "10.88.0.35");
  run_for(f, 250);
  assert_int_equal(fake_nreqs, 3); /* v2 reads its mirror pod; v1 is silent */
  assert_req(2, "GET", "/api/v1/namespaces/ns/pods/web", NULL);
  fake_respond(req(2), 200, POD_JSON("mirror-2", "{}"));
  assert_non_null(strstr(req(3)->body, "{\"uid\":\"mirror-2\"}"));
  fake_respond(req(3), 200, POD_JSON("mirror-2", "{\"phase\":\"Pending\",\"qosClass\":\"BestEffort\"}"));
  set_ip(f, &v2, NL_POD_RUNNING, "10.88.0.39");
  set_ip(f, &v1, NL_POD_SUCCEEDED, "10.88.0.35");
  run_for(f, 250);
  assert_int_equal(fake_nreqs, 5);
  assert_non_null(strstr(req(4)->body, "\"podIPs\":[{\"ip\":\"10.88.0.39\"}]"));
  assert_null(strstr(req(4)->body, "10.88.0.35"));
  teardown(f);
}

/* A patch the apiserver refuses was built on a status that may no longer be
 * the API's (another writer's, gone since): the next try reads the pod again,
 * and its patch deletes what the API really has. */
static void refused_patch_reads_the_pod_again(void **state) {
  (void)state;
  fx_t *f = setup();
  set_ip(f, &P, NL_POD_RUNNING, "10.88.0.39");
  fake_respond(req(0), 200, POD_JSON("u1", "{\"phase\":\"Pending\"}"));
  assert_req(1, "PATCH", "/api/v1/namespaces/ns/pods/web/status", NULL);
  fake_respond(req(1), 422,
               "{\"kind\":\"Status\",\"reason\":\"Invalid\",\"code\":422,\"message\":"
               "\"Pod \\\"web\\\" is invalid: status.podIPs: Invalid value: "
               "[{\\\"IP\\\":\\\"10.88.0.39\\\"},{\\\"IP\\\":\\\"10.88.0.35\\\"}]: "
               "may specify no more than one IP for each IP family\"}");
  const nl_status_entry_t *e = nl_status_manager_entry(&f->sm, "u1");
  assert_int_equal(e->state, NL_STATUS_BACKOFF);
  run_for(f, 50); /* the first back-off: 20 ms and up to 25% */
  assert_int_equal(fake_nreqs, 3);
  assert_req(2, "GET", "/api/v1/namespaces/ns/pods/web", NULL);
  fake_respond(req(2), 200, POD_JSON("u1", "{\"phase\":\"Running\",\"podIP\":\"10.88.0.35\","
                                           "\"podIPs\":[{\"ip\":\"10.88.0.35\"}]}"));
  assert_req(3, "PATCH", "/api/v1/namespaces/ns/pods/web/status", NULL);
  assert_non_null(strstr(req(3)->body, "{\"$patch\":\"delete\",\"ip\":\"10.88.0.35\"}"));
  assert_non_null(strstr(req(3)->body, "{\"ip\":\"10.88.0.39\"}"));
  teardown(f);
}

/* A pod recreated under the same name (another uid) gets none of our status. */
static void recreated_pod_is_left_alone(void **state) {
  (void)state;
  fx_t *f = setup();
  set(f, &P, NL_POD_RUNNING, NULL);
  fake_respond(req(0), 200, POD_JSON("other", "{}"));
  assert_int_equal(fake_nreqs, 1);
  /* and a PATCH whose uid precondition fails is not retried */
  set(f, &P, NL_POD_SUCCEEDED, NULL);
  fake_respond(req(1), 200, POD_JSON("u1", "{}"));
  fake_respond(req(2), 409, "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"code\":409}");
  run_for(f, 250);
  assert_int_equal(fake_nreqs, 3);
  teardown(f);
}

/* Every sync period, a pod whose API status differs from ours (another writer,
 * or a lost update seen by the watch) is patched back. */
static void reconcile_resends_what_the_api_lost(void **state) {
  (void)state;
  fx_t *f = setup();
  set(f, &P, NL_POD_RUNNING, "10.0.0.1");
  fake_respond(req(0), 200, POD_JSON("u1", "{}"));
  fake_respond(req(1), 200, POD_JSON("u1", "{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\",\"qosClass\":\"BestEffort\"}"));
  run_for(f, 250);
  assert_int_equal(fake_nreqs, 2); /* in sync: nothing */
  json_t *lost = json_pack("{s:s,s:s}", "phase", "Pending", "qosClass", "BestEffort");
  nl_status_manager_observe(&f->sm, "ns", "web", "u1", lost);
  json_decref(lost);
  run_for(f, 250);
  assert_int_equal(fake_nreqs, 3);
  assert_req(2, "PATCH", "/api/v1/namespaces/ns/pods/web/status",
             "{\"metadata\":{\"uid\":\"u1\"},\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\"}}");
  fake_respond(req(2), 200, POD_JSON("u1", "{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\",\"qosClass\":\"BestEffort\"}"));
  teardown(f);
}

/* The pod watch shows what the API has, re-encoded from the pod model: only the
 * fields a kubelet reads, every one of them (empty ones too). Our own status
 * seen that way sends nothing, sync period after sync period, though the API's
 * answer had fields the watch leaves out; the Ready condition that the node
 * lifecycle controller set False (a node it saw go NotReady) is written back
 * at the next sync although our status never changed. */
static void watched_status_of_another_writer_is_undone(void **state) {
  (void)state;
  fx_t *f = setup();
  nl_pod_condition_t ready = {.type = "Ready", .status = "True", .last_transition_time = 1764668400};
  nl_pod_status_t st = st_of(NL_POD_RUNNING, "10.0.0.1");
  st.conditions = &ready;
  st.n_conditions = 1;
  nl_status_manager_set(&f->sm, &P, &st);
  fake_respond(req(0), 200, POD_JSON("u1", "{}"));
  assert_int_equal(fake_nreqs, 2);
#define READY(s, extra) "{\"type\":\"Ready\",\"status\":\"" s "\",\"lastTransitionTime\":" \
                        "\"2025-12-02T09:40:00Z\"" extra "}"
  fake_respond(req(1), 200, POD_JSON("u1", "{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\","
                                           "\"qosClass\":\"BestEffort\",\"observedGeneration\":1,"
                                           "\"conditions\":[" READY("True", "") "]}"));
  json_t *ours = json_loads("{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\",\"qosClass\":\"BestEffort\","
                            "\"message\":\"\",\"reason\":\"\",\"podIPs\":[],"
                            "\"conditions\":[" READY("True", ",\"reason\":\"\",\"lastProbeTime\":\"\"") "]}",
                            0, NULL);
  assert_non_null(ours);
  nl_status_manager_observe(&f->sm, "ns", "web", "u1", ours);
  run_for(f, 450); /* two sync periods */
  assert_int_equal(fake_nreqs, 2);
  json_t *lost = json_loads("{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\",\"qosClass\":\"BestEffort\","
                            "\"conditions\":[" READY("False", ",\"reason\":\"NodeNotReady\"") "]}",
                            0, NULL);
  nl_status_manager_observe(&f->sm, "ns", "web", "u1", lost);
  run_for(f, 250);
  assert_int_equal(fake_nreqs, 3);
  assert_req(2, "PATCH", "/api/v1/namespaces/ns/pods/web/status", NULL);
  json_t *patch = json_loads(req(2)->body, 0, NULL);
  json_t *c = json_array_get(json_object_get(json_object_get(patch, "status"), "conditions"), 0);
  assert_string_equal(json_string_value(json_object_get(c, "type")), "Ready");
  assert_string_equal(json_string_value(json_object_get(c, "status")), "True");
#undef READY
  json_decref(patch);
  json_decref(lost);
  json_decref(ours);
  teardown(f);
}

/* The end of a graceful deletion: the final status, then DELETE with grace 0
 * and the uid as a precondition, once the pod has finished. */
static void finished_deleted_pod_is_deleted(void **state) {
  (void)state;
  fx_t *f = setup();
  nl_status_pod_t p = P;
  p.deleting = true;
  set(f, &p, NL_POD_RUNNING, NULL);
  fake_respond(req(0), 200, POD_JSON("u1", "{\"phase\":\"Running\",\"qosClass\":\"BestEffort\"}"));
  assert_int_equal(fake_nreqs, 1);
  /* the phase is terminal, but the pod has not finished (a container could
   * still run): the terminal phase waits (upstream mergePodStatus), no DELETE */
  set(f, &p, NL_POD_SUCCEEDED, NULL);
  run_for(f, 250);
  assert_int_equal(fake_nreqs, 1);
  p.finished = true;
  set(f, &p, NL_POD_SUCCEEDED, NULL);
  assert_int_equal(fake_nreqs, 2);
  assert_non_null(strstr(req(1)->body, "\"phase\":\"Succeeded\""));
  fake_respond(req(1), 200, POD_JSON("u1", "{\"phase\":\"Succeeded\",\"qosClass\":\"BestEffort\"}"));
  assert_int_equal(fake_nreqs, 3);
  assert_req(2, "DELETE", "/api/v1/namespaces/ns/pods/web",
             "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"gracePeriodSeconds\":0,"
             "\"preconditions\":{\"uid\":\"u1\"}}");
  fake_fail(req(2), 111, "connection refused");
  run_for(f, 60);
  assert_int_equal(fake_nreqs, 4); /* retried */
  fake_respond(req(3), 200, POD_JSON("u1", "{}"));
  assert_int_equal(f->deleted, 1);
  assert_null(nl_status_manager_entry(&f->sm, "u1"));
  teardown(f);
}

/* Stopping with requests in flight cancels them and closes cleanly. */
static void stop_with_requests_in_flight(void **state) {
  (void)state;
  fx_t *f = setup();
  set(f, &P, NL_POD_RUNNING, NULL);
  nl_status_pod_t q = {.uid = "u2", .namespace_ = "ns", .name = "db"};
  set(f, &q, NL_POD_RUNNING, NULL);
  nl_status_manager_remove(&f->sm, "u2");
  assert_true(req(1)->cancelled);
  assert_int_equal(fake_nreqs, 2);
  teardown(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(first_status_reads_then_patches),
      cmocka_unit_test(one_request_per_pod_newest_wins),
      cmocka_unit_test(backoff_while_the_apiserver_is_down),
      cmocka_unit_test(terminal_phase_is_sticky),
      cmocka_unit_test(static_pods_report_through_their_mirror),
      cmocka_unit_test(static_pod_versions_do_not_share_their_mirror),
      cmocka_unit_test(refused_patch_reads_the_pod_again),
      cmocka_unit_test(recreated_pod_is_left_alone),
      cmocka_unit_test(reconcile_resends_what_the_api_lost),
      cmocka_unit_test(watched_status_of_another_writer_is_undone),
      cmocka_unit_test(finished_deleted_pod_is_deleted),
      cmocka_unit_test(stop_with_requests_in_flight),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
