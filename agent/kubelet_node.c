/* The agent's cluster membership: with a kubeconfig, the API client, the API pod
 * source, the node manager (registration, node status, the Lease), the status
 * manager, the mirror pods, the Services watch (pods' environment), the
 * ConfigMaps and Secrets the pods reference, the service-account tokens of
 * projected volumes and the event recorder's sender. Without one, events are
 * only logged and the agent runs standalone. The node manager is a CRI user
 * (it asks the runtime for Status, Version and images), so it stops before the
 * CRI client; the status and mirror
 * managers stop before the node manager (they read its Node); the recorder stops
 * after the node manager (flushing for a second at most); the API client stops
 * after every user of it has cancelled its requests. */
#include "agent/kubelet_node.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cert_manager.h"
#include "agent/kserver.h"
#include "agent/kube/csr.h"
#include "agent/kubelet_devices.h"
#include "agent/kubelet_pods.h"
#include "managers/node_cri.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* The node manager's one context is the CRI client (nl_node_cri_query's). */
static bool pleg_healthy(void *ctx, int64_t now_ns, nl_err_t **err) {
  (void)now_ns; /* the node's wall clock; the PLEG keeps its own */
  nl_kubelet_t *k = container_of((nl_cri_client_t *)ctx, nl_kubelet_t, cri);
  return nl_pleg_healthy(&k->pleg, nl_pleg_monotonic_ns(NULL), err);
}

static nl_node_extended_t *extended(void *ctx, size_t *n) {
  return nl__kubelet_devices_extended(container_of((nl_cri_client_t *)ctx, nl_kubelet_t, cri), n);
}

static void pressure(void *ctx, bool *memory, bool *disk, bool *pid) {
  nl_kubelet_t *k = container_of((nl_cri_client_t *)ctx, nl_kubelet_t, cri);
  if (!k->eviction_up) return;
  *memory = nl_eviction_memory_pressure(&k->eviction);
  *disk = nl_eviction_disk_pressure(&k->eviction);
  *pid = nl_eviction_pid_pressure(&k->eviction);
}

#define EVENTS_FLUSH_MS 1000

static const char *mirror_uid(void *ctx, const char *ns, const char *name, const char *uid) {
  nl_kubelet_t *k = ctx;
  return nl_mirror_manager_uid(&k->mirrors, ns, name, uid);
}

static const char *node_uid(void *ctx) { return nl_node_uid(&((nl_kubelet_t *)ctx)->node); }

/* A new mirror pod: its static pod's status goes there now. */
static void mirror_created(void *ctx) { nl_status_manager_sync(&((nl_kubelet_t *)ctx)->statuses); }

/* An object arrived, changed or went away: the pods that use it sync again (a
 * pod that waited for it starts; volumes get the new content). */
static void object_changed(nl_object_kind_t kind, const char *ns, const char *name, void *ctx) {
  nl_kubelet_t *k = ctx;
  size_t n;
  const nl_pod_t **pods = nl_pod_manager_list(&k->pods, &n);
  for (size_t i = 0; i < n; i++)
    if (pods[i]->metadata.namespace_ && strcmp(pods[i]->metadata.namespace_, ns) == 0 &&
        nl_objects_pod_references(pods[i], kind, name))
      nl_pod_workers_sync_now(&k->workers, pods[i]->metadata.uid);
  free(pods);
}

/* upstream's isPodInTerminatedState, by phase: such a pod needs no objects */
static bool pod_terminated(const nl_pod_t *pod) {
  const char *phase = pod->status ? pod->status->phase : NULL;
  return phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
}

void nl__kubelet_objects_update(nl_kubelet_t *k, nl_pod_op_t op, const nl_pod_t *pod) {
  if (!k->objects) return;
  if (op == NL_POD_REMOVE || pod_terminated(pod))
    nl_objects_unregister_pod(k->objects, pod->metadata.uid);
  else if (op != NL_POD_RECONCILE) /* a status change: the spec is the same */
    nl_objects_register_pod(k->objects, pod);
}

static int objects_init(nl_kubelet_t *k, nl_err_t **err) {
  const char *s = k->cfg->config_map_and_secret_change_detection_strategy;
  nl_objects_opts_t o = {
      .strategy = s && strcmp(s, "Get") == 0     ? NL_OBJECTS_GET
                  : s && strcmp(s, "Cache") == 0 ? NL_OBJECTS_CACHE
                                                 : NL_OBJECTS_WATCH,
      .changed = object_changed,
      .changed_ctx = k,
  };
  if (nl_objects_new(&k->objects, k->loop, k->kube, &o, err) < 0) return -1;
  k->runtime.opts.objects = nl_objects_lookup(k->objects);
  return 0;
}

static void free_taints(nl_kubelet_t *k) {
  for (size_t i = 0; i < k->n_taints; i++) {
    free(k->taints[i].key);
    free(k->taints[i].value);
    free(k->taints[i].effect);
  }
  free(k->taints);
  k->taints = NULL;
  k->n_taints = 0;
}

/* ---- certificates -------------------------------------------------------- */

/* As upstream's certificate managers ask (pkg/kubelet/certificate/kubelet.go). */
static const char *const client_usages[] = {"digital signature", "key encipherment",
                                            "client auth", NULL};
static const char *const server_usages[] = {"digital signature", "key encipherment",
                                            "server auth", NULL};

static void join(nl_kubelet_t *k);

static void on_client_cert(void *ctx, const char *pem, const char *path,
                           const nl_x509_info_t *info) {
  (void)path;
  (void)info;
  nl_kubelet_t *k = ctx;
  nl_err_t *err = NULL;
  if (nl_kube_client_set_cert(k->kube, pem, pem, &err) < 0) {
    nl_error("%s", nl_err_msg(err));
    nl_err_free(&err);
    return;
  }
  if (!k->joined) join(k);
}

static void on_server_cert(void *ctx, const char *pem, const char *path,
                           const nl_x509_info_t *info) {
  (void)info;
  nl_kubelet_t *k = ctx;
  nl_err_t *err = NULL;
  if (!k->kserver) return;
  if (nl_kserver_set_cert(k->kserver, pem, &err) < 0) {
    nl_error("%s", nl_err_msg(err));
    nl_err_free(&err);
    return;
  }
  nl_info("kubelet server: serving with %s", path);
}

static int client_certs_init(nl_kubelet_t *k, const nl_kubelet_creds_t *cr, nl_err_t **err) {
  const nl_kubelet_config_t *cfg = k->cfg;
  /* Without rotation, a kubeconfig's own credentials are used as they are:
   * its certificate, or a token and no certificate at all (upstream's kubelet
   * has no certificate manager then); only a bootstrap needs one. */
  if (!cfg->rotate_certificates && (cr->client_pem || !cr->bootstrap.path)) return 0;
  if (cr->bootstrap.path) {
    nl_kube_client_opts_t bo = {.kubeconfig = &cr->bootstrap, .qps = cfg->kube_api_qps,
                                .burst = cfg->kube_api_burst};
    if (nl_kube_client_new(&k->bootstrap_kube, k->loop, &bo, err) < 0)
      return nl_err_wrap(err, "--bootstrap-kubeconfig");
  }
  char *cn = nl_xasprintf("system:node:%s", k->node_name);
  nl_certmgr_opts_t o = {
      .signer = NL_KUBE_SIGNER_CLIENT,
      .usages = client_usages,
      .subject = {.cn = cn, .org = "system:nodes"},
      .cert_dir = cfg->cert_dir,
      .prefix = "kubelet-client",
      .kubeconfig = cr->write_kubeconfig ? cfg->kubeconfig : NULL,
      .boot = &cr->bootstrap,
      .rotate = cfg->rotate_certificates,
      .pem = cr->client_pem,
  };
  int rc = nl_certmgr_new(&k->client_certs, k->loop, k->kube, k->bootstrap_kube, &o,
                          on_client_cert, k, err);
  free(cn);
  return rc;
}

int nl__kubelet_server_certs_init(nl_kubelet_t *k, const nl_kubelet_creds_t *cr,
                                  nl_err_t **err) {
  const nl_kubelet_config_t *cfg = k->cfg;
  if (!cr || !cfg->server_tls_bootstrap || !k->kserver) return 0;
  char *cn = nl_xasprintf("system:node:%s", k->node_name);
  nl_certmgr_opts_t o = {
      .signer = NL_KUBE_SIGNER_SERVING,
      .usages = server_usages,
      .subject = {.cn = cn, .org = "system:nodes", .dns = k->node_name, .ips = cfg->node_ip},
      .cert_dir = cfg->cert_dir,
      .prefix = "kubelet-server",
      .rotate = true, /* upstream rotates a bootstrapped serving certificate always */
      .pem = cr->server_pem,
  };
  int rc = nl_certmgr_new(&k->server_certs, k->loop, k->kube, NULL, &o, on_server_cert, k, err);
  free(cn);
  return rc;
}

/* ---- init, start, stop ------------------------------------------------------ */

int nl__kubelet_node_init(nl_kubelet_t *k, const nl_kubelet_creds_t *cr, nl_err_t **err) {
  const nl_kubelet_config_t *cfg = k->cfg;
  const nl_kubeconfig_t *kc = cr ? &cr->kc : NULL;
  k->standalone = kc == NULL;
  if (kc) {
    if (kc->insecure)
      nl_warn("kubeconfig %s: insecure-skip-tls-verify is set: the API server's certificate "
              "is not verified",
              kc->path);
    nl_kube_client_opts_t co = {
        .kubeconfig = kc,
        .qps = cfg->kube_api_qps,
        .burst = cfg->kube_api_burst,
        .content_type = cfg->content_type,
    };
    if (nl_kube_client_new(&k->kube, k->loop, &co, err) < 0) return -1;
    if (client_certs_init(k, cr, err) < 0) return -1;
  }
  /* upstream's event client has its own rate limit (eventRecordQPS/eventBurst). */
  nl_events_opts_t eo = {.host = k->node_name, .qps = cfg->event_record_qps,
                         .burst = cfg->event_burst};
  nl_events_init(&k->events, k->loop, k->kube, &eo);
  k->events_up = true;
  k->pending++;
  nl_tokens_init(&k->tokens, k->loop, k->kube, cfg->root_dir);
  k->tokens_up = true;
  k->pending++;
  if (!kc) {
    nl_info("No api server defined - no events will be sent to API server");
    return 0;
  }
  if (nl_services_init(&k->services, k->loop, k->kube, err) < 0) return -1;
  k->services_up = true;
  k->pending++;
  /* upstream makes its RuntimeClass manager only with an API client */
  if (nl_runtimeclasses_init(&k->runtimeclasses, k->loop, k->kube, err) < 0) return -1;
  k->runtimeclasses_up = true;
  k->pending++;
  k->runtime.opts.runtime_class = nl_runtimeclasses_lookup;
  k->runtime.opts.runtime_class_ctx = &k->runtimeclasses;
  if (objects_init(k, err) < 0) return -1;
  char *checkpoint =
      cfg->pod_checkpoint ? nl_xasprintf("%s/%s", cfg->root_dir, NL_API_SOURCE_CHECKPOINT_FILE) : NULL;
  nl_api_source_opts_t ao = {.node_name = k->node_name, .checkpoint_path = checkpoint};
  int rc = nl_api_source_new(&k->api_source, k->loop, k->kube, &k->pod_config, &ao, err);
  free(checkpoint);
  if (rc < 0) return -1;

  k->taints = nl_xcalloc(cfg->register_with_taints.n ? cfg->register_with_taints.n : 1,
                         sizeof *k->taints);
  for (size_t i = 0; i < cfg->register_with_taints.n; i++) {
    if (nl_node_taint_parse(cfg->register_with_taints.v[i], &k->taints[i], err) < 0)
      return nl_err_wrap(err, "registerWithTaints[%zu]", i);
    k->n_taints++;
  }
  const nl_config_map_t *lb = &cfg->node_labels, *kr = &cfg->kube_reserved,
                        *sr = &cfg->system_reserved, *eh = &cfg->eviction_hard;
  nl_node_opts_t o = {
      .conf =
          {
              .name = k->node_name,
              .hostname = k->node_name,
              .node_ip = cfg->node_ip,
              .kubelet_version = NL_NODE_KUBE_VERSION "+nanolet." NANOLET_VERSION,
              .label_keys = (const char *const *)lb->keys,
              .label_values = lb->first,
              .n_labels = lb->n,
              .taints = k->taints,
              .n_taints = k->n_taints,
              .register_schedulable = cfg->register_schedulable,
              .controller_attach_detach = cfg->enable_controller_attach_detach,
              .port = cfg->port,
              .max_pods = cfg->max_pods,
              .max_images = cfg->node_status_max_images,
              .kube_reserved_keys = (const char *const *)kr->keys,
              .kube_reserved_values = kr->first,
              .n_kube_reserved = kr->n,
              .system_reserved_keys = (const char *const *)sr->keys,
              .system_reserved_values = sr->first,
              .n_system_reserved = sr->n,
              .eviction_keys = (const char *const *)eh->keys,
              .eviction_values = eh->first,
              .n_eviction = eh->n,
          },
      .paths = nl_node_paths_host(cfg->root_dir),
      .register_node = cfg->register_node,
      .update_ms = (uint64_t)(cfg->node_status_update_frequency / 1000000),
      .report_ms = (uint64_t)(cfg->node_status_report_frequency / 1000000),
      .lease_duration_s = cfg->node_lease_duration_seconds,
  };
  nl_node_deps_t d = {
      .kube = k->kube,
      .events = nl_events_sink(&k->events),
      .query_runtime = nl_node_cri_query,
      .pleg_healthy = pleg_healthy,
      .pressure = pressure,
      .extended = extended,
      .ctx = &k->cri,
  };
  if (nl_node_init(&k->node, k->loop, &o, &d, err) < 0) return -1;
  k->node_up = true;
  k->cri_users++;
  nl_status_manager_deps_t sd = {.kube = k->kube, .mirror_uid = mirror_uid, .ctx = k};
  nl_status_manager_init(&k->statuses, k->loop, &sd, NULL);
  nl_mirror_deps_t md = {.kube = k->kube, .node_uid = node_uid, .created = mirror_created,
                         .ctx = k};
  nl_mirror_manager_init(&k->mirrors, k->loop, &md, k->node_name, 0);
  return 0;
}

void nl__kubelet_node_start(nl_kubelet_t *k) {
  if (!k->node_up) {
    nl_event_ref_t ref = nl_event_node_ref(k->node_name);
    nl_events_record(&k->events, &ref, NL_EVENT_NORMAL, "Starting", "Starting kubelet.");
    nl_info("no kubeconfig given: running in standalone mode");
    return;
  }
  if (k->client_certs) nl_certmgr_start(k->client_certs);
  if (k->client_certs && !nl_certmgr_valid(k->client_certs)) {
    nl_info("no valid client certificate yet: joining the cluster at %s once one is issued",
            nl_kube_client_server(k->kube));
    return;
  }
  join(k);
}

/* The cluster half, once the API client has a certificate to present (events
 * and the serving CSR before it would go out anonymously and be refused). */
static void join(nl_kubelet_t *k) {
  k->joined = true;
  nl_event_ref_t ref = nl_event_node_ref(k->node_name);
  nl_events_record(&k->events, &ref, NL_EVENT_NORMAL, "Starting", "Starting kubelet.");
  nl_info("joining the cluster at %s as node %s", nl_kube_client_server(k->kube), k->node_name);
  if (k->server_certs) nl_certmgr_start(k->server_certs);
  nl_services_start(&k->services);
  nl_runtimeclasses_start(&k->runtimeclasses);
  nl_node_start(&k->node);
  nl_api_source_start(k->api_source);
  nl_status_manager_start(&k->statuses);
  nl_mirror_manager_start(&k->mirrors);
}

static void on_kube_stopped(void *ctx) { nl__kubelet_release(ctx); }

static void kube_stop(nl_kubelet_t *k) {
  if (k->bootstrap_kube) {
    nl_kube_client_t *b = k->bootstrap_kube;
    k->bootstrap_kube = NULL;
    k->pending++;
    nl_kube_client_stop(b, on_kube_stopped, k);
  }
  if (!k->kube) return;
  nl_kube_client_t *c = k->kube;
  k->kube = NULL;
  k->pending++;
  nl_kube_client_stop(c, on_kube_stopped, k);
}

static void kube_user_stopped(nl_kubelet_t *k) {
  assert(k->kube_users > 0);
  if (--k->kube_users == 0) kube_stop(k);
}

static void on_events_stopped(nl_events_t *e) {
  nl_kubelet_t *k = container_of(e, nl_kubelet_t, events);
  kube_user_stopped(k);
  nl__kubelet_release(k);
}

static void on_tokens_stopped(void *ctx) {
  nl_kubelet_t *k = ctx;
  kube_user_stopped(k);
  nl__kubelet_release(k);
}

static void on_services_stopped(nl_services_t *s) {
  nl_kubelet_t *k = container_of(s, nl_kubelet_t, services);
  kube_user_stopped(k);
  nl__kubelet_release(k);
}

static void on_runtimeclasses_stopped(nl_runtimeclasses_t *rc) {
  nl_kubelet_t *k = container_of(rc, nl_kubelet_t, runtimeclasses);
  kube_user_stopped(k);
  nl__kubelet_release(k);
}

/* The recorder sends what it can within a second, then lets the client go. */
static void events_stop(nl_kubelet_t *k) {
  if (!k->events_up) return;
  k->kube_users++;
  nl_events_stop(&k->events, EVENTS_FLUSH_MS, on_events_stopped);
}

static void on_node_stopped(nl_node_t *n) {
  nl_kubelet_t *k = container_of(n, nl_kubelet_t, node);
  free_taints(k);
  events_stop(k);
  kube_user_stopped(k);
  nl__kubelet_cri_user_stopped(k);
}

/* The status and mirror managers have cancelled their requests: the node
 * manager goes next. */
static void on_api_user_stopped(void *ctx) {
  nl_kubelet_t *k = ctx;
  if (--k->api_users_stopping == 0) nl_node_stop(&k->node, on_node_stopped);
}

static void on_objects_stopped(void *ctx) {
  nl_kubelet_t *k = ctx;
  kube_user_stopped(k);
  nl__kubelet_release(k);
}

static void on_api_source_stopped(void *ctx) {
  nl_kubelet_t *k = ctx;
  kube_user_stopped(k);
  nl__kubelet_release(k);
}

static void on_certs_stopped(void *ctx) {
  nl_kubelet_t *k = ctx;
  kube_user_stopped(k);
  nl__kubelet_release(k);
}

static void certs_stop(nl_kubelet_t *k, struct nl_certmgr **m) {
  if (!*m) return;
  nl_certmgr_t *c = *m;
  *m = NULL;
  k->kube_users++;
  k->pending++;
  nl_certmgr_stop(c, on_certs_stopped, k);
}

void nl__kubelet_node_stop(nl_kubelet_t *k) {
  k->kube_users++; /* held while the stops are issued */
  certs_stop(k, &k->client_certs);
  certs_stop(k, &k->server_certs);
  if (k->api_source) {
    nl_api_source_t *s = k->api_source;
    k->api_source = NULL;
    k->kube_users++;
    k->pending++;
    nl_api_source_stop(s, on_api_source_stopped, k);
  }
  if (k->services_up) {
    k->kube_users++;
    nl_services_stop(&k->services, on_services_stopped);
  }
  if (k->runtimeclasses_up) {
    /* syncs from here on find no class (the cache is emptied): a pod naming
     * one is not given the default handler instead */
    k->kube_users++;
    nl_runtimeclasses_stop(&k->runtimeclasses, on_runtimeclasses_stopped);
  }
  if (k->tokens_up) {
    /* syncs from here on get no tokens, as standalone */
    k->runtime.opts.tokens = (nl_tokens_source_t){0};
    k->kube_users++;
    nl_tokens_stop(&k->tokens, on_tokens_stopped, k);
  }
  if (k->objects) {
    nl_objects_t *o = k->objects;
    k->objects = NULL;
    /* syncs from here on find no objects, as standalone */
    k->runtime.opts.objects = (nl_objects_lookup_t){0};
    k->kube_users++;
    k->pending++;
    nl_objects_stop(o, on_objects_stopped, k);
  }
  if (k->node_up) {
    k->kube_users++;
    k->api_users_stopping = 2;
    nl_status_manager_stop(&k->statuses, on_api_user_stopped, k);
    nl_mirror_manager_stop(&k->mirrors, on_api_user_stopped, k);
  } else {
    free_taints(k);
    events_stop(k);
  }
  kube_user_stopped(k);
}
