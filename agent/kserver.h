/* The kubelet API on address:port (10250): HTTPS, every request authenticated
 * (x509 client certificate, webhook bearer token, anonymous when enabled) and
 * authorized (AlwaysAllow, or a SubjectAccessReview on nodes/<subresource>) as
 * upstream's pkg/kubelet/server/auth.go, then routed to a handler. The read-only
 * port (10255) serves a subset without authentication.
 *
 * Modules plug in through the route table: a handler gets the request, the
 * authenticated user and the response object, which answers once
 * (nl_http_resp_send), streams (nl_http_resp_stream/_write/_end, with
 * back-pressure through nl_http_resp_queued and nl_http_resp_on_drain) or
 * takes the connection over after an Upgrade (nl_http_resp_takeover) — see
 * reactor/http_server.h. */
#ifndef NL_KSERVER_H
#define NL_KSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reactor/error.h"
#include "reactor/http_server.h"

/* The authenticated user (upstream's user.Info). Like the request, borrowed
 * for the handler call only: copy what an asynchronous answer needs (the
 * response object stays valid until released). */
typedef struct nl_kserver_user {
  const char *name;            /* "system:kube-apiserver-kubelet-client", "system:anonymous" */
  const char *uid;             /* "" when none */
  const char *const *groups;   /* NULL-terminated */
} nl_kserver_user_t;

typedef void (*nl_kserver_handler_fn)(void *ctx, const nl_http_req_t *req,
                                      const nl_kserver_user_t *user, nl_http_resp_t *resp);

/* One entry of the route table. */
typedef struct nl_kserver_route {
  const char *method;  /* "GET", "POST", ...; NULL: any (GET also answers HEAD) */
  const char *path;    /* exact, or its whole subtree when it ends in '/' ("/exec/") */
  nl_kserver_handler_fn fn;
  void *ctx;
  bool read_only;      /* also served on readOnlyPort, without authentication */
} nl_kserver_route_t;

typedef struct nl_kserver nl_kserver_t;
typedef struct nl_kube_client nl_kube_client_t;

typedef struct nl_kserver_opts {
  const char *node_name;
  const char *address;        /* address; "" or NULL: all IPv4 addresses */
  int port;                   /* port (10250) */
  int read_only_port;         /* readOnlyPort; 0: off */
  const char *cert_file, *key_file; /* tlsCertFile, tlsPrivateKeyFile; NULL: self-signed */
  const char *cert_dir;       /* --cert-dir: where the self-signed pair is kept */
  const char *hostname;       /* the self-signed certificate's DNS name */
  const char *node_ip;        /* and its IP address(es), comma separated, or NULL */
  const char *client_ca_file; /* authentication.x509.clientCAFile; NULL: no x509 */
  const char *tls_min_version;          /* tlsMinVersion ("VersionTLS12"), NULL: TLS 1.2 */
  const char *const *tls_cipher_suites; /* tlsCipherSuites, Go names; n of them */
  size_t n_tls_cipher_suites;
  bool anonymous, webhook;    /* authentication.anonymous/.webhook.enabled */
  uint64_t authn_ttl_ms;      /* authentication.webhook.cacheTTL */
  bool authz_webhook;         /* authorization.mode == Webhook (else AlwaysAllow) */
  uint64_t allowed_ttl_ms, denied_ttl_ms; /* authorization.webhook.cache*TTL */
  uint64_t idle_timeout_ms, read_timeout_ms; /* 0: 2 min, 1 min */
  size_t max_conns;           /* 0: 1024 */
  bool read_only_only;        /* readOnlyPort alone (> 0): no certificate, port not
                                 opened, authentication settings unused (a
                                 standalone agent whose webhooks have no API server) */
} nl_kserver_opts_t;

/* Creates the server: loads or generates the certificate, reads the client CA
 * (synchronously: call at start-up). kube: the API client for TokenReview and
 * SubjectAccessReview (borrowed; outlives the server), or NULL when
 * standalone. Returns 0, or -1 with *err naming the setting that failed. */
int nl_kserver_new(nl_kserver_t **out, uv_loop_t *loop, const nl_kserver_opts_t *opts,
                   nl_kube_client_t *kube, nl_err_t **err);

/* Adds routes (copied) before nl_kserver_listen(). The longest path wins; a
 * path matched only with another method answers 405, none 404 — after
 * authorization, as upstream (an unauthorized client learns nothing). */
void nl_kserver_route(nl_kserver_t *s, const nl_kserver_route_t *routes, size_t n);

/* Listens on address:port (unless read_only_only), and readOnlyPort when set. Returns 0 or -1 with *err
 * ("listen tcp 0.0.0.0:10250: address already in use"). */
int nl_kserver_listen(nl_kserver_t *s, nl_err_t **err);

/* The bound port (tests listen on port 0), or -1. */
/* serverTLSBootstrap: new connections present pem (certificate, then key);
 * open ones keep the old certificate. Returns 0, or -1 with *err when the pair
 * cannot be used (the old one stays). */
int nl_kserver_set_cert(nl_kserver_t *s, const char *pem, nl_err_t **err);
int nl_kserver_port(const nl_kserver_t *s);

/* Closes the listeners and connections, fails checks in flight, then frees the
 * server and calls done (may be NULL) once all memory is released. */
void nl_kserver_stop(nl_kserver_t *s, void (*done)(void *ctx), void *ctx);

#endif
