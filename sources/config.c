/* PodConfig's merge (see config.h). Stored pods are never changed in place: an
 * update replaces the stored pointer, and the old pod is freed after the
 * callbacks of that merge have returned. */
#include "sources/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reactor/buf.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

struct nl_pod_source_state {
  char *name;
  bool seen;    /* has sent a full set */
  nl_map_t pods; /* uid -> nl_pod_t*, owned */
};

typedef struct podvec {
  nl_pod_t **v;
  size_t n, cap;
} podvec_t;

static void vec_push(podvec_t *pv, nl_pod_t *p) {
  if (pv->n == pv->cap) {
    pv->cap = pv->cap ? pv->cap * 2 : 8;
    pv->v = nl_xrealloc(pv->v, pv->cap * sizeof *pv->v);
  }
  pv->v[pv->n++] = p;
}

static void vec_free_pods(podvec_t *pv) {
  for (size_t i = 0; i < pv->n; i++) nl_pod_free(pv->v[i]);
  free(pv->v);
  *pv = (podvec_t){0};
}

const char *nl_pod_op_name(nl_pod_op_t op) {
  switch (op) {
  case NL_POD_ADD: return "ADD";
  case NL_POD_UPDATE: return "UPDATE";
  case NL_POD_DELETE: return "DELETE";
  case NL_POD_REMOVE: return "REMOVE";
  case NL_POD_RECONCILE: return "RECONCILE";
  }
  return "?";
}

static int64_t real_now_ns(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void nl_pod_config_init(nl_pod_config_t *cfg, nl_pod_config_cb cb, void *ctx) {
  memset(cfg, 0, sizeof *cfg);
  cfg->cb = cb;
  cfg->ctx = ctx;
  cfg->now_ns = real_now_ns;
}

static void pod_free_void(void *p) { nl_pod_free(p); }

void nl_pod_config_free(nl_pod_config_t *cfg) {
  for (size_t i = 0; i < cfg->n_sources; i++) {
    free(cfg->sources[i].name);
    nl_map_free(&cfg->sources[i].pods, pod_free_void);
  }
  free(cfg->sources);
  cfg->sources = NULL;
  cfg->n_sources = 0;
}

static struct nl_pod_source_state *find_source(const nl_pod_config_t *cfg, const char *name) {
  for (size_t i = 0; i < cfg->n_sources; i++)
    if (strcmp(cfg->sources[i].name, name) == 0) return &cfg->sources[i];
  return NULL;
}

static struct nl_pod_source_state *get_source(nl_pod_config_t *cfg, const char *name) {
  struct nl_pod_source_state *s = find_source(cfg, name);
  if (s) return s;
  cfg->sources = nl_xrealloc(cfg->sources, (cfg->n_sources + 1) * sizeof *cfg->sources);
  s = &cfg->sources[cfg->n_sources++];
  memset(s, 0, sizeof *s);
  s->name = nl_xstrdup(name);
  nl_map_init(&s->pods);
  return s;
}

void nl_pod_config_add_source(nl_pod_config_t *cfg, const char *source) { get_source(cfg, source); }

bool nl_pod_config_source_seen(const nl_pod_config_t *cfg, const char *source) {
  const struct nl_pod_source_state *s = find_source(cfg, source);
  return s && s->seen;
}

bool nl_pod_config_sources_ready(const nl_pod_config_t *cfg) {
  if (cfg->n_sources == 0) return false;
  for (size_t i = 0; i < cfg->n_sources; i++)
    if (!cfg->sources[i].seen) return false;
  return true;
}

const nl_pod_t *nl_pod_config_get(const nl_pod_config_t *cfg, const char *source, const char *uid) {
  const struct nl_pod_source_state *s = find_source(cfg, source);
  return s ? nl_map_get(&s->pods, uid) : NULL;
}

const nl_pod_t **nl_pod_config_list(const nl_pod_config_t *cfg, const char *source, size_t *n) {
  const struct nl_pod_source_state *s = find_source(cfg, source);
  const nl_pod_t **out = nl_xcalloc((s ? nl_map_size(&s->pods) : 0) + 1, sizeof *out);
  *n = 0;
  if (!s) return out;
  nl_map_iter_t it;
  void *v;
  nl_map_iter_init(&it, &s->pods);
  while (nl_map_iter_next(&it, NULL, &v)) out[(*n)++] = v;
  return out;
}

size_t nl_pod_config_count(const nl_pod_config_t *cfg, const char *source) {
  size_t n = 0;
  for (size_t i = 0; i < cfg->n_sources; i++)
    if (!source || strcmp(cfg->sources[i].name, source) == 0) n += nl_map_size(&cfg->sources[i].pods);
  return n;
}

/* ---- semantic equality ---- */

static bool is_local_annotation(const char *key) {
  return strcmp(key, NL_ANNOTATION_CONFIG_SOURCE) == 0 || strcmp(key, NL_ANNOTATION_CONFIG_SEEN) == 0 ||
         strcmp(key, NL_ANNOTATION_CONFIG_MIRROR) == 0;
}

/* The canonical JSON of what upstream compares: spec, labels, the deletion
 * timestamp and grace period, and the non-local annotations, encoded from a
 * shallow view of the pod (nothing is copied). */
static char *semantic_json(const nl_pod_t *p) {
  nl_pod_t view;
  memset(&view, 0, sizeof view);
  view.spec = p->spec;
  view.metadata.labels = p->metadata.labels;
  view.metadata.deletion_timestamp = p->metadata.deletion_timestamp;
  view.metadata.deletion_grace_period_seconds = p->metadata.deletion_grace_period_seconds;
  nl_kv_t *kept = nl_xcalloc(p->metadata.annotations.n + 1, sizeof *kept);
  size_t m = 0;
  for (size_t i = 0; i < p->metadata.annotations.n; i++)
    if (!is_local_annotation(p->metadata.annotations.items[i].key)) kept[m++] = p->metadata.annotations.items[i];
  view.metadata.annotations.items = kept;
  view.metadata.annotations.n = m;
  view.arena = p->arena;
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_encode_json(&view, &b, 0);
  free(kept);
  return nl_buf_steal(&b);
}

bool nl_pod_config_differ(const nl_pod_t *a, const nl_pod_t *b) {
  /* The API server bumps metadata.generation on every change of the spec
   * (and on a graceful deletion); upstream compares the whole spec, of which
   * the model keeps only what nanolet uses: a new generation is a change, so
   * that the status reports it (status.observedGeneration). */
  if (a->metadata.generation != b->metadata.generation) return true;
  char *ja = semantic_json(a), *jb = semantic_json(b);
  bool differ = strcmp(ja, jb) != 0;
  free(ja);
  free(jb);
  return differ;
}

/* The status alone, as JSON (an empty view with the pod's status). */
static char *status_json(const nl_pod_t *p) {
  nl_pod_t view;
  memset(&view, 0, sizeof view);
  view.status = p->status;
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_encode_json(&view, &b, NL_POD_JSON_STATUS);
  return nl_buf_steal(&b);
}

static bool status_differs(const nl_pod_t *existing, const nl_pod_t *ref) {
  if (!existing->status && !ref->status) return false;
  if (!existing->status || !ref->status) return true;
  char *ja = status_json(existing), *jb = status_json(ref);
  bool differ = strcmp(ja, jb) != 0;
  free(ja);
  free(jb);
  return differ;
}

static bool is_being_deleted(const nl_pod_t *pod) { return pod->metadata.deletion_timestamp != NULL; }

/* ---- merging ---- */

static void format_rfc3339nano(int64_t ns, char *out, size_t size) {
  time_t sec = (time_t)(ns / 1000000000);
  long frac = (long)(ns % 1000000000);
  struct tm tm;
  gmtime_r(&sec, &tm);
  size_t n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
  if (frac) { /* Go's RFC3339Nano trims trailing zeros */
    char f[16];
    snprintf(f, sizeof f, ".%09ld", frac);
    for (size_t l = strlen(f); f[l - 1] == '0'; l--) f[l - 1] = '\0';
    snprintf(out + n, size - n, "%sZ", f);
  } else {
    snprintf(out + n, size - n, "Z");
  }
}

static char *full_name(const nl_pod_t *p) {
  return nl_xasprintf("%s/%s", p->metadata.namespace_ ? p->metadata.namespace_ : "",
                      p->metadata.name ? p->metadata.name : "");
}

static int cmp_full_name(const void *a, const void *b) {
  const nl_pod_t *pa = *(nl_pod_t *const *)a, *pb = *(nl_pod_t *const *)b;
  const char *na = pa->metadata.namespace_ ? pa->metadata.namespace_ : "";
  const char *nb = pb->metadata.namespace_ ? pb->metadata.namespace_ : "";
  int c = strcmp(na, nb);
  if (c) return c;
  return strcmp(pa->metadata.name ? pa->metadata.name : "", pb->metadata.name ? pb->metadata.name : "");
}

typedef struct merge {
  podvec_t adds, updates, deletes, removes, reconciles;
  podvec_t garbage; /* freed after the callbacks */
} merge_t;

/* upstream's updatePodsFunc: ref joins `into`; `old` is where existing pods are
 * looked up (the same map for incremental ops). Takes ref. */
static void merge_pod(nl_pod_config_t *cfg, const char *source, nl_pod_t *ref, nl_map_t *old,
                      nl_map_t *into, merge_t *m) {
  nl_pod_set_annotation(ref, NL_ANNOTATION_CONFIG_SOURCE, source);
  const char *uid = ref->metadata.uid;
  nl_pod_t *existing = old == into ? nl_map_get(old, uid) : nl_map_del(old, uid);
  if (!existing) {
    char seen[64];
    format_rfc3339nano(cfg->now_ns(cfg->ctx), seen, sizeof seen);
    nl_pod_set_annotation(ref, NL_ANNOTATION_CONFIG_SEEN, seen);
    nl_vlog(4, "pod config: new pod %s/%s from %s", ref->metadata.namespace_, ref->metadata.name, source);
    nl_map_put(into, uid, ref);
    vec_push(&m->adds, ref);
    return;
  }
  podvec_t *to;
  if (nl_pod_config_differ(existing, ref)) {
    to = is_being_deleted(ref) ? &m->deletes : &m->updates;
  } else if (status_differs(existing, ref)) {
    to = &m->reconciles;
  } else {
    if (old != into) nl_map_put(into, uid, existing);
    vec_push(&m->garbage, ref); /* an identical re-read: dropped */
    return;
  }
  /* the kubelet's own annotations stay those of the pod first seen */
  for (size_t i = 0; i < existing->metadata.annotations.n; i++) {
    const nl_kv_t *kv = &existing->metadata.annotations.items[i];
    if (is_local_annotation(kv->key)) nl_pod_set_annotation(ref, kv->key, kv->value);
  }
  nl_map_put(into, uid, ref);
  vec_push(&m->garbage, existing);
  vec_push(to, ref);
}

/* upstream filterInvalidPods, plus pods that cannot be keyed at all. Takes
 * every pod; returns those to merge, in order. */
static podvec_t filter_pods(const char *source, nl_pod_t **pods, size_t n, podvec_t *garbage) {
  podvec_t out = {0};
  nl_map_t names, uids;
  nl_map_init(&names);
  nl_map_init(&uids);
  for (size_t i = 0; i < n; i++) {
    nl_pod_t *p = pods[i];
    if (!p) continue;
    char *name = full_name(p);
    if (!p->metadata.uid || !*p->metadata.uid) {
      nl_warn("pod config: pod %s from %s has no uid, ignoring", name, source);
      vec_push(garbage, p);
    } else if (nl_map_has(&names, name)) {
      nl_warn("pod config: pod %s from %s failed validation due to duplicate pod name, ignoring", name,
              source);
      vec_push(garbage, p);
    } else if (nl_map_has(&uids, p->metadata.uid)) {
      nl_warn("pod config: pod %s from %s has the uid %s of another pod, ignoring", name, source,
              p->metadata.uid);
      vec_push(garbage, p);
    } else {
      nl_map_put(&names, name, NULL);
      nl_map_put(&uids, p->metadata.uid, NULL);
      vec_push(&out, p);
    }
    free(name);
  }
  nl_map_free(&names, NULL);
  nl_map_free(&uids, NULL);
  return out;
}

static void emit(nl_pod_config_t *cfg, nl_pod_op_t op, const char *source, podvec_t *pv, bool force) {
  if (pv->n == 0 && !force) return;
  if (op != NL_POD_RECONCILE) cfg->changes += pv->n;
  nl_vlog(4, "pod config: %s %zu pods from %s", nl_pod_op_name(op), pv->n, source);
  if (cfg->cb) cfg->cb(op, source, (const nl_pod_t *const *)pv->v, pv->n, cfg->ctx);
}

static int merge(nl_pod_config_t *cfg, const char *source, bool is_set, nl_pod_op_t op, nl_pod_t **pods,
                 size_t n, nl_err_t **err) {
  merge_t m = {0};
  int rc = 0;
  if (cfg->busy) abort(); /* re-entry from the callback: a programming error */
  if (!source || !*source) {
    rc = nl_err_set(err, NL_EINVAL, "pod config: empty source name");
  } else if (!is_set && op == NL_POD_RECONCILE) {
    rc = nl_err_set(err, NL_EINVAL, "pod config: RECONCILE is not an input op (source %s)", source);
  }
  if (rc < 0) {
    for (size_t i = 0; i < n; i++)
      if (pods[i]) nl_pod_free(pods[i]);
    free(pods);
    return rc;
  }
  cfg->busy = true;
  struct nl_pod_source_state *s = get_source(cfg, source);
  bool first_set = is_set && !s->seen;
  podvec_t in = filter_pods(source, pods, n, &m.garbage);
  free(pods);

  if (is_set) {
    s->seen = true;
    nl_map_t fresh;
    nl_map_init(&fresh);
    for (size_t i = 0; i < in.n; i++) merge_pod(cfg, source, in.v[i], &s->pods, &fresh, &m);
    /* whatever is left of the old set is gone from the source */
    nl_map_iter_t it;
    const char *k;
    void *v;
    nl_map_iter_init(&it, &s->pods);
    while (nl_map_iter_next(&it, &k, &v)) vec_push(&m.removes, v);
    nl_map_free(&s->pods, NULL);
    s->pods = fresh;
  } else if (op == NL_POD_REMOVE) {
    for (size_t i = 0; i < in.n; i++) {
      nl_pod_t *existing = nl_map_del(&s->pods, in.v[i]->metadata.uid);
      if (existing) vec_push(&m.removes, existing);
      vec_push(&m.garbage, in.v[i]);
    }
  } else {
    for (size_t i = 0; i < in.n; i++) merge_pod(cfg, source, in.v[i], &s->pods, &s->pods, &m);
  }
  free(in.v);
  if (m.removes.n > 1) qsort(m.removes.v, m.removes.n, sizeof *m.removes.v, cmp_full_name);

  emit(cfg, NL_POD_REMOVE, source, &m.removes, false);
  emit(cfg, NL_POD_ADD, source, &m.adds, false);
  emit(cfg, NL_POD_UPDATE, source, &m.updates, false);
  emit(cfg, NL_POD_DELETE, source, &m.deletes, false);
  /* tells the consumer that the source is ready */
  podvec_t none = {0};
  emit(cfg, NL_POD_ADD, source, &none, first_set && !m.adds.n && !m.updates.n && !m.deletes.n);
  emit(cfg, NL_POD_RECONCILE, source, &m.reconciles, false);
  cfg->busy = false;

  free(m.adds.v);
  free(m.updates.v);
  free(m.deletes.v);
  free(m.reconciles.v);
  vec_free_pods(&m.removes);
  vec_free_pods(&m.garbage);
  return 0;
}

int nl_pod_config_set(nl_pod_config_t *cfg, const char *source, nl_pod_t **pods, size_t n, nl_err_t **err) {
  return merge(cfg, source, true, NL_POD_ADD, pods, n, err);
}

int nl_pod_config_update(nl_pod_config_t *cfg, const char *source, nl_pod_op_t op, nl_pod_t **pods,
                         size_t n, nl_err_t **err) {
  return merge(cfg, source, false, op, pods, n, err);
}
