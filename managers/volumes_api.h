/* The content of a pod's volumes that come from the API: configMap, secret,
 * downwardAPI and projected (serviceAccountToken, configMap, secret,
 * downwardAPI sources), as upstream's volume plugins make their payloads
 * (pkg/volume/{configmap,secret,downwardapi,projected}). It is resolved on the
 * loop (the object and token caches are loop-only), then written on the thread
 * pool by nl__volumes_setup_sync with the atomic writer. */
#ifndef NL_VOLUMES_API_H
#define NL_VOLUMES_API_H

#include "managers/runtime.h"
#include "managers/volumes.h"

/* The payloads of every API volume of the pod, or -1 with *err, e.g.
 * `MountVolume.SetUp failed for volume "cfg" : configmap "app" not found` (the
 * words of upstream's FailedMount event). Missing objects and keys marked
 * optional are left out. out is filled even on failure (free it with
 * nl_api_volumes_free). */
int nl_volumes_api_resolve(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                           nl_api_volumes_t *out, nl_err_t **err);

/* The pod has a serviceAccountToken projection. */
bool nl_volumes_api_wants_tokens(const nl_pod_t *pod);

#endif
