/* The token manager against the fake API client: the TokenRequest it sends
 * (bound to the pod), the cache, the refresh at 80 % of the TTL, a failed
 * refresh that keeps the valid token, expiry, the token a volume holds after
 * a restart, stop with requests in flight. */
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fake_kube.h"
#include "managers/tokens.h"
#include "managers/volumes.h"
#include "reactor/fs.h"
#include "rt_test_util.h"

static uv_loop_t loop;
static uint64_t now;
static int dones;
static char root[64];

static uint64_t fake_now(void *ctx) {
  (void)ctx;
  return now;
}

static void on_done(void *ctx) {
  (void)ctx;
  dones++;
}

static const char *pod_yaml =
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: uid1}\n"
    "spec:\n  serviceAccountName: sa\n  volumes:\n  - name: kube-api-access-x\n    projected:\n"
    "      sources:\n      - serviceAccountToken: {expirationSeconds: 3600, path: token}\n"
    "  containers: [{name: c, image: b}]\n";

static void run_until_requests(size_t n) {
  for (int i = 0; i < 2000 && kf.n < n; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    usleep(1000); /* the thread pool reads the volume's token file */
  }
  assert_int_equal(kf.n, n);
}

static void run_until_done(int n) {
  for (int i = 0; i < 2000 && dones < n; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
  assert_int_equal(dones, n);
}

/* An answer whose token expires ttl seconds after the fake now. */
static void answer_token(nl_kube_req_t *r, const char *tok, int ttl) {
  time_t exp = (time_t)(now / 1000) + ttl;
  char ts[32], body[256];
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime(&exp));
  snprintf(body, sizeof body,
           "{\"spec\":{\"expirationSeconds\":%d},\"status\":{\"token\":\"%s\","
           "\"expirationTimestamp\":\"%s\"}}", ttl, tok, ts);
  answer(r, 201, body);
}

static const char *lookup(nl_tokens_source_t *s, const nl_pod_t *p) {
  const char *tok = NULL;
  nl_err_t *err = NULL;
  const nl_sa_token_projection_t *t = p->spec.volumes[0].projected->sources[0].service_account_token;
  if (s->lookup(s->ctx, p, t, &tok, &err) < 0) {
    nl_err_free(&err);
    return NULL;
  }
  return tok;
}

static void stop_done(void *ctx) { *(bool *)ctx = true; }

static void stop(nl_tokens_t *m) {
  bool stopped = false;
  nl_tokens_stop(m, stop_done, &stopped);
  for (int i = 0; i < 2000 && !stopped; i++) uv_run(&loop, UV_RUN_NOWAIT);
  assert_true(stopped);
}

/* A fresh loop, fake client and clock. */
static void start(void) {
  assert_int_equal(uv_loop_init(&loop), 0);
  kf_reset(&loop);
  now = 1700000000000ULL;
  dones = 0;
}

static void end(void) {
  kf_free();
  uv_close((uv_handle_t *)&kf.deliver, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_request_cache_refresh(void **state) {
  (void)state;
  start();
  nl_tokens_t m;
  nl_tokens_init(&m, &loop, (nl_kube_client_t *)&kf, root);
  m.now_ms = fake_now;
  nl_tokens_source_t s = nl_tokens_source(&m);
  nl_pod_t *p = pod_from_yaml(pod_yaml);

  s.ensure(s.ctx, p, on_done, NULL);
  assert_int_equal(dones, 0); /* never from inside ensure */
  run_until_requests(1);
  nl_kube_req_t *r = kf.reqs[0];
  assert_string_equal(r->method, "POST");
  assert_string_equal(r->path, "/api/v1/namespaces/ns/serviceaccounts/sa/token");
  json_t *b = json_loads(r->body, 0, NULL);
  assert_string_equal(json_string_value(json_object_get(b, "kind")), "TokenRequest");
  json_t *spec = json_object_get(b, "spec");
  assert_int_equal(json_integer_value(json_object_get(spec, "expirationSeconds")), 3600);
  assert_null(json_object_get(spec, "audiences")); /* none asked: the apiserver's */
  json_t *ref = json_object_get(spec, "boundObjectRef");
  assert_string_equal(json_string_value(json_object_get(ref, "kind")), "Pod");
  assert_string_equal(json_string_value(json_object_get(ref, "name")), "p");
  assert_string_equal(json_string_value(json_object_get(ref, "uid")), "uid1");
  json_decref(b);
  assert_int_equal(dones, 0); /* waits for the answer */
  assert_null(lookup(&s, p));
  answer_token(r, "tok1", 3600);
  run_until_done(1);
  assert_string_equal(lookup(&s, p), "tok1");

  /* cached: no request */
  s.ensure(s.ctx, p, on_done, NULL);
  run_until_done(2);
  assert_int_equal(kf.n, 1);

  /* at 81 % of the TTL: a new request; a failure keeps the valid token */
  now += 3600 * 810;
  s.ensure(s.ctx, p, on_done, NULL);
  run_until_requests(2);
  answer(kf.reqs[1], 500, "{}");
  run_until_done(3);
  assert_string_equal(lookup(&s, p), "tok1");
  s.ensure(s.ctx, p, on_done, NULL);
  run_until_requests(3);
  answer_token(kf.reqs[2], "tok2", 3600);
  run_until_done(4);
  assert_string_equal(lookup(&s, p), "tok2");

  /* expired and not refreshed: no token */
  now += 3601 * 1000;
  assert_null(lookup(&s, p));

  /* forgotten with a request in flight; stopped */
  s.ensure(s.ctx, p, on_done, NULL);
  run_until_requests(4);
  nl_tokens_forget_pod(&m, "uid1");
  run_until_done(5);
  assert_null(lookup(&s, p));
  stop(&m);
  nl_pod_free(p);
  end();
}

/* A JWT whose claims are json (base64url, unsigned: the manager reads claims only). */
static void write_jwt(const char *claims) {
  char *dir = nl_xasprintf("%s/pods/uid1/volumes/kubernetes.io~projected/kube-api-access-x", root);
  assert_int_equal(nl_mkdir_p(dir, 0755), 0);
  static const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  char enc[512] = "";
  size_t n = strlen(claims), k = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)(unsigned char)claims[i] << 16;
    if (i + 1 < n) v |= (uint32_t)(unsigned char)claims[i + 1] << 8;
    if (i + 2 < n) v |= (unsigned char)claims[i + 2];
    enc[k++] = tab[(v >> 18) & 63];
    enc[k++] = tab[(v >> 12) & 63];
    if (i + 1 < n) enc[k++] = tab[(v >> 6) & 63];
    if (i + 2 < n) enc[k++] = tab[v & 63];
  }
  enc[k] = 0;
  char *path = nl_xasprintf("%s/token", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "eyJhbGciOiJSUzI1NiJ9.%s.sig", enc);
  fclose(f);
  free(path);
  free(dir);
}

static void test_restart_takes_up_the_volume_token(void **state) {
  (void)state;
  start();
  nl_pod_t *p = pod_from_yaml(pod_yaml);
  const char *claims[] = {
      /* this pod's, issued 10 minutes ago: taken up */
      "{\"iat\":1699999400,\"kubernetes.io\":{\"pod\":{\"uid\":\"uid1\"}}}",
      /* another pod's: a request */
      "{\"iat\":1699999400,\"kubernetes.io\":{\"pod\":{\"uid\":\"other\"}}}",
      /* this pod's, past 80 % of its hour: a request */
      "{\"iat\":1699997000,\"kubernetes.io\":{\"pod\":{\"uid\":\"uid1\"}}}",
  };
  for (size_t i = 0; i < 3; i++) {
    write_jwt(claims[i]);
    nl_tokens_t m;
    nl_tokens_init(&m, &loop, (nl_kube_client_t *)&kf, root);
    m.now_ms = fake_now;
    nl_tokens_source_t s = nl_tokens_source(&m);
    size_t before = kf.n;
    int d = dones;
    s.ensure(s.ctx, p, on_done, NULL);
    if (i == 0) {
      run_until_done(d + 1);
      assert_int_equal(kf.n, before);
      const char *tok = lookup(&s, p);
      assert_non_null(tok);
      assert_true(strncmp(tok, "eyJhbGciOiJSUzI1NiJ9.", 21) == 0);
    } else {
      run_until_requests(before + 1);
      answer_token(kf.reqs[before], "fresh", 3600);
      run_until_done(d + 1);
      assert_string_equal(lookup(&s, p), "fresh");
    }
    stop(&m);
  }
  nl_pod_free(p);
  end();
}

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/nanolet-tokens-test-XXXXXX");
  assert_non_null(mkdtemp(root));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char *cmd = nl_xasprintf("rm -rf '%s'", root);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_request_cache_refresh, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restart_takes_up_the_volume_token, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
