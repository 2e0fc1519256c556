/* upstream evictionMessage (pkg/kubelet/eviction/helpers.go): the evicted
 * pod's status message and its Evicted event's annotations. */
#include <stdlib.h>
#include <string.h>

#include "agent/model/podres.h"
#include "agent/model/quantity.h"
#include "managers/eviction.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

/* upstream signalToResource */
static const char *resource_of(nl_ev_signal_t s) {
  switch (s) {
  case NL_EV_MEMORY:
  case NL_EV_ALLOC_MEMORY: return "memory";
  case NL_EV_PID: return "pids";
  case NL_EV_NODEFS_INODES:
  case NL_EV_IMAGEFS_INODES: return "inodes";
  default: return "ephemeral-storage";
  }
}

/* A usage as upstream prints resource.NewQuantity(v, BinarySI): "123Mi",
 * "1500". */
static nl_quantity_t binary(int64_t v) { return (nl_quantity_t){v, 0, NL_QUANTITY_BINARY_SI}; }

static char *fmt(int64_t v, bool binary_si, char out[NL_QUANTITY_STRLEN]) {
  nl_quantity_t q = {v, 0, binary_si ? NL_QUANTITY_BINARY_SI : NL_QUANTITY_DECIMAL_SI};
  return nl_quantity_format(&q, out);
}

static void annotate(nl_kvlist_t *a, const char *key, char *value) {
  a->items = nl_xrealloc(a->items, (a->n + 1) * sizeof *a->items);
  a->items[a->n++] = (nl_kv_t){nl_xstrdup(key), value};
}

void nl_ev_annotations_free(nl_kvlist_t *a) {
  for (size_t i = 0; i < a->n; i++) {
    free(a->items[i].key);
    free(a->items[i].value);
  }
  free(a->items);
  *a = (nl_kvlist_t){0};
}

/* The spec container a stats entry is of: regular and init (sidecars too),
 * not ephemeral, which cannot have requests and would always be blamed. */
static const nl_container_t *spec_container(const nl_pod_t *pod, const char *name) {
  for (size_t i = 0; i < pod->spec.n_containers; i++)
    if (!strcmp(pod->spec.containers[i].name, name)) return &pod->spec.containers[i];
  for (size_t i = 0; i < pod->spec.n_init_containers; i++)
    if (!strcmp(pod->spec.init_containers[i].name, name)) return &pod->spec.init_containers[i];
  return NULL;
}

/* The container's usage of res: the working set, or the writable layer and
 * logs; -1 when unknown or res is neither. */
static int64_t container_usage(const char *res, const nl_ev_container_stats_t *cs) {
  if (!strcmp(res, "memory")) return cs->memory;
  if (!strcmp(res, "ephemeral-storage") && cs->rootfs >= 0 && cs->logs >= 0)
    return cs->rootfs + cs->logs;
  return -1;
}

char *nl_ev_message(nl_ev_signal_t signal, const nl_ev_threshold_t *t,
                    const nl_ev_observation_t *obs, const nl_pod_t *pod,
                    const nl_ev_pod_stats_t *stats, nl_kvlist_t *annotations) {
  *annotations = (nl_kvlist_t){0};
  nl_buf_t b = {0};
  const char *res = resource_of(signal);
  bool bytes = strcmp(res, "memory") == 0 || strcmp(res, "ephemeral-storage") == 0;
  nl_buf_printf(&b, "The node was low on resource: %s. ", res);
  if (t && obs[signal].ok) {
    char q[NL_QUANTITY_STRLEN], a[NL_QUANTITY_STRLEN];
    nl_buf_printf(&b, "Threshold quantity: %s, available: %s. ",
                  fmt(nl_ev_quantity(&t->value, obs[signal].capacity), bytes, q),
                  fmt(obs[signal].available, bytes, a));
  }
  if (!stats) return nl_buf_steal(&b); /* upstream: no figures, no annotations */
  char u[NL_QUANTITY_STRLEN], r[NL_QUANTITY_STRLEN];
  nl_kvlist_t *an = annotations;
  /* PodLevelResources: the pod's own memory request, whatever its usage */
  const nl_quantity_t *prq = !strcmp(res, "memory") && nl_pod_level_set(pod)
                                 ? nl_pod_level_request(pod, res) : NULL;
  char *pod_name = NULL, *pod_usage = NULL;
  if (prq && stats->memory >= 0) {
    nl_quantity_t pu = binary(stats->memory);
    nl_buf_printf(&b, "Pod %s was using %s, request is %s, has larger consumption of %s. ",
                  pod->metadata.name, nl_quantity_format(&pu, u), nl_quantity_format(prq, r), res);
    pod_name = nl_xstrdup(pod->metadata.name);
    pod_usage = nl_xstrdup(u);
  }
  nl_buf_t names = {0}, usages = {0};
  for (size_t i = 0; i < stats->n_containers; i++) {
    const nl_ev_container_stats_t *cs = &stats->containers[i];
    const nl_container_t *c = spec_container(pod, cs->name);
    if (!c) continue;
    int64_t usage = container_usage(res, cs);
    const nl_quantity_t *rq = nl_resource_list_get(&c->resources.requests, res);
    nl_quantity_t zero = {0, 0, NL_QUANTITY_DECIMAL_SI};
    nl_quantity_t uq = binary(usage);
    if (usage < 0 || nl_quantity_cmp(&uq, rq ? rq : &zero) <= 0) continue;
    nl_buf_printf(&b, "Container %s was using %s, request is %s, has larger consumption of %s. ",
                  c->name, nl_quantity_format(&uq, u), nl_quantity_format(rq ? rq : &zero, r),
                  res);
    nl_buf_printf(&names, "%s%s", names.len ? "," : "", c->name);
    nl_buf_printf(&usages, "%s%s", usages.len ? "," : "", u);
  }
  /* sorted by key, as a kvlist is */
  annotate(an, "offending_containers", names.len ? nl_buf_steal(&names) : nl_xstrdup(""));
  annotate(an, "offending_containers_usage", usages.len ? nl_buf_steal(&usages) : nl_xstrdup(""));
  if (pod_name) {
    annotate(an, "offending_pod", pod_name);
    annotate(an, "offending_pod_usage", pod_usage);
  }
  annotate(an, "starved_resource", nl_xstrdup(res));
  nl_buf_free(&names);
  nl_buf_free(&usages);
  return nl_buf_steal(&b);
}
