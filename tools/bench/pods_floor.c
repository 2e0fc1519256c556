/* The floor for starting pods on containerd: the CRI calls a kubelet cannot
 * avoid (RunPodSandbox, CreateContainer, StartContainer per pod), made directly
 * by the CRI client with every pod in flight at once, as nanolet's pod workers
 * run them. pods_bench.sh compares nanolet's time from manifests to running
 * containers against this (docs/PERFORMANCE.md, "Running pods").
 *
 *   pods_floor run N NAMESPACE   starts N one-container pods; prints
 *                                "ms_to_last_started ms_to_last_response"
 *   pods_floor clean NAMESPACE   stops and removes every sandbox of NAMESPACE
 *
 * Endpoint: NANOLET_TEST_CRI_ENDPOINT. Pods look like nanolet's (labels, log
 * directory /var/log/pods/<ns>_<name>_<uid>, <container>/0.log) so the same
 * queries see both. Times are measured to the latest container startedAt that
 * containerd reports, the same clock the nanolet side is read with.
 * PODS_FLOOR_TRACE=1 prints each pod's call latencies to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cri/runtime.h"
#include "reactor/xalloc.h"

#define IMAGE "localhost/busybox:1.36"

static uv_loop_t loop;
static nl_cri_client_t client;
static int failures, outstanding;
static int64_t t0_ns, last_started_ns, last_response_ns;
static const char *ns;

static int64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct pod {
  int i;
  char name[64], uid[64], logdir[256];
  char *sandbox_id, *container_id;
  int64_t t_sandbox, t_created, t_started; /* completion times, for --trace */
  Runtime__V1__PodSandboxConfig cfg;
  Runtime__V1__PodSandboxMetadata md;
  Runtime__V1__LinuxPodSandboxConfig lin;
  Runtime__V1__LinuxSandboxSecurityContext sc;
  Runtime__V1__NamespaceOption nso;
  Runtime__V1__SecurityProfile seccomp;
  Runtime__V1__PodSandboxConfig__LabelsEntry lab[3], *labp[3];
} pod_t;

static void failed(const char *what, const nl_grpc_status_t *st) {
  fprintf(stderr, "pods_floor: %s: %s\n", what, st->message);
  failures++;
  outstanding--;
}

static void on_status(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *r,
                      void *ctx) {
  (void)ctx;
  if (!r) return failed("ContainerStatus", st);
  if (r->status && r->status->started_at > last_started_ns) last_started_ns = r->status->started_at;
  outstanding--;
}

static void on_started(const nl_grpc_status_t *st, Runtime__V1__StartContainerResponse *r,
                       void *ctx) {
  pod_t *p = ctx;
  if (!r) return failed("StartContainer", st);
  int64_t now = realtime_ns();
  if (now > last_response_ns) last_response_ns = now;
  p->t_started = now;
  Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
  req.container_id = p->container_id;
  nl_cri_container_status(&client, &req, on_status, p);
}

static void on_created(const nl_grpc_status_t *st, Runtime__V1__CreateContainerResponse *r,
                       void *ctx) {
  pod_t *p = ctx;
  if (!r) return failed("CreateContainer", st);
  p->container_id = nl_xstrdup(r->container_id);
  p->t_created = realtime_ns();
  Runtime__V1__StartContainerRequest req = RUNTIME__V1__START_CONTAINER_REQUEST__INIT;
  req.container_id = p->container_id;
  nl_cri_start_container(&client, &req, on_started, p);
}

static void on_sandbox(const nl_grpc_status_t *st, Runtime__V1__RunPodSandboxResponse *r,
                       void *ctx) {
  pod_t *p = ctx;
  if (!r) return failed("RunPodSandbox", st);
  p->sandbox_id = nl_xstrdup(r->pod_sandbox_id);
  p->t_sandbox = realtime_ns();
  Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
  img.image = IMAGE;
  Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
  md.name = "main";
  char *argv[] = {"sleep", "3600"};
  Runtime__V1__ContainerConfig cc = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  cc.metadata = &md;
  cc.image = &img;
  cc.n_command = 2;
  cc.command = argv;
  cc.log_path = "main/0.log";
  Runtime__V1__CreateContainerRequest req = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
  req.pod_sandbox_id = p->sandbox_id;
  req.config = &cc;
  req.sandbox_config = &p->cfg;
  nl_cri_create_container(&client, &req, on_created, p);
}

static void start_pod(pod_t *p) {
  snprintf(p->name, sizeof p->name, "floor-%d", p->i);
  snprintf(p->uid, sizeof p->uid, "f1000000-0000-0000-0000-%06d%06d", (int)getpid() % 1000000, p->i);
  snprintf(p->logdir, sizeof p->logdir, "/var/log/pods/%s_%s_%s", ns, p->name, p->uid);
  p->md = (Runtime__V1__PodSandboxMetadata)RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  p->md.name = p->name;
  p->md.uid = p->uid;
  p->md.namespace_ = (char *)ns;
  p->nso = (Runtime__V1__NamespaceOption)RUNTIME__V1__NAMESPACE_OPTION__INIT;
  p->nso.pid = RUNTIME__V1__NAMESPACE_MODE__CONTAINER;
  p->sc = (Runtime__V1__LinuxSandboxSecurityContext)RUNTIME__V1__LINUX_SANDBOX_SECURITY_CONTEXT__INIT;
  p->sc.namespace_options = &p->nso;
  /* What any kubelet must ask for (upstream forces RuntimeDefault seccomp on
   * the sandbox): the runtime's cost of it is not the agent's overhead. */
  p->seccomp = (Runtime__V1__SecurityProfile)RUNTIME__V1__SECURITY_PROFILE__INIT;
  p->seccomp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  if (!getenv("PODS_FLOOR_NO_SECCOMP")) p->sc.seccomp = &p->seccomp;
  p->lin = (Runtime__V1__LinuxPodSandboxConfig)RUNTIME__V1__LINUX_POD_SANDBOX_CONFIG__INIT;
  p->lin.security_context = &p->sc;
  const char *k[] = {"io.kubernetes.pod.name", "io.kubernetes.pod.namespace", "io.kubernetes.pod.uid"};
  const char *v[] = {p->name, ns, p->uid};
  for (int j = 0; j < 3; j++) {
    p->lab[j] = (Runtime__V1__PodSandboxConfig__LabelsEntry)RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT;
    p->lab[j].key = (char *)k[j];
    p->lab[j].value = (char *)v[j];
    p->labp[j] = &p->lab[j];
  }
  p->cfg = (Runtime__V1__PodSandboxConfig)RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
  p->cfg.metadata = &p->md;
  p->cfg.hostname = p->name;
  p->cfg.log_directory = p->logdir;
  p->cfg.linux = &p->lin;
  p->cfg.n_labels = 3;
  p->cfg.labels = p->labp;
  Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
  req.config = &p->cfg;
  nl_cri_run_pod_sandbox(&client, &req, on_sandbox, p);
}

/* ---- clean ---- */

static void on_removed(const nl_grpc_status_t *st, Runtime__V1__RemovePodSandboxResponse *r,
                       void *ctx) {
  (void)ctx;
  if (!r) return failed("RemovePodSandbox", st);
  outstanding--;
}

static void on_stopped_sandbox(const nl_grpc_status_t *st, Runtime__V1__StopPodSandboxResponse *r,
                               void *ctx) {
  char *id = ctx;
  if (!r) {
    free(id);
    return failed("StopPodSandbox", st);
  }
  Runtime__V1__RemovePodSandboxRequest req = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
  req.pod_sandbox_id = id;
  nl_cri_remove_pod_sandbox(&client, &req, on_removed, NULL);
  free(id);
}

static void on_list(const nl_grpc_status_t *st, Runtime__V1__ListPodSandboxResponse *r, void *ctx) {
  (void)ctx;
  if (!r) return failed("ListPodSandbox", st);
  for (size_t i = 0; i < r->n_items; i++) {
    if (!r->items[i]->metadata || strcmp(r->items[i]->metadata->namespace_, ns) != 0) continue;
    outstanding++;
    Runtime__V1__StopPodSandboxRequest req = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;
    req.pod_sandbox_id = r->items[i]->id;
    nl_cri_stop_pod_sandbox(&client, &req, on_stopped_sandbox, nl_xstrdup(r->items[i]->id));
  }
  outstanding--;
}

static void on_client_stopped(nl_cri_client_t *c) { (void)c; }

int main(int argc, char **argv) {
  const char *ep = getenv("NANOLET_TEST_CRI_ENDPOINT");
  bool run = argc == 4 && strcmp(argv[1], "run") == 0;
  if (!ep || !*ep || !(run || (argc == 3 && strcmp(argv[1], "clean") == 0))) {
    fprintf(stderr, "usage: NANOLET_TEST_CRI_ENDPOINT=... pods_floor run N NAMESPACE | clean NAMESPACE\n");
    return 2;
  }
  ns = argv[run ? 3 : 2];
  uv_loop_init(&loop);
  nl_err_t *err = NULL;
  nl_cri_opts_t o = {.timeout_ms = 120000};
  if (nl_cri_client_init(&client, &loop, ep, &o, &err) < 0) {
    fprintf(stderr, "pods_floor: %s\n", nl_err_msg(err));
    return 1;
  }
  int n = run ? atoi(argv[2]) : 0;
  pod_t *pods = nl_xcalloc((size_t)n + 1, sizeof *pods);
  if (run) {
    t0_ns = realtime_ns();
    outstanding = n;
    for (int i = 0; i < n; i++) {
      pods[i].i = i;
      start_pod(&pods[i]);
    }
  } else {
    outstanding = 1;
    Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
    nl_cri_list_pod_sandbox(&client, &req, on_list, NULL);
  }
  while (outstanding > 0) uv_run(&loop, UV_RUN_ONCE);
  if (run && !failures)
    printf("%.1f %.1f\n", (double)(last_started_ns - t0_ns) / 1e6,
           (double)(last_response_ns - t0_ns) / 1e6);
  for (int i = 0; i < n && getenv("PODS_FLOOR_TRACE"); i++)
    fprintf(stderr, "pod %d: RunPodSandbox %.1f ms, CreateContainer %.1f ms, StartContainer %.1f ms\n", i,
            (double)(pods[i].t_sandbox - t0_ns) / 1e6, (double)(pods[i].t_created - pods[i].t_sandbox) / 1e6,
            (double)(pods[i].t_started - pods[i].t_created) / 1e6);
  for (int i = 0; i < n; i++) {
    free(pods[i].sandbox_id);
    free(pods[i].container_id);
  }
  free(pods);
  nl_cri_client_stop(&client, on_client_stopped);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return failures ? 1 : 0;
}
