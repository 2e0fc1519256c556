#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/cert_store.h"
#include "agent/kube/kubeconfig.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  strcpy(dir, "/tmp/nl-cert-store-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char *cmd = NULL;
  if (asprintf(&cmd, "rm -rf '%s'", dir) < 0 || system(cmd) != 0) return -1;
  free(cmd);
  return 0;
}

static char *slurp(const char *path) {
  char *pem = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_cert_store_read(path, &pem, &err), 0);
  return pem;
}

/* client-go's layout: <prefix>-<time>.pem (0600, certificate then key) and the
 * -current.pem link, swapped by a rename; earlier pairs stay. */
static void update_swaps_the_link(void **state) {
  (void)state;
  char *sub = NULL, *p1 = NULL, *p2 = NULL, *link = NULL, target[512];
  nl_err_t *err = NULL;
  assert_true(asprintf(&sub, "%s/pki", dir) > 0); /* made on demand */
  assert_int_equal(nl_cert_store_update(sub, "kubelet-client", "CERT1\n", "KEY1", 1700000000, &p1, &err), 0);
  char *want = NULL;
  assert_true(asprintf(&want, "%s/kubelet-client-2023-11-14-22-13-20.pem", sub) > 0);
  assert_string_equal(p1, want);
  struct stat st;
  assert_int_equal(stat(p1, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  char *text = slurp(p1);
  assert_string_equal(text, "CERT1\nKEY1\n");
  free(text);
  link = nl_cert_store_current_path(sub, "kubelet-client");
  ssize_t n = readlink(link, target, sizeof target - 1);
  assert_true(n > 0);
  target[n] = 0;
  assert_string_equal(target, p1);
  assert_int_equal(nl_cert_store_update(sub, "kubelet-client", "CERT2", "KEY2\n", 1700000100, &p2, &err), 0);
  text = slurp(link);
  assert_string_equal(text, "CERT2\nKEY2\n");
  free(text);
  assert_int_equal(access(p1, F_OK), 0);
  char *updated = NULL;
  assert_true(asprintf(&updated, "%s/kubelet-client-updated.pem", sub) > 0);
  assert_int_equal(access(updated, F_OK), -1); /* renamed over -current */
  free(updated);
  free(want);
  free(sub);
  free(p1);
  free(p2);
  free(link);
}

/* A pair whose write fails part-way (here a file size limit, as a full disk
 * or a kill would) leaves the link on the old pair, whole, even when the new
 * pair has the same name (two pairs within a second): it is never truncated
 * in place. */
static void failed_write_leaves_the_old_pair(void **state) {
  (void)state;
  char *p1 = NULL, *p2 = NULL, *link = nl_cert_store_current_path(dir, "kubelet-client");
  nl_err_t *err = NULL;
  assert_int_equal(nl_cert_store_update(dir, "kubelet-client", "CERT1\n", "KEY1\n", 1700000000, &p1, &err), 0);
  struct rlimit old, small = {.rlim_cur = 8, .rlim_max = RLIM_INFINITY};
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  small.rlim_max = old.rlim_max;
  void (*xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
  int rc = nl_cert_store_update(dir, "kubelet-client", "A-LONGER-CERT2\n", "KEY2\n", 1700000000, &p2, &err);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, xfsz);
  assert_int_equal(rc, -1);
  assert_null(p2);
  assert_non_null(strstr(err->msg, "kubelet-client-2023-11-14-22-13-20.pem"));
  nl_err_free(&err);
  char *text = slurp(link);
  assert_string_equal(text, "CERT1\nKEY1\n");
  free(text);
  char *tmp = NULL;
  assert_true(asprintf(&tmp, "%s.tmp", p1) > 0);
  assert_int_equal(access(tmp, F_OK), -1); /* nothing left behind */
  /* and the same name written again replaces the pair whole */
  assert_int_equal(nl_cert_store_update(dir, "kubelet-client", "CERT3\n", "KEY3\n", 1700000000, &p2, &err), 0);
  assert_string_equal(p2, p1);
  text = slurp(link);
  assert_string_equal(text, "CERT3\nKEY3\n");
  free(text);
  free(tmp);
  free(p1);
  free(p2);
  free(link);
}

static void errors_name_the_file(void **state) {
  (void)state;
  char *pem = NULL, *path = NULL, *missing = NULL;
  nl_err_t *err = NULL;
  assert_true(asprintf(&missing, "%s/none.pem", dir) > 0);
  assert_int_equal(nl_cert_store_read(missing, &pem, &err), -1);
  assert_int_equal(err->code, ENOENT);
  assert_non_null(strstr(err->msg, "none.pem: No such file or directory"));
  nl_err_free(&err);
  assert_int_equal(nl_cert_store_read(dir, &pem, &err), -1); /* a directory */
  nl_err_free(&err);
  assert_int_equal(nl_cert_store_update("/proc/nl-no-such-dir", "p", "C", "K", 0, &path, &err), -1);
  assert_null(path);
  assert_non_null(strstr(err->msg, "/proc/nl-no-such-dir"));
  nl_err_free(&err);
  free(missing);
}

/* The kubeconfig bootstrap leaves reads back as the node's, with the
 * bootstrap's cluster. */
static void kubeconfig_round_trip(void **state) {
  (void)state;
  char *path = NULL, *pem = NULL, *ca = NULL;
  assert_true(asprintf(&path, "%s/etc/kubelet.conf", dir) > 0);
  assert_true(asprintf(&pem, "%s/kubelet-client-current.pem", dir) > 0);
  assert_true(asprintf(&ca, "%s/ca.crt", dir) > 0);
  FILE *f = fopen(pem, "w");
  fputs("x\n", f);
  fclose(f);
  f = fopen(ca, "w");
  fputs("x\n", f);
  fclose(f);
  nl_kubeconfig_t boot = {.server = "https://10.0.0.1:6443", .ca_file = ca,
                          .tls_server_name = "kubernetes"};
  nl_err_t *err = NULL;
  assert_int_equal(nl_cert_store_write_kubeconfig(path, &boot, pem, &err), 0);
  nl_kubeconfig_t kc;
  assert_int_equal(nl_kubeconfig_load(&kc, path, &err), 0);
  assert_string_equal(kc.server, "https://10.0.0.1:6443");
  assert_string_equal(kc.ca_file, ca);
  assert_string_equal(kc.tls_server_name, "kubernetes");
  assert_string_equal(kc.cert_file, pem);
  assert_string_equal(kc.key_file, pem);
  assert_string_equal(kc.context, "default-context");
  assert_null(kc.token);
  nl_kubeconfig_free(&kc);
  /* embedded CA data stays embedded */
  nl_kubeconfig_t boot2 = {.server = "https://h", .ca_pem = "-----BEGIN CERTIFICATE-----\n"};
  assert_int_equal(nl_cert_store_write_kubeconfig(path, &boot2, pem, &err), 0);
  assert_int_equal(nl_kubeconfig_load(&kc, path, &err), 0);
  assert_string_equal(kc.ca_pem, "-----BEGIN CERTIFICATE-----\n");
  nl_kubeconfig_free(&kc);
  free(path);
  free(pem);
  free(ca);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(update_swaps_the_link, setup, teardown),
      cmocka_unit_test_setup_teardown(failed_write_leaves_the_old_pair, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_name_the_file, setup, teardown),
      cmocka_unit_test_setup_teardown(kubeconfig_round_trip, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
