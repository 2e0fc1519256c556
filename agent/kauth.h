/* Authentication and authorization of the kubelet API, as upstream's
 * delegating authenticator and authorizer (cmd/kubelet/app/auth.go):
 *   - x509: a client certificate verified against clientCAFile gives the user
 *     (CN) and groups (O);
 *   - webhook: a bearer token is checked with a TokenReview, the answer
 *     (authenticated or not) cached for cacheTTL;
 *   - anonymous (system:anonymous, system:unauthenticated) only when enabled;
 *   - authorization AlwaysAllow, or a SubjectAccessReview per request
 *     attribute set, allowed answers cached for cacheAuthorizedTTL, denied ones
 *     for cacheUnauthorizedTTL.
 * Request attributes follow NodeRequestAttributesGetter (fine-grained, as
 * upstream 1.36 where it is GA): resource nodes, name the node, verb from the
 * method, subresource(s) from the path. */
#ifndef NL_KAUTH_H
#define NL_KAUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/kserver.h"
#include "reactor/error.h"
#include "reactor/list.h"
#include "reactor/map.h"

typedef struct nl_kube_client nl_kube_client_t;

typedef enum { NL_KAUTHZ_ALWAYS_ALLOW, NL_KAUTHZ_WEBHOOK } nl_kauthz_mode_t;

typedef struct nl_kauth_opts {
  const char *node_name;
  bool anonymous;          /* authentication.anonymous.enabled */
  bool webhook;            /* authentication.webhook.enabled */
  uint64_t authn_ttl_ms;   /* authentication.webhook.cacheTTL */
  nl_kauthz_mode_t mode;   /* authorization.mode */
  uint64_t allowed_ttl_ms; /* authorization.webhook.cacheAuthorizedTTL */
  uint64_t denied_ttl_ms;  /* authorization.webhook.cacheUnauthorizedTTL */
} nl_kauth_opts_t;

/* The attributes of one request: up to two subresources, tried in order
 * (upstream allows the request when any is allowed). */
typedef struct nl_kauth_attrs {
  const char *verb;            /* "get", "create", ...; "" for other methods */
  const char *subresources[2]; /* static strings; [1] may be NULL */
  int n;
} nl_kauth_attrs_t;

void nl_kauth_attrs(const char *method, const char *path, nl_kauth_attrs_t *out);

/* The 403 body: "Forbidden (user=u, verb=get, resource=nodes, subresource(s)=[pods proxy])\n". */
char *nl_kauth_forbidden_msg(const char *user, const nl_kauth_attrs_t *a);

/* An owned user. */
typedef struct nl_kauth_user {
  char *name, *uid;
  char **groups; /* NULL-terminated */
} nl_kauth_user_t;
void nl_kauth_user_free(nl_kauth_user_t *u);

/* The outcome of a check: status 0 (allowed: user is set), 401 or 403 (body
 * is upstream's text), 500 (authorization error). */
typedef void (*nl_kauth_done_fn)(void *ctx, int status, const nl_kauth_user_t *user,
                                 const char *body);

/* A cache of decisions, keyed by the HMAC-SHA256 of the token or review;
 * at most NL_KAUTH_CACHE_MAX entries, the oldest evicted first. */
#define NL_KAUTH_CACHE_MAX 4096
typedef struct nl_kauth_cache {
  nl_map_t map;    /* hex HMAC -> cached decision */
  nl_list_t order; /* the same entries, oldest first */
} nl_kauth_cache_t;

typedef struct nl_kauth {
  nl_kauth_opts_t opts;
  nl_kube_client_t *kube; /* borrowed; NULL: no webhook possible */
  nl_kauth_cache_t tokens;  /* token -> cached TokenReview answer */
  nl_kauth_cache_t reviews; /* SAR spec JSON -> cached decision */
  unsigned char hmac_key[32]; /* random, for the caches' keys */
  uint64_t (*now)(void *ctx); /* ms; the loop's clock, or a test's */
  void *now_ctx;
  nl_list_t pending;      /* checks waiting for the apiserver */
} nl_kauth_t;

/* Returns 0, or -1 with *err when a webhook is asked for without an API
 * client (upstream: "no client provided, cannot use webhook ..."). */
int nl_kauth_init(nl_kauth_t *a, const nl_kauth_opts_t *opts, nl_kube_client_t *kube,
                  uint64_t (*now)(void *), void *now_ctx, nl_err_t **err);
/* Cancels checks in flight (each completes with 401/500 later) and frees the
 * caches once they have. */
void nl_kauth_stop(nl_kauth_t *a);
/* Drops the caches (after nl_kauth_stop's checks are done). */
void nl_kauth_free(nl_kauth_t *a);

/* Authenticates and authorizes a request. peer: the result of
 * nl_tls_peer_identity (1, 0 or -1); authorization: the header or NULL.
 * done runs once, synchronously when the answer is known (AlwaysAllow, a
 * cache hit, a bad certificate) or later. */
void nl_kauth_check(nl_kauth_t *a, int peer_rc, const char *peer_cn, char *const *peer_orgs,
                    const char *authorization, const char *method, const char *path,
                    nl_kauth_done_fn done, void *ctx);

#endif
