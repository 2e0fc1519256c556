/* The CRI client against the fake CRI server's injected faults: each fault gives
 * the caller one clear error, nothing crashes or leaks, and the next call
 * succeeds once the fault is lifted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cri/runtime.h"
#include "test/fakes/fake_cri_harness.h"

#define VERSION "/runtime.v1.RuntimeService/Version"
#define LIST_SANDBOX "/runtime.v1.RuntimeService/ListPodSandbox"

typedef struct result {
  int calls;
  int code;
  char msg[512];
  bool has_resp;
  char runtime_name[32];
  int *done;
  int own_done; /* the counter of call_wait */
} result_t;

static void on_result(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  result_t *r = ctx;
  r->calls++;
  r->code = st->code;
  snprintf(r->msg, sizeof(r->msg), "%s", st->message);
  r->has_resp = resp != NULL;
  if (resp && resp->descriptor == &runtime__v1__version_response__descriptor)
    snprintf(r->runtime_name, sizeof(r->runtime_name), "%s",
             ((Runtime__V1__VersionResponse *)resp)->runtime_name);
  (*r->done)++;
}

static void call(harness_t *h, const char *path, result_t *r, int *done, uint64_t timeout_ms) {
  memset(r, 0, sizeof(*r));
  r->code = -1;
  r->done = done;
  if (strcmp(path, VERSION) == 0) {
    Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
    req.version = "v1";
    nl_cri_client_call(&h->client, path, &req.base, &runtime__v1__version_response__descriptor,
                       timeout_ms, on_result, r);
  } else {
    Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
    nl_cri_client_call(&h->client, path, &req.base,
                       &runtime__v1__list_pod_sandbox_response__descriptor, timeout_ms,
                       on_result, r);
  }
}

/* One call to completion, waited for up to wait_ms; asserts its callback ran
 * once. */
static void call_wait(harness_t *h, const char *path, result_t *r, uint64_t timeout_ms,
                      uint64_t wait_ms) {
  call(h, path, r, &r->own_done, timeout_ms);
  harness_wait(h, &r->own_done, 1, wait_ms);
  assert_int_equal(r->calls, 1);
}

/* One Version call to completion; asserts it succeeded once. */
static void expect_version_ok(harness_t *h) {
  result_t r;
  call_wait(h, VERSION, &r, 0, 3000);
  if (r.code != 0) fail_msg("Version failed: code %d: %s", r.code, r.msg);
  assert_true(r.has_resp);
  assert_string_equal(r.runtime_name, "fake-cri");
}

static void set_fault(harness_t *h, const char *method, fake_cri_fault_kind_t kind,
                      unsigned times) {
  fake_cri_fault_t f = {.kind = kind, .times = times};
  fake_cri_set_fault(h->fake, method, &f);
}

static void test_baseline(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  expect_version_ok(&h);
  assert_int_equal(fake_cri_stats(h.fake).calls, 1);
  harness_finish(&h);
}

static void test_status_verbatim(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  /* Percent signs, non-ASCII and a newline survive grpc-message encoding. */
  const char *msg = "injected: 100% disk full on /var/lib/\xc3\xa9t\xc3\xa9\nsecond line";
  fake_cri_fault_t f = {.kind = FAKE_CRI_STATUS, .code = 9, .message = msg};
  fake_cri_set_fault(h.fake, "Version", &f);
  result_t r;
  call_wait(&h, VERSION, &r, 0, 3000);
  assert_int_equal(r.code, NL_GRPC_FAILED_PRECONDITION);
  assert_string_equal(r.msg, msg);
  assert_false(r.has_resp);
  /* Only Version is affected. */
  call_wait(&h, LIST_SANDBOX, &r, 0, 3000);
  assert_int_equal(r.code, 0);
  fake_cri_clear_faults(h.fake);
  expect_version_ok(&h);
  assert_int_equal(fake_cri_stats(h.fake).connections, 1);
  harness_finish(&h);
}

static void test_every_status_code(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  for (int code = 1; code <= 16; code++) {
    char msg[64];
    snprintf(msg, sizeof(msg), "code %d injected", code);
    fake_cri_fault_t f = {.kind = FAKE_CRI_STATUS, .code = code, .message = msg, .times = 1};
    fake_cri_set_fault(h.fake, NULL, &f);
    result_t r;
    call_wait(&h, VERSION, &r, 0, 3000);
    assert_int_equal(r.code, code);
    assert_string_equal(r.msg, msg);
  }
  expect_version_ok(&h); /* times=1 lifted each fault by itself */
  harness_finish(&h);
}

static void test_times_lifts(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  fake_cri_fault_t f = {.kind = FAKE_CRI_STATUS, .code = 14, .message = "down", .times = 2};
  fake_cri_set_fault(h.fake, "Version", &f);
  for (int i = 0; i < 2; i++) {
    result_t r;
    call_wait(&h, VERSION, &r, 0, 3000);
    assert_int_equal(r.code, NL_GRPC_UNAVAILABLE);
    assert_string_equal(r.msg, "down");
  }
  expect_version_ok(&h);
  harness_finish(&h);
}

static void test_global_and_override(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  nl_err_t *err = NULL;
  assert_int_equal(fake_cri_apply_line(h.fake, "* status 14 runtime is down", &err), 0);
  assert_int_equal(fake_cri_apply_line(h.fake, "Version ok", &err), 0);
  assert_int_equal(fake_cri_apply_line(h.fake, "Version delay 1", &err), 0);
  int done = 0;
  result_t a, b;
  call(&h, LIST_SANDBOX, &a, &done, 0);
  call(&h, VERSION, &b, &done, 0);
  harness_wait(&h, &done, 2, 3000);
  assert_int_equal(a.code, NL_GRPC_UNAVAILABLE);
  assert_string_equal(a.msg, "runtime is down");
  assert_int_equal(b.code, 0); /* the per-method rule (a pure delay) wins */
  assert_int_equal(fake_cri_apply_line(h.fake, "clear", &err), 0);
  call_wait(&h, LIST_SANDBOX, &a, 0, 3000);
  assert_int_equal(a.code, 0);
  harness_finish(&h);
}

static void test_delay(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  fake_cri_fault_t f = {.kind = FAKE_CRI_ANSWER, .delay_ms = 150};
  fake_cri_set_fault(h.fake, "Version", &f);
  uint64_t t0 = uv_now(&h.loop);
  expect_version_ok(&h);
  uv_update_time(&h.loop);
  assert_true(uv_now(&h.loop) - t0 >= 150);
  /* A delay beyond the call's deadline: DEADLINE_EXCEEDED, and the fake sees
   * the stream reset (the client cancels it). */
  f.delay_ms = 1000;
  fake_cri_set_fault(h.fake, "Version", &f);
  result_t r;
  call_wait(&h, VERSION, &r, 100, 3000);
  assert_int_equal(r.code, NL_GRPC_DEADLINE_EXCEEDED);
  assert_true(r.msg[0] != 0);
  fake_cri_clear_faults(h.fake);
  expect_version_ok(&h);
  assert_int_equal(fake_cri_stats(h.fake).cancelled, 1);
  harness_finish(&h);
}

static void test_stall_deadline(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  set_fault(&h, "Version", FAKE_CRI_STALL, 0);
  int done = 0;
  result_t r;
  call(&h, VERSION, &r, &done, 200);
  uint64_t t0 = uv_now(&h.loop);
  harness_wait(&h, &done, 1, 3000);
  uv_update_time(&h.loop);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.code, NL_GRPC_DEADLINE_EXCEEDED);
  assert_string_equal(r.msg, "context deadline exceeded");
  assert_true(uv_now(&h.loop) - t0 >= 190);
  assert_true(uv_now(&h.loop) - t0 < 1000);
  /* Other methods still work on the same connection while one stalls. */
  call_wait(&h, LIST_SANDBOX, &r, 0, 3000);
  assert_int_equal(r.code, 0);
  fake_cri_clear_faults(h.fake);
  expect_version_ok(&h);
  fake_cri_stats_t s = fake_cri_stats(h.fake);
  assert_int_equal(s.cancelled, 1);
  assert_int_equal(s.open_streams, 0);
  assert_int_equal(s.connections, 1);
  harness_finish(&h);
}

static void test_drop(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  expect_version_ok(&h);
  set_fault(&h, "Version", FAKE_CRI_DROP, 1);
  result_t r;
  call_wait(&h, VERSION, &r, 0, 3000);
  /* The request reached the server, which may have acted on it: the call fails
   * (grpc-go: Unavailable, "error reading from server: EOF"), it is not retried. */
  if (r.code != NL_GRPC_UNAVAILABLE)
    fail_msg("dropped call: want UNAVAILABLE, got code %d (%s); server saw %llu calls",
             r.code, r.msg, (unsigned long long)fake_cri_stats(h.fake).calls);
  assert_non_null(strstr(r.msg, "EOF"));
  expect_version_ok(&h); /* on a new connection */
  assert_int_equal(fake_cri_stats(h.fake).connections, 2);
  harness_finish(&h);
}

static void test_drop_with_calls_in_flight(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  expect_version_ok(&h);
  /* Ten ListPodSandbox calls stall on the connection; a Version call drops it. */
  set_fault(&h, "ListPodSandbox", FAKE_CRI_STALL, 0);
  int done = 0;
  result_t rs[10];
  for (int i = 0; i < 10; i++) call(&h, LIST_SANDBOX, &rs[i], &done, 0);
  fake_cri_fault_t d = {.kind = FAKE_CRI_DROP, .delay_ms = 50, .times = 1};
  fake_cri_set_fault(h.fake, "Version", &d);
  result_t v;
  int vdone = 0;
  call(&h, VERSION, &v, &vdone, 0);
  harness_wait(&h, &done, 10, 3000);
  harness_wait(&h, &vdone, 1, 3000);
  for (int i = 0; i < 10; i++) {
    assert_int_equal(rs[i].calls, 1);
    assert_int_equal(rs[i].code, NL_GRPC_UNAVAILABLE);
  }
  assert_int_equal(v.code, NL_GRPC_UNAVAILABLE);
  fake_cri_clear_faults(h.fake);
  expect_version_ok(&h);
  harness_finish(&h);
}

static void test_malformed(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  expect_version_ok(&h);
  set_fault(&h, "Version", FAKE_CRI_MALFORMED, 1);
  result_t r;
  call_wait(&h, VERSION, &r, 0, 3000);
  /* A connection error (grpc-go: Unavailable or Internal), never OK. */
  if (r.code != NL_GRPC_UNAVAILABLE && r.code != NL_GRPC_INTERNAL)
    fail_msg("malformed frame: got code %d (%s)", r.code, r.msg);
  assert_true(r.msg[0] != 0);
  expect_version_ok(&h);
  assert_int_equal(fake_cri_stats(h.fake).connections, 2);
  harness_finish(&h);
}

static void test_oversize(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  set_fault(&h, "Version", FAKE_CRI_OVERSIZE, 1);
  result_t r;
  call_wait(&h, VERSION, &r, 0, 5000);
  assert_int_equal(r.code, NL_GRPC_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(r.msg, "16777217"));
  assert_false(r.has_resp);
  expect_version_ok(&h);
  harness_finish(&h);
}

static void test_bad_message(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  set_fault(&h, "Version", FAKE_CRI_BAD_MESSAGE, 1);
  result_t r;
  call_wait(&h, VERSION, &r, 0, 3000);
  assert_int_equal(r.code, NL_GRPC_INTERNAL);
  assert_non_null(strstr(r.msg, "unmarshal"));
  expect_version_ok(&h);
  harness_finish(&h);
}

static void test_unimplemented(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  Runtime__V1__ContainerStatsRequest req = RUNTIME__V1__CONTAINER_STATS_REQUEST__INIT;
  req.container_id = "x";
  int done = 0;
  result_t r = {.code = -1, .done = &done};
  nl_cri_client_call(&h.client, "/runtime.v1.RuntimeService/ContainerStats", &req.base,
                     &runtime__v1__container_stats_response__descriptor, 0, on_result, &r);
  harness_wait(&h, &done, 1, 3000);
  assert_int_equal(r.code, NL_GRPC_UNIMPLEMENTED);
  assert_non_null(strstr(r.msg, "ContainerStats"));
  harness_finish(&h);
}

/* No server at first: calls fail UNAVAILABLE after connect_wait_ms naming the
 * dial error; once the fake listens, the client connects by itself. */
static void test_server_absent_then_up(void **state) {
  harness_t h;
  harness_init(&h);
  fake_cri_stop(h.fake, harness_fake_stopped, &h.fake_stopped);
  h.fake = NULL;
  nl_cri_opts_t o = {.timeout_ms = 2000, .connect_wait_ms = 100, .backoff_initial_ms = 20,
                     .backoff_max_ms = 50};
  harness_connect(&h, &o);
  result_t r;
  call_wait(&h, VERSION, &r, 0, 3000);
  assert_int_equal(r.code, NL_GRPC_UNAVAILABLE);
  assert_non_null(strstr(r.msg, h.sock));
  assert_true(h.fake_stopped);
  h.fake_stopped = false;
  nl_err_t *err = NULL;
  h.fake = fake_cri_new(&h.loop, h.sock, &err);
  assert_non_null(h.fake);
  expect_version_ok(&h);
  harness_finish(&h);
}

/* ---- stop ------------------------------------------------------------------- */

typedef struct stop_ctx {
  int calls[20];
  int codes[20];
  int done;
} stop_ctx_t;

typedef struct stop_item {
  stop_ctx_t *s;
  int i;
} stop_item_t;

static void on_stop_result(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  stop_item_t *it = ctx;
  it->s->calls[it->i]++;
  it->s->codes[it->i] = st->code;
  it->s->done++;
}

static void test_stop_fails_pending_once(void **state) {
  harness_t h;
  harness_start(&h, NULL);
  expect_version_ok(&h);
  set_fault(&h, NULL, FAKE_CRI_STALL, 0);
  stop_ctx_t s = {0};
  stop_item_t items[20];
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  for (int i = 0; i < 19; i++) {
    items[i] = (stop_item_t){&s, i};
    nl_cri_client_call(&h.client, VERSION, &req.base, &runtime__v1__version_response__descriptor,
                       0, on_stop_result, &items[i]);
  }
  /* Wait until the fake holds all 19 streams. */
  int open = 0;
  for (int spin = 0; spin < 1000 && open < 19; spin++) {
    uv_run(&h.loop, UV_RUN_ONCE);
    open = (int)fake_cri_stats(h.fake).open_streams;
  }
  assert_int_equal(open, 19);
  assert_int_equal(s.done, 0);
  nl_cri_client_stop(&h.client, harness_client_stopped);
  /* A call made while stopping fails the same way. */
  items[19] = (stop_item_t){&s, 19};
  nl_cri_client_call(&h.client, VERSION, &req.base, &runtime__v1__version_response__descriptor, 0,
                     on_stop_result, &items[19]);
  assert_int_equal(s.done, 0); /* never from inside the call functions */
  harness_wait(&h, &s.done, 20, 3000);
  while (!h.client_stopped) uv_run(&h.loop, UV_RUN_ONCE);
  for (int i = 0; i < 20; i++) {
    assert_int_equal(s.calls[i], 1);
    assert_int_equal(s.codes[i], NL_GRPC_CANCELLED);
  }
  harness_finish(&h);
  for (int i = 0; i < 20; i++) assert_int_equal(s.calls[i], 1);
}

/* ---- control syntax ------------------------------------------------------------ */

static void test_control_syntax(void **state) {
  harness_t h;
  harness_init(&h);
  nl_err_t *err = NULL;
  assert_int_equal(fake_cri_apply_line(h.fake, "# comment", &err), 0);
  assert_int_equal(fake_cri_apply_line(h.fake, "   ", &err), 0);
  assert_int_equal(fake_cri_apply_line(h.fake, "Version stall times=1", &err), 0);
  assert_int_equal(fake_cri_apply_line(h.fake, "* status 14 after=50 times=2 a b  c ", &err), 0);
  assert_int_equal(fake_cri_apply_line(h.fake, "Version explode", &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "\"explode\""));
  nl_err_free(&err);
  assert_int_equal(fake_cri_apply_line(h.fake, "Version status 17 x", &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "1..16"));
  nl_err_free(&err);
  assert_int_equal(fake_cri_apply_line(h.fake, "Version delay soon", &err), -1);
  nl_err_free(&err);
  assert_int_equal(fake_cri_apply_line(h.fake, "Version drop sometimes", &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "\"sometimes\""));
  nl_err_free(&err);
  assert_int_equal(fake_cri_apply_text(h.fake, "# faults\nVersion stall\n\n* drop times=3\n", &err),
                   2);
  assert_int_equal(fake_cri_apply_text(h.fake, "Version stall\nbogus\n", &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "line 2"));
  nl_err_free(&err);
  harness_finish(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_baseline),
      cmocka_unit_test(test_status_verbatim),
      cmocka_unit_test(test_every_status_code),
      cmocka_unit_test(test_times_lifts),
      cmocka_unit_test(test_global_and_override),
      cmocka_unit_test(test_delay),
      cmocka_unit_test(test_stall_deadline),
      cmocka_unit_test(test_drop),
      cmocka_unit_test(test_drop_with_calls_in_flight),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_oversize),
      cmocka_unit_test(test_bad_message),
      cmocka_unit_test(test_unimplemented),
      cmocka_unit_test(test_server_absent_then_up),
      cmocka_unit_test(test_stop_fails_pending_once),
      cmocka_unit_test(test_control_syntax),
  };
  /* NL_TEST_FILTER=test_name runs one test (cmocka glob). */
  if (getenv("NL_TEST_FILTER")) cmocka_set_test_filter(getenv("NL_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
