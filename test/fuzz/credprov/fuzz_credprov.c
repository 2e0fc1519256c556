/* libFuzzer target over what the image credential provider plugins read and
 * write (managers/credprov_config.c): a plugin's stdout is outside input, and
 * so is the configuration file an operator writes. Byte 0 picks: even, a
 * CredentialProviderResponse for the v1 API; odd, a CredentialProviderConfig
 * (YAML or JSON) added to one already holding a provider, so that the
 * duplicate check runs. The parsed answer's credentials are put into a keyring
 * and looked up, as a pull does. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "managers/credprov.h"

static const char base[] = "{\"apiVersion\":\"kubelet.config.k8s.io/v1\",\"kind\":\"CredentialProviderConfig\","
                           "\"providers\":[{\"name\":\"a\",\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\","
                           "\"matchImages\":[\"*.io\"],\"defaultCacheDuration\":\"1m\"}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  nl_err_t *err = NULL;
  if ((data[0] & 1) == 0) {
    nl_credprov_response_t r;
    if (nl_credprov_response_parse(&r, NL_CREDPROV_API_V1, text, len, &err) == 0) {
      nl_keyring_t k = {0};
      for (size_t i = 0; i < r.n_auth; i++) {
        if (!r.auth[i].match || !r.auth[i].username || !r.auth[i].password) abort();
        nl_keyring_add_cred(&k, r.auth[i].match, r.auth[i].username, r.auth[i].password);
      }
      const nl_keyring_cred_t **c;
      free(nl_keyring_lookup(&k, "reg.io/app:1", &c) ? (void *)c : NULL);
      nl_keyring_free(&k);
      nl_credprov_response_free(&r);
    } else if (!err) {
      abort();
    }
  } else {
    nl_credprov_config_t c = {0};
    if (nl_credprov_config_add(&c, "base", base, sizeof base - 1, &err) < 0) abort();
    size_t before = c.n;
    if (nl_credprov_config_add(&c, "fuzz", text, len, &err) == 0) {
      for (size_t i = 0; i < c.n; i++)
        if (!c.providers[i].name || !c.providers[i].n_match || !c.providers[i].api_version) abort();
    } else if (!err || c.n != before) {
      abort();
    }
    nl_credprov_config_free(&c);
  }
  nl_err_free(&err);
  return 0;
}
