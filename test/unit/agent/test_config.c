#include <setjmp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent/config.h"
#include "reactor/duration.h"

static int load(nl_kubelet_config_t *c, const char *yaml, nl_err_t **err) {
  nl_config_defaults(c);
  return nl_config_load_bytes(c, "kubelet.yaml", yaml, strlen(yaml), err);
}

static void defaults_match_upstream(void **state) {
  nl_kubelet_config_t c;
  nl_config_defaults(&c);
  assert_int_equal(c.file_check_frequency, 20 * NL_NS_PER_S);
  assert_int_equal(c.http_check_frequency, 20 * NL_NS_PER_S);
  assert_int_equal(c.sync_frequency, 60 * NL_NS_PER_S);
  assert_int_equal(c.runtime_request_timeout, 120 * NL_NS_PER_S);
  assert_int_equal(c.port, 10250);
  assert_int_equal(c.read_only_port, 0);
  assert_int_equal(c.healthz_port, 10248);
  assert_string_equal(c.healthz_bind_address, "127.0.0.1");
  assert_int_equal(c.max_pods, 110);
  assert_int_equal(c.oom_score_adj, -999);
  assert_string_equal(c.root_dir, "/var/lib/kubelet");
  assert_string_equal(c.container_runtime_endpoint, "unix:///run/containerd/containerd.sock");
  assert_true(c.serialize_image_pulls);
  assert_false(c.seccomp_default);
  assert_int_equal(c.eviction_hard.n, 4);
  assert_int_equal(c.image_gc_high_threshold_percent, 85);
  assert_int_equal(c.image_gc_low_threshold_percent, 80);
  assert_string_equal(c.config_map_and_secret_change_detection_strategy, "Watch");
  assert_string_equal(c.content_type, "application/vnd.kubernetes.protobuf");
  assert_int_equal(nl_config_validate(&c, NULL), 0);
  nl_config_free(&c);
}

static void file_fields_are_read(void **state) {
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  const char *yaml =
      "apiVersion: kubelet.config.k8s.io/v1beta1\n"
      "kind: KubeletConfiguration\n"
      "staticPodPath: /etc/kubernetes/manifests\n"
      "fileCheckFrequency: 1m30s\n"
      "syncFrequency: 10s\n"
      "healthzPort: 0\n"
      "maxPods: 20\n"
      "serializeImagePulls: false\n"
      "seccompDefault: true\n"
      "clusterDNS: [10.96.0.10, 10.96.0.11]\n"
      "staticPodURLHeader:\n  X-Token: [a, b]\n"
      "evictionHard:\n  memory.available: 50Mi\n"
      "someFutureField: 3\n";
  assert_int_equal(load(&c, yaml, &err), 0);
  assert_null(err);
  assert_string_equal(c.static_pod_path, "/etc/kubernetes/manifests");
  assert_int_equal(c.file_check_frequency, 90 * NL_NS_PER_S);
  assert_int_equal(c.sync_frequency, 10 * NL_NS_PER_S);
  assert_int_equal(c.healthz_port, 0);
  assert_int_equal(c.max_pods, 20);
  assert_false(c.serialize_image_pulls);
  assert_true(c.seccomp_default);
  assert_int_equal(c.cluster_dns.n, 2);
  assert_string_equal(c.cluster_dns.v[1], "10.96.0.11");
  assert_int_equal(c.static_pod_url_header.n, 1);
  assert_int_equal(c.static_pod_url_header.values[0].n, 2);
  /* a map in the file replaces the default map, as upstream */
  assert_int_equal(c.eviction_hard.n, 1);
  assert_string_equal(c.eviction_hard.values[0].v[0], "50Mi");
  nl_config_free(&c);
}

static void bad_values_name_the_field(void **state) {
  struct {
    const char *body;
    const char *want;
  } cases[] = {
      {"syncFrequency: banana\n", "kubelet.yaml: syncFrequency: invalid duration \"banana\""},
      {"port: 70000\n", "kubelet.yaml: port: must be between 1 and 65535, got 70000"},
      {"serializeImagePulls: maybe\n", "kubelet.yaml: serializeImagePulls: invalid boolean"},
      {"clusterDNS: 10.0.0.1\n", "kubelet.yaml: clusterDNS: must be a list of strings"},
      {"maxPods: ten\n", "kubelet.yaml: maxPods: invalid integer \"ten\""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char doc[512];
    snprintf(doc, sizeof doc,
             "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n%s",
             cases[i].body);
    nl_kubelet_config_t c;
    nl_err_t *err = NULL;
    assert_int_equal(load(&c, doc, &err), -1);
    assert_non_null(err);
    if (strncmp(err->msg, cases[i].want, strlen(cases[i].want)) != 0)
      fail_msg("got \"%s\", want prefix \"%s\"", err->msg, cases[i].want);
    nl_err_free(&err);
    nl_config_free(&c);
  }
}

static void wrong_kind_or_version_is_an_error(void **state) {
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  assert_int_equal(load(&c, "apiVersion: v1\nkind: KubeletConfiguration\n", &err), -1);
  assert_non_null(strstr(err->msg, "apiVersion"));
  nl_err_free(&err);
  nl_config_free(&c);
  assert_int_equal(load(&c, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n", &err), -1);
  assert_non_null(strstr(err->msg, "kind"));
  nl_err_free(&err);
  nl_config_free(&c);
  assert_int_equal(load(&c, "{: [", &err), -1);
  assert_non_null(strstr(err->msg, "kubelet.yaml: line"));
  nl_err_free(&err);
  nl_config_free(&c);
}

static void flags_override_the_file(void **state) {
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  bool help, version;
  assert_int_equal(load(&c, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                            "syncFrequency: 10s\nmaxPods: 5\n", &err), 0);
  char *argv[] = {"nanolet", "--config", "/x.yaml", "--sync-frequency=3s", "--max-pods", "7",
                  "-v=4", "--runonce", "--node-labels", "a=b,c=d", "--hostname-override", "Edge-1",
                  "--fail-swap-on=false", NULL};
  int argc = (int)(sizeof argv / sizeof argv[0]) - 1;
  assert_string_equal(nl_flags_find(argc, argv, "config"), "/x.yaml");
  assert_int_equal(nl_flags_parse(&c, argc, argv, &help, &version, &err), 0);
  assert_false(help || version);
  assert_int_equal(c.sync_frequency, 3 * NL_NS_PER_S);
  assert_int_equal(c.max_pods, 7);
  assert_int_equal(c.verbosity, 4);
  assert_true(c.runonce);
  assert_false(c.fail_swap_on);
  assert_int_equal(c.node_labels.n, 2);
  assert_string_equal(c.node_labels.keys[1], "c");
  assert_string_equal(c.hostname_override, "Edge-1");
  nl_config_free(&c);
}

static void bad_flags_are_errors(void **state) {
  struct {
    char *argv[4];
    const char *want;
  } cases[] = {
      {{"nanolet", "--bogus", NULL}, "unknown flag: --bogus"},
      {{"nanolet", "--sync-frequency", "banana", NULL},
       "invalid argument \"banana\" for \"--sync-frequency\" flag"},
      {{"nanolet", "--max-pods", NULL}, "flag needs an argument: --max-pods"},
      {{"nanolet", "stray", NULL}, "unknown command \"stray\""},
      {{"nanolet", "--oom-score-adj=-2000", NULL}, "must be between -1000 and 1000"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nl_kubelet_config_t c;
    nl_err_t *err = NULL;
    bool help, version;
    int argc = 0;
    while (cases[i].argv[argc]) argc++;
    nl_config_defaults(&c);
    assert_int_equal(nl_flags_parse(&c, argc, cases[i].argv, &help, &version, &err), -1);
    if (!strstr(err->msg, cases[i].want)) fail_msg("got \"%s\", want \"%s\"", err->msg, cases[i].want);
    nl_err_free(&err);
    nl_config_free(&c);
  }
}

#define HEADER "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

/* Loads body (the fields, without the header) as a configuration file. */
static int load_body(nl_kubelet_config_t *c, const char *body, nl_err_t **err) {
  char yaml[512];
  assert_true((size_t)snprintf(yaml, sizeof yaml, HEADER "%s", body) < sizeof yaml);
  return load(c, yaml, err);
}

/* body parses, and validation refuses it with an error containing want. */
static void expect_invalid(const char *body, const char *want) {
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  assert_int_equal(load_body(&c, body, &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), -1);
  if (!strstr(err->msg, want)) fail_msg("%s: want %s, got %s", body, want, err->msg);
  nl_err_free(&err);
  nl_config_free(&c);
}

static void validation_follows_upstream(void **state) {
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  nl_config_defaults(&c);
  c.image_gc_low_threshold_percent = 90;
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_non_null(strstr(err->msg, "imageGCLowThresholdPercent"));
  nl_err_free(&err);
  c.image_gc_low_threshold_percent = 80;
  free(c.static_pod_path);
  c.static_pod_path = strdup("relative/dir");
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_non_null(strstr(err->msg, "staticPodPath"));
  nl_err_free(&err);
  free(c.static_pod_path);
  c.static_pod_path = NULL;
  /* enforceNodeAllocatable: "pods" by default, a named cgroup for the others */
  assert_int_equal(c.enforce_node_allocatable.n, 1);
  assert_string_equal(c.enforce_node_allocatable.v[0], "pods");
  bool help, version;
  char *argv[] = {"nanolet", "--enforce-node-allocatable", "pods,system-reserved", NULL};
  assert_int_equal(nl_flags_parse(&c, 3, argv, &help, &version, &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_non_null(strstr(err->msg, "systemReservedCgroup (--system-reserved-cgroup) must be specified"));
  nl_err_free(&err);
  char *with_cgroup[] = {"nanolet", "--system-reserved-cgroup", "/system.slice", NULL};
  assert_int_equal(nl_flags_parse(&c, 3, with_cgroup, &help, &version, &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), 0);
  char *none[] = {"nanolet", "--enforce-node-allocatable", "none,pods", NULL};
  assert_int_equal(nl_flags_parse(&c, 3, none, &help, &version, &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), -1);
  nl_err_free(&err);
  char *no_qos[] = {"nanolet", "--enforce-node-allocatable", "pods", "--cgroups-per-qos=false", NULL};
  assert_int_equal(nl_flags_parse(&c, 4, no_qos, &help, &version, &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_non_null(strstr(err->msg, "cgroupsPerQOS"));
  nl_err_free(&err);
  nl_config_free(&c);
  assert_int_equal(load(&c, HEADER "configMapAndSecretChangeDetectionStrategy: Cache\n", &err), 0);
  assert_string_equal(c.config_map_and_secret_change_detection_strategy, "Cache");
  assert_int_equal(nl_config_validate(&c, &err), 0);
  nl_config_free(&c);
  assert_int_equal(load(&c, HEADER "configMapAndSecretChangeDetectionStrategy: watch\n", &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_string_equal(err->msg, "configMapAndSecretChangeDetectionStrategy: must be Watch, Get or "
                                "Cache, got \"watch\"");
  nl_err_free(&err);
  nl_config_free(&c);
  /* contentType: the file, the flag, and what client-go has no serializer for */
  assert_int_equal(load(&c, HEADER "contentType: application/json\n", &err), 0);
  assert_string_equal(c.content_type, "application/json");
  assert_int_equal(nl_config_validate(&c, &err), 0);
  char *ct[] = {"nanolet", "--kube-api-content-type", "application/yaml", NULL};
  assert_int_equal(nl_flags_parse(&c, 3, ct, &help, &version, &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_string_equal(err->msg, "contentType: must be application/vnd.kubernetes.protobuf or "
                                "application/json, got \"application/yaml\"");
  nl_err_free(&err);
  nl_config_free(&c);
}

/* userNamespaces.idsPerPod: upstream's default and validation_linux.go */
static void user_namespaces_ids_per_pod(void **state) {
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  nl_config_defaults(&c);
  assert_int_equal(c.userns_ids_per_pod, 65536);
  nl_config_free(&c);
  assert_int_equal(load(&c, HEADER "userNamespaces:\n  idsPerPod: 131072\n", &err), 0);
  assert_int_equal(c.userns_ids_per_pod, 131072);
  assert_int_equal(nl_config_validate(&c, &err), 0);
  nl_config_free(&c);
  struct {
    const char *v, *want;
  } bad[] = {
      {"0", "userNamespaces.idsPerPod must not be less than 65536"},
      {"65535", "userNamespaces.idsPerPod must not be less than 65536"},
      {"100000", "userNamespaces.idsPerPod must be a multiple of 65536"},
      {"4294967296", "userNamespaces.idsPerPod must not be more than 4294967295"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char body[64];
    snprintf(body, sizeof body, "userNamespaces:\n  idsPerPod: %s\n", bad[i].v);
    expect_invalid(body, bad[i].want);
  }
}

/* crashLoopBackOff.maxContainerRestartPeriod and the two back-off gates:
 * upstream's newCrashLoopBackOff and validation.go */
static void crash_loop_backoff(void **state) {
  struct {
    const char *yaml;
    uint64_t initial_ms, max_ms;
  } ok[] = {
      {"", 10000, 300000},
      {"crashLoopBackOff:\n  maxContainerRestartPeriod: 30s\n", 10000, 30000},
      {"crashLoopBackOff:\n  maxContainerRestartPeriod: 1s\n", 1000, 1000},
      {"featureGates:\n  ReduceDefaultCrashLoopBackOffDecay: true\n", 1000, 60000},
      {"featureGates:\n  ReduceDefaultCrashLoopBackOffDecay: true\n"
       "crashLoopBackOff:\n  maxContainerRestartPeriod: 5m\n", 1000, 300000},
      /* the gate off: the field must not be set, and the default stays */
      {"featureGates:\n  KubeletCrashLoopBackOffMax: false\n", 10000, 300000},
  };
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    nl_kubelet_config_t c;
    nl_err_t *err = NULL;
    assert_int_equal(load_body(&c, ok[i].yaml, &err), 0);
    assert_int_equal(nl_config_validate(&c, &err), 0);
    uint64_t initial_ms, max_ms;
    nl_config_crash_loop_backoff(&c, &initial_ms, &max_ms);
    if (initial_ms != ok[i].initial_ms || max_ms != ok[i].max_ms)
      fail_msg("%s: want %" PRIu64 "/%" PRIu64 " ms, got %" PRIu64 "/%" PRIu64, ok[i].yaml,
               ok[i].initial_ms, ok[i].max_ms, initial_ms, max_ms);
    nl_config_free(&c);
  }
  struct {
    const char *yaml, *want;
  } bad[] = {
      {"crashLoopBackOff:\n  maxContainerRestartPeriod: 500ms\n",
       "crashLoopBackOff.maxContainerRestartPeriod (got: 0.5 seconds) must be set between 1s and "
       "300s"},
      {"crashLoopBackOff:\n  maxContainerRestartPeriod: 301s\n",
       "crashLoopBackOff.maxContainerRestartPeriod (got: 301 seconds) must be set between 1s and "
       "300s"},
      {"featureGates:\n  KubeletCrashLoopBackOffMax: false\n"
       "crashLoopBackOff:\n  maxContainerRestartPeriod: 30s\n",
       "FeatureGate KubeletCrashLoopBackOffMax not enabled, "
       "crashLoopBackOff.maxContainerRestartPeriod must not be set"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_invalid(bad[i].yaml, bad[i].want);
}

static void node_registration_fields(void **state) {
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  bool help, version;
  assert_int_equal(load(&c, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                            "registerWithTaints:\n- key: dedicated\n  value: edge\n  effect: NoSchedule\n"
                            "- key: gpu\n  effect: NoExecute\n"
                            "kubeReserved:\n  cpu: 100m\n  memory: 256Mi\n"
                            "nodeStatusMaxImages: -1\nregisterNode: false\n", &err), 0);
  assert_int_equal(c.register_with_taints.n, 2);
  assert_string_equal(c.register_with_taints.v[0], "dedicated=edge:NoSchedule");
  assert_string_equal(c.register_with_taints.v[1], "gpu:NoExecute");
  assert_string_equal(c.kube_reserved.first[1], "256Mi");
  assert_int_equal(c.node_status_max_images, -1);
  assert_false(c.register_node);
  assert_true(c.register_schedulable);
  assert_int_equal(nl_config_validate(&c, &err), 0);
  char *argv[] = {"nanolet", "--register-with-taints", "a=b:PreferNoSchedule", "--system-reserved",
                  "cpu=1", "--register-schedulable=false", NULL};
  assert_int_equal(nl_flags_parse(&c, 6, argv, &help, &version, &err), 0);
  assert_int_equal(c.register_with_taints.n, 1);
  assert_string_equal(c.system_reserved.first[0], "1");
  assert_false(c.register_schedulable);
  assert_int_equal(nl_config_validate(&c, &err), 0);
  /* Bad values name their field, as upstream rejects them at start. */
  char *bad_taint[] = {"nanolet", "--register-with-taints", "a=b:Never", NULL};
  assert_int_equal(nl_flags_parse(&c, 3, bad_taint, &help, &version, &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_string_equal(err->msg, "registerWithTaints[0]: invalid taint effect: Never, unsupported taint effect");
  nl_err_free(&err);
  char *bad_label[] = {"nanolet", "--register-with-taints", "a:NoSchedule", "--node-labels",
                       "node-role.kubernetes.io/worker=", NULL};
  assert_int_equal(nl_flags_parse(&c, 5, bad_label, &help, &version, &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_non_null(strstr(err->msg, "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [node-role.kubernetes.io/worker]"));
  nl_err_free(&err);
  char *bad_res[] = {"nanolet", "--node-labels", "a=b", "--kube-reserved", "memory=lots", NULL};
  assert_int_equal(nl_flags_parse(&c, 5, bad_res, &help, &version, &err), 0);
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_non_null(strstr(err->msg, "kubeReserved: memory: "));
  nl_err_free(&err);
  nl_config_free(&c);
}

/* The Lease's renewal period is upstream's: a quarter of
 * nodeLeaseDurationSeconds, its one setting (nanolet's own
 * --node-lease-renew-interval is gone: an unknown flag, as upstream). */
static void lease_duration_sets_the_period(void **state) {
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  bool help, version;
  assert_int_equal(load(&c, HEADER "nodeLeaseDurationSeconds: 100\n", &err), 0);
  assert_int_equal(c.node_lease_duration_seconds, 100);
  assert_int_equal(nl_config_validate(&c, &err), 0);
  char *gone[] = {"nanolet", "--node-lease-renew-interval", "25s", NULL};
  assert_int_equal(nl_flags_parse(&c, 3, gone, &help, &version, &err), -1);
  assert_string_equal(err->msg, "unknown flag: --node-lease-renew-interval");
  nl_err_free(&err);
  nl_config_free(&c);
  assert_int_equal(load(&c, HEADER "nodeLeaseDurationSeconds: 0\n", &err), -1);
  assert_non_null(strstr(err->msg, "nodeLeaseDurationSeconds"));
  nl_err_free(&err);
  nl_config_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(defaults_match_upstream),
      cmocka_unit_test(file_fields_are_read),
      cmocka_unit_test(bad_values_name_the_field),
      cmocka_unit_test(wrong_kind_or_version_is_an_error),
      cmocka_unit_test(flags_override_the_file),
      cmocka_unit_test(bad_flags_are_errors),
      cmocka_unit_test(validation_follows_upstream),
      cmocka_unit_test(user_namespaces_ids_per_pod),
      cmocka_unit_test(crash_loop_backoff),
      cmocka_unit_test(node_registration_fields),
      cmocka_unit_test(lease_duration_sets_the_period),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
