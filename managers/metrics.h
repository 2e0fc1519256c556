/* The kubelet's metrics with upstream's names, labels, help texts and buckets
 * (pkg/kubelet/metrics, pkg/kubelet/prober, client_golang's process
 * collector): one registry for /metrics, one for /metrics/probes. Managers get
 * a pointer (NULL in tests that do not look) and record through the helpers
 * below; series they touch often are looked up once and cached.
 *
 * A vector without series prints nothing: kubelet_evictions stays empty
 * until the first eviction, as upstream's. */
#ifndef NL_MANAGERS_METRICS_H
#define NL_MANAGERS_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "reactor/map.h"
#include "reactor/metrics.h"

struct nl_pod_status; /* managers/status.h */

typedef struct nl_kmetrics {
  nl_metrics_t reg;    /* /metrics */
  nl_metrics_t probes; /* /metrics/probes */
  nl_metric_family_t *running_pods, *running_containers, *pod_start, *pod_worker, *pleg_relist,
      *pleg_interval, *pleg_last_seen, *rt_ops, *rt_errors, *rt_duration, *evictions, *preemptions, *terminated,
      *probe_total, *probe_duration, *proc_cpu, *proc_rss, *proc_start, *proc_max_fds,
      *dp_registrations, *dp_alloc_duration, *cp_errors, *cp_duration, *cp_config,
      *userns_started, *userns_errors, *dra_claims_in_use, *dra_ops, *dra_grpc,
      *cri_losing_support;
  /* kubelet_pod_resources_endpoint_{requests_total, requests_<method>,
   * errors_<method>}, each a vector over server_api_version */
  nl_metric_family_t *pr_requests_total, *pr_requests[3], *pr_errors[3];
  nl_map_t rt_series; /* gRPC path -> struct rt_series, filled on first use */
  int64_t last_relist_ns; /* wall clock of the last listing relist's start, 0 before */
  /* Runs before each /metrics encoding (after the process figures are read):
   * the agent sets running pods and containers there. */
  void (*collect)(void *ctx);
  void *collect_ctx;
} nl_kmetrics_t;

void nl_kmetrics_init(nl_kmetrics_t *m, const char *node_name);
void nl_kmetrics_free(nl_kmetrics_t *m);

/* A CRI call finished: path "/runtime.v1.RuntimeService/ListPodSandbox",
 * gRPC code, duration. Counted under upstream's operation_type
 * ("list_podsandbox"). Fits nl_cri_client_observe(). */
void nl_kmetrics_runtime_op(void *m, const char *path, int code, uint64_t duration_ns);

/* A PLEG relist that began at start_ns (the PLEG's monotonic clock: the
 * interval) and start_wall_ns (wall clock: the last-seen time) took
 * duration_ns; listed: its ListPodSandbox and ListContainers succeeded. */
void nl_kmetrics_pleg_relist(nl_kmetrics_t *m, int64_t start_ns, int64_t start_wall_ns,
                             uint64_t duration_ns, bool listed);

/* A pod worker's sync: operation "create", "update", "sync" or "kill". */
void nl_kmetrics_pod_worker(nl_kmetrics_t *m, const char *operation, uint64_t duration_ns);

/* The eviction manager evicted a pod for the signal ("memory.available"). */
void nl_kmetrics_eviction(nl_kmetrics_t *m, const char *signal);

/* A pod was preempted to admit a critical pod, for the resource it lacked
 * first ("cpu"). */
void nl_kmetrics_preemption(nl_kmetrics_t *m, const char *resource);

/* A container was seen terminated for the first time in its pod's status:
 * type "container", "init_container" or "ephemeral_container", its exit code
 * and reason (upstream's status manager counts the same transitions). */
void nl_kmetrics_container_terminated(nl_kmetrics_t *m, const char *type, int32_t exit_code,
                                      const char *reason);

/* The pod's status went from old (NULL: none yet) to now: each container
 * terminated in now but not in old (or absent there) counts once. */
void nl_kmetrics_count_terminations(nl_kmetrics_t *m, const struct nl_pod_status *old,
                                    const struct nl_pod_status *now);

/* A credential provider plugin ran for seconds (failed: it gave no answer). */
void nl_kmetrics_credprov_run(void *m, const char *plugin, double seconds, bool failed);
/* The runtime lacks a CRI call that the Kubernetes version will require
 * (upstream: RuntimeConfig, "1.37.0"). */
void nl_kmetrics_cri_losing_support(nl_kmetrics_t *m, const char *version);
/* The credential provider configuration's hash ("sha256:<hex>"). */
void nl_kmetrics_credprov_config(nl_kmetrics_t *m, const char *hash);
/* The sandbox of a pod with `hostUsers: false` was made, or tried (upstream
 * SyncPod): failed when a step of that sync failed. */
void nl_kmetrics_userns_pod_started(nl_kmetrics_t *m, bool failed);

/* A pod reached Running seconds after the kubelet first saw it. */
void nl_kmetrics_pod_started(nl_kmetrics_t *m, double seconds);

/* A probe ran: type "Liveness", "Readiness" or "Startup"; result "successful",
 * "failed" or "unknown". */
void nl_kmetrics_probe(nl_kmetrics_t *m, const char *type, const char *result,
                       const char *container, const char *pod, const char *ns, const char *uid,
                       double seconds);
/* The probe's worker ended: its series go, as upstream's removes them. */
void nl_kmetrics_probe_forget(nl_kmetrics_t *m, const char *type, const char *container,
                              const char *pod, const char *ns, const char *uid);

/* A device plugin asked to register resource (upstream counts every request,
 * accepted or not). */
void nl_kmetrics_device_registration(nl_kmetrics_t *m, const char *resource);
/* An Allocate call to the plugin of resource took seconds (also when it
 * failed, as upstream). */
void nl_kmetrics_device_alloc(nl_kmetrics_t *m, const char *resource, double seconds);

/* The pod resources API's methods, in the order of their counters. */
typedef enum nl_kmetrics_podres {
  NL_KMETRICS_PODRES_LIST,
  NL_KMETRICS_PODRES_GET_ALLOCATABLE,
  NL_KMETRICS_PODRES_GET,
  NL_KMETRICS_PODRES_TOTAL, /* only ..._requests_total (upstream's v1alpha1 List) */
} nl_kmetrics_podres_t;
/* A pod resources call of version ("v1", "v1alpha1") reached its method;
 * failed: it answered an error. */
void nl_kmetrics_podres(nl_kmetrics_t *m, const char *version, nl_kmetrics_podres_t method,
                        bool failed);

/* Running pods (a ready sandbox) and containers by state, indexed by the CRI
 * ContainerState (created, running, exited, unknown); the agent sets them
 * before each scrape. */
void nl_kmetrics_set_running(nl_kmetrics_t *m, double pods, const double containers[4]);

/* DRA's prepared claims (upstream's dra_resource_claims_in_use), set before
 * each scrape: reset drops the last scrape's series, then one series per
 * driver, and driver NULL for all of them (driver_name "<any>"). */
void nl_kmetrics_dra_in_use_reset(nl_kmetrics_t *m);
void nl_kmetrics_dra_in_use(nl_kmetrics_t *m, const char *driver, double n);

/* The DRA manager handled all the claims of a pod (upstream's
 * dra_operations_duration_seconds): op "PrepareResources" when the pod
 * starts, "UnprepareResources" when it stops (program constants); failed: it
 * ended in an error. */
void nl_kmetrics_dra_op(nl_kmetrics_t *m, const char *op, bool failed, double seconds);
/* A unary gRPC call to a DRA plugin finished (upstream's
 * dra_grpc_operations_duration_seconds): its registered driver, the full
 * method path (the manager's constants), the gRPC code by name (a code
 * outside 0..16, which only a plugin can send, counts as "Unknown": the label
 * set stays bounded). */
void nl_kmetrics_dra_grpc(nl_kmetrics_t *m, const char *driver, const char *method, int code,
                          double seconds);
/* The driver's last plugin went: its gRPC series go with it, so that drivers
 * that come and go leave no series behind. */
void nl_kmetrics_dra_driver_gone(nl_kmetrics_t *m, const char *driver);

#endif
