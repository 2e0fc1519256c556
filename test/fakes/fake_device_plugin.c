/* nanolet-fake-device-plugin: a device plugin of the tests' own, on the
 * project's gRPC server (cri/grpc_server.h) and client (cri/conn.h), for the
 * end-to-end tests (test/e2e/devices.sh):
 *
 *   nanolet-fake-device-plugin [--resource NAME] [--count N]
 *       [--device HOST:CONTAINER[:PERMS]]... [--mount HOST:CONTAINER]...
 *       [--env KEY=VALUE]... [--preferred ID,ID...] DIR
 *
 * serves the DevicePlugin service on DIR/fake-<pid>.sock, registers NAME
 * (default nanolet.test/pty) with the agent on DIR/kubelet.sock, advertises N
 * healthy devices (dev-1 ... dev-N, default 1) and answers each container's
 * Allocate with every --device (a DeviceSpec; PERMS default rw), --mount and
 * --env given, plus DEVICE_IDS=<the ids asked for>. With --preferred it
 * offers GetPreferredAllocation and answers it with those IDs, whatever it
 * is asked. When the agent goes (its
 * ListAndWatch stream ends) it registers again, every second until answered,
 * making its socket anew if the agent's start removed it (as upstream's stub
 * does when kubelet.sock is made again). SIGTERM or SIGINT: stops, removes
 * its socket and exits 0.
 *
 * What it does goes to stdout, one line each, for the tests to read:
 * "listening PATH", "registered NAME", "register: ERROR", "watch",
 * "watch ended", "allocate ID,ID", "prestart ID", "health Healthy|Unhealthy",
 * "preferred available=ID,ID must=ID,ID size=N".
 * SIGUSR1 turns every device's health over (Healthy <-> Unhealthy) and sends
 * the new list. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "cri/conn.h"
#include "cri/deviceplugin.pb-c.h"
#include "cri/grpc_server.h"

#define MAX_SPECS 16

typedef struct spec {
  char *host, *container, *perms;
} spec_t;

typedef struct plugin {
  uv_loop_t *loop;
  const char *resource;
  int count;
  spec_t devices[MAX_SPECS], mounts[MAX_SPECS];
  size_t n_devices, n_mounts;
  char *env_keys[MAX_SPECS], *env_values[MAX_SPECS];
  size_t n_envs;
  char sock[512], kubelet_sock[512], endpoint[64];
  nl_grpc_server_t *srv;
  nl_cri_client_t reg;
  bool registering, stopping;
  bool unhealthy;              /* SIGUSR1 turns it over */
  char *preferred;             /* --preferred; NULL: not offered */
  nl_grpc_call_t *watch;       /* the agent's ListAndWatch */
  nl_grpc_call_t *ended_watch; /* cancelled, answered from the timer */
  uv_timer_t timer;            /* registration retries */
  uv_signal_t sigterm, sigint, sigusr1;
} plugin_t;

static void die(const char *what) {
  fprintf(stderr, "nanolet-fake-device-plugin: %s\n", what);
  exit(2);
}

/* HOST:CONTAINER[:PERMS] */
static void parse_spec(spec_t *s, char *arg, bool perms) {
  char *c = strchr(arg, ':');
  if (!c || c == arg || !c[1]) die("expected HOST:CONTAINER");
  *c++ = '\0';
  s->host = arg;
  s->container = c;
  s->perms = "rw";
  char *p = strchr(c, ':');
  if (p) {
    if (!perms) die("a mount is HOST:CONTAINER");
    *p++ = '\0';
    s->perms = p;
  }
}

/* ---- the DevicePlugin service ---- */

static void on_timer(uv_timer_t *t);

static void h_options(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  plugin_t *p = ctx;
  V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  o.get_preferred_allocation_available = p->preferred != NULL;
  nl_grpc_call_reply_msg(call, &o.base);
}

static void on_watch_cancel(nl_grpc_call_t *call, void *ctx) {
  plugin_t *p = ctx;
  if (p->watch != call) return;
  p->watch = NULL;
  p->ended_watch = call;
  printf("watch ended\n");
  if (!p->stopping) uv_timer_start(&p->timer, on_timer, 0, 0);
}

static void send_list(plugin_t *p, nl_grpc_call_t *call) {
  V1beta1__Device d[p->count];
  V1beta1__Device *dp[p->count];
  char ids[p->count][16];
  for (int i = 0; i < p->count; i++) {
    v1beta1__device__init(&d[i]);
    snprintf(ids[i], sizeof ids[i], "dev-%d", i + 1);
    d[i].id = ids[i];
    d[i].health = p->unhealthy ? "Unhealthy" : "Healthy";
    dp[i] = &d[i];
  }
  V1beta1__ListAndWatchResponse l = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
  l.devices = dp;
  l.n_devices = (size_t)p->count;
  nl_grpc_call_send_msg(call, &l.base);
}

static void h_watch(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  plugin_t *p = ctx;
  if (p->watch) nl_grpc_call_finish(p->watch, NL_GRPC_OK, NULL); /* replaced */
  p->watch = call;
  nl_grpc_call_on_cancel(call, on_watch_cancel, p);
  printf("watch\n");
  send_list(p, call);
}

static void on_health(uv_signal_t *s, int signum) {
  plugin_t *p = s->data;
  p->unhealthy = !p->unhealthy;
  printf("health %s\n", p->unhealthy ? "Unhealthy" : "Healthy");
  if (p->watch) send_list(p, p->watch);
}

static void h_allocate(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  plugin_t *p = ctx;
  V1beta1__AllocateRequest *r = v1beta1__allocate_request__unpack(NULL, len, req);
  if (!r) {
    nl_grpc_call_reply(call, NL_GRPC_INVALID_ARGUMENT, "AllocateRequest does not decode", NULL, 0);
    return;
  }
  size_t n = r->n_container_requests;
  V1beta1__ContainerAllocateResponse *cr = calloc(n + 1, sizeof *cr);
  V1beta1__ContainerAllocateResponse **crp = calloc(n + 1, sizeof *crp);
  char(*idlist)[512] = calloc(n + 1, sizeof *idlist);
  V1beta1__DeviceSpec ds[MAX_SPECS], *dsp[MAX_SPECS];
  V1beta1__Mount ms[MAX_SPECS], *msp[MAX_SPECS];
  V1beta1__ContainerAllocateResponse__EnvsEntry es[n + 1][MAX_SPECS + 1];
  V1beta1__ContainerAllocateResponse__EnvsEntry *esp[n + 1][MAX_SPECS + 1];
  if (!cr || !crp || !idlist) die("out of memory");
  for (size_t i = 0; i < p->n_devices; i++) {
    v1beta1__device_spec__init(&ds[i]);
    ds[i].host_path = p->devices[i].host;
    ds[i].container_path = p->devices[i].container;
    ds[i].permissions = p->devices[i].perms;
    dsp[i] = &ds[i];
  }
  for (size_t i = 0; i < p->n_mounts; i++) {
    v1beta1__mount__init(&ms[i]);
    ms[i].host_path = p->mounts[i].host;
    ms[i].container_path = p->mounts[i].container;
    msp[i] = &ms[i];
  }
  for (size_t c = 0; c < n; c++) {
    V1beta1__ContainerAllocateRequest *q = r->container_requests[c];
    for (size_t i = 0; i < q->n_devices_ids; i++) {
      size_t used = strlen(idlist[c]);
      snprintf(idlist[c] + used, sizeof idlist[c] - used, "%s%s", i ? "," : "", q->devices_ids[i]);
    }
    printf("allocate %s\n", idlist[c]);
    v1beta1__container_allocate_response__init(&cr[c]);
    cr[c].devices = dsp;
    cr[c].n_devices = p->n_devices;
    cr[c].mounts = msp;
    cr[c].n_mounts = p->n_mounts;
    for (size_t i = 0; i <= p->n_envs; i++) {
      v1beta1__container_allocate_response__envs_entry__init(&es[c][i]);
      es[c][i].key = i < p->n_envs ? p->env_keys[i] : "DEVICE_IDS";
      es[c][i].value = i < p->n_envs ? p->env_values[i] : idlist[c];
      esp[c][i] = &es[c][i];
    }
    cr[c].envs = esp[c];
    cr[c].n_envs = p->n_envs + 1;
    crp[c] = &cr[c];
  }
  V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
  resp.container_responses = crp;
  resp.n_container_responses = n;
  nl_grpc_call_reply_msg(call, &resp.base);
  free(cr);
  free(crp);
  free(idlist);
  v1beta1__allocate_request__free_unpacked(r, NULL);
}

static void h_prestart(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  V1beta1__PreStartContainerRequest *r = v1beta1__pre_start_container_request__unpack(NULL, len, req);
  for (size_t i = 0; r && i < r->n_devices_ids; i++) printf("prestart %s\n", r->devices_ids[i]);
  if (r) v1beta1__pre_start_container_request__free_unpacked(r, NULL);
  V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
  nl_grpc_call_reply_msg(call, &resp.base);
}

static void print_ids(const char *what, char *const *ids, size_t n) {
  printf(" %s=", what);
  for (size_t i = 0; i < n; i++) printf("%s%s", i ? "," : "", ids[i]);
}

static void h_preferred(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  plugin_t *p = ctx;
  V1beta1__PreferredAllocationRequest *r = v1beta1__preferred_allocation_request__unpack(NULL, len, req);
  for (size_t c = 0; r && c < r->n_container_requests; c++) {
    const V1beta1__ContainerPreferredAllocationRequest *q = r->container_requests[c];
    printf("preferred");
    print_ids("available", q->available_deviceids, q->n_available_deviceids);
    print_ids("must", q->must_include_deviceids, q->n_must_include_deviceids);
    printf(" size=%d\n", (int)q->allocation_size);
  }
  if (r) v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
  char buf[512], *ids[MAX_SPECS], *save = NULL;
  size_t n = 0;
  snprintf(buf, sizeof buf, "%s", p->preferred ? p->preferred : "");
  for (char *t = strtok_r(buf, ",", &save); t && n < MAX_SPECS; t = strtok_r(NULL, ",", &save))
    ids[n++] = t;
  V1beta1__ContainerPreferredAllocationResponse cr =
      V1BETA1__CONTAINER_PREFERRED_ALLOCATION_RESPONSE__INIT;
  cr.deviceids = ids;
  cr.n_deviceids = n;
  V1beta1__ContainerPreferredAllocationResponse *crs[] = {&cr};
  V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
  resp.container_responses = crs;
  resp.n_container_responses = 1;
  nl_grpc_call_reply_msg(call, &resp.base);
}

static void server_freed(nl_grpc_server_t *srv, void *ctx) { free(srv); }

/* (Re)starts the server on p->sock; the old one, if any, is stopped. */
static void serve(plugin_t *p) {
  if (p->srv) nl_grpc_server_stop(p->srv, server_freed, NULL);
  p->srv = calloc(1, sizeof *p->srv);
  if (!p->srv) die("out of memory");
  nl_grpc_server_init(p->srv, p->loop, NULL);
  static const struct {
    const char *path;
    nl_grpc_method_kind_t kind;
    nl_grpc_handler_fn fn;
  } methods[] = {
    {"/v1beta1.DevicePlugin/GetDevicePluginOptions", NL_GRPC_UNARY, h_options},
    {"/v1beta1.DevicePlugin/ListAndWatch", NL_GRPC_SERVER_STREAMING, h_watch},
    {"/v1beta1.DevicePlugin/GetPreferredAllocation", NL_GRPC_UNARY, h_preferred},
    {"/v1beta1.DevicePlugin/Allocate", NL_GRPC_UNARY, h_allocate},
    {"/v1beta1.DevicePlugin/PreStartContainer", NL_GRPC_UNARY, h_prestart},
  };
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
    nl_grpc_server_method(p->srv, methods[i].path, methods[i].kind, methods[i].fn, p);
  nl_err_t *err = NULL;
  if (nl_grpc_server_listen(p->srv, p->sock, &err) < 0) die(err->msg);
  printf("listening %s\n", p->sock);
}

/* ---- registration ---- */

static void on_registered(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  plugin_t *p = ctx;
  p->registering = false;
  if (p->stopping) return;
  if (st->code == NL_GRPC_OK) {
    printf("registered %s\n", p->resource);
    return;
  }
  printf("register: %s\n", st->message ? st->message : "failed");
  uv_timer_start(&p->timer, on_timer, 1000, 0);
}

static void on_timer(uv_timer_t *t) {
  plugin_t *p = t->data;
  if (p->ended_watch) {
    nl_grpc_call_finish(p->ended_watch, NL_GRPC_OK, NULL);
    p->ended_watch = NULL;
    uv_timer_start(&p->timer, on_timer, 1000, 0); /* the agent is going: wait */
    return;
  }
  if (p->registering || p->stopping) return;
  struct stat st;
  if (stat(p->sock, &st) < 0) serve(p); /* removed by the agent's start */
  V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
  r.version = "v1beta1";
  r.endpoint = p->endpoint;
  r.resource_name = (char *)p->resource;
  r.options = &o;
  p->registering = true;
  nl_cri_client_call(&p->reg, "/v1beta1.Registration/Register", &r.base,
                     &v1beta1__empty__descriptor, 5000, on_registered, p);
}

/* ---- stop ---- */

static void reg_stopped(nl_cri_client_t *c) {}

static void on_signal(uv_signal_t *s, int signum) {
  plugin_t *p = s->data;
  if (p->stopping) return;
  p->stopping = true;
  printf("stopping (signal %d)\n", signum);
  uv_timer_stop(&p->timer);
  if (p->watch) nl_grpc_call_finish(p->watch, NL_GRPC_OK, NULL);
  if (p->ended_watch) nl_grpc_call_finish(p->ended_watch, NL_GRPC_OK, NULL);
  p->watch = p->ended_watch = NULL;
  nl_grpc_server_stop(p->srv, server_freed, NULL);
  p->srv = NULL;
  nl_cri_client_stop(&p->reg, reg_stopped);
  uv_close((uv_handle_t *)&p->timer, NULL);
  uv_close((uv_handle_t *)&p->sigterm, NULL);
  uv_close((uv_handle_t *)&p->sigint, NULL);
  uv_close((uv_handle_t *)&p->sigusr1, NULL);
}

int main(int argc, char **argv) {
  static plugin_t p = {.resource = "nanolet.test/pty", .count = 1};
  static const struct option longopts[] = {
    {"resource", required_argument, NULL, 'r'}, {"count", required_argument, NULL, 'n'},
    {"device", required_argument, NULL, 'd'},   {"mount", required_argument, NULL, 'm'},
    {"env", required_argument, NULL, 'e'},      {"help", no_argument, NULL, 'h'},
    {"preferred", required_argument, NULL, 'p'},
    {NULL, 0, NULL, 0},
  };
  int opt;
  while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (opt) {
    case 'r': p.resource = optarg; break;
    case 'n':
      p.count = atoi(optarg);
      if (p.count < 0 || p.count > 64) die("--count: 0 to 64");
      break;
    case 'd':
      if (p.n_devices == MAX_SPECS) die("too many --device");
      parse_spec(&p.devices[p.n_devices++], optarg, true);
      break;
    case 'm':
      if (p.n_mounts == MAX_SPECS) die("too many --mount");
      parse_spec(&p.mounts[p.n_mounts++], optarg, false);
      break;
    case 'e': {
      char *eq = strchr(optarg, '=');
      if (!eq || eq == optarg) die("--env KEY=VALUE");
      if (p.n_envs == MAX_SPECS) die("too many --env");
      *eq = '\0';
      p.env_keys[p.n_envs] = optarg;
      p.env_values[p.n_envs++] = eq + 1;
      break;
    }
    case 'p': p.preferred = optarg; break;
    default:
      fprintf(stderr, "usage: %s [--resource NAME] [--count N] [--device HOST:CONTAINER[:PERMS]]... "
                      "[--mount HOST:CONTAINER]... [--env KEY=VALUE]... "
                      "[--preferred ID,ID...] DIR\n", argv[0]);
      return opt == 'h' ? 0 : 2;
    }
  }
  if (optind != argc - 1) die("expected the device plugin directory (DIR)");
  const char *dir = argv[optind];
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  snprintf(p.endpoint, sizeof p.endpoint, "fake-%ld.sock", (long)getpid());
  if ((size_t)snprintf(p.sock, sizeof p.sock, "%s/%s", dir, p.endpoint) >= sizeof p.sock ||
      (size_t)snprintf(p.kubelet_sock, sizeof p.kubelet_sock, "%s/kubelet.sock", dir) >=
        sizeof p.kubelet_sock)
    die("DIR is too long");

  p.loop = uv_default_loop();
  serve(&p);
  nl_cri_opts_t co = {.timeout_ms = 5000, .connect_wait_ms = 1000, .backoff_initial_ms = 200,
                      .backoff_max_ms = 1000};
  nl_err_t *err = NULL;
  if (nl_cri_client_init(&p.reg, p.loop, p.kubelet_sock, &co, &err) < 0) die(err->msg);
  uv_timer_init(p.loop, &p.timer);
  p.timer.data = &p;
  uv_signal_init(p.loop, &p.sigterm);
  uv_signal_init(p.loop, &p.sigint);
  p.sigterm.data = p.sigint.data = &p;
  uv_signal_start(&p.sigterm, on_signal, SIGTERM);
  uv_signal_start(&p.sigint, on_signal, SIGINT);
  uv_signal_init(p.loop, &p.sigusr1);
  p.sigusr1.data = &p;
  uv_signal_start(&p.sigusr1, on_health, SIGUSR1);
  uv_timer_start(&p.timer, on_timer, 0, 0);
  uv_run(p.loop, UV_RUN_DEFAULT);
  return uv_loop_close(p.loop) == 0 ? 0 : 1;
}
