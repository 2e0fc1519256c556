/* Keys, CSRs and certificates for TLS bootstrap and rotation, on mbedtls. A key
 * is EC P-256, as client-go's certificate manager makes them. */
#include "agent/cert_x509.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/asn1write.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <mbedtls/x509_csr.h>

#include "reactor/xalloc.h"

#define PEM_CAP 4096

int nl_x509_mbed_err(nl_err_t **err, int ret, const char *what) {
  char buf[128];
  mbedtls_strerror(ret, buf, sizeof buf);
  return nl_err_set(err, EPROTO, "%s: %s (-0x%04x)", what, buf, (unsigned)-ret);
}

void nl_x509_info_free(nl_x509_info_t *i) {
  free(i->cn);
  i->cn = NULL;
}

static time_t x509_time(const mbedtls_x509_time *t) {
  struct tm tm = {.tm_year = t->year - 1900, .tm_mon = t->mon - 1, .tm_mday = t->day,
                  .tm_hour = t->hour, .tm_min = t->min, .tm_sec = t->sec};
  return timegm(&tm);
}

static char *subject_cn(const mbedtls_x509_name *n) {
  for (; n; n = n->next) {
    if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) == 0)
      return nl_xstrndup((const char *)n->val.p, n->val.len);
  }
  return nl_xstrdup("");
}

/* mbedtls wants PEM NUL-terminated with the NUL counted. */
static int crt_parse(mbedtls_x509_crt *crt, const char *pem, size_t len, nl_err_t **err) {
  if (!memmem(pem, len, "-----BEGIN CERTIFICATE-----", 27))
    return nl_err_set(err, NL_EINVAL, "no certificate in the PEM data");
  char *buf = nl_xstrndup(pem, len);
  int ret = mbedtls_x509_crt_parse(crt, (const unsigned char *)buf, strlen(buf) + 1);
  free(buf);
  /* ret > 0: some of a bundle failed; the leaf is what matters, and it is first */
  if (ret < 0 || crt->version == 0) return nl_x509_mbed_err(err, ret < 0 ? ret : -1, "x509");
  return 0;
}

static void info_fill(const mbedtls_x509_crt *crt, nl_x509_info_t *out) {
  out->not_before = x509_time(&crt->valid_from);
  out->not_after = x509_time(&crt->valid_to);
  out->cn = subject_cn(&crt->subject);
}

int nl_x509_cert_parse(const char *pem, size_t len, nl_x509_info_t *out, nl_err_t **err) {
  memset(out, 0, sizeof *out);
  mbedtls_x509_crt crt;
  mbedtls_x509_crt_init(&crt);
  int rc = crt_parse(&crt, pem, len, err);
  if (rc == 0) info_fill(&crt, out);
  mbedtls_x509_crt_free(&crt);
  return rc;
}

int nl_x509_pair_parse(const char *cert_pem, const char *key_pem, nl_x509_info_t *out,
                       nl_err_t **err) {
  memset(out, 0, sizeof *out);
  mbedtls_x509_crt crt;
  mbedtls_pk_context key;
  mbedtls_x509_crt_init(&crt);
  mbedtls_pk_init(&key);
  int rc = crt_parse(&crt, cert_pem, strlen(cert_pem), err), ret;
  if (rc == 0 && (ret = mbedtls_pk_parse_key(&key, (const unsigned char *)key_pem,
                                             strlen(key_pem) + 1, NULL, 0)) != 0)
    rc = nl_x509_mbed_err(err, ret, "private key");
  if (rc == 0 && mbedtls_pk_check_pair(&crt.pk, &key) != 0)
    rc = nl_err_set(err, NL_EINVAL, "the private key does not match the certificate");
  if (rc == 0) info_fill(&crt, out);
  mbedtls_pk_free(&key);
  mbedtls_x509_crt_free(&crt);
  return rc;
}

int nl_x509_san_write(unsigned char *buf, size_t cap, unsigned char **start, const char *dns,
                      const char *ips) {
  unsigned char *p = buf + cap;
  int len = 0, ret;
  char *list = nl_xstrdup(ips ? ips : "");
  for (char *save = NULL, *ip = strtok_r(list, ",", &save); ip; ip = strtok_r(NULL, ",", &save)) {
    unsigned char bin[16];
    size_t n = 0;
    if (inet_pton(AF_INET, ip, bin) == 1) n = 4;
    else if (inet_pton(AF_INET6, ip, bin) == 1) n = 16;
    if (!n) continue;
    if ((ret = mbedtls_asn1_write_raw_buffer(&p, buf, bin, n)) < 0) goto out;
    len += ret;
    if ((ret = mbedtls_asn1_write_len(&p, buf, n)) < 0) goto out;
    len += ret;
    if ((ret = mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7)) < 0) goto out;
    len += ret;
  }
  if (dns) {
    size_t hl = strlen(dns);
    if ((ret = mbedtls_asn1_write_raw_buffer(&p, buf, (const unsigned char *)dns, hl)) < 0) goto out;
    len += ret;
    if ((ret = mbedtls_asn1_write_len(&p, buf, hl)) < 0) goto out;
    len += ret;
    if ((ret = mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2)) < 0) goto out;
    len += ret;
  }
  if ((ret = mbedtls_asn1_write_len(&p, buf, (size_t)len)) < 0) goto out;
  len += ret;
  if ((ret = mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE)) < 0)
    goto out;
  len += ret;
  *start = p;
  ret = len;
out:
  free(list);
  return ret;
}

int nl_x509_csr_new(const nl_x509_csr_req_t *req, char **key_pem, char **csr_pem, nl_err_t **err) {
  *key_pem = *csr_pem = NULL;
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_pk_context key;
  mbedtls_x509write_csr csr;
  mbedtls_entropy_init(&entropy);
  mbedtls_ctr_drbg_init(&drbg);
  mbedtls_pk_init(&key);
  mbedtls_x509write_csr_init(&csr);
  unsigned char *kbuf = nl_xcalloc(1, PEM_CAP), *cbuf = nl_xcalloc(1, PEM_CAP);
  int rc = -1, ret;
  static const char pers[] = "nanolet-csr";
  if ((ret = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
                                   (const unsigned char *)pers, sizeof pers - 1)) != 0) {
    nl_x509_mbed_err(err, ret, "seed the random generator");
    goto out;
  }
  if ((ret = mbedtls_pk_setup(&key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY))) != 0 ||
      (ret = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(key),
                                 mbedtls_ctr_drbg_random, &drbg)) != 0) {
    nl_x509_mbed_err(err, ret, "unable to generate a new private key");
    goto out;
  }
  /* Go writes O before CN; mbedtls keeps the order given. */
  char *subject = nl_xasprintf("O=%s,CN=%s", req->org, req->cn);
  ret = mbedtls_x509write_csr_set_subject_name(&csr, subject);
  free(subject);
  if (ret != 0) {
    nl_x509_mbed_err(err, ret, "the subject");
    goto out;
  }
  mbedtls_x509write_csr_set_key(&csr, &key);
  mbedtls_x509write_csr_set_md_alg(&csr, MBEDTLS_MD_SHA256);
  if (req->dns || (req->ips && *req->ips)) {
    unsigned char san[1024], *start = NULL;
    int n = nl_x509_san_write(san, sizeof san, &start, req->dns, req->ips);
    if (n < 0 || (ret = mbedtls_x509write_csr_set_extension(
                      &csr, MBEDTLS_OID_SUBJECT_ALT_NAME,
                      MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), start, (size_t)n)) != 0) {
      nl_x509_mbed_err(err, n < 0 ? n : ret, "the subjectAltName");
      goto out;
    }
  }
  if ((ret = mbedtls_x509write_csr_pem(&csr, cbuf, PEM_CAP, mbedtls_ctr_drbg_random, &drbg)) != 0) {
    nl_x509_mbed_err(err, ret, "unable to create a csr from the private key");
    goto out;
  }
  if ((ret = mbedtls_pk_write_key_pem(&key, kbuf, PEM_CAP)) != 0) {
    nl_x509_mbed_err(err, ret, "unable to encode the key");
    goto out;
  }
  *key_pem = (char *)kbuf;
  *csr_pem = (char *)cbuf;
  kbuf = cbuf = NULL;
  rc = 0;
out:
  free(kbuf);
  free(cbuf);
  mbedtls_x509write_csr_free(&csr);
  mbedtls_pk_free(&key);
  mbedtls_ctr_drbg_free(&drbg);
  mbedtls_entropy_free(&entropy);
  return rc;
}
