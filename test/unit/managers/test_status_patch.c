/* The status manager's JSON: the strategic merge patch against golden bodies
 * (the shapes upstream's PatchPodStatus sends), the merge with what the API has,
 * the terminal phase that never goes back, and the kubelet's status equality. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "managers/status_patch.h"

static json_t *J(const char *text) {
  json_error_t e;
  json_t *j = json_loads(text, 0, &e);
  if (!j) fail_msg("bad test JSON: %s: %s", e.text, text);
  return j;
}

#define COND(t, s, at) "{\"type\":\"" t "\",\"status\":\"" s "\",\"lastProbeTime\":null,\"lastTransitionTime\":\"" at "\"}"
#define T1 "2024-01-01T00:00:00Z"
#define T2 "2024-01-01T00:00:09Z"

static const char *running(const char *ready) {
  static char buf[2048];
  snprintf(buf, sizeof buf,
           "{\"phase\":\"Running\",\"conditions\":[" COND("PodReadyToStartContainers", "True", T1)
           "," COND("Initialized", "True", T1) ",{\"type\":\"Ready\",\"status\":\"%s\","
           "\"lastProbeTime\":null,\"lastTransitionTime\":\"%s\"}," COND("ContainersReady", "True", T1)
           "," COND("PodScheduled", "True", T1) "],\"hostIP\":\"10.0.0.5\",\"hostIPs\":[{\"ip\":"
           "\"10.0.0.5\"}],\"podIP\":\"10.88.0.7\",\"podIPs\":[{\"ip\":\"10.88.0.7\"}],\"startTime\":"
           "\"" T1 "\",\"containerStatuses\":[{\"name\":\"c\",\"state\":{\"running\":{\"startedAt\":"
           "\"" T1 "\"}},\"ready\":true,\"restartCount\":0,\"image\":\"busybox\",\"imageID\":\"x\","
           "\"started\":true}],\"qosClass\":\"BestEffort\"}",
           ready, strcmp(ready, "True") == 0 ? T2 : T1);
  return buf;
}

static void assert_patch(const char *uid, const char *api, const char *want, const char *golden) {
  json_t *a = api ? J(api) : NULL, *w = J(want);
  json_t *p = nl_status_patch(uid, a, w);
  if (!golden) {
    assert_null(p);
  } else {
    assert_non_null(p);
    char *s = nl_status_patch_dump(p);
    assert_string_equal(s, golden);
    free(s);
  }
  json_decref(p);
  json_decref(a);
  json_decref(w);
}

/* The patch the kubelet sends most: one condition flips. */
static void patch_of_a_readiness_change(void **state) {
  (void)state;
  char api[2048];
  snprintf(api, sizeof api, "%s", running("False"));
  assert_patch("u-1", api, running("True"),
               "{\"metadata\":{\"uid\":\"u-1\"},\"status\":{\"$setElementOrder/conditions\":["
               "{\"type\":\"PodReadyToStartContainers\"},{\"type\":\"Initialized\"},{\"type\":\"Ready\"},"
               "{\"type\":\"ContainersReady\"},{\"type\":\"PodScheduled\"}],\"conditions\":[{"
               "\"lastTransitionTime\":\"" T2 "\",\"status\":\"True\",\"type\":\"Ready\"}]}}");
}

static void no_patch_when_nothing_changed(void **state) {
  (void)state;
  assert_patch("u-1", running("True"), running("True"), NULL);
}

static void first_patch_carries_the_whole_status(void **state) {
  (void)state;
  assert_patch("u-1", "{}", "{\"phase\":\"Pending\",\"qosClass\":\"BestEffort\"}",
               "{\"metadata\":{\"uid\":\"u-1\"},\"status\":{\"phase\":\"Pending\",\"qosClass\":\"BestEffort\"}}");
  assert_patch("u-1", NULL, "{\"phase\":\"Pending\"}",
               "{\"metadata\":{\"uid\":\"u-1\"},\"status\":{\"phase\":\"Pending\"}}");
}

/* A new sandbox: the new IP is added to podIPs, the old one deleted by its key;
 * a message the kubelet no longer sets is cleared with null; the container
 * statuses list is replaced whole (it has no patch strategy). */
static void ip_change_removed_field_and_atomic_lists(void **state) {
  (void)state;
  assert_patch(
      "u-2",
      "{\"phase\":\"Pending\",\"message\":\"m\",\"podIP\":\"10.88.0.7\",\"podIPs\":[{\"ip\":\"10.88.0.7\"}],"
      "\"containerStatuses\":[{\"name\":\"a\",\"ready\":false},{\"name\":\"b\",\"ready\":false}]}",
      "{\"phase\":\"Pending\",\"podIP\":\"10.88.0.9\",\"podIPs\":[{\"ip\":\"10.88.0.9\"}],"
      "\"containerStatuses\":[{\"name\":\"a\",\"ready\":false},{\"name\":\"b\",\"ready\":true}]}",
      "{\"metadata\":{\"uid\":\"u-2\"},\"status\":{\"$setElementOrder/podIPs\":[{\"ip\":\"10.88.0.9\"}],"
      "\"containerStatuses\":[{\"name\":\"a\",\"ready\":false},{\"name\":\"b\",\"ready\":true}],"
      "\"message\":null,\"podIP\":\"10.88.0.9\",\"podIPs\":[{\"ip\":\"10.88.0.9\"},"
      "{\"$patch\":\"delete\",\"ip\":\"10.88.0.7\"}]}}");
}

/* A condition that goes away is deleted by type; one that changes only its
 * order is reordered by $setElementOrder alone. */
static void condition_removed_and_reordered(void **state) {
  (void)state;
  assert_patch("u-3",
               "{\"conditions\":[" COND("Initialized", "True", T1) "," COND("Ready", "True", T1) "]}",
               "{\"conditions\":[" COND("Ready", "True", T1) "]}",
               "{\"metadata\":{\"uid\":\"u-3\"},\"status\":{\"$setElementOrder/conditions\":[{\"type\":"
               "\"Ready\"}],\"conditions\":[{\"$patch\":\"delete\",\"type\":\"Initialized\"}]}}");
  assert_patch("u-3",
               "{\"conditions\":[" COND("Initialized", "True", T1) "," COND("Ready", "True", T1) "]}",
               "{\"conditions\":[" COND("Ready", "True", T1) "," COND("Initialized", "True", T1) "]}",
               "{\"metadata\":{\"uid\":\"u-3\"},\"status\":{\"$setElementOrder/conditions\":[{\"type\":"
               "\"Ready\"},{\"type\":\"Initialized\"}]}}");
}

/* New elements keep their order: the apiserver rejects a patch list whose order
 * differs from $setElementOrder's. */
static void new_conditions_in_their_order(void **state) {
  (void)state;
  assert_patch("u-4", "{}",
               "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
               "{\"type\":\"Initialized\",\"status\":\"True\"}]}",
               "{\"metadata\":{\"uid\":\"u-4\"},\"status\":{\"$setElementOrder/conditions\":[{\"type\":"
               "\"Ready\"},{\"type\":\"Initialized\"}],\"conditions\":[{\"status\":\"True\",\"type\":"
               "\"Ready\"},{\"status\":\"True\",\"type\":\"Initialized\"}]}}");
}

/* Conditions and fields of others survive; the kubelet's own are replaced. */
static void merge_keeps_what_others_own(void **state) {
  (void)state;
  json_t *api = J("{\"phase\":\"Running\",\"nominatedNodeName\":\"n\",\"conditions\":["
                  COND("DisruptionTarget", "True", T1) "," COND("Ready", "True", T1) "],"
                  "\"podIP\":\"1.2.3.4\"}");
  json_t *ours = J("{\"phase\":\"Running\",\"conditions\":[" COND("Ready", "False", T2) "]}");
  json_t *m = nl_status_merge(api, ours);
  char *s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(s, "{\"conditions\":[" "{\"lastProbeTime\":null,\"lastTransitionTime\":\"" T1
                         "\",\"status\":\"True\",\"type\":\"DisruptionTarget\"},{\"lastProbeTime\":null,"
                         "\"lastTransitionTime\":\"" T2 "\",\"status\":\"False\",\"type\":\"Ready\"}],"
                         "\"nominatedNodeName\":\"n\",\"phase\":\"Running\"}");
  free(s);
  json_t *p = nl_status_patch("u", api, m);
  s = nl_status_patch_dump(p);
  /* podIP is the kubelet's: the kubelet no longer reports one, so it is cleared */
  assert_string_equal(s, "{\"metadata\":{\"uid\":\"u\"},\"status\":{\"$setElementOrder/conditions\":"
                         "[{\"type\":\"DisruptionTarget\"},{\"type\":\"Ready\"}],\"conditions\":[{"
                         "\"lastTransitionTime\":\"" T2 "\",\"status\":\"False\",\"type\":\"Ready\"}],"
                         "\"podIP\":null}}");
  free(s);
  json_decref(p);
  json_decref(m);
  json_decref(ours);
  json_decref(api);
}

/* observedGeneration is the kubelet's: a new one is written (and makes the
 * status differ), an older one never replaces what the API has. */
static void observed_generation_is_ours_and_never_goes_back(void **state) {
  (void)state;
  json_t *api = J("{\"observedGeneration\":2,\"phase\":\"Running\"}");
  json_t *ours = J("{\"observedGeneration\":3,\"phase\":\"Running\"}");
  assert_false(nl_status_equal(api, ours));
  json_t *m = nl_status_merge(api, ours);
  json_t *p = nl_status_patch("u", api, m);
  char *s = nl_status_patch_dump(p);
  assert_string_equal(s, "{\"metadata\":{\"uid\":\"u\"},\"status\":{\"observedGeneration\":3}}");
  free(s);
  json_decref(p);
  json_decref(m);
  json_decref(ours);
  ours = J("{\"observedGeneration\":1,\"phase\":\"Running\"}");
  m = nl_status_merge(api, ours);
  assert_null(nl_status_patch("u", api, m));
  json_decref(m);
  json_decref(ours);
  json_decref(api);
}

/* The kubelet terminated the pod (node shutdown): its DisruptionTarget is
 * written, replacing one the API had. */
static void merge_writes_our_disruption_target(void **state) {
  (void)state;
  json_t *api = J("{\"phase\":\"Running\",\"conditions\":[" COND("Ready", "True", T1) "]}");
  json_t *ours = J("{\"phase\":\"Failed\",\"reason\":\"Terminated\",\"conditions\":["
                   COND("Ready", "False", T2) "," COND("DisruptionTarget", "True", T2) "]}");
  json_t *m = nl_status_merge(api, ours);
  json_t *c = json_object_get(m, "conditions");
  assert_int_equal(json_array_size(c), 2);
  assert_string_equal(json_string_value(json_object_get(json_array_get(c, 1), "type")),
                      "DisruptionTarget");
  json_decref(m);
  json_t *older = J("{\"phase\":\"Running\",\"conditions\":[" COND("DisruptionTarget", "False", T1)
                    "]}");
  m = nl_status_merge(older, ours);
  c = json_object_get(m, "conditions");
  assert_int_equal(json_array_size(c), 2);
  assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "status")), "True");
  json_decref(m);
  json_decref(older);
  json_decref(ours);
  json_decref(api);
}

static void terminal_phase_never_goes_back(void **state) {
  (void)state;
  json_t *api = J("{\"phase\":\"Failed\",\"reason\":\"OutOfpods\"}");
  json_t *ours = J("{\"phase\":\"Running\"}");
  json_t *m = nl_status_merge(api, ours);
  assert_string_equal(json_string_value(json_object_get(m, "phase")), "Failed");
  assert_true(nl_status_phase_terminal(m));
  json_decref(m);
  json_t *other = J("{\"phase\":\"Succeeded\"}");
  m = nl_status_merge(api, other);
  assert_string_equal(json_string_value(json_object_get(m, "phase")), "Failed");
  json_decref(m);
  /* and a non-terminal API phase moves on */
  m = nl_status_merge(ours, api);
  assert_string_equal(json_string_value(json_object_get(m, "phase")), "Failed");
  json_decref(m);
  json_decref(other);
  json_decref(ours);
  json_decref(api);
}

static void equality_as_the_kubelet_sees_it(void **state) {
  (void)state;
  json_t *a = J(running("False"));
  json_t *b = J(running("False"));
  /* transition times of conditions do not count */
  json_t *ready = json_array_get(json_object_get(b, "conditions"), 2);
  json_object_set_new(ready, "lastTransitionTime", json_string(T2));
  assert_true(nl_status_equal(a, b));
  /* others' conditions and fields do not count */
  json_array_append_new(json_object_get(b, "conditions"), J(COND("example.com/gate", "True", T1)));
  json_object_set_new(b, "nominatedNodeName", json_string("n"));
  assert_true(nl_status_equal(a, b));
  /* a condition shared with the kubelet does (isPodStatusByKubeletEqual) */
  json_array_append_new(json_object_get(a, "conditions"), J(COND("DisruptionTarget", "True", T1)));
  assert_false(nl_status_equal(a, b));
  json_array_append_new(json_object_get(b, "conditions"), J(COND("DisruptionTarget", "True", T2)));
  assert_true(nl_status_equal(a, b));
  /* a condition's status does */
  json_object_set_new(ready, "status", json_string("True"));
  assert_false(nl_status_equal(a, b));
  json_object_set_new(ready, "status", json_string("False"));
  json_object_set_new(ready, "message", json_string("containers with unready status: [c]"));
  assert_false(nl_status_equal(a, b));
  json_object_del(ready, "message");
  /* and so does any field the kubelet sets: the pod-level resources a
   * resize of spec.resources changes too (InPlacePodLevelResourcesVerticalScaling) */
  json_object_set_new(a, "allocatedResources", J("{\"cpu\":\"100m\"}"));
  assert_false(nl_status_equal(a, b));
  json_object_set_new(b, "allocatedResources", J("{\"cpu\":\"100m\"}"));
  json_object_set_new(b, "resources", J("{\"limits\":{\"cpu\":\"300m\"}}"));
  assert_false(nl_status_equal(a, b));
  json_object_del(b, "resources");
  assert_true(nl_status_equal(a, b));
  json_object_set_new(b, "podIP", json_string("10.88.0.8"));
  assert_false(nl_status_equal(a, b));
  assert_false(nl_status_equal(a, NULL));
  assert_true(nl_status_equal(NULL, NULL));
  assert_true(nl_status_condition_by_kubelet("PodReadyToStartContainers"));
  assert_true(nl_status_condition_by_kubelet("AllContainersRestarting"));
  assert_false(nl_status_condition_by_kubelet("DisruptionTarget"));
  json_decref(a);
  json_decref(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(patch_of_a_readiness_change),
      cmocka_unit_test(no_patch_when_nothing_changed),
      cmocka_unit_test(first_patch_carries_the_whole_status),
      cmocka_unit_test(ip_change_removed_field_and_atomic_lists),
      cmocka_unit_test(condition_removed_and_reordered),
      cmocka_unit_test(new_conditions_in_their_order),
      cmocka_unit_test(merge_keeps_what_others_own),
      cmocka_unit_test(merge_writes_our_disruption_target),
      cmocka_unit_test(observed_generation_is_ours_and_never_goes_back),
      cmocka_unit_test(terminal_phase_never_goes_back),
      cmocka_unit_test(equality_as_the_kubelet_sees_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
