/* libFuzzer target over the kubeconfig parser (agent/kube/kubeconfig.c): YAML or
 * JSON in, one resolved context or an error naming the file and field out. The
 * parse entry point touches no file, so any input is safe to try. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "agent/kube/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nl_kubeconfig_t kc;
  nl_err_t *err = NULL;
  if (nl_kubeconfig_parse(&kc, (const char *)data, size, "fuzz.conf", "/d", &err) == 0) {
    assert(!err && kc.server && strncmp(kc.server, "https://", 8) == 0 && kc.context);
    assert(!(kc.ca_file && kc.ca_pem) && !(kc.cert_file && kc.cert_pem));
    assert(!kc.insecure || (!kc.ca_file && !kc.ca_pem));
    nl_kubeconfig_free(&kc);
  } else {
    assert(err && strncmp(err->msg, "kubeconfig fuzz.conf", 20) == 0 && !kc.server);
    nl_err_free(&err);
  }
  return 0;
}
