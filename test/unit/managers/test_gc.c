/* Container and image GC selection (managers/gc_select.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "managers/gc.h"
#include "managers/runtime_types.h"
#include "reactor/xalloc.h"

#define S NL_NS_PER_S_TEST
#define NL_NS_PER_S_TEST 1000000000LL

static nl_gc_pod_state_t by_prefix(void *ctx, const char *uid) {
  (void)ctx;
  /* "a*": active, "t*": terminated, "d*": deleted, "f*": foreign */
  switch (uid[0]) {
  case 't': return NL_GC_POD_TERMINATED;
  case 'd': return NL_GC_POD_DELETED;
  case 'f': return NL_GC_POD_FOREIGN;
  default: return NL_GC_POD_ACTIVE;
  }
}

static const nl_gc_policy_t upstream = {.max_per_pod_container = 1, .max_containers = -1};

static bool chosen(const size_t *out, size_t n, size_t idx) {
  for (size_t i = 0; i < n; i++)
    if (out[i] == idx) return true;
  return false;
}

/* A crash-looping container: the newest dead instance stays (logs --previous),
 * older ones go, the running one is never touched. */
static void test_max_per_pod_container(void **state) {
  (void)state;
  nl_gc_container_t c[] = {
      {"c0", "a1", "app", "s1", 10 * S, 0, false},
      {"c1", "a1", "app", "s1", 20 * S, 1, false},
      {"c2", "a1", "app", "s1", 30 * S, 2, false},
      {"c3", "a1", "app", "s1", 40 * S, 3, true},
      {"c4", "a1", "side", "s1", 5 * S, 0, false},
  };
  size_t out[5];
  size_t n = nl_gc_select_containers(&upstream, c, 5, 100 * S, by_prefix, NULL, true, false, out);
  assert_int_equal(n, 2);
  assert_true(chosen(out, n, 0) && chosen(out, n, 1));
  nl_gc_policy_t two = upstream;
  two.max_per_pod_container = 2;
  n = nl_gc_select_containers(&two, c, 5, 100 * S, by_prefix, NULL, true, false, out);
  assert_int_equal(n, 1);
  assert_int_equal(out[0], 0);
  two.max_per_pod_container = -1;
  assert_int_equal(nl_gc_select_containers(&two, c, 5, 100 * S, by_prefix, NULL, true, false, out), 0);
}

/* Attempt orders before creation time (a clock step does not reorder). */
static void test_newest_by_attempt(void **state) {
  (void)state;
  nl_gc_container_t c[] = {
      {"old", "a1", "app", "s1", 50 * S, 0, false},
      {"new", "a1", "app", "s1", 10 * S, 1, false},
  };
  size_t out[2];
  assert_int_equal(nl_gc_select_containers(&upstream, c, 2, 100 * S, by_prefix, NULL, true, false, out), 1);
  assert_int_equal(out[0], 0);
}

static void test_min_age(void **state) {
  (void)state;
  nl_gc_policy_t p = upstream;
  p.min_age_ns = 60 * S;
  nl_gc_container_t c[] = {
      {"c0", "a1", "app", "s1", 10 * S, 0, false},
      {"c1", "a1", "app", "s1", 30 * S, 1, false},
      {"c2", "a1", "app", "s1", 90 * S, 2, false},
  };
  size_t out[3];
  /* c2 is too young to count: of c0 and c1 one stays */
  size_t n = nl_gc_select_containers(&p, c, 3, 100 * S, by_prefix, NULL, true, false, out);
  assert_int_equal(n, 1);
  assert_int_equal(out[0], 0);
}

/* Deleted pods lose everything, but only once every source has reported;
 * terminated pods only in a reclaim; another agent's pods never. */
static void test_deleted_terminated_foreign(void **state) {
  (void)state;
  nl_gc_container_t c[] = {
      {"d0", "d1", "app", "s1", 10 * S, 0, false},
      {"t0", "t1", "app", "s2", 10 * S, 0, false},
      {"f0", "f1", "app", "s3", 10 * S, 0, false},
      {"f1", "f1", "app", "s3", 20 * S, 1, false},
  };
  size_t out[4];
  size_t n = nl_gc_select_containers(&upstream, c, 4, 100 * S, by_prefix, NULL, false, false, out);
  assert_int_equal(n, 0);
  n = nl_gc_select_containers(&upstream, c, 4, 100 * S, by_prefix, NULL, true, false, out);
  assert_int_equal(n, 1);
  assert_int_equal(out[0], 0);
  n = nl_gc_select_containers(&upstream, c, 4, 100 * S, by_prefix, NULL, true, true, out);
  assert_int_equal(n, 2);
  assert_true(chosen(out, n, 0) && chosen(out, n, 1));
}

/* maxContainers: an equal share per unit, then the oldest overall. */
static void test_max_containers(void **state) {
  (void)state;
  nl_gc_policy_t p = {.max_per_pod_container = -1, .max_containers = 3};
  nl_gc_container_t c[] = {
      {"a0", "a1", "x", "s1", 10 * S, 0, false}, {"a1", "a1", "x", "s1", 20 * S, 1, false},
      {"a2", "a1", "x", "s1", 30 * S, 2, false}, {"b0", "a2", "y", "s2", 15 * S, 0, false},
      {"b1", "a2", "y", "s2", 25 * S, 1, false},
  };
  size_t out[5];
  /* share 3/2 = 1 each: a0, a1, b0 go */
  size_t n = nl_gc_select_containers(&p, c, 5, 100 * S, by_prefix, NULL, true, false, out);
  assert_int_equal(n, 3);
  assert_true(chosen(out, n, 0) && chosen(out, n, 1) && chosen(out, n, 3));
  /* 3 units and room for 2: each keeps 1 (the floor), then the oldest goes */
  nl_gc_container_t d[] = {
      {"a0", "a1", "x", "s1", 10 * S, 0, false},
      {"b0", "a2", "y", "s2", 20 * S, 0, false},
      {"c0", "a3", "z", "s3", 30 * S, 0, false},
  };
  p.max_containers = 2;
  n = nl_gc_select_containers(&p, d, 3, 100 * S, by_prefix, NULL, true, false, out);
  assert_int_equal(n, 1);
  assert_int_equal(out[0], 0);
}

static void test_sandboxes(void **state) {
  (void)state;
  nl_gc_sandbox_t s[] = {
      {"s-old", "a1", 10 * S, 0, false}, /* dead, empty: goes */
      {"s-mid", "a1", 20 * S, 1, false}, /* dead, holds a container: stays */
      {"s-new", "a1", 30 * S, 2, true},  /* newest: stays */
      {"d-1", "d1", 10 * S, 0, false},   /* deleted pod: all dead go */
      {"d-2", "d1", 20 * S, 1, false},
      {"t-1", "t1", 10 * S, 0, false},   /* terminated: newest kept unless reclaiming */
      {"f-1", "f1", 10 * S, 0, false},   /* foreign */
      {"f-2", "f1", 20 * S, 1, false},
  };
  nl_gc_container_t c[] = {{"c0", "a1", "app", "s-mid", 20 * S, 0, false}};
  size_t out[8];
  size_t n = nl_gc_select_sandboxes(s, 8, c, 1, by_prefix, NULL, false, out);
  assert_int_equal(n, 3);
  assert_true(chosen(out, n, 0) && chosen(out, n, 3) && chosen(out, n, 4));
  n = nl_gc_select_sandboxes(s, 8, c, 1, by_prefix, NULL, true, out);
  assert_int_equal(n, 4);
  assert_true(chosen(out, n, 5));
}

static void test_images(void **state) {
  (void)state;
  nl_gc_image_t im[] = {
      {"used", 100, 0, 90 * S, true, false},
      {"pinned", 100, 0, 0, false, true},
      {"lru", 30, 0, 10 * S, false, false},
      {"recent", 40, 0, 80 * S, false, false},
      {"young", 50, 95 * S, 0, false, false}, /* detected 5 s ago */
  };
  size_t out[5];
  uint64_t freed;
  /* 20 bytes to free: the least recently used one is enough */
  size_t n = nl_gc_select_images(im, 5, 100 * S, 60 * S, 0, 20, out, &freed);
  assert_int_equal(n, 1);
  assert_int_equal(out[0], 2);
  assert_int_equal(freed, 30);
  /* everything: never the used, pinned or young ones */
  n = nl_gc_select_images(im, 5, 100 * S, 60 * S, 0, UINT64_MAX, out, &freed);
  assert_int_equal(n, 2);
  assert_int_equal(freed, 70);
  /* nothing to free, but a maximum age of 50 s: the one unused for 90 s goes */
  n = nl_gc_select_images(im, 5, 100 * S, 60 * S, 50 * S, 0, out, &freed);
  assert_int_equal(n, 1);
  assert_int_equal(out[0], 2);
}

/* An image a container mounts as a volume is in use: however much is to
 * free, it is not chosen (upstream handleImageVolumes). */
static void test_image_mounts(void **state) {
  (void)state;
  nl_gc_image_t im[] = {
      {"sha256:app", 100, 0, 10 * S, false, false},
      {"sha256:data", 100, 0, 10 * S, false, false},
  };
  Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
  spec.image = "sha256:data";
  Runtime__V1__Mount vol = RUNTIME__V1__MOUNT__INIT, host = RUNTIME__V1__MOUNT__INIT;
  vol.image = &spec;
  host.host_path = "/srv";
  Runtime__V1__Mount *mounts[] = {&host, &vol};
  Runtime__V1__ContainerStatus st = RUNTIME__V1__CONTAINER_STATUS__INIT;
  st.mounts = mounts;
  st.n_mounts = 2;
  assert_int_equal(nl_gc_mark_image_mounts(im, 2, &st, 100 * S), 1);
  assert_true(im[1].in_use);
  assert_int_equal(im[1].last_used_ns, 100 * S);
  assert_false(im[0].in_use);
  size_t out[2];
  uint64_t freed;
  size_t n = nl_gc_select_images(im, 2, 100 * S, 0, 0, UINT64_MAX, out, &freed);
  assert_int_equal(n, 1);
  assert_int_equal(out[0], 0);
  assert_int_equal(nl_gc_mark_image_mounts(im, 2, NULL, 0), 0);
}

static void test_bytes_to_free(void **state) {
  (void)state;
  /* 90 % full, high 85: down to 80 % means 20 available */
  assert_int_equal(nl_gc_image_bytes_to_free(1000, 100, 85, 80), 100);
  assert_int_equal(nl_gc_image_bytes_to_free(1000, 200, 85, 80), 0); /* 80 % < 85 */
  assert_int_equal(nl_gc_image_bytes_to_free(1000, 150, 85, 80), 50);  /* exactly 85 % */
  assert_int_equal(nl_gc_image_bytes_to_free(0, 0, 85, 80), 0);
}

static void test_logdir_uid(void **state) {
  (void)state;
  assert_string_equal(nl_gc_logdir_uid("default_web_1234-ab"), "1234-ab");
  assert_string_equal(nl_gc_logdir_uid("kube-system_a_b_uid"), "uid");
  assert_null(nl_gc_logdir_uid("nouid"));
  assert_null(nl_gc_logdir_uid("one_"));
  assert_null(nl_gc_logdir_uid("ns_uid"));
  /* a deleted pod's directory goes once it has no sandbox; another agent's
   * (another runtime, the same podLogsDir) and a known pod's stay */
  nl_gc_sandbox_t s[] = {{"s-1", "d2", 10 * S, 0, false}};
  assert_true(nl_gc_logdir_removable("ns_web_d1", s, 1, by_prefix, NULL));
  assert_false(nl_gc_logdir_removable("ns_web_d2", s, 1, by_prefix, NULL));
  assert_false(nl_gc_logdir_removable("ns_web_f1", s, 1, by_prefix, NULL));
  assert_false(nl_gc_logdir_removable("ns_web_a1", s, 1, by_prefix, NULL));
  assert_false(nl_gc_logdir_removable("nouid", s, 1, by_prefix, NULL));
}

/* upstream's legacy log symlinks: their place and name, and which ones the
 * container GC removes (those whose container's log directory is gone). */
static void test_log_links(void **state) {
  (void)state;
  char *d = nl_rt_log_links_dir("/var/log/pods");
  assert_string_equal(d, "/var/log/containers");
  free(d);
  d = nl_rt_log_links_dir("/srv/logs/pods/");
  assert_string_equal(d, "/srv/logs/containers");
  free(d);
  char *l = nl_rt_log_link_path("/var/log/containers", "web", "default", "c", "0123abcd");
  assert_string_equal(l, "/var/log/containers/web_default_c-0123abcd.log");
  free(l);
  char longname[300];
  memset(longname, 'p', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  l = nl_rt_log_link_path("/x", longname, "ns", "c", "id");
  assert_int_equal(strlen(strrchr(l, '/') + 1), 255);
  assert_string_equal(l + strlen(l) - 4, ".log");
  free(l);

  char tmp[] = "/tmp/nl-gc-links-XXXXXX";
  assert_non_null(mkdtemp(tmp));
  char *pods = nl_xasprintf("%s/pods", tmp), *links = nl_rt_log_links_dir(pods);
  char *cdir = nl_xasprintf("%s/ns_a_u1/c", pods), *log = nl_xasprintf("%s/0.log", cdir);
  char *rot = nl_xasprintf("%s/ns_a_u1/r", pods);
  assert_int_equal(mkdir(pods, 0755), 0);
  assert_int_equal(mkdir(links, 0755), 0);
  char *pdir = nl_xasprintf("%s/ns_a_u1", pods);
  assert_int_equal(mkdir(pdir, 0755), 0);
  free(pdir);
  assert_int_equal(mkdir(cdir, 0755), 0);
  assert_int_equal(mkdir(rot, 0755), 0);
  FILE *f = fopen(log, "w");
  assert_non_null(f);
  fclose(f);
  char *live = nl_xasprintf("%s/a_ns_c-1.log", links), *rotating = nl_xasprintf("%s/a_ns_r-2.log", links),
       *dead = nl_xasprintf("%s/b_ns_c-3.log", links), *rlog = nl_xasprintf("%s/0.log", rot),
       *gone = nl_xasprintf("%s/ns_b_u2/c/0.log", pods);
  assert_int_equal(symlink(log, live), 0);
  assert_int_equal(symlink(rlog, rotating), 0); /* its directory is there, the file not */
  assert_int_equal(symlink(gone, dead), 0);
  assert_int_equal(nl_gc_sweep_log_links(links), 1);
  struct stat st;
  assert_int_equal(lstat(live, &st), 0);
  assert_int_equal(lstat(rotating, &st), 0);
  assert_int_equal(lstat(dead, &st), -1);
  assert_int_equal(nl_gc_sweep_log_links("/nonexistent/containers"), 0);
  char *cmd = nl_xasprintf("rm -rf %s", tmp);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  free(pods), free(links), free(cdir), free(log), free(rot), free(live), free(rotating), free(dead);
  free(rlog), free(gone);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_max_per_pod_container),
      cmocka_unit_test(test_newest_by_attempt),
      cmocka_unit_test(test_min_age),
      cmocka_unit_test(test_deleted_terminated_foreign),
      cmocka_unit_test(test_max_containers),
      cmocka_unit_test(test_sandboxes),
      cmocka_unit_test(test_images),
      cmocka_unit_test(test_image_mounts),
      cmocka_unit_test(test_bytes_to_free),
      cmocka_unit_test(test_logdir_uid),
      cmocka_unit_test(test_log_links),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
