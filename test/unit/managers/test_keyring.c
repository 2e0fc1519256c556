/* Registry credentials from pull secrets: the .dockercfg and
 * .dockerconfigjson formats, and which credentials an image gets (upstream
 * keyring_test.go's cases: globs, ports, path prefixes, Docker Hub). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "managers/keyring.h"

static void add_ok(nl_keyring_t *k, const char *json, bool config_json) {
  nl_err_t *err = NULL;
  assert_int_equal(nl_keyring_add(k, json, strlen(json), config_json, &err), 0);
  assert_null(err);
}

/* The users of the credentials image gets, joined by ",". */
static char *users(const nl_keyring_t *k, const char *image) {
  static char buf[256];
  const nl_keyring_cred_t **c;
  size_t n = nl_keyring_lookup(k, image, &c);
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (i) strcat(buf, ",");
    strcat(buf, c[i]->username);
  }
  free(c);
  return buf;
}

static void test_repo(void **state) {
  (void)state;
  static const char *cases[][2] = {
      {"busybox", "docker.io/library/busybox"},
      {"busybox:1.36", "docker.io/library/busybox"},
      {"user/app:v1", "docker.io/user/app"},
      {"docker.io/user/app", "docker.io/user/app"},
      {"index.docker.io/user/app", "docker.io/user/app"},
      {"127.0.0.1:15443/busybox:latest", "127.0.0.1:15443/busybox"},
      {"localhost/pause:3.9", "localhost/pause"},
      {"reg.example.com/team/app@sha256:abcd", "reg.example.com/team/app"},
      {"reg.example.com:5000/a/b:tag@sha256:ab", "reg.example.com:5000/a/b"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *r = nl_keyring_repo(cases[i][0]);
    assert_string_equal(r, cases[i][1]);
    free(r);
  }
  assert_null(nl_keyring_repo(""));
}

static void test_dockerconfigjson(void **state) {
  (void)state;
  nl_keyring_t k = {0};
  /* "auth" is base64("alice:s3cr:et") and wins over username/password. */
  add_ok(&k,
         "{\"auths\":{\"https://127.0.0.1:15443\":{\"username\":\"bob\",\"password\":\"x\","
         "\"auth\":\"YWxpY2U6czNjcjpldA==\"},\"reg.example.com\":{\"Username\":\"carol\","
         "\"PASSWORD\":\"pw\",\"email\":\"c@example.com\"}},\"HttpHeaders\":{\"a\":\"b\"}}",
         true);
  const nl_keyring_cred_t **c;
  assert_int_equal(nl_keyring_lookup(&k, "127.0.0.1:15443/busybox:latest", &c), 1);
  assert_string_equal(c[0]->username, "alice");
  assert_string_equal(c[0]->password, "s3cr:et"); /* split at the first colon */
  free(c);
  assert_int_equal(nl_keyring_lookup(&k, "reg.example.com/team/app", &c), 1);
  assert_string_equal(c[0]->username, "carol"); /* field names in any case */
  assert_string_equal(c[0]->password, "pw");
  free(c);
  /* Other hosts and ports get nothing. */
  assert_int_equal(nl_keyring_lookup(&k, "127.0.0.1/busybox", &c), 0);
  assert_null(c);
  assert_int_equal(nl_keyring_lookup(&k, "busybox", &c), 0);
  nl_keyring_free(&k);
  /* No auths at all is no credential and no error. */
  add_ok(&k, "{\"credsStore\":\"x\"}", true);
  assert_int_equal(k.n, 0);
}

static void test_dockercfg(void **state) {
  (void)state;
  nl_keyring_t k = {0};
  add_ok(&k, "{\"https://index.docker.io/v1/\":{\"auth\":\"aHViOnB3\"},"
             "\"registry.example.com/v2/\":{\"username\":\"reg\",\"password\":\"p\"}}",
         false);
  /* Docker Hub's entry serves every image on Docker Hub, and only those. */
  assert_string_equal(users(&k, "busybox"), "hub");
  assert_string_equal(users(&k, "user/app:1"), "hub");
  assert_string_equal(users(&k, "docker.io/user/app"), "hub");
  assert_string_equal(users(&k, "reg.example.com/app"), "");
  /* /v2/ names the host itself. */
  assert_string_equal(users(&k, "registry.example.com/any/thing"), "reg");
  nl_keyring_free(&k);
}

static void test_globs_ports_paths(void **state) {
  (void)state;
  nl_keyring_t k = {0};
  add_ok(&k,
         "{\"auths\":{"
         "\"*.kubernetes.io\":{\"username\":\"star\"},"
         "\"prefix.*.io\":{\"username\":\"mid\"},"
         "\"*-good.example.org\":{\"username\":\"dash\"},"
         "\"example.org:5000\":{\"username\":\"port\"},"
         "\"reg.example.com\":{\"username\":\"host\"},"
         "\"reg.example.com/coreos\":{\"username\":\"path\"}}}",
         true);
  assert_string_equal(users(&k, "prefix.kubernetes.io/app"), "mid,star");
  assert_string_equal(users(&k, "a.b.kubernetes.io/app"), ""); /* one part per glob part */
  assert_string_equal(users(&k, "kubernetes.io/app"), "");
  assert_string_equal(users(&k, "prefix-good.example.org/app"), "dash");
  assert_string_equal(users(&k, "bad.example.org/app"), "");
  assert_string_equal(users(&k, "example.org:5000/app"), "port");
  assert_string_equal(users(&k, "example.org/app"), ""); /* the port must match */
  assert_string_equal(users(&k, "example.org:5001/app"), "");
  /* The most specific key first; a path is a string prefix. */
  assert_string_equal(users(&k, "reg.example.com/coreos/etcd:v3"), "path,host");
  assert_string_equal(users(&k, "reg.example.com/coreosx"), "path,host");
  assert_string_equal(users(&k, "reg.example.com/other"), "host");
  nl_keyring_free(&k);
}

static void test_several_secrets_in_order(void **state) {
  (void)state;
  nl_keyring_t k = {0};
  add_ok(&k, "{\"auths\":{\"reg.io\":{\"username\":\"first\"}}}", true);
  add_ok(&k, "{\"reg.io\":{\"username\":\"second\"},\"other.io\":{\"username\":\"o\"}}", false);
  add_ok(&k, "{\"auths\":{\"https://reg.io\":{\"username\":\"third\"}}}", true);
  /* Every credential of the key, in the order of the secrets: tried in turn. */
  assert_string_equal(users(&k, "reg.io/app"), "first,second,third");
  nl_keyring_free(&k);
}

static void test_invalid_registry_skipped(void **state) {
  (void)state;
  nl_keyring_t k = {0};
  add_ok(&k, "{\"auths\":{\"reg.io:abc\":{\"username\":\"bad\"},\"bad host\":{},"
             "\"reg.io\":{\"username\":\"good\"}}}",
         true);
  assert_int_equal(k.n, 1);
  assert_string_equal(users(&k, "reg.io/app"), "good");
  nl_keyring_free(&k);
}

static void test_malformed(void **state) {
  (void)state;
  static const struct {
    const char *json;
    bool config_json;
    const char *msg;
  } cases[] = {
      {"{\"auths\":", true, "line 1"},
      {"[]", true, "must be an object"},
      {"{\"auths\":[]}", true, "auths: must be an object"},
      {"{\"auths\":{\"reg.io\":{\"username\":1}}}", true, "auths.reg.io: username: must be a string"},
      {"{\"reg.io\":\"x\"}", false, "reg.io: must be an object"},
      {"{\"reg.io\":{\"auth\":\"!!!\"}}", false, "reg.io: auth: illegal base64 data"},
      /* base64("nocolon") */
      {"{\"reg.io\":{\"auth\":\"bm9jb2xvbg==\"}}", false,
       "reg.io: auth: unable to parse auth field, must be formatted as base64(username:password)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nl_keyring_t k = {0};
    add_ok(&k, "{\"auths\":{\"kept.io\":{}}}", true);
    nl_err_t *err = NULL;
    assert_int_equal(nl_keyring_add(&k, cases[i].json, strlen(cases[i].json), cases[i].config_json,
                                     &err),
                     -1);
    assert_non_null(strstr(nl_err_msg(err), cases[i].msg));
    nl_err_free(&err);
    /* What was there stays, and nothing of the bad config is added. */
    assert_int_equal(k.n, 1);
    nl_keyring_free(&k);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_repo),
      cmocka_unit_test(test_dockerconfigjson),
      cmocka_unit_test(test_dockercfg),
      cmocka_unit_test(test_globs_ports_paths),
      cmocka_unit_test(test_several_secrets_in_order),
      cmocka_unit_test(test_invalid_registry_skipped),
      cmocka_unit_test(test_malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
