/* Upstream's ValidatePodCreate rules (pkg/apis/core/validation) that matter on a
 * node, with its messages shortened to `<path>: <what>, got <value>`. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "agent/model/internal.h"
#include "agent/model/podres.h"

typedef struct val {
  nl__errs_t e;
  const nl_pod_t *pod;
} val_t;

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
/* Run the statements with `name` (or `[i]`) pushed on the field path. */
#define KEY(name, ...) KEY_(name, CAT(m_, __COUNTER__), __VA_ARGS__)
#define KEY_(name, m, ...)                       \
  do {                                           \
    size_t m = nl__path_key(&v->e, name);        \
    __VA_ARGS__;                                 \
    nl__path_pop(&v->e, m);                      \
  } while (0)
#define IDX(i, ...) IDX_(i, CAT(m_, __COUNTER__), __VA_ARGS__)
#define IDX_(i, m, ...)                          \
  do {                                           \
    size_t m = nl__path_idx(&v->e, i);           \
    __VA_ARGS__;                                 \
    nl__path_pop(&v->e, m);                      \
  } while (0)
#define ERR(...) nl__errf(&v->e, __VA_ARGS__)

static bool empty(const char *s) { return !s || !*s; }
static bool eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }
static bool one_of(const char *s, const char *const *set) {
  for (; *set; set++)
    if (eq(s, *set)) return true;
  return false;
}

/* upstream validateMountRecursiveReadOnly */
static void recursive_read_only(val_t *v, const nl_volume_mount_t *m) {
  const char *r = m->recursive_read_only;
  if (!r || eq(r, "Disabled")) return;
  if (!eq(r, "IfPossible") && !eq(r, "Enabled")) {
    ERR("Unsupported value: \"%s\": supported values: \"Disabled\", \"Enabled\", \"IfPossible\"", r);
    return;
  }
  if (!m->read_only) ERR("Forbidden: may only be specified when readOnly is true");
  if (m->mount_propagation && !eq(m->mount_propagation, "None"))
    ERR("Forbidden: may only be specified when mountPropagation is None or not specified");
}

/* ---- name syntax (k8s.io/apimachinery/pkg/util/validation) ---- */

static bool alnum_lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool nl_is_dns1123_label(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 63 || !alnum_lower(s[0]) || !alnum_lower(s[n - 1])) return false;
  for (size_t i = 0; i < n; i++)
    if (!alnum_lower(s[i]) && s[i] != '-') return false;
  return true;
}

bool nl_is_dns1123_subdomain(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 253) return false;
  char buf[254];
  memcpy(buf, s, n + 1);
  for (char *tok = buf, *dot; tok; tok = dot ? dot + 1 : NULL) {
    dot = strchr(tok, '.');
    if (dot) *dot = 0;
    size_t l = strlen(tok);
    if (l == 0 || !alnum_lower(tok[0]) || !alnum_lower(tok[l - 1])) return false;
    for (size_t i = 0; i < l; i++)
      if (!alnum_lower(tok[i]) && tok[i] != '-') return false;
  }
  return true;
}

static bool is_alnum(char c) { return isalnum((unsigned char)c) != 0; }

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most max long (0: any) */
static bool is_qualified_part(const char *s, size_t len, size_t max) {
  if (len == 0 || (max && len > max) || !is_alnum(s[0]) || !is_alnum(s[len - 1])) return false;
  for (size_t i = 0; i < len; i++)
    if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') return false;
  return true;
}

static bool is_qualified_name(const char *s) {
  const char *slash = strchr(s, '/');
  if (!slash) return is_qualified_part(s, strlen(s), 63);
  char prefix[254];
  size_t pl = (size_t)(slash - s);
  if (pl == 0 || pl > 253) return false;
  memcpy(prefix, s, pl);
  prefix[pl] = 0;
  return nl_is_dns1123_subdomain(prefix) && is_qualified_part(slash + 1, strlen(slash + 1), 63);
}

static bool is_label_value(const char *s) {
  return !*s || is_qualified_part(s, strlen(s), 63);
}

/* IANA_SVC_NAME: 1-15 of [a-z0-9-], a letter somewhere, no "--", no edge '-' */
static bool is_port_name(const char *s) {
  size_t n = strlen(s);
  bool letter = false;
  if (n == 0 || n > 15 || s[0] == '-' || s[n - 1] == '-') return false;
  for (size_t i = 0; i < n; i++) {
    if (!alnum_lower(s[i]) && s[i] != '-') return false;
    if (s[i] >= 'a' && s[i] <= 'z') letter = true;
    if (i && s[i] == '-' && s[i - 1] == '-') return false;
  }
  return letter;
}

/* [-._a-zA-Z][-._a-zA-Z0-9]* */
static bool is_env_name(const char *s) {
  if (!*s || isdigit((unsigned char)s[0])) return false;
  for (; *s; s++)
    if (!is_alnum(*s) && *s != '-' && *s != '.' && *s != '_') return false;
  return true;
}

/* [-._a-zA-Z0-9]+, at most 253, not "." or ".." */
static bool is_config_key(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 253 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return false;
  for (; *s; s++)
    if (!is_alnum(*s) && *s != '-' && *s != '.' && *s != '_') return false;
  return true;
}

static bool is_ip(const char *s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* a relative path without ".." elements */
static void local_path(val_t *v, const char *p) {
  if (empty(p)) return;
  if (p[0] == '/') {
    ERR("must be a relative path, got %s", p);
    return;
  }
  for (const char *s = p; *s;) {
    const char *e = strchr(s, '/');
    size_t l = e ? (size_t)(e - s) : strlen(s);
    if (l == 2 && s[0] == '.' && s[1] == '.') {
      ERR("must not contain '..', got %s", p);
      return;
    }
    s += l + (e ? 1 : 0);
  }
}

static void name_field(val_t *v, const char *s, bool subdomain, const char *what) {
  if (empty(s)) ERR("required");
  else if (subdomain ? !nl_is_dns1123_subdomain(s) : !nl_is_dns1123_label(s))
    ERR("must be a DNS-1123 %s (lowercase letters, digits, '-'%s, at most %d), got %s",
        subdomain ? "subdomain" : "label", subdomain ? ", '.'" : "", subdomain ? 253 : 63, s);
  (void)what;
}

/* ---- metadata ---- */

static void kv_keys(val_t *v, const nl_kvlist_t *l, bool labels) {
  size_t total = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (!is_qualified_name(l->items[i].key))
      ERR("invalid key %s: must be a qualified name ([prefix/]name, name at most 63 of "
          "[A-Za-z0-9-_.])", l->items[i].key);
    if (labels && !is_label_value(l->items[i].value))
      ERR("invalid value %s for key %s: must be at most 63 of [A-Za-z0-9-_.], starting and "
          "ending alphanumeric", l->items[i].value, l->items[i].key);
    total += strlen(l->items[i].key) + strlen(l->items[i].value);
  }
  if (!labels && total > 256 * 1024) ERR("must have at most 262144 bytes, got %zu", total);
}

static void metadata(val_t *v, const nl_object_meta_t *m) {
  KEY("name", name_field(v, m->name, true, "name"));
  KEY("namespace", if (!empty(m->namespace_)) name_field(v, m->namespace_, false, "namespace"));
  KEY("labels", kv_keys(v, &m->labels, true));
  KEY("annotations", kv_keys(v, &m->annotations, false));
}

/* ---- resources ---- */

static bool standard_resource(const char *n) {
  static const char *const std[] = {"cpu", "memory", "ephemeral-storage", "storage", NULL};
  return one_of(n, std) || strncmp(n, "hugepages-", 10) == 0 || strchr(n, '/');
}

static void resource_list(val_t *v, const nl_resource_list_t *l) {
  for (size_t i = 0; i < l->n; i++) {
    size_t m = nl__path_map(&v->e, l->items[i].name);
    const char *n = l->items[i].name;
    char q[NL_QUANTITY_STRLEN];
    if (!standard_resource(n) && !is_qualified_name(n))
      ERR("must be a standard resource name or a qualified name, got %s", n);
    else if (!standard_resource(n))
      ERR("must be a standard resource (cpu, memory, ephemeral-storage, hugepages-*) or "
          "contain '/', got %s", n);
    if (nl_quantity_sign(&l->items[i].q) < 0)
      ERR("must be greater than or equal to 0, got %s", nl_quantity_format(&l->items[i].q, q));
    nl__path_pop(&v->e, m);
  }
}

static void resources(val_t *v, const nl_resource_requirements_t *r) {
  KEY("limits", resource_list(v, &r->limits));
  KEY("requests", resource_list(v, &r->requests));
  for (size_t i = 0; i < r->requests.n; i++) {
    const nl_resource_t *req = &r->requests.items[i];
    const nl_quantity_t *lim = nl_resource_list_get(&r->limits, req->name);
    if (lim && nl_quantity_cmp(&req->q, lim) > 0) {
      char a[NL_QUANTITY_STRLEN], b[NL_QUANTITY_STRLEN];
      KEY("requests", {
        size_t m = nl__path_map(&v->e, req->name);
        ERR("must be less than or equal to %s limit of %s, got %s", req->name,
            nl_quantity_format(lim, b), nl_quantity_format(&req->q, a));
        nl__path_pop(&v->e, m);
      });
    }
  }
}

/* upstream validatePodResources: spec.resources names only what a pod cgroup
 * can bound, and neither the containers' sum of requests nor one container's
 * limit may exceed the pod's. */
static void pod_resources(val_t *v, const nl_pod_spec_t *s) {
  const nl_resource_requirements_t *r = s->resources;
  if (eq(s->os_name, "windows")) {
    ERR("Forbidden: may not be set for a windows pod");
    return;
  }
  resources(v, r);
  static const char *const lists[2] = {"limits", "requests"};
  for (int k = 0; k < 2; k++) {
    const nl_resource_list_t *l = k ? &r->requests : &r->limits;
    for (size_t i = 0; i < l->n; i++)
      if (!nl_pod_level_resource(l->items[i].name))
        KEY(lists[k], {
          size_t m = nl__path_map(&v->e, l->items[i].name);
          ERR("Unsupported value: \"%s\": supported values: \"cpu\", \"hugepages-\", "
              "\"memory\"", l->items[i].name);
          nl__path_pop(&v->e, m);
        });
  }
  nl_pod_t probe = {.spec = *s};
  char a[NL_QUANTITY_STRLEN], b[NL_QUANTITY_STRLEN];
  for (size_t i = 0; i < r->requests.n; i++) {
    const nl_resource_t *req = &r->requests.items[i];
    bool all;
    int64_t sum = nl_pod_containers_amount(&probe, req->name, false, &all);
    bool milli = strcmp(req->name, "cpu") == 0;
    int64_t want = milli ? nl_quantity_milli_value(&req->q) : nl_quantity_value(&req->q);
    nl_quantity_t agg = {sum, milli ? -3 : 0, req->q.format};
    if (sum > want)
      KEY("requests", {
        size_t m = nl__path_map(&v->e, req->name);
        ERR("must be greater than or equal to aggregate container requests of %s, got %s",
            nl_quantity_format(&agg, a), nl_quantity_format(&req->q, b));
        nl__path_pop(&v->e, m);
      });
  }
  for (size_t i = 0; i < r->limits.n; i++) {
    const nl_resource_t *lim = &r->limits.items[i];
    if (strncmp(lim->name, "hugepages-", 10) != 0) continue;
    bool all;
    int64_t sum = nl_pod_containers_amount(&probe, lim->name, true, &all);
    nl_quantity_t agg = {sum, 0, lim->q.format};
    if (sum > nl_quantity_value(&lim->q))
      KEY("limits", {
        size_t m = nl__path_map(&v->e, lim->name);
        ERR("must be greater than or equal to aggregate container limits of %s, got %s",
            nl_quantity_format(&agg, a), nl_quantity_format(&lim->q, b));
        nl__path_pop(&v->e, m);
      });
  }
  for (size_t c = 0; c < s->n_containers; c++) {
    const nl_resource_list_t *cl = &s->containers[c].resources.limits;
    for (size_t i = 0; i < cl->n; i++) {
      const nl_quantity_t *pl = nl_resource_list_get(&r->limits, cl->items[i].name);
      if (pl && nl_quantity_cmp(&cl->items[i].q, pl) > 0)
        KEY("containers", IDX(c, {
          size_t m = nl__path_map(&v->e, cl->items[i].name);
          KEY("limits", ERR("must be less than or equal to pod limits of %s, got %s",
                            nl_quantity_format(pl, a), nl_quantity_format(&cl->items[i].q, b)));
          nl__path_pop(&v->e, m);
        }));
    }
  }
}

/* ---- env ---- */

static const char *const env_field_paths[] = {
    "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
    "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP",
    "status.podIPs", "metadata.labels", "metadata.annotations", NULL};

static void field_ref(val_t *v, const nl_field_ref_t *f, bool volume) {
  KEY("apiVersion", if (empty(f->api_version)) ERR("required"));
  KEY("fieldPath", {
    const char *p = f->field_path;
    if (empty(p)) ERR("required");
    else if (strncmp(p, "metadata.labels['", 17) == 0 || strncmp(p, "metadata.annotations['", 22) == 0) {
      size_t n = strlen(p);
      if (n < 3 || strcmp(p + n - 2, "']") != 0) ERR("invalid subscript, got %s", p);
    } else if (!one_of(p, env_field_paths) ||
               (!volume && (eq(p, "metadata.labels") || eq(p, "metadata.annotations"))) ||
               (volume && strncmp(p, "status.", 7) == 0) || (volume && strncmp(p, "spec.", 5) == 0))
      ERR("unsupported value %s", p);
  });
}

static void resource_field_ref(val_t *v, const nl_resource_field_ref_t *r, bool volume) {
  static const char *const ok[] = {"limits.cpu", "limits.memory", "limits.ephemeral-storage",
                                   "requests.cpu", "requests.memory",
                                   "requests.ephemeral-storage", NULL};
  if (volume) KEY("containerName", if (empty(r->container_name)) ERR("required"));
  KEY("resource", {
    if (empty(r->resource)) ERR("required");
    else if (!one_of(r->resource, ok) && strncmp(r->resource, "limits.hugepages-", 17) &&
             strncmp(r->resource, "requests.hugepages-", 19))
      ERR("unsupported value %s", r->resource);
  });
  /* Zero is the API's unset divisor (upstream validateContainerResourceDivisor
   * accepts it; the kubelet reads it as 1). */
  if (r->has_divisor && nl_quantity_sign(&r->divisor) < 0)
    KEY("divisor", ERR("must be positive"));
}

static void key_ref(val_t *v, const nl_key_ref_t *r) {
  KEY("name", if (empty(r->name)) ERR("required"));
  KEY("key", {
    if (empty(r->key)) ERR("required");
    else if (!is_config_key(r->key)) ERR("must be a valid config key ([-._a-zA-Z0-9]+), got %s", r->key);
  });
}

static const nl_volume_t *volume_named(const val_t *v, const char *name);

/* upstream validateFileKeySelector and validateFileKeyRefVolumes */
static void file_key_ref(val_t *v, const nl_file_key_ref_t *r) {
  KEY("key", {
    if (empty(r->key)) ERR("required");
    else
      for (const char *s = r->key; *s; s++)
        if (*s < 0x20 || *s > 0x7e || *s == '=') {
          ERR("must consist of printable ASCII characters except '=', got %s", r->key);
          break;
        }
  });
  KEY("volumeName", {
    const nl_volume_t *vol = empty(r->volume_name) ? NULL : volume_named(v, r->volume_name);
    if (empty(r->volume_name)) ERR("required");
    else if (!vol) ERR("not found: no volume named %s", r->volume_name);
    else if (!vol->empty_dir) ERR("referenced volume must be of type emptyDir, got %s", r->volume_name);
  });
  KEY("path", {
    if (empty(r->path)) ERR("required");
    else
      for (const char *s = r->path; *s;) {
        const char *e = strchr(s, '/');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (l == 2 && s[0] == '.' && s[1] == '.') {
          ERR("must not contain '..', got %s", r->path);
          break;
        }
        s += l + (e ? 1 : 0);
      }
  });
}

static void env(val_t *v, const nl_env_var_t *e) {
  KEY("name", {
    if (empty(e->name)) ERR("required");
    else if (!is_env_name(e->name))
      ERR("must be a C identifier-like name ([-._a-zA-Z][-._a-zA-Z0-9]*), got %s", e->name);
  });
  if (!e->value_from) return;
  KEY("valueFrom", {
    const nl_env_source_t *s = e->value_from;
    int n = !!s->field_ref + !!s->resource_field_ref + !!s->config_map_key_ref + !!s->secret_key_ref +
            !!s->file_key_ref;
    if (!empty(e->value)) ERR("may not be specified when `value` is not empty");
    if (n == 0)
      ERR("must specify one of: fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef or fileKeyRef");
    else if (n > 1) ERR("may not have more than one field specified at a time");
    else if (s->field_ref) KEY("fieldRef", field_ref(v, s->field_ref, false));
    else if (s->resource_field_ref) KEY("resourceFieldRef", resource_field_ref(v, s->resource_field_ref, false));
    else if (s->config_map_key_ref) KEY("configMapKeyRef", key_ref(v, s->config_map_key_ref));
    else if (s->secret_key_ref) KEY("secretKeyRef", key_ref(v, s->secret_key_ref));
    else KEY("fileKeyRef", file_key_ref(v, s->file_key_ref));
  });
}

static void env_from(val_t *v, const nl_env_from_t *e) {
  if (!empty(e->prefix) && !is_env_name(e->prefix))
    KEY("prefix", ERR("must be a C identifier-like name, got %s", e->prefix));
  int n = !!e->config_map_ref + !!e->secret_ref;
  if (n == 0) ERR("must specify one of: configMapRef or secretRef");
  else if (n > 1) ERR("may not have more than one field specified at a time");
  else if (e->config_map_ref) KEY("configMapRef", KEY("name", if (empty(e->config_map_ref->name)) ERR("required")));
  else KEY("secretRef", KEY("name", if (empty(e->secret_ref->name)) ERR("required")));
}

/* ---- probes, hooks ---- */

static void port_num_or_name(val_t *v, const nl_intorstr_t *p) {
  KEY("port", {
    if (!p->set) ERR("required");
    else if (p->is_str) {
      if (!is_port_name(p->str)) ERR("must be a port name (IANA_SVC_NAME: at most 15 of [a-z0-9-] with a letter), got %s", p->str);
    } else if (p->num < 1 || p->num > 65535) {
      ERR("must be between 1 and 65535, got %d", p->num);
    }
  });
}

static void handler(val_t *v, const nl_handler_t *h, bool probe) {
  int n = !!h->exec + !!h->http_get + !!h->tcp_socket + !!h->grpc + !!h->sleep;
  if (n == 0) {
    ERR(probe ? "must specify a handler type (exec, httpGet, tcpSocket or grpc)"
              : "must specify a handler type (exec, httpGet, tcpSocket or sleep)");
    return;
  }
  if (n > 1) ERR("may not specify more than 1 handler type");
  if (h->exec) KEY("exec", KEY("command", if (!h->exec->command.n) ERR("required")));
  if (h->http_get) KEY("httpGet", {
      port_num_or_name(v, &h->http_get->port);
      static const char *const schemes[] = {"HTTP", "HTTPS", NULL};
      if (!empty(h->http_get->scheme) && !one_of(h->http_get->scheme, schemes))
        KEY("scheme", ERR("must be HTTP or HTTPS, got %s", h->http_get->scheme));
      for (size_t i = 0; i < h->http_get->n_headers; i++)
        if (empty(h->http_get->headers[i].key))
          KEY("httpHeaders", IDX(i, KEY("name", ERR("required"))));
    });
  if (h->tcp_socket) KEY("tcpSocket", port_num_or_name(v, &h->tcp_socket->port));
  if (h->grpc) {
    if (!probe) KEY("grpc", ERR("forbidden in lifecycle hooks"));
    else if (h->grpc->port < 1 || h->grpc->port > 65535)
      KEY("grpc", KEY("port", ERR("must be between 1 and 65535, got %d", h->grpc->port)));
  }
  if (h->sleep) {
    if (probe) KEY("sleep", ERR("forbidden in probes"));
    else if (h->sleep->seconds < 0) KEY("sleep", KEY("seconds", ERR("must be non-negative, got %lld", (long long)h->sleep->seconds)));
  }
}

static void nonneg(val_t *v, const char *field, int64_t x) {
  if (x < 0) KEY(field, ERR("must be greater than or equal to 0, got %lld", (long long)x));
}

static void probe(val_t *v, const nl_probe_t *p, bool success_must_be_one) {
  handler(v, &p->handler, true);
  nonneg(v, "initialDelaySeconds", p->initial_delay_seconds);
  nonneg(v, "timeoutSeconds", p->timeout_seconds);
  nonneg(v, "periodSeconds", p->period_seconds);
  nonneg(v, "successThreshold", p->success_threshold);
  nonneg(v, "failureThreshold", p->failure_threshold);
  if (success_must_be_one && p->success_threshold != 1)
    KEY("successThreshold", ERR("must be 1, got %d", p->success_threshold));
  if (p->termination_grace_period_seconds.set && p->termination_grace_period_seconds.v <= 0)
    KEY("terminationGracePeriodSeconds", ERR("must be greater than 0, got %lld",
                                              (long long)p->termination_grace_period_seconds.v));
}

/* ---- containers ---- */

typedef struct names { /* container names seen so far, for duplicates */
  const char **v;
  size_t n;
} names_t;

static const nl_volume_t *volume_named(const val_t *v, const char *name) {
  for (size_t i = 0; i < v->pod->spec.n_volumes; i++)
    if (eq(v->pod->spec.volumes[i].name, name)) return &v->pod->spec.volumes[i];
  return NULL;
}

static bool volume_exists(const val_t *v, const char *name) { return volume_named(v, name) != NULL; }

/* A container's own restartPolicy and restartPolicyRules (ContainerRestartRules
 * and RestartAllContainersOnContainerExits, both on by default upstream): the
 * same checks for init and regular containers. */
static void restart_policy(val_t *v, const nl_container_t *c) {
  static const char *const policies[] = {"Always", "OnFailure", "Never", NULL};
  static const char *const actions[] = {"Restart", "RestartAllContainers", NULL};
  static const char *const operators[] = {"In", "NotIn", NULL};
  if (!c->restart_policy) {
    if (c->n_restart_policy_rules)
      KEY("restartPolicy", ERR("required: must specify restartPolicy when restart rules are used"));
  } else if (!one_of(c->restart_policy, policies)) {
    KEY("restartPolicy", ERR("must be one of Always, OnFailure, Never, got %s", c->restart_policy));
  }
  if (c->n_restart_policy_rules > 20)
    KEY("restartPolicyRules", ERR("must have at most 20 items, got %zu", c->n_restart_policy_rules));
  for (size_t i = 0; i < c->n_restart_policy_rules; i++) {
    const nl_restart_rule_t *r = &c->restart_policy_rules[i];
    KEY("restartPolicyRules", IDX(i, {
      if (!one_of(r->action, actions))
        KEY("action", ERR("must be one of Restart, RestartAllContainers, got %s", r->action ? r->action : ""));
      if (!r->has_exit_codes) KEY("exitCodes", ERR("required"));
      else {
        if (!one_of(r->operator_, operators))
          KEY("exitCodes", KEY("operator", ERR("must be one of In, NotIn, got %s", r->operator_ ? r->operator_ : "")));
        if (r->n_values > 255)
          KEY("exitCodes", KEY("values", ERR("must have at most 255 items, got %zu", r->n_values)));
      }
    }));
  }
}

static void container(val_t *v, const nl_container_t *c, bool init, names_t *seen) {
  KEY("name", {
    if (empty(c->name)) ERR("required");
    else if (!nl_is_dns1123_label(c->name))
      ERR("must be a DNS-1123 label (lowercase letters, digits, '-', at most 63), got %s", c->name);
    else {
      for (size_t i = 0; i < seen->n; i++)
        if (eq(seen->v[i], c->name)) ERR("duplicate value %s", c->name);
      seen->v[seen->n++] = c->name;
    }
  });
  KEY("image", if (empty(c->image)) ERR("required"));
  for (size_t i = 0; i < c->n_ports; i++) {
    const nl_container_port_t *p = &c->ports[i];
    KEY("ports", IDX(i, {
      if (!empty(p->name)) {
        if (!is_port_name(p->name))
          KEY("name", ERR("must be a port name (IANA_SVC_NAME: at most 15 of [a-z0-9-] with a letter), got %s", p->name));
        for (size_t j = 0; j < i; j++)
          if (eq(c->ports[j].name, p->name)) KEY("name", ERR("duplicate value %s", p->name));
      }
      if (p->container_port < 1 || p->container_port > 65535)
        KEY("containerPort", ERR("must be between 1 and 65535, got %d", p->container_port));
      if (p->host_port < 0 || p->host_port > 65535)
        KEY("hostPort", ERR("must be between 1 and 65535, got %d", p->host_port));
      static const char *const protos[] = {"TCP", "UDP", "SCTP", NULL};
      if (empty(p->protocol)) KEY("protocol", ERR("required"));
      else if (!one_of(p->protocol, protos))
        KEY("protocol", ERR("must be one of TCP, UDP, SCTP, got %s", p->protocol));
      if (!empty(p->host_ip) && !is_ip(p->host_ip))
        KEY("hostIP", ERR("must be a valid IP address, got %s", p->host_ip));
      if (v->pod->spec.host_network && p->host_port && p->host_port != p->container_port)
        KEY("hostPort", ERR("must match containerPort when hostNetwork is true, got %d", p->host_port));
    }));
  }
  for (size_t i = 0; i < c->n_env_from; i++) KEY("envFrom", IDX(i, env_from(v, &c->env_from[i])));
  for (size_t i = 0; i < c->n_env; i++) KEY("env", IDX(i, env(v, &c->env[i])));
  KEY("resources", resources(v, &c->resources));
  for (size_t i = 0; i < c->n_resize_policy; i++) {
    const nl_resize_policy_t *r = &c->resize_policy[i];
    KEY("resizePolicy", IDX(i, {
      static const char *const names[] = {"cpu", "memory", NULL};
      static const char *const policies[] = {"NotRequired", "RestartContainer", NULL};
      if (empty(r->resource_name)) KEY("resourceName", ERR("required"));
      else if (!one_of(r->resource_name, names))
        KEY("resourceName", ERR("must be one of cpu, memory, got %s", r->resource_name));
      else for (size_t j = 0; j < i; j++)
        if (eq(c->resize_policy[j].resource_name, r->resource_name))
          KEY("resourceName", ERR("must be unique, got %s", r->resource_name));
      if (empty(r->restart_policy)) KEY("restartPolicy", ERR("required"));
      else if (!one_of(r->restart_policy, policies))
        KEY("restartPolicy", ERR("must be one of NotRequired, RestartContainer, got %s", r->restart_policy));
    }));
  }
  for (size_t i = 0; i < c->n_volume_mounts; i++) {
    const nl_volume_mount_t *m = &c->volume_mounts[i];
    KEY("volumeMounts", IDX(i, {
      KEY("name", {
        if (empty(m->name)) ERR("required");
        else if (!volume_exists(v, m->name)) ERR("not found: no volume named %s", m->name);
      });
      KEY("mountPath", {
        if (empty(m->mount_path)) ERR("required");
        else for (size_t j = 0; j < i; j++)
          if (eq(c->volume_mounts[j].mount_path, m->mount_path)) ERR("must be unique, got %s", m->mount_path);
      });
      KEY("subPath", local_path(v, m->sub_path));
      if (!empty(m->sub_path) && !empty(m->sub_path_expr))
        KEY("subPathExpr", ERR("subPathExpr and subPath are mutually exclusive"));
      static const char *const props[] = {"None", "HostToContainer", "Bidirectional", NULL};
      if (!empty(m->mount_propagation) && !one_of(m->mount_propagation, props))
        KEY("mountPropagation", ERR("must be one of None, HostToContainer, Bidirectional, got %s", m->mount_propagation));
    }));
    /* upstream's path has no index here: `volumeMounts.recursiveReadOnly` */
    KEY("volumeMounts", KEY("recursiveReadOnly", recursive_read_only(v, m)));
  }
  bool sidecar = init && eq(c->restart_policy, "Always");
  restart_policy(v, c);
  bool may_probe = !init || sidecar;
  if (c->liveness_probe) KEY("livenessProbe", may_probe ? probe(v, c->liveness_probe, true) : ERR("may not be set for init containers"));
  if (c->readiness_probe) KEY("readinessProbe", may_probe ? probe(v, c->readiness_probe, false) : ERR("may not be set for init containers"));
  if (c->startup_probe) KEY("startupProbe", may_probe ? probe(v, c->startup_probe, true) : ERR("may not be set for init containers"));
  if (c->lifecycle) KEY("lifecycle", {
      if (!may_probe) ERR("may not be set for init containers");
      else {
        if (c->lifecycle->post_start) KEY("postStart", handler(v, c->lifecycle->post_start, false));
        if (c->lifecycle->pre_stop) KEY("preStop", handler(v, c->lifecycle->pre_stop, false));
      }
    });
  static const char *const pulls[] = {"Always", "IfNotPresent", "Never", NULL};
  if (empty(c->image_pull_policy)) KEY("imagePullPolicy", ERR("required"));
  else if (!one_of(c->image_pull_policy, pulls))
    KEY("imagePullPolicy", ERR("must be one of Always, IfNotPresent, Never, got %s", c->image_pull_policy));
  static const char *const tmp[] = {"File", "FallbackToLogsOnError", NULL};
  if (empty(c->termination_message_policy)) KEY("terminationMessagePolicy", ERR("required"));
  else if (!one_of(c->termination_message_policy, tmp))
    KEY("terminationMessagePolicy", ERR("must be File or FallbackToLogsOnError, got %s", c->termination_message_policy));
  if (c->security_context) KEY("securityContext", {
      const nl_security_context_t *s = c->security_context;
      if (s->run_as_user.set && (s->run_as_user.v < 0 || s->run_as_user.v > 2147483647))
        KEY("runAsUser", ERR("must be between 0 and 2147483647, got %lld", (long long)s->run_as_user.v));
      if (s->run_as_group.set && (s->run_as_group.v < 0 || s->run_as_group.v > 2147483647))
        KEY("runAsGroup", ERR("must be between 0 and 2147483647, got %lld", (long long)s->run_as_group.v));
      if (s->privileged == 1 && s->allow_privilege_escalation == 0)
        KEY("allowPrivilegeEscalation", ERR("cannot set allowPrivilegeEscalation to false and privileged to true"));
    });
}

/* ---- volumes ---- */

static void mode(val_t *v, const char *field, nl_opt_i32_t m) {
  if (m.set && (m.v < 0 || m.v > 0777))
    KEY(field, ERR("must be a number between 0 and 0777 (octal), both inclusive, got %d", m.v));
}

static void items(val_t *v, const nl_key_to_path_t *it, size_t n) {
  for (size_t i = 0; i < n; i++)
    KEY("items", IDX(i, {
      KEY("key", if (empty(it[i].key)) ERR("required"));
      KEY("path", { if (empty(it[i].path)) ERR("required"); else local_path(v, it[i].path); });
      mode(v, "mode", it[i].mode);
    }));
}

static void downward(val_t *v, const nl_downward_api_source_t *d) {
  for (size_t i = 0; i < d->n_items; i++) {
    const nl_downward_api_file_t *f = &d->items[i];
    KEY("items", IDX(i, {
      KEY("path", { if (empty(f->path)) ERR("required"); else local_path(v, f->path); });
      if (!!f->field_ref + !!f->resource_field_ref != 1)
        ERR("must specify exactly one of fieldRef and resourceFieldRef");
      if (f->field_ref) KEY("fieldRef", field_ref(v, f->field_ref, true));
      if (f->resource_field_ref) KEY("resourceFieldRef", resource_field_ref(v, f->resource_field_ref, true));
      mode(v, "mode", f->mode);
    }));
  }
  mode(v, "defaultMode", d->default_mode);
}

static void volume(val_t *v, const nl_volume_t *vol, size_t idx) {
  KEY("name", {
    if (empty(vol->name)) ERR("required");
    else if (!nl_is_dns1123_label(vol->name))
      ERR("must be a DNS-1123 label (lowercase letters, digits, '-', at most 63), got %s", vol->name);
    else for (size_t j = 0; j < idx; j++)
      if (eq(v->pod->spec.volumes[j].name, vol->name)) ERR("duplicate value %s", vol->name);
  });
  int n = !!vol->host_path + !!vol->empty_dir + !!vol->config_map + !!vol->secret +
          !!vol->persistent_volume_claim + !!vol->downward_api + !!vol->projected + !!vol->image;
  if (vol->unsupported) {
    KEY(vol->unsupported, ERR("volume type not supported by nanolet"));
    return;
  }
  if (n == 0) ERR("must specify a volume type");
  else if (n > 1) ERR("may not specify more than 1 volume type");
  if (vol->host_path) KEY("hostPath", {
      static const char *const types[] = {"", "DirectoryOrCreate", "Directory", "FileOrCreate",
                                          "File", "Socket", "CharDevice", "BlockDevice", NULL};
      KEY("path", {
        if (empty(vol->host_path->path)) ERR("required");
        else for (const char *s = vol->host_path->path; *s;) {
          const char *e = strchr(s, '/');
          size_t l = e ? (size_t)(e - s) : strlen(s);
          if (l == 2 && s[0] == '.' && s[1] == '.') { ERR("must not contain '..'"); break; }
          s += l + (e ? 1 : 0);
        }
      });
      if (vol->host_path->type && !one_of(vol->host_path->type, types))
        KEY("type", ERR("unsupported value %s", vol->host_path->type));
    });
  if (vol->empty_dir) KEY("emptyDir", {
      static const char *const media[] = {"", "Memory", "HugePages", NULL};
      if (vol->empty_dir->medium && !one_of(vol->empty_dir->medium, media) &&
          strncmp(vol->empty_dir->medium, "HugePages-", 10))
        KEY("medium", ERR("unsupported value %s", vol->empty_dir->medium));
      if (vol->empty_dir->has_size_limit && nl_quantity_sign(&vol->empty_dir->size_limit) < 0)
        KEY("sizeLimit", ERR("must be greater than or equal to 0"));
    });
  if (vol->config_map) KEY("configMap", {
      KEY("name", if (empty(vol->config_map->name)) ERR("required"));
      items(v, vol->config_map->items, vol->config_map->n_items);
      mode(v, "defaultMode", vol->config_map->default_mode);
    });
  if (vol->secret) KEY("secret", {
      KEY("secretName", if (empty(vol->secret->secret_name)) ERR("required"));
      items(v, vol->secret->items, vol->secret->n_items);
      mode(v, "defaultMode", vol->secret->default_mode);
    });
  if (vol->persistent_volume_claim) KEY("persistentVolumeClaim",
      KEY("claimName", if (empty(vol->persistent_volume_claim->claim_name)) ERR("required")));
  if (vol->downward_api) KEY("downwardAPI", downward(v, vol->downward_api));
  if (vol->image) KEY("image", { /* validateImageVolumeSource */
      static const char *const pulls[] = {"Always", "IfNotPresent", "Never", NULL};
      KEY("reference", if (empty(vol->image->reference)) ERR("required"));
      if (empty(vol->image->pull_policy)) KEY("pullPolicy", ERR("required"));
      else if (!one_of(vol->image->pull_policy, pulls))
        KEY("pullPolicy", ERR("must be one of Always, IfNotPresent, Never, got %s",
                              vol->image->pull_policy));
    });
  if (vol->projected) KEY("projected", {
      const nl_projected_source_t *p = vol->projected;
      mode(v, "defaultMode", p->default_mode);
      for (size_t i = 0; i < p->n_sources; i++) {
        const nl_volume_projection_t *s = &p->sources[i];
        KEY("sources", IDX(i, {
          int k = !!s->secret + !!s->config_map + !!s->downward_api + !!s->service_account_token;
          if (k != 1) ERR("must specify exactly one of secret, configMap, downwardAPI, serviceAccountToken");
          if (s->secret) KEY("secret", {
              KEY("name", if (empty(s->secret->secret_name)) ERR("required"));
              items(v, s->secret->items, s->secret->n_items);
            });
          if (s->config_map) KEY("configMap", {
              KEY("name", if (empty(s->config_map->name)) ERR("required"));
              items(v, s->config_map->items, s->config_map->n_items);
            });
          if (s->downward_api) KEY("downwardAPI", downward(v, s->downward_api));
          if (s->service_account_token) KEY("serviceAccountToken", {
              KEY("path", { if (empty(s->service_account_token->path)) ERR("required");
                            else local_path(v, s->service_account_token->path); });
              if (s->service_account_token->expiration_seconds < 600)
                KEY("expirationSeconds", ERR("may not specify a duration less than 10 minutes, got %lld",
                                             (long long)s->service_account_token->expiration_seconds));
            });
        }));
      }
    });
}

/* ---- pod spec ---- */

static void host_ports(val_t *v) {
  /* AccumulateUniqueHostPorts: hostPort/protocol/hostIP unique in the pod */
  const nl_pod_spec_t *s = &v->pod->spec;
  for (size_t ci = 0; ci < s->n_containers; ci++) {
    const nl_container_t *c = &s->containers[ci];
    for (size_t pi = 0; pi < c->n_ports; pi++) {
      const nl_container_port_t *p = &c->ports[pi];
      if (!p->host_port) continue;
      for (size_t cj = 0; cj <= ci; cj++)
        for (size_t pj = 0; pj < (cj == ci ? pi : s->containers[cj].n_ports); pj++) {
          const nl_container_port_t *q = &s->containers[cj].ports[pj];
          if (q->host_port == p->host_port && eq(q->protocol, p->protocol) &&
              eq(q->host_ip ? q->host_ip : "", p->host_ip ? p->host_ip : ""))
            KEY("containers", IDX(ci, KEY("ports", IDX(pi, KEY("hostPort",
                ERR("duplicate value %d/%s", p->host_port, p->protocol))))));
        }
    }
  }
}

static void spec(val_t *v, const nl_pod_spec_t *s) {
  for (size_t i = 0; i < s->n_volumes; i++) KEY("volumes", IDX(i, volume(v, &s->volumes[i], i)));
  const char *buf[s->n_containers + s->n_init_containers + 1];
  names_t seen = {buf, 0};
  if (!s->n_containers) KEY("containers", ERR("required"));
  for (size_t i = 0; i < s->n_init_containers; i++)
    KEY("initContainers", IDX(i, container(v, &s->init_containers[i], true, &seen)));
  for (size_t i = 0; i < s->n_containers; i++)
    KEY("containers", IDX(i, container(v, &s->containers[i], false, &seen)));
  host_ports(v);
  static const char *const restarts[] = {"Always", "OnFailure", "Never", NULL};
  if (empty(s->restart_policy)) KEY("restartPolicy", ERR("required"));
  else if (!one_of(s->restart_policy, restarts))
    KEY("restartPolicy", ERR("must be one of Always, OnFailure, Never, got %s", s->restart_policy));
  static const char *const dns[] = {"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None", NULL};
  if (empty(s->dns_policy)) KEY("dnsPolicy", ERR("required"));
  else if (!one_of(s->dns_policy, dns))
    KEY("dnsPolicy", ERR("must be one of ClusterFirst, ClusterFirstWithHostNet, Default, None, got %s", s->dns_policy));
  if (eq(s->dns_policy, "None") && (!s->dns_config || !s->dns_config->nameservers.n))
    KEY("dnsConfig", ERR("must provide at least one DNS nameserver when dnsPolicy is None"));
  if (s->dns_config) KEY("dnsConfig", {
      const nl_dns_config_t *d = s->dns_config;
      if (d->nameservers.n > 3) KEY("nameservers", ERR("must not have more than 3 nameservers, got %zu", d->nameservers.n));
      for (size_t i = 0; i < d->nameservers.n; i++)
        if (!is_ip(d->nameservers.items[i]))
          KEY("nameservers", IDX(i, ERR("must be a valid IP address, got %s", d->nameservers.items[i])));
      if (d->searches.n > 32) KEY("searches", ERR("must not have more than 32 search paths, got %zu", d->searches.n));
      for (size_t i = 0; i < d->n_options; i++)
        if (empty(d->options[i].name)) KEY("options", IDX(i, KEY("name", ERR("required"))));
    });
  if (s->termination_grace_period_seconds.set && s->termination_grace_period_seconds.v < 0)
    KEY("terminationGracePeriodSeconds", ERR("must be greater than or equal to 0, got %lld",
                                             (long long)s->termination_grace_period_seconds.v));
  if (s->active_deadline_seconds.set &&
      (s->active_deadline_seconds.v < 1 || s->active_deadline_seconds.v > 4294967295LL))
    KEY("activeDeadlineSeconds", ERR("must be between 1 and 4294967295, got %lld",
                                     (long long)s->active_deadline_seconds.v));
  if (!empty(s->hostname)) KEY("hostname", name_field(v, s->hostname, false, "hostname"));
  if (!empty(s->subdomain)) KEY("subdomain", name_field(v, s->subdomain, false, "subdomain"));
  /* upstream validateHostnameOverride: a subdomain, and no host network */
  if (s->hostname_override)
    KEY("hostnameOverride", {
      if (!nl_is_dns1123_subdomain(s->hostname_override))
        ERR("must be a DNS-1123 subdomain, got %s", s->hostname_override);
      else if (s->host_network)
        ERR("Forbidden: may not be set when spec.hostNetwork is true");
    });
  if (!empty(s->node_name)) KEY("nodeName", name_field(v, s->node_name, true, "nodeName"));
  if (!empty(s->service_account_name)) KEY("serviceAccountName", name_field(v, s->service_account_name, true, "sa"));
  KEY("nodeSelector", kv_keys(v, &s->node_selector, true));
  for (size_t i = 0; i < s->image_pull_secrets.n; i++)
    if (empty(s->image_pull_secrets.items[i])) KEY("imagePullSecrets", IDX(i, KEY("name", ERR("required"))));
  for (size_t i = 0; i < s->n_tolerations; i++) {
    const nl_toleration_t *t = &s->tolerations[i];
    KEY("tolerations", IDX(i, {
      static const char *const ops[] = {"", "Equal", "Exists", NULL};
      static const char *const effects[] = {"", "NoSchedule", "PreferNoSchedule", "NoExecute", NULL};
      if (!empty(t->key) && !is_qualified_name(t->key)) KEY("key", ERR("must be a qualified name, got %s", t->key));
      if (empty(t->key) && !eq(t->operator_, "Exists"))
        KEY("operator", ERR("must be Exists when key is empty"));
      if (t->operator_ && !one_of(t->operator_, ops))
        KEY("operator", ERR("must be Equal or Exists, got %s", t->operator_));
      if (eq(t->operator_, "Exists") && !empty(t->value))
        KEY("value", ERR("must be empty when operator is Exists"));
      if (t->effect && !one_of(t->effect, effects))
        KEY("effect", ERR("must be one of NoSchedule, PreferNoSchedule, NoExecute, got %s", t->effect));
      if (t->toleration_seconds.set && !eq(t->effect, "NoExecute"))
        KEY("effect", ERR("must be NoExecute when tolerationSeconds is set"));
    }));
  }
  for (size_t i = 0; i < s->n_host_aliases; i++)
    KEY("hostAliases", IDX(i, {
      if (empty(s->host_aliases[i].ip) || !is_ip(s->host_aliases[i].ip))
        KEY("ip", ERR("must be a valid IP address, got %s", s->host_aliases[i].ip ? s->host_aliases[i].ip : ""));
      for (size_t j = 0; j < s->host_aliases[i].hostnames.n; j++)
        if (!nl_is_dns1123_subdomain(s->host_aliases[i].hostnames.items[j]))
          KEY("hostnames", IDX(j, ERR("must be a DNS-1123 subdomain, got %s", s->host_aliases[i].hostnames.items[j])));
    }));
  if (s->share_process_namespace == 1 && s->host_pid)
    KEY("shareProcessNamespace", ERR("ShareProcessNamespace and HostPID cannot both be enabled"));
  /* upstream validateHostUsers (UserNamespacesHostNetworkSupport off), its
   * field names as they are; volumeDevices are not decoded here */
  if (s->host_users == 0) {
    if (s->host_network) KEY("hostNetwork", ERR("Forbidden: when `hostUsers` is false"));
    if (s->host_pid) KEY("HostPID", ERR("Forbidden: when `hostUsers` is false"));
    if (s->host_ipc) KEY("HostIPC", ERR("Forbidden: when `hostUsers` is false"));
  }
  if (s->security_context) KEY("securityContext", {
      const nl_pod_security_context_t *p = s->security_context;
      if (p->run_as_user.set && (p->run_as_user.v < 0 || p->run_as_user.v > 2147483647))
        KEY("runAsUser", ERR("must be between 0 and 2147483647, got %lld", (long long)p->run_as_user.v));
      if (p->fs_group.set && (p->fs_group.v < 0 || p->fs_group.v > 2147483647))
        KEY("fsGroup", ERR("must be between 0 and 2147483647, got %lld", (long long)p->fs_group.v));
      for (size_t i = 0; i < p->n_supplemental_groups; i++)
        if (p->supplemental_groups[i] < 0 || p->supplemental_groups[i] > 2147483647)
          KEY("supplementalGroups", IDX(i, ERR("must be between 0 and 2147483647, got %lld", (long long)p->supplemental_groups[i])));
      /* the API server's validation; kept for pods that never passed it
       * (static pods, --pod-manifest) */
      const char *sgp = p->supplemental_groups_policy;
      if (sgp && !eq(sgp, "Merge") && !eq(sgp, "Strict"))
        KEY("supplementalGroupsPolicy",
            ERR("Unsupported value: \"%s\": supported values: \"Merge\", \"Strict\"", sgp));
      for (size_t i = 0; i < p->n_sysctls; i++)
        if (empty(p->sysctls[i].key)) KEY("sysctls", IDX(i, KEY("name", ERR("required"))));
    });
  KEY("overhead", resource_list(v, &s->overhead));
  if (s->resources) KEY("resources", pod_resources(v, s));
}

int nl_pod_validate(const nl_pod_t *pod, const char *origin, nl_err_t **err) {
  val_t vv = {.pod = pod}, *v = &vv;
  nl__errs_init(&v->e, origin);
  KEY("metadata", metadata(v, &pod->metadata));
  KEY("spec", spec(v, &pod->spec));
  return nl__errs_finish(&v->e, err);
}
