/* The CRI-facing half of the kubelet (upstream kuberuntime): SyncPod, KillPod and
 * the pure pieces they are made of (computePodActions, the PodSandboxConfig and
 * ContainerConfig generators, environment and $(VAR) expansion).
 *
 * Ownership in one place:
 *  - pods and statuses passed in are borrowed for the duration of the call only;
 *    an operation deep-copies what it keeps.
 *  - results handed to a callback are borrowed until the callback returns.
 *  - generated CRI messages are owned by the caller and freed with
 *    protobuf_c_message_free_unpacked(&msg->base, NULL).
 *
 * Every nl_runtime_* operation completes through its callback exactly once and
 * never from inside the call that started it, unless cancelled with
 * nl_runtime_cancel() first (then the callback is never called). */
#ifndef NL_RUNTIME_H
#define NL_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "agent/model/pod.h"
#include "agent/model/podres.h"
#include "cri/conn.h"
#include "cri/deviceplugin.pb-c.h"
#include "managers/cgroups.h"
#include "managers/images.h"
#include "managers/objects.h"
#include "managers/resize.h"
#include "managers/tokens.h"
#include "managers/runtime_types.h"
#include "reactor/backoff.h"
#include "reactor/error.h"
#include "reactor/list.h"

/* Upstream defaults (kuberuntime and kubelet constants). */
#define NL_RUNTIME_BACKOFF_INITIAL_MS (10 * 1000)  /* crash-loop: 10 s ... */
#define NL_RUNTIME_BACKOFF_MAX_MS (5 * 60 * 1000)  /* ... doubling to 5 min */
#define NL_RUNTIME_MIN_GRACE_SECONDS 2             /* minimumGracePeriodInSeconds */

struct nl_env; /* below */

/* Node allocatable: cpu in millicores, memory and ephemeral-storage in bytes;
 * -1: unknown. */
typedef struct nl_runtime_allocatable {
  int64_t cpu_milli, memory, ephemeral_storage;
} nl_runtime_allocatable_t;

typedef struct nl_runtime_opts {
  const char *node_name;
  const char *root_dir;     /* /var/lib/kubelet: pods at <root>/pods/<uid> */
  const char *pod_logs_dir; /* /var/log/pods */
  char **cluster_dns;       /* clusterDNS IPs */
  size_t n_cluster_dns;
  const char *cluster_domain; /* "" or NULL: none */
  const char *resolv_conf;    /* /etc/resolv.conf; "" : no host DNS (upstream) */
  const char *hosts_file;     /* the node's hosts file for host-network pods; NULL: /etc/hosts */
  bool serialize_image_pulls;
  int max_parallel_image_pulls; /* 0: unlimited (only when not serialized) */
  /* maximum-dead-containers-per-container: dead instances a sync keeps per
   * container (the container GC's rule; <0 no limit). Set 1 for upstream's. */
  int max_dead_per_container;
  uint64_t runtime_request_timeout_ms; /* informational: the CRI client applies it */
  const char *node_ip;        /* status.hostIP for env; NULL: none */
  /* For resourceFieldRef defaults and the Burstable oom_score_adj; 0: read from
   * sysconf at init. */
  int64_t node_cpu_milli;
  int64_t node_memory_bytes;
  bool cpu_cfs_quota;          /* cpuCFSQuota; true upstream (set by init when
                                * cpu_cfs_quota_set is false) */
  bool cpu_cfs_quota_set;
  /* seccompDefault: RuntimeDefault for a container whose security context
   * and pod's name no seccomp profile (false: Unconfined, upstream's default) */
  bool seccomp_default;
  /* A pod's runtime handler from its spec.runtimeClassName (upstream's
   * RuntimeClass manager, managers/runtimeclass.h: nl_runtimeclasses_lookup):
   * 0 with *handler, or -1 with *err (a class not found), which fails the
   * sandbox's creation. NULL: no manager (standalone, as upstream): every pod
   * gets the default handler "". */
  int (*runtime_class)(void *ctx, const char *class_name, const char **handler, nl_err_t **err);
  void *runtime_class_ctx;
  /* The pod cgroups: the sandbox's cgroup parent, made before the sandbox and
   * removed with the pod's directories. NULL: the runtime's default parent.
   * Must outlive the runtime manager's stop. */
  const nl_cgroups_t *cgroups;
  /* In-place resize (managers/resize.h): the actuated resources read and
   * recorded. NULL: no in-place resize (a changed allocation is left alone). */
  nl_resize_t *resize;
  /* The image credential provider plugins (managers/credprov.h); NULL: none.
   * Closed before the runtime manager stops. */
  nl_credprov_t *credprov;
  /* Back-off overrides for tests (0: the upstream 10 s / 5 min). */
  uint64_t backoff_initial_ms, backoff_max_ms;
  uint64_t image_backoff_initial_ms, image_backoff_max_ms;
  /* The service environment variables of a pod (upstream getServiceEnvVarMap,
   * managers/services.h): 0 with a new array (freed with nl_env_free), or -1
   * with *err, which fails the container's config. NULL: none. */
  int (*service_env)(void *ctx, const nl_pod_t *pod, struct nl_env **out, size_t *n,
                     nl_err_t **err);
  void *service_env_ctx;
  /* ConfigMaps and Secrets (managers/objects.h) for valueFrom, envFrom, the
   * configMap, secret and projected volumes, and the image pull secrets; fn
   * NULL: none (standalone): a pod that needs one fails its config or its
   * volumes, while a missing pull secret is skipped. */
  nl_objects_lookup_t objects;
  /* Tokens of serviceAccountToken projections (managers/tokens.h); ensure NULL:
   * none (no API server). */
  nl_tokens_source_t tokens;
  /* Where the pod and container events go (Pulling, Created, Started, Killing,
   * BackOff, ...); fn NULL: they are logged at -v=3 only. */
  nl_event_sink_t events;
  /* The Node's status.allocatable, which the resourceFieldRef of an unset limit
   * reads (upstream defaultPodLimitsForDownwardAPI): the callback sets what the
   * Node says and leaves -1 elsewhere. NULL, or cpu and memory unknown:
   * node_cpu_milli and node_memory_bytes. */
  void (*allocatable)(void *ctx, struct nl_runtime_allocatable *out);
  void *allocatable_ctx;
  /* The device plugins' answers for a container (managers/devices.h,
   * nl_devices_container): returns false when the container has no devices;
   * else calls done once (maybe before it returns) with the answers, valid
   * during done, or with err, which fails the container's config
   * (CreateContainerConfigError): it never starts without its devices. NULL:
   * no device manager. */
  bool (*devices)(void *ctx, const nl_pod_t *pod, const nl_container_t *c,
                  void (*done)(void *arg, V1beta1__ContainerAllocateResponse *const *resps,
                               size_t n, const char *err),
                  void *arg);
  void *devices_ctx;
  /* Dynamic Resource Allocation (managers/dra.h, nl_dra_prepare): before a
   * sandbox is made, the pod's claims are prepared; returns false when the pod
   * has none, else calls done once (maybe before it returns) with err NULL or
   * why the pod cannot start (event FailedPrepareDynamicResources; the sync
   * fails and is retried). NULL: no DRA manager. */
  bool (*dra_prepare)(void *ctx, const nl_pod_t *pod, void (*done)(void *arg, const char *err),
                      void *arg);
  void *dra_ctx;
  /* A sandbox this sync made is up with its network (upstream's
   * OnPodSandboxReady, called before the images are pulled): the pod's
   * PodReadyToStartContainers can be True at once, not at the sync's end.
   * NULL: nothing is told. */
  void (*sandbox_ready)(void *ctx, const nl_pod_t *pod);
  void *sandbox_ready_ctx;
  /* Whether the runtime handler (the pod's, nl_runtime_pod_handler) supports
   * recursive read-only mounts, as the runtime's Status last said (upstream's
   * runtimeState.runtimeHandlers): a mount's recursiveReadOnly resolves
   * against it (nl_volume_mount_rro). NULL: not supported. */
  bool (*supports_rro)(void *ctx, const char *handler);
  void *supports_rro_ctx;
  /* Pod user namespaces (managers/userns.h), the agent's: a pod with
   * `hostUsers: false` gets its slot there before its sandbox. NULL: none, and
   * such a pod is refused. */
  struct nl_userns *userns;
  /* Whether the runtime handler supports user namespaces, as the runtime's
   * Status last said (upstream HandlerSupportsUserNamespaces): 1 yes, 0 no
   * (or the runtime lists no handlers: containerd 1.6), -1 a handler the
   * runtime does not list, -2 not known yet (no Status has answered since
   * the start: upstream syncs no pod before). NULL: not supported. */
  int (*supports_userns)(void *ctx, const char *handler);
  void *supports_userns_ctx;
} nl_runtime_opts_t;

/* ---- probe results (liveness/startup) as computePodActions reads them ---- */

typedef enum {
  NL_PROBE_RESULT_NONE = 0, /* not found: the probe has not run (or no probe) */
  NL_PROBE_RESULT_SUCCESS,
  NL_PROBE_RESULT_FAILURE,
} nl_probe_result_t;

typedef enum { NL_PROBE_LIVENESS, NL_PROBE_STARTUP } nl_probe_kind_t;

/* Looks up the latest result of a probe for a container id. */
typedef nl_probe_result_t (*nl_runtime_probe_fn)(void *ctx, const char *container_id,
                                                 nl_probe_kind_t kind);

/* ---- sync results (upstream PodSyncResult) ---- */

typedef enum {
  NL_SYNC_START_CONTAINER,
  NL_SYNC_KILL_CONTAINER,
  NL_SYNC_INIT_CONTAINER, /* an init container was started (upstream: InitContainer) */
  NL_SYNC_CREATE_POD_SANDBOX,
  NL_SYNC_CONFIG_POD_SANDBOX,
  NL_SYNC_KILL_POD_SANDBOX,
  NL_SYNC_REMOVE_CONTAINER,
  NL_SYNC_REMOVE_POD_SANDBOX,
  NL_SYNC_RESIZE_POD, /* upstream ResizePodInPlace: the pod's in-place resize */
} nl_sync_action_t;

const char *nl_sync_action_name(nl_sync_action_t a); /* "StartContainer", ... */

/* Reasons (upstream kubecontainer and images error names). */
#define NL_REASON_CRASH_LOOP_BACK_OFF "CrashLoopBackOff"
#define NL_REASON_CREATE_CONTAINER_CONFIG "CreateContainerConfigError"
#define NL_REASON_CREATE_CONTAINER "CreateContainerError"
#define NL_REASON_RUN_CONTAINER "RunContainerError"
#define NL_REASON_KILL_CONTAINER "KillContainerError"
#define NL_REASON_CREATE_POD_SANDBOX "CreatePodSandboxError"
#define NL_REASON_CONFIG_POD_SANDBOX "ConfigPodSandboxError"
#define NL_REASON_KILL_POD_SANDBOX "KillPodSandboxError"
#define NL_REASON_REMOVE_CONTAINER "RemoveContainerError"
#define NL_REASON_RESIZE_POD "ResizePodInPlaceError"
#define NL_REASON_PREPARE_VOLUMES "VolumeSetupError" /* nanolet: volumes failed */

typedef struct nl_sync_step {
  nl_sync_action_t action;
  char *target;  /* the container name, or "<name>_<namespace>(<uid>)" for sandboxes */
  bool init;     /* target is an init container */
  char *reason;  /* NULL on success, else a NL_REASON_* / NL_IMAGE_ERR_* name */
  char *message; /* NULL on success */
} nl_sync_step_t;

typedef struct nl_sync_result {
  nl_sync_step_t *steps;
  size_t n_steps;
  nl_err_t *err; /* the first failure (or a sync-wide one); NULL when all went well */
  bool cancelled;
  /* The earliest end of a container's crash-loop back-off that kept it from
   * starting (wall clock, ms), 0 when none did: the pod's next sync is due
   * then (upstream's MinBackoffExpiration). */
  uint64_t backoff_until_ms;
} nl_sync_result_t;

/* The failed step for a container (the reason the status shows as waiting), or
 * NULL. */
const nl_sync_step_t *nl_sync_result_find(const nl_sync_result_t *r, const char *container);
/* A deep copy (for the status generator's reason cache); free with
 * nl_sync_result_free. */
nl_sync_result_t *nl_sync_result_dup(const nl_sync_result_t *r);
void nl_sync_result_free(nl_sync_result_t *r);

typedef void (*nl_runtime_sync_cb)(const nl_sync_result_t *res, void *ctx);

/* ---- the manager ---- */

typedef struct nl_runtime nl_runtime_t;
typedef struct nl_runtime_op nl_runtime_op_t;
typedef void (*nl_runtime_stop_cb)(nl_runtime_t *rt);
typedef void (*nl_runtime_stopping_fn)(void *ctx, const char *container_id);

struct nl_runtime {
  uv_loop_t *loop;
  nl_cri_client_t *cri; /* borrowed: the agent owns it and stops it after us */
  nl_runtime_opts_t opts; /* strings owned (copied at init) */
  nl_images_t images;
  nl_backoff_table_t backoff; /* crash-loop, keyed as upstream getStableKey */
  nl_runtime_probe_fn probe;
  void *probe_ctx;
  nl_runtime_stopping_fn stop_listener;
  void *stop_listener_ctx;
  /* Wall-clock milliseconds (CRI times are wall clock); tests inject their own. */
  uint64_t (*now_ms)(void *ctx);
  void *now_ctx;
  nl_list_t ops; /* operations in flight */
  char *runtime_name, *runtime_version; /* the runtime's Version answer; NULL: not yet */
  bool stopping;
  nl_runtime_stop_cb stop_cb;
};

/* Initializes rt (embedded by the caller); copies opts. Returns 0, or -1 with
 * *err (NL_EINVAL) when root_dir or pod_logs_dir is missing. */
int nl_runtime_init(nl_runtime_t *rt, uv_loop_t *loop, nl_cri_client_t *cri,
                    const nl_runtime_opts_t *opts, nl_err_t **err);
/* Sets the source of liveness/startup results (may be NULL: none). */
void nl_runtime_set_probe_source(nl_runtime_t *rt, nl_runtime_probe_fn fn, void *ctx);
/* The runtime's name and version (its Version answer), for what depends on
 * them (image volumes). Copied. */
void nl_runtime_set_version(nl_runtime_t *rt, const char *name, const char *version);
/* fn (may be NULL) hears of each container rt asks the runtime to stop, before
 * the call (the PLEG's nl_pleg_stopping). */
void nl_runtime_set_stop_listener(nl_runtime_t *rt, nl_runtime_stopping_fn fn, void *ctx);
/* Cancels every operation in flight (their callbacks run with res->cancelled and
 * err NL_ECLOSED), waits for their outstanding CRI calls and fs jobs, frees what
 * rt owns, then calls done_cb (may be NULL). */
void nl_runtime_stop(nl_runtime_t *rt, nl_runtime_stop_cb done_cb);

/* SyncPod: computePodActions on (pod, status) and the steps (kill sandbox if
 * changed, kill containers not to keep, prepare volumes, create the sandbox, pull
 * images, init containers one by one, containers). status may be NULL (nothing in
 * the runtime yet). Both are borrowed for the call only. Returns a handle for
 * nl_runtime_cancel(), valid until the callback runs or the cancel returns. */
nl_runtime_op_t *nl_runtime_sync_pod(nl_runtime_t *rt, const nl_pod_t *pod,
                                     const nl_rt_pod_status_t *status,
                                     nl_runtime_sync_cb cb, void *ctx);

/* The in-place restart of all of pod's containers (upstream's
 * RestartAllContainers action; runtime_reset.c): removes every instance of its
 * init and regular containers, stopping without grace those not exited, and
 * keeps the sandbox and the logs; one NL_SYNC_REMOVE_CONTAINER step each. The
 * next sync starts the pod again. status may be NULL (nothing to remove). */
nl_runtime_op_t *nl_runtime_reset_pod(nl_runtime_t *rt, const nl_pod_t *pod,
                                      const nl_rt_pod_status_t *status, nl_runtime_sync_cb cb,
                                      void *ctx);

/* KillPod: stops every running container (StopContainer with the grace period;
 * preStop hooks are not run yet) in parallel, then StopPodSandbox on every
 * sandbox. pod may be NULL for a pod no source knows (then the grace period is
 * read from the container's io.kubernetes.pod.terminationGracePeriod annotation
 * via ContainerStatus). grace_seconds -1: from the pod; else the override. */
nl_runtime_op_t *nl_runtime_kill_pod(nl_runtime_t *rt, const nl_pod_t *pod,
                                     const nl_rt_pod_status_t *status, int64_t grace_seconds,
                                     nl_runtime_sync_cb cb, void *ctx);

/* Removal after termination (housekeeping): RemoveContainer on every container,
 * RemovePodSandbox on every sandbox, then the pod's volumes are torn down and
 * <root>/pods/<uid> removed (when remove_dirs). Containers should be stopped
 * first (nl_runtime_kill_pod). */
nl_runtime_op_t *nl_runtime_remove_pod(nl_runtime_t *rt, const nl_rt_pod_status_t *status,
                                       bool remove_dirs, nl_runtime_sync_cb cb, void *ctx);

/* Abandons op: its callback will not be called, and no memory of the caller's is
 * touched afterwards. Outstanding CRI calls finish in the background (their
 * results are dropped). op must be a handle whose callback has not run. */
void nl_runtime_cancel(nl_runtime_op_t *op);

/* ---- pure pieces (no I/O), unit-tested ---- */

/* upstream podActions. Indexes refer to pod->spec.{init_,}containers. Strings are
 * owned by the struct; spec pointers borrow from the pod passed in. */
typedef struct nl_kill_info {
  char *id;
  char *name;
  const nl_container_t *spec;
  bool init;
  char *message;
  const char *reason; /* "" , "LivenessProbe", "StartupProbe", "Unknown" */
} nl_kill_info_t;

/* A running container whose cpu or memory changes in place (upstream
 * containerToUpdateInfo): want is the allocation, cur what it runs with;
 * cpu_dir and mem_dir say whether each grows (1), shrinks (-1) or stays (0),
 * by its limit when the limit changes, else by its request. */
typedef struct nl_resize_update {
  char *id;   /* CRI container id, owned */
  const nl_container_t *spec;
  nl_rsz_res_t want, cur;
  int cpu_dir, mem_dir;
} nl_resize_update_t;

typedef struct nl_pod_actions {
  bool kill_pod;
  bool create_sandbox;
  char *sandbox_id; /* the sandbox to use (or the changed one); NULL: none */
  uint32_t attempt;
  size_t *init_to_start;
  size_t n_init_to_start;
  /* the running init containers computeInitContainerActions keeps as they are,
   * whose resources computePodResizeAction looks at: sidecars, and, while the
   * pod initializes, the init container that runs */
  size_t *init_to_resize;
  size_t n_init_to_resize;
  size_t *to_start;
  size_t n_to_start;
  size_t *ephemeral_to_start; /* never started yet: started once, never again */
  size_t n_ephemeral_to_start;
  nl_kill_info_t *to_kill;
  size_t n_to_kill;
  /* in-place resize (runtime_resize.c): containers updated in place, and
   * whether some container's resources change at all (in place or by the
   * restart its resizePolicy asks for): the pod cgroup follows then. */
  nl_resize_update_t *to_update;
  size_t n_to_update;
  bool resize;
  bool resize_pod_level; /* the pod-level resources change (recorded once actuated) */
  bool initialized; /* the pod has initialized: its regular containers were looked at */
} nl_pod_actions_t;

/* computePodActions as upstream with SidecarContainers on (restartable init
 * containers). status may be NULL. probe may be NULL (no results). */
void nl_runtime_compute_actions(const nl_pod_t *pod, const nl_rt_pod_status_t *status,
                                nl_runtime_probe_fn probe, void *probe_ctx,
                                nl_pod_actions_t *out);
void nl_pod_actions_free(nl_pod_actions_t *a);

/* upstream computePodResizeAction over the running containers computePodActions
 * keeps (the init container that runs while the pod initializes, the sidecars
 * once their startup and liveness probes allow, the regular containers once
 * the pod has initialized): a container whose allocated cpu or memory
 * (pod is the pod as allocated) differs from what it was actuated with is
 * updated in place, or killed and started again (once) when the resizePolicy
 * of a changed resource says RestartContainer. A container with nothing
 * actuated on record is taken to run with its allocation. A container without
 * limits of its own runs with the pod-level ones: a change of those resizes it
 * too. A change of the pod-level resources alone resizes the pod cgroup. rs
 * NULL: nothing. */
void nl_runtime_resize_actions(const nl_pod_t *pod, const nl_rt_pod_status_t *status,
                               const nl_resize_t *rs, nl_pod_actions_t *a);

/* One step of upstream's doPodResizeAction, in its order: the pod cgroup grows
 * before the containers and shrinks after them, memory first, then cpu (the
 * quota before the shares when growing, after them when shrinking); within a
 * resource the containers that shrink go before those that grow. */
typedef struct nl_resize_step {
  bool pod;            /* the pod cgroup; else a container */
  nl_cgroup_res_t res; /* pod: the values to write (0: leave alone) */
  size_t update;       /* container: the index in to_update */
  bool memory;         /* container: its memory (else its cpu) */
} nl_resize_step_t;

/* The steps for a's resize, from the pod cgroup's current values (cur) to the
 * allocation's (want); both NULL: no pod cgroup (containers only). A new
 * array (free it); *n set. */
nl_resize_step_t *nl_runtime_resize_steps(const nl_pod_actions_t *a, const nl_cgroup_res_t *cur,
                                          const nl_cgroup_res_t *want, size_t *n);

/* kubecontainer.ShouldContainerBeRestarted. */
bool nl_runtime_should_restart(const nl_container_t *c, const nl_pod_t *pod,
                               const nl_rt_pod_status_t *status);

/* The host's resolver configuration (upstream getHostDNSConfig). */
typedef struct nl_host_dns {
  char **servers;
  size_t n_servers;
  char **searches;
  size_t n_searches;
  char **options;
  size_t n_options;
} nl_host_dns_t;

/* Parses resolv.conf text: nameserver, search (the last line wins, trailing dots
 * dropped, "." skipped) and options lines. Never fails. */
void nl_runtime_parse_resolv_conf(const char *data, size_t len, nl_host_dns_t *out);
void nl_host_dns_free(nl_host_dns_t *d);

/* GetPodDNS: the DNSConfig for a pod from dnsPolicy, dnsConfig and the node's
 * clusterDNS/clusterDomain/resolvConf (host may be NULL: empty). Returns a new
 * message. */
Runtime__V1__DNSConfig *nl_runtime_pod_dns(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                                          const nl_host_dns_t *host);

/* GeneratePodHostNameAndDomain: the hostname (spec.hostname or the pod name,
 * truncated to 63 characters) in a new string, and the domain in *domain (new
 * string or NULL). Returns NULL with *err for an invalid spec.hostname. */
char *nl_runtime_pod_hostname(const nl_runtime_opts_t *opts, const nl_pod_t *pod, char **domain,
                              nl_err_t **err);

/* generatePodSandboxConfig. Returns 0 and a new config in *out, or -1 with *err. */
int nl_runtime_build_sandbox_config(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                                    uint32_t attempt, const nl_host_dns_t *host_dns,
                                    Runtime__V1__PodSandboxConfig **out, nl_err_t **err);

/* A pulled image volume: the volume's name, the runtime's image id and the
 * reference the pod names (upstream getImageVolumes' ImageSpec). */
typedef struct nl_image_volume_ref {
  const char *name;
  const char *image_ref;
  const char *reference;
} nl_image_volume_ref_t;

/* Why runtime (a Version answer: "containerd", "1.6.20") cannot mount image
 * volumes, as a new string, or NULL when it can or is not known not to:
 * containerd before 2.1 and CRI-O before 1.31 ignore the CRI Mount's image
 * field. */
char *nl_runtime_image_volumes_unsupported(const char *runtime_name, const char *runtime_version);

/* What generateContainerConfig needs besides the pod. */
typedef struct nl_container_input {
  const nl_container_t *container;
  int32_t restart_count;
  const char *image_ref;     /* the image id from the image manager */
  const char *pod_ip;        /* may be NULL */
  char *const *pod_ips;
  size_t n_pod_ips;
  const char *termination_message_host_path; /* the file to mount; NULL: none */
  const char *etc_hosts_host_path; /* the pod's managed hosts file; NULL: none */
  const char *target_id; /* an ephemeral container's target: the running container
                          * whose process namespace it joins; NULL: none */
  /* The device plugins' Allocate answers: their envs, mounts, devices,
   * annotations and CDI devices go first (upstream's GetResources), the
   * container's own after them. */
  V1beta1__ContainerAllocateResponse *const *devices;
  size_t n_devices;
  /* The pod's image volumes the container mounts, pulled (upstream's
   * ImageVolumes): mounted through the CRI Mount's image field. */
  const nl_image_volume_ref_t *image_volumes;
  size_t n_image_volumes;
  /* The values of its env[].valueFrom.fileKeyRef, read from their files
   * (EnvFiles): one per variable found; a variable not listed is not set. */
  const struct nl_env *file_env;
  size_t n_file_env;
} nl_container_input_t;

/* The runtime handler of pod's RuntimeClass (opts->runtime_class; "" without
 * one): 0 with *handler, or -1 with *err. */
int nl_runtime_pod_handler(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                           const char **handler, nl_err_t **err);

/* Whether pod's runtime handler supports recursive read-only mounts
 * (opts->supports_rro; upstream runtimeClassSupportsRecursiveReadOnlyMounts:
 * false when the class cannot be looked up). */
bool nl_runtime_supports_rro(const nl_runtime_opts_t *opts, const nl_pod_t *pod);

/* generateContainerConfig. Returns 0 and a new config, or -1 with *err (bad env
 * references, subPath outside the volume, unknown volume, a recursive
 * read-only mount the runtime cannot make: upstream's
 * CreateContainerConfigError). */
int nl_runtime_build_container_config(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                                      const nl_container_input_t *in,
                                      Runtime__V1__ContainerConfig **out, nl_err_t **err);

/* upstream verifyRunAsNonRoot for container c of pod, whose effective
 * security context (the container's over the pod's) asks for runAsNonRoot:
 * NULL when the container may start, else upstream's message (a new string;
 * the start fails with CreateContainerConfigError). image_uid (NULL: none) and
 * image_user (NULL or "": none) are the image's user from ImageStatus, read
 * only when nl_runtime_non_root_needs_image says so. */
char *nl_runtime_verify_non_root(const nl_pod_t *pod, const nl_container_t *c,
                                 const int64_t *image_uid, const char *image_user);
/* True when runAsNonRoot is asked for without a runAsUser: only the image's
 * user tells (upstream getImageUser). */
bool nl_runtime_non_root_needs_image(const nl_pod_t *pod, const nl_container_t *c);

/* One environment variable. */
typedef struct nl_env {
  char *name;
  char *value;
} nl_env_t;

/* makeEnvironmentVariables: envFrom (ConfigMaps' data and Secrets' data with
 * their prefix; keys that can be no variable — '=', not printable ASCII —
 * skipped with an InvalidEnvironmentVariableNames event), then env: values
 * with $(VAR) references to earlier ones (then to service variables), fieldRef,
 * resourceFieldRef, configMapKeyRef and secretKeyRef (through opts->objects),
 * fileKeyRef (its value from files, n_files, read before: a variable not
 * there is not set),
 * then the service variables (opts->service_env) the container does not set.
 * An object or key that is missing is skipped when optional, else an error
 * with upstream's text (`couldn't find key k in ConfigMap ns/app`,
 * `configmaps "app" not found`). Returns 0 with a new array in *out (free
 * with nl_env_free), or -1 with *err. */
int nl_runtime_make_env(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                        const nl_container_t *c, const char *pod_ip, char *const *pod_ips,
                        size_t n_pod_ips, const nl_env_t *files, size_t n_files, nl_env_t **out,
                        size_t *n, nl_err_t **err);
void nl_env_free(nl_env_t *env, size_t n);

/* The value of a fieldRef (metadata.name, metadata.labels['k'], status.podIP,
 * ...) and of a resourceFieldRef (self: the container itself, NULL in volumes
 * where containerName is required), as env vars and downwardAPI volumes see
 * them. Return 0 with a new string in *out, or -1 with *err. */
int nl_runtime_field_value(const nl_runtime_opts_t *opts, const nl_pod_t *pod, const char *path,
                           const char *pod_ip, char *const *pod_ips, size_t n_pod_ips, char **out,
                           nl_err_t **err);
int nl_runtime_resource_value(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                              const nl_container_t *self, const nl_resource_field_ref_t *ref,
                              char **out, nl_err_t **err);

/* third_party/forked/golang/expansion.Expand with MappingFuncFor(env): $(VAR) is
 * replaced when VAR is defined, kept as is otherwise; $$ is a literal $. Returns
 * a new string. */
char *nl_runtime_expand(const char *in, const nl_env_t *env, size_t n);

/* qos.GetContainerOOMScoreAdjust. */
int64_t nl_runtime_oom_score_adj(const nl_pod_t *pod, const nl_container_t *c,
                                 int64_t memory_capacity);

/* Paths as upstream builds them (new strings). */
char *nl_runtime_pod_log_dir(const nl_runtime_opts_t *opts, const nl_pod_t *pod);
char *nl_runtime_container_log_path(const nl_container_t *c, int32_t restart_count);
char *nl_runtime_pod_dir(const nl_runtime_opts_t *opts, const char *uid);
/* "<name>_<namespace>_<uid>_<container>_<hash hex>": the crash-loop back-off key. */
char *nl_runtime_backoff_key(const nl_pod_t *pod, const nl_container_t *c);

/* ---- the pod's /etc/hosts ---- */

/* False when the container mounts a volume at /etc/hosts itself (then the
 * managed file is not mounted, as upstream). */
bool nl_runtime_wants_etc_hosts(const nl_container_t *c);
/* The "# Entries added by HostAliases." block of the pod ("" without
 * hostAliases). New string. */
char *nl_runtime_hosts_aliases(const nl_pod_t *pod);
/* managedHostsFileContent: localhost lines, one line per pod IP with hostname
 * (and hostname.domain when domain is set), then the aliases block. */
char *nl_runtime_hosts_content(const char *hostname, const char *domain, char *const *ips,
                               size_t n_ips, const char *aliases);
/* nodeHostsFileContent, for host-network pods: the node's hosts file under its
 * own header, then the aliases block. */
char *nl_runtime_node_hosts_content(const char *node_hosts, size_t len, const char *aliases);
/* Writes the file at path (blocking: thread pool): content, or, when
 * node_hosts_path is set, nodeHostsFileContent of that file with content as
 * the aliases block. Returns 0 or -1 with *err naming the file. */
int nl__hosts_write(const char *path, const char *content, const char *node_hosts_path,
                    nl_err_t **err);

#endif
