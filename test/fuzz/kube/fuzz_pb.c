/* libFuzzer target over Kubernetes protobuf (agent/kube/pb.c): the envelope,
 * the messages of k8s.proto into their JSON form, and the Status reader behind
 * nl_kube_status_err() for a protobuf body.
 *
 * Whatever decodes must encode again and decode to the same JSON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kube/pb.h"
#include "agent/kube/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *body = malloc(size ? size : 1); /* exactly size bytes: ASan sees any read past it */
  memcpy(body, data, size);
  nl_kube_pb_env_t env;
  nl_err_t *err = NULL;
  if (nl_kube_pb_unwrap(body, size, &env, &err) == 0) {
    (void)strlen(env.kind);
    (void)strlen(env.api_version);
    nl_kube_pb_env_free(&env);
  }
  nl_err_free(&err);

  json_t *obj = NULL;
  if (nl_kube_pb_to_json(body, size, &obj, &err) == 0) {
    uint8_t *again;
    size_t len;
    if (nl_kube_pb_from_json(obj, &again, &len, &err) < 0) abort(); /* decoded, so it encodes */
    json_t *back = NULL;
    if (nl_kube_pb_to_json(again, len, &back, &err) < 0) abort();
    if (!json_equal(obj, back)) abort();
    json_decref(back);
    free(again);
  } else if (!err || !*nl_err_msg(err)) {
    abort(); /* a failure always says why */
  }
  json_decref(obj);
  nl_err_free(&err);

  nl_kube_response_t resp = {409, body, size, NL_KUBE_PB_TYPE};
  if (nl_kube_status_err(&resp, &err) != -1 || !err) abort();
  nl_err_free(&err);
  (void)nl_kube_status_reason(&resp);
  free(body);
  return 0;
}
