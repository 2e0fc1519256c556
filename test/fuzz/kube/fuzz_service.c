/* libFuzzer target over the Service decoder and the service environment
 * variables made from what it decodes (managers/services.c): Services come from
 * the API server's list and watch. */
#include <stdint.h>
#include <stdlib.h>

#include "managers/services.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nl_service_t *s = NULL;
  nl_err_t *err = NULL;
  if (nl_service_decode((const char *)data, size, &s, &err) == 0) {
    nl_env_t *env = NULL;
    size_t n = 0;
    const nl_service_t *const v[] = {s};
    nl_service_env_from(v, 1, &env, &n);
    nl_env_free(env, n);
    nl_service_free(s);
  }
  nl_err_free(&err);
  return 0;
}
