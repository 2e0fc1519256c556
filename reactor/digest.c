#include "reactor/digest.h"

#include <mbedtls/sha256.h>
#include <mbedtls/version.h>

void nl_sha256(const void *data, size_t len, unsigned char out[32]) {
#if MBEDTLS_VERSION_MAJOR >= 3
  mbedtls_sha256(data, len, out, 0);
#else
  mbedtls_sha256_ret(data, len, out, 0);
#endif
}
