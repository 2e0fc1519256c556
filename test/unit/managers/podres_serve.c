/* The pod resources API for independent clients (podres_python_client.py, on
 * Debian's python3-grpcio): a device manager in DIR with a fake plugin of
 * example.com/serial (ttyS0 and ttyS2 healthy, ttyS1 not) registered through
 * its socket, pod edge/gw (its container "c" holds two devices, a sidecar
 * none) and an inactive pod edge/old; serves DIR/pod-resources/kubelet.sock
 * and writes DIR/ready once the devices are assigned. Until SIGTERM; then
 * stops and exits 0 only if the loop closed cleanly.
 *   podres_serve DIR */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/conn.h"
#include "managers/podresources.h"
#include "reactor/xalloc.h"

#define RES "example.com/serial"

typedef struct app {
  uv_loop_t loop;
  const char *dir;
  nl_devices_t m;
  nl_grpc_server_t plugin;
  nl_grpc_call_t *watch;
  nl_cri_client_t reg;
  nl_pod_manager_t pods;
  nl_pod_t *gw, *old;
  nl_podres_t pr;
  uv_signal_t sigterm;
  uv_timer_t poll;
  int closing;
} app_t;

static bool active(void *ctx, const char *uid) { return strcmp(uid, "uid-gw") == 0; }

/* Asked before the registration is answered. */
static void h_options(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  (void)ctx, (void)req, (void)len;
  V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  nl_grpc_call_reply_msg(call, &o.base);
}

static void h_watch(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  app_t *a = ctx;
  a->watch = call;
  V1beta1__Device d[3];
  V1beta1__Device *dp[3];
  const char *ids[] = {"ttyS0", "ttyS1", "ttyS2"};
  for (int i = 0; i < 3; i++) {
    v1beta1__device__init(&d[i]);
    d[i].id = (char *)ids[i];
    d[i].health = i == 1 ? "Unhealthy" : "Healthy";
    dp[i] = &d[i];
  }
  V1beta1__ListAndWatchResponse l = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
  l.devices = dp;
  l.n_devices = 3;
  nl_grpc_call_send_msg(call, &l.base);
}

static void on_registered(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  if (st->code != NL_GRPC_OK) {
    fprintf(stderr, "register: %s\n", st->message);
    exit(1);
  }
}

static nl_pod_t *pod(const char *name, const char *spec) {
  char y[1024];
  snprintf(y, sizeof y, "apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: edge, uid: "
           "uid-%s}\n%s", name, name, spec);
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(y, strlen(y), "pod.yaml", &p, &err) < 0) {
    fprintf(stderr, "%s\n", nl_err_msg(err));
    exit(1);
  }
  nl_pod_set_defaults(p);
  return p;
}

/* Admits edge/gw once the plugin's list is in, then says it is ready. */
static void on_poll(uv_timer_t *t) {
  app_t *a = t->data;
  size_t n;
  nl_devices_count_t *c = nl_devices_counts(&a->m, &n);
  bool in = n == 1 && c[0].allocatable == 2;
  free(c);
  if (!in) return;
  uv_timer_stop(t);
  char *msg = NULL;
  if (!nl_devices_admit(&a->m, a->gw, &msg)) {
    fprintf(stderr, "admit: %s\n", msg);
    exit(1);
  }
  char *ready = nl_xasprintf("%s/ready", a->dir);
  FILE *f = fopen(ready, "w");
  if (f) fclose(f);
  free(ready);
}

static void closed(uv_handle_t *h) { (void)h; }
static void reg_stopped(nl_cri_client_t *c) { (void)c; }
static void plugin_stopped(nl_grpc_server_t *s, void *ctx) { (void)s, (void)ctx; }
static void m_stopped(nl_devices_t *m, void *ctx) { (void)m, (void)ctx; }

static void pr_stopped(nl_podres_t *p, void *ctx) {
  app_t *a = ctx;
  nl_devices_stop(&a->m, m_stopped, a);
}

static void on_term(uv_signal_t *s, int sig) {
  app_t *a = s->data;
  uv_close((uv_handle_t *)s, closed);
  uv_close((uv_handle_t *)&a->poll, closed);
  if (a->watch) nl_grpc_call_finish(a->watch, NL_GRPC_OK, NULL);
  a->watch = NULL;
  nl_grpc_server_stop(&a->plugin, plugin_stopped, a);
  nl_cri_client_stop(&a->reg, reg_stopped);
  nl_podres_stop(&a->pr, pr_stopped, a);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: podres_serve DIR\n");
    return 2;
  }
  app_t a = {.dir = argv[1]};
  uv_loop_init(&a.loop);
  nl_err_t *err = NULL;
  char *dp_dir = nl_xasprintf("%s/device-plugins", a.dir);
  nl_devices_opts_t o = {.dir = dp_dir, .pod_active = active};
  if (nl_devices_start(&a.m, &a.loop, &o, &err) < 0) {
    fprintf(stderr, "%s\n", err->msg);
    return 1;
  }
  char *plugin_sock = nl_xasprintf("%s/serial.sock", dp_dir);
  nl_grpc_server_init(&a.plugin, &a.loop, NULL);
  nl_grpc_server_method(&a.plugin, "/v1beta1.DevicePlugin/GetDevicePluginOptions", NL_GRPC_UNARY,
                        h_options, &a);
  nl_grpc_server_method(&a.plugin, "/v1beta1.DevicePlugin/ListAndWatch",
                        NL_GRPC_SERVER_STREAMING, h_watch, &a);
  if (nl_grpc_server_listen(&a.plugin, plugin_sock, &err) < 0) {
    fprintf(stderr, "%s\n", err->msg);
    return 1;
  }
  char *reg_sock = nl_xasprintf("%s/kubelet.sock", dp_dir);
  if (nl_cri_client_init(&a.reg, &a.loop, reg_sock, NULL, &err) < 0) return 1;
  V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
  r.version = "v1beta1";
  r.resource_name = RES;
  r.endpoint = "serial.sock";
  nl_cri_client_call(&a.reg, "/v1beta1.Registration/Register", &r.base,
                     &v1beta1__empty__descriptor, 0, on_registered, &a);

  a.gw = pod("gw", "spec:\n  initContainers:\n  - {name: side, image: b, restartPolicy: Always}\n"
                   "  containers:\n  - name: c\n    image: b\n    resources: {limits: {" RES
                   ": 2}}\n");
  a.old = pod("old", "spec:\n  containers:\n  - {name: c, image: b}\n");
  nl_pod_manager_init(&a.pods);
  nl_pod_manager_set(&a.pods, a.gw);
  nl_pod_manager_set(&a.pods, a.old);
  char *pr_dir = nl_xasprintf("%s/pod-resources", a.dir);
  nl_podres_deps_t d = {.pods = &a.pods, .pod_active = active, .devices = &a.m, .qps = -1};
  if (nl_podres_start(&a.pr, &a.loop, pr_dir, &d, &err) < 0) {
    fprintf(stderr, "%s\n", err->msg);
    return 1;
  }
  uv_timer_init(&a.loop, &a.poll);
  a.poll.data = &a;
  uv_timer_start(&a.poll, on_poll, 10, 10);
  uv_signal_init(&a.loop, &a.sigterm);
  a.sigterm.data = &a;
  uv_signal_start(&a.sigterm, on_term, SIGTERM);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&a.loop);
  nl_pod_manager_free(&a.pods);
  nl_pod_free(a.gw);
  nl_pod_free(a.old);
  free(dp_dir);
  free(plugin_sock);
  free(reg_sock);
  free(pr_dir);
  return rc == 0 ? 0 : 1;
}
