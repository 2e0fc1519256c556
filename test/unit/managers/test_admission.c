/* Admission: each predicate with upstream's reasons and messages, the order in
 * which they are checked, and the Node as the API server returns it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "managers/admission.h"

static nl_pod_t *pod_of(const char *spec_yaml) {
  char y[4096];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n%s",
           spec_yaml);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(y, strlen(y), "test.yaml", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_pod_set_defaults(pod);
  return pod;
}

#define NODE_JSON                                                                               \
  "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"kubernetes.io/hostname\":\"n1\","             \
  "\"kubernetes.io/os\":\"linux\",\"zone\":\"a\",\"gen\":\"5\"}},"                              \
  "\"spec\":{\"taints\":[{\"key\":\"edge\",\"effect\":\"NoSchedule\"},"                         \
  "{\"key\":\"dedicated\",\"value\":\"gw\",\"effect\":\"NoExecute\"}]},"                        \
  "\"status\":{\"allocatable\":{\"cpu\":\"1\",\"memory\":\"1Gi\",\"ephemeral-storage\":\"10Gi\"," \
  "\"pods\":\"3\"}}}"

static void node_of(nl_admit_node_t *n) {
  json_t *j = json_loads(NODE_JSON, 0, NULL);
  assert_non_null(j);
  nl_admit_node_from_json(n, j);
  json_decref(j);
}

/* Runs the whole handler; returns the reason or NULL, and the message in msg. */
static const char *admit(const nl_admit_node_t *n, const nl_pod_t *pod, const nl_pod_t **others,
                         size_t n_others, bool is_static, char *msg, size_t len) {
  nl_admit_pods_t o = {others, n_others};
  nl_admit_result_t r = {0};
  if (nl_admit_pod(n, pod, &o, is_static, &r)) return NULL;
  snprintf(msg, len, "%s", r.message);
  nl_admit_result_free(&r);
  return r.reason;
}

#define TOLERATE_GW "  tolerations: [{key: dedicated, operator: Equal, value: gw, effect: NoExecute}]\n"

static void node_from_the_api(void **state) {
  (void)state;
  nl_admit_node_t n;
  node_of(&n);
  assert_string_equal(n.name, "n1");
  assert_int_equal(n.cpu_milli, 1000);
  assert_int_equal(n.memory, 1073741824);
  assert_int_equal(n.ephemeral_storage, 10737418240LL);
  assert_int_equal(n.pods, 3);
  assert_int_equal(n.n_taints, 2);
  assert_string_equal(nl_admit_node_label(&n, "zone"), "a");
  assert_null(nl_admit_node_label(&n, "nope"));
  nl_admit_node_free(&n);
  nl_admit_node_local(&n, "gw1", 110);
  assert_string_equal(nl_admit_node_label(&n, "kubernetes.io/os"), "linux");
  assert_string_equal(nl_admit_node_label(&n, "kubernetes.io/hostname"), "gw1");
  assert_int_equal(n.pods, 110);
  assert_int_equal(n.memory, -1);
  nl_admit_node_free(&n);
}

static void requests_sum_as_the_scheduler_does(void **state) {
  (void)state;
  nl_pod_t *p = pod_of(
      "spec:\n  overhead: {cpu: 10m}\n  initContainers:\n"
      "  - {name: side, image: b, restartPolicy: Always, resources: {requests: {cpu: 100m}}}\n"
      "  - {name: big, image: b, resources: {requests: {cpu: '2', memory: 1Mi}}}\n"
      "  containers:\n  - {name: a, image: b, resources: {requests: {cpu: 200m, memory: 64Mi}}}\n"
      "  - {name: c, image: b, resources: {limits: {cpu: 300m}}}\n");
  /* max(200m + 300m + 100m sidecar, 100m + 2) + 10m overhead */
  assert_int_equal(nl_pod_request(p, "cpu"), 2110);
  assert_int_equal(nl_pod_request(p, "memory"), 64 << 20);
  assert_int_equal(nl_pod_request(p, "ephemeral-storage"), 0);
  nl_pod_free(p);
}

static void resources_fit_with_upstream_messages(void **state) {
  (void)state;
  nl_admit_node_t n;
  node_of(&n);
  char msg[256];
  nl_pod_t *small = pod_of("spec:\n" TOLERATE_GW "  containers:\n"
                           "  - {name: a, image: b, resources: {requests: {cpu: 400m, memory: 512Mi}}}\n");
  nl_pod_t *cpu = pod_of("spec:\n" TOLERATE_GW "  containers:\n"
                         "  - {name: a, image: b, resources: {requests: {cpu: 700m}}}\n");
  nl_pod_t *mem = pod_of("spec:\n" TOLERATE_GW "  containers:\n"
                         "  - {name: a, image: b, resources: {requests: {memory: 600Mi}}}\n");
  nl_pod_t *disk = pod_of("spec:\n" TOLERATE_GW "  containers:\n"
                          "  - {name: a, image: b, resources: {requests: {ephemeral-storage: 11Gi}}}\n");
  const nl_pod_t *others[] = {small};
  assert_null(admit(&n, small, NULL, 0, false, msg, sizeof msg));
  assert_string_equal(admit(&n, cpu, others, 1, false, msg, sizeof msg), "OutOfcpu");
  assert_string_equal(msg, "Node didn't have enough resource: cpu, requested: 700, used: 400, capacity: 1000");
  assert_string_equal(admit(&n, mem, others, 1, false, msg, sizeof msg), "OutOfmemory");
  assert_string_equal(msg, "Node didn't have enough resource: memory, requested: 629145600, used: "
                           "536870912, capacity: 1073741824");
  assert_string_equal(admit(&n, disk, NULL, 0, false, msg, sizeof msg), "OutOfephemeral-storage");
  assert_string_equal(msg, "Node didn't have enough resource: ephemeral-storage, requested: "
                           "11811160064, used: 0, capacity: 10737418240");
  /* pods first: a full node says OutOfpods whatever else is wrong */
  const nl_pod_t *three[] = {small, small, small};
  assert_string_equal(admit(&n, cpu, three, 3, false, msg, sizeof msg), "OutOfpods");
  assert_string_equal(msg, "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3");
  /* a pod with no requests always fits the resources */
  nl_pod_t *none = pod_of("spec:\n" TOLERATE_GW "  containers: [{name: a, image: b}]\n");
  const nl_pod_t *two[] = {cpu, cpu};
  assert_null(admit(&n, none, two, 2, false, msg, sizeof msg));
  nl_pod_free(none);
  nl_pod_free(small);
  nl_pod_free(cpu);
  nl_pod_free(mem);
  nl_pod_free(disk);
  nl_admit_node_free(&n);
}

static void node_affinity_and_selector(void **state) {
  (void)state;
  nl_admit_node_t n;
  node_of(&n);
  static const struct {
    const char *spec;
    bool ok;
  } cases[] = {
      {"  nodeSelector: {zone: a}\n", true},
      {"  nodeSelector: {zone: b}\n", false},
      {"  nodeSelector: {zone: a, rack: r1}\n", false},
#define AFF(terms) "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: " terms "}}}\n"
      {AFF("[{matchExpressions: [{key: zone, operator: In, values: [b, a]}]}]"), true},
      {AFF("[{matchExpressions: [{key: zone, operator: NotIn, values: [a]}]}]"), false},
      {AFF("[{matchExpressions: [{key: rack, operator: NotIn, values: [a]}]}]"), true},
      {AFF("[{matchExpressions: [{key: zone, operator: Exists}, {key: gpu, operator: DoesNotExist}]}]"), true},
      {AFF("[{matchExpressions: [{key: gpu, operator: Exists}]}]"), false},
      {AFF("[{matchExpressions: [{key: gen, operator: Gt, values: ['4']}]}]"), true},
      {AFF("[{matchExpressions: [{key: gen, operator: Lt, values: ['5']}]}]"), false},
      {AFF("[{matchExpressions: [{key: zone, operator: Gt, values: ['1']}]}]"), false},
      /* terms are ORed; an empty term matches nothing */
      {AFF("[{matchExpressions: [{key: gpu, operator: Exists}]}, {matchFields: [{key: metadata.name, operator: In, values: [n1]}]}]"), true},
      {AFF("[{}]"), false},
      {AFF("[{matchFields: [{key: metadata.name, operator: NotIn, values: [n1]}]}]"), false},
      /* nodeSelector and affinity must both hold */
      {"  nodeSelector: {zone: b}\n" AFF("[{matchExpressions: [{key: zone, operator: Exists}]}]"), false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char spec[1024];
    snprintf(spec, sizeof spec, "spec:\n%s" TOLERATE_GW "  containers: [{name: a, image: b}]\n",
             cases[i].spec);
    nl_pod_t *p = pod_of(spec);
    char msg[256];
    const char *reason = admit(&n, p, NULL, 0, false, msg, sizeof msg);
    if (cases[i].ok != (reason == NULL)) fail_msg("case %zu: %s", i, cases[i].spec);
    if (reason) {
      assert_string_equal(reason, "NodeAffinity");
      assert_string_equal(msg, "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector");
    }
    nl_pod_free(p);
  }
  nl_admit_node_free(&n);
}

/* The affinity survives a copy (pods are copied by encoding). */
static void affinity_and_os_round_trip(void **state) {
  (void)state;
  nl_pod_t *p = pod_of("spec:\n  os: {name: linux}\n" AFF("[{matchExpressions: [{key: zone, operator: In, values: [a]}]}]")
                       "  containers: [{name: a, image: b}]\n");
  nl_pod_t *c = nl_pod_dup(p);
  assert_string_equal(c->spec.os_name, "linux");
  assert_non_null(c->spec.required_node_affinity);
  assert_int_equal(c->spec.required_node_affinity->n_terms, 1);
  assert_string_equal(c->spec.required_node_affinity->terms[0].match_expressions[0].values.items[0], "a");
  nl_pod_free(c);
  nl_pod_free(p);
}

static void host_ports_conflict(void **state) {
  (void)state;
  nl_admit_node_t n;
  node_of(&n);
  nl_pod_t *web = pod_of("spec:\n" TOLERATE_GW "  containers:\n  - {name: a, image: b, ports: [{containerPort: 80, hostPort: 8080}]}\n");
  nl_pod_t *same = pod_of("spec:\n" TOLERATE_GW "  containers:\n  - {name: a, image: b, ports: [{containerPort: 81, hostPort: 8080, hostIP: 10.0.0.1}]}\n");
  nl_pod_t *udp = pod_of("spec:\n" TOLERATE_GW "  containers:\n  - {name: a, image: b, ports: [{containerPort: 81, hostPort: 8080, protocol: UDP}]}\n");
  nl_pod_t *ip1 = pod_of("spec:\n" TOLERATE_GW "  containers:\n  - {name: a, image: b, ports: [{containerPort: 81, hostPort: 9090, hostIP: 10.0.0.1}]}\n");
  nl_pod_t *ip2 = pod_of("spec:\n" TOLERATE_GW "  containers:\n  - {name: a, image: b, ports: [{containerPort: 81, hostPort: 9090, hostIP: 10.0.0.2}]}\n");
  const nl_pod_t *o1[] = {web}, *o2[] = {ip1};
  char msg[256];
  assert_string_equal(admit(&n, same, o1, 1, false, msg, sizeof msg), "NodePorts");
  assert_string_equal(msg, "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports");
  assert_null(admit(&n, udp, o1, 1, false, msg, sizeof msg));
  assert_null(admit(&n, ip2, o2, 1, false, msg, sizeof msg));
  assert_non_null(admit(&n, ip1, o2, 1, false, msg, sizeof msg));
  nl_pod_free(web);
  nl_pod_free(same);
  nl_pod_free(udp);
  nl_pod_free(ip1);
  nl_pod_free(ip2);
  nl_admit_node_free(&n);
}

/* Only NoExecute taints count on the node (NoSchedule is the scheduler's), and
 * not for static pods. */
static void taints_and_tolerations(void **state) {
  (void)state;
  nl_admit_node_t n;
  node_of(&n);
  static const struct {
    const char *tolerations;
    bool ok;
  } cases[] = {
      {"", false},
      {"  tolerations: [{key: dedicated, operator: Equal, value: gw, effect: NoExecute}]\n", true},
      {"  tolerations: [{key: dedicated, value: gw}]\n", true},
      {"  tolerations: [{key: dedicated, operator: Equal, value: other}]\n", false},
      {"  tolerations: [{key: dedicated, operator: Exists}]\n", true},
      {"  tolerations: [{operator: Exists}]\n", true},
      {"  tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]\n", false},
  };
  char msg[256];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char spec[512];
    snprintf(spec, sizeof spec, "spec:\n%s  containers: [{name: a, image: b}]\n", cases[i].tolerations);
    nl_pod_t *p = pod_of(spec);
    const char *reason = admit(&n, p, NULL, 0, false, msg, sizeof msg);
    if (cases[i].ok != (reason == NULL)) fail_msg("case %zu: %s", i, cases[i].tolerations);
    if (reason) {
      assert_string_equal(reason, "TaintToleration");
      assert_string_equal(msg, "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate");
    }
    assert_null(admit(&n, p, NULL, 0, true, msg, sizeof msg)); /* static */
    nl_pod_free(p);
  }
  nl_admit_node_free(&n);
}

static void os_and_node_name(void **state) {
  (void)state;
  nl_admit_node_t n;
  node_of(&n);
  char msg[256];
  nl_pod_t *p = pod_of("spec:\n  os: {name: windows}\n  containers: [{name: a, image: b}]\n");
  assert_string_equal(admit(&n, p, NULL, 0, false, msg, sizeof msg), "PodOSNotSupported");
  assert_string_equal(msg, "Failed to admit pod as the OS field doesn't match node OS");
  nl_pod_free(p);
  char y[] = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {kubernetes.io/os: windows}}\n"
             "spec:\n  containers: [{name: a, image: b}]\n";
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_decode(y, strlen(y), NULL, &p, &err), 0);
  assert_string_equal(admit(&n, p, NULL, 0, false, msg, sizeof msg), "PodOSSelectorNodeLabelDoesNotMatch");
  assert_string_equal(msg, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label");
  nl_pod_free(p);
  p = pod_of("spec:\n  nodeName: n2\n" TOLERATE_GW "  containers: [{name: a, image: b}]\n");
  assert_string_equal(admit(&n, p, NULL, 0, false, msg, sizeof msg), "NodeName");
  assert_string_equal(msg, "Predicate NodeName failed: node(s) didn't match the requested node name");
  nl_pod_free(p);
  nl_admit_node_free(&n);
}

/* upstream's rejectPodAdmissionBasedOnSupplementalGroupsPolicy: only Strict,
 * only on a node whose status.features does not say the runtime supports it
 * (absent, as with containerd 1.6, or false). */
static void supplemental_groups_policy(void **state) {
  (void)state;
  static const char *const nodes[] = {
      "{\"metadata\":{\"name\":\"n1\"}}",
      "{\"metadata\":{\"name\":\"n1\"},\"status\":{\"features\":{}}}",
      "{\"metadata\":{\"name\":\"n1\"},\"status\":{\"features\":"
      "{\"supplementalGroupsPolicy\":false}}}",
      "{\"metadata\":{\"name\":\"n1\"},\"status\":{\"features\":"
      "{\"supplementalGroupsPolicy\":true}}}",
  };
  static const char *const policies[] = {NULL, "Merge", "Strict"};
  for (size_t i = 0; i < 4; i++) {
    json_t *j = json_loads(nodes[i], 0, NULL);
    assert_non_null(j);
    nl_admit_node_t n;
    nl_admit_node_from_json(&n, j);
    json_decref(j);
    assert_int_equal(n.supplemental_groups_policy, i == 3);
    for (size_t k = 0; k < 3; k++) {
      char y[512], msg[256];
      snprintf(y, sizeof y,
               "spec:\n  securityContext: {runAsUser: 1000, supplementalGroups: [60000]%s%s}\n"
               "  containers: [{name: a, image: b}]\n",
               policies[k] ? ", supplementalGroupsPolicy: " : "", policies[k] ? policies[k] : "");
      nl_pod_t *p = pod_of(y);
      const char *reason = admit(&n, p, NULL, 0, false, msg, sizeof msg);
      if (k == 2 && i != 3) {
        assert_non_null(reason);
        assert_string_equal(reason, "SupplementalGroupsPolicyNotSupported");
        assert_string_equal(msg, "SupplementalGroupsPolicy=Strict is not supported in this node");
      } else {
        assert_null(reason);
      }
      nl_pod_free(p);
    }
    nl_admit_node_free(&n);
  }
  /* a node known only from the configuration says nothing: Strict is refused */
  nl_admit_node_t n;
  nl_admit_node_local(&n, "n1", 110);
  char msg[256];
  nl_pod_t *p = pod_of("spec:\n  securityContext: {supplementalGroupsPolicy: Strict}\n"
                       "  containers: [{name: a, image: b}]\n");
  assert_string_equal(admit(&n, p, NULL, 0, true, msg, sizeof msg),
                      "SupplementalGroupsPolicyNotSupported");
  nl_pod_free(p);
  nl_admit_node_free(&n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(node_from_the_api),
      cmocka_unit_test(requests_sum_as_the_scheduler_does),
      cmocka_unit_test(resources_fit_with_upstream_messages),
      cmocka_unit_test(node_affinity_and_selector),
      cmocka_unit_test(affinity_and_os_round_trip),
      cmocka_unit_test(host_ports_conflict),
      cmocka_unit_test(taints_and_tolerations),
      cmocka_unit_test(os_and_node_name),
      cmocka_unit_test(supplemental_groups_policy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
