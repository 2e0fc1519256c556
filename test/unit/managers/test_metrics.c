/* The kubelet's metrics as a scraper sees them: upstream's names, labels,
 * help texts and buckets. With --dump, prints a populated /metrics and
 * /metrics/probes for `promtool check metrics` (see meson.build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "managers/metrics.h"
#include "managers/status.h"

#define DRA_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"

static void populate(nl_kmetrics_t *m) {
  nl_kmetrics_init(m, "edge-1");
  nl_kmetrics_runtime_op(m, "/runtime.v1.RuntimeService/ListPodSandbox", 0, 3000000);
  nl_kmetrics_runtime_op(m, "/runtime.v1.RuntimeService/ListPodSandbox", 0, 40000000);
  nl_kmetrics_runtime_op(m, "/runtime.v1.RuntimeService/ContainerStatus", 5, 1000000);
  nl_kmetrics_runtime_op(m, "/runtime.v1.ImageService/PullImage", 0, 2500000000u);
  nl_kmetrics_pleg_relist(m, 500000000, 1700000000500000000, 2000000, true);
  nl_kmetrics_pleg_relist(m, 1500000000, 1700000001500000000, 3000000, false);
  nl_kmetrics_pod_worker(m, "create", 700000000);
  nl_kmetrics_pod_worker(m, "sync", 1000000);
  nl_kmetrics_pod_started(m, 2.5);
  double c[4] = {1, 3, 2, 0};
  nl_kmetrics_set_running(m, 2, c);
  nl_kmetrics_probe(m, "Readiness", "successful", "web", "web-0", "default", "u-1", 0.002);
  nl_kmetrics_probe(m, "Readiness", "failed", "web", "web-0", "default", "u-1", 1.0);
  nl_kmetrics_probe(m, "Liveness", "successful", "db", "db-0", "edge", "u-2", 0.01);
  nl_kmetrics_device_registration(m, "example.com/serial");
  nl_kmetrics_device_alloc(m, "example.com/serial", 0.004);
  nl_kmetrics_podres(m, "v1", NL_KMETRICS_PODRES_LIST, false);
  nl_kmetrics_podres(m, "v1", NL_KMETRICS_PODRES_GET_ALLOCATABLE, false);
  nl_kmetrics_podres(m, "v1", NL_KMETRICS_PODRES_GET, true);
  nl_kmetrics_container_terminated(m, "container", 0, "Completed");
  nl_kmetrics_dra_in_use_reset(m);
  nl_kmetrics_dra_in_use(m, "gpu.example.com", 1);
  nl_kmetrics_dra_in_use(m, NULL, 1);
  nl_kmetrics_dra_op(m, "PrepareResources", false, 0.2);
  nl_kmetrics_dra_op(m, "PrepareResources", true, 50);
  nl_kmetrics_dra_grpc(m, "gpu.example.com", DRA_V1 "NodePrepareResources", 0, 0.12);
  nl_kmetrics_dra_grpc(m, "gpu.example.com", DRA_V1 "NodePrepareResources", 4, 45);
}

static char *encode(nl_metrics_t *r) {
  nl_buf_t b = NL_BUF_INIT;
  nl_metrics_encode(r, &b);
  return nl_buf_steal(&b);
}

static void expect(const char *text, const char *line) {
  if (!strstr(text, line)) fail_msg("missing: %s\nin:\n%s", line, text);
}

static void upstream_names_and_labels(void **state) {
  (void)state;
  nl_kmetrics_t m;
  populate(&m);
  char *t = encode(&m.reg);
  expect(t, "# HELP kubelet_node_name [ALPHA] The node's name. The count is always 1.\n"
            "# TYPE kubelet_node_name gauge\nkubelet_node_name{node=\"edge-1\"} 1\n");
  expect(t, "kubelet_runtime_operations_total{operation_type=\"list_podsandbox\"} 2\n");
  expect(t, "kubelet_runtime_operations_total{operation_type=\"container_status\"} 1\n");
  expect(t, "kubelet_runtime_operations_total{operation_type=\"pull_image\"} 1\n");
  expect(t, "kubelet_runtime_operations_errors_total{operation_type=\"container_status\"} 1\n");
  expect(t, "kubelet_runtime_operations_errors_total{operation_type=\"list_podsandbox\"} 0\n");
  /* ExponentialBuckets(.005, 2.5, 14): 3 ms in the first, 40 ms in the fourth */
  expect(t, "kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"list_podsandbox\","
            "le=\"0.005\"} 1\n");
  expect(t, "kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"list_podsandbox\","
            "le=\"0.03125\"} 1\n");
  expect(t, "kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"list_podsandbox\","
            "le=\"0.078125\"} 2\n");
  expect(t, "le=\"745.0580596923828\"} 2\n");
  expect(t, "kubelet_pleg_relist_duration_seconds_count 2\n");
  expect(t, "kubelet_pleg_relist_interval_seconds_sum 1\n");
  expect(t, "kubelet_pleg_last_seen_seconds 1.7e+09\n");
  expect(t, "kubelet_pod_worker_duration_seconds_bucket{operation_type=\"create\",le=\"0.5\"} 0\n");
  expect(t, "kubelet_pod_worker_duration_seconds_bucket{operation_type=\"create\",le=\"1\"} 1\n");
  expect(t, "kubelet_pod_start_duration_seconds_bucket{le=\"2\"} 0\n");
  expect(t, "kubelet_pod_start_duration_seconds_bucket{le=\"3\"} 1\n");
  expect(t, "kubelet_pod_start_duration_seconds_bucket{le=\"3600\"} 1\n");
  expect(t, "kubelet_running_pods 2\n");
  expect(t, "kubelet_running_containers{container_state=\"running\"} 3\n");
  expect(t, "kubelet_running_containers{container_state=\"exited\"} 2\n");
  expect(t, "# TYPE process_cpu_seconds_total counter\n");
  expect(t, "# TYPE process_resident_memory_bytes gauge\n");
  expect(t, "# TYPE process_start_time_seconds gauge\n");
  assert_null(strstr(t, "process_start_time_seconds 0\n"));
  assert_null(strstr(t, "kubelet_evictions")); /* nothing evicted: no series */
  free(t);

  t = encode(&m.probes);
  expect(t, "# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or "
            "startup probe for a container by result.\n# TYPE prober_probe_total counter\n");
  expect(t, "prober_probe_total{probe_type=\"Readiness\",result=\"successful\",container=\"web\","
            "pod=\"web-0\",namespace=\"default\",pod_uid=\"u-1\"} 1\n");
  expect(t, "prober_probe_total{probe_type=\"Readiness\",result=\"failed\",container=\"web\","
            "pod=\"web-0\",namespace=\"default\",pod_uid=\"u-1\"} 1\n");
  expect(t, "prober_probe_duration_seconds_count{probe_type=\"Readiness\",container=\"web\","
            "pod=\"web-0\",namespace=\"default\"} 2\n");
  free(t);

  /* The worker ends: its series go, the other pod's stay. */
  nl_kmetrics_probe_forget(&m, "Readiness", "web", "web-0", "default", "u-1");
  t = encode(&m.probes);
  assert_null(strstr(t, "web-0"));
  expect(t, "pod=\"db-0\"");
  free(t);
  nl_kmetrics_free(&m);
}

static nl_container_status_t cst(const char *name, nl_cstate_kind_t kind, int32_t code,
                                 const char *reason) {
  return (nl_container_status_t){.name = (char *)name,
                                 .state = {.kind = kind, .exit_code = code, .reason = (char *)reason}};
}

/* kubelet_terminated_containers_total: each container counted once, when its
 * status first shows it terminated, by type, exit code and reason. */
static void terminations_counted_once(void **state) {
  (void)state;
  nl_kmetrics_t m;
  nl_kmetrics_init(&m, "edge-1");
  char *t = encode(&m.reg);
  assert_null(strstr(t, "kubelet_terminated_containers_total{")); /* no series before the first */
  free(t);
  nl_container_status_t init1[] = {cst("init", NL_CSTATE_TERMINATED, 0, "Completed")};
  nl_container_status_t app1[] = {cst("app", NL_CSTATE_RUNNING, 0, NULL),
                                  cst("side", NL_CSTATE_TERMINATED, 42, "Error")};
  nl_pod_status_t s1 = {.init_container_statuses = init1, .n_init_container_statuses = 1,
                        .container_statuses = app1, .n_container_statuses = 2};
  nl_kmetrics_count_terminations(&m, NULL, &s1); /* the first status: both terminated ones */
  nl_kmetrics_count_terminations(&m, &s1, &s1); /* the same again: nothing new */
  nl_container_status_t app2[] = {cst("app", NL_CSTATE_TERMINATED, 137, "OOMKilled"),
                                  cst("side", NL_CSTATE_RUNNING, 0, NULL)};
  nl_pod_status_t s2 = s1;
  s2.container_statuses = app2;
  nl_kmetrics_count_terminations(&m, &s1, &s2); /* app ends; side restarted */
  nl_container_status_t app3[] = {cst("app", NL_CSTATE_TERMINATED, 137, "OOMKilled"),
                                  cst("side", NL_CSTATE_TERMINATED, 42, "Error")};
  nl_pod_status_t s3 = s1;
  s3.container_statuses = app3;
  nl_kmetrics_count_terminations(&m, &s2, &s3); /* side ends a second time */
  t = encode(&m.reg);
  expect(t, "# HELP kubelet_terminated_containers_total [ALPHA] Cumulative number of container "
            "terminations.\n# TYPE kubelet_terminated_containers_total counter\n");
  expect(t, "kubelet_terminated_containers_total{container_type=\"init_container\",exit_code=\"0\","
            "reason=\"Completed\"} 1\n");
  expect(t, "kubelet_terminated_containers_total{container_type=\"container\",exit_code=\"42\","
            "reason=\"Error\"} 2\n");
  expect(t, "kubelet_terminated_containers_total{container_type=\"container\",exit_code=\"137\","
            "reason=\"OOMKilled\"} 1\n");
  free(t);
  nl_kmetrics_free(&m);
}

/* dra_resource_claims_in_use: upstream's name, help and "<any>" series; a
 * scrape shows only the drivers of claims in use then. */
static void dra_claims_in_use(void **state) {
  (void)state;
  nl_kmetrics_t m;
  populate(&m);
  char *t = encode(&m.reg);
  expect(t, "# HELP dra_resource_claims_in_use [ALPHA] The number of ResourceClaims that are "
            "currently in use on the node, by driver name (driver_name label value) and across "
            "all drivers (special value <any> for driver_name).");
  expect(t, "# TYPE dra_resource_claims_in_use gauge\n");
  expect(t, "dra_resource_claims_in_use{driver_name=\"<any>\"} 1\n");
  expect(t, "dra_resource_claims_in_use{driver_name=\"gpu.example.com\"} 1\n");
  free(t);
  nl_kmetrics_dra_in_use_reset(&m);
  nl_kmetrics_dra_in_use(&m, NULL, 0);
  t = encode(&m.reg);
  expect(t, "dra_resource_claims_in_use{driver_name=\"<any>\"} 0\n");
  assert_null(strstr(t, "dra_resource_claims_in_use{driver_name=\"gpu.example.com\""));
  free(t);
  nl_kmetrics_free(&m);
}

/* dra_operations_duration_seconds and dra_grpc_operations_duration_seconds:
 * upstream's names, help texts, labels and DRADurationBuckets as Go prints
 * them; a code outside gRPC's counted as Unknown; a driver gone takes its
 * call series with it, not another driver's. */
static void dra_durations(void **state) {
  (void)state;
  nl_kmetrics_t m;
  populate(&m);
  nl_kmetrics_dra_grpc(&m, "gpu.example.com", DRA_V1 "NodePrepareResources", 9999, 1);
  nl_kmetrics_dra_grpc(&m, "nic.example.com", DRA_V1 "NodeUnprepareResources", 14, 1);
  char *t = encode(&m.reg);
  expect(t, "# HELP dra_operations_duration_seconds [ALPHA] Latency histogram in seconds for the "
            "duration of handling all ResourceClaims referenced by a pod when the pod starts or "
            "stops. Identified by the name of the operation (PrepareResources or "
            "UnprepareResources) and separated by the success of the operation. The number of "
            "failed operations is provided through the histogram's overall count.\n"
            "# TYPE dra_operations_duration_seconds histogram\n");
  expect(t, "# HELP dra_grpc_operations_duration_seconds [ALPHA] Duration in seconds of the DRA "
            "gRPC operations\n# TYPE dra_grpc_operations_duration_seconds histogram\n");
  /* ExponentialBucketsRange(.1, 40, 15) */
  static const char *const le[] = {"0.1", "0.1534127404634391", "0.23535468936502524",
                                   "0.36106407876409946", "0.5539182980610752",
                                   "0.849781240983936", "1.303672689737678",
                                   "1.9999999999999993", "3.0682548092687805",
                                   "4.7070937873005025", "7.221281575281985",
                                   "11.078365961221499", "16.995624819678714",
                                   "26.07345379475354", "39.99999999999997", "+Inf"};
  for (size_t i = 0; i < sizeof le / sizeof le[0]; i++) {
    char line[512];
    snprintf(line, sizeof line,
             "dra_operations_duration_seconds_bucket{operation_name=\"PrepareResources\","
             "is_error=\"false\",le=\"%s\"} %d\n", le[i], i >= 2); /* 0.2 s */
    expect(t, line);
    snprintf(line, sizeof line,
             "dra_grpc_operations_duration_seconds_bucket{driver_name=\"gpu.example.com\","
             "method_name=\"" DRA_V1 "NodePrepareResources\",grpc_status_code=\"OK\","
             "le=\"%s\"} %d\n", le[i], i >= 1); /* 0.12 s */
    expect(t, line);
  }
  expect(t, "dra_operations_duration_seconds_bucket{operation_name=\"PrepareResources\","
            "is_error=\"true\",le=\"39.99999999999997\"} 0\n");
  expect(t, "dra_operations_duration_seconds_count{operation_name=\"PrepareResources\","
            "is_error=\"true\"} 1\n");
  expect(t, "dra_grpc_operations_duration_seconds_count{driver_name=\"gpu.example.com\","
            "method_name=\"" DRA_V1 "NodePrepareResources\",grpc_status_code=\"DeadlineExceeded\"} 1\n");
  expect(t, "dra_grpc_operations_duration_seconds_count{driver_name=\"gpu.example.com\","
            "method_name=\"" DRA_V1 "NodePrepareResources\",grpc_status_code=\"Unknown\"} 1\n");
  expect(t, "dra_grpc_operations_duration_seconds_count{driver_name=\"nic.example.com\","
            "method_name=\"" DRA_V1 "NodeUnprepareResources\",grpc_status_code=\"Unavailable\"} 1\n");
  assert_null(strstr(t, "Code("));
  free(t);
  nl_kmetrics_dra_driver_gone(&m, "gpu.example.com");
  t = encode(&m.reg);
  assert_null(strstr(t, "dra_grpc_operations_duration_seconds_count{driver_name=\"gpu.example.com\""));
  expect(t, "dra_grpc_operations_duration_seconds_count{driver_name=\"nic.example.com\"");
  expect(t, "dra_operations_duration_seconds_count{operation_name=\"PrepareResources\","
            "is_error=\"false\"} 1\n");
  expect(t, "dra_resource_claims_in_use{driver_name=\"gpu.example.com\"} 1\n");
  free(t);
  nl_kmetrics_free(&m);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--dump") == 0) {
    nl_kmetrics_t m;
    populate(&m);
    char *a = encode(&m.reg), *b = encode(&m.probes);
    fputs(argc > 2 && strcmp(argv[2], "probes") == 0 ? b : a, stdout);
    free(a);
    free(b);
    nl_kmetrics_free(&m);
    return 0;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(upstream_names_and_labels),
                                     cmocka_unit_test(terminations_counted_once),
                                     cmocka_unit_test(dra_claims_in_use),
                                     cmocka_unit_test(dra_durations)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
