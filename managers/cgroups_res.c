/* The pure half of the container manager: what a cgroup is given (upstream
 * helpers_linux.go) and how cgroups are named (cgroup_manager_linux.go). */
#include <stdio.h>
#include <string.h>

#include "managers/admission.h"
#include "managers/cgroups.h"
#include "managers/runtime.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

int64_t nl_cgroups_milli_to_shares(int64_t m) {
  if (m == 0) return NL_CGROUPS_MIN_SHARES;
  int64_t s = m * 1024 / 1000;
  return s < NL_CGROUPS_MIN_SHARES ? NL_CGROUPS_MIN_SHARES
         : s > NL_CGROUPS_MAX_SHARES ? NL_CGROUPS_MAX_SHARES
                                     : s;
}

int64_t nl_cgroups_milli_to_quota(int64_t m, int64_t period) {
  if (m == 0) return 0;
  int64_t q = m * period / 1000;
  return q < NL_CGROUPS_MIN_QUOTA ? NL_CGROUPS_MIN_QUOTA : q;
}

int64_t nl_cgroups_shares_to_weight(int64_t shares) {
  if (shares == 0) return 0;
  /* [2, 262144] onto [1, 10000] */
  return 1 + ((shares - 2) * 9999) / 262142;
}

nl_cgroup_res_t nl_cgroups_pod_res(const nl_pod_t *pod, bool cfs_quota, int64_t pids_limit) {
  bool cpu_all, mem_all;
  int64_t cpu_lim = nl_pod_limit(pod, "cpu", &cpu_all);
  int64_t mem_lim = nl_pod_limit(pod, "memory", &mem_all);
  int64_t shares = nl_cgroups_milli_to_shares(nl_pod_request(pod, "cpu"));
  int64_t quota = cfs_quota ? nl_cgroups_milli_to_quota(cpu_lim, NL_CGROUPS_QUOTA_PERIOD) : -1;
  nl_cgroup_res_t r = {0};
  const char *qos = nl_pod_qos_class(pod);
  if (strcmp(qos, "Guaranteed") == 0) {
    r = (nl_cgroup_res_t){shares, quota, NL_CGROUPS_QUOTA_PERIOD, mem_lim, 0};
  } else if (strcmp(qos, "Burstable") == 0) {
    r.cpu_shares = shares;
    if (cpu_all) {
      r.cpu_quota = quota;
      r.cpu_period = NL_CGROUPS_QUOTA_PERIOD;
    }
    if (mem_all) r.memory = mem_lim;
  } else {
    r.cpu_shares = NL_CGROUPS_MIN_SHARES;
  }
  if (pids_limit > 0) r.pids = pids_limit;
  return r;
}

nl_cgroup_res_t nl_cgroups_amounts_res(nl_cgroups_amounts_t a) {
  nl_cgroup_res_t r = {0};
  if (a.cpu_milli >= 0) r.cpu_shares = nl_cgroups_milli_to_shares(a.cpu_milli);
  if (a.memory >= 0) r.memory = a.memory;
  if (a.pids >= 0) r.pids = a.pids;
  return r;
}

/* ---- names ---- */

char *nl_cgroups_name_systemd(const char *name) {
  nl_buf_t out = {0}, slice = {0};
  for (const char *p = name; *p;) {
    while (*p == '/') p++;
    size_t n = strcspn(p, "/");
    if (n == 0) break;
    if (slice.len) nl_buf_append(&slice, "-", 1);
    for (size_t i = 0; i < n; i++) nl_buf_append(&slice, p[i] == '-' ? "_" : &p[i], 1);
    nl_buf_printf(&out, "/%.*s.slice", (int)slice.len, slice.data);
    p += n;
  }
  nl_buf_free(&slice);
  if (!out.len) nl_buf_append(&out, "/", 1);
  return nl_buf_steal(&out);
}

char *nl_cgroups_name_parse(const char *root, bool systemd) {
  if (!root || !*root || !strcmp(root, "/")) return nl_xstrdup("/");
  nl_buf_t out = {0};
  if (!systemd) {
    if (root[0] != '/') nl_buf_append(&out, "/", 1);
    nl_buf_append(&out, root, strlen(root));
    while (out.len > 1 && out.data[out.len - 1] == '/') out.data[--out.len] = '\0';
    return nl_buf_steal(&out);
  }
  /* the last slice names the whole path: "a-b.slice" is /a/b */
  const char *base = strrchr(root, '/');
  base = base ? base + 1 : root;
  size_t n = strlen(base);
  if (n > 6 && !strcmp(base + n - 6, ".slice")) n -= 6;
  nl_buf_append(&out, "/", 1);
  for (size_t i = 0; i < n; i++)
    nl_buf_append(&out, base[i] == '-' ? "/" : base[i] == '_' ? "-" : &base[i], 1);
  return nl_buf_steal(&out);
}
