/* /stats/summary and /metrics/resource: the /proc parsers on fixture text, the
 * JSON and text from fixture CRI stats (CPU rates from two samples), and the
 * whole request through the HTTP server and the CRI client against the fake. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "reactor/xalloc.h"
#include "agent/stats.h"
#include "reactor/http_client.h"
#include "reactor/http_server.h"
#include "test/fakes/fake_cri_harness.h"
#include "file_tree.h"

static const char proc_stat[] =
    "cpu  100 20 30 4000 50 6 7 8 0 0\ncpu0 50 10 15 2000 25 3 3 4 0 0\n"
    "intr 1 2 3\nctxt 99\nbtime 1700000000\nprocesses 1234\n";
static const char meminfo[] = "MemTotal:        2000000 kB\nMemFree:          500000 kB\n"
                              "MemAvailable:    1200000 kB\nInactive(file):   300000 kB\n"
                              "AnonPages:        400000 kB\nSwapTotal:       1000000 kB\n"
                              "SwapFree:         750000 kB\n";
static const char vmstat[] = "nr_free_pages 1\npgfault 777\npgmajfault 5\n";
static const char net_dev[] =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
    "drop fifo colls carrier compressed\n"
    "    lo: 999 9 0 0 0 0 0 0 999 9 0 0 0 0 0 0\n"
    "  eth0: 1000 10 1 0 0 0 0 0 2000 20 2 0 0 0 0 0\n"
    "cni0: 30 3 0 0 0 0 0 0 40 4 0 0 0 0 0 0\n";

static void parsers(void **state) {
  (void)state;
  nl_node_sample_t s = {0};
  assert_int_equal(nl_stats_parse_proc_stat(&s, proc_stat), 0);
  long hz = sysconf(_SC_CLK_TCK);
  /* busy: user nice system irq softirq steal = 100+20+30+6+7+8 */
  assert_true(s.cpu_ns == 171ull * (1000000000ull / (unsigned long long)hz));
  assert_int_equal(s.boot_time_s, 1700000000);
  assert_int_equal(nl_stats_parse_meminfo(&s, meminfo), 0);
  assert_true(s.mem_total == 2000000ull * 1024 && s.mem_free == 500000ull * 1024);
  assert_true(s.inactive_file == 300000ull * 1024 && s.anon == 400000ull * 1024);
  nl_stats_parse_faults(&s, vmstat);
  assert_true(s.pgfault == 777 && s.pgmajfault == 5);
  nl_stats_parse_net_dev(&s, net_dev);
  assert_int_equal(s.n_ifs, 2);
  assert_string_equal(s.ifs[0].name, "eth0");
  assert_true(s.ifs[0].rx == 1000 && s.ifs[0].rx_errors == 1 && s.ifs[0].tx == 2000 &&
              s.ifs[0].tx_errors == 2);
  assert_string_equal(s.ifs[1].name, "cni0");
  assert_int_equal(nl_stats_parse_proc_stat(&s, "intr 1\n"), -1);
  assert_int_equal(nl_stats_parse_meminfo(&s, "Cached: 1 kB\n"), -1);
}

/* PSI files as the kernel writes them: /proc/pressure/cpu of a kernel
 * before 5.13 has no "full" line (full reads zero); a file without a
 * well-formed "some" line is refused. */
static void psi_parser(void **state) {
  (void)state;
  nl_psi_t p;
  assert_int_equal(nl_stats_parse_psi(&p, "some avg10=73.80 avg60=49.15 avg300=37.70 total=6301042287\n"
                                          "full avg10=1.50 avg60=0.25 avg300=0.00 total=1234\n"), 0);
  assert_true(p.ok);
  assert_true(p.some.avg10 > 73.79 && p.some.avg10 < 73.81);
  assert_true(p.some.avg300 > 37.69 && p.some.avg300 < 37.71);
  assert_int_equal(p.some.total, 6301042287ull);
  assert_true(p.full.avg10 > 1.49 && p.full.avg10 < 1.51);
  assert_int_equal(p.full.total, 1234);
  assert_int_equal(nl_stats_parse_psi(&p, "some avg10=0.00 avg60=0.00 avg300=0.00 total=9\n"), 0);
  assert_int_equal(p.some.total, 9);
  assert_int_equal(p.full.total, 0);
  assert_int_equal(nl_stats_parse_psi(&p, "full avg10=0.00 avg60=0.00 avg300=0.00 total=9\n"), -1);
  assert_false(p.ok);
  assert_int_equal(nl_stats_parse_psi(&p, "some avg10=x\n"), -1);
  assert_int_equal(nl_stats_parse_psi(&p, ""), -1);
}

/* /proc/<pid>/cgroup: a v1 hierarchy by any of its controllers, the unified
 * one by its empty list; nothing for a controller not mounted. */
static void proc_cgroup_parser(void **state) {
  (void)state;
  const char *hybrid = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/3291d2\n"
                       "2:cpu,cpuacct:/kubelet\n0::/kubelet.slice\n";
  char out[64];
  assert_int_equal(nl_stats_parse_proc_cgroup(hybrid, "memory", out, sizeof out), 0);
  assert_string_equal(out, "/process_api/3291d2");
  assert_int_equal(nl_stats_parse_proc_cgroup(hybrid, "cpuacct", out, sizeof out), 0);
  assert_string_equal(out, "/kubelet");
  assert_int_equal(nl_stats_parse_proc_cgroup(hybrid, "cpu", out, sizeof out), 0);
  assert_string_equal(out, "/kubelet");
  assert_int_equal(nl_stats_parse_proc_cgroup(hybrid, "", out, sizeof out), 0);
  assert_string_equal(out, "/kubelet.slice");
  assert_int_equal(nl_stats_parse_proc_cgroup(hybrid, "blkio", out, sizeof out), -1);
  assert_int_equal(nl_stats_parse_proc_cgroup("0::/\n", "", out, sizeof out), 0);
  assert_string_equal(out, "/");
  assert_int_equal(nl_stats_parse_proc_cgroup("4:memory:/a/very/long/path\n", "memory", out, 8), -1);
  assert_int_equal(nl_stats_parse_proc_cgroup("garbage", "memory", out, sizeof out), -1);
}

/* nl__stats_slurp: a file past the first 16 KiB whole, NULL for what cannot be
 * opened or read (a directory opens, and its read fails with EISDIR). */
static void slurp(void **state) {
  (void)state;
  char path[] = "/tmp/nanolet-test-slurp.XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  size_t n = 3 * 16384 + 7;
  char *want = nl_xmalloc(n + 1);
  for (size_t i = 0; i < n; i++) want[i] = (char)('a' + i % 26);
  want[n] = 0;
  assert_int_equal(write(fd, want, n), (ssize_t)n);
  close(fd);
  char *got = nl__stats_slurp(path);
  assert_non_null(got);
  assert_string_equal(got, want);
  free(got);
  unlink(path);
  free(want);
  assert_null(nl__stats_slurp(path));
  assert_null(nl__stats_slurp("/"));
}

/* One pod "web" with container "c": cpu core-ns and working set given. */
typedef struct fixture_pods {
  Runtime__V1__UInt64Value core, ws, ccore, cws, used;
  Runtime__V1__CpuUsage cpu, ccpu;
  Runtime__V1__MemoryUsage mem, cmem;
  Runtime__V1__PodSandboxMetadata md;
  Runtime__V1__PodSandboxAttributes attrs;
  Runtime__V1__ContainerMetadata cmd;
  Runtime__V1__ContainerAttributes cattrs;
  Runtime__V1__FilesystemUsage wl;
  Runtime__V1__ContainerStats cs, *csp;
  Runtime__V1__LinuxPodSandboxStats linux;
  Runtime__V1__PodSandboxStats ps, *psp;
  Runtime__V1__ListPodSandboxStatsResponse resp;
} fixture_pods_t;

static void fixture(fixture_pods_t *f, int64_t ts, uint64_t pod_core, uint64_t ctr_core) {
  memset(f, 0, sizeof *f);
  runtime__v1__list_pod_sandbox_stats_response__init(&f->resp);
  f->core.value = pod_core, f->ws.value = 5u << 20, f->ccore.value = ctr_core;
  f->cws.value = 4u << 20, f->used.value = 12345;
  f->cpu = (Runtime__V1__CpuUsage){.timestamp = ts, .usage_core_nano_seconds = &f->core};
  f->ccpu = (Runtime__V1__CpuUsage){.timestamp = ts, .usage_core_nano_seconds = &f->ccore};
  f->mem = (Runtime__V1__MemoryUsage){.timestamp = ts, .working_set_bytes = &f->ws};
  f->cmem = (Runtime__V1__MemoryUsage){.timestamp = ts, .working_set_bytes = &f->cws};
  f->md = (Runtime__V1__PodSandboxMetadata){.name = "web", .namespace_ = "edge", .uid = "u-1"};
  f->attrs = (Runtime__V1__PodSandboxAttributes){.id = "sb1", .metadata = &f->md};
  f->cmd = (Runtime__V1__ContainerMetadata){.name = "c"};
  f->cattrs = (Runtime__V1__ContainerAttributes){.id = "c1", .metadata = &f->cmd};
  f->wl = (Runtime__V1__FilesystemUsage){.timestamp = ts, .used_bytes = &f->used};
  f->cs = (Runtime__V1__ContainerStats){.attributes = &f->cattrs, .cpu = &f->ccpu,
                                        .memory = &f->cmem, .writable_layer = &f->wl};
  f->csp = &f->cs;
  f->linux = (Runtime__V1__LinuxPodSandboxStats){.cpu = &f->cpu, .memory = &f->mem,
                                                 .n_containers = 1, .containers = &f->csp};
  f->ps = (Runtime__V1__PodSandboxStats){.attributes = &f->attrs, .linux = &f->linux};
  f->psp = &f->ps;
  f->resp.n_stats = 1;
  f->resp.stats = &f->psp;
}

static json_t *summary(nl_stats_t *st, const nl_node_sample_t *n, fixture_pods_t *f) {
  nl_buf_t out = NL_BUF_INIT;
  nl_stats_summary_json(st, "edge-1", n, f ? &f->resp : NULL, NULL, &out);
  json_error_t e;
  json_t *j = json_loads(out.data, 0, &e);
  if (!j) fail_msg("%s: %s", e.text, out.data);
  nl_buf_free(&out);
  return j;
}

static uint64_t u(json_t *j, const char *path) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", path);
  json_t *x = j;
  for (char *save, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
    x = isdigit((unsigned char)*k) ? json_array_get(x, (size_t)atoi(k)) : json_object_get(x, k);
  if (!json_is_integer(x)) fail_msg("%s: not a number", path);
  return (uint64_t)json_integer_value(x);
}

static bool has(json_t *j, const char *path) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", path);
  json_t *x = j;
  for (char *save, *k = strtok_r(buf, ".", &save); k && x; k = strtok_r(NULL, ".", &save))
    x = isdigit((unsigned char)*k) ? json_array_get(x, (size_t)atoi(k)) : json_object_get(x, k);
  return x != NULL;
}

static void summary_json(void **state) {
  (void)state;
  nl_stats_t st;
  nl_stats_init(&st);
  nl_node_sample_t n = {.time_ns = 1700000100000000000, .cpu_ns = 50000000000};
  nl_stats_parse_meminfo(&n, meminfo);
  nl_stats_parse_net_dev(&n, net_dev);
  n.root_fs = (nl_stats_fs_t){true, 1000, 400, 600, 100, 60};
  n.maxpid = 4194304, n.curproc = 321, n.boot_time_s = 1700000000;
  fixture_pods_t f;
  fixture(&f, n.time_ns, 2000000000, 1000000000);
  json_t *j = summary(&st, &n, &f);
  /* first round: no rates yet */
  assert_false(has(j, "node.cpu.usageNanoCores"));
  assert_false(has(j, "pods.0.cpu.usageNanoCores"));
  assert_string_equal(json_string_value(json_object_get(json_object_get(j, "node"), "nodeName")),
                      "edge-1");
  assert_true(u(j, "node.cpu.usageCoreNanoSeconds") == 50000000000ull);
  /* usage = total - free; working set = usage - inactive file; available = total - ws */
  assert_true(u(j, "node.memory.usageBytes") == 1500000ull * 1024);
  assert_true(u(j, "node.memory.workingSetBytes") == 1200000ull * 1024);
  assert_true(u(j, "node.memory.availableBytes") == 800000ull * 1024);
  assert_true(u(j, "node.memory.rssBytes") == 400000ull * 1024);
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(json_object_get(j, "node"), "network"), "name")),
                      "eth0");
  assert_true(u(j, "node.network.interfaces.1.txBytes") == 40);
  assert_true(u(j, "node.fs.capacityBytes") == 1000 && u(j, "node.fs.inodesUsed") == 40);
  assert_true(u(j, "node.rlimit.maxpid") == 4194304 && u(j, "node.rlimit.curproc") == 321);
  assert_true(u(j, "pods.0.memory.workingSetBytes") == 5u << 20);
  assert_true(u(j, "pods.0.containers.0.rootfs.usedBytes") == 12345);
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(json_array_get(json_object_get(j, "pods"), 0), "podRef"),
                          "namespace")),
                      "edge");
  json_decref(j);

  /* 2 s later: the node used 1 core, the pod half a core, the container 0.25 */
  n.time_ns += 2000000000;
  n.cpu_ns += 2000000000;
  fixture(&f, n.time_ns, 3000000000, 1500000000);
  j = summary(&st, &n, &f);
  assert_true(u(j, "node.cpu.usageNanoCores") == 1000000000);
  assert_true(u(j, "pods.0.cpu.usageNanoCores") == 500000000);
  assert_true(u(j, "pods.0.containers.0.cpu.usageNanoCores") == 250000000);
  json_decref(j);

  /* asked again 150 ms later, the container idle meanwhile: the last rates,
   * not a rate over 150 ms */
  n.time_ns += 150000000;
  n.cpu_ns += 300000000;
  fixture(&f, n.time_ns, 3000000000, 1500000000);
  j = summary(&st, &n, &f);
  assert_true(u(j, "node.cpu.usageNanoCores") == 1000000000);
  assert_true(u(j, "pods.0.containers.0.cpu.usageNanoCores") == 250000000);
  json_decref(j);

  /* the pod is gone: its samples are forgotten, the node's stay */
  n.time_ns += 1000000000;
  j = summary(&st, &n, NULL);
  assert_int_equal(json_array_size(json_object_get(j, "pods")), 0);
  json_decref(j);
  assert_int_equal(nl_map_size(&st.prev), 1);
  nl_stats_free(&st);
}

/* Names from the runtime that are not UTF-8 are sent as Go sends them (U+FFFD),
 * not dropped with their keys. */
static void names_not_utf8(void **state) {
  (void)state;
  nl_stats_t st;
  nl_stats_init(&st);
  nl_node_sample_t n = {.time_ns = 1700000100000000000, .cpu_ns = 50000000000};
  fixture_pods_t f;
  fixture(&f, n.time_ns, 2000000000, 1000000000);
  f.md.name = "caf\xe9";
  f.cmd.name = "\xff";
  json_t *j = summary(&st, &n, &f);
  json_t *pod = json_array_get(json_object_get(j, "pods"), 0);
  assert_string_equal(json_string_value(json_object_get(json_object_get(pod, "podRef"), "name")),
                      "caf\xef\xbf\xbd");
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(json_object_get(pod, "containers"), 0), "name")),
      "\xef\xbf\xbd");
  json_decref(j);
  nl_stats_free(&st);
}

static void resource_metrics(void **state) {
  (void)state;
  nl_node_sample_t n = {.time_ns = 1700000100000000000, .cpu_ns = 12500000000};
  nl_stats_parse_meminfo(&n, meminfo);
  fixture_pods_t f;
  fixture(&f, n.time_ns, 2000000000, 1000000000);
  nl_buf_t out = NL_BUF_INIT;
  /* a restarted container's exited instance: not shown (upstream's summary) */
  Runtime__V1__ContainerStats old = f.cs;
  old.cpu = NULL, old.memory = NULL;
  Runtime__V1__ContainerStats *two[] = {&old, &f.cs};
  f.linux.containers = two, f.linux.n_containers = 2;
  nl_stats_resource_metrics(&n, &f.resp, NULL, false, &out);
  const char *want[] = {
      "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the "
      "container in core-seconds\n# TYPE container_cpu_usage_seconds_total counter\n"
      "container_cpu_usage_seconds_total{container=\"c\",namespace=\"edge\",pod=\"web\"} 1 "
      "1700000100000\n",
      "container_memory_working_set_bytes{container=\"c\",namespace=\"edge\",pod=\"web\"} "
      "4.194304e+06 1700000100000\n",
      "node_cpu_usage_seconds_total 12.5 1700000100000\n",
      "node_memory_working_set_bytes 1.2288e+09 1700000100000\n",
      "pod_cpu_usage_seconds_total{namespace=\"edge\",pod=\"web\"} 2 1700000100000\n",
      "pod_memory_working_set_bytes{namespace=\"edge\",pod=\"web\"} 5.24288e+06 1700000100000\n",
      "# TYPE node_cpu_usage_seconds_total counter\n",
      /* the node's swap from /proc/meminfo: SwapTotal - SwapFree */
      "# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only "
      "on non-windows systems\n# TYPE node_swap_usage_bytes gauge\nnode_swap_usage_bytes 2.56e+08 "
      "1700000100000\n",
      /* no cgroups, no figures from the runtime: zeros, as upstream */
      "container_swap_usage_bytes{container=\"c\",namespace=\"edge\",pod=\"web\"} 0 1700000100000\n",
      "container_swap_limit_bytes{container=\"c\",namespace=\"edge\",pod=\"web\"} 0 1700000100000\n",
      "pod_swap_usage_bytes{namespace=\"edge\",pod=\"web\"} 0 1700000100000\n",
      "\nresource_scrape_error 0\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(out.data, want[i])) fail_msg("missing %s in\n%s", want[i], out.data);
  /* upstream hides the deprecated scrape_error; no start time unknown */
  assert_null(strstr(out.data, "\nscrape_error"));
  assert_null(strstr(out.data, "container_start_time_seconds"));
  /* every series once, the families in upstream's order (by name) */
  const char *order[] = {"container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
                         "container_swap_limit_bytes", "container_swap_usage_bytes",
                         "node_cpu_usage_seconds_total", "node_memory_working_set_bytes",
                         "node_swap_usage_bytes", "pod_cpu_usage_seconds_total",
                         "pod_memory_working_set_bytes", "pod_swap_usage_bytes",
                         "resource_scrape_error"};
  const char *at = out.data;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    char *h = nl_xasprintf("# HELP %s ", order[i]), *x = nl_xasprintf("\n%s{container=\"c\"", order[i]);
    const char *next = strstr(at, h);
    if (!next) fail_msg("%s not after the previous family in\n%s", order[i], out.data);
    at = next + 1;
    const char *first = strstr(out.data, x);
    if (first) assert_null(strstr(first + 1, x));
    free(h), free(x);
  }
  nl_buf_free(&out);
}

/* ---- /metrics/cadvisor -------------------------------------------------------- */

#define POD_CG "/kubepods/burstable/podu-1"

static const char psi_text[] = "some avg10=1.50 avg60=0.50 avg300=0.10 total=777\n"
                               "full avg10=0.25 avg60=0.00 avg300=0.00 total=99\n";

/* A hybrid v1 host's cgroup files (cpuacct and memory hierarchies, the
 * unified one with the pressure files): the system containers "pods"
 * (kubepods) and "misc" (the root's own processes: its CPU less its
 * children's, v1's root memory.stat keys without total_), the pods' and
 * containers' pressure, through the JSON a user reads. */
static void system_containers(void **state) {
  (void)state;
  char root[] = "/tmp/nanolet-test-cgroups.XXXXXX";
  assert_non_null(mkdtemp(root));
  put_file(root, "cpuacct/cpuacct.usage", "9000000000\n");
  put_file(root, "cpuacct/other/cpuacct.usage", "1000000000\n");
  put_file(root, "cpuacct/kubepods/cpuacct.usage", "3000000000\n");
  put_file(root, "memory/memory.stat",
           "cache 1000000\nrss 3000000\ninactive_file 500000\npgfault 2000\npgmajfault 3\n"
           "total_cache 90000000\ntotal_rss 80000000\ntotal_inactive_file 7000000\n");
  put_file(root, "memory/kubepods/memory.usage_in_bytes", "50000000\n");
  put_file(root, "memory/kubepods/memory.limit_in_bytes", "200000000\n");
  put_file(root, "memory/kubepods/memory.stat",
           "pgfault 0\npgmajfault 0\ntotal_rss 30000000\ntotal_inactive_file 10000000\n");
  put_file(root, "pids/kubepods/podu-1/pids.current", "4\n");
  put_file(root, "unified/kubepods/cpu.pressure", psi_text);
  put_file(root, "unified/kubepods/memory.pressure", psi_text);
  put_file(root, "unified/kubepods/io.pressure", psi_text);
  put_file(root, "unified/kubepods/podu-1/cpu.pressure", psi_text);
  put_file(root, "unified/kubepods/podu-1/c1/memory.pressure", psi_text);

  nl_stats_t st;
  nl_stats_init(&st);
  nl_node_sample_t n = {.time_ns = 1700000100000000000, .cpu_ns = 50000000000,
                        .boot_time_s = 1700000000};
  nl_stats_parse_meminfo(&n, meminfo);
  fixture_pods_t f;
  fixture(&f, n.time_ns, 2000000000, 1000000000);
  nl_cadvisor_t c = {0};
  nl_cadvisor_pod_t cp = {.cgroup = "/kubepods/podu-1", .n_ctrs = 1};
  nl_cadvisor_ctr_t cc = {0};
  cp.ctrs = &cc;
  c.pods = &cp, c.n_pods = 1;
  nl_summary_sys_t x = {.fs_root = nl_xstrdup(root), .misc = true,
                        .pods_cgroup = nl_xstrdup("/kubepods")};
  nl_summary_sys_read(&x, &c, &f.resp);
  nl_buf_t out = NL_BUF_INIT;
  nl_stats_summary_json_ext(&st, "edge-1", &n, &f.resp, NULL, &x, &c, &out);
  json_t *j = json_loads(out.data, 0, NULL);
  assert_non_null(j);
  nl_buf_free(&out);
  json_t *sys = json_object_get(json_object_get(j, "node"), "systemContainers");
  const char *names[] = {"kubelet", "runtime", "pods", "misc"};
  assert_int_equal(json_array_size(sys), 4);
  for (size_t i = 0; i < 4; i++)
    assert_string_equal(json_string_value(json_object_get(json_array_get(sys, i), "name")), names[i]);
  /* pods: kubepods' usage, working set = usage - total_inactive_file, its limit */
  assert_true(u(j, "node.systemContainers.2.cpu.usageCoreNanoSeconds") == 3000000000ull);
  assert_true(u(j, "node.systemContainers.2.memory.usageBytes") == 50000000);
  assert_true(u(j, "node.systemContainers.2.memory.workingSetBytes") == 40000000);
  assert_true(u(j, "node.systemContainers.2.memory.availableBytes") == 160000000);
  assert_true(u(j, "node.systemContainers.2.memory.rssBytes") == 30000000);
  assert_true(u(j, "node.systemContainers.2.cpu.psi.some.total") == 777);
  assert_true(u(j, "node.systemContainers.2.memory.psi.full.total") == 99);
  assert_true(has(j, "node.systemContainers.2.io.psi.some.avg10"));
  /* misc: 9 s - 1 s - 3 s of CPU; the root's own rss + cache; no limit */
  assert_true(u(j, "node.systemContainers.3.cpu.usageCoreNanoSeconds") == 5000000000ull);
  assert_true(u(j, "node.systemContainers.3.memory.usageBytes") == 4000000);
  assert_true(u(j, "node.systemContainers.3.memory.workingSetBytes") == 3500000);
  assert_true(u(j, "node.systemContainers.3.memory.rssBytes") == 3000000);
  assert_true(u(j, "node.systemContainers.3.memory.pageFaults") == 2000);
  assert_false(has(j, "node.systemContainers.3.memory.availableBytes"));
  /* the pod's and its container's pressure from their cgroups; pids.current */
  assert_true(u(j, "pods.0.cpu.psi.some.total") == 777);
  assert_false(has(j, "pods.0.memory.psi"));
  assert_true(u(j, "pods.0.containers.0.memory.psi.full.total") == 99);
  assert_true(u(j, "pods.0.process_stats.process_count") == 4);
  json_decref(j);
  nl_summary_sys_free(&x);
  nl_stats_free(&st);
  char *rm = nl_xasprintf("rm -rf %s", root);
  assert_int_equal(system(rm), 0);
  free(rm);
}


/* A cgroup v1 tree: the pod's usage and limits, the container's limits. */
static char *v1_tree(void) {
  char *root = nl_xstrdup("/tmp/nl-cadvisor-XXXXXX");
  assert_non_null(mkdtemp(root));
  put_file(root, "cpuacct" POD_CG "/cpuacct.usage", "3000000000\n");
  put_file(root, "memory" POD_CG "/memory.usage_in_bytes", "10485760\n");
  put_file(root, "memory" POD_CG "/memory.stat",
           "cache 1\nrss 2\ntotal_cache 4194304\ntotal_rss 3145728\ntotal_inactive_file 2097152\n");
  put_file(root, "memory" POD_CG "/memory.limit_in_bytes", "9223372036854771712\n");
  put_file(root, "cpu" POD_CG "/cpu.shares", "102\n");
  put_file(root, "cpu" POD_CG "/cpu.cfs_quota_us", "-1\n");
  put_file(root, "cpu" POD_CG "/cpu.cfs_period_us", "100000\n");
  put_file(root, "cpu" POD_CG "/c1/cpu.shares", "102\n");
  put_file(root, "cpu" POD_CG "/c1/cpu.cfs_quota_us", "50000\n");
  put_file(root, "cpu" POD_CG "/c1/cpu.cfs_period_us", "100000\n");
  put_file(root, "memory" POD_CG "/c1/memory.limit_in_bytes", "67108864\n");
  /* the rest of cAdvisor's figures of the container (stats_cadvisor_more.c) */
  put_file(root, "cpuacct" POD_CG "/c1/cpuacct.stat", "user 0\nsystem 0\n");
  put_file(root, "memory" POD_CG "/c1/memory.stat",
           "pgfault 300\npgmajfault 4\ntotal_cache 4096\ntotal_mapped_file 8192\ntotal_swap 0\n");
  put_file(root, "memory" POD_CG "/c1/memory.failcnt", "0\n");
  put_file(root, "memory" POD_CG "/c1/memory.soft_limit_in_bytes", "9223372036854771712\n");
  put_file(root, "pids" POD_CG "/c1/pids.current", "2\n");
  put_file(root, "pids" POD_CG "/c1/pids.max", "max\n");
  put_file(root, "blkio" POD_CG "/c1/blkio.throttle.io_service_bytes",
           "7:0 Read 4096\n7:0 Write 0\nTotal 4096\n");
  put_file(root, "blkio" POD_CG "/c1/blkio.throttle.io_serviced", "7:0 Read 1\n7:0 Write 0\nTotal 1\n");
  /* the root cgroup's I/O on the root filesystem's device, which diskstats counts too */
  struct stat st;
  assert_int_equal(stat("/", &st), 0);
  char *io = nl_xasprintf("%u:%u Read 5\n%u:%u Write 6\nTotal 11\n", major(st.st_dev),
                          minor(st.st_dev), major(st.st_dev), minor(st.st_dev));
  put_file(root, "blkio/blkio.throttle.io_serviced", io);
  put_file(root, "blkio/blkio.throttle.io_service_bytes", io);
  free(io);
  return root;
}

static void meta_pod(void *ctx, const char *uid, char **cgroup, char **sandbox_id) {
  (void)ctx;
  assert_string_equal(uid, "u-1");
  *cgroup = nl_xstrdup(POD_CG);
  *sandbox_id = nl_xstrdup("sb1");
}

static void meta_container(void *ctx, const char *uid, const char *id, char **image,
                           int64_t *created_ns) {
  (void)ctx;
  assert_string_equal(uid, "u-1");
  assert_string_equal(id, "c1");
  *image = nl_xstrdup("localhost/busybox:1.36");
  *created_ns = 1700000050000000000;
}

/* The text for one pod with one container, its cgroups from fixture files;
 * the runtime's network figures for the sandbox. */
static char *cadvisor_text(const char *fs_root, bool with_meta) {
  nl_node_sample_t n = {.time_ns = 1700000100000000000, .cpu_ns = 12500000000,
                        .boot_time_s = 1700000000};
  nl_stats_parse_meminfo(&n, meminfo);
  nl_stats_parse_net_dev(&n, net_dev);
  n.root_fs = (nl_stats_fs_t){true, 1000, 400, 600, 100, 60};
  fixture_pods_t f;
  fixture(&f, n.time_ns, 2000000000, 1000000000);
  Runtime__V1__UInt64Value rss = {.value = 1048576}, use = {.value = 8388608};
  f.cmem.rss_bytes = &rss, f.cmem.usage_bytes = &use;
  Runtime__V1__UInt64Value rx = {.value = 777}, tx = {.value = 888}, zero = {.value = 0};
  Runtime__V1__NetworkInterfaceUsage eth0 = {.name = "eth0", .rx_bytes = &rx, .tx_bytes = &tx,
                                             .rx_errors = &zero, .tx_errors = &zero};
  Runtime__V1__NetworkInterfaceUsage *ifs[] = {&eth0};
  Runtime__V1__NetworkUsage net = {.timestamp = n.time_ns, .default_interface = &eth0,
                                   .n_interfaces = 1, .interfaces = ifs};
  f.linux.network = &net;
  nl_stats_meta_t m = {.cgroup_fs = fs_root, .pod = meta_pod, .container = meta_container};
  nl_stats_meta_t none = {0};
  nl_cadvisor_t c;
  nl_cadvisor_prepare(&c, &f.resp, with_meta ? &m : &none);
  nl_cadvisor_read(&c, &f.resp, "/", NULL);
  snprintf(c.boot_id, sizeof c.boot_id, "b-1");
  snprintf(c.machine_id, sizeof c.machine_id, "m-1");
  snprintf(c.system_uuid, sizeof c.system_uuid, "s-1");
  c.cores = 2;
  nl_buf_t out = NL_BUF_INIT;
  nl_stats_cadvisor_metrics(&n, &f.resp, &c, false, &out);
  nl_cadvisor_free(&c);
  return out.data;
}

static void cadvisor_metrics(void **state) {
  (void)state;
  char *root = v1_tree();
  char *text = cadvisor_text(root, true);
#define CTR "container=\"c\",id=\"" POD_CG "/c1\",image=\"localhost/busybox:1.36\",name=\"c1\",namespace=\"edge\",pod=\"web\""
#define POD "container=\"\",id=\"" POD_CG "\",image=\"\",name=\"\",namespace=\"edge\",pod=\"web\""
#define SB "container=\"\",id=\"" POD_CG "/sb1\",image=\"\",interface=\"eth0\",name=\"sb1\",namespace=\"edge\",pod=\"web\""
#define ROOT "container=\"\",id=\"/\",image=\"\",name=\"\",namespace=\"\",pod=\"\""
  const char *want[] = {
      "# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.\n"
      "# TYPE container_cpu_usage_seconds_total counter\n",
      /* the container from the runtime, the pod from its cgroup, the root from /proc */
      "container_cpu_usage_seconds_total{container=\"c\",cpu=\"total\",id=\"" POD_CG
      "/c1\",image=\"localhost/busybox:1.36\",name=\"c1\",namespace=\"edge\",pod=\"web\"} 1 "
      "1700000100000\n",
      "container_cpu_usage_seconds_total{container=\"\",cpu=\"total\",id=\"" POD_CG
      "\",image=\"\",name=\"\",namespace=\"edge\",pod=\"web\"} 3 1700000100000\n",
      "container_cpu_usage_seconds_total{container=\"\",cpu=\"total\",id=\"/\",image=\"\",name=\"\","
      "namespace=\"\",pod=\"\"} 12.5 1700000100000\n",
      "container_memory_working_set_bytes{" CTR "} 4.194304e+06 1700000100000\n",
      "container_memory_rss{" CTR "} 1.048576e+06 1700000100000\n",
      "container_memory_usage_bytes{" CTR "} 8.388608e+06 1700000100000\n",
      /* pod: working set = usage - total_inactive_file; rss = total_rss */
      "container_memory_working_set_bytes{" POD "} 8.388608e+06 1700000100000\n",
      "container_memory_rss{" POD "} 3.145728e+06 1700000100000\n",
      "container_memory_usage_bytes{" POD "} 1.048576e+07 1700000100000\n",
      "container_memory_working_set_bytes{" ROOT "} 1.2288e+09 1700000100000\n",
      "container_fs_usage_bytes{container=\"c\",device=\"\",id=\"" POD_CG "/c1\"",
      "container_network_receive_bytes_total{" SB "} 777 1700000100000\n",
      "container_network_transmit_bytes_total{" SB "} 888 1700000100000\n",
      "container_network_receive_bytes_total{container=\"\",id=\"/\",image=\"\",interface=\"eth0\"",
      "container_spec_cpu_quota{" CTR "} 50000\n",
      "container_spec_memory_limit_bytes{" CTR "} 6.7108864e+07\n",
      "container_spec_memory_limit_bytes{" POD "} 0\n", /* unlimited, as cAdvisor */
      "container_spec_cpu_shares{" POD "} 102\n",
      "container_spec_cpu_period{" POD "} 100000\n",
      "container_start_time_seconds{" CTR "} 1.70000005e+09\n",
      "container_start_time_seconds{" ROOT "} 1.7e+09\n",
      "container_last_seen{" CTR "} 1.7000001e+09 1700000100000\n",
      "container_scrape_error 0\n",
      /* cgroup files: extra labels in their sorted places, usage with the time, spec without */
      "container_cpu_user_seconds_total{" CTR "} 0 1700000100000\n",
      "container_memory_cache{" CTR "} 4096 1700000100000\n",
      "container_memory_mapped_file{" CTR "} 8192 1700000100000\n",
      "container_memory_swap{" CTR "} 0 1700000100000\n",
      "container_memory_failcnt{" CTR "} 0 1700000100000\n",
      "container_memory_failures_total{container=\"c\",failure_type=\"pgmajfault\",id=\"" POD_CG
      "/c1\",image=\"localhost/busybox:1.36\",name=\"c1\",namespace=\"edge\",pod=\"web\","
      "scope=\"hierarchy\"} 4 1700000100000\n",
      "container_spec_memory_reservation_limit_bytes{" CTR "} 0\n",
      "container_threads{" CTR "} 2 1700000100000\n",
      "container_threads_max{" CTR "} 0 1700000100000\n",
      /* the device named after /sys/dev/block (loop0 where it exists) */
      "container_blkio_device_usage_total{container=\"c\",device=\"",
      ",major=\"7\",minor=\"0\",name=\"c1\",namespace=\"edge\",operation=\"Read\",pod=\"web\"} 4096 "
      "1700000100000\n",
      "container_fs_reads_bytes_total{container=\"c\",device=\"",
      "container_fs_reads_total{container=\"c\",device=\"",
      "container_fs_writes_total{container=\"c\",device=\"",
      /* the root's filesystem from statfs(2) */
      "container_fs_inodes_free{container=\"\",device=\"",
      "container_fs_limit_bytes{container=\"\",device=\"",
      "machine_cpu_cores{boot_id=\"b-1\",machine_id=\"m-1\",system_uuid=\"s-1\"} 2\n",
      "machine_memory_bytes{boot_id=\"b-1\",machine_id=\"m-1\",system_uuid=\"s-1\"} 2.048e+09\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(text, want[i])) fail_msg("missing %s in\n%s", want[i], text);
  /* every series once (Prometheus refuses a scrape with a duplicate) */
  size_t lines = 0;
  for (const char *p = text; *p; p = strchr(p, '\n') + 1) lines++;
  char **series = nl_xcalloc(lines, sizeof *series);
  size_t n = 0;
  for (const char *p = text; *p; p = strchr(p, '\n') + 1) {
    const char *end = strchr(p, '}');
    if (*p == '#' || !end || end > strchr(p, '\n')) continue;
    series[n++] = nl_xstrndup(p, (size_t)(end - p + 1));
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (strcmp(series[i], series[j]) == 0) fail_msg("twice: %s", series[i]);
  for (size_t i = 0; i < n; i++) free(series[i]);
  free(series);
  /* no cgroup.procs, no pids files of the pod: no such series */
  assert_null(strstr(text, "container_processes{" CTR));
  assert_null(strstr(text, "container_threads{" POD));
  /* the pod's quota is none: no series; the sandbox has the network only */
  assert_null(strstr(text, "container_spec_cpu_quota{" POD));
  assert_null(strstr(text, "container_memory_working_set_bytes{container=\"\",id=\"" POD_CG "/sb1"));
  free(text);
  /* without the kubelet's knowledge: containers from the runtime alone */
  text = cadvisor_text(root, false);
  assert_non_null(strstr(text, "container_cpu_usage_seconds_total{container=\"c\",cpu=\"total\",id=\"/c1\",image=\"\""));
  assert_null(strstr(text, "id=\"" POD_CG));
  free(text);
  rm_tree(root);
}

/* Swap from the pods' and containers' cgroups (v1: memory.stat's total_swap,
 * memory.memsw.limit_in_bytes) in /metrics/resource and /stats/summary, and the
 * containers' start time; the runtime's swap figures where no cgroup is read. */
static void swap_and_start_time(void **state) {
  (void)state;
  char *root = v1_tree();
  put_file(root, "memory" POD_CG "/memory.stat",
           "swap 1\ntotal_swap 1048576\ntotal_rss 3145728\ntotal_inactive_file 2097152\n");
  put_file(root, "memory" POD_CG "/memory.memsw.limit_in_bytes", "9223372036854771712\n");
  put_file(root, "memory" POD_CG "/c1/memory.stat", "swap 65536\ntotal_swap 65536\n");
  put_file(root, "memory" POD_CG "/c1/memory.memsw.limit_in_bytes", "100663296\n");
  nl_node_sample_t n = {.time_ns = 1700000100000000000, .cpu_ns = 12500000000};
  nl_stats_parse_meminfo(&n, meminfo);
  fixture_pods_t f;
  fixture(&f, n.time_ns, 2000000000, 1000000000);
  nl_stats_meta_t m = {.cgroup_fs = root, .pod = meta_pod, .container = meta_container};
  nl_cadvisor_t c;
  nl_cadvisor_prepare(&c, &f.resp, &m);
  nl_cadvisor_read_swap(&c, &f.resp);
  nl_buf_t out = NL_BUF_INIT;
  nl_stats_resource_metrics(&n, &f.resp, &c, false, &out);
#define LBL "{container=\"c\",namespace=\"edge\",pod=\"web\"}"
  const char *want[] = {
      /* upstream's start time has no timestamp */
      "# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch "
      "in seconds\n# TYPE container_start_time_seconds gauge\n"
      "container_start_time_seconds" LBL " 1.70000005e+09\n",
      "# HELP container_swap_limit_bytes [ALPHA] Current amount of the container swap limit in "
      "bytes. Reported only on non-windows systems\n",
      "container_swap_limit_bytes" LBL " 1.00663296e+08 1700000100000\n",
      "# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in "
      "bytes. Reported only on non-windows systems\n",
      "container_swap_usage_bytes" LBL " 65536 1700000100000\n",
      "# HELP pod_swap_usage_bytes [ALPHA] Current amount of the pod swap usage in bytes. Reported "
      "only on non-windows systems\n",
      "pod_swap_usage_bytes{namespace=\"edge\",pod=\"web\"} 1.048576e+06 1700000100000\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(out.data, want[i])) fail_msg("missing %s in\n%s", want[i], out.data);
  nl_buf_free(&out);

  /* the summary: the pod's limit is none (no swapAvailableBytes), the
   * container's leaves limit - usage; the node's from /proc/meminfo */
  nl_stats_t st;
  nl_stats_init(&st);
  nl_stats_summary_json_ext(&st, "edge-1", &n, &f.resp, NULL, NULL, &c, &out);
  json_t *j = json_loads(out.data, 0, NULL);
  assert_non_null(j);
  assert_true(u(j, "node.swap.swapUsageBytes") == 256000000);
  assert_true(u(j, "node.swap.swapAvailableBytes") == 768000000);
  assert_true(has(j, "node.swap.time"));
  assert_true(u(j, "pods.0.swap.swapUsageBytes") == 1048576);
  assert_false(has(j, "pods.0.swap.swapAvailableBytes"));
  assert_true(u(j, "pods.0.containers.0.swap.swapUsageBytes") == 65536);
  assert_true(u(j, "pods.0.containers.0.swap.swapAvailableBytes") == 100663296 - 65536);
  json_decref(j);
  nl_buf_free(&out);
  nl_cadvisor_free(&c);

  /* no cgroups: the runtime's figures; the pod's the sum of its containers' */
  Runtime__V1__UInt64Value su = {.value = 4096}, sa = {.value = 8192};
  Runtime__V1__SwapUsage sw = {.timestamp = n.time_ns - 1000000000, .swap_usage_bytes = &su,
                               .swap_available_bytes = &sa};
  f.cs.swap = &sw;
  nl_stats_resource_metrics(&n, &f.resp, NULL, false, &out);
  assert_non_null(strstr(out.data, "container_swap_usage_bytes" LBL " 4096 1700000099000\n"));
  assert_non_null(strstr(out.data, "container_swap_limit_bytes" LBL " 12288 1700000099000\n"));
  assert_non_null(strstr(out.data, "pod_swap_usage_bytes{namespace=\"edge\",pod=\"web\"} 4096 "));
#undef LBL
  nl_buf_free(&out);
  nl_stats_summary_json_ext(&st, "edge-1", &n, &f.resp, NULL, NULL, NULL, &out);
  j = json_loads(out.data, 0, NULL);
  assert_true(u(j, "pods.0.swap.swapAvailableBytes") == 8192);
  json_decref(j);
  nl_buf_free(&out);
  nl_stats_free(&st);
  rm_tree(root);
}

/* cgroup v2: cpu.stat, memory.current and memory.stat's inactive_file and
 * anon, memory.max, cpu.max and cpu.weight; the swap files (and v1's). */
static void cgroup_v2(void **state) {
  (void)state;
  char *root = nl_xstrdup("/tmp/nl-cadvisor-XXXXXX");
  assert_non_null(mkdtemp(root));
  put_file(root, "kubepods/pod1/cpu.stat", "usage_usec 2500000\nuser_usec 1\n");
  put_file(root, "kubepods/pod1/memory.current", "1000000\n");
  put_file(root, "kubepods/pod1/memory.stat", "anon 300000\nfile 5\ninactive_file 400000\n");
  put_file(root, "kubepods/pod1/memory.max", "max\n");
  put_file(root, "kubepods/pod1/cpu.max", "25000 100000\n");
  put_file(root, "kubepods/pod1/cpu.weight", "4\n");
  /* the swap files (v1's in its memory hierarchy) */
  static const char *const swap_files[][2] = {
      {"kubepods/pod1/memory.swap.current", "12288\n"},
      {"kubepods/pod1/memory.swap.max", "max\n"},
      {"kubepods/pod1/c1/memory.max", "83886080\n"},
      {"kubepods/pod1/c1/memory.swap.current", "4096\n"},
      {"kubepods/pod1/c1/memory.swap.max", "1048576\n"},
      {"memory/kubepods/pod2/memory.stat", "swap 1\ntotal_swap 7\n"},
  };
  for (size_t i = 0; i < sizeof swap_files / sizeof swap_files[0]; i++)
    put_file(root, swap_files[i][0], swap_files[i][1]);
  nl_cgroup_sample_t s;
  nl_cgroup_sample_read(&s, root, true, "/kubepods/pod1", true);
  assert_true(s.usage && s.spec);
  assert_true(s.cpu_ns == 2500000000ull && s.mem_usage == 1000000 && s.mem_ws == 600000);
  assert_true(s.mem_rss == 300000 && s.mem_limit == 0);
  assert_true(s.cpu_quota == 25000 && s.cpu_period == 100000);
  assert_int_equal(s.cpu_shares, 2 + 3 * 262142 / 9999);
  nl_cgroup_sample_read(&s, root, true, "/kubepods/gone", true);
  assert_false(s.usage || s.spec);

  /* swap as cAdvisor reads it: "max" is no limit; v1 without swap accounting
   * (no memsw file) a limit of 0; no cgroup: nothing read */
  nl_cgroup_swap_t sw;
  nl_cgroup_swap_read(&sw, root, true, "/kubepods/pod1");
  assert_true(sw.ok && sw.usage == 12288 && !sw.limited);
  nl_cgroup_swap_read(&sw, root, true, "/kubepods/pod1/c1");
  assert_true(sw.ok && sw.usage == 4096 && sw.limited && sw.limit == 1048576);
  nl_cgroup_swap_read(&sw, root, false, "/kubepods/pod2");
  assert_true(sw.ok && sw.usage == 7 && sw.limited && sw.limit == 0);
  nl_cgroup_swap_read(&sw, root, true, "/kubepods/gone");
  assert_false(sw.ok);
  rm_tree(root);
}

/* containerd 1.6 without pod cgroups: pods come from container labels, their
 * CPU and memory the sums of their containers'. */
static void pods_from_containers(void **state) {
  (void)state;
  Runtime__V1__UInt64Value core[3] = {{.value = 100}, {.value = 20}, {.value = 3}};
  Runtime__V1__UInt64Value ws[3] = {{.value = 1000}, {.value = 200}, {.value = 30}};
  Runtime__V1__CpuUsage cpu[3];
  Runtime__V1__MemoryUsage mem[3];
  Runtime__V1__ContainerStats cs[4], *csp[4];
  Runtime__V1__ContainerAttributes ca[4];
  Runtime__V1__ContainerMetadata cm[4] = {{.name = "a"}, {.name = "b"}, {.name = "c"}, {.name = "x"}};
  Runtime__V1__ContainerAttributes__LabelsEntry l[4][3], *lp[4][3];
  const char *pods[4] = {"web", "web", "db", NULL};
  for (int i = 0; i < 4; i++) {
    cs[i] = (Runtime__V1__ContainerStats){.attributes = &ca[i]};
    ca[i] = (Runtime__V1__ContainerAttributes){.id = "id", .metadata = &cm[i]};
    if (i < 3) {
      cpu[i] = (Runtime__V1__CpuUsage){.timestamp = 10 + i, .usage_core_nano_seconds = &core[i]};
      mem[i] = (Runtime__V1__MemoryUsage){.timestamp = 10 + i, .working_set_bytes = &ws[i]};
      cs[i].cpu = &cpu[i], cs[i].memory = &mem[i];
    }
    if (pods[i]) { /* the kubelet's labels; the last container has none */
      l[i][0] = (Runtime__V1__ContainerAttributes__LabelsEntry){.key = "io.kubernetes.pod.uid",
                                                                .value = (char *)pods[i]};
      l[i][1] = (Runtime__V1__ContainerAttributes__LabelsEntry){.key = "io.kubernetes.pod.name",
                                                                .value = (char *)pods[i]};
      l[i][2] = (Runtime__V1__ContainerAttributes__LabelsEntry){
          .key = "io.kubernetes.pod.namespace", .value = "edge"};
      for (int k = 0; k < 3; k++) lp[i][k] = &l[i][k];
      ca[i].n_labels = 3, ca[i].labels = lp[i];
    }
    csp[i] = &cs[i];
  }
  Runtime__V1__ListContainerStatsResponse r = {.n_stats = 4, .stats = csp};
  Runtime__V1__ListPodSandboxStatsResponse *p = nl_stats_pods_from_containers(&r);
  assert_int_equal(p->n_stats, 2);
  const Runtime__V1__PodSandboxStats *web = p->stats[0], *db = p->stats[1];
  assert_string_equal(web->attributes->metadata->name, "web");
  assert_string_equal(web->attributes->metadata->namespace_, "edge");
  assert_int_equal(web->linux->n_containers, 2);
  assert_int_equal(web->linux->cpu->usage_core_nano_seconds->value, 120);
  assert_int_equal(web->linux->cpu->timestamp, 11);
  assert_int_equal(web->linux->memory->working_set_bytes->value, 1200);
  assert_string_equal(db->attributes->metadata->uid, "db");
  assert_int_equal(db->linux->n_containers, 1);
  assert_int_equal(db->linux->memory->working_set_bytes->value, 30);
  nl_stats_pods_free(p);
}

/* ---- through the server, against the fake CRI ------------------------------ */

typedef struct served {
  harness_t h;
  nl_http_server_t srv;
  nl_stats_server_t stats;
  int answers, srv_stopped, stats_stopped;
  int status;
  char *body;
} served_t;

static void summary_route(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_stats_summary_handler(ctx, req, NULL, resp);
}
static void resource_route(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_stats_resource_handler(ctx, req, NULL, resp);
}

static void got(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {
  served_t *s = ctx;
  if (err) fail_msg("%s", nl_err_msg(err));
  s->status = resp->status;
  free(s->body);
  s->body = nl_steal(&resp->body);
  s->answers++;
}

static void srv_done(nl_http_server_t *srv, void *ctx) {
  (void)srv;
  (*(int *)ctx)++;
}
static void stats_done(void *ctx) { (*(int *)ctx)++; }

static void get(served_t *s, const char *path) {
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", nl_http_server_port(&s->srv), path);
  nl_http_request_opts_t o = {.url = url, .timeout_ms = 5000};
  int before = s->answers;
  nl_http_request(&s->h.loop, &o, got, s);
  harness_wait(&s->h, &s->answers, before + 1, 5000);
}

static void through_the_server(void **state) {
  (void)state;
  served_t s = {0};
  harness_start(&s.h, NULL);
  char id[65];
  assert_int_equal(fake_cri_add_container(s.h.fake, "web", "c", "busybox", id, sizeof id), 0);
  nl_err_t *err = NULL;
  assert_int_equal(nl_http_server_init(&s.srv, &s.h.loop, NULL, &err), 0);
  nl_stats_server_init(&s.stats, &s.h.loop, &s.h.client, "edge-1", "/");
  nl_http_server_route(&s.srv, "GET", "/stats/summary", summary_route, &s.stats);
  nl_http_server_route(&s.srv, "GET", "/metrics/resource", resource_route, &s.stats);
  assert_int_equal(nl_http_server_listen(&s.srv, "127.0.0.1", 0, &err), 0);

  get(&s, "/stats/summary");
  assert_int_equal(s.status, 200);
  json_t *j = json_loads(s.body, 0, NULL);
  assert_non_null(j);
  assert_true(u(j, "node.memory.workingSetBytes") > 0);
  assert_true(u(j, "node.fs.capacityBytes") > 0);
  assert_true(u(j, "node.runtime.imageFs.usedBytes") > 0); /* the fake's busybox */
  assert_int_equal(json_array_size(json_object_get(j, "pods")), 1);
  assert_true(u(j, "pods.0.containers.0.memory.workingSetBytes") == 8u << 20);
  json_decref(j);
  get(&s, "/metrics/resource");
  assert_int_equal(s.status, 200);
  assert_non_null(strstr(s.body, "pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} "
                                 "8.388608e+06 "));
  assert_non_null(strstr(s.body, "\nresource_scrape_error 0\n"));

  /* the runtime fails: the node's figures still come, scrape_error says so */
  fake_cri_fault_t fault = {.kind = FAKE_CRI_STATUS, .code = 14, .message = "down"};
  fake_cri_set_fault(s.h.fake, "ListPodSandboxStats", &fault);
  get(&s, "/metrics/resource");
  assert_non_null(strstr(s.body, "\nresource_scrape_error 1\n"));
  assert_non_null(strstr(s.body, "\nnode_cpu_usage_seconds_total "));

  nl_stats_server_stop(&s.stats, stats_done, &s.stats_stopped);
  nl_http_server_stop(&s.srv, srv_done, &s.srv_stopped);
  harness_finish(&s.h);
  assert_int_equal(s.stats_stopped, 1);
  assert_int_equal(s.srv_stopped, 1);
  free(s.body);
}

int main(int argc, char **argv) {
  /* --dump: the /metrics/cadvisor text of the fixture, for promtool (meson.build) */
  if (argc == 2 && strcmp(argv[1], "--dump") == 0) {
    char *root = v1_tree(), *text = cadvisor_text(root, true);
    fputs(text, stdout);
    free(text);
    rm_tree(root);
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cadvisor_metrics),
      cmocka_unit_test(cgroup_v2),
      cmocka_unit_test(swap_and_start_time),
      cmocka_unit_test(parsers),
      cmocka_unit_test(psi_parser),
      cmocka_unit_test(proc_cgroup_parser),
      cmocka_unit_test(system_containers),
      cmocka_unit_test(slurp),
      cmocka_unit_test(summary_json), cmocka_unit_test(names_not_utf8),
      cmocka_unit_test(resource_metrics),
      cmocka_unit_test(pods_from_containers),
      cmocka_unit_test(through_the_server),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
