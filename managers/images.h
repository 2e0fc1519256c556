/* The image manager (upstream pkg/kubelet/images): EnsureImageExists with the
 * pull policy, per-image pull back-off, and serialized or parallel pulls.
 *
 * A request is embedded by its caller (nl_images_req_t) and completes through its
 * callback exactly once, never from inside nl_images_ensure(), unless
 * nl_images_cancel() is called first. Strings passed in are copied. */
#ifndef NL_IMAGES_H
#define NL_IMAGES_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "cri/conn.h"
#include "managers/credprov.h"
#include "managers/events.h"
#include "managers/keyring.h"
#include "reactor/backoff.h"
#include "reactor/list.h"
#include "reactor/map.h"

/* Upstream error names (images/types.go): the waiting reasons. */
#define NL_IMAGE_ERR_PULL "ErrImagePull"
#define NL_IMAGE_ERR_PULL_BACKOFF "ImagePullBackOff"
#define NL_IMAGE_ERR_NEVER_PULL "ErrImageNeverPull"
#define NL_IMAGE_ERR_INVALID_NAME "InvalidImageName"
#define NL_IMAGE_ERR_INSPECT "ImageInspectError"

typedef struct nl_images {
  uv_loop_t *loop;
  nl_cri_client_t *cri;
  nl_backoff_table_t backoff; /* "<pod uid>_<image>" as upstream */
  nl_map_t last_fail;         /* key -> uint64_t ms of the last failed pull */
  bool serialize;
  int max_parallel; /* 0: unlimited */
  int running;      /* pulls in flight */
  nl_list_t queue;  /* pulls waiting for a slot */
  uint64_t (*now_ms)(void *ctx);
  void *now_ctx;
  uint64_t stats_pulls; /* PullImage calls made */
  nl_event_sink_t events; /* Pulling, Pulled, Failed, BackOff, ...; fn NULL: logged */
  /* The credential provider plugins (NULL: none), asked before a pull as
   * upstream's node keyring is: their credentials are tried after those of
   * the pod's pull secrets. Must outlive every job (close it first). */
  nl_credprov_t *credprov;
} nl_images_t;

struct nl_images_job;

/* The outcome: image_ref is the runtime's image id (NULL on failure); reason is
 * NULL on success or one of NL_IMAGE_ERR_*; message says why (borrowed). */
typedef void (*nl_images_cb)(const char *image_ref, const char *reason, const char *message,
                             void *ctx);

/* The credentials of a pull, asked for (with the ctx of nl_images_ensure) only
 * when the image must be pulled, as upstream reads the pull secrets at
 * PullImage. Returns 0 with *keyring (borrowed until the call returns; NULL:
 * none); -1 with *msg (owned) when a pull secret cannot be used, which fails
 * the pull as a failed pull does (upstream MakeDockerKeyring's error); 1 with
 * *msg when a pull secret is not known yet: nothing is pulled and no back-off
 * starts (the caller syncs the pod again when the secret arrives). */
typedef int (*nl_images_creds_fn)(void *ctx, const nl_keyring_t **keyring, char **msg);

typedef struct nl_images_req {
  struct nl_images_job *job; /* private */
} nl_images_req_t;

/* backoff_initial_ms/max_ms 0: upstream's 10 s and 5 min. */
void nl_images_init(nl_images_t *im, uv_loop_t *loop, nl_cri_client_t *cri, bool serialize,
                    int max_parallel, uint64_t backoff_initial_ms, uint64_t backoff_max_ms);
/* Frees what im owns. Requests still pending must have been cancelled or
 * completed (the CRI client completes them with CANCELLED when it stops). */
void nl_images_free(nl_images_t *im);

/* EnsureImageExists: applies the default tag, ImageStatus, then per
 * pull_policy ("Always", "IfNotPresent", "Never"; NULL: IfNotPresent) either
 * answers at once, fails with ErrImageNeverPull, fails with ImagePullBackOff
 * while the back-off of (pod uid, image) runs, or pulls (ErrImagePull on
 * failure, which starts/extends the back-off). ref is the container's event
 * reference (its uid is the pod's; copied); pod_desc names the pod in logs.
 * Events as upstream's image manager records them go to im->events. With
 * creds (may be NULL), each credential the keyring has for the image is tried
 * in turn until one pulls; the failure then names every error (upstream's
 * aggregate: "[e1, e2]"). */
void nl_images_ensure(nl_images_t *im, nl_images_req_t *req, const nl_event_ref_t *ref,
                      const char *pod_desc, const char *image, const char *pull_policy,
                      nl_images_creds_fn creds, nl_images_cb cb, void *ctx);
/* The callback of req will not run; a pull in flight finishes in the
 * background. */
void nl_images_cancel(nl_images_req_t *req);

/* applyDefaultImageTag: a new string with ":latest" added when the image has
 * neither tag nor digest, or NULL when the name is invalid. */
char *nl_images_default_tag(const char *image);

#endif
