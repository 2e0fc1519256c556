/* Upstream's v1 defaulting (pkg/apis/core/v1/defaults.go) for what a pod carries. */
#include <assert.h>
#include <string.h>

#include "agent/model/internal.h"
#include "agent/model/podres.h"

#define DEF_STR(a, field, value) \
  do {                           \
    if (!(field) || !*(field)) (field) = nl_arena_strdup((a), (value)); \
  } while (0)

/* parsers.ParseImageName: no tag and no digest means ":latest". */
static const char *default_pull_policy(const char *image) {
  if (!image) return "IfNotPresent";
  const char *at = strchr(image, '@');
  size_t len = at ? (size_t)(at - image) : strlen(image);
  const char *slash = NULL, *colon = NULL;
  for (size_t i = 0; i < len; i++) {
    if (image[i] == '/') slash = image + i, colon = NULL;
    else if (image[i] == ':') colon = image + i;
  }
  (void)slash;
  if (!colon) return at ? "IfNotPresent" : "Always";
  size_t tl = len - (size_t)(colon + 1 - image);
  return tl == 6 && memcmp(colon + 1, "latest", 6) == 0 ? "Always" : "IfNotPresent";
}

static void field_ref(nl_arena_t *a, nl_field_ref_t *f) {
  if (f) DEF_STR(a, f->api_version, "v1");
}

static void handler(nl_arena_t *a, nl_handler_t *h) {
  if (h->http_get) {
    DEF_STR(a, h->http_get->path, "/");
    DEF_STR(a, h->http_get->scheme, "HTTP");
  }
}

static void probe(nl_arena_t *a, nl_probe_t *p) {
  if (!p) return;
  handler(a, &p->handler);
  if (!p->timeout_seconds) p->timeout_seconds = 1;
  if (!p->period_seconds) p->period_seconds = 10;
  if (!p->success_threshold) p->success_threshold = 1;
  if (!p->failure_threshold) p->failure_threshold = 3;
}

/* SetDefaults_Pod: requests default to limits, per resource. */
static void requests_from_limits(nl_arena_t *a, nl_resource_requirements_t *r) {
  size_t missing = 0;
  for (size_t i = 0; i < r->limits.n; i++)
    if (!nl_resource_list_get(&r->requests, r->limits.items[i].name)) missing++;
  if (!missing) return;
  nl_resource_t *items = nl_arena_alloc(a, (r->requests.n + missing) * sizeof *items);
  if (r->requests.n) memcpy(items, r->requests.items, r->requests.n * sizeof *items);
  size_t n = r->requests.n;
  for (size_t i = 0; i < r->limits.n; i++)
    if (!nl_resource_list_get(&r->requests, r->limits.items[i].name))
      items[n++] = r->limits.items[i];
  r->requests.items = items;
  r->requests.n = n;
  nl__resource_list_sort(&r->requests);
}

static void container(nl_arena_t *a, nl_container_t *c, bool host_network) {
  if (!c->image_pull_policy || !*c->image_pull_policy)
    c->image_pull_policy = nl_arena_strdup(a, default_pull_policy(c->image));
  DEF_STR(a, c->termination_message_path, "/dev/termination-log");
  DEF_STR(a, c->termination_message_policy, "File");
  for (size_t i = 0; i < c->n_ports; i++) {
    DEF_STR(a, c->ports[i].protocol, "TCP");
    if (host_network && c->ports[i].host_port == 0)
      c->ports[i].host_port = c->ports[i].container_port;
  }
  for (size_t i = 0; i < c->n_env; i++)
    if (c->env[i].value_from) field_ref(a, c->env[i].value_from->field_ref);
  probe(a, c->liveness_probe);
  probe(a, c->readiness_probe);
  probe(a, c->startup_probe);
  if (c->lifecycle) {
    if (c->lifecycle->post_start) handler(a, c->lifecycle->post_start);
    if (c->lifecycle->pre_stop) handler(a, c->lifecycle->pre_stop);
  }
  requests_from_limits(a, &c->resources);
}

static void downward(nl_arena_t *a, nl_downward_api_source_t *d) {
  for (size_t i = 0; i < d->n_items; i++) field_ref(a, d->items[i].field_ref);
}

static void volume(nl_arena_t *a, nl_volume_t *v) {
  if (!v->host_path && !v->empty_dir && !v->config_map && !v->secret &&
      !v->persistent_volume_claim && !v->downward_api && !v->projected && !v->image &&
      !v->unsupported)
    v->empty_dir = nl_arena_alloc(a, sizeof *v->empty_dir); /* SetDefaults_Volume */
  if (v->host_path && !v->host_path->type) v->host_path->type = nl_arena_strdup(a, "");
  if (v->image) DEF_STR(a, v->image->pull_policy, default_pull_policy(v->image->reference));
  if (v->config_map && !v->config_map->default_mode.set)
    v->config_map->default_mode = (nl_opt_i32_t){true, 0644};
  if (v->secret && !v->secret->default_mode.set)
    v->secret->default_mode = (nl_opt_i32_t){true, 0644};
  if (v->downward_api) {
    if (!v->downward_api->default_mode.set)
      v->downward_api->default_mode = (nl_opt_i32_t){true, 0644};
    downward(a, v->downward_api);
  }
  if (v->projected) {
    if (!v->projected->default_mode.set) v->projected->default_mode = (nl_opt_i32_t){true, 0644};
    for (size_t i = 0; i < v->projected->n_sources; i++) {
      nl_volume_projection_t *p = &v->projected->sources[i];
      if (p->downward_api) downward(a, p->downward_api);
      if (p->service_account_token && !p->service_account_token->expiration_seconds)
        p->service_account_token->expiration_seconds = 3600;
    }
  }
}

/* Adds name = q to l (arena-allocated), keeping it sorted. */
static void list_add(nl_arena_t *a, nl_resource_list_t *l, const char *name, nl_quantity_t q) {
  nl_resource_t *items = nl_arena_alloc(a, (l->n + 1) * sizeof *items);
  if (l->n) memcpy(items, l->items, l->n * sizeof *items);
  items[l->n++] = (nl_resource_t){nl_arena_strdup(a, name), q};
  l->items = items;
  nl__resource_list_sort(l);
}

/* The names some container of the pod has in its requests or limits. */
static void container_names(const nl_pod_spec_t *s, bool limits, const char **names, size_t *n,
                            size_t cap) {
  *n = 0;
  for (size_t k = 0; k < s->n_containers + s->n_init_containers; k++) {
    const nl_container_t *c = k < s->n_containers ? &s->containers[k]
                                                  : &s->init_containers[k - s->n_containers];
    const nl_resource_list_t *l = limits ? &c->resources.limits : &c->resources.requests;
    for (size_t i = 0; i < l->n; i++) {
      size_t j = 0;
      while (j < *n && strcmp(names[j], l->items[i].name) != 0) j++;
      if (j == *n && *n < cap) names[(*n)++] = l->items[i].name;
    }
  }
}

/* upstream defaultHugePagePodLimits then defaultPodRequests, after the
 * containers' defaults: pod-level hugepage limits default to the containers'
 * sum, pod-level requests to the containers' sum (cpu, memory) or else to the
 * pod-level limit. Only for a pod that has some pod-level resources. */
static void pod_resources(nl_arena_t *a, nl_pod_t *pod) {
  nl_resource_requirements_t *r = pod->spec.resources;
  if (!r || (!r->limits.n && !r->requests.n)) return;
  const char *names[64];
  size_t n;
  bool all;
  container_names(&pod->spec, true, names, &n, 64);
  for (size_t i = 0; i < n; i++)
    if (strncmp(names[i], "hugepages-", 10) == 0 && !nl_resource_list_get(&r->requests, names[i]) &&
        !nl_resource_list_get(&r->limits, names[i]))
      list_add(a, &r->limits, names[i],
               (nl_quantity_t){nl_pod_containers_amount(pod, names[i], true, &all), 0,
                               NL_QUANTITY_BINARY_SI});
  if (!r->limits.n) return;
  container_names(&pod->spec, false, names, &n, 64);
  for (size_t i = 0; i < n; i++) {
    bool cpu = strcmp(names[i], "cpu") == 0;
    if ((cpu || strcmp(names[i], "memory") == 0) && !nl_resource_list_get(&r->requests, names[i]))
      list_add(a, &r->requests, names[i],
               (nl_quantity_t){nl_pod_containers_amount(pod, names[i], false, &all),
                               cpu ? -3 : 0, cpu ? NL_QUANTITY_DECIMAL_SI : NL_QUANTITY_BINARY_SI});
  }
  for (size_t i = 0; i < r->limits.n; i++)
    if (nl_pod_level_resource(r->limits.items[i].name) &&
        !nl_resource_list_get(&r->requests, r->limits.items[i].name))
      list_add(a, &r->requests, r->limits.items[i].name, r->limits.items[i].q);
}

void nl_pod_set_defaults(nl_pod_t *pod) {
  nl_arena_t *a = pod->arena;
  assert(a->refs == 1); /* a shared pod is immutable */
  nl_pod_spec_t *s = &pod->spec;
  DEF_STR(a, s->dns_policy, "ClusterFirst");
  DEF_STR(a, s->restart_policy, "Always");
  DEF_STR(a, s->scheduler_name, "default-scheduler");
  if (!s->termination_grace_period_seconds.set)
    s->termination_grace_period_seconds = (nl_opt_i64_t){true, 30};
  if (!s->security_context) s->security_context = nl_arena_alloc(a, sizeof *s->security_context),
                            s->security_context->run_as_non_root = NL_UNSET;
  if (s->enable_service_links == NL_UNSET) s->enable_service_links = 1;
  for (size_t i = 0; i < s->n_init_containers; i++)
    container(a, &s->init_containers[i], s->host_network);
  for (size_t i = 0; i < s->n_containers; i++) container(a, &s->containers[i], s->host_network);
  for (size_t i = 0; i < s->n_ephemeral_containers; i++)
    container(a, &s->ephemeral_containers[i], s->host_network);
  for (size_t i = 0; i < s->n_volumes; i++) volume(a, &s->volumes[i]);
  pod_resources(a, pod);
}
