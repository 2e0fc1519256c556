#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kube/kubeconfig.h"

#define F(name) FIXTURES "/" name

static void kubeadm_embedded_data(void **state) {
  nl_kubeconfig_t kc;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubeconfig_load(&kc, F("kubeadm.conf"), &err), 0);
  assert_null(err);
  assert_string_equal(kc.path, F("kubeadm.conf"));
  assert_string_equal(kc.context, "system:node:edge-1@kubernetes");
  assert_string_equal(kc.server, "https://192.168.1.10:6443");
  assert_non_null(kc.ca_pem);
  assert_non_null(strstr(kc.ca_pem, "-----BEGIN CERTIFICATE-----"));
  assert_non_null(strstr(kc.cert_pem, "-----BEGIN CERTIFICATE-----"));
  assert_non_null(strstr(kc.key_pem, "PRIVATE KEY-----"));
  assert_null(kc.ca_file);
  assert_null(kc.cert_file);
  assert_null(kc.key_file);
  assert_null(kc.token);
  assert_false(kc.insecure);
  assert_null(kc.tls_server_name);
  nl_kubeconfig_free(&kc);
  assert_null(kc.server);
}

static void files_resolved_against_the_directory(void **state) {
  nl_kubeconfig_t kc;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubeconfig_load(&kc, F("files.conf"), &err), 0);
  assert_string_equal(kc.context, "edge");
  assert_string_equal(kc.server, "https://api.edge.example:6443"); /* trailing '/' dropped */
  assert_string_equal(kc.tls_server_name, "kubernetes.default.svc");
  assert_string_equal(kc.ca_file, F("pki/ca.crt"));
  assert_string_equal(kc.cert_file, F("pki/client.crt"));
  assert_string_equal(kc.key_file, F("pki/client.key"));
  assert_null(kc.ca_pem);
  assert_null(kc.cert_pem);
  nl_kubeconfig_free(&kc);
}

static void json_with_token_file_and_insecure(void **state) {
  nl_kubeconfig_t kc;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubeconfig_load(&kc, F("token.json"), &err), 0);
  assert_true(kc.insecure);
  assert_string_equal(kc.server, "https://127.0.0.1:6443");
  assert_string_equal(kc.token_file, F("pki/token"));
  assert_string_equal(kc.token, "abc.def-token"); /* the newline is trimmed */
  nl_kubeconfig_free(&kc);
}

static void parse_keeps_relative_paths_and_reads_nothing(void **state) {
  const char *y = "current-context: a\n"
                  "clusters: [{name: c, cluster: {server: 'https://h:1', certificate-authority: ca.crt}}]\n"
                  "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                  "users: [{name: u, user: {token: tok, tokenFile: /nonexistent/t}}]\n";
  nl_kubeconfig_t kc;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubeconfig_parse(&kc, y, strlen(y), "mem", NULL, &err), 0);
  assert_string_equal(kc.ca_file, "ca.crt");
  assert_string_equal(kc.token, "tok"); /* token wins over tokenFile, which is kept */
  assert_string_equal(kc.token_file, "/nonexistent/t");
  nl_kubeconfig_free(&kc);
  assert_int_equal(nl_kubeconfig_parse(&kc, y, strlen(y), "mem", "/etc/k/", &err), 0);
  assert_string_equal(kc.ca_file, "/etc/k/ca.crt");
  nl_kubeconfig_free(&kc);
}

typedef struct bad {
  const char *file;
  const char *msg; /* after "kubeconfig <path>: " */
  int code;
} bad_t;

static void errors_name_the_file_and_the_field(void **state) {
  static const bad_t cases[] = {
      {"http-server.conf",
       "clusters[0].cluster.server: must be an https:// URL, got \"http://10.0.0.1:8080\"",
       NL_EINVAL},
      {"no-current-context.conf", "current-context: not set", NL_EINVAL},
      {"missing-context.conf", "current-context: context \"b\" not found", NL_EINVAL},
      {"missing-cluster.conf", "contexts[0].context.cluster: cluster \"x\" not found", NL_EINVAL},
      {"missing-user.conf", "contexts[1].context.user: user \"ghost\" not found", NL_EINVAL},
      {"exec.conf", "users[0].user.exec: exec credential plugins are not supported", NL_EINVAL},
      {"auth-provider.conf", "users[1].user.auth-provider: auth-provider plugins are not supported",
       NL_EINVAL},
      {"bad-yaml.conf", "line 6: YAML: did not find expected", NL_EINVAL},
      {"bad-base64.conf", "clusters[0].cluster.certificate-authority-data: not valid base64",
       NL_EINVAL},
      {"duplicate-name.conf", "clusters[1].name: duplicate name \"c\" (also clusters[0])",
       NL_EINVAL},
      {"cert-without-key.conf", "users[0].user: client-certificate is set without client-key",
       NL_EINVAL},
      {"missing-ca-file.conf",
       "certificate-authority " FIXTURES "/invalid/no-such-ca.crt: No such file or directory",
       ENOENT},
      {"insecure-with-ca.conf",
       "clusters[0].cluster.insecure-skip-tls-verify: a certificate authority cannot be used "
       "together with insecure-skip-tls-verify",
       NL_EINVAL},
      {"wrong-type.conf", "users[0].user.token: must be a string, got a number", NL_EINVAL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[512], want[1024];
    snprintf(path, sizeof path, "%s/invalid/%s", FIXTURES, cases[i].file);
    snprintf(want, sizeof want, "kubeconfig %s: %s", path, cases[i].msg);
    nl_kubeconfig_t kc;
    nl_err_t *err = NULL;
    assert_int_equal(nl_kubeconfig_load(&kc, path, &err), -1);
    assert_non_null(err);
    if (strncmp(err->msg, want, strlen(want)) != 0)
      fail_msg("%s:\n got  %s\n want %s", cases[i].file, err->msg, want);
    assert_int_equal(err->code, cases[i].code);
    assert_null(kc.server); /* nothing left to free */
    nl_err_free(&err);
  }
}

static void missing_and_unreadable_files(void **state) {
  nl_kubeconfig_t kc;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubeconfig_load(&kc, "/nonexistent/kubelet.conf", &err), -1);
  assert_string_equal(err->msg, "kubeconfig /nonexistent/kubelet.conf: No such file or directory");
  assert_int_equal(err->code, ENOENT);
  nl_err_free(&err);
  assert_int_equal(nl_kubeconfig_load(&kc, FIXTURES, &err), -1);
  assert_string_equal(err->msg, "kubeconfig " FIXTURES ": not a regular file");
  assert_int_equal(err->code, EISDIR);
  nl_err_free(&err);
}

static void parse_error(const char *y, const char *want) {
  nl_kubeconfig_t kc;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubeconfig_parse(&kc, y, strlen(y), "k", "/d", &err), -1);
  if (strcmp(err->msg, want) != 0) fail_msg("got  %s\nwant %s", err->msg, want);
  nl_err_free(&err);
}

/* A cluster and a user behind a valid current context. */
static void refused(const char *cluster, const char *user, const char *want) {
  char y[1024];
  snprintf(y, sizeof y,
           "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
           "clusters: [{name: c, cluster: %s}]\nusers: [{name: u, user: %s}]\n",
           cluster, user);
  parse_error(y, want);
}

static void more_refusals(void **state) {
  parse_error("", "kubeconfig k: the file holds no configuration");
  parse_error("[1]", "kubeconfig k: must be an object, got a list");
  parse_error("current-context: a\ncontexts: {a: 1}\n", "kubeconfig k: contexts: must be a list, got an object");
  parse_error("current-context: a\ncontexts: [{name: a}]\n", "kubeconfig k: contexts[0].context: not set");
  parse_error("current-context: a\ncontexts: [{context: {}}]\n", "kubeconfig k: contexts[0].name: not set");
  parse_error("current-context: a\ncontexts: [{name: a, context: {user: u}}]\n",
              "kubeconfig k: contexts[0].context.cluster: not set");
  const char *h = "{server: 'https://h'}";
  refused("{}", "{}", "kubeconfig k: clusters[0].cluster.server: not set");
  refused("{server: 'https://'}", "{}", "kubeconfig k: clusters[0].cluster.server: no host in \"https://\"");
  refused("{server: 'https://h', proxy-url: 'http://p:3128'}", "{}",
          "kubeconfig k: clusters[0].cluster.proxy-url: proxies are not supported");
  refused("{server: 'https://h', insecure-skip-tls-verify: 'yes'}", "{}",
          "kubeconfig k: clusters[0].cluster.insecure-skip-tls-verify: must be a boolean, got a string");
  refused("{server: 'https://h', certificate-authority-data: AAEC}", "{}",
          "kubeconfig k: clusters[0].cluster.certificate-authority-data: must hold PEM data");
  refused(h, "{username: admin, password: x}",
          "kubeconfig k: users[0].user.username: basic authentication is not supported");
  refused(h, "{as: root}", "kubeconfig k: users[0].user.as: impersonation is not supported");
  refused(h, "{client-key: k.pem, client-certificate: c.pem, client-certificate-data: eA==}",
          "kubeconfig k: users[0].user: client-certificate and client-certificate-data are both set; use one");
  refused(h, "{client-key-data: eA==}",
          "kubeconfig k: users[0].user: client-key is set without client-certificate");
}

static void anonymous_user_and_path_prefix(void **state) {
  const char *y = "current-context: a\n"
                  "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                  "clusters: [{name: c, cluster: {server: 'https://h:6443/prefix/'}}]\n"
                  "users: [{name: u}]\n";
  nl_kubeconfig_t kc;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubeconfig_parse(&kc, y, strlen(y), "k", NULL, &err), 0);
  assert_string_equal(kc.server, "https://h:6443/prefix");
  assert_null(kc.token);
  assert_null(kc.cert_file);
  assert_null(kc.cert_pem);
  nl_kubeconfig_free(&kc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(kubeadm_embedded_data),
      cmocka_unit_test(files_resolved_against_the_directory),
      cmocka_unit_test(json_with_token_file_and_insecure),
      cmocka_unit_test(parse_keeps_relative_paths_and_reads_nothing),
      cmocka_unit_test(errors_name_the_file_and_the_field),
      cmocka_unit_test(missing_and_unreadable_files),
      cmocka_unit_test(more_refusals),
      cmocka_unit_test(anonymous_user_and_path_prefix),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
