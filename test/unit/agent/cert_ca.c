#include "cert_ca.h"

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <mbedtls/x509_csr.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cert_x509.h"

static void when(time_t t, char out[15]) {
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 15, "%Y%m%d%H%M%S", &tm);
}

static char *sign(mbedtls_pk_context *subject_key, const char *subject, time_t from, time_t to) {
  mbedtls_entropy_context e;
  mbedtls_ctr_drbg_context d;
  mbedtls_pk_context ca;
  mbedtls_x509write_cert w;
  mbedtls_mpi serial;
  mbedtls_entropy_init(&e);
  mbedtls_ctr_drbg_init(&d);
  mbedtls_pk_init(&ca);
  mbedtls_x509write_crt_init(&w);
  mbedtls_mpi_init(&serial);
  if (mbedtls_ctr_drbg_seed(&d, mbedtls_entropy_func, &e, NULL, 0) ||
      mbedtls_pk_setup(&ca, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) ||
      mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(ca), mbedtls_ctr_drbg_random, &d))
    abort();
  char f[15], t[15];
  when(from, f);
  when(to, t);
  mbedtls_mpi_lset(&serial, 4242);
  mbedtls_x509write_crt_set_version(&w, MBEDTLS_X509_CRT_VERSION_3);
  mbedtls_x509write_crt_set_md_alg(&w, MBEDTLS_MD_SHA256);
  mbedtls_x509write_crt_set_subject_key(&w, subject_key);
  mbedtls_x509write_crt_set_issuer_key(&w, &ca);
  char *pem = calloc(1, 4096);
  if (mbedtls_x509write_crt_set_subject_name(&w, subject) ||
      mbedtls_x509write_crt_set_issuer_name(&w, "CN=test-ca") ||
      mbedtls_x509write_crt_set_serial(&w, &serial) ||
      mbedtls_x509write_crt_set_validity(&w, f, t) ||
      mbedtls_x509write_crt_pem(&w, (unsigned char *)pem, 4096, mbedtls_ctr_drbg_random, &d))
    abort();
  mbedtls_mpi_free(&serial);
  mbedtls_x509write_crt_free(&w);
  mbedtls_pk_free(&ca);
  mbedtls_ctr_drbg_free(&d);
  mbedtls_entropy_free(&e);
  return pem;
}

char *test_ca_sign(const char *csr_pem, time_t from, time_t to) {
  mbedtls_x509_csr csr;
  mbedtls_x509_csr_init(&csr);
  if (mbedtls_x509_csr_parse(&csr, (const unsigned char *)csr_pem, strlen(csr_pem) + 1)) abort();
  char subject[256];
  if (mbedtls_x509_dn_gets(subject, sizeof subject, &csr.subject) < 0) abort();
  char *pem = sign(&csr.pk, subject, from, to);
  mbedtls_x509_csr_free(&csr);
  return pem;
}

char *test_ca_pair(const char *cn, time_t from, time_t to, char **key_pem) {
  char *csr = NULL;
  nl_err_t *err = NULL;
  nl_x509_csr_req_t req = {.cn = cn, .org = "system:nodes"};
  if (nl_x509_csr_new(&req, key_pem, &csr, &err) < 0) abort();
  char *pem = test_ca_sign(csr, from, to);
  free(csr);
  return pem;
}
