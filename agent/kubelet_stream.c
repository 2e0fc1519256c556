#include "agent/kubelet_stream.h"

#include <string.h>

#include "agent/kubelet_pods.h"
#include "reactor/xalloc.h"

void nl__kubelet_streams_init(nl_kubelet_t *k) {
  nl_kserver_stream_init(&k->streams, k->loop, &k->cri, nl__kubelet_stream_lookup, k);
  k->streams_up = true;
  k->cri_users++;
}

static void streams_stopped(void *ctx) { nl__kubelet_cri_user_stopped(ctx); }

void nl__kubelet_streams_stop(nl_kubelet_t *k) {
  if (!k->streams_up) return;
  k->streams_up = false;
  nl_kserver_stream_stop(&k->streams, streams_stopped, k);
}

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
