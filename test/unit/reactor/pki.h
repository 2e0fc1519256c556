/* Certificates for the client certificate tests, made with mbedtls'
 * x509write: names of any ASN.1 string type and any bytes (a T61String
 * "caf\xe9", a BMPString, a CN with an embedded NUL), CAs, intermediates
 * restricted by extendedKeyUsage. Shared by the unit tests and the e2e test's
 * hostile_certs tool. */
#ifndef TEST_PKI_H
#define TEST_PKI_H

#include <stdbool.h>
#include <stddef.h>

typedef struct test_pki_req {
  const char *cn; /* bytes of the subject CN, cn_len of them (0: strlen) */
  size_t cn_len;
  int cn_tag;      /* MBEDTLS_ASN1_*_STRING; 0: UTF8String */
  const char *org; /* an Organization, or NULL */
  size_t org_len;
  int org_tag;
  const char *issuer_name; /* "CN=test-ca"; NULL: self-signed with the subject's key */
  const char *issuer_key_pem;
  bool ca;
  const char *eku; /* "serverAuth", "clientAuth", or NULL for no extendedKeyUsage */
} test_pki_req_t;

/* Returns the PEM certificate (caller frees) and *key_pem its new EC key
 * (caller frees). Aborts on failure. */
char *test_pki_issue(const test_pki_req_t *req, char **key_pem);

#endif
