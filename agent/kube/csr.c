/* CertificateSigningRequest bodies and statuses, with jansson (one object now
 * and then: the tree parser's speed is not needed here). */
#include "agent/kube/csr.h"

#include <mbedtls/base64.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

char *nl_kube_csr_encode(const char *csr_pem, const char *signer, const char *const *usages) {
  size_t len = strlen(csr_pem), n = 0;
  mbedtls_base64_encode(NULL, 0, &n, (const unsigned char *)csr_pem, len);
  unsigned char *b64 = nl_xmalloc(n);
  if (mbedtls_base64_encode(b64, n, &n, (const unsigned char *)csr_pem, len) != 0) abort();
  json_t *u = json_array();
  for (size_t i = 0; usages[i]; i++) json_array_append_new(u, json_string(usages[i]));
  json_t *o = json_pack("{s:s,s:s,s:{s:s},s:{s:s%,s:s,s:o}}", "apiVersion",
                        "certificates.k8s.io/v1", "kind", "CertificateSigningRequest",
                        "metadata", "generateName", "csr-", "spec", "request", (char *)b64, n,
                        "signerName", signer, "usages", u);
  free(b64);
  if (!o) abort();
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!s) abort();
  return s;
}

void nl_kube_csr_free(nl_kube_csr_t *c) {
  free(c->name);
  free(c->reason);
  free(c->message);
  free(c->certificate);
  memset(c, 0, sizeof *c);
}

static char *str_dup(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s && *s ? nl_xstrdup(s) : NULL;
}

static int decode_cert(const char *s, nl_kube_csr_t *out, nl_err_t **err) {
  size_t len = strlen(s), n = 0;
  int rc = mbedtls_base64_decode(NULL, 0, &n, (const unsigned char *)s, len);
  if (rc == MBEDTLS_ERR_BASE64_INVALID_CHARACTER)
    return nl_err_set(err, NL_EINVAL, "status.certificate: not valid base64");
  char *buf = nl_xmalloc(n + 1);
  if (mbedtls_base64_decode((unsigned char *)buf, n, &n, (const unsigned char *)s, len) != 0) {
    free(buf);
    return nl_err_set(err, NL_EINVAL, "status.certificate: not valid base64");
  }
  buf[n] = 0;
  if (strlen(buf) != n) { /* PEM is text */
    free(buf);
    return nl_err_set(err, NL_EINVAL, "status.certificate: must hold PEM data");
  }
  out->certificate = buf;
  return 0;
}

/* As csr.WaitForCertificate: Denied and Failed end the wait whatever else is
 * there; Approved with a certificate is the answer. */
int nl_kube_csr_decode(const char *json, size_t len, nl_kube_csr_t *out, nl_err_t **err) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *o = json_loadb(json, len, 0, &je);
  if (!json_is_object(o)) {
    json_decref(o);
    return nl_err_set(err, NL_EINVAL, "CertificateSigningRequest: %s",
                      o ? "not an object" : je.text);
  }
  json_t *md = json_object_get(o, "metadata"), *st = json_object_get(o, "status");
  out->name = str_dup(md, "name");
  json_t *conds = json_object_get(st, "conditions");
  size_t i;
  json_t *c;
  json_array_foreach(conds, i, c) {
    const char *type = json_string_value(json_object_get(c, "type"));
    if (!type) continue;
    bool denied = !strcmp(type, "Denied"), failed = !strcmp(type, "Failed");
    if (!strcmp(type, "Approved")) out->approved = true;
    if ((denied || failed) && out->phase == NL_KUBE_CSR_PENDING) {
      out->phase = denied ? NL_KUBE_CSR_DENIED : NL_KUBE_CSR_FAILED;
      out->reason = str_dup(c, "reason");
      out->message = str_dup(c, "message");
    }
  }
  const char *cert = json_string_value(json_object_get(st, "certificate"));
  int rc = 0;
  if (out->phase == NL_KUBE_CSR_PENDING && out->approved && cert && *cert) {
    rc = decode_cert(cert, out, err);
    if (rc == 0) out->phase = NL_KUBE_CSR_ISSUED;
  }
  json_decref(o);
  if (rc < 0) nl_kube_csr_free(out);
  return rc;
}
