#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "agent/kube/reflector.h"
#include "fake_client.h"
#include "reactor/buf.h"
#include "../model/fixture.h" /* FIXTURES: test/fixtures/kubeconfig */

#define PODS "/api/v1/pods"
#define SEL "fieldSelector=spec.nodeName%3Dedge-1"

typedef struct seen {
  int lists, events;
  nl_buf_t log; /* "list rv=<rv> [<item>|<item>]" and "<TYPE> <object>" lines */
  nl_reflector_t *r;
  bool stop_in_event;
  int done;
} seen_t;

static const char *tname[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

static void on_list(void *ctx, const nl_kube_raw_t *items, size_t n, const char *rv) {
  seen_t *s = ctx;
  s->lists++;
  nl_buf_printf(&s->log, "list rv=%s [", rv);
  for (size_t i = 0; i < n; i++)
    nl_buf_printf(&s->log, "%s%.*s", i ? "|" : "", (int)items[i].len, items[i].json);
  nl_buf_puts(&s->log, "]\n");
}

static void on_event(void *ctx, const nl_kube_watch_event_t *ev) {
  seen_t *s = ctx;
  s->events++;
  nl_buf_printf(&s->log, "%s %.*s\n", tname[ev->type], (int)ev->object_len, ev->object);
  if (s->stop_in_event) nl_reflector_stop(s->r, NULL, NULL);
}

static void on_done(void *ctx) { ((seen_t *)ctx)->done++; }

typedef struct fixture {
  uv_loop_t loop;
  seen_t seen;
  nl_reflector_t *r;
} fixture_t;

static int setup_backoff(void **state, uint64_t initial_ms, uint64_t max_ms) {
  fixture_t *f = calloc(1, sizeof *f);
  uv_loop_init(&f->loop);
  nl_reflector_opts_t o = {.path = PODS, .field_selector = "spec.nodeName=edge-1",
                           .backoff_initial_ms = initial_ms, .backoff_max_ms = max_ms};
  nl_reflector_cbs_t cbs = {on_list, on_event};
  nl_err_t *err = NULL;
  assert_int_equal(nl_reflector_new(&f->r, &f->loop, NULL, &o, &cbs, &f->seen, &err), 0);
  f->seen.r = f->r;
  *state = f;
  return 0;
}

static int setup(void **state) { return setup_backoff(state, 1, 4); }
/* a back-off long enough to be told from none */
static int setup_slow(void **state) { return setup_backoff(state, 10, 5000); }

/* Stops the reflector (unless the test did), settles what was cancelled, and
 * checks that the loop closes: no handle and no memory left behind. */
static int teardown(void **state) {
  fixture_t *f = *state;
  if (f->r) nl_reflector_stop(f->r, on_done, &f->seen);
  fake_settle();
  uv_run(&f->loop, UV_RUN_DEFAULT);
  if (f->r) assert_int_equal(f->seen.done, 1);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  fake_reset();
  nl_buf_free(&f->seen.log);
  free(f);
  return 0;
}

/* Runs the loop until the n-th request is made. Never UV_RUN_ONCE: when the
 * back-off timer is due as it begins, its callback starts the request and the
 * poll then sleeps until the watch's deadline, minutes away. */
static fake_req_t *run_until(fixture_t *f, size_t n) {
  for (int i = 0; fake_nreqs < n && i < 10000; i++) {
    uv_run(&f->loop, UV_RUN_NOWAIT);
    if (fake_nreqs < n) usleep(1000);
  }
  assert_int_equal(fake_nreqs, n);
  return fake_reqs[n - 1];
}

static const char list10[] =
    "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"10\"},"
    "\"items\":[{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"7\"}},"
    "{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"9\"}}]}";

static unsigned watch_timeout(const fake_req_t *w) {
  const char *t = strstr(w->path, "&timeoutSeconds=");
  assert_non_null(t);
  return (unsigned)strtoul(t + 16, NULL, 10);
}

static void assert_watch_from(const fake_req_t *w, const char *rv) {
  char want[256];
  snprintf(want, sizeof want, "%s?allowWatchBookmarks=true&%s&resourceVersion=%s&timeoutSeconds=",
           PODS, SEL, rv);
  if (strncmp(w->path, want, strlen(want)) != 0) fail_msg("got  %s\nwant %s...", w->path, want);
  assert_non_null(strstr(w->path, "&watch=true"));
  unsigned t = watch_timeout(w);
  assert_true(t >= 300 && t < 600);
  /* the head may wait for a connection as long as the watch may last */
  assert_int_equal(w->timeout_ms, (uint64_t)t * 1000);
  assert_string_equal(w->method, "GET");
}

/* LIST then WATCH from the list's version; the watch's events, cut anywhere */
static void list_then_watch(fixture_t *f) {
  nl_reflector_start(f->r);
  fake_req_t *l = fake_last();
  assert_string_equal(l->method, "GET");
  assert_string_equal(l->path, PODS "?" SEL "&resourceVersion=0");
  assert_false(nl_reflector_synced(f->r));
  fake_respond(l, 200, list10);
  assert_true(nl_reflector_synced(f->r));
  assert_int_equal(fake_nreqs, 2);
  assert_watch_from(fake_reqs[1], "10");
  assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_WATCHING);
}

static void lists_watches_and_follows_bookmarks(void **state) {
  fixture_t *f = *state;
  list_then_watch(f);
  fake_req_t *w = fake_reqs[1];
  fake_head(w, 200);
  fake_data(w, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"11\"}}}\n{\"ty");
  fake_data(w, "pe\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"15\"}}}\n");
  assert_string_equal(nl_reflector_resource_version(f->r), "15");
  fake_data(w, "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"16\"}}}\n");
  assert_string_equal(f->seen.log.data,
                      "list rv=10 [{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"7\"}}|"
                      "{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"9\"}}]\n"
                      "ADDED {\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"11\"}}\n"
                      "DELETED {\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"16\"}}\n");
  /* the server's timeout ends the watch: re-watch at once from the last version */
  fake_end(w, 200);
  assert_int_equal(fake_nreqs, 3);
  assert_watch_from(fake_reqs[2], "16");
  assert_int_equal(f->seen.lists, 1);
}

static void error_event_410_relists_from_the_last_version(void **state) {
  fixture_t *f = *state;
  list_then_watch(f);
  fake_req_t *w = fake_reqs[1];
  fake_head(w, 200);
  fake_data(w, "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n"
               "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\","
               "\"message\":\"too old resource version: 12 (40)\",\"reason\":\"Expired\",\"code\":410}}\n"
               "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"never\"}}}\n");
  assert_true(w->cancelled);
  assert_int_equal(f->seen.events, 0); /* nothing after the ERROR */
  assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_BACKOFF);
  fake_settle(); /* the cancelled watch's completion is stale: ignored */
  fake_req_t *l = run_until(f, 3);
  assert_string_equal(l->path, PODS "?" SEL "&resourceVersion=12");
  /* that version is gone from the cache too: list from storage, at once */
  fake_respond(l, 410, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410}");
  assert_int_equal(fake_nreqs, 4);
  assert_string_equal(fake_reqs[3]->path, PODS "?" SEL);
  fake_respond(fake_reqs[3], 200,
               "{\"metadata\":{\"resourceVersion\":\"41\"},\"items\":[]}");
  assert_int_equal(f->seen.lists, 2);
  assert_watch_from(fake_last(), "41");
}

/* After an outage (watches broken one after another: the back-off grew), the
 * first event of a watch starts the back-off over: a 410 (the version
 * compacted away meanwhile) is re-listed after the initial back-off, not after
 * what the outage left. A watch closed at once with nothing in it does not
 * (broken_streams_back_off_then_rewatch). */
static void an_event_starts_the_back_off_over(void **state) {
  fixture_t *f = *state;
  list_then_watch(f);
  size_t n = 2;
  for (int i = 0; i < 6; i++) { /* 10, 20, ... 320 ms, each up to twice that */
    fake_fail(fake_last(), ECONNRESET, "connection reset by peer");
    assert_watch_from(run_until(f, ++n), "10");
  }
  fake_req_t *w = fake_last();
  fake_head(w, 200);
  uint64_t t0 = uv_hrtime();
  fake_data(w, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\","
               "\"message\":\"too old resource version: 10 (400)\",\"reason\":\"Expired\",\"code\":410}}\n");
  fake_settle();
  fake_req_t *l = run_until(f, n + 1);
  assert_string_equal(l->path, PODS "?" SEL "&resourceVersion=10");
  /* 10-20 ms, where the grown back-off would have been 640-1280 ms */
  assert_true(uv_hrtime() - t0 < 300 * 1000000ull);
}

static void http_410_on_watch_relists(void **state) {
  fixture_t *f = *state;
  list_then_watch(f);
  fake_req_t *w = fake_reqs[1];
  fake_head(w, 410);
  fake_data(w, "{\"kind\":\"Status\",\"reason\":\"Gone\",\"code\":410}");
  fake_end(w, 410);
  fake_req_t *l = run_until(f, 3);
  assert_string_equal(l->path, PODS "?" SEL "&resourceVersion=10");
}

static void other_watch_errors_back_off_then_relist(void **state) {
  fixture_t *f = *state;
  list_then_watch(f);
  fake_req_t *w = fake_reqs[1];
  fake_head(w, 403);
  fake_data(w, "{\"kind\":\"Status\",\"message\":\"pods is forbidden\",\"reason\":\"Forbidden\",\"code\":403}");
  fake_end(w, 403);
  assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_BACKOFF);
  assert_int_equal(fake_nreqs, 2); /* not at once */
  fake_req_t *l = run_until(f, 3);
  assert_string_equal(l->path, PODS "?" SEL "&resourceVersion=10");
  /* an ERROR event that is not 410 does the same */
  fake_respond(l, 200, list10);
  w = fake_last();
  fake_head(w, 200);
  fake_data(w, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500,\"reason\":\"InternalError\"}}\n");
  assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_BACKOFF);
  fake_settle();
  l = run_until(f, 5);
  assert_non_null(strstr(l->path, "?" SEL "&resourceVersion=10"));
  assert_null(strstr(l->path, "watch=true"));
}

static void broken_streams_back_off_then_rewatch(void **state) {
  fixture_t *f = *state;
  list_then_watch(f);
  fake_req_t *w = fake_reqs[1];
  fake_head(w, 200);
  fake_data(w, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"11\"}}}\n");
  fake_data(w, "<html>garbage</html>\n");
  assert_true(w->cancelled);
  fake_settle();
  w = run_until(f, 3);
  assert_watch_from(w, "11");
  /* the connection drops: no response, re-watch after the back-off */
  fake_fail(w, ECONNRESET, "connection reset by peer");
  w = run_until(f, 4);
  assert_watch_from(w, "11");
  /* a torn event at the end of the stream */
  fake_head(w, 200);
  fake_data(w, "{\"type\":\"ADDED\",\"obj");
  fake_end(w, 200);
  w = run_until(f, 5);
  assert_watch_from(w, "11");
  /* a watch the server closes at once, with nothing in it, is not re-opened in a
   * hot loop: it waits for the back-off */
  fake_head(w, 200);
  fake_end(w, 200);
  assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_BACKOFF);
  w = run_until(f, 6);
  assert_watch_from(w, "11");
  assert_int_equal(f->seen.lists, 1);
  assert_int_equal(f->seen.events, 1);
}

/* A list or a watch that never had a connection (the link down) goes again at
 * once, to wait for the client's next dial (whose back-off paces it), without
 * a back-off of the reflector's own: when the link returns, the reflector is
 * on the wire with the first connection. A watch whose connection was lost
 * still backs off (jittered, so that a fleet does not re-watch in step). */
static void no_link_waits_for_the_client_not_a_back_off(void **state) {
  fixture_t *f = *state;
  nl_reflector_start(f->r);
  for (size_t i = 1; i <= 3; i++) {
    fake_req_t *l = fake_last();
    assert_true(l->fail_on_dial);
    fake_fail_no_conn(l, ECONNREFUSED, "dial tcp 127.0.0.1:6443: connect: connection refused");
    assert_int_equal(fake_nreqs, i + 1); /* at once, not after a back-off */
    assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_LISTING);
  }
  fake_respond(fake_last(), 200, list10);
  fake_req_t *w = fake_last();
  assert_watch_from(w, "10");
  fake_fail_no_conn(w, ECONNREFUSED, "dial tcp 127.0.0.1:6443: connect: connection refused");
  assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_WATCHING);
  assert_watch_from(fake_last(), "10");
  assert_int_equal(fake_nreqs, 6);
  /* the connection it had is lost: a back-off first */
  fake_fail(fake_last(), ECONNRESET, "connection reset by peer");
  assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_BACKOFF);
  assert_int_equal(fake_nreqs, 6);
  assert_watch_from(run_until(f, 7), "10");
  assert_int_equal(f->seen.lists, 1);
}

static void list_failures_retry_and_do_not_sync(void **state) {
  fixture_t *f = *state;
  nl_reflector_start(f->r);
  fake_respond(fake_last(), 500, "{\"kind\":\"Status\",\"message\":\"etcd down\",\"code\":500}");
  assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_BACKOFF);
  fake_req_t *l = run_until(f, 2);
  assert_string_equal(l->path, PODS "?" SEL "&resourceVersion=0");
  fake_fail(l, ECONNREFUSED, "connection refused");
  l = run_until(f, 3);
  fake_respond(l, 200, "{\"metadata\":{},\"items\":[]}"); /* no resourceVersion: refused */
  l = run_until(f, 4);
  fake_respond(l, 200, "{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[1]}");
  l = run_until(f, 5);
  assert_false(nl_reflector_synced(f->r));
  assert_int_equal(f->seen.lists, 0);
  assert_string_equal(l->path, PODS "?" SEL "&resourceVersion=0");
  fake_respond(l, 200, "{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":null}");
  assert_true(nl_reflector_synced(f->r));
  assert_string_equal(f->seen.log.data, "list rv=5 []\n");
}

static void timeouts_are_randomised(void **state) {
  fixture_t *f = *state;
  list_then_watch(f);
  unsigned first = watch_timeout(fake_reqs[1]);
  bool differ = false;
  for (size_t i = 0; i < 20; i++) {
    fake_req_t *w = fake_last();
    fake_data(w, "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"20\"}}}\n");
    fake_end(w, 200);
    assert_watch_from(fake_last(), "20");
    differ |= watch_timeout(fake_last()) != first;
  }
  assert_true(differ);
}

static void stop_while_watching_touches_nothing_freed(void **state) {
  fixture_t *f = *state;
  list_then_watch(f);
  fake_req_t *w = fake_reqs[1];
  nl_reflector_stop(f->r, on_done, &f->seen);
  assert_true(w->cancelled);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(f->seen.done, 0); /* the watch's completion is still to come */
  fake_settle();
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(f->seen.done, 1);
  f->r = NULL;
}

static void stop_from_the_event_callback(void **state) {
  fixture_t *f = *state;
  list_then_watch(f);
  f->seen.stop_in_event = true;
  fake_data(fake_reqs[1], "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"}}}\n"
                          "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"y\"}}}\n");
  assert_int_equal(f->seen.events, 1);
  assert_int_equal(fake_nreqs, 2);
  f->r = NULL; /* stopped with no done callback */
}

static void stop_during_backoff(void **state) {
  fixture_t *f = *state;
  nl_reflector_start(f->r);
  fake_respond(fake_last(), 503, "");
  assert_int_equal(nl_reflector_state(f->r), NL_REFLECTOR_BACKOFF);
  /* teardown stops it: the timer is closed and no request follows */
}

static void bad_paths_are_refused(void **state) {
  nl_reflector_t *r;
  nl_err_t *err = NULL;
  nl_reflector_opts_t o = {.path = "api/v1/pods"};
  nl_reflector_cbs_t cbs = {0};
  assert_int_equal(nl_reflector_new(&r, NULL, NULL, &o, &cbs, NULL, &err), -1);
  assert_string_equal(err->msg, "reflector: path must be absolute with no query, got \"api/v1/pods\"");
  nl_err_free(&err);
  o.path = "/api/v1/pods?watch=1";
  assert_int_equal(nl_reflector_new(&r, NULL, NULL, &o, &cbs, NULL, &err), -1);
  nl_err_free(&err);
}

static void selectors_are_escaped(void **state) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_reflector_t *r;
  nl_err_t *err = NULL;
  nl_reflector_opts_t o = {.path = "/api/v1/namespaces/kube-system/configmaps",
                           .label_selector = "app in (a,b),tier!=x y"};
  nl_reflector_cbs_t cbs = {0};
  assert_int_equal(nl_reflector_new(&r, &loop, NULL, &o, &cbs, NULL, &err), 0);
  nl_reflector_start(r);
  assert_string_equal(fake_last()->path, "/api/v1/namespaces/kube-system/configmaps?"
                      "labelSelector=app+in+%28a%2Cb%29%2Ctier%21%3Dx+y&resourceVersion=0");
  nl_reflector_stop(r, NULL, NULL);
  fake_settle();
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  fake_reset();
}

/* Stops the reflector of s and forgets it and its requests. */
static void forget(uv_loop_t *loop, seen_t *s) {
  nl_reflector_stop(s->r, NULL, NULL);
  fake_settle();
  uv_run(loop, UV_RUN_DEFAULT);
  fake_reset();
  nl_buf_free(&s->log);
  *s = (seen_t){0};
}

/* With a client that prefers protobuf and a kind pb.c knows, the watch asks
 * for protobuf (the list stays JSON); the server's answer decides the
 * decoding. The stream is the Node watch recorded from the apiserver. */
static void watch_in_protobuf_when_the_kind_is_known(void **state) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  seen_t s = {0};
  nl_err_t *err = NULL;
  nl_reflector_cbs_t cbs = {on_list, on_event};
  const char *nodes = "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"1100\"},\"items\":[]}";
  size_t plen = 0;
  char *pb = fixture_read("../api/node-watch.pb", &plen);
  assert_non_null(pb);
  for (int answer_pb = 1; answer_pb >= 0; answer_pb--) {
    fake_protobuf = true;
    nl_reflector_opts_t o = {.path = "/api/v1/nodes", .field_selector = "metadata.name=bytes-fixture",
                             .api_version = "v1", .kind = "Node"};
    assert_int_equal(nl_reflector_new(&s.r, &loop, NULL, &o, &cbs, &s, &err), 0);
    nl_reflector_start(s.r);
    assert_false(fake_last()->accept_protobuf);
    fake_respond(fake_last(), 200, nodes);
    fake_req_t *w = fake_last();
    assert_non_null(strstr(w->path, "watch=true"));
    assert_true(w->accept_protobuf);
    if (answer_pb) {
      fake_head_type(w, 200, "application/vnd.kubernetes.protobuf;stream=watch");
      fake_data_n(w, pb, 700); /* the first frame and a piece of the next */
      fake_data_n(w, pb + 700, plen - 700);
      /* ADDED, MODIFIED, DELETED reach on_event; the bookmarks advance the version */
      assert_int_equal(s.events, 3);
      assert_non_null(strstr(s.log.data, "MODIFIED {\"metadata\":{\"name\":\"bytes-fixture\""));
      assert_non_null(strstr(s.log.data, "\"labels\":{\"fixture\":\"2\"}"));
      assert_string_equal(nl_reflector_resource_version(s.r), "1327");
    } else { /* a server without protobuf for it answers JSON */
      fake_head(w, 200);
      fake_data(w, "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"1200\"}}}\n");
      assert_string_equal(nl_reflector_resource_version(s.r), "1200");
    }
    forget(&loop, &s);
  }
  /* A kind pb.c does not know, or a JSON client: JSON. */
  for (int i = 0; i < 2; i++) {
    fake_protobuf = i == 0;
    nl_reflector_opts_t o = {.path = PODS, .api_version = "v1", .kind = i == 0 ? "Pod" : "Node"};
    assert_int_equal(nl_reflector_new(&s.r, &loop, NULL, &o, &cbs, &s, &err), 0);
    nl_reflector_start(s.r);
    fake_respond(fake_last(), 200, list10);
    assert_false(fake_last()->accept_protobuf);
    forget(&loop, &s);
  }
  free(pb);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(lists_watches_and_follows_bookmarks, setup, teardown),
      cmocka_unit_test_setup_teardown(error_event_410_relists_from_the_last_version, setup, teardown),
      cmocka_unit_test_setup_teardown(http_410_on_watch_relists, setup, teardown),
      cmocka_unit_test_setup_teardown(other_watch_errors_back_off_then_relist, setup, teardown),
      cmocka_unit_test_setup_teardown(broken_streams_back_off_then_rewatch, setup, teardown),
      cmocka_unit_test_setup_teardown(list_failures_retry_and_do_not_sync, setup, teardown),
      cmocka_unit_test_setup_teardown(timeouts_are_randomised, setup, teardown),
      cmocka_unit_test_setup_teardown(stop_while_watching_touches_nothing_freed, setup, teardown),
      cmocka_unit_test_setup_teardown(stop_from_the_event_callback, setup, teardown),
      cmocka_unit_test_setup_teardown(stop_during_backoff, setup, teardown),
      cmocka_unit_test_setup_teardown(no_link_waits_for_the_client_not_a_back_off, setup, teardown),
      cmocka_unit_test_setup_teardown(an_event_starts_the_back_off_over, setup_slow, teardown),
      cmocka_unit_test(bad_paths_are_refused),
      cmocka_unit_test(selectors_are_escaped),
      cmocka_unit_test(watch_in_protobuf_when_the_kind_is_known),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
