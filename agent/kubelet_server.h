/* The kubelet server on port 10250 as the agent wires it (kubelet_server.c):
 * its options from the configuration and the agent's own handlers. Internal
 * to agent/. */
#ifndef NL_KUBELET_SERVER_H
#define NL_KUBELET_SERVER_H

#include "agent/kubelet.h"

/* Creates the server when enableServer is set, unless a webhook is configured
 * without an API server to ask (a warning says so). Returns 0, or -1 with *err naming the setting that failed. */
int nl__kubelet_server_init(nl_kubelet_t *k, nl_err_t **err);
int nl__kubelet_server_listen(nl_kubelet_t *k, nl_err_t **err);
/* Stops it; releases one pending count of the kubelet when done. */
void nl__kubelet_server_stop(nl_kubelet_t *k);

#endif
