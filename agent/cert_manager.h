/* Certificate rotation, as client-go's util/certificate manager
 * (agent/cert_manager.c): one manager per certificate (the client certificate
 * to the API server, the kubelet server's serving certificate).
 *
 * When there is no valid certificate, and again at a jittered point between 70 %
 * and 90 % of the current one's validity (the wall clock read again at least
 * once a minute while it waits, so that a step of the clock does not hold the
 * rotation back), it makes a new EC P-256 key and CSR
 * (on the thread pool), creates a CertificateSigningRequest for its signer,
 * watches it until it is issued (15 minutes at most), stores the pair in
 * certDir (agent/cert_store.h) and hands it to its owner. A failed attempt
 * (denied, failed, timed out, unreachable server) is retried after 2 s
 * doubling to 32 s. A CSR goes through the bootstrap client when the current
 * certificate has expired (or there is none) and a bootstrap client is given.
 *
 * Ownership: the manager copies its options; it references the API clients,
 * which must outlive it (stop it first). */
#ifndef NL_CERT_MANAGER_H
#define NL_CERT_MANAGER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent/cert_x509.h"
#include "agent/kube/client.h"
#include "agent/kube/kubeconfig.h"

typedef struct nl_certmgr nl_certmgr_t;

typedef enum nl_certmgr_state {
  NL_CERTMGR_IDLE,     /* not started */
  NL_CERTMGR_WAITING,  /* the timer runs to the rotation deadline */
  NL_CERTMGR_KEYGEN,   /* key and CSR made on the thread pool */
  NL_CERTMGR_CREATING, /* the CSR is being created */
  NL_CERTMGR_PENDING,  /* watching the CSR until it is issued */
  NL_CERTMGR_STORING,  /* the new pair is written on the thread pool */
  NL_CERTMGR_BACKOFF,  /* the last attempt failed */
  NL_CERTMGR_DONE,     /* not rotating, and a valid certificate is there */
  NL_CERTMGR_STOPPING,
} nl_certmgr_state_t;

/* A new pair: pem holds the certificate and then the key (the content of
 * path, the file -current.pem now points at). Valid during the call. */
typedef void (*nl_certmgr_cert_fn)(void *ctx, const char *pem, const char *path,
                                   const nl_x509_info_t *info);

typedef struct nl_certmgr_opts {
  const char *signer;          /* also the name in log lines, as upstream */
  const char *const *usages;   /* NULL-terminated */
  nl_x509_csr_req_t subject;   /* CN, O and for a serving certificate the SANs */
  const char *cert_dir;
  const char *prefix;          /* "kubelet-client", "kubelet-server" */
  /* Client: after the first new pair, write a kubeconfig at this path for
   * boot's cluster pointing at <prefix>-current.pem (TLS bootstrap); NULL: none. */
  const char *kubeconfig;
  const nl_kubeconfig_t *boot;
  bool rotate;                 /* false: only get a certificate when there is none */
  const char *pem;             /* the current certificate (PEM), or NULL */
  uint64_t wait_timeout_ms;    /* for the CSR to be issued; 0: 15 min */
  uint64_t backoff_initial_ms; /* 0: 2 s */
  uint64_t backoff_max_ms;     /* 0: 32 s */
  uint64_t recheck_ms;         /* the wall clock read again while waiting; 0: 60 s */
} nl_certmgr_opts_t;

/* client: the API client (its certificate may be the one rotated); bootstrap:
 * the client of --bootstrap-kubeconfig, or NULL. Returns 0, or -1 with *err
 * when o->pem cannot be read as a certificate. */
int nl_certmgr_new(nl_certmgr_t **out, uv_loop_t *loop, nl_kube_client_t *client,
                   nl_kube_client_t *bootstrap, const nl_certmgr_opts_t *o,
                   nl_certmgr_cert_fn on_cert, void *ctx, nl_err_t **err);
void nl_certmgr_start(nl_certmgr_t *m);
/* Cancels what is in flight; frees m and calls done (may be NULL) once the
 * last completion has run. */
void nl_certmgr_stop(nl_certmgr_t *m, void (*done)(void *ctx), void *ctx);

nl_certmgr_state_t nl_certmgr_state(const nl_certmgr_t *m);
/* True while a certificate that has not expired is in use. */
bool nl_certmgr_valid(const nl_certmgr_t *m);

#endif
