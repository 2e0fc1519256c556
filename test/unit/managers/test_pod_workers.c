#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "reactor/arena.h"
#include "managers/pod_workers.h"

/* A syncer that records each call and leaves completion to the test, so the
 * test decides what is in flight when updates arrive. */
typedef struct call {
  nl_pod_work_t *w;
  nl_pod_work_state_t kind;
  nl_sync_type_t type;
  int64_t grace;
  char image[64];
} call_t;

typedef struct rec {
  call_t calls[64];
  int n;
  bool complete_inline; /* complete from inside the call */
} rec_t;

static void record(nl_pod_work_t *w, void *ctx, nl_pod_work_state_t kind) {
  rec_t *r = ctx;
  call_t *c = &r->calls[r->n++];
  c->w = w;
  c->kind = kind;
  c->type = w->type;
  c->grace = w->grace_seconds;
  snprintf(c->image, sizeof c->image, "%s",
           w->pod && w->pod->spec.n_containers ? w->pod->spec.containers[0].image : "");
  if (r->complete_inline) nl_pod_workers_complete(w, NULL, false);
}
static void sync_pod(nl_pod_work_t *w, void *ctx) { record(w, ctx, NL_POD_SYNCING); }
static void sync_terminating(nl_pod_work_t *w, void *ctx) { record(w, ctx, NL_POD_TERMINATING); }
static void sync_terminated(nl_pod_work_t *w, void *ctx) { record(w, ctx, NL_POD_TERMINATED); }
static int cancels, finishes;
/* As the kubelet's: a kill counts as started once recorded; cancelling it
 * completes the token at once. */
static bool cancel_terminating(nl_pod_work_t *w, void *ctx) {
  (void)ctx;
  cancels++;
  nl_pod_workers_complete(w, NULL, false);
  return true;
}
static void finished(const char *uid, void *ctx) {
  (void)uid, (void)ctx;
  finishes++;
}
static const nl_pod_syncer_t syncer = {sync_pod, sync_terminating, sync_terminated,
                                       cancel_terminating, finished};

static nl_pod_t *make_pod(const char *uid, const char *image, int grace) {
  char doc[512];
  snprintf(doc, sizeof doc,
           "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"uid\":\"%s\"},"
           "\"spec\":{%s\"containers\":[{\"name\":\"c\",\"image\":\"%s\"}]}}",
           uid, grace >= 0 ? "\"terminationGracePeriodSeconds\":7," : "", image);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_decode(doc, strlen(doc), "test", &pod, &err), 0);
  return pod;
}

typedef struct fixture {
  uv_loop_t loop;
  nl_pod_workers_t pw;
  rec_t rec;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  uv_loop_init(&f->loop);
  nl_pod_workers_init(&f->pw, &f->loop, &syncer, &f->rec, 60000, 10000);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  nl_pod_workers_free(&f->pw);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  free(f);
  return 0;
}

static void one_sync_in_flight_and_updates_coalesce(void **state) {
  fixture_t *f = *state;
  nl_pod_t *a = make_pod("u1", "img:1", -1), *b = make_pod("u1", "img:2", -1),
           *c = make_pod("u1", "img:3", -1);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1);
  assert_int_equal(f->rec.n, 1);
  assert_int_equal(f->rec.calls[0].type, NL_SYNC_CREATE);
  nl_pod_workers_update(&f->pw, b, NL_SYNC_UPDATE, -1);
  nl_pod_workers_update(&f->pw, c, NL_SYNC_UPDATE, -1);
  assert_int_equal(f->rec.n, 1); /* still one in flight */
  nl_pod_workers_complete(f->rec.calls[0].w, NULL, false);
  assert_int_equal(f->rec.n, 2); /* the two updates ran as one, with the newest pod */
  assert_int_equal(f->rec.calls[1].type, NL_SYNC_UPDATE);
  assert_string_equal(f->rec.calls[1].image, "img:3");
  assert_ptr_equal(f->rec.calls[1].w->pod, c); /* shared, not copied */
  nl_pod_free(c), c = NULL; /* the token keeps its own reference */
  assert_string_equal(f->rec.calls[1].w->pod->spec.containers[0].image, "img:3");
  nl_pod_workers_complete(f->rec.calls[1].w, NULL, false);
  assert_int_equal(f->rec.n, 2);
  assert_int_equal(nl_pod_workers_get(&f->pw, "u1")->state, NL_POD_SYNCING);
  nl_pod_free(a), nl_pod_free(b), nl_pod_free(c);
}

static void kill_mid_sync_makes_the_sync_stale(void **state) {
  fixture_t *f = *state;
  nl_pod_t *a = make_pod("u2", "img:1", 7);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_KILL, -1);
  assert_true(nl_pod_workers_is_terminating(&f->pw, "u2"));
  assert_int_equal(f->rec.n, 1);
  /* the sync ends (even claiming success and terminal): its result is dropped */
  nl_pod_workers_complete(f->rec.calls[0].w, NULL, true);
  assert_int_equal(f->rec.n, 2);
  assert_int_equal(f->rec.calls[1].kind, NL_POD_TERMINATING);
  assert_int_equal(f->rec.calls[1].grace, 7); /* the pod's terminationGracePeriodSeconds */
  /* updates to a terminating pod are ignored */
  nl_pod_workers_update(&f->pw, a, NL_SYNC_UPDATE, -1);
  assert_int_equal(f->rec.n, 2);
  nl_pod_workers_complete(f->rec.calls[1].w, NULL, false);
  assert_int_equal(f->rec.n, 3);
  assert_int_equal(f->rec.calls[2].kind, NL_POD_TERMINATED);
  nl_pod_workers_complete(f->rec.calls[2].w, NULL, false);
  assert_true(nl_pod_workers_get(&f->pw, "u2")->finished);
  /* a terminated pod never syncs again */
  nl_pod_workers_update(&f->pw, a, NL_SYNC_SYNC, -1);
  nl_pod_workers_sync_now(&f->pw, "u2");
  assert_int_equal(f->rec.n, 3);
  nl_pod_free(a);
}

static void shorter_grace_wins(void **state) {
  fixture_t *f = *state;
  nl_pod_t *a = make_pod("u3", "img:1", 7);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_KILL, 20);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_KILL, 2);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_KILL, 5);
  nl_pod_workers_complete(f->rec.calls[0].w, NULL, false);
  assert_int_equal(f->rec.calls[1].kind, NL_POD_TERMINATING);
  assert_int_equal(f->rec.calls[1].grace, 2);
  nl_pod_workers_complete(f->rec.calls[1].w, NULL, false);
  nl_pod_workers_complete(f->rec.calls[2].w, NULL, false);
  nl_pod_free(a);
}

static void terminal_sync_terminates_and_errors_retry(void **state) {
  fixture_t *f = *state;
  nl_pod_t *a = make_pod("u4", "img:1", -1);
  nl_err_t *err = NULL;
  nl_err_set(&err, 2, "boom");
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1);
  nl_pod_workers_complete(f->rec.calls[0].w, err, false);
  assert_int_equal(f->rec.n, 1);
  assert_int_equal(nl_pod_workers_sync_due(&f->pw), 0); /* not before the back-off */
  const nl_pod_worker_t *w = nl_pod_workers_get(&f->pw, "u4");
  assert_int_equal(w->next_sync_ms - uv_now(&f->loop), 10000);
  /* a PLEG event syncs at once anyway */
  nl_pod_workers_sync_now(&f->pw, "u4");
  assert_int_equal(f->rec.n, 2);
  assert_int_equal(f->rec.calls[1].type, NL_SYNC_SYNC);
  nl_pod_workers_complete(f->rec.calls[1].w, NULL, true); /* the pod finished */
  assert_int_equal(f->rec.n, 3);
  assert_int_equal(f->rec.calls[2].kind, NL_POD_TERMINATING);
  assert_int_equal(f->rec.calls[2].grace, 30);
  nl_pod_workers_complete(f->rec.calls[2].w, err, false); /* terminating fails: retried */
  assert_int_equal(f->rec.n, 3);
  assert_int_equal(nl_pod_workers_get(&f->pw, "u4")->state, NL_POD_TERMINATING);
  nl_pod_workers_sync_now(&f->pw, "u4");
  assert_int_equal(f->rec.calls[3].kind, NL_POD_TERMINATING);
  nl_pod_workers_complete(f->rec.calls[3].w, NULL, false);
  nl_pod_workers_complete(f->rec.calls[4].w, NULL, false);
  nl_err_free(&err);
  nl_pod_free(a);
}

/* A sync that failed on a crash-loop back-off is retried when the back-off
 * ends (the syncer's retry_in_ms), never later than the resync period. */
static void backoff_retry_at_its_end(void **state) {
  fixture_t *f = *state;
  nl_pod_t *a = make_pod("u5", "img:1", -1);
  nl_err_t *err = NULL;
  nl_err_set(&err, 2, "CrashLoopBackOff");
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1);
  assert_int_equal(f->rec.calls[0].w->retry_in_ms, -1);
  f->rec.calls[0].w->retry_in_ms = 2500;
  nl_pod_workers_complete(f->rec.calls[0].w, err, false);
  const nl_pod_worker_t *w = nl_pod_workers_get(&f->pw, "u5");
  assert_int_equal(w->next_sync_ms - uv_now(&f->loop), 2500);
  nl_pod_workers_sync_now(&f->pw, "u5");
  f->rec.calls[1].w->retry_in_ms = 0; /* ended already: at the next tick */
  nl_pod_workers_complete(f->rec.calls[1].w, err, false);
  assert_int_equal(w->next_sync_ms - uv_now(&f->loop), 0);
  assert_int_equal(nl_pod_workers_sync_due(&f->pw), 1);
  f->rec.calls[2].w->retry_in_ms = 300000; /* a 5 min back-off: the resync's 1 min */
  nl_pod_workers_complete(f->rec.calls[2].w, err, false);
  assert_int_equal(w->next_sync_ms - uv_now(&f->loop), 60000);
  nl_pod_workers_sync_now(&f->pw, "u5");
  nl_pod_workers_complete(f->rec.calls[3].w, NULL, false);
  nl_err_free(&err);
  nl_pod_free(a);
}

static bool known_keep(void *ctx, const char *uid) {
  (void)ctx;
  return strcmp(uid, "keep") == 0;
}

static void housekeeping_kills_unknown_and_forgets_finished(void **state) {
  fixture_t *f = *state;
  f->rec.complete_inline = true;
  nl_pod_t *a = make_pod("keep", "img:1", -1), *b = make_pod("gone", "img:1", -1);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1);
  nl_pod_workers_update(&f->pw, b, NL_SYNC_CREATE, -1);
  assert_int_equal(f->rec.n, 2);
  nl_pod_workers_sync_known(&f->pw, known_keep, NULL);
  /* "gone" ran terminating and terminated (inline completions) */
  assert_int_equal(f->rec.n, 4);
  assert_true(nl_pod_workers_get(&f->pw, "gone")->finished);
  nl_pod_workers_sync_known(&f->pw, known_keep, NULL);
  assert_null(nl_pod_workers_get(&f->pw, "gone"));
  assert_non_null(nl_pod_workers_get(&f->pw, "keep"));
  nl_pod_free(a), nl_pod_free(b);
}

/* A static pod removed and added back with the same uid: its worker, once
 * finished, is forgotten on purpose and the uid runs again; a worker still at
 * work is not forgotten. */
static void forget_lets_a_uid_run_again(void **state) {
  fixture_t *f = *state;
  nl_pod_t *a = make_pod("a", "img:1", -1);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1);
  nl_pod_workers_forget(&f->pw, "a"); /* syncing: kept */
  assert_non_null(nl_pod_workers_get(&f->pw, "a"));
  f->rec.complete_inline = true;
  nl_pod_workers_update(&f->pw, a, NL_SYNC_KILL, -1);
  nl_pod_workers_complete(f->rec.calls[0].w, NULL, false); /* the stale sync */
  assert_true(nl_pod_workers_get(&f->pw, "a")->finished);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1); /* ignored: terminated */
  int n = f->rec.n;
  assert_int_equal(n, 3);
  nl_pod_workers_forget(&f->pw, "a");
  assert_null(nl_pod_workers_get(&f->pw, "a"));
  f->rec.complete_inline = false;
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1);
  assert_int_equal(f->rec.n, n + 1);
  assert_int_equal(f->rec.calls[n].kind, NL_POD_SYNCING);
  assert_int_equal(f->rec.calls[n].type, NL_SYNC_CREATE);
  nl_pod_workers_complete(f->rec.calls[n].w, NULL, false);
  nl_pod_free(a);
}

static void forgotten_worker_with_work_in_flight(void **state) {
  fixture_t *f = *state;
  nl_pod_t *a = make_pod("u5", "img:1", -1);
  nl_pod_workers_update(&f->pw, a, NL_SYNC_CREATE, -1);
  nl_pod_work_t *inflight = f->rec.calls[0].w;
  nl_pod_workers_free(&f->pw); /* e.g. agent stop */
  nl_pod_workers_complete(inflight, NULL, false); /* only frees the token */
  nl_pod_workers_init(&f->pw, &f->loop, &syncer, &f->rec, 60000, 10000);
  nl_pod_free(a);
}

/* A pod being deleted from the API (spec grace 7). */
static nl_pod_t *deleting_pod(const char *uid, int deletion_grace) {
  char doc[512];
  snprintf(doc, sizeof doc,
           "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"uid\":\"%s\","
           "\"deletionTimestamp\":\"2024-01-01T00:00:00Z\",\"deletionGracePeriodSeconds\":%d},"
           "\"spec\":{\"terminationGracePeriodSeconds\":7,\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
           uid, deletion_grace);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_decode(doc, strlen(doc), "test", &pod, &err), 0);
  return pod;
}

/* upstream calculateEffectiveGracePeriod: deletionGracePeriodSeconds wins over
 * the spec; a force delete's 0 becomes 1; a shorter grace during a kill
 * abandons it and kills again, shorter; a longer one changes nothing; the
 * finished worker tells that no container can run. */
static void deletion_grace_period(void **state) {
  fixture_t *f = *state;
  cancels = finishes = 0;
  nl_pod_t *run = make_pod("u1", "i", 7), *del5 = deleting_pod("u1", 5), *del0 = deleting_pod("u1", 0),
           *del9 = deleting_pod("u1", 9);
  nl_pod_workers_update(&f->pw, run, NL_SYNC_CREATE, -1);
  nl_pod_workers_complete(f->rec.calls[0].w, NULL, false);
  assert_true(nl_pod_workers_could_have_running_containers(&f->pw, "u1"));
  /* an UPDATE of a pod with a deletionTimestamp is a kill */
  nl_pod_workers_update(&f->pw, del5, NL_SYNC_UPDATE, -1);
  assert_int_equal(f->rec.n, 2);
  assert_int_equal(f->rec.calls[1].kind, NL_POD_TERMINATING);
  assert_int_equal(f->rec.calls[1].grace, 5);
  nl_pod_workers_update(&f->pw, del9, NL_SYNC_KILL, -1);
  assert_int_equal(nl_pod_workers_grace(&f->pw, "u1"), 5);
  assert_int_equal(cancels, 0);
  nl_pod_workers_update(&f->pw, del0, NL_SYNC_KILL, -1);
  assert_int_equal(cancels, 1);
  assert_int_equal(f->rec.n, 3);
  assert_int_equal(f->rec.calls[2].kind, NL_POD_TERMINATING);
  assert_int_equal(f->rec.calls[2].grace, 1);
  nl_pod_workers_complete(f->rec.calls[2].w, NULL, false);
  assert_int_equal(f->rec.calls[3].kind, NL_POD_TERMINATED);
  assert_true(nl_pod_workers_could_have_running_containers(&f->pw, "u1"));
  assert_int_equal(finishes, 0);
  nl_pod_workers_complete(f->rec.calls[3].w, NULL, false);
  assert_int_equal(finishes, 1);
  assert_false(nl_pod_workers_could_have_running_containers(&f->pw, "u1"));
  /* a pod first seen with a deletionTimestamp is never synced, only killed */
  nl_pod_t *gone = deleting_pod("u2", 30);
  nl_pod_workers_update(&f->pw, gone, NL_SYNC_CREATE, -1);
  assert_int_equal(f->rec.calls[4].kind, NL_POD_TERMINATING);
  assert_int_equal(f->rec.calls[4].grace, 30);
  nl_pod_workers_complete(f->rec.calls[4].w, NULL, false);
  nl_pod_workers_complete(f->rec.calls[5].w, NULL, false);
  nl_pod_free(run), nl_pod_free(del5), nl_pod_free(del0), nl_pod_free(del9), nl_pod_free(gone);
}

static void reconcile_takes_the_latest_version(void **state) {
  fixture_t *f = *state;
  nl_pod_t *first = make_pod("u4", "img:1", -1), *latest = make_pod("u4", "img:1", -1);
  nl_pod_workers_update(&f->pw, first, NL_SYNC_CREATE, -1);
  nl_pod_workers_complete(f->rec.calls[0].w, NULL, false);
  assert_int_equal(first->arena->refs, 2);
  nl_pod_workers_reconcile(&f->pw, latest);
  assert_int_equal(f->rec.n, 1); /* nothing runs */
  assert_ptr_equal(nl_pod_workers_get(&f->pw, "u4")->pod, latest);
  assert_int_equal(first->arena->refs, 1); /* let go: one copy of the pod is kept */
  nl_pod_t *nobody = make_pod("u5", "img:1", -1); /* no worker: nothing to hand over */
  nl_pod_workers_reconcile(&f->pw, nobody);
  assert_null(nl_pod_workers_get(&f->pw, "u5"));
  assert_int_equal(nobody->arena->refs, 1);
  nl_pod_free(nobody);
  /* a terminating worker keeps the version it was killed with */
  nl_pod_t *later = make_pod("u4", "img:1", -1);
  nl_pod_workers_update(&f->pw, latest, NL_SYNC_KILL, -1);
  nl_pod_workers_reconcile(&f->pw, later);
  assert_ptr_equal(nl_pod_workers_get(&f->pw, "u4")->pod, latest);
  assert_int_equal(later->arena->refs, 1);
  nl_pod_workers_complete(f->rec.calls[1].w, NULL, false);
  nl_pod_workers_complete(f->rec.calls[2].w, NULL, false);
  nl_pod_free(first), nl_pod_free(latest), nl_pod_free(later);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(deletion_grace_period, setup, teardown),
      cmocka_unit_test_setup_teardown(one_sync_in_flight_and_updates_coalesce, setup, teardown),
      cmocka_unit_test_setup_teardown(kill_mid_sync_makes_the_sync_stale, setup, teardown),
      cmocka_unit_test_setup_teardown(shorter_grace_wins, setup, teardown),
      cmocka_unit_test_setup_teardown(terminal_sync_terminates_and_errors_retry, setup, teardown),
      cmocka_unit_test_setup_teardown(backoff_retry_at_its_end, setup, teardown),
      cmocka_unit_test_setup_teardown(housekeeping_kills_unknown_and_forgets_finished, setup, teardown),
      cmocka_unit_test_setup_teardown(forget_lets_a_uid_run_again, setup, teardown),
      cmocka_unit_test_setup_teardown(forgotten_worker_with_work_in_flight, setup, teardown),
      cmocka_unit_test_setup_teardown(reconcile_takes_the_latest_version, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
