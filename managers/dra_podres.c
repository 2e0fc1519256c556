/* A container's claims and their prepared devices, for the pod resources API
 * (managers/dra.h, nl_dra_foreach_container_claim). */
#include <stdlib.h>
#include <string.h>

#include "managers/dra_internal.h"
#include "reactor/xalloc.h"

/* Whether the container's resources.claims name the pod's claim: upstream
 * keys them by name alone, so every device of the claim is the container's
 * here, whichever request it names. */
static bool names(const nl_container_t *ctr, const char *claim) {
  for (size_t i = 0; claim && i < ctr->resources.n_claims; i++) {
    const char *n = ctr->resources.claims[i].name;
    if (n && strcmp(n, claim) == 0) return true;
  }
  return false;
}

/* Whether one of the scheduler's request mappings names the container. */
static bool mapped(const struct nl_pod_ext_claim_status *x, const char *ctr) {
  for (size_t i = 0; i < x->n_request_mappings; i++) {
    const char *n = x->request_mappings[i].container_name;
    if (n && strcmp(n, ctr) == 0) return true;
  }
  return false;
}

int nl_dra_foreach_container_claim(const nl_dra_t *m, const nl_pod_t *pod,
                                   const nl_container_t *ctr, nl_dra_claim_fn fn, void *ctx,
                                   char **err) {
  *err = NULL;
  const char *ns = pod->metadata.namespace_ ? pod->metadata.namespace_ : "";
  /* every claim found before fn runs for any: all or nothing */
  const nl_dra_claim_t **found = nl_xcalloc(pod->spec.n_resource_claims + 1, sizeof *found);
  size_t n = 0;
  for (size_t i = 0; i < pod->spec.n_resource_claims; i++) {
    const nl_pod_resource_claim_t *pc = &pod->spec.resource_claims[i];
    if (!names(ctr, pc->name)) continue;
    nl_dra_ref_t ref;
    if (nl__dra_resolve(pod, pc, &ref, err) < 0) goto fail;
    if (!ref.name) continue; /* no claim needed */
    if (!(found[n++] = nl__dra_claim_find(m, ns, ref.name))) {
      *err = nl_xasprintf("unable to get information for ResourceClaim %s", ref.name);
      goto fail;
    }
  }
  const struct nl_pod_ext_claim_status *x = nl__dra_ext_claim(pod);
  if (x && mapped(x, ctr->name) &&
      !(found[n++] = nl__dra_claim_find(m, ns, x->resource_claim_name))) {
    *err = nl_xasprintf("unable to get claim info for claim %s in namespace %s",
                        x->resource_claim_name, ns);
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    const nl_dra_claim_t *c = found[i];
    nl_dra_device_info_t *devs = nl_xcalloc(c->n_devs + 1, sizeof *devs);
    for (size_t d = 0; d < c->n_devs; d++) {
      const nl_dra_device_t *dv = &c->devs[d];
      devs[d] = (nl_dra_device_info_t){.driver = dv->driver, .pool = dv->pool,
                                       .device = dv->device, .share_id = dv->share_id,
                                       .cdi = dv->cdi, .n_cdi = dv->n_cdi};
    }
    fn(ctx, c->ns, c->name, devs, c->n_devs);
    free(devs);
  }
  free(found);
  return 0;
fail:
  free(found);
  return -1;
}
