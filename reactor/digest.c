#include "reactor/digest.h"

#include <stdlib.h>

#include <mbedtls/md.h>
#include <mbedtls/sha256.h>
#include <mbedtls/version.h>

void nl_sha256(const void *data, size_t len, unsigned char out[32]) {
#if MBEDTLS_VERSION_MAJOR >= 3
  mbedtls_sha256(data, len, out, 0);
#else
  mbedtls_sha256_ret(data, len, out, 0);
#endif
}

void nl_hex(const void *in, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  const unsigned char *p = in;
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  out[2 * n] = '\0';
}

void nl_hmac_sha256(const unsigned char *key, size_t key_len, const void *data, size_t len,
                    unsigned char out[32]) {
  /* Fails only on a bad argument (an md_info mbedtls does not have). */
  if (mbedtls_md_hmac(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256), key, key_len, data, len, out) != 0)
    abort();
}
