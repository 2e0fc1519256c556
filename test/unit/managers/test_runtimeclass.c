/* The RuntimeClass cache and upstream's LookupRuntimeHandler: a list replaces
 * the cache, watch events add, change and remove classes, a class that does not
 * decode is ignored, the cache is bounded; the default class resolves to "",
 * an unknown one to the lister's NotFound text; a pod's recursive read-only
 * mounts resolve against its class's handler. */
#include "rt_test_util.h"

#include <errno.h>
#include <stdio.h>

#include "managers/runtimeclass.h"

#define RC(name, handler) \
  "{\"apiVersion\":\"node.k8s.io/v1\",\"kind\":\"RuntimeClass\",\"metadata\":{\"name\":\"" name \
  "\"},\"handler\":\"" handler "\"}"

static nl_kube_raw_t raw(const char *json) { return (nl_kube_raw_t){json, strlen(json)}; }

static void cache(nl_runtimeclasses_t *rc) {
  memset(rc, 0, sizeof *rc);
  nl_map_init(&rc->by_name);
}

/* The handler lookup gives, or the error's text. */
static const char *lookup(nl_runtimeclasses_t *rc, const char *name, char *buf, size_t len) {
  const char *h = "unset";
  nl_err_t *err = NULL;
  if (nl_runtimeclasses_lookup(rc, name, &h, &err) < 0) {
    assert_int_equal(err->code, ENOENT);
    assert_string_equal(h, "");
    snprintf(buf, len, "error: %s", err->msg);
    nl_err_free(&err);
    return buf;
  }
  return h;
}

static void test_lookup(void **state) {
  (void)state;
  nl_runtimeclasses_t rc;
  cache(&rc);
  char b[256];
  /* nothing listed yet: the default class still resolves, a named one not */
  assert_string_equal(lookup(&rc, NULL, b, sizeof b), "");
  assert_string_equal(lookup(&rc, "", b, sizeof b), "");
  assert_string_equal(lookup(&rc, "gvisor", b, sizeof b),
                      "error: runtimeclass.node.k8s.io \"gvisor\" not found");
  nl_kube_raw_t items[] = {raw(RC("gvisor", "runsc")), raw(RC("fast", "runc")),
                           raw("{\"metadata\":{\"name\":\"bad\"},\"handler\":\"Not_A_Label\"}"),
                           raw("[1]")};
  nl_runtimeclasses_replace(&rc, items, 4);
  assert_string_equal(lookup(&rc, "gvisor", b, sizeof b), "runsc");
  assert_string_equal(lookup(&rc, "fast", b, sizeof b), "runc");
  assert_string_equal(lookup(&rc, "bad", b, sizeof b),
                      "error: runtimeclass.node.k8s.io \"bad\" not found");
  assert_int_equal(nl_map_size(&rc.by_name), 2);
  /* watch events: modified, added, deleted */
  const char *mod = RC("fast", "crun"), *add = RC("kata", "kata-qemu"), *del = RC("gvisor", "runsc");
  nl_runtimeclasses_put(&rc, mod, strlen(mod));
  nl_runtimeclasses_put(&rc, add, strlen(add));
  nl_runtimeclasses_delete(&rc, del, strlen(del));
  assert_string_equal(lookup(&rc, "fast", b, sizeof b), "crun");
  assert_string_equal(lookup(&rc, "kata", b, sizeof b), "kata-qemu");
  assert_string_equal(lookup(&rc, "gvisor", b, sizeof b),
                      "error: runtimeclass.node.k8s.io \"gvisor\" not found");
  /* a new list replaces everything */
  nl_kube_raw_t again[] = {raw(RC("only", "runc"))};
  nl_runtimeclasses_replace(&rc, again, 1);
  assert_string_equal(lookup(&rc, "only", b, sizeof b), "runc");
  assert_string_equal(lookup(&rc, "kata", b, sizeof b),
                      "error: runtimeclass.node.k8s.io \"kata\" not found");
  nl_map_free(&rc.by_name, free);
}

static void test_decode_errors(void **state) {
  (void)state;
  static const struct {
    const char *json, *msg;
  } cases[] = {
      {"", "runtimeclass: not a JSON object: "},
      {"{\"handler\":\"runc\"}", "runtimeclass: metadata.name: required, at most 253 bytes"},
      {"{\"metadata\":{\"name\":\"x\"}}", "runtimeclass x: handler: must be a DNS label"},
      {"{\"metadata\":{\"name\":\"x\"},\"handler\":\"-runc\"}",
       "runtimeclass x: handler: must be a DNS label"},
      {"{\"metadata\":{\"name\":\"x\"},\"handler\":\"a234567890123456789012345678901234567890"
       "123456789012345678901234\"}",
       "runtimeclass x: handler: must be a DNS label"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *n = NULL, *h = NULL;
    nl_err_t *err = NULL;
    assert_int_equal(nl_runtimeclass_decode(cases[i].json, strlen(cases[i].json), &n, &h, &err), -1);
    assert_true(strncmp(err->msg, cases[i].msg, strlen(cases[i].msg)) == 0);
    assert_null(n);
    nl_err_free(&err);
  }
  char *n, *h;
  nl_err_t *err = NULL;
  const char *ok = RC("x", "test-handler");
  assert_int_equal(nl_runtimeclass_decode(ok, strlen(ok), &n, &h, &err), 0);
  assert_string_equal(n, "x");
  assert_string_equal(h, "test-handler");
  free(n);
  free(h);
}

/* Memory stays bounded: past NL_RUNTIMECLASS_MAX a new class is not held,
 * while those held still change. */
static void test_bounded(void **state) {
  (void)state;
  nl_runtimeclasses_t rc;
  cache(&rc);
  char json[128], b[256];
  for (int i = 0; i < NL_RUNTIMECLASS_MAX + 10; i++) {
    snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"c%d\"},\"handler\":\"h%d\"}", i, i);
    nl_runtimeclasses_put(&rc, json, strlen(json));
  }
  assert_int_equal(nl_map_size(&rc.by_name), NL_RUNTIMECLASS_MAX);
  snprintf(b, sizeof b, "c%d", NL_RUNTIMECLASS_MAX);
  char e[256];
  assert_string_equal(lookup(&rc, b, e, sizeof e),
                      "error: runtimeclass.node.k8s.io \"c4096\" not found");
  const char *mod = RC("c0", "other");
  nl_runtimeclasses_put(&rc, mod, strlen(mod));
  assert_string_equal(lookup(&rc, "c0", e, sizeof e), "other");
  nl_map_free(&rc.by_name, free);
}

static const char *rro_asked; /* the handler the last support question named */
static bool rro_only_runc(void *ctx, const char *handler) {
  (void)ctx;
  rro_asked = handler;
  return strcmp(handler, "runc") == 0;
}

/* The pod's handler through the runtime's options: its class's, "" without a
 * class or without a manager (standalone); recursive read-only support is
 * asked of that handler, and is false when the class is not found. */
static void test_pod_handler_and_rro(void **state) {
  (void)state;
  nl_runtimeclasses_t rc;
  cache(&rc);
  nl_kube_raw_t items[] = {raw(RC("rro", "runc")), raw(RC("plain", "crun"))};
  nl_runtimeclasses_replace(&rc, items, 2);
  nl_runtime_opts_t o = test_opts();
  o.supports_rro = rro_only_runc;
  nl_pod_t *with = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, "
                                 "uid: u}\nspec:\n  runtimeClassName: rro\n"
                                 "  containers: [{name: c, image: b}]\n");
  nl_pod_t *plain = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, "
                                  "uid: u}\nspec:\n  runtimeClassName: plain\n"
                                  "  containers: [{name: c, image: b}]\n");
  nl_pod_t *missing = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, "
                                    "uid: u}\nspec:\n  runtimeClassName: nope\n"
                                    "  containers: [{name: c, image: b}]\n");
  nl_pod_t *none = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, "
                                 "uid: u}\nspec:\n  containers: [{name: c, image: b}]\n");
  const char *h;
  nl_err_t *err = NULL;
  /* standalone: no manager, every pod the default handler */
  assert_int_equal(nl_runtime_pod_handler(&o, with, &h, &err), 0);
  assert_string_equal(h, "");
  assert_false(nl_runtime_supports_rro(&o, with));
  assert_string_equal(rro_asked, "");
  o.runtime_class = nl_runtimeclasses_lookup;
  o.runtime_class_ctx = &rc;
  assert_int_equal(nl_runtime_pod_handler(&o, with, &h, &err), 0);
  assert_string_equal(h, "runc");
  assert_true(nl_runtime_supports_rro(&o, with));
  assert_string_equal(rro_asked, "runc");
  assert_false(nl_runtime_supports_rro(&o, plain));
  assert_string_equal(rro_asked, "crun");
  assert_int_equal(nl_runtime_pod_handler(&o, none, &h, &err), 0);
  assert_string_equal(h, "");
  rro_asked = NULL;
  assert_int_equal(nl_runtime_pod_handler(&o, missing, &h, &err), -1);
  assert_string_equal(err->msg, "runtimeclass.node.k8s.io \"nope\" not found");
  nl_err_free(&err);
  assert_false(nl_runtime_supports_rro(&o, missing));
  assert_null(rro_asked); /* never asked: the lookup failed first */
  nl_pod_free(with);
  nl_pod_free(plain);
  nl_pod_free(missing);
  nl_pod_free(none);
  nl_map_free(&rc.by_name, free);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lookup),
      cmocka_unit_test(test_decode_errors),
      cmocka_unit_test(test_bounded),
      cmocka_unit_test(test_pod_handler_and_rro),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
