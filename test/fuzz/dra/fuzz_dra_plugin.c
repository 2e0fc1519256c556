/* libFuzzer target for what a hostile DRA kubelet plugin answers the plugin
 * manager and the DRA manager (managers/plugins.c, managers/dra*.c), over the
 * real path: a plugin served with cri/grpc_server.h in the same loop puts its
 * registration socket in the scanned directory, and its answers are the
 * input's bytes, decoded by the managers' own client and checked by their own
 * code.
 *
 * Input: byte 0 picks the answer, the rest is its message's bytes:
 *   0  PluginInfo, the GetInfo answer (type, name, endpoint, versions: the
 *      handler's choice, the DRA checks, the registration and the
 *      NotifyRegistrationStatus that follows)
 *   1  NodePrepareResourcesResponse to the preparation of a pod's claim
 *      reserved for it (unknown UIDs, errors, device and ID bounds; the
 *      containers' CDI IDs read back; the pod resources API's List packed;
 *      the checkpoint written)
 *   2  NodeUnprepareResourcesResponse to the unpreparation of that claim,
 *      prepared first, once its pod is gone
 *   3  NodeWatchResourcesResponse on the plugin's device health stream
 *      (names, health values, times, timeouts, messages), then the claim
 *      prepared and its devices' health read into a container's status
 * The manager records into /metrics (encoded at the end), as the agent's does.
 * Checks: no crash, leak or sanitizer report; a registration attempt ends
 * (the plugin told, or the attempt failed); the preparation is answered
 * exactly once; the unpreparation ends; the loop closes cleanly.
 * Seeds: corpus/. */
#include <assert.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "cri/grpc_server.h"
#include "managers/dra_internal.h"
#include "managers/podresources.h"
#include "reactor/buf.h"
#include "reactor/log.h"

#define DRIVER "gpu.example.com"
#define PREFIX "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"

typedef struct world {
  uv_loop_t loop;
  nl_plugins_t pm;
  nl_dra_t m;
  nl_grpc_server_t reg, dra;
  int kind;
  const uint8_t *msg;
  size_t len;
  int notifies, answers, unprep_replies;
  bool watched;
  bool gone, pm_done, m_done, reg_done, dra_done;
  uv_timer_t guard;
  bool expired;
  nl_kmetrics_t metrics;
} world_t;

static char dir[64], reg_dir[96], reg_sock[128], dra_sock[128], state[128];

static void h_info(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  if (w->kind == 0) {
    nl_grpc_call_reply(call, NL_GRPC_OK, NULL, w->msg, w->len);
    return;
  }
  char *versions[] = {"v1.DRAPlugin"};
  Pluginregistration__PluginInfo pi = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
  pi.type = "DRAPlugin";
  pi.name = DRIVER;
  pi.endpoint = dra_sock;
  pi.supported_versions = versions;
  pi.n_supported_versions = 1;
  nl_grpc_call_reply_msg(call, &pi.base);
}

static void h_notify(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->notifies++;
  Pluginregistration__RegistrationStatusResponse r = PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
  nl_grpc_call_reply_msg(call, &r.base);
}

static void h_prepare(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  if (w->kind == 1) {
    nl_grpc_call_reply(call, NL_GRPC_OK, NULL, w->msg, w->len);
    return;
  }
  char *cdi[] = {"example.com/gpu=g0"}, *reqs[] = {"req-0"};
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device d = K8S__IO__KUBELET__PKG__APIS__DRA__V1__DEVICE__INIT, *dp = &d;
  d.pool_name = "node";
  d.device_name = "g0";
  d.cdi_device_ids = cdi;
  d.n_cdi_device_ids = 1;
  d.request_names = reqs;
  d.n_request_names = 1;
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse cr =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCE_RESPONSE__INIT;
  cr.devices = &dp;
  cr.n_devices = 1;
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry e =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT, *ep = &e;
  e.key = "claim-uid";
  e.value = &cr;
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse r =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
  r.claims = &ep;
  r.n_claims = 1;
  nl_grpc_call_reply_msg(call, &r.base);
}

static void watch_cancelled(nl_grpc_call_t *call, void *ctx) {
  nl_grpc_call_finish(call, NL_GRPC_CANCELLED, NULL);
}

static void h_watch(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->watched = true;
  if (w->kind != 3) {
    nl_grpc_call_finish(call, NL_GRPC_UNIMPLEMENTED, NULL);
    return;
  }
  nl_grpc_call_on_cancel(call, watch_cancelled, w);
  nl_grpc_call_send(call, w->msg, w->len);
}

static void h_unprepare(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->unprep_replies++;
  nl_grpc_call_reply(call, NL_GRPC_OK, NULL, w->msg, w->len);
}

static void get_claim(void *ctx, const char *ns, const char *name, nl_dra_claim_cb cb, void *arg) {
  static const char claim[] =
      "{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"ns\",\"uid\":\"claim-uid\"},\"status\":"
      "{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"req-0\",\"driver\":\"" DRIVER
      "\",\"pool\":\"node\",\"device\":\"g0\"}]}},\"reservedFor\":[{\"resource\":\"pods\","
      "\"name\":\"p\",\"uid\":\"pod-uid\"}]}}";
  cb(arg, 200, claim, sizeof claim - 1, NULL);
}

static bool pod_active(void *ctx, const char *uid) { return !((world_t *)ctx)->gone; }

static void on_prepared(void *ctx, const char *err) { ((world_t *)ctx)->answers++; }
static void on_guard(uv_timer_t *t) { ((world_t *)t->data)->expired = true; }
static void pm_stopped(nl_plugins_t *m, void *ctx) { ((world_t *)ctx)->pm_done = true; }
static void m_stopped(nl_dra_t *m, void *ctx) { ((world_t *)ctx)->m_done = true; }
static void reg_stopped(nl_grpc_server_t *s, void *ctx) { ((world_t *)ctx)->reg_done = true; }
static void dra_stopped(nl_grpc_server_t *s, void *ctx) { ((world_t *)ctx)->dra_done = true; }

/* The guard is against a hang, not a bound on time: on a loaded machine (the
 * fuzzers run niced beside the e2e tests) a turn can take seconds. */
#define RUN_UNTIL(w, cond)                                                        \
  do {                                                                            \
    (w)->expired = false;                                                         \
    uv_timer_start(&(w)->guard, on_guard, 30000, 0);                              \
    while (!(cond) && !(w)->expired) uv_run(&(w)->loop, UV_RUN_ONCE);             \
    uv_timer_stop(&(w)->guard);                                                   \
  } while (0)

static void serve(nl_grpc_server_t *s, world_t *w, const char *path) {
  nl_err_t *err = NULL;
  if (nl_grpc_server_listen(s, path, &err) < 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    nl_log_set_verbosity(-1);
    nl_log_set_fd(open("/dev/null", O_WRONLY));
    strcpy(dir, "/tmp/nl-fuzz-dra-XXXXXX");
    if (!mkdtemp(dir)) abort();
    snprintf(reg_dir, sizeof reg_dir, "%s/plugins_registry", dir);
    snprintf(reg_sock, sizeof reg_sock, "%s/" DRIVER "-reg.sock", reg_dir);
    snprintf(dra_sock, sizeof dra_sock, "%s/dra.sock", dir);
    snprintf(state, sizeof state, "%s/dra_manager_state", dir);
  }
  if (size < 1) return 0;
  unlink(state);
  world_t w = {.kind = data[0] % 4, .msg = data + 1, .len = size - 1};
  uv_loop_init(&w.loop);
  uv_timer_init(&w.loop, &w.guard);
  w.guard.data = &w;
  nl_kmetrics_init(&w.metrics, "node");
  nl_dra_opts_t o = {.state_path = state, .get_claim = get_claim, .pod_active = pod_active, .ctx = &w,
                     .get_claim_ctx = &w, .health = true, .metrics = &w.metrics};
  nl_err_t *err = NULL;
  nl_dra_start(&w.m, &w.loop, &o, &err);
  nl_plugins_opts_t po = {.dir = reg_dir, .scan_ms = 5, .handlers = &w.m.handler, .n_handlers = 1,
                          .call_timeout_ms = 1000};
  if (nl_plugins_start(&w.pm, &w.loop, &po, &err) < 0) abort();
  nl_grpc_server_init(&w.dra, &w.loop, NULL);
  nl_grpc_server_method(&w.dra, PREFIX "NodePrepareResources", NL_GRPC_UNARY, h_prepare, &w);
  nl_grpc_server_method(&w.dra, PREFIX "NodeUnprepareResources", NL_GRPC_UNARY, h_unprepare, &w);
  nl_grpc_server_method(&w.dra, "/v1alpha1.DRAResourceHealth/NodeWatchResources",
                        NL_GRPC_SERVER_STREAMING, h_watch, &w);
  serve(&w.dra, &w, dra_sock);
  nl_grpc_server_init(&w.reg, &w.loop, NULL);
  nl_grpc_server_method(&w.reg, "/pluginregistration.Registration/GetInfo", NL_GRPC_UNARY, h_info, &w);
  nl_grpc_server_method(&w.reg, "/pluginregistration.Registration/NotifyRegistrationStatus",
                        NL_GRPC_UNARY, h_notify, &w);
  serve(&w.reg, &w, reg_sock);

  RUN_UNTIL(&w, w.pm.attempts >= 1);
  assert(w.pm.attempts >= 1);
  if (w.kind > 0) {
    assert(nl_plugins_registered(&w.pm) == 1);
    static const char pod_json[] =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\","
        "\"uid\":\"pod-uid\"},\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":"
        "\"gpu\"}],\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"resources\":{\"claims\":"
        "[{\"name\":\"gpu\",\"request\":\"req-0\"}]}}]}}";
    nl_pod_t *pod = NULL;
    if (nl_pod_decode(pod_json, sizeof pod_json - 1, NULL, &pod, &err) < 0) abort();
    if (w.kind == 3) {
      RUN_UNTIL(&w, w.watched);
      for (int i = 0; i < 8; i++) uv_run(&w.loop, UV_RUN_NOWAIT); /* its message in */
    }
    nl_dra_prepare(&w.m, pod, on_prepared, &w);
    RUN_UNTIL(&w, w.answers == 1);
    assert(w.answers == 1);
    char **ids = NULL, *why = NULL;
    size_t n = 0;
    if (nl_dra_container_cdi(&w.m, pod, &pod->spec.containers[0], &ids, &n, &why) == 0)
      nl__dra_strv_free(ids, n);
    else
      free(why);
    /* the pod resources API's answer, packed as it is served */
    nl_pod_manager_t pods;
    nl_pod_manager_init(&pods);
    nl_pod_manager_set(&pods, pod);
    nl_podres_t pr = {.loop = &w.loop, .deps = {.pods = &pods, .dra = &w.m}};
    V1__ListPodResourcesResponse *l = nl_podres_list(&pr);
    uint8_t *packed = malloc(protobuf_c_message_get_packed_size(&l->base) + 1);
    protobuf_c_message_pack(&l->base, packed);
    free(packed);
    nl_podres_msg_free(&l->base);
    nl_pod_manager_free(&pods);
    if (w.kind == 3) {
      nl_pod_status_t *st = calloc(1, sizeof *st);
      st->n_container_statuses = 1;
      st->container_statuses = calloc(1, sizeof *st->container_statuses);
      st->container_statuses[0].name = strdup("c");
      nl_dra_resource_status(&w.m, pod, st, true);
      nl_buf_t b = {0};
      nl_pod_status_encode_json(st, &b);
      nl_buf_free(&b);
      nl_pod_status_free(st);
    }
    if (w.kind == 2) {
      assert(nl_dra_claim_prepared(&w.m, "ns", "gpu"));
      w.gone = true;
      nl_dra_housekeeping(&w.m);
      RUN_UNTIL(&w, w.unprep_replies == 1 && (nl_dra_claims(&w.m) == 0 ||
                    !nl__dra_claim_find(&w.m, "ns", "gpu")->unpreparing));
    }
    nl_pod_free(pod);
  }
  nl_plugins_stop(&w.pm, pm_stopped, &w);
  nl_dra_stop(&w.m, m_stopped, &w);
  nl_grpc_server_stop(&w.reg, reg_stopped, &w);
  nl_grpc_server_stop(&w.dra, dra_stopped, &w);
  uv_close((uv_handle_t *)&w.guard, NULL);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  assert(w.pm_done && w.m_done && w.reg_done && w.dra_done);
  assert(w.answers == (w.kind > 0));
  if (uv_loop_close(&w.loop) != 0) abort();
  nl_buf_t scrape = NL_BUF_INIT;
  nl_metrics_encode(&w.metrics.reg, &scrape);
  nl_buf_free(&scrape);
  nl_kmetrics_free(&w.metrics);
  return 0;
}
