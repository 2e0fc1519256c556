/* The v1 Node and its Lease as the kubelet writes them: the registration body
 * (upstream's initialNode), the reconcile of an existing Node, the status and
 * its change test (nodestatus setters, nodeStatusHasChanged), allocatable
 * (capacity minus kubeReserved, systemReserved and evictionHard), the node
 * labels a kubelet may set, --register-with-taints, and the node Lease body.
 *
 * Everything here is a pure function of its inputs, JSON through jansson: the
 * manager (managers/node.c) gathers the inputs and talks to the apiserver.
 * Every json_t returned is a new reference owned by the caller. */
#ifndef NL_MODEL_NODE_H
#define NL_MODEL_NODE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reactor/error.h"

/* The Kubernetes release whose API and behaviour nanolet follows; the node's
 * kubeletVersion is this with nanolet's own version as semver build metadata
 * ("v1.36.3+nanolet.0.1.0"), as k3s does: version comparisons see 1.36.3 and
 * `kubectl get nodes` shows what runs. */
#define NL_NODE_KUBE_VERSION "v1.36.3"

/* What the host says about itself (managers/node_facts.c gathers it). Owned
 * strings; "" when unknown. */
typedef struct nl_node_facts {
  char *machine_id, *system_uuid, *boot_id, *kernel_version, *os_image;
  int64_t cpus;            /* online CPUs */
  int64_t memory_bytes;    /* MemTotal */
  int64_t ephemeral_bytes; /* the root dir's file system; -1 unknown */
  struct nl_node_hugepages {
    int64_t page_bytes, total_bytes;
  } hugepages[4];
  size_t n_hugepages;
} nl_node_facts_t;

void nl_node_facts_free(nl_node_facts_t *f);

/* One image from the CRI ImageService (borrowed strings). */
typedef struct nl_node_image {
  const char *const *names; /* repo digests then repo tags, as upstream */
  size_t n_names;
  int64_t size_bytes;
} nl_node_image_t;

/* A runtime handler and its features as the CRI Status lists them
 * (runtime_handlers; the default handler is named ""). */
typedef struct nl_node_runtime_handler {
  const char *name;
  bool recursive_read_only_mounts, user_namespaces;
} nl_node_runtime_handler_t;

/* The runtime's features as the CRI Status reports them (features; upstream's
 * RuntimeFeatures), known only when the runtime sends them (containerd 1.6
 * does not). */
typedef struct nl_node_runtime_features {
  bool known;
  bool supplemental_groups_policy; /* it honours SupplementalGroupsPolicy Strict */
} nl_node_runtime_features_t;

/* A CRI RuntimeCondition as Status returns it. */
typedef struct nl_node_cri_cond {
  bool present, status;
  const char *reason, *message;
} nl_node_cri_cond_t;

/* The inputs of the Ready condition and the nodeInfo the runtime gives, for one
 * status computation (borrowed). */
/* An extended resource of the node (a device plugin's: example.com/resource):
 * its device count in capacity, its healthy ones in allocatable. */
typedef struct nl_node_extended {
  const char *name;
  int64_t capacity, allocatable;
} nl_node_extended_t;

typedef struct nl_node_inputs {
  int64_t now_ns;             /* wall clock */
  int64_t runtime_sync_ns;    /* last Status that said RuntimeReady; 0 never */
  bool status_seen;           /* a Status call has succeeded at least once */
  nl_node_cri_cond_t runtime_ready, network_ready; /* from the last Status */
  const char *pleg_error;     /* NULL when PLEG is healthy, else its message */
  const char *runtime_version;/* "containerd://1.6.20"; NULL: "Unknown" */
  const char *runtime_type;   /* "containerd" when the version is unknown */
  const nl_node_image_t *images; /* sorted by size, largest first */
  size_t n_images;
  bool images_known;          /* false: the list failed, keep what the node has */
  bool memory_pressure, disk_pressure, pid_pressure; /* the eviction manager's */
  bool shutting_down;         /* graceful node shutdown has begun */
  const nl_node_extended_t *extended; /* device plugins' resources, added to */
  size_t n_extended;                  /* capacity and allocatable as they are */
  const nl_node_runtime_handler_t *handlers; /* status.runtimeHandlers, as the */
  size_t n_handlers;                         /* runtime's Status lists them */
  nl_node_runtime_features_t features;       /* status.features */
} nl_node_inputs_t;

/* One taint of --register-with-taints. */
typedef struct nl_node_taint {
  char *key, *value, *effect; /* owned; value may be "" */
} nl_node_taint_t;

/* The configuration the Node is built from (borrowed). */
typedef struct nl_node_conf {
  const char *name;      /* the node name */
  const char *hostname;  /* kubernetes.io/hostname and the Hostname address */
  const char *node_ip;   /* InternalIP; NULL or "" for none */
  const char *kubelet_version;
  const char *const *label_keys, *const *label_values; /* --node-labels */
  size_t n_labels;
  const nl_node_taint_t *taints;
  size_t n_taints;
  bool register_schedulable;
  bool controller_attach_detach; /* enableControllerAttachDetach */
  int32_t port;                  /* daemonEndpoints.kubeletEndpoint.Port */
  int32_t max_pods;
  int32_t max_images;            /* nodeStatusMaxImages; -1 no cap */
  /* kubeReserved and systemReserved ("cpu" -> "100m"), evictionHard
   * ("memory.available" -> "100Mi" or "10%"). */
  const char *const *kube_reserved_keys, *const *kube_reserved_values;
  size_t n_kube_reserved;
  const char *const *system_reserved_keys, *const *system_reserved_values;
  size_t n_system_reserved;
  const char *const *eviction_keys, *const *eviction_values;
  size_t n_eviction;
} nl_node_conf_t;

/* The Go GOARCH of this build ("amd64", "arm64", "arm", ...). */
const char *nl_node_goarch(void);

/* RFC 3339 in UTC: seconds ("2024-12-03T15:12:44Z", metav1.Time) or
 * microseconds ("2024-12-03T15:12:44.123456Z", metav1.MicroTime). buf holds
 * at least 32 bytes. */
char *nl_node_time(int64_t ns, bool micro, char *buf, size_t len);

/* --node-labels as upstream's ValidateKubeletFlags: qualified names and label
 * values, and no kubernetes.io / k8s.io label outside what a kubelet may set
 * (NodeRestriction). Returns 0 or -1 with *err naming the labels. */
int nl_node_labels_validate(const char *const *keys, const char *const *values, size_t n,
                            nl_err_t **err);

/* Parses one taint spec "key=value:Effect" or "key:Effect" (upstream's
 * ParseTaints). Returns 0 or -1 with *err; *t is filled only on success. */
int nl_node_taint_parse(const char *spec, nl_node_taint_t *t, nl_err_t **err);
void nl_node_taint_free(nl_node_taint_t *t);

/* Allocatable of one resource: capacity minus the reservations and, for memory
 * and ephemeral-storage, the hard eviction threshold (a quantity or a percent of
 * capacity), floored at 0, as upstream's node allocatable. cpu in millicores,
 * others in units. Returns 0 or -1 with *err naming the bad field value. */
int nl_node_reserved(const nl_node_conf_t *c, const char *resource, int64_t capacity,
                     int64_t *reserved, nl_err_t **err);

/* The status object ({"capacity","allocatable","conditions","addresses",
 * "daemonEndpoints","nodeInfo","images","runtimeHandlers"}). prev is the Node's current status or
 * NULL: conditions keep their lastTransitionTime while their status holds, as
 * the upstream setters do. Returns NULL with *err on a bad reservation. */
json_t *nl_node_status(const nl_node_conf_t *c, const nl_node_facts_t *f,
                       const nl_node_inputs_t *in, const json_t *prev, nl_err_t **err);

/* The registration body (initialNode with its status). */
json_t *nl_node_initial(const nl_node_conf_t *c, const nl_node_facts_t *f,
                        const nl_node_inputs_t *in, nl_err_t **err);

/* nodeStatusHasChanged: whether patching status onto prev would change it, with
 * condition heartbeat times ignored. */
bool nl_node_status_changed(const json_t *status, const json_t *prev);

/* The status patch (strategic merge) that takes prev (the Node's status as last
 * read, may be NULL) to status: only the fields whose value differs, as the
 * two-way patch upstream's PatchNodeStatus computes; of the conditions (a
 * list merged by type) only the fields that changed, with their type (every
 * report changes the heartbeats), a condition new to prev whole. The image
 * list is the bulk of a status and goes only when it changed. New reference. */
json_t *nl_node_status_patch(const json_t *status, const json_t *prev);

/* The patch that reconciles an existing Node with the initial one
 * (tryRegisterWithAPIServer: default labels, the controller-managed
 * attach-detach annotation, huge page sizes the node no longer has removed
 * from capacity and allocatable), or NULL when it needs none. */
json_t *nl_node_reconcile(const json_t *initial, const json_t *existing);

/* The node Lease (coordination.k8s.io/v1) to create, or, with base (the last
 * Lease the server returned), to update: holder, duration and renewTime set,
 * the owner reference to the Node added when base has none and node_uid is
 * known. */
json_t *nl_node_lease(const char *node, const char *node_uid, int32_t duration_s, int64_t now_ns,
                      const json_t *base);

/* A renewal of base (the last Lease the server returned) as a JSON merge patch:
 * base's resourceVersion, so that it applies only to that version as
 * upstream's update does (409 otherwise), and only the fields nl_node_lease
 * would change: renewTime, and holder, duration and owner reference when base
 * differs. Upstream PUTs the whole Lease back, managedFields included, three
 * times the bytes for the same result. When base carries managedFields (the
 * create's, or a server-side apply's), the patch also resets them
 * (`managedFields: [{}]`): the apiserver then tracks no manager on the
 * Lease's updates, and its answers carry none. */
json_t *nl_node_lease_renewal(const char *node, const char *node_uid, int32_t duration_s,
                              int64_t now_ns, const json_t *base);

/* The renewal that only moves renewTime, for a Lease whose last read holds
 * what nl_node_lease would write otherwise: a JSON patch (RFC 6902,
 * application/json-patch+json) without the resourceVersion, whose `test`
 * operations pin holderIdentity (node) and leaseDurationSeconds before the
 * `replace` of renewTime, so that the apiserver refuses it (422) when someone
 * else changed either since; upstream's PUT on the resourceVersion would
 * conflict (409) then. New reference. */
json_t *nl_node_lease_renewal_tested(const char *node, int32_t duration_s, int64_t now_ns);

#endif
