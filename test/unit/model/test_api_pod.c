/* API pods: what a real apiserver sends (test/fixtures/api, from `kubectl get
 * --raw` on the test control plane) decodes into the full object, survives a
 * copy, and encodes back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "reactor/arena.h"
#include "agent/model/pod.h"
#include "fixture.h"

static nl_pod_t *golden(void) {
  size_t len = 0;
  char *data = fixture_read("../api/pod-deleting.json", &len);
  assert_non_null(data);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(data, len, "pod-deleting.json", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  free(data);
  return pod;
}

static void check_golden(const nl_pod_t *p) {
  const nl_object_meta_t *m = &p->metadata;
  assert_string_equal(m->uid, "f9dc88f1-db5b-4111-a97f-20f7df4306fd");
  assert_string_equal(m->resource_version, "469");
  assert_int_equal(m->generation, 2);
  assert_string_equal(m->creation_timestamp, "2026-11-24T00:21:34Z");
  assert_string_equal(m->deletion_timestamp, "2026-11-24T00:21:41Z");
  assert_true(m->deletion_grace_period_seconds.set);
  assert_int_equal(m->deletion_grace_period_seconds.v, 7);
  assert_int_equal(m->finalizers.n, 1);
  assert_string_equal(m->finalizers.items[0], "example.com/hold");
  assert_int_equal(m->n_owner_refs, 1);
  assert_string_equal(m->owner_refs[0].kind, "ReplicaSet");
  assert_int_equal(m->owner_refs[0].controller, 1);
  assert_false(nl_pod_is_mirror(p));

  const nl_api_pod_status_t *s = p->status;
  assert_non_null(s);
  assert_string_equal(s->phase, "Running");
  assert_string_equal(s->host_ip, "10.0.0.5");
  assert_int_equal(s->host_ips.n, 1);
  assert_string_equal(s->pod_ip, "10.88.0.7");
  assert_int_equal(s->pod_ips.n, 2);
  assert_string_equal(s->pod_ips.items[1], "fd00::7");
  assert_string_equal(s->start_time, "2024-05-01T10:00:00Z");
  assert_string_equal(s->qos_class, "Burstable");
  assert_int_equal(s->n_conditions, 2);
  assert_string_equal(s->conditions[0].type, "Ready");
  assert_string_equal(s->conditions[0].status, "True");
  assert_null(s->conditions[0].last_probe_time); /* null in the JSON */
  assert_string_equal(s->conditions[0].last_transition_time, "2024-05-01T10:00:02Z");
  assert_int_equal(s->n_container_statuses, 1);
  const nl_api_container_status_t *c = &s->container_statuses[0];
  assert_string_equal(c->name, "main");
  assert_true(c->ready);
  assert_int_equal(c->started, 1);
  assert_int_equal(c->restart_count, 2);
  assert_string_equal(c->container_id, "containerd://0123abcd");
  assert_string_equal(c->image_id, "localhost/busybox@sha256:abc");
  assert_non_null(c->state.running);
  assert_null(c->state.waiting);
  assert_null(c->state.terminated);
  assert_string_equal(c->state.running->started_at, "2024-05-01T10:00:01Z");
  assert_non_null(c->last_state.terminated);
  assert_int_equal(c->last_state.terminated->exit_code, 137);
  assert_int_equal(c->last_state.terminated->signal, 9);
  assert_string_equal(c->last_state.terminated->finished_at, "2024-05-01T09:59:00Z");
  assert_string_equal(p->spec.containers[0].name, "main");
  assert_int_equal(p->spec.termination_grace_period_seconds.v, 7);
}

/* managedFields, enableServiceLinks' siblings and every other field nanolet
 * does not model are skipped, not errors. */
static void golden_decodes(void **state) {
  (void)state;
  nl_pod_t *p = golden();
  check_golden(p);
  nl_pod_free(p);
}

static void dup_keeps_everything(void **state) {
  (void)state;
  nl_pod_t *p = golden();
  nl_pod_t *c = nl_pod_dup(p);
  check_golden(c);
  assert_int_equal(nl_pod_hash(p), nl_pod_hash(c));
  nl_pod_free(c);
  nl_pod_free(p);
}

/* A reference is the same pod, not a copy, and outlives the holder that
 * decoded it (ASan sees a use after free otherwise). */
static void ref_shares_until_last_free(void **state) {
  (void)state;
  nl_pod_t *p = golden();
  nl_pod_t *r = nl_pod_ref(p);
  assert_ptr_equal(r, p);
  nl_pod_free(p);
  check_golden(r);
  nl_pod_free(r);
}

/* What a kept pod costs: the golden pod needs about 3000 bytes of its arena;
 * its chunks leave at most one chunk's room unused (it was 6224 bytes in all
 * with doubling chunks, 3672 now). */
static void arena_holds_little_slack(void **state) {
  (void)state;
  nl_pod_t *p = golden();
  assert_true(p->arena->total < 4096);
  nl_pod_free(p);
  /* a piece larger than a quarter chunk gets its own block; the head keeps
   * filling */
  nl_arena_t *a = nl_arena_new_steady(1024);
  char *x = nl_arena_alloc(a, 24), *big = nl_arena_alloc(a, 2000), *y = nl_arena_alloc(a, 24);
  assert_ptr_equal(y, x + 24);
  for (int i = 0; i < 2000; i++) assert_int_equal(big[i], 0);
  assert_true(a->total < sizeof *a + 3 * 32 + 1024 + 2000);
  nl_arena_free(a);
}

static void status_only_with_flag(void **state) {
  (void)state;
  nl_pod_t *p = golden();
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_encode_json(p, &b, 0);
  assert_null(strstr(b.data, "\"status\""));
  assert_non_null(strstr(b.data, "\"deletionTimestamp\":\"2026-11-24T00:21:41Z\""));
  assert_non_null(strstr(b.data, "\"finalizers\":[\"example.com/hold\"]"));
  nl_buf_reset(&b);
  nl_pod_encode_json(p, &b, NL_POD_JSON_STATUS);
  assert_non_null(strstr(b.data, "\"podIPs\":[{\"ip\":\"10.88.0.7\"},{\"ip\":\"fd00::7\"}]"));
  assert_non_null(strstr(b.data, "\"lastState\":{\"terminated\":{\"exitCode\":137,\"signal\":9,"));
  /* and what it encodes decodes to the same pod */
  nl_pod_t *again = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(b.data, b.len, "again", &again, &err) < 0) fail_msg("%s", nl_err_msg(err));
  check_golden(again);
  nl_pod_free(again);
  nl_buf_free(&b);
  nl_pod_free(p);
}

/* A bad field in an API object is reported with its path, like a manifest's. */
static void bad_status_field_named(void **state) {
  (void)state;
  const char *j = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\","
                  "\"generation\":\"two\"},\"spec\":{\"containers\":[]},\"status\":{"
                  "\"containerStatuses\":[{\"name\":\"a\",\"restartCount\":\"3\"}]}}";
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_decode(j, strlen(j), "api pod ns/x", &p, &err), -1);
  assert_null(p);
  assert_non_null(strstr(nl_err_msg(err), "api pod ns/x: metadata.generation: must be an integer"));
  assert_non_null(strstr(nl_err_msg(err),
                         "status.containerStatuses[0].restartCount: must be an integer, got a string"));
  nl_err_free(&err);
}

static void mirror_annotation(void **state) {
  (void)state;
  const char *j = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\","
                  "\"annotations\":{\"kubernetes.io/config.mirror\":\"abc\"}},\"spec\":{}}";
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_decode(j, strlen(j), NULL, &p, &err), 0);
  assert_true(nl_pod_is_mirror(p));
  assert_null(p->status);
  assert_null(p->metadata.deletion_timestamp);
  nl_pod_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(golden_decodes),
      cmocka_unit_test(dup_keeps_everything),
      cmocka_unit_test(ref_shares_until_last_free),
      cmocka_unit_test(arena_holds_little_slack),
      cmocka_unit_test(status_only_with_flag),
      cmocka_unit_test(bad_status_field_named),
      cmocka_unit_test(mirror_annotation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
