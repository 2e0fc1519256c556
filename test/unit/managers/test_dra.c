/* The plugin manager and the DRA manager against a fake DRA kubelet plugin in
 * one loop: its registration socket (pluginregistration v1 on the project's
 * gRPC server, cri/grpc_server.h) in a scanned directory and its DRA service
 * (v1 or v1beta1) on another socket; ResourceClaims come from a fake reader
 * (opts.get_claim). Registration (accepted and told so; an unknown type and
 * unsupported versions refused with upstream's words; the socket removed
 * deregisters), preparation (a claim not reserved: upstream's message and no
 * call; allocated and reserved: NodePrepareResources with the claim, the CDI
 * IDs per container and request; a driver's error names the driver and the
 * claim; a template's claim not made yet), the checkpoint read by a new
 * manager (nothing prepared twice), NodeUnprepareResources in the pod's
 * termination and by housekeeping once the pod is gone, and the pod resources
 * API's dynamic_resources of each container, and what /metrics shows of
 * the preparations and the plugin's calls. Every test ends with
 * uv_loop_close() == 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/kube/kubeconfig.h"
#include "agent/model/podres.h"
#include "cri/dra_health.pb-c.h"
#include "cri/grpc_server.h"
#include "managers/dra.h"
#include "managers/plugins.h"
#include "managers/podresources.h"
#include "reactor/xalloc.h"
#include "test/fakes/fake_apiserver.h"
#include "test/unit/managers/run_until.h"

#define DRIVER "gpu.example.com"
#define POD_UID "pod-uid-1"
#define CLAIM_UID "claim-uid-1"
#define V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"

typedef struct world {
  uv_loop_t loop;
  char dir[64], reg_dir[96], reg_sock[128], dra_sock[128], state[128];
  uv_timer_t guard;
  bool timed_out;
  /* the fake plugin */
  nl_grpc_server_t reg, dra;
  bool reg_up, dra_up, reg_done, dra_done;
  const char *type;           /* GetInfo's answers */
  const char *versions[2];
  size_t n_versions;
  int infos, notifies;
  bool notified_ok;
  char notified_err[512];
  int prepares, unprepares;
  char prepare_path[128], prepared_uid[64];
  const char *prepare_error;  /* a claim's error in the answer */
  int prepare_code, unprepare_code; /* a gRPC error instead of an answer; 0: none */
  const char *share_id;       /* g1's share ID in the answer; NULL: none */
  /* the managers */
  nl_plugins_t pm;
  nl_dra_t m;
  bool pm_up, m_up, pm_done, m_done;
  const char *claim_json;     /* what the fake reader answers */
  int claim_status;
  bool pod_gone;
  /* device health: the plugin serves it, the watch it holds, pods told */
  bool health;
  nl_grpc_call_t *watch;
  int pod_changes;
  /* a preparation's answer */
  bool prepared;
  char prep_err[512];
  /* the API, for ResourceSlice clean-up (NULL: none) */
  nl_fake_as_t *fake;
  nl_kube_client_t *kube;
  nl_kubeconfig_t kc;
  bool kube_done;
  nl_kmetrics_t metrics; /* /metrics, as the manager records into it */
} world_t;

/* ---- the loop ---- */

RUN_UNTIL_GUARD(world_t)

/* ---- the fake plugin ---- */

static void h_info(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  (void)req, (void)len;
  world_t *w = ctx;
  w->infos++;
  Pluginregistration__PluginInfo pi = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
  pi.type = (char *)w->type;
  pi.name = DRIVER;
  pi.endpoint = w->dra_sock;
  pi.supported_versions = (char **)w->versions;
  pi.n_supported_versions = w->n_versions;
  nl_grpc_call_reply_msg(call, &pi.base);
}

static void h_notify(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  Pluginregistration__RegistrationStatus *st =
      pluginregistration__registration_status__unpack(NULL, len, req);
  assert_non_null(st);
  w->notifies++;
  w->notified_ok = st->plugin_registered;
  snprintf(w->notified_err, sizeof w->notified_err, "%s", st->error);
  pluginregistration__registration_status__free_unpacked(st, NULL);
  Pluginregistration__RegistrationStatusResponse r = PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
  nl_grpc_call_reply_msg(call, &r.base);
}

static void h_prepare(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->prepares++;
  snprintf(w->prepare_path, sizeof w->prepare_path, "%s", nl_grpc_call_path(call));
  if (w->prepare_code) {
    nl_grpc_call_reply(call, w->prepare_code, "out of order", NULL, 0);
    return;
  }
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *r =
      k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, len, req);
  assert_non_null(r);
  assert_int_equal(r->n_claims, 1);
  snprintf(w->prepared_uid, sizeof w->prepared_uid, "%s", r->claims[0]->uid);
  assert_string_equal(r->claims[0]->name, "gpu");
  assert_string_equal(r->claims[0]->namespace_, "ns");
  /* two devices: one per request, each with its CDI ID */
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device d[2];
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device *dp[2] = {&d[0], &d[1]};
  char *req0[] = {"req-0"}, *req1[] = {"req-1"};
  char *cdi0[] = {"example.com/gpu=g0"}, *cdi1[] = {"example.com/gpu=g1"};
  for (int i = 0; i < 2; i++) {
    k8s__io__kubelet__pkg__apis__dra__v1__device__init(&d[i]);
    d[i].pool_name = "node";
    d[i].device_name = i ? "g1" : "g0";
    d[i].request_names = i ? req1 : req0;
    d[i].n_request_names = 1;
    d[i].cdi_device_ids = i ? cdi1 : cdi0;
    d[i].n_cdi_device_ids = 1;
  }
  if (w->share_id) d[1].share_id = (char *)w->share_id;
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse cr =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCE_RESPONSE__INIT;
  if (w->prepare_error) cr.error = (char *)w->prepare_error;
  else {
    cr.devices = dp;
    cr.n_devices = 2;
  }
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry e =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT;
  e.key = r->claims[0]->uid;
  e.value = &cr;
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry *ep[] = {&e};
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse resp =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
  resp.claims = ep;
  resp.n_claims = 1;
  nl_grpc_call_reply_msg(call, &resp.base);
  k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(r, NULL);
}

static void h_unprepare(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->unprepares++;
  if (w->unprepare_code) {
    nl_grpc_call_reply(call, w->unprepare_code, "busy", NULL, 0);
    return;
  }
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest *r =
      k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__unpack(NULL, len, req);
  assert_non_null(r);
  assert_int_equal(r->n_claims, 1);
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse cr =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCE_RESPONSE__INIT;
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry e =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT;
  e.key = r->claims[0]->uid;
  e.value = &cr;
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry *ep[] = {&e};
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse resp =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
  resp.claims = ep;
  resp.n_claims = 1;
  nl_grpc_call_reply_msg(call, &resp.base);
  k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__free_unpacked(r, NULL);
}

static void watch_cancelled(nl_grpc_call_t *call, void *ctx) {
  ((world_t *)ctx)->watch = NULL;
  nl_grpc_call_finish(call, NL_GRPC_CANCELLED, NULL);
}

static void h_watch(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->watch = call;
  nl_grpc_call_on_cancel(call, watch_cancelled, w);
}

/* One device's health on the watch, last updated `age` seconds ago. */
static void send_health(world_t *w, const char *device, V1alpha1__HealthStatus h, int64_t age,
                        const char *message) {
  V1alpha1__DeviceIdentifier id = V1ALPHA1__DEVICE_IDENTIFIER__INIT;
  id.pool_name = "node";
  id.device_name = (char *)device;
  V1alpha1__DeviceHealth d = V1ALPHA1__DEVICE_HEALTH__INIT, *dp = &d;
  d.device = &id;
  d.health = h;
  d.last_updated_time = (int64_t)time(NULL) - age;
  d.message = (char *)message;
  V1alpha1__NodeWatchResourcesResponse r = V1ALPHA1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
  r.devices = &dp;
  r.n_devices = 1;
  assert_int_equal(nl_grpc_call_send_msg(w->watch, &r.base), 0);
}

static void serve_dra(world_t *w, const char *prefix) {
  nl_grpc_server_init(&w->dra, &w->loop, NULL);
  char p1[128], p2[128];
  snprintf(p1, sizeof p1, "%sNodePrepareResources", prefix);
  snprintf(p2, sizeof p2, "%sNodeUnprepareResources", prefix);
  nl_grpc_server_method(&w->dra, p1, NL_GRPC_UNARY, h_prepare, w);
  nl_grpc_server_method(&w->dra, p2, NL_GRPC_UNARY, h_unprepare, w);
  if (w->health)
    nl_grpc_server_method(&w->dra, "/v1alpha1.DRAResourceHealth/NodeWatchResources",
                          NL_GRPC_SERVER_STREAMING, h_watch, w);
  nl_err_t *err = NULL;
  if (nl_grpc_server_listen(&w->dra, w->dra_sock, &err) < 0) fail_msg("%s", err->msg);
  w->dra_up = true;
}

static void serve_reg(world_t *w) {
  nl_grpc_server_init(&w->reg, &w->loop, NULL);
  nl_grpc_server_method(&w->reg, "/pluginregistration.Registration/GetInfo", NL_GRPC_UNARY,
                        h_info, w);
  nl_grpc_server_method(&w->reg, "/pluginregistration.Registration/NotifyRegistrationStatus",
                        NL_GRPC_UNARY, h_notify, w);
  nl_err_t *err = NULL;
  if (nl_grpc_server_listen(&w->reg, w->reg_sock, &err) < 0) fail_msg("%s", err->msg);
  w->reg_up = true;
  w->reg_done = false;
}

static void reg_stopped(nl_grpc_server_t *s, void *ctx) {
  (void)s;
  ((world_t *)ctx)->reg_done = true;
}
static void dra_stopped(nl_grpc_server_t *s, void *ctx) {
  (void)s;
  ((world_t *)ctx)->dra_done = true;
}

static void stop_reg(world_t *w) { /* the server removes its socket */
  if (!w->reg_up) return;
  nl_grpc_server_stop(&w->reg, reg_stopped, w);
  RUN_UNTIL(w, w->reg_done);
  w->reg_up = false;
}

/* ---- the managers ---- */

static void get_claim(void *ctx, const char *ns, const char *name, nl_dra_claim_cb cb, void *arg) {
  world_t *w = ctx;
  assert_string_equal(ns, "ns");
  if (!w->claim_json) {
    char body[256];
    snprintf(body, sizeof body, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
             "\"message\":\"resourceclaims.resource.k8s.io \\\"%s\\\" not found\",\"reason\":"
             "\"NotFound\",\"code\":404}", name);
    cb(arg, 404, body, strlen(body), NULL);
    return;
  }
  cb(arg, w->claim_status ? w->claim_status : 200, w->claim_json, strlen(w->claim_json), NULL);
}

static bool pod_active(void *ctx, const char *uid) {
  world_t *w = ctx;
  return !(w->pod_gone && strcmp(uid, POD_UID) == 0);
}
static bool pod_running(void *ctx, const char *uid) { return pod_active(ctx, uid); }

static void pod_changed(void *ctx, const char *uid) {
  assert_string_equal(uid, POD_UID);
  ((world_t *)ctx)->pod_changes++;
}

static void m_start(world_t *w) {
  nl_dra_opts_t o = {.state_path = w->state, .get_claim = get_claim, .get_claim_ctx = w,
                     .pod_active = pod_active, .pod_running = pod_running,
                     .health = w->health, .pod_changed = pod_changed, .ctx = w,
                     .kube = w->kube, .node_name = "node-1", .wipe_delay_ms = 300,
                     .metrics = &w->metrics};
  nl_err_t *err = NULL;
  assert_int_equal(nl_dra_start(&w->m, &w->loop, &o, &err), 0);
  w->m_up = true;
  w->m_done = false;
  nl_plugins_opts_t po = {.dir = w->reg_dir, .scan_ms = 20, .handlers = &w->m.handler,
                          .n_handlers = 1, .call_timeout_ms = 2000};
  assert_int_equal(nl_plugins_start(&w->pm, &w->loop, &po, &err), 0);
  w->pm_up = true;
  w->pm_done = false;
}

static void pm_stopped(nl_plugins_t *m, void *ctx) {
  (void)m;
  ((world_t *)ctx)->pm_done = true;
}
static void m_stopped(nl_dra_t *m, void *ctx) {
  (void)m;
  ((world_t *)ctx)->m_done = true;
}

static void m_stop(world_t *w) {
  nl_plugins_stop(&w->pm, pm_stopped, w);
  nl_dra_stop(&w->m, m_stopped, w);
  RUN_UNTIL(w, w->pm_done && w->m_done);
  w->pm_up = w->m_up = false;
}

static world_t *world_new(void) {
  world_t *w = nl_xcalloc(1, sizeof *w);
  assert_int_equal(uv_loop_init(&w->loop), 0);
  strcpy(w->dir, "/tmp/nl-dra-XXXXXX");
  assert_non_null(mkdtemp(w->dir));
  snprintf(w->reg_dir, sizeof w->reg_dir, "%s/plugins_registry", w->dir);
  snprintf(w->reg_sock, sizeof w->reg_sock, "%s/" DRIVER "-reg.sock", w->reg_dir);
  snprintf(w->dra_sock, sizeof w->dra_sock, "%s/dra.sock", w->dir);
  snprintf(w->state, sizeof w->state, "%s/dra_manager_state", w->dir);
  w->type = NL_DRA_PLUGIN_TYPE;
  w->versions[0] = NL_DRA_SERVICE_V1;
  w->versions[1] = NL_DRA_SERVICE_V1BETA1;
  w->n_versions = 2;
  uv_timer_init(&w->loop, &w->guard);
  w->guard.data = w;
  nl_kmetrics_init(&w->metrics, "node-1");
  return w;
}

static void kube_stopped(void *ctx) { ((world_t *)ctx)->kube_done = true; }

static void world_free(world_t *w) {
  if (w->pm_up) m_stop(w);
  if (w->kube) {
    nl_kube_client_stop(w->kube, kube_stopped, w);
    RUN_UNTIL(w, w->kube_done);
  }
  if (w->fake) nl_fake_as_stop(w->fake);
  stop_reg(w);
  if (w->dra_up) {
    nl_grpc_server_stop(&w->dra, dra_stopped, w);
    RUN_UNTIL(w, w->dra_done);
  }
  uv_close((uv_handle_t *)&w->guard, NULL);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&w->loop), 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", w->dir);
  assert_int_equal(system(cmd), 0);
  nl_kmetrics_free(&w->metrics);
  free(w);
}

/* The manager started and the plugin registered (told so). */
static world_t *registered(const char *prefix) {
  world_t *w = world_new();
  serve_dra(w, prefix);
  m_start(w);
  serve_reg(w);
  RUN_UNTIL(w, w->notifies == 1);
  assert_true(w->notified_ok);
  assert_string_equal(w->notified_err, "");
  assert_int_equal(nl_plugins_registered(&w->pm), 1);
  return w;
}

/* ---- pods and claims ---- */

/* The pod of a JSON text (the test fails on a decoding error). */
static nl_pod_t *decoded(const char *json) {
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(json, strlen(json), NULL, &p, &err) < 0) fail_msg("%s", err->msg);
  return p;
}

static nl_pod_t *pod(const char *claims, const char *status) {
  char json[2048];
  snprintf(json, sizeof json,
           "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\","
           "\"uid\":\"" POD_UID "\"},\"spec\":{\"resourceClaims\":%s,\"containers\":["
           "{\"name\":\"both\",\"image\":\"i\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}},"
           "{\"name\":\"one\",\"image\":\"i\",\"resources\":{\"claims\":[{\"name\":\"gpu\","
           "\"request\":\"req-1\"}]}},"
           "{\"name\":\"none\",\"image\":\"i\"}]}%s%s}",
           claims, status ? ",\"status\":" : "", status ? status : "");
  return decoded(json);
}

#define DIRECT "[{\"name\":\"gpu\",\"resourceClaimName\":\"gpu\"}]"
#define RESERVED "{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"ns\",\"uid\":\"" CLAIM_UID "\"}," \
  "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"req-0\",\"driver\":\"" \
  DRIVER "\",\"pool\":\"node\",\"device\":\"g0\"},{\"request\":\"req-1\",\"driver\":\"" DRIVER \
  "\",\"pool\":\"node\",\"device\":\"g1\"}]}},\"reservedFor\":[{\"resource\":\"pods\"," \
  "\"name\":\"p\",\"uid\":\"" POD_UID "\"}]}}"

static void on_prepared(void *ctx, const char *err) {
  world_t *w = ctx;
  w->prepared = true;
  snprintf(w->prep_err, sizeof w->prep_err, "%s", err ? err : "");
}

static void prepare(world_t *w, const nl_pod_t *p) {
  w->prepared = false;
  nl_dra_prepare(&w->m, p, on_prepared, w);
  RUN_UNTIL(w, w->prepared);
}

static char *cdi_of(world_t *w, const nl_pod_t *p, size_t ci) {
  char **ids = NULL, *err = NULL;
  size_t n = 0;
  static char out[256];
  if (nl_dra_container_cdi(&w->m, p, &p->spec.containers[ci], &ids, &n, &err) < 0) {
    snprintf(out, sizeof out, "error: %s", err);
    free(err);
    return out;
  }
  out[0] = 0;
  for (size_t i = 0; i < n; i++) {
    strcat(out, i ? "," : "");
    strcat(out, ids[i]);
    free(ids[i]);
  }
  free(ids);
  return out;
}

/* ---- tests ---- */

static void test_register_and_remove(void **state) {
  (void)state;
  world_t *w = registered(V1);
  assert_int_equal(w->infos, 1);
  /* the socket goes: the plugin is deregistered, a claim's driver is unknown */
  stop_reg(w);
  RUN_UNTIL(w, nl_plugins_registered(&w->pm) == 0);
  nl_pod_t *p = pod(DIRECT, NULL);
  w->claim_json = RESERVED;
  prepare(w, p);
  assert_string_equal(w->prep_err, "prepare dynamic resources: ResourceClaim gpu: DRA driver "
                      DRIVER " is not registered");
  assert_int_equal(w->prepares, 0);
  nl_pod_free(p);
  world_free(w);
}

static void test_refused(void **state) {
  (void)state;
  world_t *w = world_new();
  w->type = "CSIPlugin";
  m_start(w);
  serve_reg(w);
  RUN_UNTIL(w, w->notifies == 1);
  assert_false(w->notified_ok);
  char want[512];
  snprintf(want, sizeof want, "RegisterPlugin error -- no handler registered for plugin type: "
           "CSIPlugin at socket %s", w->reg_sock);
  assert_string_equal(w->notified_err, want);
  assert_int_equal(nl_plugins_registered(&w->pm), 0);
  /* tried again after the back-off (1 s) while the socket stays */
  w->type = NL_DRA_PLUGIN_TYPE;
  w->versions[0] = "v2.DRAPlugin";
  w->n_versions = 1;
  RUN_UNTIL(w, w->notifies == 2);
  assert_false(w->notified_ok);
  snprintf(want, sizeof want, "RegisterPlugin error -- plugin validation failed with err: invalid "
           "supported gRPC versions of DRA driver plugin " DRIVER " at endpoint %s: none of "
           "services supported by the plugin ([\"v2.DRAPlugin\"]) are supported by the kubelet "
           "([\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"])", w->dra_sock);
  assert_string_equal(w->notified_err, want);
  assert_int_equal(nl_plugins_registered(&w->pm), 0);
  /* an endpoint the client could not dial, absolute as it looks: refused */
  w->versions[0] = "v1.DRAPlugin";
  snprintf(w->dra_sock, sizeof w->dra_sock, "/x://y");
  RUN_UNTIL(w, w->notifies == 3);
  assert_false(w->notified_ok);
  assert_non_null(strstr(w->notified_err, "endpoint /x://y of DRA driver plugin " DRIVER
                                          " is not an absolute path"));
  assert_int_equal(nl_plugins_registered(&w->pm), 0);
  world_free(w);
}

static void in_use_driver(void *ctx, const char *driver, size_t n) {
  char *out = ctx;
  size_t len = strlen(out);
  snprintf(out + len, 256 - len, "%s=%zu ", driver, n);
}

/* What the dra_resource_claims_in_use gauge shows: "driver=n ... <any>=n". */
static const char *in_use(world_t *w) {
  static char out[256];
  out[0] = '\0';
  size_t total = nl_dra_claims_in_use(&w->m, in_use_driver, out);
  size_t len = strlen(out);
  snprintf(out + len, sizeof out - len, "<any>=%zu", total);
  return out;
}

static void test_prepare_unprepare(void **state) {
  (void)state;
  world_t *w = registered(V1);
  nl_pod_t *p = pod(DIRECT, NULL);
  /* not reserved for the pod: upstream's message, no call */
  w->claim_json = "{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"ns\",\"uid\":\"" CLAIM_UID "\"},"
                  "\"status\":{}}";
  prepare(w, p);
  assert_string_equal(w->prep_err, "prepare dynamic resources: pod p (" POD_UID ") is not "
                      "allowed to use ResourceClaim gpu (" CLAIM_UID ")");
  assert_int_equal(w->prepares, 0);
  assert_int_equal(nl_dra_claims(&w->m), 0);
  assert_string_equal(in_use(w), "<any>=0");
  /* gone from the API */
  w->claim_json = NULL;
  prepare(w, p);
  assert_string_equal(w->prep_err, "prepare dynamic resources: fetch ResourceClaim gpu: "
                      "resourceclaims.resource.k8s.io \"gpu\" not found");
  /* allocated and reserved: prepared, the CDI IDs by container and request */
  w->claim_json = RESERVED;
  prepare(w, p);
  assert_string_equal(w->prep_err, "");
  assert_int_equal(w->prepares, 1);
  assert_string_equal(w->prepare_path, V1 "NodePrepareResources");
  assert_string_equal(w->prepared_uid, CLAIM_UID);
  assert_true(nl_dra_claim_prepared(&w->m, "ns", "gpu"));
  assert_string_equal(in_use(w), DRIVER "=1 <any>=1");
  assert_string_equal(cdi_of(w, p, 0), "example.com/gpu=g0,example.com/gpu=g1");
  assert_string_equal(cdi_of(w, p, 1), "example.com/gpu=g1");
  assert_string_equal(cdi_of(w, p, 2), "");
  /* prepared once: a second sync asks nothing */
  prepare(w, p);
  assert_string_equal(w->prep_err, "");
  assert_int_equal(w->prepares, 1);
  /* an agent restart: the checkpoint has it, nothing is prepared again */
  m_stop(w);
  stop_reg(w);
  w->notifies = 0;
  m_start(w);
  serve_reg(w);
  RUN_UNTIL(w, w->notifies == 1);
  assert_true(nl_dra_claim_prepared(&w->m, "ns", "gpu"));
  assert_string_equal(cdi_of(w, p, 1), "example.com/gpu=g1");
  prepare(w, p);
  assert_string_equal(w->prep_err, "");
  assert_int_equal(w->prepares, 1);
  /* the pod in use: housekeeping keeps the claim; gone: unprepared, forgotten */
  nl_dra_housekeeping(&w->m);
  for (int i = 0; i < 10; i++) uv_run(&w->loop, UV_RUN_NOWAIT);
  assert_int_equal(w->unprepares, 0);
  w->pod_gone = true;
  nl_dra_housekeeping(&w->m);
  RUN_UNTIL(w, nl_dra_claims(&w->m) == 0);
  assert_int_equal(w->unprepares, 1);
  assert_string_equal(in_use(w), "<any>=0");
  assert_string_equal(cdi_of(w, p, 1), "error: unable to get claim info for claim gpu in "
                      "namespace ns");
  nl_pod_free(p);
  world_free(w);
}

static void test_v1beta1_and_driver_error(void **state) {
  (void)state;
  world_t *w = world_new();
  w->versions[0] = NL_DRA_SERVICE_V1BETA1;
  w->n_versions = 1;
  serve_dra(w, V1BETA1);
  m_start(w);
  serve_reg(w);
  RUN_UNTIL(w, w->notifies == 1);
  assert_true(w->notified_ok);
  nl_pod_t *p = pod(DIRECT, NULL);
  w->claim_json = RESERVED;
  w->prepare_error = "no such GPU";
  prepare(w, p);
  assert_string_equal(w->prepare_path, V1BETA1 "NodePrepareResources");
  assert_string_equal(w->prep_err, "prepare dynamic resources: DRA driver " DRIVER
                      ": NodePrepareResources failed for ResourceClaim gpu: no such GPU");
  assert_false(nl_dra_claim_prepared(&w->m, "ns", "gpu"));
  assert_string_equal(in_use(w), "<any>=0"); /* known, not prepared: not in use */
  /* the pod goes: the claim was never prepared, nothing to unprepare */
  w->pod_gone = true;
  nl_dra_housekeeping(&w->m);
  RUN_UNTIL(w, nl_dra_claims(&w->m) == 0);
  assert_int_equal(w->unprepares, 0);
  nl_pod_free(p);
  world_free(w);
}

/* A device whose share ID is not UTF-8 is refused like a too long one: the
 * pod resources API's Go clients could not read a List that carried it. */
static void test_not_utf8_refused(void **state) {
  (void)state;
  world_t *w = world_new();
  serve_dra(w, V1);
  m_start(w);
  serve_reg(w);
  RUN_UNTIL(w, w->notifies == 1);
  nl_pod_t *p = pod(DIRECT, NULL);
  w->claim_json = RESERVED;
  w->share_id = "s-\xff";
  prepare(w, p);
  assert_string_equal(w->prep_err, "prepare dynamic resources: DRA driver " DRIVER
                      ": NodePrepareResources answered a device for ResourceClaim gpu with too "
                      "many or too long names or CDI IDs, or one not UTF-8: refused");
  assert_false(nl_dra_claim_prepared(&w->m, "ns", "gpu"));
  nl_pod_free(p);
  world_free(w);
}

static void test_template(void **state) {
  (void)state;
  world_t *w = registered(V1);
  /* the claim not made yet */
  nl_pod_t *p = pod("[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}]", NULL);
  prepare(w, p);
  assert_string_equal(w->prep_err, "prepare dynamic resources: pod \"ns/p\": ResourceClaim not "
                      "created yet");
  nl_pod_free(p);
  /* made, named gpu-abc by the status, but not owned by the pod */
  p = pod("[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}]",
          "{\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gpu-abc\"}]}");
  w->claim_json = RESERVED;
  prepare(w, p);
  assert_string_equal(w->prep_err, "prepare dynamic resources: ResourceClaim ns/gpu-abc was not "
                      "created for Pod ns/p (Pod is not owner)");
  nl_pod_free(p);
  world_free(w);
}

/* The claim the scheduler made for extended resources backed by DRA
 * (status.extendedResourceClaimStatus): prepared with the pod's, and each
 * container gets the devices of the requests mapped to the resources it asks
 * for; a device plugin does not allocate them. */
static void test_extended_resources(void **state) {
  (void)state;
  world_t *w = registered(V1);
  const char *json =
      "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\","
      "\"uid\":\"" POD_UID "\"},\"spec\":{\"containers\":["
      "{\"name\":\"a\",\"image\":\"i\",\"resources\":{\"requests\":{\"example.com/gpu\":\"1\"}}},"
      "{\"name\":\"b\",\"image\":\"i\",\"resources\":{\"requests\":{"
      "\"deviceclass.resource.kubernetes.io/gpu\":\"1\",\"example.com/gpu\":\"0\"}}},"
      "{\"name\":\"c\",\"image\":\"i\"}]},"
      "\"status\":{\"extendedResourceClaimStatus\":{\"resourceClaimName\":\"gpu\",\"requestMappings\":["
      "{\"containerName\":\"a\",\"resourceName\":\"example.com/gpu\",\"requestName\":\"req-0\"},"
      "{\"containerName\":\"b\",\"resourceName\":\"deviceclass.resource.kubernetes.io/gpu\","
      "\"requestName\":\"req-1\"},"
      "{\"containerName\":\"b\",\"resourceName\":\"example.com/gpu\",\"requestName\":\"req-0\"}]}}}";
  nl_pod_t *p = decoded(json);
  assert_true(nl_dra_pod_has_claims(p));
  assert_true(nl_pod_dra_extended(p, "a", "example.com/gpu"));
  assert_false(nl_pod_dra_extended(p, "c", "example.com/gpu"));
  w->claim_json = RESERVED;
  prepare(w, p);
  assert_string_equal(w->prep_err, "");
  assert_int_equal(w->prepares, 1);
  assert_string_equal(w->prepared_uid, CLAIM_UID);
  assert_string_equal(cdi_of(w, p, 0), "example.com/gpu=g0");
  assert_string_equal(cdi_of(w, p, 1), "example.com/gpu=g1"); /* not req-0: it asks for 0 */
  assert_string_equal(cdi_of(w, p, 2), "");
  /* the pod's termination unprepares it */
  w->pod_gone = true;
  nl_dra_housekeeping(&w->m);
  RUN_UNTIL(w, nl_dra_claims(&w->m) == 0);
  assert_int_equal(w->unprepares, 1);
  nl_pod_free(p);
  world_free(w);
}

/* The allocatedResourcesStatus of the pod's three containers, as JSON. */
static char *health_of(world_t *w, const nl_pod_t *p) {
  nl_pod_status_t *st = nl_xcalloc(1, sizeof *st);
  st->n_container_statuses = 3;
  st->container_statuses = nl_xcalloc(3, sizeof *st->container_statuses);
  for (size_t i = 0; i < 3; i++) st->container_statuses[i].name = nl_xstrdup(p->spec.containers[i].name);
  nl_dra_resource_status(&w->m, p, st, true);
  static char out[2048];
  out[0] = 0;
  for (size_t i = 0; i < 3; i++) {
    const nl_container_status_t *c = &st->container_statuses[i];
    strcat(out, i ? " | " : "");
    for (size_t j = 0; j < c->n_alloc_status; j++) {
      strcat(out, c->alloc_status[j].name);
      for (size_t k = 0; k < c->alloc_status[j].n_resources; k++) {
        const nl_resource_health_t *h = &c->alloc_status[j].resources[k];
        char one[512];
        snprintf(one, sizeof one, " %s=%s%s%s", h->id, h->health, h->message ? ":" : "",
                 h->message ? h->message : "");
        strcat(out, one);
      }
    }
  }
  nl_pod_status_free(st);
  return out;
}

/* Device health (ResourceHealthStatus): the plugin's health stream, each
 * claim reference's devices in allocatedResourcesStatus, Unknown until the
 * plugin speaks of a device and once its word is older than the timeout, the
 * pods told of each change, and all of it forgotten when the stream ends. */
static void test_health(void **state) {
  (void)state;
  world_t *w = world_new();
  w->health = true;
  w->versions[0] = NL_DRA_SERVICE_V1;
  w->n_versions = 1;
  serve_dra(w, V1);
  m_start(w);
  serve_reg(w);
  RUN_UNTIL(w, w->notifies == 1 && w->watch);
  assert_non_null(w->watch);
  nl_pod_t *p = pod(DIRECT, NULL);
  w->claim_json = RESERVED;
  prepare(w, p);
  assert_string_equal(w->prep_err, "");
  assert_string_equal(health_of(w, p),
                      "claim:gpu " DRIVER "/node/g0=Unknown " DRIVER "/node/g1=Unknown | "
                      "claim:gpu/req-1 " DRIVER "/node/g1=Unknown | ");
  send_health(w, "g0", V1ALPHA1__HEALTH_STATUS__HEALTHY, 0, "temperature: 45\xc2\xb0""C");
  RUN_UNTIL(w, w->pod_changes == 1);
  send_health(w, "g1", V1ALPHA1__HEALTH_STATUS__UNHEALTHY, 0, "ECC errors");
  RUN_UNTIL(w, w->pod_changes == 2);
  assert_string_equal(health_of(w, p),
                      "claim:gpu " DRIVER "/node/g0=Healthy:temperature: 45\xc2\xb0""C " DRIVER
                      "/node/g1=Unhealthy:ECC errors | claim:gpu/req-1 " DRIVER
                      "/node/g1=Unhealthy:ECC errors | ");
  /* the same word again changes nothing; one older than the timeout is Unknown */
  send_health(w, "g1", V1ALPHA1__HEALTH_STATUS__UNHEALTHY, 0, "ECC errors");
  send_health(w, "g1", V1ALPHA1__HEALTH_STATUS__UNHEALTHY, 31, "ECC errors");
  RUN_UNTIL(w, w->pod_changes == 3);
  for (int i = 0; i < 20; i++) uv_run(&w->loop, UV_RUN_NOWAIT);
  assert_int_equal(w->pod_changes, 3);
  assert_string_equal(health_of(w, p),
                      "claim:gpu " DRIVER "/node/g0=Healthy:temperature: 45\xc2\xb0""C " DRIVER
                      "/node/g1=Unknown | claim:gpu/req-1 " DRIVER "/node/g1=Unknown | ");
  /* the stream ends: what it said is forgotten */
  nl_grpc_call_finish(w->watch, NL_GRPC_OK, NULL);
  w->watch = NULL;
  RUN_UNTIL(w, w->pod_changes == 4);
  assert_string_equal(health_of(w, p),
                      "claim:gpu " DRIVER "/node/g0=Unknown " DRIVER "/node/g1=Unknown | "
                      "claim:gpu/req-1 " DRIVER "/node/g1=Unknown | ");
  nl_pod_free(p);
  world_free(w);
}

static void on_unprepared_pod(void *ctx) { ((world_t *)ctx)->prepared = true; }

/* The pod's termination unprepares its claims before its final status. */
static void test_unprepare_pod(void **state) {
  (void)state;
  world_t *w = registered(V1);
  nl_pod_t *p = pod(DIRECT, NULL);
  w->claim_json = RESERVED;
  prepare(w, p);
  assert_string_equal(w->prep_err, "");
  assert_false(nl_dra_unprepare_pod(&w->m, "another-pod", on_unprepared_pod, w));
  w->prepared = false;
  assert_true(nl_dra_unprepare_pod(&w->m, POD_UID, on_unprepared_pod, w));
  assert_false(w->prepared); /* never from inside */
  RUN_UNTIL(w, w->prepared);
  assert_int_equal(w->unprepares, 1);
  assert_int_equal(nl_dra_claims(&w->m), 0);
  nl_pod_free(p);
  world_free(w);
}

/* /metrics as a scrape shows it (freed by the caller). */
static char *scrape(world_t *w) {
  nl_buf_t b = NL_BUF_INIT;
  nl_metrics_encode(&w->metrics.reg, &b);
  return nl_buf_steal(&b);
}

/* The value of the sample line that starts with `series ` ("-1": none). */
static const char *sample(const char *text, const char *series) {
  static char out[64];
  size_t n = strlen(series);
  for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
    if (!strncmp(l, series, n) && l[n] == ' ') {
      snprintf(out, sizeof out, "%.*s", (int)strcspn(l + n + 1, "\n"), l + n + 1);
      return out;
    }
  return "-1";
}

#define OPS "dra_operations_duration_seconds_count"
#define GRPC "dra_grpc_operations_duration_seconds_count{driver_name=\"" DRIVER "\",method_name=\""

/* upstream's dra_operations_duration_seconds (a pod's claims handled, by
 * operation and whether it failed) and dra_grpc_operations_duration_seconds
 * (each call to the plugin, by driver, method path and code), as a scrape of
 * /metrics shows them; a code outside gRPC's counts as Unknown, and a
 * driver's call series go with its last plugin. */
static void test_metrics(void **state) {
  (void)state;
  world_t *w = registered(V1);
  nl_pod_t *p = pod(DIRECT, NULL);
  char *t = scrape(w);
  assert_null(strstr(t, "dra_operations_duration_seconds_count")); /* nothing yet */
  assert_null(strstr(t, "dra_grpc_operations_duration_seconds_count"));
  free(t);
  /* not reserved: a failed preparation, no call */
  w->claim_json = "{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"ns\",\"uid\":\"" CLAIM_UID "\"},"
                  "\"status\":{}}";
  prepare(w, p);
  assert_string_not_equal(w->prep_err, "");
  t = scrape(w);
  assert_string_equal(sample(t, OPS "{operation_name=\"PrepareResources\",is_error=\"true\"}"), "1");
  assert_null(strstr(t, "dra_grpc_operations_duration_seconds_count"));
  free(t);
  /* the driver fails the call, then answers a code gRPC does not have */
  w->claim_json = RESERVED;
  w->prepare_code = NL_GRPC_UNAVAILABLE;
  prepare(w, p);
  assert_non_null(strstr(w->prep_err, "code = Unavailable desc = out of order"));
  w->prepare_code = 99;
  prepare(w, p);
  assert_non_null(strstr(w->prep_err, "code = Code(99)"));
  /* then prepares */
  w->prepare_code = 0;
  prepare(w, p);
  assert_string_equal(w->prep_err, "");
  t = scrape(w);
  assert_non_null(strstr(t, "# TYPE dra_operations_duration_seconds histogram\n"));
  assert_non_null(strstr(t, "# TYPE dra_grpc_operations_duration_seconds histogram\n"));
  assert_string_equal(sample(t, OPS "{operation_name=\"PrepareResources\",is_error=\"true\"}"), "3");
  assert_string_equal(sample(t, OPS "{operation_name=\"PrepareResources\",is_error=\"false\"}"), "1");
  assert_string_equal(sample(t, GRPC V1 "NodePrepareResources\",grpc_status_code=\"Unavailable\"}"), "1");
  assert_string_equal(sample(t, GRPC V1 "NodePrepareResources\",grpc_status_code=\"Unknown\"}"), "1");
  assert_string_equal(sample(t, GRPC V1 "NodePrepareResources\",grpc_status_code=\"OK\"}"), "1");
  assert_null(strstr(t, "Code(99)"));
  /* upstream's DRADurationBuckets (the values: managers_metrics) */
  assert_string_not_equal(sample(t, "dra_grpc_operations_duration_seconds_bucket{driver_name=\""
                                 DRIVER "\",method_name=\"" V1 "NodePrepareResources\","
                                 "grpc_status_code=\"OK\",le=\"0.1534127404634391\"}"), "-1");
  assert_null(strstr(t, "operation_name=\"UnprepareResources\""));
  free(t);
  /* the pod's termination: the driver fails, housekeeping's retry is not the
   * pod's operation; a second pod's termination succeeds */
  w->unprepare_code = NL_GRPC_DEADLINE_EXCEEDED;
  w->prepared = false;
  assert_true(nl_dra_unprepare_pod(&w->m, POD_UID, on_unprepared_pod, w));
  RUN_UNTIL(w, w->prepared);
  w->unprepare_code = 0;
  w->pod_gone = true;
  nl_dra_housekeeping(&w->m);
  RUN_UNTIL(w, nl_dra_claims(&w->m) == 0);
  t = scrape(w);
  assert_string_equal(sample(t, OPS "{operation_name=\"UnprepareResources\",is_error=\"true\"}"), "1");
  assert_string_equal(sample(t, OPS "{operation_name=\"UnprepareResources\",is_error=\"false\"}"), "-1");
  assert_string_equal(sample(t, GRPC V1 "NodeUnprepareResources\",grpc_status_code=\"DeadlineExceeded\"}"), "1");
  assert_string_equal(sample(t, GRPC V1 "NodeUnprepareResources\",grpc_status_code=\"OK\"}"), "1");
  free(t);
  w->pod_gone = false;
  prepare(w, p);
  assert_string_equal(w->prep_err, "");
  w->prepared = false;
  assert_true(nl_dra_unprepare_pod(&w->m, POD_UID, on_unprepared_pod, w));
  RUN_UNTIL(w, w->prepared);
  t = scrape(w);
  assert_string_equal(sample(t, OPS "{operation_name=\"UnprepareResources\",is_error=\"false\"}"), "1");
  assert_string_equal(sample(t, OPS "{operation_name=\"PrepareResources\",is_error=\"false\"}"), "2");
  assert_string_equal(sample(t, GRPC V1 "NodeUnprepareResources\",grpc_status_code=\"OK\"}"), "2");
  free(t);
  /* the driver's plugin goes: its call series go, the operations stay */
  stop_reg(w);
  RUN_UNTIL(w, nl_plugins_registered(&w->pm) == 0);
  t = scrape(w);
  assert_null(strstr(t, "driver_name=\"" DRIVER "\""));
  assert_string_equal(sample(t, OPS "{operation_name=\"PrepareResources\",is_error=\"false\"}"), "2");
  free(t);
  nl_pod_free(p);
  world_free(w);
}

/* A fake API server that answers the DELETEs of ResourceSlices. */
static void with_api(world_t *w) {
  w->fake = nl_fake_as_start(&w->loop, NULL);
  nl_fake_as_add(w->fake, &(nl_fake_as_rule_t){.method = "DELETE",
                 .path = "/apis/resource.k8s.io/v1/resourceslices", .repeat = true, .body = "{}"});
  w->kc.server = (char *)nl_fake_as_url(w->fake);
  w->kc.ca_file = FIXTURES "/tls/ca.crt";
  nl_kube_client_opts_t o = {.kubeconfig = &w->kc, .default_timeout_ms = 5000};
  nl_err_t *err = NULL;
  if (nl_kube_client_new(&w->kube, &w->loop, &o, &err) < 0) fail_msg("%s", nl_err_msg(err));
}

#define WIPE_DRIVER "fieldSelector=spec.nodeName%3Dnode-1%2Cspec.driver%3D" DRIVER

static size_t driver_wipes(world_t *w) {
  size_t n = 0;
  for (size_t i = 0; i < nl_fake_as_nreqs(w->fake); i++)
    if (strstr(nl_fake_as_req(w->fake, i)->path, WIPE_DRIVER)) n++;
  return n;
}

static void tick(uv_timer_t *t) { nl_dra_housekeeping(t->data); }
static void on_waited(uv_timer_t *t) { *(bool *)t->data = true; }

/* upstream's sync at registration: a plugin that registers and never serves
 * its DRA socket makes its driver unusable, and the driver's ResourceSlices on
 * the node go after the grace period; one that serves keeps them. */
static void test_wipe_unserved_plugin(void **state) {
  (void)state;
  world_t *w = world_new();
  with_api(w);
  m_start(w);
  /* at start: the node's ResourceSlices of every driver */
  RUN_UNTIL(w, nl_fake_as_nreqs(w->fake) == 1);
  assert_string_equal(nl_fake_as_req(w->fake, 0)->path,
                      "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dnode-1");
  serve_reg(w); /* nothing listens on its endpoint */
  RUN_UNTIL(w, w->notifies == 1);
  assert_true(w->notified_ok);
  RUN_UNTIL(w, driver_wipes(w) == 1);
  assert_string_equal(nl_fake_as_req(w->fake, 1)->method, "DELETE");
  world_free(w);

  /* served: the connection is up at the next housekeeping tick, nothing goes */
  w = world_new();
  with_api(w);
  serve_dra(w, V1);
  m_start(w);
  serve_reg(w);
  RUN_UNTIL(w, w->notifies == 1);
  uv_timer_t hk, wait;
  uv_timer_init(&w->loop, &hk);
  hk.data = &w->m;
  uv_timer_start(&hk, tick, 20, 20);
  bool waited = false;
  uv_timer_init(&w->loop, &wait);
  wait.data = &waited;
  uv_timer_start(&wait, on_waited, 1000, 0); /* more than the grace period */
  RUN_UNTIL(w, waited);
  assert_int_equal(driver_wipes(w), 0);
  uv_close((uv_handle_t *)&hk, NULL);
  uv_close((uv_handle_t *)&wait, NULL);
  world_free(w);
}

/* An answer of the pod resources API packed and read back, as a client gets
 * it (the original freed). */
static ProtobufCMessage *wire(ProtobufCMessage *m) {
  assert_non_null(m);
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *b = nl_xmalloc(n + 1);
  protobuf_c_message_pack(m, b);
  ProtobufCMessage *u = protobuf_c_message_unpack(m->descriptor, NULL, n, b);
  assert_non_null(u);
  free(b);
  nl_podres_msg_free(m);
  return u;
}

/* A pod's containers and their dynamic_resources as text:
 * "ctr: claim@ns driver/pool/device[#share]=cdi,cdi ...; ..." */
static const char *dyn_of(const V1__PodResources *pr) {
  static char out[2048];
  out[0] = 0;
  for (size_t i = 0; i < pr->n_containers; i++) {
    const V1__ContainerResources *c = pr->containers[i];
    size_t len = strlen(out);
    snprintf(out + len, sizeof out - len, "%s%s:", i ? "; " : "", c->name);
    for (size_t j = 0; j < c->n_dynamic_resources; j++) {
      const V1__DynamicResource *d = c->dynamic_resources[j];
      len = strlen(out);
      snprintf(out + len, sizeof out - len, " %s@%s", d->claim_name, d->claim_namespace);
      for (size_t k = 0; k < d->n_claim_resources; k++) {
        const V1__ClaimResource *r = d->claim_resources[k];
        len = strlen(out);
        snprintf(out + len, sizeof out - len, " %s/%s/%s%s%s=", r->driver_name, r->pool_name,
                 r->device_name, *r->share_id ? "#" : "", r->share_id);
        for (size_t q = 0; q < r->n_cdi_devices; q++) {
          len = strlen(out);
          snprintf(out + len, sizeof out - len, "%s%s", q ? "," : "", r->cdi_devices[q]->name);
        }
      }
    }
  }
  return out;
}

/* List's answer for the one pod, as text (dyn_of). */
static const char *list_dyn(nl_podres_t *pr) {
  V1__ListPodResourcesResponse *l =
      (V1__ListPodResourcesResponse *)wire(&nl_podres_list(pr)->base);
  assert_int_equal(l->n_pod_resources, 1);
  const char *out = dyn_of(l->pod_resources[0]);
  protobuf_c_message_free_unpacked(&l->base, NULL);
  return out;
}

/* The pod resources API's dynamic_resources, as upstream's
 * GetDynamicResources: each container (the sidecar, then the containers; not
 * the plain init container) gets the claims its resources.claims name, by
 * the ResourceClaim's name (not the pod's name for it), with every device
 * prepared for the claim whichever request it names, each with its own CDI
 * IDs and share ID; a container naming no claim gets none; nothing while the
 * claim is not prepared or once it is forgotten. */
static void test_pod_resources(void **state) {
  (void)state;
  world_t *w = registered(V1);
  w->share_id = "s-1";
  const char *json =
      "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\","
      "\"uid\":\"" POD_UID "\"},\"spec\":{\"resourceClaims\":[{\"name\":\"acc\","
      "\"resourceClaimName\":\"gpu\"}],\"initContainers\":["
      "{\"name\":\"side\",\"image\":\"i\",\"restartPolicy\":\"Always\",\"resources\":{\"claims\":"
      "[{\"name\":\"acc\",\"request\":\"req-0\"}]}},"
      "{\"name\":\"once\",\"image\":\"i\",\"resources\":{\"claims\":[{\"name\":\"acc\"}]}}],"
      "\"containers\":["
      "{\"name\":\"both\",\"image\":\"i\",\"resources\":{\"claims\":[{\"name\":\"acc\"}]}},"
      "{\"name\":\"one\",\"image\":\"i\",\"resources\":{\"claims\":[{\"name\":\"acc\","
      "\"request\":\"req-1\"}]}},"
      "{\"name\":\"none\",\"image\":\"i\"}]}}";
  nl_pod_t *p = decoded(json);
  nl_pod_manager_t pods;
  nl_pod_manager_init(&pods);
  nl_pod_manager_set(&pods, p);
  nl_podres_t pr = {.loop = &w->loop, .deps = {.pods = &pods, .dra = &w->m}};

  /* not prepared yet: no claim anywhere */
  assert_string_equal(list_dyn(&pr), "side:; both:; one:; none:");

  w->claim_json = RESERVED;
  prepare(w, p);
  assert_string_equal(w->prep_err, "");
  const char *want =
      "side: gpu@ns " DRIVER "/node/g0=example.com/gpu=g0 " DRIVER
      "/node/g1#s-1=example.com/gpu=g1; "
      "both: gpu@ns " DRIVER "/node/g0=example.com/gpu=g0 " DRIVER
      "/node/g1#s-1=example.com/gpu=g1; "
      "one: gpu@ns " DRIVER "/node/g0=example.com/gpu=g0 " DRIVER
      "/node/g1#s-1=example.com/gpu=g1; "
      "none:";
  assert_string_equal(list_dyn(&pr), want);
  V1__GetPodResourcesResponse *g =
      (V1__GetPodResourcesResponse *)wire(&nl_podres_get(&pr, "ns", "p")->base);
  assert_string_equal(g->pod_resources->name, "p");
  assert_string_equal(dyn_of(g->pod_resources), want);
  protobuf_c_message_free_unpacked(&g->base, NULL);
  assert_null(nl_podres_get(&pr, "ns", "nope"));

  /* the pod gone, the claim unprepared and forgotten: nothing more */
  w->pod_gone = true;
  nl_dra_housekeeping(&w->m);
  RUN_UNTIL(w, nl_dra_claims(&w->m) == 0);
  assert_string_equal(list_dyn(&pr), "side:; both:; one:; none:");

  nl_pod_manager_free(&pods);
  nl_pod_free(p);
  world_free(w);
}

static void test_services(void **state) {
  (void)state;
  char *msg = NULL;
  char *both[] = {"v1beta1.DRAPlugin", "v1.DRAPlugin"};
  assert_string_equal(nl_dra_pick_service(both, 2, &msg), NL_DRA_SERVICE_V1BETA1); /* plugin's order */
  assert_null(nl_dra_pick_service(NULL, 0, &msg));
  assert_string_equal(msg, "empty list of supported gRPC services (aka supported versions)");
  free(msg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_services),
      cmocka_unit_test(test_register_and_remove),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_not_utf8_refused),
      cmocka_unit_test(test_prepare_unprepare),
      cmocka_unit_test(test_v1beta1_and_driver_error),
      cmocka_unit_test(test_template),
      cmocka_unit_test(test_extended_resources),
      cmocka_unit_test(test_health),
      cmocka_unit_test(test_unprepare_pod),
      cmocka_unit_test(test_wipe_unserved_plugin),
      cmocka_unit_test(test_pod_resources),
      cmocka_unit_test(test_metrics),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
