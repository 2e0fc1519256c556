/* SHA-256 and HMAC-SHA256 (mbedtls), whichever mbedtls major version is
 * installed. */
#ifndef NL_DIGEST_H
#define NL_DIGEST_H

#include <stddef.h>

void nl_sha256(const void *data, size_t len, unsigned char out[32]);
void nl_hmac_sha256(const unsigned char *key, size_t key_len, const void *data, size_t len,
                    unsigned char out[32]);
/* The lower-case hex of n bytes into out, which holds 2n + 1. */
void nl_hex(const void *in, size_t n, char *out);

#endif
