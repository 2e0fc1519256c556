/* The eviction manager and the garbage collector of the agent
 * (agent/kubelet_evict.c): both CRI users. */
#ifndef NL_KUBELET_EVICT_H
#define NL_KUBELET_EVICT_H

#include "agent/kubelet.h"

/* Parses the eviction settings. Returns 0 or -1 with *err naming the setting. */
int nl__kubelet_evict_init(nl_kubelet_t *k, nl_err_t **err);
void nl__kubelet_evict_start(nl_kubelet_t *k);
void nl__kubelet_evict_stop(nl_kubelet_t *k);

#endif
