/* libFuzzer target over the kubelet server's authentication and authorization
 * (agent/kauth.c) against the API client's test double: a request's
 * Authorization header, method and path and a client certificate's names go
 * to TokenReview and SubjectAccessReview bodies, the API server's answers
 * (fuzzed too) to the caches. Every body sent must be JSON, every check must
 * be answered once.
 * Input: byte 0 the options (bit 0 anonymous, 1 webhook authentication, 2
 * authorization Webhook), byte 1 the clock's step in seconds; then
 * NUL-separated fields: method, path, Authorization ("" for none), the peer
 * ("" none, "-" a certificate that did not verify, else "+" and its CN), the
 * Organizations up to an empty field, then the API server's answers, each a
 * status digit ('2' 201, '4' 403, '5' 500, other: a transport error) and the
 * body. The request is checked three times, the clock stepping in between. */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../unit/kube/fake_client.h"
#include "agent/kauth.h"

typedef struct {
  uint64_t now;
  int answers;
} world_t;

static uint64_t now_fn(void *ctx) { return ((world_t *)ctx)->now; }

static void done(void *ctx, int status, const nl_kauth_user_t *u, const char *body) {
  world_t *w = ctx;
  w->answers++;
  assert(status == 0 ? u && u->name && u->groups : body != NULL);
}

/* The next NUL-terminated field of data[*off..size), or NULL at the end. */
static const char *field(const char *data, size_t size, size_t *off) {
  if (*off >= size) return NULL;
  const char *s = data + *off;
  const char *z = memchr(s, 0, size - *off);
  if (!z) return NULL;
  *off += (size_t)(z - s) + 1;
  return s;
}

static void sent_json(const fake_req_t *r) {
  json_error_t e;
  json_t *j = json_loads(r->body, JSON_ALLOW_NUL, &e);
  assert(j && json_is_object(j));
  json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  /* Copied, with a NUL after: each field is a C string. */
  char *buf = malloc(size + 1);
  memcpy(buf, data, size);
  buf[size] = 0;
  size_t off = 2;
  const char *method = field(buf, size + 1, &off), *path = field(buf, size + 1, &off),
             *authz = field(buf, size + 1, &off), *peer = field(buf, size + 1, &off);
  if (!method || !path || !authz || !peer) {
    free(buf);
    return 0;
  }
  char *orgs[8] = {0};
  int norgs = 0;
  const char *o;
  while ((o = field(buf, size + 1, &off)) && *o)
    if (norgs < 7) orgs[norgs++] = (char *)o;

  world_t w = {.now = 1000};
  nl_kauth_t a;
  nl_kauth_opts_t opts = {.node_name = "n1",
                          .anonymous = data[0] & 1,
                          .webhook = data[0] & 2,
                          .authn_ttl_ms = 120000,
                          .mode = data[0] & 4 ? NL_KAUTHZ_WEBHOOK : NL_KAUTHZ_ALWAYS_ALLOW,
                          .allowed_ttl_ms = 300000,
                          .denied_ttl_ms = 30000};
  nl_err_t *err = NULL;
  if (nl_kauth_init(&a, &opts, (nl_kube_client_t *)1, now_fn, &w, &err) < 0) abort();
  int peer_rc = !*peer ? 0 : *peer == '-' ? -1 : 1;
  int checks = 0;
  for (int round = 0; round < 3; round++) {
    nl_kauth_check(&a, peer_rc, peer_rc > 0 ? peer + 1 : NULL, peer_rc > 0 ? orgs : NULL,
                   *authz ? authz : NULL, method, path, done, &w);
    checks++;
    /* Answer what is asked while answers last. */
    size_t answered = 0;
    while (fake_nreqs > answered) {
      fake_req_t *r = fake_reqs[answered];
      sent_json(r);
      const char *ans = field(buf, size + 1, &off);
      if (!ans) break;
      answered++;
      if (*ans == '2' || *ans == '4' || *ans == '5')
        fake_respond(r, *ans == '2' ? 201 : *ans == '4' ? 403 : 500, ans + 1);
      else
        fake_fail(r, 111, "connection refused");
    }
    if (answered < fake_nreqs) break; /* out of answers: the rest stays in flight */
    fake_reset();
    w.now += (uint64_t)data[1] * 1000;
  }
  nl_kauth_stop(&a);
  fake_settle();
  assert(w.answers == checks);
  nl_kauth_free(&a);
  fake_reset();
  free(buf);
  return 0;
}
