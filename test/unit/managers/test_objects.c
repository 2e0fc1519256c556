/* The ConfigMap and Secret managers against the API client's test double
 * (test/unit/kube/fake_client.c): what they ask for (one list+watch per
 * referenced object on metadata.name, or GETs), what lookups answer, when the
 * changed callback fires, and that an unreferenced or immutable object is no
 * longer watched. Also the decoding of the objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../kube/fake_client.h"
#include "managers/objects.h"
#include "reactor/xalloc.h"

/* ---- decoding ---- */

static nl_object_t *decode(nl_object_kind_t kind, const char *json, bool *immutable) {
  nl_object_t *o = NULL;
  nl_err_t *err = NULL;
  bool imm = false;
  if (nl_object_decode(kind, json, strlen(json), &o, &imm, &err) < 0)
    fail_msg("decode: %s", nl_err_msg(err));
  if (immutable) *immutable = imm;
  return o;
}

static const char *decode_err(nl_object_kind_t kind, const char *json) {
  static char msg[512];
  nl_object_t *o = NULL;
  nl_err_t *err = NULL;
  bool imm;
  assert_int_equal(nl_object_decode(kind, json, strlen(json), &o, &imm, &err), -1);
  assert_null(o);
  snprintf(msg, sizeof msg, "%s", nl_err_msg(err));
  nl_err_free(&err);
  return msg;
}

static void configmap_data_and_binary_data(void **state) {
  (void)state;
  bool imm = true;
  nl_object_t *o = decode(NL_OBJECT_CONFIG_MAP,
                          "{\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"ns\",\"name\":\"app\","
                          "\"resourceVersion\":\"7\"},\"data\":{\"z\":\"last\",\"a\":\"x\\u0000y\"},"
                          "\"binaryData\":{\"bin\":\"AAEC\"}}",
                          &imm);
  assert_false(imm);
  assert_string_equal(o->namespace_, "ns");
  assert_string_equal(o->name, "app");
  assert_null(o->type);
  assert_int_equal(o->n_items, 3);
  assert_string_equal(o->items[0].key, "a"); /* sorted */
  assert_int_equal(o->items[0].len, 3);
  assert_memory_equal(o->items[0].value, "x\0y", 3);
  const nl_object_item_t *b = nl_object_find(o, "bin");
  assert_non_null(b);
  assert_int_equal(b->len, 3);
  assert_memory_equal(b->value, "\0\1\2", 3);
  assert_true(b->binary);
  assert_false(o->items[0].binary);
  assert_string_equal((const char *)nl_object_find(o, "z")->value, "last");
  assert_null(nl_object_find(o, "missing"));
  nl_object_free(o);
}

static void secret_base64_and_type(void **state) {
  (void)state;
  bool imm = false;
  nl_object_t *o = decode(NL_OBJECT_SECRET,
                          "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"db\"},\"immutable\":true,"
                          "\"type\":\"Opaque\",\"data\":{\"password\":\"czNjcjN0\",\"empty\":\"\"}}",
                          &imm);
  assert_true(imm);
  assert_string_equal(o->type, "Opaque");
  const nl_object_item_t *p = nl_object_find(o, "password");
  assert_int_equal(p->len, 6);
  assert_memory_equal(p->value, "s3cr3t", 6);
  assert_int_equal(nl_object_find(o, "empty")->len, 0);
  nl_object_free(o);
  /* no data at all */
  o = decode(NL_OBJECT_SECRET, "{\"metadata\":{\"name\":\"x\"}}", NULL);
  assert_int_equal(o->n_items, 0);
  assert_string_equal(o->namespace_, "");
  nl_object_free(o);
}

static void bad_objects_are_errors(void **state) {
  (void)state;
  assert_string_equal(decode_err(NL_OBJECT_SECRET,
                                 "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"db\"},"
                                 "\"data\":{\"pw\":\"not base64!\"}}"),
                      "secret ns/db: data[\"pw\"]: illegal base64");
  assert_string_equal(decode_err(NL_OBJECT_CONFIG_MAP,
                                 "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"c\"},"
                                 "\"data\":{\"n\":1}}"),
                      "configmap ns/c: data[\"n\"]: not a string");
  assert_string_equal(decode_err(NL_OBJECT_CONFIG_MAP,
                                 "{\"metadata\":{\"name\":\"c\"},\"data\":[]}"),
                      "configmap /c: data: not an object");
  assert_string_equal(decode_err(NL_OBJECT_CONFIG_MAP, "{\"metadata\":{}}"),
                      "configmap: metadata.name: required");
  assert_string_equal(decode_err(NL_OBJECT_CONFIG_MAP, "{\"metadata\":{\"name\":7}}"),
                      "configmap: metadata: name: not a string");
  assert_non_null(strstr(decode_err(NL_OBJECT_SECRET, "[1"), "secret: not a JSON object"));
}

/* ---- the manager ---- */

typedef struct fx {
  uv_loop_t loop;
  nl_objects_t *m;
  int changed;
  char last[256];
  bool stopped;
} fx_t;

static void on_changed(nl_object_kind_t kind, const char *ns, const char *name, void *ctx) {
  fx_t *f = ctx;
  f->changed++;
  snprintf(f->last, sizeof f->last, "%s %s/%s", kind == NL_OBJECT_SECRET ? "secret" : "configmap",
           ns, name);
}

static fx_t *setup(nl_objects_strategy_t strategy, uint64_t ttl_ms) {
  fx_t *f = nl_xcalloc(1, sizeof *f);
  fake_reset();
  uv_loop_init(&f->loop);
  nl_objects_opts_t o = {.strategy = strategy, .cache_ttl_ms = ttl_ms, .changed = on_changed,
                         .changed_ctx = f};
  nl_err_t *err = NULL;
  assert_int_equal(nl_objects_new(&f->m, &f->loop, NULL, &o, &err), 0);
  return f;
}

static void on_stopped(void *ctx) { ((fx_t *)ctx)->stopped = true; }

static void teardown(fx_t *f) {
  nl_objects_stop(f->m, on_stopped, f);
  assert_false(f->stopped); /* never from inside the call */
  fake_settle();
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_true(f->stopped);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  fake_reset();
  free(f);
}

static nl_pod_t *pod(const char *uid, const char *spec) {
  char *json = nl_xasprintf("{\"metadata\":{\"namespace\":\"ns\",\"name\":\"p-%s\",\"uid\":\"%s\"},"
                            "\"spec\":%s}",
                            uid, uid, spec);
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode_api(json, strlen(json), &p, &err) < 0) fail_msg("pod: %s", nl_err_msg(err));
  free(json);
  return p;
}

#define ENV_POD                                                                               \
  "{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"env\":[{\"name\":\"A\",\"valueFrom\":" \
  "{\"configMapKeyRef\":{\"name\":\"app\",\"key\":\"k\"}}}],"                                 \
  "\"envFrom\":[{\"secretRef\":{\"name\":\"db\"}},{\"configMapRef\":{\"name\":\"app\"}}]}]}"

#define CM(name, data) \
  "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"" name "\"},\"data\":" data "}"

static int lookup(fx_t *f, nl_object_kind_t kind, const char *name, const nl_object_t **o,
                  char *msg) {
  nl_objects_lookup_t l = nl_objects_lookup(f->m);
  nl_err_t *err = NULL;
  int rc = l.fn(l.ctx, kind, "ns", name, o, &err);
  if (msg) strcpy(msg, rc < 0 ? nl_err_msg(err) : "");
  nl_err_free(&err);
  return rc;
}

static fake_req_t *find_req(const char *path_prefix, bool open) {
  for (size_t i = fake_nreqs; i-- > 0;)
    if (strncmp(fake_reqs[i]->path, path_prefix, strlen(path_prefix)) == 0 &&
        (!open || (!fake_reqs[i]->done && !fake_reqs[i]->cancelled)))
      return fake_reqs[i];
  return NULL;
}

static size_t open_reqs(void) {
  size_t n = 0;
  for (size_t i = 0; i < fake_nreqs; i++) n += !fake_reqs[i]->done && !fake_reqs[i]->cancelled;
  return n;
}

#define CM_LIST "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dapp"
#define SECRET_LIST "/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name%3Ddb"
#define CM_WATCH "/api/v1/namespaces/ns/configmaps?allowWatchBookmarks=true&fieldSelector=metadata.name%3Dapp"

static void watch_one_per_object(void **state) {
  (void)state;
  fx_t *f = setup(NL_OBJECTS_WATCH, 0);
  nl_pod_t *p1 = pod("u1", ENV_POD), *p2 = pod("u2", ENV_POD);
  nl_objects_register_pod(f->m, p1);
  nl_objects_register_pod(f->m, p2);
  nl_objects_register_pod(f->m, p1); /* an update with the same references */
  /* one list per object, whatever the number of pods */
  assert_int_equal(fake_nreqs, 2);
  assert_non_null(find_req(CM_LIST "&resourceVersion=0", true));
  assert_non_null(find_req(SECRET_LIST "&resourceVersion=0", true));
  const nl_object_t *o = NULL;
  char msg[256];
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, msg), -1);
  assert_string_equal(msg, "failed to sync configmaps cache: timed out waiting for the condition");
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "other", &o, msg), -1);
  assert_string_equal(msg, "object \"ns\"/\"other\" not registered");

  fake_respond(find_req(CM_LIST, true), 200,
               "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[" CM("app", "{\"k\":\"v1\"}") "]}");
  assert_int_equal(f->changed, 1);
  assert_string_equal(f->last, "configmap ns/app");
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 1);
  assert_string_equal((const char *)nl_object_find(o, "k")->value, "v1");
  /* the secret does not exist */
  fake_respond(find_req(SECRET_LIST, true), 200, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}");
  assert_int_equal(f->changed, 2);
  assert_int_equal(lookup(f, NL_OBJECT_SECRET, "db", &o, NULL), 0);

  /* the watch: a change, then the same content again (no callback), then a delete */
  fake_req_t *w = find_req(CM_WATCH "&resourceVersion=10", true);
  assert_non_null(w);
  fake_head(w, 200);
  fake_data(w, "{\"type\":\"MODIFIED\",\"object\":" CM("app", "{\"k\":\"v2\"}") "}\n");
  assert_int_equal(f->changed, 3);
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 1);
  assert_string_equal((const char *)nl_object_find(o, "k")->value, "v2");
  fake_data(w, "{\"type\":\"MODIFIED\",\"object\":" CM("app", "{\"k\":\"v2\"}") "}\n");
  assert_int_equal(f->changed, 3);
  fake_data(w, "{\"type\":\"DELETED\",\"object\":" CM("app", "{\"k\":\"v2\"}") "}\n");
  assert_int_equal(f->changed, 4);
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 0);

  /* the watches end with the last pod that references them */
  nl_objects_unregister_pod(f->m, "u1");
  assert_int_equal(open_reqs(), 2);
  nl_objects_unregister_pod(f->m, "u2");
  assert_int_equal(open_reqs(), 0);
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, msg), -1);
  assert_string_equal(msg, "object \"ns\"/\"app\" not registered");
  nl_pod_free(p1);
  nl_pod_free(p2);
  teardown(f);
}

static void watch_update_drops_old_references(void **state) {
  (void)state;
  fx_t *f = setup(NL_OBJECTS_WATCH, 0);
  nl_pod_t *p1 = pod("u1", ENV_POD);
  nl_pod_t *p1b = pod("u1", "{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],"
                            "\"imagePullSecrets\":[{\"name\":\"db\"}],"
                            "\"volumes\":[{\"name\":\"v\",\"projected\":{\"sources\":[{\"configMap\":"
                            "{\"name\":\"root-ca\"}}]}}]}");
  nl_objects_register_pod(f->m, p1);
  assert_int_equal(fake_nreqs, 2);
  nl_objects_register_pod(f->m, p1b);
  /* the secret is kept (no new list), app dropped, root-ca added */
  assert_int_equal(fake_nreqs, 3);
  assert_int_equal(open_reqs(), 2);
  assert_non_null(find_req(SECRET_LIST, true));
  assert_non_null(find_req("/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Droot-ca", true));
  nl_pod_free(p1);
  nl_pod_free(p1b);
  teardown(f);
}

static void watch_stops_for_immutable(void **state) {
  (void)state;
  fx_t *f = setup(NL_OBJECTS_WATCH, 0);
  nl_pod_t *p = pod("u1", "{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],\"volumes\":"
                          "[{\"name\":\"v\",\"configMap\":{\"name\":\"app\"}}]}");
  nl_objects_register_pod(f->m, p);
  fake_respond(find_req(CM_LIST, true), 200,
               "{\"metadata\":{\"resourceVersion\":\"3\"},\"items\":[{\"metadata\":{\"namespace\":"
               "\"ns\",\"name\":\"app\"},\"immutable\":true,\"data\":{\"k\":\"v\"}}]}");
  assert_int_equal(f->changed, 1);
  assert_int_equal(open_reqs(), 0); /* no watch */
  const nl_object_t *o;
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 1);
  nl_objects_unregister_pod(f->m, "u1");
  nl_pod_free(p);
  teardown(f);
}

/* The changed callback may drop the pods that hold the object. */
static void unregister_from_callback(nl_object_kind_t kind, const char *ns, const char *name,
                                     void *ctx) {
  fx_t *f = ctx;
  on_changed(kind, ns, name, ctx);
  nl_objects_unregister_pod(f->m, "u1");
}

static void callback_may_unregister(void **state) {
  (void)state;
  fx_t *f = nl_xcalloc(1, sizeof *f);
  fake_reset();
  uv_loop_init(&f->loop);
  nl_objects_opts_t o = {.changed = unregister_from_callback, .changed_ctx = f};
  assert_int_equal(nl_objects_new(&f->m, &f->loop, NULL, &o, NULL), 0);
  nl_pod_t *p = pod("u1", ENV_POD);
  nl_objects_register_pod(f->m, p);
  fake_respond(find_req(CM_LIST, true), 200,
               "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[" CM("app", "{}") "]}");
  assert_int_equal(f->changed, 1);
  assert_int_equal(open_reqs(), 0);
  nl_pod_free(p);
  teardown(f);
}

#define CM_GET "/api/v1/namespaces/ns/configmaps/app"

/* Past max_watches (the connection's streams are few), objects are fetched as
 * with Cache; a watch that ends goes to one of them. */
static void watch_budget(void **state) {
  (void)state;
  fx_t *f = nl_xcalloc(1, sizeof *f);
  fake_reset();
  uv_loop_init(&f->loop);
  nl_objects_opts_t o = {.max_watches = 1, .changed = on_changed, .changed_ctx = f};
  assert_int_equal(nl_objects_new(&f->m, &f->loop, NULL, &o, NULL), 0);
  nl_pod_t *a = pod("u1", "{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],"
                          "\"imagePullSecrets\":[{\"name\":\"first\"}]}");
  nl_pod_t *b = pod("u2", "{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],"
                          "\"imagePullSecrets\":[{\"name\":\"db\"}]}");
  nl_objects_register_pod(f->m, a);
  nl_objects_register_pod(f->m, b);
  assert_int_equal(fake_nreqs, 2);
  assert_non_null(find_req("/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name%3Dfirst", true));
  fake_req_t *g = find_req("/api/v1/namespaces/ns/secrets/db", true);
  assert_non_null(g);
  fake_respond(g, 200, "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"db\"}}");
  assert_int_equal(f->changed, 1);
  const nl_object_t *obj;
  assert_int_equal(lookup(f, NL_OBJECT_SECRET, "db", &obj, NULL), 1);
  assert_int_equal(fake_nreqs, 2); /* fresh for the TTL */
  nl_objects_unregister_pod(f->m, "u1");
  assert_non_null(find_req(SECRET_LIST, true)); /* db is watched now */
  assert_int_equal(open_reqs(), 1);
  nl_pod_free(a);
  nl_pod_free(b);
  teardown(f);
}

static void get_strategy(void **state) {
  (void)state;
  fx_t *f = setup(NL_OBJECTS_GET, 0);
  nl_pod_t *p = pod("u1", ENV_POD);
  nl_objects_register_pod(f->m, p);
  assert_int_equal(fake_nreqs, 2);
  fake_req_t *g = find_req(CM_GET, true);
  assert_non_null(g);
  assert_string_equal(g->method, "GET");
  const nl_object_t *o;
  char msg[256];
  /* not answered yet: a lookup waits for it, asking nothing more */
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, msg), -1);
  assert_int_equal(fake_nreqs, 2);
  fake_respond(g, 200, CM("app", "{\"k\":\"v\"}"));
  assert_int_equal(f->changed, 1);
  /* every lookup asks again; the copy answers meanwhile */
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 1);
  assert_int_equal(fake_nreqs, 3);
  fake_respond(find_req(CM_GET, true), 404,
               "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\"}");
  assert_int_equal(f->changed, 2);
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 0);
  assert_int_equal(fake_nreqs, 4);
  /* a refusal keeps the copy */
  fake_respond(find_req(CM_GET, true), 403,
               "{\"kind\":\"Status\",\"code\":403,\"message\":\"forbidden\"}");
  assert_int_equal(f->changed, 2);
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 0);
  /* the secret was refused before anything was known: the lookup says why */
  fake_respond(find_req("/api/v1/namespaces/ns/secrets/db", true), 403,
               "{\"kind\":\"Status\",\"code\":403,\"message\":\"secrets \\\"db\\\" is forbidden\"}");
  assert_int_equal(lookup(f, NL_OBJECT_SECRET, "db", &o, msg), -1);
  assert_string_equal(msg, "failed to sync secrets cache: secrets \"db\" is forbidden");
  nl_objects_unregister_pod(f->m, "u1");
  assert_int_equal(open_reqs(), 0);
  nl_pod_free(p);
  teardown(f);
}

static void run_for(fx_t *f, uint64_t ms) { fake_run_for(&f->loop, ms); }

static void cache_strategy_ttl(void **state) {
  (void)state;
  fx_t *f = setup(NL_OBJECTS_CACHE, 50);
  nl_pod_t *p = pod("u1", "{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],\"volumes\":"
                          "[{\"name\":\"v\",\"configMap\":{\"name\":\"app\"}}]}");
  nl_objects_register_pod(f->m, p);
  assert_int_equal(fake_nreqs, 1);
  fake_respond(fake_reqs[0], 200, CM("app", "{\"k\":\"v\"}"));
  const nl_object_t *o;
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 1);
  assert_int_equal(fake_nreqs, 1); /* fresh: no request */
  run_for(f, 80);
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 1);
  assert_int_equal(fake_nreqs, 2); /* older than the TTL */
  fake_respond(fake_reqs[1], 200, CM("app", "{\"k\":\"v\"}"));
  assert_int_equal(f->changed, 1); /* the same content */
  /* a pod registering it again makes the next lookup fetch it */
  nl_objects_register_pod(f->m, p);
  assert_int_equal(fake_nreqs, 2);
  assert_int_equal(lookup(f, NL_OBJECT_CONFIG_MAP, "app", &o, NULL), 1);
  assert_int_equal(fake_nreqs, 3);
  nl_pod_free(p);
  teardown(f); /* with the GET in flight */
}

static void refs_are_deduplicated_per_pod(void **state) {
  (void)state;
  fx_t *f = setup(NL_OBJECTS_GET, 0);
  nl_pod_t *p = pod("u1", "{\"initContainers\":[{\"name\":\"i\",\"image\":\"i\",\"envFrom\":"
                          "[{\"configMapRef\":{\"name\":\"app\"}}]}],"
                          "\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"envFrom\":"
                          "[{\"configMapRef\":{\"name\":\"app\"}},{\"secretRef\":{\"name\":\"app\"}}]}],"
                          "\"volumes\":[{\"name\":\"v\",\"secret\":{\"secretName\":\"app\"}}]}");
  nl_objects_register_pod(f->m, p);
  assert_int_equal(fake_nreqs, 2);
  assert_non_null(find_req("/api/v1/namespaces/ns/secrets/app", true));
  assert_non_null(find_req(CM_GET, true));
  nl_pod_free(p);
  teardown(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(configmap_data_and_binary_data),
      cmocka_unit_test(secret_base64_and_type),
      cmocka_unit_test(bad_objects_are_errors),
      cmocka_unit_test(watch_one_per_object),
      cmocka_unit_test(watch_update_drops_old_references),
      cmocka_unit_test(watch_stops_for_immutable),
      cmocka_unit_test(callback_may_unregister),
      cmocka_unit_test(watch_budget),
      cmocka_unit_test(get_strategy),
      cmocka_unit_test(cache_strategy_ttl),
      cmocka_unit_test(refs_are_deduplicated_per_pod),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
