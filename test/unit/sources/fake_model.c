/* TEMPORARY stand-in for agent/model until its implementation lands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/model/pod.h"
#include "reactor/xalloc.h"

static void kv_set(nl_kvlist_t *l, const char *k, const char *v) {
  for (size_t i = 0; i < l->n; i++) if (!strcmp(l->items[i].key, k)) { free(l->items[i].value); l->items[i].value = nl_xstrdup(v); return; }
  l->items = nl_xrealloc(l->items, (l->n + 1) * sizeof *l->items);
  size_t i = l->n;
  while (i > 0 && strcmp(l->items[i-1].key, k) > 0) { l->items[i] = l->items[i-1]; i--; }
  l->items[i].key = nl_xstrdup(k); l->items[i].value = nl_xstrdup(v); l->n++;
}
const char *nl_kvlist_get(const nl_kvlist_t *l, const char *key) {
  for (size_t i = 0; i < l->n; i++) if (!strcmp(l->items[i].key, key)) return l->items[i].value;
  return NULL;
}
void nl_pod_set_annotation(nl_pod_t *pod, const char *key, const char *value) { kv_set(&pod->metadata.annotations, key, value); }
static void kv_free(nl_kvlist_t *l) { for (size_t i = 0; i < l->n; i++) { free(l->items[i].key); free(l->items[i].value);} free(l->items); }
void nl_pod_free(nl_pod_t *p) {
  if (!p) return;
  free(p->metadata.name); free(p->metadata.namespace_); free(p->metadata.uid);
  kv_free(&p->metadata.labels); kv_free(&p->metadata.annotations);
  if (p->spec.containers) { free(p->spec.containers[0].name); free(p->spec.containers[0].image); free(p->spec.containers); }
  free(p->spec.node_name);
  free(p);
}
static char *trim(char *s) { while (*s == ' ') s++; size_t n = strlen(s); while (n && (s[n-1]==' '||s[n-1]=='\r')) s[--n]=0; return s; }
int nl_pod_decode(const char *data, size_t len, const char *origin, nl_pod_t **out, nl_err_t **err) {
  if (memchr(data, 0, len) || len > 100000) return nl_err_set(err, NL_EINVAL, "%s: not yaml", origin);
  char *buf = nl_xstrndup(data, len);
  nl_pod_t *p = nl_xcalloc(1, sizeof *p);
  int section = 0; bool kind = false;
  char *save = NULL;
  for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#') continue;
    int indent = 0; while (line[indent] == ' ') indent++;
    char *l = line + indent;
    if (*l == '-') { l++; l = trim(l); indent += 2; }
    char *c = strchr(l, ':');
    if (!c) { nl_pod_free(p); free(buf); return nl_err_set(err, NL_EINVAL, "%s: could not find expected ':'", origin); }
    *c = 0; char *k = trim(l), *v = trim(c + 1);
    if (indent == 0) { section = 0; if (!strcmp(k, "kind") && !strcmp(v, "Pod")) kind = true; }
    if (indent == 2 && !strcmp(k, "labels")) { section = 1; continue; }
    if (indent == 2 && !strcmp(k, "annotations")) { section = 2; continue; }
    if (indent == 2) section = 0;
    if (indent == 4 && section == 1) { kv_set(&p->metadata.labels, k, v); continue; }
    if (indent == 4 && section == 2) { kv_set(&p->metadata.annotations, k, v); continue; }
    if (indent == 2 && !strcmp(k, "name")) p->metadata.name = nl_xstrdup(v);
    if (indent == 2 && !strcmp(k, "namespace")) p->metadata.namespace_ = nl_xstrdup(v);
    if (indent == 2 && !strcmp(k, "uid")) p->metadata.uid = nl_xstrdup(v);
    if (!strcmp(k, "image")) { p->spec.containers = nl_xcalloc(1, sizeof *p->spec.containers); p->spec.n_containers = 1; p->spec.containers[0].image = nl_xstrdup(v); }
  }
  free(buf);
  if (!kind || !p->spec.containers || !p->metadata.name) { nl_pod_free(p); return nl_err_set(err, NL_EINVAL, "%s: spec.containers[0].image: Required value", origin); }
  *out = p;
  return 0;
}
nl_pod_t *nl_pod_dup(const nl_pod_t *s) {
  nl_pod_t *p = nl_xcalloc(1, sizeof *p);
  p->metadata.name = s->metadata.name ? nl_xstrdup(s->metadata.name) : NULL;
  p->metadata.namespace_ = s->metadata.namespace_ ? nl_xstrdup(s->metadata.namespace_) : NULL;
  p->metadata.uid = s->metadata.uid ? nl_xstrdup(s->metadata.uid) : NULL;
  for (size_t i = 0; i < s->metadata.labels.n; i++) kv_set(&p->metadata.labels, s->metadata.labels.items[i].key, s->metadata.labels.items[i].value);
  for (size_t i = 0; i < s->metadata.annotations.n; i++) kv_set(&p->metadata.annotations, s->metadata.annotations.items[i].key, s->metadata.annotations.items[i].value);
  p->spec.containers = nl_xcalloc(1, sizeof *p->spec.containers); p->spec.n_containers = 1;
  p->spec.containers[0].image = nl_xstrdup(s->spec.containers[0].image);
  if (s->spec.node_name) p->spec.node_name = nl_xstrdup(s->spec.node_name);
  return p;
}
void nl_pod_encode_json(const nl_pod_t *p, nl_buf_t *b, int flags) {
  nl_buf_puts(b, "{labels:");
  for (size_t i = 0; i < p->metadata.labels.n; i++) nl_buf_printf(b, "%s=%s,", p->metadata.labels.items[i].key, p->metadata.labels.items[i].value);
  nl_buf_puts(b, "ann:");
  for (size_t i = 0; i < p->metadata.annotations.n; i++) nl_buf_printf(b, "%s=%s,", p->metadata.annotations.items[i].key, p->metadata.annotations.items[i].value);
  nl_buf_printf(b, "image:%s,node:%s}", p->spec.n_containers ? p->spec.containers[0].image : "", p->spec.node_name ? p->spec.node_name : "");
}
int nl_pod_load_static(const char *data, size_t len, const nl_static_source_t *src, nl_pod_t **out, nl_err_t **err) {
  nl_pod_t *p;
  if (nl_pod_decode(data, len, src->location, &p, err) < 0) return -1;
  nl_buf_t b = NL_BUF_INIT; nl_pod_encode_json(p, &b, 0);
  unsigned long h = 5381; for (size_t i = 0; i < b.len; i++) h = h * 33 + (unsigned char)b.data[i];
  for (const char *s = src->location; *s; s++) h = h * 33 + (unsigned char)*s;
  nl_buf_free(&b);
  char *n = nl_xasprintf("%s-%s", p->metadata.name, src->node_name); free(p->metadata.name); p->metadata.name = n;
  if (!p->metadata.namespace_) p->metadata.namespace_ = nl_xstrdup("default");
  if (!p->metadata.uid) p->metadata.uid = nl_xasprintf("%016lx", h);
  p->spec.node_name = nl_xstrdup(src->node_name);
  nl_pod_set_annotation(p, NL_ANNOTATION_CONFIG_HASH, p->metadata.uid);
  nl_pod_set_annotation(p, NL_ANNOTATION_CONFIG_SOURCE, src->kind);
  *out = p;
  return 0;
}
