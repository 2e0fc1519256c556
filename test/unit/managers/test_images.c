/* The image manager's pulls with credentials, against the in-process fake CRI
 * acting as a registry with basic authentication: each credential the pull
 * secrets have for the image is tried in turn, in the keyring's order, until
 * one pulls; when none does, ErrImagePull names every distinct error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "managers/images.h"
#include "test/fakes/fake_cri_harness.h"

#define IMAGE "reg.example.com:5000/app:v1"

/* The ctx of a pull: the keyring its credentials come from, and its outcome. */
typedef struct result {
  const nl_keyring_t *keyring;
  int done;
  char *ref, *reason, *message;
} result_t;

static void on_image(const char *ref, const char *reason, const char *message, void *ctx) {
  result_t *r = ctx;
  r->ref = ref ? nl_xstrdup(ref) : NULL;
  r->reason = reason ? nl_xstrdup(reason) : NULL;
  r->message = message ? nl_xstrdup(message) : NULL;
  r->done++;
}

static int creds(void *ctx, const nl_keyring_t **keyring, char **msg) {
  *keyring = ((result_t *)ctx)->keyring;
  return 0;
}

/* A docker config of one credential for the image's registry. */
static void add_cred(nl_keyring_t *k, const char *user, const char *password) {
  char *json = nl_xasprintf(
      "{\"auths\":{\"https://reg.example.com:5000\":{\"username\":\"%s\",\"password\":\"%s\"}}}",
      user, password);
  nl_err_t *err = NULL;
  assert_int_equal(nl_keyring_add(k, json, strlen(json), true, &err), 0);
  free(json);
}

/* Pulls IMAGE (policy Always) with keyring k; the outcome in *r. */
static void pull(harness_t *h, nl_keyring_t *k, result_t *r) {
  nl_images_t im;
  nl_images_init(&im, &h->loop, &h->client, false, 0, 0, 0);
  nl_images_req_t req = {0};
  nl_event_ref_t ref = {.kind = "Pod", .namespace_ = "ns", .name = "p", .uid = "uid-1"};
  r->keyring = k;
  nl_images_ensure(&im, &req, &ref, "ns/p", IMAGE, "Always", creds, on_image, r);
  harness_wait(h, &r->done, 1, 5000);
  nl_images_free(&im);
}

static void result_free(result_t *r) {
  free(r->ref);
  free(r->reason);
  free(r->message);
}

static void test_each_credential_in_turn(void **state) {
  (void)state;
  harness_t h;
  harness_start(&h, NULL);
  fake_cri_set_pull_auth(h.fake, "good", "right");
  nl_keyring_t k = {0};
  add_cred(&k, "bad", "wrong"); /* the pod's first pull secret */
  add_cred(&k, "good", "right");
  result_t r = {0};
  pull(&h, &k, &r);
  assert_null(r.reason);
  assert_non_null(r.ref);
  assert_string_equal(fake_cri_pull_users(h.fake), "bad,good");
  result_free(&r);
  nl_keyring_free(&k);
  harness_finish(&h);
}

static void test_every_credential_refused(void **state) {
  (void)state;
  harness_t h;
  harness_start(&h, NULL);
  fake_cri_set_pull_auth(h.fake, "good", "right");
  /* The first attempt meets another error: both are named, in order. */
  fake_cri_fault_t f = {.kind = FAKE_CRI_STATUS, .code = 14, .message = "registry down",
                        .times = 1};
  fake_cri_set_fault(h.fake, "PullImage", &f);
  nl_keyring_t k = {0};
  add_cred(&k, "bad1", "wrong");
  add_cred(&k, "bad2", "wrong");
  result_t r = {0};
  pull(&h, &k, &r);
  assert_null(r.ref);
  assert_string_equal(r.reason, NL_IMAGE_ERR_PULL);
  assert_string_equal(r.message,
                      "[rpc error: code = Unavailable desc = registry down, rpc error: code = "
                      "Unknown desc = failed to pull and unpack image \"" IMAGE "\": pulling from "
                      "host failed with status code: 401 Unauthorized]");
  assert_string_equal(fake_cri_pull_users(h.fake), "bad2"); /* the fault's call never got there */
  result_free(&r);
  nl_keyring_free(&k);
  harness_finish(&h);
}

static void test_without_matching_credentials(void **state) {
  (void)state;
  harness_t h;
  harness_start(&h, NULL);
  fake_cri_set_pull_auth(h.fake, "good", "right");
  nl_keyring_t k = {0};
  const char *other = "{\"auths\":{\"quay.io\":{\"username\":\"good\",\"password\":\"right\"}}}";
  nl_err_t *err = NULL;
  assert_int_equal(nl_keyring_add(&k, other, strlen(other), true, &err), 0);
  result_t r = {0};
  pull(&h, &k, &r);
  /* One anonymous pull, whose refusal is the message as it is (no brackets). */
  assert_string_equal(r.reason, NL_IMAGE_ERR_PULL);
  assert_string_equal(r.message, "rpc error: code = Unknown desc = failed to pull and unpack "
                                 "image \"" IMAGE "\": pulling from host failed with status "
                                 "code: 401 Unauthorized");
  assert_string_equal(fake_cri_pull_users(h.fake), "-");
  result_free(&r);
  nl_keyring_free(&k);
  harness_finish(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_credential_in_turn),
      cmocka_unit_test(test_every_credential_refused),
      cmocka_unit_test(test_without_matching_credentials),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
