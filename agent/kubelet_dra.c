/* The DRA manager's and the plugin manager's wiring (agent/kubelet_dra.h). */
#include "agent/kubelet_dra.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kubelet_devices.h"
#include "agent/kubelet_pods.h"
#include "reactor/fs.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* Whether any container of the pod runs, at the PLEG's last relist (before
 * the first one, every pod counts as running: nothing is unprepared on a
 * partial view). */
static bool pod_running(void *ctx, const char *uid) {
  nl_kubelet_t *k = ctx;
  if (!k->pleg_up || k->pleg.relists == k->pleg.relist_failures) return true;
  const nl_rt_pod_status_t *st = nl_pleg_get(&k->pleg, uid);
  for (size_t i = 0; st && i < st->n_containers; i++)
    if (st->containers[i].state == NL_RT_CONTAINER_RUNNING) return true;
  return false;
}

static bool sources_ready(void *ctx) {
  nl_kubelet_t *k = ctx;
  return nl_pod_config_sources_ready(&k->pod_config) && k->pleg.relists > k->pleg.relist_failures;
}

/* A device a pod holds changed health: its status is made again. */
static void on_pod_changed(void *ctx, const char *uid) {
  nl_kubelet_t *k = ctx;
  if (!k->stopping) nl_pod_workers_sync_now(&k->workers, uid);
}

void nl__kubelet_dra_status(nl_kubelet_t *k, const nl_pod_t *pod, nl_pod_status_t *st) {
  /* the messages too (ResourceHealthStatusMessage, beta and on upstream) */
  if (k->resource_health && k->dra_up && k->dra.state == NL_DRA_RUNNING)
    nl_dra_resource_status(&k->dra, pod, st, true);
}

int nl__kubelet_dra_start(nl_kubelet_t *k, nl_err_t **err) {
  /* upstream's setupDataDirs: where kubelet plugins put their sockets */
  char *plugins = nl_xasprintf("%s/plugins", k->cfg->root_dir);
  if (nl_mkdir_p(plugins, 0750) < 0)
    nl_warn("DRA: create %s: %s", plugins, strerror(errno));
  free(plugins);
  char *state = nl_xasprintf("%s/%s", k->cfg->root_dir, NL_DRA_STATE_FILE);
  nl_dra_opts_t o = {
      .state_path = state,
      .kube = k->kube,
      .node_name = k->node_name,
      .pod_active = nl__kubelet_pod_active,
      .pod_running = pod_running,
      .sources_ready = sources_ready,
      .health = k->resource_health,
      .pod_changed = on_pod_changed,
      .ctx = k,
      .metrics = &k->metrics,
  };
  int rc = nl_dra_start(&k->dra, k->loop, &o, err);
  free(state);
  k->dra_up = true; /* stopped in any case */
  k->pending++;
  if (rc < 0) return nl_err_wrap(err, "DRA manager");
  char *dir = nl_xasprintf("%s/%s", k->cfg->root_dir, NL_PLUGINS_DIR);
  nl_plugins_opts_t po = {.dir = dir, .handlers = &k->dra.handler, .n_handlers = 1};
  rc = nl_plugins_start(&k->plugins, k->loop, &po, err);
  free(dir);
  if (rc < 0) return nl_err_wrap(err, "plugin manager");
  k->plugins_up = true;
  k->pending++;
  return 0;
}

static void on_plugins_stopped(nl_plugins_t *m, void *ctx) {
  (void)m;
  nl__kubelet_release(ctx);
}

static void on_dra_stopped(nl_dra_t *m, void *ctx) {
  (void)m;
  nl__kubelet_release(ctx);
}

void nl__kubelet_dra_stop(nl_kubelet_t *k) {
  if (k->plugins_up) nl_plugins_stop(&k->plugins, on_plugins_stopped, k);
  if (k->dra_up) nl_dra_stop(&k->dra, on_dra_stopped, k);
}

bool nl__kubelet_dra_prepare(void *ctx, const nl_pod_t *pod,
                             void (*done)(void *arg, const char *err), void *arg) {
  nl_kubelet_t *k = ctx;
  if (!nl_dra_pod_has_claims(pod)) return false;
  if (!k->dra_up || k->dra.state != NL_DRA_RUNNING) {
    done(arg, "prepare dynamic resources: kubelet is stopping");
    return true;
  }
  nl_dra_prepare(&k->dra, pod, done, arg);
  return true;
}

void nl__kubelet_dra_housekeeping(nl_kubelet_t *k) {
  if (k->dra_up && !k->stopping) nl_dra_housekeeping(&k->dra);
}

bool nl__kubelet_dra_unprepare(nl_kubelet_t *k, const char *uid, void (*done)(void *ctx),
                               void *ctx) {
  if (!k->dra_up || k->stopping) return false;
  return nl_dra_unprepare_pod(&k->dra, uid, done, ctx);
}

/* ---- the containers' devices: the device plugins' and the claims' ---- */

typedef struct cdev {
  void (*done)(void *arg, V1beta1__ContainerAllocateResponse *const *resps, size_t n,
               const char *err);
  void *arg;
  char **ids;
  size_t n_ids;
} cdev_t;

/* The claims' CDI devices go to the container as one more answer. */
static void with_claims(void *ctx, V1beta1__ContainerAllocateResponse *const *resps, size_t n,
                        const char *err) {
  cdev_t *cd = ctx;
  if (err) {
    cd->done(cd->arg, NULL, 0, err);
  } else {
    V1beta1__ContainerAllocateResponse extra = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
    V1beta1__CDIDevice *devs = nl_xcalloc(cd->n_ids + 1, sizeof *devs);
    V1beta1__CDIDevice **dp = nl_xcalloc(cd->n_ids + 1, sizeof *dp);
    for (size_t i = 0; i < cd->n_ids; i++) {
      v1beta1__cdidevice__init(&devs[i]);
      devs[i].name = cd->ids[i];
      dp[i] = &devs[i];
    }
    extra.cdi_devices = dp;
    extra.n_cdi_devices = cd->n_ids;
    V1beta1__ContainerAllocateResponse **all = nl_xcalloc(n + 2, sizeof *all);
    for (size_t i = 0; i < n; i++) all[i] = resps[i];
    all[n] = &extra;
    cd->done(cd->arg, all, n + 1, NULL);
    free(all);
    free(dp);
    free(devs);
  }
  for (size_t i = 0; i < cd->n_ids; i++) free(cd->ids[i]);
  free(cd->ids);
  free(cd);
}

bool nl__kubelet_container_devices(void *ctx, const nl_pod_t *pod, const nl_container_t *c,
                                   void (*done)(void *arg,
                                                V1beta1__ContainerAllocateResponse *const *resps,
                                                size_t n, const char *err),
                                   void *arg) {
  nl_kubelet_t *k = ctx;
  /* a container with no claims may still have the scheduler's claim's
   * devices (extended resources backed by DRA) */
  if (!k->dra_up || (!c->resources.n_claims && !nl_dra_pod_has_claims(pod)))
    return nl__kubelet_devices_container(ctx, pod, c, done, arg);
  char **ids = NULL, *err = NULL;
  size_t n = 0;
  if (nl_dra_container_cdi(&k->dra, pod, c, &ids, &n, &err) < 0) {
    done(arg, NULL, 0, err);
    free(err);
    return true;
  }
  if (n == 0) return nl__kubelet_devices_container(ctx, pod, c, done, arg);
  cdev_t *cd = nl_xcalloc(1, sizeof *cd);
  *cd = (cdev_t){done, arg, ids, n};
  if (!nl__kubelet_devices_container(ctx, pod, c, with_claims, cd)) with_claims(cd, NULL, 0, NULL);
  return true;
}
