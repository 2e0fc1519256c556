/* The image credential provider plugins: the configuration's validation (the
 * cases of upstream's config_test.go), the response's, and runs of real
 * executables (shell scripts) on a loop: the cache by key type and duration,
 * one run for concurrent lookups, the time limit, a garbage answer, and the
 * close with a run in flight. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "managers/credprov.h"
#include "reactor/xalloc.h"

#define CONFIG_HEAD "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"

static int add(nl_credprov_config_t *c, const char *text, char **msg) {
  nl_err_t *err = NULL;
  int rc = nl_credprov_config_add(c, "f.yaml", text, strlen(text), &err);
  if (msg) *msg = err ? nl_xstrdup(nl_err_msg(err)) : NULL;
  nl_err_free(&err);
  return rc;
}

static void config_refused(const char *provider, const char *want) {
  char *text = nl_xasprintf(CONFIG_HEAD "%s", provider), *msg = NULL;
  nl_credprov_config_t c = {0};
  assert_int_equal(add(&c, text, &msg), -1);
  if (!strstr(msg, want)) fail_msg("%s: got \"%s\", want \"%s\"", provider, msg, want);
  assert_int_equal(c.n, 0);
  free(msg);
  free(text);
  nl_credprov_config_free(&c);
}

static void test_config(void **state) {
  (void)state;
  nl_credprov_config_t c = {0};
  assert_int_equal(add(&c, CONFIG_HEAD
                       "- name: ecr\n"
                       "  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
                       "  matchImages: [\"*.dkr.ecr.*.amazonaws.com\", \"reg.example.com:5000/team\"]\n"
                       "  defaultCacheDuration: 12h\n"
                       "  args: [get-credentials]\n"
                       "  env: [{name: AWS_PROFILE, value: temp}]\n",
                       NULL),
                   0);
  assert_int_equal(c.n, 1);
  assert_string_equal(c.providers[0].name, "ecr");
  assert_int_equal(c.providers[0].n_match, 2);
  assert_true(c.providers[0].default_cache_ns == 12LL * 3600 * 1000000000);
  assert_string_equal(c.providers[0].args[0], "get-credentials");
  assert_string_equal(c.providers[0].env[0], "AWS_PROFILE=temp");
  /* JSON too; a second file's name must differ from the first's */
  const char *json = "{\"apiVersion\":\"kubelet.config.k8s.io/v1beta1\",\"kind\":\"CredentialProviderConfig\","
                     "\"providers\":[{\"name\":\"ecr\",\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\","
                     "\"matchImages\":[\"x.io\"],\"defaultCacheDuration\":\"1m\"}]}";
  char *msg = NULL;
  assert_int_equal(add(&c, json, &msg), -1);
  assert_non_null(strstr(msg, "duplicate provider name \"ecr\""));
  free(msg);
  assert_int_equal(c.n, 1);
  nl_credprov_config_free(&c);
}

static void test_config_refused(void **state) {
  (void)state;
  const char *ok_rest = "  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [a.io]\n  defaultCacheDuration: 1m\n";
  char *p;
  config_refused(p = nl_xasprintf("- name: a/b\n%s", ok_rest), "providers[0].name: Invalid value: \"a/b\": provider name cannot contain '/'");
  free(p);
  config_refused(p = nl_xasprintf("- name: '..'\n%s", ok_rest), "provider name cannot be '..'");
  free(p);
  config_refused(p = nl_xasprintf("- name: a\n%s- name: a\n%s", ok_rest, ok_rest), "duplicate provider name \"a\"");
  free(p);
  config_refused("- {name: a, apiVersion: credentialprovider.kubelet.k8s.io/v1, defaultCacheDuration: 1m}\n",
                 "providers[0].matchImages: Required value");
  config_refused("- {name: a, apiVersion: credentialprovider.kubelet.k8s.io/v1, matchImages: [a.io]}\n",
                 "providers[0].defaultCacheDuration: Required value");
  config_refused("- {name: a, apiVersion: credentialprovider.kubelet.k8s.io/v1, matchImages: [a.io], defaultCacheDuration: -1m}\n",
                 "must be greater than or equal to 0");
  config_refused("- {name: a, apiVersion: credentialprovider.kubelet.k8s.io/v1, matchImages: [a.io], defaultCacheDuration: {m: 1}}\n",
                 "providers[0].defaultCacheDuration: must be a duration string");
  config_refused("- {name: a, apiVersion: v9, matchImages: [a.io], defaultCacheDuration: 1m}\n",
                 "providers[0].apiVersion: Unsupported value: \"v9\"");
  config_refused("- {name: a, matchImages: [a.io], defaultCacheDuration: 1m}\n", "providers[0].apiVersion: Required value");
  config_refused("- {name: a, apiVersion: credentialprovider.kubelet.k8s.io/v1, matchImages: ['https://a.io'], defaultCacheDuration: 1m}\n",
                 "match image is invalid");
  config_refused("- {name: a, apiVersion: credentialprovider.kubelet.k8s.io/v1, matchImages: ['a.io:port'], defaultCacheDuration: 1m}\n",
                 "match image is invalid");
  config_refused("- {name: a, apiVersion: credentialprovider.kubelet.k8s.io/v1, matchImages: [a.io], defaultCacheDuration: 1m,"
                 " tokenAttributes: {serviceAccountTokenAudience: x}}\n",
                 "providers[0].tokenAttributes: not supported");
  nl_credprov_config_t c = {0};
  char *msg = NULL;
  assert_int_equal(add(&c, "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", &msg), -1);
  assert_non_null(strstr(msg, "kind: must be CredentialProviderConfig"));
  free(msg);
}

static void test_response(void **state) {
  (void)state;
  const char *v1 = NL_CREDPROV_API_V1;
  nl_credprov_response_t r;
  nl_err_t *err = NULL;
  const char *ok = "{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\",\"kind\":\"CredentialProviderResponse\","
                   "\"cacheKeyType\":\"Registry\",\"cacheDuration\":\"5m\",\"auth\":{\"*.io\":{\"username\":\"u\",\"password\":\"p\"}}}";
  assert_int_equal(nl_credprov_response_parse(&r, v1, ok, strlen(ok), &err), 0);
  assert_int_equal(r.key_type, NL_CREDPROV_KEY_REGISTRY);
  assert_true(r.has_duration && r.duration_ns == 300LL * 1000000000);
  assert_int_equal(r.n_auth, 1);
  assert_string_equal(r.auth[0].match, "*.io");
  assert_string_equal(r.auth[0].password, "p");
  nl_credprov_response_free(&r);
  static const char *const bad[][2] = {
      {"{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1beta1\",\"kind\":\"CredentialProviderResponse\",\"cacheKeyType\":\"Image\"}",
       "did not match expected apiVersion"},
      {"{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\",\"kind\":\"Other\",\"cacheKeyType\":\"Image\"}", "unexpected Kind"},
      {"{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\",\"kind\":\"CredentialProviderResponse\"}", "valid cacheKeyType"},
      {"{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\",\"kind\":\"CredentialProviderResponse\",\"cacheKeyType\":\"Image\","
       "\"auth\":{\"a.io\":{\"username\":1,\"password\":\"secret\"}}}",
       "error decoding"},
      {"{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\",\"kind\":\"CredentialProviderResponse\",\"cacheKeyType\":\"Image\","
       "\"cacheDuration\":\"soon\"}",
       "cacheDuration"},
      {"secret-password", "error decoding"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(nl_credprov_response_parse(&r, v1, bad[i][0], strlen(bad[i][0]), &err), -1);
    if (!strstr(nl_err_msg(err), bad[i][1])) fail_msg("case %zu: %s", i, nl_err_msg(err));
    assert_null(strstr(nl_err_msg(err), "secret")); /* never the answer's text */
    nl_err_free(&err);
  }
  char *req = nl_credprov_request_json(v1, "reg.io/app");
  assert_string_equal(req, "{\"kind\":\"CredentialProviderRequest\",\"apiVersion\":"
                           "\"credentialprovider.kubelet.k8s.io/v1\",\"image\":\"reg.io/app\"}");
  free(req);
}

/* ---- runs of real plugins ------------------------------------------------------ */

typedef struct {
  uv_loop_t loop;
  char dir[64];
  nl_credprov_t cp;
  int answers;
  char users[4][64];
  bool closed;
} fx_t;

static void plugin(fx_t *f, const char *name, const char *body) {
  char *path = nl_xasprintf("%s/%s", f->dir, name);
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  fprintf(fp, "#!/bin/sh\n%s\n", body);
  fclose(fp);
  chmod(path, 0755);
  free(path);
}

#define ANSWER(keytype, duration) \
  "cat >/dev/null; echo run >>\"$0.runs\"; printf '{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\"," \
  "\"kind\":\"CredentialProviderResponse\",\"cacheKeyType\":\"" keytype "\",\"cacheDuration\":\"" duration "\"," \
  "\"auth\":{\"reg.io\":{\"username\":\"%s\",\"password\":\"p\"}}}' \"$USER_NAME\""

static void setup_cp(fx_t *f, const char *name, const char *body, const char *match) {
  memset(f, 0, sizeof *f);
  uv_loop_init(&f->loop);
  strcpy(f->dir, "/tmp/credprov-test.XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  plugin(f, name, body);
  char *text = nl_xasprintf(CONFIG_HEAD "- {name: %s, apiVersion: credentialprovider.kubelet.k8s.io/v1,"
                            " matchImages: ['%s'], defaultCacheDuration: 1m, env: [{name: USER_NAME, value: from-%s}]}\n",
                            name, match, name);
  nl_credprov_config_t c = {0};
  assert_int_equal(add(&c, text, NULL), 0);
  free(text);
  nl_err_t *err = NULL;
  assert_int_equal(nl_credprov_init(&f->cp, &f->loop, &c, f->dir, &err), 0);
}

static void answered(const nl_keyring_t *k, void *ctx) {
  fx_t *f = ctx;
  const nl_keyring_cred_t **c = NULL;
  size_t n = k ? nl_keyring_lookup(k, "reg.io/app:1", &c) : 0;
  snprintf(f->users[f->answers++ % 4], 64, "%s", n ? c[0]->username : "-");
  free(c);
}

static void closed(void *ctx) { ((fx_t *)ctx)->closed = true; }

static void teardown_cp(fx_t *f) {
  nl_credprov_close(&f->cp, closed, f);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_true(f->closed);
  nl_credprov_free(&f->cp);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  char *cmd = nl_xasprintf("rm -rf %s", f->dir);
  assert_int_equal(system(cmd), 0);
  free(cmd);
}

static void test_run_and_cache(void **state) {
  (void)state;
  fx_t f;
  setup_cp(&f, "p", ANSWER("Registry", "10m"), "reg.io");
  assert_true(nl_credprov_wants(&f.cp, "reg.io/app:1"));
  assert_false(nl_credprov_wants(&f.cp, "other.io/app:1"));
  nl_credprov_lookup(&f.cp, "reg.io/app:1", answered, &f);
  nl_credprov_lookup(&f.cp, "reg.io/app:1", answered, &f); /* joins the run */
  assert_int_equal(f.answers, 0);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(f.answers, 2);
  assert_string_equal(f.users[0], "from-p");
  assert_string_equal(f.users[1], "from-p");
  assert_int_equal(f.cp.runs_started, 1);
  /* cached for the registry: another image of it runs nothing, answered at once */
  nl_credprov_lookup(&f.cp, "reg.io/other", answered, &f);
  assert_int_equal(f.answers, 3);
  assert_int_equal(f.cp.runs_started, 1);
  teardown_cp(&f);
}

static uint64_t fake_now;
static uint64_t now_fn(void *ctx) { (void)ctx; return fake_now; }

static void test_cache_expiry_and_zero(void **state) {
  (void)state;
  fx_t f;
  setup_cp(&f, "p", ANSWER("Image", "10s"), "reg.io");
  f.cp.now_ms = now_fn;
  fake_now = 1000;
  nl_credprov_lookup(&f.cp, "reg.io/app", answered, &f);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  nl_credprov_lookup(&f.cp, "reg.io/app", answered, &f); /* cached */
  assert_int_equal(f.cp.runs_started, 1);
  nl_credprov_lookup(&f.cp, "reg.io/b", answered, &f); /* Image-keyed: another image runs */
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(f.cp.runs_started, 2);
  fake_now += 10001; /* expired */
  nl_credprov_lookup(&f.cp, "reg.io/app", answered, &f);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(f.cp.runs_started, 3);
  assert_int_equal(f.answers, 4);
  teardown_cp(&f);
  /* cacheDuration 0: never kept */
  setup_cp(&f, "p", ANSWER("Global", "0s"), "reg.io");
  nl_credprov_lookup(&f.cp, "reg.io/app", answered, &f);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  nl_credprov_lookup(&f.cp, "reg.io/app", answered, &f);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(f.cp.runs_started, 2);
  teardown_cp(&f);
}

static void test_failures(void **state) {
  (void)state;
  fx_t f;
  /* a plugin that never answers: killed at the limit, no credentials */
  setup_cp(&f, "slow", "exec sleep 30", "reg.io");
  f.cp.timeout_ms = 200;
  uint64_t t0 = uv_now(&f.loop);
  nl_credprov_lookup(&f.cp, "reg.io/app", answered, &f);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  uv_update_time(&f.loop);
  assert_int_equal(f.answers, 1);
  assert_string_equal(f.users[0], "-");
  assert_true(uv_now(&f.loop) - t0 < 5000);
  teardown_cp(&f);
  /* garbage, a failing exit, and an answer larger than the limit */
  const char *bodies[] = {"echo not-json", "echo '{}' ; exit 2", "head -c 2000000 /dev/zero | tr '\\\\0' a"};
  for (size_t i = 0; i < 3; i++) {
    setup_cp(&f, "bad", bodies[i], "reg.io");
    nl_credprov_lookup(&f.cp, "reg.io/app", answered, &f);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    assert_int_equal(f.answers, 1);
    assert_string_equal(f.users[0], "-");
    teardown_cp(&f);
  }
  /* the executable gone after start: the spawn fails, no credentials */
  setup_cp(&f, "gone", "exit 0", "reg.io");
  char *path = nl_xasprintf("%s/gone", f.dir);
  unlink(path);
  free(path);
  nl_credprov_lookup(&f.cp, "reg.io/app", answered, &f);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(f.answers, 1);
  assert_string_equal(f.users[0], "-");
  teardown_cp(&f);
  /* closed while a plugin runs: answered without credentials, then closed */
  setup_cp(&f, "slow", "exec sleep 30", "reg.io");
  nl_credprov_lookup(&f.cp, "reg.io/app", answered, &f);
  nl_credprov_close(&f.cp, closed, &f);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_true(f.closed);
  assert_int_equal(f.answers, 1);
  assert_string_equal(f.users[0], "-");
  nl_credprov_free(&f.cp);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  char *cmd = nl_xasprintf("rm -rf %s", f.dir);
  assert_int_equal(system(cmd), 0);
  free(cmd);
}

static void test_missing_executable(void **state) {
  (void)state;
  nl_credprov_config_t c = {0};
  assert_int_equal(add(&c, CONFIG_HEAD "- {name: nowhere, apiVersion: credentialprovider.kubelet.k8s.io/v1,"
                                       " matchImages: [a.io], defaultCacheDuration: 1m}\n",
                       NULL),
                   0);
  nl_credprov_t cp;
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_err_t *err = NULL;
  assert_int_equal(nl_credprov_init(&cp, &loop, &c, "/nonexistent", &err), -1);
  assert_string_equal(nl_err_msg(err), "plugin binary executable /nonexistent/nowhere did not exist");
  nl_err_free(&err);
  nl_credprov_free(&cp);
  uv_loop_close(&loop);
}

int main(void) {
  /* as the agent (main.c): a plugin that exits before reading its request
   * makes the write fail with EPIPE, not kill the writer */
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config),          cmocka_unit_test(test_config_refused),
      cmocka_unit_test(test_response),        cmocka_unit_test(test_run_and_cache),
      cmocka_unit_test(test_cache_expiry_and_zero), cmocka_unit_test(test_failures),
      cmocka_unit_test(test_missing_executable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
