/* Synchronous CRI calls for the end-to-end tests against the real containerd.
 * Test code only: it runs the loop until each call is done, which product code
 * never does. One loop and one client per test program (`loop`, `client`
 * below); the including file uses them directly.
 *
 * Failures go through CRI_SYNC_FAIL(fmt, ...), which is cmocka's fail_msg
 * unless the including file defines it first (cmd_cri_fixture, a plain
 * program, prints and exits). Include cmocka.h before this header when using
 * the default. */
#ifndef NL_TEST_E2E_CRI_SYNC_H
#define NL_TEST_E2E_CRI_SYNC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cri/image.h"
#include "cri/runtime.h"

#ifndef CRI_SYNC_FAIL
#define CRI_SYNC_FAIL(...) fail_msg(__VA_ARGS__)
#endif

static uv_loop_t loop;
static nl_cri_client_t client;
static bool cri_sync__stopped;

/* The outcome of one call: status, message and a copy of the response that
 * the test owns (NULL unless code is NL_GRPC_OK). Start from {0}; res_free
 * makes it ready for the next call. */
typedef struct res {
  bool done;
  int code;
  char *msg;
  ProtobufCMessage *resp;
} res_t;

static inline void res_set(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  res_t *r = ctx;
  if (r->done) CRI_SYNC_FAIL("a CRI callback ran twice"); /* exactly once */
  r->done = true;
  r->code = st->code;
  r->msg = strdup(st->message);
  if (resp) { /* resp is only borrowed during the callback: copy it */
    size_t n = protobuf_c_message_get_packed_size(resp);
    uint8_t *b = malloc(n + 1);
    protobuf_c_message_pack(resp, b);
    r->resp = protobuf_c_message_unpack(resp->descriptor, NULL, n, b);
    free(b);
  }
}

static inline void res_free(res_t *r) {
  free(r->msg);
  if (r->resp) protobuf_c_message_free_unpacked(r->resp, NULL);
  memset(r, 0, sizeof *r);
}

/* cb_<name> for every RPC of cri/runtime.h and cri/image.h: fills the res_t
 * passed as ctx. */
#define CRI_SYNC__CB(name, Method, Req, Resp, resp_snake, kind)                           \
  static inline void cb_##name(const nl_grpc_status_t *st, Runtime__V1__##Resp *resp,     \
                               void *ctx) {                                               \
    res_set(st, resp ? &resp->base : NULL, ctx);                                          \
  }
NL_CRI_RUNTIME_RPCS(CRI_SYNC__CB)
NL_CRI_IMAGE_RPCS(CRI_SYNC__CB)
#undef CRI_SYNC__CB

/* Runs the loop until r is done. */
static inline void wait_res(res_t *r) {
  while (!r->done) uv_run(&loop, UV_RUN_ONCE);
}

/* Makes the call nl_cri_<name>(&client, req) and waits for its result in *r
 * (which must be fresh: {0} or after res_free). */
#define CALL(name, req, r)                                                      \
  do {                                                                          \
    nl_cri_##name(&client, (req), cb_##name, (r));                              \
    if ((r)->done) CRI_SYNC_FAIL("nl_cri_%s completed synchronously", #name);   \
    wait_res(r);                                                                \
  } while (0)

/* CALL, failing with the runtime's message unless the call succeeded. */
#define CALL_OK(name, req, r)                                         \
  do {                                                                \
    CALL(name, req, r);                                               \
    if ((r)->code) CRI_SYNC_FAIL("%s: %s", #name, (r)->msg);          \
  } while (0)

/* Runs the loop until cond holds, failing after secs. */
#define RUN_UNTIL(cond, secs, what)                                                   \
  do {                                                                                \
    uint64_t deadline_ = uv_now(&loop) + (secs) * 1000;                               \
    while (!(cond)) {                                                                 \
      if (uv_now(&loop) > deadline_) CRI_SYNC_FAIL("timed out waiting for %s", what); \
      uv_run(&loop, UV_RUN_ONCE);                                                     \
    }                                                                                 \
  } while (0)

/* The endpoint from NANOLET_TEST_CRI_ENDPOINT or NANOLET_TEST_CRI_SOCKET
 * (tools/testenv/env.sh); fails without one: the e2e suite never skips. */
static inline const char *cri_sync_endpoint(void) {
  const char *e = getenv("NANOLET_TEST_CRI_ENDPOINT");
  if (!e || !*e) e = getenv("NANOLET_TEST_CRI_SOCKET");
  if (!e || !*e)
    CRI_SYNC_FAIL("NANOLET_TEST_CRI_ENDPOINT is not set: run tools/testenv/setup.sh and "
                  "source tools/testenv/env.sh (the e2e suite needs a real containerd)");
  return e;
}

/* Initialises loop and connects client to the test endpoint with opts o. */
static inline void cri_sync_open(const nl_cri_opts_t *o) {
  if (uv_loop_init(&loop) != 0) CRI_SYNC_FAIL("uv_loop_init failed");
  nl_err_t *err = NULL;
  if (nl_cri_client_init(&client, &loop, cri_sync_endpoint(), o, &err) < 0)
    CRI_SYNC_FAIL("init: %s", nl_err_msg(err));
}

static inline void cri_sync__on_stopped(nl_cri_client_t *c) {
  (void)c;
  cri_sync__stopped = true;
}

/* Stops client and runs the loop until every handle is closed; returns true
 * when the client's stop callback ran. The caller then closes the loop. */
static inline bool cri_sync_stop(void) {
  cri_sync__stopped = false;
  nl_cri_client_stop(&client, cri_sync__on_stopped);
  uv_run(&loop, UV_RUN_DEFAULT);
  return cri_sync__stopped;
}

/* Lists the sandboxes labelled key=value into *r (fresh), failing unless the
 * list succeeds; r->resp is then a Runtime__V1__ListPodSandboxResponse. */
static inline void cri_sync_list_sandboxes(const char *key, const char *value, res_t *r) {
  Runtime__V1__ListPodSandboxRequest lreq = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
  Runtime__V1__PodSandboxFilter f = RUNTIME__V1__POD_SANDBOX_FILTER__INIT;
  Runtime__V1__PodSandboxFilter__LabelSelectorEntry sel =
      RUNTIME__V1__POD_SANDBOX_FILTER__LABEL_SELECTOR_ENTRY__INIT;
  Runtime__V1__PodSandboxFilter__LabelSelectorEntry *sels[] = {&sel};
  sel.key = (char *)key;
  sel.value = (char *)value;
  f.n_label_selector = 1;
  f.label_selector = sels;
  lreq.filter = &f;
  CALL_OK(list_pod_sandbox, &lreq, r);
}

/* Stops and removes every sandbox labelled key=1 (also from earlier, failed
 * runs); removing a sandbox removes its containers. A failed stop is left to
 * the remove that follows, which must succeed. */
static inline void cri_sync_remove_labelled(const char *key) {
  res_t r = {0};
  cri_sync_list_sandboxes(key, "1", &r);
  Runtime__V1__ListPodSandboxResponse *l = (void *)r.resp;
  for (size_t i = 0; i < l->n_items; i++) {
    res_t a = {0};
    Runtime__V1__StopPodSandboxRequest s = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;
    s.pod_sandbox_id = l->items[i]->id;
    CALL(stop_pod_sandbox, &s, &a);
    res_free(&a);
    Runtime__V1__RemovePodSandboxRequest rm = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
    rm.pod_sandbox_id = l->items[i]->id;
    CALL_OK(remove_pod_sandbox, &rm, &a);
    res_free(&a);
  }
  res_free(&r);
}

/* A pod sandbox config as the kubelet sends it for a pod network pod: pod
 * network and IPC namespaces, a PID namespace per container. Labels and
 * annotations are the caller's; every pointer is borrowed. */
typedef struct cri_sync_sandbox {
  Runtime__V1__PodSandboxMetadata md;
  Runtime__V1__NamespaceOption ns;
  Runtime__V1__LinuxSandboxSecurityContext sc;
  Runtime__V1__LinuxPodSandboxConfig lin;
  Runtime__V1__PodSandboxConfig cfg;
} cri_sync_sandbox_t;

static inline void cri_sync_sandbox_init(cri_sync_sandbox_t *s, const char *name,
                                         const char *uid, const char *namespace_,
                                         const char *hostname, const char *log_directory) {
  *s = (cri_sync_sandbox_t){.md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT,
                            .ns = RUNTIME__V1__NAMESPACE_OPTION__INIT,
                            .sc = RUNTIME__V1__LINUX_SANDBOX_SECURITY_CONTEXT__INIT,
                            .lin = RUNTIME__V1__LINUX_POD_SANDBOX_CONFIG__INIT,
                            .cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT};
  s->md.name = (char *)name;
  s->md.uid = (char *)uid;
  s->md.namespace_ = (char *)namespace_;
  s->md.attempt = 0;
  s->ns.network = RUNTIME__V1__NAMESPACE_MODE__POD;
  s->ns.pid = RUNTIME__V1__NAMESPACE_MODE__CONTAINER;
  s->ns.ipc = RUNTIME__V1__NAMESPACE_MODE__POD;
  s->sc.namespace_options = &s->ns;
  s->lin.security_context = &s->sc;
  s->cfg.metadata = &s->md;
  s->cfg.hostname = (char *)hostname;
  s->cfg.log_directory = (char *)log_directory;
  s->cfg.linux = &s->lin;
}

/* Runs the sandbox cfg; returns its id (the caller frees it). */
static inline char *cri_sync_run_sandbox(Runtime__V1__PodSandboxConfig *cfg) {
  Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
  req.config = cfg;
  res_t r = {0};
  CALL_OK(run_pod_sandbox, &req, &r);
  char *id = strdup(((Runtime__V1__RunPodSandboxResponse *)r.resp)->pod_sandbox_id);
  res_free(&r);
  return id;
}

/* Creates container cc in the sandbox (run with cfg) and, if start, starts it;
 * returns its id (the caller frees it). */
static inline char *cri_sync_create_container(const char *sandbox_id,
                                              Runtime__V1__PodSandboxConfig *cfg,
                                              Runtime__V1__ContainerConfig *cc, bool start) {
  Runtime__V1__CreateContainerRequest req = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
  req.pod_sandbox_id = (char *)sandbox_id;
  req.config = cc;
  req.sandbox_config = cfg;
  res_t r = {0};
  CALL_OK(create_container, &req, &r);
  char *id = strdup(((Runtime__V1__CreateContainerResponse *)r.resp)->container_id);
  res_free(&r);
  if (start) {
    Runtime__V1__StartContainerRequest s = RUNTIME__V1__START_CONTAINER_REQUEST__INIT;
    s.container_id = id;
    CALL_OK(start_container, &s, &r);
    res_free(&r);
  }
  return id;
}

/* The value of key in a protoc-c string map (every entry is {base, key,
 * value}), or NULL. */
static inline const char *cri_kv(size_t n, void **entries, const char *key) {
  for (size_t i = 0; i < n; i++) {
    Runtime__V1__PodSandboxConfig__LabelsEntry *e = entries[i];
    if (!strcmp(e->key, key)) return e->value;
  }
  return NULL;
}

#endif
