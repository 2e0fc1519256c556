/* The Summary API (/stats/summary, k8s.io/kubelet/pkg/apis/stats/v1alpha1)
 * and /metrics/resource (as metrics-server reads it), from the node's /proc
 * and filesystem figures and the runtime's ListPodSandboxStats (which carries
 * each pod's containers; ListContainerStats when it fails) and ImageFsInfo.
 *
 * CPU rates: usageNanoCores needs two samples. The runtime's own figure is
 * used when it gives one; otherwise, as upstream's CRI stats provider, the
 * previous sample of the same container, pod or node is kept (nl_stats_t)
 * and the rate is the difference over the time between them. */
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
} nl_stats_if_t;

typedef struct nl_stats_fs {
  bool ok;
  uint64_t capacity, available, used, inodes, inodes_free;
} nl_stats_fs_t;

/* The node as /proc and statfs(2) show it; read on the thread pool. */
typedef struct nl_node_sample {
  int64_t time_ns;      /* wall clock */
  int64_t boot_time_s;  /* btime */
  uint64_t cpu_ns;      /* busy time of all CPUs (/proc/stat), ns */
  uint64_t mem_total, mem_free, inactive_file, anon; /* bytes */
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
void nl_stats_parse_vmstat(nl_node_sample_t *s, const char *text);
/* Interfaces other than lo, in file order, at most NL_STATS_MAX_IFS. */
void nl_stats_parse_net_dev(nl_node_sample_t *s, const char *text);

/* Reads everything (blocking: call on the thread pool). root_dir: the
 * kubelet's root directory (nodefs); image_mount: the runtime's image
 * filesystem mount point, or NULL. */
void nl_node_sample_read(nl_node_sample_t *s, const char *root_dir, const char *image_mount);

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
 * memory_working_set_bytes, container_start_time_seconds, scrape_error). */
void nl_stats_resource_metrics(const nl_node_sample_t *node,
                               const Runtime__V1__ListPodSandboxStatsResponse *pods,
                               bool scrape_error, nl_buf_t *out);

/* Pods grouped from ListContainerStats by the kubelet's pod labels, for a
 * runtime whose ListPodSandboxStats fails (containerd 1.6 does when a sandbox
 * has no cgroup parent). The result borrows from c (keep c until it is freed
 * with nl_stats_pods_free). */
Runtime__V1__ListPodSandboxStatsResponse *nl_stats_pods_from_containers(
    const Runtime__V1__ListContainerStatsResponse *c);
void nl_stats_pods_free(Runtime__V1__ListPodSandboxStatsResponse *r);

/* ---- the handlers --------------------------------------------------------- */

typedef struct nl_cri_client nl_cri_client_t;

typedef struct nl_stats_server {
  uv_loop_t *loop;
  nl_cri_client_t *cri; /* borrowed */
  const char *node_name, *root_dir; /* borrowed */
  nl_stats_t stats;
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
/* Calls done once no request is in flight, then frees the samples. Call
 * before the CRI client stops. */
void nl_stats_server_stop(nl_stats_server_t *s, void (*done)(void *ctx), void *ctx);

#endif
