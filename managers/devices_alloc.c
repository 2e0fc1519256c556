/* The device manager's pods: admission (which devices a container gets),
 * GetPreferredAllocation (devices_preferred.c), Allocate and
 * PreStartContainer before a container is created, which waits
 * for the checkpoint to hold the answers (devices_checkpoint.c;
 * managers/devices.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/podres.h"
#include "managers/devices_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define PATH_ALLOCATE "/v1beta1.DevicePlugin/Allocate"
#define PATH_PRE_START "/v1beta1.DevicePlugin/PreStartContainer"

/* ---- assignments ---- */

nl_dev_alloc_t *nl__dev_alloc_find(const nl_devices_t *m, const char *uid, const char *container,
                                   const char *resource) {
  for (nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next) {
    nl_dev_alloc_t *a = nl_list_entry(p, nl_dev_alloc_t, link);
    if (strcmp(a->pod_uid, uid) == 0 && strcmp(a->container, container) == 0 &&
        strcmp(a->resource, resource) == 0)
      return a;
  }
  return NULL;
}

void nl__dev_alloc_free(nl_dev_alloc_t *a) {
  for (size_t i = 0; i < a->n_ids; i++) free(a->ids[i]);
  free(a->ids);
  free(a->resp);
  free(a->pod_uid);
  free(a->container);
  free(a->resource);
  free(a);
}

nl_dev_alloc_t *nl__dev_alloc_add(nl_devices_t *m, const char *uid, const char *container,
                                 const char *resource) {
  nl_dev_alloc_t *a = nl_xcalloc(1, sizeof *a);
  a->pod_uid = nl_xstrdup(uid);
  a->container = nl_xstrdup(container);
  a->resource = nl_xstrdup(resource);
  nl_list_insert_tail(&m->allocs, &a->link);
  return a;
}

void nl__dev_alloc_push(nl_dev_alloc_t *a, const char *id) {
  a->ids = nl_xrealloc(a->ids, (a->n_ids + 1) * sizeof *a->ids);
  a->ids[a->n_ids++] = nl_xstrdup(id);
}

char *const *nl_devices_assigned(const nl_devices_t *m, const char *pod_uid,
                                 const char *container, const char *resource, size_t *n) {
  const nl_dev_alloc_t *a = nl__dev_alloc_find(m, pod_uid, container, resource);
  *n = a ? a->n_ids : 0;
  return a ? a->ids : NULL;
}

void nl_devices_foreach_assigned(const nl_devices_t *m, const char *pod_uid,
                                 const char *container, nl_devices_ids_fn fn, void *ctx) {
  for (nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next) {
    const nl_dev_alloc_t *a = nl_list_entry(p, nl_dev_alloc_t, link);
    if (a->n_ids && strcmp(a->pod_uid, pod_uid) == 0 && strcmp(a->container, container) == 0)
      fn(ctx, a->resource, (const char *const *)a->ids, a->n_ids);
  }
}

bool nl__dev_in_use(const nl_devices_t *m, const char *resource, const char *id) {
  for (nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next) {
    const nl_dev_alloc_t *a = nl_list_entry(p, nl_dev_alloc_t, link);
    if (strcmp(a->resource, resource) != 0) continue;
    for (size_t i = 0; i < a->n_ids; i++)
      if (strcmp(a->ids[i], id) == 0) return true;
  }
  return false;
}

static void release(nl_devices_t *m, const char *keep_uid) {
  if (!m->opts.pod_active) return;
  if (m->opts.sources_ready && !m->opts.sources_ready(m->opts.pod_active_ctx)) return;
  bool any = false;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->allocs) {
    nl_dev_alloc_t *a = nl_list_entry(pos, nl_dev_alloc_t, link);
    if (keep_uid && strcmp(a->pod_uid, keep_uid) == 0) continue;
    if (m->opts.pod_active(m->opts.pod_active_ctx, a->pod_uid)) continue;
    nl_vlog(2, "device manager: pod %s is gone: its %zu %s devices are free", a->pod_uid,
            a->n_ids, a->resource);
    nl_list_remove(&a->link);
    nl__dev_alloc_free(a);
    any = true;
  }
  if (any) nl__dev_checkpoint_write(m);
}

void nl_devices_release_inactive(nl_devices_t *m) {
  if (m->state == NL_DEVICES_RUNNING) release(m, NULL);
}

/* A resource the device manager answers for (upstream isDevicePluginResource):
 * a plugin registered it and its grace period is not over, or devices of it
 * are assigned. */
static nl_dev_resource_t *plugin_resource(nl_devices_t *m, const char *name) {
  nl_dev_resource_t *r = nl_map_get(&m->resources, name);
  if (r && !r->expired) return r;
  for (nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next)
    if (strcmp(nl_list_entry(p, nl_dev_alloc_t, link)->resource, name) == 0)
      return nl__dev_resource(m, name);
  return NULL;
}

typedef struct reuse {
  char *resource;
  char **ids;
  size_t n;
} reuse_t;

static reuse_t *reuse_of(reuse_t **v, size_t *n, const char *resource) {
  for (size_t i = 0; i < *n; i++)
    if (strcmp((*v)[i].resource, resource) == 0) return &(*v)[i];
  *v = nl_xrealloc(*v, (*n + 1) * sizeof **v);
  (*v)[*n] = (reuse_t){nl_xstrdup(resource), NULL, 0};
  return &(*v)[(*n)++];
}

static void reuse_add(reuse_t *r, char *const *ids, size_t n) {
  for (size_t i = 0; i < n; i++) {
    size_t j;
    for (j = 0; j < r->n && strcmp(r->ids[j], ids[i]) != 0; j++) {
    }
    if (j < r->n) continue;
    r->ids = nl_xrealloc(r->ids, (r->n + 1) * sizeof *r->ids);
    r->ids[r->n++] = nl_xstrdup(ids[i]);
  }
}

static void reuse_drop(reuse_t *r, char *const *ids, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < r->n; j++)
      if (strcmp(r->ids[j], ids[i]) == 0) {
        free(r->ids[j]);
        r->ids[j] = r->ids[--r->n];
        break;
      }
}

/* Devices assigned before (the checkpoint's), as upstream's devicesToAllocate
 * judges them: a container still running is an agent restart, and has its
 * devices; otherwise (a node reboot) the plugin must be registered and the
 * devices healthy. Upstream asks "running" only while its sources are not all
 * seen, which holds during the admission of their first lists (it marks a
 * source seen after handling its update); the pods admitted again after a
 * start are those, and a pod is admitted once otherwise. */
static char *reassigned(nl_devices_t *m, const char *uid, const char *container,
                        const nl_dev_resource_t *r, const nl_dev_alloc_t *a) {
  if (m->opts.container_running && m->opts.container_running(m->opts.pod_active_ctx, uid, container))
    return NULL;
  if (!r->ep && !r->ended_at) return nl_xasprintf("cannot allocate unregistered device %s", r->name);
  size_t healthy = 0;
  for (size_t i = 0; r->ep && i < r->n_devs; i++) healthy += r->devs[i].healthy;
  if (!healthy)
    return nl_xasprintf("no healthy devices present; cannot allocate unhealthy devices %s", r->name);
  for (size_t i = 0; i < a->n_ids; i++) {
    size_t j = 0;
    while (j < r->n_devs && (strcmp(r->devs[j].id, a->ids[i]) != 0 || !r->devs[j].healthy)) j++;
    if (j == r->n_devs)
      return nl_xasprintf("previously allocated devices are no longer healthy; cannot allocate "
                          "unhealthy devices %s", r->name);
  }
  return NULL;
}

/* upstream devicesToAllocate for one container and resource. */
static char *assign(nl_devices_t *m, const nl_pod_t *pod, const nl_container_t *c,
                    nl_dev_resource_t *r, int64_t needed, reuse_t *reuse, bool *made) {
  const char *uid = pod->metadata.uid;
  nl_dev_alloc_t *a = nl__dev_alloc_find(m, uid, c->name, r->name);
  if (a) { /* assigned already (a restart of the agent or of the container) */
    if ((int64_t)a->n_ids != needed)
      return nl_xasprintf("pod \"%s\" container \"%s\" changed request for resource \"%s\" "
                          "from %zu to %lld", uid, c->name, r->name, a->n_ids,
                          (long long)needed);
    return reassigned(m, uid, c->name, r, a);
  }
  if (!r->devs && !r->ep && !r->ended_at)
    return nl_xasprintf("cannot allocate unregistered device %s", r->name);
  a = nl__dev_alloc_add(m, uid, c->name, r->name);
  a->admitting = true;
  *made = true;
  for (size_t i = 0; i < reuse->n && needed > 0; i++, needed--) nl__dev_alloc_push(a, reuse->ids[i]);
  if (needed == 0) return NULL;
  size_t available = 0;
  for (size_t i = 0; i < r->n_devs; i++)
    if (r->ep && r->devs[i].healthy && !nl__dev_in_use(m, r->name, r->devs[i].id)) available++;
  if ((int64_t)available < needed)
    return nl_xasprintf("requested number of devices unavailable for %s. Requested: %lld, "
                        "Available: %zu", r->name, (long long)needed, available);
  for (size_t i = 0; i < r->n_devs && needed > 0; i++) {
    if (!r->ep || !r->devs[i].healthy || nl__dev_in_use(m, r->name, r->devs[i].id)) continue;
    nl__dev_alloc_push(a, r->devs[i].id);
    needed--;
  }
  return NULL;
}

static char *admit_container(nl_devices_t *m, const nl_pod_t *pod, const nl_container_t *c,
                             bool init, reuse_t **reuse, size_t *n_reuse, bool *made) {
  const nl_resource_list_t *l = &c->resources.limits;
  for (size_t i = 0; i < l->n; i++) {
    nl_dev_resource_t *r = plugin_resource(m, l->items[i].name);
    int64_t needed = nl_quantity_value(&l->items[i].q);
    if (!r || needed <= 0 || nl_pod_dra_extended(pod, c->name, r->name)) continue;
    reuse_t *ru = reuse_of(reuse, n_reuse, r->name);
    char *e = assign(m, pod, c, r, needed, ru, made);
    if (e) return e;
    size_t n;
    char *const *ids = nl_devices_assigned(m, pod->metadata.uid, c->name, r->name, &n);
    /* As upstream: a plain init container's devices are free for the
     * containers after it; a sidecar (restartable init container) keeps its
     * own while they run, as an app container does. */
    bool sidecar = init && c->restart_policy && strcmp(c->restart_policy, "Always") == 0;
    if (init && !sidecar) reuse_add(ru, ids, n);
    else reuse_drop(ru, ids, n);
  }
  return NULL;
}

bool nl_devices_admit(nl_devices_t *m, const nl_pod_t *pod, char **msg) {
  *msg = NULL;
  if (m->state != NL_DEVICES_RUNNING) return true;
  release(m, pod->metadata.uid);
  reuse_t *reuse = NULL;
  size_t n_reuse = 0;
  bool made = false;
  char *e = NULL;
  for (size_t i = 0; !e && i < pod->spec.n_init_containers; i++)
    e = admit_container(m, pod, &pod->spec.init_containers[i], true, &reuse, &n_reuse, &made);
  for (size_t i = 0; !e && i < pod->spec.n_containers; i++)
    e = admit_container(m, pod, &pod->spec.containers[i], false, &reuse, &n_reuse, &made);
  for (size_t i = 0; i < n_reuse; i++) {
    for (size_t j = 0; j < reuse[i].n; j++) free(reuse[i].ids[j]);
    free(reuse[i].ids);
    free(reuse[i].resource);
  }
  free(reuse);
  /* nothing of a failed admission stays assigned; what was before stays */
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->allocs) {
    nl_dev_alloc_t *a = nl_list_entry(pos, nl_dev_alloc_t, link);
    if (!a->admitting) continue;
    a->admitting = false;
    if (!e) continue;
    nl_list_remove(&a->link);
    nl__dev_alloc_free(a);
  }
  if (e) {
    *msg = nl_xasprintf("Allocate failed due to %s, which is unexpected", e);
    free(e);
    return false;
  }
  if (made) nl__dev_checkpoint_write(m);
  return true;
}

/* ---- a container's Allocate and PreStartContainer ---- */

typedef struct dev_req {
  nl_list_t link; /* m->requests while its caller waits */
  nl_devices_t *m;
  char *uid, *container;
  char *pod;        /* namespace/name, for the log */
  char **resources; /* of its assignments, in order */
  size_t n;
  int pending;      /* calls in flight */
  uint64_t ckpt_gen; /* the checkpoint that holds its Allocate answers */
  bool prestarted;
  bool ckpt_wait;   /* answered once that checkpoint is written */
  char *err;
  nl_devices_container_fn fn; /* NULL once answered */
  void *ctx;
} dev_req_t;

typedef struct dev_call {
  dev_req_t *req;
  char *resource;
  uint64_t start_ns; /* kubelet_device_plugin_alloc_duration_seconds */
} dev_call_t;

static void req_next(dev_req_t *q);

/* Keeps the first error: "device plugin for <resource>: <what><detail>". */
static void req_fail(dev_req_t *q, const char *resource, const char *what, const char *detail) {
  if (q->err) return;
  q->err = nl_xasprintf("device plugin for %s: %s%s", resource, what, detail ? detail : "");
}

static void on_allocate(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  dev_call_t *dc = ctx;
  dev_req_t *q = dc->req;
  q->pending--;
  if (q->m->opts.metrics)
    nl_kmetrics_device_alloc(q->m->opts.metrics, dc->resource,
                             (double)(uv_hrtime() - dc->start_ns) / 1e9);
  const V1beta1__AllocateResponse *r = (const V1beta1__AllocateResponse *)resp;
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    req_fail(q, dc->resource, "Allocate: ", e);
    free(e);
  } else if (r->n_container_responses != 1 || !r->container_responses[0]) {
    req_fail(q, dc->resource, "Allocate: the answer has no container response", NULL);
  } else if (q->fn) {
    nl_dev_alloc_t *a = nl__dev_alloc_find(q->m, q->uid, q->container, dc->resource);
    if (a) {
      const ProtobufCMessage *cr = &r->container_responses[0]->base;
      free(a->resp);
      a->resp_len = protobuf_c_message_get_packed_size(cr);
      a->resp = nl_xmalloc(a->resp_len + 1);
      protobuf_c_message_pack(cr, a->resp);
      q->ckpt_gen = nl__dev_checkpoint_write(q->m);
    }
  }
  free(dc->resource);
  free(dc);
  req_next(q);
}

static void on_pre_start(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  (void)resp;
  dev_call_t *dc = ctx;
  dev_req_t *q = dc->req;
  q->pending--;
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    req_fail(q, dc->resource, "PreStartContainer: ", e);
    free(e);
  }
  free(dc->resource);
  free(dc);
  req_next(q);
}

static void req_free(dev_req_t *q) {
  for (size_t i = 0; i < q->n; i++) free(q->resources[i]);
  free(q->resources);
  free(q->uid);
  free(q->container);
  free(q->pod);
  free(q->err);
  free(q);
}

/* Answers the caller (once) with the assignments' answers or the error. */
static void req_answer(dev_req_t *q) {
  nl_devices_container_fn fn = q->fn;
  q->fn = NULL;
  nl_list_remove(&q->link);
  V1beta1__ContainerAllocateResponse **rs = nl_xcalloc(q->n + 1, sizeof *rs);
  size_t n = 0;
  for (size_t i = 0; !q->err && i < q->n; i++) {
    nl_dev_alloc_t *a = nl__dev_alloc_find(q->m, q->uid, q->container, q->resources[i]);
    if (!a || !a->resp) {
      req_fail(q, q->resources[i], "its devices are no longer assigned", NULL);
      break;
    }
    rs[n] = v1beta1__container_allocate_response__unpack(NULL, a->resp_len, a->resp);
    if (!rs[n]) {
      req_fail(q, q->resources[i], "its Allocate answer in the checkpoint does not decode", NULL);
      break;
    }
    n++;
  }
  fn(q->ctx, rs, q->err ? 0 : n, q->err);
  for (size_t i = 0; i < n; i++) v1beta1__container_allocate_response__free_unpacked(rs[i], NULL);
  free(rs);
}

static void call_on(dev_req_t *q, const char *resource, const char *path,
                    const ProtobufCMessage *msg, const ProtobufCMessageDescriptor *desc,
                    nl_cri_unary_cb cb) {
  nl_dev_resource_t *r = nl_map_get(&q->m->resources, resource);
  if (!r || !r->ep || r->ep->state != NL_DEV_EP_WATCHING) {
    req_fail(q, resource, "no plugin is registered for it", NULL);
    return;
  }
  dev_call_t *dc = nl_xcalloc(1, sizeof *dc);
  dc->req = q;
  dc->resource = nl_xstrdup(resource);
  dc->start_ns = uv_hrtime();
  q->pending++;
  nl_cri_client_call(&r->ep->client, path, msg, desc, 0, cb, dc);
}

/* The request's steps: Allocate for each assignment without an answer, then
 * PreStartContainer for each plugin that asked for it, then the answer. */
static void req_next(dev_req_t *q) {
  if (q->pending > 0) return;
  if (!q->fn) { /* answered (the manager stopped) */
    req_free(q);
    return;
  }
  if (!q->err && !q->prestarted) {
    q->prestarted = true;
    for (size_t i = 0; i < q->n && !q->err; i++) {
      nl_dev_resource_t *r = nl_map_get(&q->m->resources, q->resources[i]);
      nl_dev_alloc_t *a = nl__dev_alloc_find(q->m, q->uid, q->container, q->resources[i]);
      if (!r || !r->pre_start_required || !a) continue;
      V1beta1__PreStartContainerRequest req = V1BETA1__PRE_START_CONTAINER_REQUEST__INIT;
      req.devices_ids = a->ids;
      req.n_devices_ids = a->n_ids;
      call_on(q, q->resources[i], PATH_PRE_START, &req.base,
              &v1beta1__pre_start_container_response__descriptor, on_pre_start);
    }
    if (q->pending > 0) return;
  }
  /* As upstream, the container starts only once its devices' Allocate
   * answers are in the checkpoint: an agent restarted after the start finds
   * them there, and allocates nothing twice. */
  if (!q->err && q->ckpt_gen > q->m->ckpt_done) {
    q->ckpt_wait = true;
    return;
  }
  req_answer(q);
  req_free(q);
}

void nl__dev_requests_checkpointed(nl_devices_t *m, const char *err) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->requests) {
    dev_req_t *q = nl_list_entry(pos, dev_req_t, link);
    if (!q->ckpt_wait || q->ckpt_gen > m->ckpt_done) continue;
    q->ckpt_wait = false;
    if (err && !q->err) q->err = nl_xasprintf("device manager: %s", err);
    req_next(q);
  }
}

/* Asks the plugin's Allocate for a's devices. */
static void allocate(dev_req_t *q, const nl_dev_alloc_t *a) {
  V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
  creq.devices_ids = a->ids;
  creq.n_devices_ids = a->n_ids;
  V1beta1__ContainerAllocateRequest *one[] = {&creq};
  V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
  req.container_requests = one;
  req.n_container_requests = 1;
  nl_info("device manager: Allocate %zu %s devices for pod %s container %s", a->n_ids,
          a->resource, q->pod, q->container);
  call_on(q, a->resource, PATH_ALLOCATE, &req.base, &v1beta1__allocate_response__descriptor,
          on_allocate);
}

/* The plugin's preference is in (or nanolet's choice stands): Allocate. */
static void on_preferred(void *ctx) {
  dev_call_t *dc = ctx;
  dev_req_t *q = dc->req;
  q->pending--;
  if (q->fn && !q->err) {
    const nl_dev_alloc_t *a = nl__dev_alloc_find(q->m, q->uid, q->container, dc->resource);
    if (a) allocate(q, a);
    else req_fail(q, dc->resource, "its devices are no longer assigned", NULL);
  }
  free(dc->resource);
  free(dc);
  req_next(q);
}

bool nl_devices_container(nl_devices_t *m, const nl_pod_t *pod, const nl_container_t *c,
                          nl_devices_container_fn fn, void *ctx) {
  dev_req_t *q = NULL;
  for (nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next) {
    nl_dev_alloc_t *a = nl_list_entry(p, nl_dev_alloc_t, link);
    if (strcmp(a->pod_uid, pod->metadata.uid) != 0 || strcmp(a->container, c->name) != 0)
      continue;
    if (!q) {
      q = nl_xcalloc(1, sizeof *q);
      q->m = m;
      q->uid = nl_xstrdup(a->pod_uid);
      q->container = nl_xstrdup(c->name);
      q->fn = fn;
      q->ctx = ctx;
      nl_list_insert_tail(&m->requests, &q->link);
    }
    q->resources = nl_xrealloc(q->resources, (q->n + 1) * sizeof *q->resources);
    q->resources[q->n++] = nl_xstrdup(a->resource);
  }
  if (!q) return false;
  if (m->state != NL_DEVICES_RUNNING) q->err = nl_xstrdup("the device manager is stopping");
  q->pod = nl_xasprintf("%s/%s", pod->metadata.namespace_, pod->metadata.name);
  for (size_t i = 0; i < q->n && !q->err; i++) {
    nl_dev_alloc_t *a = nl__dev_alloc_find(m, q->uid, q->container, q->resources[i]);
    if (a->resp) continue; /* answered before (checkpointed) */
    nl_dev_resource_t *r = nl_map_get(&m->resources, a->resource);
    if (r && r->preferred_allocation && r->ep && r->ep->state == NL_DEV_EP_WATCHING) {
      dev_call_t *dc = nl_xcalloc(1, sizeof *dc);
      dc->req = q;
      dc->resource = nl_xstrdup(a->resource);
      q->pending++;
      nl__dev_preferred(m, a, r->ep, on_preferred, dc);
    } else {
      allocate(q, a);
    }
  }
  req_next(q);
  return true;
}

void nl__dev_requests_cancel(nl_devices_t *m) {
  while (!nl_list_empty(&m->requests)) {
    dev_req_t *q = nl_list_entry(m->requests.next, dev_req_t, link);
    nl_list_remove(&q->link);
    nl_list_init(&q->link);
    nl_devices_container_fn fn = q->fn;
    q->fn = NULL;
    fn(q->ctx, NULL, 0, "the device manager is stopping");
    /* Its calls end CANCELLED as the plugin connections close, and the last
     * frees it; one waiting only for the checkpoint has none. */
    if (q->pending == 0) req_free(q);
  }
}
