/* The pod resources API v1 (managers/podresources.h). */
#include "managers/podresources.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

#define API "v1"
#define PATH_LIST "/v1.PodResourcesLister/List"
#define PATH_ALLOCATABLE "/v1.PodResourcesLister/GetAllocatableResources"
#define PATH_GET "/v1.PodResourcesLister/Get"
/* upstream still serves the first version's List on the same socket; its
 * messages are v1's first fields, with the same numbers, so a v1 answer
 * without the fields v1 added (dynamic_resources is left out for it; the
 * others are never set here) is its answer */
#define PATH_LIST_V1ALPHA1 "/v1alpha1.PodResourcesLister/List"

/* ---- building the answers ---- */

/* A growing array of ContainerDevices, one per device as upstream's
 * containerDevicesFromResourceDeviceInstances (no topology: nanolet has no
 * topology manager and keeps no NUMA node). */
typedef struct devs_out {
  V1__ContainerDevices **v;
  size_t n;
} devs_out_t;

static void add_devices(void *ctx, const char *resource, const char *const *ids, size_t n) {
  devs_out_t *o = ctx;
  o->v = nl_xrealloc(o->v, (o->n + n + 1) * sizeof *o->v);
  for (size_t i = 0; i < n; i++) {
    V1__ContainerDevices *d = nl_xmalloc(sizeof *d);
    v1__container_devices__init(d);
    d->resource_name = (char *)resource;
    d->device_ids = nl_xmalloc(sizeof *d->device_ids);
    d->device_ids[0] = (char *)ids[i];
    d->n_device_ids = 1;
    o->v[o->n++] = d;
  }
}

static void devices_free(V1__ContainerDevices **v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i]->device_ids);
    free(v[i]);
  }
  free(v);
}

/* A growing array of DynamicResources, one per claim, each with one
 * ClaimResource per prepared device (upstream's GetDynamicResources; each
 * device with its own CDI IDs). */
typedef struct dyn_out {
  V1__DynamicResource **v;
  size_t n;
} dyn_out_t;

static void add_claim(void *ctx, const char *ns, const char *name,
                      const nl_dra_device_info_t *devs, size_t n) {
  dyn_out_t *o = ctx;
  V1__DynamicResource *dr = nl_xmalloc(sizeof *dr);
  v1__dynamic_resource__init(dr);
  dr->claim_name = (char *)name;
  dr->claim_namespace = (char *)ns;
  dr->claim_resources = nl_xcalloc(n + 1, sizeof *dr->claim_resources);
  for (size_t i = 0; i < n; i++) {
    V1__ClaimResource *cr = nl_xmalloc(sizeof *cr);
    v1__claim_resource__init(cr);
    cr->driver_name = (char *)devs[i].driver;
    cr->pool_name = (char *)devs[i].pool;
    cr->device_name = (char *)devs[i].device;
    if (devs[i].share_id) cr->share_id = (char *)devs[i].share_id;
    cr->cdi_devices = nl_xcalloc(devs[i].n_cdi + 1, sizeof *cr->cdi_devices);
    for (size_t k = 0; k < devs[i].n_cdi; k++) {
      V1__CDIDevice *d = nl_xmalloc(sizeof *d);
      v1__cdidevice__init(d);
      d->name = devs[i].cdi[k];
      cr->cdi_devices[cr->n_cdi_devices++] = d;
    }
    dr->claim_resources[dr->n_claim_resources++] = cr;
  }
  o->v = nl_xrealloc(o->v, (o->n + 1) * sizeof *o->v);
  o->v[o->n++] = dr;
}

static void dynamic_free(V1__DynamicResource **v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < v[i]->n_claim_resources; j++) {
      V1__ClaimResource *cr = v[i]->claim_resources[j];
      for (size_t k = 0; k < cr->n_cdi_devices; k++) free(cr->cdi_devices[k]);
      free(cr->cdi_devices);
      free(cr);
    }
    free(v[i]->claim_resources);
    free(v[i]);
  }
  free(v);
}

static bool devices_on(const nl_podres_t *p) {
  return p->deps.devices && p->deps.devices->state == NL_DEVICES_RUNNING;
}

static bool dra_on(const nl_podres_t *p) {
  return p->deps.dra && p->deps.dra->state == NL_DRA_RUNNING;
}

/* The container's claims; none when one of them is not known (a pod whose
 * claims are not prepared yet): upstream logs that and answers nothing. */
static void add_claims(nl_podres_t *p, const nl_pod_t *pod, const nl_container_t *c,
                       V1__ContainerResources *cr) {
  dyn_out_t o = {0};
  char *err = NULL;
  if (nl_dra_foreach_container_claim(p->deps.dra, pod, c, add_claim, &o, &err) < 0) {
    nl_vlog(4, "pod resources: pod %s/%s container %s: %s", pod->metadata.namespace_,
            pod->metadata.name, c->name, err);
    free(err);
    return;
  }
  cr->dynamic_resources = o.v;
  cr->n_dynamic_resources = o.n;
}

static V1__ContainerResources *container_of_pod(nl_podres_t *p, const nl_pod_t *pod,
                                                const nl_container_t *c, bool v1) {
  V1__ContainerResources *cr = nl_xmalloc(sizeof *cr);
  v1__container_resources__init(cr);
  cr->name = c->name;
  devs_out_t o = {0};
  if (devices_on(p)) nl_devices_foreach_assigned(p->deps.devices, pod->metadata.uid, c->name,
                                                 add_devices, &o);
  cr->devices = o.v;
  cr->n_devices = o.n;
  if (v1 && dra_on(p)) add_claims(p, pod, c, cr);
  return cr;
}

/* upstream: restartable init containers (sidecars), then the containers;
 * v1alpha1: the containers only, and their devices only */
static V1__PodResources *pod_resources_of(nl_podres_t *p, const nl_pod_t *pod, bool v1) {
  V1__PodResources *pr = nl_xmalloc(sizeof *pr);
  v1__pod_resources__init(pr);
  pr->name = pod->metadata.name;
  pr->namespace_ = pod->metadata.namespace_;
  const nl_pod_spec_t *s = &pod->spec;
  pr->containers = nl_xcalloc(s->n_init_containers + s->n_containers + 1, sizeof *pr->containers);
  for (size_t i = 0; v1 && i < s->n_init_containers; i++) {
    const nl_container_t *c = &s->init_containers[i];
    if (c->restart_policy && strcmp(c->restart_policy, "Always") == 0)
      pr->containers[pr->n_containers++] = container_of_pod(p, pod, c, v1);
  }
  for (size_t i = 0; i < s->n_containers; i++)
    pr->containers[pr->n_containers++] = container_of_pod(p, pod, &s->containers[i], v1);
  return pr;
}

static void pod_resources_free(V1__PodResources *pr) {
  if (!pr) return;
  for (size_t i = 0; i < pr->n_containers; i++) {
    V1__ContainerResources *cr = pr->containers[i];
    devices_free(cr->devices, cr->n_devices);
    dynamic_free(cr->dynamic_resources, cr->n_dynamic_resources);
    free(cr);
  }
  free(pr->containers);
  free(pr);
}

static bool active(const nl_podres_t *p, const nl_pod_t *pod) {
  return !p->deps.pod_active || p->deps.pod_active(p->deps.pod_active_ctx, pod->metadata.uid);
}

/* List's answer. v1: the active pods (upstream's GetActivePods), sidecars
 * among their containers. v1alpha1: every pod of the pod manager, active or
 * not (upstream's podsProvider.GetPods()), with v1alpha1's fields only. */
static V1__ListPodResourcesResponse *list(nl_podres_t *p, bool v1) {
  V1__ListPodResourcesResponse *r = nl_xmalloc(sizeof *r);
  v1__list_pod_resources_response__init(r);
  /* upstream's UpdateAllocatedDevices: devices of pods gone are freed first */
  if (devices_on(p)) nl_devices_release_inactive(p->deps.devices);
  size_t n = 0;
  const nl_pod_t **pods = p->deps.pods ? nl_pod_manager_list(p->deps.pods, &n) : NULL;
  r->pod_resources = nl_xcalloc(n + 1, sizeof *r->pod_resources);
  for (size_t i = 0; i < n; i++)
    if (!v1 || active(p, pods[i]))
      r->pod_resources[r->n_pod_resources++] = pod_resources_of(p, pods[i], v1);
  free(pods);
  return r;
}

V1__ListPodResourcesResponse *nl_podres_list(nl_podres_t *p) { return list(p, true); }

V1__GetPodResourcesResponse *nl_podres_get(nl_podres_t *p, const char *ns, const char *name) {
  const nl_pod_t *pod = p->deps.pods ? nl_pod_manager_get_by_name(p->deps.pods, ns, name) : NULL;
  if (!pod) return NULL;
  V1__GetPodResourcesResponse *r = nl_xmalloc(sizeof *r);
  v1__get_pod_resources_response__init(r);
  r->pod_resources = pod_resources_of(p, pod, true);
  return r;
}

V1__AllocatableResourcesResponse *nl_podres_allocatable(nl_podres_t *p) {
  V1__AllocatableResourcesResponse *r = nl_xmalloc(sizeof *r);
  v1__allocatable_resources_response__init(r);
  devs_out_t o = {0};
  if (devices_on(p)) nl_devices_foreach_allocatable(p->deps.devices, add_devices, &o);
  r->devices = o.v;
  r->n_devices = o.n;
  return r;
}

void nl_podres_msg_free(ProtobufCMessage *msg) {
  if (!msg) return;
  if (msg->descriptor == &v1__list_pod_resources_response__descriptor) {
    V1__ListPodResourcesResponse *r = (V1__ListPodResourcesResponse *)msg;
    for (size_t i = 0; i < r->n_pod_resources; i++) pod_resources_free(r->pod_resources[i]);
    free(r->pod_resources);
  } else if (msg->descriptor == &v1__allocatable_resources_response__descriptor) {
    V1__AllocatableResourcesResponse *r = (V1__AllocatableResourcesResponse *)msg;
    devices_free(r->devices, r->n_devices);
  } else {
    assert(msg->descriptor == &v1__get_pod_resources_response__descriptor);
    pod_resources_free(((V1__GetPodResourcesResponse *)msg)->pod_resources);
  }
  free(msg);
}

/* ---- the handlers ---- */

/* upstream's rate limit interceptor: before the method (nothing is counted) */
static bool admitted(nl_podres_t *p, nl_grpc_call_t *call) {
  uint64_t wait = 0;
  if (p->deps.qps < 0 || nl_kube_ratelimit_reserve(&p->rl, uv_now(p->loop), 0, &wait)) return true;
  nl_grpc_call_reply(call, NL_GRPC_RESOURCE_EXHAUSTED, "rejected by rate limit", NULL, 0);
  return false;
}

/* List and Get answer from the pods the agent knows: until its sources gave
 * their first lists (just after a start) an answer would leave out running
 * pods, so the client is told to try again. */
static bool pods_known(nl_podres_t *p, nl_grpc_call_t *call) {
  if (!p->deps.pods_synced || p->deps.pods_synced(p->deps.pod_active_ctx)) return true;
  nl_grpc_call_reply(call, NL_GRPC_UNAVAILABLE, "the kubelet does not know its pods yet", NULL,
                     0);
  return false;
}

static void count(nl_podres_t *p, nl_kmetrics_podres_t method, bool failed) {
  if (p->deps.metrics) nl_kmetrics_podres(p->deps.metrics, API, method, failed);
}

/* The request must decode (all three are small); grpc-go's own words. */
static ProtobufCMessage *decode(nl_grpc_call_t *call, const ProtobufCMessageDescriptor *d,
                                const uint8_t *data, size_t len) {
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, data);
  if (!m) nl_grpc_call_reply(call, NL_GRPC_INTERNAL, "grpc: error unmarshalling request", NULL, 0);
  return m;
}

static void h_list(void *ctx, nl_grpc_call_t *call, const uint8_t *data, size_t len) {
  nl_podres_t *p = ctx;
  if (!admitted(p, call)) return;
  if (!pods_known(p, call)) return;
  ProtobufCMessage *req = decode(call, &v1__list_pod_resources_request__descriptor, data, len);
  if (!req) return;
  protobuf_c_message_free_unpacked(req, NULL);
  count(p, NL_KMETRICS_PODRES_LIST, false);
  V1__ListPodResourcesResponse *r = nl_podres_list(p);
  nl_grpc_call_reply_msg(call, &r->base);
  nl_podres_msg_free(&r->base);
}

static void h_list_v1alpha1(void *ctx, nl_grpc_call_t *call, const uint8_t *data, size_t len) {
  nl_podres_t *p = ctx;
  if (!admitted(p, call)) return;
  if (!pods_known(p, call)) return;
  ProtobufCMessage *req = decode(call, &v1__list_pod_resources_request__descriptor, data, len);
  if (!req) return;
  protobuf_c_message_free_unpacked(req, NULL);
  if (p->deps.metrics)
    nl_kmetrics_podres(p->deps.metrics, "v1alpha1", NL_KMETRICS_PODRES_TOTAL, false);
  V1__ListPodResourcesResponse *r = list(p, false);
  nl_grpc_call_reply_msg(call, &r->base);
  nl_podres_msg_free(&r->base);
}

static void h_allocatable(void *ctx, nl_grpc_call_t *call, const uint8_t *data, size_t len) {
  nl_podres_t *p = ctx;
  if (!admitted(p, call)) return;
  ProtobufCMessage *req = decode(call, &v1__allocatable_resources_request__descriptor, data, len);
  if (!req) return;
  protobuf_c_message_free_unpacked(req, NULL);
  count(p, NL_KMETRICS_PODRES_GET_ALLOCATABLE, false);
  V1__AllocatableResourcesResponse *r = nl_podres_allocatable(p);
  nl_grpc_call_reply_msg(call, &r->base);
  nl_podres_msg_free(&r->base);
}

static void h_get(void *ctx, nl_grpc_call_t *call, const uint8_t *data, size_t len) {
  nl_podres_t *p = ctx;
  if (!admitted(p, call)) return;
  if (!pods_known(p, call)) return;
  V1__GetPodResourcesRequest *req =
      (V1__GetPodResourcesRequest *)decode(call, &v1__get_pod_resources_request__descriptor,
                                           data, len);
  if (!req) return;
  V1__GetPodResourcesResponse *r = nl_podres_get(p, req->pod_namespace, req->pod_name);
  count(p, NL_KMETRICS_PODRES_GET, !r);
  if (!r) {
    char *msg = nl_xasprintf("pod %s in namespace %s not found", req->pod_name,
                             req->pod_namespace);
    nl_grpc_call_reply(call, NL_GRPC_UNKNOWN, msg, NULL, 0);
    free(msg);
  } else {
    nl_grpc_call_reply_msg(call, &r->base);
    nl_podres_msg_free(&r->base);
  }
  protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* ---- life cycle ---- */

int nl_podres_start(nl_podres_t *p, uv_loop_t *loop, const char *dir,
                    const nl_podres_deps_t *deps, nl_err_t **err) {
  memset(p, 0, sizeof *p);
  p->loop = loop;
  p->deps = *deps;
  if (!p->deps.qps) p->deps.qps = NL_PODRES_QPS;
  if (!p->deps.burst) p->deps.burst = NL_PODRES_BURST;
  nl_kube_ratelimit_init(&p->rl, p->deps.qps, p->deps.burst, uv_now(loop));
  /* 0600 as the registration socket: the agents that read it run as root */
  nl_grpc_server_opts_t so = {.mode = 0600, .max_conns = 16, .max_recv_msg_size = 64 * 1024};
  nl_grpc_server_init(&p->server, loop, &so);
  nl_grpc_server_method(&p->server, PATH_LIST, NL_GRPC_UNARY, h_list, p);
  nl_grpc_server_method(&p->server, PATH_ALLOCATABLE, NL_GRPC_UNARY, h_allocatable, p);
  nl_grpc_server_method(&p->server, PATH_GET, NL_GRPC_UNARY, h_get, p);
  nl_grpc_server_method(&p->server, PATH_LIST_V1ALPHA1, NL_GRPC_UNARY, h_list_v1alpha1, p);
  char *path = nl_xasprintf("%s/%s", dir, NL_PODRES_SOCKET);
  int rc = nl_grpc_server_listen(&p->server, path, err);
  if (rc == 0) nl_info("serving the pod resources API on %s", path);
  free(path);
  return rc < 0 ? nl_err_wrap(err, "pod resources API") : 0;
}

static void server_stopped(nl_grpc_server_t *srv, void *ctx) {
  (void)srv;
  nl_podres_t *p = ctx;
  if (p->done) p->done(p, p->done_ctx);
}

void nl_podres_stop(nl_podres_t *p, nl_podres_done_fn done, void *ctx) {
  if (p->stopping) return;
  p->stopping = true;
  p->done = done;
  p->done_ctx = ctx;
  nl_grpc_server_stop(&p->server, server_stopped, p);
}
