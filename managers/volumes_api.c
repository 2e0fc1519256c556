/* Payloads of configMap, secret, downwardAPI and projected volumes (upstream
 * configmap.MakePayload, secret.MakePayload, downwardapi.CollectData,
 * projected collectData). */
#include "managers/volumes_api.h"

#include <string.h>

#include "managers/objects.h"
#include "managers/tokens.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

typedef struct {
  nl_aw_file_t *files;
  size_t n;
} payload_t;

static void put(payload_t *pl, const char *path, const void *data, size_t len, int32_t mode) {
  nl_aw_files_add(&pl->files, &pl->n, path, data, len, (uint32_t)mode);
}

/* The payload of a ConfigMap or Secret (and their projections). */
static int objects_payload(const nl_runtime_opts_t *opts, const nl_pod_t *pod, nl_object_kind_t kind,
                           const char *name, const nl_key_to_path_t *items, size_t n_items,
                           int32_t mode, bool optional, payload_t *pl, nl_err_t **err) {
  bool cm = kind == NL_OBJECT_CONFIG_MAP;
  const nl_object_t *o = NULL;
  int r = -1;
  if (opts->objects.fn)
    r = opts->objects.fn(opts->objects.ctx, kind, pod->metadata.namespace_, name, &o, err);
  else
    nl_err_set(err, NL_EINVAL, "%s \"%s\": no API server objects on this node",
               cm ? "configmap" : "secret", name);
  if (r < 0) return -1;
  if (r == 0) {
    if (optional) return 0; /* an empty object */
    return nl_err_set(err, NL_EINVAL, "%s \"%s\" not found", cm ? "configmap" : "secret", name);
  }
  if (n_items == 0) {
    for (size_t i = 0; i < o->n_items; i++)
      put(pl, o->items[i].key, o->items[i].value, o->items[i].len, mode);
    return 0;
  }
  for (size_t i = 0; i < n_items; i++) {
    const nl_object_item_t *it = nl_object_find(o, items[i].key);
    if (!it) {
      if (optional) continue;
      return nl_err_set(err, NL_EINVAL,
                        cm ? "configmap references non-existent config key: %s"
                           : "references non-existent secret key: %s",
                        items[i].key);
    }
    put(pl, items[i].path, it->value, it->len, items[i].mode.set ? items[i].mode.v : mode);
  }
  return 0;
}

static int downward_payload(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                            const nl_downward_api_source_t *d, int32_t mode, payload_t *pl,
                            nl_err_t **err) {
  for (size_t i = 0; i < d->n_items; i++) {
    const nl_downward_api_file_t *f = &d->items[i];
    char *v = NULL;
    int r;
    if (f->field_ref)
      r = nl_runtime_field_value(opts, pod, f->field_ref->field_path ? f->field_ref->field_path : "",
                                 NULL, NULL, 0, &v, err);
    else if (f->resource_field_ref)
      r = nl_runtime_resource_value(opts, pod, NULL, f->resource_field_ref, &v, err);
    else
      r = nl_err_set(err, NL_EINVAL, "no fieldRef or resourceFieldRef");
    if (r < 0) return nl_err_wrap(err, "unable to extract field for %s", f->path);
    put(pl, f->path, v, strlen(v), f->mode.set ? f->mode.v : mode);
    free(v);
  }
  return 0;
}

static int token_payload(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                         const nl_sa_token_projection_t *t, int32_t mode, payload_t *pl,
                         nl_err_t **err) {
  const char *tok = NULL;
  if (!opts->tokens.lookup)
    return nl_err_set(err, NL_EINVAL, "cannot get a service account token: no API server");
  if (opts->tokens.lookup(opts->tokens.ctx, pod, t, &tok, err) < 0) return -1;
  /* with an fsGroup, 0600 and the group read of the ownership pass (upstream) */
  const nl_pod_security_context_t *sc = pod->spec.security_context;
  if (sc && sc->fs_group.set) mode = 0600;
  put(pl, t->path, tok, strlen(tok), mode);
  return 0;
}

/* upstream projected collectData: every source is tried; the errors are
 * aggregated as utilerrors does ("[a, b]" for more than one). */
static int projected_payload(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                             const nl_projected_source_t *p, payload_t *pl, nl_err_t **err) {
  int32_t mode = p->default_mode.set ? p->default_mode.v : 0644;
  nl_buf_t msgs = NL_BUF_INIT;
  int n_err = 0, code = 0;
  for (size_t i = 0; i < p->n_sources; i++) {
    const nl_volume_projection_t *s = &p->sources[i];
    nl_err_t *e = NULL;
    int r = 0;
    if (s->secret)
      r = objects_payload(opts, pod, NL_OBJECT_SECRET, s->secret->secret_name, s->secret->items,
                          s->secret->n_items, mode, s->secret->optional == 1, pl, &e);
    else if (s->config_map)
      r = objects_payload(opts, pod, NL_OBJECT_CONFIG_MAP, s->config_map->name,
                          s->config_map->items, s->config_map->n_items, mode,
                          s->config_map->optional == 1, pl, &e);
    else if (s->downward_api)
      r = downward_payload(opts, pod, s->downward_api, mode, pl, &e);
    else if (s->service_account_token)
      r = token_payload(opts, pod, s->service_account_token, mode, pl, &e);
    if (r < 0) {
      nl_buf_printf(&msgs, "%s%s", n_err++ ? ", " : "", e->msg);
      code = e->code;
      nl_err_free(&e);
    }
  }
  if (n_err == 0) return 0;
  nl_buf_append(&msgs, "", 1);
  nl_err_set(err, code, n_err > 1 ? "[%s]" : "%s", msgs.data);
  nl_buf_free(&msgs);
  return -1;
}

static bool is_api(const nl_volume_t *v) {
  return v->config_map || v->secret || v->downward_api || v->projected;
}

bool nl_volumes_api_wants_tokens(const nl_pod_t *pod) {
  for (size_t i = 0; i < pod->spec.n_volumes; i++) {
    const nl_projected_source_t *p = pod->spec.volumes[i].projected;
    for (size_t j = 0; p && j < p->n_sources; j++)
      if (p->sources[j].service_account_token) return true;
  }
  return false;
}

int nl_volumes_api_resolve(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                           nl_api_volumes_t *out, nl_err_t **err) {
  const nl_pod_security_context_t *sc = pod->spec.security_context;
  out->fs_group = sc && sc->fs_group.set ? sc->fs_group.v : -1;
  for (size_t i = 0; i < pod->spec.n_volumes; i++) {
    const nl_volume_t *v = &pod->spec.volumes[i];
    if (!is_api(v)) continue;
    payload_t pl = {0};
    int r;
    if (v->config_map) {
      const nl_config_map_source_t *c = v->config_map;
      r = objects_payload(opts, pod, NL_OBJECT_CONFIG_MAP, c->name, c->items, c->n_items,
                          c->default_mode.set ? c->default_mode.v : 0644, c->optional == 1, &pl,
                          err);
    } else if (v->secret) {
      const nl_secret_source_t *s = v->secret;
      r = objects_payload(opts, pod, NL_OBJECT_SECRET, s->secret_name, s->items, s->n_items,
                          s->default_mode.set ? s->default_mode.v : 0644, s->optional == 1, &pl,
                          err);
    } else if (v->downward_api) {
      const nl_downward_api_source_t *d = v->downward_api;
      r = downward_payload(opts, pod, d, d->default_mode.set ? d->default_mode.v : 0644, &pl, err);
    } else {
      r = projected_payload(opts, pod, v->projected, &pl, err);
    }
    if (r < 0) {
      nl_aw_files_free(pl.files, pl.n);
      /* upstream's words, with its " : " */
      char *m = nl_xasprintf("MountVolume.SetUp failed for volume \"%s\" : %s", v->name,
                             (*err)->msg);
      free((*err)->msg);
      (*err)->msg = m;
      return -1;
    }
    out->v = nl_xrealloc(out->v, (out->n + 1) * sizeof *out->v);
    out->v[out->n++] = (nl_api_volume_t){nl_xstrdup(v->name), pl.files, pl.n};
  }
  return 0;
}
