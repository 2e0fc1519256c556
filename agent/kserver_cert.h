/* The kubelet server's self-signed certificate (agent/kserver_cert.c). */
#ifndef NL_KSERVER_CERT_H
#define NL_KSERVER_CERT_H

#include "reactor/error.h"

/* Generates a self-signed EC P-256 certificate for host (a DNS name) and ips
 * (comma separated IP literals, may be NULL) and writes the PEM files
 * (the key with mode 0600). Synchronous: start-up only. Returns 0, or -1
 * with *err naming the file or step that failed. */
int nl_kserver_self_signed(const char *cert_path, const char *key_path, const char *host,
                           const char *ips, nl_err_t **err);

#endif
