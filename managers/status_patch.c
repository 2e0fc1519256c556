#include "managers/status_patch.h"

#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

/* upstream PodConditionByKubelet, with its 1.36 gates' defaults */
static const char *const kubelet_conditions[] = {
    "PodScheduled",     "Ready",           "Initialized",         "ContainersReady",
    "PodReadyToStartContainers", "PodResizePending", "PodResizeInProgress",
    "AllContainersRestarting",
};

/* The PodStatus fields generateAPIPodStatus fills; the rest belong to others.
 * (resources and allocatedResources: InPlacePodLevelResourcesVerticalScaling.) */
static const char *const kubelet_fields[] = {
    "observedGeneration", "phase",  "conditions", "message", "reason",    "hostIP",
    "hostIPs", "podIP",     "podIPs",  "startTime", "initContainerStatuses",
    "containerStatuses", "qosClass", "ephemeralContainerStatuses", "resources",
    "allocatedResources",
};

/* PodStatus lists with patchStrategy merge, and their patchMergeKey. */
static const struct {
  const char *field, *key;
} merge_lists[] = {
    {"conditions", "type"},
    {"podIPs", "ip"},
    {"hostIPs", "ip"},
    {"resourceClaimStatuses", "name"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool in_list(const char *s, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(s, list[i]) == 0) return true;
  return false;
}

bool nl_status_condition_by_kubelet(const char *type) {
  return type && in_list(type, kubelet_conditions, COUNT(kubelet_conditions));
}

static const char *str(const json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

/* kubetypes.PodConditionSharedByKubelet: set by the kubelet when it terminates
 * a pod itself, and by others (the API's eviction, the taint manager). */
static bool shared_condition(const char *type) { return type && strcmp(type, "DisruptionTarget") == 0; }

static bool phase_terminal(const char *p) {
  return p && (strcmp(p, "Succeeded") == 0 || strcmp(p, "Failed") == 0);
}

bool nl_status_phase_terminal(const json_t *status) {
  return phase_terminal(str(status, "phase"));
}

json_t *nl_status_merge(const json_t *api, const json_t *ours) {
  json_t *out = json_deep_copy(ours);
  if (!api) return out;
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)api, key, v) {
    if (!in_list(key, kubelet_fields, COUNT(kubelet_fields)))
      json_object_set(out, key, v);
  }
  json_t *conds = json_array();
  size_t i;
  json_array_foreach(json_object_get(api, "conditions"), i, v) {
    if (!nl_status_condition_by_kubelet(str(v, "type"))) json_array_append(conds, v);
  }
  json_array_foreach(json_object_get(ours, "conditions"), i, v) {
    if (nl_status_condition_by_kubelet(str(v, "type"))) json_array_append(conds, v);
  }
  /* Ours replace the API's shared conditions of the same type, or are added. */
  json_array_foreach(json_object_get(ours, "conditions"), i, v) {
    if (!shared_condition(str(v, "type"))) continue;
    size_t j;
    json_t *c;
    json_array_foreach(conds, j, c) {
      if (strcmp(str(c, "type"), str(v, "type")) == 0) break;
    }
    if (j < json_array_size(conds)) json_array_set(conds, j, v);
    else json_array_append(conds, v);
  }
  if (json_array_size(conds))
    json_object_set(out, "conditions", conds);
  else
    json_object_del(out, "conditions");
  json_decref(conds);
  /* updateStatusInternal: an observedGeneration never goes back (a status
   * computed from an older copy of the pod). */
  json_int_t ag = json_integer_value(json_object_get(api, "observedGeneration"));
  if (ag > json_integer_value(json_object_get(ours, "observedGeneration")))
    json_object_set_new(out, "observedGeneration", json_integer(ag));
  const char *ap = str(api, "phase"), *op = str(ours, "phase");
  if (phase_terminal(ap) && (!op || strcmp(ap, op) != 0))
    json_object_set_new(out, "phase", json_string(ap));
  return out;
}

/* The kubelet-owned conditions of a status, by type. */
static json_t *owned_conditions(const json_t *st) {
  json_t *m = json_object();
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(st, "conditions"), i, c) {
    const char *t = str(c, "type");
    if (nl_status_condition_by_kubelet(t) || shared_condition(t)) json_object_set(m, t, c);
  }
  return m;
}

static bool same_field(const json_t *a, const json_t *b, const char *key) {
  const json_t *x = json_object_get(a, key), *y = json_object_get(b, key);
  return x == y || (x && y && json_equal(x, y));
}

static bool conditions_equal(const json_t *a, const json_t *b) {
  json_t *ca = owned_conditions(a), *cb = owned_conditions(b);
  bool eq = json_object_size(ca) == json_object_size(cb);
  const char *t;
  json_t *x;
  json_object_foreach(ca, t, x) {
    json_t *y = json_object_get(cb, t);
    if (!eq) break;
    eq = y && same_field(x, y, "status") && same_field(x, y, "reason") &&
         same_field(x, y, "message");
  }
  json_decref(ca);
  json_decref(cb);
  return eq;
}

bool nl_status_equal(const json_t *a, const json_t *b) {
  if (!a || !b) return a == b;
  for (size_t i = 0; i < COUNT(kubelet_fields); i++) {
    if (strcmp(kubelet_fields[i], "conditions") == 0) continue;
    if (!same_field(a, b, kubelet_fields[i])) return false;
  }
  return conditions_equal(a, b);
}

/* ---- the two-way strategic merge diff ---- */

static json_t *diff_object(const json_t *old, const json_t *new_, bool status_level);

static const char *merge_key_of(const char *field) {
  for (size_t i = 0; i < COUNT(merge_lists); i++)
    if (strcmp(field, merge_lists[i].field) == 0) return merge_lists[i].key;
  return NULL;
}

static const json_t *find_by_key(const json_t *list, const char *mk, const json_t *val) {
  size_t i;
  json_t *e;
  json_array_foreach(list, i, e) {
    const json_t *k = json_object_get(e, mk);
    if (k && val && json_equal(k, val)) return e;
  }
  return NULL;
}

/* The changed elements go in their new order (the apiserver checks it against
 * $setElementOrder), the deletions after them. */
static void diff_merge_list(json_t *patch, const char *field, const char *mk, const json_t *old,
                            const json_t *new_) {
  json_t *items = json_array(), *order = json_array();
  size_t i;
  json_t *e;
  json_array_foreach(new_, i, e) {
    const json_t *kv = json_object_get(e, mk);
    json_t *o = json_object();
    if (kv) json_object_set(o, mk, (json_t *)kv);
    json_array_append_new(order, o);
    const json_t *prev = find_by_key(old, mk, kv);
    if (!prev) {
      json_array_append(items, e);
    } else if (!json_equal(prev, e)) {
      json_t *d = diff_object(prev, e, false);
      json_object_set(d, mk, (json_t *)kv);
      json_array_append_new(items, d);
    }
  }
  json_array_foreach(old, i, e) {
    const json_t *kv = json_object_get(e, mk);
    if (find_by_key(new_, mk, kv)) continue;
    json_t *d = json_pack("{s:s}", "$patch", "delete");
    if (kv) json_object_set(d, mk, (json_t *)kv);
    json_array_append_new(items, d);
  }
  char *order_key = nl_xasprintf("$setElementOrder/%s", field);
  json_object_set_new(patch, order_key, order);
  free(order_key);
  if (json_array_size(items))
    json_object_set_new(patch, field, items);
  else
    json_decref(items);
}

static json_t *diff_object(const json_t *old, const json_t *new_, bool status_level) {
  json_t *patch = json_object();
  const char *key;
  json_t *nv;
  json_object_foreach((json_t *)new_, key, nv) {
    const json_t *ov = json_object_get(old, key);
    if (ov && json_equal(ov, nv)) continue;
    const char *mk = status_level ? merge_key_of(key) : NULL;
    if (ov && json_is_object(ov) && json_is_object(nv)) {
      json_object_set_new(patch, key, diff_object(ov, nv, false));
    } else if (mk && json_is_array(nv)) {
      diff_merge_list(patch, key, mk, json_is_array(ov) ? ov : NULL, nv);
    } else {
      json_object_set(patch, key, nv);
    }
  }
  json_t *ov;
  json_object_foreach((json_t *)old, key, ov) {
    if (!json_object_get(new_, key)) json_object_set_new(patch, key, json_null());
  }
  return patch;
}

json_t *nl_status_patch(const char *uid, const json_t *api, const json_t *want) {
  json_t *empty = json_object();
  json_t *d = diff_object(api ? api : empty, want, true);
  json_decref(empty);
  if (json_object_size(d) == 0) {
    json_decref(d);
    return NULL;
  }
  return json_pack("{s:{s:s},s:o}", "metadata", "uid", uid, "status", d);
}

char *nl_status_patch_dump(const json_t *patch) {
  return json_dumps(patch, JSON_COMPACT | JSON_SORT_KEYS);
}

char *nl_status_delete_body(const char *uid) {
  json_t *body = json_pack("{s:s,s:s,s:i,s:{s:s}}", "kind", "DeleteOptions", "apiVersion", "v1",
                           "gracePeriodSeconds", 0, "preconditions", "uid", uid);
  char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(body);
  return text;
}
