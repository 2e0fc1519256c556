/* GetPreferredAllocation: before a container's Allocate, a plugin that
 * registered with GetPreferredAllocationAvailable chooses which of the free
 * devices the container gets (upstream's callGetPreferredAllocationIfAvailable).
 * Admission already picked them (devices_alloc.c): the plugin's answer
 * replaces that choice when it is valid, and nanolet's stays when it is not
 * (why is logged). The call is bounded by the call timeout: a plugin that
 * never answers delays only this container, never admission. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "managers/devices_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define PATH_PREFERRED "/v1beta1.DevicePlugin/GetPreferredAllocation"

static bool has(char *const *ids, size_t n, const char *id) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(ids[i], id) == 0) return true;
  return false;
}

static void push(char ***ids, size_t *n, const char *id) {
  *ids = nl_xrealloc(*ids, (*n + 1) * sizeof **ids);
  (*ids)[(*n)++] = nl_xstrdup(id);
}

static void strv_free(char **ids, size_t n) {
  for (size_t i = 0; i < n; i++) free(ids[i]);
  free(ids);
}

void nl__dev_pref_free(nl_dev_pref_t *p) {
  strv_free(p->available, p->n_available);
  strv_free(p->must, p->n_must);
  *p = (nl_dev_pref_t){0};
}

/* A device of a's resource held by another container of a's pod whose
 * Allocate was answered (an init container's, reused): a must keep it. */
static bool held_by_started(const nl_devices_t *m, const nl_dev_alloc_t *a, const char *id) {
  for (const nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next) {
    const nl_dev_alloc_t *b = nl_list_entry(p, nl_dev_alloc_t, link);
    if (b == a || !b->resp || strcmp(b->pod_uid, a->pod_uid) != 0 ||
        strcmp(b->resource, a->resource) != 0)
      continue;
    if (has(b->ids, b->n_ids, id)) return true;
  }
  return false;
}

void nl__dev_pref_init(const nl_devices_t *m, const nl_dev_alloc_t *a, nl_dev_pref_t *p) {
  *p = (nl_dev_pref_t){.size = a->n_ids};
  for (size_t i = 0; i < a->n_ids; i++) {
    push(&p->available, &p->n_available, a->ids[i]);
    if (held_by_started(m, a, a->ids[i])) push(&p->must, &p->n_must, a->ids[i]);
  }
  const nl_dev_resource_t *r = nl_map_get(&m->resources, a->resource);
  for (size_t i = 0; r && r->ep && i < r->n_devs; i++) {
    const char *id = r->devs[i].id;
    if (r->devs[i].healthy && !nl__dev_in_use(m, a->resource, id) &&
        !has(p->available, p->n_available, id))
      push(&p->available, &p->n_available, id);
  }
}

char *nl__dev_pref_check(const nl_dev_pref_t *p, const V1beta1__PreferredAllocationResponse *r) {
  if (r->n_container_responses != 1 || !r->container_responses[0])
    return nl_xasprintf("the answer has %zu container responses, not 1",
                        r->n_container_responses);
  const V1beta1__ContainerPreferredAllocationResponse *c = r->container_responses[0];
  if (c->n_deviceids != p->size)
    return nl_xasprintf("it chose %zu devices, not %zu", c->n_deviceids, p->size);
  for (size_t i = 0; i < c->n_deviceids; i++) {
    const char *id = c->deviceids[i];
    if (!has(p->available, p->n_available, id))
      return nl_xasprintf("device \"%.64s\" is not available", id);
    if (has(c->deviceids, i, id)) return nl_xasprintf("device \"%.64s\" is chosen twice", id);
  }
  for (size_t i = 0; i < p->n_must; i++)
    if (!has(c->deviceids, c->n_deviceids, p->must[i]))
      return nl_xasprintf("device \"%s\" that the container must keep is left out", p->must[i]);
  return NULL;
}

/* a's devices become ids (as many). The pod's other containers not yet
 * allocated that reused a device a gives up take the one replacing it, so
 * that the pod's init and app containers still share as admission decided. */
static void apply(nl_devices_t *m, nl_dev_alloc_t *a, char *const *ids) {
  char **gone = NULL, **added = NULL;
  size_t n_gone = 0, n_added = 0;
  for (size_t i = 0; i < a->n_ids; i++)
    if (!has(ids, a->n_ids, a->ids[i])) push(&gone, &n_gone, a->ids[i]);
  for (size_t i = 0; i < a->n_ids; i++)
    if (!has(a->ids, a->n_ids, ids[i])) push(&added, &n_added, ids[i]);
  assert(n_gone == n_added);
  for (nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next) {
    nl_dev_alloc_t *b = nl_list_entry(p, nl_dev_alloc_t, link);
    if (b == a || b->resp || strcmp(b->pod_uid, a->pod_uid) != 0 ||
        strcmp(b->resource, a->resource) != 0)
      continue;
    for (size_t i = 0; i < b->n_ids; i++)
      for (size_t k = 0; k < n_gone; k++)
        if (strcmp(b->ids[i], gone[k]) == 0) {
          free(b->ids[i]);
          b->ids[i] = nl_xstrdup(added[k]);
          break;
        }
  }
  for (size_t i = 0; i < a->n_ids; i++) {
    free(a->ids[i]);
    a->ids[i] = nl_xstrdup(ids[i]);
  }
  strv_free(gone, n_gone);
  strv_free(added, n_added);
  if (n_gone) nl__dev_checkpoint_write(m);
}

typedef struct pref_call {
  nl_devices_t *m;
  char *uid, *container, *resource;
  nl_dev_pref_t asked;
  nl_dev_pref_done_fn done;
  void *ctx;
} pref_call_t;

static char *join(char *const *ids, size_t n) {
  size_t len = 1;
  for (size_t i = 0; i < n; i++) len += strlen(ids[i]) + 1;
  char *s = nl_xcalloc(1, len);
  for (size_t i = 0; i < n; i++) {
    if (i) strcat(s, ",");
    strcat(s, ids[i]);
  }
  return s;
}

static void on_preferred(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  pref_call_t *pc = ctx;
  nl_devices_t *m = pc->m;
  nl_dev_alloc_t *a = nl__dev_alloc_find(m, pc->uid, pc->container, pc->resource);
  char *why = NULL;
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    why = nl_xasprintf("the call failed: %s", e);
    free(e);
  } else if (a && !a->resp) {
    const V1beta1__PreferredAllocationResponse *r = (const V1beta1__PreferredAllocationResponse *)resp;
    why = nl__dev_pref_check(&pc->asked, r);
    if (!why) { /* still free now? (admissions went on while it was asked) */
      nl_dev_pref_t now;
      nl__dev_pref_init(m, a, &now);
      why = nl__dev_pref_check(&now, r);
      nl__dev_pref_free(&now);
    }
    if (!why) {
      const V1beta1__ContainerPreferredAllocationResponse *c = r->container_responses[0];
      char *s = join(c->deviceids, c->n_deviceids);
      nl_vlog(2, "device manager: %s's plugin prefers %s for pod %s container %s", a->resource,
              s, a->pod_uid, a->container);
      free(s);
      apply(m, a, c->deviceids);
    }
  }
  if (why && a && !a->resp) {
    char *s = join(a->ids, a->n_ids);
    nl_warn("device manager: GetPreferredAllocation of %s for pod %s container %s: %s; "
            "keeping nanolet's choice %s", pc->resource, pc->uid, pc->container, why, s);
    free(s);
  }
  free(why);
  pc->done(pc->ctx);
  nl__dev_pref_free(&pc->asked);
  free(pc->uid);
  free(pc->container);
  free(pc->resource);
  free(pc);
}

void nl__dev_preferred(nl_devices_t *m, nl_dev_alloc_t *a, nl_dev_endpoint_t *ep,
                       nl_dev_pref_done_fn done, void *ctx) {
  pref_call_t *pc = nl_xcalloc(1, sizeof *pc);
  pc->m = m;
  pc->uid = nl_xstrdup(a->pod_uid);
  pc->container = nl_xstrdup(a->container);
  pc->resource = nl_xstrdup(a->resource);
  pc->done = done;
  pc->ctx = ctx;
  nl__dev_pref_init(m, a, &pc->asked);
  V1beta1__ContainerPreferredAllocationRequest cr =
      V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
  cr.available_deviceids = pc->asked.available;
  cr.n_available_deviceids = pc->asked.n_available;
  cr.must_include_deviceids = pc->asked.must;
  cr.n_must_include_deviceids = pc->asked.n_must;
  cr.allocation_size = (int32_t)pc->asked.size;
  V1beta1__ContainerPreferredAllocationRequest *one[] = {&cr};
  V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
  req.container_requests = one;
  req.n_container_requests = 1;
  nl_vlog(2, "device manager: GetPreferredAllocation of %zu %s devices (of %zu available) for "
          "pod %s container %s", pc->asked.size, a->resource, pc->asked.n_available, a->pod_uid,
          a->container);
  nl_cri_client_call(&ep->client, PATH_PREFERRED, &req.base,
                     &v1beta1__preferred_allocation_response__descriptor, 0, on_preferred, pc);
}
