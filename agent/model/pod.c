/* Static pods (upstream pkg/kubelet/config/common.go), lookups, mutation, copies. */
#include <assert.h>
#include <ctype.h>
#include <mbedtls/md5.h>
#include <mbedtls/version.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/model/internal.h"
#include "reactor/digest.h"
#include "reactor/xalloc.h"

const char *nl_kvlist_get(const nl_kvlist_t *l, const char *key) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->items[i].key, key) == 0) return l->items[i].value;
  return NULL;
}

const nl_quantity_t *nl_resource_list_get(const nl_resource_list_t *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->items[i].name, name) == 0) return &l->items[i].q;
  return NULL;
}

void nl_pod_set_annotation(nl_pod_t *pod, const char *key, const char *value) {
  assert(pod->arena->refs == 1); /* a shared pod is immutable */
  nl_kvlist_t *l = &pod->metadata.annotations;
  for (size_t i = 0; i < l->n; i++) {
    if (strcmp(l->items[i].key, key) == 0) {
      l->items[i].value = nl_arena_strdup(pod->arena, value);
      return;
    }
  }
  nl_kv_t *items = nl_arena_alloc(pod->arena, (l->n + 1) * sizeof *items);
  if (l->n) memcpy(items, l->items, l->n * sizeof *items);
  items[l->n] = (nl_kv_t){nl_arena_strdup(pod->arena, key), nl_arena_strdup(pod->arena, value)};
  l->items = items;
  l->n++;
  nl__kvlist_sort(l);
}

static void copy_reslist(nl_pod_t *pod, nl_resource_list_t *dst, const nl_resource_list_t *src) {
  nl_resource_t *items = src->n ? nl_arena_alloc(pod->arena, src->n * sizeof *items) : NULL;
  for (size_t i = 0; i < src->n; i++)
    items[i] = (nl_resource_t){nl_arena_strdup(pod->arena, src->items[i].name), src->items[i].q};
  *dst = (nl_resource_list_t){items, src->n};
}

void nl_pod_set_container_resources(nl_pod_t *pod, nl_container_t *c,
                                    const nl_resource_requirements_t *r) {
  assert(pod->arena->refs == 1); /* a shared pod is immutable */
  copy_reslist(pod, &c->resources.limits, &r->limits);
  copy_reslist(pod, &c->resources.requests, &r->requests);
}

void nl_pod_set_pod_resources(nl_pod_t *pod, const nl_resource_requirements_t *r) {
  assert(pod->arena->refs == 1);
  if (!pod->spec.resources) pod->spec.resources = nl_arena_alloc(pod->arena, sizeof *r);
  copy_reslist(pod, &pod->spec.resources->limits, &r->limits);
  copy_reslist(pod, &pod->spec.resources->requests, &r->requests);
}

bool nl_pod_is_mirror(const nl_pod_t *pod) {
  return nl_kvlist_get(&pod->metadata.annotations, NL_ANNOTATION_CONFIG_MIRROR) != NULL;
}

nl_pod_t *nl_pod_dup(const nl_pod_t *pod) {
  nl_buf_t b = NL_BUF_INIT;
  nl__pod_encode(pod, &b, false, true, true);
  nl_pod_t *copy = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(b.data, b.len, NULL, &copy, &err) < 0) abort(); /* our own output */
  nl_buf_free(&b);
  return copy;
}

char *nl_node_name_default(void) {
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) < 0) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = 0;
  for (char *p = host; *p; p++) *p = (char)tolower((unsigned char)*p);
  return nl_xstrdup(host);
}

char *nl_pod_static_name(const char *name, const char *node_name) {
  char *s = nl_xasprintf("%s-%s", name ? name : "", node_name ? node_name : "");
  for (char *p = s + strlen(name ? name : "") + 1; *p; p++) *p = (char)tolower((unsigned char)*p);
  return s;
}

void nl_pod_static_uid(const nl_pod_t *pod, const nl_static_source_t *src, char out[33]) {
  nl_buf_t b = NL_BUF_INIT;
  nl__pod_encode(pod, &b, false, true, true);
  char *node = src->node_name ? nl_xstrdup(src->node_name) : nl_node_name_default();
  bool file = !src->kind || strcmp(src->kind, "file") == 0;
  if (file) nl_buf_printf(&b, "host:%sfile:%s", node, src->location ? src->location : "");
  else nl_buf_printf(&b, "url:%s", src->location ? src->location : "");
  free(node);
  unsigned char sum[16];
  mbedtls_md5_context ctx;
  mbedtls_md5_init(&ctx);
#if MBEDTLS_VERSION_MAJOR >= 3
  mbedtls_md5_starts(&ctx);
  mbedtls_md5_update(&ctx, (const unsigned char *)b.data, b.len);
  mbedtls_md5_finish(&ctx, sum);
#else
  mbedtls_md5_starts_ret(&ctx);
  mbedtls_md5_update_ret(&ctx, (const unsigned char *)b.data, b.len);
  mbedtls_md5_finish_ret(&ctx, sum);
#endif
  mbedtls_md5_free(&ctx);
  nl_buf_free(&b);
  nl_hex(sum, sizeof sum, out);
}

void nl_pod_apply_static(nl_pod_t *pod, const nl_static_source_t *src) {
  nl_arena_t *a = pod->arena;
  assert(a->refs == 1); /* a shared pod is immutable */
  char *node = src->node_name ? nl_xstrdup(src->node_name) : nl_node_name_default();
  for (char *p = node; *p; p++) *p = (char)tolower((unsigned char)*p); /* as GetHostname */
  nl_static_source_t s = *src;
  s.node_name = node;
  if (!pod->metadata.uid || !*pod->metadata.uid) {
    char uid[33];
    nl_pod_static_uid(pod, &s, uid);
    pod->metadata.uid = nl_arena_strdup(a, uid);
  }
  if (pod->metadata.name && *pod->metadata.name) { /* else validation says "required" */
    char *name = nl_pod_static_name(pod->metadata.name, node);
    pod->metadata.name = nl_arena_strdup(a, name);
    free(name);
  }
  if (!pod->metadata.namespace_ || !*pod->metadata.namespace_)
    pod->metadata.namespace_ = nl_arena_strdup(a, "default");
  pod->spec.node_name = nl_arena_strdup(a, node);
  nl_pod_set_annotation(pod, NL_ANNOTATION_CONFIG_HASH, pod->metadata.uid);
  nl_pod_set_annotation(pod, NL_ANNOTATION_CONFIG_SOURCE, src->kind ? src->kind : "file");
  bool file = !src->kind || strcmp(src->kind, "file") == 0;
  if (file) { /* AddOrUpdateTolerationInPod({Operator: Exists, Effect: NoExecute}) */
    nl_pod_spec_t *sp = &pod->spec;
    bool have = false;
    for (size_t i = 0; i < sp->n_tolerations; i++) {
      nl_toleration_t *t = &sp->tolerations[i];
      if ((!t->key || !*t->key) && t->operator_ && strcmp(t->operator_, "Exists") == 0 &&
          t->effect && strcmp(t->effect, "NoExecute") == 0 && !t->toleration_seconds.set &&
          (!t->value || !*t->value))
        have = true;
    }
    if (!have) {
      nl_toleration_t *tl = nl_arena_alloc(a, (sp->n_tolerations + 1) * sizeof *tl);
      if (sp->n_tolerations) memcpy(tl, sp->tolerations, sp->n_tolerations * sizeof *tl);
      tl[sp->n_tolerations] = (nl_toleration_t){.operator_ = nl_arena_strdup(a, "Exists"),
                                                .effect = nl_arena_strdup(a, "NoExecute")};
      sp->tolerations = tl;
      sp->n_tolerations++;
    }
  }
  free(node);
}

int nl_pod_load_static(const char *data, size_t len, const nl_static_source_t *src,
                       nl_pod_t **out, nl_err_t **err) {
  nl_pod_t *pod;
  *out = NULL;
  if (nl_pod_decode(data, len, src->location, &pod, err) < 0) return -1;
  nl_pod_set_defaults(pod);
  nl_pod_apply_static(pod, src);
  if (nl_pod_validate(pod, src->location, err) < 0) {
    nl_pod_free(pod);
    return -1;
  }
  *out = pod;
  return 0;
}
