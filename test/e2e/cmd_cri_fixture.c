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
 * containerd's 16 KiB record limit (written as partial records), then more.
 * containerd copies stdout and stderr to the log separately, so the stderr
 * line could land after line-a; the pause keeps the last two records line-a
 * and line-b, which the --tail checks read. */
#define SCRIPT                                                                       \
  "echo hello-out; echo hello-err >&2; head -c 40000 /dev/zero | tr '\\0' x; echo; " \
  "sleep 0.5; echo line-a; echo line-b; exec sleep 1000"

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
  return cri_sync_create_container(sandbox_id, cfg, &cc, start);
}

static void create(const char *logdir) {
  char name[64], uid[64];
  snprintf(name, sizeof name, "nanolet-e2e-cmd-%d", (int)getpid());
  snprintf(uid, sizeof uid, "00000000-e2e0-c3d0-0000-%012d", (int)getpid());
  cri_sync_sandbox_t sb;
  cri_sync_sandbox_init(&sb, name, uid, "e2e-cmd", "nanolet-e2e-cmd", logdir);
  Runtime__V1__PodSandboxConfig *cfg = &sb.cfg;
  Runtime__V1__PodSandboxConfig__LabelsEntry l1 =
      RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT;
  l1.key = LABEL_KEY;
  l1.value = "1";
  Runtime__V1__PodSandboxConfig__LabelsEntry *labels[] = {&l1};
  cfg->n_labels = 1;
  cfg->labels = labels;
  char *sid = cri_sync_run_sandbox(cfg);
  char *running = container(sid, cfg, "talker", SCRIPT, true);
  char *exited = container(sid, cfg, "quitter", "exit 0", true);
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
