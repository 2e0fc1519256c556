/* The X.509 pieces of certificate rotation (agent/cert_x509.c): a new EC P-256
 * key with its CertificateSigningRequest, and the reading of certificates that
 * come back from the API server (outside input: fuzzed by fuzz_cert). */
#ifndef NL_CERT_X509_H
#define NL_CERT_X509_H

#include <stddef.h>
#include <time.h>

#include "reactor/error.h"

typedef struct nl_x509_info {
  time_t not_before, not_after;
  char *cn; /* the subject's CommonName, owned; "" when it has none */
} nl_x509_info_t;

void nl_x509_info_free(nl_x509_info_t *i);

/* Reads the leaf (first) certificate of a PEM bundle of len bytes (need not be
 * NUL-terminated). Returns 0, or -1 with *err ("no certificate in the PEM data",
 * "x509: <mbedtls' reason>"). On failure *out holds nothing to free. */
int nl_x509_cert_parse(const char *pem, size_t len, nl_x509_info_t *out, nl_err_t **err);

/* As nl_x509_cert_parse, and checks that key_pem is the private key of that
 * certificate: "the private key does not match the certificate". */
int nl_x509_pair_parse(const char *cert_pem, const char *key_pem, nl_x509_info_t *out,
                       nl_err_t **err);

typedef struct nl_x509_csr_req {
  const char *cn, *org; /* subject: "system:node:n1", "system:nodes" */
  const char *dns;      /* subjectAltName DNS name, or NULL (a client certificate) */
  const char *ips;      /* comma separated IP literals for subjectAltName, or NULL */
} nl_x509_csr_req_t;

/* Generates an EC P-256 key and a PEM CSR for it, as client-go's generateCSR.
 * Touches no shared state (its own entropy and DRBG): safe on a uv_queue_work
 * thread. Returns 0 with *key_pem and *csr_pem allocated (the caller frees),
 * or -1 with *err. */
int nl_x509_csr_new(const nl_x509_csr_req_t *req, char **key_pem, char **csr_pem, nl_err_t **err);

/* Writes a subjectAltName value (dNSName dns when non-NULL, an iPAddress per
 * literal in ips) at the end of buf, backwards as mbedtls' ASN.1 writer does;
 * *start is where it begins. Returns its length or a negative mbedtls error. */
int nl_x509_san_write(unsigned char *buf, size_t cap, unsigned char **start, const char *dns,
                      const char *ips);

/* Fills *err with "<what>: <mbedtls' text> (-0x<code>)", code EPROTO; returns -1. */
int nl_x509_mbed_err(nl_err_t **err, int ret, const char *what);

#endif
