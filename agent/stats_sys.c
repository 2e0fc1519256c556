/* /stats/summary's pressure (PSI) figures and system containers, read on the
 * thread pool. Upstream's kubelet gets both from cAdvisor; nanolet reads the
 * same cgroup files. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/stats.h"
#include "reactor/xalloc.h"

/* ---- parsers ------------------------------------------------------------- */

static int psi_line(nl_psi_data_t *d, const char *p) {
  unsigned long long total;
  if (sscanf(p, "avg10=%lf avg60=%lf avg300=%lf total=%llu", &d->avg10, &d->avg60, &d->avg300,
             &total) != 4)
    return -1;
  d->total = total;
  return 0;
}

int nl_stats_parse_psi(nl_psi_t *p, const char *text) {
  memset(p, 0, sizeof *p);
  bool some = false;
  for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
    if (strncmp(l, "some ", 5) == 0) some = psi_line(&p->some, l + 5) == 0;
    if (strncmp(l, "full ", 5) == 0 && psi_line(&p->full, l + 5) < 0) memset(&p->full, 0, sizeof p->full);
  }
  p->ok = some;
  return some ? 0 : -1;
}

int nl_stats_parse_proc_cgroup(const char *text, const char *ctrl, char *out, size_t size) {
  size_t n = strlen(ctrl);
  for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
    /* "hierarchy-id:controller,controller:path" */
    const char *c = strchr(l, ':'), *eol = strchr(l, '\n');
    if (!c || (eol && c > eol)) continue;
    const char *ctrls = c + 1, *p = strchr(ctrls, ':');
    if (!p || (eol && p > eol)) continue;
    bool match = n == 0 ? p == ctrls : false;
    for (const char *x = ctrls; n && x < p;) {
      const char *e = memchr(x, ',', (size_t)(p - x));
      if (!e) e = p;
      if ((size_t)(e - x) == n && strncmp(x, ctrl, n) == 0) match = true;
      x = e + 1;
    }
    if (!match) continue;
    size_t len = eol ? (size_t)(eol - p - 1) : strlen(p + 1);
    if (len == 0 || len >= size) return -1;
    memcpy(out, p + 1, len);
    out[len] = 0;
    return 0;
  }
  return -1;
}

/* ---- reading ------------------------------------------------------------- */

static void psi_file(nl_psi_t *p, const char *path) {
  char *t = nl__stats_slurp(path);
  if (t) nl_stats_parse_psi(p, t);
  free(t);
}

/* A cgroup's pressure under the unified root; the node's for "/". */
static void psi_read(nl_psi3_t *p, const char *unified, const char *name) {
  memset(p, 0, sizeof *p);
  const char *files[] = {"cpu", "memory", "io"};
  nl_psi_t *dst[] = {&p->cpu, &p->memory, &p->io};
  for (int i = 0; i < 3; i++) {
    char path[600];
    if (!name || !strcmp(name, "/") || !unified)
      snprintf(path, sizeof path, "/proc/pressure/%s", files[i]);
    else
      snprintf(path, sizeof path, "%s%s/%s.pressure", unified, name, files[i]);
    psi_file(dst[i], path);
  }
}

static bool stat_u64(const char *text, const char *key, uint64_t *out) {
  size_t n = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, key, n) == 0 && p[n] == ' ') {
      *out = strtoull(p + n + 1, NULL, 10);
      return true;
    }
  return false;
}

static bool file_u64(const char *path, uint64_t *out) {
  char *t = nl__stats_slurp(path);
  bool ok = t && (*t >= '0' && *t <= '9');
  if (ok) *out = strtoull(t, NULL, 10);
  free(t);
  return ok;
}

/* root + ctrl + name + "/" + file (name "" or "/..."), read whole. */
static char *slurp_at(const char *root, const char *ctrl, const char *name, const char *file) {
  char path[1200];
  snprintf(path, sizeof path, "%s%s%s/%s", root, ctrl, name, file);
  return nl__stats_slurp(path);
}

static int64_t dir_ctime(const char *fs_root, const char *ctrl, const char *name) {
  char path[600];
  snprintf(path, sizeof path, "%s%s%s", fs_root, ctrl, name);
  struct stat st;
  return stat(path, &st) == 0 ? st.st_ctime : 0;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void nl_stats_cgroup_read(nl_sys_ctr_t *s, const char *fs, bool v2, const char *cpu,
                          const char *mem) {
  s->time_ns = now_ns();
  if (!strcmp(cpu, "/")) cpu = "";
  if (!strcmp(mem, "/")) mem = "";
  uint64_t inactive = 0, v;
  char *ms;
  if (v2) {
    char *cs = slurp_at(fs, "", cpu, "cpu.stat");
    if ((s->cpu = cs && stat_u64(cs, "usage_usec", &v))) s->cpu_ns = v * 1000;
    free(cs);
    char path[600];
    snprintf(path, sizeof path, "%s%s/memory.current", fs, cpu);
    ms = slurp_at(fs, "", cpu, "memory.stat");
    s->mem = file_u64(path, &s->mem_usage) && ms && stat_u64(ms, "anon", &s->mem_rss) &&
             stat_u64(ms, "inactive_file", &inactive);
    char *max = slurp_at(fs, "", cpu, "memory.max");
    if (max && *max >= '0' && *max <= '9') s->mem_limit = strtoull(max, NULL, 10);
    free(max);
    s->start_s = dir_ctime(fs, "", cpu);
  } else {
    char path[600];
    snprintf(path, sizeof path, "%s/cpuacct%s/cpuacct.usage", fs, cpu);
    s->cpu = file_u64(path, &s->cpu_ns);
    snprintf(path, sizeof path, "%s/memory%s/memory.usage_in_bytes", fs, mem);
    ms = slurp_at(fs, "/memory", mem, "memory.stat");
    s->mem = file_u64(path, &s->mem_usage) && ms && stat_u64(ms, "total_rss", &s->mem_rss) &&
             stat_u64(ms, "total_inactive_file", &inactive);
    snprintf(path, sizeof path, "%s/memory%s/memory.limit_in_bytes", fs, mem);
    file_u64(path, &s->mem_limit);
    s->start_s = dir_ctime(fs, "/cpuacct", cpu);
  }
  if (ms) {
    stat_u64(ms, "pgfault", &s->pgfault);
    stat_u64(ms, "pgmajfault", &s->pgmajfault);
  }
  free(ms);
  if (s->mem_limit > (1ull << 62)) s->mem_limit = 0; /* cAdvisor: none */
  s->mem_ws = s->mem_usage > inactive ? s->mem_usage - inactive : 0;
}

/* misc: the root cgroup's own processes. v1's memory.stat has the root's own
 * figures (the keys without total_); its CPU, and v2's every figure, are the
 * root's less its children's. */
static void misc_read(nl_sys_ctr_t *s, const char *fs, bool v2) {
  static const char *v2keys[] = {"anon", "file", "inactive_file", "pgfault", "pgmajfault"};
  uint64_t m[5] = {0}, cpu = 0, v;
  char dirpath[600], path[1200];
  s->time_ns = now_ns();
  snprintf(dirpath, sizeof dirpath, "%s%s", fs, v2 ? "" : "/cpuacct");
  if (v2) {
    char *t = slurp_at(fs, "", "", "cpu.stat");
    s->cpu = t && stat_u64(t, "usage_usec", &cpu);
    free(t);
  } else {
    snprintf(path, sizeof path, "%s/cpuacct.usage", dirpath);
    s->cpu = file_u64(path, &cpu);
  }
  char *ms = slurp_at(fs, v2 ? "" : "/memory", "", "memory.stat");
  s->mem = ms != NULL;
  for (int i = 0; v2 && ms && i < 5; i++) s->mem &= stat_u64(ms, v2keys[i], &m[i]);
  if (!v2 && ms) {
    uint64_t rss = 0, cache = 0, inactive = 0;
    s->mem = stat_u64(ms, "rss", &rss) && stat_u64(ms, "cache", &cache) &&
             stat_u64(ms, "inactive_file", &inactive);
    stat_u64(ms, "pgfault", &s->pgfault);
    stat_u64(ms, "pgmajfault", &s->pgmajfault);
    s->mem_usage = rss + cache, s->mem_rss = rss;
    s->mem_ws = s->mem_usage > inactive ? s->mem_usage - inactive : 0;
  }
  free(ms);
  DIR *d = opendir(dirpath);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    if (v2) {
      char *cs = slurp_at(fs, "/", e->d_name, "cpu.stat");
      if (cs && stat_u64(cs, "usage_usec", &v)) cpu -= v < cpu ? v : cpu;
      free(cs);
      char *cm = slurp_at(fs, "/", e->d_name, "memory.stat");
      for (int i = 0; cm && i < 5; i++)
        if (stat_u64(cm, v2keys[i], &v)) m[i] -= v < m[i] ? v : m[i];
      free(cm);
    } else {
      snprintf(path, sizeof path, "%s/%s/cpuacct.usage", dirpath, e->d_name);
      if (file_u64(path, &v)) cpu -= v < cpu ? v : cpu;
    }
  }
  if (d) closedir(d);
  s->cpu_ns = v2 ? cpu * 1000 : cpu;
  if (v2) {
    s->mem_usage = m[0] + m[1], s->mem_rss = m[0];
    s->mem_ws = s->mem_usage > m[2] ? s->mem_usage - m[2] : 0;
    s->pgfault = m[3], s->pgmajfault = m[4];
  }
}

/* The runtime's pid: the peer of a connection to its CRI socket. */
static int runtime_pid(const char *sock) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (!sock || strlen(sock) >= sizeof a.sun_path) return -1;
  strcpy(a.sun_path, sock);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), pid = -1;
  struct ucred cr;
  socklen_t n = sizeof cr;
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) == 0)
    pid = cr.pid;
  if (fd >= 0) close(fd);
  return pid;
}

static char *proc_cgroup(int pid) {
  char path[64];
  snprintf(path, sizeof path, pid ? "/proc/%d/cgroup" : "/proc/self/cgroup", pid);
  return pid < 0 ? NULL : nl__stats_slurp(path);
}

/* A process's system container: its cgroups as /proc/<pid>/cgroup names
 * them (t, that file's text; NULL: none). */
static void proc_ctr(nl_sys_ctr_t *s, const nl_summary_sys_t *x, const char *unified, char *t) {
  char cpu[512], mem[512], u[512];
  bool ok = t && (x->v2 ? nl_stats_parse_proc_cgroup(t, "", cpu, sizeof cpu) == 0
                        : nl_stats_parse_proc_cgroup(t, "cpuacct", cpu, sizeof cpu) == 0 &&
                              nl_stats_parse_proc_cgroup(t, "memory", mem, sizeof mem) == 0);
  if (ok) {
    nl_stats_cgroup_read(s, x->fs_root, x->v2, cpu, x->v2 ? cpu : mem);
    psi_read(&s->psi, unified, nl_stats_parse_proc_cgroup(t, "", u, sizeof u) == 0 ? u : "/");
  }
  free(t);
}

/* The pod's volumes as the volume manager lays them out. */
static void volumes(nl_summary_pod_t *p, const char *root_dir, const char *uid) {
  char *dir = nl_xasprintf("%s/pods/%s/volumes", root_dir, uid);
  DIR *plugins = opendir(dir);
  for (struct dirent *e; plugins && (e = readdir(plugins));) {
    if (e->d_name[0] == '.') continue;
    char *pdir = nl_xasprintf("%s/%s", dir, e->d_name);
    DIR *names = opendir(pdir);
    for (struct dirent *v; names && (v = readdir(names));) {
      if (v->d_name[0] == '.' || p->n_vols == 64) continue;
      char *path = nl_xasprintf("%s/%s", pdir, v->d_name);
      nl_summary_vol_t *vol = NULL;
      int64_t inodes = 0, used = nl_stats_du(path, &inodes);
      if (used >= 0) {
        p->vols = nl_xrealloc(p->vols, (p->n_vols + 1) * sizeof *p->vols);
        vol = &p->vols[p->n_vols++];
        *vol = (nl_summary_vol_t){.name = nl_xstrdup(v->d_name), .used = used, .inodes = inodes};
        nl_stats_fs_read(&vol->fs, path);
      }
      free(path);
    }
    if (names) closedir(names);
    free(pdir);
  }
  if (plugins) closedir(plugins);
  free(dir);
}

static void pod_read(nl_summary_pod_t *p, const nl_summary_sys_t *x, const char *unified,
                     const nl_cadvisor_pod_t *cp, const Runtime__V1__PodSandboxStats *ps) {
  const Runtime__V1__PodSandboxMetadata *md = ps->attributes ? ps->attributes->metadata : NULL;
  const Runtime__V1__LinuxPodSandboxStats *l = ps->linux;
  size_t n = l ? l->n_containers : 0;
  if (md && md->uid && x->root_dir) volumes(p, x->root_dir, md->uid);
  p->log_used = nl_xcalloc(n ? n : 1, sizeof *p->log_used);
  p->log_inodes = nl_xcalloc(n ? n : 1, sizeof *p->log_inodes);
  for (size_t j = 0; j < n; j++) {
    const Runtime__V1__ContainerAttributes *a = l->containers[j]->attributes;
    p->log_used[j] = -1;
    if (!x->logs_dir || !md || !a || !a->metadata) continue;
    /* <podLogsDir>/<namespace>_<name>_<uid>/<container> */
    char *dir = nl_xasprintf("%s/%s_%s_%s/%s", x->logs_dir, md->namespace_, md->name, md->uid,
                             a->metadata->name);
    struct stat st;
    if (stat(dir, &st) == 0) p->log_used[j] = nl_stats_files_in(dir, &p->log_inodes[j]);
    free(dir);
  }
  if (!cp->cgroup || !x->fs_root) return;
  char path[1200];
  uint64_t v;
  snprintf(path, sizeof path, "%s%s%s/pids.current", x->fs_root, x->v2 ? "" : "/pids", cp->cgroup);
  if ((p->procs_ok = file_u64(path, &v))) p->procs = v;
  if (!unified) return;
  psi_read(&p->psi, unified, cp->cgroup);
  p->ctr_psi = nl_xcalloc(n ? n : 1, sizeof *p->ctr_psi);
  for (size_t j = 0; j < n && j < cp->n_ctrs; j++) {
    const Runtime__V1__ContainerAttributes *a = l->containers[j]->attributes;
    if (!a || !a->id) continue;
    char *name = nl__stats_ctr_cgroup(cp->cgroup, a->id);
    psi_read(&p->ctr_psi[j], unified, name);
    free(name);
  }
}

void nl_summary_sys_read(nl_summary_sys_t *x, const nl_cadvisor_t *c,
                         const Runtime__V1__ListPodSandboxStatsResponse *pods) {
  char unified_buf[600];
  const char *unified = NULL;
  if (x->fs_root) {
    snprintf(unified_buf, sizeof unified_buf, "%s%s", x->fs_root, x->v2 ? "" : "/unified");
    struct stat st;
    if (stat(unified_buf, &st) == 0) unified = unified_buf;
  }
  psi_read(&x->node, NULL, "/");
  size_t n_pods = pods ? pods->n_stats : 0;
  x->pods = nl_xcalloc(n_pods ? n_pods : 1, sizeof *x->pods);
  x->n_pods = n_pods;
  for (size_t i = 0; c && i < n_pods && i < c->n_pods; i++)
    pod_read(&x->pods[i], x, unified, &c->pods[i], pods->stats[i]);
  if (!x->fs_root) return;
  nl_sys_ctr_t *s = &x->sys[x->n_sys++];
  s->name = "kubelet";
  proc_ctr(s, x, unified, proc_cgroup(0));
  s = &x->sys[x->n_sys++];
  s->name = "runtime";
  /* the last round's pid while it lives: a connection per scrape would be
   * one more for the runtime to log */
  char *t = x->runtime_pid > 0 ? proc_cgroup(x->runtime_pid) : NULL;
  if (!t) t = proc_cgroup(x->runtime_pid = runtime_pid(x->runtime_sock));
  proc_ctr(s, x, unified, t);
  if (x->pods_cgroup) {
    s = &x->sys[x->n_sys++];
    s->name = "pods";
    nl_stats_cgroup_read(s, x->fs_root, x->v2, x->pods_cgroup, x->pods_cgroup);
    psi_read(&s->psi, unified, x->pods_cgroup);
  }
  if (x->misc) {
    s = &x->sys[x->n_sys++];
    s->name = "misc";
    misc_read(s, x->fs_root, x->v2);
    /* pressure cannot be split: the root's (the node's) */
    psi_read(&s->psi, NULL, "/");
  }
}

void nl_summary_sys_free(nl_summary_sys_t *x) {
  for (size_t i = 0; x->pods && i < x->n_pods; i++) {
    nl_summary_pod_t *p = &x->pods[i];
    free(p->ctr_psi);
    free(p->log_used);
    free(p->log_inodes);
    for (size_t j = 0; j < p->n_vols; j++) free(p->vols[j].name);
    free(p->vols);
  }
  free(x->pods);
  free(x->root_dir);
  free(x->logs_dir);
  free(x->fs_root);
  free(x->pods_cgroup);
  free(x->runtime_sock);
  memset(x, 0, sizeof *x);
}
