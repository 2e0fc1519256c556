/* The node configuration checks upstream makes at start-up: --node-labels
 * (ValidateKubeletFlags), --register-with-taints (ParseTaints), and the
 * reservations that make allocatable (GetNodeAllocatableReservation). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/node.h"
#include "agent/model/quantity.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

static bool alnum(char c) { return isalnum((unsigned char)c) != 0; }

/* The name part of a qualified name, or a label value (which may be empty). */
static const char *check_name(const char *s, size_t len) {
  if (len > 63) return "must be no more than 63 characters";
  if (len == 0) return NULL;
  if (!alnum(s[0]) || !alnum(s[len - 1]))
    return "must start and end with an alphanumeric character";
  for (size_t i = 0; i < len; i++)
    if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
      return "must consist of alphanumeric characters, '-', '_' or '.'";
  return NULL;
}

/* A lowercase RFC 1123 subdomain, as a qualified name's prefix. */
static const char *check_prefix(const char *s, size_t len) {
  if (len == 0 || len > 253) return "prefix must be a DNS subdomain of 1..253 characters";
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    bool edge = i == 0 || i == len - 1 || s[i - 1] == '.' || s[i + 1] == '.';
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) continue;
    if ((c == '-' && !edge) || (c == '.' && i > 0 && i < len - 1 && s[i - 1] != '.')) continue;
    return "prefix must be a lowercase RFC 1123 subdomain";
  }
  return NULL;
}

static const char *check_qualified(const char *key) {
  const char *slash = strchr(key, '/');
  if (!slash) return *key ? check_name(key, strlen(key)) : "name part must be non-empty";
  if (strchr(slash + 1, '/')) return "a qualified name has at most one '/'";
  const char *e = check_prefix(key, (size_t)(slash - key));
  if (e) return e;
  if (!slash[1]) return "name part must be non-empty";
  return check_name(slash + 1, strlen(slash + 1));
}

static bool in_namespace(const char *ns, size_t len, const char *domain) {
  size_t dl = strlen(domain);
  return (len == dl && memcmp(ns, domain, len) == 0) ||
         (len > dl && ns[len - dl - 1] == '.' && memcmp(ns + len - dl, domain, dl) == 0);
}

/* kubeletapis.IsKubeletLabel: the labels NodeRestriction lets a kubelet set. */
static const char *const kubelet_labels[] = {
    "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch", "kubernetes.io/hostname", "kubernetes.io/os",
    "node.kubernetes.io/instance-type", "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone"};

static bool kubelet_may_set(const char *key) {
  const char *slash = strchr(key, '/');
  if (!slash) return true;
  size_t len = (size_t)(slash - key);
  if (!in_namespace(key, len, "kubernetes.io") && !in_namespace(key, len, "k8s.io")) return true;
  for (size_t i = 0; i < sizeof kubelet_labels / sizeof *kubelet_labels; i++)
    if (strcmp(key, kubelet_labels[i]) == 0) return true;
  return in_namespace(key, len, "kubelet.kubernetes.io") || in_namespace(key, len, "node.kubernetes.io");
}

int nl_node_labels_validate(const char *const *keys, const char *const *values, size_t n,
                            nl_err_t **err) {
  nl_buf_t bad = {0}, invalid = {0};
  for (size_t i = 0; i < n; i++) {
    const char *e = check_qualified(keys[i]);
    if (!e) e = check_name(values[i], strlen(values[i]));
    if (e) nl_buf_printf(&invalid, "%s'%s=%s' - %s", invalid.len ? "; " : "", keys[i], values[i], e);
    else if (!kubelet_may_set(keys[i])) nl_buf_printf(&bad, "%s%s", bad.len ? " " : "", keys[i]);
  }
  int rc = 0;
  if (bad.len) {
    rc = nl_err_set(err, NL_EINVAL,
                    "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [%s]\n"
                    "--node-labels in the 'kubernetes.io' namespace must begin with an allowed "
                    "prefix (kubelet.kubernetes.io, node.kubernetes.io) or be in the specifically "
                    "allowed set (beta.kubernetes.io/arch, beta.kubernetes.io/instance-type, "
                    "beta.kubernetes.io/os, failure-domain.beta.kubernetes.io/region, "
                    "failure-domain.beta.kubernetes.io/zone, kubernetes.io/arch, "
                    "kubernetes.io/hostname, kubernetes.io/os, node.kubernetes.io/instance-type, "
                    "topology.kubernetes.io/region, topology.kubernetes.io/zone)",
                    bad.data);
  } else if (invalid.len) {
    rc = nl_err_set(err, NL_EINVAL, "invalid node labels: %s", invalid.data);
  }
  nl_buf_free(&bad);
  nl_buf_free(&invalid);
  return rc;
}

int nl_node_taint_parse(const char *spec, nl_node_taint_t *t, nl_err_t **err) {
  const char *colon = strchr(spec, ':');
  if (!colon || strchr(colon + 1, ':'))
    return nl_err_set(err, NL_EINVAL, "invalid taint spec: %s (want key=value:Effect)", spec);
  const char *effect = colon + 1;
  if (strcmp(effect, "NoSchedule") && strcmp(effect, "PreferNoSchedule") &&
      strcmp(effect, "NoExecute"))
    return nl_err_set(err, NL_EINVAL, "invalid taint effect: %s, unsupported taint effect", effect);
  char *kv = nl_xstrndup(spec, (size_t)(colon - spec));
  char *eq = strchr(kv, '=');
  const char *value = "";
  if (eq) {
    *eq = '\0';
    value = eq + 1;
  }
  const char *e = eq && strchr(value, '=') ? "more than one '='" : check_qualified(kv);
  if (!e) e = check_name(value, strlen(value));
  if (e) {
    free(kv);
    return nl_err_set(err, NL_EINVAL, "invalid taint spec: %s, %s", spec, e);
  }
  t->key = nl_xstrdup(kv);
  t->value = nl_xstrdup(value);
  t->effect = nl_xstrdup(effect);
  free(kv);
  return 0;
}

void nl_node_taint_free(nl_node_taint_t *t) {
  free(t->key);
  free(t->value);
  free(t->effect);
  *t = (nl_node_taint_t){0};
}

/* cpu in millicores, anything else in units. */
static int add_quantity(const char *field, const char *res, const char *s, int64_t *sum,
                        nl_err_t **err) {
  nl_quantity_t q;
  if (nl_quantity_parse(s, &q, err) < 0) return nl_err_wrap(err, "%s: %s", field, res);
  *sum += strcmp(res, "cpu") == 0 ? nl_quantity_milli_value(&q) : nl_quantity_value(&q);
  return 0;
}

static int add_reserved(const char *field, const char *const *keys, const char *const *values,
                        size_t n, const char *res, int64_t *sum, nl_err_t **err) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(keys[i], res) == 0 && add_quantity(field, res, values[i], sum, err) < 0) return -1;
  return 0;
}

int nl_node_reserved(const nl_node_conf_t *c, const char *resource, int64_t capacity,
                     int64_t *reserved, nl_err_t **err) {
  int64_t sum = 0;
  if (add_reserved("kubeReserved", c->kube_reserved_keys, c->kube_reserved_values,
                   c->n_kube_reserved, resource, &sum, err) < 0 ||
      add_reserved("systemReserved", c->system_reserved_keys, c->system_reserved_values,
                   c->n_system_reserved, resource, &sum, err) < 0)
    return -1;
  const char *signal = strcmp(resource, "memory") == 0              ? "memory.available"
                       : strcmp(resource, "ephemeral-storage") == 0 ? "nodefs.available"
                                                                    : NULL;
  for (size_t i = 0; signal && i < c->n_eviction; i++) {
    if (strcmp(c->eviction_keys[i], signal) != 0) continue;
    const char *v = c->eviction_values[i];
    size_t len = strlen(v);
    if (len && v[len - 1] == '%') {
      /* Upstream parses the percent as a float32 and truncates the product. */
      char *end;
      float pct = (float)strtod(v, &end);
      if (end != v + len - 1 || pct < 0 || pct > 100)
        return nl_err_set(err, NL_EINVAL, "evictionHard: %s: invalid percentage \"%s\"", signal, v);
      sum += (int64_t)((double)capacity * (double)(pct / 100.0f));
    } else if (add_quantity("evictionHard", signal, v, &sum, err) < 0) {
      return -1;
    }
  }
  *reserved = sum;
  return 0;
}
