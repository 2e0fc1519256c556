#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <string.h>

#include "agent/model/pod.h"
#include "fixture.h"

/* Every file in fixtures/manifests/invalid starts with `# expect: <line>`: loading it
 * as a static pod fails with that field-path error, prefixed by the file name. */
static void invalid_manifests(void **state) {
  DIR *dir = opendir(FIXTURES "/invalid");
  assert_non_null(dir);
  struct dirent *de;
  int checked = 0, failed = 0;
  while ((de = readdir(dir))) {
    if (de->d_name[0] == '.') continue;
    char rel[512];
    snprintf(rel, sizeof rel, "invalid/%s", de->d_name);
    size_t len = 0;
    char *data = fixture_read(rel, &len);
    assert_non_null(data);
    assert_true(strncmp(data, "# expect: ", 10) == 0);
    char *nl = strchr(data, '\n');
    char want[512];
    snprintf(want, sizeof want, "%s: %.*s", de->d_name, (int)(nl - data - 10), data + 10);
    nl_static_source_t src = {"file", de->d_name, "node1"};
    nl_pod_t *pod = NULL;
    nl_err_t *err = NULL;
    if (nl_pod_load_static(data, len, &src, &pod, &err) == 0) {
      print_error("%s: accepted\n", de->d_name);
      failed++;
      nl_pod_free(pod);
    } else if (err->code != NL_EINVAL || !strstr(err->msg, want)) {
      print_error("%s:\n want: %s\n got:  %s\n", de->d_name, want, err->msg);
      failed++;
    }
    nl_err_free(&err);
    free(data);
    checked++;
  }
  closedir(dir);
  assert_int_equal(failed, 0);
  assert_true(checked >= 30);
  print_message("checked %d invalid manifests\n", checked);
}

/* The documented example, verbatim. */
static void documented_example(void **state) {
  size_t len = 0;
  char *data = fixture_read("invalid/web.yaml", &len);
  nl_static_source_t src = {"file", "web.yaml", "node1"};
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_load_static(data, len, &src, &pod, &err), -1);
  assert_string_equal(err->msg, "web.yaml: spec.containers[1].ports[0].containerPort: must be "
                                "between 1 and 65535, got 70000");
  nl_err_free(&err);
  free(data);
}

/* Several problems are all reported, one per line. */
static void all_errors_reported(void **state) {
  const char *y = "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  restartPolicy: Maybe\n"
                  "  containers:\n  - name: A\n    ports: [{containerPort: 0}]\n";
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  nl_static_source_t src = {"file", "m.yaml", "n"};
  assert_int_equal(nl_pod_load_static(y, strlen(y), &src, &pod, &err), -1);
  assert_non_null(strstr(err->msg, "m.yaml: spec.containers[0].name: must be a DNS-1123 label"));
  assert_non_null(strstr(err->msg, "\nm.yaml: spec.containers[0].image: required"));
  assert_non_null(strstr(err->msg, "\nm.yaml: spec.containers[0].ports[0].containerPort: must be between"));
  assert_non_null(strstr(err->msg, "\nm.yaml: spec.restartPolicy: must be one of"));
  nl_err_free(&err);
}

/* The API server gives an unset divisor as "0": valid (upstream
 * validateContainerResourceDivisor); a negative one is not. */
static void divisor_zero(void **state) {
#define DIVISOR_POD(d)                                                                 \
  "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n"                              \
  "  containers:\n  - name: a\n    image: b\n    env:\n"                                  \
  "    - {name: C, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: '" d "'}}}\n"
  const char *buf;
  nl_static_source_t src = {"file", "m.yaml", "n"};
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  buf = DIVISOR_POD("0");
  if (nl_pod_load_static(buf, strlen(buf), &src, &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_pod_free(pod);
  pod = NULL;
  buf = DIVISOR_POD("-1");
  assert_int_equal(nl_pod_load_static(buf, strlen(buf), &src, &pod, &err), -1);
  assert_non_null(strstr(err->msg, "resourceFieldRef.divisor: must be positive"));
  nl_err_free(&err);
}

static void valid_fixtures_validate(void **state) {
  const char *names[] = {"nginx.yaml", "nginx.json", "init-sidecar.yaml", "env-fieldref.yaml",
                         "volumes.yaml", "resources.yaml", "restart-rules.yaml"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    size_t len = 0;
    char *data = fixture_read(names[i], &len);
    nl_static_source_t src = {"file", names[i], "node1"};
    nl_pod_t *pod = NULL;
    nl_err_t *err = NULL;
    if (nl_pod_load_static(data, len, &src, &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
    nl_pod_free(pod);
    free(data);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(invalid_manifests),
      cmocka_unit_test(documented_example),
      cmocka_unit_test(all_errors_reported),
      cmocka_unit_test(valid_fixtures_validate),
      cmocka_unit_test(divisor_zero),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
