/* Events: the correlator on its own with a fake clock (counts, aggregation, the
 * spam filter), the Event's JSON, and the recorder against a fake of
 * agent/kube/client.h (POST then PATCH, the queue bound, retries, stop). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "agent/kube/status.h"
#include "fake_kube.h"
#include "managers/events.h"
#include "reactor/xalloc.h"

#define SEC 1000000000LL
#define T0 (1700000000LL * SEC)

static const nl_event_ref_t pod = {.kind = "Pod", .namespace_ = "ns", .name = "web",
                                   .uid = "u1", .api_version = "v1",
                                   .field_path = "spec.containers{c}"};

static nl_event_action_t correlate(nl_event_correlator_t *c, nl_event_t *ev, const char *reason,
                                   const char *msg, int64_t now) {
  nl_event_make(ev, &pod, NULL, NL_EVENT_WARNING, reason, msg, now);
  return nl_event_correlate(c, ev, now);
}

static void test_repeat_is_a_patch_with_count(void **state) {
  (void)state;
  nl_event_correlator_t c;
  nl_event_correlator_init(&c, &(nl_event_correlator_opts_t){.component = "kubelet", .host = "n1"});
  nl_event_t a, b, d;
  assert_int_equal(correlate(&c, &a, "BackOff", "Back-off restarting", T0), NL_EVENT_CREATE);
  assert_int_equal(a.count, 1);
  assert_string_equal(a.name, "web.17979cfe362a0000");
  assert_int_equal(correlate(&c, &b, "BackOff", "Back-off restarting", T0 + 5 * SEC),
                   NL_EVENT_PATCH);
  assert_string_equal(b.name, a.name);
  assert_int_equal(b.count, 2);
  assert_true(b.first_ns == T0 && b.last_ns == T0 + 5 * SEC);
  /* another message is another event */
  assert_int_equal(correlate(&c, &d, "BackOff", "other", T0 + 6 * SEC), NL_EVENT_CREATE);
  assert_int_equal(d.count, 1);
  nl_event_free(&a), nl_event_free(&b), nl_event_free(&d);
  nl_event_correlator_free(&c);
}

static void test_ten_messages_aggregate(void **state) {
  (void)state;
  nl_event_correlator_t c;
  nl_event_correlator_init(&c, &(nl_event_correlator_opts_t){.component = "kubelet", .host = "n1"});
  char msg[32];
  nl_event_t ev;
  for (int i = 0; i < 9; i++) {
    snprintf(msg, sizeof msg, "probe failed: %d", i);
    assert_int_equal(correlate(&c, &ev, "Unhealthy", msg, T0 + i * SEC), NL_EVENT_CREATE);
    assert_string_equal(ev.message, msg);
    nl_event_free(&ev);
  }
  /* the 10th distinct message within 10 minutes is combined */
  assert_int_equal(correlate(&c, &ev, "Unhealthy", "probe failed: 9", T0 + 9 * SEC),
                   NL_EVENT_CREATE);
  assert_string_equal(ev.message, "(combined from similar events): probe failed: 9");
  char *name = nl_xstrdup(ev.name);
  nl_event_free(&ev);
  /* the next one counts on the combined event */
  assert_int_equal(correlate(&c, &ev, "Unhealthy", "probe failed: 10", T0 + 10 * SEC),
                   NL_EVENT_PATCH);
  assert_string_equal(ev.message, "(combined from similar events): probe failed: 10");
  assert_string_equal(ev.name, name);
  assert_int_equal(ev.count, 2);
  nl_event_free(&ev);
  free(name);
  /* after 10 minutes of quiet the set starts again */
  assert_int_equal(correlate(&c, &ev, "Unhealthy", "fresh", T0 + 700 * SEC), NL_EVENT_CREATE);
  assert_string_equal(ev.message, "fresh");
  nl_event_free(&ev);
  nl_event_correlator_free(&c);
}

/* What the caches keep per event: digests, not the joined keys and messages
 * (a full cache is 3 x 4096 entries; here 827 bytes an event for the three). Measured on glibc's heap; the sanitizer
 * builds' allocator reports nothing and skips the figure. */
static void test_entries_are_small(void **state) {
  (void)state;
  nl_event_correlator_t c;
  nl_event_correlator_init(&c, &(nl_event_correlator_opts_t){.component = "kubelet", .host = "n1"});
  nl_event_ref_t obj = pod;
  char name[80], msg[300];
  nl_event_t ev;
#ifdef __GLIBC__
  size_t before = mallinfo2().uordblks;
#else /* musl: no mallinfo2, no figure */
  size_t before = 0;
#endif
  for (int i = 0; i < 500; i++) {
    snprintf(name, sizeof name, "a-rather-long-pod-name-from-a-deployment-7d9c8b6f5-%05d", i);
    snprintf(msg, sizeof msg, "Successfully pulled image \"registry.example.com/team/app:1.%d\" in "
             "1.234s (1.234s including waiting). Image size: 123456789 bytes.", i);
    obj.name = name;
    nl_event_make(&ev, &obj, NULL, "Normal", "Pulled", msg, T0 + i * SEC);
    assert_int_equal(nl_event_correlate(&c, &ev, T0 + i * SEC), NL_EVENT_CREATE);
    nl_event_free(&ev);
  }
#ifdef __GLIBC__
  size_t after = mallinfo2().uordblks;
#else
  size_t after = 0;
#endif
  if (before) assert_true((after - before) / 500 < 1000); /* 1592 bytes with the joins */
  nl_event_correlator_free(&c);
}

static void test_spam_filter_burst_and_refill(void **state) {
  (void)state;
  nl_event_correlator_t c;
  nl_event_correlator_init(&c, &(nl_event_correlator_opts_t){.component = "kubelet", .host = "n1"});
  nl_event_t ev;
  int passed = 0;
  for (int i = 0; i < 40; i++) {
    if (correlate(&c, &ev, "BackOff", "same", T0) != NL_EVENT_SKIP) passed++;
    nl_event_free(&ev);
  }
  assert_int_equal(passed, 25);
  /* another object has its own bucket */
  nl_event_ref_t other = pod;
  other.name = "db";
  nl_event_make(&ev, &other, NULL, "Normal", "Pulled", "x", T0);
  assert_int_not_equal(nl_event_correlate(&c, &ev, T0), NL_EVENT_SKIP);
  nl_event_free(&ev);
  /* one token per 5 minutes */
  assert_int_equal(correlate(&c, &ev, "BackOff", "same", T0 + 299 * SEC), NL_EVENT_SKIP);
  nl_event_free(&ev);
  assert_int_equal(correlate(&c, &ev, "BackOff", "same", T0 + 301 * SEC), NL_EVENT_PATCH);
  nl_event_free(&ev);
  assert_int_equal(correlate(&c, &ev, "BackOff", "same", T0 + 301 * SEC), NL_EVENT_SKIP);
  nl_event_free(&ev);
  nl_event_correlator_free(&c);
}

static void test_lru_bound(void **state) {
  (void)state;
  nl_event_correlator_t c;
  nl_event_correlator_init(&c, &(nl_event_correlator_opts_t){
                                   .component = "kubelet", .host = "n1", .cache_size = 3});
  nl_event_t ev;
  char msg[16];
  for (int i = 0; i < 5; i++) {
    snprintf(msg, sizeof msg, "m%d", i);
    nl_event_ref_t r = pod;
    r.name = msg;
    nl_event_make(&ev, &r, NULL, "Normal", "Started", "x", T0);
    nl_event_correlate(&c, &ev, T0);
    nl_event_free(&ev);
  }
  assert_int_equal(nl_map_size(&c.observed.map), 3);
  assert_int_equal(nl_map_size(&c.spam.map), 3);
  nl_event_correlator_free(&c);
}

static void test_json(void **state) {
  (void)state;
  nl_event_t ev;
  nl_event_make(&ev, &pod, NULL, "Normal", "Pulling", "Pulling image \"busybox\"", T0);
  char *s = nl_event_json(&ev, "kubelet", "n1");
  json_t *j = json_loads(s, 0, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "kind")), "Event");
  json_t *meta = json_object_get(j, "metadata"), *obj = json_object_get(j, "involvedObject");
  assert_string_equal(json_string_value(json_object_get(meta, "namespace")), "ns");
  assert_string_equal(json_string_value(json_object_get(obj, "fieldPath")), "spec.containers{c}");
  assert_string_equal(json_string_value(json_object_get(obj, "uid")), "u1");
  assert_string_equal(json_string_value(json_object_get(json_object_get(j, "source"), "host")),
                      "n1");
  assert_string_equal(json_string_value(json_object_get(j, "reportingComponent")), "kubelet");
  assert_string_equal(json_string_value(json_object_get(j, "reportingInstance")), "n1");
  assert_string_equal(json_string_value(json_object_get(j, "firstTimestamp")),
                      "2023-11-14T22:13:20Z");
  assert_int_equal(json_integer_value(json_object_get(j, "count")), 1);
  json_decref(j);
  free(s);
  s = nl_event_patch_json(&ev);
  assert_string_equal(s, "{\"count\":1,\"lastTimestamp\":\"2023-11-14T22:13:20Z\","
                         "\"message\":\"Pulling image \\\"busybox\\\"\"}");
  free(s);
  nl_event_free(&ev);
  /* a Node: cluster-scoped, so the Event lives in default */
  nl_event_ref_t n = nl_event_node_ref("n1");
  nl_event_make(&ev, &n, NULL, "Normal", "Starting", "Starting kubelet.", T0);
  assert_string_equal(ev.namespace_, "default");
  assert_string_equal(ev.uid, "n1");
  assert_null(ev.obj_namespace);
  nl_event_free(&ev);
}

static nl_kv_t evict_kv[] = {{"offending_containers", "hog"},
                              {"offending_containers_usage", "300Mi"},
                              {"starved_resource", "memory"}};
static const nl_kvlist_t evict_annotations = {evict_kv, 3};

/* upstream makeEvent: the annotations are the Event's metadata.annotations;
 * an event without has none. */
static void test_json_annotations(void **state) {
  (void)state;
  nl_event_t ev;
  nl_event_make(&ev, &pod, &evict_annotations, "Warning", "Evicted", "The node was low", T0);
  char *s = nl_event_json(&ev, "kubelet", "n1");
  json_t *j = json_loads(s, 0, NULL);
  assert_non_null(j);
  json_t *a = json_object_get(json_object_get(j, "metadata"), "annotations");
  assert_int_equal(json_object_size(a), 3);
  assert_string_equal(json_string_value(json_object_get(a, "starved_resource")), "memory");
  assert_string_equal(json_string_value(json_object_get(a, "offending_containers")), "hog");
  assert_string_equal(json_string_value(json_object_get(a, "offending_containers_usage")),
                      "300Mi");
  json_decref(j);
  free(s);
  /* a repeat's patch leaves them as they are */
  s = nl_event_patch_json(&ev);
  assert_null(strstr(s, "annotations"));
  free(s);
  nl_event_free(&ev);
  nl_event_make(&ev, &pod, NULL, "Warning", "Evicted", "x", T0);
  s = nl_event_json(&ev, "kubelet", "n1");
  assert_null(strstr(s, "annotations"));
  free(s);
  nl_event_free(&ev);
}

/* upstream's correlator: annotations are in no key (a repeat with other ones
 * is still a repeat), and the aggregated event is made without them. */
static void test_correlator_annotations(void **state) {
  (void)state;
  nl_event_correlator_t c;
  nl_event_correlator_init(&c, &(nl_event_correlator_opts_t){.component = "kubelet", .host = "n1"});
  nl_event_t a, b;
  nl_event_make(&a, &pod, &evict_annotations, "Warning", "Evicted", "m", T0);
  assert_int_equal(nl_event_correlate(&c, &a, T0), NL_EVENT_CREATE);
  assert_int_equal(a.n_annotations, 3);
  nl_event_make(&b, &pod, NULL, "Warning", "Evicted", "m", T0 + SEC);
  assert_int_equal(nl_event_correlate(&c, &b, T0 + SEC), NL_EVENT_PATCH);
  assert_string_equal(b.name, a.name);
  nl_event_free(&a), nl_event_free(&b);
  char msg[32];
  for (int i = 0; i < 10; i++) {
    snprintf(msg, sizeof msg, "low %d", i);
    nl_event_make(&a, &pod, &evict_annotations, "Warning", "Evicted", msg, T0 + 2 * SEC);
    nl_event_correlate(&c, &a, T0 + 2 * SEC);
    if (i < 9) nl_event_free(&a);
  }
  assert_non_null(strstr(a.message, "(combined from similar events): "));
  assert_int_equal(a.n_annotations, 0);
  assert_null(a.annotations);
  nl_event_free(&a);
  nl_event_correlator_free(&c);
}

static void test_container_ref(void **state) {
  (void)state;
  nl_container_t init = {.name = "setup"}, main = {.name = "app"};
  nl_pod_t p = {.metadata = {.name = "web", .namespace_ = "ns", .uid = "u"},
                .spec = {.init_containers = &init, .n_init_containers = 1,
                         .containers = &main, .n_containers = 1}};
  char buf[128];
  assert_string_equal(nl_event_container_ref(&p, "app", buf, sizeof buf).field_path,
                      "spec.containers{app}");
  assert_string_equal(nl_event_container_ref(&p, "setup", buf, sizeof buf).field_path,
                      "spec.initContainers{setup}");
  assert_null(nl_event_container_ref(&p, "ghost", buf, sizeof buf).field_path);
}

/* ---- the recorder against a fake client ---- */

static struct {
  int64_t now;
} fk;

nl_kube_reason_t nl_kube_status_reason(const nl_kube_response_t *resp) {
  return resp->status == 409 ? NL_KUBE_REASON_ALREADY_EXISTS : NL_KUBE_REASON_UNKNOWN;
}

static int64_t fake_now(void *ctx) {
  (void)ctx;
  return fk.now;
}

static void run_once(void) { uv_run(kf.loop, UV_RUN_NOWAIT); }

/* Runs the loop until there are n requests (or a second passes). */
static void run_until_reqs(size_t n) {
  for (int i = 0; i < 1000 && kf.n < n; i++) {
    uv_run(kf.loop, UV_RUN_NOWAIT);
    if (kf.n < n) uv_sleep(1);
  }
  assert_int_equal(kf.n, n);
}

static bool stopped;
static void on_stopped(nl_events_t *e) {
  (void)e;
  stopped = true;
}

static void setup_fake(uv_loop_t *loop) {
  fk.now = T0;
  uv_loop_init(loop);
  kf_reset(loop);
  stopped = false;
}

static void finish(uv_loop_t *loop, nl_events_t *e, uint64_t flush_ms) {
  nl_events_stop(e, flush_ms, on_stopped);
  while (!stopped) uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&kf.deliver, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

static nl_events_opts_t opts(void) {
  return (nl_events_opts_t){.host = "n1", .retry_ms = 20, .now_ns = fake_now};
}

/* With annotations (upstream AnnotatedEventf) through the sink: the POST
 * carries them, the repeat's PATCH does not, the POST after the PATCH found
 * the Event gone does. */
static void test_post_then_patch(void **state) {
  (void)state;
  uv_loop_t loop;
  setup_fake(&loop);
  nl_events_t e;
  nl_events_opts_t o = opts();
  nl_events_init(&e, &loop, (nl_kube_client_t *)&kf, &o);
  nl_event_sink_t sink = nl_events_sink(&e);
  nl_event_annotated_record(&sink, &pod, &evict_annotations, "Warning", "Evicted",
                            "The node was low on resource: %s. ", "memory");
  assert_int_equal(kf.n, 0); /* never from inside the call */
  run_until_reqs(1);
  assert_string_equal(kf.reqs[0]->method, "POST");
  assert_string_equal(kf.reqs[0]->path, "/api/v1/namespaces/ns/events");
  assert_non_null(strstr(kf.reqs[0]->body, "\"message\":\"The node was low on resource: memory. \""));
  const char *want = "\"annotations\":{\"offending_containers\":\"hog\","
                     "\"offending_containers_usage\":\"300Mi\",\"starved_resource\":\"memory\"}";
  assert_non_null(strstr(kf.reqs[0]->body, want));
  answer(kf.reqs[0], 201, "{}");
  fk.now += 10 * SEC;
  nl_events_record_annotated(&e, &pod, &evict_annotations, "Warning", "Evicted",
                             "The node was low on resource: memory. ");
  run_until_reqs(2);
  assert_string_equal(kf.reqs[1]->method, "PATCH");
  assert_string_equal(kf.reqs[1]->path, "/api/v1/namespaces/ns/events/web.17979cfe362a0000");
  assert_string_equal(kf.reqs[1]->ctype, "application/strategic-merge-patch+json");
  assert_non_null(strstr(kf.reqs[1]->body, "\"count\":2"));
  assert_null(strstr(kf.reqs[1]->body, "annotations"));
  /* the event was deleted meanwhile: it is created again */
  answer(kf.reqs[1], 404, "{}");
  run_until_reqs(3);
  assert_string_equal(kf.reqs[2]->method, "POST");
  assert_non_null(strstr(kf.reqs[2]->body, "\"count\":2"));
  assert_non_null(strstr(kf.reqs[2]->body, want));
  answer(kf.reqs[2], 201, "{}");
  run_once();
  assert_int_equal(e.sent, 2);
  finish(&loop, &e, 100);
}

static void test_bound_drops_and_retries(void **state) {
  (void)state;
  uv_loop_t loop;
  setup_fake(&loop);
  nl_events_t e;
  nl_events_opts_t o = opts();
  o.max_queued = 5;
  nl_events_init(&e, &loop, (nl_kube_client_t *)&kf, &o);
  nl_event_sink_t sink = nl_events_sink(&e);
  for (int i = 0; i < 8; i++) {
    nl_event_ref_t r = pod;
    char name[8];
    snprintf(name, sizeof name, "p%d", i);
    r.name = name;
    nl_event_record(&sink, &r, "Normal", "Started", "Started container c");
  }
  assert_int_equal(e.dropped, 3);
  run_until_reqs(1);
  /* no answer: tried again later, with the same event */
  fail_req(kf.reqs[0], 111);
  run_until_reqs(2);
  assert_string_equal(kf.reqs[1]->body, kf.reqs[0]->body);
  /* a refusal drops it: the next one goes */
  answer(kf.reqs[1], 422, "{}");
  run_until_reqs(3);
  assert_int_equal(e.failed, 1);
  assert_null(strstr(kf.reqs[2]->body, "\"p0\""));
  /* stopping with the server silent: the bound ends it, the rest is counted */
  finish(&loop, &e, 30);
  assert_int_equal(e.dropped, 3 + 4);
}

static void test_standalone_logs_only(void **state) {
  (void)state;
  uv_loop_t loop;
  setup_fake(&loop);
  nl_events_t e;
  nl_events_opts_t o = opts();
  nl_events_init(&e, &loop, NULL, &o);
  nl_event_sink_t sink = nl_events_sink(&e);
  nl_event_record(&sink, &pod, "Normal", "Pulled", "x");
  run_once();
  assert_int_equal(kf.n, 0);
  assert_int_equal(e.recorded, 1);
  finish(&loop, &e, 100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_repeat_is_a_patch_with_count),
      cmocka_unit_test(test_ten_messages_aggregate),
      cmocka_unit_test(test_spam_filter_burst_and_refill),
      cmocka_unit_test(test_lru_bound),
      cmocka_unit_test(test_entries_are_small),
      cmocka_unit_test(test_json),
      cmocka_unit_test(test_json_annotations),
      cmocka_unit_test(test_correlator_annotations),
      cmocka_unit_test(test_container_ref),
      cmocka_unit_test(test_post_then_patch),
      cmocka_unit_test(test_bound_drops_and_retries),
      cmocka_unit_test(test_standalone_logs_only),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  kf_free();
  return rc;
}
