/* The device manager: the Registration service, one endpoint state machine
 * per plugin registration, ListAndWatch, the grace period, node counts
 * (managers/devices.h). Admission, Allocate and the checkpoint are in
 * devices_alloc.c. */
#include "managers/devices.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "managers/devices_internal.h"
#include "reactor/fs.h"
#include "reactor/log.h"
#include "reactor/utf8.h"
#include "reactor/xalloc.h"

#define PATH_REGISTER "/v1beta1.Registration/Register"
#define PATH_LIST_AND_WATCH "/v1beta1.DevicePlugin/ListAndWatch"
#define PATH_OPTIONS "/v1beta1.DevicePlugin/GetDevicePluginOptions"
#define HEALTHY "Healthy"

static void step(nl_dev_endpoint_t *ep);
static void arm_grace(nl_devices_t *m);

static void changed(nl_devices_t *m) {
  if (m->opts.changed && m->state == NL_DEVICES_RUNNING) m->opts.changed(m->opts.changed_ctx);
}

/* ---- names ---- */

static bool dns_label_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* IsDNS1123Subdomain */
static bool dns_subdomain(const char *s, size_t n) {
  if (n == 0 || n > 253) return false;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && s[i] != '.') {
      if (!dns_label_char(s[i]) && s[i] != '-') return false;
      continue;
    }
    if (i == start || s[start] == '-' || s[i - 1] == '-') return false; /* empty or edge '-' */
    start = i + 1;
  }
  return true;
}

static bool alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* IsQualifiedName: [prefix/]name, name <= 63 of [A-Za-z0-9][-A-Za-z0-9_.]* ending alnum */
static bool qualified_name(const char *s) {
  const char *slash = strchr(s, '/');
  const char *name = s;
  if (slash) {
    if (strchr(slash + 1, '/')) return false;
    if (!dns_subdomain(s, (size_t)(slash - s))) return false;
    name = slash + 1;
  }
  size_t n = strlen(name);
  if (n == 0 || n > 63 || !alnum(name[0]) || !alnum(name[n - 1])) return false;
  for (size_t i = 0; i < n; i++)
    if (!alnum(name[i]) && name[i] != '-' && name[i] != '_' && name[i] != '.') return false;
  return true;
}

bool nl_devices_extended_name(const char *name) {
  if (!name || !strchr(name, '/')) return false;      /* native: no domain */
  if (strstr(name, "kubernetes.io/")) return false;    /* prefixed native */
  if (strncmp(name, "requests.", 9) == 0) return false; /* quota names */
  char *quota = nl_xasprintf("requests.%s", name);
  bool ok = qualified_name(quota);
  free(quota);
  return ok;
}

/* ---- resources ---- */

static void devs_free(nl_dev_t *d, size_t n) {
  for (size_t i = 0; i < n; i++) free(d[i].id);
  free(d);
}

nl_dev_resource_t *nl__dev_resource(nl_devices_t *m, const char *name) {
  nl_dev_resource_t *r = nl_map_get(&m->resources, name);
  if (r) return r;
  r = nl_xcalloc(1, sizeof *r);
  r->name = nl_xstrdup(name);
  nl_map_put(&m->resources, name, r);
  return r;
}

static void resource_free(void *p) {
  nl_dev_resource_t *r = p;
  devs_free(r->devs, r->n_devs);
  free(r->name);
  free(r);
}

static int count_cmp(const void *a, const void *b) {
  return strcmp(((const nl_devices_count_t *)a)->name, ((const nl_devices_count_t *)b)->name);
}

nl_devices_count_t *nl_devices_counts(const nl_devices_t *m, size_t *n) {
  *n = 0;
  nl_devices_count_t *out = nl_xcalloc(nl_map_size(&m->resources) + 1, sizeof *out);
  nl_map_iter_t it;
  const char *key;
  void *v;
  nl_map_iter_init(&it, &m->resources);
  while (nl_map_iter_next(&it, &key, &v)) {
    const nl_dev_resource_t *r = v;
    nl_devices_count_t *c = &out[(*n)++];
    c->name = r->name;
    if (r->expired) continue;
    c->capacity = (int64_t)r->n_devs;
    for (size_t i = 0; i < r->n_devs; i++)
      if (r->devs[i].healthy && r->ep) c->allocatable++;
  }
  qsort(out, *n, sizeof *out, count_cmp);
  return out;
}

void nl_devices_foreach_allocatable(const nl_devices_t *m, nl_devices_ids_fn fn, void *ctx) {
  size_t n;
  nl_devices_count_t *names = nl_devices_counts(m, &n); /* sorted */
  for (size_t i = 0; i < n; i++) {
    const nl_dev_resource_t *r = nl_map_get(&m->resources, names[i].name);
    if (!r || r->expired || !r->ep) continue;
    const char **ids = nl_xcalloc(r->n_devs + 1, sizeof *ids);
    size_t k = 0;
    for (size_t j = 0; j < r->n_devs; j++)
      if (r->devs[j].healthy) ids[k++] = r->devs[j].id;
    if (k) fn(ctx, r->name, ids, k);
    free(ids);
  }
  free(names);
}

/* ---- the grace period ---- */

static void on_grace(uv_timer_t *t) {
  nl_devices_t *m = container_of(t, nl_devices_t, grace_timer);
  uint64_t now = uv_now(m->loop);
  bool any = false;
  nl_map_iter_t it;
  const char *key;
  void *v;
  nl_map_iter_init(&it, &m->resources);
  while (nl_map_iter_next(&it, &key, &v)) {
    nl_dev_resource_t *r = v;
    if (r->ep || r->expired || !r->ended_at || now < r->ended_at + m->opts.grace_ms) continue;
    nl_info("device plugin for %s did not come back within %llu s: its %zu devices leave "
            "capacity", r->name, (unsigned long long)(m->opts.grace_ms / 1000), r->n_devs);
    r->expired = true;
    any = true;
  }
  if (any) {
    nl__dev_checkpoint_write(m);
    changed(m);
  }
  arm_grace(m);
}

static void arm_grace(nl_devices_t *m) {
  if (m->state != NL_DEVICES_RUNNING) return;
  uint64_t next = UINT64_MAX, now = uv_now(m->loop);
  nl_map_iter_t it;
  const char *key;
  void *v;
  nl_map_iter_init(&it, &m->resources);
  while (nl_map_iter_next(&it, &key, &v)) {
    nl_dev_resource_t *r = v;
    if (r->ep || r->expired || !r->ended_at) continue;
    uint64_t due = r->ended_at + m->opts.grace_ms;
    if (due < next) next = due;
  }
  if (next == UINT64_MAX) uv_timer_stop(&m->grace_timer);
  else uv_timer_start(&m->grace_timer, on_grace, next > now ? next - now : 0, 0);
}

/* ---- endpoints ---- */

static nl_devices_t *closed_one(nl_devices_t *m);

static void ep_client_stopped(nl_cri_client_t *c) {
  nl_dev_endpoint_t *ep = container_of(c, nl_dev_endpoint_t, client);
  nl_devices_t *m = ep->m;
  assert(ep->state == NL_DEV_EP_CLOSING);
  assert(!ep->reply); /* the options call's end answered it */
  nl_list_remove(&ep->link);
  free(ep->name);
  free(ep->path);
  free(ep);
  closed_one(m);
}

/* The endpoint's stream is over: its resource (unless replaced) keeps its
 * devices, unhealthy, for the grace period. */
static void ep_end(nl_dev_endpoint_t *ep, const char *why) {
  assert(ep->state == NL_DEV_EP_CONNECTING || ep->state == NL_DEV_EP_DIALING ||
         ep->state == NL_DEV_EP_WATCHING);
  nl_devices_t *m = ep->m;
  if (ep->watch) {
    nl_cri_stream_cancel(ep->watch);
    ep->watch = NULL;
  }
  ep->state = NL_DEV_EP_ENDED;
  nl_dev_resource_t *r = ep->res;
  if (r) {
    assert(r->ep == ep);
    if (m->state == NL_DEVICES_RUNNING)
      nl_warn("device plugin for %s at %s: %s; its devices are unhealthy, and leave capacity "
              "in %llu s unless it registers again", r->name, ep->path, why,
              (unsigned long long)(m->opts.grace_ms / 1000));
    r->ep = NULL;
    ep->res = NULL;
    r->ended_at = uv_now(m->loop);
    if (!r->ended_at) r->ended_at = 1;
    arm_grace(m);
    changed(m);
    if (m->state == NL_DEVICES_RUNNING) nl__dev_checkpoint_write(m); /* its devices leave it */
  }
  step(ep);
}

static void ep_on_list(const ProtobufCMessage *msg, void *ctx) {
  nl_dev_endpoint_t *ep = ctx;
  nl_devices_t *m = ep->m;
  const V1beta1__ListAndWatchResponse *l = (const V1beta1__ListAndWatchResponse *)msg;
  nl_dev_resource_t *r = ep->res;
  assert(r && (ep->state == NL_DEV_EP_DIALING || ep->state == NL_DEV_EP_WATCHING));
  if (l->n_devices > m->opts.max_devices) {
    char *why = nl_xasprintf("ListAndWatch sent %zu devices, more than the %zu a resource may "
                             "have: refused", l->n_devices, m->opts.max_devices);
    nl_error("device plugin for %s: %s", r->name, why);
    ep_end(ep, why);
    free(why);
    return;
  }
  for (size_t i = 0; i < l->n_devices; i++) {
    const char *id = l->devices[i] ? l->devices[i]->id : NULL;
    /* (not UTF-8: Go's gRPC clients of the pod resources API refuse it) */
    if (!id || !*id || strlen(id) > 255 || !nl_utf8_valid(id)) {
      const char *why = "ListAndWatch sent a device without an ID (or one over 255 bytes, or "
                        "not UTF-8): refused";
      nl_error("device plugin for %s: %s", r->name, why);
      ep_end(ep, why);
      return;
    }
  }
  nl_dev_t *devs = nl_xcalloc(l->n_devices + 1, sizeof *devs);
  size_t n = 0, healthy = 0;
  for (size_t i = 0; i < l->n_devices; i++) {
    const V1beta1__Device *d = l->devices[i];
    size_t j;
    for (j = 0; j < n && strcmp(devs[j].id, d->id) != 0; j++) {
    }
    if (j == n) devs[n++].id = nl_xstrdup(d->id); /* a repeated ID: the last word counts */
    devs[j].healthy = d->health && strcmp(d->health, HEALTHY) == 0;
  }
  for (size_t i = 0; i < n; i++) healthy += devs[i].healthy;
  bool same = n == r->n_devs;
  for (size_t i = 0; same && i < n; i++)
    same = strcmp(devs[i].id, r->devs[i].id) == 0 && devs[i].healthy == r->devs[i].healthy;
  nl__dev_health_changed(m, r->name, r->devs, r->n_devs, devs, n);
  devs_free(r->devs, r->n_devs);
  r->devs = devs;
  r->n_devs = n;
  if (ep->state == NL_DEV_EP_DIALING) {
    nl_info("device plugin for %s at %s: %zu devices, %zu healthy", r->name, ep->path, n, healthy);
    ep->state = NL_DEV_EP_WATCHING;
    same = false;
  } else if (!same) {
    nl_info("device plugin for %s: now %zu devices, %zu healthy", r->name, n, healthy);
  }
  if (!same) {
    nl__dev_checkpoint_write(m);
    changed(m);
  }
}

static void ep_on_end(const nl_grpc_status_t *st, void *ctx) {
  nl_dev_endpoint_t *ep = ctx;
  ep->watch = NULL;
  char *e = nl_grpc_status_format(st);
  char *why = nl_xasprintf("ListAndWatch ended: %s", e);
  if (ep->res) nl_vlog(2, "device plugin for %s: %s", ep->res->name, why);
  ep_end(ep, why);
  free(why);
  free(e);
}

/* The endpoint's one transition function: what each state does next. */
static void step(nl_dev_endpoint_t *ep) {
  switch (ep->state) {
  case NL_DEV_EP_CONNECTING: break; /* the options call's answer drives it */
  case NL_DEV_EP_DIALING: {
    assert(!ep->watch);
    V1beta1__Empty req = V1BETA1__EMPTY__INIT;
    ep->watch = nl_cri_client_stream(&ep->client, PATH_LIST_AND_WATCH, &req.base,
                                     &v1beta1__list_and_watch_response__descriptor, 0,
                                     ep_on_list, ep_on_end, ep);
    break;
  }
  case NL_DEV_EP_WATCHING: break; /* the stream drives it */
  case NL_DEV_EP_ENDED:
    ep->state = NL_DEV_EP_CLOSING;
    nl_cri_client_stop(&ep->client, ep_client_stopped);
    break;
  case NL_DEV_EP_CLOSING: break; /* the client's close callback frees it */
  }
}

/* The plugin answered GetDevicePluginOptions: its endpoint becomes the
 * resource's (a registration before it is replaced) and ListAndWatch starts. */
static void ep_attach(nl_dev_endpoint_t *ep, const V1beta1__DevicePluginOptions *o) {
  nl_devices_t *m = ep->m;
  m->registrations++;
  nl_dev_resource_t *r = nl__dev_resource(m, ep->name);
  r->pre_start_required = o && o->pre_start_required;
  r->preferred_allocation = o && o->get_preferred_allocation_available;
  nl_dev_endpoint_t *old = r->ep;
  if (old) { /* the newest registration wins; the devices stay until its first list */
    nl_info("device plugin for %s registered again: its endpoint %s replaces %s", r->name,
            ep->path, old->path);
    old->res = NULL;
    r->ep = NULL;
    ep_end(old, "replaced");
  }
  ep->res = r;
  r->ep = ep;
  r->ended_at = 0;
  r->expired = false;
  ep->state = NL_DEV_EP_DIALING;
  nl_vlog(2, "device plugin for %s connected", r->name);
  step(ep);
}

static void ep_reply(nl_dev_endpoint_t *ep, int code, const char *msg) {
  nl_dev_reply_fn reply = ep->reply;
  ep->reply = NULL;
  if (reply) reply(ep->reply_ctx, code, msg);
}

/* upstream's PluginConnected: the Register call is answered with the outcome
 * of GetDevicePluginOptions; a plugin that fails it is not used. */
static void ep_on_options(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  nl_dev_endpoint_t *ep = ctx;
  if (st->code == NL_GRPC_OK && ep->state == NL_DEV_EP_CONNECTING) {
    ep_attach(ep, (const V1beta1__DevicePluginOptions *)resp);
    ep_reply(ep, NL_GRPC_OK, NULL);
  } else {
    char *e = nl_grpc_status_format(st);
    char *why = nl_xasprintf("failed to get device plugin options: %s", e);
    ep_reply(ep, NL_GRPC_UNKNOWN, ep->m->state == NL_DEVICES_RUNNING ? why : "kubelet is stopping");
    if (ep->state == NL_DEV_EP_CONNECTING) {
      nl_error("device plugin for %s at %s: %s: not used", ep->name, ep->path, why);
      ep_end(ep, why);
    }
    free(why);
    free(e);
  }
}

static void ep_connect(nl_devices_t *m, const char *name, const char *endpoint,
                       uint64_t timeout_ms, nl_dev_reply_fn reply, void *reply_ctx) {
  nl_dev_endpoint_t *ep = nl_xcalloc(1, sizeof *ep);
  ep->m = m;
  ep->name = nl_xstrdup(name);
  ep->path = nl_xasprintf("%s/%s", m->opts.dir, endpoint);
  ep->state = NL_DEV_EP_CONNECTING;
  ep->reply = reply;
  ep->reply_ctx = reply_ctx;
  nl_cri_opts_t co = {
      .timeout_ms = m->opts.call_timeout_ms,
      .connect_wait_ms = m->opts.connect_wait_ms,
      .max_recv_msg_size = m->opts.max_msg,
      .max_stream_queue = 16,
  };
  char *label = nl_xasprintf("device plugin %s (%s)", name, ep->path);
  co.label = label;
  nl_err_t *err = NULL;
  int rc = nl_cri_client_init(&ep->client, m->loop, ep->path, &co, &err);
  free(label);
  assert(rc == 0); /* an absolute path always parses */
  (void)rc;
  nl_list_insert_tail(&m->endpoints, &ep->link);
  m->open++;
  if (!timeout_ms || timeout_ms > m->opts.call_timeout_ms) timeout_ms = m->opts.call_timeout_ms;
  V1beta1__Empty req = V1BETA1__EMPTY__INIT;
  nl_cri_client_call(&ep->client, PATH_OPTIONS, &req.base,
                     &v1beta1__device_plugin_options__descriptor, timeout_ms, ep_on_options, ep);
}

/* ---- Registration ---- */

static bool label_ok(const char *s) {
  size_t n = strlen(s);
  if (n > 253) return false;
  for (size_t i = 0, k; i < n; i += k)
    if (!(k = nl_utf8_seq((const unsigned char *)s + i, n - i))) return false;
  return true;
}

int nl__dev_register(nl_devices_t *m, const uint8_t *data, size_t len, uint64_t timeout_ms,
                     nl_dev_reply_fn reply, void *reply_ctx, char **msg) {
  *msg = NULL;
  V1beta1__RegisterRequest *r = v1beta1__register_request__unpack(NULL, len, data);
  if (!r) {
    *msg = nl_xstrdup("grpc: error unmarshalling request");
    return NL_GRPC_INTERNAL;
  }
  nl_info("got registration request from device plugin with resource name \"%s\"",
          r->resource_name);
  /* upstream counts every request; a label value must be UTF-8 (client_golang
   * refuses others) and is bounded here so that a plugin cannot blow up /metrics */
  if (m->opts.metrics && label_ok(r->resource_name))
    nl_kmetrics_device_registration(m->opts.metrics, r->resource_name);
  char *bad = NULL;
  if (strcmp(r->version, NL_DEVICES_API_VERSION) != 0)
    bad = nl_xasprintf("requested API version \"%s\" is not supported by kubelet. Supported "
                       "versions are [\"%s\"]", r->version, NL_DEVICES_API_VERSION);
  else if (!nl_devices_extended_name(r->resource_name))
    bad = nl_xasprintf("the ResourceName \"%s\" is invalid", r->resource_name);
  else if (!*r->endpoint || strchr(r->endpoint, '/') || strcmp(r->endpoint, "..") == 0 ||
           strcmp(r->endpoint, ".") == 0 || strlen(r->endpoint) > 100)
    bad = nl_xasprintf("the endpoint \"%s\" is not a socket name in %s", r->endpoint,
                       m->opts.dir);
  if (bad || m->state != NL_DEVICES_RUNNING) {
    if (bad) nl_warn("bad registration request from device plugin with resource name \"%s\": %s",
                     r->resource_name, bad);
    *msg = bad ? bad : nl_xstrdup("kubelet is stopping");
    v1beta1__register_request__free_unpacked(r, NULL);
    return NL_GRPC_UNKNOWN;
  }
  ep_connect(m, r->resource_name, r->endpoint, timeout_ms, reply, reply_ctx);
  v1beta1__register_request__free_unpacked(r, NULL);
  return NL_GRPC_OK;
}

static void reply_register(void *ctx, int code, const char *msg) {
  nl_grpc_call_t *call = ctx;
  if (code == NL_GRPC_OK) {
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    nl_grpc_call_reply_msg(call, &empty.base);
  } else {
    nl_grpc_call_reply(call, code, msg, NULL, 0);
  }
}

static void h_register(void *ctx, nl_grpc_call_t *call, const uint8_t *data, size_t len) {
  char *msg;
  uint64_t left = nl_grpc_call_time_left(call);
  int code = nl__dev_register(ctx, data, len, left == UINT64_MAX ? 0 : left ? left : 1,
                              reply_register, call, &msg);
  if (code != NL_GRPC_OK) reply_register(call, code, msg);
  free(msg);
}

/* ---- life cycle ---- */

/* upstream removeContents: every file of dir but the checkpoint and
 * directories (the stale sockets of plugins and of the last kubelet). */
static void remove_stale(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
      continue;
    if (strcmp(e->d_name, NL_DEVICES_CHECKPOINT) == 0) continue;
    char *p = nl_xasprintf("%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(p) < 0)
      nl_warn("device plugins: remove stale %s: %s", p, strerror(errno));
    free(p);
  }
  closedir(d);
}

int nl_devices_start(nl_devices_t *m, uv_loop_t *loop, const nl_devices_opts_t *opts,
                     nl_err_t **err) {
  memset(m, 0, sizeof *m);
  m->loop = loop;
  m->opts = *opts;
  m->opts.dir = nl_xstrdup(opts->dir);
  if (!m->opts.grace_ms) m->opts.grace_ms = NL_DEVICES_GRACE_MS;
  if (!m->opts.max_devices) m->opts.max_devices = 1024;
  if (!m->opts.max_msg) m->opts.max_msg = 1 << 20;
  if (!m->opts.call_timeout_ms) m->opts.call_timeout_ms = 30000;
  if (!m->opts.connect_wait_ms) m->opts.connect_wait_ms = 5000;
  m->socket_path = nl_xasprintf("%s/%s", m->opts.dir, NL_DEVICES_SOCKET);
  m->checkpoint_path = nl_xasprintf("%s/%s", m->opts.dir, NL_DEVICES_CHECKPOINT);
  nl_map_init(&m->resources);
  nl_list_init(&m->endpoints);
  nl_list_init(&m->allocs);
  nl_list_init(&m->requests);
  uv_timer_init(loop, &m->grace_timer);
  nl_grpc_server_opts_t so = {.mode = 0600, .max_conns = 16, .max_recv_msg_size = 64 * 1024};
  nl_grpc_server_init(&m->server, loop, &so);
  nl_grpc_server_method(&m->server, PATH_REGISTER, NL_GRPC_UNARY, h_register, m);
  m->open = 2; /* the server and the timer */
  nl_err_t *cerr = NULL;
  if (nl__dev_checkpoint_read(m, &cerr) < 0) {
    nl_warn("device manager: continuing without the checkpoint; device allocations may not be "
            "up to date: %s", cerr->msg);
    nl_err_free(&cerr);
  }
  int r = nl_mkdir_p(m->opts.dir, 0755);
  if (r < 0) return nl_err_set(err, -r, "device plugins: mkdir %s: %s", m->opts.dir, strerror(-r));
  remove_stale(m->opts.dir);
  if (nl_grpc_server_listen(&m->server, m->socket_path, err) < 0)
    return nl_err_wrap(err, "device plugin registration");
  nl_info("serving the device plugin registration service on %s", m->socket_path);
  arm_grace(m);
  return 0;
}

static nl_devices_t *closed_one(nl_devices_t *m) {
  assert(m->open > 0);
  if (--m->open > 0) return m;
  m->state = NL_DEVICES_STOPPED;
  nl_map_free(&m->resources, resource_free);
  while (!nl_list_empty(&m->allocs)) {
    nl_dev_alloc_t *a = nl_list_entry(m->allocs.next, nl_dev_alloc_t, link);
    nl_list_remove(&a->link);
    nl__dev_alloc_free(a);
  }
  free((char *)m->opts.dir);
  free(m->socket_path);
  free(m->checkpoint_path);
  if (m->done) m->done(m, m->done_ctx);
  return NULL;
}

void nl__dev_unref(nl_devices_t *m) { closed_one(m); }

static void server_stopped(nl_grpc_server_t *srv, void *ctx) {
  (void)srv;
  closed_one(ctx);
}

static void timer_closed(uv_handle_t *h) {
  closed_one(container_of((uv_timer_t *)h, nl_devices_t, grace_timer));
}

void nl_devices_stop(nl_devices_t *m, nl_devices_done_fn done, void *ctx) {
  if (m->state != NL_DEVICES_RUNNING) return;
  m->state = NL_DEVICES_STOPPING;
  m->done = done;
  m->done_ctx = ctx;
  m->open++; /* held while the endpoints are told */
  nl__dev_requests_cancel(m);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->endpoints) {
    nl_dev_endpoint_t *ep = nl_list_entry(pos, nl_dev_endpoint_t, link);
    if (ep->res) ep->res->ep = NULL;
    ep->res = NULL;
    if (ep->state == NL_DEV_EP_CONNECTING || ep->state == NL_DEV_EP_DIALING ||
        ep->state == NL_DEV_EP_WATCHING)
      ep_end(ep, "stopping");
  }
  nl_grpc_server_stop(&m->server, server_stopped, m);
  uv_close((uv_handle_t *)&m->grace_timer, timer_closed);
  closed_one(m);
}
