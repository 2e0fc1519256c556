/* The fake CRI server's in-memory runtime: sandboxes, containers and images,
 * and one handler per RPC. Requests are kept unpacked (protobuf-c owns them)
 * so that statuses and lists borrow their metadata, labels and annotations. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cri/api.h"
#include "reactor/xalloc.h"
#include "test/fakes/fake_cri_int.h"

typedef struct sandbox {
  char id[65];
  Runtime__V1__RunPodSandboxRequest *req; /* owned (unpacked) */
  Runtime__V1__PodSandboxState state;
  int64_t created_at;
  char ip[16];
} sandbox_t;

typedef struct container {
  char id[65];
  char sandbox_id[65];
  Runtime__V1__CreateContainerRequest *req; /* owned (unpacked) */
  Runtime__V1__ContainerState state;
  int64_t created_at, started_at, finished_at;
  int32_t exit_code;
  int64_t oom_at; /* when the OOM kill becomes its reason (0: not OOM-killed) */
  char image_id[72];
  char *log_path; /* owned */
} container_t;

typedef struct image {
  char id[72];
  char *ref; /* owned */
  uint64_t size;
} image_t;

/* Every map entry of CRI (labels, annotations) has this shape, whatever its
 * generated type, and packs the same: the fake shares them between types. */
typedef struct kv {
  ProtobufCMessage base;
  char *key, *value;
} kv_t;

typedef struct out {
  uint8_t **resp;
  size_t *len;
  char **msg;
  void *scratch[64]; /* arrays allocated while building the response */
  size_t nscratch;
} out_t;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void make_id(fake_cri_store_t *s, char *buf, size_t n) {
  uint64_t x = ++s->next_id;
  size_t o = 0;
  for (int i = 0; i < 4 && o + 16 < n; i++) {
    /* splitmix64: distinct-looking ids from a counter. */
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    o += (size_t)snprintf(buf + o, n - o, "%016llx", (unsigned long long)z);
  }
}

static void *scratch(out_t *o, size_t count, size_t size) {
  void *p = nl_xcalloc(count ? count : 1, size);
  if (o->nscratch < sizeof(o->scratch) / sizeof(o->scratch[0]))
    o->scratch[o->nscratch++] = p;
  else
    abort(); /* a handler needs more arrays than foreseen: raise the bound */
  return p;
}

static int reply(out_t *o, const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  *o->resp = nl_xmalloc(n ? n : 1);
  *o->len = protobuf_c_message_pack(m, *o->resp);
  return 0;
}

static int fail(out_t *o, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(out_t *o, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(o->msg, fmt, ap) < 0) abort();
  va_end(ap);
  return code;
}

static bool labels_match(size_t nsel, void **sel, size_t nl, void **labels) {
  for (size_t i = 0; i < nsel; i++) {
    kv_t *want = sel[i];
    bool found = false;
    for (size_t j = 0; j < nl && !found; j++) {
      kv_t *have = labels[j];
      found = strcmp(have->key, want->key) == 0 && strcmp(have->value, want->value) == 0;
    }
    if (!found) return false;
  }
  return true;
}

#define UNPACK(var, snake)                                                                 \
  Runtime__V1__##snake *var = (void *)protobuf_c_message_unpack(                           \
      &runtime__v1__##snake##_descriptor_name, NULL, len, in);                             \
  if (!var) return fail(o, 13, "fake-cri: cannot decode " #snake);                        \
  nl_cleanup_msg __attribute__((unused)) ProtobufCMessage *var##_owned = &var->base;

static void msg_freep(ProtobufCMessage **m) {
  if (*m) protobuf_c_message_free_unpacked(*m, NULL);
}
#define nl_cleanup_msg __attribute__((cleanup(msg_freep)))

/* protobuf-c names descriptors in snake case; this maps the CamelCase type. */
#define runtime__v1__ReopenContainerLogRequest_descriptor_name \
  runtime__v1__reopen_container_log_request__descriptor
#define runtime__v1__VersionRequest_descriptor_name runtime__v1__version_request__descriptor
#define runtime__v1__RuntimeConfigRequest_descriptor_name \
  runtime__v1__runtime_config_request__descriptor
#define runtime__v1__StatusRequest_descriptor_name runtime__v1__status_request__descriptor
#define runtime__v1__RunPodSandboxRequest_descriptor_name \
  runtime__v1__run_pod_sandbox_request__descriptor
#define runtime__v1__StopPodSandboxRequest_descriptor_name \
  runtime__v1__stop_pod_sandbox_request__descriptor
#define runtime__v1__RemovePodSandboxRequest_descriptor_name \
  runtime__v1__remove_pod_sandbox_request__descriptor
#define runtime__v1__PodSandboxStatusRequest_descriptor_name \
  runtime__v1__pod_sandbox_status_request__descriptor
#define runtime__v1__ListPodSandboxRequest_descriptor_name \
  runtime__v1__list_pod_sandbox_request__descriptor
#define runtime__v1__CreateContainerRequest_descriptor_name \
  runtime__v1__create_container_request__descriptor
#define runtime__v1__StartContainerRequest_descriptor_name \
  runtime__v1__start_container_request__descriptor
#define runtime__v1__StopContainerRequest_descriptor_name \
  runtime__v1__stop_container_request__descriptor
#define runtime__v1__RemoveContainerRequest_descriptor_name \
  runtime__v1__remove_container_request__descriptor
#define runtime__v1__ListContainersRequest_descriptor_name \
  runtime__v1__list_containers_request__descriptor
#define runtime__v1__ContainerStatusRequest_descriptor_name \
  runtime__v1__container_status_request__descriptor
#define runtime__v1__ExecSyncRequest_descriptor_name runtime__v1__exec_sync_request__descriptor
#define runtime__v1__ExecRequest_descriptor_name runtime__v1__exec_request__descriptor
#define runtime__v1__AttachRequest_descriptor_name runtime__v1__attach_request__descriptor
#define runtime__v1__PortForwardRequest_descriptor_name \
  runtime__v1__port_forward_request__descriptor
#define runtime__v1__ListPodSandboxStatsRequest_descriptor_name \
  runtime__v1__list_pod_sandbox_stats_request__descriptor
#define runtime__v1__ListImagesRequest_descriptor_name runtime__v1__list_images_request__descriptor
#define runtime__v1__ImageStatusRequest_descriptor_name \
  runtime__v1__image_status_request__descriptor
#define runtime__v1__PullImageRequest_descriptor_name runtime__v1__pull_image_request__descriptor
#define runtime__v1__RemoveImageRequest_descriptor_name \
  runtime__v1__remove_image_request__descriptor

/* ---- runtime --------------------------------------------------------------- */

static int h_version(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, VersionRequest);
  Runtime__V1__VersionResponse r = RUNTIME__V1__VERSION_RESPONSE__INIT;
  r.version = "0.1.0";
  r.runtime_name = "fake-cri";
  r.runtime_version = "0.1.0";
  r.runtime_api_version = "v1";
  return reply(o, &r.base);
}

static int h_runtime_config(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, RuntimeConfigRequest);
  if (!s->cgroup_driver) return fail(o, 12, "unknown method RuntimeConfig");
  Runtime__V1__LinuxRuntimeConfiguration l = RUNTIME__V1__LINUX_RUNTIME_CONFIGURATION__INIT;
  l.cgroup_driver = s->cgroup_driver == 1 ? RUNTIME__V1__CGROUP_DRIVER__SYSTEMD
                                          : RUNTIME__V1__CGROUP_DRIVER__CGROUPFS;
  Runtime__V1__RuntimeConfigResponse r = RUNTIME__V1__RUNTIME_CONFIG_RESPONSE__INIT;
  r.linux = &l;
  return reply(o, &r.base);
}

static int h_status(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, StatusRequest);
  Runtime__V1__RuntimeCondition c[2] = {RUNTIME__V1__RUNTIME_CONDITION__INIT,
                                        RUNTIME__V1__RUNTIME_CONDITION__INIT};
  Runtime__V1__RuntimeCondition *cp[2] = {&c[0], &c[1]};
  c[0].type = "RuntimeReady";
  c[0].status = 1;
  c[1].type = "NetworkReady";
  c[1].status = 1;
  Runtime__V1__RuntimeStatus st = RUNTIME__V1__RUNTIME_STATUS__INIT;
  st.n_conditions = 2;
  st.conditions = cp;
  Runtime__V1__StatusResponse r = RUNTIME__V1__STATUS_RESPONSE__INIT;
  r.status = &st;
  return reply(o, &r.base);
}

static int h_run_pod_sandbox(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  Runtime__V1__RunPodSandboxRequest *req = (void *)protobuf_c_message_unpack(
      &runtime__v1__run_pod_sandbox_request__descriptor, NULL, len, in);
  if (!req) return fail(o, 13, "fake-cri: cannot decode RunPodSandboxRequest");
  if (!req->config || !req->config->metadata || !req->config->metadata->name[0]) {
    protobuf_c_message_free_unpacked(&req->base, NULL);
    return fail(o, 3, "sandbox config must include metadata");
  }
  sandbox_t *sb = nl_xcalloc(1, sizeof(*sb));
  make_id(s, sb->id, sizeof(sb->id));
  sb->req = req;
  sb->state = RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY;
  sb->created_at = now_ns();
  snprintf(sb->ip, sizeof(sb->ip), "10.88.%u.%u", (unsigned)(s->next_id / 250) % 250,
           (unsigned)(s->next_id % 250) + 2);
  nl_map_put(&s->sandboxes, sb->id, sb);
  Runtime__V1__RunPodSandboxResponse r = RUNTIME__V1__RUN_POD_SANDBOX_RESPONSE__INIT;
  r.pod_sandbox_id = sb->id;
  return reply(o, &r.base);
}

/* A GetContainerEvents message, as containerd sends it: the container, the
 * kind of event, and its sandbox's status (id, metadata, state). */
static void event(fake_cri_store_t *s, const container_t *c, Runtime__V1__ContainerEventType type) {
  if (!s->on_event) return;
  const sandbox_t *sb = nl_map_get(&s->sandboxes, c->sandbox_id);
  Runtime__V1__PodSandboxStatus st = RUNTIME__V1__POD_SANDBOX_STATUS__INIT;
  Runtime__V1__ContainerEventResponse ev = RUNTIME__V1__CONTAINER_EVENT_RESPONSE__INIT;
  ev.container_id = (char *)c->id;
  ev.container_event_type = type;
  ev.created_at = now_ns();
  if (sb) {
    st.id = (char *)sb->id;
    st.metadata = sb->req->config ? sb->req->config->metadata : NULL;
    st.state = sb->state;
    st.created_at = sb->created_at;
    ev.pod_sandbox_status = &st;
  }
  size_t len = protobuf_c_message_get_packed_size(&ev.base);
  uint8_t *buf = nl_xmalloc(len + 1);
  protobuf_c_message_pack(&ev.base, buf);
  s->on_event(s->event_ctx, buf, len);
  free(buf);
}

static void container_exit(fake_cri_store_t *s, container_t *c, int32_t code) {
  if (c->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING) return;
  c->state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
  c->finished_at = now_ns();
  c->exit_code = code;
  event(s, c, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STOPPED_EVENT);
}

static void container_free(void *p) {
  container_t *c = p;
  protobuf_c_message_free_unpacked(&c->req->base, NULL);
  free(c->log_path);
  free(c);
}

static void sandbox_free(void *p) {
  sandbox_t *sb = p;
  protobuf_c_message_free_unpacked(&sb->req->base, NULL);
  free(sb);
}

static int h_stop_pod_sandbox(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, StopPodSandboxRequest);
  sandbox_t *sb = nl_map_get(&s->sandboxes, req->pod_sandbox_id);
  if (!sb) return fail(o, 5, "an error occurred when try to find sandbox \"%s\": not found",
                       req->pod_sandbox_id);
  sb->state = RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY;
  nl_map_iter_t it;
  const char *k;
  void *v;
  for (nl_map_iter_init(&it, &s->containers); nl_map_iter_next(&it, &k, &v);) {
    container_t *c = v;
    if (strcmp(c->sandbox_id, sb->id) == 0) container_exit(s, c, 137);
  }
  Runtime__V1__StopPodSandboxResponse r = RUNTIME__V1__STOP_POD_SANDBOX_RESPONSE__INIT;
  return reply(o, &r.base);
}

static int h_remove_pod_sandbox(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, RemovePodSandboxRequest);
  sandbox_t *sb = nl_map_get(&s->sandboxes, req->pod_sandbox_id);
  if (sb) {
    if (sb->state == RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY)
      return fail(o, 2, "sandbox container \"%s\" is not fully stopped", sb->id);
    nl_map_iter_t it;
    const char *k;
    void *v;
    for (nl_map_iter_init(&it, &s->containers); nl_map_iter_next(&it, &k, &v);) {
      container_t *c = v;
      if (strcmp(c->sandbox_id, sb->id) != 0) continue;
      event(s, c, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_DELETED_EVENT);
      container_free(nl_map_del(&s->containers, k));
    }
    sandbox_free(nl_map_del(&s->sandboxes, sb->id));
  }
  Runtime__V1__RemovePodSandboxResponse r = RUNTIME__V1__REMOVE_POD_SANDBOX_RESPONSE__INIT;
  return reply(o, &r.base);
}

static int h_pod_sandbox_status(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, PodSandboxStatusRequest);
  sandbox_t *sb = nl_map_get(&s->sandboxes, req->pod_sandbox_id);
  if (!sb) return fail(o, 5, "an error occurred when try to find sandbox \"%s\": not found",
                       req->pod_sandbox_id);
  Runtime__V1__PodSandboxConfig *cfg = sb->req->config;
  Runtime__V1__PodSandboxNetworkStatus net = RUNTIME__V1__POD_SANDBOX_NETWORK_STATUS__INIT;
  net.ip = sb->ip;
  Runtime__V1__PodSandboxStatus st = RUNTIME__V1__POD_SANDBOX_STATUS__INIT;
  st.id = sb->id;
  st.metadata = cfg->metadata;
  st.state = sb->state;
  st.created_at = sb->created_at;
  st.network = &net;
  st.n_labels = cfg->n_labels;
  st.labels = (void *)cfg->labels;
  st.n_annotations = cfg->n_annotations;
  st.annotations = (void *)cfg->annotations;
  st.runtime_handler = sb->req->runtime_handler;
  Runtime__V1__PodSandboxStatusResponse r = RUNTIME__V1__POD_SANDBOX_STATUS_RESPONSE__INIT;
  r.status = &st;
  r.timestamp = now_ns();
  return reply(o, &r.base);
}

static int h_list_pod_sandbox(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, ListPodSandboxRequest);
  Runtime__V1__PodSandboxFilter *flt = req->filter;
  size_t n = nl_map_size(&s->sandboxes), k = 0;
  Runtime__V1__PodSandbox *items = scratch(o, n, sizeof(*items));
  Runtime__V1__PodSandbox **ptrs = scratch(o, n, sizeof(*ptrs));
  nl_map_iter_t it;
  const char *key;
  void *v;
  for (nl_map_iter_init(&it, &s->sandboxes); nl_map_iter_next(&it, &key, &v);) {
    sandbox_t *sb = v;
    Runtime__V1__PodSandboxConfig *cfg = sb->req->config;
    if (flt && flt->id[0] && strcmp(flt->id, sb->id) != 0) continue;
    if (flt && flt->state && flt->state->state != sb->state) continue;
    if (flt && !labels_match(flt->n_label_selector, (void **)flt->label_selector,
                             cfg->n_labels, (void **)cfg->labels))
      continue;
    Runtime__V1__PodSandbox *p = &items[k];
    runtime__v1__pod_sandbox__init(p);
    p->id = sb->id;
    p->metadata = cfg->metadata;
    p->state = sb->state;
    p->created_at = sb->created_at;
    p->n_labels = cfg->n_labels;
    p->labels = (void *)cfg->labels;
    p->n_annotations = cfg->n_annotations;
    p->annotations = (void *)cfg->annotations;
    p->runtime_handler = sb->req->runtime_handler;
    ptrs[k++] = p;
  }
  Runtime__V1__ListPodSandboxResponse r = RUNTIME__V1__LIST_POD_SANDBOX_RESPONSE__INIT;
  r.n_items = k;
  r.items = ptrs;
  return reply(o, &r.base);
}

/* ---- containers ------------------------------------------------------------ */

static image_t *image_find(fake_cri_store_t *s, const char *ref) {
  image_t *im = nl_map_get(&s->images, ref);
  if (im) return im;
  nl_map_iter_t it;
  const char *k;
  void *v;
  for (nl_map_iter_init(&it, &s->images); nl_map_iter_next(&it, &k, &v);)
    if (strcmp(((image_t *)v)->id, ref) == 0) return v;
  return NULL;
}

static int h_create_container(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  Runtime__V1__CreateContainerRequest *req = (void *)protobuf_c_message_unpack(
      &runtime__v1__create_container_request__descriptor, NULL, len, in);
  if (!req) return fail(o, 13, "fake-cri: cannot decode CreateContainerRequest");
  int code = 0;
  sandbox_t *sb = nl_map_get(&s->sandboxes, req->pod_sandbox_id);
  image_t *im = NULL;
  if (!sb)
    code = fail(o, 5, "failed to get sandbox \"%s\": not found", req->pod_sandbox_id);
  else if (!req->config || !req->config->metadata || !req->config->metadata->name[0])
    code = fail(o, 3, "container config must include metadata");
  else if (!req->config->image || !(im = image_find(s, req->config->image->image)))
    code = fail(o, 5, "failed to get image \"%s\": not found",
                req->config && req->config->image ? req->config->image->image : "");
  if (code) {
    protobuf_c_message_free_unpacked(&req->base, NULL);
    return code;
  }
  container_t *c = nl_xcalloc(1, sizeof(*c));
  make_id(s, c->id, sizeof(c->id));
  memcpy(c->sandbox_id, sb->id, sizeof(c->sandbox_id));
  c->req = req;
  c->state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED;
  c->created_at = now_ns();
  memcpy(c->image_id, im->id, sizeof(c->image_id));
  c->log_path = nl_xasprintf("%s/%s", sb->req->config->log_directory, req->config->log_path);
  nl_map_put(&s->containers, c->id, c);
  event(s, c, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_CREATED_EVENT);
  Runtime__V1__CreateContainerResponse r = RUNTIME__V1__CREATE_CONTAINER_RESPONSE__INIT;
  r.container_id = c->id;
  return reply(o, &r.base);
}

#define FIND_CONTAINER(c, id)                                                               \
  container_t *c = nl_map_get(&s->containers, id);                                         \
  if (!c) return fail(o, 5, "an error occurred when try to find container \"%s\": not found", \
                      id);

static int h_start_container(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, StartContainerRequest);
  FIND_CONTAINER(c, req->container_id);
  if (c->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED)
    return fail(o, 2, "container is in %s state",
                c->state == RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING ? "CONTAINER_RUNNING"
                                                                            : "CONTAINER_EXITED");
  c->state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
  c->started_at = now_ns();
  event(s, c, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT);
  Runtime__V1__StartContainerResponse r = RUNTIME__V1__START_CONTAINER_RESPONSE__INIT;
  return reply(o, &r.base);
}

static int h_stop_container(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, StopContainerRequest);
  FIND_CONTAINER(c, req->container_id);
  container_exit(s, c, req->timeout > 0 ? 143 : 137);
  Runtime__V1__StopContainerResponse r = RUNTIME__V1__STOP_CONTAINER_RESPONSE__INIT;
  return reply(o, &r.base);
}

static int h_remove_container(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, RemoveContainerRequest);
  container_t *c = nl_map_del(&s->containers, req->container_id);
  if (c) event(s, c, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_DELETED_EVENT);
  if (c) container_free(c);
  Runtime__V1__RemoveContainerResponse r = RUNTIME__V1__REMOVE_CONTAINER_RESPONSE__INIT;
  return reply(o, &r.base);
}

/* The runtime would open the log file anew; the fake writes no logs. */
static int h_reopen_container_log(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, ReopenContainerLogRequest);
  FIND_CONTAINER(c, req->container_id);
  if (c->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING)
    return fail(o, 9, "container is not running");
  Runtime__V1__ReopenContainerLogResponse r = RUNTIME__V1__REOPEN_CONTAINER_LOG_RESPONSE__INIT;
  return reply(o, &r.base);
}

static int h_list_containers(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, ListContainersRequest);
  Runtime__V1__ContainerFilter *flt = req->filter;
  size_t n = nl_map_size(&s->containers), k = 0;
  Runtime__V1__Container *items = scratch(o, n, sizeof(*items));
  Runtime__V1__Container **ptrs = scratch(o, n, sizeof(*ptrs));
  nl_map_iter_t it;
  const char *key;
  void *v;
  for (nl_map_iter_init(&it, &s->containers); nl_map_iter_next(&it, &key, &v);) {
    container_t *c = v;
    Runtime__V1__ContainerConfig *cfg = c->req->config;
    if (flt && flt->id[0] && strcmp(flt->id, c->id) != 0) continue;
    if (flt && flt->state && flt->state->state != c->state) continue;
    if (flt && flt->pod_sandbox_id[0] && strcmp(flt->pod_sandbox_id, c->sandbox_id) != 0)
      continue;
    if (flt && !labels_match(flt->n_label_selector, (void **)flt->label_selector,
                             cfg->n_labels, (void **)cfg->labels))
      continue;
    Runtime__V1__Container *p = &items[k];
    runtime__v1__container__init(p);
    p->id = c->id;
    p->pod_sandbox_id = c->sandbox_id;
    p->metadata = cfg->metadata;
    p->image = cfg->image;
    p->image_ref = c->image_id;
    p->image_id = c->image_id;
    p->state = c->state;
    p->created_at = c->created_at;
    p->n_labels = cfg->n_labels;
    p->labels = (void *)cfg->labels;
    p->n_annotations = cfg->n_annotations;
    p->annotations = (void *)cfg->annotations;
    ptrs[k++] = p;
  }
  Runtime__V1__ListContainersResponse r = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
  r.n_containers = k;
  r.containers = ptrs;
  return reply(o, &r.base);
}

static int h_container_status(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, ContainerStatusRequest);
  FIND_CONTAINER(c, req->container_id);
  Runtime__V1__ContainerConfig *cfg = c->req->config;
  Runtime__V1__ContainerStatus st = RUNTIME__V1__CONTAINER_STATUS__INIT;
  st.id = c->id;
  st.metadata = cfg->metadata;
  st.state = c->state;
  st.created_at = c->created_at;
  st.started_at = c->started_at;
  st.finished_at = c->finished_at;
  st.exit_code = c->exit_code;
  st.image = cfg->image;
  st.image_ref = c->image_id;
  st.image_id = c->image_id;
  if (c->state == RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED)
    st.reason = c->oom_at && now_ns() >= c->oom_at ? "OOMKilled"
                : c->exit_code == 0                 ? "Completed"
                                                    : "Error";
  st.n_labels = cfg->n_labels;
  st.labels = (void *)cfg->labels;
  st.n_annotations = cfg->n_annotations;
  st.annotations = (void *)cfg->annotations;
  st.log_path = c->log_path;
  Runtime__V1__ContainerStatusResponse r = RUNTIME__V1__CONTAINER_STATUS_RESPONSE__INIT;
  r.status = &st;
  return reply(o, &r.base);
}

static int h_exec_sync(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, ExecSyncRequest);
  FIND_CONTAINER(c, req->container_id);
  if (c->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING)
    return fail(o, 2, "container %s is not running", c->id);
  size_t n = 1;
  for (size_t i = 0; i < req->n_cmd; i++) n += strlen(req->cmd[i]) + 1;
  char *outb = scratch(o, n, 1);
  for (size_t i = 0; i < req->n_cmd; i++) {
    if (i) strcat(outb, " ");
    strcat(outb, req->cmd[i]);
  }
  strcat(outb, "\n");
  Runtime__V1__ExecSyncResponse r = RUNTIME__V1__EXEC_SYNC_RESPONSE__INIT;
  r.stdout.data = (uint8_t *)outb;
  r.stdout.len = strlen(outb);
  return reply(o, &r.base);
}

/* Exec, Attach, PortForward: the streaming URL under the base the test set
 * (fake_cri_set_stream_base), "<base>/<verb>/<id>". */
static int stream_url(fake_cri_store_t *s, out_t *o, const char *verb, const char *id,
                      ProtobufCMessage *r, char **url) {
  char *u = scratch(o, strlen(s->stream_base ? s->stream_base : "") + strlen(verb) + strlen(id) + 3, 1);
  sprintf(u, "%s/%s/%s", s->stream_base ? s->stream_base : "", verb, id);
  *url = u;
  return reply(o, r);
}

static int h_exec(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, ExecRequest);
  FIND_CONTAINER(c, req->container_id);
  Runtime__V1__ExecResponse r = RUNTIME__V1__EXEC_RESPONSE__INIT;
  return stream_url(s, o, "exec", c->id, &r.base, &r.url);
}

static int h_attach(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, AttachRequest);
  FIND_CONTAINER(c, req->container_id);
  Runtime__V1__AttachResponse r = RUNTIME__V1__ATTACH_RESPONSE__INIT;
  return stream_url(s, o, "attach", c->id, &r.base, &r.url);
}

static int h_port_forward(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, PortForwardRequest);
  if (!nl_map_get(&s->sandboxes, req->pod_sandbox_id))
    return fail(o, 5, "failed to find sandbox \"%s\": not found", req->pod_sandbox_id);
  Runtime__V1__PortForwardResponse r = RUNTIME__V1__PORT_FORWARD_RESPONSE__INIT;
  return stream_url(s, o, "portforward", req->pod_sandbox_id, &r.base, &r.url);
}

/* Figures that grow with time since creation, so rates come out steady:
 * a sandbox or container uses 10 ms of CPU per second and 8 MiB of memory. */
static void fake_usage(int64_t created, int64_t now, Runtime__V1__CpuUsage *cpu,
                       Runtime__V1__MemoryUsage *mem, Runtime__V1__UInt64Value *v) {
  runtime__v1__cpu_usage__init(cpu);
  runtime__v1__memory_usage__init(mem);
  for (int i = 0; i < 2; i++) runtime__v1__uint64_value__init(&v[i]);
  cpu->timestamp = mem->timestamp = now;
  v[0].value = (uint64_t)(now - created) / 100;
  v[1].value = 8u << 20;
  cpu->usage_core_nano_seconds = &v[0];
  mem->working_set_bytes = &v[1];
}

static int h_list_pod_sandbox_stats(fake_cri_store_t *s, const uint8_t *in, size_t len,
                                    out_t *o) {
  UNPACK(req, ListPodSandboxStatsRequest);
  size_t n = nl_map_size(&s->sandboxes), m = nl_map_size(&s->containers), k = 0, j = 0;
  int64_t now = now_ns();
  Runtime__V1__PodSandboxStats *ps = scratch(o, n, sizeof(*ps)), **pp = scratch(o, n, sizeof(*pp));
  Runtime__V1__PodSandboxAttributes *pa = scratch(o, n, sizeof(*pa));
  Runtime__V1__LinuxPodSandboxStats *pl = scratch(o, n, sizeof(*pl));
  Runtime__V1__CpuUsage *pc = scratch(o, n + m, sizeof(*pc));
  Runtime__V1__MemoryUsage *pm = scratch(o, n + m, sizeof(*pm));
  Runtime__V1__UInt64Value *pv = scratch(o, 2 * (n + m), sizeof(*pv));
  Runtime__V1__ContainerStats *cs = scratch(o, m, sizeof(*cs)), **cp = scratch(o, m, sizeof(*cp));
  Runtime__V1__ContainerAttributes *ca = scratch(o, m, sizeof(*ca));
  nl_map_iter_t it, ct;
  const char *key;
  void *v, *cv;
  for (nl_map_iter_init(&it, &s->sandboxes); nl_map_iter_next(&it, &key, &v);) {
    sandbox_t *sb = v;
    if (sb->state != RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY) continue;
    runtime__v1__pod_sandbox_stats__init(&ps[k]);
    runtime__v1__pod_sandbox_attributes__init(&pa[k]);
    runtime__v1__linux_pod_sandbox_stats__init(&pl[k]);
    pa[k].id = sb->id;
    pa[k].metadata = sb->req->config->metadata;
    fake_usage(sb->created_at, now, &pc[k], &pm[k], &pv[2 * k]);
    pl[k].cpu = &pc[k];
    pl[k].memory = &pm[k];
    pl[k].containers = &cp[j];
    for (nl_map_iter_init(&ct, &s->containers); nl_map_iter_next(&ct, &key, &cv);) {
      container_t *c = cv;
      if (strcmp(c->sandbox_id, sb->id) != 0 ||
          c->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING)
        continue;
      runtime__v1__container_stats__init(&cs[j]);
      runtime__v1__container_attributes__init(&ca[j]);
      ca[j].id = c->id;
      ca[j].metadata = c->req->config->metadata;
      cs[j].attributes = &ca[j];
      size_t u = n + j;
      fake_usage(c->started_at, now, &pc[u], &pm[u], &pv[2 * u]);
      cs[j].cpu = &pc[u];
      cs[j].memory = &pm[u];
      cp[j] = &cs[j];
      j++;
      pl[k].n_containers++;
    }
    ps[k].attributes = &pa[k];
    ps[k].linux = &pl[k];
    pp[k] = &ps[k];
    k++;
  }
  Runtime__V1__ListPodSandboxStatsResponse r = RUNTIME__V1__LIST_POD_SANDBOX_STATS_RESPONSE__INIT;
  r.n_stats = k;
  r.stats = pp;
  return reply(o, &r.base);
}

/* Runs one call through its handler. On 0, *resp is the packed response
 * (the caller frees it) unless resp is NULL. */
static int seed_call(fake_cri_store_t *s, const char *method, const ProtobufCMessage *req,
                     uint8_t **resp, size_t *resp_len) {
  size_t len = protobuf_c_message_get_packed_size(req);
  uint8_t *in = nl_xmalloc(len ? len : 1);
  protobuf_c_message_pack(req, in);
  uint8_t *r = NULL;
  size_t rlen = 0;
  char *msg = NULL;
  int code = fake_cri__handle(s, method, in, len, &r, &rlen, &msg);
  free(in);
  free(msg);
  if (resp && code == 0) {
    *resp = r;
    *resp_len = rlen;
  } else {
    free(r);
  }
  return code;
}

int fake_cri__store_add_container(fake_cri_store_t *s, const char *pod, const char *name,
                                  const char *image, bool kube, char *id, size_t id_len) {
  fake_cri__store_add_image(s, image);
  Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  md.name = (char *)pod;
  md.namespace_ = "default";
  md.uid = (char *)pod;
  Runtime__V1__PodSandboxConfig sc = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
  sc.metadata = &md;
  /* The kubelet's labels (kuberuntime labels.go), for the sandbox (3) and the
   * container (all 4). */
  Runtime__V1__PodSandboxConfig__LabelsEntry l[4] = {
      RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT, RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT,
      RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT, RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT};
  const char *kv[4][2] = {{"io.kubernetes.pod.uid", pod}, {"io.kubernetes.pod.name", pod},
                          {"io.kubernetes.pod.namespace", "default"}, {"io.kubernetes.container.name", name}};
  Runtime__V1__PodSandboxConfig__LabelsEntry *lp[4];
  for (int i = 0; i < 4; i++) {
    l[i].key = (char *)kv[i][0];
    l[i].value = (char *)kv[i][1];
    lp[i] = &l[i];
  }
  if (kube) {
    sc.labels = lp;
    sc.n_labels = 3;
  }
  Runtime__V1__RunPodSandboxRequest rq = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
  rq.config = &sc;
  uint8_t *resp;
  size_t resp_len;
  int code = seed_call(s, "RunPodSandbox", &rq.base, &resp, &resp_len);
  if (code) return code;
  Runtime__V1__RunPodSandboxResponse *rr =
      runtime__v1__run_pod_sandbox_response__unpack(NULL, resp_len, resp);
  free(resp);
  char sb[65];
  snprintf(sb, sizeof sb, "%s", rr->pod_sandbox_id);
  runtime__v1__run_pod_sandbox_response__free_unpacked(rr, NULL);
  Runtime__V1__ContainerMetadata cm = RUNTIME__V1__CONTAINER_METADATA__INIT;
  cm.name = (char *)name;
  Runtime__V1__ImageSpec im = RUNTIME__V1__IMAGE_SPEC__INIT;
  im.image = (char *)image;
  Runtime__V1__ContainerConfig cc = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  cc.metadata = &cm;
  cc.image = &im;
  if (kube) { /* same shape of entry */
    cc.labels = (Runtime__V1__ContainerConfig__LabelsEntry **)lp;
    cc.n_labels = 4;
  }
  Runtime__V1__CreateContainerRequest cr = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
  cr.pod_sandbox_id = sb;
  cr.config = &cc;
  cr.sandbox_config = &sc;
  code = seed_call(s, "CreateContainer", &cr.base, &resp, &resp_len);
  if (code) return code;
  Runtime__V1__CreateContainerResponse *cr_r =
      runtime__v1__create_container_response__unpack(NULL, resp_len, resp);
  free(resp);
  snprintf(id, id_len, "%s", cr_r->container_id);
  runtime__v1__create_container_response__free_unpacked(cr_r, NULL);
  Runtime__V1__StartContainerRequest st = RUNTIME__V1__START_CONTAINER_REQUEST__INIT;
  st.container_id = id;
  return seed_call(s, "StartContainer", &st.base, NULL, 0);
}

/* ---- images ---------------------------------------------------------------- */

void fake_cri__store_add_image(fake_cri_store_t *s, const char *ref) {
  if (nl_map_get(&s->images, ref)) return;
  image_t *im = nl_xcalloc(1, sizeof(*im));
  char hex[65];
  make_id(s, hex, sizeof(hex));
  snprintf(im->id, sizeof(im->id), "sha256:%s", hex);
  im->ref = nl_xstrdup(ref);
  im->size = 1024 * 1024 + (s->next_id % 1000) * 4096;
  nl_map_put(&s->images, ref, im);
}

static void image_free(void *p) {
  image_t *im = p;
  free(im->ref);
  free(im);
}

static void fill_image(Runtime__V1__Image *m, image_t *im, char **tag) {
  runtime__v1__image__init(m);
  m->id = im->id;
  *tag = im->ref;
  m->n_repo_tags = 1;
  m->repo_tags = tag;
  m->size = im->size;
}

static int h_list_images(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, ListImagesRequest);
  const char *want = req->filter && req->filter->image ? req->filter->image->image : "";
  size_t n = nl_map_size(&s->images), k = 0;
  Runtime__V1__Image *items = scratch(o, n, sizeof(*items));
  Runtime__V1__Image **ptrs = scratch(o, n, sizeof(*ptrs));
  char **tags = scratch(o, n, sizeof(*tags));
  nl_map_iter_t it;
  const char *key;
  void *v;
  for (nl_map_iter_init(&it, &s->images); nl_map_iter_next(&it, &key, &v);) {
    image_t *im = v;
    if (want[0] && strcmp(want, im->ref) != 0 && strcmp(want, im->id) != 0) continue;
    fill_image(&items[k], im, &tags[k]);
    ptrs[k] = &items[k];
    k++;
  }
  Runtime__V1__ListImagesResponse r = RUNTIME__V1__LIST_IMAGES_RESPONSE__INIT;
  r.n_images = k;
  r.images = ptrs;
  return reply(o, &r.base);
}

static int h_image_status(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, ImageStatusRequest);
  image_t *im = req->image ? image_find(s, req->image->image) : NULL;
  Runtime__V1__Image m;
  char *tag;
  Runtime__V1__ImageStatusResponse r = RUNTIME__V1__IMAGE_STATUS_RESPONSE__INIT;
  if (im) {
    fill_image(&m, im, &tag);
    r.image = &m;
  }
  return reply(o, &r.base);
}

static int h_pull_image(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, PullImageRequest);
  if (!req->image || !req->image->image[0]) return fail(o, 3, "ImageSpec.image must be set");
  const char *user = req->auth && req->auth->username ? req->auth->username : "-";
  char *users = nl_xasprintf("%s%s%s", s->pull_users ? s->pull_users : "",
                             s->pull_users ? "," : "", user);
  free(s->pull_users);
  s->pull_users = users;
  if (s->pull_auth) {
    const char *password = req->auth && req->auth->password ? req->auth->password : "";
    char *got = nl_xasprintf("%s:%s", user, password);
    bool ok = !strcmp(got, s->pull_auth);
    free(got);
    if (!ok) /* containerd's words for a registry's refusal */
      return fail(o, 2, "failed to pull and unpack image \"%s\": pulling from host failed with "
                  "status code: 401 Unauthorized", req->image->image);
  }
  fake_cri__store_add_image(s, req->image->image);
  image_t *im = nl_map_get(&s->images, req->image->image);
  Runtime__V1__PullImageResponse r = RUNTIME__V1__PULL_IMAGE_RESPONSE__INIT;
  r.image_ref = im->id;
  return reply(o, &r.base);
}

static int h_remove_image(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  UNPACK(req, RemoveImageRequest);
  image_t *im = req->image ? image_find(s, req->image->image) : NULL;
  if (im) image_free(nl_map_del(&s->images, im->ref));
  Runtime__V1__RemoveImageResponse r = RUNTIME__V1__REMOVE_IMAGE_RESPONSE__INIT;
  return reply(o, &r.base);
}

static int h_image_fs_info(fake_cri_store_t *s, const uint8_t *in, size_t len, out_t *o) {
  uint64_t used = 0;
  nl_map_iter_t it;
  const char *k;
  void *v;
  for (nl_map_iter_init(&it, &s->images); nl_map_iter_next(&it, &k, &v);)
    used += ((image_t *)v)->size;
  Runtime__V1__FilesystemIdentifier id = RUNTIME__V1__FILESYSTEM_IDENTIFIER__INIT;
  id.mountpoint = "/var/lib/fake-cri/images";
  Runtime__V1__UInt64Value ub = RUNTIME__V1__UINT64_VALUE__INIT, iu = RUNTIME__V1__UINT64_VALUE__INIT;
  ub.value = used;
  iu.value = nl_map_size(&s->images);
  Runtime__V1__FilesystemUsage fu = RUNTIME__V1__FILESYSTEM_USAGE__INIT;
  fu.timestamp = now_ns();
  fu.fs_id = &id;
  fu.used_bytes = &ub;
  fu.inodes_used = &iu;
  Runtime__V1__FilesystemUsage *fp = &fu;
  Runtime__V1__ImageFsInfoResponse r = RUNTIME__V1__IMAGE_FS_INFO_RESPONSE__INIT;
  r.n_image_filesystems = 1;
  r.image_filesystems = &fp;
  return reply(o, &r.base);
}

/* ---- dispatch -------------------------------------------------------------- */

static const struct {
  const char *method;
  int (*fn)(fake_cri_store_t *, const uint8_t *, size_t, out_t *);
} handlers[] = {
    {"Version", h_version},
    {"Status", h_status},
    {"RuntimeConfig", h_runtime_config},
    {"RunPodSandbox", h_run_pod_sandbox},
    {"StopPodSandbox", h_stop_pod_sandbox},
    {"RemovePodSandbox", h_remove_pod_sandbox},
    {"PodSandboxStatus", h_pod_sandbox_status},
    {"ListPodSandbox", h_list_pod_sandbox},
    {"CreateContainer", h_create_container},
    {"StartContainer", h_start_container},
    {"StopContainer", h_stop_container},
    {"RemoveContainer", h_remove_container},
    {"ListContainers", h_list_containers},
    {"ContainerStatus", h_container_status},
    {"ReopenContainerLog", h_reopen_container_log},
    {"ExecSync", h_exec_sync},
    {"Exec", h_exec},
    {"Attach", h_attach},
    {"PortForward", h_port_forward},
    {"ListPodSandboxStats", h_list_pod_sandbox_stats},
    {"ListImages", h_list_images},
    {"ImageStatus", h_image_status},
    {"PullImage", h_pull_image},
    {"RemoveImage", h_remove_image},
    {"ImageFsInfo", h_image_fs_info},
};

int fake_cri__handle(fake_cri_store_t *s, const char *method, const uint8_t *req, size_t len,
                     uint8_t **resp, size_t *resp_len, char **msg) {
  out_t o = {.resp = resp, .len = resp_len, .msg = msg};
  int code = -1;
  for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]) && code < 0; i++)
    if (strcmp(handlers[i].method, method) == 0) code = handlers[i].fn(s, req, len, &o);
  if (code < 0) code = fail(&o, 12, "unknown method %s", method);
  for (size_t i = 0; i < o.nscratch; i++) free(o.scratch[i]);
  return code;
}

void fake_cri__store_init(fake_cri_store_t *s) {
  nl_map_init(&s->sandboxes);
  nl_map_init(&s->containers);
  nl_map_init(&s->images);
  s->next_id = 0;
}

void fake_cri__store_free(fake_cri_store_t *s) {
  nl_map_free(&s->containers, container_free);
  nl_map_free(&s->sandboxes, sandbox_free);
  nl_map_free(&s->images, image_free);
  free(s->stream_base);
  free(s->pull_auth);
  free(s->pull_users);
}

int fake_cri__store_oom_kill(fake_cri_store_t *s, const char *id, uint64_t reason_after_ms) {
  container_t *c = nl_map_get(&s->containers, id);
  if (!c || c->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING) return -1;
  container_exit(s, c, 128 + 9);
  c->oom_at = c->finished_at + (int64_t)reason_after_ms * 1000000;
  return 0;
}
