/* The kubelet's metrics as the agent wires them (managers/metrics.h), and the
 * server's handlers for /metrics and /metrics/probes. Internal to agent/. */
#ifndef NL_KUBELET_METRICS_H
#define NL_KUBELET_METRICS_H

#include "agent/kserver.h"
#include "agent/kubelet.h"

/* Registers the metrics (k->node_name set) and the scrape-time figures
 * (running pods and containers from the PLEG cache). */
void nl__kubelet_metrics_init(nl_kubelet_t *k);

/* /stats/summary, /metrics/resource and /metrics/cadvisor (k->stats, with
 * the pods' cgroups and images from the kubelet): a CRI user of the kubelet
 * from init until its stop has finished. */
void nl__kubelet_stats_init(nl_kubelet_t *k);
void nl__kubelet_stats_stop(nl_kubelet_t *k);

/* GET /metrics and /metrics/probes; ctx is the nl_kubelet_t. */
void nl__kubelet_metrics_handler(void *ctx, const nl_http_req_t *req,
                                 const nl_kserver_user_t *user, nl_http_resp_t *resp);
void nl__kubelet_metrics_probes_handler(void *ctx, const nl_http_req_t *req,
                                        const nl_kserver_user_t *user, nl_http_resp_t *resp);

#endif
