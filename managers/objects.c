/* The registry of referenced objects (upstream's cacheBasedManager over an
 * object store): pods register what they reference; an entry lives while a
 * pod references it, and its fetching (objects_fetch.c) with it. Lookups read
 * the entries. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "managers/objects_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* What one registered pod references. */
typedef struct pod_refs {
  nl__obj_entry_t **entries;
  size_t n;
} pod_refs_t;

static nl__obj_entry_t *entry_ref(nl_objects_t *m, nl_object_kind_t kind, const char *ns,
                                  const char *name) {
  char *key = nl__objects_key(kind, ns, name);
  nl__obj_entry_t *e = nl_map_get(&m->entries, key);
  if (e) {
    free(key);
    e->refs++;
    e->stale = true;
    return e;
  }
  e = nl_xcalloc(1, sizeof *e);
  e->m = m;
  e->kind = kind;
  e->ns = nl_xstrdup(ns);
  e->name = nl_xstrdup(name);
  e->refs = 1;
  nl_map_put(&m->entries, key, e);
  free(key);
  nl_vlog(4, "objects: %s %s/%s referenced", nl__object_kind_name(kind), ns, name);
  nl__objects_fetch_start(e);
  return e;
}

static void entry_free(nl__obj_entry_t *e) {
  nl__objects_fetch_stop(e);
  nl_object_free(e->obj);
  free(e->error);
  free(e->ns);
  free(e->name);
  free(e);
}

static void entry_unref(nl__obj_entry_t *e) {
  assert(e->refs > 0);
  if (--e->refs) return;
  nl_objects_t *m = e->m;
  char *key = nl__objects_key(e->kind, e->ns, e->name);
  nl_vlog(4, "objects: %s %s/%s no longer referenced", nl__object_kind_name(e->kind), e->ns,
          e->name);
  nl__obj_entry_t *gone = nl_map_del(&m->entries, key);
  assert(gone == e);
  (void)gone;
  free(key);
  entry_free(e);
}

void nl__objects_set(nl__obj_entry_t *e, nl_object_t *obj) {
  bool changed = !e->known || !nl__object_equal(e->obj, obj);
  nl_object_free(e->obj);
  e->obj = obj;
  e->known = true;
  e->stale = false;
  e->fetched_ms = uv_now(e->m->loop);
  free(e->error);
  e->error = NULL;
  if (!changed || !e->m->opts.changed) return;
  nl_vlog(3, "objects: %s %s/%s %s", nl__object_kind_name(e->kind), e->ns, e->name,
          obj ? "arrived or changed" : "not found");
  e->refs++; /* the callback may unregister the pods that hold it */
  e->m->opts.changed(e->kind, e->ns, e->name, e->m->opts.changed_ctx);
  entry_unref(e);
}

static void pod_refs_free(void *p) {
  pod_refs_t *r = p;
  for (size_t i = 0; i < r->n; i++) entry_unref(r->entries[i]);
  free(r->entries);
  free(r);
}

typedef struct reg {
  nl_objects_t *m;
  const char *ns;
  pod_refs_t *refs;
} reg_t;

static void add_ref(void *ctx, nl_object_kind_t kind, const char *name) {
  reg_t *r = ctx;
  r->refs->entries = nl_xrealloc(r->refs->entries, (r->refs->n + 1) * sizeof *r->refs->entries);
  r->refs->entries[r->refs->n++] = entry_ref(r->m, kind, r->ns, name);
}

void nl_objects_register_pod(nl_objects_t *m, const nl_pod_t *pod) {
  assert(!m->stopping);
  const char *uid = pod->metadata.uid;
  if (!uid || !*uid) return;
  reg_t r = {m, pod->metadata.namespace_ ? pod->metadata.namespace_ : "",
             nl_xcalloc(1, sizeof(pod_refs_t))};
  /* the new references first: an object named by the old and the new spec
   * keeps its watch */
  nl__objects_pod_refs(pod, add_ref, &r);
  pod_refs_t *old = nl_map_put(&m->pods, uid, r.refs);
  if (old) pod_refs_free(old);
  if (!r.refs->n) pod_refs_free(nl_map_del(&m->pods, uid));
}

void nl_objects_unregister_pod(nl_objects_t *m, const char *uid) {
  pod_refs_t *r = nl_map_del(&m->pods, uid);
  if (r) pod_refs_free(r);
}

static int lookup(void *ctx, nl_object_kind_t kind, const char *ns, const char *name,
                  const nl_object_t **out, nl_err_t **err) {
  nl_objects_t *m = ctx;
  char *key = nl__objects_key(kind, ns, name);
  nl__obj_entry_t *e = m->stopping ? NULL : nl_map_get(&m->entries, key);
  free(key);
  if (!e)
    return nl_err_set(err, NL_EINVAL, "object \"%s\"/\"%s\" not registered", ns, name);
  nl__objects_fetch_refresh(e);
  if (!e->known)
    return nl_err_set(err, NL_EINVAL, "failed to sync %s cache: %s", nl_object_resource(kind),
                      e->error ? e->error : "timed out waiting for the condition");
  *out = e->obj;
  return e->obj ? 1 : 0;
}

nl_objects_lookup_t nl_objects_lookup(nl_objects_t *m) {
  return (nl_objects_lookup_t){lookup, m};
}

int nl_objects_new(nl_objects_t **out, uv_loop_t *loop, nl_kube_client_t *client,
                   const nl_objects_opts_t *opts, nl_err_t **err) {
  if (opts->strategy != NL_OBJECTS_WATCH && opts->strategy != NL_OBJECTS_GET &&
      opts->strategy != NL_OBJECTS_CACHE)
    return nl_err_set(err, NL_EINVAL, "configMapAndSecretChangeDetectionStrategy: unknown value %d",
                      (int)opts->strategy);
  nl_objects_t *m = nl_xcalloc(1, sizeof *m);
  m->loop = loop;
  m->client = client;
  m->opts = *opts;
  if (!m->opts.cache_ttl_ms) m->opts.cache_ttl_ms = NL_OBJECTS_CACHE_TTL_MS;
  if (!m->opts.max_watches) m->opts.max_watches = NL_OBJECTS_MAX_WATCHES;
  nl_map_init(&m->entries);
  nl_map_init(&m->pods);
  uv_timer_init(loop, &m->timer);
  m->pending = 1;
  *out = m;
  return 0;
}

void nl__objects_release(nl_objects_t *m) {
  assert(m->pending > 0);
  if (--m->pending || !m->stopping) return;
  void (*done)(void *) = m->done;
  void *done_ctx = m->done_ctx;
  free(m);
  if (done) done(done_ctx);
}

static void on_timer_close(uv_handle_t *h) {
  nl__objects_release(container_of((uv_timer_t *)h, nl_objects_t, timer));
}

void nl_objects_stop(nl_objects_t *m, void (*done)(void *ctx), void *ctx) {
  assert(!m->stopping);
  m->stopping = true;
  m->done = done;
  m->done_ctx = ctx;
  m->opts.changed = NULL;
  nl_map_free(&m->pods, pod_refs_free); /* drops every entry and its fetching */
  assert(nl_map_size(&m->entries) == 0);
  nl_map_free(&m->entries, NULL);
  uv_close((uv_handle_t *)&m->timer, on_timer_close);
}
