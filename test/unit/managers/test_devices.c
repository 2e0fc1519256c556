/* The device manager against a fake device plugin on the project's gRPC server
 * (cri/grpc_server.h), in one loop: registration (good, bad version, bad
 * name, a second one replacing the first), ListAndWatch lists and health, too
 * many devices, a plugin going away and its grace period, admission (upstream's
 * refusal, init containers' devices reused), Allocate into a container's
 * answers, and the checkpoint read back by a new manager; the pod resources
 * API on its own socket, called with the project's gRPC client, and the
 * device plugin metrics. Every test ends with uv_loop_close() == 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/conn.h"
#include "managers/devices.h"
#include "managers/podresources.h"
#include "reactor/xalloc.h"
#include "test/unit/managers/run_until.h"

#define RES "example.com/resource"

typedef struct world {
  uv_loop_t loop;
  char dir[64], plugin_path[128], kubelet_sock[128];
  nl_devices_t m;
  bool m_done;
  int changes;
  int pod_changes; /* opts.pod_changed calls */
  char pod_changed[64];
  /* the fake plugin */
  nl_grpc_server_t plugin;
  bool plugin_up, plugin_done;
  nl_grpc_call_t *watch;
  int allocates, prestarts, options_calls, watch_calls;
  bool opt_pre_start; /* GetDevicePluginOptions answers */
  bool opt_preferred;
  size_t n_devs;      /* listed by ListAndWatch; 0: 2 */
  /* GetPreferredAllocation: what it answers ("hang": nothing), what it was asked */
  const char *pref_answer;
  int pref_calls;
  char pref_available[128], pref_must[128];
  nl_grpc_call_t *pref_hung; /* the call it does not answer */
  int pref_size;
  uint64_t call_timeout_ms;
  char gone[16]; /* a pod no longer active (opts.pod_active) */
  bool unsynced;  /* opts.sources_ready says no */
  bool stopped;   /* opts.container_running says no container runs */
  const char *opt_fail; /* set: it fails with this message */
  /* the registering client */
  nl_cri_client_t reg;
  bool reg_up, reg_done;
  int reg_code;
  int reg_options_calls; /* GetDevicePluginOptions calls when Register was answered */
  char reg_msg[256];
  bool reg_answered;
  /* a container's answers */
  bool got;
  bool got_ckpt; /* the checkpoint held an Allocate answer when the container was answered */
  char got_err[256];
  char got_env[64];
  size_t got_n;
  uv_timer_t guard;
  bool timed_out;
} world_t;

static void on_changed(void *ctx) { ((world_t *)ctx)->changes++; }

static void on_pod_changed(void *ctx, const char *uid) {
  world_t *w = ctx;
  w->pod_changes++;
  snprintf(w->pod_changed, sizeof w->pod_changed, "%s", uid);
}

/* ---- the fake plugin ---- */

static void send_list(world_t *w, size_t n, const char *const *health) {
  V1beta1__Device *d = nl_xcalloc(n + 1, sizeof *d);
  V1beta1__Device **dp = nl_xcalloc(n + 1, sizeof *dp);
  char ids[n + 1][32];
  for (size_t i = 0; i < n; i++) {
    v1beta1__device__init(&d[i]);
    snprintf(ids[i], sizeof ids[i], "Dev-%zu", i + 1);
    d[i].id = ids[i];
    d[i].health = (char *)(health ? health[i] : "Healthy");
    dp[i] = &d[i];
  }
  V1beta1__ListAndWatchResponse l = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
  l.devices = dp;
  l.n_devices = n;
  assert_non_null(w->watch);
  assert_int_equal(nl_grpc_call_send_msg(w->watch, &l.base), 0);
  free(d);
  free(dp);
}

static void h_options(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->options_calls++;
  if (w->opt_fail) {
    nl_grpc_call_reply(call, NL_GRPC_UNKNOWN, w->opt_fail, NULL, 0);
    return;
  }
  V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  o.pre_start_required = w->opt_pre_start;
  o.get_preferred_allocation_available = w->opt_preferred;
  nl_grpc_call_reply_msg(call, &o.base);
}

static void h_watch(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->watch_calls++;
  w->watch = call;
  send_list(w, w->n_devs ? w->n_devs : 2, NULL);
}

static void h_allocate(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->allocates++;
  V1beta1__AllocateRequest *r = v1beta1__allocate_request__unpack(NULL, len, req);
  assert_non_null(r);
  assert_int_equal(r->n_container_requests, 1);
  char val[64] = "";
  for (size_t i = 0; i < r->container_requests[0]->n_devices_ids; i++) {
    strcat(val, r->container_requests[0]->devices_ids[i]);
    strcat(val, ",");
  }
  V1beta1__ContainerAllocateResponse cr = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
  V1beta1__ContainerAllocateResponse__EnvsEntry env = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ENVS_ENTRY__INIT;
  env.key = "DEVS";
  env.value = val;
  V1beta1__ContainerAllocateResponse__EnvsEntry *envs[] = {&env};
  cr.envs = envs;
  cr.n_envs = 1;
  V1beta1__Mount mnt = V1BETA1__MOUNT__INIT;
  mnt.container_path = "/tmp/Dev-1";
  mnt.host_path = "/tmp/Dev-1";
  V1beta1__Mount *mnts[] = {&mnt};
  cr.mounts = mnts;
  cr.n_mounts = 1;
  V1beta1__ContainerAllocateResponse *crs[] = {&cr};
  V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
  resp.container_responses = crs;
  resp.n_container_responses = 1;
  nl_grpc_call_reply_msg(call, &resp.base);
  v1beta1__allocate_request__free_unpacked(r, NULL);
}

static void ids_text(char *dst, size_t size, char *const *ids, size_t n) {
  dst[0] = 0;
  for (size_t i = 0; i < n; i++)
    snprintf(dst + strlen(dst), size - strlen(dst), "%s%s", i ? "," : "", ids[i]);
}

/* Answers pref_answer (comma-separated IDs) and records the request. */
static void h_preferred(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->pref_calls++;
  V1beta1__PreferredAllocationRequest *r = v1beta1__preferred_allocation_request__unpack(NULL, len, req);
  assert_non_null(r);
  assert_int_equal(r->n_container_requests, 1);
  const V1beta1__ContainerPreferredAllocationRequest *c = r->container_requests[0];
  ids_text(w->pref_available, sizeof w->pref_available, c->available_deviceids,
           c->n_available_deviceids);
  ids_text(w->pref_must, sizeof w->pref_must, c->must_include_deviceids,
           c->n_must_include_deviceids);
  w->pref_size = c->allocation_size;
  v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
  if (strcmp(w->pref_answer, "hang") == 0) { /* answered by the test once cancelled */
    w->pref_hung = call;
    return;
  }
  char buf[128], *ids[8], *save = NULL;
  size_t n = 0;
  snprintf(buf, sizeof buf, "%s", w->pref_answer);
  for (char *t = strtok_r(buf, ",", &save); t && n < 8; t = strtok_r(NULL, ",", &save)) ids[n++] = t;
  V1beta1__ContainerPreferredAllocationResponse cr = V1BETA1__CONTAINER_PREFERRED_ALLOCATION_RESPONSE__INIT;
  cr.deviceids = ids;
  cr.n_deviceids = n;
  V1beta1__ContainerPreferredAllocationResponse *crs[] = {&cr};
  V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
  resp.container_responses = crs;
  resp.n_container_responses = 1;
  nl_grpc_call_reply_msg(call, &resp.base);
}

static void h_prestart(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->prestarts++;
  V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
  nl_grpc_call_reply_msg(call, &resp.base);
}

static void plugin_start(world_t *w, const char *name) {
  snprintf(w->plugin_path, sizeof w->plugin_path, "%s/%s", w->dir, name);
  nl_grpc_server_init(&w->plugin, &w->loop, NULL);
  nl_grpc_server_method(&w->plugin, "/v1beta1.DevicePlugin/GetDevicePluginOptions", NL_GRPC_UNARY,
                        h_options, w);
  nl_grpc_server_method(&w->plugin, "/v1beta1.DevicePlugin/ListAndWatch",
                        NL_GRPC_SERVER_STREAMING, h_watch, w);
  nl_grpc_server_method(&w->plugin, "/v1beta1.DevicePlugin/Allocate", NL_GRPC_UNARY, h_allocate, w);
  nl_grpc_server_method(&w->plugin, "/v1beta1.DevicePlugin/PreStartContainer", NL_GRPC_UNARY,
                        h_prestart, w);
  nl_grpc_server_method(&w->plugin, "/v1beta1.DevicePlugin/GetPreferredAllocation",
                        NL_GRPC_UNARY, h_preferred, w);
  nl_err_t *err = NULL;
  if (nl_grpc_server_listen(&w->plugin, w->plugin_path, &err) < 0) fail_msg("%s", err->msg);
  w->plugin_up = true;
}

static void plugin_stopped(nl_grpc_server_t *s, void *ctx) { ((world_t *)ctx)->plugin_done = true; }

static void plugin_stop(world_t *w) {
  if (w->watch) {
    nl_grpc_call_finish(w->watch, NL_GRPC_OK, NULL);
    w->watch = NULL;
  }
  w->plugin_done = false;
  nl_grpc_server_stop(&w->plugin, plugin_stopped, w);
  w->plugin_up = false;
}

/* ---- the loop ---- */

RUN_UNTIL_GUARD(world_t)

static bool pod_active(void *ctx, const char *uid) {
  return strcmp(((world_t *)ctx)->gone, uid) != 0;
}

static bool sources_ready(void *ctx) { return !((world_t *)ctx)->unsynced; }

static bool container_running(void *ctx, const char *uid, const char *name) {
  (void)uid, (void)name;
  return !((world_t *)ctx)->stopped;
}

static void manager_start(world_t *w, uint64_t grace_ms, size_t max_devices) {
  nl_devices_opts_t o = {.dir = w->dir, .grace_ms = grace_ms, .max_devices = max_devices,
                         .connect_wait_ms = 500, .call_timeout_ms = w->call_timeout_ms,
                         .changed = on_changed, .changed_ctx = w,
                         .pod_changed = on_pod_changed, .pod_changed_ctx = w,
                         .pod_active = pod_active, .pod_active_ctx = w,
                         .sources_ready = sources_ready, .container_running = container_running};
  nl_err_t *err = NULL;
  if (nl_devices_start(&w->m, &w->loop, &o, &err) < 0) fail_msg("%s", err->msg);
  w->m_done = false;
}

static void m_stopped(nl_devices_t *m, void *ctx) { ((world_t *)ctx)->m_done = true; }

static void manager_stop(world_t *w) {
  nl_devices_stop(&w->m, m_stopped, w);
  RUN_UNTIL(w, w->m_done);
}

static world_t *world_new(void) {
  world_t *w = nl_xcalloc(1, sizeof *w);
  assert_int_equal(uv_loop_init(&w->loop), 0);
  strcpy(w->dir, "/tmp/nl-devices-XXXXXX");
  assert_non_null(mkdtemp(w->dir));
  snprintf(w->kubelet_sock, sizeof w->kubelet_sock, "%s/kubelet.sock", w->dir);
  uv_timer_init(&w->loop, &w->guard);
  w->guard.data = w;
  return w;
}

static void reg_stopped(nl_cri_client_t *c) {
  container_of(c, world_t, reg)->reg_done = true;
}

static void world_free(world_t *w) {
  if (w->plugin_up) {
    plugin_stop(w);
    RUN_UNTIL(w, w->plugin_done);
  }
  if (w->reg_up) {
    nl_cri_client_stop(&w->reg, reg_stopped);
    RUN_UNTIL(w, w->reg_done);
  }
  uv_close((uv_handle_t *)&w->guard, NULL);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&w->loop), 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", w->dir);
  assert_int_equal(system(cmd), 0);
  free(w);
}

/* ---- registration ---- */

/* The plugin's options come from its GetDevicePluginOptions answer, as
 * upstream's: the request's own (the same here) are not read. */
static void on_registered(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  world_t *w = ctx;
  w->reg_answered = true;
  w->reg_options_calls = w->options_calls;
  w->reg_code = st->code;
  snprintf(w->reg_msg, sizeof w->reg_msg, "%s", st->message);
}

static void do_register(world_t *w, const char *version, const char *name, const char *endpoint,
                        bool pre_start) {
  if (!w->reg_up) {
    nl_err_t *err = NULL;
    assert_int_equal(nl_cri_client_init(&w->reg, &w->loop, w->kubelet_sock, NULL, &err), 0);
    w->reg_up = true;
  }
  V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  o.pre_start_required = pre_start;
  w->opt_pre_start = pre_start;
  V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
  r.version = (char *)version;
  r.resource_name = (char *)name;
  r.endpoint = (char *)endpoint;
  r.options = &o;
  w->reg_answered = false;
  nl_cri_client_call(&w->reg, "/v1beta1.Registration/Register", &r.base,
                     &v1beta1__empty__descriptor, 0, on_registered, w);
  RUN_UNTIL(w, w->reg_answered);
}

static bool counts_are(world_t *w, int64_t cap, int64_t alloc) {
  size_t n;
  nl_devices_count_t *c = nl_devices_counts(&w->m, &n);
  bool ok = n == 1 && strcmp(c[0].name, RES) == 0 && c[0].capacity == cap &&
            c[0].allocatable == alloc;
  free(c);
  return ok;
}

static void test_extended_names(void **state) {
  assert_true(nl_devices_extended_name("example.com/resource"));
  assert_true(nl_devices_extended_name("vendor.io/gpu-1"));
  assert_false(nl_devices_extended_name("cpu"));
  assert_false(nl_devices_extended_name("resource"));
  assert_false(nl_devices_extended_name("kubernetes.io/x"));
  assert_false(nl_devices_extended_name("sub.kubernetes.io/x"));
  assert_false(nl_devices_extended_name("requests.example.com/x"));
  assert_false(nl_devices_extended_name("Example.com/x"));
  assert_false(nl_devices_extended_name("example.com/a/b"));
  assert_false(nl_devices_extended_name("example.com/-x"));
  assert_false(nl_devices_extended_name("example.com/"));
}

static void test_register_and_watch(void **state) {
  world_t *w = world_new();
  manager_start(w, 0, 0);
  plugin_start(w, "dp.sock");
  do_register(w, "v1alpha", RES, "dp.sock", false);
  assert_int_equal(w->reg_code, NL_GRPC_UNKNOWN);
  assert_string_equal(w->reg_msg, "requested API version \"v1alpha\" is not supported by kubelet. "
                                  "Supported versions are [\"v1beta1\"]");
  do_register(w, "v1beta1", "resource", "dp.sock", false);
  assert_string_equal(w->reg_msg, "the ResourceName \"resource\" is invalid");
  do_register(w, "v1beta1", RES, "../x.sock", false);
  assert_int_equal(w->reg_code, NL_GRPC_UNKNOWN);
  assert_int_equal(w->m.registrations, 0);

  do_register(w, "v1beta1", RES, "dp.sock", false);
  assert_int_equal(w->reg_code, NL_GRPC_OK);
  RUN_UNTIL(w, counts_are(w, 2, 2));
  const char *health[] = {"Healthy", "Unhealthy", "Healthy"};
  int before = w->changes;
  send_list(w, 3, health);
  RUN_UNTIL(w, counts_are(w, 3, 2));
  assert_true(w->changes > before);
  send_list(w, 1, NULL);
  RUN_UNTIL(w, counts_are(w, 1, 1));

  /* a second registration replaces the first: its devices stay until the new list */
  nl_grpc_call_t *old = w->watch;
  w->watch = NULL;
  do_register(w, "v1beta1", RES, "dp.sock", false);
  RUN_UNTIL(w, w->watch != NULL && counts_are(w, 2, 2));
  RUN_UNTIL(w, !nl_grpc_call_alive(old));
  nl_grpc_call_finish(old, NL_GRPC_OK, NULL);
  assert_int_equal(w->m.registrations, 2);
  manager_stop(w);
  world_free(w);
}

static bool checkpoint_has(world_t *w, const char *text) {
  char cp[160], buf[8192] = "";
  snprintf(cp, sizeof cp, "%s/kubelet_internal_checkpoint", w->dir);
  FILE *f = fopen(cp, "r");
  if (!f) return false;
  buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
  fclose(f);
  return strstr(buf, text) != NULL;
}

static void test_plugin_gone_and_grace(void **state) {
  world_t *w = world_new();
  manager_start(w, 300, 0);
  plugin_start(w, "dp.sock");
  do_register(w, "v1beta1", RES, "dp.sock", false);
  RUN_UNTIL(w, counts_are(w, 2, 2));
  RUN_UNTIL(w, checkpoint_has(w, "\"RegisteredDevices\":{\"" RES "\":[\"Dev-1\",\"Dev-2\"]}"));
  plugin_stop(w);
  RUN_UNTIL(w, counts_are(w, 2, 0)); /* unhealthy at once */
  /* the checkpoint no longer lists its devices (upstream's healthy ones) */
  RUN_UNTIL(w, checkpoint_has(w, "\"RegisteredDevices\":{\"" RES "\":[]}"));
  RUN_UNTIL(w, counts_are(w, 0, 0)); /* out of capacity after the grace period */
  RUN_UNTIL(w, w->plugin_done);
  /* back: registers again */
  plugin_start(w, "dp.sock");
  do_register(w, "v1beta1", RES, "dp.sock", false);
  RUN_UNTIL(w, counts_are(w, 2, 2));
  manager_stop(w);
  world_free(w);
}

/* A plugin registered, its first list of 2 healthy devices taken, watched. */
static world_t *watching(void) {
  world_t *w = world_new();
  manager_start(w, 0, 4);
  plugin_start(w, "dp.sock");
  do_register(w, "v1beta1", RES, "dp.sock", false);
  RUN_UNTIL(w, counts_are(w, 2, 2));
  return w;
}

/* The list just sent is refused: the stream ends, the old list unhealthy. */
static void refused_then_stop(world_t *w) {
  RUN_UNTIL(w, counts_are(w, 2, 0));
  RUN_UNTIL(w, !nl_grpc_call_alive(w->watch));
  nl_grpc_call_finish(w->watch, NL_GRPC_OK, NULL);
  w->watch = NULL;
  manager_stop(w);
  world_free(w);
}

static void test_too_many_devices(void **state) {
  world_t *w = watching();
  send_list(w, 5, NULL);
  refused_then_stop(w);
}

/* A device ID that is not UTF-8 is refused as one without an ID: the pod
 * resources API's Go clients could not read a List that carried it. */
static void test_device_id_not_utf8(void **state) {
  world_t *w = watching();
  V1beta1__Device d = V1BETA1__DEVICE__INIT, *dp = &d;
  d.id = "Dev-\xff";
  d.health = "Healthy";
  V1beta1__ListAndWatchResponse l = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
  l.devices = &dp;
  l.n_devices = 1;
  assert_int_equal(nl_grpc_call_send_msg(w->watch, &l.base), 0);
  refused_then_stop(w);
}

static void test_no_plugin_socket(void **state) {
  world_t *w = world_new();
  manager_start(w, 0, 0);
  do_register(w, "v1beta1", RES, "nothing.sock", false); /* answered after connect_wait_ms */
  assert_int_equal(w->reg_code, NL_GRPC_UNKNOWN);
  assert_non_null(strstr(w->reg_msg, "failed to get device plugin options: rpc error: code = "));
  size_t n;
  free(nl_devices_counts(&w->m, &n));
  assert_int_equal(n, 0); /* never used */
  assert_int_equal(w->changes, 0);
  manager_stop(w);
  world_free(w);
}

/* upstream's PluginConnected: Register is answered once the plugin answered
 * GetDevicePluginOptions; when that fails the plugin is refused and not used
 * (no ListAndWatch, no resource), and a registration in use is undisturbed. */
static void test_options_first(void **state) {
  world_t *w = world_new();
  manager_start(w, 0, 0);
  plugin_start(w, "dp.sock");
  w->opt_fail = "GetDevicePluginOptions failed";
  do_register(w, "v1beta1", RES, "dp.sock", false);
  assert_int_equal(w->reg_code, NL_GRPC_UNKNOWN);
  assert_string_equal(w->reg_msg, "failed to get device plugin options: rpc error: code = Unknown "
                                  "desc = GetDevicePluginOptions failed");
  for (int i = 0; i < 20; i++) uv_run(&w->loop, UV_RUN_NOWAIT);
  assert_int_equal(w->options_calls, 1);
  assert_int_equal(w->watch_calls, 0);
  size_t n;
  free(nl_devices_counts(&w->m, &n));
  assert_int_equal(n, 0);
  assert_int_equal(w->m.registrations, 0);

  w->opt_fail = NULL;
  do_register(w, "v1beta1", RES, "dp.sock", false);
  assert_int_equal(w->reg_code, NL_GRPC_OK);
  assert_int_equal(w->reg_options_calls, 2); /* asked before the answer */
  RUN_UNTIL(w, counts_are(w, 2, 2));
  assert_int_equal(w->watch_calls, 1);

  /* a failing re-registration leaves the one in use alone */
  w->opt_fail = "busy";
  do_register(w, "v1beta1", RES, "dp.sock", false);
  assert_int_equal(w->reg_code, NL_GRPC_UNKNOWN);
  for (int i = 0; i < 20; i++) uv_run(&w->loop, UV_RUN_NOWAIT);
  assert_true(counts_are(w, 2, 2));
  assert_true(nl_grpc_call_alive(w->watch));
  assert_int_equal(w->watch_calls, 1);
  manager_stop(w);
  world_free(w);
}

/* ---- pods ---- */

static nl_pod_t *pod_of(const char *uid, const char *spec_yaml) {
  char y[4096];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: p-%s, namespace: default, uid: %s}\n%s",
           uid, uid, spec_yaml);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(y, strlen(y), "test.yaml", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_pod_set_defaults(pod);
  return pod;
}

#define ONE_CONTAINER(n)                                                                   \
  "spec:\n  containers:\n  - name: c\n    image: busybox\n    resources: {limits: {" RES \
  ": " #n "}}\n"

static void on_container(void *ctx, V1beta1__ContainerAllocateResponse *const *resps, size_t n,
                         const char *err) {
  world_t *w = ctx;
  w->got = true;
  w->got_n = n;
  snprintf(w->got_err, sizeof w->got_err, "%s", err ? err : "");
  w->got_env[0] = 0;
  char cp[160];
  snprintf(cp, sizeof cp, "%s/kubelet_internal_checkpoint", w->dir);
  FILE *f = fopen(cp, "r");
  char text[8192] = "";
  if (f) {
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
  }
  w->got_ckpt = strstr(text, "\"AllocResp\"") != NULL;
  if (n && resps[0]->n_envs)
    snprintf(w->got_env, sizeof w->got_env, "%s", resps[0]->envs[0]->value);
}

/* The container statuses' allocatedResourcesStatus as the API gets it. */
static char *resource_status_json(world_t *w, const char *uid) {
  nl_pod_status_t *st = nl_xcalloc(1, sizeof *st);
  st->n_container_statuses = 2;
  st->container_statuses = nl_xcalloc(2, sizeof *st->container_statuses);
  st->container_statuses[0] = (nl_container_status_t){.name = nl_xstrdup("c"), .started = -1};
  st->container_statuses[1] = (nl_container_status_t){.name = nl_xstrdup("d"), .started = -1};
  nl_devices_resource_status(&w->m, uid, st);
  nl_pod_status_t *dup = nl_pod_status_dup(st); /* the copy holds it too */
  nl_pod_status_free(st);
  /* a terminated container's status is the old one copied: updated, not doubled */
  nl_devices_resource_status(&w->m, uid, dup);
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_status_encode_json(dup, &b);
  nl_pod_status_free(dup);
  char *out = nl_buf_steal(&b);
  char *from = strstr(out, "\"containerStatuses\"");
  char *r = nl_xstrdup(from ? from : out);
  free(out);
  return r;
}

/* ResourceHealthStatus: each device's health as the plugin lists it, in the
 * status of the container holding it; the pod is told when it changes. */
static void test_resource_status(void **state) {
  world_t *w = world_new();
  manager_start(w, 0, 0);
  plugin_start(w, "dp.sock");
  do_register(w, "v1beta1", RES, "dp.sock", false);
  RUN_UNTIL(w, counts_are(w, 2, 2));
  nl_pod_t *pod = pod_of("u1", ONE_CONTAINER(1));
  char *msg = NULL;
  assert_true(nl_devices_admit(&w->m, pod, &msg));
  char *j = resource_status_json(w, "u1");
  assert_string_equal(j, "\"containerStatuses\":[{\"name\":\"c\",\"state\":{},\"lastState\":{},"
                         "\"ready\":false,\"restartCount\":0,\"image\":\"\",\"imageID\":\"\","
                         "\"allocatedResourcesStatus\":[{\"name\":\"" RES "\",\"resources\":"
                         "[{\"resourceID\":\"Dev-1\",\"health\":\"Healthy\"}]}]},"
                         "{\"name\":\"d\",\"state\":{},\"lastState\":{},\"ready\":false,"
                         "\"restartCount\":0,\"image\":\"\",\"imageID\":\"\"}]}");
  free(j);
  assert_int_equal(w->pod_changes, 0);

  const char *other_sick[] = {"Healthy", "Unhealthy"}; /* Dev-2: nobody holds it */
  send_list(w, 2, other_sick);
  RUN_UNTIL(w, counts_are(w, 2, 1));
  assert_int_equal(w->pod_changes, 0);
  const char *sick[] = {"Unhealthy", "Unhealthy"};
  send_list(w, 2, sick);
  RUN_UNTIL(w, w->pod_changes == 1);
  assert_string_equal(w->pod_changed, "u1");
  j = resource_status_json(w, "u1");
  assert_non_null(strstr(j, "[{\"resourceID\":\"Dev-1\",\"health\":\"Unhealthy\"}]"));
  free(j);
  j = resource_status_json(w, "u2"); /* holds nothing */
  assert_null(strstr(j, "allocatedResourcesStatus"));
  free(j);
  send_list(w, 2, NULL);
  RUN_UNTIL(w, w->pod_changes == 2);
  nl_pod_free(pod);
  manager_stop(w);
  world_free(w);
}

static void test_admit_allocate_restore(void **state) {
  world_t *w = world_new();
  manager_start(w, 0, 0);
  plugin_start(w, "dp.sock");
  do_register(w, "v1beta1", RES, "dp.sock", true);
  RUN_UNTIL(w, counts_are(w, 2, 2));

  char *msg = NULL;
  nl_pod_t *big = pod_of("u3", ONE_CONTAINER(3));
  assert_false(nl_devices_admit(&w->m, big, &msg));
  assert_string_equal(msg, "Allocate failed due to requested number of devices unavailable for "
                           "example.com/resource. Requested: 3, Available: 2, which is unexpected");
  free(msg);
  /* an unknown extended resource is the cluster's business */
  nl_pod_t *other = pod_of("u9", "spec:\n  containers:\n  - name: c\n    image: b\n"
                                 "    resources: {limits: {other.io/thing: 5}}\n");
  assert_true(nl_devices_admit(&w->m, other, &msg));
  assert_null(msg);

  /* init containers' devices are reused by the app container */
  nl_pod_t *one = pod_of("u1", "spec:\n  initContainers:\n  - name: i\n    image: b\n"
                               "    resources: {limits: {" RES ": 1}}\n"
                               "  containers:\n  - name: c\n    image: b\n"
                               "    resources: {limits: {" RES ": 1}}\n");
  assert_true(nl_devices_admit(&w->m, one, &msg));
  size_t n1, n2;
  char *const *i_ids = nl_devices_assigned(&w->m, "u1", "i", RES, &n1);
  char *const *c_ids = nl_devices_assigned(&w->m, "u1", "c", RES, &n2);
  assert_int_equal(n1, 1);
  assert_int_equal(n2, 1);
  assert_string_equal(i_ids[0], c_ids[0]);
  /* one device left: a pod asking for 2 is refused, for 1 admitted */
  nl_pod_t *two = pod_of("u2", ONE_CONTAINER(2));
  assert_false(nl_devices_admit(&w->m, two, &msg));
  assert_non_null(strstr(msg, "Requested: 2, Available: 1,"));
  free(msg);
  nl_pod_t *again = pod_of("u4", ONE_CONTAINER(1));
  assert_true(nl_devices_admit(&w->m, again, &msg));
  assert_true(counts_are(w, 2, 2)); /* allocatable stays the healthy count, as upstream */

  /* Allocate and PreStartContainer before the container starts */
  assert_true(nl_devices_container(&w->m, one, &one->spec.containers[0], on_container, w));
  RUN_UNTIL(w, w->got);
  assert_string_equal(w->got_err, "");
  assert_int_equal(w->got_n, 1);
  char want[32];
  snprintf(want, sizeof want, "%s,", c_ids[0]);
  assert_string_equal(w->got_env, want);
  assert_int_equal(w->allocates, 1);
  assert_int_equal(w->prestarts, 1);
  assert_int_equal(w->pref_calls, 0); /* the plugin did not offer GetPreferredAllocation */
  assert_true(w->got_ckpt); /* the container starts only once its answer is checkpointed */
  /* no devices: nothing to do */
  assert_false(nl_devices_container(&w->m, other, &other->spec.containers[0], on_container, w));

  /* a new manager reads the checkpoint: same devices, no second Allocate */
  char keep[32];
  snprintf(keep, sizeof keep, "%s", c_ids[0]);
  manager_stop(w);
  plugin_stop(w);
  RUN_UNTIL(w, w->plugin_done);
  struct stat st;
  char cp[160];
  snprintf(cp, sizeof cp, "%s/kubelet_internal_checkpoint", w->dir);
  assert_int_equal(stat(cp, &st), 0);
  manager_start(w, 0, 0);
  assert_true(counts_are(w, 0, 0)); /* known, nothing to give until the plugin registers */
  c_ids = nl_devices_assigned(&w->m, "u1", "c", RES, &n2);
  assert_int_equal(n2, 1);
  assert_string_equal(c_ids[0], keep);
  /* a node reboot: its containers not running, its plugin not registered
   * again yet (the checkpoint's resource has no healthy device): refused, as
   * upstream */
  w->stopped = true;
  assert_false(nl_devices_admit(&w->m, one, &msg));
  assert_string_equal(msg, "Allocate failed due to no healthy devices present; cannot allocate "
                           "unhealthy devices example.com/resource, which is unexpected");
  free(msg);
  /* an agent restart: its containers run, and keep their devices */
  w->stopped = false;
  assert_true(nl_devices_admit(&w->m, one, &msg)); /* re-admitted: the same devices */
  c_ids = nl_devices_assigned(&w->m, "u1", "c", RES, &n2);
  assert_string_equal(c_ids[0], keep);
  w->got = false;
  w->prestarts = 0;
  assert_true(nl_devices_container(&w->m, one, &one->spec.containers[0], on_container, w));
  /* the plugin is gone, but the Allocate answer is in the checkpoint */
  RUN_UNTIL(w, w->got);
  assert_string_equal(w->got_err, "");
  assert_int_equal(w->allocates, 1);
  /* the app container of u4 never got its Allocate answer: without a plugin it fails */
  w->got = false;
  assert_true(nl_devices_container(&w->m, again, &again->spec.containers[0], on_container, w));
  RUN_UNTIL(w, w->got);
  assert_string_equal(w->got_err, "device plugin for example.com/resource: no plugin is "
                                  "registered for it");
  manager_stop(w);
  nl_pod_free(big);
  nl_pod_free(other);
  nl_pod_free(one);
  nl_pod_free(two);
  nl_pod_free(again);
  world_free(w);
}

/* A sidecar (restartable init container) reuses a plain init container's
 * device, and keeps it: the app container gets another (upstream's
 * devicesToReuse). */
static void test_sidecar_devices(void **state) {
  world_t *w = world_new();
  manager_start(w, 0, 0);
  plugin_start(w, "dp.sock");
  do_register(w, "v1beta1", RES, "dp.sock", false);
  RUN_UNTIL(w, counts_are(w, 2, 2));
  nl_pod_t *pod = pod_of("u1", "spec:\n  initContainers:\n  - name: i\n    image: b\n"
                               "    resources: {limits: {" RES ": 1}}\n"
                               "  - name: s\n    image: b\n    restartPolicy: Always\n"
                               "    resources: {limits: {" RES ": 1}}\n"
                               "  containers:\n  - name: c\n    image: b\n"
                               "    resources: {limits: {" RES ": 1}}\n");
  char *msg = NULL;
  assert_true(nl_devices_admit(&w->m, pod, &msg));
  size_t n;
  assert_string_equal(nl_devices_assigned(&w->m, "u1", "i", RES, &n)[0], "Dev-1");
  assert_string_equal(nl_devices_assigned(&w->m, "u1", "s", RES, &n)[0], "Dev-1");
  assert_string_equal(nl_devices_assigned(&w->m, "u1", "c", RES, &n)[0], "Dev-2");
  /* u1 no longer seen, but the sources have not given their pods yet (just
   * after a start): its devices stay; once they have, they are free */
  snprintf(w->gone, sizeof w->gone, "u1");
  w->unsynced = true;
  nl_pod_t *other = pod_of("u2", ONE_CONTAINER(1));
  assert_false(nl_devices_admit(&w->m, other, &msg));
  free(msg);
  assert_int_equal(nl_devices_assigned(&w->m, "u1", "c", RES, &n) != NULL, 1);
  w->unsynced = false;
  assert_true(nl_devices_admit(&w->m, other, &msg));
  manager_stop(w);
  nl_pod_free(other);
  nl_pod_free(pod);
  world_free(w);
}

/* Starts pod's container c (init when init) and waits for its answer. */
static void start_container(world_t *w, nl_pod_t *pod, const nl_container_t *c) {
  w->got = false;
  assert_true(nl_devices_container(&w->m, pod, c, on_container, w));
  RUN_UNTIL(w, w->got);
  assert_string_equal(w->got_err, "");
}

/* A plugin with GetPreferredAllocationAvailable chooses among the free
 * devices before Allocate; an invalid answer, or none within the call
 * timeout, leaves nanolet's choice. */
static void test_preferred_allocation(void **state) {
  world_t *w = world_new();
  w->opt_preferred = true;
  w->n_devs = 4;
  w->call_timeout_ms = 300;
  manager_start(w, 0, 0);
  plugin_start(w, "dp.sock");
  do_register(w, "v1beta1", RES, "dp.sock", false);
  RUN_UNTIL(w, counts_are(w, 4, 4));
  char *msg = NULL;
  nl_pod_t *p1 = pod_of("u1", "spec:\n  initContainers:\n  - name: i\n    image: b\n"
                              "    resources: {limits: {" RES ": 1}}\n"
                              "  containers:\n  - name: c\n    image: b\n"
                              "    resources: {limits: {" RES ": 1}}\n");
  assert_true(nl_devices_admit(&w->m, p1, &msg));
  size_t n;
  assert_string_equal(nl_devices_assigned(&w->m, "u1", "c", RES, &n)[0], "Dev-1");
  assert_int_equal(w->pref_calls, 0); /* asked before Allocate, not at admission */

  /* the init container: its answer taken, and the app container reuses it */
  w->pref_answer = "Dev-3";
  start_container(w, p1, &p1->spec.init_containers[0]);
  assert_int_equal(w->pref_calls, 1);
  assert_string_equal(w->pref_available, "Dev-1,Dev-2,Dev-3,Dev-4");
  assert_string_equal(w->pref_must, "");
  assert_int_equal(w->pref_size, 1);
  assert_string_equal(w->got_env, "Dev-3,");
  assert_string_equal(nl_devices_assigned(&w->m, "u1", "c", RES, &n)[0], "Dev-3");

  /* the app container must keep the init container's device: an answer
   * leaving it out is refused */
  w->pref_answer = "Dev-4";
  start_container(w, p1, &p1->spec.containers[0]);
  assert_int_equal(w->pref_calls, 2);
  assert_string_equal(w->pref_must, "Dev-3");
  assert_string_equal(w->got_env, "Dev-3,");

  /* a device in use, too many, an unknown one, one twice, none: nanolet's
   * choice; each pod is gone when the next is admitted */
  const char *bad[] = {"Dev-3", "Dev-2,Dev-4", "Dev-9", "Dev-2,Dev-2", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char uid[16];
    snprintf(uid, sizeof uid, "b%zu", i);
    nl_pod_t *p = pod_of(uid, ONE_CONTAINER(1));
    assert_true(nl_devices_admit(&w->m, p, &msg));
    w->pref_answer = bad[i];
    start_container(w, p, &p->spec.containers[0]);
    assert_string_equal(w->pref_available, "Dev-1,Dev-2,Dev-4");
    assert_string_equal(w->got_env, "Dev-1,");
    snprintf(w->gone, sizeof w->gone, "%s", uid);
    nl_pod_free(p);
  }

  /* a plugin that never answers delays the container by the call timeout only */
  w->pref_answer = "hang";
  nl_pod_t *p3 = pod_of("u3", ONE_CONTAINER(2));
  assert_true(nl_devices_admit(&w->m, p3, &msg));
  uint64_t t0 = uv_now(&w->loop);
  start_container(w, p3, &p3->spec.containers[0]);
  assert_true(uv_now(&w->loop) - t0 < 2000);
  assert_non_null(w->pref_hung);
  nl_grpc_call_reply(w->pref_hung, NL_GRPC_CANCELLED, NULL, NULL, 0); /* frees it */
  assert_string_equal(w->got_env, "Dev-1,Dev-2,");
  assert_int_equal(w->allocates, 8);
  manager_stop(w);
  nl_pod_free(p1);
  nl_pod_free(p3);
  world_free(w);
}

/* ---- the pod resources API ---- */

typedef struct pr_call {
  world_t *w;
  bool done;
  int code;
  char msg[256];
  ProtobufCMessage *resp; /* unpacked again: the client's is freed after the callback */
} pr_call_t;

static void on_pr(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  pr_call_t *c = ctx;
  c->done = true;
  c->code = st->code;
  snprintf(c->msg, sizeof c->msg, "%s", st->message ? st->message : "");
  if (!resp) return;
  size_t n = protobuf_c_message_get_packed_size(resp);
  uint8_t *b = nl_xmalloc(n + 1);
  protobuf_c_message_pack(resp, b);
  c->resp = protobuf_c_message_unpack(resp->descriptor, NULL, n, b);
  free(b);
}

static void pr_call(world_t *w, nl_cri_client_t *cl, const char *method,
                    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *d,
                    pr_call_t *c) {
  memset(c, 0, sizeof *c);
  char path[96];
  snprintf(path, sizeof path, "/v1.PodResourcesLister/%s", method);
  nl_cri_client_call(cl, path, req, d, 0, on_pr, c);
  RUN_UNTIL(w, c->done);
}

static bool only_u1_active(void *ctx, const char *uid) { return strcmp(uid, "u1") == 0; }

static void podres_stopped(nl_podres_t *p, void *ctx) { *(bool *)ctx = true; }

static void client_stopped(nl_cri_client_t *c) { (void)c; }

/* The pod resources API on the world's directory, and a client of it. */
static void podres_connect(world_t *w, nl_podres_t *pr, const nl_podres_deps_t *d,
                           nl_cri_client_t *cl) {
  char dir[160], sock[200];
  snprintf(dir, sizeof dir, "%s/pod-resources", w->dir);
  snprintf(sock, sizeof sock, "%s/kubelet.sock", dir);
  nl_err_t *err = NULL;
  if (nl_podres_start(pr, &w->loop, dir, d, &err) < 0) fail_msg("%s", err->msg);
  assert_int_equal(nl_cri_client_init(cl, &w->loop, sock, NULL, &err), 0);
}

static void test_pod_resources(void **state) {
  world_t *w = world_new();
  nl_kmetrics_t km;
  nl_kmetrics_init(&km, "node-1");
  nl_devices_opts_t o = {.dir = w->dir, .connect_wait_ms = 500, .pod_active = only_u1_active,
                         .metrics = &km};
  nl_err_t *err = NULL;
  if (nl_devices_start(&w->m, &w->loop, &o, &err) < 0) fail_msg("%s", err->msg);
  plugin_start(w, "dp.sock");
  do_register(w, "v1beta1", RES, "dp.sock", false);
  do_register(w, "v1", RES, "dp.sock", false); /* counted too, as upstream */
  RUN_UNTIL(w, counts_are(w, 2, 2));
  const char *health[] = {"Healthy", "Unhealthy", "Healthy"};
  send_list(w, 3, health);
  RUN_UNTIL(w, counts_are(w, 3, 2));

  /* u1: a sidecar and an app container with devices; u2 inactive */
  nl_pod_t *one = pod_of("u1", "spec:\n  initContainers:\n  - name: side\n    image: b\n"
                               "    restartPolicy: Always\n"
                               "  - name: once\n    image: b\n"
                               "  containers:\n  - name: c\n    image: b\n"
                               "    resources: {limits: {" RES ": 2}}\n");
  nl_pod_t *two = pod_of("u2", "spec:\n  containers:\n  - name: c\n    image: b\n");
  char *msg = NULL;
  assert_true(nl_devices_admit(&w->m, one, &msg));
  nl_pod_manager_t pods;
  nl_pod_manager_init(&pods);
  nl_pod_manager_set(&pods, one);
  nl_pod_manager_set(&pods, two);

  nl_podres_t pr;
  nl_podres_deps_t d = {.pods = &pods, .pod_active = only_u1_active, .devices = &w->m,
                        .metrics = &km, .qps = 0.001, .burst = 4};
  nl_cri_client_t cl;
  podres_connect(w, &pr, &d, &cl);

  pr_call_t c;
  V1__ListPodResourcesRequest lreq = V1__LIST_POD_RESOURCES_REQUEST__INIT;
  pr_call(w, &cl, "List", &lreq.base, &v1__list_pod_resources_response__descriptor, &c);
  assert_int_equal(c.code, NL_GRPC_OK);
  V1__ListPodResourcesResponse *l = (V1__ListPodResourcesResponse *)c.resp;
  assert_int_equal(l->n_pod_resources, 1); /* the active pod only */
  V1__PodResources *p1 = l->pod_resources[0];
  assert_string_equal(p1->name, "p-u1");
  assert_string_equal(p1->namespace_, "default");
  assert_int_equal(p1->n_containers, 2); /* the sidecar, then c; not the plain init container */
  assert_string_equal(p1->containers[0]->name, "side");
  assert_int_equal(p1->containers[0]->n_devices, 0);
  V1__ContainerResources *cr = p1->containers[1];
  assert_string_equal(cr->name, "c");
  assert_int_equal(cr->n_devices, 2); /* one entry per device, as upstream */
  assert_string_equal(cr->devices[0]->resource_name, RES);
  assert_int_equal(cr->devices[0]->n_device_ids, 1);
  assert_string_equal(cr->devices[0]->device_ids[0], "Dev-1");
  assert_string_equal(cr->devices[1]->device_ids[0], "Dev-3");
  assert_null(cr->devices[0]->topology);
  assert_int_equal(cr->n_cpu_ids, 0);
  assert_int_equal(cr->n_memory, 0);
  protobuf_c_message_free_unpacked(c.resp, NULL);

  V1__AllocatableResourcesRequest areq = V1__ALLOCATABLE_RESOURCES_REQUEST__INIT;
  pr_call(w, &cl, "GetAllocatableResources", &areq.base,
          &v1__allocatable_resources_response__descriptor, &c);
  assert_int_equal(c.code, NL_GRPC_OK);
  V1__AllocatableResourcesResponse *a = (V1__AllocatableResourcesResponse *)c.resp;
  assert_int_equal(a->n_devices, 2); /* the healthy ones, allocated or not */
  assert_string_equal(a->devices[0]->device_ids[0], "Dev-1");
  assert_string_equal(a->devices[1]->device_ids[0], "Dev-3");
  protobuf_c_message_free_unpacked(c.resp, NULL);

  V1__GetPodResourcesRequest greq = V1__GET_POD_RESOURCES_REQUEST__INIT;
  greq.pod_name = "p-u1";
  greq.pod_namespace = "default";
  pr_call(w, &cl, "Get", &greq.base, &v1__get_pod_resources_response__descriptor, &c);
  assert_int_equal(c.code, NL_GRPC_OK);
  V1__GetPodResourcesResponse *g = (V1__GetPodResourcesResponse *)c.resp;
  assert_string_equal(g->pod_resources->name, "p-u1");
  assert_int_equal(g->pod_resources->containers[1]->n_devices, 2);
  protobuf_c_message_free_unpacked(c.resp, NULL);
  greq.pod_name = "nope";
  pr_call(w, &cl, "Get", &greq.base, &v1__get_pod_resources_response__descriptor, &c);
  assert_int_equal(c.code, NL_GRPC_UNKNOWN);
  assert_string_equal(c.msg, "pod nope in namespace default not found");

  /* the burst (4) is spent: upstream's rate limit */
  pr_call(w, &cl, "List", &lreq.base, &v1__list_pod_resources_response__descriptor, &c);
  assert_int_equal(c.code, NL_GRPC_RESOURCE_EXHAUSTED);
  assert_string_equal(c.msg, "rejected by rate limit");
  if (c.resp) protobuf_c_message_free_unpacked(c.resp, NULL);

  /* Allocate is timed */
  w->got = false;
  assert_true(nl_devices_container(&w->m, one, &one->spec.containers[0], on_container, w));
  RUN_UNTIL(w, w->got);

  nl_buf_t out = NL_BUF_INIT;
  nl_metrics_encode(&km.reg, &out);
  const char *want[] = {
      "kubelet_pod_resources_endpoint_requests_total{server_api_version=\"v1\"} 4\n",
      "kubelet_pod_resources_endpoint_requests_list{server_api_version=\"v1\"} 1\n",
      "kubelet_pod_resources_endpoint_requests_get_allocatable{server_api_version=\"v1\"} 1\n",
      "kubelet_pod_resources_endpoint_requests_get{server_api_version=\"v1\"} 2\n",
      "kubelet_pod_resources_endpoint_errors_get{server_api_version=\"v1\"} 1\n",
      "kubelet_device_plugin_registration_total{resource_name=\"" RES "\"} 2\n",
      "kubelet_device_plugin_alloc_duration_seconds_count{resource_name=\"" RES "\"} 1\n",
      "kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name=\"" RES
      "\",le=\"10\"} 1\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(out.data, want[i])) fail_msg("missing %s in:\n%s", want[i], out.data);
  assert_null(strstr(out.data, "kubelet_pod_resources_endpoint_errors_list{"));
  nl_buf_free(&out);

  nl_cri_client_stop(&cl, client_stopped);
  bool pr_done = false;
  nl_podres_stop(&pr, podres_stopped, &pr_done);
  RUN_UNTIL(w, pr_done);
  manager_stop(w);
  nl_pod_manager_free(&pods);
  nl_pod_free(one);
  nl_pod_free(two);
  nl_kmetrics_free(&km);
  world_free(w);
}

static bool synced_flag(void *ctx) { return *(bool *)ctx; }

/* Just after a start, before the sources gave their pods, List and Get tell
 * the client to try again rather than answer without the running pods. */
static void test_pod_resources_before_sync(void **state) {
  world_t *w = world_new();
  bool synced = false;
  nl_podres_t pr;
  nl_podres_deps_t d = {.pod_active_ctx = &synced, .pods_synced = synced_flag, .qps = -1};
  nl_cri_client_t cl;
  podres_connect(w, &pr, &d, &cl);
  pr_call_t c;
  V1__ListPodResourcesRequest lreq = V1__LIST_POD_RESOURCES_REQUEST__INIT;
  pr_call(w, &cl, "List", &lreq.base, &v1__list_pod_resources_response__descriptor, &c);
  assert_int_equal(c.code, NL_GRPC_UNAVAILABLE);
  assert_string_equal(c.msg, "the kubelet does not know its pods yet");
  V1__GetPodResourcesRequest greq = V1__GET_POD_RESOURCES_REQUEST__INIT;
  greq.pod_name = "p";
  greq.pod_namespace = "default";
  pr_call(w, &cl, "Get", &greq.base, &v1__get_pod_resources_response__descriptor, &c);
  assert_int_equal(c.code, NL_GRPC_UNAVAILABLE);
  V1__AllocatableResourcesRequest areq = V1__ALLOCATABLE_RESOURCES_REQUEST__INIT;
  pr_call(w, &cl, "GetAllocatableResources", &areq.base,
          &v1__allocatable_resources_response__descriptor, &c);
  assert_int_equal(c.code, NL_GRPC_OK); /* does not depend on the pods */
  if (c.resp) protobuf_c_message_free_unpacked(c.resp, NULL);
  synced = true;
  pr_call(w, &cl, "List", &lreq.base, &v1__list_pod_resources_response__descriptor, &c);
  assert_int_equal(c.code, NL_GRPC_OK);
  if (c.resp) protobuf_c_message_free_unpacked(c.resp, NULL);
  nl_cri_client_stop(&cl, client_stopped);
  bool pr_done = false;
  nl_podres_stop(&pr, podres_stopped, &pr_done);
  RUN_UNTIL(w, pr_done);
  world_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_extended_names),
      cmocka_unit_test(test_register_and_watch),
      cmocka_unit_test(test_plugin_gone_and_grace),
      cmocka_unit_test(test_too_many_devices),
      cmocka_unit_test(test_device_id_not_utf8),
      cmocka_unit_test(test_no_plugin_socket),
      cmocka_unit_test(test_options_first),
      cmocka_unit_test(test_resource_status),
      cmocka_unit_test(test_admit_allocate_restore),
      cmocka_unit_test(test_sidecar_devices),
      cmocka_unit_test(test_preferred_allocation),
      cmocka_unit_test(test_pod_resources),
      cmocka_unit_test(test_pod_resources_before_sync),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
