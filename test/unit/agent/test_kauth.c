#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../kube/fake_client.h"
#include "agent/kauth.h"

/* ---- request attributes (upstream's NodeRequestAttributesGetter) -------- */

static void attrs_is(const char *method, const char *path, const char *verb, const char *subs) {
  nl_kauth_attrs_t a;
  nl_kauth_attrs(method, path, &a);
  char got[64];
  snprintf(got, sizeof got, "%s%s%s", a.subresources[0], a.n > 1 ? " " : "",
           a.n > 1 ? a.subresources[1] : "");
  assert_string_equal(a.verb, verb);
  assert_string_equal(got, subs);
}

static void attributes(void **state) {
  attrs_is("GET", "/pods", "get", "pods proxy");
  attrs_is("GET", "/pods/", "get", "pods proxy");
  attrs_is("GET", "/runningpods/", "get", "pods proxy");
  attrs_is("GET", "/runningpods", "get", "pods proxy");
  attrs_is("GET", "/healthz", "get", "healthz proxy");
  attrs_is("GET", "/healthz/ping", "get", "healthz proxy");
  attrs_is("GET", "/configz", "get", "configz proxy");
  attrs_is("GET", "/stats/summary", "get", "stats");
  attrs_is("GET", "/stats", "get", "stats");
  attrs_is("GET", "/statsx", "get", "proxy"); /* a path, not a prefix */
  attrs_is("GET", "/metrics", "get", "metrics");
  attrs_is("GET", "/metrics/probes", "get", "metrics");
  attrs_is("GET", "/logs/syslog", "get", "log");
  attrs_is("GET", "/containerLogs/ns/p/c", "get", "proxy");
  attrs_is("POST", "/exec/ns/p/c", "create", "proxy");
  attrs_is("PUT", "/debug/flags/v", "update", "proxy");
  attrs_is("PATCH", "/x", "patch", "proxy");
  attrs_is("DELETE", "/x", "delete", "proxy");
  attrs_is("HEAD", "/healthz", "", "healthz proxy");
  nl_kauth_attrs_t a;
  nl_kauth_attrs("GET", "/pods", &a);
  char *msg = nl_kauth_forbidden_msg("system:anonymous", &a);
  assert_string_equal(
      msg, "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource(s)=[pods proxy])\n");
  free(msg);
  nl_kauth_attrs("GET", "/stats/summary", &a);
  msg = nl_kauth_forbidden_msg("u", &a);
  assert_string_equal(msg, "Forbidden (user=u, verb=get, resource=nodes, subresource(s)=[stats])\n");
  free(msg);
}

/* ---- checks against a fake apiserver and a fake clock -------------------- */

typedef struct world {
  nl_kauth_t a;
  uint64_t now;
  int calls, status;
  char user[128], groups[256], body[256];
} world_t;

static uint64_t fake_now(void *ctx) { return ((world_t *)ctx)->now; }

static void done(void *ctx, int status, const nl_kauth_user_t *u, const char *body) {
  world_t *w = ctx;
  w->calls++;
  w->status = status;
  snprintf(w->body, sizeof w->body, "%s", body ? body : "");
  w->user[0] = w->groups[0] = 0;
  if (!u) return;
  snprintf(w->user, sizeof w->user, "%s", u->name);
  for (char **g = u->groups; *g; g++)
    snprintf(w->groups + strlen(w->groups), sizeof w->groups - strlen(w->groups), "%s%s",
             w->groups[0] ? "," : "", *g);
}

static nl_kube_client_t *const FAKE_CLIENT = (nl_kube_client_t *)1;

static void setup(world_t *w, bool anonymous, bool webhook, nl_kauthz_mode_t mode) {
  memset(w, 0, sizeof *w);
  fake_reset();
  w->now = 1000;
  nl_kauth_opts_t o = {.node_name = "n1",
                       .anonymous = anonymous,
                       .webhook = webhook,
                       .authn_ttl_ms = 120000,
                       .mode = mode,
                       .allowed_ttl_ms = 300000,
                       .denied_ttl_ms = 30000};
  nl_err_t *err = NULL;
  assert_int_equal(nl_kauth_init(&w->a, &o, FAKE_CLIENT, fake_now, w, &err), 0);
}

static void teardown(world_t *w) {
  nl_kauth_stop(&w->a);
  fake_settle();
  nl_kauth_free(&w->a);
  fake_reset();
}

static void check(world_t *w, int peer_rc, const char *authorization, const char *method,
                  const char *path) {
  static char *const orgs[] = {"system:masters", NULL};
  nl_kauth_check(&w->a, peer_rc, peer_rc > 0 ? "apiserver" : NULL, peer_rc > 0 ? orgs : NULL,
                 authorization, method, path, done, w);
}

static void anonymous(void **state) {
  world_t w;
  setup(&w, false, false, NL_KAUTHZ_ALWAYS_ALLOW);
  check(&w, 0, NULL, "GET", "/pods");
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 401);
  assert_string_equal(w.body, "Unauthorized");
  teardown(&w);

  setup(&w, true, false, NL_KAUTHZ_ALWAYS_ALLOW);
  check(&w, 0, NULL, "GET", "/pods");
  assert_int_equal(w.status, 0);
  assert_string_equal(w.user, "system:anonymous");
  assert_string_equal(w.groups, "system:unauthenticated");
  /* A token without the webhook is no credential: anonymous. */
  check(&w, 0, "Bearer abc", "GET", "/pods");
  assert_int_equal(w.status, 0);
  assert_string_equal(w.user, "system:anonymous");
  /* A certificate that does not verify fails even with anonymous on. */
  check(&w, -1, NULL, "GET", "/pods");
  assert_int_equal(w.status, 401);
  assert_int_equal(fake_nreqs, 0);
  teardown(&w);
}

static void x509_user(void **state) {
  world_t w;
  setup(&w, false, true, NL_KAUTHZ_ALWAYS_ALLOW);
  check(&w, 1, NULL, "GET", "/containerLogs/a/b/c");
  assert_int_equal(w.status, 0);
  assert_string_equal(w.user, "apiserver");
  assert_string_equal(w.groups, "system:masters,system:authenticated");
  assert_int_equal(fake_nreqs, 0);
  teardown(&w);
}

static const char TR_OK[] =
    "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"alice\",\"uid\":\"u1\","
    "\"groups\":[\"dev\"]}}}";
static const char TR_NO[] = "{\"status\":{\"authenticated\":false,\"error\":\"invalid bearer token\"}}";
/* What the API server sends for a token it does not know (omitempty). */
static const char TR_UNKNOWN[] = "{\"kind\":\"TokenReview\",\"status\":{\"error\":\"invalid bearer token\",\"user\":{}}}";
static const char SAR_YES[] = "{\"status\":{\"allowed\":true}}";
static const char SAR_NO[] = "{\"status\":{\"allowed\":false}}";

/* TokenReview and SubjectAccessReview answers are cached for their TTLs. */
static void webhook_caches(void **state) {
  world_t w;
  setup(&w, false, true, NL_KAUTHZ_WEBHOOK);
  check(&w, 0, "Bearer tok1", "GET", "/stats/summary");
  assert_int_equal(w.calls, 0);
  assert_int_equal(fake_nreqs, 1);
  assert_string_equal(fake_last()->path, "/apis/authentication.k8s.io/v1/tokenreviews");
  assert_non_null(strstr(fake_last()->body, "\"kind\":\"TokenReview\""));
  assert_non_null(strstr(fake_last()->body, "\"token\":\"tok1\""));
  fake_respond(fake_last(), 201, TR_OK);
  assert_int_equal(fake_nreqs, 2);
  assert_string_equal(fake_last()->path, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
  const char *b = fake_last()->body;
  assert_non_null(strstr(b, "\"user\":\"alice\""));
  assert_non_null(strstr(b, "\"groups\":[\"dev\",\"system:authenticated\"]"));
  assert_non_null(strstr(b, "\"subresource\":\"stats\""));
  assert_non_null(strstr(b, "\"name\":\"n1\""));
  assert_non_null(strstr(b, "\"verb\":\"get\""));
  fake_respond(fake_last(), 201, SAR_YES);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  assert_string_equal(w.user, "alice");

  /* Again at once: both from the caches, answered synchronously. */
  check(&w, 0, "Bearer tok1", "GET", "/stats/summary");
  assert_int_equal(w.calls, 2);
  assert_int_equal(w.status, 0);
  assert_int_equal(fake_nreqs, 2);

  /* 3 minutes on: the token (2m) is asked again, the decision (5m) is not. */
  w.now += 180000;
  check(&w, 0, "Bearer tok1", "GET", "/stats/summary");
  assert_int_equal(fake_nreqs, 3);
  fake_respond(fake_last(), 201, TR_OK);
  assert_int_equal(fake_nreqs, 3);
  assert_int_equal(w.calls, 3);
  assert_int_equal(w.status, 0);

  /* 6 minutes on: both again. */
  w.now += 360000;
  check(&w, 0, "Bearer tok1", "GET", "/stats/summary");
  fake_respond(fake_last(), 201, TR_OK);
  assert_int_equal(fake_nreqs, 5);
  fake_respond(fake_last(), 201, SAR_YES);
  assert_int_equal(w.calls, 4);

  /* A rejected token: 401, and the rejection is cached too. */
  check(&w, 0, "Bearer bad", "GET", "/pods");
  fake_respond(fake_last(), 201, TR_NO);
  assert_int_equal(w.status, 401);
  assert_string_equal(w.body, "Unauthorized");
  size_t n = fake_nreqs;
  check(&w, 0, "Bearer bad", "GET", "/pods");
  assert_int_equal(w.status, 401);
  assert_int_equal(fake_nreqs, n);
  teardown(&w);
}

/* Fine-grained first: a denied nodes/pods falls back to nodes/proxy; denials
 * are cached for 30 s; all denied is 403 with upstream's text. */
static void webhook_denials(void **state) {
  world_t w;
  setup(&w, false, true, NL_KAUTHZ_WEBHOOK);
  check(&w, 1, NULL, "GET", "/pods");
  assert_non_null(strstr(fake_last()->body, "\"subresource\":\"pods\""));
  fake_respond(fake_last(), 201, SAR_NO);
  assert_non_null(strstr(fake_last()->body, "\"subresource\":\"proxy\""));
  fake_respond(fake_last(), 201, SAR_YES);
  assert_int_equal(w.status, 0);
  assert_int_equal(fake_nreqs, 2);

  check(&w, 1, NULL, "GET", "/healthz");
  fake_respond(fake_last(), 201, SAR_NO); /* healthz */
  assert_int_equal(w.status, 0);          /* proxy: allowed, cached */
  assert_int_equal(fake_nreqs, 3);

  check(&w, 1, NULL, "POST", "/exec/a/b/c");
  fake_respond(fake_last(), 201, SAR_NO);
  assert_int_equal(w.status, 403);
  assert_string_equal(w.body, "Forbidden (user=apiserver, verb=create, resource=nodes, "
                              "subresource(s)=[proxy])\n");
  size_t n = fake_nreqs;
  w.now += 29000;
  check(&w, 1, NULL, "POST", "/exec/a/b/c");
  assert_int_equal(w.status, 403);
  assert_int_equal(fake_nreqs, n);
  w.now += 2000;
  check(&w, 1, NULL, "POST", "/exec/a/b/c");
  assert_int_equal(fake_nreqs, n + 1);
  fake_respond(fake_last(), 201, SAR_YES);
  assert_int_equal(w.status, 0);

  /* No decision (an error from the apiserver): 500, nothing cached. */
  check(&w, 1, NULL, "DELETE", "/x");
  fake_respond(fake_last(), 500, "{}");
  assert_int_equal(w.status, 500);
  assert_string_equal(w.body, "Authorization error (user=apiserver, verb=delete, resource=nodes, "
                              "subresource=proxy)");
  n = fake_nreqs;
  check(&w, 1, NULL, "DELETE", "/x");
  assert_int_equal(fake_nreqs, n + 1);
  fake_respond(fake_last(), 201, SAR_YES);
  assert_int_equal(w.calls, 7);
  assert_int_equal(w.status, 0);
  teardown(&w);
}

/* Stopping answers checks in flight at once; the apiserver's late answer (or
 * the cancel) touches nothing freed. */
static void stop_in_flight(void **state) {
  world_t w;
  setup(&w, false, true, NL_KAUTHZ_WEBHOOK);
  check(&w, 0, "Bearer t", "GET", "/pods");
  check(&w, 1, NULL, "GET", "/pods");
  assert_int_equal(w.calls, 0);
  nl_kauth_stop(&w.a);
  assert_int_equal(w.calls, 2);
  assert_int_equal(w.status, 503);
  nl_kauth_free(&w.a);
  fake_settle();
  assert_int_equal(w.calls, 2);
  fake_reset();
}

/* A token that is not UTF-8 goes as Go's json.Marshal sends it: the review is
 * built (it was a NULL body into strlen) and its answer is a 401. */
static void token_not_utf8(void **state) {
  world_t w;
  setup(&w, false, true, NL_KAUTHZ_WEBHOOK);
  check(&w, 0, "Bearer \xff\xfe", "GET", "/pods");
  assert_int_equal(fake_nreqs, 1);
  assert_non_null(strstr(fake_last()->body, "\"token\":\"\xef\xbf\xbd\xef\xbf\xbd\""));
  fake_respond(fake_last(), 201, TR_NO);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 401);
  teardown(&w);
}

static void check_cert(world_t *w, const char *cn, char *const *orgs) {
  nl_kauth_check(&w->a, 1, cn, orgs, NULL, "GET", "/pods", done, w);
}

/* Certificate names reach the SubjectAccessReview whole and as valid JSON: a
 * CN with a NUL (C0 80, reactor/utf8.h) is "admin\u0000evil", never "admin";
 * bytes that are not UTF-8 (a name from elsewhere) are U+FFFD, not a NULL key. */
static void cert_names_in_review(void **state) {
  world_t w;
  setup(&w, false, true, NL_KAUTHZ_WEBHOOK);
  static char *const orgs[] = {"\xe9quipe", "dev", NULL};
  check_cert(&w, "admin\xc0\x80" "evil", orgs);
  assert_int_equal(fake_nreqs, 1);
  const char *b = fake_last()->body;
  assert_non_null(strstr(b, "\"user\":\"admin\\u0000evil\""));
  assert_non_null(strstr(b, "\"groups\":[\"\xef\xbf\xbdquipe\",\"dev\",\"system:authenticated\"]"));
  fake_respond(fake_last(), 201, SAR_NO);
  fake_respond(fake_last(), 201, SAR_NO);
  assert_int_equal(w.status, 403);
  /* The user cut at the NUL is another user with its own review. */
  check_cert(&w, "admin", orgs);
  assert_int_equal(fake_nreqs, 3);
  assert_non_null(strstr(fake_last()->body, "\"user\":\"admin\""));
  fake_respond(fake_last(), 201, SAR_YES);
  assert_int_equal(w.status, 0);
  check_cert(&w, "caf\xe9", NULL);
  assert_int_equal(fake_nreqs, 4);
  assert_non_null(strstr(fake_last()->body, "\"user\":\"caf\xef\xbf\xbd\""));
  fake_respond(fake_last(), 201, SAR_YES);
  assert_int_equal(w.status, 0);
  assert_string_equal(w.user, "caf\xe9");
  teardown(&w);
}

/* A TokenReview's user with U+0000 is kept whole too. */
static void review_user_nul(void **state) {
  world_t w;
  setup(&w, false, true, NL_KAUTHZ_ALWAYS_ALLOW);
  check(&w, 0, "Bearer t", "GET", "/pods");
  fake_respond(fake_last(), 201,
               "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"admin\\u0000x\"}}}");
  assert_int_equal(w.status, 0);
  assert_string_equal(w.user, "admin\xc0\x80x");
  teardown(&w);
}

/* The token cache holds an HMAC of each token, not the token, and at most
 * NL_KAUTH_CACHE_MAX entries: past that the oldest goes. */
static void token_cache_bounded(void **state) {
  world_t w;
  setup(&w, false, true, NL_KAUTHZ_ALWAYS_ALLOW);
  char tok[64];
  int n = NL_KAUTH_CACHE_MAX + 10;
  for (int i = 0; i < n; i++) {
    snprintf(tok, sizeof tok, "Bearer secret-token-%d", i);
    check(&w, 0, tok, "GET", "/pods");
    assert_int_equal(fake_nreqs, 1);
    fake_respond(fake_last(), 201, i % 2 ? TR_NO : TR_UNKNOWN);
    assert_int_equal(w.status, 401);
    fake_reset();
  }
  assert_int_equal(nl_map_size(&w.a.tokens.map), NL_KAUTH_CACHE_MAX);
  nl_map_iter_t it;
  const char *k;
  void *v;
  nl_map_iter_init(&it, &w.a.tokens.map);
  while (nl_map_iter_next(&it, &k, &v)) {
    assert_int_equal(strlen(k), 64);
    assert_null(strstr(k, "secret"));
  }
  /* The newest is cached, the oldest was evicted and is asked again. */
  check(&w, 0, tok, "GET", "/pods");
  assert_int_equal(fake_nreqs, 0);
  assert_int_equal(w.status, 401);
  check(&w, 0, "Bearer secret-token-0", "GET", "/pods");
  assert_int_equal(fake_nreqs, 1);
  fake_respond(fake_last(), 201, TR_NO);
  assert_int_equal(nl_map_size(&w.a.tokens.map), NL_KAUTH_CACHE_MAX);
  teardown(&w);
}

static void needs_a_client(void **state) {
  nl_kauth_t a;
  nl_kauth_opts_t o = {.node_name = "n1", .webhook = true};
  nl_err_t *err = NULL;
  assert_int_equal(nl_kauth_init(&a, &o, NULL, fake_now, NULL, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "authentication.webhook.enabled"));
  nl_err_free(&err);
  o.webhook = false;
  o.mode = NL_KAUTHZ_WEBHOOK;
  assert_int_equal(nl_kauth_init(&a, &o, NULL, fake_now, NULL, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "authorization.mode Webhook"));
  nl_err_free(&err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(attributes),     cmocka_unit_test(anonymous),
      cmocka_unit_test(x509_user),      cmocka_unit_test(webhook_caches),
      cmocka_unit_test(webhook_denials), cmocka_unit_test(stop_in_flight),
      cmocka_unit_test(needs_a_client), cmocka_unit_test(token_not_utf8),
      cmocka_unit_test(cert_names_in_review), cmocka_unit_test(review_user_nul),
      cmocka_unit_test(token_cache_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
