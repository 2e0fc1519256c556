/* The device manager's wiring (agent/kubelet_devices.h). */
#include "agent/kubelet_devices.h"

#include <stdlib.h>
#include <string.h>

#include "agent/kubelet_pods.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static void on_changed(void *ctx) {
  nl_kubelet_t *k = ctx;
  if (k->node_up && !k->stopping) nl_node_status_kick(&k->node);
}

/* A device a pod holds changed health: its status is generated again. */
static void on_pod_changed(void *ctx, const char *uid) {
  nl_kubelet_t *k = ctx;
  if (!k->stopping) nl_pod_workers_sync_now(&k->workers, uid);
}

void nl__kubelet_devices_status(nl_kubelet_t *k, const nl_pod_t *pod, nl_pod_status_t *st) {
  if (k->resource_health && k->devices_up && k->devices.state == NL_DEVICES_RUNNING)
    nl_devices_resource_status(&k->devices, pod->metadata.uid, st);
}

/* Every pod source gave its first list: the pods are known. */
static bool pods_synced(void *ctx) {
  nl_kubelet_t *k = ctx;
  return nl_pod_config_sources_ready(&k->pod_config);
}

/* The runtime's view at the PLEG's last relist. Before its first one the
 * agent knows nothing of the runtime yet: a container it assigned devices
 * before its start counts as running (an agent restart keeps them, as
 * before the relist could say). */
static bool container_running(void *ctx, const char *uid, const char *name) {
  nl_kubelet_t *k = ctx;
  if (!k->pleg_up || k->pleg.relists == k->pleg.relist_failures) return true;
  const nl_rt_pod_status_t *st = nl_pleg_get(&k->pleg, uid);
  for (size_t i = 0; st && i < st->n_containers; i++)
    if (st->containers[i].name && !strcmp(st->containers[i].name, name) &&
        st->containers[i].state == NL_RT_CONTAINER_RUNNING)
      return true;
  return false;
}

int nl__kubelet_devices_start(nl_kubelet_t *k, nl_err_t **err) {
  char *dir = nl_xasprintf("%s/device-plugins", k->cfg->root_dir);
  nl_devices_opts_t o = {
      .dir = dir,
      .changed = on_changed,
      .changed_ctx = k,
      .pod_active = nl__kubelet_pod_active,
      .pod_active_ctx = k,
      .sources_ready = pods_synced,
      .container_running = container_running,
      .pod_changed = k->resource_health ? on_pod_changed : NULL,
      .pod_changed_ctx = k,
      .metrics = &k->metrics,
  };
  int rc = nl_devices_start(&k->devices, k->loop, &o, err);
  free(dir);
  k->devices_up = true; /* stopped in any case */
  k->pending++;
  return rc < 0 ? nl_err_wrap(err, "device manager") : 0;
}

int nl__kubelet_podres_start(nl_kubelet_t *k, nl_err_t **err) {
  char *dir = nl_xasprintf("%s/pod-resources", k->cfg->root_dir);
  nl_podres_deps_t d = {
      .pods = &k->pods,
      .pod_active = nl__kubelet_pod_active,
      .pod_active_ctx = k,
      .pods_synced = pods_synced,
      .devices = k->devices_up ? &k->devices : NULL,
      .dra = k->dra_up ? &k->dra : NULL,
      .metrics = &k->metrics,
  };
  int rc = nl_podres_start(&k->podres, k->loop, dir, &d, err);
  free(dir);
  k->podres_up = true; /* stopped in any case */
  k->pending++;
  return rc;
}

static void on_podres_stopped(nl_podres_t *p, void *ctx) {
  (void)p;
  nl__kubelet_release(ctx);
}

void nl__kubelet_podres_stop(nl_kubelet_t *k) {
  if (k->podres_up) nl_podres_stop(&k->podres, on_podres_stopped, k);
}

static void on_devices_stopped(nl_devices_t *m, void *ctx) {
  (void)m;
  nl__kubelet_release(ctx);
}

void nl__kubelet_devices_stop(nl_kubelet_t *k) {
  if (k->devices_up) nl_devices_stop(&k->devices, on_devices_stopped, k);
}

bool nl__kubelet_devices_container(void *ctx, const nl_pod_t *pod, const nl_container_t *c,
                                   void (*done)(void *arg,
                                                V1beta1__ContainerAllocateResponse *const *resps,
                                                size_t n, const char *err),
                                   void *arg) {
  nl_kubelet_t *k = ctx;
  if (!k->devices_up) return false;
  return nl_devices_container(&k->devices, pod, c, done, arg);
}

nl_node_extended_t *nl__kubelet_devices_extended(nl_kubelet_t *k, size_t *n) {
  *n = 0;
  if (!k->devices_up || k->devices.state != NL_DEVICES_RUNNING) return NULL;
  return nl_devices_counts(&k->devices, n);
}

bool nl__kubelet_devices_admit(nl_kubelet_t *k, const nl_pod_t *pod, const char **reason,
                               char **msg) {
  if (!k->devices_up) return true;
  *reason = NL_DEVICES_ADMIT_REASON;
  return nl_devices_admit(&k->devices, pod, msg);
}
