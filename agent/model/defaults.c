/* Upstream's v1 defaulting (pkg/apis/core/v1/defaults.go) for what a pod carries. */
#include <assert.h>
#include <string.h>

#include "agent/model/internal.h"

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
}
