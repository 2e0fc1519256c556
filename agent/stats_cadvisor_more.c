/* The rest of cAdvisor's per-cgroup figures for /metrics/cadvisor: CPU user
 * and system time, page cache, mapped files, swap, fail counts, peak usage,
 * OOM kills, the memory reservation and swap limit, threads (pids
 * controller), block I/O per device, and from the cgroup's processes their
 * count, file descriptors, sockets and the first one's open-files limit.
 * Read on the thread pool; every loop is bounded (devices, processes, fds). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/stats.h"
#include "reactor/xalloc.h"

/* Beyond these a scrape stops counting: a fork bomb or an fd leak must not
 * make /metrics/cadvisor slow (the counts then say "at least"). */
#define MAX_PIDS 4096
#define MAX_FDS 65536

const char *const nl_io_op_names[NL_IO_OPS] = {"Read", "Write", "Sync", "Async", "Discard", "Total"};

static nl_cadvisor_dev_t *dev(nl_cgroup_more_t *m, unsigned major, unsigned minor) {
  for (size_t i = 0; i < m->n_devs; i++)
    if (m->devs[i].major == major && m->devs[i].minor == minor) return &m->devs[i];
  if (m->n_devs == NL_CADVISOR_MAX_DEVS) return NULL;
  m->devs = nl_xrealloc(m->devs, (m->n_devs + 1) * sizeof *m->devs);
  nl_cadvisor_dev_t *d = &m->devs[m->n_devs++];
  memset(d, 0, sizeof *d);
  d->major = major, d->minor = minor;
  return d;
}

static int op_index(const char *op, size_t len) {
  for (int i = 0; i < NL_IO_OPS; i++)
    if (strlen(nl_io_op_names[i]) == len && strncmp(op, nl_io_op_names[i], len) == 0) return i;
  return -1;
}

void nl_cadvisor_parse_blkio(nl_cgroup_more_t *m, const char *text, bool ios) {
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    unsigned major, minor;
    char op[16];
    unsigned long long v;
    /* "Total N" alone (no device) is the sum cAdvisor does not report */
    if (sscanf(p, "%u:%u %15s %llu", &major, &minor, op, &v) != 4) continue;
    int i = op_index(op, strlen(op));
    nl_cadvisor_dev_t *d = i < 0 ? NULL : dev(m, major, minor);
    if (!d) continue;
    d->has |= 1u << i;
    (ios ? d->ios : d->bytes)[i] = v;
  }
}

void nl_cadvisor_parse_io_stat(nl_cgroup_more_t *m, const char *text) {
  static const struct {
    const char *key;
    int op;
    bool ios;
  } keys[] = {{"rbytes", NL_IO_READ, false}, {"wbytes", NL_IO_WRITE, false},
              {"rios", NL_IO_READ, true},    {"wios", NL_IO_WRITE, true},
              {"dbytes", NL_IO_DISCARD, false}, {"dios", NL_IO_DISCARD, true}};
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    unsigned major, minor;
    int n = 0;
    if (sscanf(p, "%u:%u%n", &major, &minor, &n) != 2) continue;
    nl_cadvisor_dev_t *d = dev(m, major, minor);
    if (!d) continue;
    const char *eol = strchr(p, '\n');
    for (const char *q = p + n; *q && (!eol || q < eol);) {
      while (*q == ' ') q++;
      const char *eq = strchr(q, '='), *sp = strpbrk(q, " \n");
      if (!eq || (sp && eq > sp)) break;
      for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if ((size_t)(eq - q) == strlen(keys[k].key) && strncmp(q, keys[k].key, eq - q) == 0) {
          d->has |= 1u << keys[k].op;
          (keys[k].ios ? d->ios : d->bytes)[keys[k].op] = strtoull(eq + 1, NULL, 10);
        }
      if (!sp) break;
      q = sp;
    }
  }
}

bool nl_cadvisor_parse_nofile(const char *text, int64_t *soft) {
  const char *p = strstr(text, "Max open files");
  if (!p) return false;
  p += strlen("Max open files");
  while (*p == ' ') p++;
  if (strncmp(p, "unlimited", 9) == 0) {
    *soft = -1;
    return true;
  }
  char *end;
  long long v = strtoll(p, &end, 10);
  if (end == p) return false;
  *soft = v;
  return true;
}

bool nl_cadvisor_parse_cpuacct_stat(const char *text, long hz, uint64_t *user_ns,
                                    uint64_t *system_ns) {
  uint64_t u, s;
  if (!nl__stats_key(text, "user", &u) || !nl__stats_key(text, "system", &s)) return false;
  uint64_t tick = 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
  *user_ns = u * tick, *system_ns = s * tick;
  return true;
}

bool nl_cadvisor_parse_diskstats(const char *text, const char *name, uint64_t f[11]) {
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    char dn[64];
    unsigned long long v[11];
    if (sscanf(p, "%*u %*u %63s %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", dn,
               &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9],
               &v[10]) != 12 ||
        strcmp(dn, name) != 0)
      continue;
    for (int i = 0; i < 11; i++) f[i] = v[i];
    return true;
  }
  return false;
}

/* cAdvisor names a device after its disk ("/dev/vda"); the partition or
 * device-mapper name here, from /sys/dev/block/<maj>:<min>. */
static void dev_names(nl_cgroup_more_t *m) {
  for (size_t i = 0; i < m->n_devs; i++) {
    nl_cadvisor_dev_t *d = &m->devs[i];
    char path[64], link[256];
    snprintf(path, sizeof path, "/sys/dev/block/%u:%u", d->major, d->minor);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = 0;
    const char *base = strrchr(link, '/');
    base = base ? base + 1 : link;
    if (strlen(base) + 5 < sizeof d->name) memcpy(d->name, "/dev/", 5), strcpy(d->name + 5, base);
  }
}

/* A limit above 2^62 is none (cAdvisor), as is v2's "max". */
static bool read_limit(int dfd, const char *file, uint64_t *out) {
  char buf[64];
  if (!nl__stats_read_small(dfd, file, buf, sizeof buf)) return false;
  uint64_t v = buf[0] == 'm' ? 0 : strtoull(buf, NULL, 10);
  *out = v > (1ull << 62) ? 0 : v;
  return true;
}

static bool read_num(int dfd, const char *file, uint64_t *out) {
  char buf[64];
  if (!nl__stats_read_small(dfd, file, buf, sizeof buf)) return false;
  *out = strtoull(buf, NULL, 10);
  return true;
}

/* The processes of the cgroup (cgroup.procs, as cAdvisor), their open file
 * descriptors and the sockets among them, and the first one's limits. */
static void read_procs(nl_cgroup_more_t *m, int dfd) {
  int fd = dfd < 0 ? -1 : openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
  if (!f) {
    if (fd >= 0) close(fd);
    return;
  }
  m->procs = true;
  long pid, first = 0;
  uint64_t seen = 0;
  while (m->processes < MAX_PIDS && fscanf(f, "%ld", &pid) == 1) {
    m->processes++;
    if (!first) first = pid;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd", pid);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && seen < MAX_FDS && (e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      seen++, m->fds++;
      char link[16];
      ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
      if (n >= 7 && strncmp(link, "socket:", 7) == 0) m->sockets++;
    }
    if (d) closedir(d);
  }
  fclose(f);
  if (!first) return;
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/limits", first);
  char *t = nl__stats_slurp(path);
  if (t) m->nofile = nl_cadvisor_parse_nofile(t, &m->nofile_soft);
  free(t);
}

static void read_v1(nl_cgroup_more_t *m, const char *fs_root, const char *name, bool procs) {
  int acct = nl__stats_cgroup_dir(fs_root, "cpuacct", name, NULL);
  char *t = nl__stats_read_stat(acct, "cpuacct.stat");
  if (t) m->cpu = nl_cadvisor_parse_cpuacct_stat(t, sysconf(_SC_CLK_TCK), &m->user_ns, &m->system_ns);
  free(t);
  if (acct >= 0) close(acct);

  int mem = nl__stats_cgroup_dir(fs_root, "memory", name, NULL);
  if ((t = nl__stats_read_stat(mem, "memory.stat"))) {
    /* the hierarchy's figures (use_hierarchy is always on in new kernels);
     * total_swap only with swap accounting: 0 without, as cAdvisor */
    m->mem = nl__stats_key(t, "total_cache", &m->cache);
    nl__stats_key(t, "total_mapped_file", &m->mapped_file);
    nl__stats_key(t, "total_swap", &m->swap);
    nl__stats_key(t, "pgfault", &m->pgfault);
    nl__stats_key(t, "pgmajfault", &m->pgmajfault);
    free(t);
  }
  m->failcnt = read_num(mem, "memory.failcnt", &m->failcnt_v);
  m->max_usage = read_num(mem, "memory.max_usage_in_bytes", &m->max_usage_v);
  char buf[256];
  if (nl__stats_read_small(mem, "memory.oom_control", buf, sizeof buf))
    m->oom = nl__stats_key(buf, "oom_kill", &m->oom_kills);
  m->mem_spec = read_limit(mem, "memory.soft_limit_in_bytes", &m->reservation);
  if (m->mem_spec) read_limit(mem, "memory.memsw.limit_in_bytes", &m->swap_limit);
  if (mem >= 0) close(mem);

  int pids = nl__stats_cgroup_dir(fs_root, "pids", name, NULL);
  m->threads = read_num(pids, "pids.current", &m->threads_v) &&
               read_limit(pids, "pids.max", &m->threads_max);
  if (pids >= 0) close(pids);

  int blk = nl__stats_cgroup_dir(fs_root, "blkio", name, NULL);
  /* the throttle files count every cgroup's I/O whatever the scheduler; on
   * recent kernels only on devices with a throttle rule somewhere (blk-throttle
   * is set up on a device with its first rule): none, and they say "Total 0" */
  if ((t = nl__stats_read_stat(blk, "blkio.throttle.io_service_bytes"))) {
    nl_cadvisor_parse_blkio(m, t, false);
    free(t);
  }
  if ((t = nl__stats_read_stat(blk, "blkio.throttle.io_serviced"))) {
    nl_cadvisor_parse_blkio(m, t, true);
    free(t);
  }
  if (blk >= 0) close(blk);

  if (procs) {
    int cpu = nl__stats_cgroup_dir(fs_root, "cpu", name, NULL);
    read_procs(m, cpu);
    if (cpu >= 0) close(cpu);
  }
}

static void read_v2(nl_cgroup_more_t *m, const char *fs_root, const char *name, bool procs) {
  int dir = nl__stats_cgroup_dir(fs_root, NULL, name, NULL);
  if (dir < 0) return;
  char *t = nl__stats_read_stat(dir, "cpu.stat");
  uint64_t u, s;
  if (t && nl__stats_key(t, "user_usec", &u) && nl__stats_key(t, "system_usec", &s))
    m->cpu = true, m->user_ns = u * 1000, m->system_ns = s * 1000;
  free(t);
  if ((t = nl__stats_read_stat(dir, "memory.stat"))) {
    m->mem = nl__stats_key(t, "file", &m->cache);
    nl__stats_key(t, "file_mapped", &m->mapped_file);
    nl__stats_key(t, "pgfault", &m->pgfault);
    nl__stats_key(t, "pgmajfault", &m->pgmajfault);
    free(t);
  }
  read_num(dir, "memory.swap.current", &m->swap);
  if ((t = nl__stats_read_stat(dir, "memory.events"))) {
    /* v2 has no failcnt: the times usage hit memory.max */
    m->failcnt = nl__stats_key(t, "max", &m->failcnt_v);
    m->oom = nl__stats_key(t, "oom_kill", &m->oom_kills);
    free(t);
  }
  m->max_usage = read_num(dir, "memory.peak", &m->max_usage_v);
  m->mem_spec = read_limit(dir, "memory.low", &m->reservation);
  read_limit(dir, "memory.swap.max", &m->swap_limit);
  m->threads = read_num(dir, "pids.current", &m->threads_v) &&
               read_limit(dir, "pids.max", &m->threads_max);
  if ((t = nl__stats_read_stat(dir, "io.stat"))) {
    nl_cadvisor_parse_io_stat(m, t);
    free(t);
  }
  if (procs) read_procs(m, dir);
  close(dir);
}

void nl_cgroup_more_read(nl_cgroup_more_t *m, const char *fs_root, bool v2, const char *name,
                         bool procs) {
  memset(m, 0, sizeof *m);
  if (strcmp(name, "/") == 0) name = "";
  if (v2)
    read_v2(m, fs_root, name, procs);
  else
    read_v1(m, fs_root, name, procs);
  dev_names(m);
}

void nl_cgroup_more_free(nl_cgroup_more_t *m) {
  free(m->devs);
  memset(m, 0, sizeof *m);
}

/* A swap limit as cAdvisor reads it: "max" or above 2^62 is none; an absent
 * file (v1 without swap accounting) a limit of 0. */
static void swap_limit(nl_cgroup_swap_t *s, int dfd, const char *file) {
  char buf[64];
  uint64_t v = 0;
  if (nl__stats_read_small(dfd, file, buf, sizeof buf))
    v = buf[0] == 'm' ? UINT64_MAX : strtoull(buf, NULL, 10);
  s->limited = v <= (1ull << 62);
  s->limit = s->limited ? v : 0;
}

void nl_cgroup_swap_read(nl_cgroup_swap_t *s, const char *fs_root, bool v2, const char *name) {
  memset(s, 0, sizeof *s);
  if (strcmp(name, "/") == 0) name = "";
  int dir = nl__stats_cgroup_dir(fs_root, v2 ? NULL : "memory", name, NULL);
  if (dir < 0) return;
  if (v2) {
    /* cAdvisor's memory cgroup is one with memory.max (not the root) */
    char buf[64];
    s->ok = nl__stats_read_small(dir, "memory.max", buf, sizeof buf);
    read_num(dir, "memory.swap.current", &s->usage);
    swap_limit(s, dir, "memory.swap.max");
  } else {
    char *t = nl__stats_read_stat(dir, "memory.stat");
    s->ok = t != NULL;
    if (t) nl__stats_key(t, "total_swap", &s->usage);
    free(t);
    swap_limit(s, dir, "memory.memsw.limit_in_bytes");
  }
  close(dir);
}
