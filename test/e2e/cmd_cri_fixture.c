/* Test helper for cmd_cri.sh: makes, through the CRI client, what `nanolet cri`
 * is then asked about, since ctr cannot create CRI sandboxes.
 *   cmd_cri_fixture create LOGDIR   prints "SANDBOX_ID RUNNING_ID EXITED_ID"
 *   cmd_cri_fixture cleanup          removes every sandbox labelled nanolet-e2e-cmd=1
 * The endpoint is NANOLET_TEST_CRI_ENDPOINT. Test code: it runs the loop until
 * each call is done, which product code never does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Not a cmocka program: a failed call ends it with the runtime's message. */
#define CRI_SYNC_FAIL(...)                              \
  do {                                                  \
    fprintf(stderr, "cmd_cri_fixture: " __VA_ARGS__);   \
    fputc('\n', stderr);                                \
    exit(1);                                            \
  } while (0)
#include "test/e2e/cri_sync.h"

#define LABEL_KEY "nanolet-e2e-cmd"
#define BUSYBOX "localhost/busybox:latest"

/* Output of the running container: stdout and stderr lines, a line longer than
 * containerd's 16 KiB record limit (written as partial records), then more. */
#define SCRIPT                                                                       \
  "echo hello-out; echo hello-err >&2; head -c 40000 /dev/zero | tr '\\0' x; echo; " \
  "echo line-a; echo line-b; exec sleep 1000"

static char *container(const char *sandbox_id, Runtime__V1__PodSandboxConfig *cfg, const char *name,
                       const char *script, bool start) {
  Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
  img.image = BUSYBOX;
  Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
  md.name = (char *)name;
  char *argv[] = {"sh", "-c", (char *)script};
  char log[64];
  snprintf(log, sizeof log, "%s/0.log", name);
  Runtime__V1__ContainerConfig cc = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  cc.metadata = &md;
  cc.image = &img;
  cc.n_command = 3;
  cc.command = argv;
  cc.log_path = log;
  Runtime__V1__CreateContainerRequest req = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
  req.pod_sandbox_id = (char *)sandbox_id;
  req.config = &cc;
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

static void create(const char *logdir) {
  char name[64], uid[64];
  snprintf(name, sizeof name, "nanolet-e2e-cmd-%d", (int)getpid());
  snprintf(uid, sizeof uid, "00000000-e2e0-c3d0-0000-%012d", (int)getpid());
  Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  md.name = name;
  md.uid = uid;
  md.namespace_ = "e2e-cmd";
  md.attempt = 0;
  Runtime__V1__NamespaceOption ns = RUNTIME__V1__NAMESPACE_OPTION__INIT;
  ns.network = RUNTIME__V1__NAMESPACE_MODE__POD;
  ns.pid = RUNTIME__V1__NAMESPACE_MODE__CONTAINER;
  ns.ipc = RUNTIME__V1__NAMESPACE_MODE__POD;
  Runtime__V1__LinuxSandboxSecurityContext sc = RUNTIME__V1__LINUX_SANDBOX_SECURITY_CONTEXT__INIT;
  sc.namespace_options = &ns;
  Runtime__V1__LinuxPodSandboxConfig lin = RUNTIME__V1__LINUX_POD_SANDBOX_CONFIG__INIT;
  lin.security_context = &sc;
  Runtime__V1__PodSandboxConfig__LabelsEntry l1 =
      RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT;
  l1.key = LABEL_KEY;
  l1.value = "1";
  Runtime__V1__PodSandboxConfig__LabelsEntry *labels[] = {&l1};
  Runtime__V1__PodSandboxConfig cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
  cfg.metadata = &md;
  cfg.hostname = "nanolet-e2e-cmd";
  cfg.log_directory = (char *)logdir;
  cfg.linux = &lin;
  cfg.n_labels = 1;
  cfg.labels = labels;
  Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
  req.config = &cfg;
  res_t r = {0};
  CALL_OK(run_pod_sandbox, &req, &r);
  char *sid = strdup(((Runtime__V1__RunPodSandboxResponse *)r.resp)->pod_sandbox_id);
  res_free(&r);
  char *running = container(sid, &cfg, "talker", SCRIPT, true);
  char *exited = container(sid, &cfg, "quitter", "exit 0", true);
  printf("%s %s %s\n", sid, running, exited);
  free(sid);
  free(running);
  free(exited);
}

int main(int argc, char **argv) {
  const char *ep = getenv("NANOLET_TEST_CRI_ENDPOINT");
  if (!ep || !*ep || argc < 2 || (!strcmp(argv[1], "create") && argc < 3)) {
    fprintf(stderr,
            "usage: NANOLET_TEST_CRI_ENDPOINT=... cmd_cri_fixture create LOGDIR | cleanup\n");
    return 2;
  }
  nl_cri_opts_t o = {.timeout_ms = 60000};
  cri_sync_open(&o);
  cri_sync_remove_labelled(LABEL_KEY);
  if (!strcmp(argv[1], "create")) create(argv[2]);
  cri_sync_stop();
  return uv_loop_close(&loop) == 0 ? 0 : 1;
}
