/* A test harness for cmocka tests of the CRI client against the in-process fake
 * CRI server: one loop, the fake on a socket in a fresh temporary directory, and
 * a client connected to it. Include after <cmocka.h>. */
#ifndef NL_TEST_FAKE_CRI_HARNESS_H
#define NL_TEST_FAKE_CRI_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/conn.h"
#include "reactor/xalloc.h"
#include "test/fakes/fake_cri.h"

typedef struct harness {
  uv_loop_t loop;
  fake_cri_t *fake;
  nl_cri_client_t client;
  bool client_started, client_stopped, fake_stopped;
  char dir[64];
  char sock[128];
  char endpoint[160];
  uv_timer_t guard;
  bool timed_out;
} harness_t;

static inline void harness_fake_stopped(void *ctx) { *(bool *)ctx = true; }

static inline void harness_client_stopped(nl_cri_client_t *c) {
  harness_t *h = container_of(c, harness_t, client);
  h->client_stopped = true;
}

/* Starts the fake only (the client with harness_connect). */
static inline void harness_init(harness_t *h) {
  memset(h, 0, sizeof(*h));
  assert_int_equal(uv_loop_init(&h->loop), 0);
  snprintf(h->dir, sizeof(h->dir), "/tmp/nl-fakecri-XXXXXX");
  assert_non_null(mkdtemp(h->dir));
  snprintf(h->sock, sizeof(h->sock), "%s/cri.sock", h->dir);
  snprintf(h->endpoint, sizeof(h->endpoint), "unix://%s", h->sock);
  nl_err_t *err = NULL;
  h->fake = fake_cri_new(&h->loop, h->sock, &err);
  if (!h->fake) fail_msg("%s", nl_err_msg(err));
  uv_timer_init(&h->loop, &h->guard);
}

static inline void harness_connect(harness_t *h, const nl_cri_opts_t *opts) {
  nl_err_t *err = NULL;
  if (nl_cri_client_init(&h->client, &h->loop, h->endpoint, opts, &err) < 0)
    fail_msg("%s", nl_err_msg(err));
  h->client_started = true;
}

/* Fake and client, with short deadlines unless opts says otherwise. */
static inline void harness_start(harness_t *h, const nl_cri_opts_t *opts) {
  harness_init(h);
  nl_cri_opts_t o = {.timeout_ms = 2000, .backoff_initial_ms = 20, .backoff_max_ms = 100};
  harness_connect(h, opts ? opts : &o);
}

static inline void harness_guard_fired(uv_timer_t *t) {
  harness_t *h = container_of(t, harness_t, guard);
  h->timed_out = true;
}

/* Runs the loop until *counter reaches target; fails the test after timeout_ms. */
static inline void harness_wait(harness_t *h, const int *counter, int target,
                                uint64_t timeout_ms) {
  h->timed_out = false;
  uv_timer_start(&h->guard, harness_guard_fired, timeout_ms, 0);
  while (*counter < target && !h->timed_out) uv_run(&h->loop, UV_RUN_ONCE);
  uv_timer_stop(&h->guard);
  if (*counter < target)
    fail_msg("timed out after %llu ms: %d of %d", (unsigned long long)timeout_ms, *counter,
             target);
}

/* Runs the loop for ms milliseconds. */
static inline void harness_sleep(harness_t *h, uint64_t ms) {
  h->timed_out = false;
  uv_timer_start(&h->guard, harness_guard_fired, ms, 0);
  while (!h->timed_out) uv_run(&h->loop, UV_RUN_ONCE);
}

/* Stops the client (if started and not yet stopped) and the fake, runs the loop
 * until every handle has closed and asserts the loop closes cleanly. */
static inline void harness_finish(harness_t *h) {
  if (h->client_started && !h->client_stopped && h->client.state != NL_CRI_STOPPING)
    nl_cri_client_stop(&h->client, harness_client_stopped);
  if (h->fake) fake_cri_stop(h->fake, harness_fake_stopped, &h->fake_stopped);
  h->fake = NULL;
  uv_close((uv_handle_t *)&h->guard, NULL);
  assert_int_equal(uv_run(&h->loop, UV_RUN_DEFAULT), 0);
  assert_true(h->fake_stopped);
  if (h->client_started) assert_true(h->client_stopped);
  assert_int_equal(uv_loop_close(&h->loop), 0);
  rmdir(h->dir);
}

#endif
