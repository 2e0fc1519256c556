#include "managers/preemption.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/podres.h"
#include "managers/eviction.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

bool nl_preemptable(const nl_pod_t *preemptor, const nl_pod_t *preemptee) {
  if (nl_ev_pod_is_critical(preemptor) && !nl_ev_pod_is_critical(preemptee)) return true;
  return preemptor->spec.priority.set && preemptee->spec.priority.set &&
         preemptor->spec.priority.v > preemptee->spec.priority.v;
}

int64_t nl_preempt_request(const nl_pod_t *pod, const char *resource) {
  return strcmp(resource, "pods") == 0 ? 1 : nl_pod_request(pod, resource);
}

/* A working list of needs: what is still missing. */
typedef struct needs {
  nl_preempt_need_t v[8];
  size_t n;
} needs_t;

/* upstream admissionRequirementList.subtract: what remains of need once the
 * pods go (a need met is dropped). */
static needs_t subtract(const needs_t *need, const nl_pod_t *const *pods, size_t n) {
  needs_t out = {.n = 0};
  for (size_t i = 0; i < need->n; i++) {
    int64_t q = need->v[i].quantity;
    for (size_t j = 0; j < n && q > 0; j++) q -= nl_preempt_request(pods[j], need->v[i].resource);
    if (q > 0) out.v[out.n++] = (nl_preempt_need_t){need->v[i].resource, q};
  }
  return out;
}

static double distance(const needs_t *need, const nl_pod_t *pod) {
  double d = 0;
  for (size_t i = 0; i < need->n; i++) {
    double left = (double)(need->v[i].quantity - nl_preempt_request(pod, need->v[i].resource));
    if (left > 0) d += (left / (double)need->v[i].quantity) * (left / (double)need->v[i].quantity);
  }
  return d;
}

/* upstream smallerResourceRequest: memory, then cpu; equal counts as smaller. */
static bool smaller(const nl_pod_t *a, const nl_pod_t *b) {
  static const char *const order[] = {"memory", "cpu"};
  for (size_t i = 0; i < 2; i++) {
    int64_t ra = nl_pod_request(a, order[i]), rb = nl_pod_request(b, order[i]);
    if (ra != rb) return ra < rb;
  }
  return true;
}

static int unmet(const needs_t *need, nl_err_t **err) {
  nl_buf_t b = NL_BUF_INIT;
  for (size_t i = 0; i < need->n; i++)
    nl_buf_printf(&b, "(res: %s, q: %lld), ", need->v[i].resource, (long long)need->v[i].quantity);
  char *list = nl_buf_steal(&b);
  nl_err_set(err, ENOSPC, "no set of running pods found to reclaim resources: [%s]", list);
  free(list);
  return -1;
}

/* A class of pods: the candidates (copied pointers; the chosen ones are moved
 * out) and those chosen. */
typedef struct group {
  const nl_pod_t **pods, **chosen;
  size_t n, n_chosen;
} group_t;

/* upstream getPodsToPreemptByDistance: rounds of the closest pod until the
 * need is met. */
static int by_distance(group_t *g, needs_t need, nl_err_t **err) {
  while (need.n) {
    if (!g->n) return unmet(&need, err);
    double best = (double)need.n + 1;
    size_t bi = 0;
    for (size_t i = 0; i < g->n; i++) {
      double d = distance(&need, g->pods[i]);
      if (d < best || (d == best && smaller(g->pods[i], g->pods[bi]))) {
        best = d;
        bi = i;
      }
    }
    need = subtract(&need, &g->pods[bi], 1);
    g->chosen[g->n_chosen++] = g->pods[bi];
    g->pods[bi] = g->pods[--g->n];
  }
  return 0;
}

/* The need left once the pods of the given groups (their candidates, or
 * their chosen ones) go. */
static needs_t after(const needs_t *need, const group_t *a, bool a_all, const group_t *b,
                     bool b_all) {
  const nl_pod_t *const *pa = a_all ? a->pods : a->chosen;
  const nl_pod_t *const *pb = b_all ? b->pods : b->chosen;
  size_t na = a_all ? a->n : a->n_chosen, nb = b_all ? b->n : b->n_chosen, m = 0;
  const nl_pod_t **tmp = nl_xcalloc(na + nb + 1, sizeof *tmp);
  for (size_t i = 0; i < na; i++) tmp[m++] = pa[i];
  for (size_t i = 0; i < nb; i++) tmp[m++] = pb[i];
  needs_t out = subtract(need, tmp, m);
  free(tmp);
  return out;
}

int nl_preempt_select(const nl_pod_t *preemptor, const nl_pod_t *const *pods, size_t n,
                      const nl_preempt_need_t *needs, size_t n_needs, const nl_pod_t ***out,
                      size_t *n_out, nl_err_t **err) {
  *out = NULL;
  *n_out = 0;
  needs_t need = {.n = 0};
  for (size_t i = 0; i < n_needs && need.n < sizeof need.v / sizeof need.v[0]; i++)
    if (needs[i].quantity > 0) need.v[need.n++] = needs[i];
  /* upstream sortPodsByQOS */
  group_t g[3] = {{0}}; /* BestEffort, Burstable, Guaranteed */
  for (size_t i = 0; i < 3; i++) {
    g[i].pods = nl_xcalloc(n + 1, sizeof *g[i].pods);
    g[i].chosen = nl_xcalloc(n + 1, sizeof *g[i].chosen);
  }
  for (size_t i = 0; i < n; i++) {
    if (!nl_preemptable(preemptor, pods[i])) continue;
    const char *qos = nl_pod_qos_class(pods[i]);
    group_t *to = !strcmp(qos, "BestEffort") ? &g[0] : !strcmp(qos, "Burstable") ? &g[1] : &g[2];
    to->pods[to->n++] = pods[i];
  }
  int rc = 0;
  group_t none = {0};
  needs_t all = after(&need, &g[0], true, &g[1], true);
  all = after(&all, &g[2], true, &none, true);
  if (all.n) rc = unmet(&all, err);
  /* the Guaranteed pods needed were every BestEffort and Burstable pod gone;
   * the Burstable ones with every BestEffort one and those Guaranteed gone;
   * then the BestEffort ones for what is left */
  if (rc == 0) rc = by_distance(&g[2], after(&need, &g[0], true, &g[1], true), err);
  if (rc == 0) rc = by_distance(&g[1], after(&need, &g[0], true, &g[2], false), err);
  if (rc == 0) rc = by_distance(&g[0], after(&need, &g[1], false, &g[2], false), err);
  if (rc == 0) {
    *out = nl_xcalloc(n + 1, sizeof **out);
    for (size_t i = 0; i < 3; i++)
      for (size_t j = 0; j < g[i].n_chosen; j++) (*out)[(*n_out)++] = g[i].chosen[j];
  }
  for (size_t i = 0; i < 3; i++) {
    free(g[i].pods);
    free(g[i].chosen);
  }
  return rc;
}
