/* What the collector removes: pure functions of the runtime's lists. */
#include <stdlib.h>
#include <string.h>

#include "managers/gc.h"
#include "reactor/xalloc.h"

/* A group of dead containers of one (pod uid, container name), newest first. */
typedef struct unit {
  const char *uid, *name;
  size_t *idx; /* into the containers */
  size_t n;
} unit_t;

/* upstream byAttempt: newest first, by attempt then creation time. */
static int newest_first(const void *a, const void *b, void *base) {
  const nl_gc_container_t *c = base;
  const nl_gc_container_t *x = &c[*(const size_t *)a], *y = &c[*(const size_t *)b];
  if (x->attempt != y->attempt) return x->attempt > y->attempt ? -1 : 1;
  if (x->created_ns != y->created_ns) return x->created_ns > y->created_ns ? -1 : 1;
  return 0;
}

static void sort_newest_first(const nl_gc_container_t *c, size_t *idx, size_t n) {
  qsort_r(idx, n, sizeof *idx, newest_first, (void *)c);
}

/* upstream removeOldestN: the oldest `count` of the unit go to out. */
static void remove_oldest(unit_t *u, size_t count, size_t *out, size_t *n_out) {
  if (count > u->n) count = u->n;
  for (size_t i = u->n - count; i < u->n; i++) out[(*n_out)++] = u->idx[i];
  u->n -= count;
}

size_t nl_gc_select_containers(const nl_gc_policy_t *p, const nl_gc_container_t *c, size_t n,
                               int64_t now_ns, nl_gc_state_fn state, void *ctx, bool deleted_ok,
                               bool evict_terminated, size_t *out) {
  unit_t *units = nl_xcalloc(n + 1, sizeof *units);
  size_t n_units = 0, n_out = 0;
  for (size_t i = 0; i < n; i++) {
    if (c[i].running || c[i].created_ns > now_ns - p->min_age_ns) continue;
    if (state(ctx, c[i].uid) == NL_GC_POD_FOREIGN) continue;
    size_t u;
    for (u = 0; u < n_units; u++)
      if (!strcmp(units[u].uid, c[i].uid) && !strcmp(units[u].name, c[i].name)) break;
    if (u == n_units) units[n_units++] = (unit_t){c[i].uid, c[i].name, nl_xcalloc(n, sizeof(size_t)), 0};
    units[u].idx[units[u].n++] = i;
  }
  for (size_t u = 0; u < n_units; u++) sort_newest_first(c, units[u].idx, units[u].n);
  /* Deleted pods lose every dead container, once the sources have all spoken. */
  if (deleted_ok) {
    for (size_t u = 0; u < n_units; u++) {
      nl_gc_pod_state_t st = state(ctx, units[u].uid);
      if (st == NL_GC_POD_DELETED || (st == NL_GC_POD_TERMINATED && evict_terminated))
        remove_oldest(&units[u], units[u].n, out, &n_out);
    }
  }
  if (p->max_per_pod_container >= 0)
    for (size_t u = 0; u < n_units; u++)
      if (units[u].n > (size_t)p->max_per_pod_container)
        remove_oldest(&units[u], units[u].n - (size_t)p->max_per_pod_container, out, &n_out);
  size_t total = 0, live_units = 0;
  for (size_t u = 0; u < n_units; u++) total += units[u].n, live_units += units[u].n > 0;
  if (p->max_containers >= 0 && total > (size_t)p->max_containers) {
    /* An equal share per unit (at least 1), then the oldest overall. */
    size_t share = live_units ? (size_t)p->max_containers / live_units : 0;
    if (share < 1) share = 1;
    for (size_t u = 0; u < n_units; u++)
      if (units[u].n > share) remove_oldest(&units[u], units[u].n - share, out, &n_out);
    total = 0;
    for (size_t u = 0; u < n_units; u++) total += units[u].n;
    if (total > (size_t)p->max_containers) {
      unit_t all = {.idx = nl_xcalloc(total + 1, sizeof(size_t))};
      for (size_t u = 0; u < n_units; u++)
        for (size_t i = 0; i < units[u].n; i++) all.idx[all.n++] = units[u].idx[i];
      sort_newest_first(c, all.idx, all.n);
      remove_oldest(&all, total - (size_t)p->max_containers, out, &n_out);
      free(all.idx);
    }
  }
  for (size_t u = 0; u < n_units; u++) free(units[u].idx);
  free(units);
  return n_out;
}

static int sandbox_newest_first(const void *a, const void *b, void *base) {
  const nl_gc_sandbox_t *s = base;
  const nl_gc_sandbox_t *x = &s[*(const size_t *)a], *y = &s[*(const size_t *)b];
  if (x->attempt != y->attempt) return x->attempt > y->attempt ? -1 : 1;
  if (x->created_ns != y->created_ns) return x->created_ns > y->created_ns ? -1 : 1;
  return 0;
}

size_t nl_gc_select_sandboxes(const nl_gc_sandbox_t *s, size_t n, const nl_gc_container_t *c,
                              size_t nc, nl_gc_state_fn state, void *ctx, bool evict_terminated,
                              size_t *out) {
  size_t n_out = 0;
  size_t *group = nl_xcalloc(n + 1, sizeof *group);
  bool *done = nl_xcalloc(n + 1, sizeof *done);
  for (size_t i = 0; i < n; i++) {
    if (done[i]) continue;
    size_t g = 0;
    for (size_t j = i; j < n; j++)
      if (!done[j] && !strcmp(s[j].uid, s[i].uid)) group[g++] = j, done[j] = true;
    nl_gc_pod_state_t st = state(ctx, s[i].uid);
    if (st == NL_GC_POD_FOREIGN) continue;
    qsort_r(group, g, sizeof *group, sandbox_newest_first, (void *)s);
    /* A pod that still exists keeps its newest sandbox, live or dead. */
    bool gone = st == NL_GC_POD_DELETED || (st == NL_GC_POD_TERMINATED && evict_terminated);
    for (size_t k = gone ? 0 : 1; k < g; k++) {
      const nl_gc_sandbox_t *sb = &s[group[k]];
      bool active = sb->ready;
      for (size_t x = 0; x < nc && !active; x++) active = !strcmp(c[x].sandbox_id, sb->id);
      if (!active) out[n_out++] = group[k];
    }
  }
  free(group);
  free(done);
  return n_out;
}

/* upstream byLastUsedAndDetected: least recently used first, then first detected. */
static int lru_first(const void *a, const void *b, void *base) {
  const nl_gc_image_t *im = base;
  const nl_gc_image_t *x = &im[*(const size_t *)a], *y = &im[*(const size_t *)b];
  if (x->last_used_ns != y->last_used_ns) return x->last_used_ns < y->last_used_ns ? -1 : 1;
  if (x->first_detected_ns != y->first_detected_ns)
    return x->first_detected_ns < y->first_detected_ns ? -1 : 1;
  return 0;
}

size_t nl_gc_select_images(const nl_gc_image_t *imgs, size_t n, int64_t now_ns, int64_t min_age_ns,
                           int64_t max_age_ns, uint64_t bytes_to_free, size_t *out,
                           uint64_t *freed) {
  size_t *order = nl_xcalloc(n + 1, sizeof *order), n_out = 0;
  for (size_t i = 0; i < n; i++) order[i] = i;
  qsort_r(order, n, sizeof *order, lru_first, (void *)imgs);
  *freed = 0;
  for (size_t k = 0; k < n; k++) {
    const nl_gc_image_t *im = &imgs[order[k]];
    if (im->in_use || im->pinned) continue;
    /* An image never seen in use counts from when it was first seen. */
    int64_t used = im->last_used_ns > im->first_detected_ns ? im->last_used_ns : im->first_detected_ns;
    bool too_old = max_age_ns > 0 && now_ns - used > max_age_ns;
    if (!too_old && (*freed >= bytes_to_free || now_ns - im->first_detected_ns < min_age_ns))
      continue;
    out[n_out++] = order[k];
    *freed += im->size;
  }
  free(order);
  return n_out;
}

uint64_t nl_gc_image_bytes_to_free(uint64_t capacity, uint64_t available, int high_percent,
                                   int low_percent) {
  if (capacity == 0 || available > capacity) return 0;
  /* As upstream: integer percent of usage, compared with >=. */
  int usage = (int)(100 - available * 100 / capacity);
  if (usage < high_percent) return 0;
  uint64_t target = capacity * (uint64_t)(100 - low_percent) / 100;
  return target > available ? target - available : 0;
}

const char *nl_gc_logdir_uid(const char *name) {
  const char *u = strrchr(name, '_');
  return u && u[1] && strchr(name, '_') != u ? u + 1 : NULL;
}

bool nl_gc_logdir_removable(const char *name, const nl_gc_sandbox_t *s, size_t ns,
                            nl_gc_state_fn state, void *ctx) {
  const char *uid = nl_gc_logdir_uid(name);
  if (!uid || state(ctx, uid) != NL_GC_POD_DELETED) return false;
  for (size_t j = 0; j < ns; j++)
    if (!strcmp(s[j].uid, uid)) return false;
  return true;
}

size_t nl_gc_mark_image_mounts(nl_gc_image_t *imgs, size_t n,
                               const Runtime__V1__ContainerStatus *status, int64_t now_ns) {
  size_t marked = 0;
  for (size_t i = 0; status && i < status->n_mounts; i++) {
    const Runtime__V1__ImageSpec *spec = status->mounts[i]->image;
    if (!spec || !spec->image || !*spec->image) continue;
    for (size_t j = 0; j < n; j++)
      if (strcmp(imgs[j].id, spec->image) == 0) {
        imgs[j].in_use = true;
        imgs[j].last_used_ns = now_ns;
        marked++;
      }
  }
  return marked;
}
