/* TLS on mbedtls as a pure engine (a BIO pair, as nghttp2 keeps protocol and I/O
 * apart): ciphertext from the socket goes in with nl_tls_feed(), ciphertext to
 * send comes out with nl_tls_take(), plaintext goes through nl_tls_read() and
 * nl_tls_write(). The engine never touches a socket, so it is testable on bytes
 * and drives any uv stream.
 *
 * An nl_tls_config_t holds what sessions share: the entropy source and DRBG
 * (seeded once per config), certificates and keys. Whoever creates clients or a
 * server owns one; sessions hold a reference, so the owner may drop its own
 * reference while sessions are still open. No process-wide state. */
#ifndef NL_TLS_H
#define NL_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "reactor/error.h"

typedef struct nl_tls_config nl_tls_config_t;
typedef struct nl_tls nl_tls_t;

typedef struct nl_tls_config_opts {
  bool server;
  /* Client: verify the server's chain against the CA and its name against the
   * host (DNS names and IP addresses in subjectAltName). false: accept any
   * certificate, as upstream httpGet probes do (InsecureSkipVerify).
   * Server: require and verify client certificates against the CA. */
  bool verify;
  /* Each of CA, certificate and key comes either from a PEM string (*_pem) or
   * a file (*_file). Files are read synchronously: create configs at start-up,
   * or read the files with uv_fs_* and pass PEM. */
  const char *ca_file, *ca_pem;
  const char *cert_file, *cert_pem;
  const char *key_file, *key_pem;
  /* ALPN protocols in order of preference, NULL-terminated, static storage
   * (e.g. {"h2", "http/1.1", NULL}); NULL: {"http/1.1"}. A server picks the
   * first of its own list that the client offers. */
  const char *const *alpn;
  /* Server: ask for a client certificate and verify it against the CA when one
   * is given, without requiring one (Go's VerifyClientCertIfGiven); the result
   * is read with nl_tls_peer_identity(). */
  bool request_client_cert;
  /* Lowest protocol version as mbedtls' minor number (from
   * nl_tls_version_parse()); 0: TLS 1.2. */
  int min_minor;
  /* mbedtls ciphersuite ids, 0-terminated (static or outliving the config);
   * NULL: mbedtls' defaults. */
  const int *ciphersuites;
} nl_tls_config_opts_t;

/* Go's crypto/tls names (tlsMinVersion: "VersionTLS12", tlsCipherSuites:
 * "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") to what the config takes.
 * Return 0, or -1 with *err naming the value that this TLS library cannot
 * offer. A TLS 1.3 suite name is accepted and adds nothing (mbedtls 2.28
 * speaks TLS 1.2 at most; Go never lets TLS 1.3 suites be configured). */
int nl_tls_version_parse(const char *name, int *min_minor, nl_err_t **err);
int nl_tls_ciphersuite_parse(const char *name, int *id, nl_err_t **err);

/* The client certificate a server session received. */
typedef struct nl_tls_peer {
  char *cn;       /* subject CommonName, owned */
  char **orgs;    /* subject Organizations, owned, NULL-terminated */
} nl_tls_peer_t;
void nl_tls_peer_free(nl_tls_peer_t *p);

/* Creates a config with one reference. Returns 0, or -1 with *err naming the
 * file or item that failed (unreadable file, bad PEM, key not matching). A
 * server config needs a certificate and key; verify needs a CA. */
int nl_tls_config_new(nl_tls_config_t **out, const nl_tls_config_opts_t *opts, nl_err_t **err);
nl_tls_config_t *nl_tls_config_ref(nl_tls_config_t *c);
/* Drops a reference; the last one frees the config. NULL is ignored. */
void nl_tls_config_unref(nl_tls_config_t *c);
bool nl_tls_config_is_server(const nl_tls_config_t *c);

/* A session on cfg (which it references). server_name (clients only, may be
 * NULL): sent as SNI unless it is an IP literal, and checked against the
 * certificate when the config verifies. Never fails except on allocation. */
nl_tls_t *nl_tls_new(nl_tls_config_t *cfg, const char *server_name);
void nl_tls_free(nl_tls_t *t);
bool nl_tls_is_server(const nl_tls_t *t);

/* After the handshake of a request_client_cert server: 1 and *out filled when
 * the client presented a certificate that verifies against the CA for client
 * authentication, 0 when it presented none, -1 with *err (Go's wording:
 * "x509: certificate signed by unknown authority") when it does not verify. */
int nl_tls_peer_identity(const nl_tls_t *t, nl_tls_peer_t *out, nl_err_t **err);

/* Ciphertext received from the peer; copied. */
void nl_tls_feed(nl_tls_t *t, const void *data, size_t len);

/* Drives the handshake. Returns 1 when it is complete, 0 when it needs more
 * input (take and send the output first), -1 with *err on failure (bad
 * certificate, protocol error). Verification failures read as Go's crypto/tls
 * ones: "tls: failed to verify certificate: x509: certificate signed by unknown
 * authority", "... x509: certificate is valid for localhost, not example.com". */
int nl_tls_handshake(nl_tls_t *t, nl_err_t **err);
bool nl_tls_handshake_done(const nl_tls_t *t);
/* The protocol ALPN chose ("h2"), or NULL when the peer chose none; valid
 * after the handshake, for the session's life. */
const char *nl_tls_alpn(const nl_tls_t *t);

enum { NL_TLS_EOF = -2 };

/* Reads decrypted bytes into buf. Returns the count (> 0), 0 when more input is
 * needed, NL_TLS_EOF when the peer sent close_notify, -1 with *err on failure. */
ssize_t nl_tls_read(nl_tls_t *t, void *buf, size_t cap, nl_err_t **err);

/* Encrypts all of data into the output. Returns 0, or -1 with *err. Only after
 * the handshake is complete. */
int nl_tls_write(nl_tls_t *t, const void *data, size_t len, nl_err_t **err);

/* Queues a close_notify alert. */
void nl_tls_close_notify(nl_tls_t *t);

/* Hands out the pending ciphertext (caller frees) and its length, or NULL when
 * there is none. */
char *nl_tls_take(nl_tls_t *t, size_t *len);

#endif
