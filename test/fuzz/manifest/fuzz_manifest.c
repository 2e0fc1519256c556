/* libFuzzer target over the whole static-pod path: YAML/JSON parsing, the typed
 * decoder, defaulting, static naming, validation and the JSON encoder, with a
 * re-decode of the encoder's output (which must succeed); and the URL source's
 * path (one Pod or a list, named as static pods of a URL). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/model/pod.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode((const char *)data, size, "fuzz", &pod, &err) == 0) {
    nl_pod_set_defaults(pod);
    nl_static_source_t src = {"file", "fuzz.yaml", "node"};
    nl_pod_apply_static(pod, &src);
    (void)nl_pod_validate(pod, "fuzz", &err);
    nl_err_free(&err);
    nl_buf_t out = NL_BUF_INIT;
    nl_pod_encode_json(pod, &out, NL_POD_JSON_PRETTY);
    nl_pod_t *again = NULL;
    if (nl_pod_decode(out.data, out.len, "re", &again, &err) != 0) {
      fprintf(stderr, "re-decode failed: %s\n%s\n", nl_err_msg(err), out.data);
      abort();
    }
    nl_pod_free(again);
    nl_pod_t *copy = nl_pod_dup(pod);
    if (nl_pod_hash(copy) != nl_pod_hash(pod)) abort();
    nl_pod_free(copy);
    nl_buf_free(&out);
    nl_pod_free(pod);
  }
  nl_err_free(&err);
  nl_pod_t **pods = NULL;
  size_t n = 0;
  if (nl_pod_decode_list((const char *)data, size, "fuzz", &pods, &n, &err) == 0) {
    /* the staticPodURL source's path (sources/url.c) */
    nl_static_source_t src = {"http", "http://fuzz/pods", "node"};
    for (size_t i = 0; i < n; i++) {
      nl_pod_set_defaults(pods[i]);
      nl_pod_apply_static(pods[i], &src);
      (void)nl_pod_validate(pods[i], "fuzz", &err);
      nl_err_free(&err);
      nl_pod_free(pods[i]);
    }
    free(pods);
  }
  nl_err_free(&err);
  return 0;
}
