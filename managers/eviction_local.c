/* Local storage limits (upstream eviction_manager.go localStorageEviction):
 * an emptyDir's sizeLimit, the pod's total ephemeral-storage limit and each
 * container's, decided on the figures the collector measured. Pure. */
#include <stdlib.h>
#include <string.h>

#include "agent/model/quantity.h"
#include "managers/admission.h"
#include "managers/eviction.h"
#include "reactor/xalloc.h"

#define EPHEMERAL "ephemeral-storage"

bool nl_ev_local_volume(const nl_volume_t *v) {
  return v->empty_dir && (!v->empty_dir->medium || strcmp(v->empty_dir->medium, "Memory") != 0);
}

/* A memory-medium emptyDir is a tmpfs of its sizeLimit: it cannot exceed it. */
static bool sized_empty_dir(const nl_volume_t *v) {
  return nl_ev_local_volume(v) && v->empty_dir->has_size_limit &&
         nl_quantity_sign(&v->empty_dir->size_limit) > 0;
}

/* The first ephemeral-storage limit among the containers, then the init
 * containers (upstream PodLimits has the key when any of them names it). */
static const nl_quantity_t *first_limit(const nl_pod_t *pod) {
  const nl_pod_spec_t *s = &pod->spec;
  for (size_t i = 0; i < s->n_containers; i++) {
    const nl_quantity_t *q = nl_resource_list_get(&s->containers[i].resources.limits, EPHEMERAL);
    if (q) return q;
  }
  for (size_t i = 0; i < s->n_init_containers; i++) {
    const nl_quantity_t *q = nl_resource_list_get(&s->init_containers[i].resources.limits, EPHEMERAL);
    if (q) return q;
  }
  return NULL;
}

bool nl_ev_local_storage_limited(const nl_pod_t *pod) {
  if (first_limit(pod)) return true;
  for (size_t i = 0; i < pod->spec.n_volumes; i++)
    if (sized_empty_dir(&pod->spec.volumes[i])) return true;
  return false;
}

static int64_t positive(int64_t v) { return v > 0 ? v : 0; }

/* upstream calcEphemeralStorage: a container counts with its logs once its
 * writable layer is known. */
int64_t nl_ev_pod_ephemeral_usage(const nl_ev_pod_stats_t *s) {
  int64_t u = positive(s->pod_logs) + positive(s->etc_hosts);
  for (size_t i = 0; i < s->n_vols; i++) u += positive(s->vols[i].used);
  for (size_t i = 0; i < s->n_containers; i++)
    if (s->containers[i].rootfs >= 0) u += s->containers[i].rootfs + positive(s->containers[i].logs);
  return u;
}

static const nl_ev_volume_stats_t *volume(const nl_ev_pod_stats_t *s, const char *name) {
  for (size_t i = 0; i < s->n_vols; i++)
    if (!strcmp(s->vols[i].name, name)) return &s->vols[i];
  return NULL;
}

static const char *empty_dir_exceeded(const nl_pod_t *pod, const nl_ev_pod_stats_t *s, char **message) {
  for (size_t i = 0; i < pod->spec.n_volumes; i++) {
    const nl_volume_t *v = &pod->spec.volumes[i];
    if (!sized_empty_dir(v)) continue;
    const nl_ev_volume_stats_t *used = volume(s, v->name);
    if (!used || used->used < 0) continue;
    nl_quantity_t u = {used->used, 0, NL_QUANTITY_BINARY_SI};
    if (nl_quantity_cmp(&u, &v->empty_dir->size_limit) <= 0) continue;
    char q[NL_QUANTITY_STRLEN];
    *message = nl_xasprintf("Usage of EmptyDir volume \"%s\" exceeds the limit \"%s\". ", v->name,
                            nl_quantity_format(&v->empty_dir->size_limit, q));
    return "emptydirfs.limit";
  }
  return NULL;
}

static const char *pod_exceeded(const nl_pod_t *pod, const nl_ev_pod_stats_t *s, char **message) {
  const nl_quantity_t *first = first_limit(pod);
  if (!first) return NULL;
  bool all;
  /* the sum keeps the first one's format, as upstream's Quantity.Add */
  nl_quantity_t limit = {nl_pod_limit(pod, EPHEMERAL, &all), 0, first->format};
  if (nl_ev_pod_ephemeral_usage(s) <= limit.value) return NULL;
  char q[NL_QUANTITY_STRLEN];
  *message = nl_xasprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ",
                          nl_quantity_format(&limit, q));
  return "ephemeralpodfs.limit";
}

static const char *container_exceeded(const nl_pod_t *pod, const nl_ev_pod_stats_t *s,
                                      bool dedicated_imagefs, char **message) {
  for (size_t i = 0; i < s->n_containers; i++) {
    const nl_ev_container_stats_t *cs = &s->containers[i];
    for (size_t j = 0; j < pod->spec.n_containers; j++) {
      const nl_container_t *c = &pod->spec.containers[j];
      if (strcmp(c->name, cs->name) != 0) continue;
      const nl_quantity_t *limit = nl_resource_list_get(&c->resources.limits, EPHEMERAL);
      if (!limit || nl_quantity_value(limit) == 0) break;
      nl_quantity_t used = {positive(cs->logs) + (dedicated_imagefs ? 0 : positive(cs->rootfs)), 0,
                            NL_QUANTITY_BINARY_SI};
      if (nl_quantity_cmp(limit, &used) >= 0) break;
      char q[NL_QUANTITY_STRLEN];
      *message = nl_xasprintf("Container %s exceeded its local ephemeral storage limit \"%s\". ",
                              c->name, nl_quantity_format(limit, q));
      return "ephemeralcontainerfs.limit";
    }
  }
  return NULL;
}

const char *nl_ev_local_storage_exceeded(const nl_pod_t *pod, const nl_ev_pod_stats_t *s,
                                         bool dedicated_imagefs, char **message) {
  *message = NULL;
  const char *signal = empty_dir_exceeded(pod, s, message);
  if (!signal) signal = pod_exceeded(pod, s, message);
  if (!signal) signal = container_exceeded(pod, s, dedicated_imagefs, message);
  return signal;
}
