#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <mbedtls/x509_csr.h>

#include "agent/cert_x509.h"
#include "cert_ca.h"

/* A CSR as upstream's kubelet sends it: P-256, O then CN, the SANs asked for. */
static void csr_subject_and_sans(void **state) {
  (void)state;
  char *key = NULL, *csr = NULL;
  nl_err_t *err = NULL;
  nl_x509_csr_req_t req = {.cn = "system:node:n1", .org = "system:nodes", .dns = "n1",
                           .ips = "10.0.0.7,fd00::1"};
  assert_int_equal(nl_x509_csr_new(&req, &key, &csr, &err), 0);
  assert_non_null(strstr(key, "-----BEGIN EC PRIVATE KEY-----"));
  assert_non_null(strstr(csr, "-----BEGIN CERTIFICATE REQUEST-----"));
  mbedtls_x509_csr c;
  mbedtls_x509_csr_init(&c);
  assert_int_equal(mbedtls_x509_csr_parse(&c, (const unsigned char *)csr, strlen(csr) + 1), 0);
  char dn[256];
  assert_true(mbedtls_x509_dn_gets(dn, sizeof dn, &c.subject) > 0);
  assert_string_equal(dn, "O=system:nodes, CN=system:node:n1");
  assert_string_equal(mbedtls_pk_get_name(&c.pk), "EC");
  assert_int_equal(mbedtls_pk_get_bitlen(&c.pk), 256);
  /* the SAN extension holds the DNS name and both addresses */
  const unsigned char dns[] = {0x82, 2, 'n', '1'}, v4[] = {0x87, 4, 10, 0, 0, 7};
  assert_non_null(memmem(c.raw.p, c.raw.len, dns, sizeof dns));
  assert_non_null(memmem(c.raw.p, c.raw.len, v4, sizeof v4));
  mbedtls_x509_csr_free(&c);
  free(key);
  free(csr);
}

/* A client CSR has no SAN extension: the apiserver refuses one for its signer. */
static void client_csr_has_no_sans(void **state) {
  (void)state;
  char *key = NULL, *csr = NULL;
  nl_err_t *err = NULL;
  nl_x509_csr_req_t req = {.cn = "system:node:n1", .org = "system:nodes"};
  assert_int_equal(nl_x509_csr_new(&req, &key, &csr, &err), 0);
  mbedtls_x509_csr c;
  mbedtls_x509_csr_init(&c);
  assert_int_equal(mbedtls_x509_csr_parse(&c, (const unsigned char *)csr, strlen(csr) + 1), 0);
  const unsigned char san_oid[] = {0x55, 0x1d, 0x11};
  assert_null(memmem(c.raw.p, c.raw.len, san_oid, sizeof san_oid));
  mbedtls_x509_csr_free(&c);
  free(key);
  free(csr);
}

static void pair_validity_and_match(void **state) {
  (void)state;
  char *key = NULL, *key2 = NULL;
  char *cert = test_ca_pair("system:node:n1", 1700000000, 1700000060, &key);
  char *cert2 = test_ca_pair("system:node:n2", 1700000000, 1700003600, &key2);
  nl_x509_info_t info;
  nl_err_t *err = NULL;
  assert_int_equal(nl_x509_pair_parse(cert, key, &info, &err), 0);
  assert_int_equal(info.not_before, 1700000000);
  assert_int_equal(info.not_after, 1700000060);
  assert_string_equal(info.cn, "system:node:n1");
  nl_x509_info_free(&info);
  /* certificate and key in one text, as the store keeps them */
  char *both = NULL;
  assert_true(asprintf(&both, "%s%s", cert, key) > 0);
  assert_int_equal(nl_x509_pair_parse(both, both, &info, &err), 0);
  nl_x509_info_free(&info);
  assert_int_equal(nl_x509_pair_parse(cert, key2, &info, &err), -1);
  assert_string_equal(err->msg, "the private key does not match the certificate");
  assert_null(info.cn);
  nl_err_free(&err);
  free(both);
  free(cert);
  free(key);
  free(cert2);
  free(key2);
}

static void bad_certificates(void **state) {
  (void)state;
  nl_x509_info_t info;
  nl_err_t *err = NULL;
  assert_int_equal(nl_x509_cert_parse("hello", 5, &info, &err), -1);
  assert_string_equal(err->msg, "no certificate in the PEM data");
  nl_err_free(&err);
  const char *bad = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  assert_int_equal(nl_x509_cert_parse(bad, strlen(bad), &info, &err), -1);
  assert_non_null(strstr(err->msg, "x509: "));
  assert_null(info.cn);
  nl_err_free(&err);
  /* cut short: not NUL-terminated, the length rules */
  char *key = NULL, *cert = test_ca_pair("c", 1700000000, 1700000060, &key);
  assert_int_equal(nl_x509_cert_parse(cert, strlen(cert) / 2, &info, &err), -1);
  nl_err_free(&err);
  assert_int_equal(nl_x509_cert_parse(cert, strlen(cert), &info, &err), 0);
  nl_x509_info_free(&info);
  free(cert);
  free(key);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(csr_subject_and_sans),
      cmocka_unit_test(client_csr_has_no_sans),
      cmocka_unit_test(pair_validity_and_match),
      cmocka_unit_test(bad_certificates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
