/* The blocking half of the container manager: cgroup directories and control
 * files, v1 (a hierarchy per controller under the root) or v2 (one unified
 * hierarchy), below a root that tests point at a temporary directory. Runs at
 * start-up or on the thread pool only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "managers/cgroups_internal.h"
#include "reactor/xalloc.h"

/* The v1 controllers a kubelet cgroup is made in (those mounted), as
 * upstream's cgroup manager checks them; cpu and memory are required. */
static const char *const v1_ctrls[] = {"cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb"};
#define N_V1 (sizeof v1_ctrls / sizeof *v1_ctrls)
/* The v2 controllers enabled for children on the way down. */
static const char *const v2_ctrls[] = {"cpu", "cpuset", "memory", "pids", "hugetlb", "io"};
#define N_V2 (sizeof v2_ctrls / sizeof *v2_ctrls)

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool has_ctrl(const nl_cgroups_t *cg, const char *c) {
  char *p = nl_xasprintf("%s/%s", cg->fs_root, c);
  bool ok = is_dir(p);
  free(p);
  return ok;
}

/* The directory of path in controller c (v1) or the unified tree (v2). */
static char *dir_of(const nl_cgroups_t *cg, const char *c, const char *path) {
  if (cg->v2) return nl_xasprintf("%s%s", cg->fs_root, strcmp(path, "/") ? path : "");
  return nl_xasprintf("%s/%s%s", cg->fs_root, c, strcmp(path, "/") ? path : "");
}

static int write_file(const char *dir, const char *file, const char *val, nl_err_t **err) {
  char *p = nl_xasprintf("%s/%s", dir, file);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ssize_t n = fd < 0 ? -1 : write(fd, val, strlen(val));
  int e = errno;
  if (fd >= 0) close(fd);
  int r = n == (ssize_t)strlen(val) ? 0 : nl_err_set(err, e, "write %s to %s: %s", val, p, strerror(e));
  free(p);
  return r;
}

/* Reads a small control file into buf (trimmed); "" when unreadable. */
static void read_file(const char *dir, const char *file, char *buf, size_t len) {
  char *p = nl_xasprintf("%s/%s", dir, file);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  free(p);
  ssize_t n = fd < 0 ? 0 : read(fd, buf, len - 1);
  if (fd >= 0) close(fd);
  if (n < 0) n = 0;
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) n--;
  buf[n] = '\0';
}

int nl_cgroups__detect(nl_cgroups_t *cg, nl_err_t **err) {
  char *p = nl_xasprintf("%s/cgroup.controllers", cg->fs_root);
  cg->v2 = access(p, F_OK) == 0;
  free(p);
  if (cg->v2) {
    char have[512];
    read_file(cg->fs_root, "cgroup.controllers", have, sizeof have);
    static const char *const need[] = {"cpu", "memory"};
    for (size_t i = 0; i < 2; i++) {
      char word[16];
      snprintf(word, sizeof word, " %s ", need[i]);
      char *padded = nl_xasprintf(" %s ", have);
      bool ok = strstr(padded, word) != NULL;
      free(padded);
      if (!ok)
        return nl_err_set(err, ENOENT, "cgroup v2 at %s: controller %s is not available",
                          cg->fs_root, need[i]);
    }
    return 0;
  }
  if (!has_ctrl(cg, "cpu") || !has_ctrl(cg, "memory"))
    return nl_err_set(err, ENOENT,
                      "failed to find subsystem mount for required subsystem: %s (under %s)",
                      has_ctrl(cg, "cpu") ? "memory" : "cpu", cg->fs_root);
  return 0;
}

bool nl_cgroups__hugetlb(const nl_cgroups_t *cg) {
  if (!cg->v2) return has_ctrl(cg, "hugetlb");
  char have[512];
  read_file(cg->fs_root, "cgroup.controllers", have, sizeof have);
  char *padded = nl_xasprintf(" %s ", have);
  bool ok = strstr(padded, " hugetlb ") != NULL;
  free(padded);
  return ok;
}

bool nl_cgroups__exists(const nl_cgroups_t *cg, const char *path) {
  for (size_t i = 0; i < (cg->v2 ? 1 : N_V1); i++) {
    if (!cg->v2 && !has_ctrl(cg, v1_ctrls[i])) continue;
    char *d = dir_of(cg, v1_ctrls[i], path);
    bool ok = is_dir(d);
    free(d);
    if (!ok) return false;
  }
  return true;
}

/* A new v1 cpuset cgroup starts with no cpus and mems: it gets its parent's. */
static void cpuset_inherit(const char *dir) {
  char *parent = nl_xstrdup(dir);
  char *slash = strrchr(parent, '/');
  if (slash) *slash = '\0';
  static const char *const files[] = {"cpuset.cpus", "cpuset.mems"};
  for (size_t i = 0; i < 2; i++) {
    char mine[256], theirs[256];
    read_file(dir, files[i], mine, sizeof mine);
    read_file(parent, files[i], theirs, sizeof theirs);
    if (!*mine && *theirs) write_file(dir, files[i], theirs, NULL);
  }
  free(parent);
}

/* mkdir -p of path below top, with what each new level needs. */
static int make_dirs(const nl_cgroups_t *cg, const char *ctrl, const char *top, const char *path,
                     nl_err_t **err) {
  char *d = nl_xasprintf("%s%s", top, path);
  size_t start = strlen(top);
  for (size_t i = start + 1;; i++) {
    if (d[i] != '/' && d[i] != '\0') continue;
    char c = d[i];
    d[i] = '\0';
    if (cg->v2) {
      /* the parent hands its controllers down */
      char *parent = nl_xstrndup(d, strrchr(d, '/') - d);
      for (size_t k = 0; k < N_V2; k++) {
        char on[16];
        snprintf(on, sizeof on, "+%s", v2_ctrls[k]);
        write_file(parent, "cgroup.subtree_control", on, NULL); /* absent ones fail */
      }
      free(parent);
    }
    if (mkdir(d, 0755) == 0) {
      if (ctrl && !strcmp(ctrl, "cpuset")) cpuset_inherit(d);
    } else if (errno != EEXIST) {
      int e = errno;
      nl_err_set(err, e, "mkdir %s: %s", d, strerror(e));
      free(d);
      return -1;
    }
    if (c == '\0') break;
    d[i] = c;
  }
  free(d);
  return 0;
}

int nl_cgroups__create(const nl_cgroups_t *cg, const char *path, const nl_cgroup_res_t *r,
                       nl_err_t **err) {
  if (cg->v2) {
    if (make_dirs(cg, NULL, cg->fs_root, path, err) < 0) return -1;
  } else {
    for (size_t i = 0; i < N_V1; i++) {
      if (!has_ctrl(cg, v1_ctrls[i])) continue;
      char *top = nl_xasprintf("%s/%s", cg->fs_root, v1_ctrls[i]);
      int rc = make_dirs(cg, v1_ctrls[i], top, path, err);
      free(top);
      if (rc < 0) return -1;
    }
  }
  return nl_cgroups__set(cg, path, r, err);
}

int nl_cgroups__join(const nl_cgroups_t *cg, const char *path, int pid, nl_err_t **err) {
  nl_cgroup_res_t none = {0};
  if (nl_cgroups__create(cg, path, &none, err) < 0) return -1;
  char v[32];
  snprintf(v, sizeof v, "%d", pid);
  for (size_t i = 0; i < (cg->v2 ? 1 : N_V1); i++) {
    if (!cg->v2 && !has_ctrl(cg, v1_ctrls[i])) continue;
    char *d = dir_of(cg, v1_ctrls[i], path);
    /* v1 charges a page to the cgroup that first touched it: the agent's
     * memory so far goes with it (anon and mapped file pages), or the
     * cgroup would show only what it touches after the move */
    if (!cg->v2 && !strcmp(v1_ctrls[i], "memory"))
      write_file(d, "memory.move_charge_at_immigrate", "3", NULL);
    int r = write_file(d, "cgroup.procs", v, err);
    free(d);
    if (r < 0) return -1;
  }
  /* a hybrid host's unified hierarchy (its pressure files) too, when it
   * takes the process */
  char *u = nl_xasprintf("%s/unified", cg->fs_root);
  if (!cg->v2 && is_dir(u)) {
    char *d = nl_xasprintf("%s%s", u, path);
    if (mkdir(d, 0755) == 0 || errno == EEXIST) write_file(d, "cgroup.procs", v, NULL);
    free(d);
  }
  free(u);
  return 0;
}

static int set_one(const nl_cgroups_t *cg, const char *ctrl, const char *path, const char *file,
                   const char *val, nl_err_t **err) {
  if (!cg->v2 && !has_ctrl(cg, ctrl)) return 0;
  char *d = dir_of(cg, ctrl, path);
  int r = write_file(d, file, val, err);
  free(d);
  return r;
}

int nl_cgroups__set(const nl_cgroups_t *cg, const char *path, const nl_cgroup_res_t *r,
                    nl_err_t **err) {
  char v[64];
  int rc = 0;
  if (r->cpu_shares) {
    if (cg->v2)
      snprintf(v, sizeof v, "%" PRId64, nl_cgroups_shares_to_weight(r->cpu_shares));
    else
      snprintf(v, sizeof v, "%" PRId64, r->cpu_shares);
    rc |= set_one(cg, "cpu", path, cg->v2 ? "cpu.weight" : "cpu.shares", v, err);
  }
  if (r->cpu_quota || r->cpu_period) {
    int64_t period = r->cpu_period ? r->cpu_period : NL_CGROUPS_QUOTA_PERIOD;
    if (cg->v2) {
      if (r->cpu_quota > 0)
        snprintf(v, sizeof v, "%" PRId64 " %" PRId64, r->cpu_quota, period);
      else
        snprintf(v, sizeof v, "max %" PRId64, period);
      rc |= set_one(cg, "cpu", path, "cpu.max", v, err);
    } else {
      snprintf(v, sizeof v, "%" PRId64, period);
      rc |= set_one(cg, "cpu", path, "cpu.cfs_period_us", v, err);
      snprintf(v, sizeof v, "%" PRId64, r->cpu_quota > 0 ? r->cpu_quota : -1);
      rc |= set_one(cg, "cpu", path, "cpu.cfs_quota_us", v, err);
    }
  }
  if (r->memory) {
    snprintf(v, sizeof v, "%" PRId64, r->memory);
    rc |= set_one(cg, "memory", path, cg->v2 ? "memory.max" : "memory.limit_in_bytes", v, err);
  }
  if (r->pids) {
    if (r->pids > 0)
      snprintf(v, sizeof v, "%" PRId64, r->pids);
    else
      snprintf(v, sizeof v, "max");
    rc |= set_one(cg, "pids", path, "pids.max", v, err);
  }
  for (size_t i = 0; i < r->n_hugetlb; i++) {
    char file[48];
    snprintf(file, sizeof file, "hugetlb.%s.%s", cg->page_sizes[i].name,
             cg->v2 ? "max" : "limit_in_bytes");
    snprintf(v, sizeof v, "%" PRId64, r->hugetlb[i]);
    rc |= set_one(cg, "hugetlb", path, file, v, err);
  }
  return rc ? -1 : 0;
}

/* Kills what runs in dir and below, then removes the tree, children first
 * (upstream's tryKillingCgroupProcesses and Destroy). */
static int64_t get_one(const nl_cgroups_t *cg, const char *ctrl, const char *path,
                       const char *file, char *buf, size_t len) {
  char *d = dir_of(cg, ctrl, path);
  read_file(d, file, buf, len);
  free(d);
  return strtoll(buf, NULL, 10);
}

int nl_cgroups__get(const nl_cgroups_t *cg, const char *path, nl_cgroup_res_t *r, nl_err_t **err) {
  char v[64];
  memset(r, 0, sizeof *r);
  if (cg->v2) {
    /* cpu.weight back to shares, as upstream's CpuWeightToCpuShares */
    int64_t w = get_one(cg, "cpu", path, "cpu.weight", v, sizeof v);
    if (w > 0) r->cpu_shares = 2 + ((w - 1) * 262142) / 9999;
    get_one(cg, "cpu", path, "cpu.max", v, sizeof v);
    r->cpu_quota = strncmp(v, "max", 3) == 0 ? -1 : strtoll(v, NULL, 10);
    const char *sp = strchr(v, ' ');
    r->cpu_period = sp ? strtoll(sp + 1, NULL, 10) : NL_CGROUPS_QUOTA_PERIOD;
    get_one(cg, "memory", path, "memory.max", v, sizeof v);
    r->memory = strncmp(v, "max", 3) == 0 ? 0 : strtoll(v, NULL, 10);
  } else {
    r->cpu_shares = get_one(cg, "cpu", path, "cpu.shares", v, sizeof v);
    r->cpu_quota = get_one(cg, "cpu", path, "cpu.cfs_quota_us", v, sizeof v);
    r->cpu_period = get_one(cg, "cpu", path, "cpu.cfs_period_us", v, sizeof v);
    r->memory = get_one(cg, "memory", path, "memory.limit_in_bytes", v, sizeof v);
    /* no limit reads as the largest page-aligned int64 */
    if (r->memory >= ((int64_t)1 << 62)) r->memory = 0;
  }
  if (r->cpu_shares <= 0)
    return nl_err_set(err, EIO, "read the cpu configuration of cgroup %s", path);
  return 0;
}

int64_t nl_cgroups__memory_usage(const nl_cgroups_t *cg, const char *path) {
  char v[64];
  int64_t u = get_one(cg, "memory", path, cg->v2 ? "memory.current" : "memory.usage_in_bytes",
                      v, sizeof v);
  return *v ? u : -1;
}

static int remove_tree(const char *dir, nl_err_t **err) {
  DIR *dp = opendir(dir);
  if (!dp) return errno == ENOENT ? 0 : nl_err_set(err, errno, "open %s: %s", dir, strerror(errno));
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(dp))) {
    if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char *sub = nl_xasprintf("%s/%s", dir, de->d_name);
    if (remove_tree(sub, err) < 0) rc = -1;
    free(sub);
  }
  closedir(dp);
  if (rc < 0) return -1;
  for (int tries = 0;; tries++) {
    char procs[4096];
    read_file(dir, "cgroup.procs", procs, sizeof procs);
    for (char *s = procs, *end; *s; s = end) {
      long pid = strtol(s, &end, 10);
      if (end == s) break;
      if (pid > 0) kill((pid_t)pid, SIGKILL);
    }
    if (rmdir(dir) == 0 || errno == ENOENT) return 0;
    /* a plain directory (the tests' tree) keeps its control files */
    if (errno == ENOTEMPTY) {
      DIR *fp = opendir(dir);
      while (fp && (de = readdir(fp)))
        if (de->d_type == DT_REG) {
          char *f = nl_xasprintf("%s/%s", dir, de->d_name);
          unlink(f);
          free(f);
        }
      if (fp) closedir(fp);
      if (rmdir(dir) == 0) return 0;
    }
    if (errno != EBUSY || tries == 20)
      return nl_err_set(err, errno, "remove cgroup %s: %s", dir, strerror(errno));
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL); /* the killed exit */
  }
}

int nl_cgroups__destroy(const nl_cgroups_t *cg, const char *path, nl_err_t **err) {
  if (cg->v2) {
    char *d = dir_of(cg, NULL, path);
    int r = remove_tree(d, err);
    free(d);
    return r;
  }
  /* Every hierarchy: the runtime makes the containers' cgroups in all of
   * them, a hybrid host's unified one (where it puts them for their pressure
   * files) included, or its pod cgroups pile up there. */
  DIR *dp = opendir(cg->fs_root);
  if (!dp) return nl_err_set(err, errno, "open %s: %s", cg->fs_root, strerror(errno));
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(dp))) {
    if (de->d_name[0] == '.') continue;
    char *d = dir_of(cg, de->d_name, path);
    if (is_dir(d) && remove_tree(d, err) < 0) rc = -1;
    free(d);
  }
  closedir(dp);
  return rc;
}

bool nl_cgroups__swap_on(const char *swaps) {
  FILE *f = fopen(swaps, "re");
  if (!f) return false;
  char line[512];
  int lines = 0;
  while (fgets(line, sizeof line, f))
    if (line[0] != '\n') lines++;
  fclose(f);
  return lines > 1; /* the first is the header */
}
