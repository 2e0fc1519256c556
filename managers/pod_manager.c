#include "managers/pod_manager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

static char *fullname(const nl_pod_t *p) {
  return nl_xasprintf("%s/%s", p->metadata.namespace_ ? p->metadata.namespace_ : "",
                      p->metadata.name ? p->metadata.name : "");
}

static void pod_free(void *p) { nl_pod_free(p); }

static void index_init(nl_pod_index_t *x) {
  nl_map_init(&x->by_uid);
  nl_map_init(&x->by_fullname);
}

static void index_free(nl_pod_index_t *x) {
  nl_map_free(&x->by_fullname, NULL);
  nl_map_free(&x->by_uid, pod_free);
}

static bool index_remove(nl_pod_index_t *x, const char *uid) {
  nl_pod_t *old = nl_map_del(&x->by_uid, uid);
  if (!old) return false;
  char *fn = fullname(old);
  if (nl_map_get(&x->by_fullname, fn) == old) nl_map_del(&x->by_fullname, fn);
  free(fn);
  nl_pod_free(old);
  return true;
}

static nl_pod_t *index_set(nl_pod_index_t *x, const nl_pod_t *pod) {
  nl_pod_t *ref = nl_pod_ref(pod); /* first: pod may be the one replaced */
  index_remove(x, ref->metadata.uid);
  nl_map_put(&x->by_uid, ref->metadata.uid, ref);
  char *fn = fullname(ref);
  nl_map_put(&x->by_fullname, fn, ref);
  free(fn);
  return ref;
}

static const nl_pod_t *index_by_name(const nl_pod_index_t *x, const char *ns, const char *name) {
  char *fn = nl_xasprintf("%s/%s", ns ? ns : "", name ? name : "");
  const nl_pod_t *p = nl_map_get(&x->by_fullname, fn);
  free(fn);
  return p;
}

static int by_fullname(const void *a, const void *b) {
  const nl_pod_t *x = *(const nl_pod_t *const *)a, *y = *(const nl_pod_t *const *)b;
  int c = strcmp(x->metadata.namespace_ ? x->metadata.namespace_ : "",
                 y->metadata.namespace_ ? y->metadata.namespace_ : "");
  return c ? c : strcmp(x->metadata.name ? x->metadata.name : "", y->metadata.name ? y->metadata.name : "");
}

static const nl_pod_t **index_list(const nl_pod_index_t *x, size_t *n) {
  const nl_pod_t **out = nl_xcalloc(nl_map_size(&x->by_uid) + 1, sizeof *out);
  nl_map_iter_t it;
  void *v;
  size_t i = 0;
  nl_map_iter_init(&it, &x->by_uid);
  while (nl_map_iter_next(&it, NULL, &v)) out[i++] = v;
  qsort(out, i, sizeof *out, by_fullname);
  *n = i;
  return out;
}

void nl_pod_manager_init(nl_pod_manager_t *m) {
  memset(m, 0, sizeof *m);
  index_init(&m->pods);
  index_init(&m->mirrors);
}

void nl_pod_manager_free(nl_pod_manager_t *m) {
  index_free(&m->pods);
  index_free(&m->mirrors);
}

void nl_pod_manager_remove(nl_pod_manager_t *m, const char *uid) {
  if (index_remove(&m->pods, uid)) return;
  nl_pod_t *mirror = nl_map_get(&m->mirrors.by_uid, uid);
  if (!mirror) return;
  char *ns = nl_xstrdup(mirror->metadata.namespace_ ? mirror->metadata.namespace_ : "");
  char *name = nl_xstrdup(mirror->metadata.name ? mirror->metadata.name : "");
  index_remove(&m->mirrors, uid);
  if (m->mirror_cb) m->mirror_cb(m->mirror_ctx, ns, name, NULL);
  free(ns);
  free(name);
}

void nl_pod_manager_set(nl_pod_manager_t *m, const nl_pod_t *pod) {
  if (!nl_pod_is_mirror(pod)) {
    index_set(&m->pods, pod);
    return;
  }
  const nl_pod_t *ref = index_set(&m->mirrors, pod);
  if (m->mirror_cb)
    m->mirror_cb(m->mirror_ctx, ref->metadata.namespace_, ref->metadata.name, ref);
}

const nl_pod_t *nl_pod_manager_get(const nl_pod_manager_t *m, const char *uid) {
  return nl_map_get(&m->pods.by_uid, uid);
}

const nl_pod_t *nl_pod_manager_get_by_name(const nl_pod_manager_t *m, const char *ns,
                                           const char *name) {
  return index_by_name(&m->pods, ns, name);
}

size_t nl_pod_manager_count(const nl_pod_manager_t *m) { return nl_map_size(&m->pods.by_uid); }

const nl_pod_t **nl_pod_manager_list(const nl_pod_manager_t *m, size_t *n) {
  return index_list(&m->pods, n);
}

void nl_pod_manager_foreach(const nl_pod_manager_t *m, void (*fn)(const nl_pod_t *pod, void *ctx),
                            void *ctx) {
  nl_map_iter_t it;
  void *v;
  nl_map_iter_init(&it, &m->pods.by_uid);
  while (nl_map_iter_next(&it, NULL, &v)) fn(v, ctx);
}

const nl_pod_t *nl_pod_manager_mirror_get(const nl_pod_manager_t *m, const char *ns,
                                          const char *name) {
  return index_by_name(&m->mirrors, ns, name);
}

const nl_pod_t **nl_pod_manager_mirror_list(const nl_pod_manager_t *m, size_t *n) {
  return index_list(&m->mirrors, n);
}

void nl_pod_manager_on_mirror(nl_pod_manager_t *m, nl_pod_manager_mirror_cb cb, void *ctx) {
  m->mirror_cb = cb;
  m->mirror_ctx = ctx;
}
