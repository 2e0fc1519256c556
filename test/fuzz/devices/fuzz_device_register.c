/* libFuzzer target for the device manager's Registration handler
 * (managers/devices.c, nl__dev_register, what "/v1beta1.Registration/Register"
 * runs on a request's bytes): a hostile plugin's RegisterRequest (version,
 * endpoint, resource name, options) goes through the decoder, the checks
 * (version, extended resource name, endpoint a socket name in the directory),
 * the metrics label guard and, when accepted, the endpoint's state machine
 * (its socket does not answer: GetDevicePluginOptions fails, the registration
 * is answered with the error once and the endpoint is freed).
 * The manager is started and stopped for each input in a temporary directory;
 * checks: no crash, leak or sanitizer report, an answer code and a message
 * on refusal, every registration answered exactly once, the loop closes
 * cleanly.
 *
 * Input: the request message's bytes. Seeds: corpus/ (gen_seeds.c writes them). */
#include <assert.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "managers/devices_internal.h"
#include "reactor/log.h"

static char dir[64];

static void stopped(nl_devices_t *m, void *ctx) { *(bool *)ctx = true; }

static void answered(void *ctx, int code, const char *msg) {
  assert(code != NL_GRPC_OK && msg); /* nothing listens on the plugin's socket */
  ++*(int *)ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    nl_log_set_verbosity(-1);
    nl_log_set_fd(open("/dev/null", O_WRONLY)); /* the handler logs each request */
    strcpy(dir, "/tmp/nl-fuzz-register-XXXXXX");
    if (!mkdtemp(dir)) abort();
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_kmetrics_t km;
  nl_kmetrics_init(&km, "fuzz");
  nl_devices_t m;
  nl_devices_opts_t o = {.dir = dir, .connect_wait_ms = 1, .metrics = &km};
  nl_err_t *err = NULL;
  if (nl_devices_start(&m, &loop, &o, &err) < 0) abort();
  char *msg = NULL;
  int later = 0, accepted = 0; /* answers to come, answers come */
  int code = nl__dev_register(&m, data, size, 0, answered, &accepted, &msg);
  assert(code == NL_GRPC_OK ? msg == NULL : msg != NULL);
  later += code == NL_GRPC_OK;
  free(msg);
  if (size > 0 && code == NL_GRPC_OK) { /* the same plugin again */
    later += nl__dev_register(&m, data, size, 0, answered, &accepted, &msg) == NL_GRPC_OK;
    free(msg);
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  bool done = false;
  nl_devices_stop(&m, stopped, &done);
  while (!done) uv_run(&loop, UV_RUN_ONCE);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (accepted != later) abort();
  if (uv_loop_close(&loop) != 0) abort();
  nl_kmetrics_free(&km);
  return 0;
}
