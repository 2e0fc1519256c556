/* The environment from ConfigMaps and Secrets (makeEnvironmentVariables):
 * valueFrom configMapKeyRef/secretKeyRef and envFrom with a prefix, through a
 * fake lookup; optional objects and keys; upstream's error texts; envFrom keys
 * that can be no variable skipped with an event; binaryData never in env. */
#include "rt_test_util.h"

#include <stdio.h>

#include "managers/events.h"
#include "managers/objects.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

typedef struct fake_store {
  nl_object_t *objs[4];
  size_t n;
  int calls;
  bool unsynced; /* every lookup fails as a manager that has not fetched yet */
  char events[512];
} fake_store_t;

static int fake_lookup(void *ctx, nl_object_kind_t kind, const char *ns, const char *name,
                       const nl_object_t **out, nl_err_t **err) {
  fake_store_t *s = ctx;
  s->calls++;
  if (s->unsynced) return nl_err_set(err, NL_EINVAL, "failed to sync %s cache: timed out waiting "
                                     "for the condition", nl_object_resource(kind));
  for (size_t i = 0; i < s->n; i++)
    if (s->objs[i]->kind == kind && !strcmp(s->objs[i]->namespace_, ns) &&
        !strcmp(s->objs[i]->name, name)) {
      *out = s->objs[i];
      return 1;
    }
  return 0;
}

static void fake_event(void *ctx, const nl_event_ref_t *obj, const nl_kvlist_t *annotations,
                       const char *type, const char *reason, const char *message) {
  (void)annotations;
  fake_store_t *s = ctx;
  snprintf(s->events + strlen(s->events), sizeof s->events - strlen(s->events), "%s %s %s: %s\n",
           obj->name, type, reason, message);
}

static void add(fake_store_t *s, nl_object_kind_t kind, const char *json) {
  bool imm;
  nl_err_t *err = NULL;
  if (nl_object_decode(kind, json, strlen(json), &s->objs[s->n++], &imm, &err) < 0)
    fail_msg("%s", nl_err_msg(err));
}

static fake_store_t *store(void) {
  fake_store_t *s = calloc(1, sizeof *s);
  add(s, NL_OBJECT_CONFIG_MAP,
      "{\"metadata\":{\"namespace\":\"nsx\",\"name\":\"app\"},\"data\":{\"MODE\":\"fast\","
      "\"level\":\"3\",\"1st.key\":\"x\",\"a=b\":\"y\",\"caf\\u00e9\":\"z\"},\"binaryData\":{\"BLOB\":\"AAE=\"}}");
  add(s, NL_OBJECT_SECRET,
      "{\"metadata\":{\"namespace\":\"nsx\",\"name\":\"db\"},\"data\":{\"PASSWORD\":\"czNjcjN0\"}}");
  return s;
}

static void store_free(fake_store_t *s) {
  for (size_t i = 0; i < s->n; i++) nl_object_free(s->objs[i]);
  free(s);
}

/* The values read from env files (fileKeyRef) for env_of. */
static const nl_env_t *g_files;
static size_t g_n_files;

/* "NAME=value\n" lines of the environment, or "error: <message>" */
static char *env_of(fake_store_t *s, const char *containers) {
  char *yaml = nl_xasprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, "
                            "uid: u}\nspec:\n  containers: [%s]\n",
                            containers);
  nl_pod_t *pod = pod_from_yaml(yaml);
  free(yaml);
  nl_runtime_opts_t o = test_opts();
  if (s) {
    o.objects = (nl_objects_lookup_t){fake_lookup, s};
    o.events = (nl_event_sink_t){fake_event, s};
  }
  nl_env_t *env = NULL;
  size_t n = 0;
  nl_err_t *err = NULL;
  char *out;
  if (nl_runtime_make_env(&o, pod, &pod->spec.containers[0], NULL, NULL, 0, g_files, g_n_files, &env,
                          &n, &err) < 0) {
    out = nl_xasprintf("error: %s", nl_err_msg(err));
    nl_err_free(&err);
  } else {
    nl_buf_t b = NL_BUF_INIT;
    for (size_t i = 0; i < n; i++) nl_buf_printf(&b, "%s=%s\n", env[i].name, env[i].value);
    out = b.data ? nl_buf_steal(&b) : nl_xstrdup("");
    nl_env_free(env, n);
  }
  nl_pod_free(pod);
  return out;
}

#define CHECK(s, containers, want)            \
  do {                                        \
    char *got_ = env_of(s, containers);       \
    assert_string_equal(got_, want);          \
    free(got_);                               \
  } while (0)

/* fileKeyRef: the values read before (EnvFiles), a later $(VAR) sees them, a
 * variable not read (an optional key the file lacks) is not set. */
static void value_from_files(void **state) {
  (void)state;
  nl_env_t files[] = {{"A", "one"}, {"B", "two words"}};
  g_files = files;
  g_n_files = 2;
  CHECK(NULL,
        "{name: c, image: b, env: ["
        "{name: A, valueFrom: {fileKeyRef: {volumeName: cfg, path: f.env, key: A}}},"
        "{name: B, valueFrom: {fileKeyRef: {volumeName: cfg, path: f.env, key: BEE}}},"
        "{name: O, valueFrom: {fileKeyRef: {volumeName: cfg, path: f.env, key: O, optional: true}}},"
        "{name: AB, value: '$(A)/$(B)'}]}",
        "A=one\nB=two words\nAB=one/two words\n");
  g_files = NULL;
  g_n_files = 0;
}

static void value_from_keys(void **state) {
  (void)state;
  fake_store_t *s = store();
  CHECK(s,
        "{name: c, image: b, env: ["
        "{name: M, valueFrom: {configMapKeyRef: {name: app, key: MODE}}},"
        "{name: P, valueFrom: {secretKeyRef: {name: db, key: PASSWORD}}},"
        "{name: BOTH, value: '$(M)-$(P)'}]}",
        "M=fast\nP=s3cr3t\nBOTH=fast-s3cr3t\n");
  store_free(s);
}

static void env_from_with_prefix(void **state) {
  (void)state;
  fake_store_t *s = store();
  /* env overrides envFrom; the later envFrom wins; $(VAR) sees envFrom; a key
   * that is no C identifier is a variable (relaxed validation) */
  CHECK(s,
        "{name: c, image: b, envFrom: [{configMapRef: {name: app}}, "
        "{prefix: DB_, secretRef: {name: db}}],"
        " env: [{name: MODE, value: 'slow $(DB_PASSWORD)'}]}",
        "1st.key=x\nMODE=slow s3cr3t\nlevel=3\nDB_PASSWORD=s3cr3t\n");
  /* keys that can be no variable ('=', not ASCII) are skipped, with an event;
   * binaryData is not env */
  assert_string_equal(s->events,
                      "p Warning InvalidEnvironmentVariableNames: Keys [a=b, caf\xc3\xa9] from the "
                      "EnvFrom configMap nsx/app were skipped since they are considered invalid "
                      "environment variable names.\n");
  s->events[0] = 0;
  CHECK(s, "{name: c, image: b, envFrom: [{prefix: X_, configMapRef: {name: app}}]}",
        "X_1st.key=x\nX_MODE=fast\nX_level=3\n");
  assert_string_equal(s->events,
                      "p Warning InvalidEnvironmentVariableNames: Keys [X_a=b, X_caf\xc3\xa9] from the "
                      "EnvFrom configMap nsx/app were skipped since they are considered invalid "
                      "environment variable names.\n");
  store_free(s);
}

static void missing_and_optional(void **state) {
  (void)state;
  fake_store_t *s = store();
  CHECK(s, "{name: c, image: b, env: [{name: X, valueFrom: {configMapKeyRef: {name: app, key: nope}}}]}",
        "error: couldn't find key nope in ConfigMap nsx/app");
  CHECK(s, "{name: c, image: b, env: [{name: X, valueFrom: {secretKeyRef: {name: db, key: nope}}}]}",
        "error: couldn't find key nope in Secret nsx/db");
  /* binaryData is no key for the environment */
  CHECK(s, "{name: c, image: b, env: [{name: X, valueFrom: {configMapKeyRef: {name: app, key: BLOB}}}]}",
        "error: couldn't find key BLOB in ConfigMap nsx/app");
  CHECK(s, "{name: c, image: b, env: [{name: X, valueFrom: {configMapKeyRef: {name: gone, key: k}}}]}",
        "error: configmaps \"gone\" not found");
  CHECK(s, "{name: c, image: b, envFrom: [{secretRef: {name: gone}}]}",
        "error: secrets \"gone\" not found");
  CHECK(s,
        "{name: c, image: b, envFrom: [{secretRef: {name: gone, optional: true}}], env: ["
        "{name: X, valueFrom: {configMapKeyRef: {name: app, key: nope, optional: true}}},"
        "{name: V, valueFrom: {secretKeyRef: {name: gone, key: k, optional: true}}},"
        "{name: Z, value: z}]}",
        "Z=z\n");
  /* an object not fetched yet fails, optional or not: the sync retries */
  s->unsynced = true;
  CHECK(s, "{name: c, image: b, envFrom: [{configMapRef: {name: app, optional: true}}]}",
        "error: failed to sync configmaps cache: timed out waiting for the condition");
  store_free(s);
}

static void standalone(void **state) {
  (void)state;
  CHECK(NULL, "{name: c, image: b, envFrom: [{secretRef: {name: db}}]}",
        "error: couldn't get secret nsx/db, no kubeClient defined");
  CHECK(NULL, "{name: c, image: b, envFrom: [{secretRef: {name: db, optional: true}}], env: [{name: A, value: a}]}",
        "A=a\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(value_from_keys),
      cmocka_unit_test(value_from_files),
      cmocka_unit_test(env_from_with_prefix),
      cmocka_unit_test(missing_and_optional),
      cmocka_unit_test(standalone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
