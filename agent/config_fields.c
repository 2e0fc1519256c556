#include "agent/config_fields.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/duration.h"
#include "reactor/xalloc.h"

#define OFF(f) offsetof(nl_kubelet_config_t, f)
#define S(n, fl, f, h) {n, fl, NL_F_STRING, OFF(f), 0, 0, h}
#define B(n, fl, f, h) {n, fl, NL_F_BOOL, OFF(f), 0, 0, h}
#define I32(n, fl, f, lo, hi, h) {n, fl, NL_F_INT32, OFF(f), lo, hi, h}
#define I64(n, fl, f, lo, hi, h) {n, fl, NL_F_INT64, OFF(f), lo, hi, h}
#define D(n, fl, f, h) {n, fl, NL_F_DURATION, OFF(f), 0, 0, h}

const nl_config_field_t nl__config_fields[] = {
    S("staticPodPath", "pod-manifest-path", static_pod_path, "Path to the directory (or file) of static pod manifests"),
    D("fileCheckFrequency", "file-check-frequency", file_check_frequency, "Duration between re-reads of staticPodPath (default 20s)"),
    S("staticPodURL", "manifest-url", static_pod_url, "URL for getting static pod manifests"),
    {"staticPodURLHeader", "manifest-url-header", NL_F_STRLISTMAP, OFF(static_pod_url_header), 0, 0, "HTTP headers for staticPodURL, 'key:value,key:value'"},
    D("httpCheckFrequency", "http-check-frequency", http_check_frequency, "Duration between polls of staticPodURL (default 20s)"),
    D("syncFrequency", "sync-frequency", sync_frequency, "Max period between synchronizing running pods (default 1m)"),
    S("address", "address", address, "IP address to serve on (default 0.0.0.0)"),
    I32("port", "port", port, 1, 65535, "Port of the kubelet server (default 10250)"),
    I32("readOnlyPort", "read-only-port", read_only_port, 0, 65535, "Read-only port, 0 disables (default 0)"),
    I32("healthzPort", "healthz-port", healthz_port, 0, 65535, "Port of the healthz endpoint, 0 disables (default 10248)"),
    S("healthzBindAddress", "healthz-bind-address", healthz_bind_address, "IP address for the healthz server (default 127.0.0.1)"),
    S("containerRuntimeEndpoint", "container-runtime-endpoint", container_runtime_endpoint, "The CRI endpoint (default unix:///run/containerd/containerd.sock)"),
    S("imageServiceEndpoint", "image-service-endpoint", image_service_endpoint, "The CRI image endpoint (default: the runtime endpoint)"),
    D("runtimeRequestTimeout", "runtime-request-timeout", runtime_request_timeout, "Timeout of runtime requests but long ones (default 2m)"),
    I32("maxPods", "max-pods", max_pods, 0, 1000000, "Number of pods that can run on this node (default 110)"),
    I64("podPidsLimit", "pod-max-pids", pod_pids_limit, -1, INT64_MAX, "Max number of processes per pod, -1 unlimited (default -1)"),
    I64("userNamespaces.idsPerPod", NULL, userns_ids_per_pod, INT64_MIN, INT64_MAX, NULL),
    D("crashLoopBackOff.maxContainerRestartPeriod", NULL, crash_loop_backoff_max, NULL),
    S("cgroupDriver", "cgroup-driver", cgroup_driver, "cgroupfs or systemd (default cgroupfs)"),
    S("cgroupRoot", "cgroup-root", cgroup_root, "Root cgroup for pods"),
    B("cgroupsPerQOS", "cgroups-per-qos", cgroups_per_qos, "Create the QoS cgroup hierarchy (default true)"),
    B("cpuCFSQuota", "cpu-cfs-quota", cpu_cfs_quota, "Enforce CPU limits with CFS quota (default true)"),
    D("cpuCFSQuotaPeriod", "cpu-cfs-quota-period", cpu_cfs_quota_period, "CFS quota period of CPU limits (default 100ms)"),
    D("cpuManagerReconcilePeriod", "cpu-manager-reconcile-period", cpu_manager_reconcile_period, "Period of the CPU manager's reconciliation (default 10s)"),
    {"enforceNodeAllocatable", "enforce-node-allocatable", NL_F_STRLIST, OFF(enforce_node_allocatable), 0, 0, "What enforces node allocatable: none, or pods, system-reserved, kube-reserved (default pods)"},
    S("systemReservedCgroup", "system-reserved-cgroup", system_reserved_cgroup, "The cgroup of the system daemons, for enforceNodeAllocatable system-reserved"),
    S("kubeletCgroups", "kubelet-cgroups", kubelet_cgroups, "The cgroup nanolet moves itself into at start (created when missing)"),
    S("kubeReservedCgroup", "kube-reserved-cgroup", kube_reserved_cgroup, "The cgroup of the Kubernetes daemons, for enforceNodeAllocatable kube-reserved"),
    {"allowedUnsafeSysctls", "allowed-unsafe-sysctls", NL_F_STRLIST, OFF(allowed_unsafe_sysctls), 0, 0, "Unsafe sysctls or patterns (ending in '*') pods may set, comma separated"},
    {"clusterDNS", "cluster-dns", NL_F_STRLIST, OFF(cluster_dns), 0, 0, "DNS server IPs for pods, comma separated"},
    S("clusterDomain", "cluster-domain", cluster_domain, "Domain of the cluster"),
    S("resolvConf", "resolv-conf", resolv_conf, "Resolver configuration file for pods (default /etc/resolv.conf)"),
    B("seccompDefault", "seccomp-default", seccomp_default, "Use the runtime's default seccomp profile (RuntimeDefault) for containers that name none (default false)"),
    B("serializeImagePulls", "serialize-image-pulls", serialize_image_pulls, "Pull images one at a time (default true)"),
    I32("maxParallelImagePulls", "max-parallel-image-pulls", max_parallel_image_pulls, 0, 1000000, "Max image pulls in parallel"),
    S("containerLogMaxSize", "container-log-max-size", container_log_max_size, "Max size of a container log before rotation (default 10Mi)"),
    I32("containerLogMaxFiles", "container-log-max-files", container_log_max_files, 2, 1000000, "Max container log files kept (default 5)"),
    D("nodeStatusUpdateFrequency", "node-status-update-frequency", node_status_update_frequency, "How often node status is computed (default 10s)"),
    D("nodeStatusReportFrequency", NULL, node_status_report_frequency, NULL),
    I32("nodeLeaseDurationSeconds", NULL, node_lease_duration_seconds, 1, INT32_MAX, NULL),
    {"featureGates", "feature-gates", NL_F_BOOLMAP, OFF(feature_gates), 0, 0, "Feature gates, e.g. EventedPLEG=true (nanolet knows EventedPLEG, ResourceHealthStatus, KubeletCrashLoopBackOffMax and ReduceDefaultCrashLoopBackOffDecay)"},
    {"evictionHard", "eviction-hard", NL_F_STRMAP, OFF(eviction_hard), 0, 0, "Hard eviction thresholds, e.g. memory.available<100Mi"},
    {"evictionSoft", "eviction-soft", NL_F_STRMAP, OFF(eviction_soft), 0, 0, "Soft eviction thresholds, e.g. memory.available<300Mi"},
    {"evictionSoftGracePeriod", "eviction-soft-grace-period", NL_F_STRMAP, OFF(eviction_soft_grace_period), 0, 0, "Grace periods of the soft thresholds, e.g. memory.available=1m30s"},
    I32("evictionMaxPodGracePeriod", "eviction-max-pod-grace-period", eviction_max_pod_grace_period, INT32_MIN, INT32_MAX, "Max grace period (s) of pods evicted on a soft threshold"),
    {"evictionMinimumReclaim", "eviction-minimum-reclaim", NL_F_STRMAP, OFF(eviction_minimum_reclaim), 0, 0, "Minimum to reclaim beyond a threshold, e.g. imagefs.available=2Gi"},
    B("kernelMemcgNotification", "kernel-memcg-notification", kernel_memcg_notification, "Start an eviction round when memory crosses a threshold, from the memory cgroup's notifications (default true)"),
    D("evictionPressureTransitionPeriod", "eviction-pressure-transition-period", eviction_pressure_transition_period, "Wait before leaving a pressure condition (default 5m)"),
    I32("imageGCHighThresholdPercent", "image-gc-high-threshold", image_gc_high_threshold_percent, 0, 100, "Disk usage percent that starts image GC (default 85)"),
    I32("imageGCLowThresholdPercent", "image-gc-low-threshold", image_gc_low_threshold_percent, 0, 100, "Disk usage percent image GC frees down to (default 80)"),
    D("imageMinimumGCAge", "minimum-image-ttl-duration", image_minimum_gc_age, "Minimum age of an unused image before GC (default 2m)"),
    D("imageMaximumGCAge", NULL, image_maximum_gc_age, NULL),
    D("shutdownGracePeriod", NULL, shutdown_grace_period, NULL),
    D("shutdownGracePeriodCriticalPods", NULL, shutdown_grace_period_critical_pods, NULL),
    {"shutdownGracePeriodByPodPriority", NULL, NL_F_PRIORITIES, OFF(shutdown_grace_period_by_pod_priority), 0, 0, NULL},
    D("streamingConnectionIdleTimeout", "streaming-connection-idle-timeout", streaming_connection_idle_timeout, "Idle timeout of streaming connections (default 4h)"),
    I32("oomScoreAdj", "oom-score-adj", oom_score_adj, -1000, 1000, "The oom_score_adj of the agent, -1000..1000 (default -999)"),
    B("failSwapOn", "fail-swap-on", fail_swap_on, "Fail to start when swap is on (default true)"),
    B("enableServer", "enable-server", enable_server, "Serve the kubelet API (default true)"),
    B("enableDebuggingHandlers", "enable-debugging-handlers", enable_debugging_handlers, "Serve logs and exec endpoints (default true)"),
    B("enableSystemLogHandler", NULL, enable_system_log_handler, NULL),
    B("enableSystemLogQuery", NULL, enable_system_log_query, NULL),
    S("hairpinMode", "hairpin-mode", hairpin_mode, "promiscuous-bridge, hairpin-veth or none"),
    S("tlsCertFile", "tls-cert-file", tls_cert_file, "x509 certificate for the kubelet server"),
    S("tlsPrivateKeyFile", "tls-private-key-file", tls_private_key_file, "x509 private key matching --tls-cert-file"),
    B("rotateCertificates", "rotate-certificates", rotate_certificates, "Rotate the client certificate through CSRs before it expires"),
    B("serverTLSBootstrap", NULL, server_tls_bootstrap, NULL),
    S("podLogsDir", NULL, pod_logs_dir, NULL),
    S("configMapAndSecretChangeDetectionStrategy", NULL, config_map_and_secret_change_detection_strategy, NULL),
    B("enableControllerAttachDetach", NULL, enable_controller_attach_detach, NULL),
    B("makeIPTablesUtilChains", NULL, make_iptables_util_chains, NULL),
    I32("registryPullQPS", "registry-qps", registry_pull_qps, 0, INT32_MAX, "Image pulls per second, 0 unlimited (default 5)"),
    I32("registryBurst", "registry-burst", registry_burst, 0, INT32_MAX, "Burst of image pulls (default 10)"),
    I32("eventRecordQPS", "event-qps", event_record_qps, 0, INT32_MAX, "Events per second (default 50)"),
    I32("eventBurst", "event-burst", event_burst, 0, INT32_MAX, "Burst of events (default 100)"),
    I32("kubeAPIQPS", "kube-api-qps", kube_api_qps, 0, INT32_MAX, "QPS to the API server (default 50)"),
    I32("kubeAPIBurst", "kube-api-burst", kube_api_burst, 0, INT32_MAX, "Burst to the API server (default 100)"),
    S("contentType", "kube-api-content-type", content_type, "Content type of requests sent to the API server (default application/vnd.kubernetes.protobuf)"),
    B("registerNode", "register-node", register_node, "Register the node with the API server (default true)"),
    {"registerWithTaints", "register-with-taints", NL_F_TAINTS, OFF(register_with_taints), 0, 0, "Taints of the node at registration, 'key=value:Effect,...'"},
    I32("nodeStatusMaxImages", "node-status-max-images", node_status_max_images, -1, INT32_MAX, "Max images in the node status, -1 no cap (default 50)"),
    {"kubeReserved", "kube-reserved", NL_F_STRMAP, OFF(kube_reserved), 0, 0, "Resources reserved for Kubernetes components, e.g. cpu=100m,memory=256Mi"},
    S("tlsMinVersion", "tls-min-version", tls_min_version, "Minimum TLS version of the kubelet server: VersionTLS10, VersionTLS11, VersionTLS12"),
    {"tlsCipherSuites", "tls-cipher-suites", NL_F_STRLIST, OFF(tls_cipher_suites), 0, 0, "Cipher suites of the kubelet server, Go names, comma separated (default: the TLS library's)"},
    S("authentication.x509.clientCAFile", "client-ca-file", authn_x509_client_ca_file, "CA bundle that client certificates of the kubelet server must chain to"),
    B("authentication.webhook.enabled", "authentication-token-webhook", authn_webhook_enabled, "Check bearer tokens with TokenReview"),
    D("authentication.webhook.cacheTTL", "authentication-token-webhook-cache-ttl", authn_webhook_cache_ttl, "How long TokenReview answers are cached (default 2m)"),
    B("authentication.anonymous.enabled", "anonymous-auth", authn_anonymous_enabled, "Serve requests without credentials as system:anonymous"),
    S("authorization.mode", "authorization-mode", authz_mode, "AlwaysAllow or Webhook (SubjectAccessReview)"),
    D("authorization.webhook.cacheAuthorizedTTL", "authorization-webhook-cache-authorized-ttl", authz_webhook_cache_authorized_ttl, "How long allowed answers are cached (default 5m)"),
    D("authorization.webhook.cacheUnauthorizedTTL", "authorization-webhook-cache-unauthorized-ttl", authz_webhook_cache_unauthorized_ttl, "How long denied answers are cached (default 30s)"),
    {"systemReserved", "system-reserved", NL_F_STRMAP, OFF(system_reserved), 0, 0, "Resources reserved for the system, e.g. cpu=100m,memory=256Mi"},
    /* Flags upstream keeps outside the configuration file. */
    S(NULL, "config", config_file, "The KubeletConfiguration file; flags override it"),
    S(NULL, "config-dir", config_dir, "Directory of drop-in KubeletConfiguration files ('*.conf', its subdirectories too), merged over --config in lexical order; flags override them"),
    S(NULL, "kubeconfig", kubeconfig, "kubeconfig of the API server; standalone mode when absent"),
    S(NULL, "bootstrap-kubeconfig", bootstrap_kubeconfig, "kubeconfig used to get a client certificate (TLS bootstrap) when --kubeconfig has no valid one"),
    S(NULL, "hostname-override", hostname_override, "Use this name as the node name instead of the hostname"),
    S(NULL, "node-ip", node_ip, "IP address(es) of the node"),
    {NULL, "node-labels", NL_F_STRMAP, OFF(node_labels), 0, 0, "Labels for the node, 'key=value,key=value'"},
    B(NULL, "register-schedulable", register_schedulable, "Register the node as schedulable (default true; deprecated upstream)"),
    S(NULL, "root-dir", root_dir, "Directory for kubelet files (default /var/lib/kubelet)"),
    S(NULL, "cert-dir", cert_dir, "Where the TLS certificates and keys are kept (default /var/lib/kubelet/pki)"),
    S(NULL, "lock-file", lock_file, "File the agent locks so that only one runs"),
    S(NULL, "image-credential-provider-config", image_credential_provider_config, "The CredentialProviderConfig file, or a directory of them (*.json, *.yaml, *.yml), of the image credential provider plugins"),
    S(NULL, "image-credential-provider-bin-dir", image_credential_provider_bin_dir, "The directory of the image credential provider plugins' executables"),
    B(NULL, "exit-on-lock-contention", exit_on_lock_contention, "Exit when another process wants the lock file"),
    B(NULL, "runonce", runonce, "Run the static pods once, then exit"),
    I32(NULL, "v", verbosity, 0, 10, "Log verbosity"),
    D(NULL, "minimum-container-ttl-duration", minimum_container_ttl_duration, "Minimum age of a dead container before GC (default 0)"),
    I32(NULL, "maximum-dead-containers-per-container", maximum_dead_containers_per_container, INT32_MIN, INT32_MAX, "Dead instances kept per container, <0 no limit (default 1)"),
    I32(NULL, "maximum-dead-containers", maximum_dead_containers, INT32_MIN, INT32_MAX, "Dead containers kept in all, <0 no limit (default -1)"),
    S(NULL, "pid-file", pid_file, "Write the agent's pid to this file (nanolet only)"),
    B(NULL, "pod-checkpoint", pod_checkpoint, "Checkpoint the API pods and run them at a start without API server (nanolet only; default true)"),
};
const size_t nl__config_nfields = sizeof nl__config_fields / sizeof nl__config_fields[0];
_Static_assert(sizeof nl__config_fields / sizeof nl__config_fields[0] <= NL_CONFIG_MAX_FIELDS,
               "raise NL_CONFIG_MAX_FIELDS in agent/config.h");

void nl__strlist_add(nl_config_list_t *l, const char *s) {
  l->v = nl_xrealloc(l->v, (l->n + 1) * sizeof *l->v);
  l->v[l->n++] = nl_xstrdup(s);
}

void nl__strlist_free(nl_config_list_t *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = 0;
}

void nl__strmap_add(nl_config_map_t *m, const char *key, const char *value, int replace) {
  size_t i;
  for (i = 0; i < m->n; i++)
    if (strcmp(m->keys[i], key) == 0) break;
  if (i == m->n) {
    m->keys = nl_xrealloc(m->keys, (m->n + 1) * sizeof *m->keys);
    m->values = nl_xrealloc(m->values, (m->n + 1) * sizeof *m->values);
    m->first = nl_xrealloc(m->first, (m->n + 1) * sizeof *m->first);
    m->keys[i] = nl_xstrdup(key);
    m->values[i] = (nl_config_list_t){NULL, 0};
    m->n++;
  } else if (replace) {
    nl__strlist_free(&m->values[i]);
  }
  if (value) nl__strlist_add(&m->values[i], value);
  m->first[i] = m->values[i].n ? m->values[i].v[0] : "";
}

void nl__strmap_del(nl_config_map_t *m, const char *key) {
  for (size_t i = 0; i < m->n; i++) {
    if (strcmp(m->keys[i], key) != 0) continue;
    free(m->keys[i]);
    nl__strlist_free(&m->values[i]);
    m->n--;
    memmove(&m->keys[i], &m->keys[i + 1], (m->n - i) * sizeof *m->keys);
    memmove(&m->values[i], &m->values[i + 1], (m->n - i) * sizeof *m->values);
    memmove(&m->first[i], &m->first[i + 1], (m->n - i) * sizeof *m->first);
    return;
  }
}

void nl__strmap_free(nl_config_map_t *m) {
  for (size_t i = 0; i < m->n; i++) {
    free(m->keys[i]);
    nl__strlist_free(&m->values[i]);
  }
  free(m->keys);
  free(m->values);
  free(m->first);
  m->first = NULL;
  m->keys = NULL;
  m->values = NULL;
  m->n = 0;
}

static int parse_bool(const char *s, bool *out) {
  /* Go's strconv.ParseBool, which pflag and the YAML decoder's strict mode use. */
  static const char *yes[] = {"1", "t", "T", "TRUE", "true", "True"};
  static const char *no[] = {"0", "f", "F", "FALSE", "false", "False"};
  for (size_t i = 0; i < 6; i++) {
    if (strcmp(s, yes[i]) == 0) return *out = true, 0;
    if (strcmp(s, no[i]) == 0) return *out = false, 0;
  }
  return -1;
}

const char *nl__config_bool_text(const char *s) {
  bool b;
  return parse_bool(s, &b) < 0 ? NULL : b ? "true" : "false";
}

int nl__config_gate_error(const char *key, const char *value, nl_err_t **err) {
  return nl_err_set(err, NL_EINVAL,
                    "invalid value of %s=%s, err: strconv.ParseBool: parsing \"%s\": invalid syntax",
                    key, value, value);
}

static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out, nl_err_t **err) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || errno)
    return nl_err_set(err, NL_EINVAL, "invalid integer \"%s\"", s);
  if (lo < hi && (v < lo || v > hi))
    return nl_err_set(err, NL_EINVAL, "must be between %lld and %lld, got %lld", (long long)lo,
                      (long long)hi, v);
  *out = v;
  return 0;
}

int nl__config_set_scalar(nl_kubelet_config_t *cfg, const nl_config_field_t *f, const char *s,
                          nl_err_t **err) {
  char *p = (char *)cfg + f->offset;
  int64_t v;
  switch (f->type) {
  case NL_F_STRING:
    free(*(char **)p);
    *(char **)p = nl_xstrdup(s);
    return 0;
  case NL_F_BOOL:
    if (parse_bool(s, (bool *)p) < 0)
      return nl_err_set(err, NL_EINVAL, "invalid boolean \"%s\" (true or false)", s);
    return 0;
  case NL_F_INT32:
    if (parse_int(s, f->min < f->max ? f->min : INT32_MIN, f->min < f->max ? f->max : INT32_MAX,
                  &v, err) < 0)
      return -1;
    *(int32_t *)p = (int32_t)v;
    return 0;
  case NL_F_INT64:
    if (parse_int(s, f->min, f->max, &v, err) < 0) return -1;
    *(int64_t *)p = v;
    return 0;
  case NL_F_DURATION:
    if (nl_duration_parse(s, &v, err) < 0) return -1;
    if (v < 0) return nl_err_set(err, NL_EINVAL, "must not be negative, got \"%s\"", s);
    *(int64_t *)p = v;
    return 0;
  case NL_F_STRLIST:
  case NL_F_TAINTS: {
    nl_config_list_t *l = (nl_config_list_t *)p;
    nl__strlist_free(l);
    char *dup = nl_xstrdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
      nl__strlist_add(l, t);
    free(dup);
    return 0;
  }
  case NL_F_PRIORITIES: break; /* file only */
  case NL_F_STRMAP:
  case NL_F_BOOLMAP:
  case NL_F_STRLISTMAP: {
    nl_config_map_t *m = (nl_config_map_t *)p;
    char sep = f->type == NL_F_STRLISTMAP ? ':' : '=';
    /* evictionHard is written "memory.available<100Mi" on the command line. */
    if (f->offset == OFF(eviction_hard) || f->offset == OFF(eviction_soft)) sep = '<';
    /* --feature-gates adds to the file's gates, as upstream's flag precedence
     * puts back the gates the flag does not name; other maps are replaced. */
    if (f->type != NL_F_BOOLMAP) nl__strmap_free(m);
    char *dup = nl_xstrdup(s), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      char *eq = strchr(t, sep);
      if (!eq || eq == t) {
        rc = nl_err_set(err, NL_EINVAL, "\"%s\" is not in the form key%cvalue", t, sep);
        break;
      }
      *eq = '\0';
      const char *val = eq + 1;
      if (f->type == NL_F_BOOLMAP && !(val = nl__config_bool_text(val))) {
        rc = nl__config_gate_error(t, eq + 1, err);
        break;
      }
      nl__strmap_add(m, t, val, f->type != NL_F_STRLISTMAP);
    }
    free(dup);
    return rc;
  }
  }
  return nl_err_set(err, NL_EINVAL, "unsupported field type");
}

void nl__config_field_copy(nl_kubelet_config_t *dst, const nl_kubelet_config_t *src,
                           const nl_config_field_t *f) {
  void *d = (char *)dst + f->offset;
  const void *s = (const char *)src + f->offset;
  switch (f->type) {
  case NL_F_STRING: {
    const char *v = *(char *const *)s;
    free(*(char **)d);
    *(char **)d = v ? nl_xstrdup(v) : NULL;
    return;
  }
  case NL_F_BOOL: *(bool *)d = *(const bool *)s; return;
  case NL_F_INT32: *(int32_t *)d = *(const int32_t *)s; return;
  case NL_F_INT64:
  case NL_F_DURATION: *(int64_t *)d = *(const int64_t *)s; return;
  case NL_F_STRLIST:
  case NL_F_TAINTS:
  case NL_F_PRIORITIES: {
    const nl_config_list_t *l = s;
    nl__strlist_free(d);
    for (size_t i = 0; i < l->n; i++) nl__strlist_add(d, l->v[i]);
    return;
  }
  case NL_F_STRMAP:
  case NL_F_BOOLMAP:
  case NL_F_STRLISTMAP: {
    const nl_config_map_t *m = s;
    nl__strmap_free(d);
    for (size_t i = 0; i < m->n; i++) {
      nl__strmap_add(d, m->keys[i], NULL, 1);
      for (size_t j = 0; j < m->values[i].n; j++) nl__strmap_add(d, m->keys[i], m->values[i].v[j], 0);
    }
    return;
  }
  }
}
