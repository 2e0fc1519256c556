/* What the token manager reads: the TokenRequest's answer and the claims of a
 * token a volume holds. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <mbedtls/base64.h>

#include "managers/tokens.h"
#include "reactor/xalloc.h"

#define MAX_CLAIMS 8192

/* "2026-11-24T03:00:00Z" as wall milliseconds; -1 when it is not that. */
static int64_t parse_time(const char *s) {
  struct tm tm = {0};
  char z = 0;
  if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &z) != 7 || z != 'Z' ||
      tm.tm_year < 1970 || tm.tm_year > 9999 || tm.tm_mon < 1 || tm.tm_mon > 12)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (int64_t)timegm(&tm) * 1000;
}

int nl__token_answer_parse(const char *body, size_t len, char **token, int64_t *exp_ms,
                           int64_t *ttl_s, nl_err_t **err) {
  json_t *root = json_loadb(body, len, 0, NULL);
  json_t *status = json_object_get(root, "status");
  const char *tok = json_string_value(json_object_get(status, "token"));
  int64_t exp = parse_time(json_string_value(json_object_get(status, "expirationTimestamp")));
  json_t *ttl = json_object_get(json_object_get(root, "spec"), "expirationSeconds");
  int r = 0;
  if (!tok || !*tok || exp < 0 || !json_is_integer(ttl) || json_integer_value(ttl) <= 0 ||
      json_integer_value(ttl) > INT32_MAX) {
    r = nl_err_set(err, NL_EINVAL, "a malformed TokenRequest answer");
  } else {
    *token = nl_xstrdup(tok);
    *exp_ms = exp;
    *ttl_s = json_integer_value(ttl);
  }
  json_decref(root);
  return r;
}

/* The claims of a JWT (its middle part, base64url without padding), or NULL. */
static json_t *claims(const char *jwt) {
  const char *a = strchr(jwt, '.'), *b = a ? strchr(a + 1, '.') : NULL;
  if (!b || b - a - 1 > MAX_CLAIMS) return NULL;
  size_t len = (size_t)(b - a - 1), n;
  char in[MAX_CLAIMS + 4];
  memcpy(in, a + 1, len);
  for (size_t i = 0; i < len; i++) in[i] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
  while (len % 4) in[len++] = '=';
  unsigned char out[MAX_CLAIMS];
  if (mbedtls_base64_decode(out, sizeof out, &n, (const unsigned char *)in, len) != 0) return NULL;
  return json_loadb((const char *)out, n, 0, NULL);
}

bool nl__token_jwt_claims(const char *jwt, const char *pod_uid, const char *audience,
                          int64_t *iat_s) {
  json_t *c = claims(jwt);
  const char *uid = json_string_value(json_object_get(
      json_object_get(json_object_get(c, "kubernetes.io"), "pod"), "uid"));
  json_t *iat = json_object_get(c, "iat"), *aud = json_object_get(c, "aud");
  bool ok = !*audience;
  for (size_t i = 0; i < json_array_size(aud) && !ok; i++) {
    const char *s = json_string_value(json_array_get(aud, i));
    ok = s && strcmp(s, audience) == 0;
  }
  ok = ok && uid && strcmp(uid, pod_uid) == 0 && json_is_integer(iat) &&
       json_integer_value(iat) > 0 && json_integer_value(iat) < INT32_MAX;
  if (ok) *iat_s = json_integer_value(iat);
  json_decref(c);
  return ok;
}
