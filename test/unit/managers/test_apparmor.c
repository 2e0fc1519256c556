/* AppArmor: the effective profile of a container and upstream's admission of
 * a pod that needs one, on a host with and without AppArmor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "managers/apparmor.h"

static nl_pod_t *pod_of(const char *yaml) {
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(yaml, strlen(yaml), "test.yaml", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  return pod;
}

#define HEAD "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ns\n  uid: u\n"

static void check(const char *yaml, bool host, bool want, const char *want_msg) {
  nl_pod_t *pod = pod_of(yaml);
  char *msg = NULL;
  assert_int_equal(nl_apparmor_admit(pod, host, &msg), want);
  if (want_msg) assert_string_equal(msg, want_msg);
  else assert_null(msg);
  free(msg);
  nl_pod_free(pod);
}

#define NO_HOST "Cannot enforce AppArmor: AppArmor is not enabled on the host"

static void admission(void **state) {
  (void)state;
  const char *none = HEAD "spec:\n  containers: [{name: c, image: busybox}]\n";
  const char *field = HEAD "spec:\n  containers:\n  - name: c\n    image: busybox\n"
                           "    securityContext: {appArmorProfile: {type: RuntimeDefault}}\n";
  const char *pod_level = HEAD "spec:\n  securityContext: {appArmorProfile: {type: Localhost, localhostProfile: x}}\n"
                               "  containers: [{name: c, image: busybox}]\n";
  const char *annotation = HEAD "  annotations: {container.apparmor.security.beta.kubernetes.io/c: runtime/default}\n"
                                "spec:\n  containers: [{name: c, image: busybox}]\n";
  const char *unconfined = HEAD "  annotations: {container.apparmor.security.beta.kubernetes.io/c: unconfined}\n"
                                "spec:\n  initContainers:\n  - name: i\n    image: busybox\n"
                                "    securityContext: {appArmorProfile: {type: Unconfined}}\n"
                                "  containers: [{name: c, image: busybox}]\n";
  const char *empty_local = HEAD "spec:\n  containers:\n  - name: c\n    image: busybox\n"
                                 "    securityContext: {appArmorProfile: {type: Localhost, localhostProfile: ' '}}\n";
  check(none, false, true, NULL);
  check(unconfined, false, true, NULL);
  check(field, false, false, NO_HOST);
  check(pod_level, false, false, NO_HOST);
  check(annotation, false, false, NO_HOST);
  check(field, true, true, NULL);
  check(annotation, true, true, NULL);
  check(empty_local, true, false, "Cannot enforce AppArmor: invalid empty AppArmor profile name");
}

/* The container's field wins over the annotation, which wins over the pod's. */
static void effective_profile(void **state) {
  (void)state;
  nl_pod_t *pod = pod_of(HEAD "  annotations: {container.apparmor.security.beta.kubernetes.io/a: localhost/prof}\n"
                              "spec:\n  securityContext: {appArmorProfile: {type: RuntimeDefault}}\n"
                              "  containers:\n  - {name: a, image: busybox}\n  - {name: b, image: busybox}\n"
                              "  - name: c\n    image: busybox\n"
                              "    securityContext: {appArmorProfile: {type: Unconfined}}\n");
  nl_seccomp_profile_t tmp;
  const nl_seccomp_profile_t *p = nl_apparmor_profile(pod, &pod->spec.containers[0], &tmp);
  assert_string_equal(p->type, "Localhost");
  assert_string_equal(p->localhost_profile, "prof");
  assert_string_equal(nl_apparmor_profile(pod, &pod->spec.containers[1], &tmp)->type, "RuntimeDefault");
  assert_string_equal(nl_apparmor_profile(pod, &pod->spec.containers[2], &tmp)->type, "Unconfined");
  nl_pod_free(pod);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(admission),
      cmocka_unit_test(effective_profile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
