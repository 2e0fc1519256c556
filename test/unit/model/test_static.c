#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "agent/model/pod.h"
#include "fixture.h"

static nl_pod_t *load(const char *text, const char *file, const char *node) {
  nl_static_source_t src = {"file", file, node};
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_load_static(text, strlen(text), &src, &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  return pod;
}

static const char *base = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n"
                          "  containers:\n  - name: c\n    image: nginx\n";

static void names_and_annotations(void **state) {
  nl_pod_t *p = load(base, "/etc/kubernetes/manifests/web.yaml", "Edge-1");
  assert_string_equal(p->metadata.name, "web-edge-1");
  assert_string_equal(p->metadata.namespace_, "default");
  assert_string_equal(p->spec.node_name, "edge-1"); /* lowercased, as upstream GetHostname */
  assert_int_equal(strlen(p->metadata.uid), 32);
  assert_string_equal(nl_kvlist_get(&p->metadata.annotations, NL_ANNOTATION_CONFIG_HASH), p->metadata.uid);
  assert_string_equal(nl_kvlist_get(&p->metadata.annotations, NL_ANNOTATION_CONFIG_SOURCE), "file");
  assert_int_equal(p->spec.n_tolerations, 1);
  assert_string_equal(p->spec.tolerations[0].operator_, "Exists");
  assert_string_equal(p->spec.tolerations[0].effect, "NoExecute");
  nl_pod_set_annotation(p, NL_ANNOTATION_CONFIG_SEEN, "2026-01-01T00:00:00.000000000Z");
  assert_non_null(nl_kvlist_get(&p->metadata.annotations, NL_ANNOTATION_CONFIG_SEEN));
  nl_pod_free(p);
}

static void uid_depends_on_content_node_and_source(void **state) {
  nl_pod_t *a = load(base, "web.yaml", "n1");
  nl_pod_t *same = load(base, "web.yaml", "n1");
  /* formatting and comments are not content */
  char *reformatted = "# a comment\n{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\"},"
                      "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}";
  nl_pod_t *json = load(reformatted + 12, "web.yaml", "n1");
  nl_pod_t *other_node = load(base, "web.yaml", "n2");
  nl_pod_t *other_file = load(base, "web2.yaml", "n1");
  char edited[512];
  snprintf(edited, sizeof edited, "%s    args: [x]\n", base);
  nl_pod_t *changed = load(edited, "web.yaml", "n1");
  assert_string_equal(a->metadata.uid, same->metadata.uid);
  assert_string_equal(a->metadata.uid, json->metadata.uid);
  assert_string_not_equal(a->metadata.uid, other_node->metadata.uid);
  assert_string_not_equal(a->metadata.uid, other_file->metadata.uid);
  assert_string_not_equal(a->metadata.uid, changed->metadata.uid);
  assert_int_equal(nl_pod_hash(a), nl_pod_hash(same));
  assert_int_not_equal(nl_pod_hash(a), nl_pod_hash(changed));
  assert_int_not_equal(nl_container_hash(&a->spec.containers[0]),
                       nl_container_hash(&changed->spec.containers[0]));
  nl_pod_t *pods[] = {a, same, json, other_node, other_file, changed};
  for (size_t i = 0; i < 6; i++) nl_pod_free(pods[i]);
}

static void manifest_uid_is_kept(void **state) {
  const char *y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  uid: 1234\n"
                  "spec:\n  containers:\n  - name: c\n    image: nginx\n";
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  nl_static_source_t src = {"file", "w", "n"};
  /* 1234 is a YAML int: upstream refuses a number for a string field too */
  assert_int_equal(nl_pod_load_static(y, strlen(y), &src, &p, &err), -1);
  assert_non_null(strstr(err->msg, "w: metadata.uid: must be a string, got a number"));
  nl_err_free(&err);
  const char *q = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  uid: \"1234\"\n"
                  "spec:\n  containers:\n  - name: c\n    image: nginx\n";
  p = load(q, "w", "n");
  assert_string_equal(p->metadata.uid, "1234");
  assert_string_equal(nl_kvlist_get(&p->metadata.annotations, NL_ANNOTATION_CONFIG_HASH), "1234");
  nl_pod_free(p);
}

static void http_source(void **state) {
  nl_static_source_t src = {"http", "http://cfg/pods", "n"};
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_load_static(base, strlen(base), &src, &p, &err), 0);
  assert_string_equal(nl_kvlist_get(&p->metadata.annotations, NL_ANNOTATION_CONFIG_SOURCE), "http");
  assert_int_equal(p->spec.n_tolerations, 0); /* the NoExecute toleration is for files */
  nl_pod_free(p);
}

static void default_node_name_is_lowercase(void **state) {
  char *n = nl_node_name_default();
  for (char *c = n; *c; c++) assert_false(*c >= 'A' && *c <= 'Z');
  assert_true(strlen(n) > 0);
  free(n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(names_and_annotations),
      cmocka_unit_test(uid_depends_on_content_node_and_source),
      cmocka_unit_test(manifest_uid_is_kept),
      cmocka_unit_test(http_source),
      cmocka_unit_test(default_node_name_is_lowercase),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
