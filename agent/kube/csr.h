/* CertificateSigningRequests (certificates.k8s.io/v1), typed: the object a node
 * creates to ask for a certificate, and the status it reads back (outside
 * input, fuzzed by fuzz_cert). As client-go's util/certificate/csr. */
#ifndef NL_KUBE_CSR_H
#define NL_KUBE_CSR_H

#include <stdbool.h>
#include <stddef.h>

#include "reactor/error.h"

#define NL_KUBE_CSR_PATH "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define NL_KUBE_SIGNER_CLIENT "kubernetes.io/kube-apiserver-client-kubelet"
#define NL_KUBE_SIGNER_SERVING "kubernetes.io/kubelet-serving"

/* The JSON body that creates a CSR named by the server (generateName "csr-"):
 * request is the PEM CSR (sent base64), usages NULL-terminated
 * ("digital signature", "client auth"). Caller frees. */
char *nl_kube_csr_encode(const char *csr_pem, const char *signer, const char *const *usages);

typedef enum nl_kube_csr_phase {
  NL_KUBE_CSR_PENDING,  /* no decision yet, or approved and not yet signed */
  NL_KUBE_CSR_ISSUED,   /* approved with a certificate */
  NL_KUBE_CSR_DENIED,
  NL_KUBE_CSR_FAILED,
} nl_kube_csr_phase_t;

/* Every string owned, NULL when absent. */
typedef struct nl_kube_csr {
  char *name;
  nl_kube_csr_phase_t phase;
  bool approved;
  char *reason, *message; /* of the Denied or Failed condition */
  char *certificate;      /* status.certificate, PEM (decoded from base64) */
} nl_kube_csr_t;

/* Decodes a CSR object. Returns 0, or -1 with *err naming the field
 * ("status.certificate: not valid base64"); *out then holds nothing. */
int nl_kube_csr_decode(const char *json, size_t len, nl_kube_csr_t *out, nl_err_t **err);
void nl_kube_csr_free(nl_kube_csr_t *c);

#endif
