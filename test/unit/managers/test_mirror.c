/* Mirror pods: the create/recreate/delete decision, the POST body, and the
 * requests the manager sends against the API client's test double. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../kube/fake_client.h"
#include "managers/mirror.h"
#include "reactor/xalloc.h"

static void decisions(void **state) {
  (void)state;
  nl_mirror_seen_t same = {"h1", false}, old = {"h0", false}, dying = {"h1", true},
                   foreign = {NULL, false};
  assert_int_equal(nl_mirror_decide("h1", NULL), NL_MIRROR_CREATE);
  assert_int_equal(nl_mirror_decide("h1", &same), NL_MIRROR_KEEP);
  assert_int_equal(nl_mirror_decide("h1", &old), NL_MIRROR_DELETE);
  assert_int_equal(nl_mirror_decide("h1", &dying), NL_MIRROR_DELETE);
  assert_int_equal(nl_mirror_decide("h1", &foreign), NL_MIRROR_KEEP);
  assert_int_equal(nl_mirror_decide(NULL, &same), NL_MIRROR_DELETE);
  assert_int_equal(nl_mirror_decide(NULL, &foreign), NL_MIRROR_KEEP);
  assert_int_equal(nl_mirror_decide(NULL, NULL), NL_MIRROR_KEEP);
}

static nl_pod_t *static_pod(const char *image) {
  char y[512];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: edge}\n"
           "spec:\n  containers: [{name: c, image: %s}]\n", image);
  nl_pod_t *pod = NULL;
  nl_static_source_t src = {"file", "/etc/kubernetes/manifests/web.yaml", "n1"};
  nl_err_t *err = NULL;
  if (nl_pod_load_static(y, strlen(y), &src, &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  return pod;
}

static void body_of_a_mirror_pod(void **state) {
  (void)state;
  nl_pod_t *p = static_pod("busybox");
  json_t *b = nl_mirror_pod_body(p, "n1", "node-uid");
  json_t *md = json_object_get(b, "metadata");
  assert_string_equal(json_string_value(json_object_get(md, "name")), "web-n1");
  assert_string_equal(json_string_value(json_object_get(md, "namespace")), "edge");
  assert_null(json_object_get(md, "uid"));
  const char *hash = nl_kvlist_get(&p->metadata.annotations, NL_ANNOTATION_CONFIG_HASH);
  json_t *ann = json_object_get(md, "annotations");
  assert_string_equal(json_string_value(json_object_get(ann, "kubernetes.io/config.mirror")), hash);
  assert_string_equal(json_string_value(json_object_get(ann, "kubernetes.io/config.hash")), hash);
  char *owners = json_dumps(json_object_get(md, "ownerReferences"), JSON_COMPACT | JSON_PRESERVE_ORDER);
  assert_string_equal(owners, "[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\",\"uid\":"
                              "\"node-uid\",\"controller\":true}]");
  free(owners);
  assert_string_equal(json_string_value(json_object_get(json_object_get(b, "spec"), "nodeName")), "n1");
  json_decref(b);
  nl_pod_free(p);
}

typedef struct fx {
  uv_loop_t loop;
  nl_mirror_manager_t mm;
  const char *node_uid;
  bool stopped;
} fx_t;

static const char *node_uid(void *ctx) { return ((fx_t *)ctx)->node_uid; }
static void on_stopped(void *ctx) { ((fx_t *)ctx)->stopped = true; }

static fake_req_t *req(size_t i) {
  assert_true(i < fake_nreqs);
  return fake_reqs[i];
}

static void assert_req(size_t i, const char *method, const char *path) {
  assert_string_equal(req(i)->method, method);
  assert_string_equal(req(i)->path, path);
}

#define MIRROR(uid, hash, extra) \
  "{\"metadata\":{\"name\":\"web-n1\",\"namespace\":\"edge\",\"uid\":\"" uid "\",\"annotations\":" \
  "{\"kubernetes.io/config.mirror\":\"" hash "\"}" extra "}}"

#define LIST "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"

/* A sync round that lists one pod. */
static void list_of(fx_t *f, size_t i, const char *pod) {
  nl_mirror_manager_sync(&f->mm);
  assert_req(i, "GET", LIST);
  char items[600];
  snprintf(items, sizeof items, "{\"items\":[%s]}", pod);
  fake_respond(req(i), 200, items);
}

static void create_recreate_and_delete(void **state) {
  (void)state;
  fx_t f = {.node_uid = ""};
  fake_reset();
  uv_loop_init(&f.loop);
  nl_mirror_deps_t d = {.node_uid = node_uid, .ctx = &f};
  nl_mirror_manager_init(&f.mm, &f.loop, &d, "n1", 100000);
  nl_mirror_manager_start(&f.mm);
  nl_pod_t *p = static_pod("busybox");
  const char *hash = nl_kvlist_get(&p->metadata.annotations, NL_ANNOTATION_CONFIG_HASH);
  char mirror_ok[512];
  snprintf(mirror_ok, sizeof mirror_ok, MIRROR("m1", "%s", ""), hash);
  nl_mirror_manager_set(&f.mm, p);
  assert_req(0, "GET", LIST);
  fake_respond(req(0), 200, "{\"items\":[]}");
  assert_int_equal(fake_nreqs, 1); /* the Node is not registered yet */
  f.node_uid = "node-uid";
  nl_mirror_manager_sync(&f.mm);
  assert_req(1, "GET", LIST);
  fake_respond(req(1), 200, "{\"items\":[]}");
  assert_req(2, "POST", "/api/v1/namespaces/edge/pods");
  assert_non_null(strstr(req(2)->body, "\"uid\":\"node-uid\""));
  assert_null(nl_mirror_manager_uid(&f.mm, "edge", "web-n1", hash));
  fake_respond(req(2), 201, mirror_ok);
  assert_string_equal(nl_mirror_manager_uid(&f.mm, "edge", "web-n1", hash), "m1");
  /* another version of the static pod (one still terminating) has none */
  assert_null(nl_mirror_manager_uid(&f.mm, "edge", "web-n1", "old-hash"));
  /* in place: nothing to do */
  list_of(&f, 3, mirror_ok);
  assert_int_equal(fake_nreqs, 4);
  /* outdated: deleted with its uid, then created again */
  list_of(&f, 4, MIRROR("m0", "old-hash", ""));
  assert_req(5, "DELETE", "/api/v1/namespaces/edge/pods/web-n1");
  assert_string_equal(req(5)->body, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\","
                                    "\"gracePeriodSeconds\":0,\"preconditions\":{\"uid\":\"m0\"}}");
  fake_respond(req(5), 200, "{}");
  assert_req(6, "POST", "/api/v1/namespaces/edge/pods");
  fake_respond(req(6), 201, mirror_ok);
  /* being deleted (kubectl delete): replaced */
  char dying[512];
  snprintf(dying, sizeof dying, MIRROR("m1", "%s", ",\"deletionTimestamp\":\"2024-01-01T00:00:00Z\""), hash);
  list_of(&f, 7, dying);
  assert_req(8, "DELETE", "/api/v1/namespaces/edge/pods/web-n1");
  fake_respond(req(8), 404, "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}");
  assert_req(9, "POST", "/api/v1/namespaces/edge/pods");
  fake_respond(req(9), 201, mirror_ok);
  /* a pod of that name that is no mirror pod is left alone */
  list_of(&f, 10, "{\"metadata\":{\"name\":\"web-n1\",\"namespace\":\"edge\",\"uid\":\"x\"}}");
  assert_int_equal(fake_nreqs, 11);
  /* the static pod goes: its mirror pod goes */
  nl_mirror_manager_remove(&f.mm, "edge", "web-n1");
  assert_null(nl_mirror_manager_uid(&f.mm, "edge", "web-n1", hash));
  char items[600];
  snprintf(items, sizeof items, "{\"items\":[%s]}", mirror_ok);
  assert_req(11, "GET", LIST);
  fake_respond(req(11), 200, items);
  assert_req(12, "DELETE", "/api/v1/namespaces/edge/pods/web-n1");
  assert_non_null(strstr(req(12)->body, "{\"uid\":\"m1\"}"));
  fake_respond(req(12), 200, "{}");
  nl_mirror_manager_sync(&f.mm);
  assert_int_equal(fake_nreqs, 13); /* forgotten: nothing to list */
  /* stop with a request in flight */
  nl_mirror_manager_set(&f.mm, p);
  assert_int_equal(fake_nreqs, 14);
  nl_mirror_manager_stop(&f.mm, on_stopped, &f);
  fake_settle();
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_true(f.stopped);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  fake_reset();
  nl_pod_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(decisions),
      cmocka_unit_test(body_of_a_mirror_pod),
      cmocka_unit_test(create_recreate_and_delete),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
