/* The kubelet's side of /exec, /attach and /portForward: which CRI container
 * or sandbox a request names (agent/kserver_stream.h does the rest). Internal
 * to agent/. */
#ifndef NL_KUBELET_STREAM_H
#define NL_KUBELET_STREAM_H

#include "agent/kubelet.h"

/* An nl_kserver_stream_lookup_fn; ctx is the nl_kubelet_t. As upstream: a pod
 * unknown by name is 404 "pod does not exist", another uid 404 "pod not found";
 * no running container of that name is 500 `container not found ("c")`, no
 * sandbox 500 `pod not found ("name_ns")` (the runtime's view, from PLEG). */
/* The sessions' owner: a CRI user of the kubelet (cri_users) from init until
 * its stop has finished. */
void nl__kubelet_streams_init(nl_kubelet_t *k);
void nl__kubelet_streams_stop(nl_kubelet_t *k);

int nl__kubelet_stream_lookup(void *ctx, const char *ns, const char *name, const char *uid,
                              const char *container, char **id, char **msg);

#endif
