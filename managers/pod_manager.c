#include "managers/pod_manager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

static char *fullname(const nl_pod_t *p) {
  return nl_xasprintf("%s/%s", p->metadata.namespace_ ? p->metadata.namespace_ : "",
                      p->metadata.name ? p->metadata.name : "");
}

void nl_pod_manager_init(nl_pod_manager_t *m) {
  nl_map_init(&m->by_uid);
  nl_map_init(&m->by_fullname);
}

static void pod_free(void *p) { nl_pod_free(p); }

void nl_pod_manager_free(nl_pod_manager_t *m) {
  nl_map_free(&m->by_fullname, NULL);
  nl_map_free(&m->by_uid, pod_free);
}

void nl_pod_manager_remove(nl_pod_manager_t *m, const char *uid) {
  nl_pod_t *old = nl_map_del(&m->by_uid, uid);
  if (!old) return;
  char *fn = fullname(old);
  if (nl_map_get(&m->by_fullname, fn) == old) nl_map_del(&m->by_fullname, fn);
  free(fn);
  nl_pod_free(old);
}

void nl_pod_manager_set(nl_pod_manager_t *m, const nl_pod_t *pod) {
  nl_pod_manager_remove(m, pod->metadata.uid);
  nl_pod_t *copy = nl_pod_dup(pod);
  nl_map_put(&m->by_uid, copy->metadata.uid, copy);
  char *fn = fullname(copy);
  nl_map_put(&m->by_fullname, fn, copy);
  free(fn);
}

const nl_pod_t *nl_pod_manager_get(const nl_pod_manager_t *m, const char *uid) {
  return nl_map_get(&m->by_uid, uid);
}

const nl_pod_t *nl_pod_manager_get_by_name(const nl_pod_manager_t *m, const char *ns,
                                           const char *name) {
  char *fn = nl_xasprintf("%s/%s", ns, name);
  const nl_pod_t *p = nl_map_get(&m->by_fullname, fn);
  free(fn);
  return p;
}

size_t nl_pod_manager_count(const nl_pod_manager_t *m) { return nl_map_size(&m->by_uid); }

static int by_fullname(const void *a, const void *b) {
  const nl_pod_t *x = *(const nl_pod_t *const *)a, *y = *(const nl_pod_t *const *)b;
  int c = strcmp(x->metadata.namespace_ ? x->metadata.namespace_ : "",
                 y->metadata.namespace_ ? y->metadata.namespace_ : "");
  return c ? c : strcmp(x->metadata.name ? x->metadata.name : "", y->metadata.name ? y->metadata.name : "");
}

const nl_pod_t **nl_pod_manager_list(const nl_pod_manager_t *m, size_t *n) {
  const nl_pod_t **out = nl_xcalloc(nl_map_size(&m->by_uid) + 1, sizeof *out);
  nl_map_iter_t it;
  void *v;
  size_t i = 0;
  nl_map_iter_init(&it, &m->by_uid);
  while (nl_map_iter_next(&it, NULL, &v)) out[i++] = v;
  qsort(out, i, sizeof *out, by_fullname);
  *n = i;
  return out;
}
