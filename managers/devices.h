/* The device manager (upstream pkg/kubelet/cm/devicemanager): device plugins
 * hand a node's devices to its pods.
 *
 * The manager serves the Registration service (cri/deviceplugin.proto,
 * "/v1beta1.Registration/Register") on <dir>/kubelet.sock with the gRPC server
 * of cri/grpc_server.h; dir is <root-dir>/device-plugins, whose stale socket
 * files are removed at start so that plugins see the kubelet restart and
 * register again. A registration is checked (version "v1beta1", an extended
 * resource name); the plugin's socket <dir>/<endpoint> is then dialled with
 * the project's gRPC client (cri/conn.h) and, as upstream's PluginConnected,
 * its GetDevicePluginOptions asked before Register is answered: an error
 * refuses the registration and the plugin is not used; its answer gives the
 * plugin's options. Then its ListAndWatch stream is read: each message is the
 * resource's whole device list with each device's health. A second
 * registration of a resource replaces the first once it is connected. When the stream ends (the plugin went away, sent what it may not),
 * the resource's devices become unhealthy at once (allocatable 0) and leave
 * capacity after a grace period (upstream's endpointStopGracePeriod, 5 min)
 * unless the plugin registers again.
 *
 * Each plugin endpoint is one state machine (CONNECTING, DIALING, WATCHING,
 * ENDED, CLOSING; devices.c's step()). Bounds: a resource has at most max_devices
 * devices and a message at most max_msg bytes; a list over either ends the
 * stream with a log line naming the resource, as does a message that does not
 * decode. Nothing a plugin does blocks the loop.
 *
 * Pods: nl_devices_admit() picks devices for each container that asks for a
 * plugin's resource (init containers first, their devices reused by the app
 * containers, as upstream); a pod asking for more than are free is refused
 * with upstream's UnexpectedAdmissionError. nl_devices_container() asks the
 * plugin's Allocate (and PreStartContainer when the plugin wants it) before a
 * container is created and hands the answers to the runtime manager. Device
 * assignments and Allocate answers are checkpointed (upstream's
 * kubelet_internal_checkpoint JSON, written with fsync and rename) and read
 * back at start: running containers keep their devices and nothing is
 * allocated twice.
 *
 * Lifetime: nl_devices_t is embedded in its owner; nl_devices_stop() closes
 * the server, every plugin connection and the timer, and calls done once
 * every close callback has run. */
#ifndef NL_DEVICES_H
#define NL_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "agent/model/node.h"
#include "agent/model/pod.h"
#include "cri/deviceplugin.pb-c.h"
#include "cri/grpc_server.h"
#include "managers/metrics.h"
#include "managers/status.h"
#include "reactor/error.h"
#include "reactor/list.h"
#include "reactor/map.h"

#define NL_DEVICES_API_VERSION "v1beta1"
#define NL_DEVICES_SOCKET "kubelet.sock"
#define NL_DEVICES_CHECKPOINT "kubelet_internal_checkpoint"
#define NL_DEVICES_GRACE_MS (5 * 60 * 1000) /* endpointStopGracePeriod */
#define NL_DEVICES_ADMIT_REASON "UnexpectedAdmissionError"

typedef struct nl_devices nl_devices_t;
typedef void (*nl_devices_done_fn)(nl_devices_t *m, void *ctx);

typedef struct nl_devices_opts {
  const char *dir;          /* <root-dir>/device-plugins (copied) */
  uint64_t grace_ms;        /* 0: NL_DEVICES_GRACE_MS */
  size_t max_devices;       /* per resource; 0: 1024 */
  size_t max_msg;           /* ListAndWatch and Allocate answers; 0: 1 MiB */
  uint64_t call_timeout_ms; /* Allocate, PreStartContainer; 0: 30 s */
  uint64_t connect_wait_ms; /* a plugin socket that does not answer; 0: 5 s */
  /* Capacity or allocatable changed: the node status should be sent. */
  void (*changed)(void *ctx);
  void *changed_ctx;
  /* Whether a pod still holds its devices (upstream's activePods): NULL:
   * every pod does. Asked before devices are counted free. */
  bool (*pod_active)(void *ctx, const char *uid);
  void *pod_active_ctx;
  /* Whether every pod source gave its first list (ctx pod_active_ctx):
   * until then no pod's devices are freed, as upstream's
   * UpdateAllocatedDevices (just after a start, a running pod not yet seen
   * again is not gone). NULL: always. */
  bool (*sources_ready)(void *ctx);
  /* Whether the runtime runs the pod's container (ctx pod_active_ctx): a pod
   * admitted again with devices assigned before (the checkpoint's) keeps
   * them for a running container whatever its plugin's state (an agent
   * restart); a container not running needs its plugin registered and its
   * devices healthy again (a node reboot), as upstream's devicesToAllocate.
   * NULL: none runs. */
  bool (*container_running)(void *ctx, const char *uid, const char *container);
  /* The health of a device the pod holds changed: its status should be
   * generated again (upstream's ResourceHealthStatus updates). NULL: not told. */
  void (*pod_changed)(void *ctx, const char *uid);
  void *pod_changed_ctx;
  /* kubelet_device_plugin_registration_total, _alloc_duration_seconds; NULL:
   * not recorded. */
  nl_kmetrics_t *metrics;
} nl_devices_opts_t;

typedef enum nl_devices_state { NL_DEVICES_RUNNING, NL_DEVICES_STOPPING, NL_DEVICES_STOPPED } nl_devices_state_t;

struct nl_devices {
  uv_loop_t *loop;
  nl_devices_opts_t opts; /* dir owned, defaults filled in */
  char *socket_path;      /* <dir>/kubelet.sock */
  char *checkpoint_path;  /* <dir>/kubelet_internal_checkpoint */
  nl_devices_state_t state;
  nl_grpc_server_t server;
  uv_timer_t grace_timer; /* the earliest end of a grace period */
  nl_map_t resources;     /* name -> struct nl_dev_resource */
  nl_list_t endpoints;    /* every endpoint not yet freed */
  nl_list_t allocs;       /* struct nl_dev_alloc: (pod, container, resource) -> devices */
  nl_list_t requests;     /* container requests in flight */
  int open;               /* server, timer, endpoints: done at 0 */
  nl_devices_done_fn done;
  void *done_ctx;
  uint64_t registrations; /* accepted Register calls (tests, metrics) */
  uint64_t ckpt_want;     /* checkpoint generations asked for */
  uint64_t ckpt_done;     /* the last one written (or failed) */
  struct {
    uv_work_t work;
    char *text;           /* what the write in flight writes, owned */
    uint64_t writing;     /* its generation */
    int err;              /* its errno, 0 */
    const char *step;
    bool busy;
  } ckpt;
};

/* Reads the checkpoint, removes stale sockets in dir (the checkpoint stays),
 * listens on <dir>/kubelet.sock. Returns 0, or -1 with *err when the socket
 * cannot be served (then m must still be stopped). A checkpoint that cannot
 * be read is a warning: the manager starts empty. */
int nl_devices_start(nl_devices_t *m, uv_loop_t *loop, const nl_devices_opts_t *opts,
                     nl_err_t **err);
/* Closes everything; done (may be NULL) runs from a close callback. Container
 * requests in flight are answered with an error first. */
void nl_devices_stop(nl_devices_t *m, nl_devices_done_fn done, void *ctx);

/* ---- node status ---- */

typedef nl_node_extended_t nl_devices_count_t; /* name valid until the next change */
/* Every resource a plugin registered: capacity (all devices; 0 once its
 * grace period is over), allocatable (healthy ones). Returns a new array
 * (free it) of *n entries, sorted by name. */
nl_devices_count_t *nl_devices_counts(const nl_devices_t *m, size_t *n);

/* ---- admission ---- */

/* upstream's resource allocator admit handler: picks devices for each
 * container of pod that asks for a plugin's resource (its limit), reusing
 * what the pod already has. Returns true when admitted (or nothing is
 * asked); false with *msg (allocated) like "Allocate failed due to requested
 * number of devices unavailable for example.com/resource. Requested: 3,
 * Available: 2, which is unexpected" (reason NL_DEVICES_ADMIT_REASON).
 * Resources no plugin registered are not checked (cluster-level resources). */
bool nl_devices_admit(nl_devices_t *m, const nl_pod_t *pod, char **msg);
/* Forgets the devices of pods no longer active (pod_active) and checkpoints. */
void nl_devices_release_inactive(nl_devices_t *m);
/* Device IDs assigned to a container for a resource (borrowed; NULL: none). */
char *const *nl_devices_assigned(const nl_devices_t *m, const char *pod_uid,
                                 const char *container, const char *resource, size_t *n);

/* ---- pod status ---- */

/* upstream's UpdateAllocatedResourcesStatus (ResourceHealthStatus): each
 * container status of st (regular containers) gets an allocatedResourcesStatus
 * entry per resource whose devices the container holds, each device
 * "Healthy" or "Unhealthy" as its plugin last listed it. */
void nl_devices_resource_status(const nl_devices_t *m, const char *pod_uid, nl_pod_status_t *st);

/* ---- the pod resources API (managers/podresources.h) ---- */

/* Called once per resource with its device IDs (borrowed for the call). */
typedef void (*nl_devices_ids_fn)(void *ctx, const char *resource, const char *const *ids,
                                  size_t n);
/* The devices assigned to a container, resource by resource in the order
 * they were assigned. */
void nl_devices_foreach_assigned(const nl_devices_t *m, const char *pod_uid,
                                 const char *container, nl_devices_ids_fn fn, void *ctx);
/* Upstream's GetAllocatableDevices: the healthy devices of each resource
 * whose plugin is registered (what the Node's allocatable counts), by resource
 * name; a resource without any is left out. */
void nl_devices_foreach_allocatable(const nl_devices_t *m, nl_devices_ids_fn fn, void *ctx);

/* ---- containers ---- */

/* The plugins' answers for one container: valid during the callback only.
 * err is NULL, or the reason the container must not start ("device plugin
 * for example.com/resource: Allocate: rpc error: ..."). */
typedef void (*nl_devices_container_fn)(void *ctx, V1beta1__ContainerAllocateResponse *const *resps,
                                        size_t n, const char *err);
/* Allocate (once per container; the answer is checkpointed) and
 * PreStartContainer (each time, when the plugin asks for it) for each
 * resource assigned to the container, then fn once. Returns false when the
 * container has no devices (fn is not called); fn may run before this
 * returns. */
bool nl_devices_container(nl_devices_t *m, const nl_pod_t *pod, const nl_container_t *c,
                          nl_devices_container_fn fn, void *ctx);

/* ---- pure helpers ---- */

/* upstream v1helper.IsExtendedResourceName: a qualified name with a domain
 * prefix, not in kubernetes.io/ (except requests.* is refused too), whose
 * "requests." form is a valid qualified name too. */
bool nl_devices_extended_name(const char *name);

#endif
