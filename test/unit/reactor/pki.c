#include "pki.h"

#include <stdlib.h>
#include <string.h>

#include <mbedtls/asn1write.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>

static void set_name(mbedtls_x509write_cert *w, const char *oid, size_t oid_len, const char *v,
                     size_t len, int tag) {
  mbedtls_asn1_named_data *d =
      mbedtls_asn1_store_named_data(&w->subject, oid, oid_len, (const unsigned char *)v, len);
  if (!d) abort();
  d->val.tag = tag ? tag : MBEDTLS_ASN1_UTF8_STRING;
}

char *test_pki_issue(const test_pki_req_t *r, char **key_pem) {
  mbedtls_entropy_context e;
  mbedtls_ctr_drbg_context d;
  mbedtls_pk_context key, issuer;
  mbedtls_x509write_cert w;
  mbedtls_mpi serial;
  mbedtls_entropy_init(&e);
  mbedtls_ctr_drbg_init(&d);
  mbedtls_pk_init(&key);
  mbedtls_pk_init(&issuer);
  mbedtls_x509write_crt_init(&w);
  mbedtls_mpi_init(&serial);
  if (mbedtls_ctr_drbg_seed(&d, mbedtls_entropy_func, &e, NULL, 0) ||
      mbedtls_pk_setup(&key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) ||
      mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(key), mbedtls_ctr_drbg_random, &d))
    abort();
  if (r->issuer_key_pem &&
      mbedtls_pk_parse_key(&issuer, (const unsigned char *)r->issuer_key_pem,
                           strlen(r->issuer_key_pem) + 1, NULL, 0))
    abort();
  unsigned char sn[8];
  mbedtls_ctr_drbg_random(&d, sn, sizeof sn);
  sn[0] &= 0x7f;
  mbedtls_mpi_read_binary(&serial, sn, sizeof sn);
  mbedtls_x509write_crt_set_version(&w, MBEDTLS_X509_CRT_VERSION_3);
  mbedtls_x509write_crt_set_md_alg(&w, MBEDTLS_MD_SHA256);
  mbedtls_x509write_crt_set_subject_key(&w, &key);
  mbedtls_x509write_crt_set_issuer_key(&w, r->issuer_key_pem ? &issuer : &key);
  /* The subject by hand: x509write's string form knows neither other string
   * types nor NUL bytes. O first, CN last, as the DN reads "O=..,CN=..". */
  set_name(&w, MBEDTLS_OID_AT_CN, MBEDTLS_OID_SIZE(MBEDTLS_OID_AT_CN), r->cn,
           r->cn_len ? r->cn_len : strlen(r->cn), r->cn_tag);
  if (r->org)
    set_name(&w, MBEDTLS_OID_AT_ORGANIZATION, MBEDTLS_OID_SIZE(MBEDTLS_OID_AT_ORGANIZATION), r->org,
             r->org_len ? r->org_len : strlen(r->org), r->org_tag);
  if (r->issuer_name) {
    if (mbedtls_x509write_crt_set_issuer_name(&w, r->issuer_name)) abort();
  } else {
    /* Self-signed: the issuer is the subject (plain names only). */
    char dn[256];
    snprintf(dn, sizeof dn, "CN=%.*s", (int)(r->cn_len ? r->cn_len : strlen(r->cn)), r->cn);
    if (mbedtls_x509write_crt_set_issuer_name(&w, dn)) abort();
  }
  if (mbedtls_x509write_crt_set_basic_constraints(&w, r->ca, r->ca ? 2 : -1)) abort();
  if (r->eku) {
    /* SEQUENCE { OID id-kp-serverAuth / id-kp-clientAuth } */
    unsigned char v[12] = {0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03,
                           strcmp(r->eku, "serverAuth") == 0 ? 0x01 : 0x02};
    if (mbedtls_x509write_crt_set_extension(&w, MBEDTLS_OID_EXTENDED_KEY_USAGE,
                                            MBEDTLS_OID_SIZE(MBEDTLS_OID_EXTENDED_KEY_USAGE), 0, v,
                                            sizeof v))
      abort();
  }
  char *pem = calloc(1, 4096);
  *key_pem = calloc(1, 1024);
  if (mbedtls_x509write_crt_set_serial(&w, &serial) ||
      mbedtls_x509write_crt_set_validity(&w, "20200101000000", "20491231235959") ||
      mbedtls_x509write_crt_pem(&w, (unsigned char *)pem, 4096, mbedtls_ctr_drbg_random, &d) ||
      mbedtls_pk_write_key_pem(&key, (unsigned char *)*key_pem, 1024))
    abort();
  mbedtls_mpi_free(&serial);
  mbedtls_x509write_crt_free(&w);
  mbedtls_pk_free(&key);
  mbedtls_pk_free(&issuer);
  mbedtls_ctr_drbg_free(&d);
  mbedtls_entropy_free(&e);
  return pem;
}
