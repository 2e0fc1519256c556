/* ConfigMaps and Secrets from the API's JSON into one compact block each: the
 * jansson tree lives only while decoding (a node keeps a copy of every object
 * its pods reference, so the copy is what costs memory). Also the references a
 * pod makes (upstream's podutil.VisitPodSecretNames / VisitPodConfigmapNames). */
#include <jansson.h>
#include <mbedtls/base64.h>
#include <stdlib.h>
#include <string.h>

#include "managers/objects_internal.h"
#include "reactor/xalloc.h"

const char *nl_object_resource(nl_object_kind_t kind) {
  return kind == NL_OBJECT_SECRET ? "secrets" : "configmaps";
}

const char *nl__object_kind_name(nl_object_kind_t kind) {
  return kind == NL_OBJECT_SECRET ? "secret" : "configmap";
}

char *nl__objects_key(nl_object_kind_t kind, const char *ns, const char *name) {
  return nl_xasprintf("%c/%s/%s", kind == NL_OBJECT_SECRET ? 's' : 'c', ns, name);
}

int nl_objects_not_found(nl_err_t **err, nl_object_kind_t kind, const char *name) {
  return nl_err_set(err, NL_EINVAL, "%s \"%s\" not found", nl_object_resource(kind), name);
}

static int item_cmp(const void *a, const void *b) {
  return strcmp(((const nl_object_item_t *)a)->key, ((const nl_object_item_t *)b)->key);
}

const nl_object_item_t *nl_object_find(const nl_object_t *o, const char *key) {
  nl_object_item_t k = {.key = key};
  return bsearch(&k, o->items, o->n_items, sizeof k, item_cmp);
}

void nl_object_free(nl_object_t *o) { free(o); }

static bool str_eq(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

bool nl__object_equal(const nl_object_t *a, const nl_object_t *b) {
  if (!a || !b) return a == b;
  if (a->kind != b->kind || !str_eq(a->type, b->type) || a->n_items != b->n_items) return false;
  for (size_t i = 0; i < a->n_items; i++) {
    const nl_object_item_t *x = &a->items[i], *y = &b->items[i];
    if (strcmp(x->key, y->key) || x->len != y->len || x->binary != y->binary ||
        memcmp(x->value, y->value, x->len))
      return false;
  }
  return true;
}

/* ---- decoding ---- */

typedef struct raw_item {
  const char *key;
  const char *text; /* as sent: the value, or base64 */
  size_t text_len;
  bool b64;
  size_t len; /* decoded */
} raw_item_t;

static int raw_cmp(const void *a, const void *b) {
  return strcmp(((const raw_item_t *)a)->key, ((const raw_item_t *)b)->key);
}

/* Collects the string members of obj (data or binaryData). */
static int collect(const json_t *obj, const char *field, bool b64, raw_item_t **items, size_t *n,
                   nl_err_t **err) {
  if (!obj || json_is_null(obj)) return 0;
  if (!json_is_object(obj)) return nl_err_set(err, NL_EINVAL, "%s: not an object", field);
  *items = nl_xrealloc(*items, (*n + json_object_size(obj)) * sizeof **items);
  const char *key;
  size_t key_len;
  json_t *v;
  json_object_keylen_foreach((json_t *)obj, key, key_len, v) {
    if (!key_len || strlen(key) != key_len)
      return nl_err_set(err, NL_EINVAL, "%s: a key is empty or holds a NUL byte", field);
    if (!json_is_string(v))
      return nl_err_set(err, NL_EINVAL, "%s[\"%s\"]: not a string", field, key);
    raw_item_t *r = &(*items)[(*n)++];
    *r = (raw_item_t){key, json_string_value(v), json_string_length(v), b64,
                      json_string_length(v)};
    if (b64) {
      size_t olen = 0;
      int rc = mbedtls_base64_decode(NULL, 0, &olen, (const unsigned char *)r->text, r->text_len);
      if (rc != 0 && rc != MBEDTLS_ERR_BASE64_BUFFER_TOO_SMALL)
        return nl_err_set(err, NL_EINVAL, "%s[\"%s\"]: illegal base64", field, key);
      r->len = olen;
    }
  }
  return 0;
}

static const char *opt_str(const json_t *o, const char *key, nl_err_t **err, bool *bad) {
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return NULL;
  if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
    *bad = true;
    nl_err_set(err, NL_EINVAL, "%s: not a string", key);
    return NULL;
  }
  return json_string_value(v);
}

/* Copies s into the block at *p. */
static const char *put(char **p, const char *s, size_t len) {
  char *d = *p;
  memcpy(d, s, len);
  d[len] = 0;
  *p += len + 1;
  return d;
}

static nl_object_t *pack(nl_object_kind_t kind, const char *ns, const char *name,
                         const char *type, raw_item_t *raw, size_t n) {
  size_t size = sizeof(nl_object_t) + n * sizeof(nl_object_item_t) + strlen(ns) + strlen(name) + 2 +
                (type ? strlen(type) + 1 : 0);
  for (size_t i = 0; i < n; i++) size += strlen(raw[i].key) + 1 + raw[i].len + 1;
  nl_object_t *o = nl_xmalloc(size);
  nl_object_item_t *items = (nl_object_item_t *)(o + 1);
  char *p = (char *)(items + n);
  *o = (nl_object_t){.kind = kind, .items = items, .n_items = n};
  o->namespace_ = put(&p, ns, strlen(ns));
  o->name = put(&p, name, strlen(name));
  o->type = type ? put(&p, type, strlen(type)) : NULL;
  for (size_t i = 0; i < n; i++) {
    items[i].key = put(&p, raw[i].key, strlen(raw[i].key));
    items[i].value = (const unsigned char *)p;
    items[i].len = raw[i].len;
    items[i].binary = kind == NL_OBJECT_CONFIG_MAP && raw[i].b64;
    if (raw[i].b64) {
      /* collect() checked the text; its size there is an upper bound */
      mbedtls_base64_decode((unsigned char *)p, raw[i].len + 1, &items[i].len,
                            (const unsigned char *)raw[i].text, raw[i].text_len);
      p[items[i].len] = 0;
      p += raw[i].len + 1;
    } else {
      put(&p, raw[i].text, raw[i].len);
    }
  }
  return o;
}

int nl_object_decode(nl_object_kind_t kind, const char *json, size_t len, nl_object_t **out,
                     bool *immutable, nl_err_t **err) {
  const char *what = nl__object_kind_name(kind);
  json_error_t je;
  json_t *j = json_loadb(json, len, JSON_ALLOW_NUL, &je);
  if (!json_is_object(j)) {
    json_decref(j);
    return nl_err_set(err, NL_EINVAL, "%s: not a JSON object: %s", what, j ? "" : je.text);
  }
  raw_item_t *raw = NULL;
  size_t n = 0;
  bool bad = false;
  int rc = -1;
  const json_t *meta = json_object_get(j, "metadata");
  const char *ns = opt_str(meta, "namespace", err, &bad);
  const char *name = bad ? NULL : opt_str(meta, "name", err, &bad);
  const char *type = NULL;
  if (bad) {
    nl_err_wrap(err, "%s: metadata", what);
    goto out;
  }
  if (!name || !*name) {
    nl_err_set(err, NL_EINVAL, "%s: metadata.name: required", what);
    goto out;
  }
  if (!ns) ns = "";
  if (kind == NL_OBJECT_SECRET) {
    type = opt_str(j, "type", err, &bad);
    if (bad || collect(json_object_get(j, "data"), "data", true, &raw, &n, err) < 0) goto ctx;
  } else if (collect(json_object_get(j, "data"), "data", false, &raw, &n, err) < 0 ||
             collect(json_object_get(j, "binaryData"), "binaryData", true, &raw, &n, err) < 0) {
    goto ctx;
  }
  const json_t *imm = json_object_get(j, "immutable");
  *immutable = json_is_true(imm);
  if (n) qsort(raw, n, sizeof *raw, raw_cmp);
  /* data and binaryData may not share a key (API validation); keep data's */
  size_t w = 0;
  for (size_t i = 0; i < n; i++)
    if (!w || strcmp(raw[w - 1].key, raw[i].key) != 0) raw[w++] = raw[i];
  *out = pack(kind, ns, name, type, raw, w);
  rc = 0;
  goto out;
ctx:
  nl_err_wrap(err, "%s %s/%s", what, ns, name);
out:
  free(raw);
  json_decref(j);
  return rc;
}

/* ---- a pod's references ---- */

typedef struct refs {
  void (*fn)(void *ctx, nl_object_kind_t kind, const char *name);
  void *ctx;
  struct seen {
    nl_object_kind_t kind;
    const char *name;
  } *seen;
  size_t n;
} refs_t;

static void ref(refs_t *r, nl_object_kind_t kind, const char *name) {
  if (!name || !*name) return;
  for (size_t i = 0; i < r->n; i++)
    if (r->seen[i].kind == kind && strcmp(r->seen[i].name, name) == 0) return;
  r->seen = nl_xrealloc(r->seen, (r->n + 1) * sizeof *r->seen);
  r->seen[r->n++] = (struct seen){kind, name};
  r->fn(r->ctx, kind, name);
}

static void container_refs(refs_t *r, const nl_container_t *c) {
  for (size_t i = 0; i < c->n_env_from; i++) {
    if (c->env_from[i].config_map_ref)
      ref(r, NL_OBJECT_CONFIG_MAP, c->env_from[i].config_map_ref->name);
    if (c->env_from[i].secret_ref) ref(r, NL_OBJECT_SECRET, c->env_from[i].secret_ref->name);
  }
  for (size_t i = 0; i < c->n_env; i++) {
    const nl_env_source_t *s = c->env[i].value_from;
    if (s && s->config_map_key_ref) ref(r, NL_OBJECT_CONFIG_MAP, s->config_map_key_ref->name);
    if (s && s->secret_key_ref) ref(r, NL_OBJECT_SECRET, s->secret_key_ref->name);
  }
}

void nl__objects_pod_refs(const nl_pod_t *pod,
                          void (*fn)(void *ctx, nl_object_kind_t kind, const char *name),
                          void *ctx) {
  refs_t r = {fn, ctx, NULL, 0};
  const nl_pod_spec_t *s = &pod->spec;
  for (size_t i = 0; i < s->image_pull_secrets.n; i++)
    ref(&r, NL_OBJECT_SECRET, s->image_pull_secrets.items[i]);
  for (size_t i = 0; i < s->n_volumes; i++) {
    const nl_volume_t *v = &s->volumes[i];
    if (v->config_map) ref(&r, NL_OBJECT_CONFIG_MAP, v->config_map->name);
    if (v->secret) ref(&r, NL_OBJECT_SECRET, v->secret->secret_name);
    for (size_t k = 0; v->projected && k < v->projected->n_sources; k++) {
      const nl_volume_projection_t *p = &v->projected->sources[k];
      if (p->config_map) ref(&r, NL_OBJECT_CONFIG_MAP, p->config_map->name);
      if (p->secret) ref(&r, NL_OBJECT_SECRET, p->secret->secret_name);
    }
  }
  for (size_t i = 0; i < s->n_init_containers; i++) container_refs(&r, &s->init_containers[i]);
  for (size_t i = 0; i < s->n_containers; i++) container_refs(&r, &s->containers[i]);
  free(r.seen);
}

typedef struct find {
  nl_object_kind_t kind;
  const char *name;
  bool found;
} find_t;

static void match(void *ctx, nl_object_kind_t kind, const char *name) {
  find_t *f = ctx;
  if (kind == f->kind && strcmp(name, f->name) == 0) f->found = true;
}

bool nl_objects_pod_references(const nl_pod_t *pod, nl_object_kind_t kind, const char *name) {
  find_t f = {kind, name, false};
  nl__objects_pod_refs(pod, match, &f);
  return f.found;
}
