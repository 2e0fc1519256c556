#include "managers/admission.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/node.h"
#include "agent/model/quantity.h"
#include "managers/eviction.h"
#include "reactor/xalloc.h"

#define GOOS "linux"

/* ---- the Node ---- */

static int kv_cmp(const void *a, const void *b) {
  return strcmp(((const nl_kv_t *)a)->key, ((const nl_kv_t *)b)->key);
}

static void add_label(nl_admit_node_t *n, const char *k, const char *v) {
  n->labels = nl_xrealloc(n->labels, (n->n_labels + 1) * sizeof *n->labels);
  n->labels[n->n_labels++] = (nl_kv_t){nl_xstrdup(k), nl_xstrdup(v)};
}

static int64_t alloc_of(const json_t *alloc, const char *name, bool milli) {
  const char *s = json_string_value(json_object_get(alloc, name));
  nl_quantity_t q;
  if (!s || nl_quantity_parse(s, &q, NULL) < 0) return -1;
  return milli ? nl_quantity_milli_value(&q) : nl_quantity_value(&q);
}

void nl_admit_node_from_json(nl_admit_node_t *out, const json_t *node) {
  memset(out, 0, sizeof *out);
  const json_t *md = json_object_get(node, "metadata");
  const char *name = json_string_value(json_object_get(md, "name"));
  out->name = nl_xstrdup(name ? name : "");
  const char *k;
  json_t *v;
  json_object_foreach(json_object_get(md, "labels"), k, v) {
    if (json_is_string(v)) add_label(out, k, json_string_value(v));
  }
  qsort(out->labels, out->n_labels, sizeof *out->labels, kv_cmp);
  size_t i;
  json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, v) {
    const char *key = json_string_value(json_object_get(v, "key"));
    const char *val = json_string_value(json_object_get(v, "value"));
    const char *eff = json_string_value(json_object_get(v, "effect"));
    out->taints = nl_xrealloc(out->taints, (out->n_taints + 1) * sizeof *out->taints);
    out->taints[out->n_taints++] = (nl_admit_taint_t){nl_xstrdup(key ? key : ""),
                                                      nl_xstrdup(val ? val : ""),
                                                      nl_xstrdup(eff ? eff : "")};
  }
  const json_t *alloc = json_object_get(json_object_get(node, "status"), "allocatable");
  out->cpu_milli = alloc_of(alloc, "cpu", true);
  out->memory = alloc_of(alloc, "memory", false);
  out->ephemeral_storage = alloc_of(alloc, "ephemeral-storage", false);
  out->pods = alloc_of(alloc, "pods", false);
  const json_t *feat = json_object_get(json_object_get(node, "status"), "features");
  out->supplemental_groups_policy =
      json_is_true(json_object_get(feat, "supplementalGroupsPolicy"));
}

void nl_admit_node_local(nl_admit_node_t *out, const char *name, int64_t max_pods) {
  memset(out, 0, sizeof *out);
  out->name = nl_xstrdup(name);
  add_label(out, "kubernetes.io/arch", nl_node_goarch());
  add_label(out, "kubernetes.io/hostname", name);
  add_label(out, "kubernetes.io/os", GOOS);
  out->cpu_milli = out->memory = out->ephemeral_storage = -1;
  out->pods = max_pods;
}

void nl_admit_node_free(nl_admit_node_t *n) {
  for (size_t i = 0; i < n->n_labels; i++) {
    free(n->labels[i].key);
    free(n->labels[i].value);
  }
  for (size_t i = 0; i < n->n_taints; i++) {
    free(n->taints[i].key);
    free(n->taints[i].value);
    free(n->taints[i].effect);
  }
  free(n->labels);
  free(n->taints);
  free(n->name);
  memset(n, 0, sizeof *n);
}

const char *nl_admit_node_label(const nl_admit_node_t *n, const char *key) {
  nl_kv_t probe = {(char *)key, NULL};
  const nl_kv_t *kv = n->n_labels ? bsearch(&probe, n->labels, n->n_labels, sizeof probe, kv_cmp)
                                  : NULL;
  return kv ? kv->value : NULL;
}

void nl_admit_result_free(nl_admit_result_t *r) {
  free(r->message);
  r->message = NULL;
}

static bool reject(nl_admit_result_t *out, const char *reason, char *message) {
  if (out) {
    out->reason = reason;
    out->message = message;
  } else {
    free(message);
  }
  return false;
}

static bool predicate_failed(nl_admit_result_t *out, const char *name, const char *desc) {
  return reject(out, name, nl_xasprintf("Predicate %s failed: %s", name, desc));
}

/* ---- resources ---- */

/* What the pod lacks of resource, requested - (capacity - used) (upstream
 * InsufficientResourceError.GetInsufficientAmount), 0 when it fits. */
static int64_t lacks(const char *resource, int64_t capacity, const nl_pod_t *pod,
                     const nl_admit_pods_t *others, int64_t *req, int64_t *used) {
  *req = nl_pod_request(pod, resource);
  *used = 0;
  if (capacity < 0 || *req <= 0) return 0;
  for (size_t i = 0; i < others->n; i++) *used += nl_pod_request(others->items[i], resource);
  return *req <= capacity - *used ? 0 : *req - (capacity - *used);
}

static bool fits_one(const char *resource, int64_t capacity, const nl_pod_t *pod,
                     const nl_admit_pods_t *others, nl_admit_result_t *out) {
  int64_t req, used;
  if (!lacks(resource, capacity, pod, others, &req, &used)) return true;
  static const char *const reasons[][2] = {
      {"cpu", "OutOfcpu"}, {"memory", "OutOfmemory"}, {"ephemeral-storage", "OutOfephemeral-storage"}};
  const char *reason = "OutOf";
  for (size_t i = 0; i < 3; i++)
    if (strcmp(reasons[i][0], resource) == 0) reason = reasons[i][1];
  return reject(out, reason,
                nl_xasprintf("Node didn't have enough resource: %s, requested: %lld, used: %lld, "
                             "capacity: %lld",
                             resource, (long long)req, (long long)used, (long long)capacity));
}

static bool pods_fit(const nl_admit_node_t *node, const nl_admit_pods_t *others) {
  return node->pods < 0 || (int64_t)others->n + 1 <= node->pods;
}

bool nl_admit_fits(const nl_admit_node_t *node, const nl_pod_t *pod, const nl_admit_pods_t *others,
                   nl_admit_result_t *out) {
  if (!pods_fit(node, others))
    return reject(out, "OutOfpods",
                  nl_xasprintf("Node didn't have enough resource: pods, requested: 1, used: %zu, "
                               "capacity: %lld",
                               others->n, (long long)node->pods));
  return fits_one("cpu", node->cpu_milli, pod, others, out) &&
         fits_one("memory", node->memory, pod, others, out) &&
         fits_one("ephemeral-storage", node->ephemeral_storage, pod, others, out);
}

size_t nl_admit_lacks(const nl_admit_node_t *node, const nl_pod_t *pod,
                      const nl_admit_pods_t *others, nl_preempt_need_t need[NL_ADMIT_RESOURCES]) {
  size_t n = 0;
  if (!pods_fit(node, others))
    need[n++] = (nl_preempt_need_t){"pods", 1 - (node->pods - (int64_t)others->n)};
  const struct {
    const char *name;
    int64_t capacity;
  } res[] = {{"cpu", node->cpu_milli}, {"memory", node->memory},
             {"ephemeral-storage", node->ephemeral_storage}};
  for (size_t i = 0; i < sizeof res / sizeof res[0]; i++) {
    int64_t req, used, q = lacks(res[i].name, res[i].capacity, pod, others, &req, &used);
    if (q > 0) need[n++] = (nl_preempt_need_t){res[i].name, q};
  }
  return n;
}

/* ---- node affinity ---- */

static bool in_values(const nl_strlist_t *l, const char *v) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->items[i], v) == 0) return true;
  return false;
}

static bool parse_int(const char *s, long long *out) {
  char *end;
  errno = 0;
  *out = strtoll(s, &end, 10);
  return *s && !*end && errno == 0;
}

/* A NodeSelectorRequirement against a value (NULL: the label is absent). */
static bool req_matches(const nl_node_selector_req_t *r, const char *v) {
  const char *op = r->operator_ ? r->operator_ : "";
  if (strcmp(op, "In") == 0) return v && in_values(&r->values, v);
  if (strcmp(op, "NotIn") == 0) return !v || !in_values(&r->values, v);
  if (strcmp(op, "Exists") == 0) return v != NULL;
  if (strcmp(op, "DoesNotExist") == 0) return v == NULL;
  if (strcmp(op, "Gt") == 0 || strcmp(op, "Lt") == 0) {
    long long have, want;
    if (!v || r->values.n != 1 || !parse_int(v, &have) || !parse_int(r->values.items[0], &want))
      return false;
    return op[0] == 'G' ? have > want : have < want;
  }
  return false; /* an unknown operator matches nothing */
}

static bool term_matches(const nl_admit_node_t *node, const nl_node_selector_term_t *t) {
  if (!t->n_match_expressions && !t->n_match_fields) return false; /* matches no objects */
  for (size_t i = 0; i < t->n_match_expressions; i++) {
    const nl_node_selector_req_t *r = &t->match_expressions[i];
    if (!req_matches(r, nl_admit_node_label(node, r->key ? r->key : ""))) return false;
  }
  for (size_t i = 0; i < t->n_match_fields; i++) {
    const nl_node_selector_req_t *r = &t->match_fields[i];
    if (!r->key || strcmp(r->key, "metadata.name") != 0) return false;
    if (!req_matches(r, node->name)) return false;
  }
  return true;
}

bool nl_admit_node_affinity(const nl_admit_node_t *node, const nl_pod_t *pod) {
  const nl_kvlist_t *sel = &pod->spec.node_selector;
  for (size_t i = 0; i < sel->n; i++) {
    const char *v = nl_admit_node_label(node, sel->items[i].key);
    if (!v || strcmp(v, sel->items[i].value) != 0) return false;
  }
  const nl_node_selector_t *req = pod->spec.required_node_affinity;
  if (!req) return true;
  for (size_t i = 0; i < req->n_terms; i++)
    if (term_matches(node, &req->terms[i])) return true;
  return false;
}

bool nl_admit_node_name(const nl_admit_node_t *node, const nl_pod_t *pod) {
  const char *n = pod->spec.node_name;
  return !n || !*n || strcmp(n, node->name) == 0;
}

/* ---- host ports ---- */

static const char *port_ip(const nl_container_port_t *p) {
  return p->host_ip && *p->host_ip ? p->host_ip : "0.0.0.0";
}

static bool ports_conflict(const nl_container_port_t *a, const nl_container_port_t *b) {
  if (a->host_port != b->host_port) return false;
  const char *pa = a->protocol ? a->protocol : "TCP", *pb = b->protocol ? b->protocol : "TCP";
  if (strcmp(pa, pb) != 0) return false;
  const char *ia = port_ip(a), *ib = port_ip(b);
  return strcmp(ia, "0.0.0.0") == 0 || strcmp(ib, "0.0.0.0") == 0 || strcmp(ia, ib) == 0;
}

static bool pod_uses_port(const nl_pod_t *pod, const nl_container_port_t *p) {
  for (size_t i = 0; i < pod->spec.n_containers; i++) {
    const nl_container_t *c = &pod->spec.containers[i];
    for (size_t j = 0; j < c->n_ports; j++)
      if (c->ports[j].host_port > 0 && ports_conflict(&c->ports[j], p)) return true;
  }
  return false;
}

bool nl_admit_host_ports(const nl_pod_t *pod, const nl_admit_pods_t *others) {
  for (size_t i = 0; i < pod->spec.n_containers; i++) {
    const nl_container_t *c = &pod->spec.containers[i];
    for (size_t j = 0; j < c->n_ports; j++) {
      if (c->ports[j].host_port <= 0) continue;
      for (size_t k = 0; k < others->n; k++)
        if (pod_uses_port(others->items[k], &c->ports[j])) return false;
    }
  }
  return true;
}

/* ---- taints ---- */

static bool tolerates(const nl_toleration_t *t, const nl_admit_taint_t *taint) {
  if (t->effect && *t->effect && strcmp(t->effect, taint->effect) != 0) return false;
  if (t->key && *t->key && strcmp(t->key, taint->key) != 0) return false;
  const char *op = t->operator_ ? t->operator_ : "";
  if (strcmp(op, "Exists") == 0) return true;
  if (*op && strcmp(op, "Equal") != 0) return false;
  return strcmp(t->value ? t->value : "", taint->value) == 0;
}

bool nl_admit_taints(const nl_admit_node_t *node, const nl_pod_t *pod) {
  for (size_t i = 0; i < node->n_taints; i++) {
    const nl_admit_taint_t *taint = &node->taints[i];
    if (strcmp(taint->effect, "NoExecute") != 0) continue; /* the kubelet's only concern */
    bool ok = false;
    for (size_t j = 0; j < pod->spec.n_tolerations && !ok; j++)
      ok = tolerates(&pod->spec.tolerations[j], taint);
    if (!ok) return false;
  }
  return true;
}

/* ---- the handler ---- */

/* The predicates after the resources: those preemption cannot help. */
static bool not_resources(const nl_admit_node_t *node, const nl_pod_t *pod,
                          const nl_admit_pods_t *others, bool is_static, nl_admit_result_t *out) {
  if (!nl_admit_node_affinity(node, pod))
    return predicate_failed(out, "NodeAffinity",
                            "node(s) didn't match Pod's node affinity/selector");
  if (!nl_admit_node_name(node, pod))
    return predicate_failed(out, "NodeName", "node(s) didn't match the requested node name");
  if (!nl_admit_host_ports(pod, others))
    return predicate_failed(out, "NodePorts",
                            "node(s) didn't have free ports for the requested pod ports");
  if (!is_static && !nl_admit_taints(node, pod))
    return predicate_failed(out, "TaintToleration",
                            "node(s) had taints that the pod didn't tolerate");
  return true;
}

bool nl_admit_pod(const nl_admit_node_t *node, const nl_pod_t *pod, const nl_admit_pods_t *others,
                  bool is_static, nl_admit_result_t *out) {
  const char *os = nl_kvlist_get(&pod->metadata.labels, "kubernetes.io/os");
  if (os && strcmp(os, GOOS) != 0)
    return reject(out, "PodOSSelectorNodeLabelDoesNotMatch",
                  nl_xstrdup("Failed to admit pod as the `kubernetes.io/os` label doesn't match "
                             "node label"));
  if (pod->spec.os_name && strcmp(pod->spec.os_name, GOOS) != 0)
    return reject(out, "PodOSNotSupported",
                  nl_xstrdup("Failed to admit pod as the OS field doesn't match node OS"));
  /* Strict the runtime does not honour would give the container the image's
   * groups regardless: refused (a pod without the field, or Merge, is fine) */
  const nl_pod_security_context_t *psc = pod->spec.security_context;
  if (psc && psc->supplemental_groups_policy &&
      strcmp(psc->supplemental_groups_policy, "Strict") == 0 && !node->supplemental_groups_policy)
    return reject(out, "SupplementalGroupsPolicyNotSupported",
                  nl_xstrdup("SupplementalGroupsPolicy=Strict is not supported in this node"));
  return nl_admit_fits(node, pod, others, out) &&
         not_resources(node, pod, others, is_static, out);
}

bool nl_admit_pod_critical(const nl_admit_node_t *node, const nl_pod_t *pod,
                           const nl_admit_pods_t *others, bool is_static,
                           nl_preempt_need_t need[NL_ADMIT_RESOURCES], size_t *n_need,
                           nl_admit_result_t *out) {
  *n_need = 0;
  if (nl_admit_pod(node, pod, others, is_static, out)) return true;
  /* only the resources' reasons start so (the OS checks come before them) */
  if (!nl_ev_pod_is_critical(pod) || strncmp(out->reason, "OutOf", 5) != 0) return false;
  nl_admit_result_free(out);
  if (!not_resources(node, pod, others, is_static, out)) return false;
  *n_need = nl_admit_lacks(node, pod, others, need);
  return true;
}
