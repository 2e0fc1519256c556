/* libFuzzer target for what a hostile device plugin answers the device
 * manager (managers/devices*.c), over the real path: a plugin served with
 * cri/grpc_server.h in the same loop registers through the manager's socket,
 * and its answers are the input's bytes, decoded by the manager's own client
 * and checked by its own code.
 *
 * Input: byte 0 picks the answer, the rest is its message's bytes:
 *   0  ListAndWatchResponse (the first list: bounds, IDs, health, the
 *      checkpoint, node counts and the pod resources answers after it)
 *   1  AllocateResponse to the Allocate of a container admitted with one of
 *      the plugin's two devices (the one-response check, the checkpointed
 *      answer unpacked again for the runtime)
 *   2  DevicePluginOptions, the plugin's GetDevicePluginOptions answer (asked
 *      before the registration is answered; a list follows when it decodes)
 *   3  PreferredAllocationResponse, the GetPreferredAllocation answer of a
 *      plugin that offers it, for the same container before its Allocate
 *      (decoded, checked against what was asked, applied or refused)
 * Checks: no crash, leak or sanitizer report; the container is answered
 * exactly once and holds one of the plugin's devices; the loop closes
 * cleanly. Seeds: corpus-plugin/. */
#include <assert.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "managers/devices_internal.h"
#include "managers/podresources.h"
#include "reactor/log.h"

#define RES "example.com/dev"

typedef struct world {
  uv_loop_t loop;
  nl_devices_t m;
  nl_grpc_server_t plugin;
  nl_grpc_call_t *watch;
  int kind;
  const uint8_t *msg;
  size_t len;
  bool listed, registered, reg_ok, m_done, plugin_done;
  int answers;
  uv_timer_t guard;
  bool expired;
} world_t;

static char dir[64];

static void send_list(world_t *w, nl_grpc_call_t *call) {
  V1beta1__Device d[2], *dp[2] = {&d[0], &d[1]};
  const char *ids[] = {"d0", "d1"};
  for (int i = 0; i < 2; i++) {
    v1beta1__device__init(&d[i]);
    d[i].id = (char *)ids[i];
    d[i].health = "Healthy";
  }
  V1beta1__ListAndWatchResponse l = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
  l.devices = dp;
  l.n_devices = 2;
  nl_grpc_call_send_msg(call, &l.base);
}

static void h_watch(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->watch = call;
  if (w->kind == 0) nl_grpc_call_send(call, w->msg, w->len);
  else send_list(w, call);
  w->listed = true;
}

static void h_allocate(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  if (w->kind == 1) {
    nl_grpc_call_reply(call, NL_GRPC_OK, NULL, w->msg, w->len);
    return;
  }
  V1beta1__ContainerAllocateResponse cr = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
  V1beta1__ContainerAllocateResponse *crs[] = {&cr};
  V1beta1__AllocateResponse r = V1BETA1__ALLOCATE_RESPONSE__INIT;
  r.container_responses = crs;
  r.n_container_responses = 1;
  nl_grpc_call_reply_msg(call, &r.base);
}

static void h_preferred(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  nl_grpc_call_reply(call, NL_GRPC_OK, NULL, w->msg, w->len);
}

static void h_options(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  if (w->kind == 2) {
    nl_grpc_call_reply(call, NL_GRPC_OK, NULL, w->msg, w->len);
    return;
  }
  V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  o.get_preferred_allocation_available = w->kind == 3;
  nl_grpc_call_reply_msg(call, &o.base);
}

static void on_registered(void *ctx, int code, const char *msg) {
  world_t *w = ctx;
  assert(!w->registered && (code == NL_GRPC_OK ? !msg : msg != NULL));
  w->registered = true;
  w->reg_ok = code == NL_GRPC_OK;
}

static void on_container(void *ctx, V1beta1__ContainerAllocateResponse *const *resps, size_t n,
                         const char *err) {
  world_t *w = ctx;
  w->answers++;
  assert(err || n == 1);
  for (size_t i = 0; i < n; i++) assert(resps[i]);
}

static void on_guard(uv_timer_t *t) { ((world_t *)t->data)->expired = true; }

/* The guard is against a hang, not a bound on time: on a loaded machine (the
 * fuzzers run niced beside the e2e tests) a turn can take seconds. */
static void run_until(world_t *w, const bool *flag) {
  w->expired = false;
  uv_timer_start(&w->guard, on_guard, 30000, 0);
  while (!*flag && !w->expired) uv_run(&w->loop, UV_RUN_ONCE);
  uv_timer_stop(&w->guard);
}

static void m_stopped(nl_devices_t *m, void *ctx) { ((world_t *)ctx)->m_done = true; }
static void plugin_stopped(nl_grpc_server_t *s, void *ctx) { ((world_t *)ctx)->plugin_done = true; }

static uint8_t *register_bytes(size_t *n) {
  V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
  r.version = "v1beta1";
  r.endpoint = "p.sock";
  r.resource_name = RES;
  uint8_t *b = malloc(v1beta1__register_request__get_packed_size(&r));
  *n = v1beta1__register_request__pack(&r, b);
  return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (!dir[0]) {
    nl_log_set_verbosity(-1);
    nl_log_set_fd(open("/dev/null", O_WRONLY));
    strcpy(dir, "/tmp/nl-fuzz-plugin-XXXXXX");
    if (!mkdtemp(dir)) abort();
  }
  world_t w = {.kind = data[0] & 3, .msg = data + 1, .len = size - 1};
  uv_loop_init(&w.loop);
  uv_timer_init(&w.loop, &w.guard);
  w.guard.data = &w;
  nl_devices_opts_t o = {.dir = dir, .connect_wait_ms = 20, .call_timeout_ms = 2000,
                         .max_msg = 64 * 1024};
  nl_err_t *err = NULL;
  if (nl_devices_start(&w.m, &w.loop, &o, &err) < 0) abort();
  char path[128];
  snprintf(path, sizeof path, "%s/p.sock", dir);
  nl_grpc_server_init(&w.plugin, &w.loop, NULL);
  nl_grpc_server_method(&w.plugin, "/v1beta1.DevicePlugin/GetDevicePluginOptions",
                        NL_GRPC_UNARY, h_options, &w);
  nl_grpc_server_method(&w.plugin, "/v1beta1.DevicePlugin/ListAndWatch",
                        NL_GRPC_SERVER_STREAMING, h_watch, &w);
  nl_grpc_server_method(&w.plugin, "/v1beta1.DevicePlugin/Allocate", NL_GRPC_UNARY, h_allocate,
                        &w);
  nl_grpc_server_method(&w.plugin, "/v1beta1.DevicePlugin/GetPreferredAllocation", NL_GRPC_UNARY,
                        h_preferred, &w);
  if (nl_grpc_server_listen(&w.plugin, path, &err) < 0) abort();
  /* the registration, through the manager's handler on its bytes */
  size_t rn;
  uint8_t *rb = register_bytes(&rn);
  char *msg = NULL;
  int code = nl__dev_register(&w.m, rb, rn, 0, on_registered, &w, &msg);
  assert(code == NL_GRPC_OK && !msg);
  free(rb);
  run_until(&w, &w.registered);
  if (w.reg_ok) run_until(&w, &w.listed);
  for (int i = 0; i < 20; i++) uv_run(&w.loop, UV_RUN_NOWAIT); /* the list is read */

  /* what reads the lists: node counts, the pod resources answers */
  size_t n;
  free(nl_devices_counts(&w.m, &n));
  nl_podres_t pr = {.loop = &w.loop, .deps = {.devices = &w.m}};
  nl_podres_msg_free(&nl_podres_allocatable(&pr)->base);

  if (w.kind == 1 || w.kind == 3) {
    const char *y = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d, uid: u}\n"
                    "spec:\n  containers:\n  - name: c\n    image: b\n"
                    "    resources: {limits: {" RES ": 1}}\n";
    nl_pod_t *pod = NULL;
    if (nl_pod_decode(y, strlen(y), "p.yaml", &pod, &err) < 0) abort();
    nl_pod_set_defaults(pod);
    char *amsg = NULL;
    if (nl_devices_admit(&w.m, pod, &amsg)) {
      bool asked = nl_devices_container(&w.m, pod, &pod->spec.containers[0], on_container, &w);
      if (asked) {
        while (w.answers == 0) uv_run(&w.loop, UV_RUN_ONCE);
        /* a second container start reads the checkpointed answer */
        (void)nl_devices_container(&w.m, pod, &pod->spec.containers[0], on_container, &w);
        while (w.answers < 2) uv_run(&w.loop, UV_RUN_ONCE);
      }
      /* whatever the plugin preferred, the container holds one of its devices */
      size_t n_ids;
      char *const *ids = nl_devices_assigned(&w.m, "u", "c", RES, &n_ids);
      assert(n_ids == 1 && (strcmp(ids[0], "d0") == 0 || strcmp(ids[0], "d1") == 0));
    }
    free(amsg);
    nl_pod_free(pod);
  }

  if (w.watch) nl_grpc_call_finish(w.watch, NL_GRPC_OK, NULL);
  nl_grpc_server_stop(&w.plugin, plugin_stopped, &w);
  nl_devices_stop(&w.m, m_stopped, &w);
  while (!w.m_done || !w.plugin_done) uv_run(&w.loop, UV_RUN_ONCE);
  assert(w.registered); /* answered exactly once, whatever happened */
  uv_close((uv_handle_t *)&w.guard, NULL);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&w.loop) != 0) abort();
  return 0;
}
