/* The image credential provider plugins in the kubelet
 * (--image-credential-provider-config, --image-credential-provider-bin-dir;
 * managers/credprov.h does the work). */
#ifndef NL_KUBELET_CREDPROV_H
#define NL_KUBELET_CREDPROV_H

#include "agent/kubelet.h"

/* Reads the configuration and checks the executables (start-up, before the
 * runtime manager is made); nothing when the config flag is unset. A bad
 * configuration fails the start, as upstream's. */
int nl__kubelet_credprov_init(nl_kubelet_t *k, nl_err_t **err);
/* Kills the plugins still running; the kubelet's release waits for them. */
void nl__kubelet_credprov_stop(nl_kubelet_t *k);

#endif
