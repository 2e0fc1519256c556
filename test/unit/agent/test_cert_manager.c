/* The certificate manager against fake_client.c: CSRs are created, watched and
 * answered by the test, which signs them with a throwaway CA. */
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

#include <jansson.h>
#include <mbedtls/base64.h>

#include "../kube/fake_client.h"
#include "agent/cert_manager.h"
#include "agent/kube/csr.h"
#include "cert_ca.h"

static const char *const usages[] = {"digital signature", "key encipherment", "client auth", NULL};

typedef struct world {
  uv_loop_t loop;
  nl_certmgr_t *m;
  char dir[64];
  int certs;
  char *pem, *path;
  time_t not_after;
  bool stopped;
} world_t;

/* The wall clock the manager reads: the real one plus clock_step (seconds),
 * so that a test can step it as NTP would; libuv's timers run on the
 * monotonic clock, which this leaves alone. */
static time_t clock_step;
time_t time(time_t *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  time_t v = ts.tv_sec + clock_step;
  if (t) *t = v;
  return v;
}

static int dummy; /* the fake ignores the client */
#define CLIENT ((nl_kube_client_t *)&dummy)

static void on_cert(void *ctx, const char *pem, const char *path, const nl_x509_info_t *info) {
  world_t *w = ctx;
  w->certs++;
  free(w->pem);
  free(w->path);
  w->pem = strdup(pem);
  w->path = strdup(path);
  w->not_after = info->not_after;
}

static void on_stopped(void *ctx) { ((world_t *)ctx)->stopped = true; }

static void guard_fired(uv_timer_t *t) { *(bool *)t->data = true; }

/* Runs the loop until cond holds (false after 10 s). */
static bool run_until(world_t *w, bool (*cond)(world_t *)) {
  bool expired = false;
  uv_timer_t guard;
  uv_timer_init(&w->loop, &guard);
  guard.data = &expired;
  uv_timer_start(&guard, guard_fired, 10000, 0);
  while (!cond(w) && !expired) uv_run(&w->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&guard, NULL);
  uv_run(&w->loop, UV_RUN_NOWAIT);
  return !expired;
}

static size_t want_reqs;
static bool has_reqs(world_t *w) { (void)w; return fake_nreqs >= want_reqs; }
static bool has_cert(world_t *w) { return w->certs > 0; }
static bool stopped(world_t *w) { fake_settle(); return w->stopped; }

static world_t *world_new(const char *pem, bool rotate, uint64_t wait_ms) {
  world_t *w = calloc(1, sizeof *w);
  uv_loop_init(&w->loop);
  strcpy(w->dir, "/tmp/nl-certmgr-XXXXXX");
  assert_non_null(mkdtemp(w->dir));
  fake_reset();
  nl_certmgr_opts_t o = {
      .signer = NL_KUBE_SIGNER_CLIENT,
      .usages = usages,
      .subject = {.cn = "system:node:n1", .org = "system:nodes"},
      .cert_dir = w->dir,
      .prefix = "kubelet-client",
      .rotate = rotate,
      .pem = pem,
      .wait_timeout_ms = wait_ms,
      .backoff_initial_ms = 20,
      .backoff_max_ms = 40,
      .recheck_ms = 20,
  };
  nl_err_t *err = NULL;
  assert_int_equal(nl_certmgr_new(&w->m, &w->loop, CLIENT, NULL, &o, on_cert, w, &err), 0);
  return w;
}

static void world_free(world_t *w) {
  nl_certmgr_stop(w->m, on_stopped, w);
  assert_true(run_until(w, stopped));
  assert_int_equal(uv_loop_close(&w->loop), 0);
  char *cmd = NULL;
  assert_true(asprintf(&cmd, "rm -rf '%s'", w->dir) > 0);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  free(w->pem);
  free(w->path);
  free(w);
  fake_reset();
}

/* The POST of a CSR: checks it, returns its PEM request (caller frees). */
static char *posted_csr(fake_req_t *r) {
  assert_string_equal(r->method, "POST");
  assert_string_equal(r->path, NL_KUBE_CSR_PATH);
  assert_true(r->fail_on_dial);
  json_t *o = json_loads(r->body, 0, NULL);
  json_t *spec = json_object_get(o, "spec");
  assert_string_equal(json_string_value(json_object_get(spec, "signerName")), NL_KUBE_SIGNER_CLIENT);
  assert_int_equal(json_array_size(json_object_get(spec, "usages")), 3);
  const char *b64 = json_string_value(json_object_get(spec, "request"));
  size_t n = 0;
  char *pem = calloc(1, 4096);
  assert_int_equal(mbedtls_base64_decode((unsigned char *)pem, 4095, &n, (const unsigned char *)b64,
                                         strlen(b64)), 0);
  json_decref(o);
  return pem;
}

static void respond_created(const char *name) {
  char *body = NULL;
  assert_true(asprintf(&body, "{\"kind\":\"CertificateSigningRequest\",\"metadata\":{\"name\":\"%s\"}}",
                       name) > 0);
  fake_respond(fake_last(), 201, body);
  free(body);
}

/* Answers the LIST of the CSR's reflector with one CSR in the given status. */
static void respond_list(const char *name, const char *status) {
  fake_req_t *r = fake_last();
  assert_string_equal(r->method, "GET");
  char *sel = NULL;
  assert_true(asprintf(&sel, "fieldSelector=metadata.name%%3D%s", name) > 0);
  assert_non_null(strstr(r->path, sel));
  free(sel);
  char *body = NULL;
  assert_true(asprintf(&body, "{\"kind\":\"CertificateSigningRequestList\",\"metadata\":"
                       "{\"resourceVersion\":\"7\"},\"items\":[{\"metadata\":{\"name\":\"%s\"},"
                       "\"status\":%s}]}", name, status) > 0);
  fake_respond(r, 200, body);
  free(body);
}

static char *issued_status(const char *csr_pem, time_t from, time_t to) {
  char *cert = test_ca_sign(csr_pem, from, to);
  size_t n = 0, len = strlen(cert);
  mbedtls_base64_encode(NULL, 0, &n, (const unsigned char *)cert, len);
  unsigned char *b64 = malloc(n);
  mbedtls_base64_encode(b64, n, &n, (const unsigned char *)cert, len);
  char *status = NULL;
  assert_true(asprintf(&status, "{\"conditions\":[{\"type\":\"Approved\"}],\"certificate\":\"%s\"}",
                       b64) > 0);
  free(b64);
  free(cert);
  return status;
}

/* No certificate: key, CSR, watch, issued, stored, handed over, then waiting
 * for the rotation deadline. */
static void first_certificate(void **state) {
  (void)state;
  world_t *w = world_new(NULL, true, 0);
  nl_certmgr_start(w->m);
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_KEYGEN); /* off the loop */
  want_reqs = 1;
  assert_true(run_until(w, has_reqs));
  char *csr = posted_csr(fake_last());
  respond_created("csr-1");
  want_reqs = 2;
  assert_true(run_until(w, has_reqs));
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_PENDING);
  time_t now = time(NULL);
  char *st = issued_status(csr, now - 10, now + 3600);
  respond_list("csr-1", st);
  assert_true(run_until(w, has_cert));
  assert_int_equal(w->certs, 1);
  assert_int_equal(w->not_after, now + 3600);
  assert_non_null(strstr(w->pem, "-----BEGIN CERTIFICATE-----"));
  assert_non_null(strstr(w->pem, "-----BEGIN EC PRIVATE KEY-----"));
  assert_int_equal(strncmp(w->path, w->dir, strlen(w->dir)), 0);
  assert_int_equal(access(w->path, R_OK), 0);
  assert_true(nl_certmgr_valid(w->m));
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_WAITING);
  free(st);
  free(csr);
  world_free(w);
}

/* A denied CSR is an error, and a new key and CSR follow after the back-off. */
static void denied_then_retried(void **state) {
  (void)state;
  world_t *w = world_new(NULL, true, 0);
  nl_certmgr_start(w->m);
  want_reqs = 1;
  assert_true(run_until(w, has_reqs));
  char *csr1 = posted_csr(fake_last());
  respond_created("csr-1");
  want_reqs = 2;
  assert_true(run_until(w, has_reqs));
  respond_list("csr-1", "{\"conditions\":[{\"type\":\"Denied\",\"reason\":\"No\",\"message\":\"m\"}]}");
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_BACKOFF);
  want_reqs = 3;
  assert_true(run_until(w, has_reqs));
  char *csr2 = posted_csr(fake_last());
  assert_string_not_equal(csr1, csr2); /* a new key */
  assert_int_equal(w->certs, 0);
  free(csr1);
  free(csr2);
  world_free(w); /* with a POST in flight */
}

/* Nothing issued within the wait: the attempt ends and starts over. */
static void wait_times_out(void **state) {
  (void)state;
  world_t *w = world_new(NULL, true, 30);
  nl_certmgr_start(w->m);
  want_reqs = 1;
  assert_true(run_until(w, has_reqs));
  free(posted_csr(fake_last()));
  respond_created("csr-1");
  want_reqs = 3; /* the LIST, never answered; then a new POST */
  assert_true(run_until(w, has_reqs));
  assert_true(fake_reqs[1]->cancelled);
  free(posted_csr(fake_last()));
  world_free(w);
}

/* A refused request (the server unreachable) is retried too. */
static void request_fails(void **state) {
  (void)state;
  world_t *w = world_new(NULL, true, 0);
  nl_certmgr_start(w->m);
  want_reqs = 1;
  assert_true(run_until(w, has_reqs));
  fake_fail(fake_last(), 111, "dial tcp 127.0.0.1:1: connect: connection refused");
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_BACKOFF);
  want_reqs = 2;
  assert_true(run_until(w, has_reqs));
  world_free(w);
}

/* A valid certificate waits for 70-90 % of its life; without rotation, the
 * manager has nothing to do. */
static void valid_certificate_waits(void **state) {
  (void)state;
  char *key = NULL;
  time_t now = time(NULL);
  char *cert = test_ca_pair("system:node:n1", now - 10, now + 3600, &key);
  world_t *w = world_new(cert, true, 0);
  nl_certmgr_start(w->m);
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_WAITING);
  uv_run(&w->loop, UV_RUN_NOWAIT);
  assert_int_equal(fake_nreqs, 0);
  world_free(w);
  w = world_new(cert, false, 0);
  nl_certmgr_start(w->m);
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_DONE);
  world_free(w);
  /* another node's name: rotate now, as upstream's template check */
  char *key2 = NULL;
  char *other = test_ca_pair("system:node:n2", now - 10, now + 3600, &key2);
  w = world_new(other, true, 0);
  nl_certmgr_start(w->m);
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_KEYGEN);
  world_free(w); /* stopped during key generation */
  free(cert);
  free(other);
  free(key);
  free(key2);
}

/* A certificate valid from now+from to now+to seconds; the wall clock
 * stepped by at_start when the manager starts, then by later: it waits, and
 * then starts a rotation (a CSR) within the 10 s of run_until. */
static void rotates_across_a_step(time_t from, time_t to, time_t at_start, time_t later) {
  char *key = NULL;
  clock_step = 0; /* (after a failed test too) */
  time_t now = time(NULL);
  char *cert = test_ca_pair("system:node:n1", now + from, now + to, &key);
  clock_step = at_start;
  world_t *w = world_new(cert, true, 0);
  nl_certmgr_start(w->m);
  uv_run(&w->loop, UV_RUN_NOWAIT);
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_WAITING);
  assert_int_equal(fake_nreqs, 0);
  clock_step = later;
  want_reqs = 1;
  assert_true(run_until(w, has_reqs));
  clock_step = 0;
  world_free(w);
  free(cert);
  free(key);
}

/* The deadline is computed with the wall clock 10 minutes behind (a start, or
 * a rotation, while NTP has yet to correct it); once the clock reads past the
 * deadline the rotation starts within a recheck, not 10 minutes after it
 * (with a short-lived certificate: after its expiry). */
static void clock_step_does_not_hold_the_rotation(void **state) {
  (void)state;
  /* the deadline: 70-90 % into 3610 s, 2517 to 3239 s from now; then the
   * clock past any deadline, before the expiry */
  rotates_across_a_step(-10, 3600, -600, 3300);
}

/* The other way round: the deadline computed with the right clock, which is
 * then set back 10 minutes during the wait; the rotation still starts at the
 * deadline (the loop's clock says it has come), not after the wall clock's
 * error is corrected. */
static void clock_set_back_during_the_wait(void **state) {
  (void)state;
  /* the deadline: 70-90 % into 5 s, 1.5 to 3.5 s from now */
  rotates_across_a_step(-1, 4, 0, -600);
}

/* An expired certificate is not valid, and is replaced at once. */
static void expired_certificate(void **state) {
  (void)state;
  char *key = NULL;
  time_t now = time(NULL);
  char *cert = test_ca_pair("system:node:n1", now - 7200, now - 3600, &key);
  world_t *w = world_new(cert, true, 0);
  assert_false(nl_certmgr_valid(w->m));
  nl_certmgr_start(w->m);
  assert_int_equal(nl_certmgr_state(w->m), NL_CERTMGR_KEYGEN);
  world_free(w);
  free(cert);
  free(key);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(first_certificate),
      cmocka_unit_test(denied_then_retried),
      cmocka_unit_test(wait_times_out),
      cmocka_unit_test(request_fails),
      cmocka_unit_test(valid_certificate_waits),
      cmocka_unit_test(clock_step_does_not_hold_the_rotation),
      cmocka_unit_test(clock_set_back_during_the_wait),
      cmocka_unit_test(expired_certificate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
