/* libFuzzer target over what the certificate manager reads from the API
 * server: a CertificateSigningRequest object (agent/kube/csr.c: conditions,
 * status.certificate in base64) and, when it holds one, the issued certificate
 * (agent/cert_x509.c). Byte 0 odd: the rest is PEM for the certificate parser
 * alone; even: the rest is the CSR's JSON. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "agent/cert_x509.h"
#include "agent/kube/csr.h"

static void cert(const char *pem, size_t len) {
  nl_x509_info_t info;
  nl_err_t *err = NULL;
  if (nl_x509_cert_parse(pem, len, &info, &err) == 0) {
    assert(!err && info.cn);
    nl_x509_info_free(&info);
  } else {
    assert(err && !info.cn);
    nl_err_free(&err);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *p = (const char *)data + 1;
  size--;
  if (data[0] & 1) {
    cert(p, size);
    return 0;
  }
  nl_kube_csr_t csr;
  nl_err_t *err = NULL;
  if (nl_kube_csr_decode(p, size, &csr, &err) < 0) {
    assert(err && !csr.name && !csr.certificate);
    nl_err_free(&err);
    return 0;
  }
  assert((csr.phase == NL_KUBE_CSR_ISSUED) == (csr.certificate != NULL));
  if (csr.certificate) cert(csr.certificate, strlen(csr.certificate));
  nl_kube_csr_free(&csr);
  return 0;
}
