/* The strings of X.509 names (subject and issuer attributes), decoded as Go's
 * crypto/x509 parseASN1String does: UTF8String must be valid UTF-8,
 * PrintableString, IA5String and NumericString must keep to their character
 * sets and are kept as they are, T61String is read as Latin-1, BMPString as
 * UTF-16 (a trailing NUL dropped, an unpaired surrogate U+FFFD); any other
 * type (UniversalString, BIT STRING) is an error, as there. The whole value is
 * kept: an embedded NUL is U+0000, carried as reactor/utf8.h says. Outside
 * input (client certificates): fuzzed by fuzz_x509_name. */
#ifndef NL_X509_NAME_H
#define NL_X509_NAME_H

#include <mbedtls/x509_crt.h>

#include "reactor/error.h"

/* The value of one attribute of ASN.1 string type tag. Returns the text
 * (owned), or NULL with *why set to Go's reason ("invalid UTF-8 string",
 * "unsupported string type: 28"; static storage, or written into why_buf). */
char *nl_x509_string(int tag, const unsigned char *p, size_t len, char why_buf[64]);

/* Decodes every attribute of name; *cn gets the last CommonName ("" when
 * there is none) and *orgs the Organizations, NULL-terminated (both owned).
 * Returns 0, or -1 with *err ("x509: invalid RDNSequence: invalid attribute
 * value: <why>") and nothing to free. cn and orgs may be NULL (only checked). */
int nl_x509_name_decode(const mbedtls_x509_name *name, char **cn, char ***orgs, nl_err_t **err);

void nl_x509_names_free(char *cn, char **orgs);

#endif
