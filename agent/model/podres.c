/* A pod's resources as one whole: see podres.h. */
#include "agent/model/podres.h"

#include <string.h>

bool nl_pod_level_resource(const char *name) {
  return strcmp(name, "cpu") == 0 || strcmp(name, "memory") == 0 ||
         strncmp(name, "hugepages-", 10) == 0;
}

static bool names_supported(const nl_resource_list_t *l) {
  for (size_t i = 0; i < l->n; i++)
    if (nl_pod_level_resource(l->items[i].name)) return true;
  return false;
}

bool nl_pod_level_requests_set(const nl_pod_t *pod) {
  return pod->spec.resources && names_supported(&pod->spec.resources->requests);
}

bool nl_pod_level_set(const nl_pod_t *pod) {
  return nl_pod_level_requests_set(pod) ||
         (pod->spec.resources && names_supported(&pod->spec.resources->limits));
}

const nl_quantity_t *nl_pod_level_request(const nl_pod_t *pod, const char *resource) {
  if (!pod->spec.resources || !nl_pod_level_resource(resource)) return NULL;
  return nl_resource_list_get(&pod->spec.resources->requests, resource);
}

const nl_quantity_t *nl_pod_level_limit(const nl_pod_t *pod, const char *resource) {
  if (!pod->spec.resources || !nl_pod_level_resource(resource)) return NULL;
  return nl_resource_list_get(&pod->spec.resources->limits, resource);
}

static int64_t amount(const nl_quantity_t *q, bool milli) {
  return !q ? 0 : milli ? nl_quantity_milli_value(q) : nl_quantity_value(q);
}

/* One container's amount of resource; *all is cleared when it has none. */
static int64_t amount_of(const nl_container_t *c, const char *resource, bool milli, bool limits,
                         bool *all) {
  int64_t v = amount(
      nl_resource_list_get(limits ? &c->resources.limits : &c->resources.requests, resource),
      milli);
  if (v == 0) *all = false;
  return v;
}

int64_t nl_pod_containers_amount(const nl_pod_t *pod, const char *resource, bool limits,
                                 bool *all) {
  bool milli = strcmp(resource, "cpu") == 0;
  const nl_pod_spec_t *s = &pod->spec;
  int64_t sum = 0, sidecars = 0, init_max = 0;
  *all = true;
  for (size_t i = 0; i < s->n_containers; i++)
    sum += amount_of(&s->containers[i], resource, milli, limits, all);
  for (size_t i = 0; i < s->n_init_containers; i++) {
    const nl_container_t *c = &s->init_containers[i];
    bool sidecar = c->restart_policy && strcmp(c->restart_policy, "Always") == 0;
    bool ignored;
    /* upstream's "limits declared" looks at what runs beside the pod's life */
    int64_t r = amount_of(c, resource, milli, limits, sidecar ? all : &ignored);
    if (sidecar) {
      sidecars += r; /* a sidecar runs on beside what follows it */
      if (sidecars > init_max) init_max = sidecars;
    } else if (sidecars + r > init_max) {
      init_max = sidecars + r;
    }
  }
  return sum + sidecars > init_max ? sum + sidecars : init_max;
}

int64_t nl_pod_amount(const nl_pod_t *pod, const char *resource, bool limits, bool overhead,
                      bool *all) {
  bool milli = strcmp(resource, "cpu") == 0, each;
  int64_t total = nl_pod_containers_amount(pod, resource, limits, &each);
  const nl_quantity_t *pl =
      limits ? nl_pod_level_limit(pod, resource) : nl_pod_level_request(pod, resource);
  if (pl) {
    total = amount(pl, milli);
    if (total != 0) each = true; /* the pod-level limit bounds every container */
  }
  if (all) *all = each;
  if (!overhead || (limits && total == 0)) return total; /* no overhead on no limit */
  return total + amount(nl_resource_list_get(&pod->spec.overhead, resource), milli);
}

/* ---- QoS ---- */

typedef struct {
  int64_t req[2], lim[2]; /* cpu, memory, in milli units */
  bool has_req[2], has_lim[2];
} qos_sums_t;

static const char *const qos_names[2] = {"cpu", "memory"};

/* Adds r's positive cpu and memory; true when it limits both. */
static bool qos_add(qos_sums_t *s, const nl_resource_requirements_t *r) {
  bool limited[2] = {false, false};
  for (int k = 0; k < 2; k++) {
    const nl_quantity_t *q = nl_resource_list_get(&r->requests, qos_names[k]);
    if (q && nl_quantity_sign(q) > 0) {
      s->req[k] += nl_quantity_milli_value(q);
      s->has_req[k] = true;
    }
    q = nl_resource_list_get(&r->limits, qos_names[k]);
    if (q && nl_quantity_sign(q) > 0) {
      s->lim[k] += nl_quantity_milli_value(q);
      s->has_lim[k] = limited[k] = true;
    }
  }
  return limited[0] && limited[1];
}

const char *nl_pod_qos_class(const nl_pod_t *pod) {
  qos_sums_t s = {0};
  bool guaranteed = true;
  const nl_pod_spec_t *spec = &pod->spec;
  if (spec->resources) {
    /* the pod's own resources decide, whatever its containers say; without
     * pod-level limits nothing stops it being Guaranteed but its requests */
    bool limited = qos_add(&s, spec->resources);
    if (spec->resources->limits.n && !limited) guaranteed = false;
  } else {
    for (size_t i = 0; i < spec->n_containers; i++)
      if (!qos_add(&s, &spec->containers[i].resources)) guaranteed = false;
    for (size_t i = 0; i < spec->n_init_containers; i++)
      if (!qos_add(&s, &spec->init_containers[i].resources)) guaranteed = false;
  }
  int nreq = s.has_req[0] + s.has_req[1], nlim = s.has_lim[0] + s.has_lim[1];
  if (nreq == 0 && nlim == 0) return "BestEffort";
  for (int k = 0; k < 2 && guaranteed; k++)
    if (s.has_req[k] && (!s.has_lim[k] || s.lim[k] != s.req[k])) guaranteed = false;
  return guaranteed && nreq == nlim ? "Guaranteed" : "Burstable";
}

bool nl_pod_dra_extended(const nl_pod_t *pod, const char *container, const char *resource) {
  const struct nl_pod_ext_claim_status *x = pod->status ? pod->status->extended_resource_claim_status : NULL;
  for (size_t i = 0; x && i < x->n_request_mappings; i++) {
    const struct nl_pod_ext_mapping *rm = &x->request_mappings[i];
    if (rm->container_name && rm->resource_name && !strcmp(rm->container_name, container) &&
        !strcmp(rm->resource_name, resource))
      return true;
  }
  return false;
}
