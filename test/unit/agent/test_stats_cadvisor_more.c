/* /metrics/cadvisor's cgroup and /proc parsers (agent/stats_cadvisor_more.c)
 * on fixture files in the kernel's formats (test/fixtures/cgroup), and the
 * reading of a cgroup tree whose cgroup.procs holds this test's own process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/stats.h"
#include "file_tree.h"
#include "reactor/xalloc.h"

static char *fixture(const char *name) {
  char *path = nl_xasprintf("%s/cgroup/%s", FIXTURES, name);
  char *t = nl__stats_slurp(path);
  if (!t) fail_msg("fixture %s unreadable", path);
  free(path);
  return t;
}

/* v1: bytes and operations per device and op; "Total N" alone is no device */
static void blkio_v1(void **state) {
  (void)state;
  nl_cgroup_more_t m = {0};
  char *b = fixture("blkio.throttle.io_service_bytes"), *n = fixture("blkio.throttle.io_serviced");
  nl_cadvisor_parse_blkio(&m, b, false);
  nl_cadvisor_parse_blkio(&m, n, true);
  assert_int_equal(m.n_devs, 2);
  assert_true(m.devs[0].major == 8 && m.devs[0].minor == 0);
  assert_true(m.devs[0].bytes[NL_IO_READ] == 1048576 && m.devs[0].bytes[NL_IO_WRITE] == 8192);
  assert_true(m.devs[0].ios[NL_IO_READ] == 64 && m.devs[0].ios[NL_IO_WRITE] == 2);
  assert_true(m.devs[0].bytes[NL_IO_TOTAL] == 1056768);
  assert_int_equal(m.devs[0].has, (1u << NL_IO_OPS) - 1);
  assert_true(m.devs[1].major == 254 && m.devs[1].bytes[NL_IO_WRITE] == 4096 &&
              m.devs[1].ios[NL_IO_WRITE] == 1);
  free(b), free(n);
  nl_cgroup_more_free(&m);
  /* no I/O accounted (this kernel without a throttle rule): no device */
  b = fixture("blkio.throttle.io_service_bytes.empty");
  nl_cadvisor_parse_blkio(&m, b, false);
  assert_int_equal(m.n_devs, 0);
  free(b);
  /* at most NL_CADVISOR_MAX_DEVS devices, whatever the file says */
  nl_buf_t many = NL_BUF_INIT;
  for (int i = 0; i < 40; i++) nl_buf_printf(&many, "7:%d Read %d\n", i, i);
  nl_cadvisor_parse_blkio(&m, many.data, false);
  assert_int_equal(m.n_devs, NL_CADVISOR_MAX_DEVS);
  nl_buf_free(&many);
  nl_cgroup_more_free(&m);
}

/* v2 io.stat: rbytes/wbytes/dbytes as Read/Write/Discard bytes, rios/wios/dios as operations */
static void io_stat_v2(void **state) {
  (void)state;
  nl_cgroup_more_t m = {0};
  char *t = fixture("io.stat");
  nl_cadvisor_parse_io_stat(&m, t);
  assert_int_equal(m.n_devs, 2);
  assert_true(m.devs[0].major == 254 && m.devs[0].bytes[NL_IO_READ] == 2097152 &&
              m.devs[0].bytes[NL_IO_WRITE] == 40960 && m.devs[0].ios[NL_IO_READ] == 128 &&
              m.devs[0].ios[NL_IO_WRITE] == 10);
  assert_int_equal(m.devs[0].has,
                   (1u << NL_IO_READ) | (1u << NL_IO_WRITE) | (1u << NL_IO_DISCARD));
  assert_true(m.devs[1].major == 7 && m.devs[1].bytes[NL_IO_READ] == 4096);
  free(t);
  nl_cgroup_more_free(&m);
  nl_cadvisor_parse_io_stat(&m, "garbage\n1:2 rbytes\n");
  assert_int_equal(m.n_devs, 1); /* the device, without figures */
  assert_int_equal(m.devs[0].has, 0);
  nl_cgroup_more_free(&m);
}

static void proc_limits(void **state) {
  (void)state;
  int64_t soft = 0;
  char *t = fixture("proc_limits");
  assert_true(nl_cadvisor_parse_nofile(t, &soft));
  assert_int_equal(soft, 20000);
  free(t);
  t = fixture("proc_limits.unlimited");
  assert_true(nl_cadvisor_parse_nofile(t, &soft));
  assert_int_equal(soft, -1);
  free(t);
  assert_false(nl_cadvisor_parse_nofile("Max processes 5 5 processes\n", &soft));
  assert_false(nl_cadvisor_parse_nofile("Max open files  x\n", &soft));
}

static void cpuacct_and_diskstats(void **state) {
  (void)state;
  uint64_t u = 0, s = 0, f[11] = {0};
  char *t = fixture("cpuacct.stat");
  assert_true(nl_cadvisor_parse_cpuacct_stat(t, 100, &u, &s));
  assert_true(u == 2500000000ull && s == 1250000000ull);
  free(t);
  assert_false(nl_cadvisor_parse_cpuacct_stat("user 1\n", 100, &u, &s));
  t = fixture("diskstats");
  assert_true(nl_cadvisor_parse_diskstats(t, "vda", f));
  assert_true(f[0] == 1000 && f[1] == 20 && f[2] == 8000 && f[3] == 1500 && f[4] == 2000 &&
              f[8] == 3 && f[9] == 4000 && f[10] == 5000);
  assert_true(nl_cadvisor_parse_diskstats(t, "vda1", f) && f[0] == 10);
  assert_false(nl_cadvisor_parse_diskstats(t, "sdz", f));
  free(t);
}

/* A v1 tree read whole: the process figures are this test's own (two more
 * sockets open than before), the rest the fixture files'. */
static void read_tree(void **state) {
  (void)state;
  char *root = nl_xstrdup("/tmp/nl-cadvisor-more-XXXXXX");
  assert_non_null(mkdtemp(root));
  char *b = fixture("blkio.throttle.io_service_bytes"), *n = fixture("blkio.throttle.io_serviced");
  char *ca = fixture("cpuacct.stat"), *procs = nl_xasprintf("%d\n", (int)getpid());
  put_file(root, "blkio/k/c/blkio.throttle.io_service_bytes", b);
  put_file(root, "blkio/k/c/blkio.throttle.io_serviced", n);
  put_file(root, "cpuacct/k/c/cpuacct.stat", ca);
  put_file(root, "memory/k/c/memory.stat",
           "cache 1\nmapped_file 2\npgfault 300\npgmajfault 4\ntotal_cache 4096\n"
           "total_mapped_file 8192\ntotal_swap 0\n");
  put_file(root, "memory/k/c/memory.failcnt", "0\n");
  put_file(root, "memory/k/c/memory.max_usage_in_bytes", "5242880\n");
  put_file(root, "memory/k/c/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  put_file(root, "memory/k/c/memory.soft_limit_in_bytes", "9223372036854771712\n");
  put_file(root, "memory/k/c/memory.memsw.limit_in_bytes", "83886080\n");
  put_file(root, "pids/k/c/pids.current", "3\n");
  put_file(root, "pids/k/c/pids.max", "max\n");
  put_file(root, "cpu/k/c/cgroup.procs", procs);
  nl_cgroup_more_t before, m;
  nl_cgroup_more_read(&before, root, false, "/k/c", true);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  nl_cgroup_more_read(&m, root, false, "/k/c", true);
  close(sv[0]), close(sv[1]);
  long hz = sysconf(_SC_CLK_TCK);
  assert_true(m.cpu && m.user_ns == 250 * (1000000000ull / (uint64_t)hz));
  assert_true(m.mem && m.cache == 4096 && m.mapped_file == 8192 && m.swap == 0);
  assert_true(m.pgfault == 300 && m.pgmajfault == 4);
  assert_true(m.failcnt && m.failcnt_v == 0 && m.max_usage && m.max_usage_v == 5242880);
  assert_true(m.oom && m.oom_kills == 1);
  assert_true(m.mem_spec && m.reservation == 0 && m.swap_limit == 83886080);
  assert_true(m.threads && m.threads_v == 3 && m.threads_max == 0);
  assert_int_equal(m.n_devs, 2);
  assert_true(m.procs && m.processes == 1);
  assert_true(m.fds >= 3 && m.fds == before.fds + 2);
  assert_true(m.sockets == before.sockets + 2);
  assert_true(m.nofile && (m.nofile_soft == -1 || m.nofile_soft > 0));
  nl_cgroup_more_free(&before), nl_cgroup_more_free(&m);
  /* a cgroup that is gone: nothing known */
  nl_cgroup_more_read(&m, root, false, "/k/gone", true);
  assert_false(m.cpu || m.mem || m.procs || m.threads || m.failcnt || m.n_devs);
  nl_cgroup_more_free(&m);
  /* v2: the same figures from the unified hierarchy's files */
  put_file(root, "u/c/cpu.stat", "usage_usec 9\nuser_usec 2000000\nsystem_usec 500000\n");
  put_file(root, "u/c/memory.stat", "anon 1\nfile 12288\nfile_mapped 4096\npgfault 7\npgmajfault 1\n");
  put_file(root, "u/c/memory.swap.current", "0\n");
  put_file(root, "u/c/memory.events", "low 0\nhigh 0\nmax 2\noom 0\noom_kill 0\n");
  put_file(root, "u/c/memory.peak", "65536\n");
  put_file(root, "u/c/memory.low", "0\n");
  put_file(root, "u/c/memory.swap.max", "max\n");
  put_file(root, "u/c/pids.current", "1\n");
  put_file(root, "u/c/pids.max", "100\n");
  char *io = fixture("io.stat");
  put_file(root, "u/c/io.stat", io);
  char *u = nl_xasprintf("%s/u", root);
  nl_cgroup_more_read(&m, u, true, "/c", false);
  assert_true(m.cpu && m.user_ns == 2000000000ull && m.system_ns == 500000000ull);
  assert_true(m.mem && m.cache == 12288 && m.mapped_file == 4096 && m.pgfault == 7);
  assert_true(m.failcnt && m.failcnt_v == 2 && m.oom && m.oom_kills == 0);
  assert_true(m.max_usage && m.max_usage_v == 65536);
  assert_true(m.mem_spec && m.reservation == 0 && m.swap_limit == 0);
  assert_true(m.threads && m.threads_v == 1 && m.threads_max == 100);
  assert_int_equal(m.n_devs, 2);
  assert_false(m.procs);
  nl_cgroup_more_free(&m);
  free(u), free(io), free(b), free(n), free(ca), free(procs);
  rm_tree(root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(blkio_v1),      cmocka_unit_test(io_stat_v2),
      cmocka_unit_test(proc_limits),   cmocka_unit_test(cpuacct_and_diskstats),
      cmocka_unit_test(read_tree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
