/* The health of the devices a pod holds (upstream's ResourceHealthStatus):
 * each container status' allocatedResourcesStatus, and the pods to sync when
 * a plugin's list changes the health of a device they hold
 * (managers/devices.h). */
#include <string.h>

#include "managers/devices_internal.h"

/* A device's health as its plugin last listed it; one it does not list is
 * Healthy, as upstream's (its allDevices lookup falls back to Healthy). */
static bool dev_healthy(const nl_dev_t *devs, size_t n, const char *id) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(devs[i].id, id) == 0) return devs[i].healthy;
  return true;
}

void nl_devices_resource_status(const nl_devices_t *m, const char *pod_uid,
                                nl_pod_status_t *st) {
  for (size_t i = 0; i < st->n_container_statuses; i++) {
    nl_container_status_t *c = &st->container_statuses[i];
    for (nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next) {
      const nl_dev_alloc_t *a = nl_list_entry(p, nl_dev_alloc_t, link);
      if (!a->n_ids || strcmp(a->pod_uid, pod_uid) != 0 || strcmp(a->container, c->name) != 0)
        continue;
      const nl_dev_resource_t *r = nl_map_get(&m->resources, a->resource);
      nl_resource_status_t *rs = nl_container_status_resource(c, a->resource);
      for (size_t j = 0; j < a->n_ids; j++)
        nl_resource_status_add(rs, a->ids[j],
                               !r || dev_healthy(r->devs, r->n_devs, a->ids[j]) ? "Healthy"
                                                                                : "Unhealthy",
                               NULL);
    }
  }
}

void nl__dev_health_changed(nl_devices_t *m, const char *resource, const nl_dev_t *old,
                            size_t n_old, const nl_dev_t *now, size_t n_now) {
  if (!m->opts.pod_changed || m->state != NL_DEVICES_RUNNING) return;
  const char *told = NULL; /* allocs of one pod are often next to each other */
  for (nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next) {
    const nl_dev_alloc_t *a = nl_list_entry(p, nl_dev_alloc_t, link);
    if (strcmp(a->resource, resource) != 0 || (told && strcmp(told, a->pod_uid) == 0)) continue;
    for (size_t j = 0; j < a->n_ids; j++) {
      if (dev_healthy(old, n_old, a->ids[j]) == dev_healthy(now, n_now, a->ids[j])) continue;
      m->opts.pod_changed(m->opts.pod_changed_ctx, a->pod_uid);
      told = a->pod_uid;
      break;
    }
  }
}
