/* Start-up choice of the client credentials (agent/kubelet_certs.c), with
 * files made in a temporary directory and certificates from a test CA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/cert_store.h"
#include "agent/config.h"
#include "agent/kubelet_certs.h"
#include "cert_ca.h"

static char dir[64];
static nl_kubelet_config_t cfg;

static char *at(const char *name) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
  return p;
}

static void put(const char *name, const char *a, const char *b) {
  char *p = at(name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(a, f);
  if (b) fputs(b, f);
  fclose(f);
  free(p);
}

/* A kubeconfig named name whose user is the PEM file pem (cert and key). */
static void kubeconfig(const char *name, const char *server, const char *pem) {
  char *ca = at("ca.crt"), *text = NULL;
  if (pem)
    assert_true(asprintf(&text, "{\"current-context\":\"x\",\"contexts\":[{\"name\":\"x\",\"context\":"
                         "{\"cluster\":\"c\",\"user\":\"u\"}}],\"clusters\":[{\"name\":\"c\",\"cluster\":"
                         "{\"server\":\"%s\",\"certificate-authority\":\"%s\"}}],\"users\":[{\"name\":\"u\","
                         "\"user\":{\"client-certificate\":\"%s\",\"client-key\":\"%s\"}}]}",
                         server, ca, pem, pem) > 0);
  else
    assert_true(asprintf(&text, "{\"current-context\":\"x\",\"contexts\":[{\"name\":\"x\",\"context\":"
                         "{\"cluster\":\"c\",\"user\":\"u\"}}],\"clusters\":[{\"name\":\"c\",\"cluster\":"
                         "{\"server\":\"%s\",\"certificate-authority\":\"%s\"}}],\"users\":[{\"name\":\"u\","
                         "\"user\":{\"token\":\"abcdef.0123456789abcdef\"}}]}", server, ca) > 0);
  put(name, text, NULL);
  free(text);
  free(ca);
}

/* A pair file valid from now+from to now+to. */
static void pair(const char *name, long from, long to) {
  char *key = NULL;
  time_t now = time(NULL);
  char *cert = test_ca_pair("system:node:n1", now + from, now + to, &key);
  put(name, cert, key);
  free(cert);
  free(key);
}

static int setup(void **state) {
  (void)state;
  strcpy(dir, "/tmp/nl-kubelet-certs-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  put("ca.crt", "x\n", NULL);
  nl_config_defaults(&cfg);
  free(cfg.kubeconfig);
  free(cfg.bootstrap_kubeconfig);
  free(cfg.cert_dir);
  cfg.kubeconfig = at("kubelet.conf");
  cfg.bootstrap_kubeconfig = at("bootstrap.conf");
  cfg.cert_dir = at("pki");
  kubeconfig("bootstrap.conf", "https://boot:6443", NULL);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  nl_config_free(&cfg);
  char *cmd = NULL;
  if (asprintf(&cmd, "rm -rf '%s'", dir) < 0 || system(cmd) != 0) return -1;
  free(cmd);
  return 0;
}

/* No kubeconfig yet: the bootstrap's cluster and no client certificate. */
static void first_boot(void **state) {
  (void)state;
  nl_kubelet_creds_t cr;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubelet_creds_load(&cr, &cfg, &err), 0);
  assert_string_equal(cr.kc.server, "https://boot:6443");
  assert_null(cr.kc.cert_file);
  assert_null(cr.kc.token); /* never the bootstrap token as the node */
  assert_null(cr.client_pem);
  assert_true(cr.write_kubeconfig);
  assert_string_equal(cr.bootstrap.token, "abcdef.0123456789abcdef");
  nl_kubelet_creds_free(&cr);
  /* without a bootstrap kubeconfig that is a start-up error */
  free(cfg.bootstrap_kubeconfig);
  cfg.bootstrap_kubeconfig = NULL;
  assert_int_equal(nl_kubelet_creds_load(&cr, &cfg, &err), -1);
  assert_non_null(strstr(err->msg, "kubelet.conf: No such file or directory"));
  nl_err_free(&err);
}

/* A valid kubeconfig is used as it is; the bootstrap one is kept for later. */
static void valid_kubeconfig(void **state) {
  (void)state;
  pair("node.pem", -10, 3600);
  char *pem = at("node.pem");
  kubeconfig("kubelet.conf", "https://api:6443", pem);
  nl_kubelet_creds_t cr;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubelet_creds_load(&cr, &cfg, &err), 0);
  assert_string_equal(cr.kc.server, "https://api:6443");
  assert_string_equal(cr.kc.cert_file, pem);
  assert_non_null(cr.client_pem);
  assert_false(cr.write_kubeconfig);
  assert_non_null(cr.bootstrap.path);
  nl_kubelet_creds_free(&cr);
  free(pem);
}

/* An expired certificate: the bootstrap's cluster; a valid stored pair is used
 * and the kubeconfig written again to point at it. */
static void expired_kubeconfig(void **state) {
  (void)state;
  pair("old.pem", -7200, -3600);
  char *old = at("old.pem");
  kubeconfig("kubelet.conf", "https://api:6443", old);
  nl_kubelet_creds_t cr;
  nl_err_t *err = NULL;
  assert_int_equal(nl_kubelet_creds_load(&cr, &cfg, &err), 0);
  assert_string_equal(cr.kc.server, "https://boot:6443");
  assert_null(cr.client_pem);
  nl_kubelet_creds_free(&cr);
  /* now with a valid pair in the store */
  char *key = NULL, *path = NULL;
  time_t now = time(NULL);
  char *cert = test_ca_pair("system:node:n1", now - 10, now + 3600, &key);
  assert_int_equal(nl_cert_store_update(cfg.cert_dir, "kubelet-client", cert, key, now, &path, &err), 0);
  assert_int_equal(nl_kubelet_creds_load(&cr, &cfg, &err), 0);
  char *current = nl_cert_store_current_path(cfg.cert_dir, "kubelet-client");
  assert_string_equal(cr.kc.cert_file, current);
  assert_non_null(cr.client_pem);
  assert_false(cr.write_kubeconfig); /* written already */
  nl_kubelet_creds_free(&cr);
  nl_kubeconfig_t kc;
  assert_int_equal(nl_kubeconfig_load(&kc, cfg.kubeconfig, &err), 0);
  assert_string_equal(kc.server, "https://boot:6443");
  assert_string_equal(kc.cert_file, current);
  nl_kubeconfig_free(&kc);
  free(current);
  free(cert);
  free(key);
  free(path);
  free(old);
}

/* rotateCertificates: the store's valid pair wins over the kubeconfig's. */
static void store_wins_with_rotation(void **state) {
  (void)state;
  pair("node.pem", -10, 3600);
  char *pem = at("node.pem");
  kubeconfig("kubelet.conf", "https://api:6443", pem);
  free(cfg.bootstrap_kubeconfig);
  cfg.bootstrap_kubeconfig = NULL;
  cfg.rotate_certificates = true;
  char *key = NULL, *path = NULL;
  nl_err_t *err = NULL;
  time_t now = time(NULL);
  char *cert = test_ca_pair("system:node:n1", now - 10, now + 7200, &key);
  assert_int_equal(nl_cert_store_update(cfg.cert_dir, "kubelet-client", cert, key, now, &path, &err), 0);
  nl_kubelet_creds_t cr;
  assert_int_equal(nl_kubelet_creds_load(&cr, &cfg, &err), 0);
  char *current = nl_cert_store_current_path(cfg.cert_dir, "kubelet-client");
  assert_string_equal(cr.kc.server, "https://api:6443");
  assert_string_equal(cr.kc.cert_file, current);
  assert_non_null(strstr(cr.client_pem, cert));
  nl_kubelet_creds_free(&cr);
  cfg.rotate_certificates = false;
  free(current);
  free(cert);
  free(key);
  free(path);
  free(pem);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(first_boot, setup, teardown),
      cmocka_unit_test_setup_teardown(valid_kubeconfig, setup, teardown),
      cmocka_unit_test_setup_teardown(expired_kubeconfig, setup, teardown),
      cmocka_unit_test_setup_teardown(store_wins_with_rotation, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
