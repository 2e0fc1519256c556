#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <mbedtls/asn1.h>

#include "pki.h"
#include "reactor/tls.h"
#include "reactor/x509_name.h"

#define FIX(name) FIXTURES "/tls/" name

static void string_is(int tag, const char *v, size_t len, const char *want) {
  char why[64] = "";
  char *s = nl_x509_string(tag, (const unsigned char *)v, len, why);
  if (!s) fail_msg("tag %d: %s", tag, why);
  assert_string_equal(s, want);
  free(s);
}

static void string_fails(int tag, const char *v, size_t len, const char *want) {
  char why[64] = "";
  assert_null(nl_x509_string(tag, (const unsigned char *)v, len, why));
  assert_string_equal(why, want);
}

/* Go's parseASN1String, type by type. */
static void string_types(void **state) {
  string_is(MBEDTLS_ASN1_T61_STRING, "caf\xe9", 4, "caf\xc3\xa9");
  string_is(MBEDTLS_ASN1_UTF8_STRING, "", 0, ""); /* fuzz_x509_name: was not terminated */
  string_is(MBEDTLS_ASN1_BMP_STRING, "\0\0", 2, "");
  string_is(MBEDTLS_ASN1_T61_STRING, "\xbf" "a?", 3, "\xc2\xbf" "a?");
  string_is(MBEDTLS_ASN1_BMP_STRING, "\0c\0a\0f\0\xe9", 8, "caf\xc3\xa9");
  string_is(MBEDTLS_ASN1_BMP_STRING, "\0a\0\0", 4, "a"); /* a terminator */
  string_is(MBEDTLS_ASN1_BMP_STRING, "\xd8\x3d\xde\x00", 4, "\xf0\x9f\x98\x80");
  string_is(MBEDTLS_ASN1_BMP_STRING, "\xd8\x3d\0a", 4, "\xef\xbf\xbd" "a"); /* lone surrogate */
  string_fails(MBEDTLS_ASN1_BMP_STRING, "\0a\0", 3, "invalid BMPString");
  string_is(MBEDTLS_ASN1_UTF8_STRING, "caf\xc3\xa9", 5, "caf\xc3\xa9");
  string_is(MBEDTLS_ASN1_UTF8_STRING, "admin\0evil", 10, "admin\xc0\x80" "evil");
  string_fails(MBEDTLS_ASN1_UTF8_STRING, "caf\xe9", 4, "invalid UTF-8 string");
  string_fails(MBEDTLS_ASN1_UTF8_STRING, "\xc0\x80", 2, "invalid UTF-8 string");
  string_is(MBEDTLS_ASN1_PRINTABLE_STRING, "Test *&", 7, "Test *&");
  string_fails(MBEDTLS_ASN1_PRINTABLE_STRING, "a@b", 3, "invalid PrintableString");
  string_is(MBEDTLS_ASN1_IA5_STRING, "a@b", 3, "a@b");
  string_fails(MBEDTLS_ASN1_IA5_STRING, "caf\xe9", 4, "invalid IA5String");
  string_fails(MBEDTLS_ASN1_UNIVERSAL_STRING, "\0\0\0a", 4, "unsupported string type: 28");
}

/* ---- client certificates over a handshake ------------------------------- */

typedef struct pki {
  char *ca, *ca_key;
} pki_t;

static pki_t new_ca(void) {
  pki_t p;
  test_pki_req_t r = {.cn = "test-client-ca", .ca = true};
  p.ca = test_pki_issue(&r, &p.ca_key);
  return p;
}

static void pki_free(pki_t *p) {
  free(p->ca);
  free(p->ca_key);
}

static void pump(nl_tls_t *from, nl_tls_t *to) {
  size_t len;
  char *out = nl_tls_take(from, &len);
  if (!out) return;
  nl_tls_feed(to, out, len);
  free(out);
}

/* Presents cert_pem (a chain: leaf first) with key_pem to a kubelet-like
 * server trusting ca_pem; returns nl_tls_peer_identity's result. */
static int present(const char *ca_pem, const char *cert_pem, const char *key_pem,
                   nl_tls_peer_t *peer, nl_err_t **err) {
  nl_tls_config_opts_t so = {.server = true,
                             .cert_file = FIX("server.crt"),
                             .key_file = FIX("server.key"),
                             .ca_pem = ca_pem,
                             .request_client_cert = true};
  nl_tls_config_opts_t co = {.cert_pem = cert_pem, .key_pem = key_pem};
  nl_tls_config_t *s = NULL, *c = NULL;
  if (nl_tls_config_new(&s, &so, err) < 0 || nl_tls_config_new(&c, &co, err) < 0)
    fail_msg("%s", nl_err_msg(*err));
  nl_tls_t *sv = nl_tls_new(s, NULL), *cl = nl_tls_new(c, "localhost");
  nl_tls_config_unref(s);
  nl_tls_config_unref(c);
  int a = 0, b = 0;
  for (int i = 0; i < 20 && !(a == 1 && b == 1); i++) {
    a = nl_tls_handshake(cl, err);
    assert_true(a >= 0);
    pump(cl, sv);
    b = nl_tls_handshake(sv, err);
    assert_true(b >= 0);
    pump(sv, cl);
  }
  assert_true(a == 1 && b == 1);
  int rc = nl_tls_peer_identity(sv, peer, err);
  nl_tls_free(sv);
  nl_tls_free(cl);
  return rc;
}

static int leaf(const pki_t *p, const test_pki_req_t *req, nl_tls_peer_t *peer, nl_err_t **err) {
  test_pki_req_t r = *req;
  r.issuer_name = "CN=test-client-ca";
  r.issuer_key_pem = p->ca_key;
  char *key = NULL, *crt = test_pki_issue(&r, &key);
  int rc = present(p->ca, crt, key, peer, err);
  free(crt);
  free(key);
  return rc;
}

/* T61String and BMPString names are decoded (an Organization too, not
 * dropped); the whole CN is kept past a NUL. */
static void decoded_names(void **state) {
  pki_t p = new_ca();
  nl_tls_peer_t peer;
  nl_err_t *err = NULL;
  test_pki_req_t t61 = {.cn = "caf\xe9",
                        .cn_tag = MBEDTLS_ASN1_T61_STRING,
                        .org = "\xe9quipe",
                        .org_tag = MBEDTLS_ASN1_T61_STRING,
                        .eku = "clientAuth"};
  assert_int_equal(leaf(&p, &t61, &peer, &err), 1);
  assert_string_equal(peer.cn, "caf\xc3\xa9");
  assert_non_null(peer.orgs[0]);
  assert_string_equal(peer.orgs[0], "\xc3\xa9quipe");
  assert_null(peer.orgs[1]);
  nl_tls_peer_free(&peer);

  test_pki_req_t bmp = {.cn = "\0c\0a\0f\0\xe9", .cn_len = 8, .cn_tag = MBEDTLS_ASN1_BMP_STRING};
  assert_int_equal(leaf(&p, &bmp, &peer, &err), 1);
  assert_string_equal(peer.cn, "caf\xc3\xa9");
  nl_tls_peer_free(&peer);

  test_pki_req_t nul = {.cn = "admin\0evil", .cn_len = 10, .org = "system:nodes"};
  assert_int_equal(leaf(&p, &nul, &peer, &err), 1);
  assert_string_not_equal(peer.cn, "admin");
  assert_string_equal(peer.cn, "admin\xc0\x80" "evil");
  nl_tls_peer_free(&peer);
  pki_free(&p);
}

/* Names Go's crypto/x509 cannot parse refuse the certificate, as Go's TLS
 * server does. */
static void unparsable_names(void **state) {
  pki_t p = new_ca();
  nl_tls_peer_t peer;
  nl_err_t *err = NULL;
  test_pki_req_t bad = {.cn = "caf\xe9"}; /* a UTF8String that is not UTF-8 */
  assert_int_equal(leaf(&p, &bad, &peer, &err), -1);
  assert_string_equal(nl_err_msg(err), "tls: failed to parse client certificate: x509: invalid "
                                       "RDNSequence: invalid attribute value: invalid UTF-8 string");
  assert_null(peer.cn);
  nl_err_free(&err);
  test_pki_req_t univ = {.cn = "\0\0\0a", .cn_len = 4, .cn_tag = MBEDTLS_ASN1_UNIVERSAL_STRING};
  assert_int_equal(leaf(&p, &univ, &peer, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "unsupported string type: 28"));
  nl_err_free(&err);
  pki_free(&p);
}

/* Every certificate of the chain that lists extended key usages must allow
 * clientAuth, as Go's Verify with KeyUsages ClientAuth. */
static void chain_key_usage(void **state) {
  pki_t p = new_ca();
  const char *ekus[] = {"serverAuth", "clientAuth", NULL};
  for (int i = 0; i < 3; i++) {
    test_pki_req_t ir = {.cn = "test-intermediate",
                         .ca = true,
                         .eku = ekus[i],
                         .issuer_name = "CN=test-client-ca",
                         .issuer_key_pem = p.ca_key};
    char *ikey = NULL, *icrt = test_pki_issue(&ir, &ikey);
    test_pki_req_t lr = {.cn = "alice",
                         .eku = "clientAuth",
                         .issuer_name = "CN=test-intermediate",
                         .issuer_key_pem = ikey};
    char *lkey = NULL, *lcrt = test_pki_issue(&lr, &lkey);
    char *chain = malloc(strlen(lcrt) + strlen(icrt) + 1);
    strcpy(chain, lcrt);
    strcat(chain, icrt);
    nl_tls_peer_t peer;
    nl_err_t *err = NULL;
    int rc = present(p.ca, chain, lkey, &peer, &err);
    if (i == 0) {
      assert_int_equal(rc, -1);
      assert_string_equal(nl_err_msg(err), "tls: failed to verify certificate: x509: certificate "
                                           "specifies an incompatible key usage");
      nl_err_free(&err);
    } else {
      assert_int_equal(rc, 1);
      assert_string_equal(peer.cn, "alice");
      nl_tls_peer_free(&peer);
    }
    free(chain);
    free(icrt);
    free(ikey);
    free(lcrt);
    free(lkey);
  }
  /* The leaf's own usage as before. */
  test_pki_req_t srv = {.cn = "alice", .eku = "serverAuth"};
  nl_tls_peer_t peer;
  nl_err_t *err = NULL;
  assert_int_equal(leaf(&p, &srv, &peer, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "incompatible key usage"));
  nl_err_free(&err);
  pki_free(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(string_types),
      cmocka_unit_test(decoded_names),
      cmocka_unit_test(unparsable_names),
      cmocka_unit_test(chain_key_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
