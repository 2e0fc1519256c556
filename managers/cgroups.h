/* The container manager's cgroups (upstream pkg/kubelet/cm): the node
 * allocatable cgroup `kubepods` under cgroupRoot, the QoS cgroups `burstable`
 * and `besteffort` under it, and one cgroup per pod (`pod<uid>`), which the
 * runtime gets as the sandbox's cgroup parent. cgroups v1 (one hierarchy per
 * controller) and v2 (unified), with the cgroupfs or systemd naming.
 *
 * Where the work runs:
 *  - nl_cgroups_init() validates, builds (or repairs) the hierarchy and enforces
 *    node allocatable synchronously: call it at start-up, before the loop runs.
 *  - nl_cgroups_pod_ensure() and nl_cgroups_pod_destroy() block: call them on
 *    the thread pool only. They and nl_cgroups_pod_parent() read only what
 *    init set, so they may run on any thread while the manager lives.
 *  - the QoS update (every minute, and when kicked) runs on the thread pool. */
#ifndef NL_CGROUPS_H
#define NL_CGROUPS_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "agent/model/pod.h"
#include "reactor/error.h"

/* Upstream's cm constants. */
#define NL_CGROUPS_MIN_SHARES 2
#define NL_CGROUPS_MAX_SHARES 262144
#define NL_CGROUPS_QUOTA_PERIOD 100000 /* us: 100 ms */
#define NL_CGROUPS_MIN_QUOTA 1000
#define NL_CGROUPS_QOS_PERIOD_MS (60 * 1000) /* periodicQOSCgroupUpdateInterval */
#define NL_CGROUPS_MAX_PAGE_SIZES 4 /* huge page sizes a node has */

/* cpu.shares from millicores (MilliCPUToShares): 0 -> 2, clamped to 2..262144. */
int64_t nl_cgroups_milli_to_shares(int64_t milli);
/* cfs quota from millicores (MilliCPUToQuota): 0 -> 0 (none), at least 1000. */
int64_t nl_cgroups_milli_to_quota(int64_t milli, int64_t period);
/* cgroup v2 cpu.weight from cpu.shares (CpuSharesToCpuWeight). */
int64_t nl_cgroups_shares_to_weight(int64_t shares);

/* What one cgroup is given (upstream ResourceConfig); 0 means "leave alone". */
typedef struct nl_cgroup_res {
  int64_t cpu_shares;
  int64_t cpu_quota;  /* -1: no limit */
  int64_t cpu_period;
  int64_t memory;     /* bytes */
  int64_t pids;       /* -1: max */
  /* hugetlb limits in bytes, one for each of the manager's page sizes
   * (nl_cgroups_t.page_sizes, in its order); n_hugetlb 0: leave alone. */
  int64_t hugetlb[NL_CGROUPS_MAX_PAGE_SIZES];
  size_t n_hugetlb;
} nl_cgroup_res_t;

/* upstream ResourceConfigForPod: shares from the pod's cpu requests, a quota
 * from its limits when every container has one (-1 when !cfs_quota), memory
 * when every container has a limit; Guaranteed gets all three, BestEffort only
 * the minimum shares. pids_limit > 0 is podPidsLimit. */
nl_cgroup_res_t nl_cgroups_pod_res(const nl_pod_t *pod, bool cfs_quota, int64_t pids_limit);

/* ---- names ----
 * A name is kept the cgroupfs way, "/kubepods/burstable/pod<uid>" (upstream's
 * CgroupName with its ToCgroupfs form); the systemd form of that name is
 * "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice",
 * with '-' in a component written '_' (ToSystemd). New strings. */
char *nl_cgroups_name_systemd(const char *name);
/* cgroupRoot as written for the driver, to a name: "" and "/" are the root;
 * with systemd "/a.slice/a-b.slice" (or "a-b.slice") is "/a/b"
 * (ParseSystemdToCgroupName). */
char *nl_cgroups_name_parse(const char *root, bool systemd);

/* Amounts of a resource list; -1: not in the list. */
typedef struct nl_cgroups_amounts {
  int64_t cpu_milli, memory, pids;
} nl_cgroups_amounts_t;

/* upstream getCgroupConfig: shares from cpu, the memory limit, pids.max. */
nl_cgroup_res_t nl_cgroups_amounts_res(nl_cgroups_amounts_t a);

typedef struct nl_cgroups_opts {
  const char *fs_root;     /* the cgroup filesystem; NULL: /sys/fs/cgroup */
  const char *swaps;       /* NULL: /proc/swaps */
  const char *systemd_dir; /* NULL: /run/systemd/system (present when systemd runs) */
  const char *hugepages_dir; /* NULL: /sys/kernel/mm/hugepages */
  bool systemd;            /* cgroupDriver: systemd */
  const char *cgroup_root; /* cgroupRoot; NULL or "" : "/" */
  bool per_qos;            /* cgroupsPerQOS */
  bool cfs_quota;          /* cpuCFSQuota */
  int64_t pod_pids_limit;  /* podPidsLimit; <= 0 none */
  bool fail_swap_on;
  /* Node allocatable: capacity, systemReserved and kubeReserved, and what
   * enforceNodeAllocatable names. */
  nl_cgroups_amounts_t capacity, system_reserved, kube_reserved;
  bool enforce_pods, enforce_system_reserved, enforce_kube_reserved;
  const char *system_reserved_cgroup, *kube_reserved_cgroup;
  /* The sum of the cpu requests (millicores) of the Burstable pods that may
   * run, for the QoS update (called on the loop). */
  int64_t (*burstable_cpu)(void *ctx);
  void *ctx;
} nl_cgroups_opts_t;

typedef struct nl_cgroups nl_cgroups_t;
typedef void (*nl_cgroups_done_cb)(nl_cgroups_t *cg);

struct nl_cgroups {
  uv_loop_t *loop;
  bool systemd, per_qos, cfs_quota, v2;
  int64_t pod_pids_limit;
  /* The node's huge page sizes, when the hugetlb controller is there (none
   * otherwise): bytes, and the controller's name for it ("2MB"). */
  struct nl_cgroups_page_size {
    int64_t bytes;
    char name[24];
  } page_sizes[NL_CGROUPS_MAX_PAGE_SIZES];
  size_t n_page_sizes;
  char *fs_root;  /* owned */
  char *root;     /* cgroupRoot as a name, owned */
  char *kubepods; /* root + "/kubepods", owned; NULL without cgroupsPerQOS */
  int64_t (*burstable_cpu)(void *ctx);
  void *ctx;
  uv_timer_t qos_timer;
  uv_work_t qos_work;
  bool qos_busy, qos_again, stopping;
  int64_t qos_milli;   /* what the job in flight writes */
  nl_err_t *qos_err;   /* its failure */
  int pending;
  nl_cgroups_done_cb done_cb;
};

/* Checks swap (failSwapOn), the driver, the controllers and cgroupRoot, then
 * creates or repairs kubepods and the QoS cgroups and enforces node
 * allocatable (blocking: start-up only). Returns 0, or -1 with *err saying why
 * the node cannot start. */
int nl_cgroups_init(nl_cgroups_t *cg, uv_loop_t *loop, const nl_cgroups_opts_t *opts,
                    nl_err_t **err);
/* Starts the periodic QoS update. */
void nl_cgroups_start(nl_cgroups_t *cg);
/* kubeletCgroups: creates path (no limits) in every hierarchy under fs_root
 * (NULL: /sys/fs/cgroup; a hybrid host's unified one too) and moves the
 * calling process into it. Blocking. */
int nl_cgroups_join_self(const char *fs_root, const char *path, nl_err_t **err);
/* Asks for a QoS update soon (a pod was admitted). */
void nl_cgroups_update_qos(nl_cgroups_t *cg);
/* Closes the timer, waits for a job in flight, then calls done_cb. */
void nl_cgroups_stop(nl_cgroups_t *cg, nl_cgroups_done_cb done_cb);

/* The pod's cgroup for the runtime (LinuxPodSandboxConfig.cgroup_parent): the
 * cgroupfs or systemd form of its name; without cgroupsPerQOS, cgroupRoot's,
 * "" for the runtime's default. New string. */
char *nl_cgroups_pod_parent(const nl_cgroups_t *cg, const nl_pod_t *pod);
/* Blocking (thread pool): creates the pod's cgroup if missing, else updates
 * its limits (upstream EnsureExists): those of nl_cgroups_pod_res, and the
 * hugetlb limit of each page size, the pod's hugepages-<size> request (0 for a
 * size it does not ask for). No-op without cgroupsPerQOS. Returns 0 or -1
 * with *err. */
int nl_cgroups_pod_ensure(const nl_cgroups_t *cg, const nl_pod_t *pod, nl_err_t **err);
/* The same, but an existing cgroup keeps its cpu and memory: an in-place
 * resize changes them in its own order (managers/runtime_resize.c). */
int nl_cgroups_pod_ensure_exists(const nl_cgroups_t *cg, const nl_pod_t *pod, nl_err_t **err);
/* Blocking (thread pool), with cgroupsPerQOS only: the pod cgroup's cpu and
 * memory as they are (upstream GetPodCgroupConfig; memory 0: no limit), and
 * writing the non-zero fields of r to it (SetPodCgroupConfig). 0, or -1 with
 * *err. */
int nl_cgroups_pod_read(const nl_cgroups_t *cg, const nl_pod_t *pod, nl_cgroup_res_t *out,
                        nl_err_t **err);
/* Blocking: the pod cgroup's memory usage in bytes (upstream's pod stats),
 * -1 when unreadable. */
int64_t nl_cgroups_pod_memory_usage(const nl_cgroups_t *cg, const nl_pod_t *pod);
int nl_cgroups_pod_write(const nl_cgroups_t *cg, const nl_pod_t *pod, const nl_cgroup_res_t *r,
                         nl_err_t **err);
/* Blocking (thread pool): kills what still runs in the cgroup of pod uid (in
 * whichever QoS class it is) and removes it (upstream Destroy). 0 when it is
 * gone, -1 with *err. */
int nl_cgroups_pod_destroy(const nl_cgroups_t *cg, const char *uid, nl_err_t **err);

#endif
