/* The certificate store of client-go's util/certificate (agent/cert_store.c):
 * each pair is one PEM file <dir>/<prefix>-<2006-01-02-15-04-05>.pem holding
 * the certificate and then the key (mode 0600), written whole or not at all
 * (a temporary file, fsync, rename), and <dir>/<prefix>-current.pem is a
 * symlink to the pair in use, swapped atomically (a new <prefix>-updated.pem
 * link renamed over it): a kill or a power cut leaves the link on the old pair
 * or the new one, each whole. Old pairs stay on disk, as upstream keeps them. Prefixes: "kubelet-client", "kubelet-server".
 *
 * The functions are synchronous file I/O: start-up, or a uv_queue_work thread. */
#ifndef NL_CERT_STORE_H
#define NL_CERT_STORE_H

#include <time.h>

#include "agent/kube/kubeconfig.h"
#include "reactor/error.h"

/* "<dir>/<prefix>-current.pem"; caller frees. */
char *nl_cert_store_current_path(const char *dir, const char *prefix);

/* Writes the pair (cert_pem then key_pem) as of now and points -current.pem at
 * it. Returns 0 with *path the new file (caller frees), or -1 with *err naming
 * the file. */
int nl_cert_store_update(const char *dir, const char *prefix, const char *cert_pem,
                         const char *key_pem, time_t now, char **path, nl_err_t **err);

/* Reads a PEM file of at most 1 MiB (a pair: certificate and key in one text).
 * Returns 0 with *pem (caller frees), or -1 with *err naming the file (the errno
 * as code: ENOENT when there is none). */
int nl_cert_store_read(const char *path, char **pem, nl_err_t **err);

/* Writes the kubeconfig that bootstrap leaves behind, as upstream's
 * writeKubeconfigFromBootstrapping: boot's cluster (server, CA, tls-server-name,
 * insecure-skip-tls-verify) and a user whose client-certificate and client-key
 * are pem_path. Written to a temporary file and renamed over path. */
int nl_cert_store_write_kubeconfig(const char *path, const nl_kubeconfig_t *boot,
                                   const char *pem_path, nl_err_t **err);

#endif
