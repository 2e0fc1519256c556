/* The eviction manager's pure parts (upstream pkg/kubelet/eviction/helpers.go):
 * thresholds, ranking. (The messages: eviction_message.c.) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/quantity.h"
#include "managers/admission.h"
#include "managers/eviction.h"
#include "reactor/buf.h"
#include "reactor/duration.h"
#include "reactor/xalloc.h"

static const char *const signal_names[NL_EV_NSIGNALS] = {
    "memory.available",  "nodefs.available",   "nodefs.inodesFree",
    "imagefs.available", "imagefs.inodesFree", "pid.available",
    "allocatableMemory.available",
};

const char *nl_ev_signal_name(nl_ev_signal_t s) { return signal_names[s]; }

static int signal_of(const char *name, nl_ev_signal_t *out, nl_err_t **err) {
  for (int i = 0; i < NL_EV_NSIGNALS; i++)
    if (!strcmp(name, signal_names[i])) return *out = (nl_ev_signal_t)i, 0;
  /* upstream also knows containerfs.*, which nanolet does not observe */
  return nl_err_set(err, NL_EINVAL, "unsupported eviction signal %s", name);
}

/* upstream parsePercentage: a float32 over 100. */
static int parse_percentage(const char *s, float *out, nl_err_t **err) {
  char *end;
  errno = 0;
  float v = strtof(s, &end);
  if (errno || end == s || strcmp(end, "%") != 0)
    return nl_err_set(err, NL_EINVAL, "invalid percentage \"%s\"", s);
  *out = v / 100;
  return 0;
}

/* ok = 0: ignored ("0%", "100%"); 1: *t filled. */
static int parse_value(const char *what, const char *sig, const char *val, bool threshold,
                       nl_ev_value_t *v, nl_err_t **err) {
  *v = (nl_ev_value_t){0};
  size_t len = strlen(val);
  if (len && val[len - 1] == '%') {
    if (threshold && (!strcmp(val, "0%") || !strcmp(val, "100%"))) return 0;
    if (parse_percentage(val, &v->percentage, err) < 0) return nl_err_wrap(err, "%s %s", what, sig);
    if (!threshold && v->percentage <= 0)
      return nl_err_set(err, NL_EINVAL, "eviction percentage minimum reclaim %s must be positive: %s", sig, val);
    if (v->percentage < 0)
      return nl_err_set(err, NL_EINVAL, "eviction percentage threshold %s must be >= 0%%: %s", sig, val);
    if (v->percentage > 1)
      return nl_err_set(err, NL_EINVAL, "eviction percentage threshold %s must be <= 100%%: %s", sig, val);
    return 1;
  }
  nl_quantity_t q;
  if (nl_quantity_parse(val, &q, err) < 0) return nl_err_wrap(err, "%s %s", what, sig);
  if (threshold && nl_quantity_sign(&q) <= 0)
    return nl_err_set(err, NL_EINVAL, "eviction threshold %s must be positive: %s", sig, val);
  if (!threshold && nl_quantity_sign(&q) < 0)
    return nl_err_set(err, NL_EINVAL, "negative eviction minimum reclaim specified for %s", sig);
  v->quantity = nl_quantity_value(&q);
  return 1;
}

static void add(nl_ev_threshold_t **out, size_t *n, const nl_ev_threshold_t *t) {
  *out = nl_xrealloc(*out, (*n + 1) * sizeof **out);
  (*out)[(*n)++] = *t;
}

static int parse_set(const char *what, nl_ev_config_map_t m, bool hard, nl_ev_config_map_t grace,
                     nl_ev_threshold_t **out, size_t *n, nl_err_t **err) {
  for (size_t i = 0; i < m.n; i++) {
    nl_ev_threshold_t t = {.hard = hard};
    if (signal_of(m.keys[i], &t.signal, err) < 0) return nl_err_wrap(err, "%s", what);
    int ok = parse_value(what, m.keys[i], m.values[i], true, &t.value, err);
    if (ok < 0) return -1;
    if (!ok) continue;
    if (!hard) {
      size_t g;
      for (g = 0; g < grace.n; g++)
        if (!strcmp(grace.keys[g], m.keys[i])) break;
      if (g == grace.n)
        return nl_err_set(err, NL_EINVAL,
                          "grace period must be specified for the soft eviction threshold %s",
                          m.keys[i]);
      if (nl_duration_parse(grace.values[g], &t.grace_ns, err) < 0)
        return nl_err_wrap(err, "evictionSoftGracePeriod %s", m.keys[i]);
      if (t.grace_ns < 0)
        return nl_err_set(err, NL_EINVAL, "invalid eviction grace period specified: %s, must be a positive value",
                          grace.values[g]);
    }
    add(out, n, &t);
  }
  return 0;
}

int nl_ev_parse_thresholds(nl_ev_config_map_t hard, nl_ev_config_map_t soft,
                           nl_ev_config_map_t grace, nl_ev_config_map_t min_reclaim,
                           bool enforce_pods, nl_ev_threshold_t **out, size_t *n,
                           nl_err_t **err) {
  *out = NULL;
  *n = 0;
  nl_ev_signal_t s = NL_EV_MEMORY;
  for (size_t i = 0; i < grace.n; i++)
    if (signal_of(grace.keys[i], &s, err) < 0) goto fail;
  if (parse_set("evictionHard", hard, true, grace, out, n, err) < 0 ||
      parse_set("evictionSoft", soft, false, grace, out, n, err) < 0)
    goto fail;
  for (size_t i = 0; i < min_reclaim.n; i++) {
    nl_ev_value_t v;
    if (signal_of(min_reclaim.keys[i], &s, err) < 0 ||
        parse_value("evictionMinimumReclaim", min_reclaim.keys[i], min_reclaim.values[i], false,
                    &v, err) < 0)
      goto fail;
    for (size_t k = 0; k < *n; k++)
      if ((*out)[k].signal == s) (*out)[k].min_reclaim = v;
  }
  size_t parsed = *n;
  for (size_t k = 0; enforce_pods && k < parsed; k++)
    if ((*out)[k].signal == NL_EV_MEMORY && (*out)[k].hard) {
      nl_ev_threshold_t t = (*out)[k];
      t.signal = NL_EV_ALLOC_MEMORY;
      add(out, n, &t);
    }
  return 0;
fail:
  free(*out);
  *out = NULL;
  *n = 0;
  return -1;
}

int64_t nl_ev_quantity(const nl_ev_value_t *v, int64_t capacity) {
  if (v->quantity) return v->quantity;
  return (int64_t)((double)capacity * (double)v->percentage);
}

bool nl_ev_threshold_met(const nl_ev_threshold_t *t, const nl_ev_observation_t *obs,
                         bool enforce_min_reclaim) {
  const nl_ev_observation_t *o = &obs[t->signal];
  if (!o->ok) return false;
  int64_t q = nl_ev_quantity(&t->value, o->capacity);
  if (enforce_min_reclaim) q += nl_ev_quantity(&t->min_reclaim, o->capacity);
  return q > o->available;
}

void nl_ev_stats_free(nl_ev_stats_t *s) {
  for (size_t i = 0; i < s->n_pods; i++) {
    nl_ev_pod_stats_t *p = &s->pods[i];
    for (size_t j = 0; j < p->n_containers; j++) free(p->containers[j].name);
    free(p->containers);
    for (size_t j = 0; j < p->n_vols; j++) free(p->vols[j].name);
    free(p->vols);
    free(p->uid);
  }
  free(s->pods);
  memset(s, 0, sizeof *s);
}

/* ---- ranking ---- */

static bool is_disk(nl_ev_signal_t s) { return !nl_ev_is_memory(s) && s != NL_EV_PID; }
static bool is_inodes(nl_ev_signal_t s) { return s == NL_EV_NODEFS_INODES || s == NL_EV_IMAGEFS_INODES; }

/* upstream podDiskUsage with the fs stats the signal measures: with a
 * dedicated image filesystem, nodefs counts local volumes and logs and imagefs
 * the writable layers; on one filesystem all of them. */
int64_t nl_ev_pod_usage(nl_ev_signal_t signal, bool dedicated_imagefs, const nl_ev_pod_stats_t *s) {
  if (nl_ev_is_memory(signal)) return s->memory;
  if (signal == NL_EV_PID) return s->procs;
  bool image = signal == NL_EV_IMAGEFS || signal == NL_EV_IMAGEFS_INODES;
  bool rootfs = !dedicated_imagefs || image, rest = !dedicated_imagefs || !image;
  if (is_inodes(signal)) return rest ? s->volume_inodes : 0;
  int64_t u = rest ? s->volumes : 0;
  for (size_t i = 0; i < s->n_containers; i++) {
    if (rootfs && s->containers[i].rootfs > 0) u += s->containers[i].rootfs;
    if (rest && s->containers[i].logs > 0) u += s->containers[i].logs;
  }
  return u;
}

typedef struct rank_ctx {
  nl_ev_signal_t signal;
  bool dedicated;
} rank_ctx_t;

static int32_t priority(const nl_pod_t *p) { return p->spec.priority.set ? p->spec.priority.v : 0; }

static int64_t request(const nl_pod_t *p, nl_ev_signal_t s) {
  if (nl_ev_is_memory(s)) return nl_pod_request(p, "memory");
  if (is_disk(s) && !is_inodes(s)) return nl_pod_request(p, "ephemeral-storage");
  return 0;
}

/* upstream cmpBool: true first */
static int cmp_bool(bool a, bool b) { return a == b ? 0 : a ? -1 : 1; }

static int rank_cmp(const void *a, const void *b, void *ctx) {
  const rank_ctx_t *r = ctx;
  const nl_ev_candidate_t *x = a, *y = b;
  if (!x->stats || !y->stats) {
    int c = cmp_bool(!x->stats, !y->stats);
    if (c) return c;
    return priority(x->pod) < priority(y->pod) ? -1 : priority(x->pod) > priority(y->pod);
  }
  int64_t ux = nl_ev_pod_usage(r->signal, r->dedicated, x->stats);
  int64_t uy = nl_ev_pod_usage(r->signal, r->dedicated, y->stats);
  if (r->signal != NL_EV_PID) {
    /* usage over requests first (inodes have no requests: every pod exceeds) */
    int c = cmp_bool(ux > request(x->pod, r->signal), uy > request(y->pod, r->signal));
    if (c) return c;
  }
  if (priority(x->pod) != priority(y->pod)) return priority(x->pod) < priority(y->pod) ? -1 : 1;
  int64_t ax = ux - request(x->pod, r->signal), ay = uy - request(y->pod, r->signal);
  return ax > ay ? -1 : ax < ay;
}

void nl_ev_rank(nl_ev_signal_t signal, bool dedicated_imagefs, nl_ev_candidate_t *c, size_t n) {
  rank_ctx_t r = {signal, dedicated_imagefs};
  qsort_r(c, n, sizeof *c, rank_cmp, &r);
}

bool nl_ev_pod_is_critical(const nl_pod_t *pod) {
  const char *src = nl_kvlist_get(&pod->metadata.annotations, NL_ANNOTATION_CONFIG_SOURCE);
  if (!src || strcmp(src, "api") != 0 || nl_pod_is_mirror(pod)) return true;
  return pod->spec.priority.set && pod->spec.priority.v >= 2000000000;
}
