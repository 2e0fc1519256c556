/* Pod user namespaces: getsubids' output, the range's checks, the allocator,
 * the pod directory's file, reading them back at start, and what the sandbox
 * and container configs carry (or why they are refused). */
#include "rt_test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "managers/userns.h"
#include "reactor/fs.h"
#include "reactor/xalloc.h"

static int parse(const char *s, uint32_t *a, uint32_t *b, char **msg) {
  nl_err_t *err = NULL;
  int r = nl_userns_parse_getsubids(s, strlen(s), a, b, &err);
  if (msg) *msg = err ? nl_xstrdup(err->msg) : NULL;
  nl_err_free(&err);
  return r;
}

static void test_getsubids_output(void **state) {
  (void)state;
  uint32_t a = 0, b = 0;
  assert_int_equal(parse("0: kubelet 65536 2147483648\n", &a, &b, NULL), 0);
  assert_int_equal(a, 65536);
  assert_int_equal(b, 2147483648u);
  assert_int_equal(parse("\n\n0:\tkubelet   1073741824 67108864", &a, &b, NULL), 0);
  assert_int_equal(a, 1073741824u);
  assert_int_equal(b, 67108864u);
  char *msg;
  /* two ranges: upstream takes one only */
  assert_int_equal(parse("0: kubelet 65536 65536\n1: kubelet 262144 65536\n", &a, &b, &msg), -1);
  assert_non_null(strstr(msg, "it must contain only one line"));
  free(msg);
  const char *bad[] = {"", "\n", "0: kubelet 65536", "0: kubelet 65536 65536 x", "0: kubelet -1 65536",
                       "0: kubelet 65536 4294967296", "0: kubelet +65536 65536",
                       "0: kubelet 0x10000 65536", "0: kubelet 65536 6553a"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(parse(bad[i], &a, &b, &msg), -1);
    assert_non_null(msg);
    free(msg);
  }
}

static char *init_err(uint32_t first, uint32_t count, uint32_t ids, int32_t max_pods) {
  nl_userns_t m;
  nl_err_t *err = NULL;
  if (nl_userns_init(&m, first, count, ids, max_pods, &err) == 0) {
    nl_userns_free(&m);
    return NULL;
  }
  char *s = nl_xstrdup(err->msg);
  nl_err_free(&err);
  return s;
}

static void expect_init_err(uint32_t first, uint32_t count, uint32_t ids, int32_t max_pods,
                            const char *want) {
  char *e = init_err(first, count, ids, max_pods);
  assert_non_null(e);
  if (!strstr(e, want)) fail_msg("want %s, got %s", want, e);
  free(e);
}

static void test_range_checks(void **state) {
  (void)state;
  uint32_t first, count;
  nl_userns_default_range(65536, &first, &count);
  assert_int_equal(first, 65536);
  assert_int_equal(count, 4294901760u); /* 2^32 - 65536: 65535 slots */
  assert_null(init_err(first, count, 65536, 110));
  nl_userns_default_range(131072, &first, &count);
  assert_null(init_err(first, count, 131072, 110));
  assert_null(init_err(1073741824u, 110 * 65536, 65536, 110));
  expect_init_err(65536, 65536 * 10, 65537, 1, "is not a multiple of 65536");
  expect_init_err(65536 + 1, 65536 * 10, 65536, 1, "is not a multiple of 65536");
  expect_init_err(0, 65536 * 10, 65536, 1, "must be greater or equal to 65536");
  expect_init_err(65536, 65536 * 10 + 5, 65536, 1, "length 655365 is not a multiple");
  expect_init_err(1073741824u, 109 * 65536, 65536, 110, "not enough to support 110 pods");
}

static void test_allocate_no_overlap(void **state) {
  (void)state;
  nl_userns_t m;
  nl_err_t *err = NULL;
  const uint32_t first = 1073741824u, slots = 8;
  assert_int_equal(nl_userns_init(&m, first, slots * 65536, 65536, 8, &err), 0);
  uint32_t got[8];
  char uid[16];
  for (uint32_t i = 0; i < slots; i++) {
    snprintf(uid, sizeof uid, "pod-%u", i);
    bool fresh;
    assert_int_equal(nl_userns_allocate(&m, uid, &got[i], &fresh, &err), 0);
    assert_true(fresh);
    assert_true(got[i] >= first && got[i] + 65536ull <= first + slots * 65536ull);
    assert_int_equal(got[i] % 65536, 0);
    for (uint32_t j = 0; j < i; j++) assert_int_not_equal(got[i], got[j]);
    /* a second ask gets the same */
    uint32_t again;
    assert_int_equal(nl_userns_allocate(&m, uid, &again, &fresh, &err), 0);
    assert_false(fresh);
    assert_int_equal(again, got[i]);
  }
  uint32_t h;
  bool fresh;
  assert_int_equal(nl_userns_allocate(&m, "one-too-many", &h, &fresh, &err), -1);
  assert_string_equal(err->msg, "could not find an empty slot to allocate a user namespace");
  nl_err_free(&err);
  /* a released slot is the only free one: the next pod gets it */
  assert_true(nl_userns_release(&m, "pod-3"));
  assert_false(nl_userns_release(&m, "pod-3"));
  assert_false(nl_userns_get(&m, "pod-3", &h));
  assert_int_equal(nl_userns_allocate(&m, "new", &h, &fresh, &err), 0);
  assert_int_equal(h, got[3]);
  assert_int_equal(nl_userns_count(&m), 8);
  nl_userns_free(&m);
}

static void test_record(void **state) {
  (void)state;
  nl_userns_t m;
  nl_err_t *err = NULL;
  assert_int_equal(nl_userns_init(&m, 65536, 4 * 65536, 65536, 4, &err), 0);
  assert_int_equal(nl_userns_record(&m, "a", 131072, 65536, &err), 0);
  assert_int_equal(nl_userns_record(&m, "a", 131072, 65536, &err), 0); /* the same again */
  struct {
    const char *uid;
    uint32_t from, len;
    const char *want;
  } bad[] = {
      {"a", 196608, 65536, "different user namespace range already used by pod a"},
      {"b", 131072, 65536, "range picked for pod b already taken"},
      {"b", 131072 + 1, 65536, "wrong user namespace offset specified"},
      {"b", 196608, 131072, "wrong user namespace length 131072"},
      {"b", 0, 65536, "id 0 is out of range"},
      {"b", 5 * 65536, 65536, "is out of range"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(nl_userns_record(&m, bad[i].uid, bad[i].from, bad[i].len, &err), -1);
    if (!strstr(err->msg, bad[i].want)) fail_msg("%zu: want %s, got %s", i, bad[i].want, err->msg);
    nl_err_free(&err);
  }
  /* allocation skips the recorded slot */
  for (int i = 0; i < 3; i++) {
    char uid[8];
    snprintf(uid, sizeof uid, "n%d", i);
    uint32_t h;
    bool fresh;
    assert_int_equal(nl_userns_allocate(&m, uid, &h, &fresh, &err), 0);
    assert_int_not_equal(h, 131072);
  }
  nl_userns_free(&m);
}

static void test_file(void **state) {
  (void)state;
  char *s = nl_userns_file_format(1073807360u, 65536);
  assert_string_equal(s, "{\"uidMappings\":[{\"hostId\":1073807360,\"containerId\":0,\"length\":65536}],"
                         "\"gidMappings\":[{\"hostId\":1073807360,\"containerId\":0,\"length\":65536}]}");
  uint32_t h = 0, l = 0;
  nl_err_t *err = NULL;
  assert_int_equal(nl_userns_file_parse(s, strlen(s), &h, &l, &err), 0);
  assert_int_equal(h, 1073807360u);
  assert_int_equal(l, 65536);
  free(s);
  /* encoding/json's matching of names ignores case */
  const char *any_case = "{\"UIDMappings\":[{\"HostID\":131072,\"length\":65536}],"
                         "\"gidmappings\":[{\"hostId\":131072,\"containerId\":0,\"Length\":65536}]}";
  assert_int_equal(nl_userns_file_parse(any_case, strlen(any_case), &h, &l, &err), 0);
  assert_int_equal(h, 131072);
  struct {
    const char *doc, *want;
  } bad[] = {
      {"", "invalid user namespace mappings file"},
      {"[]", "not an object"},
      {"{}", "no more than one mapping allowed"},
      {"{\"uidMappings\":[{\"hostId\":1,\"length\":2},{\"hostId\":3,\"length\":2}],"
       "\"gidMappings\":[{\"hostId\":1,\"length\":2},{\"hostId\":3,\"length\":2}]}",
       "no more than one mapping allowed"},
      {"{\"uidMappings\":[{\"hostId\":65536,\"length\":65536}]}", "GID and UID mappings should be identical."},
      {"{\"uidMappings\":[{\"hostId\":65536,\"length\":65536}],\"gidMappings\":[{\"hostId\":131072,\"length\":65536}]}",
       "GID and UID mapping should be identical"},
      {"{\"uidMappings\":[{\"hostId\":65536,\"containerId\":1,\"length\":65536}],"
       "\"gidMappings\":[{\"hostId\":65536,\"containerId\":1,\"length\":65536}]}",
       "UID 0 must be mapped"},
      {"{\"uidMappings\":[{\"hostId\":-1,\"length\":65536}],\"gidMappings\":[]}", "hostId: not a uint32"},
      {"{\"uidMappings\":[{\"hostId\":4294967296,\"length\":65536}],\"gidMappings\":[]}", "not a uint32"},
      {"{\"uidMappings\":[{\"hostId\":1.5,\"length\":65536}],\"gidMappings\":[]}", "not a uint32"},
      {"{\"uidMappings\":{},\"gidMappings\":[]}", "uidMappings: not a list"},
      {"{\"uidMappings\":[7],\"gidMappings\":[]}", "uidMappings[0]: not an object"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(nl_userns_file_parse(bad[i].doc, strlen(bad[i].doc), &h, &l, &err), -1);
    if (!strstr(err->msg, bad[i].want)) fail_msg("%zu: want %s, got %s", i, bad[i].want, err->msg);
    nl_err_free(&err);
  }
}

static void write_file(const char *path, const char *data) {
  const char *step;
  assert_int_equal(nl_fs_replace(path, data, strlen(data), &step), 0);
}

/* An agent restart: each pod directory's file is its slot again. */
static void test_load(void **state) {
  (void)state;
  char root[] = "/tmp/nl-userns-XXXXXX";
  assert_non_null(mkdtemp(root));
  nl_userns_t m;
  nl_err_t *err = NULL;
  assert_int_equal(nl_userns_init(&m, 65536, 16 * 65536, 65536, 16, &err), 0);
  assert_int_equal(nl_userns_load(&m, root, &err), 0); /* no pods/ yet */
  char *p = nl_xasprintf("%s/pods/with/userns", root);
  assert_int_equal(nl_mkdir_p(p, 0750), 0); /* a directory named userns is not read... */
  rmdir(p);
  free(p);
  char *d = nl_xasprintf("%s/pods/without", root);
  assert_int_equal(nl_mkdir_p(d, 0750), 0);
  free(d);
  p = nl_xasprintf("%s/pods/with/userns", root);
  char *s = nl_userns_file_format(3 * 65536, 65536);
  write_file(p, s);
  free(s);
  char *f = nl_xasprintf("%s/pods/a-file", root); /* not a pod directory */
  write_file(f, "x");
  assert_int_equal(nl_userns_load(&m, root, &err), 0);
  assert_int_equal(nl_userns_count(&m), 1);
  uint32_t h;
  assert_true(nl_userns_get(&m, "with", &h));
  assert_int_equal(h, 3 * 65536);
  assert_false(nl_userns_get(&m, "without", &h));
  nl_userns_free(&m);
  /* a bad file fails the start, naming the pod and the file */
  write_file(p, "{\"uidMappings\":[]}");
  assert_int_equal(nl_userns_init(&m, 65536, 16 * 65536, 65536, 16, &err), 0);
  assert_int_equal(nl_userns_load(&m, root, &err), -1);
  assert_non_null(strstr(err->msg, "record pod mappings for existing pod with"));
  assert_non_null(strstr(err->msg, "/pods/with/userns"));
  nl_err_free(&err);
  nl_userns_free(&m);
  /* a range outside this node's (idsPerPod changed) too */
  s = nl_userns_file_format(3 * 65536, 65536);
  write_file(p, s);
  free(s);
  assert_int_equal(nl_userns_init(&m, 131072, 16 * 131072, 131072, 16, &err), 0);
  assert_int_equal(nl_userns_load(&m, root, &err), -1);
  assert_non_null(strstr(err->msg, "wrong user namespace length 65536"));
  nl_err_free(&err);
  nl_userns_free(&m);
  unlink(p);
  unlink(f);
  free(f);
  free(p);
  char *cmd = nl_xasprintf("rm -rf %s", root);
  assert_int_equal(system(cmd), 0);
  free(cmd);
}

/* ---- the configs ---- */

static int handler_support = 1;
static int supports(void *ctx, const char *handler) {
  (void)ctx;
  (void)handler;
  return handler_support;
}

static const char *USERNS_POD =
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u-1}\nspec:\n"
    "  hostUsers: false\n"
    "  volumes: [{name: v, emptyDir: {}}]\n"
    "  containers: [{name: c, image: b, volumeMounts: [{name: v, mountPath: /v}]}]\n";

static void check_pod_mode(const Runtime__V1__UserNamespace *u, uint32_t host) {
  assert_non_null(u);
  assert_int_equal(u->mode, RUNTIME__V1__NAMESPACE_MODE__POD);
  assert_int_equal(u->n_uids, 1);
  assert_int_equal(u->n_gids, 1);
  assert_int_equal(u->uids[0]->host_id, host);
  assert_int_equal(u->uids[0]->container_id, 0);
  assert_int_equal(u->uids[0]->length, 65536);
  assert_int_equal(u->gids[0]->host_id, host);
  assert_int_equal(u->gids[0]->length, 65536);
}

static void test_configs(void **state) {
  (void)state;
  nl_userns_t m;
  nl_err_t *err = NULL;
  assert_int_equal(nl_userns_init(&m, 65536, 4 * 65536, 65536, 4, &err), 0);
  nl_runtime_opts_t o = test_opts();
  o.userns = &m;
  o.supports_userns = supports;
  nl_pod_t *pod = pod_from_yaml(USERNS_POD);
  nl_host_dns_t host = {0};
  Runtime__V1__PodSandboxConfig *sc = NULL;
  /* no allocation: refused, never run with the host's users */
  handler_support = 1;
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &sc, &err), -1);
  assert_string_equal(err->msg, "user namespace: pod u-1 has no user namespace allocation");
  nl_err_free(&err);
  uint32_t h;
  bool fresh;
  assert_int_equal(nl_userns_allocate(&m, "u-1", &h, &fresh, &err), 0);
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &sc, &err), 0);
  check_pod_mode(sc->linux->security_context->namespace_options->userns_options, h);
  protobuf_c_message_free_unpacked(&sc->base, NULL);
  nl_container_input_t in = {.container = &pod->spec.containers[0],
                             .termination_message_host_path = "/tmp/term"};
  Runtime__V1__ContainerConfig *cc = NULL;
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &cc, &err), 0);
  check_pod_mode(cc->linux->security_context->namespace_options->userns_options, h);
  /* every mount idmapped with the pod's mappings (upstream) */
  assert_int_equal(cc->n_mounts, 2);
  for (size_t i = 0; i < cc->n_mounts; i++) {
    assert_int_equal(cc->mounts[i]->n_uidmappings, 1);
    assert_int_equal(cc->mounts[i]->uidmappings[0]->host_id, h);
    assert_int_equal(cc->mounts[i]->uidmappings[0]->length, 65536);
    assert_int_equal(cc->mounts[i]->n_gidmappings, 1);
    assert_int_equal(cc->mounts[i]->gidmappings[0]->host_id, h);
  }
  protobuf_c_message_free_unpacked(&cc->base, NULL);

  /* a runtime without user namespaces (containerd 1.6): upstream's words */
  handler_support = 0;
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &sc, &err), -1);
  assert_string_equal(err->msg,
                      "can't set `spec.hostUsers: false`, runtime does not support user namespaces");
  nl_err_free(&err);
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &cc, &err), -1);
  assert_non_null(strstr(err->msg, "runtime does not support user namespaces"));
  nl_err_free(&err);
  handler_support = -1;
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &sc, &err), -1);
  assert_string_equal(err->msg, "can't set `spec.hostUsers: false`, runtime does not support user "
                                "namespaces: the handler \"\" is not known");
  nl_err_free(&err);
  /* no Status yet (the agent just started): a pod with its slot read back
   * goes on in it, a new one waits */
  handler_support = -2;
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &sc, &err), 0);
  check_pod_mode(sc->linux->security_context->namespace_options->userns_options, h);
  protobuf_c_message_free_unpacked(&sc->base, NULL);
  assert_true(nl_userns_release(&m, "u-1"));
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &sc, &err), -1);
  assert_string_equal(err->msg,
                      "can't set `spec.hostUsers: false` yet: the runtime's handlers are not known");
  nl_err_free(&err);
  o.supports_userns = NULL; /* no node manager (standalone): not supported either */
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &sc, &err), -1);
  nl_err_free(&err);
  nl_pod_free(pod);

  /* hostUsers unset or true: the node's users, said explicitly as upstream */
  const char *node_pods[] = {
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u-2}\nspec:\n"
      "  containers: [{name: c, image: b}]\n",
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u-3}\nspec:\n"
      "  hostUsers: true\n  containers: [{name: c, image: b}]\n"};
  for (size_t i = 0; i < 2; i++) {
    pod = pod_from_yaml(node_pods[i]);
    assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &sc, &err), 0);
    Runtime__V1__UserNamespace *u = sc->linux->security_context->namespace_options->userns_options;
    assert_non_null(u);
    assert_int_equal(u->mode, RUNTIME__V1__NAMESPACE_MODE__NODE);
    assert_int_equal(u->n_uids, 0);
    protobuf_c_message_free_unpacked(&sc->base, NULL);
    nl_container_input_t in2 = {.container = &pod->spec.containers[0],
                                .termination_message_host_path = "/tmp/term"};
    assert_int_equal(nl_runtime_build_container_config(&o, pod, &in2, &cc, &err), 0);
    assert_int_equal(cc->linux->security_context->namespace_options->userns_options->mode,
                     RUNTIME__V1__NAMESPACE_MODE__NODE);
    assert_int_equal(cc->mounts[0]->n_uidmappings, 0);
    protobuf_c_message_free_unpacked(&cc->base, NULL);
    nl_pod_free(pod);
  }
  nl_userns_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_getsubids_output), cmocka_unit_test(test_range_checks),
      cmocka_unit_test(test_allocate_no_overlap), cmocka_unit_test(test_record),
      cmocka_unit_test(test_file), cmocka_unit_test(test_load), cmocka_unit_test(test_configs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
