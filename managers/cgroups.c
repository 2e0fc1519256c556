/* The container manager: start-up checks, the node allocatable and QoS
 * cgroups, the pod cgroups, and the periodic QoS update (upstream
 * container_manager_linux.go, node_container_manager_linux.go,
 * qos_container_manager_linux.go, pod_container_manager_linux.go). */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "agent/model/podres.h"
#include "managers/cgroups_internal.h"
#include "managers/runtime.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* The directory form of a name for the driver. */
static char *fs_path(const nl_cgroups_t *cg, const char *name) {
  return cg->systemd ? nl_cgroups_name_systemd(name) : nl_xstrdup(name);
}

static char *child(const char *parent, const char *name) {
  return nl_xasprintf("%s/%s", strcmp(parent, "/") ? parent : "", name);
}

/* Guaranteed pods sit in kubepods itself. */
static char *qos_name(const nl_cgroups_t *cg, const char *qos) {
  if (!strcmp(qos, "Burstable")) return child(cg->kubepods, "burstable");
  if (!strcmp(qos, "BestEffort")) return child(cg->kubepods, "besteffort");
  return nl_xstrdup(cg->kubepods);
}

static char *pod_path(const nl_cgroups_t *cg, const char *qos, const char *uid) {
  char *parent = qos_name(cg, qos);
  char *pod = nl_xasprintf("pod%s", uid);
  char *name = child(parent, pod);
  char *path = fs_path(cg, name);
  free(parent);
  free(pod);
  free(name);
  return path;
}

/* Creates (or repairs) the cgroup of name and gives it r. */
static int ensure(const nl_cgroups_t *cg, const char *name, const nl_cgroup_res_t *r,
                  nl_err_t **err) {
  char *path = fs_path(cg, name);
  int rc = nl_cgroups__exists(cg, path) ? nl_cgroups__set(cg, path, r, err)
                                        : nl_cgroups__create(cg, path, r, err);
  if (rc < 0) nl_err_wrap(err, "cgroup %s", path);
  free(path);
  return rc;
}

/* ---- node allocatable ---- */

static int64_t minus(int64_t cap, int64_t a, int64_t b) {
  if (cap < 0) return -1;
  int64_t v = cap - (a > 0 ? a : 0) - (b > 0 ? b : 0);
  return v < 0 ? 0 : v;
}

/* systemReserved or kubeReserved on their existing cgroup (enforceExistingCgroup). */
static int enforce_reserved(const nl_cgroups_t *cg, const char *what, const char *cgroup,
                            nl_cgroups_amounts_t a, nl_err_t **err) {
  char *name = nl_cgroups_name_parse(cgroup, cg->systemd);
  char *path = fs_path(cg, name);
  nl_cgroup_res_t r = nl_cgroups_amounts_res(a);
  int rc = 0;
  if (!nl_cgroups__exists(cg, path))
    rc = nl_err_set(err, ENOENT, "\"%s\" cgroup does not exist", path);
  else
    rc = nl_cgroups__set(cg, path, &r, err);
  if (rc < 0) nl_err_wrap(err, "Failed to enforce %s Reserved Cgroup Limits on \"%s\"", what, cgroup);
  else nl_info("enforced %s reserved limits on cgroup %s", what, path);
  free(name);
  free(path);
  return rc;
}

static int node_allocatable(nl_cgroups_t *cg, const nl_cgroups_opts_t *o, nl_err_t **err) {
  nl_cgroups_amounts_t alloc = o->capacity;
  /* upstream's limit is capacity minus the reservations: the hard eviction
   * threshold stays inside kubepods, for the eviction manager to act on. */
  if (o->enforce_pods) {
    alloc.cpu_milli = minus(o->capacity.cpu_milli, o->system_reserved.cpu_milli,
                            o->kube_reserved.cpu_milli);
    alloc.memory = minus(o->capacity.memory, o->system_reserved.memory, o->kube_reserved.memory);
    alloc.pids = minus(o->capacity.pids, o->system_reserved.pids, o->kube_reserved.pids);
  }
  nl_cgroup_res_t r = nl_cgroups_amounts_res(alloc);
  nl_err_t *e = NULL;
  if (ensure(cg, cg->kubepods, &r, &e) < 0) {
    /* e.g. pods already use more memory than the new limit (EBUSY); upstream
     * retries and the eviction manager brings the usage down */
    if (e->code != EBUSY) return nl_err_wrap((*err = e, err), "create %s", cg->kubepods);
    nl_warn("Failed to update Node Allocatable Limits \"%s\": %s", cg->kubepods, nl_err_msg(e));
    nl_err_free(&e);
  }
  nl_vlog(2, "node allocatable cgroup %s: cpu shares %lld, memory %lld, pids %lld", cg->kubepods,
          (long long)r.cpu_shares, (long long)r.memory, (long long)r.pids);
  if (o->enforce_system_reserved &&
      enforce_reserved(cg, "System", o->system_reserved_cgroup, o->system_reserved, err) < 0)
    return -1;
  if (o->enforce_kube_reserved &&
      enforce_reserved(cg, "Kube", o->kube_reserved_cgroup, o->kube_reserved, err) < 0)
    return -1;
  return 0;
}

/* ---- QoS ---- */

/* upstream UpdateCgroups: besteffort gets the minimum shares, burstable the
 * shares of its pods' requests. Creates what is missing. */
static int qos_update(const nl_cgroups_t *cg, int64_t burstable_milli, nl_err_t **err) {
  char *be = qos_name(cg, "BestEffort"), *bu = qos_name(cg, "Burstable");
  nl_cgroup_res_t ber = {.cpu_shares = NL_CGROUPS_MIN_SHARES};
  nl_cgroup_res_t bur = {.cpu_shares = nl_cgroups_milli_to_shares(burstable_milli)};
  int rc = ensure(cg, be, &ber, err) < 0 || ensure(cg, bu, &bur, err) < 0 ? -1 : 0;
  free(be);
  free(bu);
  return rc;
}

static void qos_work(uv_work_t *w) {
  nl_cgroups_t *cg = container_of(w, nl_cgroups_t, qos_work);
  qos_update(cg, cg->qos_milli, &cg->qos_err);
}

static void qos_kick(nl_cgroups_t *cg);

static void finish(nl_cgroups_t *cg) {
  assert(cg->pending > 0);
  if (--cg->pending > 0) return;
  free(cg->fs_root);
  free(cg->root);
  free(cg->kubepods);
  cg->fs_root = cg->root = cg->kubepods = NULL;
  if (cg->done_cb) cg->done_cb(cg);
}

static void qos_done(uv_work_t *w, int status) {
  nl_cgroups_t *cg = container_of(w, nl_cgroups_t, qos_work);
  cg->qos_busy = false;
  if (cg->qos_err) nl_warn("failed to update the QoS cgroups: %s", nl_err_msg(cg->qos_err));
  else if (status < 0) nl_warn("failed to update the QoS cgroups: %s", uv_strerror(status));
  nl_err_free(&cg->qos_err);
  if (cg->stopping) {
    finish(cg);
    return;
  }
  if (cg->qos_again) qos_kick(cg);
}

static void qos_kick(nl_cgroups_t *cg) {
  if (cg->stopping || !cg->per_qos) return;
  if (cg->qos_busy) {
    cg->qos_again = true;
    return;
  }
  cg->qos_again = false;
  cg->qos_milli = cg->burstable_cpu ? cg->burstable_cpu(cg->ctx) : 0;
  if (uv_queue_work(cg->loop, &cg->qos_work, qos_work, qos_done) == 0) cg->qos_busy = true;
}

static void on_qos_timer(uv_timer_t *t) { qos_kick(container_of(t, nl_cgroups_t, qos_timer)); }

void nl_cgroups_update_qos(nl_cgroups_t *cg) { qos_kick(cg); }

/* ---- the manager ---- */

static bool systemd_running(const char *dir) {
  struct stat st;
  return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

int nl_cgroups_join_self(const char *fs_root, const char *path, nl_err_t **err) {
  nl_cgroups_t cg = {.fs_root = (char *)(fs_root ? fs_root : "/sys/fs/cgroup")};
  if (nl_cgroups__detect(&cg, err) < 0 || nl_cgroups__join(&cg, path, (int)getpid(), err) < 0)
    return nl_err_wrap(err, "kubeletCgroups %s", path);
  nl_info("in kubeletCgroups %s", path);
  return 0;
}

/* libcontainer's HugePageSizes: the directories hugepages-<N>kB, named for
 * the controller as HugePageUnitSizeFromByteSize does ("2MB", "1GB"). */
static void page_sizes(nl_cgroups_t *cg, const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) && cg->n_page_sizes < NL_CGROUPS_MAX_PAGE_SIZES) {
    long long kb;
    if (sscanf(e->d_name, "hugepages-%lldkB", &kb) != 1 || kb <= 0) continue;
    static const char *const units[] = {"KB", "MB", "GB", "TB", "PB"};
    size_t u = 0;
    long long n = kb;
    while (n >= 1024 && n % 1024 == 0 && u + 1 < sizeof units / sizeof *units) {
      n /= 1024;
      u++;
    }
    struct nl_cgroups_page_size *p = &cg->page_sizes[cg->n_page_sizes++];
    p->bytes = (int64_t)kb * 1024;
    snprintf(p->name, sizeof p->name, "%lld%s", n, units[u]);
  }
  if (d) closedir(d);
}

int nl_cgroups_init(nl_cgroups_t *cg, uv_loop_t *loop, const nl_cgroups_opts_t *o,
                    nl_err_t **err) {
  memset(cg, 0, sizeof *cg);
  cg->loop = loop;
  cg->systemd = o->systemd;
  cg->per_qos = o->per_qos;
  cg->cfs_quota = o->cfs_quota;
  cg->pod_pids_limit = o->pod_pids_limit;
  cg->burstable_cpu = o->burstable_cpu;
  cg->ctx = o->ctx;
  cg->fs_root = nl_xstrdup(o->fs_root ? o->fs_root : "/sys/fs/cgroup");
  cg->root = nl_cgroups_name_parse(o->cgroup_root, o->systemd);
  uv_timer_init(loop, &cg->qos_timer);
  if (o->fail_swap_on && nl_cgroups__swap_on(o->swaps ? o->swaps : "/proc/swaps"))
    return nl_err_set(err, NL_EINVAL,
                      "running with swap on is not supported, please disable swap or set "
                      "--fail-swap-on flag to false");
  if (o->systemd && !systemd_running(o->systemd_dir ? o->systemd_dir : "/run/systemd/system"))
    return nl_err_set(err, NL_EINVAL,
                      "cgroupDriver is systemd but systemd is not running on this host (no %s): "
                      "use cgroupDriver cgroupfs",
                      o->systemd_dir ? o->systemd_dir : "/run/systemd/system");
  if (nl_cgroups__detect(cg, err) < 0) return -1;
  if (nl_cgroups__hugetlb(cg))
    page_sizes(cg, o->hugepages_dir ? o->hugepages_dir : "/sys/kernel/mm/hugepages");
  nl_info("cgroups %s, driver %s, cgroupsPerQOS %s, cgroupRoot %s", cg->v2 ? "v2" : "v1",
          cg->systemd ? "systemd" : "cgroupfs", cg->per_qos ? "true" : "false", cg->root);
  if (!cg->per_qos) return 0;
  char *root_path = fs_path(cg, cg->root);
  bool root_ok = nl_cgroups__exists(cg, root_path);
  free(root_path);
  if (!root_ok)
    return nl_err_set(err, ENOENT, "invalid configuration: cgroup-root \"%s\" doesn't exist",
                      o->cgroup_root && *o->cgroup_root ? o->cgroup_root : "/");
  cg->kubepods = child(cg->root, "kubepods");
  if (node_allocatable(cg, o, err) < 0) return -1;
  cg->qos_milli = cg->burstable_cpu ? cg->burstable_cpu(cg->ctx) : 0;
  if (qos_update(cg, cg->qos_milli, err) < 0) return nl_err_wrap(err, "QoS cgroups");
  return 0;
}

void nl_cgroups_start(nl_cgroups_t *cg) {
  if (cg->per_qos)
    uv_timer_start(&cg->qos_timer, on_qos_timer, NL_CGROUPS_QOS_PERIOD_MS, NL_CGROUPS_QOS_PERIOD_MS);
}

static void timer_closed(uv_handle_t *h) {
  finish(container_of((uv_timer_t *)h, nl_cgroups_t, qos_timer));
}

void nl_cgroups_stop(nl_cgroups_t *cg, nl_cgroups_done_cb done_cb) {
  if (cg->stopping) return;
  cg->stopping = true;
  cg->done_cb = done_cb;
  cg->pending = 1 + cg->qos_busy; /* the names go when the job is done */
  uv_close((uv_handle_t *)&cg->qos_timer, timer_closed);
}

/* ---- pods ---- */

char *nl_cgroups_pod_parent(const nl_cgroups_t *cg, const nl_pod_t *pod) {
  if (!cg->per_qos) return strcmp(cg->root, "/") ? fs_path(cg, cg->root) : nl_xstrdup("");
  return pod_path(cg, nl_pod_qos_class(pod), pod->metadata.uid);
}

/* ResourceConfigForPod's HugePageLimit with maybeSetHugetlb: each page size
 * the pod's request of it, 0 for one it does not ask for. */
static void pod_hugetlb(const nl_cgroups_t *cg, const nl_pod_t *pod, nl_cgroup_res_t *r) {
  for (size_t i = 0; i < cg->n_page_sizes; i++) {
    char q[NL_QUANTITY_STRLEN], name[48];
    nl_quantity_t size = {cg->page_sizes[i].bytes, 0, NL_QUANTITY_BINARY_SI};
    snprintf(name, sizeof name, "hugepages-%s", nl_quantity_format(&size, q));
    int64_t v = nl_pod_request(pod, name);
    r->hugetlb[i] = v > 0 ? v : 0;
  }
  r->n_hugetlb = cg->n_page_sizes;
}

int nl_cgroups_pod_ensure(const nl_cgroups_t *cg, const nl_pod_t *pod, nl_err_t **err) {
  if (!cg->per_qos) return 0;
  char *path = pod_path(cg, nl_pod_qos_class(pod), pod->metadata.uid);
  nl_cgroup_res_t r = nl_cgroups_pod_res(pod, cg->cfs_quota, cg->pod_pids_limit);
  pod_hugetlb(cg, pod, &r);
  int rc = nl_cgroups__exists(cg, path) ? nl_cgroups__set(cg, path, &r, err)
                                        : nl_cgroups__create(cg, path, &r, err);
  free(path);
  return rc;
}

int nl_cgroups_pod_read(const nl_cgroups_t *cg, const nl_pod_t *pod, nl_cgroup_res_t *out,
                        nl_err_t **err) {
  assert(cg->per_qos);
  char *path = pod_path(cg, nl_pod_qos_class(pod), pod->metadata.uid);
  int rc = nl_cgroups__get(cg, path, out, err);
  free(path);
  return rc;
}

int64_t nl_cgroups_pod_memory_usage(const nl_cgroups_t *cg, const nl_pod_t *pod) {
  assert(cg->per_qos);
  char *path = pod_path(cg, nl_pod_qos_class(pod), pod->metadata.uid);
  int64_t u = nl_cgroups__memory_usage(cg, path);
  free(path);
  return u;
}

int nl_cgroups_pod_write(const nl_cgroups_t *cg, const nl_pod_t *pod, const nl_cgroup_res_t *r,
                         nl_err_t **err) {
  assert(cg->per_qos);
  char *path = pod_path(cg, nl_pod_qos_class(pod), pod->metadata.uid);
  int rc = nl_cgroups__set(cg, path, r, err);
  free(path);
  return rc;
}

int nl_cgroups_pod_ensure_exists(const nl_cgroups_t *cg, const nl_pod_t *pod, nl_err_t **err) {
  if (!cg->per_qos) return 0;
  char *path = pod_path(cg, nl_pod_qos_class(pod), pod->metadata.uid);
  nl_cgroup_res_t r = nl_cgroups_pod_res(pod, cg->cfs_quota, cg->pod_pids_limit);
  pod_hugetlb(cg, pod, &r);
  int rc = 0;
  if (nl_cgroups__exists(cg, path)) {
    nl_cgroup_res_t pids = {.pids = r.pids};
    rc = nl_cgroups__set(cg, path, &pids, err);
  } else {
    rc = nl_cgroups__create(cg, path, &r, err);
  }
  free(path);
  return rc;
}

int nl_cgroups_pod_destroy(const nl_cgroups_t *cg, const char *uid, nl_err_t **err) {
  if (!cg->per_qos) return 0;
  assert(uid && *uid);
  static const char *const classes[] = {"Guaranteed", "Burstable", "BestEffort"};
  for (size_t i = 0; i < 3; i++) {
    char *path = pod_path(cg, classes[i], uid);
    int rc = nl_cgroups__destroy(cg, path, err);
    free(path);
    if (rc < 0) return -1;
  }
  return 0;
}
