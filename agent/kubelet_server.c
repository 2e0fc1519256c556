#include "agent/kubelet_server.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kserver.h"
#include "agent/kserver_logs.h"
#include "agent/kserver_stream.h"
#include "agent/kubelet_metrics.h"
#include "agent/kubelet_pods.h"
#include "agent/stats.h"
#include "reactor/log.h"
#include "reactor/utf8.h"
#include "reactor/xalloc.h"

static void healthz(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                    nl_http_resp_t *resp) {
  nl_kubelet_t *k = ctx;
  nl_agent_server_healthz(&k->server, req, resp);
}

static void pods(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                 nl_http_resp_t *resp) {
  nl_buf_t out = NL_BUF_INIT;
  nl__kubelet_pods_json(ctx, &out);
  nl_http_resp_header(resp, "Content-Type", "application/json");
  nl_http_resp_send(resp, 200, out.data, out.len);
  nl_buf_free(&out);
}

/* upstream's GetRunningPods + ToAPIPod: the runtime's pods with a ready
 * sandbox or a running container, each with its running containers' names
 * and images only. */
static bool running_pod(const nl_rt_pod_status_t *st, void *ctx) {
  json_t *items = ctx;
  bool ready = false;
  for (size_t i = 0; i < st->n_sandboxes; i++)
    if (st->sandboxes[i].state == NL_RT_SANDBOX_READY) ready = true;
  json_t *containers = json_array();
  for (size_t i = 0; i < st->n_containers; i++) {
    const nl_rt_container_t *c = &st->containers[i];
    if (c->state != NL_RT_CONTAINER_RUNNING) continue;
    json_array_append_new(containers,
                          json_pack("{s:o, s:o, s:{}}", "name", nl_json_str(c->name ? c->name : ""),
                                    "image", nl_json_str(c->image ? c->image : ""), "resources"));
  }
  if (!ready && json_array_size(containers) == 0) {
    json_decref(containers);
    return true;
  }
  json_array_append_new(
      items, json_pack("{s:{s:o, s:o, s:o, s:n}, s:{s:o}, s:{}}", "metadata", "name",
                       nl_json_str(st->name ? st->name : ""), "namespace",
                       nl_json_str(st->namespace_ ? st->namespace_ : ""), "uid", nl_json_str(st->uid ? st->uid : ""),
                       "creationTimestamp", "spec", "containers", containers, "status"));
  return true;
}

static void runningpods(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                        nl_http_resp_t *resp) {
  nl_kubelet_t *k = ctx;
  json_t *items = json_array();
  nl_pleg_foreach(&k->pleg, running_pod, items);
  json_t *list = json_pack("{s:s, s:s, s:{}, s:o}", "kind", "PodList", "apiVersion", "v1",
                           "metadata", "items", items);
  char *out = nl_json_xdumps(list, JSON_COMPACT);
  json_decref(list);
  nl_http_resp_header(resp, "Content-Type", "application/json");
  nl_http_resp_send_str(resp, 200, out);
  free(out);
}

/* enableSystemLogHandler false: upstream answers /logs/ this way. */
static void logs_disabled(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                          nl_http_resp_t *resp) {
  (void)ctx, (void)req, (void)user;
  nl_http_resp_send_str(resp, 405, "logs endpoint is disabled.\n");
}

static void configz(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                    nl_http_resp_t *resp) {
  nl_kubelet_t *k = ctx;
  char *json = nl_config_to_json(k->cfg);
  nl_http_resp_header(resp, "Content-Type", "application/json");
  nl_http_resp_send_str(resp, 200, json);
  free(json);
}

/* upstream's StringFlagPutHandler(GlogSetter): PUT a level, 406 otherwise. */
static void debug_flags_v(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                          nl_http_resp_t *resp) {
  nl_http_resp_header(resp, "Content-Type", "text/plain");
  nl_http_resp_header(resp, "X-Content-Type-Options", "nosniff");
  if (strcmp(req->method, "PUT") != 0) {
    nl_http_resp_send_str(resp, 406, "unsupported http method\n");
    return;
  }
  char *end = NULL;
  unsigned long v = strtoul(req->body, &end, 10);
  if (!*req->body || *end || req->body[0] == '-' || v > 0xffffffffUL) {
    char *msg = nl_xasprintf("strconv.ParseUint: parsing \"%s\": invalid syntax\n", req->body);
    nl_http_resp_send_str(resp, 400, msg);
    free(msg);
    return;
  }
  nl_log_set_verbosity(v > 100 ? 100 : (int)v);
  nl_info("log verbosity set to %lu by %s", v, user->name);
  char *msg = nl_xasprintf("successfully set klog.logging.verbosity to %s\n", req->body);
  nl_http_resp_send_str(resp, 200, msg);
  free(msg);
}

static int container_for_logs(void *ctx, const char *ns, const char *pod, const char *container,
                              bool previous, char **id, char **msg) {
  return nl__kubelet_container_for_logs(ctx, ns, pod, container, previous, id, msg);
}

int nl__kubelet_server_init(nl_kubelet_t *k, nl_err_t **err) {
  const nl_kubelet_config_t *c = k->cfg;
  if (!c->enable_server) return 0;
  bool webhook = c->authn_webhook_enabled || strcmp(c->authz_mode, "Webhook") == 0;
  bool read_only_only = !k->kube && webhook;
  if (read_only_only) {
    /* Upstream refuses to start ("no client provided, cannot use webhook
     * authentication"); a standalone edge node keeps running its pods, and
     * serves readOnlyPort, which needs no authentication. */
    nl_warn("the kubelet server's port %d is off: %s needs an API server (--kubeconfig); set "
            "authentication.webhook.enabled: false and authorization.mode: AlwaysAllow to "
            "serve without one; %s",
            c->port,
            c->authn_webhook_enabled ? "authentication.webhook.enabled" : "authorization.mode Webhook",
            c->read_only_port > 0 ? "readOnlyPort is served" : "readOnlyPort is 0 (off) too");
    if (c->read_only_port <= 0) return 0;
  }
  /* serverTLSBootstrap: the stored serving pair when it is valid, else the
   * self-signed one until the first CSR is issued; tlsCertFile is not used, as
   * upstream's server certificate manager replaces it. */
  const char *cert = c->tls_cert_file, *key = c->tls_private_key_file;
  if (c->server_tls_bootstrap && k->creds) {
    cert = key = k->creds->server_path;
    if ((c->tls_cert_file && *c->tls_cert_file) || (c->tls_private_key_file && *c->tls_private_key_file))
      nl_warn("serverTLSBootstrap is set: tlsCertFile and tlsPrivateKeyFile are not used");
  }
  nl_kserver_opts_t o = {
      .node_name = k->node_name,
      .address = c->address,
      .port = c->port,
      .read_only_port = c->read_only_port,
      .cert_file = cert,
      .key_file = key,
      .cert_dir = c->cert_dir,
      .hostname = k->node_name,
      .node_ip = c->node_ip,
      .client_ca_file = c->authn_x509_client_ca_file,
      .tls_min_version = c->tls_min_version,
      .tls_cipher_suites = (const char *const *)c->tls_cipher_suites.v,
      .n_tls_cipher_suites = c->tls_cipher_suites.n,
      .anonymous = c->authn_anonymous_enabled,
      .webhook = c->authn_webhook_enabled,
      .authn_ttl_ms = (uint64_t)(c->authn_webhook_cache_ttl / 1000000),
      .authz_webhook = strcmp(c->authz_mode, "Webhook") == 0,
      .allowed_ttl_ms = (uint64_t)(c->authz_webhook_cache_authorized_ttl / 1000000),
      .denied_ttl_ms = (uint64_t)(c->authz_webhook_cache_unauthorized_ttl / 1000000),
      .read_only_only = read_only_only,
  };
  if (nl_kserver_new(&k->kserver, k->loop, &o, k->kube, err) < 0) return -1;
  k->pending++;
  /* As upstream: /healthz, /pods and the like always (readOnlyPort too); the
   * debugging handlers (logs, exec, flags) with enableDebuggingHandlers. */
  const nl_kserver_route_t base[] = {
      {"GET", "/healthz", healthz, k, true},
      {"GET", "/healthz/", healthz, k, true},
      {"GET", "/pods", pods, k, true},
      {"GET", "/pods/", pods, k, true},
  };
  nl_kserver_route(k->kserver, base, sizeof base / sizeof base[0]);
  const nl_kserver_route_t figures[] = {
      {"GET", "/metrics", nl__kubelet_metrics_handler, k, true},
      {"GET", "/metrics/probes", nl__kubelet_metrics_probes_handler, k, true},
      {"GET", "/metrics/cadvisor", nl_stats_cadvisor_handler, &k->stats, true},
      {"GET", "/metrics/resource", nl_stats_resource_handler, &k->stats, true},
      {"GET", "/stats/summary", nl_stats_summary_handler, &k->stats, true},
  };
  nl_kserver_route(k->kserver, figures, sizeof figures / sizeof figures[0]);
  if (c->enable_debugging_handlers) {
    const nl_kserver_route_t streams[] = {
        {"GET", "/exec/", nl_kserver_exec_handler, &k->streams, false},
        {"POST", "/exec/", nl_kserver_exec_handler, &k->streams, false},
        {"GET", "/attach/", nl_kserver_attach_handler, &k->streams, false},
        {"POST", "/attach/", nl_kserver_attach_handler, &k->streams, false},
        {"GET", "/portForward/", nl_kserver_port_forward_handler, &k->streams, false},
        {"POST", "/portForward/", nl_kserver_port_forward_handler, &k->streams, false},
    };
    nl_kserver_route(k->kserver, streams, sizeof streams / sizeof streams[0]);
    const nl_kserver_route_t debug[] = {
        {"GET", "/configz", configz, k, false},
        /* Upstream serves both; the cluster suite reads it without the slash. */
        {"GET", "/runningpods", runningpods, k, false},
        {"GET", "/runningpods/", runningpods, k, false},
        {NULL, "/debug/flags/v", debug_flags_v, k, false, 64},
    };
    nl_kserver_route(k->kserver, debug, sizeof debug / sizeof debug[0]);
    k->logs = (nl_kserver_logs_t){.loop = k->loop,
                                  .cri = &k->cri,
                                  .lookup = container_for_logs,
                                  .lookup_ctx = k};
    const nl_kserver_route_t logs = {"GET", "/containerLogs/", nl_kserver_logs_handler, &k->logs};
    nl_kserver_route(k->kserver, &logs, 1);
    k->nodelog = (nl_kserver_nodelog_t){.loop = k->loop, .query = c->enable_system_log_query};
    const nl_kserver_route_t nodelog = {
        "GET", "/logs/", c->enable_system_log_handler ? nl_kserver_nodelog_handler : logs_disabled,
        &k->nodelog};
    nl_kserver_route(k->kserver, &nodelog, 1);
  }
  return 0;
}

int nl__kubelet_server_listen(nl_kubelet_t *k, nl_err_t **err) {
  return k->kserver ? nl_kserver_listen(k->kserver, err) : 0;
}

static void stopped(void *ctx) { nl__kubelet_release(ctx); }

void nl__kubelet_server_stop(nl_kubelet_t *k) {
  if (!k->kserver) return;
  nl_kserver_stop(nl_steal(&k->kserver), stopped, k);
}
