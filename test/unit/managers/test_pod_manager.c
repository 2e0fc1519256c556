/* The pod manager: mirror pods are kept apart from the pods that run, found by
 * their static pod's name, and their changes are told. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "managers/pod_manager.h"

static nl_pod_t *mk(const char *name, const char *uid, const char *mirror_hash) {
  char doc[512];
  snprintf(doc, sizeof doc,
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"kube-system\",\"uid\":\"%s\"%s%s%s},"
           "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
           name, uid, mirror_hash ? ",\"annotations\":{\"kubernetes.io/config.mirror\":\"" : "",
           mirror_hash ? mirror_hash : "", mirror_hash ? "\"}" : "");
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_decode_api(doc, strlen(doc), &p, &err), 0);
  return p;
}

typedef struct told {
  int n;
  char last[128];
} told_t;

static void on_mirror(void *ctx, const char *ns, const char *name, const nl_pod_t *mirror) {
  told_t *t = ctx;
  t->n++;
  snprintf(t->last, sizeof t->last, "%s/%s %s", ns, name, mirror ? mirror->metadata.uid : "gone");
}

static void mirrors_apart(void **state) {
  (void)state;
  nl_pod_manager_t m;
  nl_pod_manager_init(&m);
  told_t t = {0};
  nl_pod_manager_on_mirror(&m, on_mirror, &t);
  nl_pod_t *st = mk("etcd-node1", "static-uid", NULL), *mi = mk("etcd-node1", "mirror-uid", "static-uid");
  nl_pod_manager_set(&m, st);
  assert_int_equal(t.n, 0);
  nl_pod_manager_set(&m, mi);
  assert_int_equal(t.n, 1);
  assert_string_equal(t.last, "kube-system/etcd-node1 mirror-uid");
  /* the static pod is what runs and is listed; the mirror is found by its name */
  assert_int_equal(nl_pod_manager_count(&m), 1);
  assert_string_equal(nl_pod_manager_get_by_name(&m, "kube-system", "etcd-node1")->metadata.uid, "static-uid");
  assert_null(nl_pod_manager_get(&m, "mirror-uid"));
  const nl_pod_t *got = nl_pod_manager_mirror_get(&m, "kube-system", "etcd-node1");
  assert_non_null(got);
  assert_string_equal(got->metadata.uid, "mirror-uid");
  assert_string_equal(nl_kvlist_get(&got->metadata.annotations, NL_ANNOTATION_CONFIG_MIRROR), "static-uid");
  size_t n;
  const nl_pod_t **l = nl_pod_manager_mirror_list(&m, &n);
  assert_int_equal(n, 1);
  free(l);
  nl_pod_manager_remove(&m, "mirror-uid");
  assert_int_equal(t.n, 2);
  assert_string_equal(t.last, "kube-system/etcd-node1 gone");
  assert_null(nl_pod_manager_mirror_get(&m, "kube-system", "etcd-node1"));
  assert_non_null(nl_pod_manager_get(&m, "static-uid"));
  nl_pod_manager_remove(&m, "static-uid");
  assert_int_equal(t.n, 2);
  assert_int_equal(nl_pod_manager_count(&m), 0);
  nl_pod_manager_set(&m, mi); /* freed with the manager */
  /* the pod manager holds the version it was given, not a copy */
  assert_ptr_equal(nl_pod_manager_mirror_get(&m, "kube-system", "etcd-node1"), mi);
  nl_pod_manager_free(&m);
  nl_pod_free(st);
  nl_pod_free(mi);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(mirrors_apart)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
