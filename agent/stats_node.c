/* The node's figures from /proc and statfs(2), as cadvisor's root container
 * gives them to the upstream kubelet. Read on the thread pool. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "agent/stats.h"
#include "reactor/xalloc.h"

int nl_stats_parse_proc_stat(nl_node_sample_t *s, const char *text) {
  unsigned long long v[8] = {0};
  const char *cpu = strstr(text, "cpu ");
  if (!cpu || sscanf(cpu + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                     &v[3], &v[4], &v[5], &v[6], &v[7]) < 4)
    return -1;
  /* busy = user nice system irq softirq steal (idle and iowait are not) */
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  long hz = sysconf(_SC_CLK_TCK);
  s->cpu_ns = busy * (1000000000ull / (unsigned long long)(hz > 0 ? hz : 100));
  const char *bt = strstr(text, "\nbtime ");
  if (bt) s->boot_time_s = strtoll(bt + 7, NULL, 10);
  return 0;
}

static uint64_t meminfo_kb(const char *text, const char *key, bool *found) {
  size_t n = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, key, n) == 0 && p[n] == ':') {
      *found = true;
      return strtoull(p + n + 1, NULL, 10) * 1024;
    }
  return 0;
}

int nl_stats_parse_meminfo(nl_node_sample_t *s, const char *text) {
  bool total = false, fr = false, other = false;
  s->mem_total = meminfo_kb(text, "MemTotal", &total);
  s->mem_free = meminfo_kb(text, "MemFree", &fr);
  s->inactive_file = meminfo_kb(text, "Inactive(file)", &other);
  s->anon = meminfo_kb(text, "AnonPages", &other);
  /* the node's swap (cAdvisor's machine swap capacity; used = total - free) */
  bool st = false, sf = false;
  s->swap_total = meminfo_kb(text, "SwapTotal", &st);
  s->swap_free = meminfo_kb(text, "SwapFree", &sf);
  s->swap = st && sf;
  return total && fr ? 0 : -1;
}

void nl_stats_parse_faults(nl_node_sample_t *s, const char *text) {
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, "pgfault ", 8) == 0) s->pgfault = strtoull(p + 8, NULL, 10);
    if (strncmp(p, "pgmajfault ", 11) == 0) s->pgmajfault = strtoull(p + 11, NULL, 10);
  }
}

void nl_stats_parse_net_dev(nl_node_sample_t *s, const char *text) {
  nl_stats_parse_net_dev_ifs(s->ifs, &s->n_ifs, text);
}

void nl_stats_parse_net_dev_ifs(nl_stats_if_t *ifs, size_t *n_ifs, const char *text) {
  *n_ifs = 0;
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    const char *colon = strchr(p, ':'), *eol = strchr(p, '\n');
    if (!colon || (eol && colon > eol) || *n_ifs == NL_STATS_MAX_IFS) continue;
    const char *name = p;
    while (*name == ' ') name++;
    size_t len = (size_t)(colon - name);
    /* cadvisor leaves out lo and the containers' veth ends */
    if (len == 0 || len >= sizeof ifs[0].name || strncmp(name, "lo", 2) == 0 ||
        strncmp(name, "veth", 4) == 0 || strncmp(name, "docker", 6) == 0)
      continue;
    /* rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets errs drop */
    unsigned long long f[12];
    if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &f[0],
               &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10],
               &f[11]) != 12)
      continue;
    nl_stats_if_t *i = &ifs[(*n_ifs)++];
    memset(i, 0, sizeof *i);
    memcpy(i->name, name, len);
    i->name[len] = 0;
    i->rx = f[0], i->rx_errors = f[2], i->tx = f[8], i->tx_errors = f[10];
    i->packets = true;
    i->rx_packets = f[1], i->rx_dropped = f[3], i->tx_packets = f[9], i->tx_dropped = f[11];
  }
}

char *nl__stats_slurp(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  size_t cap = 16384, len = 0;
  nl_cleanup_free char *buf = nl_xmalloc(cap);
  ssize_t n;
  while ((n = read(fd, buf + len, cap - len - 1)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return NULL;
    }
    len += (size_t)n;
    if (len + 1 == cap) buf = nl_xrealloc(buf, cap *= 2);
  }
  close(fd);
  buf[len] = 0;
  return nl_steal(&buf);
}

void nl_stats_fs_read(nl_stats_fs_t *fs, const char *path) {
  struct statvfs v;
  if (!path || statvfs(path, &v) != 0) return;
  fs->ok = true;
  fs->capacity = (uint64_t)v.f_blocks * v.f_frsize;
  fs->available = (uint64_t)v.f_bavail * v.f_frsize;
  fs->used = ((uint64_t)v.f_blocks - v.f_bfree) * v.f_frsize;
  fs->inodes = v.f_files;
  fs->inodes_free = v.f_ffree;
}

static void sample_base(nl_node_sample_t *s, const char *root_dir, const char *image_mount) {
  memset(s, 0, sizeof *s);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  s->time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  s->ncpu = ncpu > 0 ? (uint32_t)ncpu : 1;
  char *t;
  if ((t = nl__stats_slurp("/proc/meminfo"))) nl_stats_parse_meminfo(s, t), free(t);
  if ((t = nl__stats_slurp("/proc/sys/kernel/pid_max"))) s->maxpid = strtoull(t, NULL, 10), free(t);
  struct sysinfo si;
  if (sysinfo(&si) == 0) s->curproc = si.procs;
  nl_stats_fs_read(&s->root_fs, root_dir);
  nl_stats_fs_read(&s->image_fs, image_mount);
}

void nl_node_sample_read_light(nl_node_sample_t *s, const char *root_dir,
                               const char *image_mount) {
  sample_base(s, root_dir, image_mount);
}

void nl_node_sample_read(nl_node_sample_t *s, const char *root_dir, const char *image_mount,
                         const char *cgroup_fs, bool cgroup_v2) {
  sample_base(s, root_dir, image_mount);
  char *t;
  if ((t = nl__stats_slurp("/proc/stat"))) nl_stats_parse_proc_stat(s, t), free(t);
  /* The busy time and page faults as cadvisor's root container has them:
   * /proc/stat counts ticks (10 ms a CPU), which over a rate's 2 s window put
   * a saturated node 1 % above its CPUs; /proc/vmstat's faults are the
   * machine's since boot (on cgroup v1 the root's own pgfault, not
   * total_pgfault), past the suite's bound of 1e9 on a machine up a day. */
  nl_sys_ctr_t root = {0};
  if (cgroup_fs) nl_stats_cgroup_read(&root, cgroup_fs, cgroup_v2, "/", "/");
  if (root.cpu) s->cpu_ns = root.cpu_ns;
  if (root.pgfault) {
    s->pgfault = root.pgfault, s->pgmajfault = root.pgmajfault;
  } else if ((t = nl__stats_slurp("/proc/vmstat"))) {
    nl_stats_parse_faults(s, t), free(t);
  }
  if ((t = nl__stats_slurp("/proc/net/dev"))) nl_stats_parse_net_dev(s, t), free(t);
}
