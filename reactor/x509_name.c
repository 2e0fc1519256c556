#include "reactor/x509_name.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/asn1.h>
#include <mbedtls/oid.h>

#include "reactor/buf.h"
#include "reactor/utf8.h"
#include "reactor/xalloc.h"

/* Go's isPrintable: PrintableString's set, with '*' and '&' that certificates
 * in the wild use. */
static bool printable(unsigned char b) {
  return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') ||
         (b >= '\'' && b <= ')') || (b >= '+' && b <= '/') || b == ' ' || b == ':' || b == '=' ||
         b == '?' || b == '*' || b == '&';
}

#define TAG_NUMERIC_STRING 0x12

char *nl_x509_string(int tag, const unsigned char *p, size_t len, char why_buf[64]) {
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_reserve(&b, len + 1);
  b.data[0] = 0; /* an empty value is "" */
  switch (tag) {
  case MBEDTLS_ASN1_T61_STRING: /* Latin-1, as Go and BoringSSL read it */
    for (size_t i = 0; i < len; i++) nl_utf8_append_rune(&b, p[i]);
    return nl_buf_steal(&b);
  case MBEDTLS_ASN1_PRINTABLE_STRING:
  case MBEDTLS_ASN1_IA5_STRING:
  case TAG_NUMERIC_STRING:
    for (size_t i = 0; i < len; i++) {
      bool ok = tag == MBEDTLS_ASN1_PRINTABLE_STRING ? printable(p[i])
                : tag == MBEDTLS_ASN1_IA5_STRING     ? p[i] < 0x80
                                                     : (p[i] >= '0' && p[i] <= '9') || p[i] == ' ';
      if (!ok) {
        nl_buf_free(&b);
        snprintf(why_buf, 64, "invalid %s",
                 tag == MBEDTLS_ASN1_PRINTABLE_STRING ? "PrintableString"
                 : tag == MBEDTLS_ASN1_IA5_STRING     ? "IA5String"
                                                      : "NumericString");
        return NULL;
      }
      nl_utf8_append_rune(&b, p[i]); /* NUL (IA5) as C0 80 */
    }
    return nl_buf_steal(&b);
  case MBEDTLS_ASN1_UTF8_STRING:
    for (size_t i = 0; i < len;) {
      size_t k = nl_utf8_seq(p + i, len - i);
      if (!k) {
        nl_buf_free(&b);
        snprintf(why_buf, 64, "invalid UTF-8 string");
        return NULL;
      }
      if (p[i] == 0) nl_utf8_append_rune(&b, 0);
      else nl_buf_append(&b, p + i, k);
      i += k;
    }
    return nl_buf_steal(&b);
  case MBEDTLS_ASN1_BMP_STRING:
    if (len % 2) {
      nl_buf_free(&b);
      snprintf(why_buf, 64, "invalid BMPString");
      return NULL;
    }
    if (len >= 2 && p[len - 1] == 0 && p[len - 2] == 0) len -= 2; /* a terminator */
    for (size_t i = 0; i < len; i += 2) {
      uint32_t u = (uint32_t)p[i] << 8 | p[i + 1];
      if (u >= 0xd800 && u < 0xdc00 && i + 3 < len) {
        uint32_t lo = (uint32_t)p[i + 2] << 8 | p[i + 3];
        if (lo >= 0xdc00 && lo <= 0xdfff) {
          nl_utf8_append_rune(&b, 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00));
          i += 2;
          continue;
        }
      }
      nl_utf8_append_rune(&b, u); /* a lone surrogate: U+FFFD, as utf16.Decode */
    }
    return nl_buf_steal(&b);
  default:
    nl_buf_free(&b);
    snprintf(why_buf, 64, "unsupported string type: %d", tag);
    return NULL;
  }
}

void nl_x509_names_free(char *cn, char **orgs) {
  free(cn);
  for (char **o = orgs; o && *o; o++) free(*o);
  free(orgs);
}

int nl_x509_name_decode(const mbedtls_x509_name *name, char **cn, char ***orgs, nl_err_t **err) {
  char *c = NULL, **o = nl_xcalloc(1, sizeof(char *));
  size_t n = 0;
  for (; name; name = name->next) {
    if (name->oid.p == NULL) continue;
    char why[64];
    char *v = nl_x509_string(name->val.tag, name->val.p, name->val.len, why);
    if (!v) {
      nl_x509_names_free(c, o);
      return nl_err_set(err, EPROTO, "x509: invalid RDNSequence: invalid attribute value: %s", why);
    }
    if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &name->oid) == 0) {
      free(c); /* the last one, as pkix.Name.FillFromRDNSequence */
      c = v;
    } else if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_ORGANIZATION, &name->oid) == 0) {
      o = nl_xrealloc(o, (n + 2) * sizeof(char *));
      o[n++] = v;
      o[n] = NULL;
    } else {
      free(v);
    }
  }
  if (!c) c = nl_xstrdup("");
  if (cn) *cn = c;
  else free(c);
  if (orgs) *orgs = o;
  else nl_x509_names_free(NULL, o);
  return 0;
}
