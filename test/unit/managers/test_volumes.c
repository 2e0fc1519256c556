/* emptyDir/hostPath set-up and teardown in a temporary root; subPath checks;
 * the async wrapper on a loop. */
#include "rt_test_util.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "managers/volumes.h"
#include "reactor/fs.h"
#include "reactor/xalloc.h"

static char root[64];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/nanolet-vol-test-XXXXXX");
  assert_non_null(mkdtemp(root));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char *cmd = nl_xasprintf("rm -rf '%s'", root);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  return 0;
}

static nl_pod_t *vpod(const char *volumes) {
  char *y = nl_xasprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: uid1}\n"
                         "spec:\n  volumes:\n%s  containers: [{name: c, image: b}]\n", volumes);
  nl_pod_t *p = pod_from_yaml(y);
  free(y);
  return p;
}

static void test_empty_dir_and_teardown(void **state) {
  (void)state;
  nl_pod_t *p = vpod("  - {name: data, emptyDir: {}}\n");
  nl_err_t *err = NULL;
  assert_int_equal(nl__volumes_setup_sync(root, p, NULL, &err), 0);
  char *d = nl_xasprintf("%s/pods/uid1/volumes/kubernetes.io~empty-dir/data", root);
  struct stat st;
  assert_int_equal(stat(d, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0777);
  char *h = nl_volumes_host_path(root, p, "data", NULL, &err);
  assert_string_equal(h, d);
  free(h);
  assert_int_equal(nl__volumes_setup_sync(root, p, NULL, &err), 0); /* idempotent */
  assert_int_equal(nl__volumes_teardown_sync(root, "uid1", &err), 0);
  assert_int_not_equal(stat(d, &st), 0);
  assert_int_equal(nl__volumes_teardown_sync(root, "../x", &err), -1); /* refused */
  nl_err_free(&err);
  free(d);
  nl_pod_free(p);
}

/* SetVolumeOwnership for an fsGroup: the group, group read-write and setgid on
 * the root and what is there, once (a file the container changes later keeps
 * its mode). */
static void test_empty_dir_fs_group(void **state) {
  (void)state;
  char *y = nl_xasprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: uid2}\n"
                         "spec:\n  securityContext: {fsGroup: 4321}\n"
                         "  volumes: [{name: data, emptyDir: {}}]\n  containers: [{name: c, image: b}]\n");
  nl_pod_t *p = pod_from_yaml(y);
  free(y);
  nl_err_t *err = NULL;
  char *d = nl_xasprintf("%s/pods/uid2/volumes/kubernetes.io~empty-dir/data", root);
  char *f = nl_xasprintf("%s/old", d);
  assert_int_equal(nl_mkdir_p(d, 0700), 0);
  int fd = open(f, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(nl__volumes_setup_sync(root, p, NULL, &err), 0);
  struct stat st;
  assert_int_equal(stat(d, &st), 0);
  assert_int_equal(st.st_mode & 07777, 02777);
  assert_int_equal(st.st_gid, 4321);
  assert_int_equal(stat(f, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0660);
  assert_int_equal(st.st_gid, 4321);
  assert_int_equal(chmod(f, 0600), 0);
  assert_int_equal(nl__volumes_setup_sync(root, p, NULL, &err), 0);
  assert_int_equal(stat(f, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600); /* not walked again */
  assert_int_equal(nl__volumes_teardown_sync(root, "uid2", &err), 0);
  free(f);
  free(d);
  nl_pod_free(p);
}

static void test_host_path_types(void **state) {
  (void)state;
  char *dir = nl_xasprintf("%s/hp-dir", root), *file = nl_xasprintf("%s/hp-file", root);
  char *sock = nl_xasprintf("%s/hp-sock", root);
  mkdir(dir, 0755);
  close(open(file, O_CREAT | O_WRONLY, 0644));
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  struct { const char *path, *type; int ok; } cases[] = {
      {dir, "Directory", 0},       {file, "Directory", -1},  {file, "File", 0},
      {dir, "File", -1},           {sock, "Socket", 0},      {file, "Socket", -1},
      {"/dev/null", "CharDevice", 0}, {file, "CharDevice", -1}, {file, "BlockDevice", -1},
      {"/nonexistent-nl", "", 0},  {"/nonexistent-nl", "Directory", -1},
      {"/nonexistent-nl", "Weird", -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *v = nl_xasprintf("  - name: h\n    hostPath: {path: '%s', type: '%s'}\n", cases[i].path,
                           cases[i].type);
    nl_pod_t *p = vpod(v);
    nl_err_t *err = NULL;
    int r = nl__volumes_setup_sync(root, p, NULL, &err);
    if (r != cases[i].ok) fail_msg("case %zu (%s %s): %s", i, cases[i].path, cases[i].type, nl_err_msg(err));
    nl_err_free(&err);
    nl_pod_free(p);
    free(v);
  }
  /* the OrCreate types create */
  char *nd = nl_xasprintf("%s/new/dir", root), *nf = nl_xasprintf("%s/newfile", root);
  char *v = nl_xasprintf("  - {name: a, hostPath: {path: '%s', type: DirectoryOrCreate}}\n"
                         "  - {name: b, hostPath: {path: '%s', type: FileOrCreate}}\n", nd, nf);
  nl_pod_t *p = vpod(v);
  nl_err_t *err = NULL;
  assert_int_equal(nl__volumes_setup_sync(root, p, NULL, &err), 0);
  struct stat st;
  assert_int_equal(stat(nd, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(stat(nf, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  nl_pod_free(p);
  free(v); free(nd); free(nf);
  close(fd);
  free(dir); free(file); free(sock);
}

static void test_unsupported_and_subpath(void **state) {
  (void)state;
  nl_pod_t *p = vpod("  - {name: cm, configMap: {name: x}}\n"
                     "  - {name: pvc, persistentVolumeClaim: {claimName: x}}\n");
  nl_err_t *err = NULL;
  /* an API volume whose content was not resolved */
  assert_int_equal(nl__volumes_setup_sync(root, p, NULL, &err), -1);
  assert_non_null(strstr(err->msg, "volume \"cm\": its content is not known"));
  nl_err_free(&err);
  nl_api_volume_t one = {.name = "cm"};
  nl_api_volumes_t api = {.v = &one, .n = 1, .fs_group = -1};
  assert_int_equal(nl__volumes_setup_sync(root, p, &api, &err), -1);
  assert_non_null(strstr(err->msg, "persistentVolumeClaim volumes are not supported"));
  nl_err_free(&err);
  assert_null(nl_volumes_host_path(root, p, "nope", NULL, &err));
  assert_non_null(strstr(err->msg, "cannot find volume \"nope\""));
  nl_err_free(&err);
  nl_pod_free(p);
  assert_int_equal(nl_volumes_check_subpath("a/b", &err), 0);
  assert_int_equal(nl_volumes_check_subpath("a..b/c", &err), 0);
  assert_int_equal(nl_volumes_check_subpath("/abs", &err), -1);
  nl_err_free(&err);
  assert_int_equal(nl_volumes_check_subpath("a/../b", &err), -1);
  nl_err_free(&err);
  assert_int_equal(nl_volumes_check_subpath("..", &err), -1);
  nl_err_free(&err);
}

static int async_calls;
static void on_done(const nl_err_t *err, void *ctx) {
  (void)ctx;
  assert_null(err);
  async_calls++;
}

static void test_async(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  nl_pod_t *p = vpod("  - {name: data, emptyDir: {}}\n");
  assert_int_equal(nl_volumes_setup(&loop, root, p, on_done, NULL), 0);
  nl_pod_free(p); /* copied at the call */
  assert_int_equal(async_calls, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(async_calls, 1);
  assert_int_equal(nl_volumes_teardown(&loop, root, "uid1", on_done, NULL), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(async_calls, 2);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty_dir_and_teardown), cmocka_unit_test(test_empty_dir_fs_group),
      cmocka_unit_test(test_host_path_types),
      cmocka_unit_test(test_unsupported_and_subpath), cmocka_unit_test(test_async),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
