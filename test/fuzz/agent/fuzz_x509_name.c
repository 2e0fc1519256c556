/* libFuzzer target over the decoding of X.509 names (reactor/x509_name.c),
 * what a client certificate's subject gives the kubelet server: byte 0 even,
 * the rest is a DER certificate (subject and issuer decoded); odd, a DER Name
 * (an RDNSequence); the rest is also read as one attribute value with byte 1 as
 * its ASN.1 string type. Whatever is decoded must be the text reactor/utf8.h
 * promises (valid UTF-8, U+0000 as C0 80) and must become JSON. */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/platform.h>
#include <mbedtls/x509_crt.h>

#include "reactor/utf8.h"
#include "reactor/x509_name.h"

static void text_ok(const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  size_t n = strlen(s);
  for (size_t i = 0; i < n;) {
    if (u[i] == 0xc0 && i + 1 < n && u[i + 1] == 0x80) {
      i += 2;
      continue;
    }
    size_t k = nl_utf8_seq(u + i, n - i);
    assert(k > 0);
    i += k;
  }
  json_t *j = nl_json_str(s);
  char *out = nl_json_xdumps(j, JSON_ENCODE_ANY);
  free(out);
  json_decref(j);
}

static void name(const mbedtls_x509_name *n) {
  char *cn = NULL, **orgs = NULL;
  nl_err_t *err = NULL;
  if (nl_x509_name_decode(n, &cn, &orgs, &err) == 0) {
    text_ok(cn);
    for (char **o = orgs; *o; o++) text_ok(*o);
    nl_x509_names_free(cn, orgs);
  } else {
    assert(err && !cn && !orgs);
    nl_err_free(&err);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const unsigned char *p = data + 1;
  size_t len = size - 1;
  if (data[0] % 2 == 0) {
    mbedtls_x509_crt crt;
    mbedtls_x509_crt_init(&crt);
    if (mbedtls_x509_crt_parse_der(&crt, p, len) == 0) {
      name(&crt.subject);
      name(&crt.issuer);
    }
    mbedtls_x509_crt_free(&crt);
  } else {
    unsigned char *q = (unsigned char *)p, *end = q + len;
    mbedtls_x509_name n;
    memset(&n, 0, sizeof n);
    /* A SEQUENCE OF sets, as in a certificate. */
    size_t seq;
    if (mbedtls_asn1_get_tag(&q, end, &seq, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE) == 0 &&
        mbedtls_x509_get_name(&q, q + seq, &n) == 0)
      name(&n);
    for (mbedtls_x509_name *c = n.next, *next; c; c = next) {
      next = c->next;
      mbedtls_free(c);
    }
  }
  char why[64];
  char *s = nl_x509_string(data[1], p + 1, len - 1, why);
  if (s) text_ok(s);
  else assert(why[0]);
  free(s);
  return 0;
}
