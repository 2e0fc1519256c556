#include "agent/kubelet_metrics.h"

#include "agent/kubelet_pods.h"
#include <string.h>

#include "reactor/buf.h"
#include "reactor/xalloc.h"

typedef struct running {
  double pods, containers[4];
} running_t;

static bool count_pod(const nl_rt_pod_status_t *st, void *ctx) {
  running_t *r = ctx;
  /* upstream: a pod with a ready sandbox; containers by their CRI state */
  for (size_t i = 0; i < st->n_sandboxes; i++)
    if (st->sandboxes[i].state == NL_RT_SANDBOX_READY) {
      r->pods++;
      break;
    }
  for (size_t i = 0; i < st->n_containers; i++)
    if ((unsigned)st->containers[i].state < 4) r->containers[st->containers[i].state]++;
  return true;
}

static void dra_driver(void *ctx, const char *driver, size_t n) {
  nl_kmetrics_dra_in_use(&((nl_kubelet_t *)ctx)->metrics, driver, (double)n);
}

static void collect(void *ctx) {
  nl_kubelet_t *k = ctx;
  running_t r = {0};
  if (k->pleg_up) nl_pleg_foreach(&k->pleg, count_pod, &r);
  nl_kmetrics_set_running(&k->metrics, r.pods, r.containers);
  if (k->dra_up) {
    nl_kmetrics_dra_in_use_reset(&k->metrics);
    nl_kmetrics_dra_in_use(&k->metrics, NULL, (double)nl_dra_claims_in_use(&k->dra, dra_driver, k));
  }
}

void nl__kubelet_metrics_init(nl_kubelet_t *k) {
  nl_kmetrics_init(&k->metrics, k->node_name);
  k->metrics.collect = collect;
  k->metrics.collect_ctx = k;
}

/* /metrics/cadvisor: the pod's cgroup (only with cgroupsPerQOS: otherwise
 * pods share one) and its ready sandbox. */
static void meta_pod(void *ctx, const char *uid, char **cgroup, char **sandbox_id) {
  nl_kubelet_t *k = ctx;
  const nl_pod_t *pod = nl_pod_manager_get(&k->pods, uid);
  if (pod && k->cgroups_up && k->cgroups.per_qos) *cgroup = nl_cgroups_pod_parent(&k->cgroups, pod);
  const nl_rt_pod_status_t *st = k->pleg_up ? nl_pleg_get(&k->pleg, uid) : NULL;
  for (size_t i = 0; st && i < st->n_sandboxes; i++)
    if (st->sandboxes[i].state == NL_RT_SANDBOX_READY) {
      *sandbox_id = nl_xstrdup(st->sandboxes[i].id);
      break;
    }
}

static void meta_container(void *ctx, const char *uid, const char *id, char **image,
                           int64_t *created_ns) {
  nl_kubelet_t *k = ctx;
  const nl_rt_pod_status_t *st = k->pleg_up ? nl_pleg_get(&k->pleg, uid) : NULL;
  for (size_t i = 0; st && i < st->n_containers; i++)
    if (strcmp(st->containers[i].id, id) == 0) {
      if (st->containers[i].image) *image = nl_xstrdup(st->containers[i].image);
      *created_ns = st->containers[i].created_at;
      return;
    }
}

void nl__kubelet_stats_init(nl_kubelet_t *k) {
  nl_stats_server_init(&k->stats, k->loop, &k->cri, k->node_name, k->cfg->root_dir);
  k->stats.meta = (nl_stats_meta_t){
      .cgroup_fs = k->cgroups_up ? k->cgroups.fs_root : NULL,
      .cgroup_v2 = k->cgroups_up && k->cgroups.v2,
      .runtime_endpoint = k->cfg->container_runtime_endpoint,
      .pod_logs_dir = k->cfg->pod_logs_dir,
      .pod = meta_pod,
      .container = meta_container,
      .ctx = k,
  };
  if (k->cgroups_up && k->cgroups.kubepods)
    k->stats.pods_cgroup = k->cgroups.systemd ? nl_cgroups_name_systemd(k->cgroups.kubepods)
                                              : nl_xstrdup(k->cgroups.kubepods);
  k->stats.meta.pods_cgroup = k->stats.pods_cgroup;
  k->stats_up = true;
  k->cri_users++;
}

static void stats_stopped(void *ctx) { nl__kubelet_cri_user_stopped(ctx); }

void nl__kubelet_stats_stop(nl_kubelet_t *k) {
  if (!k->stats_up) return;
  k->stats_up = false;
  nl_stats_server_stop(&k->stats, stats_stopped, k);
}

static void serve(nl_metrics_t *reg, nl_http_resp_t *resp) {
  nl_buf_t out = NL_BUF_INIT;
  nl_metrics_encode(reg, &out);
  nl_http_resp_header(resp, "Content-Type", NL_METRICS_CONTENT_TYPE);
  nl_http_resp_send(resp, 200, out.data ? out.data : "", out.len);
  nl_buf_free(&out);
}

void nl__kubelet_metrics_handler(void *ctx, const nl_http_req_t *req,
                                 const nl_kserver_user_t *user, nl_http_resp_t *resp) {
  (void)req, (void)user;
  serve(&((nl_kubelet_t *)ctx)->metrics.reg, resp);
}

void nl__kubelet_metrics_probes_handler(void *ctx, const nl_http_req_t *req,
                                        const nl_kserver_user_t *user, nl_http_resp_t *resp) {
  (void)req, (void)user;
  serve(&((nl_kubelet_t *)ctx)->metrics.probes, resp);
}
