/* The service store behind the pods' service variables. */
#include "managers/services.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

#define MASTER_SERVICE "kubernetes" /* upstream masterServices */

void nl_service_free(nl_service_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_ports; i++) {
    free(s->ports[i].name);
    free(s->ports[i].protocol);
  }
  free(s->ports);
  free(s->namespace_);
  free(s->name);
  free(s->cluster_ip);
  free(s);
}

static char *jstr(const json_t *o, const char *key, const char *dflt) {
  const char *v = json_string_value(json_object_get(o, key));
  return nl_xstrdup(v && *v ? v : dflt);
}

int nl_service_decode(const char *json, size_t len, nl_service_t **out, nl_err_t **err) {
  json_error_t je;
  json_t *j = json_loadb(json, len, 0, &je);
  if (!json_is_object(j)) {
    json_decref(j);
    return nl_err_set(err, NL_EINVAL, "service: not a JSON object: %s", je.text);
  }
  json_t *meta = json_object_get(j, "metadata"), *spec = json_object_get(j, "spec");
  nl_service_t *s = nl_xcalloc(1, sizeof *s);
  s->namespace_ = jstr(meta, "namespace", "");
  s->name = jstr(meta, "name", "");
  s->cluster_ip = jstr(spec, "clusterIP", "");
  json_t *ports = json_object_get(spec, "ports");
  s->ports = nl_xcalloc(json_array_size(ports) ? json_array_size(ports) : 1, sizeof *s->ports);
  size_t i;
  json_t *p;
  json_array_foreach(ports, i, p) {
    json_int_t port = json_integer_value(json_object_get(p, "port"));
    if (port < 1 || port > 65535) continue;
    s->ports[s->n_ports++] = (nl_service_port_t){jstr(p, "name", ""), (int32_t)port,
                                                 jstr(p, "protocol", "TCP")};
  }
  json_decref(j);
  if (!*s->name) {
    nl_service_free(s);
    return nl_err_set(err, NL_EINVAL, "service: metadata.name: required");
  }
  *out = s;
  return 0;
}

/* makeEnvVariableName: upper case, '-' to '_'. */
static char *env_name(const char *s) {
  char *r = nl_xstrdup(s);
  for (char *p = r; *p; p++) *p = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
  return r;
}

static void push(nl_env_t **env, size_t *n, char *name, char *value) {
  *env = nl_xrealloc(*env, (*n + 1) * sizeof **env);
  (*env)[(*n)++] = (nl_env_t){name, value};
}

static void lower(char *s) {
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

static bool ip_set(const nl_service_t *s) {
  return *s->cluster_ip && strcmp(s->cluster_ip, "None") != 0 && s->n_ports > 0;
}

/* makeLinkVariables: the Docker-link variables of each port. */
static void link_vars(const nl_service_t *s, const char *prefix, nl_env_t **env, size_t *n) {
  bool v6 = strchr(s->cluster_ip, ':') != NULL;
  for (size_t i = 0; i < s->n_ports; i++) {
    const nl_service_port_t *p = &s->ports[i];
    char *proto = nl_xstrdup(p->protocol), *PROTO = env_name(p->protocol);
    lower(proto);
    char *url = nl_xasprintf("%s://%s%s%s:%d", proto, v6 ? "[" : "", s->cluster_ip,
                             v6 ? "]" : "", p->port);
    if (i == 0) push(env, n, nl_xasprintf("%s_PORT", prefix), nl_xstrdup(url));
    char *pp = nl_xasprintf("%s_PORT_%d_%s", prefix, p->port, PROTO);
    push(env, n, nl_xasprintf("%s", pp), url);
    push(env, n, nl_xasprintf("%s_PROTO", pp), proto);
    push(env, n, nl_xasprintf("%s_PORT", pp), nl_xasprintf("%d", p->port));
    push(env, n, nl_xasprintf("%s_ADDR", pp), nl_xstrdup(s->cluster_ip));
    free(pp);
    free(PROTO);
  }
}

void nl_service_env_from(const nl_service_t *const *svcs, size_t n, nl_env_t **env,
                         size_t *n_env) {
  for (size_t i = 0; i < n; i++) {
    const nl_service_t *s = svcs[i];
    if (!ip_set(s)) continue;
    char *prefix = env_name(s->name);
    push(env, n_env, nl_xasprintf("%s_SERVICE_HOST", prefix), nl_xstrdup(s->cluster_ip));
    char *sp = nl_xasprintf("%s_SERVICE_PORT", prefix);
    push(env, n_env, nl_xstrdup(sp), nl_xasprintf("%d", s->ports[0].port));
    for (size_t j = 0; j < s->n_ports; j++)
      if (*s->ports[j].name) {
        char *pn = env_name(s->ports[j].name);
        push(env, n_env, nl_xasprintf("%s_%s", sp, pn), nl_xasprintf("%d", s->ports[j].port));
        free(pn);
      }
    free(sp);
    link_vars(s, prefix, env, n_env);
    free(prefix);
  }
}

/* ---- the store ---- */

static char *key_of(const nl_service_t *s) {
  return nl_xasprintf("%s/%s", s->namespace_, s->name);
}

static void store_put(nl_services_t *s, const char *json, size_t len) {
  nl_service_t *svc;
  nl_err_t *err = NULL;
  if (nl_service_decode(json, len, &svc, &err) < 0) {
    nl_vlog(2, "services: %s", nl_err_msg(err));
    nl_err_free(&err);
    return;
  }
  char *key = key_of(svc);
  nl_service_free(nl_map_put(&s->by_key, key, svc));
  free(key);
}

static void free_service(void *p) { nl_service_free(p); }

static void on_list(void *ctx, const nl_kube_raw_t *items, size_t n, const char *rv) {
  nl_services_t *s = ctx;
  nl_map_free(&s->by_key, free_service);
  nl_map_init(&s->by_key);
  for (size_t i = 0; i < n; i++) store_put(s, items[i].json, items[i].len);
  if (!s->synced) nl_vlog(2, "services: %zu services listed (resourceVersion %s)", n, rv);
  s->synced = true;
  s->unreachable = false;
}

/* No answer at all (connection refused or unreachable): the node runs offline,
 * its API pods perhaps from the checkpoint. Their containers start without the
 * services' variables rather than not at all; upstream, which has no offline
 * start, waits for the list. */
static void on_list_error(void *ctx, int status, const nl_err_t *err) {
  nl_services_t *s = ctx;
  if (status != 0 || s->synced || s->unreachable) return;
  s->unreachable = true;
  nl_warn("services: the API server cannot be reached (%s): pods start without service "
          "environment variables until it answers",
          nl_err_msg(err));
}

static void on_event(void *ctx, const nl_kube_watch_event_t *ev) {
  nl_services_t *s = ctx;
  if (ev->type != NL_KUBE_WATCH_DELETED) {
    store_put(s, ev->object, ev->object_len);
    return;
  }
  nl_service_t *svc;
  nl_err_t *err = NULL;
  if (nl_service_decode(ev->object, ev->object_len, &svc, &err) < 0) {
    nl_err_free(&err);
    return;
  }
  char *key = key_of(svc);
  nl_service_free(nl_map_del(&s->by_key, key));
  free(key);
  nl_service_free(svc);
}

int nl_services_init(nl_services_t *s, uv_loop_t *loop, nl_kube_client_t *kube, nl_err_t **err) {
  memset(s, 0, sizeof *s);
  nl_map_init(&s->by_key);
  if (!kube) return 0;
  nl_reflector_opts_t o = {.path = "/api/v1/services"};
  nl_reflector_cbs_t cbs = {.on_list = on_list, .on_event = on_event,
                            .on_list_error = on_list_error};
  if (nl_reflector_new(&s->refl, loop, kube, &o, &cbs, s, err) < 0) return -1;
  s->enabled = true;
  return 0;
}

void nl_services_start(nl_services_t *s) {
  if (s->refl) nl_reflector_start(s->refl);
}

static void finish(nl_services_t *s) {
  nl_map_free(&s->by_key, free_service);
  nl_map_init(&s->by_key);
  s->refl = NULL;
  s->synced = false;
  s->unreachable = false;
  if (s->done) s->done(s);
}

static void on_refl_stopped(void *ctx) { finish(ctx); }

void nl_services_stop(nl_services_t *s, nl_services_done_cb done) {
  s->done = done;
  if (s->refl) nl_reflector_stop(s->refl, on_refl_stopped, s);
  else finish(s);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const nl_env_t *)a)->name, ((const nl_env_t *)b)->name);
}

/* upstream IsStaticPod: the config.source annotation says a source other than
 * the API server. */
static bool is_static(const nl_pod_t *pod) {
  const char *src = nl_kvlist_get(&pod->metadata.annotations, NL_ANNOTATION_CONFIG_SOURCE);
  return src && strcmp(src, "api") != 0;
}

int nl_services_env(void *ctx, const nl_pod_t *pod, nl_env_t **out, size_t *n, nl_err_t **err) {
  nl_services_t *s = ctx;
  *out = NULL;
  *n = 0;
  if (!s->enabled) return 0;
  if (!is_static(pod) && !s->synced && !s->unreachable)
    return nl_err_set(err, EAGAIN,
                      "services have not yet been read at least once, cannot construct envvars");
  const char *ns = pod->metadata.namespace_ ? pod->metadata.namespace_ : "";
  bool links = pod->spec.enable_service_links != 0; /* defaulted to true */
  size_t cap = nl_map_size(&s->by_key), k = 0;
  const nl_service_t **pick = nl_xcalloc(cap ? cap : 1, sizeof *pick);
  nl_map_iter_t it;
  const char *key;
  void *v;
  for (nl_map_iter_init(&it, &s->by_key); nl_map_iter_next(&it, &key, &v);) {
    const nl_service_t *svc = v;
    if (!ip_set(svc)) continue;
    bool master = !strcmp(svc->namespace_, "default") && !strcmp(svc->name, MASTER_SERVICE);
    if (master || (links && !strcmp(svc->namespace_, ns))) pick[k++] = svc;
  }
  /* upstream keys its map by service name: a pod's own `kubernetes` service
   * in its namespace replaces default's unless it is in default. */
  for (size_t i = 0; i < k; i++)
    for (size_t j = 0; j < k; j++)
      if (i != j && pick[i] && pick[j] && !strcmp(pick[i]->name, pick[j]->name) &&
          !strcmp(pick[i]->namespace_, "default"))
        pick[i] = NULL;
  size_t m = 0;
  for (size_t i = 0; i < k; i++)
    if (pick[i]) pick[m++] = pick[i];
  nl_service_env_from(pick, m, out, n);
  free(pick);
  if (*n) qsort(*out, *n, sizeof **out, by_name);
  return 0;
}
