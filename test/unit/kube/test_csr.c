#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "agent/kube/csr.h"

static void encode(void **state) {
  (void)state;
  static const char *const usages[] = {"digital signature", "client auth", NULL};
  char *body = nl_kube_csr_encode("-----BEGIN CERTIFICATE REQUEST-----\nx\n", NL_KUBE_SIGNER_CLIENT,
                                  usages);
  json_t *o = json_loads(body, 0, NULL);
  assert_non_null(o);
  assert_string_equal(json_string_value(json_object_get(o, "apiVersion")), "certificates.k8s.io/v1");
  assert_string_equal(json_string_value(json_object_get(o, "kind")), "CertificateSigningRequest");
  json_t *md = json_object_get(o, "metadata"), *spec = json_object_get(o, "spec");
  assert_string_equal(json_string_value(json_object_get(md, "generateName")), "csr-");
  assert_string_equal(json_string_value(json_object_get(spec, "signerName")),
                      "kubernetes.io/kube-apiserver-client-kubelet");
  assert_string_equal(json_string_value(json_object_get(spec, "request")),
                      "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KeAo=");
  json_t *u = json_object_get(spec, "usages");
  assert_int_equal(json_array_size(u), 2);
  assert_string_equal(json_string_value(json_array_get(u, 1)), "client auth");
  json_decref(o);
  free(body);
}

static void decoded(const char *json, nl_kube_csr_t *c) {
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_csr_decode(json, strlen(json), c, &err), 0);
  assert_null(err);
}

static void phases(void **state) {
  (void)state;
  nl_kube_csr_t c;
  decoded("{\"metadata\":{\"name\":\"csr-a\",\"uid\":\"u1\"},\"status\":{}}", &c);
  assert_string_equal(c.name, "csr-a");
  assert_int_equal(c.phase, NL_KUBE_CSR_PENDING);
  assert_false(c.approved);
  nl_kube_csr_free(&c);
  /* approved, not yet signed */
  decoded("{\"metadata\":{\"name\":\"csr-a\"},\"status\":{\"conditions\":[{\"type\":\"Approved\"}]}}", &c);
  assert_int_equal(c.phase, NL_KUBE_CSR_PENDING);
  assert_true(c.approved);
  assert_null(c.certificate);
  nl_kube_csr_free(&c);
  /* issued: the certificate comes base64, as Go encodes []byte */
  decoded("{\"metadata\":{\"name\":\"csr-a\"},\"status\":{\"conditions\":[{\"type\":\"Approved\"}],"
          "\"certificate\":\"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\"}}", &c);
  assert_int_equal(c.phase, NL_KUBE_CSR_ISSUED);
  assert_string_equal(c.certificate, "-----BEGIN CERTIFICATE-----\n");
  nl_kube_csr_free(&c);
  /* a certificate without approval is not taken */
  decoded("{\"metadata\":{\"name\":\"csr-a\"},\"status\":{\"certificate\":\"eA==\"}}", &c);
  assert_int_equal(c.phase, NL_KUBE_CSR_PENDING);
  nl_kube_csr_free(&c);
  /* denied wins over approved, with its reason and message */
  decoded("{\"metadata\":{\"name\":\"csr-a\"},\"status\":{\"conditions\":[{\"type\":\"Approved\"},"
          "{\"type\":\"Denied\",\"reason\":\"NotOurs\",\"message\":\"go away\"}],"
          "\"certificate\":\"eA==\"}}", &c);
  assert_int_equal(c.phase, NL_KUBE_CSR_DENIED);
  assert_string_equal(c.reason, "NotOurs");
  assert_string_equal(c.message, "go away");
  nl_kube_csr_free(&c);
  decoded("{\"metadata\":{\"name\":\"csr-a\"},\"status\":{\"conditions\":[{\"type\":\"Failed\","
          "\"reason\":\"SignerValidationFailure\"}]}}", &c);
  assert_int_equal(c.phase, NL_KUBE_CSR_FAILED);
  assert_string_equal(c.reason, "SignerValidationFailure");
  assert_null(c.message);
  nl_kube_csr_free(&c);
}

static void bad_input(void **state) {
  (void)state;
  nl_kube_csr_t c;
  nl_err_t *err = NULL;
  const char *cases[][2] = {
      {"[1]", "CertificateSigningRequest: not an object"},
      {"{\"metadata\":{\"name\":\"x\"},\"status\":{\"conditions\":[{\"type\":\"Approved\"}],"
       "\"certificate\":\"!!!\"}}", "status.certificate: not valid base64"},
      {"{\"metadata\":{\"name\":\"x\"},\"status\":{\"conditions\":[{\"type\":\"Approved\"}],"
       "\"certificate\":\"AAE=\"}}", "status.certificate: must hold PEM data"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(nl_kube_csr_decode(cases[i][0], strlen(cases[i][0]), &c, &err), -1);
    assert_string_equal(err->msg, cases[i][1]);
    assert_null(c.name);
    nl_err_free(&err);
  }
  assert_int_equal(nl_kube_csr_decode("{", 1, &c, &err), -1);
  assert_non_null(strstr(err->msg, "CertificateSigningRequest: "));
  nl_err_free(&err);
  /* odd shapes are read as absent, as Go's decoder would refuse them upstream */
  decoded("{\"metadata\":7,\"status\":{\"conditions\":{\"type\":\"Denied\"}}}", &c);
  assert_null(c.name);
  assert_int_equal(c.phase, NL_KUBE_CSR_PENDING);
  nl_kube_csr_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encode),
      cmocka_unit_test(phases),
      cmocka_unit_test(bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
