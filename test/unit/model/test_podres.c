/* Pod-level resources (spec.resources): decoded from a manifest, defaulted
 * and validated as upstream's API server does, and the sums and the QoS class
 * that follow from them (component-helpers' PodRequests/PodLimits, GetPodQOS),
 * with upstream's e2e table of pods. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/pod.h"
#include "agent/model/podres.h"

/* A static pod from its resources: pod-level ones (NULL: none) and up to three
 * containers' (NULL: none; "-": no resources field). */
static char *manifest(const char *pod_res, const char *const *ctrs) {
  static char buf[4096];
  int n = snprintf(buf, sizeof buf, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n");
  if (pod_res) n += snprintf(buf + n, sizeof buf - n, "  resources: %s\n", pod_res);
  n += snprintf(buf + n, sizeof buf - n, "  containers:\n");
  for (int i = 0; ctrs[i]; i++) {
    n += snprintf(buf + n, sizeof buf - n, "  - name: c%d\n    image: busybox\n", i + 1);
    if (strcmp(ctrs[i], "-") != 0)
      n += snprintf(buf + n, sizeof buf - n, "    resources: %s\n", ctrs[i]);
  }
  return buf;
}

static int load(const char *yaml, nl_pod_t **pod, nl_err_t **err) {
  nl_static_source_t src = {"file", "p.yaml", "node1"};
  return nl_pod_load_static(yaml, strlen(yaml), &src, pod, err);
}

static nl_pod_t *must_load(const char *pod_res, const char *const *ctrs) {
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (load(manifest(pod_res, ctrs), &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  return pod;
}

/* What a pod-level list holds after defaults, as "name=quantity ...". */
static const char *list_str(const nl_resource_list_t *l) {
  static char buf[256];
  buf[0] = 0;
  for (size_t i = 0; i < l->n; i++) {
    char q[NL_QUANTITY_STRLEN];
    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s=%s", i ? " " : "",
             l->items[i].name, nl_quantity_format(&l->items[i].q, q));
  }
  return buf;
}

typedef struct {
  const char *name, *pod, *ctrs[3];
  const char *qos;
  int64_t cpu_req, cpu_lim, mem_req, mem_lim; /* millicores, Mi */
} row_t;

/* Upstream's test/e2e/common/node/pod_level_resources.go table: the QoS class
 * and the pod's totals (its cgroup's values: no limit where not every
 * container has one and the pod has none). */
static const row_t rows[] = {
    {"guaranteed, no pod resources", NULL,
     {"{requests: {cpu: 50m, memory: 70Mi}, limits: {cpu: 50m, memory: 70Mi}}",
      "{requests: {cpu: 70m, memory: 50Mi}, limits: {cpu: 70m, memory: 50Mi}}"},
     "Guaranteed", 120, 120, 120, 120},
    {"guaranteed, pod resources only", "{requests: {cpu: 100m, memory: 100Mi}, limits: {cpu: 100m, memory: 100Mi}}",
     {"-"}, "Guaranteed", 100, 100, 100, 100},
    {"guaranteed pod, burstable containers",
     "{requests: {cpu: 100m, memory: 100Mi}, limits: {cpu: 100m, memory: 100Mi}}",
     {"{requests: {cpu: 50m, memory: 50Mi}, limits: {cpu: 100m, memory: 100Mi}}",
      "{requests: {cpu: 50m, memory: 50Mi}, limits: {cpu: 100m, memory: 100Mi}}"},
     "Guaranteed", 100, 100, 100, 100},
    {"pod limits only: requests default to them", "{limits: {cpu: 100m, memory: 100Mi}}", {"-"},
     "Guaranteed", 100, 100, 100, 100},
    {"pod limits, container limits: requests default to the containers'",
     "{limits: {cpu: 100m, memory: 100Mi}}",
     {"{limits: {cpu: 50m, memory: 50Mi}}", "{limits: {cpu: 30m, memory: 30Mi}}"}, "Burstable",
     80, 100, 80, 100},
    {"pod limits, container requests", "{limits: {cpu: 100m, memory: 100Mi}}",
     {"{requests: {cpu: 50m, memory: 50Mi}}", "{requests: {cpu: 30m, memory: 30Mi}}"},
     "Burstable", 80, 100, 80, 100},
    {"pod requests only", "{requests: {cpu: 100m, memory: 100Mi}}", {"-"}, "Burstable", 100, 0,
     100, 0},
    {"pod requests, guaranteed and burstable containers", "{requests: {cpu: 100m, memory: 100Mi}}",
     {"{requests: {cpu: 50m, memory: 50Mi}, limits: {cpu: 50m, memory: 50Mi}}",
      "{requests: {cpu: 30m, memory: 30Mi}}"},
     "Burstable", 100, 0, 100, 0},
    {"partial pod requests, one guaranteed container",
     "{requests: {memory: 200Mi}, limits: {cpu: 200m, memory: 200Mi}}",
     {"{requests: {cpu: 100m, memory: 100Mi}, limits: {cpu: 100m, memory: 100Mi}}", "-"},
     "Burstable", 100, 200, 200, 200},
    {"best effort", NULL, {"-", "-"}, "BestEffort", 0, 0, 0, 0},
};

static void qos_and_totals(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const row_t *r = &rows[i];
    nl_pod_t *pod = must_load(r->pod, r->ctrs);
    /* a limit bounds the pod cgroup only when it bounds every container */
    bool all;
    int64_t cl = nl_pod_limit(pod, "cpu", &all);
    if (!all) cl = 0;
    int64_t ml = nl_pod_limit(pod, "memory", &all);
    if (!all) ml = 0;
    if (strcmp(nl_pod_qos_class(pod), r->qos) != 0 || nl_pod_request(pod, "cpu") != r->cpu_req ||
        cl != r->cpu_lim || nl_pod_request(pod, "memory") != r->mem_req << 20 ||
        ml != r->mem_lim << 20)
      fail_msg("%s: got %s cpu %lld/%lld memory %lld/%lld", r->name, nl_pod_qos_class(pod),
               (long long)nl_pod_request(pod, "cpu"), (long long)cl,
               (long long)nl_pod_request(pod, "memory"), (long long)ml);
    nl_pod_free(pod);
  }
}

/* A pod-level limit bounds every container: the pod cgroup gets it even when
 * a container has none of its own; without one, only if every container has. */
static void limits_declared(void **state) {
  (void)state;
  nl_pod_t *pod = must_load("{limits: {memory: 64Mi}}", (const char *const[]){"-", "-", NULL});
  bool all = false;
  assert_int_equal(nl_pod_limit(pod, "memory", &all), 64 << 20);
  assert_true(all);
  assert_int_equal(nl_pod_limit(pod, "cpu", &all), 0);
  assert_false(all);
  assert_true(nl_pod_level_set(pod));
  assert_true(nl_pod_level_requests_set(pod)); /* defaulted from the limit */
  assert_string_equal(list_str(&pod->spec.resources->requests), "memory=64Mi");
  assert_string_equal(nl_pod_qos_class(pod), "Burstable");
  nl_pod_free(pod);
  pod = must_load(NULL, (const char *const[]){"{limits: {memory: 10Mi}}", "-", NULL});
  assert_int_equal(nl_pod_limit(pod, "memory", &all), 10 << 20);
  assert_false(all);
  assert_false(nl_pod_level_set(pod));
  nl_pod_free(pod);
}

/* Overhead is added to requests, and to limits only where there is one. */
static void overhead(void **state) {
  (void)state;
  const char *y =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
      "  overhead: {cpu: 10m, memory: 1Mi}\n"
      "  resources: {limits: {memory: 64Mi}}\n"
      "  containers: [{name: c, image: busybox}]\n";
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(load(y, &pod, &err), 0);
  assert_int_equal(nl_pod_request(pod, "memory"), 65 << 20);
  assert_int_equal(nl_pod_limit(pod, "memory", NULL), 65 << 20);
  assert_int_equal(nl_pod_amount(pod, "memory", true, false, NULL), 64 << 20);
  assert_int_equal(nl_pod_request(pod, "cpu"), 10);
  assert_int_equal(nl_pod_limit(pod, "cpu", NULL), 0);
  nl_pod_free(pod);
}

/* defaultHugePagePodLimits: a container's hugepages limit is summed into the
 * pod's limits when the pod has resources of its own, and the request follows. */
static void hugepages_default(void **state) {
  (void)state;
  nl_pod_t *pod = must_load("{limits: {memory: 100Mi}}",
                            (const char *const[]){"{limits: {hugepages-2Mi: 4Mi, memory: 10Mi}}",
                                                  "{limits: {hugepages-2Mi: 2Mi, memory: 10Mi}}",
                                                  NULL});
  assert_string_equal(list_str(&pod->spec.resources->limits), "hugepages-2Mi=6Mi memory=100Mi");
  assert_string_equal(list_str(&pod->spec.resources->requests), "hugepages-2Mi=6Mi memory=20Mi");
  nl_pod_free(pod);
}

/* Encoded and decoded again, pod-level resources survive (the static pod's
 * hash covers them). */
static void round_trip(void **state) {
  (void)state;
  nl_pod_t *pod = must_load("{requests: {cpu: 100m}, limits: {cpu: 200m, memory: 1Gi}}",
                            (const char *const[]){"-", NULL});
  nl_pod_t *copy = nl_pod_dup(pod);
  assert_non_null(copy->spec.resources);
  assert_string_equal(list_str(&copy->spec.resources->limits), "cpu=200m memory=1Gi");
  assert_string_equal(list_str(&copy->spec.resources->requests), "cpu=100m memory=1Gi");
  nl_pod_t *other = must_load("{requests: {cpu: 100m}, limits: {cpu: 300m, memory: 1Gi}}",
                              (const char *const[]){"-", NULL});
  assert_string_not_equal(pod->metadata.uid, other->metadata.uid);
  nl_pod_free(copy);
  nl_pod_free(other);
  nl_pod_free(pod);
}

/* An empty spec.resources is still the pod's word: BestEffort whatever its
 * containers ask (upstream ComputePodQOS reads the pointer). */
static void empty_resources(void **state) {
  (void)state;
  nl_pod_t *pod = must_load("{}", (const char *const[]){"{requests: {cpu: 1}}", NULL});
  assert_non_null(pod->spec.resources);
  assert_false(nl_pod_level_set(pod));
  assert_string_equal(nl_pod_qos_class(pod), "BestEffort");
  assert_int_equal(nl_pod_request(pod, "cpu"), 1000);
  nl_pod_free(pod);
}

static void expect_error(const char *pod_res, const char *const *ctrs, const char *want) {
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (load(manifest(pod_res, ctrs), &pod, &err) == 0) fail_msg("accepted: %s", pod_res);
  if (!strstr(nl_err_msg(err), want)) fail_msg("want %s\ngot  %s", want, nl_err_msg(err));
  nl_err_free(&err);
}

static void validation(void **state) {
  (void)state;
  const char *const one[] = {"-", NULL};
  expect_error("{limits: {ephemeral-storage: 1Gi}}", one,
               "p.yaml: spec.resources.limits[ephemeral-storage]: Unsupported value: "
               "\"ephemeral-storage\": supported values: \"cpu\", \"hugepages-\", \"memory\"");
  expect_error("{requests: {example.com/gpu: 1}}", one,
               "p.yaml: spec.resources.requests[example.com/gpu]: Unsupported value");
  expect_error("{limits: {memory: 64Mx}}", one, "p.yaml: spec.resources.limits[memory]: ");
  expect_error("{limits: {cpu: -1}}", one,
               "p.yaml: spec.resources.limits[cpu]: must be greater than or equal to 0");
  expect_error("{requests: {cpu: 200m}, limits: {cpu: 100m}}", one,
               "p.yaml: spec.resources.requests[cpu]: must be less than or equal to cpu limit of "
               "100m, got 200m");
  expect_error("{requests: {memory: 100Mi}}",
               (const char *const[]){"{requests: {memory: 80Mi}}", "{requests: {memory: 30Mi}}",
                                     NULL},
               "p.yaml: spec.resources.requests[memory]: must be greater than or equal to "
               "aggregate container requests of 110Mi, got 100Mi");
  expect_error("{limits: {cpu: 100m}}", (const char *const[]){"{limits: {cpu: 200m}}", NULL},
               "p.yaml: spec.resources.containers[0][cpu].limits: must be less than or equal to "
               "pod limits of 100m, got 200m");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(qos_and_totals), cmocka_unit_test(limits_declared),
      cmocka_unit_test(overhead),       cmocka_unit_test(hugepages_default),
      cmocka_unit_test(round_trip),     cmocka_unit_test(empty_resources),
      cmocka_unit_test(validation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
