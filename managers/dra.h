/* The DRA manager (upstream pkg/kubelet/cm/dra): Dynamic Resource Allocation's
 * node side. A pod's spec.resourceClaims name ResourceClaims (directly, or
 * through a template whose claim status.resourceClaimStatuses names); the
 * scheduler allocated their devices and reserved them for the pod. Before the
 * pod's sandbox is made, the manager reads each claim from the API
 * (resource.k8s.io/v1), checks that it was made for the pod (a template's),
 * is reserved for it and allocated, and calls NodePrepareResources of each
 * driver the allocation names, on the endpoint its kubelet plugin registered
 * (managers/plugins.h; the DRA plugin API v1, or v1beta1 when the plugin only
 * offers that: cri/dra.proto). The CDI device IDs the driver answers go to
 * CreateContainer (cdi_devices) for the containers whose resources.claims
 * name the claim (and request). Claims, the pods that use them, whether they
 * are prepared and their devices are checkpointed (<root-dir>/dra_manager_state,
 * upstream's layout, written with fsync and rename before a prepared claim is
 * used): an agent restart neither prepares a claim twice nor forgets one.
 * Once no active pod with running containers uses a claim, NodeUnprepareResources
 * is called and the claim forgotten (housekeeping).
 *
 * A driver whose last plugin went away has its ResourceSlices on this node
 * deleted after a grace period (upstream's wipingDelay, 30 s) unless a plugin
 * registers again.
 *
 * Errors name the pod (the caller's), the claim and the driver; nothing a
 * plugin answers crashes the agent or blocks the loop: answers are bounded
 * (max_msg, max_devices per claim, max_ids per device, ID lengths).
 *
 * Lifetime: nl_dra_t is embedded in its owner; nl_dra_stop() answers the
 * preparations in flight with an error, closes every plugin connection and
 * the timer, and calls done once every close callback ran. */
#ifndef NL_DRA_H
#define NL_DRA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "agent/kube/client.h"
#include "agent/model/pod.h"
#include "cri/conn.h"
#include "cri/dra.pb-c.h"
#include "managers/metrics.h"
#include "managers/plugins.h"
#include "managers/status.h"
#include "reactor/error.h"
#include "reactor/list.h"
#include "reactor/map.h"

#define NL_DRA_PLUGIN_TYPE "DRAPlugin"
#define NL_DRA_SERVICE_V1 "v1.DRAPlugin"
#define NL_DRA_SERVICE_V1BETA1 "v1beta1.DRAPlugin"
#define NL_DRA_STATE_FILE "dra_manager_state"
#define NL_DRA_WIPE_DELAY_MS 30000 /* upstream's defaultWipingDelay */

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim nl_dra_pb_claim_t;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse nl_dra_pb_prepare_resp_t;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse nl_dra_pb_unprepare_resp_t;

typedef struct nl_dra nl_dra_t;
typedef void (*nl_dra_done_fn)(nl_dra_t *m, void *ctx);

/* A GET of a ResourceClaim answered: the HTTP status and body (borrowed for
 * the call), or err when there was no answer. */
typedef void (*nl_dra_claim_cb)(void *arg, int status, const char *body, size_t len,
                                const char *err);

typedef struct nl_dra_opts {
  const char *state_path;    /* <root-dir>/dra_manager_state (copied) */
  nl_kube_client_t *kube;    /* the API; NULL: standalone (claims cannot be read) */
  const char *node_name;     /* copied; for the ResourceSlices of this node */
  uint64_t call_timeout_ms;  /* NodePrepare/UnprepareResources; 0: 45 s (upstream's) */
  uint64_t wipe_delay_ms;    /* 0: NL_DRA_WIPE_DELAY_MS */
  size_t max_msg;            /* a plugin's answer; 0: 4 MiB (grpc-go's default) */
  size_t max_devices;        /* devices a driver may answer for one claim; 0: 128 */
  size_t max_ids;            /* CDI device IDs of one device; 0: 16 */
  /* Reads a claim instead of the API (tests, fuzz targets); NULL: kube. */
  void (*get_claim)(void *ctx, const char *ns, const char *name, nl_dra_claim_cb cb, void *arg);
  void *get_claim_ctx;
  /* Whether a pod is still active (upstream's activePods) and whether any of
   * its containers runs: a claim is unprepared only once neither holds for
   * every pod that uses it. NULL: never / none. */
  bool (*pod_active)(void *ctx, const char *uid);
  bool (*pod_running)(void *ctx, const char *uid);
  /* Whether every pod source gave its first list: until then nothing is
   * unprepared. NULL: always. */
  bool (*sources_ready)(void *ctx);
  /* ResourceHealthStatus: watch the plugins' device health; pod_changed (may
   * be NULL) is told of each pod whose devices' health changed. */
  bool health;
  void (*pod_changed)(void *ctx, const char *uid);
  void *ctx;
  /* dra_operations_duration_seconds (nl_dra_prepare, nl_dra_unprepare_pod)
   * and dra_grpc_operations_duration_seconds (each NodePrepareResources and
   * NodeUnprepareResources call); NULL: not recorded. */
  nl_kmetrics_t *metrics;
} nl_dra_opts_t;

typedef enum nl_dra_state { NL_DRA_RUNNING, NL_DRA_STOPPING, NL_DRA_STOPPED } nl_dra_state_t;

struct nl_dra {
  uv_loop_t *loop;
  nl_dra_opts_t opts;     /* strings owned, defaults filled in */
  nl_dra_state_t state;
  nl_plugin_handler_t handler; /* the plugin manager's DRAPlugin handler */
  nl_list_t plugins;      /* struct nl_dra_plugin: registered, newest last */
  nl_list_t claims;       /* struct nl_dra_claim */
  nl_list_t preps;        /* preparations in flight */
  nl_list_t drivers;      /* struct nl_dra_driver: ResourceSlice wipes due */
  nl_map_t health;        /* devices' health by driver, pool, device (dra_health.c) */
  bool health_full_logged;
  uv_timer_t wipe_timer;
  int open;               /* timer, plugin clients, requests: done at 0 */
  nl_dra_done_fn done;
  void *done_ctx;
  uint64_t prepares, unprepares; /* successful calls (tests) */
  uint64_t wipes;         /* ResourceSlice deletions answered 2xx (tests) */
  struct {
    uv_work_t work;
    char *text;
    uint64_t want, writing, done;
    int err;
    const char *step;
    bool busy;
  } ckpt;
};

/* Reads the checkpoint (a bad one is a warning: the manager starts empty).
 * Returns 0; m must be stopped in any case. */
int nl_dra_start(nl_dra_t *m, uv_loop_t *loop, const nl_dra_opts_t *opts, nl_err_t **err);
void nl_dra_stop(nl_dra_t *m, nl_dra_done_fn done, void *ctx);

/* Whether the pod has claims to prepare (spec.resourceClaims, or the claim the
 * scheduler made for its extended resources backed by DRA). */
bool nl_dra_pod_has_claims(const nl_pod_t *pod);

/* upstream's PrepareResources: every claim of the pod read, checked and
 * prepared by its drivers; then fn once with err NULL, or with why the pod
 * cannot start ("prepare dynamic resources: pod 2 (uid) is not allowed to use
 * ResourceClaim c (uid)"). fn may run before this returns. The time until fn
 * is a PrepareResources operation (opts.metrics). */
typedef void (*nl_dra_prepare_fn)(void *ctx, const char *err);
void nl_dra_prepare(nl_dra_t *m, const nl_pod_t *pod, nl_dra_prepare_fn fn, void *ctx);

/* The CDI device IDs of the claims (and requests) the container names, and of
 * the scheduler's claim's requests mapped to its extended resources, from
 * prepared claims. Returns 0 with a new array (*ids, *n; free each and it; NULL
 * and 0 when none), or -1 with *err (allocated) when a claim it names is not
 * prepared. */
/* upstream's UpdateAllocatedResourcesStatus for DRA: each container status
 * (regular containers) gets an allocatedResourcesStatus entry per claim
 * reference of its spec whose claim is prepared ("claim:NAME" or
 * "claim:NAME/REQUEST"), one ResourceHealth per device ("driver/pool/device":
 * Healthy, Unhealthy, or Unknown when its plugin has said nothing of it
 * within the timeout), with the plugin's message when messages is set
 * (ResourceHealthStatusMessage). */
void nl_dra_resource_status(const nl_dra_t *m, const nl_pod_t *pod, nl_pod_status_t *st,
                            bool messages);

int nl_dra_container_cdi(const nl_dra_t *m, const nl_pod_t *pod, const nl_container_t *c,
                         char ***ids, size_t *n, char **err);

/* ---- the pod resources API (managers/podresources.h) ---- */

/* A device of a claim as its driver prepared it (strings borrowed for the
 * call). */
typedef struct nl_dra_device_info {
  const char *driver, *pool, *device;
  const char *share_id; /* NULL: none */
  char *const *cdi;     /* the CDI device IDs the driver answered for it */
  size_t n_cdi;
} nl_dra_device_info_t;
/* Called once per claim (namespace, the ResourceClaim's name) with its
 * devices (borrowed for the call; n may be 0). */
typedef void (*nl_dra_claim_fn)(void *ctx, const char *ns, const char *name,
                                const nl_dra_device_info_t *devs, size_t n);
/* upstream's GetContainerClaimInfos: the claims the container uses, in
 * spec.resourceClaims' order, each once: those its resources.claims name,
 * whatever request they name, resolved as for preparation (a template's by
 * status.resourceClaimStatuses; one that needs no claim left out), then the
 * scheduler's claim for extended resources when one of its request mappings
 * names the container; fn for each with every device the manager has of it.
 * Returns 0, or -1 with *err (allocated; fn not called at all, as upstream
 * answers nothing for the container then) when a claim cannot be resolved or
 * the manager does not know it (not prepared yet, or forgotten). */
int nl_dra_foreach_container_claim(const nl_dra_t *m, const nl_pod_t *pod,
                                   const nl_container_t *c, nl_dra_claim_fn fn, void *ctx,
                                   char **err);

/* Unprepares the claims no active or running pod uses any more. */
void nl_dra_housekeeping(nl_dra_t *m);
/* upstream's UnprepareResources in the pod's termination, once its containers
 * are stopped: the pod no longer uses its claims, and those no other pod uses
 * are unprepared by their drivers. Returns true when driver calls were made:
 * done runs once they are all answered (never before this returns; a failure
 * is logged and tried again by housekeeping); false when there was nothing to
 * call (done does not run). For a pod that used claims, the time until its
 * calls are answered is an UnprepareResources operation (opts.metrics),
 * failed when a call failed or a driver was not registered. */
bool nl_dra_unprepare_pod(nl_dra_t *m, const char *uid, void (*done)(void *ctx), void *ctx);

/* Tests: whether the claim (namespace, name) is known and prepared. */
bool nl_dra_claim_prepared(const nl_dra_t *m, const char *ns, const char *name);
size_t nl_dra_claims(const nl_dra_t *m);

/* upstream's claimsInUse (the dra_resource_claims_in_use gauge): the prepared
 * claims; fn once for each driver of their allocations with how many of them
 * it has devices in. Returns their number. */
typedef void (*nl_dra_in_use_fn)(void *ctx, const char *driver, size_t n);
size_t nl_dra_claims_in_use(const nl_dra_t *m, nl_dra_in_use_fn fn, void *ctx);

/* upstream's validateSupportedServices: the first of the plugin's services
 * the kubelet speaks (NL_DRA_SERVICE_V1 or _V1BETA1), or NULL with *msg. */
const char *nl_dra_pick_service(char *const *versions, size_t n, char **msg);

#endif
