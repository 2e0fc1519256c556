/* The pod resources API (upstream pkg/kubelet/apis/podresources, v1): which
 * devices the node's pods hold (device plugins' and DRA claims') and which the
 * node can hand out, for monitoring agents on the node (dcgm-exporter,
 * node-feature-discovery).
 *
 * Served with cri/grpc_server.h on <root-dir>/pod-resources/kubelet.sock
 * (cri/podresources.proto, "/v1.PodResourcesLister/<method>"):
 *   List                     every active pod (upstream's
 *                            KubeletPodResourcesListUseActivePods, on by
 *                            default), its restartable init containers then
 *                            its containers, each with its devices: one
 *                            ContainerDevices per device, as upstream; and
 *                            its DRA claims (dynamic_resources: one
 *                            DynamicResource per claim the container names,
 *                            one ClaimResource per device prepared for it,
 *                            with its CDI IDs; nothing for a container whose
 *                            claims are not all prepared, as upstream)
 *   GetAllocatableResources  every healthy device of each registered resource
 *   Get                      one pod of the pod manager by namespace and name;
 *                            "pod <name> in namespace <ns> not found" (code
 *                            Unknown, as upstream's plain error) otherwise
 * and, as upstream still does, the first version's
 * "/v1alpha1.PodResourcesLister/List": every pod of the pod manager, active
 * or not, its containers (no init containers) with their devices; its
 * messages are v1's first fields, so a v1 answer without v1's additions is
 * sent (counted in ..._requests_total only, as upstream).
 * cpu_ids, memory and topology stay empty: there is no CPU, memory or
 * topology manager. Calls pass a token bucket (upstream's
 * 100 per second, burst 10; RESOURCE_EXHAUSTED "rejected by rate limit"
 * beyond) and are counted in kubelet_pod_resources_endpoint_*.
 *
 * Everything is answered at once from the device manager's assignments, the
 * DRA manager's claims and the pod manager: a handler holds no call past its
 * return.
 *
 * Lifetime: nl_podres_t is embedded in its owner; nl_podres_stop() closes the
 * server and calls done from its close callback. */
#ifndef NL_PODRESOURCES_H
#define NL_PODRESOURCES_H

#include <stdbool.h>

#include <uv.h>

#include "agent/kube/ratelimit.h"
#include "cri/grpc_server.h"
#include "cri/podresources.pb-c.h"
#include "managers/devices.h"
#include "managers/dra.h"
#include "managers/metrics.h"
#include "managers/pod_manager.h"
#include "reactor/error.h"

#define NL_PODRES_SOCKET "kubelet.sock"
#define NL_PODRES_QPS 100  /* upstream's DefaultQPS */
#define NL_PODRES_BURST 10 /* upstream's DefaultBurstTokens */

typedef struct nl_podres nl_podres_t;
typedef void (*nl_podres_done_fn)(nl_podres_t *p, void *ctx);

typedef struct nl_podres_deps {
  const nl_pod_manager_t *pods; /* the pods the agent knows */
  /* Whether a pod is active (upstream's GetActivePods); NULL: all are. */
  bool (*pod_active)(void *ctx, const char *uid);
  void *pod_active_ctx;
  /* Whether the pods are known (every source gave its first list; ctx
   * pod_active_ctx): until then List and Get answer UNAVAILABLE. NULL: known. */
  bool (*pods_synced)(void *ctx);
  nl_devices_t *devices;   /* NULL or not running: no devices anywhere */
  const nl_dra_t *dra;     /* NULL or not running: no dynamic_resources */
  nl_kmetrics_t *metrics;  /* NULL: not counted */
  double qps;              /* 0: NL_PODRES_QPS; < 0: no limit */
  int burst;               /* 0: NL_PODRES_BURST */
} nl_podres_deps_t;

struct nl_podres {
  uv_loop_t *loop;
  nl_podres_deps_t deps;
  nl_grpc_server_t server;
  nl_kube_ratelimit_t rl;
  bool stopping;
  nl_podres_done_fn done;
  void *done_ctx;
};

/* Listens on <dir>/kubelet.sock (dir created when missing, a stale socket
 * replaced). Returns 0, or -1 with *err; p must be stopped in both cases. */
int nl_podres_start(nl_podres_t *p, uv_loop_t *loop, const char *dir,
                    const nl_podres_deps_t *deps, nl_err_t **err);
/* Closes the server; done (may be NULL) runs from its close callback. */
void nl_podres_stop(nl_podres_t *p, nl_podres_done_fn done, void *ctx);

/* The answers as the handlers pack them (tests, fuzzing): a new message
 * whose strings are borrowed from the pods and the device and DRA managers
 * (valid until one of them changes); free it with nl_podres_msg_free(). */
V1__ListPodResourcesResponse *nl_podres_list(nl_podres_t *p);
/* Get's answer, or NULL when the pod manager has no such pod. */
V1__GetPodResourcesResponse *nl_podres_get(nl_podres_t *p, const char *ns, const char *name);
V1__AllocatableResourcesResponse *nl_podres_allocatable(nl_podres_t *p);
void nl_podres_msg_free(ProtobufCMessage *msg);

#endif
