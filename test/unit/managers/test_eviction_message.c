/* upstream evictionMessage (managers/eviction_message.c): the evicted pod's
 * message and the Evicted event's annotations, which upstream's e2e_node
 * eviction specs read (starved_resource, offending_containers,
 * offending_containers_usage; offending_pod with a pod-level request). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "managers/eviction.h"
#include "reactor/xalloc.h"

#define MI (1024LL * 1024)

static nl_pod_t *pod_of(const char *spec) {
  char y[4096];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: hog, namespace: default, uid: u1}\n"
           "spec:\n%s",
           spec);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(y, strlen(y), "test.yaml", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_pod_set_defaults(pod);
  return pod;
}

typedef struct {
  char message[1024];
  char annotations[512]; /* "k=v;" each, in the list's order */
  size_t n;
} result_t;

/* The figures of containers named in names, each with memory mem[i], rootfs
 * and logs disk[i] / 2; -1 for unknown. */
static result_t run(nl_ev_signal_t sig, const char *spec, const char *const *names,
                    const int64_t *mem, const int64_t *disk, size_t n, int64_t pod_memory,
                    bool with_stats) {
  nl_pod_t *pod = pod_of(spec);
  nl_ev_pod_stats_t s = {.uid = "u1", .memory = pod_memory};
  nl_ev_container_stats_t cs[4];
  for (size_t i = 0; i < n; i++)
    cs[i] = (nl_ev_container_stats_t){(char *)names[i], mem[i], disk[i] < 0 ? -1 : disk[i] / 2,
                                      disk[i] < 0 ? -1 : disk[i] / 2};
  s.containers = cs;
  s.n_containers = n;
  nl_ev_threshold_t t = {.signal = sig, .value = {.quantity = 100 * MI}, .hard = true};
  nl_ev_observation_t obs[NL_EV_NSIGNALS] = {0};
  obs[sig] = (nl_ev_observation_t){true, 60 * MI, 1000 * MI};
  nl_kvlist_t a;
  char *msg = nl_ev_message(sig, &t, obs, pod, with_stats ? &s : NULL, &a);
  result_t r = {.n = a.n};
  snprintf(r.message, sizeof r.message, "%s", msg);
  for (size_t i = 0; i < a.n; i++)
    snprintf(r.annotations + strlen(r.annotations), sizeof r.annotations - strlen(r.annotations),
             "%s=%s;", a.items[i].key, a.items[i].value);
  free(msg);
  nl_ev_annotations_free(&a);
  assert_null(a.items);
  nl_pod_free(pod);
  return r;
}

#define THRESHOLD_MEM "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. "

/* Memory: the containers over their requests (regular and init), in the
 * figures' order, the usages as upstream's BinarySI quantities; a container
 * within its request and an ephemeral container are not blamed. */
static void test_memory_offenders(void **state) {
  (void)state;
  const char *spec = "  initContainers: [{name: side, image: i, restartPolicy: Always,"
                     " resources: {requests: {memory: 10Mi}}}]\n"
                     "  containers:\n"
                     "  - {name: hog, image: i, resources: {requests: {memory: 100Mi}}}\n"
                     "  - {name: calm, image: i, resources: {requests: {memory: 1Gi}}}\n"
                     "  ephemeralContainers: [{name: debug, image: i}]\n";
  const char *names[] = {"hog", "calm", "side", "debug"};
  int64_t mem[] = {300 * MI, 200 * MI, 12 * MI + 512 * 1024, 50 * MI}, disk[] = {0, 0, 0, 0};
  result_t r = run(NL_EV_MEMORY, spec, names, mem, disk, 4, 600 * MI, true);
  assert_string_equal(r.message,
                      THRESHOLD_MEM "Container hog was using 300Mi, request is 100Mi, has larger "
                      "consumption of memory. Container side was using 12800Ki, request is 10Mi, "
                      "has larger consumption of memory. ");
  assert_string_equal(r.annotations, "offending_containers=hog,side;"
                                     "offending_containers_usage=300Mi,12800Ki;"
                                     "starved_resource=memory;");
}

/* A usage that is no whole number of Ki prints as plain bytes; a container
 * without a request exceeds 0; unknown usage is not blamed. */
static void test_memory_quantity_format(void **state) {
  (void)state;
  const char *spec = "  containers: [{name: a, image: i}, {name: b, image: i}]\n";
  const char *names[] = {"a", "b"};
  int64_t mem[] = {123456789, -1}, disk[] = {0, 0};
  result_t r = run(NL_EV_MEMORY, spec, names, mem, disk, 2, 123456789, true);
  assert_string_equal(r.message, THRESHOLD_MEM "Container a was using 123456789, request is 0, "
                                               "has larger consumption of memory. ");
  assert_string_equal(r.annotations, "offending_containers=a;offending_containers_usage=123456789;"
                                     "starved_resource=memory;");
}

/* Nobody over its request: the keys are there, empty. */
static void test_no_offender(void **state) {
  (void)state;
  const char *names[] = {"c"};
  int64_t mem[] = {50 * MI}, disk[] = {0};
  result_t r = run(NL_EV_MEMORY, "  containers: [{name: c, image: i, resources: {requests: "
                                 "{memory: 64Mi}}}]\n",
                   names, mem, disk, 1, 50 * MI, true);
  assert_string_equal(r.message, THRESHOLD_MEM);
  assert_string_equal(r.annotations,
                      "offending_containers=;offending_containers_usage=;starved_resource=memory;");
}

/* Ephemeral storage: the writable layer and logs against the request. */
static void test_disk_offenders(void **state) {
  (void)state;
  const char *spec = "  containers: [{name: c, image: i, resources: {requests: "
                     "{ephemeral-storage: 1Mi}}}, {name: d, image: i}]\n";
  const char *names[] = {"c", "d"};
  int64_t mem[] = {0, 0}, disk[] = {4 * MI, -1};
  result_t r = run(NL_EV_NODEFS, spec, names, mem, disk, 2, 0, true);
  assert_string_equal(r.message,
                      "The node was low on resource: ephemeral-storage. Threshold quantity: 100Mi, "
                      "available: 60Mi. Container c was using 4Mi, request is 1Mi, has larger "
                      "consumption of ephemeral-storage. ");
  assert_string_equal(r.annotations, "offending_containers=c;offending_containers_usage=4Mi;"
                                     "starved_resource=ephemeral-storage;");
}

/* pids and inodes name their resource and blame no container. */
static void test_pids_and_inodes(void **state) {
  (void)state;
  const char *names[] = {"c"};
  int64_t mem[] = {500 * MI}, disk[] = {500 * MI};
  result_t r = run(NL_EV_PID, "  containers: [{name: c, image: i}]\n", names, mem, disk, 1, 0, true);
  assert_string_equal(r.annotations,
                      "offending_containers=;offending_containers_usage=;starved_resource=pids;");
  r = run(NL_EV_NODEFS_INODES, "  containers: [{name: c, image: i}]\n", names, mem, disk, 1, 0, true);
  assert_string_equal(r.annotations,
                      "offending_containers=;offending_containers_usage=;starved_resource=inodes;");
}

/* Without the pod's figures: the node's part of the message, no annotations
 * at all (upstream returns before setting any). */
static void test_no_stats(void **state) {
  (void)state;
  result_t r = run(NL_EV_MEMORY, "  containers: [{name: c, image: i}]\n", NULL, NULL, NULL, 0, 0,
                   false);
  assert_string_equal(r.message, THRESHOLD_MEM);
  assert_int_equal(r.n, 0);
}

/* PodLevelResources: a pod-level memory request names the pod and its usage,
 * whether or not it is over (as upstream), before the containers. */
static void test_pod_level(void **state) {
  (void)state;
  const char *spec = "  resources: {requests: {memory: 200Mi}}\n"
                     "  containers: [{name: c, image: i}]\n";
  const char *names[] = {"c"};
  int64_t mem[] = {150 * MI}, disk[] = {0};
  result_t r = run(NL_EV_MEMORY, spec, names, mem, disk, 1, 150 * MI, true);
  assert_string_equal(r.message, THRESHOLD_MEM "Pod hog was using 150Mi, request is 200Mi, has "
                                               "larger consumption of memory. Container c was "
                                               "using 150Mi, request is 0, has larger "
                                               "consumption of memory. ");
  assert_string_equal(r.annotations, "offending_containers=c;offending_containers_usage=150Mi;"
                                     "offending_pod=hog;offending_pod_usage=150Mi;"
                                     "starved_resource=memory;");
  /* not for ephemeral storage */
  r = run(NL_EV_NODEFS, spec, names, mem, disk, 1, 150 * MI, true);
  assert_null(strstr(r.annotations, "offending_pod"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memory_offenders), cmocka_unit_test(test_memory_quantity_format),
      cmocka_unit_test(test_no_offender),      cmocka_unit_test(test_disk_offenders),
      cmocka_unit_test(test_pids_and_inodes),  cmocka_unit_test(test_no_stats),
      cmocka_unit_test(test_pod_level),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
