/* libFuzzer target over what the token manager reads (managers/tokens.h):
 * every input is parsed as a TokenRequest answer and as the JWT of a token file
 * (for an audience and for none). The target aborts when an accepted answer has
 * an empty token or a TTL that is not positive. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "managers/tokens.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = 0;
  char *tok = NULL;
  int64_t exp, ttl, iat;
  nl_err_t *err = NULL;
  if (nl__token_answer_parse(text, size, &tok, &exp, &ttl, &err) == 0) {
    if (!*tok || ttl <= 0) abort();
    free(tok);
  } else if (!err) {
    abort(); /* a failure names its cause */
  }
  nl_err_free(&err);
  (void)nl__token_jwt_claims(text, "uid1", "", &iat);
  (void)nl__token_jwt_claims(text, "uid1", "vault", &iat);
  free(text);
  return 0;
}
