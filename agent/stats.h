/* The Summary API (/stats/summary, k8s.io/kubelet/pkg/apis/stats/v1alpha1)
 * and /metrics/resource (as metrics-server reads it), from the node's /proc
 * and filesystem figures and the runtime's ListPodSandboxStats (which carries
 * each pod's containers; ListContainerStats when it fails) and ImageFsInfo.
 *
 * CPU rates: usageNanoCores needs two samples. As upstream's CRI stats
 * provider, the previous sample of the same container, pod or node is kept
 * (nl_stats_t) and the rate is the difference over the time between them;
 * the runtime's own figure only when it gives no counter. */
#ifndef NL_STATS_H
#define NL_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent/kserver.h"
#include "cri/api.pb-c.h"
#include "reactor/buf.h"
#include "reactor/map.h"

#define NL_STATS_MAX_IFS 16

typedef struct nl_stats_if {
  char name[32];
  uint64_t rx, rx_errors, tx, tx_errors;
  bool packets; /* the packet counts known (/proc/net/dev; not the runtime's stats) */
  uint64_t rx_packets, rx_dropped, tx_packets, tx_dropped;
} nl_stats_if_t;

typedef struct nl_stats_fs {
  bool ok;
  uint64_t capacity, available, used, inodes, inodes_free;
} nl_stats_fs_t;

/* The node as /proc and statfs(2) show it; read on the thread pool. */
typedef struct nl_node_sample {
  int64_t time_ns;      /* wall clock */
  int64_t boot_time_s;  /* btime */
  uint64_t cpu_ns;      /* busy time of all CPUs (root cpuacct, else /proc/stat), ns */
  uint32_t ncpu;        /* CPUs online */
  uint64_t mem_total, mem_free, inactive_file, anon; /* bytes */
  bool swap; /* SwapTotal and SwapFree read */
  uint64_t swap_total, swap_free; /* bytes */
  uint64_t pgfault, pgmajfault;
  nl_stats_if_t ifs[NL_STATS_MAX_IFS];
  size_t n_ifs;
  nl_stats_fs_t root_fs, image_fs;
  uint64_t maxpid, curproc;
} nl_node_sample_t;

/* Parsers of the /proc files (text as read). Each fills its part of s and
 * returns 0, or -1 when the text lacks what it needs. */
int nl_stats_parse_proc_stat(nl_node_sample_t *s, const char *text);
int nl_stats_parse_meminfo(nl_node_sample_t *s, const char *text);
/* pgfault and pgmajfault of memory.stat or /proc/vmstat (one format). */
void nl_stats_parse_faults(nl_node_sample_t *s, const char *text);
/* Interfaces other than lo, in file order, at most NL_STATS_MAX_IFS. */
void nl_stats_parse_net_dev(nl_node_sample_t *s, const char *text);
/* The same into ifs[NL_STATS_MAX_IFS], *n set to how many. */
void nl_stats_parse_net_dev_ifs(nl_stats_if_t *ifs, size_t *n, const char *text);

/* Reads everything (blocking: call on the thread pool). root_dir: the
 * kubelet's root directory (nodefs); image_mount: the runtime's image
 * filesystem mount point, or NULL; cgroup_fs: the cgroup filesystem, whose
 * root gives the CPU time and page faults (NULL: /proc's). */
void nl_node_sample_read(nl_node_sample_t *s, const char *root_dir, const char *image_mount,
                         const char *cgroup_fs, bool cgroup_v2);
/* Only what the eviction manager reads every 10 s (memory, pids, file
 * systems), not /proc/stat, the cgroups and /proc/net/dev, whose reading
 * costs the kernel a walk of every interface (a veth per pod). */
void nl_node_sample_read_light(nl_node_sample_t *s, const char *root_dir,
                               const char *image_mount);

/* statvfs(2) of path into fs (fs->ok when it answered; path NULL: not). */
void nl_stats_fs_read(nl_stats_fs_t *fs, const char *path);

/* Reads a small /proc or cgroup file whole (generated, never on a disk): a
 * new string, NULL when it cannot be read. */
char *nl__stats_slurp(const char *path);

/* cgroup file helpers (agent/stats_cadvisor.c), for the thread pool: */
/* a small file's first bytes relative to dfd, NUL-terminated; false when unreadable */
bool nl__stats_read_small(int dfd, const char *file, char *buf, size_t size);
/* memory.stat or cpu.stat whole (at most 8 KiB), a new string or NULL */
char *nl__stats_read_stat(int dfd, const char *file);
/* the value of key in a "key value" file */
bool nl__stats_key(const char *text, const char *key, uint64_t *out);
/* the cgroup's directory fd in a hierarchy (ctrl NULL: v2's unified one) or -1;
 * *ctime (if not NULL) its change time */
int nl__stats_cgroup_dir(const char *fs_root, const char *ctrl, const char *name, int64_t *ctime);
/* a container's cgroup below its pod's, as containerd names it (a new string) */
char *nl__stats_ctr_cgroup(const char *pod_cgroup, const char *id);

/* upstream's du: the bytes of path and everything under it on its
 * filesystem (a file with several links once), its inodes added to *inodes
 * when not NULL; -1 when path cannot be read. */
int64_t nl_stats_du(const char *path, int64_t *inodes);
/* upstream's log figures (the host stats provider's fileMetricsByDir): the
 * bytes of the files right in dir, not of its subdirectories; the files
 * counted into *inodes when not NULL. */
int64_t nl_stats_files_in(const char *dir, int64_t *inodes);

/* The previous CPU samples, keyed by container id, "pod/<uid>" and "node". */
typedef struct nl_stats {
  nl_map_t prev;
} nl_stats_t;

void nl_stats_init(nl_stats_t *st);
void nl_stats_free(nl_stats_t *st);

/* Builds the Summary JSON into out. pods may be NULL (the runtime gave none);
 * img may be NULL. Records this round's CPU samples in st. */
void nl_stats_summary_json(nl_stats_t *st, const char *node_name, const nl_node_sample_t *node,
                           const Runtime__V1__ListPodSandboxStatsResponse *pods,
                           const Runtime__V1__ImageFsInfoResponse *img, nl_buf_t *out);

/* The same figures in /metrics/resource's Prometheus text (upstream's
 * resource metrics: node_, pod_ and container_ cpu_usage_seconds_total,
 * memory_working_set_bytes and swap_usage_bytes, container_swap_limit_bytes,
 * container_start_time_seconds, resource_scrape_error). c (the containers'
 * creation times and the cgroups' swap, parallel to pods) may be NULL. */
typedef struct nl_cadvisor nl_cadvisor_t;
void nl_stats_resource_metrics(const nl_node_sample_t *node,
                               const Runtime__V1__ListPodSandboxStatsResponse *pods,
                               const nl_cadvisor_t *c, bool scrape_error, nl_buf_t *out);

/* Pods grouped from ListContainerStats by the kubelet's pod labels, for a
 * runtime whose ListPodSandboxStats fails (containerd 1.6 does when a sandbox
 * has no cgroup parent). The result borrows from c (keep c until it is freed
 * with nl_stats_pods_free). */
Runtime__V1__ListPodSandboxStatsResponse *nl_stats_pods_from_containers(
    const Runtime__V1__ListContainerStatsResponse *c);
void nl_stats_pods_free(Runtime__V1__ListPodSandboxStatsResponse *r);

/* ---- /metrics/cadvisor (agent/stats_cadvisor.c) ---------------------------
 * The series upstream's kubelet serves from cAdvisor, for the root cgroup, the
 * pod cgroups, the sandboxes (network only, as cAdvisor's containerd handler)
 * and the containers: containers' usage from the runtime's stats, the pods'
 * and the root's from their cgroup files, limits from the cgroup files. */

/* One cgroup's files (v1: cpuacct, memory and cpu hierarchies; v2: unified). */
typedef struct nl_cgroup_sample {
  bool usage;                 /* cpu and memory usage read */
  uint64_t cpu_ns, mem_usage, mem_ws, mem_rss;
  bool spec;                  /* the limits read */
  uint64_t mem_limit;         /* 0: none (as cAdvisor: above 2^62 is none) */
  uint64_t cpu_quota;         /* 0: none */
  uint64_t cpu_period, cpu_shares;
  int64_t created_s;          /* the directory's change time */
} nl_cgroup_sample_t;

/* A cgroup's swap as cAdvisor reports it: v1 memory.stat's total_swap (the
 * hierarchy's, use_hierarchy being always on) and memory.memsw.limit_in_bytes;
 * v2 memory.swap.current and memory.swap.max. */
typedef struct nl_cgroup_swap {
  bool ok;        /* the memory cgroup's figures read */
  uint64_t usage; /* 0 without swap accounting, as cAdvisor */
  bool limited;   /* a limit at or below 2^62 (an absent file: 0, as cAdvisor) */
  uint64_t limit;
} nl_cgroup_swap_t;

/* Reads the swap of cgroup name. Blocking. */
void nl_cgroup_swap_read(nl_cgroup_swap_t *s, const char *fs_root, bool v2, const char *name);

/* Reads the cgroup name ("/kubepods/burstable/pod<uid>", "/" for the root)
 * under fs_root: the limits, and the usage too when usage is set. Blocking. */
void nl_cgroup_sample_read(nl_cgroup_sample_t *s, const char *fs_root, bool v2,
                           const char *name, bool usage);

/* ---- the rest of cAdvisor's per-cgroup figures (agent/stats_cadvisor_more.c) */

/* blkio operations as the v1 files name them (v2's io.stat: Read, Write, Discard). */
enum { NL_IO_READ, NL_IO_WRITE, NL_IO_SYNC, NL_IO_ASYNC, NL_IO_DISCARD, NL_IO_TOTAL, NL_IO_OPS };
extern const char *const nl_io_op_names[NL_IO_OPS];
#define NL_CADVISOR_MAX_DEVS 16

/* One block device's figures of a cgroup. */
typedef struct nl_cadvisor_dev {
  unsigned major, minor;
  char name[40];  /* "/dev/<name>" from /sys/dev/block, "" when unknown (as cAdvisor) */
  unsigned has;   /* bit per op seen */
  uint64_t bytes[NL_IO_OPS], ios[NL_IO_OPS];
} nl_cadvisor_dev_t;

typedef struct nl_cgroup_more {
  bool cpu; /* v1 cpuacct.stat, v2 cpu.stat user/system */
  uint64_t user_ns, system_ns;
  bool mem; /* memory.stat */
  uint64_t cache, mapped_file, swap, pgfault, pgmajfault;
  bool failcnt, max_usage, oom; /* their files read */
  uint64_t failcnt_v, max_usage_v, oom_kills;
  bool mem_spec; /* the reservation and swap limit read; 0: none */
  uint64_t reservation, swap_limit;
  bool threads; /* pids.current, pids.max (0: none) */
  uint64_t threads_v, threads_max;
  bool procs; /* cgroup.procs and each process's fd directory */
  uint64_t processes, fds, sockets;
  bool nofile; /* the first process's "Max open files" soft limit; -1: unlimited */
  int64_t nofile_soft;
  nl_cadvisor_dev_t *devs; /* owned */
  size_t n_devs;
} nl_cgroup_more_t;

/* Parsers (text as read; bounded by NL_CADVISOR_MAX_DEVS devices). */
/* v1 blkio.throttle.io_service_bytes / io_serviced: "maj:min Op value" lines. */
void nl_cadvisor_parse_blkio(nl_cgroup_more_t *m, const char *text, bool ios);
/* v2 io.stat: "maj:min rbytes=.. wbytes=.. rios=.. wios=.. dbytes=.. dios=..". */
void nl_cadvisor_parse_io_stat(nl_cgroup_more_t *m, const char *text);
/* /proc/<pid>/limits: the "Max open files" soft limit; -1 unlimited; false if absent. */
bool nl_cadvisor_parse_nofile(const char *text, int64_t *soft);
/* v1 cpuacct.stat ("user N\nsystem N" in USER_HZ ticks) into ns; false if either lacks. */
bool nl_cadvisor_parse_cpuacct_stat(const char *text, long hz, uint64_t *user_ns,
                                    uint64_t *system_ns);
/* /proc/diskstats: the 11 figures of the device named name ("vda"); false if absent. */
bool nl_cadvisor_parse_diskstats(const char *text, const char *name, uint64_t f[11]);

/* Reads them for cgroup name (procs: also its processes). Blocking. */
void nl_cgroup_more_read(nl_cgroup_more_t *m, const char *fs_root, bool v2, const char *name,
                         bool procs);
void nl_cgroup_more_free(nl_cgroup_more_t *m);

typedef struct nl_cadvisor_ctr {
  char *image;        /* owned; the image as the spec named it */
  int64_t created_ns; /* 0: unknown */
  nl_cgroup_sample_t cg; /* its limits */
  nl_cgroup_more_t more;
  nl_cgroup_swap_t swap;
} nl_cadvisor_ctr_t;

typedef struct nl_cadvisor_pod {
  char *cgroup;     /* owned: the pod's cgroup name; NULL: none (no series of its own) */
  char *sandbox_id; /* owned: its ready sandbox; NULL: none */
  nl_cgroup_sample_t cg;
  nl_cgroup_more_t more;
  nl_cgroup_swap_t swap;
  bool net;         /* ifs read (the runtime's, or the sandbox's /proc/<pid>/net/dev) */
  nl_stats_if_t ifs[NL_STATS_MAX_IFS];
  size_t n_ifs;
  nl_cadvisor_ctr_t *ctrs; /* owned, parallel to the pod's linux->containers */
  size_t n_ctrs;
} nl_cadvisor_pod_t;

/* One round of /metrics/cadvisor beyond the runtime's stats. */
typedef struct nl_cadvisor {
  char *fs_root; /* owned; NULL: no cgroups to read */
  bool v2;
  nl_cgroup_sample_t root;
  nl_cgroup_more_t root_more;
  bool root_disk; /* root_dev's /proc/diskstats figures read */
  uint64_t root_diskstats[11];
  char boot_id[48], machine_id[48], system_uuid[48];
  long cores;
  char root_dev[128], image_dev[128]; /* the filesystems' devices, as /proc/self/mountinfo names them */
  nl_cadvisor_pod_t *pods; /* owned, parallel to pods->stats */
  size_t n_pods;
} nl_cadvisor_t;

typedef struct nl_stats_meta nl_stats_meta_t;
/* On the loop: what the kubelet knows (m) for each pod of pods, and the
 * sandboxes' interfaces from the runtime's stats. */
void nl_cadvisor_prepare(nl_cadvisor_t *c, const Runtime__V1__ListPodSandboxStatsResponse *pods,
                         const nl_stats_meta_t *m);
/* Reads the cgroups, the sandboxes' interfaces the runtime did not give, the
 * machine's ids and the filesystems' devices. Blocking: the thread pool. */
void nl_cadvisor_read(nl_cadvisor_t *c, const Runtime__V1__ListPodSandboxStatsResponse *pods,
                      const char *root_dir, const char *image_mount);
/* Only the pods' and containers' swap (what /metrics/resource needs of the
 * cgroups). Blocking. */
void nl_cadvisor_read_swap(nl_cadvisor_t *c, const Runtime__V1__ListPodSandboxStatsResponse *pods);
void nl_cadvisor_free(nl_cadvisor_t *c);

/* The text. pods and c->pods parallel; c may be NULL (only what the runtime gave). */
void nl_stats_cadvisor_metrics(const nl_node_sample_t *node,
                               const Runtime__V1__ListPodSandboxStatsResponse *pods,
                               const nl_cadvisor_t *c, bool scrape_error, nl_buf_t *out);

/* What the kubelet knows that the runtime's stats do not carry; called on the
 * loop. pod: the pod's cgroup name and ready sandbox (new strings or NULL);
 * container: its image (new string or NULL) and creation time. */
struct nl_stats_meta {
  const char *cgroup_fs; /* the cgroup filesystem; NULL: no cgroups */
  bool cgroup_v2;
  const char *pods_cgroup;      /* kubepods as the driver names it; NULL: none */
  const char *runtime_endpoint; /* the CRI endpoint ("unix:///..."); NULL: none */
  const char *pod_logs_dir;     /* podLogsDir; NULL: no log figures */
  void (*pod)(void *ctx, const char *uid, char **cgroup, char **sandbox_id);
  void (*container)(void *ctx, const char *uid, const char *id, char **image,
                    int64_t *created_ns);
  void *ctx;
};

/* ---- PSI and the system containers (agent/stats_sys.c) ---------------------
 * /stats/summary's pressure figures (KubeletPSI): the node's from
 * /proc/pressure, a cgroup's from its cpu/memory/io.pressure in the unified
 * hierarchy (the v2 mount, or /sys/fs/cgroup/unified on a hybrid v1 host);
 * and node.systemContainers: kubelet (nanolet's own cgroup), runtime (the
 * runtime's, its pid from the CRI socket's peer), pods (kubepods) and misc
 * (without systemd: the root cgroup's own processes). */

typedef struct nl_psi_data {
  uint64_t total; /* us */
  double avg10, avg60, avg300;
} nl_psi_data_t;

typedef struct nl_psi {
  bool ok;
  nl_psi_data_t some, full; /* full zero when the file has none (older kernels' cpu) */
} nl_psi_t;

typedef struct nl_psi3 {
  nl_psi_t cpu, memory, io;
} nl_psi3_t;

/* A pressure file's text ("some avg10=.. avg60=.. avg300=.. total=..",
 * "full ..."): 0, or -1 without a well-formed "some" line. */
int nl_stats_parse_psi(nl_psi_t *p, const char *text);
/* The path of hierarchy ctrl ("cpuacct", "memory"; "" the unified one) in a
 * /proc/<pid>/cgroup text, into out: 0, or -1 when it has none. */
int nl_stats_parse_proc_cgroup(const char *text, const char *ctrl, char *out, size_t size);

typedef struct nl_sys_ctr {
  const char *name; /* "kubelet", "runtime", "pods", "misc" */
  bool cpu, mem;    /* read */
  int64_t time_ns;  /* when its CPU was read (the rate's clock) */
  int64_t start_s;
  uint64_t cpu_ns, mem_usage, mem_ws, mem_rss, pgfault, pgmajfault;
  uint64_t mem_limit; /* 0: none */
  nl_psi3_t psi;
} nl_sys_ctr_t;

/* One cgroup under the cgroup filesystem fs (blocking): v1 cpu from cpuacct
 * at cpu, memory at mem (upstream's v1 page faults are the cgroup's own:
 * memory.stat's pgfault); v2 both at cpu. "/" is the root, cadvisor's root
 * container. Leaves psi and name alone. */
void nl_stats_cgroup_read(nl_sys_ctr_t *s, const char *fs, bool v2, const char *cpu,
                          const char *mem);

/* A volume under <root>/pods/<uid>/volumes/<plugin>/<name>. */
typedef struct nl_summary_vol {
  char *name; /* owned */
  int64_t used, inodes;
  nl_stats_fs_t fs; /* its filesystem */
} nl_summary_vol_t;

/* One pod's figures beyond the runtime's. */
typedef struct nl_summary_pod {
  nl_psi3_t psi;
  nl_psi3_t *ctr_psi;      /* owned, parallel to its containers; NULL: unread */
  int64_t *log_used, *log_inodes; /* owned, parallel: its log directory; -1: none */
  bool procs_ok;
  uint64_t procs; /* the pod cgroup's pids.current */
  nl_summary_vol_t *vols; /* owned */
  size_t n_vols;
} nl_summary_pod_t;

/* One /stats/summary round beyond the runtime's stats and /proc. */
typedef struct nl_summary_sys {
  char *fs_root;      /* owned; NULL: no cgroups to read */
  bool v2, misc;      /* misc: the host does not run systemd */
  char *pods_cgroup;  /* owned; NULL: none */
  char *runtime_sock; /* owned: the CRI socket's path; NULL: none */
  int runtime_pid;    /* in: the last round's (0: none); out: this round's */
  nl_psi3_t node;
  nl_sys_ctr_t sys[4];
  size_t n_sys;
  char *root_dir, *logs_dir; /* owned: the kubelet's root and pod log directories */
  nl_summary_pod_t *pods;     /* owned, parallel to the pods */
  size_t n_pods;
} nl_summary_sys_t;

/* Reads it all (blocking: the thread pool). c (the pods' and containers'
 * cgroups) may be NULL. */
void nl_summary_sys_read(nl_summary_sys_t *x, const nl_cadvisor_t *c,
                         const Runtime__V1__ListPodSandboxStatsResponse *pods);
void nl_summary_sys_free(nl_summary_sys_t *x);

/* nl_stats_summary_json with the system containers, PSI and what the kubelet
 * knows (c: creation times, cgroups); x and c may be NULL. */
void nl_stats_summary_json_ext(nl_stats_t *st, const char *node_name, const nl_node_sample_t *node,
                               const Runtime__V1__ListPodSandboxStatsResponse *pods,
                               const Runtime__V1__ImageFsInfoResponse *img,
                               const nl_summary_sys_t *x, const nl_cadvisor_t *c, nl_buf_t *out);

/* ---- the handlers --------------------------------------------------------- */

typedef struct nl_cri_client nl_cri_client_t;

typedef struct nl_stats_server {
  uv_loop_t *loop;
  nl_cri_client_t *cri; /* borrowed */
  const char *node_name, *root_dir; /* borrowed */
  nl_stats_t stats;
  nl_stats_meta_t meta; /* zero: /metrics/cadvisor without the kubelet's knowledge */
  char *pods_cgroup;    /* owned: meta.pods_cgroup */
  int runtime_pid;      /* the runtime's, as the last summary found it; 0: not yet */
  int inflight; /* requests being answered; stop waits for them */
  bool stopping;
  void (*stop_done)(void *ctx);
  void *stop_ctx;
} nl_stats_server_t;

void nl_stats_server_init(nl_stats_server_t *s, uv_loop_t *loop, nl_cri_client_t *cri,
                          const char *node_name, const char *root_dir);
/* GET /stats/summary and /metrics/resource; ctx is the nl_stats_server_t. */
void nl_stats_summary_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                              nl_http_resp_t *resp);
void nl_stats_resource_handler(void *ctx, const nl_http_req_t *req,
                               const nl_kserver_user_t *user, nl_http_resp_t *resp);
/* GET /metrics/cadvisor. */
void nl_stats_cadvisor_handler(void *ctx, const nl_http_req_t *req,
                               const nl_kserver_user_t *user, nl_http_resp_t *resp);
/* Calls done once no request is in flight, then frees the samples. Call
 * before the CRI client stops. */
void nl_stats_server_stop(nl_stats_server_t *s, void (*done)(void *ctx), void *ctx);

#endif
