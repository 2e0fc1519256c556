/* The KubeletConfiguration (kubelet.config.k8s.io/v1beta1) with upstream field
 * names and defaults, read from --config and overridden by flags. */
#ifndef NL_CONFIG_H
#define NL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "reactor/error.h"

typedef struct nl_config_list {
  char **v; /* owned */
  size_t n;
} nl_config_list_t;

/* An ordered string map, as map[string]string / map[string][]string in Go. */
typedef struct nl_config_map {
  char **keys; /* owned */
  nl_config_list_t *values; /* owned; one entry per key (one value for map[string]string) */
  const char **first;       /* per key, its first value or "" (map[string]string's value) */
  size_t n;
} nl_config_map_t;

/* Where a setting's value came from, so that start-up can name what the user set. */
typedef enum { NL_CONFIG_UNSET, NL_CONFIG_FILE, NL_CONFIG_FLAG } nl_config_source_t;

/* At least the number of entries of the field table (config_fields.c asserts it). */
#define NL_CONFIG_MAX_FIELDS 128

typedef struct nl_kubelet_config {
  /* KubeletConfiguration fields, named as upstream (durations in ns). */
  char *static_pod_path;
  int64_t file_check_frequency;
  char *static_pod_url;
  nl_config_map_t static_pod_url_header;
  int64_t http_check_frequency;
  int64_t sync_frequency;
  char *address;
  int32_t port;
  int32_t read_only_port;
  int32_t healthz_port;
  char *healthz_bind_address;
  char *container_runtime_endpoint;
  char *image_service_endpoint;
  int64_t runtime_request_timeout;
  int32_t max_pods;
  int64_t pod_pids_limit;
  int64_t userns_ids_per_pod; /* userNamespaces.idsPerPod (default 65536) */
  /* crashLoopBackOff.maxContainerRestartPeriod, ns; 0: not set (5 min, or 1
   * min with ReduceDefaultCrashLoopBackOffDecay) */
  int64_t crash_loop_backoff_max;
  char *cgroup_driver;
  char *cgroup_root;
  bool cgroups_per_qos;
  bool cpu_cfs_quota;
  int64_t cpu_cfs_quota_period;
  int64_t cpu_manager_reconcile_period;
  nl_config_list_t enforce_node_allocatable; /* "pods", "system-reserved", ... */
  char *system_reserved_cgroup;
  char *kube_reserved_cgroup;
  char *kubelet_cgroups;
  nl_config_list_t cluster_dns;
  nl_config_list_t allowed_unsafe_sysctls; /* "kernel.msg*", "net.core.somaxconn", ... */
  char *cluster_domain;
  char *resolv_conf;
  bool serialize_image_pulls;
  bool seccomp_default; /* seccompDefault */
  int32_t max_parallel_image_pulls; /* 0: unset */
  char *container_log_max_size;
  int32_t container_log_max_files;
  int64_t node_status_update_frequency;
  int64_t node_status_report_frequency;
  int32_t node_lease_duration_seconds;
  /* name -> "true"/"false"; the known ones: agent/kubelet.c feature_gates() */
  nl_config_map_t feature_gates;
  nl_config_map_t eviction_hard;
  nl_config_map_t eviction_soft;
  nl_config_map_t eviction_soft_grace_period;
  int64_t eviction_pressure_transition_period;
  bool kernel_memcg_notification;
  int32_t eviction_max_pod_grace_period;
  nl_config_map_t eviction_minimum_reclaim;
  int32_t image_gc_high_threshold_percent;
  int32_t image_gc_low_threshold_percent;
  int64_t image_minimum_gc_age;
  int64_t image_maximum_gc_age; /* 0: none */
  int64_t shutdown_grace_period;
  int64_t shutdown_grace_period_critical_pods;
  nl_config_list_t shutdown_grace_period_by_pod_priority; /* "priority=seconds" each */
  int64_t streaming_connection_idle_timeout;
  int32_t oom_score_adj; /* --oom-score-adj; upstream keeps it in the config too */
  bool fail_swap_on;
  bool enable_server;
  bool enable_debugging_handlers;
  bool enable_system_log_handler; /* /logs/ (with enableDebuggingHandlers) */
  bool enable_system_log_query;   /* /logs/?query= (with enableSystemLogHandler) */
  char *hairpin_mode;
  char *config_map_and_secret_change_detection_strategy; /* "Watch", "Get" or "Cache" */
  char *tls_cert_file;
  char *tls_private_key_file;
  bool rotate_certificates;
  bool server_tls_bootstrap;
  char *pod_logs_dir;
  bool enable_controller_attach_detach;
  bool make_iptables_util_chains;
  int32_t registry_pull_qps;
  int32_t registry_burst;
  int32_t event_record_qps;
  int32_t event_burst;
  int32_t kube_api_qps;
  int32_t kube_api_burst;
  char *content_type; /* contentType (--kube-api-content-type) */
  bool register_node;
  nl_config_list_t register_with_taints; /* "key=value:Effect" each */
  int32_t node_status_max_images;
  nl_config_map_t kube_reserved;
  nl_config_map_t system_reserved;
  char *tls_min_version;
  nl_config_list_t tls_cipher_suites;
  /* authentication and authorization (nested in the file) */
  char *authn_x509_client_ca_file;
  bool authn_webhook_enabled;
  int64_t authn_webhook_cache_ttl;
  bool authn_anonymous_enabled;
  char *authz_mode; /* "AlwaysAllow" or "Webhook" */
  int64_t authz_webhook_cache_authorized_ttl;
  int64_t authz_webhook_cache_unauthorized_ttl;

  /* Flags that upstream keeps outside the file. */
  char *config_file;
  char *config_dir; /* --config-dir: drop-ins over the file (agent/config_dropin.c) */
  char *kubeconfig;
  char *bootstrap_kubeconfig;
  char *hostname_override;
  char *node_ip;
  nl_config_map_t node_labels;
  bool register_schedulable; /* deprecated upstream, still honoured */
  char *root_dir;
  char *cert_dir;
  char *lock_file;
  char *image_credential_provider_config;  /* a file or a directory (managers/credprov.h) */
  char *image_credential_provider_bin_dir;
  bool exit_on_lock_contention;
  bool runonce;
  int verbosity;
  char *pid_file; /* nanolet only: upstream has no pid file */
  /* Container GC: flags only upstream (deprecated there, still honoured). */
  int64_t minimum_container_ttl_duration;
  int32_t maximum_dead_containers_per_container;
  int32_t maximum_dead_containers;
  /* nanolet only: checkpoint the API pods under the root dir and run them at a
   * start with no API server (docs/SOURCES.md); upstream has no such thing. */
  bool pod_checkpoint;

  /* nl_config_source_t of each entry of the field table, by index. */
  uint8_t set_by[NL_CONFIG_MAX_FIELDS];
} nl_kubelet_config_t;

/* Fills cfg with upstream's defaults (those of a v1beta1 configuration file). */
void nl_config_defaults(nl_kubelet_config_t *cfg);
/* Without --config, upstream's flag defaults replace a few of those
 * (applyLegacyDefaults): anonymous authentication on, the token webhook off,
 * authorization AlwaysAllow. Call before the flags are applied. */
void nl_config_legacy_defaults(nl_kubelet_config_t *cfg);
void nl_config_free(nl_kubelet_config_t *cfg);

/* Parses a KubeletConfiguration document (YAML or JSON) into cfg, over what is
 * there. Unknown fields are logged as warnings. Returns 0, or -1 with *err naming
 * the file and field. */
int nl_config_load_bytes(nl_kubelet_config_t *cfg, const char *name, const char *data,
                         size_t len, nl_err_t **err);
int nl_config_load_file(nl_kubelet_config_t *cfg, const char *path, nl_err_t **err);

/* Merges the drop-ins of dir into cfg: every *.conf file under it (and its
 * subdirectories), in lexical order of their paths, each a KubeletConfiguration
 * that overrides what came before as upstream's JSON merge patch does: a field
 * set replaces the earlier value, maps merge key by key (a key set to null
 * goes), lists are replaced whole, nested structs merge field by field, null
 * resets a field to its default. Other files are skipped and logged. Returns 0,
 * or -1 with *err naming the directory, the file and the field. */
int nl_config_load_dir(nl_kubelet_config_t *cfg, const char *dir, nl_err_t **err);

/* What the agent starts from before its flags: defaults, the --config file,
 * then the --config-dir drop-ins, as upstream reads them (argv is only searched
 * for those two flags; nl_flags_parse applies all flags afterwards, so flags
 * win). Returns 0, or -1 with *err naming the file and field. */
int nl_config_read(nl_kubelet_config_t *cfg, int argc, char **argv, nl_err_t **err);

/* A feature gate's value: def unless featureGates sets it. */
bool nl_config_gate(const nl_kubelet_config_t *cfg, const char *name, bool def);

/* The crash-loop back-off's first and longest delay, in ms, from the gates
 * and crashLoopBackOff.maxContainerRestartPeriod, as upstream's
 * newCrashLoopBackOff. */
void nl_config_crash_loop_backoff(const nl_kubelet_config_t *cfg, uint64_t *initial_ms,
                                  uint64_t *max_ms);

/* Checks cross-field rules as upstream's ValidateKubeletConfiguration. */
int nl_config_validate(const nl_kubelet_config_t *cfg, nl_err_t **err);

/* Warns once for each setting the user set that nanolet parses but does not act
 * on yet (agent/config_ignored.c). A --kubeconfig or --bootstrap-kubeconfig that
 * cannot be read is an error: returns -1 with *err naming the flag and path;
 * otherwise 0 (a readable one is logged as ignored: nanolet runs standalone). */
int nl_config_check_ignored(const nl_kubelet_config_t *cfg, nl_err_t **err);

/* /configz: {"kubeletconfig": {...}} (agent/config_json.c). Caller frees. */
char *nl_config_to_json(const nl_kubelet_config_t *cfg);

/* Command line. nl_flags_parse applies flags to cfg (so flags override the file:
 * call it after nl_config_read, which finds --config and --config-dir with
 * nl_flags_find, the value of a flag or NULL).
 * Sets *want_help / *want_version. Returns 0 or -1 with *err naming the flag. */
const char *nl_flags_find(int argc, char **argv, const char *flag);
int nl_flags_parse(nl_kubelet_config_t *cfg, int argc, char **argv, bool *want_help,
                   bool *want_version, nl_err_t **err);
void nl_flags_usage(FILE *out);

#endif
