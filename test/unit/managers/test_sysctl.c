/* Pod sysctls at admission (upstream pkg/kubelet/sysctl allowlist_test.go):
 * the safe ones pass, an unsafe one only when allowedUnsafeSysctls names it or
 * a prefix of it, never one of a host namespace the pod shares; bad patterns
 * fail the configuration with upstream's messages. */
#include "rt_test_util.h"

#include "managers/sysctl.h"

static char *admit(const nl_sysctl_allowlist_t *w, const char *spec) {
  char yaml[512];
  snprintf(yaml, sizeof yaml,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\nspec:\n%s"
           "  containers: [{name: c, image: busybox}]\n",
           spec);
  nl_pod_t *pod = pod_from_yaml(yaml);
  char *msg = NULL;
  bool ok = nl_sysctl_admit(w, pod, &msg);
  nl_pod_free(pod);
  assert_true(ok == (msg == NULL));
  return msg;
}

#define ADMITTED(w, spec) assert_null(admit(w, spec))
#define REJECTED(w, spec, want)         \
  do {                                  \
    char *m_ = admit(w, spec);          \
    assert_non_null(m_);                \
    assert_string_equal(m_, want);      \
    free(m_);                           \
  } while (0)

static void test_admit(void **state) {
  (void)state;
  nl_sysctl_allowlist_t w;
  nl_err_t *err = NULL;
  assert_int_equal(nl_sysctl_allowlist_init(&w, NULL, 0, &err), 0);
  ADMITTED(&w, "");
  ADMITTED(&w, "  securityContext:\n    sysctls: [{name: kernel.shm_rmid_forced, value: '1'}]\n");
  ADMITTED(&w, "  securityContext:\n    sysctls: [{name: net/ipv4/ip_local_port_range, value: '1024 65000'}]\n");
  /* upstream's spec: kernel.msgmax is not safe and not allowed */
  REJECTED(&w,
           "  securityContext:\n    sysctls: [{name: kernel.shm_rmid_forced, value: '1'},"
           " {name: kernel.msgmax, value: '10000000000'}]\n",
           "forbidden sysctl: \"kernel.msgmax\" not allowlisted");
  /* a safe net sysctl in the host's network namespace */
  REJECTED(&w,
           "  hostNetwork: true\n  securityContext:\n    sysctls: [{name: net.ipv4.tcp_syncookies, value: '1'}]\n",
           "forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host Net enabled");
  nl_sysctl_allowlist_free(&w);

  char *unsafe[] = {"kernel.msg*", "net.core.somaxconn"};
  assert_int_equal(nl_sysctl_allowlist_init(&w, unsafe, 2, &err), 0);
  ADMITTED(&w, "  securityContext:\n    sysctls: [{name: kernel.msgmax, value: '1'}, {name: net.core.somaxconn, value: '1'}]\n");
  REJECTED(&w, "  hostIPC: true\n  securityContext:\n    sysctls: [{name: kernel.msgmax, value: '1'}]\n",
           "forbidden sysctl: \"kernel.msgmax\" not allowed with host IPC enabled");
  REJECTED(&w, "  securityContext:\n    sysctls: [{name: net.core.rmem_max, value: '1'}]\n",
           "forbidden sysctl: \"net.core.rmem_max\" not allowlisted");
  nl_sysctl_allowlist_free(&w);
}

static void test_bad_patterns(void **state) {
  (void)state;
  nl_sysctl_allowlist_t w;
  nl_err_t *err = NULL;
  char *unknown[] = {"kernel.hostname"};
  assert_int_equal(nl_sysctl_allowlist_init(&w, unknown, 1, &err), -1);
  assert_string_equal(err->msg, "the sysctls \"kernel.hostname\" are not known to be namespaced");
  nl_err_free(&err);
  char *bad[] = {"net.*.x"};
  assert_int_equal(nl_sysctl_allowlist_init(&w, bad, 1, &err), -1);
  assert_non_null(strstr(err->msg, "sysctl \"net.*.x\" must have at most 253 characters"));
  nl_err_free(&err);
  char *upper[] = {"Net.core.x"};
  assert_int_equal(nl_sysctl_allowlist_init(&w, upper, 1, &err), -1);
  nl_err_free(&err);
  assert_int_equal(w.n, 0);
}

static void test_normalize(void **state) {
  (void)state;
  char *s = nl_sysctl_normalize("net/ipv4/conf/eno2.100/rp_filter");
  assert_string_equal(s, "net.ipv4.conf.eno2/100.rp_filter");
  free(s);
  s = nl_sysctl_normalize("net.ipv4.conf.eno2/100.rp_filter");
  assert_string_equal(s, "net.ipv4.conf.eno2/100.rp_filter");
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_admit),
      cmocka_unit_test(test_bad_patterns),
      cmocka_unit_test(test_normalize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
