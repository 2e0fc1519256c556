/* PLEG on a loop against the in-process fake CRI server: relisting, the
 * allocation-free unchanged relist, and the evented PLEG (GetContainerEvents)
 * with its fall-back to relisting every period when the runtime has no
 * events (as containerd 1.6). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cri/runtime.h"
#include "managers/pleg.h"
#include "test/fakes/fake_cri_harness.h"

typedef struct rec {
  harness_t h;
  nl_pleg_t pleg;
  int started, died, stopped, newer;
  char started_ids[4][72]; /* the first four started */
} rec_t;

static void on_event(const nl_pleg_event_t *ev, void *ctx) {
  rec_t *r = ctx;
  if (ev->type == NL_PLEG_CONTAINER_STARTED && r->started < 4)
    snprintf(r->started_ids[r->started], sizeof r->started_ids[0], "%s", ev->container_id);
  if (ev->type == NL_PLEG_CONTAINER_STARTED) r->started++;
  if (ev->type == NL_PLEG_CONTAINER_DIED) r->died++;
}

static void on_stopped(nl_pleg_t *p) { container_of(p, rec_t, pleg)->stopped++; }

static void on_newer(const nl_rt_pod_status_t *st, void *ctx) { ((rec_t *)ctx)->newer++; }

static void start(rec_t *r, uint64_t period_ms, bool evented, const char *fault) {
  memset(r, 0, sizeof *r);
  harness_start(&r->h, NULL);
  if (fault) {
    nl_err_t *err = NULL;
    if (fake_cri_apply_line(r->h.fake, fault, &err) < 0) fail_msg("%s", nl_err_msg(err));
  }
  nl_pleg_init(&r->pleg, &r->h.loop, &r->h.client, period_ms, on_event, r);
  if (evented) nl_pleg_use_events(&r->pleg);
  nl_pleg_start(&r->pleg);
  harness_wait(&r->h, (const int *)&r->pleg.relists, 1, 5000);
}

static void finish(rec_t *r) {
  nl_pleg_stop(&r->pleg, on_stopped);
  harness_wait(&r->h, &r->stopped, 1, 5000);
  harness_finish(&r->h);
}

static void add_container(rec_t *r, const char *pod, char *id) {
  assert_int_equal(fake_cri_add_kube_container(r->h.fake, pod, "main", "localhost/busybox:1.36", id, 72), 0);
}

static void on_stop_reply(const nl_grpc_status_t *st, Runtime__V1__StopContainerResponse *resp,
                          void *ctx) {
  assert_int_equal(st->code, NL_GRPC_OK);
}

/* As the agent stops a container: the PLEG hears of it first. */
static void stop_container(rec_t *r, const char *id) {
  nl_pleg_stopping(&r->pleg, id);
  Runtime__V1__StopContainerRequest q = RUNTIME__V1__STOP_CONTAINER_REQUEST__INIT;
  q.container_id = (char *)id;
  nl_cri_stop_container(&r->h.client, &q, on_stop_reply, r);
}

/* Relists every period; one that finds nothing changed keeps the cache and
 * advances its time; a change gives its events. */
static void relists_find_changes(void **state) {
  (void)state;
  rec_t r;
  start(&r, 50, false, NULL);
  char id[72];
  add_container(&r, "p1", id);
  harness_wait(&r.h, &r.started, 2, 5000); /* the sandbox and the container */
  /* upstream's order: the pod's containers, then its sandboxes */
  assert_string_equal(r.started_ids[0], id);
  const nl_rt_pod_status_t *st = nl_pleg_get(&r.pleg, "p1");
  assert_non_null(st);
  assert_int_equal(st->n_containers, 1);
  int64_t t = nl_pleg_cache_time(&r.pleg, "p1");
  uint64_t relists = r.pleg.relists;
  int64_t after = t; /* read after the relist began */
  assert_false(nl_pleg_is_newer(&r.pleg, "p1", after));
  uint64_t same = r.pleg.lists_same_fp;
  harness_wait(&r.h, (const int *)&r.pleg.relists, (int)relists + 3, 5000);
  assert_int_equal(r.started, 2); /* nothing new */
  assert_true(r.pleg.lists_same_fp >= same + 4); /* the answers were not decoded */
  assert_int_equal(r.died, 0);
  assert_true(nl_pleg_cache_time(&r.pleg, "p1") == t); /* not read again */
  assert_true(nl_pleg_is_newer(&r.pleg, "p1", after)); /* but the cache is newer */
  nl_pleg_when_newer(&r.pleg, "p1", after, on_newer, &r);
  harness_wait(&r.h, &r.newer, 1, 1000);
  stop_container(&r, id);
  harness_wait(&r.h, &r.died, 1, 5000);
  assert_int_equal(nl_pleg_get(&r.pleg, "p1")->containers[0].state, NL_RT_CONTAINER_EXITED);
  finish(&r);
}

/* Evented: with a period far too long to matter, the runtime's events bring
 * changes at once, and the periodic relist is slowed to 5 minutes. */
static void events_relist_at_once(void **state) {
  (void)state;
  rec_t r;
  start(&r, 60 * 1000, true, NULL);
  assert_true(r.pleg.events_up);
  harness_sleep(&r.h, 50); /* the stream is open */
  char id[72];
  add_container(&r, "p1", id);
  harness_wait(&r.h, &r.started, 2, 2000);
  assert_true(r.pleg.events >= 2); /* created, started */
  assert_true(r.pleg.events_up);
  assert_true(uv_timer_get_due_in(&r.pleg.relist_timer) > 60 * 1000);
  stop_container(&r, id);
  harness_wait(&r.h, &r.died, 1, 2000);
  /* healthy for 10 minutes after the last relist while evented, 3 otherwise */
  int64_t t = r.pleg.relist_time + INT64_C(240) * 1000000000;
  assert_true(nl_pleg_healthy(&r.pleg, t, NULL));
  finish(&r);
  start(&r, 60 * 1000, false, NULL);
  assert_false(nl_pleg_healthy(&r.pleg, r.pleg.relist_time + INT64_C(240) * 1000000000, NULL));
  finish(&r);
}

/* A runtime without GetContainerEvents (containerd 1.6): back to relisting
 * every period, and changes are still found. */
static void no_events_falls_back_to_relisting(void **state) {
  (void)state;
  rec_t r;
  start(&r, 100, true, "GetContainerEvents status 12 unknown method GetContainerEvents");
  harness_sleep(&r.h, 100);
  assert_false(r.pleg.events_up);
  assert_true(uv_timer_get_due_in(&r.pleg.relist_timer) <= 100);
  char id[72];
  add_container(&r, "p1", id);
  harness_wait(&r.h, &r.started, 2, 3000);
  assert_int_equal(r.pleg.events, 0);
  finish(&r);
}

static uint64_t now_ms(rec_t *r) { return uv_now(&r->h.loop); }

/* A PLEG relisting every 50 ms that has seen pod p1's container id start. */
static void one_running(rec_t *r, bool evented, char id[72]) {
  start(r, 50, evented, NULL);
  if (evented) harness_sleep(&r->h, 50); /* the stream is open */
  add_container(r, "p1", id);
  harness_wait(&r->h, &r->started, 2, 5000);
}

/* containerd may answer ContainerStatus between a task's exit and its OOM
 * event: the PLEG keeps a fresh "Error" for a SIGKILL from the cache and the
 * pod workers (no sync, no status shows it) and reads it again until it says
 * OOMKilled. Evented too: the next read is a period away, not an event. */
static void late_oom_reason_is_waited_for(void **state) {
  (void)state;
  for (int evented = 0; evented < 2; evented++) {
    rec_t r;
    char id[72];
    one_running(&r, evented, id);
    int64_t killed = nl_pleg_monotonic_ns(NULL);
    uint64_t t0 = now_ms(&r);
    assert_int_equal(fake_cri_oom_kill(r.h.fake, id, 400), 0);
    harness_sleep(&r.h, 250); /* relists read "Error" meanwhile */
    assert_int_equal(r.died, 0);
    assert_false(nl_pleg_is_newer(&r.pleg, "p1", killed));
    assert_int_equal(nl_pleg_get(&r.pleg, "p1")->containers[0].state, NL_RT_CONTAINER_RUNNING);
    harness_wait(&r.h, &r.died, 1, 5000);
    assert_true(now_ms(&r) - t0 >= 400);
    assert_true(now_ms(&r) - t0 < NL_PLEG_OOM_SETTLE_NS / 1000000);
    const nl_rt_container_t *c = &nl_pleg_get(&r.pleg, "p1")->containers[0];
    assert_int_equal(c->exit_code, 137);
    assert_string_equal(c->reason, "OOMKilled");
    finish(&r);
  }
}

/* The wait is bounded: a runtime that never says OOMKilled gives "Error" once
 * NL_PLEG_OOM_SETTLE_NS has passed since the exit. */
static void oom_wait_is_bounded(void **state) {
  (void)state;
  rec_t r;
  char id[72];
  one_running(&r, false, id);
  uint64_t t0 = now_ms(&r);
  assert_int_equal(fake_cri_oom_kill(r.h.fake, id, 60 * 1000), 0);
  harness_wait(&r.h, &r.died, 1, 5000);
  assert_true(now_ms(&r) - t0 >= NL_PLEG_OOM_SETTLE_NS / 1000000 - 10);
  assert_string_equal(nl_pleg_get(&r.pleg, "p1")->containers[0].reason, "Error");
  finish(&r);
}

/* A pod new to the cache is cached at once even with a fresh SIGKILL: the
 * agent's housekeeping reads the cache for the pods the runtime has. */
static void new_pod_is_not_kept_out(void **state) {
  (void)state;
  rec_t r;
  memset(&r, 0, sizeof r);
  harness_start(&r.h, NULL);
  char id[72];
  add_container(&r, "p1", id);
  assert_int_equal(fake_cri_oom_kill(r.h.fake, id, 60 * 1000), 0);
  nl_pleg_init(&r.pleg, &r.h.loop, &r.h.client, 50, on_event, &r);
  nl_pleg_start(&r.pleg);
  harness_wait(&r.h, (const int *)&r.pleg.relists, 1, 5000);
  const nl_rt_pod_status_t *st = nl_pleg_get(&r.pleg, "p1");
  assert_non_null(st);
  assert_string_equal(st->containers[0].reason, "Error");
  finish(&r);
}

static bool kernel_says_oom(void *ctx, const char *container_id) {
  return strcmp(container_id, ctx) == 0;
}

/* When the kernel is known to have OOM-killed the container (the OOM
 * watcher), the runtime's "Error" need not be waited on: OOMKilled at once. */
static void kernel_oom_kill_names_the_reason(void **state) {
  (void)state;
  rec_t r;
  char id[72];
  one_running(&r, false, id);
  nl_pleg_set_oom_source(&r.pleg, kernel_says_oom, id);
  uint64_t t0 = now_ms(&r);
  assert_int_equal(fake_cri_oom_kill(r.h.fake, id, 60 * 1000), 0); /* never says so */
  harness_wait(&r.h, &r.died, 1, 5000);
  assert_true(now_ms(&r) - t0 < 500);
  assert_string_equal(nl_pleg_get(&r.pleg, "p1")->containers[0].reason, "OOMKilled");
  /* read again long after (the pod's next container), still OOMKilled */
  nl_pleg_set_oom_source(&r.pleg, NULL, NULL);
  harness_sleep(&r.h, NL_PLEG_OOM_SETTLE_NS / 1000000 + 100);
  char id2[72];
  add_container(&r, "p1", id2);
  harness_wait(&r.h, &r.started, 4, 5000);
  const nl_rt_pod_status_t *st = nl_pleg_get(&r.pleg, "p1");
  assert_int_equal(st->n_containers, 2);
  assert_string_equal(st->containers[1].id, id); /* newest first */
  assert_string_equal(st->containers[1].reason, "OOMKilled");
  finish(&r);
}

/* A container the agent stopped itself (nl_pleg_stopping) was not killed by
 * the OOM killer: its exit is read at once, and the note goes with it. */
static void own_stop_is_read_at_once(void **state) {
  (void)state;
  rec_t r;
  char id[72];
  one_running(&r, false, id);
  uint64_t t0 = now_ms(&r);
  stop_container(&r, id); /* no timeout: 137 */
  harness_wait(&r.h, &r.died, 1, 5000);
  assert_true(now_ms(&r) - t0 < 500);
  const nl_rt_container_t *c = &nl_pleg_get(&r.pleg, "p1")->containers[0];
  assert_int_equal(c->exit_code, 137);
  assert_string_equal(c->reason, "Error");
  assert_int_equal(nl_map_size(&r.pleg.stopping), 0);
  finish(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(relists_find_changes),
      cmocka_unit_test(events_relist_at_once),
      cmocka_unit_test(no_events_falls_back_to_relisting),
      cmocka_unit_test(late_oom_reason_is_waited_for),
      cmocka_unit_test(oom_wait_is_bounded),
      cmocka_unit_test(new_pod_is_not_kept_out),
      cmocka_unit_test(kernel_oom_kill_names_the_reason),
      cmocka_unit_test(own_stop_is_read_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
