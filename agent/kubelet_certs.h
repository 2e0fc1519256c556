/* The node's certificates (agent/kubelet_certs.c): which client credentials
 * the API client starts with (the kubeconfig, the certificate store, or none
 * yet with --bootstrap-kubeconfig), and the certificate managers that get and
 * rotate the client and serving certificates. Internal to agent/. */
#ifndef NL_KUBELET_CERTS_H
#define NL_KUBELET_CERTS_H

#include "agent/config.h"
#include "agent/kube/kubeconfig.h"
#include "reactor/error.h"

/* Owned. */
typedef struct nl_kubelet_creds {
  nl_kubeconfig_t kc;        /* what the API client uses */
  nl_kubeconfig_t bootstrap; /* --bootstrap-kubeconfig when it is needed (path NULL otherwise) */
  bool write_kubeconfig;     /* --kubeconfig is to be written after the bootstrap */
  char *client_pem;          /* the client certificate in use, or NULL: none yet */
  char *server_pem;          /* serverTLSBootstrap: a valid stored serving pair, or NULL */
  char *server_path;         /* its file */
} nl_kubelet_creds_t;

/* Start-up (synchronous file reads), as upstream's bootstrap.LoadClientConfig:
 * a --kubeconfig with a client certificate that has not expired is used as it
 * is; otherwise, with --bootstrap-kubeconfig, the stored kubelet-client pair
 * when it is valid, else no client certificate yet (the client manager gets
 * one through a CSR first). With rotateCertificates, a valid stored pair wins
 * over the kubeconfig's own certificate, as upstream's manager prefers its
 * store. Returns 0, or -1 with *err naming the kubeconfig that cannot be used. */
int nl_kubelet_creds_load(nl_kubelet_creds_t *cr, const nl_kubelet_config_t *cfg, nl_err_t **err);
void nl_kubelet_creds_free(nl_kubelet_creds_t *cr);

#endif
