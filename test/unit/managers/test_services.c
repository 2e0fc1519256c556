/* Service environment variables: envvars.FromServices on upstream's
 * envvars_test.go cases (golden), which services a pod gets (its namespace with
 * enableServiceLinks, default's `kubernetes` always), the wait for the first
 * list (API pods only), and the merge into the container's environment. */
#include "rt_test_util.h"

#include <stdio.h>

#include "managers/services.h"

static nl_service_t *svc(const char *json) {
  nl_service_t *s = NULL;
  nl_err_t *err = NULL;
  if (nl_service_decode(json, strlen(json), &s, &err) < 0) fail_msg("decode: %s", nl_err_msg(err));
  return s;
}

/* "NAME=value\n" lines */
static char *dump(const nl_env_t *env, size_t n) {
  size_t len = 1;
  for (size_t i = 0; i < n; i++) len += strlen(env[i].name) + strlen(env[i].value) + 2;
  char *s = calloc(1, len), *p = s;
  for (size_t i = 0; i < n; i++) p += sprintf(p, "%s=%s\n", env[i].name, env[i].value);
  return s;
}

#define SVC(ns, name, ip, ports)                                                          \
  "{\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name "\"},\"spec\":{\"clusterIP\":\"" ip \
  "\",\"ports\":[" ports "]}}"

static void test_from_services_golden(void **state) {
  (void)state;
  nl_service_t *sl[] = {
      svc(SVC("", "foo-bar", "1.2.3.4", "{\"port\":8080,\"protocol\":\"TCP\"}")),
      svc(SVC("", "abc-123", "5.6.7.8",
              "{\"name\":\"u-d-p\",\"port\":8081,\"protocol\":\"UDP\"},"
              "{\"name\":\"t-c-p\",\"port\":8081,\"protocol\":\"TCP\"}")),
      svc(SVC("", "q-u-u-x", "9.8.7.6",
              "{\"port\":8082,\"protocol\":\"TCP\"},{\"name\":\"8083\",\"port\":8083,\"protocol\":\"TCP\"}")),
      svc(SVC("", "svrc-clusterip-none", "None", "{\"port\":8082,\"protocol\":\"TCP\"}")),
      svc(SVC("", "svrc-clusterip-empty", "", "{\"port\":8082,\"protocol\":\"TCP\"}")),
      svc(SVC("", "super-ipv6", "2001:DB8::",
              "{\"name\":\"u-d-p\",\"port\":8084,\"protocol\":\"UDP\"},"
              "{\"name\":\"t-c-p\",\"port\":8084,\"protocol\":\"TCP\"}")),
      svc(SVC("", "sctp-1", "1.2.3.4", "{\"name\":\"s-c-t-p\",\"port\":7777,\"protocol\":\"SCTP\"}")),
  };
  nl_env_t *env = NULL;
  size_t n = 0;
  nl_service_env_from((const nl_service_t *const *)sl, 7, &env, &n);
  char *got = dump(env, n);
  assert_string_equal(got,
                      "FOO_BAR_SERVICE_HOST=1.2.3.4\n"
                      "FOO_BAR_SERVICE_PORT=8080\n"
                      "FOO_BAR_PORT=tcp://1.2.3.4:8080\n"
                      "FOO_BAR_PORT_8080_TCP=tcp://1.2.3.4:8080\n"
                      "FOO_BAR_PORT_8080_TCP_PROTO=tcp\n"
                      "FOO_BAR_PORT_8080_TCP_PORT=8080\n"
                      "FOO_BAR_PORT_8080_TCP_ADDR=1.2.3.4\n"
                      "ABC_123_SERVICE_HOST=5.6.7.8\n"
                      "ABC_123_SERVICE_PORT=8081\n"
                      "ABC_123_SERVICE_PORT_U_D_P=8081\n"
                      "ABC_123_SERVICE_PORT_T_C_P=8081\n"
                      "ABC_123_PORT=udp://5.6.7.8:8081\n"
                      "ABC_123_PORT_8081_UDP=udp://5.6.7.8:8081\n"
                      "ABC_123_PORT_8081_UDP_PROTO=udp\n"
                      "ABC_123_PORT_8081_UDP_PORT=8081\n"
                      "ABC_123_PORT_8081_UDP_ADDR=5.6.7.8\n"
                      "ABC_123_PORT_8081_TCP=tcp://5.6.7.8:8081\n"
                      "ABC_123_PORT_8081_TCP_PROTO=tcp\n"
                      "ABC_123_PORT_8081_TCP_PORT=8081\n"
                      "ABC_123_PORT_8081_TCP_ADDR=5.6.7.8\n"
                      "Q_U_U_X_SERVICE_HOST=9.8.7.6\n"
                      "Q_U_U_X_SERVICE_PORT=8082\n"
                      "Q_U_U_X_SERVICE_PORT_8083=8083\n"
                      "Q_U_U_X_PORT=tcp://9.8.7.6:8082\n"
                      "Q_U_U_X_PORT_8082_TCP=tcp://9.8.7.6:8082\n"
                      "Q_U_U_X_PORT_8082_TCP_PROTO=tcp\n"
                      "Q_U_U_X_PORT_8082_TCP_PORT=8082\n"
                      "Q_U_U_X_PORT_8082_TCP_ADDR=9.8.7.6\n"
                      "Q_U_U_X_PORT_8083_TCP=tcp://9.8.7.6:8083\n"
                      "Q_U_U_X_PORT_8083_TCP_PROTO=tcp\n"
                      "Q_U_U_X_PORT_8083_TCP_PORT=8083\n"
                      "Q_U_U_X_PORT_8083_TCP_ADDR=9.8.7.6\n"
                      "SUPER_IPV6_SERVICE_HOST=2001:DB8::\n"
                      "SUPER_IPV6_SERVICE_PORT=8084\n"
                      "SUPER_IPV6_SERVICE_PORT_U_D_P=8084\n"
                      "SUPER_IPV6_SERVICE_PORT_T_C_P=8084\n"
                      "SUPER_IPV6_PORT=udp://[2001:DB8::]:8084\n"
                      "SUPER_IPV6_PORT_8084_UDP=udp://[2001:DB8::]:8084\n"
                      "SUPER_IPV6_PORT_8084_UDP_PROTO=udp\n"
                      "SUPER_IPV6_PORT_8084_UDP_PORT=8084\n"
                      "SUPER_IPV6_PORT_8084_UDP_ADDR=2001:DB8::\n"
                      "SUPER_IPV6_PORT_8084_TCP=tcp://[2001:DB8::]:8084\n"
                      "SUPER_IPV6_PORT_8084_TCP_PROTO=tcp\n"
                      "SUPER_IPV6_PORT_8084_TCP_PORT=8084\n"
                      "SUPER_IPV6_PORT_8084_TCP_ADDR=2001:DB8::\n"
                      "SCTP_1_SERVICE_HOST=1.2.3.4\n"
                      "SCTP_1_SERVICE_PORT=7777\n"
                      "SCTP_1_SERVICE_PORT_S_C_T_P=7777\n"
                      "SCTP_1_PORT=sctp://1.2.3.4:7777\n"
                      "SCTP_1_PORT_7777_SCTP=sctp://1.2.3.4:7777\n"
                      "SCTP_1_PORT_7777_SCTP_PROTO=sctp\n"
                      "SCTP_1_PORT_7777_SCTP_PORT=7777\n"
                      "SCTP_1_PORT_7777_SCTP_ADDR=1.2.3.4\n");
  free(got);
  nl_env_free(env, n);
  for (size_t i = 0; i < 7; i++) nl_service_free(sl[i]);
}

/* A store filled by hand (no reflector). */
static void put(nl_services_t *s, const char *json) {
  nl_service_t *v = svc(json);
  char key[128];
  snprintf(key, sizeof key, "%s/%s", v->namespace_, v->name);
  nl_service_free(nl_map_put(&s->by_key, key, v));
}

static void store(nl_services_t *s) {
  memset(s, 0, sizeof *s);
  nl_map_init(&s->by_key);
  s->enabled = true;
  put(s, SVC("default", "kubernetes", "10.96.0.1", "{\"name\":\"https\",\"port\":443,\"protocol\":\"TCP\"}"));
  put(s, SVC("default", "other", "10.96.0.2", "{\"port\":80}"));
  put(s, SVC("edge", "web", "10.96.0.3", "{\"port\":80}"));
  put(s, SVC("edge", "headless", "None", "{\"port\":80}"));
  put(s, SVC("lab", "db", "10.96.0.4", "{\"port\":5432}"));
}

static void free_service(void *p) { nl_service_free(p); }

static char *env_for(nl_services_t *s, const char *yaml, int *rc) {
  nl_pod_t *pod = pod_from_yaml(yaml);
  nl_env_t *env;
  size_t n;
  nl_err_t *err = NULL;
  *rc = nl_services_env(s, pod, &env, &n, &err);
  char *out = *rc == 0 ? dump(env, n) : strdup(nl_err_msg(err));
  if (*rc == 0) nl_env_free(env, n);
  nl_err_free(&err);
  nl_pod_free(pod);
  return out;
}

#define POD(ns, extra) \
  "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: " ns ", uid: u" extra "}\n" \
  "spec:\n  containers: [{name: c, image: b}]\n"
#define API ", annotations: {kubernetes.io/config.source: api}"
#define STATIC ", annotations: {kubernetes.io/config.source: file}"

static void test_which_services(void **state) {
  (void)state;
  nl_services_t s;
  store(&s);
  s.synced = true;
  int rc;
  char *e = env_for(&s, POD("edge", API), &rc);
  assert_int_equal(rc, 0);
  /* its namespace's services with an IP, and default's kubernetes; sorted */
  assert_non_null(strstr(e, "KUBERNETES_SERVICE_HOST=10.96.0.1\nKUBERNETES_SERVICE_PORT=443\n"
                            "KUBERNETES_SERVICE_PORT_HTTPS=443\n"));
  assert_non_null(strstr(e, "WEB_SERVICE_HOST=10.96.0.3\n"));
  assert_null(strstr(e, "OTHER_"));
  assert_null(strstr(e, "DB_"));
  assert_null(strstr(e, "HEADLESS_"));
  assert_true(strncmp(e, "KUBERNETES_PORT=tcp://10.96.0.1:443\n", 36) == 0);
  free(e);
  /* enableServiceLinks: false keeps only the master service */
  e = env_for(&s, "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: edge, uid: u" API
                  "}\nspec:\n  enableServiceLinks: false\n  containers: [{name: c, image: b}]\n", &rc);
  assert_non_null(strstr(e, "KUBERNETES_SERVICE_HOST=10.96.0.1\n"));
  assert_null(strstr(e, "WEB_"));
  free(e);
  /* a pod in default sees default's services */
  e = env_for(&s, POD("default", API), &rc);
  assert_non_null(strstr(e, "OTHER_SERVICE_HOST=10.96.0.2\n"));
  free(e);
  /* a `kubernetes` service in the pod's namespace wins over default's */
  put(&s, SVC("edge", "kubernetes", "10.96.9.9", "{\"port\":8443}"));
  e = env_for(&s, POD("edge", API), &rc);
  assert_non_null(strstr(e, "KUBERNETES_SERVICE_HOST=10.96.9.9\n"));
  assert_null(strstr(e, "10.96.0.1"));
  free(e);
  nl_map_free(&s.by_key, free_service);
}

static void test_wait_for_first_list(void **state) {
  (void)state;
  nl_services_t s;
  store(&s);
  int rc;
  char *e = env_for(&s, POD("edge", API), &rc);
  assert_int_equal(rc, -1);
  assert_string_equal(e, "services have not yet been read at least once, cannot construct envvars");
  free(e);
  /* static pods do not wait */
  e = env_for(&s, POD("edge", STATIC), &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(e, "WEB_SERVICE_HOST"));
  free(e);
  /* the first list got no answer (offline, pods from the checkpoint): API pods
   * start with what is known instead of waiting */
  s.unreachable = true;
  e = env_for(&s, POD("edge", API), &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(e, "WEB_SERVICE_HOST"));
  free(e);
  nl_map_free(&s.by_key, free_service);
  /* no API client: nothing, and no waiting */
  nl_services_t none = {0};
  e = env_for(&none, POD("edge", API), &rc);
  assert_int_equal(rc, 0);
  assert_string_equal(e, "");
  free(e);
}

static void test_merged_into_the_container_env(void **state) {
  (void)state;
  nl_services_t s;
  store(&s);
  s.synced = true;
  nl_runtime_opts_t o = test_opts();
  o.service_env = nl_services_env;
  o.service_env_ctx = &s;
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: edge, uid: u}\nspec:\n"
      "  containers: [{name: c, image: b, env: [{name: URL, value: 'http://$(WEB_SERVICE_HOST)/'},"
      " {name: WEB_SERVICE_PORT, value: '9999'}]}]\n");
  nl_env_t *env;
  size_t n;
  nl_err_t *err = NULL;
  assert_int_equal(nl_runtime_make_env(&o, pod, &pod->spec.containers[0], NULL, NULL, 0, NULL, 0, &env,
                                       &n, &err), 0);
  char *e = dump(env, n);
  /* the container's own first, in order; $(VAR) sees services; its value wins */
  assert_true(strncmp(e, "URL=http://10.96.0.3/\nWEB_SERVICE_PORT=9999\n", 44) == 0);
  assert_non_null(strstr(e, "WEB_SERVICE_HOST=10.96.0.3\n"));
  assert_non_null(strstr(e, "KUBERNETES_SERVICE_HOST=10.96.0.1\n"));
  assert_null(strstr(e, "WEB_SERVICE_PORT=80\n"));
  free(e);
  nl_env_free(env, n);
  nl_pod_free(pod);
  nl_map_free(&s.by_key, free_service);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_from_services_golden),
      cmocka_unit_test(test_which_services),
      cmocka_unit_test(test_wait_for_first_list),
      cmocka_unit_test(test_merged_into_the_container_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
