/* In-place pod resize (upstream's InPlacePodVerticalScaling): what the kubelet
 * has allocated to each container (upstream pkg/kubelet/allocation), what it
 * has applied to the running container (kuberuntime's actuated state), the
 * pod's resize conditions (the status manager's PodResizePending and
 * PodResizeInProgress), and the checkpoint that keeps the first two across a
 * restart of the agent.
 *
 * Only cpu and memory change in place, of every container but the ephemeral
 * ones (regular containers, sidecars and, upstream's
 * InPlacePodVerticalScalingInitContainers, the other init containers: upstream
 * IsResizableContainer) and of the pod-level spec.resources;
 * everything else of a pod's resources is immutable (the API server says so)
 * and is read from the spec. A container's actuated record holds what it runs
 * with: its own limits, or the pod-level ones where it has none.
 *
 * The decisions (resize_admit.c) and the action plan (runtime_resize.c) are
 * pure functions; this module holds state on the loop and writes the
 * checkpoint on the thread pool, one write at a time, the latest state each
 * time (reactor/fs.h's atomic replace). */
#ifndef NL_RESIZE_H
#define NL_RESIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent/model/pod.h"
#include "managers/admission.h"
#include "reactor/error.h"
#include "reactor/map.h"

/* The cpu and memory of a container: requests and limits, cpu in millicores,
 * memory in bytes, 0 when not set (as upstream's resourceRequirements);
 * `set` says which of them the resource lists name (NL_RSZ_*). */
enum { NL_RSZ_CPU_REQ = 1, NL_RSZ_CPU_LIM = 2, NL_RSZ_MEM_REQ = 4, NL_RSZ_MEM_LIM = 8 };
typedef struct nl_rsz_res {
  int64_t cpu_req, cpu_lim, mem_req, mem_lim;
  unsigned set;
} nl_rsz_res_t;

/* A container's cpu and memory from its spec. */
nl_rsz_res_t nl_rsz_res_of(const nl_container_t *c);
/* The same of resource requirements (the pod-level spec.resources; NULL: none). */
nl_rsz_res_t nl_rsz_reqs_res(const nl_resource_requirements_t *r);
/* What a container runs with under pod-level resources (upstream GetLimits):
 * its own amounts, and the pod-level limit where it has none. */
nl_rsz_res_t nl_rsz_effective(nl_rsz_res_t c, const nl_rsz_res_t *pod);
/* Same amounts (set bits aside: upstream compares values, absent being 0). */
bool nl_rsz_res_equal(const nl_rsz_res_t *a, const nl_rsz_res_t *b);
/* The container named name of pod (regular or init), or NULL. */
nl_container_t *nl_rsz_find(const nl_pod_t *pod, const char *name);
/* A copy of r with cpu and memory as res has them (other resources kept),
 * into lists the caller frees with nl_rsz_reqs_free; quantities the spec
 * had with the same amount are kept as written. */
void nl_rsz_reqs_build(const nl_resource_requirements_t *spec, const nl_rsz_res_t *res,
                       nl_resource_requirements_t *out);
void nl_rsz_reqs_free(nl_resource_requirements_t *r);

/* ---- the decision (resize_admit.c, pure) ---- */

typedef enum nl_resize_verdict {
  NL_RESIZE_FITS,       /* allocate it now */
  NL_RESIZE_DEFERRED,   /* not now: other pods hold what it needs */
  NL_RESIZE_INFEASIBLE, /* never on this node */
} nl_resize_verdict_t;

/* upstream handlePodResourcesResize's canAdmitPod with the ResizeOperation:
 * desired is the pod as its spec wants it, allocated as it is allocated now,
 * others the other admitted pods as allocated (borrowed). Infeasible: a static
 * pod, a change of QoS class, or cpu or memory requests above the node's
 * allocatable; deferred: the noderesources fit fails against the other pods.
 * *message (owned, NULL when it fits) says why. */
nl_resize_verdict_t nl_resize_admit(const nl_admit_node_t *node, const nl_pod_t *desired,
                                    const nl_pod_t *allocated, const nl_admit_pods_t *others,
                                    bool is_static, char **message);

/* ---- the manager ---- */

typedef struct nl_rsz_cond { /* one resize condition; reason NULL: absent */
  char *reason, *message;
  int64_t generation;      /* metadata.generation it was set for */
  int64_t since_ns;        /* lastTransitionTime */
} nl_rsz_cond_t;

typedef struct nl_rsz_pod nl_rsz_pod_t; /* private (resize.c) */

typedef struct nl_resize {
  uv_loop_t *loop;
  char *path;      /* <rootDir>/pod_resources_state */
  nl_map_t pods;   /* uid -> nl_rsz_pod_t */
  /* the checkpoint writer */
  uv_work_t work;
  bool busy, dirty, stopping;
  char *text;      /* what the write in flight writes */
  int werr;        /* its errno */
  const char *wstep;
  void (*done_cb)(struct nl_resize *rs);
} nl_resize_t;

/* Reads the checkpoint (blocking: start-up, before the loop runs); a missing
 * file is an empty state, a damaged one is logged and dropped (upstream
 * starts afresh too). Returns 0. */
int nl_resize_init(nl_resize_t *rs, uv_loop_t *loop, const char *root_dir, nl_err_t **err);
/* Waits for the write in flight, then calls done_cb (may be NULL) and frees
 * the state. */
void nl_resize_stop(nl_resize_t *rs, void (*done_cb)(nl_resize_t *rs));

/* The allocation of pod's resizable containers, and of its pod-level
 * resources (InPlacePodLevelResourcesVerticalScaling), becomes what its spec
 * says (upstream SetAllocatedResources), checkpointed. */
void nl_resize_allocate(nl_resize_t *rs, const nl_pod_t *pod);
/* Whether the pod has an allocation at all (admitted before). */
bool nl_resize_known(const nl_resize_t *rs, const char *uid);
/* upstream UpdatePodFromAllocation: a copy of pod whose containers and
 * spec.resources have the allocated cpu and memory (one holder: free with
 * nl_pod_free), or NULL when pod already has them (or has no allocation). */
nl_pod_t *nl_resize_allocated_pod(const nl_resize_t *rs, const nl_pod_t *pod);
/* The allocation of a container: false when there is none. */
bool nl_resize_allocated(const nl_resize_t *rs, const char *uid, const char *container,
                         nl_rsz_res_t *out);
/* What was last applied to the container (created with, or updated to);
 * false when nothing is known. */
bool nl_resize_actuated(const nl_resize_t *rs, const char *uid, const char *container,
                        nl_rsz_res_t *out);
/* Records what the container now runs with, checkpointed. */
void nl_resize_set_actuated(nl_resize_t *rs, const char *uid, const char *container,
                            const nl_rsz_res_t *res);
/* The pod-level allocation, and what was last applied to the pod cgroup for
 * it; false when the pod has none (no spec.resources, or not known). */
bool nl_resize_pod_allocated(const nl_resize_t *rs, const char *uid, nl_rsz_res_t *out);
bool nl_resize_pod_actuated(const nl_resize_t *rs, const char *uid, nl_rsz_res_t *out);
/* Records what the pod cgroup now has for the pod-level resources, checkpointed. */
void nl_resize_set_pod_actuated(nl_resize_t *rs, const char *uid, const nl_rsz_res_t *res);
/* Forgets a pod (it is gone), checkpointed. */
void nl_resize_forget(nl_resize_t *rs, const char *uid);
/* Forgets every pod for which keep(ctx, uid) is false (housekeeping). */
void nl_resize_forget_others(nl_resize_t *rs, bool (*keep)(void *ctx, const char *uid), void *ctx);

/* The resize conditions. A pending one is set by the allocation decision and
 * cleared when it is allocated or reverted; in-progress while a running
 * container's actuated resources differ from its allocation, with the reason
 * Error and the runtime's message after a failed actuation (upstream). Each
 * set_* returns whether the condition changed (reason or generation). */
bool nl_resize_set_pending(nl_resize_t *rs, const char *uid, const char *reason,
                           const char *message, int64_t generation, int64_t now_ns);
bool nl_resize_clear_pending(nl_resize_t *rs, const char *uid);
const nl_rsz_cond_t *nl_resize_pending(const nl_resize_t *rs, const char *uid);
bool nl_resize_set_in_progress(nl_resize_t *rs, const char *uid, const char *reason,
                               const char *message, int64_t generation, int64_t now_ns);
bool nl_resize_clear_in_progress(nl_resize_t *rs, const char *uid);
const nl_rsz_cond_t *nl_resize_in_progress(const nl_resize_t *rs, const char *uid);
/* The uids with a pending resize, oldest first (a new array of borrowed
 * strings; *n set). */
const char **nl_resize_pending_list(const nl_resize_t *rs, size_t *n);

#endif
