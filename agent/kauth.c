#include "agent/kauth.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "agent/kube/client.h"
#include "reactor/buf.h"
#include "reactor/digest.h"
#include "reactor/log.h"
#include "reactor/utf8.h"
#include "reactor/xalloc.h"

#define REVIEW_TIMEOUT_MS 10000

/* ---- request attributes ------------------------------------------------- */

/* upstream's isSubpath: path itself or below it. */
static bool is_subpath(const char *sub, const char *path) {
  size_t n = strlen(path);
  if (n > 0 && path[n - 1] == '/') n--;
  return strncmp(sub, path, n) == 0 && (sub[n] == 0 || sub[n] == '/');
}

void nl_kauth_attrs(const char *method, const char *path, nl_kauth_attrs_t *out) {
  static const struct {
    const char *method, *verb;
  } verbs[] = {{"POST", "create"}, {"GET", "get"}, {"PUT", "update"}, {"PATCH", "patch"},
               {"DELETE", "delete"}};
  memset(out, 0, sizeof(*out));
  out->verb = "";
  for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
    if (strcmp(method, verbs[i].method) == 0) out->verb = verbs[i].verb;
  /* Fine-grained first, then the one that older authorizers know. */
  if (is_subpath(path, "/pods") || is_subpath(path, "/runningpods/")) out->subresources[out->n++] = "pods";
  else if (is_subpath(path, "/healthz")) out->subresources[out->n++] = "healthz";
  else if (is_subpath(path, "/configz")) out->subresources[out->n++] = "configz";
  const char *sub = "proxy";
  if (is_subpath(path, "/stats/")) sub = "stats";
  else if (is_subpath(path, "/metrics")) sub = "metrics";
  else if (is_subpath(path, "/logs/")) sub = "log";
  else if (is_subpath(path, "/checkpoint/")) sub = "checkpoint";
  else if (is_subpath(path, "/statusz")) sub = "statusz";
  else if (is_subpath(path, "/flagz")) sub = "configz";
  out->subresources[out->n++] = sub;
}

char *nl_kauth_forbidden_msg(const char *user, const nl_kauth_attrs_t *a) {
  return nl_xasprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=[%s%s%s])\n",
                      user, a->verb, a->subresources[0], a->n > 1 ? " " : "",
                      a->n > 1 ? a->subresources[1] : "");
}

/* ---- users and caches --------------------------------------------------- */

void nl_kauth_user_free(nl_kauth_user_t *u) {
  free(u->name);
  free(u->uid);
  for (char **g = u->groups; g && *g; g++) free(*g);
  free(u->groups);
  memset(u, 0, sizeof(*u));
}

static void user_add_group(nl_kauth_user_t *u, const char *g) {
  size_t n = 0;
  while (u->groups && u->groups[n]) {
    if (strcmp(u->groups[n], g) == 0) return;
    n++;
  }
  u->groups = nl_xrealloc(u->groups, (n + 2) * sizeof(char *));
  u->groups[n] = nl_xstrdup(g);
  u->groups[n + 1] = NULL;
}

static void user_copy(nl_kauth_user_t *dst, const nl_kauth_user_t *src) {
  memset(dst, 0, sizeof(*dst));
  dst->name = nl_xstrdup(src->name);
  dst->uid = nl_xstrdup(src->uid ? src->uid : "");
  dst->groups = nl_xcalloc(1, sizeof(char *));
  for (char **g = src->groups; g && *g; g++) user_add_group(dst, *g);
}

typedef struct cached {
  nl_list_t link;       /* in the cache's order, oldest first */
  char key[65];         /* the map's key: hex HMAC-SHA256 */
  uint64_t expires;
  bool ok;              /* authenticated / allowed */
  nl_kauth_user_t user; /* tokens: the user when ok */
} cached_t;

static void cached_free(void *p) {
  cached_t *c = p;
  nl_list_remove(&c->link);
  nl_kauth_user_free(&c->user);
  free(c);
}

/* A cache's key: the hex HMAC-SHA256 of what it caches under the per-process
 * random key, as upstream's cached token authenticator keys tokens (a token is
 * never kept, and a key costs 64 bytes whatever the token's size). */
static void cache_key(const nl_kauth_t *a, const char *what, char out[65]) {
  unsigned char mac[32];
  nl_hmac_sha256(a->hmac_key, sizeof(a->hmac_key), what, strlen(what), mac);
  nl_hex(mac, sizeof mac, out);
}

static cached_t *cache_get(nl_kauth_t *a, nl_kauth_cache_t *m, const char *what) {
  char key[65];
  cache_key(a, what, key);
  cached_t *c = nl_map_get(&m->map, key);
  if (c && c->expires <= a->now(a->now_ctx)) {
    cached_free(nl_map_del(&m->map, key));
    return NULL;
  }
  return c;
}

/* Stores c under what: expired entries go when the cache is full, and then the
 * oldest, so that a stream of distinct tokens costs at most NL_KAUTH_CACHE_MAX
 * entries. */
static void cache_put(nl_kauth_t *a, nl_kauth_cache_t *m, const char *what, cached_t *c) {
  cache_key(a, what, c->key);
  cached_t *old = nl_map_del(&m->map, c->key);
  if (old) cached_free(old);
  if (nl_map_size(&m->map) >= NL_KAUTH_CACHE_MAX) {
    uint64_t now = a->now(a->now_ctx);
    nl_list_t *pos, *tmp;
    nl_list_foreach_safe(pos, tmp, &m->order) {
      cached_t *e = nl_list_entry(pos, cached_t, link);
      if (e->expires <= now) cached_free(nl_map_del(&m->map, e->key));
    }
    while (nl_map_size(&m->map) >= NL_KAUTH_CACHE_MAX) {
      cached_t *e = nl_list_entry(m->order.next, cached_t, link);
      cached_free(nl_map_del(&m->map, e->key));
    }
  }
  nl_map_put(&m->map, c->key, c);
  nl_list_insert_tail(&m->order, &c->link);
}

static void cache_free(nl_kauth_cache_t *m) { nl_map_free(&m->map, cached_free); }

/* ---- checks ------------------------------------------------------------- */

typedef struct check {
  nl_list_t link;
  nl_kauth_t *a;
  nl_kauth_done_fn done; /* NULL once answered (stop) */
  void *ctx;
  nl_kauth_user_t user;
  char *method, *path;
  nl_kauth_attrs_t attrs;
  int next_attr;
  char *key;             /* the token or review being asked */
  nl_kube_req_t *req;
} check_t;

static void finish(check_t *c, int status, const char *body) {
  if (c->done) c->done(c->ctx, status, status == 0 ? &c->user : NULL, body);
  c->done = NULL;
  if (c->req) return; /* freed when the apiserver's answer (or cancel) arrives */
  nl_list_remove(&c->link);
  nl_kauth_user_free(&c->user);
  free(c->method);
  free(c->path);
  free(c->key);
  free(c);
}

static void authorize(check_t *c);

static char *review_key(const check_t *c, const char *sub) {
  json_t *groups = json_array();
  for (char **g = c->user.groups; g && *g; g++) json_array_append_new(groups, nl_json_str(*g));
  json_t *spec = json_pack("{s:{s:s, s:s, s:s, s:s, s:o}, s:o, s:o, s:o}", "resourceAttributes",
                           "verb", c->attrs.verb, "version", "v1", "resource", "nodes",
                           "subresource", sub, "name", nl_json_str(c->a->opts.node_name), "user",
                           nl_json_str(c->user.name), "uid", nl_json_str(c->user.uid), "groups",
                           groups);
  char *s = nl_json_xdumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(spec);
  return s;
}

/* Sends a TokenReview or SubjectAccessReview (body: owned JSON). */
static void post_review(check_t *c, const char *path, char *body, nl_kube_done_fn cb) {
  nl_kube_request_opts_t o = {.method = "POST",
                              .path = path,
                              .body = body,
                              .body_len = strlen(body),
                              .timeout_ms = REVIEW_TIMEOUT_MS};
  c->req = nl_kube_request(c->a->kube, &o, cb, c);
  free(body);
}

/* The apiserver's answer: *root its JSON (NULL when there is none: an error, a
 * non-2xx status, no JSON). Returns false when the check was answered meanwhile
 * (stop); c is freed then. */
static bool review_answer(check_t *c, const nl_kube_response_t *resp, const nl_err_t *err,
                          json_t **root) {
  c->req = NULL;
  if (!c->done) {
    finish(c, 0, NULL);
    return false;
  }
  /* U+0000 in a name is kept (reactor/utf8.h), as Go's decoder keeps it. */
  *root = !err && resp->status / 100 == 2
              ? json_loadb(resp->body, resp->body_len, JSON_ALLOW_NUL, NULL)
              : NULL;
  return true;
}

static void review_done(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  check_t *c = ctx;
  json_t *root;
  if (!review_answer(c, resp, err, &root)) return;
  nl_kauth_t *a = c->a;
  const char *sub = c->attrs.subresources[c->next_attr];
  json_t *allowed = json_object_get(json_object_get(root, "status"), "allowed");
  if (!json_is_boolean(allowed)) {
    nl_warn("kubelet server: SubjectAccessReview for %s on nodes/%s: %s", c->user.name, sub,
            err ? nl_err_msg(err) : "no decision in the answer");
    json_decref(root);
    char *msg = nl_xasprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)",
                             c->user.name, c->attrs.verb, sub);
    finish(c, 500, msg);
    free(msg);
    return;
  }
  cached_t *e = nl_xcalloc(1, sizeof(*e));
  e->ok = json_is_true(allowed);
  e->expires = a->now(a->now_ctx) + (e->ok ? a->opts.allowed_ttl_ms : a->opts.denied_ttl_ms);
  json_decref(root);
  cache_put(a, &a->reviews, c->key, e);
  if (e->ok) {
    finish(c, 0, NULL);
    return;
  }
  c->next_attr++;
  authorize(c);
}

/* Tries the attribute sets in turn, from the cache or the apiserver. */
static void authorize(check_t *c) {
  nl_kauth_t *a = c->a;
  if (a->opts.mode == NL_KAUTHZ_ALWAYS_ALLOW) {
    finish(c, 0, NULL);
    return;
  }
  for (; c->next_attr < c->attrs.n; c->next_attr++) {
    free(c->key);
    c->key = review_key(c, c->attrs.subresources[c->next_attr]);
    cached_t *hit = cache_get(a, &a->reviews, c->key);
    if (!hit) break;
    if (hit->ok) {
      finish(c, 0, NULL);
      return;
    }
  }
  if (c->next_attr == c->attrs.n) {
    nl_vlog(2, "kubelet server: forbidden: user %s, verb %s on nodes/%s", c->user.name,
            c->attrs.verb, c->attrs.subresources[0]);
    char *msg = nl_kauth_forbidden_msg(c->user.name, &c->attrs);
    finish(c, 403, msg);
    free(msg);
    return;
  }
  post_review(c, "/apis/authorization.k8s.io/v1/subjectaccessreviews",
              nl_xasprintf("{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":"
                           "\"SubjectAccessReview\",\"spec\":%s}",
                           c->key),
              review_done);
}

static void authenticated(check_t *c, const nl_kauth_user_t *u) {
  user_copy(&c->user, u);
  user_add_group(&c->user, "system:authenticated");
  authorize(c);
}

static void token_done(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  check_t *c = ctx;
  json_t *root;
  if (!review_answer(c, resp, err, &root)) return;
  nl_kauth_t *a = c->a;
  json_t *status = json_object_get(root, "status");
  if (!json_is_object(root)) {
    /* Not an answer: not cached. */
    nl_warn("kubelet server: TokenReview: %s", err ? nl_err_msg(err) : "no TokenReview in the answer");
    json_decref(root);
    finish(c, 401, "Unauthorized");
    return;
  }
  /* The API server leaves "authenticated" out when it is false (Go's
   * omitempty): a TokenReview without it is a rejection, cached as one. */
  cached_t *e = nl_xcalloc(1, sizeof(*e));
  e->ok = json_is_true(json_object_get(status, "authenticated"));
  e->expires = a->now(a->now_ctx) + a->opts.authn_ttl_ms;
  if (e->ok) {
    json_t *u = json_object_get(status, "user");
    e->user.name = nl_json_text(json_object_get(u, "username"));
    e->user.uid = nl_json_text(json_object_get(u, "uid"));
    e->user.groups = nl_xcalloc(1, sizeof(char *));
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(u, "groups"), i, g) {
      if (!json_is_string(g)) continue;
      char *t = nl_json_text(g);
      user_add_group(&e->user, t);
      free(t);
    }
  } else {
    nl_vlog(4, "kubelet server: token not authenticated: %s",
            json_string_value(json_object_get(status, "error")) ?: "");
  }
  json_decref(root);
  cache_put(a, &a->tokens, c->key, e);
  if (!e->ok) {
    finish(c, 401, "Unauthorized");
    return;
  }
  authenticated(c, &e->user);
}

static void anonymous_or_401(check_t *c) {
  if (!c->a->opts.anonymous) {
    finish(c, 401, "Unauthorized");
    return;
  }
  static char *const groups[] = {"system:unauthenticated", NULL};
  nl_kauth_user_t u = {.name = "system:anonymous", .uid = "", .groups = (char **)groups};
  user_copy(&c->user, &u);
  authorize(c);
}

void nl_kauth_check(nl_kauth_t *a, int peer_rc, const char *peer_cn, char *const *peer_orgs,
                    const char *authorization, const char *method, const char *path,
                    nl_kauth_done_fn done, void *ctx) {
  check_t *c = nl_xcalloc(1, sizeof(*c));
  c->a = a;
  c->done = done;
  c->ctx = ctx;
  c->method = nl_xstrdup(method);
  c->path = nl_xstrdup(path);
  nl_kauth_attrs(method, path, &c->attrs);
  nl_list_insert_tail(&a->pending, &c->link);
  if (peer_rc < 0) {
    finish(c, 401, "Unauthorized");
    return;
  }
  if (peer_rc > 0) {
    nl_kauth_user_t u = {.name = (char *)peer_cn, .uid = "", .groups = (char **)peer_orgs};
    authenticated(c, &u);
    return;
  }
  const char *token = NULL;
  if (authorization && strncasecmp(authorization, "Bearer ", 7) == 0) {
    token = authorization + 7;
    while (*token == ' ') token++;
    if (!*token) token = NULL;
  }
  if (!token || !a->opts.webhook) {
    anonymous_or_401(c);
    return;
  }
  c->key = nl_xstrdup(token);
  cached_t *hit = cache_get(a, &a->tokens, token);
  if (hit) {
    if (hit->ok) authenticated(c, &hit->user);
    else finish(c, 401, "Unauthorized");
    return;
  }
  /* A token that is not UTF-8 goes as Go's json.Marshal sends it (U+FFFD for
   * each bad byte); the API server then finds no such token. */
  json_t *review = json_pack("{s:s, s:s, s:{s:o}}", "apiVersion", "authentication.k8s.io/v1",
                             "kind", "TokenReview", "spec", "token", nl_json_str(token));
  char *body = nl_json_xdumps(review, JSON_COMPACT);
  json_decref(review);
  post_review(c, "/apis/authentication.k8s.io/v1/tokenreviews", body, token_done);
}

int nl_kauth_init(nl_kauth_t *a, const nl_kauth_opts_t *opts, nl_kube_client_t *kube,
                  uint64_t (*now)(void *), void *now_ctx, nl_err_t **err) {
  memset(a, 0, sizeof(*a));
  if (!kube && opts->webhook)
    return nl_err_set(err, NL_EINVAL,
                      "authentication.webhook.enabled: no API server (--kubeconfig) to send "
                      "TokenReviews to");
  if (!kube && opts->mode == NL_KAUTHZ_WEBHOOK)
    return nl_err_set(err, NL_EINVAL,
                      "authorization.mode Webhook: no API server (--kubeconfig) to send "
                      "SubjectAccessReviews to");
  a->opts = *opts;
  a->kube = kube;
  a->now = now;
  a->now_ctx = now_ctx;
  if (getrandom(a->hmac_key, sizeof(a->hmac_key), 0) != (ssize_t)sizeof(a->hmac_key))
    return nl_err_set(err, EIO, "kubelet server: no random key for the token cache");
  nl_map_init(&a->tokens.map);
  nl_list_init(&a->tokens.order);
  nl_map_init(&a->reviews.map);
  nl_list_init(&a->reviews.order);
  nl_list_init(&a->pending);
  return 0;
}

void nl_kauth_stop(nl_kauth_t *a) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &a->pending) {
    check_t *c = nl_list_entry(pos, check_t, link);
    nl_kube_req_t *r = c->req;
    /* Detached: its late completion must not touch the list head. */
    nl_list_remove(&c->link);
    nl_list_init(&c->link);
    finish(c, 503, "the kubelet is stopping\n");
    if (r) nl_kube_req_cancel(r);
  }
}

void nl_kauth_free(nl_kauth_t *a) {
  cache_free(&a->tokens);
  cache_free(&a->reviews);
}
