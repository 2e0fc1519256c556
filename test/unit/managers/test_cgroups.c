/* The container manager against a temporary directory laid out like a cgroup
 * filesystem (v1: a directory per controller; v2: cgroup.controllers at the
 * top): names, what each cgroup is given, start-up checks, pods' cgroups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "managers/cgroups.h"
#include "reactor/xalloc.h"
#include "rt_test_util.h"

static char root[64];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/nanolet-cgroups-XXXXXX");
  return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char *cmd = nl_xasprintf("rm -rf '%s'", root);
  int rc = system(cmd);
  free(cmd);
  return rc;
}

static void put(const char *rel, const char *data) {
  char *p = nl_xasprintf("%s/%s", root, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(data, f);
  fclose(f);
  free(p);
}

static void dir(const char *rel) {
  char *p = nl_xasprintf("%s/%s", root, rel);
  assert_int_equal(mkdir(p, 0755), 0);
  free(p);
}

/* The file's contents, or "(absent)". Static buffer. */
static const char *get(const char *rel) {
  static char buf[256];
  char *p = nl_xasprintf("%s/%s", root, rel);
  FILE *f = fopen(p, "r");
  free(p);
  if (!f) return "(absent)";
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

static bool exists(const char *rel) {
  char *p = nl_xasprintf("%s/%s", root, rel);
  bool ok = access(p, F_OK) == 0;
  free(p);
  return ok;
}

static void v1_tree(void) {
  dir("cpu");
  dir("cpuacct");
  dir("memory");
  dir("pids");
  dir("cpuset");
  put("cpuset/cpuset.cpus", "0-1\n");
  put("cpuset/cpuset.mems", "0\n");
}

static int64_t burstable_300m(void *ctx) {
  (void)ctx;
  return 300;
}

static nl_cgroups_opts_t opts(void) {
  static char swaps[96];
  snprintf(swaps, sizeof swaps, "%s/swaps", root);
  put("swaps", "Filename\tType\tSize\tUsed\tPriority\n");
  return (nl_cgroups_opts_t){
      .fs_root = root,
      .swaps = swaps,
      .per_qos = true,
      .cfs_quota = true,
      .fail_swap_on = true,
      .capacity = {2000, 1LL << 30, 4096},
      .system_reserved = {-1, -1, -1},
      .kube_reserved = {500, 256LL << 20, 96},
      .enforce_pods = true,
      .burstable_cpu = burstable_300m,
  };
}

#define GUARANTEED                                                                               \
  "apiVersion: v1\nkind: Pod\nmetadata: {name: g, namespace: ns, uid: 11-22}\nspec:\n"           \
  "  containers:\n  - {name: a, image: b, resources: {limits: {cpu: 250m, memory: 64Mi}}}\n" \
  "  - {name: c, image: b, resources: {limits: {cpu: 250m, memory: 64Mi}}}\n"
#define BURSTABLE                                                                          \
  "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: ns, uid: 33-44}\nspec:\n"     \
  "  containers:\n  - {name: a, image: b, resources: {requests: {cpu: 100m}, limits: "    \
  "{cpu: 500m, memory: 32Mi}}}\n  - {name: c, image: b}\n"
#define BESTEFFORT                                                                     \
  "apiVersion: v1\nkind: Pod\nmetadata: {name: e, namespace: ns, uid: 55-66}\nspec:\n" \
  "  containers: [{name: a, image: b}]\n"

static void test_conversions(void **state) {
  (void)state;
  assert_int_equal(nl_cgroups_milli_to_shares(0), 2);
  assert_int_equal(nl_cgroups_milli_to_shares(1), 2);
  assert_int_equal(nl_cgroups_milli_to_shares(100), 102);
  assert_int_equal(nl_cgroups_milli_to_shares(1000000), 262144);
  assert_int_equal(nl_cgroups_milli_to_quota(0, 100000), 0);
  assert_int_equal(nl_cgroups_milli_to_quota(5, 100000), 1000);
  assert_int_equal(nl_cgroups_milli_to_quota(250, 100000), 25000);
  assert_int_equal(nl_cgroups_shares_to_weight(2), 1);
  assert_int_equal(nl_cgroups_shares_to_weight(1024), 39);
  assert_int_equal(nl_cgroups_shares_to_weight(262144), 10000);
}

static void test_names(void **state) {
  (void)state;
  char *s = nl_cgroups_name_systemd("/kubepods/burstable/pod1234-5678");
  assert_string_equal(s, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice");
  free(s);
  s = nl_cgroups_name_systemd("/");
  assert_string_equal(s, "/");
  free(s);
  s = nl_cgroups_name_parse("/system.slice/system-kube_x.slice", true);
  assert_string_equal(s, "/system/kube-x");
  free(s);
  s = nl_cgroups_name_parse("", false);
  assert_string_equal(s, "/");
  free(s);
  s = nl_cgroups_name_parse("edge/pods/", false);
  assert_string_equal(s, "/edge/pods");
  free(s);
}

static void test_pod_res(void **state) {
  (void)state;
  nl_pod_t *g = pod_from_yaml(GUARANTEED), *b = pod_from_yaml(BURSTABLE), *e = pod_from_yaml(BESTEFFORT);
  nl_cgroup_res_t r = nl_cgroups_pod_res(g, true, 0);
  assert_int_equal(r.cpu_shares, 512);
  assert_int_equal(r.cpu_quota, 50000);
  assert_int_equal(r.cpu_period, 100000);
  assert_int_equal(r.memory, 128LL << 20);
  assert_int_equal(r.pids, 0);
  /* no quota without cpuCFSQuota: -1, the kernel's "none" */
  assert_int_equal(nl_cgroups_pod_res(g, false, 0).cpu_quota, -1);
  /* one container without limits: shares only */
  r = nl_cgroups_pod_res(b, true, 100);
  assert_int_equal(r.cpu_shares, 102);
  assert_int_equal(r.cpu_quota, 0);
  assert_int_equal(r.memory, 0);
  assert_int_equal(r.pids, 100);
  r = nl_cgroups_pod_res(e, true, 0);
  assert_int_equal(r.cpu_shares, 2);
  assert_int_equal(r.memory, 0);
  /* pod-level resources bound the pod cgroup though its containers have none
   * (upstream ResourceConfigForPod with PodLevelResources) */
  nl_pod_t *pl = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: pl, namespace: ns, uid: 77-88}\nspec:\n"
      "  resources: {requests: {cpu: 100m}, limits: {cpu: 300m, memory: 64Mi}}\n"
      "  containers:\n  - {name: a, image: b}\n  - {name: c, image: b, resources: {limits: "
      "{memory: 16Mi}}}\n");
  r = nl_cgroups_pod_res(pl, true, 0);
  assert_int_equal(r.cpu_shares, 102);
  assert_int_equal(r.cpu_quota, 30000);
  assert_int_equal(r.cpu_period, 100000);
  assert_int_equal(r.memory, 64 << 20);
  nl_pod_free(pl);
  nl_pod_free(g);
  nl_pod_free(b);
  nl_pod_free(e);
}

static void stopped(nl_cgroups_t *cg) { *(int *)cg->ctx += 1; }

static void stop_and_close(uv_loop_t *loop, nl_cgroups_t *cg) {
  int done = 0;
  cg->ctx = &done;
  nl_cgroups_stop(cg, stopped);
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(done, 1);
  assert_int_equal(uv_loop_close(loop), 0);
}

static void test_v1_hierarchy_and_pods(void **state) {
  (void)state;
  v1_tree();
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_cgroups_t cg;
  nl_err_t *err = NULL;
  nl_cgroups_opts_t o = opts();
  assert_int_equal(nl_cgroups_init(&cg, &loop, &o, &err), 0);
  /* kubepods: capacity minus kubeReserved */
  assert_string_equal(get("memory/kubepods/memory.limit_in_bytes"), "805306368");
  assert_string_equal(get("cpu/kubepods/cpu.shares"), "1536");
  assert_string_equal(get("pids/kubepods/pids.max"), "4000");
  assert_string_equal(get("cpuset/kubepods/cpuset.cpus"), "0-1");
  assert_string_equal(get("cpu/kubepods/besteffort/cpu.shares"), "2");
  assert_string_equal(get("cpu/kubepods/burstable/cpu.shares"), "307");
  assert_true(exists("cpuacct/kubepods/burstable"));

  nl_pod_t *g = pod_from_yaml(GUARANTEED), *b = pod_from_yaml(BURSTABLE);
  char *parent = nl_cgroups_pod_parent(&cg, g);
  assert_string_equal(parent, "/kubepods/pod11-22");
  free(parent);
  parent = nl_cgroups_pod_parent(&cg, b);
  assert_string_equal(parent, "/kubepods/burstable/pod33-44");
  free(parent);
  assert_int_equal(nl_cgroups_pod_ensure(&cg, g, &err), 0);
  assert_string_equal(get("cpu/kubepods/pod11-22/cpu.shares"), "512");
  assert_string_equal(get("cpu/kubepods/pod11-22/cpu.cfs_period_us"), "100000");
  assert_string_equal(get("cpu/kubepods/pod11-22/cpu.cfs_quota_us"), "50000");
  assert_string_equal(get("memory/kubepods/pod11-22/memory.limit_in_bytes"), "134217728");
  /* Repaired: a hierarchy lost from one controller comes back. */
  char *rm = nl_xasprintf("rm -rf '%s/memory/kubepods/pod11-22'", root);
  assert_int_equal(system(rm), 0);
  free(rm);
  assert_int_equal(nl_cgroups_pod_ensure(&cg, g, &err), 0);
  assert_string_equal(get("memory/kubepods/pod11-22/memory.limit_in_bytes"), "134217728");

  /* Destroy: every hierarchy, the runtime's child cgroups too, and a hybrid
   * host's unified one (where runc puts the containers as well). */
  dir("devices");
  dir("devices/kubepods");
  dir("devices/kubepods/pod11-22");
  dir("devices/kubepods/pod11-22/sandbox");
  dir("cpu/kubepods/pod11-22/container");
  dir("unified");
  dir("unified/kubepods");
  dir("unified/kubepods/pod11-22");
  dir("unified/kubepods/pod11-22/container");
  assert_int_equal(nl_cgroups_pod_destroy(&cg, "11-22", &err), 0);
  assert_false(exists("cpu/kubepods/pod11-22"));
  assert_false(exists("memory/kubepods/pod11-22"));
  assert_false(exists("devices/kubepods/pod11-22"));
  assert_false(exists("unified/kubepods/pod11-22"));
  assert_true(exists("unified/kubepods"));
  assert_true(exists("cpu/kubepods/burstable"));
  /* a pod that has none: nothing to do */
  assert_int_equal(nl_cgroups_pod_destroy(&cg, "77-88", &err), 0);

  nl_cgroups_start(&cg);
  nl_cgroups_update_qos(&cg);
  stop_and_close(&loop, &cg);
  nl_pod_free(g);
  nl_pod_free(b);
}

/* A pod's hugetlb limits (the hugetlb controller and two page sizes): each
 * size the pod's request of it, 0 for a size it does not ask for; without the
 * controller, nothing is written. */
#define HUGE                                                                              \
  "apiVersion: v1\nkind: Pod\nmetadata: {name: h, namespace: ns, uid: 77-99}\nspec:\n"  \
  "  containers:\n  - {name: a, image: b, resources: {limits: {cpu: 100m, memory: 64Mi, " \
  "hugepages-2Mi: 6Mi}}}\n"
static void test_hugetlb(void **state) {
  (void)state;
  v1_tree();
  dir("hp");
  dir("hp/hugepages-2048kB");
  dir("hp/hugepages-1048576kB");
  char hp[96];
  snprintf(hp, sizeof hp, "%s/hp", root);
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_cgroups_t cg;
  nl_err_t *err = NULL;
  nl_cgroups_opts_t o = opts();
  o.hugepages_dir = hp;
  /* no hugetlb hierarchy: the limits go nowhere */
  assert_int_equal(nl_cgroups_init(&cg, &loop, &o, &err), 0);
  nl_pod_t *h = pod_from_yaml(HUGE);
  assert_int_equal(nl_cgroups_pod_ensure(&cg, h, &err), 0);
  assert_false(exists("hugetlb"));
  assert_string_equal(get("memory/kubepods/pod77-99/memory.limit_in_bytes"), "67108864");
  assert_int_equal(nl_cgroups_pod_destroy(&cg, "77-99", &err), 0);
  stop_and_close(&loop, &cg);

  dir("hugetlb");
  uv_loop_init(&loop);
  assert_int_equal(nl_cgroups_init(&cg, &loop, &o, &err), 0);
  assert_int_equal(nl_cgroups_pod_ensure(&cg, h, &err), 0);
  assert_string_equal(get("hugetlb/kubepods/pod77-99/hugetlb.2MB.limit_in_bytes"), "6291456");
  assert_string_equal(get("hugetlb/kubepods/pod77-99/hugetlb.1GB.limit_in_bytes"), "0");
  stop_and_close(&loop, &cg);
  nl_pod_free(h);
}

static void test_v2(void **state) {
  (void)state;
  put("cgroup.controllers", "cpuset cpu io memory pids\n");
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_cgroups_t cg;
  nl_err_t *err = NULL;
  nl_cgroups_opts_t o = opts();
  o.pod_pids_limit = 50;
  assert_int_equal(nl_cgroups_init(&cg, &loop, &o, &err), 0);
  assert_true(cg.v2);
  assert_string_equal(get("kubepods/memory.max"), "805306368");
  assert_string_equal(get("kubepods/cpu.weight"), "59");
  assert_string_equal(get("kubepods/burstable/cpu.weight"), "12");
  assert_string_equal(get("kubepods/besteffort/cpu.weight"), "1");
  assert_true(exists("cgroup.subtree_control"));
  assert_true(exists("kubepods/cgroup.subtree_control"));
  nl_pod_t *g = pod_from_yaml(GUARANTEED), *e = pod_from_yaml(BESTEFFORT);
  assert_int_equal(nl_cgroups_pod_ensure(&cg, g, &err), 0);
  assert_string_equal(get("kubepods/pod11-22/cpu.max"), "50000 100000");
  assert_string_equal(get("kubepods/pod11-22/memory.max"), "134217728");
  assert_string_equal(get("kubepods/pod11-22/pids.max"), "50");
  assert_int_equal(nl_cgroups_pod_ensure(&cg, e, &err), 0);
  assert_string_equal(get("kubepods/besteffort/pod55-66/cpu.weight"), "1");
  assert_string_equal(get("kubepods/besteffort/pod55-66/memory.max"), "(absent)");
  assert_int_equal(nl_cgroups_pod_destroy(&cg, "55-66", &err), 0);
  assert_false(exists("kubepods/besteffort/pod55-66"));
  stop_and_close(&loop, &cg);
  nl_pod_free(g);
  nl_pod_free(e);
}

static void test_systemd(void **state) {
  (void)state;
  v1_tree();
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_cgroups_t cg;
  nl_err_t *err = NULL;
  nl_cgroups_opts_t o = opts();
  o.systemd = true;
  o.systemd_dir = nl_xasprintf("%s/run-systemd-system", root);
  assert_int_equal(nl_cgroups_init(&cg, &loop, &o, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "systemd is not running"));
  nl_err_free(&err);
  stop_and_close(&loop, &cg);

  dir("run-systemd-system");
  uv_loop_init(&loop);
  assert_int_equal(nl_cgroups_init(&cg, &loop, &o, &err), 0);
  assert_string_equal(get("cpu/kubepods.slice/kubepods-besteffort.slice/cpu.shares"), "2");
  nl_pod_t *b = pod_from_yaml(BURSTABLE);
  char *parent = nl_cgroups_pod_parent(&cg, b);
  assert_string_equal(parent,
                      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod33_44.slice");
  assert_int_equal(nl_cgroups_pod_ensure(&cg, b, &err), 0);
  char *rel = nl_xasprintf("cpu%s/cpu.shares", parent);
  assert_string_equal(get(rel), "102");
  free(rel);
  free(parent);
  assert_int_equal(nl_cgroups_pod_destroy(&cg, "33-44", &err), 0);
  assert_false(exists("cpu/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod33_44.slice"));
  stop_and_close(&loop, &cg);
  nl_pod_free(b);
  free((char *)o.systemd_dir);
}

static void expect_init_error(nl_cgroups_opts_t *o, const char *want) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_cgroups_t cg;
  nl_err_t *err = NULL;
  assert_int_equal(nl_cgroups_init(&cg, &loop, o, &err), -1);
  if (!strstr(nl_err_msg(err), want)) fail_msg("error %s, want %s", nl_err_msg(err), want);
  nl_err_free(&err);
  stop_and_close(&loop, &cg);
}

static void test_start_up_checks(void **state) {
  (void)state;
  nl_cgroups_opts_t o = opts();
  expect_init_error(&o, "failed to find subsystem mount for required subsystem: cpu");
  v1_tree();
  put("swaps", "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1024 0 -2\n");
  expect_init_error(&o, "running with swap on is not supported, please disable swap or set "
                        "--fail-swap-on flag to false");
  o.fail_swap_on = false;
  o.cgroup_root = "/edge";
  expect_init_error(&o, "invalid configuration: cgroup-root \"/edge\" doesn't exist");
  o.cgroup_root = NULL;
  o.enforce_system_reserved = true;
  o.system_reserved_cgroup = "/system.slice";
  o.system_reserved = (nl_cgroups_amounts_t){100, 64LL << 20, -1};
  expect_init_error(&o, "Failed to enforce System Reserved Cgroup Limits on \"/system.slice\"");
  /* an existing one gets the reservation as its limits */
  static const char *const ctrls[] = {"cpu", "cpuacct", "cpuset", "memory", "pids"};
  for (size_t i = 0; i < 5; i++) {
    char *d = nl_xasprintf("%s/system.slice", ctrls[i]);
    dir(d);
    free(d);
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_cgroups_t cg;
  nl_err_t *err = NULL;
  if (nl_cgroups_init(&cg, &loop, &o, &err) < 0) fail_msg("%s", nl_err_msg(err));
  assert_string_equal(get("cpu/system.slice/cpu.shares"), "102");
  assert_string_equal(get("memory/system.slice/memory.limit_in_bytes"), "67108864");
  /* kubepods: both reservations off the capacity */
  assert_string_equal(get("memory/kubepods/memory.limit_in_bytes"), "738197504");
  stop_and_close(&loop, &cg);
}

/* kubeletCgroups: the agent creates the cgroup in every hierarchy (a hybrid
 * host's unified one too) and writes its pid to each cgroup.procs; a cgroup
 * that cannot be made fails the start with its name. */
static void test_kubelet_cgroups(void **state) {
  (void)state;
  v1_tree();
  dir("unified");
  nl_err_t *err = NULL;
  if (nl_cgroups_join_self(root, "/kubelet", &err) < 0) fail_msg("%s", nl_err_msg(err));
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  const char *procs[] = {"cpu/kubelet/cgroup.procs", "cpuacct/kubelet/cgroup.procs",
                         "memory/kubelet/cgroup.procs", "pids/kubelet/cgroup.procs",
                         "cpuset/kubelet/cgroup.procs", "unified/kubelet/cgroup.procs"};
  for (size_t i = 0; i < sizeof procs / sizeof *procs; i++) assert_string_equal(get(procs[i]), pid);
  /* v1 memory: what the agent holds moves with it */
  assert_string_equal(get("memory/kubelet/memory.move_charge_at_immigrate"), "3");
  /* the new cpuset cgroup has its parent's cpus */
  assert_string_equal(get("cpuset/kubelet/cpuset.cpus"), "0-1");
  put("memory/blocked", "a file where the directory would go\n");
  assert_int_equal(nl_cgroups_join_self(root, "/blocked/kubelet", &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "kubeletCgroups /blocked/kubelet"));
  nl_err_free(&err);
}

static void test_without_qos(void **state) {
  (void)state;
  v1_tree();
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_cgroups_t cg;
  nl_err_t *err = NULL;
  nl_cgroups_opts_t o = opts();
  o.per_qos = false;
  o.enforce_pods = false;
  assert_int_equal(nl_cgroups_init(&cg, &loop, &o, &err), 0);
  assert_false(exists("cpu/kubepods"));
  nl_pod_t *g = pod_from_yaml(GUARANTEED);
  char *parent = nl_cgroups_pod_parent(&cg, g);
  assert_string_equal(parent, ""); /* the runtime's default */
  free(parent);
  assert_int_equal(nl_cgroups_pod_ensure(&cg, g, &err), 0);
  assert_false(exists("cpu/kubepods"));
  stop_and_close(&loop, &cg);
  nl_pod_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conversions),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_pod_res),
      cmocka_unit_test_setup_teardown(test_v1_hierarchy_and_pods, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hugetlb, setup, teardown),
      cmocka_unit_test_setup_teardown(test_systemd, setup, teardown),
      cmocka_unit_test_setup_teardown(test_start_up_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_without_qos, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kubelet_cgroups, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
