/* --config-dir: drop-ins merged over --config as upstream's merge patch
 * (maps key by key, lists whole, structs field by field, null back to the
 * default), flags over both, and a bad drop-in named with its field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "agent/config.h"
#include "file_tree.h"
#include "reactor/duration.h"
#include "reactor/xalloc.h"

#define HEAD "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

/* The --config file of the tests. */
static const char *const base =
    HEAD "port: 10350\n"
         "readOnlyPort: 10255\n"
         "evictionHard: {memory.available: 250Mi, nodefs.available: 10%}\n"
         "authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}\n"
         "authorization: {mode: AlwaysAllow}\n"
         "featureGates: {EventedPLEG: true}\n";

/* The two drop-ins of upstream's e2e_node spec "should merge kubelet configs
 * correctly" (test/e2e_node/kubelet_config_dir_test.go), the second in a
 * subdirectory, and a file that is no drop-in. */
static const char *const first =
    HEAD "port: 10255\n"
         "readOnlyPort: 10257\n"
         "clusterDNS:\n- 192.168.1.10\n"
         "systemReserved:\n  memory: 1Gi\n"
         "authorization:\n  mode: Webhook\n  webhook:\n"
         "    cacheAuthorizedTTL: \"5m\"\n    cacheUnauthorizedTTL: \"30s\"\n"
         "staticPodURLHeader:\n"
         "  kubelet-api-support:\n  - \"Authorization: 234APSDFA\"\n  - \"X-Custom-Header: 123\"\n"
         "  custom-static-pod:\n  - \"Authorization: 223EWRWER\"\n  - \"X-Custom-Header: 456\"\n"
         "shutdownGracePeriodByPodPriority:\n"
         "  - priority: 1\n    shutdownGracePeriodSeconds: 60\n"
         "  - priority: 2\n    shutdownGracePeriodSeconds: 45\n"
         "featureGates:\n  PodAndContainerStatsFromCRI: true\n";
static const char *const second =
    HEAD "clusterDNS:\n- 192.168.1.1\n- 192.168.1.5\n- 192.168.1.8\n"
         "port: 8080\n"
         "cpuManagerReconcilePeriod: 1s\n"
         "systemReserved:\n  memory: 2Gi\n"
         "authorization:\n  mode: Webhook\n  webhook:\n"
         "    cacheAuthorizedTTL: \"6m\"\n    cacheUnauthorizedTTL: \"40s\"\n"
         "staticPodURLHeader:\n"
         "  kubelet-api-support:\n  - \"Authorization: 8945AFSG1\"\n  - \"X-Custom-Header: 987\"\n"
         "shutdownGracePeriodByPodPriority:\n"
         "  - priority: 1\n    shutdownGracePeriodSeconds: 19\n"
         "  - priority: 6\n    shutdownGracePeriodSeconds: 30\n"
         "featureGates:\n  KubeletServiceAccountTokenForCredentialProviders: true\n"
         "  PodAndContainerStatsFromCRI: false\n  DynamicResourceAllocation: true\n";

static char *tmp_tree(void) {
  char tmpl[] = "/tmp/nl-dropin-XXXXXX";
  assert_non_null(mkdtemp(tmpl));
  return nl_xstrdup(tmpl);
}

/* nl_config_read then the flags, as main() does; *err on failure. */
static int read_all(nl_kubelet_config_t *c, char **argv, nl_err_t **err) {
  int argc = 0;
  while (argv[argc]) argc++;
  bool help, version;
  if (nl_config_read(c, argc, argv, err) < 0) return -1;
  return nl_flags_parse(c, argc, argv, &help, &version, err);
}

/* /configz's kubeletconfig object. */
static json_t *configz(const nl_kubelet_config_t *c) {
  char *s = nl_config_to_json(c);
  json_t *root = json_loads(s, 0, NULL);
  free(s);
  assert_non_null(root);
  json_t *kc = json_incref(json_object_get(root, "kubeletconfig"));
  json_decref(root);
  assert_non_null(kc);
  return kc;
}

static void assert_json(json_t *kc, const char *path, const char *want) {
  json_t *v = kc;
  char *p = nl_xstrdup(path), *save = NULL;
  for (char *part = strtok_r(p, ".", &save); part && v; part = strtok_r(NULL, ".", &save))
    v = json_object_get(v, part);
  free(p);
  if (!v) fail_msg("/configz has no %s", path);
  char *have = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (strcmp(have, want) != 0) fail_msg("/configz %s: %s, want %s", path, have, want);
  free(have);
}

static void upstream_spec_drop_ins_merge(void **state) {
  (void)state;
  char *root = tmp_tree();
  put_file(root, "kubelet.yaml", base);
  put_file(root, "conf.d/10-kubelet.conf", first);
  put_file(root, "conf.d/sub/20-kubelet.conf", second);
  put_file(root, "conf.d/30-kubelet.yaml", HEAD "port: 1\n"); /* not *.conf: skipped */
  char *file = nl_xasprintf("%s/kubelet.yaml", root), *dir = nl_xasprintf("%s/conf.d", root);
  char *argv[] = {"nanolet", "--config", file, "--config-dir", dir, NULL};
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  if (read_all(&c, argv, &err) < 0) fail_msg("%s", nl_err_msg(err));
  assert_int_equal(nl_config_validate(&c, NULL), 0);
  assert_string_equal(c.config_dir, dir);

  json_t *kc = configz(&c);
  assert_json(kc, "port", "8080");          /* the last file that sets it */
  assert_json(kc, "readOnlyPort", "10257"); /* the first drop-in's, the second has none */
  assert_json(kc, "clusterDNS", "[\"192.168.1.1\",\"192.168.1.5\",\"192.168.1.8\"]");
  assert_json(kc, "systemReserved", "{\"memory\":\"2Gi\"}");
  /* structs field by field: mode from the drop-ins, the rest from the file */
  assert_json(kc, "authorization", "{\"mode\":\"Webhook\",\"webhook\":{\"cacheAuthorizedTTL\":"
                                   "\"6m0s\",\"cacheUnauthorizedTTL\":\"40s\"}}");
  assert_json(kc, "authentication.anonymous.enabled", "true");
  /* maps key by key, each key's list whole */
  assert_json(kc, "staticPodURLHeader",
              "{\"kubelet-api-support\":[\"Authorization: 8945AFSG1\",\"X-Custom-Header: 987\"],"
              "\"custom-static-pod\":[\"Authorization: 223EWRWER\",\"X-Custom-Header: 456\"]}");
  assert_json(kc, "featureGates",
              "{\"EventedPLEG\":true,\"PodAndContainerStatsFromCRI\":false,"
              "\"KubeletServiceAccountTokenForCredentialProviders\":true,"
              "\"DynamicResourceAllocation\":true}");
  assert_json(kc, "evictionHard", "{\"memory.available\":\"250Mi\",\"nodefs.available\":\"10%\"}");
  /* a list of structs is replaced whole */
  assert_json(kc, "shutdownGracePeriodByPodPriority",
              "[{\"priority\":1,\"shutdownGracePeriodSeconds\":19},"
              "{\"priority\":6,\"shutdownGracePeriodSeconds\":30}]");
  assert_json(kc, "cpuManagerReconcilePeriod", "\"1s\"");
  assert_json(kc, "cpuCFSQuotaPeriod", "\"100ms\""); /* the default, set by no file */
  json_decref(kc);
  nl_config_free(&c);
  free(file), free(dir);
  rm_tree(root);
}

static void flags_win_over_drop_ins(void **state) {
  (void)state;
  char *root = tmp_tree();
  put_file(root, "d/10-a.conf", second);
  char *dir = nl_xasprintf("%s/d/", root); /* a trailing slash too */
  /* no --config: the drop-ins merge over the flags' defaults */
  char *argv[] = {"nanolet", "--config-dir", dir, "--port=9000",
                  "--feature-gates=DynamicResourceAllocation=False", NULL};
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  if (read_all(&c, argv, &err) < 0) fail_msg("%s", nl_err_msg(err));
  assert_int_equal(c.port, 9000);
  assert_int_equal(c.cpu_manager_reconcile_period, NL_NS_PER_S);
  assert_int_equal(c.authz_webhook_cache_authorized_ttl, 360 * NL_NS_PER_S);
  assert_true(c.authn_anonymous_enabled); /* the flags' default, as upstream */
  json_t *kc = configz(&c);
  /* --feature-gates over the drop-ins' gates, gate by gate, as upstream */
  assert_json(kc, "featureGates",
              "{\"KubeletServiceAccountTokenForCredentialProviders\":true,"
              "\"PodAndContainerStatsFromCRI\":false,\"DynamicResourceAllocation\":false}");
  json_decref(kc);
  nl_config_free(&c);
  free(dir);
  rm_tree(root);
}

static void null_resets_to_the_default(void **state) {
  (void)state;
  char *root = tmp_tree();
  put_file(root, "kubelet.yaml", base);
  put_file(root, "d/10-a.conf",
           HEAD "readOnlyPort: null\n"
                "evictionHard: {nodefs.available: null, imagefs.available: 20%}\n"
                "authentication: null\n"
                "featureGates: {EventedPLEG: ~}\n");
  char *file = nl_xasprintf("%s/kubelet.yaml", root), *dir = nl_xasprintf("%s/d", root);
  char *argv[] = {"nanolet", "--config", file, "--config-dir", dir, NULL};
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  if (read_all(&c, argv, &err) < 0) fail_msg("%s", nl_err_msg(err));
  assert_int_equal(c.read_only_port, 0);
  assert_false(c.authn_anonymous_enabled); /* the file's default */
  assert_true(c.authn_webhook_enabled);
  assert_int_equal(c.feature_gates.n, 0);
  json_t *kc = configz(&c);
  assert_json(kc, "evictionHard", "{\"memory.available\":\"250Mi\",\"imagefs.available\":\"20%\"}");
  json_decref(kc);
  nl_config_free(&c);
  free(file), free(dir);
  rm_tree(root);
}

static void expect_error(const char *dropin, const char *want) {
  char *root = tmp_tree();
  put_file(root, "d/10-good.conf", HEAD "port: 10300\n");
  put_file(root, "d/20-bad.conf", dropin);
  char *dir = nl_xasprintf("%s/d", root);
  char *argv[] = {"nanolet", "--config-dir", dir, NULL};
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  assert_int_equal(nl_config_read(&c, 3, argv, &err), -1);
  assert_non_null(err);
  char *full = nl_xasprintf("failed to merge the kubelet config drop-ins of --config-dir %s: "
                            "%s/20-bad.conf: %s",
                            dir, dir, want);
  if (strcmp(nl_err_msg(err), full) != 0) fail_msg("error: %s\nwant:  %s", nl_err_msg(err), full);
  free(full);
  nl_err_free(&err);
  nl_config_free(&c);
  free(dir);
  rm_tree(root);
}

static void bad_drop_ins_name_the_file_and_field(void **state) {
  (void)state;
  expect_error(HEAD "readOnlyPort: 70000\n", "readOnlyPort: must be between 0 and 65535, got 70000");
  expect_error(HEAD "featureGates: {PodAndContainerStatsFromCRI: maybe}\n",
               "featureGates: invalid value of PodAndContainerStatsFromCRI=maybe, err: "
               "strconv.ParseBool: parsing \"maybe\": invalid syntax");
  expect_error(HEAD "authorization: {webhook: {cacheAuthorizedTTL: soon}}\n",
               "authorization.webhook.cacheAuthorizedTTL: invalid duration \"soon\"");
  expect_error(HEAD "shutdownGracePeriodByPodPriority: [{priority: high}]\n",
               "shutdownGracePeriodByPodPriority: [0].priority: invalid integer \"high\"");
  expect_error("apiVersion: v1\nkind: ConfigMap\n",
               "apiVersion: must be kubelet.config.k8s.io/v1beta1, got \"v1\"");
}

static void missing_directory_is_an_error(void **state) {
  (void)state;
  char *argv[] = {"nanolet", "--config-dir=/nonexistent/nl-dropin", NULL};
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  assert_int_equal(nl_config_read(&c, 2, argv, &err), -1);
  assert_string_equal(nl_err_msg(err), "failed to merge the kubelet config drop-ins of --config-dir "
                                       "/nonexistent/nl-dropin: /nonexistent/nl-dropin: No such "
                                       "file or directory");
  nl_err_free(&err);
  nl_config_free(&c);
}

static void by_priority_excludes_the_grace_period(void **state) {
  (void)state;
  nl_kubelet_config_t c;
  nl_config_defaults(&c);
  const char *y = HEAD "shutdownGracePeriod: 30s\n"
                       "shutdownGracePeriodByPodPriority: [{priority: 1, shutdownGracePeriodSeconds: 9}]\n";
  assert_int_equal(nl_config_load_bytes(&c, "k.yaml", y, strlen(y), NULL), 0);
  nl_err_t *err = NULL;
  assert_int_equal(nl_config_validate(&c, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "Cannot specify both shutdownGracePeriodByPodPriority"));
  nl_err_free(&err);
  nl_config_free(&c);
}

/* /configz in upstream's v1beta1 types, so that upstream's decoder (the node
 * suite's) reads it: gates as booleans, taints as objects. */
static void configz_has_upstream_types(void **state) {
  (void)state;
  nl_kubelet_config_t c;
  nl_config_defaults(&c);
  const char *y = HEAD "featureGates: {A: true, B: false}\n"
                       "registerWithTaints: [{key: k, value: v, effect: NoSchedule}, {key: j, effect: NoExecute}]\n";
  assert_int_equal(nl_config_load_bytes(&c, "k.yaml", y, strlen(y), NULL), 0);
  json_t *kc = configz(&c);
  assert_json(kc, "featureGates", "{\"A\":true,\"B\":false}");
  assert_json(kc, "registerWithTaints", "[{\"key\":\"k\",\"value\":\"v\",\"effect\":\"NoSchedule\"},"
                                        "{\"key\":\"j\",\"effect\":\"NoExecute\"}]");
  json_decref(kc);
  nl_config_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(upstream_spec_drop_ins_merge),
      cmocka_unit_test(flags_win_over_drop_ins),
      cmocka_unit_test(null_resets_to_the_default),
      cmocka_unit_test(bad_drop_ins_name_the_file_and_field),
      cmocka_unit_test(missing_directory_is_an_error),
      cmocka_unit_test(by_priority_excludes_the_grace_period),
      cmocka_unit_test(configz_has_upstream_types),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
