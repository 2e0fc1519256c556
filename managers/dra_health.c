/* DRA device health (upstream's ResourceHealthStatus for DRA): each
 * registered plugin is asked for its devices' health with the
 * v1alpha1.DRAResourceHealth/NodeWatchResources stream; what it sends is kept
 * by driver, pool and device, turns Unknown once older than its timeout, and
 * goes into the containers' allocatedResourcesStatus ("claim:NAME" or
 * "claim:NAME/REQUEST", one ResourceHealth per device "driver/pool/device").
 * A change of a device some claim holds has its pods' statuses made again. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/dra_health.pb-c.h"
#include "managers/dra_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define PATH_WATCH "/v1alpha1.DRAResourceHealth/NodeWatchResources"
#define DEFAULT_TIMEOUT_S 30 /* upstream's DefaultHealthTimeout */
#define RETRY_MS 5000        /* upstream restarts a stream every 5 s */
#define MAX_MESSAGE 1024     /* longer: 1021 bytes and "..." */
#define MAX_ENTRIES 4096     /* devices remembered, all drivers together */
#define MAX_NAME 1024

typedef struct nl_dra_health_entry {
  char *driver, *pool, *device;
  int health;               /* V1ALPHA1__HEALTH_STATUS__* */
  int64_t updated;          /* the plugin's Unix seconds */
  int64_t timeout_s;
  char *message;            /* NULL: none */
  bool stale_told;          /* its pods were told it turned Unknown */
} entry_t;

static const char *health_name(int h) {
  return h == V1ALPHA1__HEALTH_STATUS__HEALTHY     ? "Healthy"
         : h == V1ALPHA1__HEALTH_STATUS__UNHEALTHY ? "Unhealthy"
                                                   : "Unknown";
}

/* The map's key: the three names apart by a byte none of them may hold. */
static char *key_of(const char *driver, const char *pool, const char *device) {
  return nl_xasprintf("%s\x01%s\x01%s", driver, pool, device);
}

static entry_t *find(const nl_dra_t *m, const char *driver, const char *pool, const char *device) {
  char *k = key_of(driver, pool, device);
  entry_t *e = nl_map_get(&m->health, k);
  free(k);
  return e;
}

static void entry_free(void *v) {
  entry_t *e = v;
  free(e->driver);
  free(e->pool);
  free(e->device);
  free(e->message);
  free(e);
}

/* What the status says of a device now: Unknown, without a message, once its
 * last word is older than its timeout (upstream's getHealthInfo). */
static int effective(const entry_t *e, int64_t now, const char **msg) {
  *msg = NULL;
  if (!e || now - e->updated > e->timeout_s) return V1ALPHA1__HEALTH_STATUS__UNKNOWN;
  *msg = e->message;
  return e->health;
}

/* The pods that hold a device of the driver (all its devices: NULL pool). */
static void tell_pods(nl_dra_t *m, const char *driver, const char *pool, const char *device) {
  if (!m->opts.pod_changed) return;
  for (nl_list_t *p = m->claims.next; p != &m->claims; p = p->next) {
    const nl_dra_claim_t *c = nl_list_entry(p, nl_dra_claim_t, link);
    bool holds = false;
    for (size_t d = 0; !holds && d < c->n_devs; d++)
      holds = !strcmp(c->devs[d].driver, driver) &&
              (!pool || (!strcmp(c->devs[d].pool, pool) && !strcmp(c->devs[d].device, device)));
    for (size_t i = 0; holds && i < c->n_pods; i++) m->opts.pod_changed(m->opts.ctx, c->pods[i]);
  }
}

static char *message_of(const char *s) {
  if (!s || !*s) return NULL;
  size_t n = strlen(s);
  if (n <= MAX_MESSAGE) return nl_xstrdup(s);
  size_t keep = MAX_MESSAGE - 3;
  while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80) keep--; /* a whole UTF-8 char */
  return nl_xasprintf("%.*s...", (int)keep, s);
}

static void update(nl_dra_t *m, const char *driver, const V1alpha1__DeviceHealth *d, int64_t now) {
  const char *pool = d->device ? d->device->pool_name : NULL, *dev = d->device ? d->device->device_name : NULL;
  if (!pool || !dev || !*dev || strlen(pool) > MAX_NAME || strlen(dev) > MAX_NAME) return;
  entry_t *e = find(m, driver, pool, dev);
  if (!e && nl_map_size(&m->health) >= MAX_ENTRIES) {
    if (!m->health_full_logged)
      nl_warn("DRA driver %s: more than %d devices' health to keep: %s/%s and others are left "
              "Unknown", driver, MAX_ENTRIES, pool, dev);
    m->health_full_logged = true;
    return;
  }
  entry_t next = {
      .health = d->health == V1ALPHA1__HEALTH_STATUS__HEALTHY ||
                        d->health == V1ALPHA1__HEALTH_STATUS__UNHEALTHY
                    ? (int)d->health
                    : V1ALPHA1__HEALTH_STATUS__UNKNOWN,
      .updated = d->last_updated_time,
      .timeout_s = d->health_check_timeout_seconds > 0 ? d->health_check_timeout_seconds
                                                       : DEFAULT_TIMEOUT_S,
      .message = message_of(d->message),
  };
  const char *was_msg, *is_msg;
  int was = effective(e, now, &was_msg), is = effective(&next, now, &is_msg);
  bool changed = is != was || (was_msg == NULL) != (is_msg == NULL) ||
                 (was_msg && strcmp(was_msg, is_msg) != 0);
  if (!e) {
    e = nl_xcalloc(1, sizeof *e);
    e->driver = nl_xstrdup(driver);
    e->pool = nl_xstrdup(pool);
    e->device = nl_xstrdup(dev);
    char *k = key_of(driver, pool, dev);
    nl_map_put(&m->health, k, e);
    free(k);
  }
  free(e->message);
  e->health = next.health;
  e->updated = next.updated;
  e->timeout_s = next.timeout_s;
  e->message = next.message;
  e->stale_told = false;
  if (changed) tell_pods(m, driver, pool, dev);
}

/* upstream's clearDriver: a stream's end forgets what it said. */
static void forget_driver(nl_dra_t *m, const char *driver) {
  bool any = false;
  nl_map_iter_t it;
  const char *k;
  void *v;
  nl_map_iter_init(&it, &m->health);
  while (nl_map_iter_next(&it, &k, &v)) {
    entry_t *e = v;
    if (strcmp(e->driver, driver) != 0) continue;
    nl_map_del(&m->health, k);
    entry_free(e);
    any = true;
  }
  if (any) tell_pods(m, driver, NULL, NULL);
}

static void on_health(const ProtobufCMessage *msg, void *ctx) {
  nl_dra_plugin_t *p = ctx;
  const V1alpha1__NodeWatchResourcesResponse *r = (const V1alpha1__NodeWatchResourcesResponse *)msg;
  int64_t now = (int64_t)time(NULL);
  if (r->n_devices > MAX_ENTRIES) {
    nl_warn("DRA driver %s: a health update for %zu devices, more than %d: ignored", p->driver,
            r->n_devices, MAX_ENTRIES);
    return;
  }
  for (size_t i = 0; i < r->n_devices; i++) update(p->m, p->driver, r->devices[i], now);
}

static void on_health_end(const nl_grpc_status_t *st, void *ctx) {
  nl_dra_plugin_t *p = ctx;
  p->health = NULL;
  p->health_retry_at = uv_now(p->m->loop) + RETRY_MS;
  if (st->code == NL_GRPC_UNIMPLEMENTED) p->health_unimplemented = true;
  nl_vlog(3, "DRA driver %s: health stream ended: %s", p->driver, st->message);
  forget_driver(p->m, p->driver);
}

void nl__dra_health_start(nl_dra_plugin_t *p) {
  if (!p->m->opts.health || p->closing || p->health || p->health_unimplemented) return;
  if (uv_now(p->m->loop) < p->health_retry_at) return;
  V1alpha1__NodeWatchResourcesRequest req = V1ALPHA1__NODE_WATCH_RESOURCES_REQUEST__INIT;
  p->health = nl_cri_client_stream(&p->client, PATH_WATCH, &req.base,
                                   &v1alpha1__node_watch_resources_response__descriptor, 0,
                                   on_health, on_health_end, p);
}

void nl__dra_health_stop(nl_dra_plugin_t *p) {
  if (!p->health) return;
  nl_cri_stream_cancel(p->health);
  p->health = NULL;
  forget_driver(p->m, p->driver);
}

void nl__dra_health_tick(nl_dra_t *m) {
  /* a device whose last word has just grown too old turns Unknown */
  int64_t now = (int64_t)time(NULL);
  nl_map_iter_t it;
  const char *k;
  void *v;
  nl_map_iter_init(&it, &m->health);
  while (nl_map_iter_next(&it, &k, &v)) {
    entry_t *e = v;
    if (e->health != V1ALPHA1__HEALTH_STATUS__UNKNOWN && !e->stale_told &&
        now - e->updated > e->timeout_s) {
      e->stale_told = true;
      tell_pods(m, e->driver, e->pool, e->device);
    }
  }
}

void nl__dra_health_free(nl_dra_t *m) { nl_map_free(&m->health, entry_free); }

/* Whether a device serves the container's claim reference's request (all of
 * the claim's devices when it names none; a device with no request names
 * serves any, as upstream's). */
static bool serves(const nl_dra_device_t *dv, const char *request) {
  if (!request || !*request || !dv->n_requests) return true;
  size_t len = strcspn(request, "/"); /* the base request of a subrequest */
  for (size_t q = 0; q < dv->n_requests; q++)
    if (!strncmp(dv->requests[q], request, len) &&
        (dv->requests[q][len] == 0 || dv->requests[q][len] == '/'))
      return true;
  return false;
}

void nl_dra_resource_status(const nl_dra_t *m, const nl_pod_t *pod, nl_pod_status_t *st,
                            bool messages) {
  const char *ns = pod->metadata.namespace_ ? pod->metadata.namespace_ : "";
  int64_t now = (int64_t)time(NULL);
  for (size_t i = 0; i < st->n_container_statuses; i++) {
    nl_container_status_t *cs = &st->container_statuses[i];
    const nl_container_t *ctr = NULL;
    for (size_t j = 0; j < pod->spec.n_containers && !ctr; j++)
      if (!strcmp(pod->spec.containers[j].name, cs->name)) ctr = &pod->spec.containers[j];
    for (size_t r = 0; ctr && r < ctr->resources.n_claims; r++) {
      const nl_resource_claim_ref_t *cr = &ctr->resources.claims[r];
      const nl_pod_resource_claim_t *pc = cr->name ? nl__dra_pod_claim(pod, cr->name) : NULL;
      nl_dra_ref_t ref = {0};
      char *why = NULL;
      if (!pc || nl__dra_resolve(pod, pc, &ref, &why) < 0 || !ref.name) {
        free(why);
        continue;
      }
      const nl_dra_claim_t *c = nl__dra_claim_find(m, ns, ref.name);
      if (!c) continue;
      char *name = cr->request && *cr->request ? nl_xasprintf("claim:%s/%s", cr->name, cr->request)
                                               : nl_xasprintf("claim:%s", cr->name);
      nl_resource_status_t *rs = NULL;
      for (size_t d = 0; d < c->n_devs; d++) {
        const nl_dra_device_t *dv = &c->devs[d];
        if (!serves(dv, cr->request)) continue;
        char *id = nl_xasprintf("%s/%s/%s", dv->driver, dv->pool, dv->device);
        bool seen = false;
        for (size_t k = 0; rs && k < rs->n_resources && !seen; k++) seen = !strcmp(rs->resources[k].id, id);
        if (!seen) {
          if (!rs) rs = nl_container_status_resource(cs, name);
          const char *msg;
          int h = effective(find(m, dv->driver, dv->pool, dv->device), now, &msg);
          nl_resource_status_add(rs, id, health_name(h), messages ? msg : NULL);
        }
        free(id);
      }
      free(name);
    }
  }
}
