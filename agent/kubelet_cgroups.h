/* The agent's container manager (kubelet_cgroups.c): the cgroups manager
 * built from the configuration. Internal to agent/. */
#ifndef NL_KUBELET_CGROUPS_H
#define NL_KUBELET_CGROUPS_H

#include "agent/kubelet.h"

/* Runs the start-up checks and builds the hierarchy (blocking: before the
 * loop runs). On return k->cgroups_up says whether k->cgroups needs a stop,
 * failed or not. Returns 0, or -1 with *err. */
int nl__kubelet_cgroups_init(nl_kubelet_t *k, nl_err_t **err);
/* Stops the manager (after the runtime manager, its user) and releases the
 * kubelet's hold when done. */
void nl__kubelet_cgroups_stop(nl_kubelet_t *k);

#endif
