/* The v1 PodStatus a kubelet reports, generated as upstream's
 * generateAPIPodStatus (pkg/kubelet/kubelet_pods.go: convertToAPIContainerStatuses,
 * getPhase), pkg/kubelet/status/generate.go (conditions), the probe manager's
 * started/ready (pkg/kubelet/prober), the status manager's lastTransitionTime and
 * startTime continuity, and GetPodQOS; plus its JSON encoding and the v1 PodList
 * served on GET /pods.
 *
 * Ownership: a nl_pod_status_t owns every string and array in it; free it with
 * nl_pod_status_free(). Times are whole seconds since the epoch (metav1.Time
 * precision), 0 meaning unset (null in JSON). */
#ifndef NL_STATUS_H
#define NL_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/model/pod.h"
#include "agent/model/podres.h"
#include "managers/runtime_types.h"
#include "reactor/buf.h"

typedef enum nl_pod_phase {
  NL_POD_PENDING,
  NL_POD_RUNNING,
  NL_POD_SUCCEEDED,
  NL_POD_FAILED,
  NL_POD_UNKNOWN,
} nl_pod_phase_t;

/* "Pending", "Running", ... */
const char *nl_pod_phase_name(nl_pod_phase_t p);

typedef enum nl_cstate_kind {
  NL_CSTATE_NONE,    /* empty ContainerState ({} in JSON; lastState without history) */
  NL_CSTATE_WAITING,
  NL_CSTATE_RUNNING,
  NL_CSTATE_TERMINATED,
} nl_cstate_kind_t;

typedef struct nl_cstate { /* v1.ContainerState: one of waiting/running/terminated */
  nl_cstate_kind_t kind;
  char *reason;       /* waiting, terminated; NULL when empty */
  char *message;      /* waiting, terminated */
  int64_t started_at; /* running, terminated (s) */
  int64_t finished_at;/* terminated (s) */
  int32_t exit_code;  /* terminated */
  int32_t signal;     /* terminated */
  char *container_id; /* terminated: "containerd://<id>", NULL when unknown */
} nl_cstate_t;

typedef struct nl_resource_health { /* v1.ResourceHealth */
  char *id;           /* resourceID: a device ID, or DRA's "driver/pool/device" */
  const char *health; /* static: "Healthy", "Unhealthy" or "Unknown" */
  char *message;      /* NULL: none (omitempty) */
} nl_resource_health_t;

typedef struct nl_resource_status { /* v1.ResourceStatus */
  char *name; /* the resource, e.g. "example.com/resource" */
  nl_resource_health_t *resources;
  size_t n_resources;
} nl_resource_status_t;

typedef struct nl_container_status { /* v1.ContainerStatus */
  char *name;
  nl_cstate_t state;
  nl_cstate_t last_state;
  bool ready;
  int32_t restart_count;
  char *image;
  char *image_id;
  char *container_id; /* "containerd://<id>", NULL before the first start */
  int8_t started;     /* -1 unset, 0, 1 */
  /* In-place resize (managers/resize.h): allocatedResources and resources as
   * JSON objects, NULL when absent (set by the kubelet after generation). */
  char *allocated_json;
  char *resources_json;
  /* allocatedResourcesStatus: the health of the container's devices
   * (ResourceHealthStatus; set by the device manager, nl_devices_resource_status) */
  nl_resource_status_t *alloc_status;
  size_t n_alloc_status;
  /* volumeMounts (upstream's VolumeMountStatus list) as a JSON array, NULL
   * when the container mounts nothing: made once from the spec and then kept,
   * as upstream keeps it (immutable), one string that a status copy dups. */
  char *volume_mounts_json;
  /* user: the process' uid, gid and groups as the runtime reports them (absent
   * when it does not, as containerd 1.6) */
  nl_rt_user_t user;
} nl_container_status_t;

typedef struct nl_pod_condition {
  const char *type;   /* static: "PodReadyToStartContainers", "Initialized", ... */
  const char *status; /* static: "True", "False" */
  char *reason;
  char *message;
  int64_t last_transition_time; /* s */
  int64_t observed_generation;  /* the pod's metadata.generation it was computed from; 0: unset */
} nl_pod_condition_t;

typedef struct nl_pod_status {
  /* upstream's PodObservedGenerationTracking (on by default since 1.34): the
   * metadata.generation the status was computed from; 0 (omitted) for a pod
   * without one, such as a static pod. */
  int64_t observed_generation;
  nl_pod_phase_t phase;
  nl_pod_condition_t *conditions;
  size_t n_conditions;
  char *message;
  char *reason;
  char *host_ip;
  char **host_ips;
  size_t n_host_ips;
  char *pod_ip;
  char **pod_ips;
  size_t n_pod_ips;
  int64_t start_time; /* s */
  nl_container_status_t *init_container_statuses; /* spec order */
  size_t n_init_container_statuses;
  nl_container_status_t *container_statuses; /* sorted by name, as upstream */
  size_t n_container_statuses;
  nl_container_status_t *ephemeral_container_statuses; /* spec order */
  size_t n_ephemeral_container_statuses;
  const char *qos_class; /* static: "Guaranteed", "Burstable", "BestEffort" */
  /* In-place resize of pod-level resources (managers/resize.h): the pod's
   * allocatedResources and resources as JSON objects, NULL when absent (set
   * by the kubelet after generation). */
  char *allocated_json;
  char *resources_json;
} nl_pod_status_t;

/* Why a container is waiting, from the latest SyncPod (upstream's reasonCache:
 * set when starting the container failed, cleared when it started). The lead
 * adapts nl_sync_result_t to this. Strings are borrowed for the call. */
typedef struct nl_status_reason {
  const char *container; /* container name */
  const char *reason;    /* "ErrImagePull", "ImagePullBackOff", "CrashLoopBackOff",
                          * "CreateContainerError", "RunContainerError", ... */
  const char *message;
} nl_status_reason_t;

typedef struct nl_status_reasons {
  const nl_status_reason_t *items;
  size_t n;
} nl_status_reasons_t;

/* A probe's latest result for a container, as the prober's result caches. */
typedef enum nl_status_probe {
  NL_STATUS_PROBE_NONE,    /* no probe of that kind: started / ready right away */
  NL_STATUS_PROBE_PENDING, /* a probe exists but has no result for this container yet */
  NL_STATUS_PROBE_SUCCESS,
  NL_STATUS_PROBE_FAILURE,
} nl_status_probe_t;

/* startup: the startup probe when true, the readiness probe when false.
 * container_id is the CRI id (no scheme). */
typedef nl_status_probe_t (*nl_status_probe_fn)(void *ctx, const char *container_name,
                                                const char *container_id, bool startup);

typedef struct nl_status_opts {
  const char *runtime_name; /* the containerID scheme; NULL: "containerd" */
  nl_status_probe_fn probe; /* NULL: no probes (started = running, ready = started) */
  void *probe_ctx;
  bool deleted; /* the pod has a deletion timestamp (no restarts, no restart bump) */
  bool supports_rro; /* the runtime handler supports recursive read-only mounts */
} nl_status_opts_t;

/* Generates the pod's v1 status.
 * rt: the runtime's view (PLEG cache), NULL when the runtime has nothing.
 * reasons: waiting reasons per container (may be NULL).
 * old: the status reported before (status manager), NULL at first: keeps
 *   terminated states, restart counts, lastState, startTime, condition
 *   lastTransitionTimes and a terminal phase.
 * pod_is_terminal: the pod worker decided the pod is done (upstream podIsTerminal).
 * now_ns: wall clock for new transition times and startTime.
 * host_ip: the node IP for hostIP/hostIPs (and podIP of host-network pods), or
 *   NULL when running without an API server (upstream sets none then).
 * opts may be NULL. Returns a new status (never NULL). */
nl_pod_status_t *nl_pod_status_generate(const nl_pod_t *pod, const nl_rt_pod_status_t *rt,
                                        const nl_status_reasons_t *reasons,
                                        const nl_pod_status_t *old, bool pod_is_terminal,
                                        int64_t now_ns, const char *host_ip,
                                        const nl_status_opts_t *opts);
void nl_pod_status_free(nl_pod_status_t *s);
/* Whether s (may be NULL) says an in-place restart of all the pod's containers
 * is under way (its AllContainersRestarting condition is True): the pod's
 * containers are to be removed before it starts again (nl_runtime_reset_pod). */
bool nl_pod_status_restarting_all(const nl_pod_status_t *s);
/* s's condition of that type (s may be NULL), or NULL; writable when s is. */
nl_pod_condition_t *nl_pod_status_condition(const nl_pod_status_t *s, const char *type);
/* A pod the kubelet terminated itself (upstream TerminatePodOptions): phase
 * Failed with reason and message (copied) unless it Succeeded (then neither),
 * and the DisruptionTarget condition (True, TerminationByKubelet, cond_message,
 * or message when NULL), whose lastTransitionTime old (may be NULL) keeps. */
void nl_pod_status_terminated_by_kubelet(nl_pod_status_t *s, const nl_pod_status_t *old,
                                         const char *reason, const char *message,
                                         const char *cond_message, int64_t now_ns);
/* Appends a condition (type and status static strings; reason and message
 * copied, may be NULL) with lastTransitionTime since_s. */
void nl_pod_status_add_condition(nl_pod_status_t *s, const char *type, const char *status,
                                 const char *reason, const char *message, int64_t since_s);
/* upstream status manager TerminatePod, at the end of a pod's termination
 * (syncTerminatedPod): containers without a terminated state are marked
 * terminated (ContainerStatusUnknown, exit code 137) once the pod has
 * initialized; so are the init containers that ever started (at least the
 * first); an API pod that is not Succeeded or Failed becomes Failed, so that a
 * pod that never ran (an image that cannot be pulled, a crash-looping init
 * container) reaches a terminal phase and a deleted one can go. */
void nl_pod_status_terminate(nl_pod_status_t *s, const nl_pod_t *pod);
/* upstream NeedToReconcilePodReadiness: the pod has readiness gates and the
 * API's Ready condition disagrees with them (someone set a gate's condition):
 * the pod is to be synced so that its status is regenerated. */
bool nl_pod_status_ready_needs_reconcile(const nl_pod_t *pod);
/* A deep copy (caller frees). */
nl_pod_status_t *nl_pod_status_dup(const nl_pod_status_t *s);
/* c's allocatedResourcesStatus entry named name, emptied (an old status'
 * entry is updated, as upstream's), or appended (name copied); then a
 * ResourceHealth (id copied) appended to it. */
nl_resource_status_t *nl_container_status_resource(nl_container_status_t *c, const char *name);
void nl_resource_status_add(nl_resource_status_t *r, const char *id, const char *health,
                            const char *message);

/* getPhase, exported for tests: statuses are init + regular container statuses. */
nl_pod_phase_t nl_pod_status_phase(const nl_pod_t *pod, const nl_container_status_t *statuses,
                                   size_t n, bool pod_is_terminal, bool pod_has_initialized);

/* Appends the "status" object as v1 JSON (Go field order and omitempty rules;
 * times RFC 3339 in UTC with seconds, zero times null where Go writes null). */
void nl_pod_status_encode_json(const nl_pod_status_t *s, nl_buf_t *out);
/* Appends a v1 PodList {"kind":"PodList","apiVersion":"v1","metadata":{},
 * "items":[...]}: each item is the pod's JSON with its "status" (statuses[i]
 * may be NULL: no status field). */
void nl_pod_list_encode_json(const nl_pod_t *const *pods, const nl_pod_status_t *const *statuses,
                             size_t n, nl_buf_t *out);
/* A container's volumeMounts status as upstream's convertToAPIContainerStatuses
 * makes it: name, mountPath, readOnly, and for a read-only mount its
 * recursiveReadOnly as resolved (Enabled or Disabled; Disabled when it cannot
 * be resolved). A new JSON array, or NULL when the container mounts nothing. */
char *nl_status_volume_mounts_json(const nl_container_t *c, bool supports_rro);
/* RFC 3339 "2024-12-03T15:12:44Z" of a time in seconds into buf (>= 21 bytes). */
char *nl_status_format_time(int64_t secs, char *buf, size_t len);

#endif
