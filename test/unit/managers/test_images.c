/* The image manager's pulls with credentials, against the in-process fake CRI
 * acting as a registry with basic authentication (user "good", password
 * "right"): each credential the pull secrets have for the image is tried in
 * turn, in the keyring's order, until one pulls; when none does, ErrImagePull
 * names every distinct error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "managers/images.h"
#include "test/fakes/fake_cri_harness.h"

#define IMAGE "reg.example.com:5000/app:v1"
#define REFUSED                                                                             \
  "rpc error: code = Unknown desc = failed to pull and unpack image \"" IMAGE "\": pulling " \
  "from host failed with status code: 401 Unauthorized"

/* One test: the fake, the pod's keyring, and the pull's outcome. */
typedef struct fixture {
  harness_t h;
  nl_keyring_t keyring;
  int done;
  char *ref, *reason, *message;
} fixture_t;

static int setup(void **state) {
  fixture_t *t = nl_xcalloc(1, sizeof *t);
  harness_start(&t->h, NULL);
  fake_cri_set_pull_auth(t->h.fake, "good", "right");
  *state = t;
  return 0;
}

static int teardown(void **state) {
  fixture_t *t = *state;
  free(t->ref);
  free(t->reason);
  free(t->message);
  nl_keyring_free(&t->keyring);
  harness_finish(&t->h);
  free(t);
  return 0;
}

static void on_image(const char *ref, const char *reason, const char *message, void *ctx) {
  fixture_t *t = ctx;
  t->ref = ref ? nl_xstrdup(ref) : NULL;
  t->reason = reason ? nl_xstrdup(reason) : NULL;
  t->message = message ? nl_xstrdup(message) : NULL;
  t->done++;
}

static int creds(void *ctx, const nl_keyring_t **keyring, char **msg) {
  *keyring = &((fixture_t *)ctx)->keyring;
  return 0;
}

/* A pull secret's docker config: one credential for the registry. */
static void add_secret(fixture_t *t, const char *registry, const char *user,
                       const char *password) {
  char *json = nl_xasprintf("{\"auths\":{\"%s\":{\"username\":\"%s\",\"password\":\"%s\"}}}",
                            registry, user, password);
  nl_err_t *err = NULL;
  assert_int_equal(nl_keyring_add(&t->keyring, json, strlen(json), true, &err), 0);
  free(json);
}

/* Pulls IMAGE with policy Always; the outcome in t. */
static void pull(fixture_t *t) {
  nl_images_t im;
  nl_images_init(&im, &t->h.loop, &t->h.client, false, 0, 0, 0);
  nl_images_req_t req = {0};
  nl_event_ref_t ref = {.kind = "Pod", .namespace_ = "ns", .name = "p", .uid = "uid-1"};
  nl_images_ensure(&im, &req, &ref, "ns/p", IMAGE, "Always", creds, on_image, t);
  harness_wait(&t->h, &t->done, 1, 5000);
  nl_images_free(&im);
}

static void test_each_credential_in_turn(void **state) {
  fixture_t *t = *state;
  add_secret(t, "https://reg.example.com:5000", "bad", "wrong"); /* the first pull secret */
  add_secret(t, "https://reg.example.com:5000", "good", "right");
  pull(t);
  assert_null(t->reason);
  assert_non_null(t->ref);
  assert_string_equal(fake_cri_pull_users(t->h.fake), "bad,good");
}

static void test_every_credential_refused(void **state) {
  fixture_t *t = *state;
  /* The first attempt meets another error: both are named, in order. */
  fake_cri_fault_t f = {.kind = FAKE_CRI_STATUS, .code = 14, .message = "registry down",
                        .times = 1};
  fake_cri_set_fault(t->h.fake, "PullImage", &f);
  add_secret(t, "https://reg.example.com:5000", "bad1", "wrong");
  add_secret(t, "https://reg.example.com:5000", "bad2", "wrong");
  pull(t);
  assert_null(t->ref);
  assert_string_equal(t->reason, NL_IMAGE_ERR_PULL);
  assert_string_equal(t->message,
                      "[rpc error: code = Unavailable desc = registry down, " REFUSED "]");
  /* the fault's call never reached the store */
  assert_string_equal(fake_cri_pull_users(t->h.fake), "bad2");
}

static void test_without_matching_credentials(void **state) {
  fixture_t *t = *state;
  add_secret(t, "reg.example.com", "good", "right");
  pull(t);
  /* One anonymous pull, whose refusal is the message as it is (no brackets). */
  assert_string_equal(t->reason, NL_IMAGE_ERR_PULL);
  assert_string_equal(t->message, REFUSED);
  assert_string_equal(fake_cri_pull_users(t->h.fake), "-");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_each_credential_in_turn, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_credential_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_without_matching_credentials, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
