/* The DRA manager's insides, shared by dra.c (plugins, preparation,
 * housekeeping), dra_claim.c (names and the ResourceClaim's checks),
 * dra_wipe.c (ResourceSlice clean-up) and dra_checkpoint.c. */
#ifndef NL_DRA_INTERNAL_H
#define NL_DRA_INTERNAL_H

#include "managers/dra.h"

/* A registered kubelet plugin of a driver; its connection is the project's
 * gRPC client, freed in the client's close callback. */
typedef struct nl_dra_plugin {
  nl_list_t link;
  nl_dra_t *m;
  char *driver;
  char *endpoint;
  const char *path_prepare;   /* the chosen service's methods (static strings) */
  const char *path_unprepare;
  nl_cri_client_t client;
  bool closing;
  nl_cri_stream_t *health;   /* NodeWatchResources while it runs (dra_health.c) */
  uint64_t health_retry_at;  /* loop time: the stream is not started again before */
  bool health_unimplemented; /* the plugin has no health service */
} nl_dra_plugin_t;

typedef struct nl_dra_device {
  char *driver, *pool, *device, *share_id; /* share_id NULL: none */
  char **requests;
  size_t n_requests;
  char **cdi;
  size_t n_cdi;
} nl_dra_device_t;

/* upstream's ClaimInfo: one claim, the pods that use it, its devices. */
typedef struct nl_dra_claim {
  nl_list_t link;
  char *uid, *name, *ns;
  char **drivers; /* every driver of its allocation, sorted, unique */
  size_t n_drivers;
  char **pods;    /* pod UIDs */
  size_t n_pods;
  bool prepared;
  int unpreparing; /* NodeUnprepareResources calls in flight */
  bool unprepare_failed;
  nl_dra_device_t *devs;
  size_t n_devs;
} nl_dra_claim_t;

/* What a pod's claim resolves to (upstream resourceclaim.Name). */
typedef struct nl_dra_ref {
  const char *name; /* the ResourceClaim's name; NULL: nothing to prepare */
  bool owned;       /* made from a template: the pod must own it */
} nl_dra_ref_t;

/* upstream resourceclaim.Name: -1 with *err (allocated) when a template's
 * claim is not created yet. */
int nl__dra_resolve(const nl_pod_t *pod, const nl_pod_resource_claim_t *pc, nl_dra_ref_t *ref,
                    char **err);
const nl_pod_resource_claim_t *nl__dra_pod_claim(const nl_pod_t *pod, const char *name);
/* The claim the scheduler made for the pod's extended resources backed by
 * DRA (status.extendedResourceClaimStatus, DRAExtendedResource), or NULL. */
const struct nl_pod_ext_claim_status *nl__dra_ext_claim(const nl_pod_t *pod);

/* A ResourceClaim read from the API, checked for the pod. */
typedef struct nl_dra_claim_view {
  char *uid;
  char **drivers; /* sorted, unique */
  size_t n_drivers;
} nl_dra_claim_view_t;
/* Reads the claim's JSON and makes upstream's checks, in its order: the pod
 * owns it when owned (IsForPod), it is reserved for the pod
 * (IsReservedForPod), it is allocated. Returns 0, or -1 with *err (allocated,
 * upstream's words). */
int nl__dra_claim_check(const char *json, size_t len, const char *ns, const char *name,
                        bool owned, const char *pod_ns, const char *pod_name,
                        const char *pod_uid, nl_dra_claim_view_t *out, char **err);
void nl__dra_claim_view_free(nl_dra_claim_view_t *v);

nl_dra_claim_t *nl__dra_claim_find(const nl_dra_t *m, const char *ns, const char *name);
void nl__dra_claim_free(nl_dra_claim_t *c);
void nl__dra_strv_free(char **v, size_t n);
bool nl__dra_strv_has(char *const *v, size_t n, const char *s);
void nl__dra_strv_add(char ***v, size_t *n, const char *s); /* unless there */

/* ---- the checkpoint (dra_checkpoint.c) ---- */
/* Asks for the current state to be written; returns its generation (done
 * once m->ckpt.done reaches it; m->ckpt.err then says how it went). */
uint64_t nl__dra_checkpoint_write(nl_dra_t *m);
/* Reads the checkpoint into m->claims; a warning when it cannot. */
void nl__dra_checkpoint_read(nl_dra_t *m);
/* A write finished (dra.c): preparations waiting for it go on. */
void nl__dra_checkpoint_written(nl_dra_t *m);

/* ---- device health (dra_health.c) ---- */

/* Starts the plugin's health stream unless it runs, the plugin has none or
 * its retry is not due (housekeeping calls it again). */
void nl__dra_health_start(nl_dra_plugin_t *p);
/* Ends it and forgets what it said (the plugin goes). */
void nl__dra_health_stop(nl_dra_plugin_t *p);
/* Tells the pods of devices whose health just timed out to Unknown. */
void nl__dra_health_tick(nl_dra_t *m);
void nl__dra_health_free(nl_dra_t *m);

/* ---- ResourceSlice clean-up (dra_wipe.c) ---- */
typedef struct nl_dra_driver {
  nl_list_t link;
  nl_dra_t *m;
  char *name;           /* "": every driver of the node (at start) */
  uint64_t due;         /* loop time */
  uint64_t backoff_ms;
  nl_kube_req_t *req;   /* the DELETE in flight */
  bool cancelled;       /* a plugin came back: forgotten when req answers */
} nl_dra_driver_t;
void nl__dra_wipe_schedule(nl_dra_t *m, const char *driver, uint64_t delay_ms);
void nl__dra_wipe_cancel(nl_dra_t *m, const char *driver);
void nl__dra_wipe_stop(nl_dra_t *m);
void nl__dra_release(nl_dra_t *m); /* one of m->open is done */

#endif
