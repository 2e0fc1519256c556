/* Kubernetes protobuf (agent/kube/pb.c): the envelope, and Lease and Status
 * between protobuf and their JSON form, against bytes upstream's serializer
 * wrote (test/fixtures/api/lease.pb, lease.json: the same Lease from
 * k8s.io/apimachinery's protobuf serializer and encoding/json). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kube/k8s.pb-c.h"
#include "agent/kube/pb.h"
#include "agent/kube/status.h"

static char *slurp(const char *name, size_t *len) {
  char path[512];
  snprintf(path, sizeof path, "%s/api/%s", FIXTURES, name);
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("%s: cannot open", path);
  char *buf = malloc(65536);
  *len = fread(buf, 1, 65536, f);
  fclose(f);
  return buf;
}

static void expect_unwrap_err(const void *data, size_t len, const char *msg) {
  nl_kube_pb_env_t env;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_pb_unwrap(data, len, &env, &err), -1);
  if (!strstr(nl_err_msg(err), msg)) fail_msg("got  %s\nwant %s", nl_err_msg(err), msg);
  nl_err_free(&err);
}

static void envelope_round_trip_and_errors(void **state) {
  size_t len;
  uint8_t *b = nl_kube_pb_wrap("v1", "Thing", (const uint8_t *)"\x0a\x01x", 3, &len);
  assert_memory_equal(b, "k8s\0", 4);
  nl_kube_pb_env_t env;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_pb_unwrap(b, len, &env, &err), 0);
  assert_string_equal(env.api_version, "v1");
  assert_string_equal(env.kind, "Thing");
  assert_int_equal(env.raw_len, 3);
  assert_memory_equal(env.raw, "\x0a\x01x", 3);
  nl_kube_pb_env_free(&env);

  expect_unwrap_err("{\"kind\":\"Lease\"}", 16, "does not start with the k8s magic");
  expect_unwrap_err(b, 3, "does not start with the k8s magic");
  expect_unwrap_err(b, len - 2, "the envelope (runtime.Unknown) does not decode");
  /* typeMeta without a kind; then contentEncoding "gzip" */
  expect_unwrap_err("k8s\0\x0a\x04\x0a\x02v1", 10, "names no kind");
  expect_unwrap_err("k8s\0\x0a\x03\x12\x01X\x1a\x04gzip", 15, "contentEncoding gzip is not supported");
  free(b);
  /* A kind nanolet does not know, and a raw that does not decode. */
  b = nl_kube_pb_wrap("v1", "Pod", NULL, 0, &len);
  json_t *o = NULL;
  assert_int_equal(nl_kube_pb_to_json(b, len, &o, &err), -1);
  assert_string_equal(nl_err_msg(err), "protobuf: v1 Pod: kind not known");
  nl_err_free(&err);
  free(b);
  b = nl_kube_pb_wrap("coordination.k8s.io/v1", "Lease", (const uint8_t *)"\x0a\x05", 2, &len);
  assert_int_equal(nl_kube_pb_to_json(b, len, &o, &err), -1);
  assert_string_equal(nl_err_msg(err), "protobuf: Lease does not decode");
  nl_err_free(&err);
  free(b);
}

/* Upstream's bytes (NAME.pb) decode into upstream's JSON (NAME.json). Go
 * writes every field without a pointer on the wire, zero or not, where its JSON
 * omits zero values (omitempty): those decode as written (`zeros`, paths of
 * fields decoded as 0 or false), which is harmless to send back; and the other
 * way, an empty string is taken as absent (`empties`, fields whose JSON keeps
 * ""). Encoded again, NAME.json gives NAME-nanolet.pb: upstream's bytes but
 * for those empty strings, which nanolet leaves out; upstream's serializer
 * decodes it to the same object (checked when the fixtures were made). */
static void upstream_decodes_to_its_json(const char *name, const char *const *zeros,
                                         const char *const *empties) {
  char f[128];
  size_t plen, jlen, olen;
  snprintf(f, sizeof f, "%s.pb", name);
  char *pb = slurp(f, &plen);
  snprintf(f, sizeof f, "%s.json", name);
  char *js = slurp(f, &jlen);
  snprintf(f, sizeof f, "%s-nanolet.pb", name);
  char *ours = slurp(f, &olen);
  json_t *want = json_loadb(js, jlen, 0, NULL);
  assert_non_null(want);
  json_t *got = NULL;
  nl_err_t *err = NULL;
  nl_kube_response_t resp = {200, pb, plen, NL_KUBE_PB_TYPE};
  if (nl_kube_resp_json(&resp, &got, &err) < 0) fail_msg("%s", nl_err_msg(err));
  for (const char *const *z = zeros; *z; z += 2) {
    json_t *parent = json_object_get(got, z[0]);
    json_t *v = json_object_get(parent, z[1]);
    if (!v || (json_is_integer(v) ? json_integer_value(v) != 0 : !json_is_false(v)))
      fail_msg("%s.%s: want a zero value", z[0], z[1]);
    json_object_del(parent, z[1]);
  }
  for (const char *const *e = empties; *e; e += 3)
    json_object_set_new(json_object_get(json_object_get(got, e[0]), e[1]), e[2], json_string(""));
  if (!json_equal(got, want)) {
    char *g = json_dumps(got, JSON_SORT_KEYS), *w = json_dumps(want, JSON_SORT_KEYS);
    fail_msg("got  %s\nwant %s", g, w);
  }
  uint8_t *again;
  size_t alen;
  if (nl_kube_pb_from_json(want, &again, &alen, &err) < 0) fail_msg("%s", nl_err_msg(err));
  printf("# %s: %zu bytes JSON, %zu bytes protobuf from upstream, %zu from nanolet\n", name, jlen,
         plen, alen);
  assert_int_equal(alen, olen);
  assert_memory_equal(again, ours, olen);
  free(again);
  json_decref(got);
  json_decref(want);
  free(pb);
  free(js);
  free(ours);
}

static void upstream_lease_decodes_to_its_json(void **state) {
  static const char *const zeros[] = {"metadata", "generation", NULL};
  static const char *const empties[] = {NULL};
  upstream_decodes_to_its_json("lease", zeros, empties);
}

static void upstream_node_decodes_to_its_json(void **state) {
  static const char *const zeros[] = {"metadata", "generation", "spec", "unschedulable", NULL};
  /* kubeProxyVersion (deprecated) has no omitempty */
  static const char *const empties[] = {"status", "nodeInfo", "kubeProxyVersion", NULL};
  upstream_decodes_to_its_json("node", zeros, empties);
}

static void lease_round_trip(void **state) {
  const char *text =
      "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"n1\","
      "\"namespace\":\"kube-node-lease\",\"resourceVersion\":\"7\",\"labels\":{\"x\":\"y\",\"z\":\"\"},"
      "\"annotations\":{\"a\":\"\\u00e9\"},\"finalizers\":[\"f1\",\"f2\"],"
      "\"deletionTimestamp\":\"2026-01-02T03:04:05Z\",\"deletionGracePeriodSeconds\":0,"
      "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\",\"uid\":\"u\","
      "\"blockOwnerDeletion\":false}]},"
      "\"spec\":{\"holderIdentity\":\"n1\",\"leaseDurationSeconds\":40,"
      "\"acquireTime\":\"1970-01-01T00:00:00.000001Z\",\"renewTime\":\"2026-11-26T20:07:34.999999Z\","
      "\"leaseTransitions\":2147483647,\"strategy\":\"OldestEmulationVersion\",\"preferredHolder\":\"p\"}}";
  json_t *in = json_loads(text, 0, NULL);
  assert_non_null(in);
  uint8_t *b;
  size_t len;
  nl_err_t *err = NULL;
  if (nl_kube_pb_from_json(in, &b, &len, &err) < 0) fail_msg("%s", nl_err_msg(err));
  json_t *out = NULL;
  if (nl_kube_pb_to_json(b, len, &out, &err) < 0) fail_msg("%s", nl_err_msg(err));
  if (!json_equal(in, out)) fail_msg("got %s", json_dumps(out, JSON_SORT_KEYS));
  /* A time with an offset and nanoseconds: UTC, cut to microseconds. */
  json_object_set_new(json_object_get(in, "spec"), "renewTime",
                      json_string("2026-11-26T21:07:34.1234567+01:00"));
  free(b);
  json_decref(out);
  assert_int_equal(nl_kube_pb_from_json(in, &b, &len, &err), 0);
  assert_int_equal(nl_kube_pb_to_json(b, len, &out, &err), 0);
  assert_string_equal(json_string_value(json_object_get(json_object_get(out, "spec"), "renewTime")),
                      "2026-11-26T20:07:34.123456Z");
  free(b);
  json_decref(out);
  json_decref(in);
}

/* Go's zero time is null in JSON; so is a MicroTime that is zero at
 * microsecond precision (it would read back as the zero time). */
static void zero_times_are_null(void **state) {
  Nlk8s__MicroTime rt = NLK8S__MICRO_TIME__INIT, at = NLK8S__MICRO_TIME__INIT;
  rt.has_seconds = rt.has_nanos = at.has_seconds = at.has_nanos = true;
  rt.seconds = at.seconds = INT64_C(-62135596800);
  rt.nanos = 999;
  at.nanos = 1000;
  Nlk8s__LeaseSpec spec = NLK8S__LEASE_SPEC__INIT;
  spec.renewtime = &rt;
  spec.acquiretime = &at;
  Nlk8s__Lease lease = NLK8S__LEASE__INIT;
  lease.spec = &spec;
  uint8_t raw[128], *b;
  size_t n = nlk8s__lease__pack(&lease, raw), len;
  b = nl_kube_pb_wrap("coordination.k8s.io/v1", "Lease", raw, n, &len);
  json_t *o = NULL;
  nl_err_t *err = NULL;
  if (nl_kube_pb_to_json(b, len, &o, &err) < 0) fail_msg("%s", nl_err_msg(err));
  json_t *s = json_object_get(o, "spec");
  assert_null(json_object_get(s, "renewTime"));
  assert_string_equal(json_string_value(json_object_get(s, "acquireTime")), "0001-01-01T00:00:00.000001Z");
  json_decref(o);
  free(b);
}

static void expect_encode_err(const char *text, const char *msg) {
  json_t *in = json_loads(text, 0, NULL);
  assert_non_null(in);
  uint8_t *b = NULL;
  size_t len;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_pb_from_json(in, &b, &len, &err), -1);
  if (strcmp(nl_err_msg(err), msg) != 0) fail_msg("got  %s\nwant %s", nl_err_msg(err), msg);
  nl_err_free(&err);
  json_decref(in);
}

#define LEASE "\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\""

static void bad_json_names_the_field(void **state) {
  expect_encode_err("{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}", "protobuf: v1 Pod: kind not known");
  expect_encode_err("{" LEASE ",\"spec\":{\"holder\":\"x\"}}",
                    "protobuf: Lease: spec.holder: field not known to nanolet's protobuf");
  expect_encode_err("{" LEASE ",\"spec\":{\"renewTime\":\"yesterday\"}}",
                    "protobuf: Lease: spec.renewTime: not an RFC 3339 time");
  expect_encode_err("{" LEASE ",\"spec\":{\"leaseDurationSeconds\":4294967296}}",
                    "protobuf: Lease: spec.leaseDurationSeconds: out of range");
  expect_encode_err("{" LEASE ",\"metadata\":{\"labels\":{\"a\":1}}}",
                    "protobuf: Lease: metadata.labels.a: not a string");
  expect_encode_err("{" LEASE ",\"metadata\":{\"finalizers\":[\"a\",2]}}",
                    "protobuf: Lease: metadata.finalizers[1]: not a string");
  expect_encode_err("{" LEASE ",\"metadata\":{\"ownerReferences\":[{\"controller\":\"yes\"}]}}",
                    "protobuf: Lease: metadata.ownerReferences[0].controller: not a boolean");
  expect_encode_err("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"status\":{\"capacity\":{\"cpu\":2}}}",
                    "protobuf: Node: status.capacity.cpu: not a quantity string");
  expect_encode_err("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"status\":{\"daemonEndpoints\":"
                    "{\"kubeletEndpoint\":{\"port\":10250}}}}",
                    "protobuf: Node: status.daemonEndpoints.kubeletEndpoint.port: field not known to "
                    "nanolet's protobuf");
}

/* A failed request's Status in protobuf gives its message and reason. */
static void protobuf_status_gives_its_message(void **state) {
  json_t *st = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i}", "apiVersion", "v1", "kind", "Status",
                         "status", "Failure", "message",
                         "Operation cannot be fulfilled on leases.coordination.k8s.io \"n1\"",
                         "reason", "Conflict", "code", 409);
  uint8_t *b;
  size_t len;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_pb_from_json(st, &b, &len, &err), 0);
  nl_kube_response_t resp = {409, (const char *)b, len, NL_KUBE_PB_TYPE};
  assert_int_equal(nl_kube_status_err(&resp, &err), -1);
  assert_string_equal(nl_err_msg(err), "Operation cannot be fulfilled on leases.coordination.k8s.io \"n1\"");
  nl_err_free(&err);
  assert_int_equal(nl_kube_status_reason(&resp), NL_KUBE_REASON_CONFLICT);
  free(b);
  json_decref(st);
}

static void json_answers_still_decode(void **state) {
  const char *body = "{\"kind\":\"Lease\"}";
  nl_kube_response_t resp = {200, body, strlen(body), "application/json"};
  json_t *o = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_resp_json(&resp, &o, &err), 0);
  assert_string_equal(json_string_value(json_object_get(o, "kind")), "Lease");
  json_decref(o);
  resp.body_len = 5;
  assert_int_equal(nl_kube_resp_json(&resp, &o, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "JSON: "));
  nl_err_free(&err);
  assert_true(nl_kube_pb_wanted("application/vnd.kubernetes.protobuf"));
  assert_true(nl_kube_pb_wanted("application/vnd.kubernetes.protobuf;stream=watch"));
  assert_false(nl_kube_pb_wanted("application/json"));
  assert_false(nl_kube_pb_wanted(NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(envelope_round_trip_and_errors),
      cmocka_unit_test(upstream_lease_decodes_to_its_json),
      cmocka_unit_test(upstream_node_decodes_to_its_json),
      cmocka_unit_test(lease_round_trip),
      cmocka_unit_test(zero_times_are_null),
      cmocka_unit_test(bad_json_names_the_field),
      cmocka_unit_test(protobuf_status_gives_its_message),
      cmocka_unit_test(json_answers_still_decode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
