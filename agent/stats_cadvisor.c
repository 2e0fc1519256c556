/* /metrics/cadvisor's figures beyond the Summary API's (the runtime's
 * container stats, the node's /proc figures): the cgroup files of the root,
 * the pods and the containers, the sandboxes' interfaces, the machine's ids
 * and the filesystems' devices. The text: stats_cadvisor_text.c. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "agent/stats.h"
#include "reactor/xalloc.h"

/* ---- reading (thread pool) ------------------------------------------------- */

/* The files are opened relative to their cgroup's directory: a cgroup path
 * is long, and its walk was a third of a scrape's CPU with 110 pods. */

/* A small file's first bytes, NUL-terminated; false when it cannot be read. */
bool nl__stats_read_small(int dfd, const char *file, char *buf, size_t size) {
  int fd = dfd == -1 ? -1 : openat(dfd, file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  return true;
}

static bool read_u64(int dfd, const char *file, uint64_t *out) {
  char buf[64];
  if (!nl__stats_read_small(dfd, file, buf, sizeof buf)) return false;
  *out = strtoull(buf, NULL, 10);
  return true;
}

/* memory.stat or cpu.stat whole (a few KiB); NULL when it cannot be read. */
char *nl__stats_read_stat(int dfd, const char *file) {
  char *buf = nl_xmalloc(8192);
  if (nl__stats_read_small(dfd, file, buf, 8192)) return buf;
  free(buf);
  return NULL;
}

/* The value of key in a "key value" file (memory.stat, cpu.stat). */
bool nl__stats_key(const char *text, const char *key, uint64_t *out) {
  size_t n = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, key, n) == 0 && p[n] == ' ') {
      *out = strtoull(p + n + 1, NULL, 10);
      return true;
    }
  return false;
}

/* The cgroup's directory in a hierarchy (ctrl NULL: v2's unified one), or -1;
 * *ctime its change time when it opens. */
int nl__stats_cgroup_dir(const char *fs_root, const char *ctrl, const char *name, int64_t *ctime) {
  char path[512];
  if (ctrl)
    snprintf(path, sizeof path, "%s/%s%s", fs_root, ctrl, name);
  else
    snprintf(path, sizeof path, "%s%s", fs_root, name);
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && ctime && fstat(fd, &st) == 0) *ctime = st.st_ctime;
  return fd;
}

static void close_dir(int fd) {
  if (fd >= 0) close(fd);
}

/* cAdvisor: a limit above 2^62 is none. */
static uint64_t limit(uint64_t v) { return v > (1ull << 62) ? 0 : v; }

static void read_v1(nl_cgroup_sample_t *s, const char *fs_root, const char *name, bool usage) {
  int mem = nl__stats_cgroup_dir(fs_root, "memory", name, &s->created_s);
  int cpu = mem < 0 ? -1 : nl__stats_cgroup_dir(fs_root, "cpu", name, NULL);
  uint64_t v;
  char buf[64];
  bool ok = read_u64(cpu, "cpu.shares", &s->cpu_shares);
  ok |= read_u64(cpu, "cpu.cfs_period_us", &s->cpu_period);
  if (nl__stats_read_small(cpu, "cpu.cfs_quota_us", buf, sizeof buf) && buf[0] != '-')
    s->cpu_quota = strtoull(buf, NULL, 10);
  if (read_u64(mem, "memory.limit_in_bytes", &v)) s->mem_limit = limit(v), ok = true;
  s->spec = ok;
  if (usage && mem >= 0) {
    int acct = nl__stats_cgroup_dir(fs_root, "cpuacct", name, NULL);
    char *ms = nl__stats_read_stat(mem, "memory.stat");
    uint64_t inactive = 0;
    s->usage = read_u64(acct, "cpuacct.usage", &s->cpu_ns) &&
               read_u64(mem, "memory.usage_in_bytes", &s->mem_usage) && ms &&
               nl__stats_key(ms, "total_inactive_file", &inactive) &&
               nl__stats_key(ms, "total_rss", &s->mem_rss);
    s->mem_ws = s->mem_usage > inactive ? s->mem_usage - inactive : 0;
    free(ms);
    close_dir(acct);
  }
  close_dir(cpu);
  close_dir(mem);
}

static void read_v2(nl_cgroup_sample_t *s, const char *fs_root, const char *name, bool usage) {
  int dir = nl__stats_cgroup_dir(fs_root, NULL, name, &s->created_s);
  char buf[64];
  uint64_t v;
  if (nl__stats_read_small(dir, "cpu.max", buf, sizeof buf)) {
    s->spec = true;
    char *sp = strchr(buf, ' ');
    if (buf[0] != 'm') s->cpu_quota = strtoull(buf, NULL, 10);
    if (sp) s->cpu_period = strtoull(sp + 1, NULL, 10);
  }
  /* cAdvisor's weight to shares: 2 + (weight - 1) * 262142 / 9999 */
  if (read_u64(dir, "cpu.weight", &v) && v) s->cpu_shares = 2 + (v - 1) * 262142 / 9999;
  if (nl__stats_read_small(dir, "memory.max", buf, sizeof buf)) {
    s->spec = true;
    s->mem_limit = buf[0] == 'm' ? 0 : limit(strtoull(buf, NULL, 10));
  }
  if (usage && dir >= 0) {
    char *cs = nl__stats_read_stat(dir, "cpu.stat"), *ms = nl__stats_read_stat(dir, "memory.stat");
    uint64_t usec = 0, inactive = 0;
    s->usage = cs && nl__stats_key(cs, "usage_usec", &usec) &&
               read_u64(dir, "memory.current", &s->mem_usage) && ms &&
               nl__stats_key(ms, "inactive_file", &inactive) && nl__stats_key(ms, "anon", &s->mem_rss);
    s->cpu_ns = usec * 1000;
    s->mem_ws = s->mem_usage > inactive ? s->mem_usage - inactive : 0;
    free(cs);
    free(ms);
  }
  close_dir(dir);
}

void nl_cgroup_sample_read(nl_cgroup_sample_t *s, const char *fs_root, bool v2,
                           const char *name, bool usage) {
  memset(s, 0, sizeof *s);
  if (strcmp(name, "/") == 0) name = "";
  if (v2)
    read_v2(s, fs_root, name, usage);
  else
    read_v1(s, fs_root, name, usage);
}

/* A container's cgroup below its pod's, as containerd names it: the id with
 * cgroupfs, "cri-containerd-<id>.scope" under a systemd slice. */
char *nl__stats_ctr_cgroup(const char *pod_cgroup, const char *id) {
  size_t n = strlen(pod_cgroup);
  bool slice = n > 6 && strcmp(pod_cgroup + n - 6, ".slice") == 0;
  return slice ? nl_xasprintf("%s/cri-containerd-%s.scope", pod_cgroup, id)
               : nl_xasprintf("%s/%s", pod_cgroup, id);
}

/* The sandbox's interfaces from its first process's network namespace (what
 * cAdvisor reads), when the runtime's stats have none. */
static void sandbox_net(nl_cadvisor_pod_t *p, const char *fs_root, bool v2) {
  char *name = nl__stats_ctr_cgroup(p->cgroup, p->sandbox_id), path[512], buf[32];
  int dir = nl__stats_cgroup_dir(fs_root, v2 ? NULL : "cpu", name, NULL);
  free(name);
  bool ok = nl__stats_read_small(dir, "cgroup.procs", buf, sizeof buf);
  close_dir(dir);
  if (!ok) return;
  long pid = strtol(buf, NULL, 10);
  if (pid <= 0) return;
  snprintf(path, sizeof path, "/proc/%ld/net/dev", pid);
  char *t = nl__stats_slurp(path);
  if (!t) return;
  nl_stats_parse_net_dev_ifs(p->ifs, &p->n_ifs, t);
  p->net = true;
  free(t);
}

static void first_line(const char *path, char *out, size_t size) {
  if (!nl__stats_read_small(AT_FDCWD, path, out, size)) {
    out[0] = 0;
    return;
  }
  out[strcspn(out, "\n")] = 0;
}

/* The mount source of the filesystem that holds path (/proc/self/mountinfo:
 * "id parent major:minor root mountpoint opts ... - fstype source superopts"). */
static void device_of(const char *mountinfo, const char *path, char *out, size_t size) {
  struct stat st;
  out[0] = 0;
  if (!path || !mountinfo || stat(path, &st) != 0) return;
  for (const char *p = mountinfo; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    unsigned maj, min;
    if (sscanf(p, "%*u %*u %u:%u", &maj, &min) != 2 || makedev(maj, min) != st.st_dev) continue;
    const char *dash = strstr(p, " - "), *eol = strchr(p, '\n');
    if (!dash || (eol && dash > eol)) continue;
    char src[128];
    if (sscanf(dash + 3, "%*s %127s", src) == 1) snprintf(out, size, "%s", src);
    return;
  }
}

void nl_cadvisor_read_swap(nl_cadvisor_t *c, const Runtime__V1__ListPodSandboxStatsResponse *pods) {
  for (size_t i = 0; c->fs_root && i < c->n_pods; i++) {
    nl_cadvisor_pod_t *p = &c->pods[i];
    if (!p->cgroup) continue;
    nl_cgroup_swap_read(&p->swap, c->fs_root, c->v2, p->cgroup);
    const Runtime__V1__LinuxPodSandboxStats *l = pods->stats[i]->linux;
    for (size_t j = 0; j < p->n_ctrs; j++) {
      const Runtime__V1__ContainerStats *cs = l->containers[j];
      if (!cs->attributes || !cs->attributes->id) continue;
      char *name = nl__stats_ctr_cgroup(p->cgroup, cs->attributes->id);
      nl_cgroup_swap_read(&p->ctrs[j].swap, c->fs_root, c->v2, name);
      free(name);
    }
  }
}

void nl_cadvisor_read(nl_cadvisor_t *c, const Runtime__V1__ListPodSandboxStatsResponse *pods,
                      const char *root_dir, const char *image_mount) {
  first_line("/proc/sys/kernel/random/boot_id", c->boot_id, sizeof c->boot_id);
  first_line("/etc/machine-id", c->machine_id, sizeof c->machine_id);
  first_line("/sys/class/dmi/id/product_uuid", c->system_uuid, sizeof c->system_uuid);
  c->cores = sysconf(_SC_NPROCESSORS_ONLN);
  char *mi = nl__stats_slurp("/proc/self/mountinfo");
  device_of(mi, root_dir, c->root_dev, sizeof c->root_dev);
  device_of(mi, image_mount, c->image_dev, sizeof c->image_dev);
  free(mi);
  /* the root's filesystem I/O, as cAdvisor's root container has it */
  const char *disk = strrchr(c->root_dev, '/');
  char *ds = disk ? nl__stats_slurp("/proc/diskstats") : NULL;
  if (ds) c->root_disk = nl_cadvisor_parse_diskstats(ds, disk + 1, c->root_diskstats);
  free(ds);
  if (!c->fs_root) return;
  nl_cadvisor_read_swap(c, pods);
  nl_cgroup_sample_read(&c->root, c->fs_root, c->v2, "/", false);
  nl_cgroup_more_read(&c->root_more, c->fs_root, c->v2, "/", false);
  for (size_t i = 0; i < c->n_pods; i++) {
    nl_cadvisor_pod_t *p = &c->pods[i];
    if (!p->cgroup) continue;
    nl_cgroup_sample_read(&p->cg, c->fs_root, c->v2, p->cgroup, true);
    nl_cgroup_more_read(&p->more, c->fs_root, c->v2, p->cgroup, true);
    /* what cAdvisor reads (with the packet counts), else the runtime's figures */
    if (p->sandbox_id) sandbox_net(p, c->fs_root, c->v2);
    const Runtime__V1__LinuxPodSandboxStats *l = pods->stats[i]->linux;
    for (size_t j = 0; j < p->n_ctrs; j++) {
      const Runtime__V1__ContainerStats *cs = l->containers[j];
      if (!cs->attributes || !cs->attributes->id) continue;
      char *name = nl__stats_ctr_cgroup(p->cgroup, cs->attributes->id);
      nl_cgroup_sample_read(&p->ctrs[j].cg, c->fs_root, c->v2, name, false);
      nl_cgroup_more_read(&p->ctrs[j].more, c->fs_root, c->v2, name, true);
      free(name);
    }
  }
}

void nl_cadvisor_prepare(nl_cadvisor_t *c, const Runtime__V1__ListPodSandboxStatsResponse *pods,
                         const nl_stats_meta_t *m) {
  memset(c, 0, sizeof *c);
  if (m->cgroup_fs) c->fs_root = nl_xstrdup(m->cgroup_fs);
  c->v2 = m->cgroup_v2;
  c->n_pods = pods ? pods->n_stats : 0;
  c->pods = nl_xcalloc(c->n_pods ? c->n_pods : 1, sizeof *c->pods);
  for (size_t i = 0; i < c->n_pods; i++) {
    const Runtime__V1__PodSandboxStats *ps = pods->stats[i];
    const Runtime__V1__PodSandboxMetadata *md = ps->attributes ? ps->attributes->metadata : NULL;
    const Runtime__V1__LinuxPodSandboxStats *l = ps->linux;
    nl_cadvisor_pod_t *p = &c->pods[i];
    if (!md || !l) continue;
    if (m->pod) m->pod(m->ctx, md->uid, &p->cgroup, &p->sandbox_id);
    if (p->cgroup && !*p->cgroup) {
      free(p->cgroup);
      p->cgroup = NULL;
    }
    /* the runtime's figures for the sandbox's interfaces, when it gives them */
    const Runtime__V1__NetworkUsage *net = l->network;
    for (size_t j = 0; net && j < net->n_interfaces && p->n_ifs < NL_STATS_MAX_IFS; j++) {
      const Runtime__V1__NetworkInterfaceUsage *u = net->interfaces[j];
      nl_stats_if_t *x = &p->ifs[p->n_ifs++];
      snprintf(x->name, sizeof x->name, "%s", u->name ? u->name : "");
      x->rx = u->rx_bytes ? u->rx_bytes->value : 0;
      x->rx_errors = u->rx_errors ? u->rx_errors->value : 0;
      x->tx = u->tx_bytes ? u->tx_bytes->value : 0;
      x->tx_errors = u->tx_errors ? u->tx_errors->value : 0;
      p->net = true;
    }
    p->n_ctrs = l->n_containers;
    p->ctrs = nl_xcalloc(p->n_ctrs ? p->n_ctrs : 1, sizeof *p->ctrs);
    for (size_t j = 0; j < p->n_ctrs; j++) {
      const Runtime__V1__ContainerAttributes *a = l->containers[j]->attributes;
      if (m->container && a && a->id)
        m->container(m->ctx, md->uid, a->id, &p->ctrs[j].image, &p->ctrs[j].created_ns);
    }
  }
}

void nl_cadvisor_free(nl_cadvisor_t *c) {
  for (size_t i = 0; i < c->n_pods; i++) {
    nl_cadvisor_pod_t *p = &c->pods[i];
    for (size_t j = 0; j < p->n_ctrs; j++) {
      free(p->ctrs[j].image);
      nl_cgroup_more_free(&p->ctrs[j].more);
    }
    nl_cgroup_more_free(&p->more);
    free(p->ctrs);
    free(p->cgroup);
    free(p->sandbox_id);
  }
  free(c->pods);
  free(c->fs_root);
  nl_cgroup_more_free(&c->root_more);
  memset(c, 0, sizeof *c);
}
