#include "managers/metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "cri/grpc.h"
#include "managers/status.h"
#include "reactor/xalloc.h"

/* Upstream's podStartupDurationBuckets. */
static const double pod_start_buckets[] = {0.5, 1,   2,   3,   4,   5,    6,    8,    10,
                                           20,  30,  45,  60,  120, 180,  240,  300,  360,
                                           480, 600, 900, 1200, 1800, 2700, 3600};

/* Upstream's DRADurationBuckets, ExponentialBucketsRange(.1, 40, 15), as Go's
 * math.Pow computes them: glibc's pow differs in the last bit of some, which
 * would print other le values. */
static const double dra_buckets[] = {0.1,
                                     0.1534127404634391,
                                     0.23535468936502524,
                                     0.36106407876409946,
                                     0.5539182980610752,
                                     0.849781240983936,
                                     1.303672689737678,
                                     1.9999999999999993,
                                     3.0682548092687805,
                                     4.7070937873005025,
                                     7.221281575281985,
                                     11.078365961221499,
                                     16.995624819678714,
                                     26.07345379475354,
                                     39.99999999999997};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Wall-clock start of this process (client_golang reads /proc/self/stat's
 * starttime and /proc/stat's btime); read once at start-up. 0 when unknown. */
static double process_start_time(void) {
  double btime = 0, ticks = 0;
  FILE *f = fopen("/proc/stat", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "btime %lf", &btime) == 1) break;
  if (f) fclose(f);
  f = fopen("/proc/self/stat", "r");
  if (f && fgets(line, sizeof line, f)) {
    const char *p = strrchr(line, ')'); /* the command may hold spaces */
    unsigned long long st = 0;
    /* fields 3..22 after ") ": state is 3, starttime is 22 */
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                           "%*d %*d %llu", &st) == 1)
      ticks = (double)st / (double)sysconf(_SC_CLK_TCK);
  }
  if (f) fclose(f);
  return btime ? btime + ticks : 0;
}

static void collect(void *ctx) {
  nl_kmetrics_t *m = ctx;
  uv_rusage_t ru;
  if (uv_getrusage(&ru) == 0)
    nl_metric_set(nl_metric_series(m->proc_cpu, NULL),
                  (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                      ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6);
  size_t rss;
  if (uv_resident_set_memory(&rss) == 0)
    nl_metric_set(nl_metric_series(m->proc_rss, NULL), (double)rss);
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    nl_metric_set(nl_metric_series(m->proc_max_fds, NULL), (double)rl.rlim_cur);
  if (m->collect) m->collect(m->collect_ctx);
}

void nl_kmetrics_init(nl_kmetrics_t *m, const char *node_name) {
  memset(m, 0, sizeof *m);
  nl_metrics_t *r = &m->reg;
  nl_metrics_init(r);
  nl_metrics_init(&m->probes);
  nl_map_init(&m->rt_series);
  r->collect = collect;
  r->collect_ctx = m;
  static const char *const node[] = {"node", NULL}, *const op[] = {"operation_type", NULL},
                           *const state[] = {"container_state", NULL},
                           *const signal[] = {"eviction_signal", NULL},
                           *const psignal[] = {"preemption_signal", NULL},
                           *const term[] = {"container_type", "exit_code", "reason", NULL},
                           *const probe[] = {"probe_type", "result", "container", "pod",
                                             "namespace", "pod_uid", NULL},
                           *const probe_d[] = {"probe_type", "container", "pod", "namespace",
                                               NULL};
  nl_metric_set(nl_metric_series1(nl_metrics_gauge(r, "kubelet_node_name",
                                                   "[ALPHA] The node's name. The count is always 1.",
                                                   node),
                                  node_name),
                1);
  m->running_pods = nl_metrics_gauge(r, "kubelet_running_pods",
                                     "[ALPHA] Number of pods that have a running pod sandbox", NULL);
  m->running_containers = nl_metrics_gauge(r, "kubelet_running_containers",
                                           "[ALPHA] Number of containers currently running", state);
  m->pod_start = nl_metrics_histogram(
      r, "kubelet_pod_start_duration_seconds",
      "[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod "
      "starting to run",
      NULL, pod_start_buckets, N(pod_start_buckets));
  m->pod_worker = nl_metrics_histogram(
      r, "kubelet_pod_worker_duration_seconds",
      "[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, "
      "update, or sync",
      op, nl_metrics_def_buckets, N(nl_metrics_def_buckets));
  m->pleg_relist = nl_metrics_histogram(r, "kubelet_pleg_relist_duration_seconds",
                                        "[ALPHA] Duration in seconds for relisting pods in PLEG.",
                                        NULL, nl_metrics_def_buckets, N(nl_metrics_def_buckets));
  m->pleg_interval = nl_metrics_histogram(r, "kubelet_pleg_relist_interval_seconds",
                                          "[ALPHA] Interval in seconds between relisting in PLEG.",
                                          NULL, nl_metrics_def_buckets,
                                          N(nl_metrics_def_buckets));
  m->pleg_last_seen = nl_metrics_gauge(r, "kubelet_pleg_last_seen_seconds",
                                       "[ALPHA] Timestamp in seconds when PLEG was last seen active.",
                                       NULL);
  m->rt_ops = nl_metrics_counter(r, "kubelet_runtime_operations_total",
                                 "[ALPHA] Cumulative number of runtime operations by operation type.",
                                 op);
  m->rt_errors = nl_metrics_counter(
      r, "kubelet_runtime_operations_errors_total",
      "[ALPHA] Cumulative number of runtime operation errors by operation type.", op);
  double rt_buckets[14];
  nl_metrics_exponential_buckets(rt_buckets, .005, 2.5, 14);
  m->rt_duration = nl_metrics_histogram(
      r, "kubelet_runtime_operations_duration_seconds",
      "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.", op,
      rt_buckets, 14);
  m->evictions = nl_metrics_counter(r, "kubelet_evictions",
                                    "[ALPHA] Cumulative number of pod evictions by eviction signal",
                                    signal);
  m->preemptions = nl_metrics_counter(
      r, "kubelet_preemptions", "[ALPHA] Cumulative number of pod preemptions by preemption resource",
      psignal);
  m->terminated = nl_metrics_counter(r, "kubelet_terminated_containers_total",
                                     "[ALPHA] Cumulative number of container terminations.", term);
  static const char *const plugin[] = {"plugin_name", NULL};
  static const char *const hash[] = {"hash", NULL};
  m->cp_errors = nl_metrics_counter(r, "kubelet_credential_provider_plugin_errors_total",
                                    "[ALPHA] Number of errors from credential provider plugin", plugin);
  m->cp_duration = nl_metrics_histogram(
      r, "kubelet_credential_provider_plugin_duration",
      "[ALPHA] Duration of execution in seconds for credential provider plugin", plugin,
      nl_metrics_def_buckets, 11);
  m->cp_config = nl_metrics_gauge(
      r, "kubelet_credential_provider_config_info",
      "[ALPHA] Information about the last applied credential provider configuration with hash as label",
      hash);
  static const char *const version[] = {"version", NULL};
  m->cri_losing_support = nl_metrics_gauge(
      r, "kubelet_cri_losing_support",
      "[ALPHA] the Kubernetes version that the currently running CRI implementation will lose "
      "support on if not upgraded.",
      version);
  m->userns_started = nl_metrics_counter(
      r, "kubelet_started_user_namespaced_pods_total",
      "[ALPHA] Cumulative number of pods with user namespaces started. This metric will only be "
      "collected on Linux.",
      NULL);
  m->userns_errors = nl_metrics_counter(
      r, "kubelet_started_user_namespaced_pods_errors_total",
      "[ALPHA] Cumulative number of errors when starting pods with user namespaces. This metric "
      "will only be collected on Linux.",
      NULL);
  nl_metric_series(m->userns_started, NULL); /* 0 from the start, as upstream's */
  nl_metric_series(m->userns_errors, NULL);
  m->proc_cpu = nl_metrics_counter(r, "process_cpu_seconds_total",
                                   "Total user and system CPU time spent in seconds.", NULL);
  m->proc_rss = nl_metrics_gauge(r, "process_resident_memory_bytes", "Resident memory size in bytes.",
                                 NULL);
  m->proc_start = nl_metrics_gauge(r, "process_start_time_seconds",
                                   "Start time of the process since unix epoch in seconds.", NULL);
  m->proc_max_fds = nl_metrics_gauge(r, "process_max_fds",
                                     "Maximum number of open file descriptors.", NULL);
  nl_metric_set(nl_metric_series(m->proc_start, NULL), process_start_time());

  static const char *const res[] = {"resource_name", NULL},
                           *const api[] = {"server_api_version", NULL};
  m->dp_registrations = nl_metrics_counter(
      r, "kubelet_device_plugin_registration_total",
      "[ALPHA] Cumulative number of device plugin registrations. Broken down by resource name.",
      res);
  m->dp_alloc_duration = nl_metrics_histogram(
      r, "kubelet_device_plugin_alloc_duration_seconds",
      "[ALPHA] Duration in seconds to serve a device plugin Allocation request. Broken down by "
      "resource name.",
      res, nl_metrics_def_buckets, N(nl_metrics_def_buckets));
  m->pr_requests_total = nl_metrics_counter(
      r, "kubelet_pod_resources_endpoint_requests_total",
      "[ALPHA] Cumulative number of requests to the PodResource endpoint. Broken down by server "
      "api version.",
      api);
  static const struct {
    const char *suffix, *method;
  } pr[] = {{"list", "List"},
            {"get_allocatable", "GetAllocatableResources"},
            {"get", "Get"}};
  for (size_t i = 0; i < N(pr); i++) {
    char name[96], help[256];
    snprintf(name, sizeof name, "kubelet_pod_resources_endpoint_requests_%s", pr[i].suffix);
    snprintf(help, sizeof help, "[ALPHA] Number of requests to the PodResource %s endpoint. "
             "Broken down by server api version.", pr[i].method);
    m->pr_requests[i] = nl_metrics_counter(r, name, help, api);
    snprintf(name, sizeof name, "kubelet_pod_resources_endpoint_errors_%s", pr[i].suffix);
    snprintf(help, sizeof help, "[ALPHA] Number of requests to the PodResource %s endpoint which "
             "returned error. Broken down by server api version.", pr[i].method);
    m->pr_errors[i] = nl_metrics_counter(r, name, help, api);
  }

  static const char *const driver[] = {"driver_name", NULL};
  m->dra_claims_in_use = nl_metrics_gauge(
      r, "dra_resource_claims_in_use",
      "[ALPHA] The number of ResourceClaims that are currently in use on the node, by driver "
      "name (driver_name label value) and across all drivers (special value <any> for "
      "driver_name). Note that the sum of all by-driver counts is not the total number of in-use "
      "ResourceClaims because the same ResourceClaim might use devices from different drivers. "
      "Instead, use the count for the <any> driver_name.",
      driver);
  static const char *const dra_op[] = {"operation_name", "is_error", NULL},
                           *const dra_grpc[] = {"driver_name", "method_name", "grpc_status_code",
                                                NULL};
  m->dra_ops = nl_metrics_histogram(
      r, "dra_operations_duration_seconds",
      "[ALPHA] Latency histogram in seconds for the duration of handling all ResourceClaims "
      "referenced by a pod when the pod starts or stops. Identified by the name of the operation "
      "(PrepareResources or UnprepareResources) and separated by the success of the operation. "
      "The number of failed operations is provided through the histogram's overall count.",
      dra_op, dra_buckets, N(dra_buckets));
  m->dra_grpc = nl_metrics_histogram(r, "dra_grpc_operations_duration_seconds",
                                     "[ALPHA] Duration in seconds of the DRA gRPC operations",
                                     dra_grpc, dra_buckets, N(dra_buckets));

  m->probe_total = nl_metrics_counter(
      &m->probes, "prober_probe_total",
      "[BETA] Cumulative number of a liveness, readiness or startup probe for a container by "
      "result.",
      probe);
  m->probe_duration = nl_metrics_histogram(&m->probes, "prober_probe_duration_seconds",
                                           "[ALPHA] Duration in seconds for a probe response.",
                                           probe_d, nl_metrics_def_buckets,
                                           N(nl_metrics_def_buckets));
}

void nl_kmetrics_free(nl_kmetrics_t *m) {
  nl_map_free(&m->rt_series, free);
  nl_metrics_free(&m->reg);
  nl_metrics_free(&m->probes);
}

/* upstream's instrumented_services.go operation names where they differ from
 * the method's snake case */
static const struct {
  const char *method, *op;
} rt_names[] = {
    {"RunPodSandbox", "run_podsandbox"},       {"StopPodSandbox", "stop_podsandbox"},
    {"RemovePodSandbox", "remove_podsandbox"}, {"PodSandboxStatus", "podsandbox_status"},
    {"ListPodSandbox", "list_podsandbox"},     {"UpdateContainerResources", "update_container"},
    {"PodSandboxStats", "podsandbox_stats"},   {"ListPodSandboxStats", "list_podsandbox_stats"},
};

typedef struct rt_series {
  nl_metric_t *ops, *errors, *duration;
} rt_series_t;

static void op_name(const char *path, char *out, size_t cap) {
  const char *method = strrchr(path, '/');
  method = method ? method + 1 : path;
  for (size_t i = 0; i < N(rt_names); i++)
    if (strcmp(rt_names[i].method, method) == 0) {
      snprintf(out, cap, "%s", rt_names[i].op);
      return;
    }
  size_t o = 0;
  for (const char *p = method; *p && o + 2 < cap; p++) {
    if (*p >= 'A' && *p <= 'Z') {
      if (p != method) out[o++] = '_';
      out[o++] = (char)(*p - 'A' + 'a');
    } else {
      out[o++] = *p;
    }
  }
  out[o] = 0;
}

void nl_kmetrics_runtime_op(void *ctx, const char *path, int code, uint64_t duration_ns) {
  nl_kmetrics_t *m = ctx;
  rt_series_t *s = nl_map_get(&m->rt_series, path);
  if (!s) {
    char op[64];
    op_name(path, op, sizeof op);
    s = nl_xmalloc(sizeof *s);
    s->ops = nl_metric_series1(m->rt_ops, op);
    s->errors = nl_metric_series1(m->rt_errors, op);
    s->duration = nl_metric_series1(m->rt_duration, op);
    nl_map_put(&m->rt_series, path, s);
  }
  nl_metric_inc(s->ops);
  if (code != 0) nl_metric_inc(s->errors);
  nl_metric_observe(s->duration, (double)duration_ns / 1e9);
}

void nl_kmetrics_pleg_relist(nl_kmetrics_t *m, int64_t start_ns, int64_t start_wall_ns,
                             uint64_t duration_ns, bool listed) {
  /* as upstream's Relist: the interval since the last relist that listed,
   * the duration always, the last-seen time (whole seconds) when it listed */
  if (m->last_relist_ns)
    nl_metric_observe(nl_metric_series(m->pleg_interval, NULL),
                      (double)(start_ns - m->last_relist_ns) / 1e9);
  nl_metric_observe(nl_metric_series(m->pleg_relist, NULL), (double)duration_ns / 1e9);
  if (!listed) return;
  m->last_relist_ns = start_ns;
  nl_metric_set(nl_metric_series(m->pleg_last_seen, NULL), (double)(start_wall_ns / 1000000000));
}

void nl_kmetrics_pod_worker(nl_kmetrics_t *m, const char *operation, uint64_t duration_ns) {
  nl_metric_observe(nl_metric_series1(m->pod_worker, operation), (double)duration_ns / 1e9);
}

void nl_kmetrics_eviction(nl_kmetrics_t *m, const char *signal) {
  nl_metric_inc(nl_metric_series1(m->evictions, signal));
}

void nl_kmetrics_credprov_run(void *ctx, const char *plugin, double seconds, bool failed) {
  nl_kmetrics_t *m = ctx;
  nl_metric_observe(nl_metric_series1(m->cp_duration, plugin), seconds);
  if (failed) nl_metric_inc(nl_metric_series1(m->cp_errors, plugin));
}

void nl_kmetrics_cri_losing_support(nl_kmetrics_t *m, const char *version) {
  nl_metric_set(nl_metric_series1(m->cri_losing_support, version), 1);
}

void nl_kmetrics_credprov_config(nl_kmetrics_t *m, const char *hash) {
  nl_metric_set(nl_metric_series1(m->cp_config, hash), 1);
}

void nl_kmetrics_userns_pod_started(nl_kmetrics_t *m, bool failed) {
  nl_metric_inc(nl_metric_series(m->userns_started, NULL));
  if (failed) nl_metric_inc(nl_metric_series(m->userns_errors, NULL));
}

void nl_kmetrics_preemption(nl_kmetrics_t *m, const char *resource) {
  nl_metric_inc(nl_metric_series1(m->preemptions, resource));
}

void nl_kmetrics_container_terminated(nl_kmetrics_t *m, const char *type, int32_t exit_code,
                                      const char *reason) {
  char code[16];
  snprintf(code, sizeof code, "%" PRId32, exit_code);
  const char *labels[] = {type, code, reason ? reason : "", NULL};
  nl_metric_inc(nl_metric_series(m->terminated, labels));
}

static void count_kind(nl_kmetrics_t *m, const char *type, const nl_container_status_t *old,
                       size_t n_old, const nl_container_status_t *now, size_t n_now) {
  for (size_t i = 0; i < n_now; i++) {
    if (now[i].state.kind != NL_CSTATE_TERMINATED) continue;
    bool was = false;
    for (size_t j = 0; j < n_old; j++)
      if (strcmp(old[j].name, now[i].name) == 0) {
        was = old[j].state.kind == NL_CSTATE_TERMINATED;
        break;
      }
    if (!was) nl_kmetrics_container_terminated(m, type, now[i].state.exit_code, now[i].state.reason);
  }
}

void nl_kmetrics_count_terminations(nl_kmetrics_t *m, const nl_pod_status_t *old,
                                    const nl_pod_status_t *now) {
  static const nl_pod_status_t none;
  if (!old) old = &none;
  count_kind(m, "init_container", old->init_container_statuses, old->n_init_container_statuses,
             now->init_container_statuses, now->n_init_container_statuses);
  count_kind(m, "container", old->container_statuses, old->n_container_statuses,
             now->container_statuses, now->n_container_statuses);
  count_kind(m, "ephemeral_container", old->ephemeral_container_statuses,
             old->n_ephemeral_container_statuses, now->ephemeral_container_statuses,
             now->n_ephemeral_container_statuses);
}

void nl_kmetrics_pod_started(nl_kmetrics_t *m, double seconds) {
  nl_metric_observe(nl_metric_series(m->pod_start, NULL), seconds);
}

void nl_kmetrics_probe(nl_kmetrics_t *m, const char *type, const char *result,
                       const char *container, const char *pod, const char *ns, const char *uid,
                       double seconds) {
  const char *v[] = {type, result, container, pod, ns, uid};
  nl_metric_inc(nl_metric_series(m->probe_total, v));
  const char *d[] = {type, container, pod, ns};
  nl_metric_observe(nl_metric_series(m->probe_duration, d), seconds);
}

void nl_kmetrics_probe_forget(nl_kmetrics_t *m, const char *type, const char *container,
                              const char *pod, const char *ns, const char *uid) {
  static const char *const results[] = {"successful", "failed", "unknown"};
  for (size_t i = 0; i < N(results); i++) {
    const char *v[] = {type, results[i], container, pod, ns, uid};
    nl_metric_remove(m->probe_total, v);
  }
  const char *d[] = {type, container, pod, ns};
  nl_metric_remove(m->probe_duration, d);
}

void nl_kmetrics_set_running(nl_kmetrics_t *m, double pods, const double containers[4]) {
  static const char *const states[] = {"created", "running", "exited", "unknown"};
  nl_metric_set(nl_metric_series(m->running_pods, NULL), pods);
  for (size_t i = 0; i < 4; i++)
    nl_metric_set(nl_metric_series1(m->running_containers, states[i]), containers[i]);
}

void nl_kmetrics_device_registration(nl_kmetrics_t *m, const char *resource) {
  nl_metric_inc(nl_metric_series1(m->dp_registrations, resource));
}

void nl_kmetrics_device_alloc(nl_kmetrics_t *m, const char *resource, double seconds) {
  nl_metric_observe(nl_metric_series1(m->dp_alloc_duration, resource), seconds);
}

void nl_kmetrics_podres(nl_kmetrics_t *m, const char *version, nl_kmetrics_podres_t method,
                        bool failed) {
  nl_metric_inc(nl_metric_series1(m->pr_requests_total, version));
  if (method == NL_KMETRICS_PODRES_TOTAL) return;
  nl_metric_inc(nl_metric_series1(m->pr_requests[method], version));
  if (failed) nl_metric_inc(nl_metric_series1(m->pr_errors[method], version));
}

/* upstream's collector lists only the drivers of claims in use now: a driver
 * gone since leaves no series behind. */
void nl_kmetrics_dra_in_use_reset(nl_kmetrics_t *m) { nl_metric_reset(m->dra_claims_in_use); }

void nl_kmetrics_dra_in_use(nl_kmetrics_t *m, const char *driver, double n) {
  nl_metric_set(nl_metric_series1(m->dra_claims_in_use, driver ? driver : "<any>"), n);
}

void nl_kmetrics_dra_op(nl_kmetrics_t *m, const char *op, bool failed, double seconds) {
  const char *v[] = {op, failed ? "true" : "false"};
  nl_metric_observe(nl_metric_series(m->dra_ops, v), seconds);
}

void nl_kmetrics_dra_grpc(nl_kmetrics_t *m, const char *driver, const char *method, int code,
                          double seconds) {
  const char *name = nl_grpc_code_name(code);
  const char *v[] = {driver, method, name ? name : "Unknown"};
  nl_metric_observe(nl_metric_series(m->dra_grpc, v), seconds);
}

void nl_kmetrics_dra_driver_gone(nl_kmetrics_t *m, const char *driver) {
  nl_metric_remove_where(m->dra_grpc, 0, driver);
}
