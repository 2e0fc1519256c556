/* The DRA manager: the DRAPlugin handler of the plugin manager and the
 * plugins' connections, the preparation of a pod's claims, the containers'
 * CDI devices, and the unpreparation of claims no pod uses any more
 * (managers/dra.h). */
#include "managers/dra.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kube/status.h"
#include "managers/dra_internal.h"
#include "reactor/log.h"
#include "reactor/utf8.h"
#include "reactor/xalloc.h"

#define PREFIX_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define PREFIX_V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
#define MAX_ID 1024 /* bytes of a name or CDI ID a plugin answers */

void nl__dra_release(nl_dra_t *m) {
  assert(m->open > 0);
  if (--m->open > 0 || m->state != NL_DRA_STOPPING) return;
  m->state = NL_DRA_STOPPED;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->claims) {
    nl_dra_claim_t *c = nl_list_entry(pos, nl_dra_claim_t, link);
    nl_list_remove(&c->link);
    nl__dra_claim_free(c);
  }
  nl__dra_health_free(m);
  free((char *)m->opts.state_path);
  free((char *)m->opts.node_name);
  free(m->ckpt.text);
  m->ckpt.text = NULL;
  if (m->done) m->done(m, m->done_ctx);
}

/* ---- claims ---- */

void nl__dra_claim_free(nl_dra_claim_t *c) {
  for (size_t i = 0; i < c->n_devs; i++) {
    nl_dra_device_t *d = &c->devs[i];
    free(d->driver);
    free(d->pool);
    free(d->device);
    free(d->share_id);
    nl__dra_strv_free(d->requests, d->n_requests);
    nl__dra_strv_free(d->cdi, d->n_cdi);
  }
  free(c->devs);
  nl__dra_strv_free(c->drivers, c->n_drivers);
  nl__dra_strv_free(c->pods, c->n_pods);
  free(c->uid);
  free(c->name);
  free(c->ns);
  free(c);
}

nl_dra_claim_t *nl__dra_claim_find(const nl_dra_t *m, const char *ns, const char *name) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &((nl_dra_t *)m)->claims) {
    nl_dra_claim_t *c = nl_list_entry(pos, nl_dra_claim_t, link);
    if (strcmp(c->ns, ns) == 0 && strcmp(c->name, name) == 0) return c;
  }
  return NULL;
}

bool nl_dra_claim_prepared(const nl_dra_t *m, const char *ns, const char *name) {
  const nl_dra_claim_t *c = nl__dra_claim_find(m, ns, name);
  return c && c->prepared;
}

size_t nl_dra_claims(const nl_dra_t *m) {
  size_t n = 0;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &((nl_dra_t *)m)->claims) n++;
  return n;
}

size_t nl_dra_claims_in_use(const nl_dra_t *m, nl_dra_in_use_fn fn, void *ctx) {
  size_t total = 0, n_seen = 0;
  char **seen = NULL;
  for (const nl_list_t *pos = m->claims.next; pos != &m->claims; pos = pos->next) {
    const nl_dra_claim_t *c = nl_list_entry(pos, nl_dra_claim_t, link);
    if (!c->prepared) continue;
    total++;
    for (size_t i = 0; i < c->n_drivers; i++) nl__dra_strv_add(&seen, &n_seen, c->drivers[i]);
  }
  for (size_t d = 0; d < n_seen; d++) {
    size_t count = 0;
    for (const nl_list_t *pos = m->claims.next; pos != &m->claims; pos = pos->next) {
      const nl_dra_claim_t *c = nl_list_entry(pos, nl_dra_claim_t, link);
      if (c->prepared && nl__dra_strv_has(c->drivers, c->n_drivers, seen[d])) count++;
    }
    fn(ctx, seen[d], count);
  }
  nl__dra_strv_free(seen, n_seen);
  return total;
}

/* ---- plugins (the plugin manager's DRAPlugin handler) ---- */

const char *nl_dra_pick_service(char *const *versions, size_t n, char **msg) {
  *msg = NULL;
  if (n == 0) {
    *msg = nl_xstrdup("empty list of supported gRPC services (aka supported versions)");
    return NULL;
  }
  for (size_t i = 0; i < n; i++) { /* the plugin's order: its most recent first */
    if (strcmp(versions[i], NL_DRA_SERVICE_V1) == 0) return NL_DRA_SERVICE_V1;
    if (strcmp(versions[i], NL_DRA_SERVICE_V1BETA1) == 0) return NL_DRA_SERVICE_V1BETA1;
  }
  /* Go's %q of both lists */
  size_t len = 64;
  for (size_t i = 0; i < n; i++) len += strlen(versions[i]) * 4 + 4;
  char *list = nl_xmalloc(len), *p = list;
  *p++ = '[';
  for (size_t i = 0; i < n; i++) {
    if (i) *p++ = ' ';
    *p++ = '"';
    for (const unsigned char *s = (const unsigned char *)versions[i]; *s; s++) {
      if (*s == '"' || *s == '\\') *p++ = '\\';
      if (*s < 0x20 || *s == 0x7f) p += sprintf(p, "\\x%02x", *s);
      else *p++ = (char)*s;
    }
    *p++ = '"';
  }
  *p++ = ']';
  *p = 0;
  *msg = nl_xasprintf("none of services supported by the plugin (%s) are supported by the "
                      "kubelet ([\"%s\" \"%s\"])", list, NL_DRA_SERVICE_V1, NL_DRA_SERVICE_V1BETA1);
  free(list);
  return NULL;
}

static int h_validate(void *ctx, const char *name, const char *endpoint, char *const *versions,
                      size_t n, char **msg) {
  (void)ctx;
  char *why = NULL;
  if (!nl_dra_pick_service(versions, n, &why)) {
    *msg = nl_xasprintf("invalid supported gRPC versions of DRA driver plugin %s at endpoint "
                        "%s: %s", name, endpoint, why);
    free(why);
    return -1;
  }
  if (!*name) {
    *msg = nl_xstrdup("DRA driver name is empty");
    return -1;
  }
  /* as the client will dial it: "/x://y" is absolute and still refused there */
  char *path = NULL;
  nl_err_t *err = NULL;
  if (endpoint[0] != '/' || nl_cri_parse_endpoint(endpoint, &path, &err) < 0) {
    *msg = nl_xasprintf("endpoint %s of DRA driver plugin %s is not an absolute path", endpoint,
                        name);
    nl_err_free(&err);
    return -1;
  }
  free(path);
  return 0;
}

/* An operation on a pod's claims (dra_operations_duration_seconds) that
 * began at started (uv_hrtime) ended. */
static void observe_op(const nl_dra_t *m, const char *op, bool failed, uint64_t started) {
  if (m->opts.metrics)
    nl_kmetrics_dra_op(m->opts.metrics, op, failed, (double)(uv_hrtime() - started) / 1e9);
}

/* upstream's get: the newest plugin of the driver whose connection is up,
 * else the newest one. */
static nl_dra_plugin_t *plugin_get(const nl_dra_t *m, const char *driver) {
  nl_dra_plugin_t *newest = NULL, *connected = NULL;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &((nl_dra_t *)m)->plugins) {
    nl_dra_plugin_t *p = nl_list_entry(pos, nl_dra_plugin_t, link);
    if (p->closing || strcmp(p->driver, driver) != 0) continue;
    newest = p;
    if (nl_cri_client_ready(&p->client)) connected = p;
  }
  return connected ? connected : newest;
}

/* upstream's sync, on a plugin's registration and removal and, for a
 * connection's change, on the housekeeping tick: a driver none of whose
 * plugins is connected has its ResourceSlices deleted after the grace period
 * unless one connects (a plugin that died without removing its registration
 * socket, or that registered and never served). */
static void sync_driver(nl_dra_t *m, const char *driver) {
  if (m->state != NL_DRA_RUNNING) return;
  nl_dra_plugin_t *best = plugin_get(m, driver);
  if (best && nl_cri_client_ready(&best->client)) nl__dra_wipe_cancel(m, driver);
  else nl__dra_wipe_schedule(m, driver, m->opts.wipe_delay_ms);
}

static void sync_drivers(nl_dra_t *m) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->plugins) {
    nl_dra_plugin_t *p = nl_list_entry(pos, nl_dra_plugin_t, link);
    if (!p->closing && plugin_get(m, p->driver) == p) sync_driver(m, p->driver); /* once a driver */
  }
}

/* upstream's metrics interceptor: each unary call of a plugin, under its
 * driver, the method path (p->path_*) and the code. Only while the driver has
 * a plugin: a call that ends after the driver's last plugin went would make
 * again the series h_deregister dropped. */
static void on_call(void *ctx, const char *path, int code, uint64_t duration_ns) {
  nl_dra_plugin_t *p = ctx;
  nl_dra_t *m = p->m;
  if (m->opts.metrics && plugin_get(m, p->driver))
    nl_kmetrics_dra_grpc(m->opts.metrics, p->driver, path, code, (double)duration_ns / 1e9);
}

static int h_register(void *ctx, const char *name, const char *endpoint, char *const *versions,
                      size_t n, char **msg) {
  nl_dra_t *m = ctx;
  if (m->state != NL_DRA_RUNNING) {
    *msg = nl_xstrdup("kubelet is stopping");
    return -1;
  }
  char *why = NULL;
  const char *svc = nl_dra_pick_service(versions, n, &why);
  if (!svc) {
    *msg = nl_xasprintf("invalid supported gRPC versions of DRA driver plugin %s at endpoint "
                        "%s: %s", name, endpoint, why);
    free(why);
    return -1;
  }
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->plugins) {
    nl_dra_plugin_t *p = nl_list_entry(pos, nl_dra_plugin_t, link);
    if (!p->closing && !strcmp(p->driver, name) && !strcmp(p->endpoint, endpoint)) {
      *msg = nl_xasprintf("endpoint %s already registered for DRA driver plugin %s", endpoint, name);
      return -1;
    }
  }
  nl_dra_plugin_t *p = nl_xcalloc(1, sizeof *p);
  p->m = m;
  p->driver = nl_xstrdup(name);
  p->endpoint = nl_xstrdup(endpoint);
  bool v1 = strcmp(svc, NL_DRA_SERVICE_V1) == 0;
  p->path_prepare = v1 ? PREFIX_V1 "NodePrepareResources" : PREFIX_V1BETA1 "NodePrepareResources";
  p->path_unprepare = v1 ? PREFIX_V1 "NodeUnprepareResources" : PREFIX_V1BETA1 "NodeUnprepareResources";
  nl_cri_opts_t co = {
      .timeout_ms = m->opts.call_timeout_ms,
      .max_recv_msg_size = m->opts.max_msg,
      .max_stream_queue = 16, /* health updates waiting: a flood ends its stream */
  };
  char *label = nl_xasprintf("DRA driver %s (%s)", name, endpoint);
  co.label = label;
  nl_err_t *err = NULL;
  int rc = nl_cri_client_init(&p->client, m->loop, endpoint, &co, &err);
  free(label);
  assert(rc == 0); /* validated: an absolute path */
  (void)rc;
  nl_cri_client_observe(&p->client, on_call, p);
  m->open++;
  nl_list_insert_tail(&m->plugins, &p->link);
  sync_driver(m, name);
  nl_info("DRA driver %s: plugin registered at %s (%s)", name, endpoint, svc);
  nl__dra_health_start(p);
  return 0;
}

static void plugin_stopped(nl_cri_client_t *c) {
  nl_dra_plugin_t *p = container_of(c, nl_dra_plugin_t, client);
  nl_dra_t *m = p->m;
  nl_list_remove(&p->link);
  free(p->driver);
  free(p->endpoint);
  free(p);
  nl__dra_release(m);
}

static void plugin_close(nl_dra_plugin_t *p) {
  if (p->closing) return;
  nl__dra_health_stop(p);
  p->closing = true;
  nl_cri_client_stop(&p->client, plugin_stopped);
}

static void h_deregister(void *ctx, const char *name, const char *endpoint) {
  nl_dra_t *m = ctx;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->plugins) {
    nl_dra_plugin_t *p = nl_list_entry(pos, nl_dra_plugin_t, link);
    if (!p->closing && !strcmp(p->driver, name) && !strcmp(p->endpoint, endpoint)) {
      nl_info("DRA driver %s: plugin at %s deregistered", name, endpoint);
      plugin_close(p);
    }
  }
  if (m->opts.metrics && !plugin_get(m, name)) nl_kmetrics_dra_driver_gone(m->opts.metrics, name);
  sync_driver(m, name);
}

/* ---- preparation ---- */

typedef enum { PREP_FETCH, PREP_CALL, PREP_SAVE, PREP_DONE } prep_phase_t;

typedef struct prep_claim {
  char *name;
  bool owned;
  nl_dra_claim_view_t view;
} prep_claim_t;

typedef struct prep {
  nl_list_t link;
  nl_dra_t *m;
  char *uid, *pod_name, *pod_ns;
  prep_claim_t *claims;
  size_t n, idx;          /* FETCH: the claim being read */
  char **drivers;         /* CALL: every driver with claims to prepare */
  size_t n_drivers, didx;
  prep_phase_t phase;
  uint64_t gen;           /* SAVE: the checkpoint generation awaited */
  int pending;            /* the GET or the call in flight */
  uint64_t started;       /* uv_hrtime() at nl_dra_prepare */
  nl_kube_req_t *req;
  nl_dra_prepare_fn fn;
  void *ctx;
} prep_t;

static void prep_next(prep_t *p);

static void prep_free(prep_t *p) {
  nl_dra_t *m = p->m;
  nl_list_remove(&p->link);
  for (size_t i = 0; i < p->n; i++) {
    free(p->claims[i].name);
    nl__dra_claim_view_free(&p->claims[i].view);
  }
  free(p->claims);
  nl__dra_strv_free(p->drivers, p->n_drivers);
  free(p->uid);
  free(p->pod_name);
  free(p->pod_ns);
  free(p);
  nl__dra_release(m);
}

/* The one answer: fn runs once; the preparation is freed when nothing of it is
 * in flight any more. */
static void prep_finish(prep_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void prep_finish(prep_t *p, const char *fmt, ...) {
  if (p->phase == PREP_DONE) return;
  p->phase = PREP_DONE;
  char *msg = NULL;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    char *inner = NULL;
    if (vasprintf(&inner, fmt, ap) < 0) abort();
    va_end(ap);
    msg = nl_xasprintf("prepare dynamic resources: %s", inner);
    free(inner);
  }
  observe_op(p->m, "PrepareResources", msg != NULL, p->started);
  nl_dra_prepare_fn fn = p->fn;
  p->fn = NULL;
  fn(p->ctx, msg);
  free(msg);
  if (!p->pending) prep_free(p);
}

static void on_claim(void *arg, int status, const char *body, size_t len, const char *err) {
  prep_t *p = arg;
  p->pending--;
  p->req = NULL;
  if (p->phase != PREP_FETCH) {
    if (!p->pending) prep_free(p);
    return;
  }
  prep_claim_t *pc = &p->claims[p->idx];
  if (err) {
    prep_finish(p, "fetch ResourceClaim %s: %s", pc->name, err);
    return;
  }
  if (status < 200 || status > 299) {
    nl_kube_response_t resp = {.status = status, .body = body, .body_len = len, .content_type = ""};
    nl_err_t *e = NULL;
    nl_kube_status_err(&resp, &e);
    prep_finish(p, "fetch ResourceClaim %s: %s", pc->name, nl_err_msg(e));
    nl_err_free(&e);
    return;
  }
  char *why = NULL;
  if (nl__dra_claim_check(body, len, p->pod_ns, pc->name, pc->owned, p->pod_ns, p->pod_name,
                          p->uid, &pc->view, &why) < 0) {
    prep_finish(p, "%s", why);
    free(why);
    return;
  }
  /* upstream: the driver must be there, even for a claim prepared before */
  for (size_t i = 0; i < pc->view.n_drivers; i++)
    if (!plugin_get(p->m, pc->view.drivers[i])) {
      prep_finish(p, "ResourceClaim %s: DRA driver %s is not registered", pc->name,
                  pc->view.drivers[i]);
      return;
    }
  p->idx++;
  prep_next(p);
}

/* The default claim reader: a GET on the API. */
typedef struct kget {
  nl_dra_claim_cb cb;
  void *arg;
} kget_t;

static void kget_done(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  kget_t *g = ctx;
  if (err) g->cb(g->arg, 0, NULL, 0, nl_err_msg(err));
  else g->cb(g->arg, resp->status, resp->body, resp->body_len, NULL);
  free(g);
}

static void fetch(prep_t *p) {
  nl_dra_t *m = p->m;
  const char *name = p->claims[p->idx].name;
  p->pending++;
  if (m->opts.get_claim) {
    m->opts.get_claim(m->opts.get_claim_ctx, p->pod_ns, name, on_claim, p);
    return;
  }
  if (!m->opts.kube) {
    on_claim(p, 0, NULL, 0, "no API server (standalone): claims cannot be read");
    return;
  }
  kget_t *g = nl_xmalloc(sizeof *g);
  g->cb = on_claim;
  g->arg = p;
  char *path = nl_xasprintf("/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", p->pod_ns,
                            name);
  nl_kube_request_opts_t o = {.method = "GET", .path = path};
  p->req = nl_kube_request(m->opts.kube, &o, kget_done, g);
  free(path);
}

/* Every claim read and checked: the cache takes them with the pod, then the
 * drivers prepare what is not prepared yet. */
static void prep_claims_known(prep_t *p) {
  nl_dra_t *m = p->m;
  for (size_t i = 0; i < p->n; i++) {
    prep_claim_t *pc = &p->claims[i];
    nl_dra_claim_t *c = nl__dra_claim_find(m, p->pod_ns, pc->name);
    if (c && strcmp(c->uid, pc->view.uid) != 0) {
      prep_finish(p, "old ResourceClaim with same name %s and different UID %s still exists "
                  "(previous pod force-deleted?!)", pc->name, c->uid);
      return;
    }
    if (c && c->unpreparing) {
      prep_finish(p, "ResourceClaim %s is being unprepared", pc->name);
      return;
    }
  }
  for (size_t i = 0; i < p->n; i++) {
    prep_claim_t *pc = &p->claims[i];
    nl_dra_claim_t *c = nl__dra_claim_find(m, p->pod_ns, pc->name);
    if (!c) {
      c = nl_xcalloc(1, sizeof *c);
      c->uid = nl_xstrdup(pc->view.uid);
      c->name = nl_xstrdup(pc->name);
      c->ns = nl_xstrdup(p->pod_ns);
      for (size_t j = 0; j < pc->view.n_drivers; j++)
        nl__dra_strv_add(&c->drivers, &c->n_drivers, pc->view.drivers[j]);
      nl_list_insert_tail(&m->claims, &c->link);
    }
    nl__dra_strv_add(&c->pods, &c->n_pods, p->uid);
    if (!c->prepared)
      for (size_t j = 0; j < c->n_drivers; j++)
        nl__dra_strv_add(&p->drivers, &p->n_drivers, c->drivers[j]);
  }
  /* tracked before any driver is called: a pod gone meanwhile is unprepared */
  nl__dra_checkpoint_write(m);
  p->phase = PREP_CALL;
  p->didx = 0;
  prep_next(p);
}

/* Go's gRPC refuses a message with a string that is not UTF-8: one from a
 * plugin would make the pod resources API's whole List unreadable. */
static bool id_ok(const char *s) { return s && strlen(s) <= MAX_ID && nl_utf8_valid(s); }

static void on_prepared(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  prep_t *p = ctx;
  nl_dra_t *m = p->m;
  p->pending--;
  if (p->phase != PREP_CALL) {
    if (!p->pending) prep_free(p);
    return;
  }
  const char *driver = p->drivers[p->didx];
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    prep_finish(p, "DRA driver %s: NodePrepareResources: %s", driver, e);
    free(e);
    return;
  }
  const nl_dra_pb_prepare_resp_t *r = (const nl_dra_pb_prepare_resp_t *)resp;
  size_t asked = 0;
  for (size_t i = 0; i < p->n; i++) {
    nl_dra_claim_t *c = nl__dra_claim_find(m, p->pod_ns, p->claims[i].name);
    if (c && !c->prepared && nl__dra_strv_has(c->drivers, c->n_drivers, driver)) asked++;
  }
  /* check all before taking any */
  for (size_t i = 0; i < r->n_claims; i++) {
    const char *uid = r->claims[i]->key ? r->claims[i]->key : "";
    nl_dra_claim_t *c = NULL;
    for (size_t j = 0; j < p->n && !c; j++)
      if (!strcmp(p->claims[j].view.uid, uid)) c = nl__dra_claim_find(m, p->pod_ns, p->claims[j].name);
    if (!c || c->prepared || !nl__dra_strv_has(c->drivers, c->n_drivers, driver)) {
      prep_finish(p, "DRA driver %s: NodePrepareResources returned result for unknown claim "
                  "UID %.64s", driver, uid);
      return;
    }
    const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse *cr = r->claims[i]->value;
    if (cr && cr->error && *cr->error) {
      prep_finish(p, "DRA driver %s: NodePrepareResources failed for ResourceClaim %s: %.1024s",
                  driver, c->name, cr->error);
      return;
    }
    if (cr && cr->n_devices > m->opts.max_devices) {
      prep_finish(p, "DRA driver %s: NodePrepareResources answered %zu devices for "
                  "ResourceClaim %s, more than %zu: refused", driver, cr->n_devices, c->name,
                  m->opts.max_devices);
      return;
    }
    for (size_t k = 0; cr && k < cr->n_devices; k++) {
      const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device *d = cr->devices[k];
      bool ok = id_ok(d->pool_name) && id_ok(d->device_name) && id_ok(d->share_id) &&
                d->n_cdi_device_ids <= m->opts.max_ids && d->n_request_names <= m->opts.max_ids;
      for (size_t q = 0; ok && q < d->n_cdi_device_ids; q++)
        ok = id_ok(d->cdi_device_ids[q]) && *d->cdi_device_ids[q];
      for (size_t q = 0; ok && q < d->n_request_names; q++) ok = id_ok(d->request_names[q]);
      if (!ok) {
        prep_finish(p, "DRA driver %s: NodePrepareResources answered a device for "
                    "ResourceClaim %s with too many or too long names or CDI IDs, or one not "
                    "UTF-8: refused",
                    driver, c->name);
        return;
      }
    }
  }
  if (r->n_claims < asked) {
    prep_finish(p, "DRA driver %s: NodePrepareResources skipped %zu ResourceClaims", driver,
                asked - r->n_claims);
    return;
  }
  for (size_t i = 0; i < r->n_claims; i++) {
    nl_dra_claim_t *c = NULL;
    for (size_t j = 0; j < p->n && !c; j++)
      if (!strcmp(p->claims[j].view.uid, r->claims[i]->key))
        c = nl__dra_claim_find(m, p->pod_ns, p->claims[j].name);
    const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse *cr = r->claims[i]->value;
    for (size_t k = 0; cr && k < cr->n_devices; k++) {
      const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device *d = cr->devices[k];
      c->devs = nl_xrealloc(c->devs, (c->n_devs + 1) * sizeof *c->devs);
      nl_dra_device_t *nd = &c->devs[c->n_devs++];
      *nd = (nl_dra_device_t){0};
      nd->driver = nl_xstrdup(driver);
      nd->pool = nl_xstrdup(d->pool_name);
      nd->device = nl_xstrdup(d->device_name);
      nd->share_id = d->share_id && *d->share_id ? nl_xstrdup(d->share_id) : NULL;
      for (size_t q = 0; q < d->n_request_names; q++)
        nl__dra_strv_add(&nd->requests, &nd->n_requests, d->request_names[q]);
      for (size_t q = 0; q < d->n_cdi_device_ids; q++)
        nl__dra_strv_add(&nd->cdi, &nd->n_cdi, d->cdi_device_ids[q]);
    }
  }
  m->prepares++;
  p->didx++;
  prep_next(p);
}

static void call_prepare(prep_t *p) {
  nl_dra_t *m = p->m;
  const char *driver = p->drivers[p->didx];
  nl_dra_plugin_t *pl = plugin_get(m, driver);
  if (!pl) {
    prep_finish(p, "DRA driver %s is not registered", driver);
    return;
  }
  nl_dra_pb_claim_t *cl = nl_xcalloc(p->n + 1, sizeof *cl);
  nl_dra_pb_claim_t **clp = nl_xcalloc(p->n + 1, sizeof *clp);
  size_t k = 0;
  for (size_t i = 0; i < p->n; i++) {
    nl_dra_claim_t *c = nl__dra_claim_find(m, p->pod_ns, p->claims[i].name);
    if (!c || c->prepared || !nl__dra_strv_has(c->drivers, c->n_drivers, driver)) continue;
    k8s__io__kubelet__pkg__apis__dra__v1__claim__init(&cl[k]);
    cl[k].namespace_ = c->ns;
    cl[k].uid = c->uid;
    cl[k].name = c->name;
    clp[k] = &cl[k];
    k++;
  }
  K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest req =
      K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
  req.claims = clp;
  req.n_claims = k;
  p->pending++;
  nl_vlog(2, "DRA driver %s: NodePrepareResources of %zu claims for pod %s/%s", driver, k,
          p->pod_ns, p->pod_name);
  nl_cri_client_call(&pl->client, pl->path_prepare, &req.base,
                     &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor,
                     0, on_prepared, p);
  free(cl);
  free(clp);
}

static void prep_next(prep_t *p) {
  nl_dra_t *m = p->m;
  switch (p->phase) {
  case PREP_FETCH:
    if (p->idx < p->n) fetch(p);
    else prep_claims_known(p);
    break;
  case PREP_CALL:
    if (p->didx < p->n_drivers) {
      call_prepare(p);
      break;
    }
    for (size_t i = 0; i < p->n; i++) {
      nl_dra_claim_t *c = nl__dra_claim_find(m, p->pod_ns, p->claims[i].name);
      if (c) c->prepared = true;
    }
    p->phase = PREP_SAVE;
    p->gen = nl__dra_checkpoint_write(m);
    break;
  case PREP_SAVE:
    if (m->ckpt.done < p->gen) break;
    if (m->ckpt.err)
      prep_finish(p, "checkpoint ResourceClaim state: %s: %s", m->ckpt.step, strerror(m->ckpt.err));
    else
      prep_finish(p, NULL);
    break;
  case PREP_DONE: break;
  }
}

void nl__dra_checkpoint_written(nl_dra_t *m) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->preps) {
    prep_t *p = nl_list_entry(pos, prep_t, link);
    if (p->phase == PREP_SAVE) prep_next(p);
  }
}

bool nl_dra_pod_has_claims(const nl_pod_t *pod) {
  return pod->spec.n_resource_claims > 0 || nl__dra_ext_claim(pod);
}

void nl_dra_prepare(nl_dra_t *m, const nl_pod_t *pod, nl_dra_prepare_fn fn, void *ctx) {
  prep_t *p = nl_xcalloc(1, sizeof *p);
  p->m = m;
  p->fn = fn;
  p->ctx = ctx;
  p->started = uv_hrtime();
  p->uid = nl_xstrdup(pod->metadata.uid ? pod->metadata.uid : "");
  p->pod_name = nl_xstrdup(pod->metadata.name ? pod->metadata.name : "");
  p->pod_ns = nl_xstrdup(pod->metadata.namespace_ ? pod->metadata.namespace_ : "");
  p->claims = nl_xcalloc(pod->spec.n_resource_claims + 2, sizeof *p->claims);
  nl_list_insert_tail(&m->preps, &p->link);
  m->open++;
  if (m->state != NL_DRA_RUNNING) {
    prep_finish(p, "kubelet is stopping");
    return;
  }
  for (size_t i = 0; i < pod->spec.n_resource_claims; i++) {
    nl_dra_ref_t ref;
    char *err = NULL;
    if (nl__dra_resolve(pod, &pod->spec.resource_claims[i], &ref, &err) < 0) {
      prep_finish(p, "%s", err);
      free(err);
      return;
    }
    if (!ref.name) continue; /* nothing to do */
    p->claims[p->n].name = nl_xstrdup(ref.name);
    p->claims[p->n++].owned = ref.owned;
  }
  /* named by the scheduler: not checked for an owner, as a claim by name */
  const struct nl_pod_ext_claim_status *x = nl__dra_ext_claim(pod);
  if (x) p->claims[p->n++].name = nl_xstrdup(x->resource_claim_name);
  prep_next(p);
}

/* ---- containers ---- */

static void add_cdi(const nl_dra_claim_t *c, const char *request, char ***ids, size_t *n) {
  for (size_t d = 0; d < c->n_devs; d++) {
    const nl_dra_device_t *dv = &c->devs[d];
    bool match = !request || !*request;
    for (size_t q = 0; !match && q < dv->n_requests; q++) {
      size_t len = strlen(request); /* a subrequest: "<request>/<sub>" */
      match = !strcmp(dv->requests[q], request) ||
              (!strncmp(dv->requests[q], request, len) && dv->requests[q][len] == '/');
    }
    for (size_t q = 0; match && q < dv->n_cdi; q++) nl__dra_strv_add(ids, n, dv->cdi[q]);
  }
}

/* Whether the container requests a non-zero amount of the resource. */
static bool requests(const nl_container_t *ctr, const char *resource) {
  const nl_resource_list_t *l = &ctr->resources.requests;
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->items[i].name, resource)) return !nl_quantity_is_zero(&l->items[i].q);
  return false;
}


int nl_dra_container_cdi(const nl_dra_t *m, const nl_pod_t *pod, const nl_container_t *ctr,
                         char ***ids, size_t *n, char **err) {
  *ids = NULL;
  *n = 0;
  const char *ns = pod->metadata.namespace_ ? pod->metadata.namespace_ : "";
  for (size_t i = 0; i < ctr->resources.n_claims; i++) {
    const nl_resource_claim_ref_t *cr = &ctr->resources.claims[i];
    const nl_pod_resource_claim_t *pc = nl__dra_pod_claim(pod, cr->name);
    nl_dra_ref_t ref = {0};
    char *why = NULL;
    if (!pc) {
      *err = nl_xasprintf("container %s: resources.claims: no pod claim named %s", ctr->name,
                          cr->name ? cr->name : "");
      goto fail;
    }
    if (nl__dra_resolve(pod, pc, &ref, &why) < 0) {
      *err = why;
      goto fail;
    }
    if (!ref.name) continue;
    const nl_dra_claim_t *c = nl__dra_claim_find(m, ns, ref.name);
    if (!c || !c->prepared) {
      *err = nl_xasprintf("unable to get claim info for claim %s in namespace %s", ref.name, ns);
      goto fail;
    }
    add_cdi(c, cr->request, ids, n);
  }
  /* the requests the scheduler's claim holds for this container's extended
   * resources (only those it asks for: a request of 0 has none) */
  const struct nl_pod_ext_claim_status *x = nl__dra_ext_claim(pod);
  for (size_t i = 0; x && i < x->n_request_mappings; i++) {
    const struct nl_pod_ext_mapping *rm = &x->request_mappings[i];
    if (!rm->container_name || strcmp(rm->container_name, ctr->name) || !rm->resource_name ||
        !rm->request_name || !*rm->request_name || !requests(ctr, rm->resource_name))
      continue;
    const nl_dra_claim_t *c = nl__dra_claim_find(m, ns, x->resource_claim_name);
    if (!c || !c->prepared) {
      *err = nl_xasprintf("internal error: unable to get claim info for ResourceClaim %s in namespace %s",
                          x->resource_claim_name, ns);
      goto fail;
    }
    add_cdi(c, rm->request_name, ids, n);
  }
  return 0;
fail:
  nl__dra_strv_free(*ids, *n);
  *ids = NULL;
  *n = 0;
  return -1;
}

/* ---- unpreparation ---- */

/* nl_dra_unprepare_pod's caller, told once its calls are all answered. */
typedef struct waiter {
  void (*done)(void *ctx);
  void *ctx;
  int pending;
  uint64_t started; /* uv_hrtime() at nl_dra_unprepare_pod */
  bool failed;      /* a call failed or a driver was not registered */
} waiter_t;

typedef struct unprep {
  nl_dra_t *m;
  nl_dra_claim_t *c;
  char *driver;
  waiter_t *w; /* NULL: housekeeping's */
} unprep_t;

static void unprep_end(nl_dra_t *m, nl_dra_claim_t *c) {
  if (c->unpreparing) return;
  if (c->unprepare_failed || m->state != NL_DRA_RUNNING) {
    c->unprepare_failed = false;
    return; /* tried again at the next housekeeping */
  }
  nl_info("ResourceClaim %s/%s (%s) unprepared", c->ns, c->name, c->uid);
  nl_list_remove(&c->link);
  nl__dra_claim_free(c);
  nl__dra_checkpoint_write(m);
}

static void on_unprepared(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  unprep_t *u = ctx;
  nl_dra_t *m = u->m;
  nl_dra_claim_t *c = u->c;
  char *why = NULL;
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    why = nl_xasprintf("NodeUnprepareResources: %s", e);
    free(e);
  } else {
    const nl_dra_pb_unprepare_resp_t *r = (const nl_dra_pb_unprepare_resp_t *)resp;
    bool found = false;
    for (size_t i = 0; i < r->n_claims && !why; i++) {
      if (!r->claims[i]->key || strcmp(r->claims[i]->key, c->uid) != 0) {
        why = nl_xasprintf("NodeUnprepareResources returned result for unknown claim UID %.64s",
                           r->claims[i]->key ? r->claims[i]->key : "");
        break;
      }
      found = true;
      if (r->claims[i]->value && r->claims[i]->value->error && *r->claims[i]->value->error)
        why = nl_xasprintf("NodeUnprepareResources failed for ResourceClaim %s: %.1024s", c->name,
                           r->claims[i]->value->error);
    }
    if (!why && !found) why = nl_xstrdup("NodeUnprepareResources skipped 1 ResourceClaims");
  }
  if (why) {
    if (m->state == NL_DRA_RUNNING)
      nl_warn("unprepare dynamic resources: DRA driver %s: %s (tried again later)", u->driver, why);
    c->unprepare_failed = true;
    if (u->w) u->w->failed = true;
    free(why);
  } else {
    m->unprepares++;
  }
  c->unpreparing--;
  unprep_end(m, c);
  waiter_t *w = u->w;
  free(u->driver);
  free(u);
  if (w && --w->pending == 0) {
    observe_op(m, "UnprepareResources", w->failed, w->started);
    w->done(w->ctx);
    free(w);
  }
  nl__dra_release(m);
}

static void unprepare(nl_dra_t *m, nl_dra_claim_t *c, waiter_t *w) {
  if (!c->prepared || !c->n_drivers) { /* never reached a driver */
    unprep_end(m, c);
    return;
  }
  for (size_t i = 0; i < c->n_drivers; i++) {
    nl_dra_plugin_t *pl = plugin_get(m, c->drivers[i]);
    if (!pl) {
      nl_warn("unprepare dynamic resources: ResourceClaim %s/%s: DRA driver %s is not "
              "registered (tried again later)", c->ns, c->name, c->drivers[i]);
      c->unprepare_failed = true;
      if (w) w->failed = true;
      continue;
    }
    unprep_t *u = nl_xcalloc(1, sizeof *u);
    u->m = m;
    u->c = c;
    u->driver = nl_xstrdup(c->drivers[i]);
    u->w = w;
    if (w) w->pending++;
    nl_dra_pb_claim_t cl, *clp = &cl;
    k8s__io__kubelet__pkg__apis__dra__v1__claim__init(&cl);
    cl.namespace_ = c->ns;
    cl.uid = c->uid;
    cl.name = c->name;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest req =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_REQUEST__INIT;
    req.claims = &clp;
    req.n_claims = 1;
    c->unpreparing++;
    m->open++;
    nl_cri_client_call(&pl->client, pl->path_unprepare, &req.base,
                       &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__descriptor,
                       0, on_unprepared, u);
  }
  unprep_end(m, c);
}

void nl_dra_housekeeping(nl_dra_t *m) {
  const nl_dra_opts_t *o = &m->opts;
  if (m->state != NL_DRA_RUNNING) return;
  sync_drivers(m);
  for (nl_list_t *h = m->plugins.next; h != &m->plugins; h = h->next)
    nl__dra_health_start(nl_list_entry(h, nl_dra_plugin_t, link));
  nl__dra_health_tick(m);
  if (o->sources_ready && !o->sources_ready(o->ctx)) return;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->claims) {
    nl_dra_claim_t *c = nl_list_entry(pos, nl_dra_claim_t, link);
    if (c->unpreparing) continue;
    bool changed = false;
    for (size_t i = 0; i < c->n_pods;) {
      const char *uid = c->pods[i];
      bool in_use = (o->pod_active && o->pod_active(o->ctx, uid)) ||
                    (o->pod_running && o->pod_running(o->ctx, uid));
      bool preparing = false; /* a preparation in flight holds its pod */
      nl_list_t *pp, *pt;
      nl_list_foreach_safe(pp, pt, &m->preps) {
        prep_t *p = nl_list_entry(pp, prep_t, link);
        if (p->phase != PREP_DONE && !strcmp(p->uid, uid)) preparing = true;
      }
      if (in_use || preparing) {
        i++;
        continue;
      }
      free(c->pods[i]);
      c->pods[i] = c->pods[--c->n_pods];
      changed = true;
    }
    if (c->n_pods == 0) unprepare(m, c, NULL);
    else if (changed) nl__dra_checkpoint_write(m);
  }
}

bool nl_dra_unprepare_pod(nl_dra_t *m, const char *uid, void (*done)(void *ctx), void *ctx) {
  if (m->state != NL_DRA_RUNNING) return false;
  waiter_t *w = nl_xcalloc(1, sizeof *w);
  w->done = done;
  w->ctx = ctx;
  w->started = uv_hrtime();
  bool changed = false;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->claims) {
    nl_dra_claim_t *c = nl_list_entry(pos, nl_dra_claim_t, link);
    size_t i;
    for (i = 0; i < c->n_pods && strcmp(c->pods[i], uid) != 0; i++) {
    }
    if (i == c->n_pods || c->unpreparing) continue;
    free(c->pods[i]);
    c->pods[i] = c->pods[--c->n_pods];
    changed = true;
    if (c->n_pods == 0) unprepare(m, c, w); /* may free c */
  }
  if (changed) nl__dra_checkpoint_write(m);
  if (w->pending) return true;
  if (changed) observe_op(m, "UnprepareResources", w->failed, w->started);
  free(w);
  return false;
}

/* ---- life ---- */

int nl_dra_start(nl_dra_t *m, uv_loop_t *loop, const nl_dra_opts_t *opts, nl_err_t **err) {
  (void)err;
  memset(m, 0, sizeof *m);
  m->loop = loop;
  m->opts = *opts;
  m->opts.state_path = nl_xstrdup(opts->state_path);
  m->opts.node_name = opts->node_name ? nl_xstrdup(opts->node_name) : NULL;
  if (!m->opts.call_timeout_ms) m->opts.call_timeout_ms = 45000;
  if (!m->opts.wipe_delay_ms) m->opts.wipe_delay_ms = NL_DRA_WIPE_DELAY_MS;
  if (!m->opts.max_msg) m->opts.max_msg = 4 * 1024 * 1024;
  if (!m->opts.max_devices) m->opts.max_devices = 128;
  if (!m->opts.max_ids) m->opts.max_ids = 16;
  nl_list_init(&m->plugins);
  nl_list_init(&m->claims);
  nl_list_init(&m->preps);
  nl_list_init(&m->drivers);
  nl_map_init(&m->health);
  m->handler = (nl_plugin_handler_t){
      .type = NL_DRA_PLUGIN_TYPE,
      .validate = h_validate,
      .register_ = h_register,
      .deregister = h_deregister,
      .ctx = m,
  };
  uv_timer_init(loop, &m->wipe_timer);
  m->open = 1;
  m->state = NL_DRA_RUNNING;
  nl__dra_checkpoint_read(m);
  /* upstream: at start no driver is usable: this node's slices go */
  if (m->opts.kube && m->opts.node_name) nl__dra_wipe_schedule(m, "", 0);
  return 0;
}

static void wipe_timer_closed(uv_handle_t *h) {
  nl__dra_release(container_of((uv_timer_t *)h, nl_dra_t, wipe_timer));
}

void nl_dra_stop(nl_dra_t *m, nl_dra_done_fn done, void *ctx) {
  assert(m->state == NL_DRA_RUNNING);
  m->state = NL_DRA_STOPPING;
  m->done = done;
  m->done_ctx = ctx;
  m->open++; /* held while stopping starts */
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->preps) {
    prep_t *p = nl_list_entry(pos, prep_t, link);
    p->pending++; /* not freed under us */
    if (p->req) nl_kube_req_cancel(p->req);
    prep_finish(p, "kubelet is stopping");
    if (!--p->pending) prep_free(p);
  }
  nl__dra_wipe_stop(m);
  nl_list_foreach_safe(pos, tmp, &m->plugins) plugin_close(nl_list_entry(pos, nl_dra_plugin_t, link));
  uv_close((uv_handle_t *)&m->wipe_timer, wipe_timer_closed);
  nl__dra_release(m);
}
