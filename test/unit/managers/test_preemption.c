/* Critical pod admission: which pods are preempted for a critical pod
 * (upstream getPodsToPreempt), which pods may be, and the admission handler
 * that lets a critical pod through with what it lacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "managers/admission.h"
#include "managers/preemption.h"

/* A pod named name: source "api" unless annotations says otherwise. */
static nl_pod_t *pod_with(const char *name, const char *annotations, const char *spec) {
  char y[4096];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: default, uid: uid-%s,"
           " annotations: {%s}}\nspec:\n%s",
           name, name, annotations, spec);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(y, strlen(y), "test.yaml", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_pod_set_defaults(pod);
  return pod;
}

#define API "kubernetes.io/config.source: api"
#define BESTEFFORT "  containers: [{name: c, image: i}]\n"
#define BURSTABLE(cpu, mem) \
  "  containers: [{name: c, image: i, resources: {requests: {cpu: " cpu ", memory: " mem "}}}]\n"
#define GUARANTEED(cpu, mem)                                                             \
  "  containers: [{name: c, image: i, resources: {requests: {cpu: " cpu ", memory: " mem \
  "}, limits: {cpu: " cpu ", memory: " mem "}}}]\n"

static nl_pod_t *api_pod(const char *name, const char *spec) { return pod_with(name, API, spec); }

/* The critical pod of the node suite's spec: system-node-critical's priority. */
static nl_pod_t *critical(const char *spec_resources) {
  char spec[1024];
  snprintf(spec, sizeof spec, "  priority: 2000001000\n%s", spec_resources);
  return api_pod("critical", spec);
}

/* Runs the selection; returns the names chosen, in order, joined by ','
 * (or "error: <message>"). */
static char *choose(const nl_pod_t *preemptor, nl_pod_t **pods, size_t n,
                    const nl_preempt_need_t *need, size_t n_need) {
  static char out[512];
  const nl_pod_t **chosen;
  size_t m;
  nl_err_t *err = NULL;
  if (nl_preempt_select(preemptor, (const nl_pod_t *const *)pods, n, need, n_need, &chosen, &m,
                        &err) < 0) {
    snprintf(out, sizeof out, "error: %s", nl_err_msg(err));
    nl_err_free(&err);
    assert_null(chosen);
    return out;
  }
  out[0] = 0;
  for (size_t i = 0; i < m; i++) {
    if (i) strcat(out, ",");
    strcat(out, chosen[i]->metadata.name);
  }
  free(chosen);
  return out;
}

static void free_pods(nl_pod_t **pods, size_t n) {
  for (size_t i = 0; i < n; i++) nl_pod_free(pods[i]);
}

/* The node suite's case: the critical pod asks for all the node's cpu and
 * memory; a Burstable and a Guaranteed pod hold 100m and 100Mi each, a
 * BestEffort pod nothing. Both go, the BestEffort one stays. */
static void the_node_suite_case(void **state) {
  (void)state;
  nl_pod_t *pods[] = {api_pod("best-effort", BESTEFFORT),
                      api_pod("burstable", BURSTABLE("100m", "100Mi")),
                      api_pod("guaranteed", GUARANTEED("100m", "100Mi"))};
  nl_pod_t *crit = critical(BESTEFFORT);
  nl_preempt_need_t need[] = {{"cpu", 200}, {"memory", 200 << 20}};
  assert_string_equal(choose(crit, pods, 3, need, 2), "burstable,guaranteed");
  /* half of it: the Burstable pod alone, a Guaranteed one is spared */
  nl_preempt_need_t half[] = {{"cpu", 100}, {"memory", 100 << 20}};
  assert_string_equal(choose(crit, pods, 3, half, 2), "burstable");
  /* a pod slot: a BestEffort pod is the first to go */
  nl_preempt_need_t slot[] = {{"pods", 1}};
  assert_string_equal(choose(crit, pods, 3, slot, 1), "best-effort");
  nl_pod_free(crit);
  free_pods(pods, 3);
}

/* Guaranteed pods go only for what the others cannot free. */
static void guaranteed_last(void **state) {
  (void)state;
  nl_pod_t *pods[] = {api_pod("g-big", GUARANTEED("800m", "1Gi")),
                      api_pod("b-small", BURSTABLE("200m", "100Mi")),
                      api_pod("b-mid", BURSTABLE("300m", "100Mi"))};
  nl_pod_t *crit = critical(BESTEFFORT);
  nl_preempt_need_t need[] = {{"cpu", 500}};
  /* b-mid is closer (300m of 500m), then b-small for the rest */
  assert_string_equal(choose(crit, pods, 3, need, 1), "b-mid,b-small");
  nl_preempt_need_t more[] = {{"cpu", 600}};
  /* 100m more than the Burstable pods hold: the Guaranteed pod, and then
   * none of the Burstable ones is needed */
  assert_string_equal(choose(crit, pods, 3, more, 1), "g-big");
  nl_pod_free(crit);
  free_pods(pods, 3);
}

/* Within a class, the fewest pods: the closest to what is missing, the
 * smaller request (memory, then cpu) on a tie. */
static void fewest_and_smallest(void **state) {
  (void)state;
  nl_pod_t *pods[] = {api_pod("b100", BURSTABLE("100m", "64Mi")),
                      api_pod("b500", BURSTABLE("500m", "64Mi")),
                      api_pod("b300", BURSTABLE("300m", "64Mi"))};
  nl_pod_t *crit = critical(BESTEFFORT);
  nl_preempt_need_t n300[] = {{"cpu", 300}};
  /* b300 and b500 both cover it (distance 0): the smaller cpu request */
  assert_string_equal(choose(crit, pods, 3, n300, 1), "b300");
  nl_preempt_need_t n600[] = {{"cpu", 600}};
  /* b500 first (closest), then the 100m left: b100 and b300 tie, b100 is smaller */
  assert_string_equal(choose(crit, pods, 3, n600, 1), "b500,b100");
  nl_preempt_need_t n250[] = {{"cpu", 250}};
  assert_string_equal(choose(crit, pods, 3, n250, 1), "b300");
  nl_pod_free(crit);
  /* memory decides before cpu */
  nl_pod_t *two[] = {api_pod("more-mem", BURSTABLE("100m", "200Mi")),
                     api_pod("less-mem", BURSTABLE("900m", "100Mi"))};
  crit = critical(BESTEFFORT);
  nl_preempt_need_t n100[] = {{"cpu", 100}};
  assert_string_equal(choose(crit, two, 2, n100, 1), "less-mem");
  nl_pod_free(crit);
  free_pods(two, 2);
  free_pods(pods, 3);
}

/* Critical pods are not preempted; when the others cannot free enough,
 * nothing is chosen and the message says what is missing. */
static void critical_pods_stay(void **state) {
  (void)state;
  nl_pod_t *pods[] = {pod_with("static", "", BURSTABLE("500m", "64Mi")),
                      pod_with("mirror", API ", kubernetes.io/config.mirror: abc",
                               BURSTABLE("500m", "64Mi")),
                      api_pod("cluster-critical", "  priority: 2000000000\n" BURSTABLE("500m", "64Mi")),
                      api_pod("plain", BURSTABLE("100m", "64Mi"))};
  nl_pod_t *crit = critical(BESTEFFORT);
  nl_preempt_need_t need[] = {{"cpu", 300}, {"memory", 1}};
  /* system-node-critical outranks system-cluster-critical (priority) */
  assert_string_equal(choose(crit, pods, 4, need, 2), "cluster-critical");
  nl_pod_t *cc = pod_with("cc", API, "  priority: 2000000000\n" BESTEFFORT);
  assert_string_equal(choose(cc, pods, 4, need, 2),
                      "error: no set of running pods found to reclaim resources: "
                      "[(res: cpu, q: 200), ]");
  assert_false(nl_preemptable(cc, pods[0]));
  assert_false(nl_preemptable(cc, pods[1]));
  assert_false(nl_preemptable(cc, pods[2]));
  assert_true(nl_preemptable(cc, pods[3]));
  assert_true(nl_preemptable(crit, pods[2]));
  /* a pod that is not critical preempts nothing without priorities */
  assert_false(nl_preemptable(pods[3], pods[3]));
  nl_pod_free(cc);
  nl_pod_free(crit);
  free_pods(pods, 4);
}

#define NODE_JSON                                                                              \
  "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"kubernetes.io/os\":\"linux\",\"zone\":\"a\"}}," \
  "\"status\":{\"allocatable\":{\"cpu\":\"1\",\"memory\":\"1Gi\",\"pods\":\"3\"}}}"

/* The admission handler: a critical pod short of resources only is admitted
 * with what it lacks; for any other reason it is refused with that reason; a
 * pod that is not critical is refused for the resources. */
static void admission_lets_critical_pods_through(void **state) {
  (void)state;
  json_t *j = json_loads(NODE_JSON, 0, NULL);
  nl_admit_node_t node;
  nl_admit_node_from_json(&node, j);
  json_decref(j);
  nl_pod_t *running[] = {api_pod("b", BURSTABLE("300m", "100Mi")),
                         api_pod("g", GUARANTEED("200m", "100Mi"))};
  nl_admit_pods_t others = {(const nl_pod_t *const *)running, 2};
  nl_preempt_need_t need[NL_ADMIT_RESOURCES];
  size_t n = 9;
  nl_admit_result_t r = {0};
  nl_pod_t *crit = critical(BURSTABLE("1", "1Gi"));
  assert_true(nl_admit_pod_critical(&node, crit, &others, false, need, &n, &r));
  assert_int_equal(n, 2);
  assert_string_equal(need[0].resource, "cpu");
  assert_int_equal(need[0].quantity, 500);
  assert_string_equal(need[1].resource, "memory");
  assert_int_equal(need[1].quantity, 200 << 20);
  assert_string_equal(choose(crit, running, 2, need, n), "b,g");
  nl_pod_free(crit);
  /* it fits: nothing to free */
  crit = critical(BURSTABLE("100m", "1Mi"));
  assert_true(nl_admit_pod_critical(&node, crit, &others, false, need, &n, &r));
  assert_int_equal(n, 0);
  nl_pod_free(crit);
  /* short of cpu and of the node's labels: the selector's reason */
  crit = critical("  nodeSelector: {zone: b}\n" BURSTABLE("1", "1Mi"));
  assert_false(nl_admit_pod_critical(&node, crit, &others, false, need, &n, &r));
  assert_string_equal(r.reason, "NodeAffinity");
  nl_admit_result_free(&r);
  nl_pod_free(crit);
  /* not critical: refused for the cpu */
  nl_pod_t *plain = api_pod("plain", BURSTABLE("1", "1Mi"));
  assert_false(nl_admit_pod_critical(&node, plain, &others, false, need, &n, &r));
  assert_string_equal(r.reason, "OutOfcpu");
  assert_string_equal(r.message,
                      "Node didn't have enough resource: cpu, requested: 1000, used: 500, "
                      "capacity: 1000");
  nl_admit_result_free(&r);
  nl_pod_free(plain);
  /* a full node: a pod slot */
  nl_pod_t *third = api_pod("be", BESTEFFORT);
  nl_pod_t *three[] = {running[0], running[1], third};
  nl_admit_pods_t full = {(const nl_pod_t *const *)three, 3};
  crit = critical(BESTEFFORT);
  assert_true(nl_admit_pod_critical(&node, crit, &full, false, need, &n, &r));
  assert_int_equal(n, 1);
  assert_string_equal(need[0].resource, "pods");
  assert_int_equal(need[0].quantity, 1);
  assert_string_equal(choose(crit, three, 3, need, n), "be");
  nl_pod_free(crit);
  nl_pod_free(third);
  free_pods(running, 2);
  nl_admit_node_free(&node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_node_suite_case),
      cmocka_unit_test(guaranteed_last),
      cmocka_unit_test(fewest_and_smallest),
      cmocka_unit_test(critical_pods_stay),
      cmocka_unit_test(admission_lets_critical_pods_through),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
