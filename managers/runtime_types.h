/* What the runtime says about a pod, as the upstream kubelet's kubecontainer
 * PodStatus: rebuilt from CRI sandboxes and containers (grouped by the
 * io.kubernetes.pod.uid label), cached per pod by PLEG, read by SyncPod's action
 * computation and by the v1 PodStatus generator.
 *
 * Ownership: a nl_rt_pod_status_t owns every string and array in it; release it
 * with nl_rt_pod_status_free(). Times are nanoseconds since the epoch (CRI's
 * unit); 0 means unset. */
#ifndef NL_RUNTIME_TYPES_H
#define NL_RUNTIME_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Labels and annotations the upstream kubelet puts on CRI objects
 * (pkg/kubelet/types/labels.go, kuberuntime/labels.go). */
#define NL_LABEL_POD_NAME "io.kubernetes.pod.name"
#define NL_LABEL_POD_NAMESPACE "io.kubernetes.pod.namespace"
#define NL_LABEL_POD_UID "io.kubernetes.pod.uid"
#define NL_LABEL_CONTAINER_NAME "io.kubernetes.container.name"
#define NL_ANN_POD_DELETION_GRACE "io.kubernetes.pod.deletionGracePeriod"
#define NL_ANN_POD_TERMINATION_GRACE "io.kubernetes.pod.terminationGracePeriod"
#define NL_ANN_CONTAINER_HASH "io.kubernetes.container.hash"
#define NL_ANN_CONTAINER_RESTART_COUNT "io.kubernetes.container.restartCount"
#define NL_ANN_CONTAINER_TERMINATION_MESSAGE_PATH "io.kubernetes.container.terminationMessagePath"
#define NL_ANN_CONTAINER_TERMINATION_MESSAGE_POLICY "io.kubernetes.container.terminationMessagePolicy"
#define NL_ANN_CONTAINER_PRESTOP_HANDLER "io.kubernetes.container.preStopHandler"
#define NL_ANN_CONTAINER_PORTS "io.kubernetes.container.ports"

/* The value of key in a CRI map field (labels, annotations: every generated
 * entry type has the same layout after its ProtobufCMessage base), or NULL. */
const char *nl_rt_kv_get(void *const *entries, size_t n, const char *key);
#define NL_RT_LABEL(obj, key) nl_rt_kv_get((void *const *)(obj)->labels, (obj)->n_labels, (key))
#define NL_RT_ANNOTATION(obj, key) \
  nl_rt_kv_get((void *const *)(obj)->annotations, (obj)->n_annotations, (key))

typedef enum {
  NL_RT_CONTAINER_CREATED = 0, /* CRI CONTAINER_CREATED */
  NL_RT_CONTAINER_RUNNING = 1,
  NL_RT_CONTAINER_EXITED = 2,
  NL_RT_CONTAINER_UNKNOWN = 3,
} nl_rt_container_state_t;

/* The user a container's process runs as, as the runtime reports it
 * (ContainerStatus.user; upstream's ContainerUser): the uid, the primary gid and
 * every group of the process, those the image's /etc/group gives included
 * (SupplementalGroupsPolicy Merge) or not (Strict). The v1 status' user. */
typedef struct nl_rt_user {
  bool present; /* the runtime reported a user (containerd 1.6 does not) */
  bool linux;   /* ... with its linux part */
  int64_t uid, gid;
  int64_t *groups; /* supplementalGroups, in the runtime's order */
  size_t n_groups;
} nl_rt_user_t;

void nl_rt_user_copy(nl_rt_user_t *dst, const nl_rt_user_t *src);
void nl_rt_user_free(nl_rt_user_t *u);

typedef struct nl_rt_container {
  char *id;   /* CRI container id */
  char *name; /* the io.kubernetes.container.name label */
  nl_rt_container_state_t state;
  int64_t created_at, started_at, finished_at;
  int32_t exit_code;
  char *reason;   /* CRI reason: "Completed", "Error", "OOMKilled", ... */
  char *message;  /* termination message (from the runtime or the log) */
  char *image;    /* the image as the spec named it */
  char *image_ref; /* the runtime's image id/digest (imageID in status) */
  uint32_t hash;   /* io.kubernetes.container.hash */
  int32_t restart_count;
  char *log_path;
  char *termination_message_path;
  char *sandbox_id; /* the pod sandbox it runs in (from ListContainers) */
  nl_rt_user_t user;
} nl_rt_container_t;

typedef enum {
  NL_RT_SANDBOX_READY = 0,
  NL_RT_SANDBOX_NOTREADY = 1,
} nl_rt_sandbox_state_t;

typedef struct nl_rt_sandbox {
  char *id;
  nl_rt_sandbox_state_t state;
  uint32_t attempt;
  int64_t created_at;
  char *ip;      /* primary pod IP, NULL when none (host network) */
  char **ips;    /* additional IPs */
  size_t n_ips;
  bool host_network;
} nl_rt_sandbox_t;

typedef struct nl_rt_pod_status {
  char *uid;
  char *name;
  char *namespace_;
  nl_rt_sandbox_t *sandboxes; /* newest first, as upstream sorts them */
  size_t n_sandboxes;
  nl_rt_container_t *containers; /* newest first per name */
  size_t n_containers;
  int64_t timestamp; /* when this status was read (ns, the PLEG clock: monotonic) */
  /* The pod's IPs (kubecontainer PodStatus.IPs): the newest sandbox's IP and
   * additional IPs while it is ready; kept from the previous status once every
   * sandbox has stopped, so a finished pod still reports its podIP. */
  char **ips;
  size_t n_ips;
} nl_rt_pod_status_t;

void nl_rt_pod_status_free(nl_rt_pod_status_t *s);
/* A deep copy (NULL for NULL); free with nl_rt_pod_status_free. */
nl_rt_pod_status_t *nl_rt_pod_status_dup(const nl_rt_pod_status_t *s);
/* The newest container instance named name, or NULL. */
const nl_rt_container_t *nl_rt_pod_status_find(const nl_rt_pod_status_t *s, const char *name);

/* The directory of the containers' log links (upstream's /var/log/containers,
 * where log shippers look): "containers" beside podLogsDir, so that the
 * default /var/log/pods gives upstream's path. A new string. */
char *nl_rt_log_links_dir(const char *pod_logs_dir);
/* upstream legacyLogSymlink: <dir>/<pod>_<namespace>_<container>-<id>.log, the
 * name cut to 255 bytes (ext4's limit) keeping ".log". A new string. */
char *nl_rt_log_link_path(const char *links_dir, const char *pod, const char *namespace_,
                          const char *container, const char *container_id);

#endif
