/* A pod's claims: their names (upstream resourceclaim.Name, and the
 * scheduler's claim for extended resources) and the checks of
 * a ResourceClaim read from the API (IsForPod, IsReservedForPod, allocated),
 * and the claim cache's small helpers (managers/dra_internal.h). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "managers/dra_internal.h"
#include "reactor/xalloc.h"

void nl__dra_strv_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

bool nl__dra_strv_has(char *const *v, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i], s) == 0) return true;
  return false;
}

void nl__dra_strv_add(char ***v, size_t *n, const char *s) {
  if (nl__dra_strv_has(*v, *n, s)) return;
  *v = nl_xrealloc(*v, (*n + 1) * sizeof **v);
  (*v)[(*n)++] = nl_xstrdup(s);
}

const nl_pod_resource_claim_t *nl__dra_pod_claim(const nl_pod_t *pod, const char *name) {
  for (size_t i = 0; i < pod->spec.n_resource_claims; i++) {
    const nl_pod_resource_claim_t *pc = &pod->spec.resource_claims[i];
    if (pc->name && name && strcmp(pc->name, name) == 0) return pc;
  }
  return NULL;
}

const struct nl_pod_ext_claim_status *nl__dra_ext_claim(const nl_pod_t *pod) {
  const struct nl_pod_ext_claim_status *x = pod->status ? pod->status->extended_resource_claim_status : NULL;
  return x && x->resource_claim_name && *x->resource_claim_name ? x : NULL;
}

int nl__dra_resolve(const nl_pod_t *pod, const nl_pod_resource_claim_t *pc, nl_dra_ref_t *ref,
                    char **err) {
  *ref = (nl_dra_ref_t){0};
  const char *ns = pod->metadata.namespace_ ? pod->metadata.namespace_ : "";
  const char *pn = pod->metadata.name ? pod->metadata.name : "";
  if (pc->resource_claim_name) {
    ref->name = pc->resource_claim_name;
    return 0;
  }
  if (!pc->resource_claim_template_name) {
    *err = nl_xasprintf("pod \"%s/%s\", spec.resourceClaim \"%s\": none of the supported "
                        "fields are set", ns, pn, pc->name ? pc->name : "");
    return -1;
  }
  const nl_api_pod_status_t *st = pod->status;
  for (size_t i = 0; st && i < st->n_resource_claim_statuses; i++) {
    const struct nl_pod_claim_status *cs = &st->resource_claim_statuses[i];
    if (!cs->name || !pc->name || strcmp(cs->name, pc->name) != 0) continue;
    ref->name = cs->resource_claim_name; /* NULL: no claim needed */
    ref->owned = true;
    return 0;
  }
  *err = nl_xasprintf("pod \"%s/%s\": ResourceClaim not created yet", ns, pn);
  return -1;
}

static const char *jstr(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

void nl__dra_claim_view_free(nl_dra_claim_view_t *v) {
  free(v->uid);
  nl__dra_strv_free(v->drivers, v->n_drivers);
  *v = (nl_dra_claim_view_t){0};
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int nl__dra_claim_check(const char *json, size_t len, const char *ns, const char *name,
                        bool owned, const char *pod_ns, const char *pod_name,
                        const char *pod_uid, nl_dra_claim_view_t *out, char **err) {
  *out = (nl_dra_claim_view_t){0};
  json_error_t je;
  json_t *doc = json_loadb(json, len, 0, &je);
  if (!json_is_object(doc)) {
    *err = nl_xasprintf("ResourceClaim %s: cannot read the API's answer: %s", name,
                        doc ? "not an object" : je.text);
    json_decref(doc);
    return -1;
  }
  json_t *meta = json_object_get(doc, "metadata");
  json_t *status = json_object_get(doc, "status");
  const char *uid = jstr(meta, "uid");
  int rc = -1;
  if (owned) { /* upstream IsForPod */
    bool is_owner = false;
    json_t *refs = json_object_get(meta, "ownerReferences"), *r;
    size_t i;
    json_array_foreach(refs, i, r) {
      if (json_is_true(json_object_get(r, "controller")) && strcmp(jstr(r, "uid"), pod_uid) == 0)
        is_owner = true;
    }
    if (strcmp(jstr(meta, "namespace"), pod_ns) != 0) {
      *err = nl_xasprintf("ResourceClaim %s/%s is not in the same namespace as Pod %s/%s", ns,
                          name, pod_ns, pod_name);
      goto out;
    }
    if (!is_owner) {
      *err = nl_xasprintf("ResourceClaim %s/%s was not created for Pod %s/%s (Pod is not owner)",
                          ns, name, pod_ns, pod_name);
      goto out;
    }
  }
  bool reserved = false; /* upstream IsReservedForPod: by UID */
  json_t *rf = json_object_get(status, "reservedFor"), *r;
  size_t i;
  json_array_foreach(rf, i, r) {
    if (strcmp(jstr(r, "uid"), pod_uid) == 0) reserved = true;
  }
  if (!reserved) {
    *err = nl_xasprintf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", pod_name,
                        pod_uid, name, uid);
    goto out;
  }
  json_t *alloc = json_object_get(status, "allocation");
  if (!json_is_object(alloc)) {
    *err = nl_xasprintf("ResourceClaim %s: not allocated", name);
    goto out;
  }
  json_t *results = json_object_get(json_object_get(alloc, "devices"), "results");
  json_array_foreach(results, i, r) {
    const char *d = jstr(r, "driver");
    if (*d) nl__dra_strv_add(&out->drivers, &out->n_drivers, d);
  }
  if (out->n_drivers > 1) qsort(out->drivers, out->n_drivers, sizeof *out->drivers, cmp_str);
  out->uid = nl_xstrdup(uid);
  rc = 0;
out:
  json_decref(doc);
  return rc;
}
