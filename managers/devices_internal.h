/* Internal to managers/devices*.c: the resources, the plugin endpoints and the
 * assignments that devices.c (registration, ListAndWatch) and
 * devices_alloc.c (admission, Allocate, the checkpoint) share. */
#ifndef NL_DEVICES_INTERNAL_H
#define NL_DEVICES_INTERNAL_H

#include "cri/conn.h"
#include "managers/devices.h"

typedef struct nl_dev {
  char *id;
  bool healthy;
} nl_dev_t;

/* One plugin endpoint, from its registration to its connection's close:
 *   CONNECTING GetDevicePluginOptions asked (the client waits for the socket);
 *             the plugin's Register call waits for its answer, and the
 *             resource is not touched until it comes (upstream's
 *             PluginConnected): an error refuses the registration
 *   DIALING   ListAndWatch sent, no list yet
 *   WATCHING  a list received; each new one replaces the resource's devices
 *   ENDED     the stream ended or was refused: the client is being stopped
 *   CLOSING   waiting for the client's close callback, which frees it
 * An endpoint replaced by a new registration of its resource is detached
 * (res NULL) and ended. */
typedef enum nl_dev_ep_state {
  NL_DEV_EP_CONNECTING,
  NL_DEV_EP_DIALING,
  NL_DEV_EP_WATCHING,
  NL_DEV_EP_ENDED,
  NL_DEV_EP_CLOSING,
} nl_dev_ep_state_t;

typedef struct nl_dev_resource nl_dev_resource_t;

/* Answers the plugin's Register call: NL_GRPC_OK (msg NULL) or an error. */
typedef void (*nl_dev_reply_fn)(void *ctx, int code, const char *msg);

typedef struct nl_dev_endpoint {
  nl_list_t link; /* m->endpoints */
  nl_devices_t *m;
  nl_dev_resource_t *res; /* NULL while CONNECTING, once replaced or the manager stops */
  nl_dev_ep_state_t state;
  char *name;             /* the resource registered */
  char *path;
  nl_dev_reply_fn reply;  /* the Register call, while CONNECTING */
  void *reply_ctx;
  nl_cri_client_t client; /* embedded; the endpoint is freed in its stop callback */
  nl_cri_stream_t *watch; /* ListAndWatch while DIALING or WATCHING */
} nl_dev_endpoint_t;

struct nl_dev_resource {
  char *name;
  nl_dev_endpoint_t *ep; /* the current endpoint; NULL when it ended */
  nl_dev_t *devs;        /* the last list, in the plugin's order */
  size_t n_devs;
  bool pre_start_required, preferred_allocation;
  uint64_t ended_at;     /* loop ms when its endpoint ended; 0: running */
  bool expired;          /* grace period over: capacity 0 */
};

/* Devices of one resource assigned to one container of one pod. */
typedef struct nl_dev_alloc {
  nl_list_t link; /* m->allocs */
  char *pod_uid, *container, *resource;
  char **ids;
  size_t n_ids;
  uint8_t *resp; /* packed ContainerAllocateResponse; NULL until Allocate answered */
  size_t resp_len;
  bool admitting; /* made by the admission in progress: undone if it fails */
} nl_dev_alloc_t;

nl_dev_alloc_t *nl__dev_alloc_find(const nl_devices_t *m, const char *uid, const char *container,
                                   const char *resource);
void nl__dev_alloc_free(nl_dev_alloc_t *a);
nl_dev_alloc_t *nl__dev_alloc_add(nl_devices_t *m, const char *uid, const char *container,
                                  const char *resource);
void nl__dev_alloc_push(nl_dev_alloc_t *a, const char *id);
/* Asks for the checkpoint to be written with the state as it is now, on the
 * thread pool (one write at a time; a failure is logged). Returns the
 * generation that holds this state: written once m->ckpt_done reaches it. */
uint64_t nl__dev_checkpoint_write(nl_devices_t *m);
/* A checkpoint write ended (err: why it failed, else NULL): the container
 * requests waiting for it go on, or fail with err. */
void nl__dev_requests_checkpointed(nl_devices_t *m, const char *err);
/* Drops what a checkpoint write held of the manager (devices.c). */
void nl__dev_unref(nl_devices_t *m);
/* Reads it into m->allocs (and the registered resources, with no devices until
 * their plugin registers). Returns 0, or -1 with *err. A missing file is 0. */
int nl__dev_checkpoint_read(nl_devices_t *m, nl_err_t **err);
/* Fails the container requests in flight (the manager stops). */
void nl__dev_requests_cancel(nl_devices_t *m);
/* The Registration service's handler on a request's bytes. A request refused
 * at once returns its gRPC code with *msg (allocated). An accepted one returns
 * NL_GRPC_OK: the plugin's socket is dialled and its GetDevicePluginOptions
 * asked (within timeout_ms, the Register call's deadline; 0: the call
 * timeout), and reply(reply_ctx, ...) answers the plugin later, from the loop:
 * OK once the plugin is in use, or UNKNOWN "failed to get device plugin
 * options: rpc error: ..." and the plugin is not used. The fuzz target calls
 * it directly. */
int nl__dev_register(nl_devices_t *m, const uint8_t *data, size_t len, uint64_t timeout_ms,
                     nl_dev_reply_fn reply, void *reply_ctx, char **msg);
/* A plugin's new list (now) replaces old: the pods holding a device whose
 * health changed are told (opts.pod_changed), as upstream's device update
 * channel (devices_health.c). */
void nl__dev_health_changed(nl_devices_t *m, const char *resource, const nl_dev_t *old,
                            size_t n_old, const nl_dev_t *now, size_t n_now);
/* The resource, created when missing. */
nl_dev_resource_t *nl__dev_resource(nl_devices_t *m, const char *name);

/* Whether a device of resource is assigned to any container. */
bool nl__dev_in_use(const nl_devices_t *m, const char *resource, const char *id);

/* ---- GetPreferredAllocation (devices_preferred.c) ---- */

/* What the plugin is asked for one assignment: the devices it may choose
 * from (the assignment's own, then the free healthy ones), those it must
 * keep (shared with a container of the pod already allocated: an init
 * container's, reused) and how many. */
typedef struct nl_dev_pref {
  char **available, **must;
  size_t n_available, n_must;
  size_t size;
} nl_dev_pref_t;
void nl__dev_pref_init(const nl_devices_t *m, const nl_dev_alloc_t *a, nl_dev_pref_t *p);
void nl__dev_pref_free(nl_dev_pref_t *p);
/* NULL when the answer is a valid choice for p (one container response, p's
 * size, distinct available devices, every one it must keep), else why
 * (allocated). */
char *nl__dev_pref_check(const nl_dev_pref_t *p, const V1beta1__PreferredAllocationResponse *r);
typedef void (*nl_dev_pref_done_fn)(void *ctx);
/* Asks ep's plugin for a's devices within the call timeout; its valid answer
 * becomes a's devices (the pod's containers not yet allocated that reused
 * one a gives up take its replacement), an invalid one or a failure keeps
 * them and logs why. done(ctx) runs from the loop once the answer is in. */
void nl__dev_preferred(nl_devices_t *m, nl_dev_alloc_t *a, nl_dev_endpoint_t *ep,
                       nl_dev_pref_done_fn done, void *ctx);

#endif
