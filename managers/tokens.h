/* Service-account tokens for projected volumes (upstream pkg/kubelet/token):
 * POST /api/v1/namespaces/<ns>/serviceaccounts/<sa>/token (TokenRequest) with
 * the projection's audience and expirationSeconds, bound to the pod
 * (boundObjectRef), so that the Node authorizer lets this node ask only for
 * the tokens of pods bound to it and the token dies with the pod.
 *
 * Tokens are cached per (service account, namespace, audience,
 * expirationSeconds, pod uid) as upstream's keyFunc. A cached token is used
 * until it is older than 80 % of its TTL or 24 h (less a jitter of up to 10 s);
 * then the next pod sync (at least every syncFrequency) fetches a new one, and
 * the cached token stays in use while it is still valid and the request fails.
 * Expired tokens are dropped every minute; a pod's tokens when it goes away.
 * After an agent restart the tokens in the volumes are taken up again. */
#ifndef NL_TOKENS_H
#define NL_TOKENS_H

#include <stdint.h>

#include <uv.h>

#include "agent/kube/client.h"
#include "agent/model/pod.h"
#include "reactor/error.h"
#include "reactor/list.h"
#include "reactor/map.h"

/* What the runtime calls; the manager or a test fake stands behind it.
 * ensure: makes sure that each serviceAccountToken projection of the pod has a
 *   fresh token in the cache (requests what is missing or due), then calls
 *   done(dctx) exactly once, never from inside ensure (the outcome shows in
 *   lookup).
 * lookup: the token for one projection (borrowed until the caller returns to
 *   the loop); -1 with *err (the failed request's message) when there is none. */
typedef struct nl_tokens_source {
  void (*ensure)(void *ctx, const nl_pod_t *pod, void (*done)(void *dctx), void *dctx);
  int (*lookup)(void *ctx, const nl_pod_t *pod, const nl_sa_token_projection_t *p,
                const char **token, nl_err_t **err);
  void *ctx;
} nl_tokens_source_t;

typedef struct nl_tokens {
  uv_loop_t *loop;
  nl_kube_client_t *kube; /* borrowed; NULL: every lookup fails (no API server) */
  char *root_dir;         /* owned; the pods' volumes, read for tokens at a restart */
  nl_map_t cache;         /* key -> token entry */
  nl_list_t waits;        /* ensure() calls waiting for requests */
  uv_timer_t gc;          /* every minute: expired tokens */
  uv_timer_t kick;        /* the next loop turn: ensure() calls with nothing to wait for */
  uint64_t (*now_ms)(void *ctx); /* wall clock; tests inject their own */
  void *now_ctx;
  bool stopping;
  int pending; /* requests and handles still closing */
  void (*done)(void *ctx);
  void *done_ctx;
} nl_tokens_t;

/* kube may be NULL (standalone). root_dir (copied; NULL: none) holds the pods'
 * volumes: a token a volume holds already (an agent restart) is taken up when
 * it is the pod's and still valid, so that a restart rewrites no volume.
 * Nothing is started until the first ensure. */
void nl_tokens_init(nl_tokens_t *m, uv_loop_t *loop, nl_kube_client_t *kube,
                    const char *root_dir);
nl_tokens_source_t nl_tokens_source(nl_tokens_t *m);
/* Drops the tokens bound to pod uid (upstream DeleteServiceAccountToken). */
void nl_tokens_forget_pod(nl_tokens_t *m, const char *uid);
/* Cancels requests (waiting ensure() calls complete), then done(ctx). The
 * source must not be used any more: ensure() asserts it. */
void nl_tokens_stop(nl_tokens_t *m, void (*done)(void *ctx), void *ctx);

/* Parsers of outside input (tokens_parse.c; test/fuzz/kube/fuzz_tokens.c).
 * The TokenRequest's answer: status.token (*token, a new string),
 * status.expirationTimestamp (*exp_ms, wall clock) and spec.expirationSeconds
 * (*ttl_s). Returns 0, or -1 with *err. */
int nl__token_answer_parse(const char *body, size_t len, char **token, int64_t *exp_ms,
                           int64_t *ttl_s, nl_err_t **err);
/* A token file's JWT: true when its claims name the pod (kubernetes.io.pod.uid)
 * and, unless audience is "", the audience (aud); *iat_s is its issue time.
 * The signature is not checked: the file is the one nanolet wrote. */
bool nl__token_jwt_claims(const char *jwt, const char *pod_uid, const char *audience,
                          int64_t *iat_s);

#endif
