/* Pod admission (upstream pkg/kubelet/lifecycle/predicate.go, the predicate
 * admit handler, and the scheduler filters it runs through AdmissionCheck:
 * noderesources Fits, nodeaffinity, nodename, nodeports; then tainttoleration
 * for NoExecute taints). Pure functions of the pod, the Node and the pods
 * already admitted.
 *
 * A rejection has upstream's reason and message: "OutOfcpu" with "Node didn't
 * have enough resource: cpu, requested: 2000, used: 0, capacity: 1000",
 * "NodeAffinity" with "Predicate NodeAffinity failed: node(s) didn't match
 * Pod's node affinity/selector", ... The kubelet reports it as phase Failed with
 * the message prefixed "Pod was rejected: " (upstream rejectPod). */
#ifndef NL_ADMISSION_H
#define NL_ADMISSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/model/pod.h"
#include "agent/model/podres.h"
#include "managers/preemption.h"

/* What admission needs of the Node. Owned strings; free with nl_admit_node_free. */
typedef struct nl_admit_taint {
  char *key, *value, *effect;
} nl_admit_taint_t;

typedef struct nl_admit_node {
  char *name;
  nl_kv_t *labels; /* sorted by key */
  size_t n_labels;
  nl_admit_taint_t *taints;
  size_t n_taints;
  /* status.allocatable; -1 when the Node does not say (then nothing is checked
   * against that resource). cpu in millicores. */
  int64_t cpu_milli, memory, ephemeral_storage, pods;
  /* status.features.supplementalGroupsPolicy; false when the Node does not
   * say (the runtime reports no features, as containerd 1.6) */
  bool supplemental_groups_policy;
} nl_admit_node_t;

/* From a v1 Node object (metadata.name and labels, spec.taints,
 * status.allocatable, status.features). Bad or missing fields leave their defaults (no labels, no
 * taints, -1). */
void nl_admit_node_from_json(nl_admit_node_t *out, const json_t *node);
/* A Node known only from the configuration (standalone, or before the first
 * registration): name, the kubernetes.io/hostname, os and arch labels, and
 * max_pods. */
void nl_admit_node_local(nl_admit_node_t *out, const char *name, int64_t max_pods);
void nl_admit_node_free(nl_admit_node_t *n);
/* The label's value, or NULL. */
const char *nl_admit_node_label(const nl_admit_node_t *n, const char *key);

/* A rejection: reason is static, message owned (free it). */
typedef struct nl_admit_result {
  const char *reason;
  char *message;
} nl_admit_result_t;

/* The pods the node runs already (borrowed). */
typedef struct nl_admit_pods {
  const nl_pod_t *const *items;
  size_t n;
} nl_admit_pods_t;

/* upstream predicateAdmitHandler.Admit: the OS label and field first, then
 * supplementalGroupsPolicy Strict on a node whose runtime cannot honour it
 * ("SupplementalGroupsPolicyNotSupported"), then the
 * general filters in upstream's order, the first failure being the reason;
 * taints are not checked for static pods. Returns true when admitted; false
 * with *out filled otherwise. */
bool nl_admit_pod(const nl_admit_node_t *node, const nl_pod_t *pod, const nl_admit_pods_t *others,
                  bool is_static, nl_admit_result_t *out);
void nl_admit_result_free(nl_admit_result_t *r);

/* The resources admission counts: pods, cpu, memory, ephemeral-storage. */
#define NL_ADMIT_RESOURCES 4

/* upstream's predicate admit handler with the CriticalPodAdmissionHandler as
 * its failure handler: as nl_admit_pod, but a critical pod
 * (nl_ev_pod_is_critical) refused only for want of resources is admitted, with
 * what it lacks in need[0..*n_need) (nl_admit_lacks), which preemption is to
 * free (managers/preemption.h); one refused for another reason too gets the
 * first such reason (the resources' go: preemption would not help). *n_need
 * is 0 when nothing is to be freed. */
bool nl_admit_pod_critical(const nl_admit_node_t *node, const nl_pod_t *pod,
                           const nl_admit_pods_t *others, bool is_static,
                           nl_preempt_need_t need[NL_ADMIT_RESOURCES], size_t *n_need,
                           nl_admit_result_t *out);

/* ---- the predicates (true: passes) ---- */

/* noderesources Fits: pods, cpu, memory, ephemeral-storage, the first that does
 * not fit. */
bool nl_admit_fits(const nl_admit_node_t *node, const nl_pod_t *pod, const nl_admit_pods_t *others,
                   nl_admit_result_t *out);
/* Every resource the pod does not fit, in that order, with what it lacks:
 * requested - (capacity - used) (upstream
 * InsufficientResourceError.GetInsufficientAmount). Returns how many (0: it
 * fits). */
size_t nl_admit_lacks(const nl_admit_node_t *node, const nl_pod_t *pod,
                      const nl_admit_pods_t *others, nl_preempt_need_t need[NL_ADMIT_RESOURCES]);
/* nodeSelector and the required node affinity against the Node's labels (and
 * metadata.name for matchFields). */
bool nl_admit_node_affinity(const nl_admit_node_t *node, const nl_pod_t *pod);
/* spec.nodeName, when set, is this node. */
bool nl_admit_node_name(const nl_admit_node_t *node, const nl_pod_t *pod);
/* No host port (protocol, hostIP, hostPort) of the pod is used by another;
 * 0.0.0.0 conflicts with every address. */
bool nl_admit_host_ports(const nl_pod_t *pod, const nl_admit_pods_t *others);
/* Every NoExecute taint of the Node is tolerated (ToleratesTaint). */
bool nl_admit_taints(const nl_admit_node_t *node, const nl_pod_t *pod);

#endif
