#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "agent/kube/status.h"

static nl_err_t *err_of(int status, const char *ctype, const char *body) {
  nl_kube_response_t r = {status, body, strlen(body), ctype};
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_status_err(&r, &err), -1);
  assert_non_null(err);
  assert_int_equal(err->code, status);
  return err;
}

static void expect(int status, const char *ctype, const char *body, const char *msg) {
  nl_err_t *err = err_of(status, ctype, body);
  if (strcmp(err->msg, msg) != 0) fail_msg("got  %s\nwant %s", err->msg, msg);
  nl_err_free(&err);
}

static nl_kube_reason_t reason(int status, const char *body) {
  nl_kube_response_t r = {status, body, strlen(body), "application/json"};
  return nl_kube_status_reason(&r);
}

static void status_body_gives_its_message(void **state) {
  expect(403, "application/json",
         "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
         "\"message\":\"nodes \\\"n1\\\" is forbidden: User \\\"system:node:n2\\\" cannot get "
         "resource \\\"nodes\\\"\",\"reason\":\"Forbidden\",\"details\":{\"name\":\"n1\","
         "\"kind\":\"nodes\"},\"code\":403}\n",
         "nodes \"n1\" is forbidden: User \"system:node:n2\" cannot get resource \"nodes\"");
  expect(401, "application/json",
         "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
         "\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}",
         "Unauthorized");
}

static void other_bodies_get_client_go_wording(void **state) {
  expect(401, "", "", "the server has asked for the client to provide credentials");
  expect(404, "text/plain", "404 page not found\n", "the server could not find the requested resource");
  expect(403, "text/plain; charset=utf-8", "  forbidden: no way \n", "forbidden: no way");
  expect(500, "text/plain", "boom", "an error on the server (\"boom\") has prevented the request from succeeding");
  expect(502, "application/octet-stream", "\x01\x02", "an error on the server (\"unknown\") has prevented the request from succeeding");
  expect(418, "", "teapot", "the server responded with the status code 418 but did not return more information");
  expect(409, "", "", "the server reported a conflict");
  expect(429, "", "", "the server has received too many requests and has asked us to try again later");
  expect(503, "", "", "the server is currently unable to handle the request");
  /* JSON that is no Status, a Status without a message, garbage */
  expect(404, "application/json", "{\"kind\":\"Pod\"}", "the server could not find the requested resource");
  expect(422, "application/json", "{\"kind\":\"Status\",\"code\":422}",
         "the server rejected our request due to an error in our request");
  expect(410, "application/json", "{\"kind\":\"Sta", "the server responded with the status code 410 but did not return more information");
}

static void long_text_is_capped(void **state) {
  char body[5000];
  memset(body, 'x', sizeof body - 1);
  body[sizeof body - 1] = 0;
  nl_err_t *err = err_of(500, "text/plain", body);
  assert_true(strlen(err->msg) < 2200);
  nl_err_free(&err);
}

static void reasons_from_the_body_or_the_code(void **state) {
  assert_int_equal(reason(409, "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"code\":409}"),
                   NL_KUBE_REASON_ALREADY_EXISTS);
  assert_int_equal(reason(409, "{\"kind\":\"Status\",\"code\":409}"), NL_KUBE_REASON_CONFLICT);
  assert_int_equal(reason(410, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}"),
                   NL_KUBE_REASON_EXPIRED);
  assert_int_equal(reason(410, ""), NL_KUBE_REASON_GONE);
  assert_int_equal(reason(404, "not json"), NL_KUBE_REASON_NOT_FOUND);
  assert_int_equal(reason(403, "{\"kind\":\"Status\",\"reason\":\"SomethingNew\",\"code\":403}"),
                   NL_KUBE_REASON_FORBIDDEN);
  assert_int_equal(reason(500, "{\"kind\":\"Status\",\"reason\":\"ServerTimeout\"}"),
                   NL_KUBE_REASON_SERVER_TIMEOUT);
  assert_int_equal(reason(302, ""), NL_KUBE_REASON_UNKNOWN);
  assert_string_equal(nl_kube_reason_name(NL_KUBE_REASON_NOT_FOUND), "NotFound");
  assert_string_equal(nl_kube_reason_name(NL_KUBE_REASON_UNKNOWN), "");
  assert_int_equal(nl_kube_reason_parse("Gone", 4), NL_KUBE_REASON_GONE);
  assert_int_equal(nl_kube_reason_parse("Gon", 3), NL_KUBE_REASON_UNKNOWN);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(status_body_gives_its_message),
      cmocka_unit_test(other_bodies_get_client_go_wording),
      cmocka_unit_test(long_text_is_capped),
      cmocka_unit_test(reasons_from_the_body_or_the_code),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
