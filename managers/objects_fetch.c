/* How an entry is fetched. Watch (upstream's watch_based_manager.go): one
 * reflector per object, listing and watching its namespace's collection with
 * fieldSelector metadata.name=<name>, stopped once the object is immutable.
 * Get and Cache (cache_based_manager.go, and the simple managers): a GET when
 * the object is first referenced, then at lookups (Get: every one, Cache: when
 * the copy is older than its TTL); the lookup answers from the copy meanwhile
 * and the changed callback reports what the GET brings. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "managers/objects_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static void stop_watch(nl__obj_entry_t *e);
static void start_watch(nl__obj_entry_t *e);

/* An answer, decoded, replaces the copy; -1 when it cannot be used. The entry
 * may be gone when this returns 0 (the changed callback). */
static int take(nl__obj_entry_t *e, const char *json, size_t len) {
  nl_object_t *obj = NULL;
  nl_err_t *err = NULL;
  bool immutable = false;
  if (nl_object_decode(e->kind, json, len, &obj, &immutable, &err) < 0) {
    nl_warn("objects: %s/%s: %s", e->ns, e->name, nl_err_msg(err));
    free(e->error);
    e->error = nl_xstrdup(nl_err_msg(err));
    nl_err_free(&err);
    return -1;
  }
  if (strcmp(obj->name, e->name) != 0 || (*obj->namespace_ && strcmp(obj->namespace_, e->ns))) {
    nl_warn("objects: asked for %s/%s, got %s/%s", e->ns, e->name, obj->namespace_, obj->name);
    nl_object_free(obj);
    return -1;
  }
  e->immutable = immutable;
  if (immutable && e->refl) {
    /* an immutable object never changes: its watch is a cost for nothing */
    nl_vlog(4, "objects: %s/%s is immutable: stopped watching it", e->ns, e->name);
    stop_watch(e);
  }
  nl__objects_set(e, obj);
  return 0;
}

/* ---- Watch ---- */

static void on_refl_stopped(void *ctx) { nl__objects_release(ctx); }

/* A watch is free: the first object fetched as with Cache gets it. */
static void promote(nl_objects_t *m) {
  nl_map_iter_t it;
  const char *key;
  void *v;
  nl_map_iter_init(&it, &m->entries);
  while (nl_map_iter_next(&it, &key, &v)) {
    nl__obj_entry_t *e = v;
    if (!e->polled) continue;
    e->polled = false;
    start_watch(e);
    return;
  }
}

static void stop_watch(nl__obj_entry_t *e) {
  if (!e->refl) return;
  nl_objects_t *m = e->m;
  nl_reflector_t *r = e->refl;
  e->refl = NULL;
  assert(m->n_watches > 0);
  m->n_watches--;
  m->pending++;
  nl_reflector_stop(r, on_refl_stopped, m);
  if (!m->stopping) promote(m);
}

/* The entry may be gone when this returns (the changed callback). */
static void watched(nl__obj_entry_t *e, const char *json, size_t len) {
  if (json) take(e, json, len);
  else nl__objects_set(e, NULL);
}

static void on_list(void *ctx, const nl_kube_raw_t *items, size_t n, const char *rv) {
  (void)rv;
  nl__obj_entry_t *e = ctx;
  if (n > 1) nl_warn("objects: %s/%s: the list holds %zu objects", e->ns, e->name, n);
  watched(e, n ? items[0].json : NULL, n ? items[0].len : 0);
}

static void on_event(void *ctx, const nl_kube_watch_event_t *ev) {
  nl__obj_entry_t *e = ctx;
  if (ev->type == NL_KUBE_WATCH_DELETED) watched(e, NULL, 0);
  else watched(e, ev->object, ev->object_len);
}

static void on_list_error(void *ctx, int status, const nl_err_t *err) {
  (void)status;
  nl__obj_entry_t *e = ctx;
  if (e->known) return; /* the copy stays, as upstream's store */
  free(e->error);
  e->error = nl_xstrdup(nl_err_msg(err));
}

static void start_watch(nl__obj_entry_t *e) {
  char *path = nl_xasprintf("/api/v1/namespaces/%s/%s", e->ns, nl_object_resource(e->kind));
  char *sel = nl_xasprintf("metadata.name=%s", e->name);
  nl_reflector_opts_t o = {.path = path, .field_selector = sel};
  nl_reflector_cbs_t cbs = {.on_list = on_list, .on_event = on_event,
                            .on_list_error = on_list_error};
  nl_err_t *err = NULL;
  if (nl_reflector_new(&e->refl, e->m->loop, e->m->client, &o, &cbs, e, &err) < 0) {
    /* only a path that is no absolute path fails: a namespace with a '?' */
    e->error = nl_xstrdup(nl_err_msg(err));
    nl_err_free(&err);
  } else {
    e->m->n_watches++;
    nl_reflector_start(e->refl);
  }
  free(sel);
  free(path);
}

/* ---- Get and Cache ---- */

typedef struct get_ctx {
  nl_objects_t *m;
  char *kind_ns_name; /* the entry's map key */
  uint64_t gen;
} get_ctx_t;

static void on_get(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  get_ctx_t *c = ctx;
  nl_objects_t *m = c->m;
  nl__obj_entry_t *e = m->stopping ? NULL : nl_map_get(&m->entries, c->kind_ns_name);
  if (e && e->gen == c->gen) {
    e->req = NULL;
    nl_err_t *e2 = NULL;
    if (err) {
      nl_err_set(&e2, err->code, "%s", err->msg);
    } else if (resp->status == 404) {
      nl__objects_set(e, NULL);
    } else if (resp->status / 100 != 2) {
      nl_kube_status_err(resp, &e2);
    } else {
      take(e, resp->body, resp->body_len);
    }
    if (e2) { /* nothing above touched the entry */
      nl_vlog(2, "objects: GET %s/%s/%s: %s", e->ns, nl_object_resource(e->kind), e->name,
              nl_err_msg(e2));
      if (!e->known) {
        free(e->error);
        e->error = nl_xstrdup(nl_err_msg(e2));
      }
      nl_err_free(&e2);
    }
  }
  free(c->kind_ns_name);
  free(c);
  nl__objects_release(m);
}

static void get(nl__obj_entry_t *e) {
  if (e->req || e->m->stopping) return;
  get_ctx_t *c = nl_xmalloc(sizeof *c);
  c->m = e->m;
  c->kind_ns_name = nl__objects_key(e->kind, e->ns, e->name);
  c->gen = e->gen = ++e->m->gen;
  e->m->pending++;
  char *path = nl_xasprintf("/api/v1/namespaces/%s/%s/%s", e->ns, nl_object_resource(e->kind),
                            e->name);
  nl_kube_request_opts_t o = {.method = "GET", .path = path};
  e->req = nl_kube_request(e->m->client, &o, on_get, c);
  free(path);
}

/* ---- the strategies ---- */

void nl__objects_fetch_start(nl__obj_entry_t *e) {
  nl_objects_t *m = e->m;
  if (m->opts.strategy == NL_OBJECTS_WATCH && m->n_watches < m->opts.max_watches) {
    start_watch(e);
    return;
  }
  if (m->opts.strategy == NL_OBJECTS_WATCH) {
    nl_vlog(2, "objects: %u watches open: %s/%s is fetched with GETs until one is free",
            m->n_watches, e->ns, e->name);
    e->polled = true;
  }
  get(e);
}

void nl__objects_fetch_refresh(nl__obj_entry_t *e) {
  nl_objects_t *m = e->m;
  if ((m->opts.strategy == NL_OBJECTS_WATCH && !e->polled) || e->immutable) return;
  if (m->opts.strategy == NL_OBJECTS_GET || !e->known || e->stale ||
      uv_now(m->loop) - e->fetched_ms >= m->opts.cache_ttl_ms)
    get(e);
}

void nl__objects_fetch_stop(nl__obj_entry_t *e) {
  stop_watch(e);
  if (e->req) {
    e->gen = 0; /* its completion finds no entry, or one of a later generation */
    nl_kube_req_cancel(e->req);
    e->req = NULL;
  }
}
