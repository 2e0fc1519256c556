/* The KubeletConfiguration as upstream's /configz shows it: the v1beta1 JSON,
 * nested structs (authentication.x509 ...) as objects, durations as Go
 * strings ("2m0s"). Built from the field table, so every field nanolet
 * knows is in it. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agent/config.h"
#include "agent/config_fields.h"
#include "agent/model/node.h"
#include "reactor/duration.h"
#include "reactor/xalloc.h"

static json_t *list_json(const nl_config_list_t *l) {
  json_t *a = json_array();
  for (size_t i = 0; i < l->n; i++) json_array_append_new(a, json_string(l->v[i]));
  return a;
}

static json_t *field_json(const nl_kubelet_config_t *c, const nl_config_field_t *f) {
  const void *p = (const char *)c + f->offset;
  char buf[64];
  switch (f->type) {
  case NL_F_STRING: {
    const char *s = *(char *const *)p;
    return s && *s ? json_string(s) : NULL; /* omitempty */
  }
  case NL_F_BOOL: return json_boolean(*(const bool *)p);
  case NL_F_INT32: return json_integer(*(const int32_t *)p);
  case NL_F_INT64: return json_integer(*(const int64_t *)p);
  case NL_F_DURATION: return json_string(nl_duration_format(*(const int64_t *)p, buf, sizeof buf));
  case NL_F_STRLIST: {
    const nl_config_list_t *l = p;
    return l->n ? list_json(l) : NULL;
  }
  case NL_F_TAINTS: { /* v1.Taint objects, as upstream's registerWithTaints */
    const nl_config_list_t *l = p;
    if (!l->n) return NULL;
    json_t *a = json_array();
    for (size_t i = 0; i < l->n; i++) {
      nl_node_taint_t t;
      if (nl_node_taint_parse(l->v[i], &t, NULL) < 0) continue; /* validation refuses it */
      json_t *o = json_pack("{s:s}", "key", t.key);
      if (*t.value) json_object_set_new(o, "value", json_string(t.value));
      json_object_set_new(o, "effect", json_string(t.effect));
      json_array_append_new(a, o);
      nl_node_taint_free(&t);
    }
    return a;
  }
  case NL_F_PRIORITIES: {
    const nl_config_list_t *l = p;
    if (!l->n) return NULL;
    json_t *a = json_array();
    for (size_t i = 0; i < l->n; i++) {
      long long prio = 0, secs = 0;
      sscanf(l->v[i], "%lld=%lld", &prio, &secs); /* as config.c wrote it */
      json_array_append_new(a, json_pack("{s:I,s:I}", "priority", (json_int_t)prio,
                                         "shutdownGracePeriodSeconds", (json_int_t)secs));
    }
    return a;
  }
  case NL_F_STRMAP:
  case NL_F_BOOLMAP:
  case NL_F_STRLISTMAP: {
    const nl_config_map_t *m = p;
    if (!m->n) return NULL;
    json_t *o = json_object();
    for (size_t i = 0; i < m->n; i++) {
      json_t *v = f->type == NL_F_STRLISTMAP ? list_json(&m->values[i])
                  : f->type == NL_F_BOOLMAP  ? json_boolean(!strcmp(m->first[i], "true"))
                                             : json_string(m->first[i]);
      json_object_set_new(o, m->keys[i], v);
    }
    return o;
  }
  }
  return NULL;
}

char *nl_config_to_json(const nl_kubelet_config_t *c) {
  json_t *root = json_object();
  for (size_t i = 0; i < nl__config_nfields; i++) {
    const nl_config_field_t *f = &nl__config_fields[i];
    if (!f->name) continue;
    json_t *v = field_json(c, f);
    if (!v) continue;
    /* "authentication.webhook.cacheTTL": into nested objects. */
    json_t *obj = root;
    char *path = nl_xstrdup(f->name), *save = NULL;
    char *part = strtok_r(path, ".", &save), *next;
    while ((next = strtok_r(NULL, ".", &save))) {
      json_t *child = json_object_get(obj, part);
      if (!child) json_object_set_new(obj, part, child = json_object());
      obj = child;
      part = next;
    }
    json_object_set_new(obj, part, v);
    free(path);
  }
  json_object_set_new(root, "kind", json_string("KubeletConfiguration"));
  json_object_set_new(root, "apiVersion", json_string("kubelet.config.k8s.io/v1beta1"));
  json_t *wrap = json_pack("{s:o}", "kubeletconfig", root);
  char *out = json_dumps(wrap, JSON_COMPACT);
  json_decref(wrap);
  return out;
}
