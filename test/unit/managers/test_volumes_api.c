/* The payloads of configMap, secret, downwardAPI and projected volumes against
 * a fake object lookup and a fake token source: items, defaultMode, mode,
 * optional, upstream's errors, the kube-api-access volume of a default pod;
 * then written by nl__volumes_setup_sync under a temporary root. */
#include "rt_test_util.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "managers/volumes_api.h"
#include "reactor/xalloc.h"

/* Objects: ConfigMap ns/app {a: "1", b: "2"}, Secret ns/creds {user: "admin"},
 * ConfigMap ns/kube-root-ca.crt {ca.crt}; ConfigMap ns/pending is not fetched yet. */
static const nl_object_item_t app_items[] = {{"a", (const unsigned char *)"1", 1},
                                             {"b", (const unsigned char *)"2", 1}};
static const nl_object_item_t creds_items[] = {{"user", (const unsigned char *)"admin", 5}};
static const nl_object_item_t ca_items[] = {{"ca.crt", (const unsigned char *)"PEM", 3}};
static const nl_object_t objs[] = {
    {NL_OBJECT_CONFIG_MAP, "ns", "app", NULL, app_items, 2},
    {NL_OBJECT_SECRET, "ns", "creds", "Opaque", creds_items, 1},
    {NL_OBJECT_CONFIG_MAP, "ns", "kube-root-ca.crt", NULL, ca_items, 1},
};

static int fake_lookup(void *ctx, nl_object_kind_t kind, const char *ns, const char *name,
                       const nl_object_t **out, nl_err_t **err) {
  (void)ctx;
  if (strcmp(name, "pending") == 0)
    return nl_err_set(err, NL_EINVAL, "configmap \"pending\" not registered");
  for (size_t i = 0; i < sizeof objs / sizeof *objs; i++)
    if (objs[i].kind == kind && !strcmp(objs[i].namespace_, ns) && !strcmp(objs[i].name, name)) {
      *out = &objs[i];
      return 1;
    }
  return 0;
}

static int tokens_asked;

static int fake_token(void *ctx, const nl_pod_t *pod, const nl_sa_token_projection_t *p,
                      const char **token, nl_err_t **err) {
  (void)ctx;
  (void)err;
  tokens_asked++;
  assert_string_equal(pod->metadata.uid, "uid1");
  assert_int_equal(p->expiration_seconds, 3607);
  *token = "eyJtoken";
  return 0;
}

static nl_runtime_opts_t opts_with_fakes(void) {
  nl_runtime_opts_t o = test_opts();
  o.objects = (nl_objects_lookup_t){fake_lookup, NULL};
  o.tokens = (nl_tokens_source_t){.lookup = fake_token};
  return o;
}

static nl_pod_t *vpod(const char *extra_spec, const char *volumes) {
  char *y = nl_xasprintf(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: uid1, labels: {app: web}}\n"
      "spec:\n%s  volumes:\n%s  containers:\n  - name: c\n    image: b\n"
      "    resources: {limits: {memory: 64Mi}}\n",
      extra_spec, volumes);
  nl_pod_t *p = pod_from_yaml(y);
  free(y);
  return p;
}

static const nl_aw_file_t *file(const nl_api_volume_t *v, const char *path) {
  for (size_t i = 0; i < v->n_files; i++)
    if (strcmp(v->files[i].path, path) == 0) return &v->files[i];
  return NULL;
}

static void assert_content(const nl_api_volume_t *v, const char *path, const char *data,
                           uint32_t mode) {
  const nl_aw_file_t *f = file(v, path);
  assert_non_null(f);
  assert_int_equal(f->len, strlen(data));
  assert_memory_equal(f->data, data, f->len);
  assert_int_equal(f->mode, mode);
}

static void test_config_map_and_secret(void **state) {
  (void)state;
  nl_runtime_opts_t o = opts_with_fakes();
  nl_pod_t *p = vpod("", "  - {name: all, configMap: {name: app, defaultMode: 0400}}\n"
                         "  - name: some\n    configMap:\n      name: app\n      items:\n"
                         "      - {key: b, path: dir/bee, mode: 0600}\n"
                         "  - {name: s, secret: {secretName: creds}}\n"
                         "  - {name: opt, secret: {secretName: gone, optional: true}}\n");
  nl_api_volumes_t api = {0};
  nl_err_t *err = NULL;
  assert_int_equal(nl_volumes_api_resolve(&o, p, &api, &err), 0);
  assert_int_equal(api.n, 4);
  assert_int_equal(api.fs_group, -1);
  assert_int_equal(api.v[0].n_files, 2);
  assert_content(&api.v[0], "a", "1", 0400);
  assert_content(&api.v[0], "b", "2", 0400);
  assert_int_equal(api.v[1].n_files, 1); /* only the items */
  assert_content(&api.v[1], "dir/bee", "2", 0600);
  assert_content(&api.v[2], "user", "admin", 0644); /* the default defaultMode */
  assert_int_equal(api.v[3].n_files, 0);             /* optional and missing: empty */
  nl_api_volumes_free(&api);
  nl_pod_free(p);
}

static void expect_error(const char *volumes, const char *msg) {
  nl_runtime_opts_t o = opts_with_fakes();
  nl_pod_t *p = vpod("", volumes);
  nl_api_volumes_t api = {0};
  nl_err_t *err = NULL;
  assert_int_equal(nl_volumes_api_resolve(&o, p, &api, &err), -1);
  assert_string_equal(err->msg, msg);
  nl_err_free(&err);
  nl_api_volumes_free(&api);
  nl_pod_free(p);
}

static void test_errors(void **state) {
  (void)state;
  expect_error("  - {name: cfg, configMap: {name: nope}}\n",
               "MountVolume.SetUp failed for volume \"cfg\" : configmap \"nope\" not found");
  expect_error("  - {name: s, secret: {secretName: nope}}\n",
               "MountVolume.SetUp failed for volume \"s\" : secret \"nope\" not found");
  expect_error("  - name: cfg\n    configMap: {name: app, items: [{key: z, path: z}]}\n",
               "MountVolume.SetUp failed for volume \"cfg\" : configmap references non-existent "
               "config key: z");
  expect_error("  - name: s\n    secret: {secretName: creds, items: [{key: z, path: z}]}\n",
               "MountVolume.SetUp failed for volume \"s\" : references non-existent secret key: z");
  expect_error("  - {name: cfg, configMap: {name: pending}}\n",
               "MountVolume.SetUp failed for volume \"cfg\" : configmap \"pending\" not registered");
  /* projected: every source's error, aggregated */
  expect_error("  - name: pr\n    projected:\n      sources:\n"
               "      - configMap: {name: nope}\n      - secret: {name: nope2}\n",
               "MountVolume.SetUp failed for volume \"pr\" : [configmap \"nope\" not found, "
               "secret \"nope2\" not found]");
  /* an optional object's missing key is skipped; a required key of it is not */
  nl_runtime_opts_t o = opts_with_fakes();
  nl_pod_t *p = vpod("", "  - name: cfg\n    configMap:\n      name: app\n      optional: true\n"
                         "      items: [{key: z, path: z}, {key: a, path: x}]\n");
  nl_api_volumes_t api = {0};
  nl_err_t *err = NULL;
  assert_int_equal(nl_volumes_api_resolve(&o, p, &api, &err), 0);
  assert_int_equal(api.v[0].n_files, 1);
  assert_content(&api.v[0], "x", "1", 0644);
  nl_api_volumes_free(&api);
  nl_pod_free(p);
  /* without an API server */
  o.objects.fn = NULL;
  p = vpod("", "  - {name: cfg, configMap: {name: app}}\n");
  assert_int_equal(nl_volumes_api_resolve(&o, p, &api, &err), -1);
  assert_non_null(strstr(err->msg, "no API server objects on this node"));
  nl_err_free(&err);
  nl_api_volumes_free(&api);
  nl_pod_free(p);
}

static void test_downward_api(void **state) {
  (void)state;
  nl_runtime_opts_t o = opts_with_fakes();
  nl_pod_t *p = vpod("", "  - name: info\n    downwardAPI:\n      defaultMode: 0440\n      items:\n"
                         "      - {path: name, fieldRef: {fieldPath: metadata.name}}\n"
                         "      - {path: labels, fieldRef: {fieldPath: metadata.labels}, mode: 0400}\n"
                         "      - path: mem\n        resourceFieldRef: {containerName: c, "
                         "resource: limits.memory, divisor: 1Mi}\n");
  nl_api_volumes_t api = {0};
  nl_err_t *err = NULL;
  assert_int_equal(nl_volumes_api_resolve(&o, p, &api, &err), 0);
  assert_content(&api.v[0], "name", "p", 0440);
  assert_content(&api.v[0], "labels", "app=\"web\"", 0400);
  assert_content(&api.v[0], "mem", "64", 0440);
  nl_api_volumes_free(&api);
  nl_pod_free(p);
}

/* What the ServiceAccount admission plugin adds to a pod made by kubectl run. */
static const char *kube_api_access =
    "  - name: kube-api-access-x1\n    projected:\n      defaultMode: 420\n      sources:\n"
    "      - serviceAccountToken: {expirationSeconds: 3607, path: token}\n"
    "      - configMap:\n          name: kube-root-ca.crt\n"
    "          items: [{key: ca.crt, path: ca.crt}]\n"
    "      - downwardAPI:\n          items:\n"
    "          - {path: namespace, fieldRef: {apiVersion: v1, fieldPath: metadata.namespace}}\n";

static void test_projected_kube_api_access(void **state) {
  (void)state;
  nl_runtime_opts_t o = opts_with_fakes();
  nl_pod_t *p = vpod("", kube_api_access);
  assert_true(nl_volumes_api_wants_tokens(p));
  nl_api_volumes_t api = {0};
  nl_err_t *err = NULL;
  tokens_asked = 0;
  assert_int_equal(nl_volumes_api_resolve(&o, p, &api, &err), 0);
  assert_int_equal(tokens_asked, 1);
  assert_int_equal(api.v[0].n_files, 3);
  assert_content(&api.v[0], "token", "eyJtoken", 0644);
  assert_content(&api.v[0], "ca.crt", "PEM", 0644);
  assert_content(&api.v[0], "namespace", "ns", 0644);
  nl_api_volumes_free(&api);
  nl_pod_free(p);
  /* with an fsGroup the token is 0600 (the ownership pass adds group read) */
  p = vpod("  securityContext: {fsGroup: 2000}\n", kube_api_access);
  assert_int_equal(nl_volumes_api_resolve(&o, p, &api, &err), 0);
  assert_int_equal(api.fs_group, 2000);
  assert_content(&api.v[0], "token", "eyJtoken", 0600);
  assert_content(&api.v[0], "ca.crt", "PEM", 0644);
  nl_api_volumes_free(&api);
  nl_pod_free(p);
  /* no token source (standalone): the volume fails */
  o.tokens.lookup = NULL;
  p = vpod("", kube_api_access);
  assert_int_equal(nl_volumes_api_resolve(&o, p, &api, &err), -1);
  assert_non_null(strstr(err->msg, "cannot get a service account token: no API server"));
  nl_err_free(&err);
  nl_api_volumes_free(&api);
  nl_pod_free(p);
}

/* Resolved, then written under a root: the directories upstream uses. */
static void test_written(void **state) {
  (void)state;
  char root[64];
  snprintf(root, sizeof root, "/tmp/nanolet-volapi-test-XXXXXX");
  assert_non_null(mkdtemp(root));
  nl_runtime_opts_t o = opts_with_fakes();
  nl_pod_t *p = vpod("", "  - {name: cfg, configMap: {name: app, items: [{key: a, path: a}]}}\n");
  nl_api_volumes_t api = {0};
  nl_err_t *err = NULL;
  assert_int_equal(nl_volumes_api_resolve(&o, p, &api, &err), 0);
  assert_int_equal(nl__volumes_setup_sync(root, p, &api, &err), 0);
  assert_true(api.changed);
  char *f = nl_xasprintf("%s/pods/uid1/volumes/kubernetes.io~configmap/cfg/a", root);
  FILE *fp = fopen(f, "r");
  assert_non_null(fp);
  char buf[8] = "";
  assert_non_null(fgets(buf, sizeof buf, fp));
  fclose(fp);
  assert_string_equal(buf, "1");
  /* the volume's root is 0777 (upstream's wrapped emptyDir): a user that is
   * not root, with no fsGroup, reaches the files */
  struct stat st;
  char *d = nl_xasprintf("%s/pods/uid1/volumes/kubernetes.io~configmap/cfg", root);
  assert_int_equal(stat(d, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0777);
  free(d);
  bool ro = false;
  char *h = nl_volumes_host_path(root, p, "cfg", &ro, &err);
  assert_true(ro); /* API volumes are mounted read-only */
  assert_non_null(strstr(h, "/volumes/kubernetes.io~configmap/cfg"));
  free(h);
  /* a second sync writes nothing */
  api.changed = false;
  assert_int_equal(nl__volumes_setup_sync(root, p, &api, &err), 0);
  assert_false(api.changed);
  free(f);
  nl_api_volumes_free(&api);
  nl_pod_free(p);
  assert_int_equal(nl__volumes_teardown_sync(root, "uid1", &err), 0);
  char *cmd = nl_xasprintf("rm -rf '%s'", root);
  assert_int_equal(system(cmd), 0);
  free(cmd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_map_and_secret),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_downward_api),
      cmocka_unit_test(test_projected_kube_api_access),
      cmocka_unit_test(test_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
