#include "agent/kubelet_stream.h"

#include <string.h>

#include "reactor/xalloc.h"

int nl__kubelet_stream_lookup(void *ctx, const char *ns, const char *name, const char *uid,
                              const char *container, char **id, char **msg) {
  nl_kubelet_t *k = ctx;
  *id = *msg = NULL;
  const nl_pod_t *pod = nl_pod_manager_get_by_name(&k->pods, ns, name);
  if (!pod) {
    *msg = nl_xstrdup("pod does not exist");
    return 404;
  }
  if (uid && strcmp(uid, pod->metadata.uid) != 0) {
    *msg = nl_xstrdup("pod not found");
    return 404;
  }
  const nl_rt_pod_status_t *st = nl_pleg_get(&k->pleg, pod->metadata.uid);
  if (!container) {
    if (st && st->n_sandboxes && st->sandboxes[0].state == NL_RT_SANDBOX_READY) {
      *id = nl_xstrdup(st->sandboxes[0].id);
      return 0;
    }
    *msg = nl_xasprintf("pod not found (\"%s_%s\")", name, ns);
    return 500;
  }
  for (size_t i = 0; st && i < st->n_containers; i++) {
    const nl_rt_container_t *c = &st->containers[i];
    if (c->state == NL_RT_CONTAINER_RUNNING && strcmp(c->name, container) == 0) {
      *id = nl_xstrdup(c->id);
      return 0;
    }
  }
  *msg = nl_xasprintf("container not found (\"%s\")", container);
  return 500;
}
