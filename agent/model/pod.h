/* The v1 Pod, as far as a kubelet acts on it: typed structs decoded from YAML or
 * JSON, upstream's defaulting and validation, static-pod naming, hashing and a
 * JSON encoding.
 *
 * Ownership: every string and array reachable from an nl_pod_t lives in the pod's
 * own arena and is released by nl_pod_free(); nothing keeps the parse tree.
 * Strings are NUL-terminated; an absent string is NULL (never ""-for-absent, so
 * `field: ""` and a missing field stay distinguishable where upstream cares).
 * Optional scalars (Go pointers) are nl_opt_* with a `set` flag; optional bools are
 * nl_tristate_t. Optional sub-objects (Go pointers) are NULL when absent.
 * Maps (labels, annotations, nodeSelector) are sorted by key, as Go encodes them.
 * Mutate a decoded pod only through the functions here (nl_pod_set_annotation...):
 * they allocate in the pod's arena. */
#ifndef NL_POD_H
#define NL_POD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/model/quantity.h"
#include "reactor/buf.h"
#include "reactor/error.h"

typedef int8_t nl_tristate_t; /* NL_UNSET, 0 (false) or 1 (true) */
#define NL_UNSET ((nl_tristate_t)-1)

typedef struct nl_opt_i64 {
  bool set;
  int64_t v;
} nl_opt_i64_t;

typedef struct nl_opt_i32 {
  bool set;
  int32_t v;
} nl_opt_i32_t;

typedef struct nl_strlist {
  char **items;
  size_t n;
} nl_strlist_t;

typedef struct nl_kv {
  char *key;
  char *value;
} nl_kv_t;

typedef struct nl_kvlist { /* a map[string]string, sorted by key, keys unique */
  nl_kv_t *items;
  size_t n;
} nl_kvlist_t;

/* intstr.IntOrString: a probe port is 8080 or "http". */
typedef struct nl_intorstr {
  bool set;
  bool is_str;
  int32_t num;
  char *str;
} nl_intorstr_t;

typedef struct nl_resource {
  char *name; /* "cpu", "memory", "ephemeral-storage", "hugepages-2Mi", ... */
  nl_quantity_t q;
} nl_resource_t;

typedef struct nl_resource_list { /* sorted by name */
  nl_resource_t *items;
  size_t n;
} nl_resource_list_t;

typedef struct nl_resource_claim_ref { /* ResourceClaim: resources.claims[] (DRA) */
  char *name;    /* a spec.resourceClaims entry of the pod */
  char *request; /* one request of that claim; NULL: all of them */
} nl_resource_claim_ref_t;

typedef struct nl_resource_requirements {
  nl_resource_list_t limits;
  nl_resource_list_t requests;
  /* the DRA claims the container uses (managers/dra.h); kept as they are by
   * nl_pod_set_container_resources() */
  nl_resource_claim_ref_t *claims;
  size_t n_claims;
} nl_resource_requirements_t;

/* ---- metadata ---- */

typedef struct nl_owner_ref {
  char *api_version;
  char *kind;
  char *name;
  char *uid;
  nl_tristate_t controller;
  nl_tristate_t block_owner_deletion;
} nl_owner_ref_t;

typedef struct nl_object_meta {
  char *name;
  char *generate_name;
  char *namespace_;
  char *uid;
  nl_kvlist_t labels;
  nl_kvlist_t annotations;
  nl_owner_ref_t *owner_refs;
  size_t n_owner_refs;
  /* Set by the API server (NULL / 0 / unset in manifests). Times are RFC 3339
   * text as received (metav1.Time), so that a round trip keeps them exactly. */
  char *resource_version;
  int64_t generation;
  char *creation_timestamp;
  char *deletion_timestamp; /* set: the pod is being deleted gracefully */
  nl_opt_i64_t deletion_grace_period_seconds;
  nl_strlist_t finalizers;
} nl_object_meta_t;

/* ---- env ---- */

typedef struct nl_field_ref { /* ObjectFieldSelector */
  char *api_version;          /* defaulted to "v1" */
  char *field_path;           /* "metadata.name", "status.podIP", ... */
} nl_field_ref_t;

typedef struct nl_resource_field_ref { /* ResourceFieldSelector */
  char *container_name;
  char *resource; /* "limits.cpu", "requests.memory", ... */
  bool has_divisor;
  nl_quantity_t divisor;
} nl_resource_field_ref_t;

typedef struct nl_key_ref { /* ConfigMapKeySelector / SecretKeySelector */
  char *name;
  char *key;
  nl_tristate_t optional;
} nl_key_ref_t;

typedef struct nl_file_key_ref { /* FileKeySelector (EnvFiles) */
  char *volume_name; /* an emptyDir volume of the pod */
  char *path;        /* the env file, relative to the volume */
  char *key;
  nl_tristate_t optional;
} nl_file_key_ref_t;

typedef struct nl_env_source { /* EnvVarSource: exactly one is set when valid */
  nl_field_ref_t *field_ref;
  nl_resource_field_ref_t *resource_field_ref;
  nl_key_ref_t *config_map_key_ref;
  nl_key_ref_t *secret_key_ref;
  nl_file_key_ref_t *file_key_ref;
} nl_env_source_t;

typedef struct nl_env_var {
  char *name;
  char *value;               /* NULL when absent */
  nl_env_source_t *value_from; /* NULL when absent */
} nl_env_var_t;

typedef struct nl_local_ref { /* ConfigMapEnvSource / SecretEnvSource */
  char *name;
  nl_tristate_t optional;
} nl_local_ref_t;

typedef struct nl_env_from {
  char *prefix;
  nl_local_ref_t *config_map_ref;
  nl_local_ref_t *secret_ref;
} nl_env_from_t;

/* ---- ports, mounts ---- */

typedef struct nl_container_port {
  char *name;
  int32_t host_port; /* 0 when unset */
  int32_t container_port;
  char *protocol; /* defaulted to "TCP" */
  char *host_ip;
} nl_container_port_t;

typedef struct nl_volume_mount {
  char *name;
  bool read_only;
  char *mount_path;
  char *sub_path;
  char *sub_path_expr;
  char *mount_propagation; /* None, HostToContainer, Bidirectional */
  char *recursive_read_only; /* Disabled, IfPossible, Enabled; NULL: unset (Disabled) */
} nl_volume_mount_t;

/* ---- probes and hooks ---- */

typedef struct nl_exec_action {
  nl_strlist_t command;
} nl_exec_action_t;

typedef struct nl_http_get_action {
  char *path;
  nl_intorstr_t port;
  char *host;
  char *scheme;       /* defaulted to "HTTP" */
  nl_kv_t *headers;   /* name/value pairs, in order (may repeat) */
  size_t n_headers;
} nl_http_get_action_t;

typedef struct nl_tcp_socket_action {
  nl_intorstr_t port;
  char *host;
} nl_tcp_socket_action_t;

typedef struct nl_grpc_action {
  int32_t port;
  char *service; /* NULL: the default service */
} nl_grpc_action_t;

typedef struct nl_sleep_action {
  int64_t seconds;
} nl_sleep_action_t;

/* ProbeHandler and LifecycleHandler in one: exactly one is set when valid; grpc
 * only in probes, sleep only in lifecycle hooks. */
typedef struct nl_handler {
  nl_exec_action_t *exec;
  nl_http_get_action_t *http_get;
  nl_tcp_socket_action_t *tcp_socket;
  nl_grpc_action_t *grpc;
  nl_sleep_action_t *sleep;
} nl_handler_t;

typedef struct nl_probe {
  nl_handler_t handler;
  int32_t initial_delay_seconds;
  int32_t timeout_seconds;   /* defaulted to 1 */
  int32_t period_seconds;    /* defaulted to 10 */
  int32_t success_threshold; /* defaulted to 1 */
  int32_t failure_threshold; /* defaulted to 3 */
  nl_opt_i64_t termination_grace_period_seconds;
} nl_probe_t;

typedef struct nl_lifecycle {
  nl_handler_t *post_start;
  nl_handler_t *pre_stop;
} nl_lifecycle_t;

/* ---- security ---- */

typedef struct nl_selinux_options {
  char *user;
  char *role;
  char *type;
  char *level;
} nl_selinux_options_t;

typedef struct nl_seccomp_profile {
  char *type; /* RuntimeDefault, Unconfined, Localhost */
  char *localhost_profile;
} nl_seccomp_profile_t;

typedef struct nl_capabilities {
  nl_strlist_t add;
  nl_strlist_t drop;
} nl_capabilities_t;

typedef struct nl_security_context { /* container */
  nl_capabilities_t *capabilities;
  nl_tristate_t privileged;
  nl_selinux_options_t *se_linux_options;
  nl_opt_i64_t run_as_user;
  nl_opt_i64_t run_as_group;
  nl_tristate_t run_as_non_root;
  nl_tristate_t read_only_root_filesystem;
  nl_tristate_t allow_privilege_escalation;
  char *proc_mount;
  nl_seccomp_profile_t *seccomp_profile;
  nl_seccomp_profile_t *app_armor_profile; /* the same shape: type, localhostProfile */
} nl_security_context_t;

typedef struct nl_pod_security_context {
  nl_selinux_options_t *se_linux_options;
  nl_opt_i64_t run_as_user;
  nl_opt_i64_t run_as_group;
  nl_tristate_t run_as_non_root;
  int64_t *supplemental_groups;
  size_t n_supplemental_groups;
  nl_opt_i64_t fs_group;
  nl_kv_t *sysctls; /* name/value, in order */
  size_t n_sysctls;
  char *fs_group_change_policy;
  char *supplemental_groups_policy; /* "Merge" (NULL: the same) or "Strict" */
  nl_seccomp_profile_t *seccomp_profile;
  nl_seccomp_profile_t *app_armor_profile;
} nl_pod_security_context_t;

/* ---- containers ---- */

typedef struct nl_resize_policy { /* ContainerResizePolicy */
  char *resource_name;  /* "cpu" or "memory" */
  char *restart_policy; /* "NotRequired" or "RestartContainer" */
} nl_resize_policy_t;

typedef struct nl_restart_rule { /* ContainerRestartRule */
  char *action;                  /* "Restart" or "RestartAllContainers" */
  bool has_exit_codes;           /* exitCodes given */
  char *operator_;               /* exitCodes.operator: "In" or "NotIn" */
  int32_t *values;               /* exitCodes.values */
  size_t n_values;
} nl_restart_rule_t;

typedef struct nl_container {
  char *name;
  char *image;
  nl_strlist_t command;
  nl_strlist_t args;
  char *working_dir;
  nl_container_port_t *ports;
  size_t n_ports;
  nl_env_from_t *env_from;
  size_t n_env_from;
  nl_env_var_t *env;
  size_t n_env;
  nl_resource_requirements_t resources;
  nl_resize_policy_t *resize_policy;
  size_t n_resize_policy;
  char *restart_policy; /* Always, OnFailure or Never; an init container's Always makes a sidecar */
  nl_restart_rule_t *restart_policy_rules; /* in order; the first match decides */
  size_t n_restart_policy_rules;
  nl_volume_mount_t *volume_mounts;
  size_t n_volume_mounts;
  nl_probe_t *liveness_probe;
  nl_probe_t *readiness_probe;
  nl_probe_t *startup_probe;
  nl_lifecycle_t *lifecycle;
  char *termination_message_path;   /* defaulted to /dev/termination-log */
  char *termination_message_policy; /* defaulted to File */
  char *image_pull_policy;          /* defaulted from the image tag */
  nl_security_context_t *security_context;
  bool stdin_;
  bool stdin_once;
  bool tty;
  char *target_container_name; /* an ephemeral container's; NULL otherwise */
} nl_container_t;

/* ---- volumes ---- */

typedef struct nl_key_to_path {
  char *key;
  char *path;
  nl_opt_i32_t mode;
} nl_key_to_path_t;

typedef struct nl_host_path_source {
  char *path;
  char *type; /* defaulted to "" */
} nl_host_path_source_t;

typedef struct nl_empty_dir_source {
  char *medium; /* "" or "Memory" */
  bool has_size_limit;
  nl_quantity_t size_limit;
} nl_empty_dir_source_t;

typedef struct nl_config_map_source { /* volume and projection */
  char *name;
  nl_key_to_path_t *items;
  size_t n_items;
  nl_opt_i32_t default_mode; /* defaulted to 0644 in volumes */
  nl_tristate_t optional;
} nl_config_map_source_t;

typedef struct nl_secret_source { /* volume (secretName) and projection (name) */
  char *secret_name;
  nl_key_to_path_t *items;
  size_t n_items;
  nl_opt_i32_t default_mode;
  nl_tristate_t optional;
} nl_secret_source_t;

typedef struct nl_pvc_source {
  char *claim_name;
  bool read_only;
} nl_pvc_source_t;

typedef struct nl_downward_api_file {
  char *path;
  nl_field_ref_t *field_ref;
  nl_resource_field_ref_t *resource_field_ref;
  nl_opt_i32_t mode;
} nl_downward_api_file_t;

typedef struct nl_downward_api_source {
  nl_downward_api_file_t *items;
  size_t n_items;
  nl_opt_i32_t default_mode;
} nl_downward_api_source_t;

typedef struct nl_sa_token_projection {
  char *audience;
  int64_t expiration_seconds; /* defaulted to 3600 */
  char *path;
} nl_sa_token_projection_t;

typedef struct nl_volume_projection { /* exactly one is set when valid */
  nl_secret_source_t *secret;
  nl_config_map_source_t *config_map;
  nl_downward_api_source_t *downward_api;
  nl_sa_token_projection_t *service_account_token;
} nl_volume_projection_t;

typedef struct nl_projected_source {
  nl_volume_projection_t *sources;
  size_t n_sources;
  nl_opt_i32_t default_mode;
} nl_projected_source_t;

typedef struct nl_image_volume_source { /* an OCI image mounted read-only */
  char *reference;
  char *pull_policy; /* defaulted from the reference's tag, as a container's */
} nl_image_volume_source_t;

typedef struct nl_volume { /* exactly one source is set when valid */
  char *name;
  nl_host_path_source_t *host_path;
  nl_empty_dir_source_t *empty_dir;
  nl_config_map_source_t *config_map;
  nl_secret_source_t *secret;
  nl_pvc_source_t *persistent_volume_claim;
  nl_downward_api_source_t *downward_api;
  nl_projected_source_t *projected;
  nl_image_volume_source_t *image;
  /* The first upstream volume type nanolet does not implement (nfs, csi, ...),
   * or NULL; validation rejects it by name. */
  const char *unsupported;
} nl_volume_t;

/* ---- pod spec ---- */

typedef struct nl_toleration {
  char *key;
  char *operator_; /* Equal, Exists */
  char *value;
  char *effect;
  nl_opt_i64_t toleration_seconds;
} nl_toleration_t;

/* A NodeSelector (affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution):
 * its terms are ORed, the requirements of a term ANDed. */
typedef struct nl_node_selector_req {
  char *key;       /* a label key, or "metadata.name" in matchFields */
  char *operator_; /* In, NotIn, Exists, DoesNotExist, Gt, Lt */
  nl_strlist_t values;
} nl_node_selector_req_t;

typedef struct nl_node_selector_term {
  nl_node_selector_req_t *match_expressions;
  size_t n_match_expressions;
  nl_node_selector_req_t *match_fields;
  size_t n_match_fields;
} nl_node_selector_term_t;

typedef struct nl_node_selector {
  nl_node_selector_term_t *terms;
  size_t n_terms;
} nl_node_selector_t;

typedef struct nl_host_alias {
  char *ip;
  nl_strlist_t hostnames;
} nl_host_alias_t;

typedef struct nl_dns_option {
  char *name;
  char *value; /* NULL when absent */
} nl_dns_option_t;

typedef struct nl_dns_config {
  nl_strlist_t nameservers;
  nl_strlist_t searches;
  nl_dns_option_t *options;
  size_t n_options;
} nl_dns_config_t;

typedef struct nl_pod_resource_claim { /* PodResourceClaim (DRA) */
  char *name;
  char *resource_claim_name;          /* NULL unless set */
  char *resource_claim_template_name; /* NULL unless set */
} nl_pod_resource_claim_t;

typedef struct nl_pod_spec {
  nl_volume_t *volumes;
  size_t n_volumes;
  nl_container_t *init_containers;
  size_t n_init_containers;
  nl_container_t *containers;
  size_t n_containers;
  /* EphemeralContainerCommon has a Container's fields: one type for both */
  nl_container_t *ephemeral_containers;
  size_t n_ephemeral_containers;
  char *restart_policy;                          /* defaulted to Always */
  nl_opt_i64_t termination_grace_period_seconds; /* defaulted to 30 */
  nl_opt_i64_t active_deadline_seconds;
  char *dns_policy; /* defaulted to ClusterFirst */
  nl_kvlist_t node_selector;
  char *service_account_name;
  nl_tristate_t automount_service_account_token;
  char *node_name;
  bool host_network;
  bool host_pid;
  bool host_ipc;
  nl_tristate_t share_process_namespace;
  /* spec.hostUsers: false asks for a user namespace of the pod's own
   * (managers/userns.h); unset and true share the node's users */
  nl_tristate_t host_users;
  nl_pod_security_context_t *security_context; /* defaulted to an empty one */
  nl_strlist_t image_pull_secrets;              /* the names */
  char *hostname;
  char *subdomain;
  nl_tristate_t set_hostname_as_fqdn; /* the FQDN as the kernel's hostname */
  char *hostname_override; /* spec.hostnameOverride (HostnameOverride, beta in 1.36) */
  char *scheduler_name; /* defaulted to default-scheduler */
  nl_toleration_t *tolerations;
  size_t n_tolerations;
  nl_host_alias_t *host_aliases;
  size_t n_host_aliases;
  char *priority_class_name;
  nl_opt_i32_t priority;
  nl_dns_config_t *dns_config;
  nl_strlist_t readiness_gates; /* the conditionType of each readinessGates entry */
  char *runtime_class_name;
  nl_tristate_t enable_service_links; /* defaulted to true */
  nl_resource_list_t overhead;
  /* spec.resources (PodLevelResources): the pod's own requests and limits of
   * cpu, memory and hugepages-*, bounding its containers together; NULL when
   * absent. agent/model/podres.h reads them. */
  nl_resource_requirements_t *resources;
  /* Of affinity, what a node checks at admission: the required node affinity
   * (preferred terms and pod (anti-)affinity are the scheduler's and dropped). */
  nl_node_selector_t *required_node_affinity;
  char *os_name; /* spec.os.name; NULL when unset */
  /* spec.resourceClaims: the DRA claims the pod's containers may use */
  nl_pod_resource_claim_t *resource_claims;
  size_t n_resource_claims;
} nl_pod_spec_t;

/* ---- status, as the API server has it ---- */

/* The pod's status as last written to the API (by this node's status manager or
 * anyone else): what a status manager compares against. The status nanolet
 * computes itself is managers/status.h's nl_pod_status_t. Times are RFC 3339 text
 * as received. */
typedef struct nl_api_state_waiting {
  char *reason;
  char *message;
} nl_api_state_waiting_t;

typedef struct nl_api_state_running {
  char *started_at;
} nl_api_state_running_t;

typedef struct nl_api_state_terminated {
  int32_t exit_code;
  int32_t signal;
  char *reason;
  char *message;
  char *started_at;
  char *finished_at;
  char *container_id;
} nl_api_state_terminated_t;

typedef struct nl_api_container_state { /* at most one is set */
  nl_api_state_waiting_t *waiting;
  nl_api_state_running_t *running;
  nl_api_state_terminated_t *terminated;
} nl_api_container_state_t;

typedef struct nl_api_container_status {
  char *name;
  nl_api_container_state_t state;
  nl_api_container_state_t last_state;
  bool ready;
  int32_t restart_count;
  char *image;
  char *image_id;
  char *container_id;
  nl_tristate_t started;
} nl_api_container_status_t;

typedef struct nl_api_condition {
  char *type;
  char *status; /* "True", "False", "Unknown" */
  char *reason;
  char *message;
  char *last_probe_time;
  char *last_transition_time;
} nl_api_condition_t;

typedef struct nl_api_pod_status {
  char *phase; /* "Pending", "Running", "Succeeded", "Failed", "Unknown"; NULL when unset */
  nl_api_condition_t *conditions;
  size_t n_conditions;
  char *message;
  char *reason;
  char *nominated_node_name;
  char *host_ip;
  nl_strlist_t host_ips; /* the "ip" of each hostIPs entry */
  char *pod_ip;
  nl_strlist_t pod_ips;  /* the "ip" of each podIPs entry */
  char *start_time;
  nl_api_container_status_t *init_container_statuses;
  size_t n_init_container_statuses;
  nl_api_container_status_t *container_statuses;
  size_t n_container_statuses;
  char *qos_class;
  /* status.resourceClaimStatuses: the claim generated for each of the pod's
   * claims made from a template (resource_claim_name NULL: none needed) */
  struct nl_pod_claim_status {
    char *name;
    char *resource_claim_name;
  } *resource_claim_statuses;
  size_t n_resource_claim_statuses;
  /* status.extendedResourceClaimStatus: the claim the scheduler made for the
   * containers' extended resources backed by DRA, and which of its requests
   * serves which container's resource (NULL: none) */
  struct nl_pod_ext_claim_status {
    char *resource_claim_name;
    struct nl_pod_ext_mapping {
      char *container_name, *resource_name, *request_name;
    } *request_mappings;
    size_t n_request_mappings;
  } *extended_resource_claim_status;
} nl_api_pod_status_t;

struct nl_arena; /* private */

typedef struct nl_pod {
  char *api_version; /* "v1" */
  char *kind;        /* "Pod" */
  nl_object_meta_t metadata;
  nl_pod_spec_t spec;
  nl_api_pod_status_t *status; /* NULL when the source gave none (manifests) */
  struct nl_arena *arena;      /* owns everything above */
} nl_pod_t;

/* Upstream annotation keys (kubetypes.Config*AnnotationKey). */
#define NL_ANNOTATION_CONFIG_SOURCE "kubernetes.io/config.source"
#define NL_ANNOTATION_CONFIG_HASH "kubernetes.io/config.hash"
#define NL_ANNOTATION_CONFIG_SEEN "kubernetes.io/config.seen"
#define NL_ANNOTATION_CONFIG_MIRROR "kubernetes.io/config.mirror"

/* ---- decoding ---- */

/* Decodes one v1 Pod from YAML or JSON (JSON when the first non-blank byte is
 * '{'; YAML otherwise, first document only, as upstream). `origin` (a file name
 * or URL, may be NULL) prefixes every error. Unknown fields are ignored, in
 * manifests and API objects alike (managedFields, ephemeralContainers, ...).
 * Returns 0 and a new pod in *out (caller frees with nl_pod_free), or -1 with *err
 * (NL_EINVAL) holding one line per problem, each
 * `<origin>: <field.path>: <message>`. No defaults are applied. */
int nl_pod_decode(const char *data, size_t len, const char *origin, nl_pod_t **out,
                  nl_err_t **err);

/* As nl_pod_decode, but also accepts a v1 List or PodList (upstream's URL source:
 * tryDecodePodList). Returns 0 with *pods (an array of *n new pods; free each with
 * nl_pod_free and the array with free()), or -1 with *err. */
int nl_pod_decode_list(const char *data, size_t len, const char *origin, nl_pod_t ***pods,
                       size_t *n, nl_err_t **err);

/* One pod object as the API server sends it (a watch event's object or a list
 * item: JSON, kind and apiVersion may be absent). Errors are prefixed with
 * `pod <namespace>/<name>` read from the object. Returns 0 and a new pod, or -1
 * with *err (no pod). No defaults are applied. */
int nl_pod_decode_api(const char *data, size_t len, nl_pod_t **out, nl_err_t **err);

/* Drops one reference to the pod; the last one frees it. NULL is fine. */
void nl_pod_free(nl_pod_t *pod);

/* Another reference to the same pod (returned, so that a holder can keep it in
 * an `nl_pod_t *`), dropped with nl_pod_free(). A decoded pod may be changed
 * (defaults, static naming, annotations) only while it has one holder; once
 * shared it is immutable, and every layer holds the one version by reference
 * instead of copying it (docs/ARCHITECTURE.md: decoded objects are shared). */
nl_pod_t *nl_pod_ref(const nl_pod_t *pod);

/* ---- defaulting and validation ---- */

/* Applies upstream's v1 defaults (SetDefaults_Pod, _PodSpec, _Container, _Probe,
 * volume sources, ...): restartPolicy Always, dnsPolicy ClusterFirst,
 * terminationGracePeriodSeconds 30, imagePullPolicy from the tag, protocol TCP,
 * terminationMessagePath/Policy, probe timings, hostPort = containerPort under
 * hostNetwork, ... Idempotent. Does not touch name, namespace or uid. */
void nl_pod_set_defaults(nl_pod_t *pod);

/* Upstream's ValidatePod rules that matter for a node (see docs/MODEL.md).
 * Returns 0, or -1 with *err (NL_EINVAL) listing every problem, one per line,
 * `<origin>: <field.path>: <message>`. */
int nl_pod_validate(const nl_pod_t *pod, const char *origin, nl_err_t **err);
/* RFC 1123 names as apimachinery's IsDNS1123Label (lowercase alphanumerics and
 * '-', at most 63) and IsDNS1123Subdomain (such labels joined by '.', at most
 * 253). */
bool nl_is_dns1123_label(const char *s);
bool nl_is_dns1123_subdomain(const char *s);

/* ---- static pods (upstream pkg/kubelet/config/common.go applyDefaults) ---- */

typedef struct nl_static_source {
  const char *kind;      /* "file" or "http": the config.source annotation */
  const char *location;  /* the file path or the URL */
  const char *node_name; /* lowercased; nl_node_name_default() when NULL */
} nl_static_source_t;

/* For a decoded and defaulted pod: sets a uid when the manifest has none
 * (nl_pod_static_uid), appends "-<node>" to the name, defaults the namespace to
 * "default", sets spec.nodeName, the config.hash (= uid) and config.source
 * annotations, and, for files, a toleration {operator: Exists, effect: NoExecute}.
 * config.seen is the merger's (nl_pod_set_annotation). */
void nl_pod_apply_static(nl_pod_t *pod, const nl_static_source_t *src);

/* The whole static-pod path in one: decode, default, apply_static, validate.
 * Returns 0 with a new pod, or -1 with *err (no pod). */
int nl_pod_load_static(const char *data, size_t len, const nl_static_source_t *src,
                       nl_pod_t **out, nl_err_t **err);

/* "<name>-<lowercased node>" into a new string the caller frees. */
char *nl_pod_static_name(const char *name, const char *node_name);

/* 32 hex digits + NUL: md5 over the pod's canonical encoding (so comments and
 * formatting do not matter, any field does), then "host:<node>" and, for files,
 * "file:<location>" (else "url:<location>"), like upstream. */
void nl_pod_static_uid(const nl_pod_t *pod, const nl_static_source_t *src, char out[33]);

/* The default node name: the lowercased hostname, in a new string. */
char *nl_node_name_default(void);

/* ---- mutation, lookup ---- */

/* Sets (adds or replaces) an annotation; key and value are copied. */
void nl_pod_set_annotation(nl_pod_t *pod, const char *key, const char *value);
/* The value, or NULL. */
const char *nl_kvlist_get(const nl_kvlist_t *l, const char *key);
/* True for a mirror pod (the kubernetes.io/config.mirror annotation): an API
 * object that stands for a static pod and is never run (kubetypes.IsMirrorPod). */
bool nl_pod_is_mirror(const nl_pod_t *pod);
/* The quantity for a resource name, or NULL. */
const nl_quantity_t *nl_resource_list_get(const nl_resource_list_t *l, const char *name);
/* A deep copy with its own arena, one holder (caller frees with nl_pod_free): for
 * a pod to change; a holder that only reads takes nl_pod_ref. */
nl_pod_t *nl_pod_dup(const nl_pod_t *pod);

/* ---- encoding and hashing ---- */

enum {
  NL_POD_JSON_PRETTY = 1, /* two-space indent, as kubectl -o json */
  NL_POD_JSON_STATUS = 2, /* also pod->status (the API's); without it, no status */
  NL_POD_JSON_FULL = 4,   /* also empty strings, false and zero (everything set): decoding
                           * the output gives back the same pod (checkpoints) */
};

/* Appends the pod as v1 JSON (upstream field order, empty fields omitted) to out.
 * The API's status is left out unless NL_POD_JSON_STATUS: the kubelet reports
 * its own (managers/status.h). */
void nl_pod_encode_json(const nl_pod_t *pod, nl_buf_t *out, int flags);
/* One container, the same way. */
void nl_container_encode_json(const nl_container_t *c, nl_buf_t *out);

/* FNV-32a over the canonical JSON encoding: stable across runs and builds; equal
 * for equal pods. Not byte-compatible with Go's DeepHashObject (docs/MODEL.md). */
uint32_t nl_pod_hash(const nl_pod_t *pod);
/* Upstream's HashContainer role: changes when the container spec changes,
 * except its resources and resizePolicy, which change in place (an in-place
 * resize restarts nothing unless a resizePolicy asks). */
uint32_t nl_container_hash(const nl_container_t *c);
/* The hash of the whole container, resources included: what nanolet labelled
 * containers with before in-place resize, still accepted for containers
 * created then, so that an upgrade restarts nothing. */
uint32_t nl_container_hash_legacy(const nl_container_t *c);
/* The container's resources are replaced by a copy of r (allocated in the
 * pod's arena); the pod must have one holder (nl_pod_dup's). */
void nl_pod_set_container_resources(nl_pod_t *pod, nl_container_t *c,
                                    const nl_resource_requirements_t *r);
/* The same for the pod-level spec.resources (created when absent). */
void nl_pod_set_pod_resources(nl_pod_t *pod, const nl_resource_requirements_t *r);

/* ---- recursive read-only mounts (mounts.c; upstream resolveRecursiveReadOnly) ---- */

/* Whether the mount is to be recursively read-only, given whether the runtime
 * handler supports it: unset or Disabled: no; IfPossible: when supported;
 * Enabled: yes, or -1 with *err (upstream's text, `volume "mnt" requested
 * recursive read-only mode, but it is not supported by the runtime`). A mount
 * that validation lets through never fails otherwise (read-write, a
 * propagation other than None, an unknown mode: -1 as upstream's). */
int nl_volume_mount_rro(const nl_volume_mount_t *m, bool runtime_supports, bool *rro,
                        nl_err_t **err);

/* ---- restarts (restart.c; upstream podutil, ContainerRestartRules on) ---- */

/* The first of c's restartPolicyRules that exit_code matches, or NULL. */
const nl_restart_rule_t *nl_container_restart_rule(const nl_container_t *c, int32_t exit_code);
/* ContainerShouldRestart: whether c, exited with exit_code, is started again
 * (its matching rule, else its restartPolicy, else the pod's). */
bool nl_container_should_restart(const nl_pod_spec_t *spec, const nl_container_t *c,
                                 int32_t exit_code);
/* Whether c's exit with exit_code restarts the whole pod in place (its
 * matching rule's action is RestartAllContainers). */
bool nl_container_restarts_all(const nl_container_t *c, int32_t exit_code);
/* IsContainerRestartable: whether c may ever be started again. */
bool nl_container_restartable(const nl_pod_spec_t *spec, const nl_container_t *c);
/* Whether c's effective policy is OnFailure (a container that succeeded
 * stays done even when its sandbox is re-created). */
bool nl_container_on_failure_only(const nl_pod_spec_t *spec, const nl_container_t *c);
/* Whether c, killed while running (probe failure), is started again: its
 * policy alone, since there is no exit code for the rules to see. */
bool nl_container_restarts_when_killed(const nl_pod_spec_t *spec, const nl_container_t *c);
/* Whether any init or regular container has a RestartAllContainers rule. */
bool nl_pod_has_restart_all_rule(const nl_pod_spec_t *spec);

#endif
