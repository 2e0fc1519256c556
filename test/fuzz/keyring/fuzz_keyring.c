/* libFuzzer target over the docker configs of image pull secrets
 * (managers/keyring.c): Secret data is outside input. Byte 0 picks the format
 * (even: .dockerconfigjson, odd: .dockercfg); the keyring is then looked up
 * for a few image names, so that the matching runs on what the parser made. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "managers/keyring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const char *const images[] = {
      "busybox", "127.0.0.1:15443/busybox:latest", "reg.example.com/team/app@sha256:00",
      "a.b.example.com/x/y:z", "[::1]:5000/app",
  };
  nl_keyring_t k = {0};
  nl_err_t *err = NULL;
  if (nl_keyring_add(&k, (const char *)data + 1, size - 1, (data[0] & 1) == 0, &err) == 0) {
    for (size_t i = 0; i < sizeof images / sizeof images[0]; i++) {
      const nl_keyring_cred_t **c;
      size_t n = nl_keyring_lookup(&k, images[i], &c);
      for (size_t j = 0; j < n; j++)
        if (!c[j]->username || !c[j]->password) abort();
      free(c);
    }
  } else if (!err) {
    abort();
  }
  nl_err_free(&err);
  nl_keyring_free(&k);
  return 0;
}
