/* The file source on real temporary directories and the real loop, feeding the
 * real merger; every emitted update is asserted. Waiting is on the source's own
 * progress (fs events, scans), with a guard timer that fails a stuck test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/buf.h"
#include "reactor/xalloc.h"
#include "sources/config.h"
#include "sources/file.h"

#define NODE "node1"
#define GUARD_MS 10000

typedef struct fx {
  uv_loop_t loop;
  uv_timer_t guard;
  bool timed_out;
  char dir[64];
  char *path; /* what the source watches */
  nl_file_source_t src;
  nl_pod_config_t cfg;
  char *lines[64];
  size_t n;
  size_t added, removed, other; /* pod counts per op, for the big test */
  bool stopped;
  bool stop_in_cb; /* stop the source from inside its snapshot callback */
} fx_t;

static void record(nl_pod_op_t op, const char *source, const nl_pod_t *const *pods, size_t n, void *ctx) {
  fx_t *f = ctx;
  if (op == NL_POD_ADD) f->added += n;
  else if (op == NL_POD_REMOVE) f->removed += n;
  else f->other += n;
  if (n > 8) return; /* the big test counts only */
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_printf(&b, "%s %s", nl_pod_op_name(op), source);
  for (size_t i = 0; i < n; i++) nl_buf_printf(&b, " %s/%s", pods[i]->metadata.namespace_, pods[i]->metadata.name);
  assert_true(f->n < 64);
  f->lines[f->n++] = nl_buf_steal(&b);
}

static void on_snapshot(nl_pod_t **pods, size_t n, void *ctx) {
  fx_t *f = ctx;
  assert_int_equal(nl_pod_config_set(&f->cfg, NL_SOURCE_FILE, pods, n, NULL), 0);
  if (f->stop_in_cb) nl_file_source_stop(&f->src, NULL);
}

static void on_guard(uv_timer_t *t) {
  fx_t *f = container_of(t, fx_t, guard);
  f->timed_out = true;
}

static char *p(fx_t *f, const char *name) { return nl_xasprintf("%s/%s", f->dir, name); }

static void write_file(const char *path, const char *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, len), (ssize_t)len);
  close(fd);
}

static char *manifest(const char *name, const char *image) {
  return nl_xasprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n"
                      "  - name: c\n    image: %s\n",
                      name, image);
}

static void put(fx_t *f, const char *file, const char *name, const char *image) {
  char *m = manifest(name, image), *path = p(f, file);
  write_file(path, m, strlen(m));
  free(m);
  free(path);
}

/* Runs the loop until cond holds; fails the test after GUARD_MS. */
#define RUN_UNTIL(f, cond)                                   \
  do {                                                       \
    uv_timer_start(&(f)->guard, on_guard, GUARD_MS, 0);      \
    while (!(cond) && !(f)->timed_out) uv_run(&(f)->loop, UV_RUN_ONCE); \
    uv_timer_stop(&(f)->guard);                              \
    if ((f)->timed_out) fail_msg("timed out waiting for: %s", #cond); \
  } while (0)

static void expect(fx_t *f, size_t n, ...) {
  va_list ap;
  va_start(ap, n);
  for (size_t i = 0; i < n && i < f->n; i++) assert_string_equal(f->lines[i], va_arg(ap, const char *));
  va_end(ap);
  if (f->n != n)
    for (size_t i = 0; i < f->n; i++) fprintf(stderr, "  got: %s\n", f->lines[i]);
  assert_int_equal(f->n, n);
  for (size_t i = 0; i < f->n; i++) free(f->lines[i]);
  f->n = 0;
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static int setup(void **state) {
  fx_t *f = nl_xcalloc(1, sizeof *f);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  uv_timer_init(&f->loop, &f->guard);
  strcpy(f->dir, "/tmp/nl-file-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  nl_pod_config_init(&f->cfg, record, f);
  nl_pod_config_add_source(&f->cfg, NL_SOURCE_FILE);
  *state = f;
  return 0;
}

/* Starts a source on `path` (relative to the temp dir; NULL: the dir itself). */
static void start(fx_t *f, const char *rel, uint64_t freq_ms) {
  f->path = rel ? p(f, rel) : nl_xstrdup(f->dir);
  nl_err_t *err = NULL;
  assert_int_equal(nl_file_source_init(&f->src, &f->loop, f->path, freq_ms, NODE, on_snapshot, f, &err), 0);
  assert_int_equal(nl_file_source_start(&f->src, &err), 0);
  RUN_UNTIL(f, f->src.snapshots >= 1 && !f->src.job); /* incl. the re-scan after the first watch */
}

static void on_stopped(nl_file_source_t *src) {
  fx_t *f = container_of(src, fx_t, src);
  f->stopped = true;
}

static int teardown(void **state) {
  fx_t *f = *state;
  if (f->src.state != NL_FILE_SOURCE_STOPPED) nl_file_source_stop(&f->src, on_stopped);
  uv_close((uv_handle_t *)&f->guard, NULL);
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_true(f->stopped);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  for (size_t i = 0; i < f->n; i++) free(f->lines[i]);
  nl_pod_config_free(&f->cfg);
  nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  free(f->path);
  free(f);
  return 0;
}

/* Waits for the next scan after the current one (an fs event has arrived). */
static void wait_scans(fx_t *f, uint64_t n) {
  uint64_t want = f->src.scans + n;
  RUN_UNTIL(f, f->src.scans >= want && !f->src.job);
}

/* ---- tests ---- */

static void empty_dir_is_ready(void **state) {
  fx_t *f = *state;
  assert_false(nl_pod_config_sources_ready(&f->cfg));
  start(f, NULL, 60000);
  expect(f, 1, "ADD file"); /* an empty first set still marks the source seen */
  assert_true(nl_pod_config_sources_ready(&f->cfg));
}

static void create_edit_delete(void **state) {
  fx_t *f = *state;
  start(f, NULL, 60000);
  expect(f, 1, "ADD file");
  put(f, "web.yaml", "web", "busybox");
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "ADD file default/web-node1");
  assert_int_equal(nl_pod_config_count(&f->cfg, "file"), 1);

  /* a static pod's uid hashes its content: an edit is a new pod */
  put(f, "web.yaml", "web", "nginx");
  RUN_UNTIL(f, f->n >= 2);
  expect(f, 2, "REMOVE file default/web-node1", "ADD file default/web-node1");

  /* the same pod written again, reformatted: nothing */
  char *path = p(f, "web.yaml");
  const char *same = "# a comment\napiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n"
                     "  - {name: c, image: nginx}\n";
  write_file(path, same, strlen(same));
  wait_scans(f, 1);
  expect(f, 0);

  assert_int_equal(unlink(path), 0);
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "REMOVE file default/web-node1");
  free(path);
  assert_int_equal(f->src.errors, 0);
}

static void atomic_rename(void **state) {
  fx_t *f = *state;
  start(f, NULL, 60000);
  expect(f, 1, "ADD file");
  /* as editors and config tools do: a dot-temp file renamed over the target */
  put(f, ".web.yaml.tmp", "web", "busybox");
  char *tmp = p(f, ".web.yaml.tmp"), *dst = p(f, "web.yaml");
  wait_scans(f, 0);
  expect(f, 0);
  assert_int_equal(rename(tmp, dst), 0);
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "ADD file default/web-node1");
  put(f, ".web.yaml.tmp", "web", "nginx");
  assert_int_equal(rename(tmp, dst), 0);
  RUN_UNTIL(f, f->n >= 2);
  expect(f, 2, "REMOVE file default/web-node1", "ADD file default/web-node1");
  free(tmp);
  free(dst);
  assert_int_equal(f->src.errors, 0);
}

/* upstream handles inotify events one by one: a manifest deleted and written
 * again at once, same bytes, is its pod removed and added (the static pod
 * restarts); the same bytes renamed over it are no change. */
static void delete_and_write_again(void **state) {
  fx_t *f = *state;
  start(f, NULL, 60000);
  expect(f, 1, "ADD file");
  put(f, "web.yaml", "web", "busybox");
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "ADD file default/web-node1");
  char *path = p(f, "web.yaml"), *tmp = p(f, ".web.yaml.tmp");
  assert_int_equal(unlink(path), 0);
  put(f, "web.yaml", "web", "busybox");
  RUN_UNTIL(f, f->n >= 2);
  expect(f, 2, "REMOVE file default/web-node1", "ADD file default/web-node1");
  put(f, ".web.yaml.tmp", "web", "busybox");
  assert_int_equal(rename(tmp, path), 0);
  wait_scans(f, 1);
  expect(f, 0);
  free(path);
  free(tmp);
}

static void half_written(void **state) {
  fx_t *f = *state;
  start(f, NULL, 60000);
  expect(f, 1, "ADD file");
  char *m = manifest("web", "busybox"), *path = p(f, "web.yaml");
  size_t half = strlen(m) - 12; /* cut inside the container list */
  write_file(path, m, half);
  RUN_UNTIL(f, f->src.errors >= 1);
  expect(f, 0); /* not acted on */
  /* the writer finishes */
  int fd = open(path, O_WRONLY | O_APPEND);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, m + half, strlen(m) - half), (ssize_t)(strlen(m) - half));
  close(fd);
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "ADD file default/web-node1");
  assert_int_equal(f->src.errors, 1);
  free(m);
  free(path);
}

static void bad_after_good_keeps_pod(void **state) {
  fx_t *f = *state;
  start(f, NULL, 100); /* a fast safety-net re-read: errors must not repeat */
  expect(f, 1, "ADD file");
  put(f, "web.yaml", "web", "busybox");
  put(f, "db.yaml", "db", "busybox");
  RUN_UNTIL(f, nl_pod_config_count(&f->cfg, "file") == 2);
  f->added = 0;
  for (size_t i = 0; i < f->n; i++) free(f->lines[i]);
  f->n = 0;
  char *path = p(f, "web.yaml");
  write_file(path, "kind: Pod\nspec: [unclosed\n", 26);
  RUN_UNTIL(f, f->src.errors >= 1);
  wait_scans(f, 3); /* three periodic re-reads of the same bad bytes */
  assert_int_equal(f->src.errors, 1);
  expect(f, 0);
  assert_int_equal(nl_pod_config_count(&f->cfg, "file"), 2);
  /* fixed again, differently: the new pod replaces the old one */
  put(f, "web.yaml", "web", "nginx");
  RUN_UNTIL(f, f->n >= 2);
  expect(f, 2, "REMOVE file default/web-node1", "ADD file default/web-node1");
  free(path);
}

static void missing_dir_appears(void **state) {
  fx_t *f = *state;
  start(f, "manifests", 60000);
  expect(f, 1, "ADD file"); /* upstream: an empty set for a missing path */
  assert_true(nl_pod_config_sources_ready(&f->cfg));
  assert_int_equal(mkdir(f->path, 0755), 0);
  RUN_UNTIL(f, f->src.watch_is_dir); /* seen through the watch on the parent */
  put(f, "manifests/web.yaml", "web", "busybox");
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "ADD file default/web-node1");
  /* the directory goes away: its pods go with it */
  char *file = p(f, "manifests/web.yaml");
  unlink(file);
  rmdir(f->path);
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "REMOVE file default/web-node1");
  free(file);
}

static void mkdir_in(fx_t *f, const char *rel) {
  char *d = p(f, rel);
  assert_int_equal(mkdir(d, 0755), 0);
  free(d);
}

/* manifests/web.yaml, a link to elsewhere/web.yaml (pod web, busybox); the
 * caller frees *target and *link. */
static void web_behind_link(fx_t *f, char **target, char **link) {
  mkdir_in(f, "manifests");
  mkdir_in(f, "elsewhere");
  put(f, "elsewhere/web.yaml", "web", "busybox");
  *target = p(f, "elsewhere/web.yaml");
  *link = p(f, "manifests/web.yaml");
  assert_int_equal(symlink(*target, *link), 0);
}

static void symlink_in_dir(void **state) {
  fx_t *f = *state;
  char *target, *link;
  web_behind_link(f, &target, &link);
  start(f, "manifests/", 200); /* a trailing slash is trimmed */
  expect(f, 1, "ADD file default/web-node1");
  assert_non_null(strstr(f->path, "manifests/"));
  assert_null(strstr(f->src.path, "manifests/"));
  /* a dangling link is an unreadable file: reported, the pod it gave stays (seen
   * by the re-read: the target's directory is not watched) */
  assert_int_equal(unlink(target), 0);
  RUN_UNTIL(f, f->src.errors >= 1);
  wait_scans(f, 2);
  expect(f, 0);
  assert_int_equal(f->src.errors, 1);
  assert_int_equal(nl_pod_config_count(&f->cfg, "file"), 1);
  /* the link itself removed: the pod goes */
  assert_int_equal(unlink(link), 0);
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "REMOVE file default/web-node1");
  free(target);
  free(link);
}

static void single_file_path(void **state) {
  fx_t *f = *state;
  put(f, "pod.yaml", "solo", "busybox");
  start(f, "pod.yaml", 60000);
  expect(f, 1, "ADD file default/solo-node1");
  /* a sibling is not part of the source */
  put(f, "other.yaml", "other", "busybox");
  put(f, ".pod.yaml.new", "solo", "nginx");
  char *tmp = p(f, ".pod.yaml.new"), *dst = p(f, "pod.yaml");
  assert_int_equal(rename(tmp, dst), 0);
  RUN_UNTIL(f, f->n >= 2);
  expect(f, 2, "REMOVE file default/solo-node1", "ADD file default/solo-node1");
  assert_int_equal(unlink(dst), 0);
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "REMOVE file default/solo-node1");
  free(tmp);
  free(dst);
}

static void symlink_target_change_seen_by_reread(void **state) {
  fx_t *f = *state;
  char *target, *link;
  web_behind_link(f, &target, &link);
  start(f, "manifests", 200);
  expect(f, 1, "ADD file default/web-node1");
  /* the watch does not see the target's directory: the periodic re-read does */
  put(f, "elsewhere/web.yaml", "web", "nginx");
  RUN_UNTIL(f, f->n >= 2);
  expect(f, 2, "REMOVE file default/web-node1", "ADD file default/web-node1");
  free(target);
  free(link);
}

/* Kubernetes' atomic writer (ConfigMap volumes, some config tools): files are
 * links through "..data", and an update renames a new "..data" link into place.
 * Only dot-names change, yet the manifests behind the links do. */
static void atomic_writer_swap(void **state) {
  fx_t *f = *state;
  mkdir_in(f, "..v1");
  mkdir_in(f, "..v2");
  put(f, "..v1/web.yaml", "web", "busybox");
  put(f, "..v2/web.yaml", "web", "nginx");
  char *data = p(f, "..data"), *tmp = p(f, "..data_tmp"), *link = p(f, "web.yaml");
  assert_int_equal(symlink("..v1", data), 0);
  assert_int_equal(symlink("..data/web.yaml", link), 0);
  start(f, NULL, 60000);
  expect(f, 1, "ADD file default/web-node1");
  assert_int_equal(symlink("..v2", tmp), 0);
  assert_int_equal(rename(tmp, data), 0);
  RUN_UNTIL(f, f->n >= 2);
  expect(f, 2, "REMOVE file default/web-node1", "ADD file default/web-node1");
  assert_int_equal(f->src.errors, 0);
  free(data);
  free(tmp);
  free(link);
}

static void ignored_entries(void **state) {
  fx_t *f = *state;
  start(f, NULL, 60000);
  expect(f, 1, "ADD file");
  put(f, ".hidden.yaml", "hidden", "busybox");
  mkdir_in(f, "sub");
  put(f, "sub/inner.yaml", "inner", "busybox");
  RUN_UNTIL(f, f->src.errors >= 1); /* "sub" is reported once */
  wait_scans(f, 0);
  expect(f, 0);
  put(f, "web.yaml", "web", "busybox");
  RUN_UNTIL(f, f->n >= 1);
  expect(f, 1, "ADD file default/web-node1");
  assert_int_equal(f->src.errors, 1);
}

static void garbage_10mib(void **state) {
  fx_t *f = *state;
  start(f, NULL, 100);
  expect(f, 1, "ADD file");
  size_t len = 10 * 1024 * 1024;
  char *junk = nl_xmalloc(len);
  uint32_t x = 12345;
  for (size_t i = 0; i < len; i++) junk[i] = (char)((x = x * 1103515245 + 12345) >> 16);
  char *path = p(f, "junk.yaml");
  write_file(path, junk, len);
  RUN_UNTIL(f, f->src.errors >= 1);
  wait_scans(f, 3);
  assert_int_equal(f->src.errors, 1);
  expect(f, 0);
  free(junk);
  free(path);
}

static void thousand_manifests(void **state) {
  fx_t *f = *state;
  start(f, NULL, 60000);
  expect(f, 1, "ADD file");
  char name[32], file[40];
  for (int i = 0; i < 1000; i++) {
    snprintf(name, sizeof name, "pod%04d", i);
    snprintf(file, sizeof file, "%s.yaml", name);
    put(f, file, name, "busybox");
  }
  RUN_UNTIL(f, nl_pod_config_count(&f->cfg, "file") == 1000 && !f->src.job);
  assert_int_equal(f->added, 1000);
  assert_int_equal(f->removed, 0);
  assert_int_equal(f->other, 0);
  /* errors are not asserted: a scan may catch a file between its O_TRUNC and its
   * write, which is reported (and not acted on) like any half-written file */
  for (size_t i = 0; i < f->n; i++) free(f->lines[i]);
  f->n = 0;
}

static void stop_while_scanning(void **state) {
  fx_t *f = *state;
  for (int i = 0; i < 50; i++) {
    char file[32];
    snprintf(file, sizeof file, "p%d.yaml", i);
    put(f, file, "p", "busybox");
  }
  f->path = nl_xstrdup(f->dir);
  assert_int_equal(nl_file_source_init(&f->src, &f->loop, f->path, 0, NODE, on_snapshot, f, NULL), 0);
  assert_int_equal(nl_file_source_start(&f->src, NULL), 0);
  assert_non_null(f->src.job);
  nl_file_source_stop(&f->src, on_stopped);
  /* teardown runs the loop: the scan comes back, nothing is emitted */
}

static void stop_from_callback(void **state) {
  fx_t *f = *state;
  put(f, "web.yaml", "web", "busybox");
  f->stop_in_cb = true;
  start(f, NULL, 1); /* a 1 ms re-read would call again if the stop were lost */
  expect(f, 1, "ADD file default/web-node1");
  assert_true(f->src.state == NL_FILE_SOURCE_STOPPING || f->src.state == NL_FILE_SOURCE_STOPPED);
  f->stopped = true; /* stopped without a done_cb; teardown checks the loop closes */
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(f->src.state, NL_FILE_SOURCE_STOPPED);
  assert_int_equal(f->src.snapshots, 1);
}

static void init_errors(void **state) {
  fx_t *f = *state;
  nl_err_t *err = NULL;
  assert_int_equal(nl_file_source_init(&f->src, &f->loop, "", 0, NODE, on_snapshot, f, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "staticPodPath"));
  nl_err_free(&err);
  assert_int_equal(nl_file_source_init(&f->src, &f->loop, "/x", 0, "", on_snapshot, f, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "node name"));
  nl_err_free(&err);
  /* teardown stops a never-started source: finished at once */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(empty_dir_is_ready, setup, teardown),
      cmocka_unit_test_setup_teardown(create_edit_delete, setup, teardown),
      cmocka_unit_test_setup_teardown(atomic_rename, setup, teardown),
      cmocka_unit_test_setup_teardown(delete_and_write_again, setup, teardown),
      cmocka_unit_test_setup_teardown(half_written, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_after_good_keeps_pod, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_dir_appears, setup, teardown),
      cmocka_unit_test_setup_teardown(symlink_in_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(single_file_path, setup, teardown),
      cmocka_unit_test_setup_teardown(symlink_target_change_seen_by_reread, setup, teardown),
      cmocka_unit_test_setup_teardown(atomic_writer_swap, setup, teardown),
      cmocka_unit_test_setup_teardown(ignored_entries, setup, teardown),
      cmocka_unit_test_setup_teardown(garbage_10mib, setup, teardown),
      cmocka_unit_test_setup_teardown(thousand_manifests, setup, teardown),
      cmocka_unit_test_setup_teardown(stop_while_scanning, setup, teardown),
      cmocka_unit_test_setup_teardown(stop_from_callback, setup, teardown),
      cmocka_unit_test_setup_teardown(init_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
