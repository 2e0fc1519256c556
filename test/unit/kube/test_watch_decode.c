#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent/kube/watch_decode.h"
#include "reactor/buf.h"
#include "../model/fixture.h" /* FIXTURES: test/fixtures/kubeconfig */

/* What the callback saw, as text: "TYPE rv=<rv> code=<c> reason=<r> msg=<m> obj=<json>\n". */
typedef struct seen {
  nl_buf_t log;
  int n;
  int stop_after; /* 0: never */
  const char *in_start, *in_end; /* the fed chunk, to see in-place objects */
  int in_place;
} seen_t;

static const char *tname[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

static int on_event(void *ctx, const nl_kube_watch_event_t *ev) {
  seen_t *s = ctx;
  nl_buf_printf(&s->log, "%s rv=%s code=%d reason=%s msg=%s obj=%.*s\n", tname[ev->type],
                ev->resource_version, ev->code, nl_kube_reason_name(ev->reason), ev->message,
                (int)ev->object_len, ev->object);
  if (ev->object >= s->in_start && ev->object < s->in_end) s->in_place++;
  s->n++;
  return s->stop_after && s->n >= s->stop_after;
}

static const char stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"name\":\"web\",\"namespace\":\"default\",\"resourceVersion\":\"101\"},\"spec\":"
    "{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"args\":[\"a\\nb\"]}]}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\","
    "\"resourceVersion\":\"102\"},\"status\":{\"phase\":\"Running\"}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"resourceVersion\":\"150\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}},"
    "\"spec\":{\"containers\":null}}}\n"
    "\r\n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\","
    "\"resourceVersion\":\"160\"}}}\r\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"too old resource version: 101 (150)\",\"reason\":"
    "\"Expired\",\"code\":410}}\n";

static const char want[] =
    "ADDED rv=101 code=0 reason= msg= obj={\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"name\":\"web\",\"namespace\":\"default\",\"resourceVersion\":\"101\"},\"spec\":"
    "{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"args\":[\"a\\nb\"]}]}}\n"
    "MODIFIED rv=102 code=0 reason= msg= obj={\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\","
    "\"resourceVersion\":\"102\"},\"status\":{\"phase\":\"Running\"}}\n"
    "BOOKMARK rv=150 code=0 reason= msg= obj={\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"resourceVersion\":\"150\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}},"
    "\"spec\":{\"containers\":null}}\n"
    "DELETED rv=160 code=0 reason= msg= obj={\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\","
    "\"resourceVersion\":\"160\"}}\n"
    "ERROR rv= code=410 reason=Expired msg=too old resource version: 101 (150) obj="
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"too old resource version: 101 (150)\",\"reason\":\"Expired\",\"code\":410}\n";

static void feed_in_pieces(const char *in, size_t len, size_t piece, seen_t *s) {
  nl_kube_watch_decoder_t d;
  nl_kube_watch_decoder_init(&d, 0, on_event, s);
  nl_err_t *err = NULL;
  for (size_t off = 0; off < len; off += piece) {
    size_t n = len - off < piece ? len - off : piece;
    /* a fresh copy per piece, as a transport's read buffer: nothing may point into
     * it after feed() returns */
    char *chunk = malloc(n);
    memcpy(chunk, in + off, n);
    s->in_start = chunk;
    s->in_end = chunk + n;
    assert_int_equal(nl_kube_watch_decoder_feed(&d, chunk, n, &err), 0);
    free(chunk);
  }
  assert_int_equal(nl_kube_watch_decoder_finish(&d, &err), 0);
  nl_kube_watch_decoder_free(&d);
}

static void every_chunking_gives_the_same_events(void **state) {
  size_t len = sizeof stream - 1;
  for (size_t piece = 1; piece <= len; piece++) {
    seen_t s = {NL_BUF_INIT};
    feed_in_pieces(stream, len, piece, &s);
    if (strcmp(s.log.data, want) != 0) fail_msg("piece %zu:\n%s", piece, s.log.data);
    assert_int_equal(s.n, 5);
    if (piece == len) assert_int_equal(s.in_place, 5); /* one piece: no copy at all */
    nl_buf_free(&s.log);
  }
}

static void every_split_point(void **state) {
  size_t len = sizeof stream - 1;
  for (size_t cut = 0; cut <= len; cut++) {
    seen_t s = {NL_BUF_INIT};
    nl_kube_watch_decoder_t d;
    nl_kube_watch_decoder_init(&d, 0, on_event, &s);
    nl_err_t *err = NULL;
    assert_int_equal(nl_kube_watch_decoder_feed(&d, stream, cut, &err), 0);
    assert_int_equal(nl_kube_watch_decoder_feed(&d, stream + cut, len - cut, &err), 0);
    assert_int_equal(nl_kube_watch_decoder_finish(&d, &err), 0);
    assert_string_equal(s.log.data, want);
    nl_kube_watch_decoder_free(&d);
    nl_buf_free(&s.log);
  }
}

static int expect_error(const char *in, size_t max, const char *msg) {
  seen_t s = {NL_BUF_INIT};
  nl_kube_watch_decoder_t d;
  nl_kube_watch_decoder_init(&d, max, on_event, &s);
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_watch_decoder_feed(&d, in, strlen(in), &err), -1);
  if (strncmp(err->msg, msg, strlen(msg)) != 0) fail_msg("got  %s\nwant %s", err->msg, msg);
  int code = err->code;
  nl_err_free(&err);
  /* the stream is over: more input is refused */
  assert_int_equal(nl_kube_watch_decoder_feed(&d, "{}\n", 3, &err), -1);
  nl_err_free(&err);
  nl_kube_watch_decoder_free(&d);
  int n = s.n;
  nl_buf_free(&s.log);
  return n * 1000 + code % 1000;
}

static void garbage_ends_the_stream(void **state) {
  const char *ok = "{\"type\":\"ADDED\",\"object\":{}}\n";
  char in[256];
  snprintf(in, sizeof in, "%s{\"type\":\"ADDED\",\"object\":{\"a\":}}\n%s", ok, ok);
  assert_int_equal(expect_error(in, 0, "malformed watch event: line 1: JSON: "), 1000 + NL_EINVAL % 1000);
  expect_error("<html>proxy error</html>\n", 0, "malformed watch event: line 1: JSON: unexpected character");
  expect_error("[1,2]\n", 0, "malformed watch event: not an object");
  expect_error("{\"object\":{}}\n", 0, "malformed watch event: no type");
  expect_error("{\"type\":\"ADDED\"}\n", 0, "malformed watch event: ADDED without an object");
  expect_error("{\"type\":\"ADDED\",\"object\":\"x\"}\n", 0, "malformed watch event: ADDED without an object");
  expect_error("{\"type\":\"SYNC\",\"object\":{}}\n", 0, "watch event of type \"SYNC\" is not supported");
  expect_error("{\"type\":\"ADDED\",\"object\":{}} trailing\n", 0, "malformed watch event: line 1: JSON: trailing data");
}

static void oversize_is_refused(void **state) {
  char big[200];
  memset(big, ' ', sizeof big);
  memcpy(big, "{\"type\":\"ADDED\",\"object\":{\"x\":\"", 31);
  memcpy(big + sizeof big - 5, "\"}}\n", 5);
  /* with a newline in the same piece */
  assert_int_equal(expect_error(big, 64, "watch event larger than 64 bytes") % 1000, EMSGSIZE);
  /* no newline ever: refused as soon as the bound is passed, not at the end */
  seen_t s = {NL_BUF_INIT};
  nl_kube_watch_decoder_t d;
  nl_kube_watch_decoder_init(&d, 64, on_event, &s);
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_watch_decoder_feed(&d, big, 60, &err), 0);
  assert_int_equal(nl_kube_watch_decoder_feed(&d, big + 60, 5, &err), -1);
  assert_string_equal(err->msg, "watch event larger than 64 bytes");
  nl_err_free(&err);
  nl_kube_watch_decoder_free(&d);
  /* exactly at the bound is fine */
  const char *ok = "{\"type\":\"ADDED\",\"object\":{}}\n";
  nl_kube_watch_decoder_init(&d, strlen(ok) - 1, on_event, &s);
  assert_int_equal(nl_kube_watch_decoder_feed(&d, ok, strlen(ok), &err), 0);
  assert_int_equal(s.n, 1);
  nl_kube_watch_decoder_free(&d);
  nl_buf_free(&s.log);
}

static void torn_stream_and_stop(void **state) {
  seen_t s = {NL_BUF_INIT};
  nl_kube_watch_decoder_t d;
  nl_kube_watch_decoder_init(&d, 0, on_event, &s);
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_watch_decoder_feed(&d, stream, 40, &err), 0);
  assert_int_equal(nl_kube_watch_decoder_finish(&d, &err), -1);
  assert_string_equal(err->msg, "watch stream ended inside an event (40 bytes)");
  nl_err_free(&err);
  nl_kube_watch_decoder_free(&d);
  assert_int_equal(s.n, 0);

  s.stop_after = 2; /* the caller ends the watch from its callback */
  nl_kube_watch_decoder_init(&d, 0, on_event, &s);
  assert_int_equal(nl_kube_watch_decoder_feed(&d, stream, sizeof stream - 1, &err), 1);
  assert_int_equal(s.n, 2);
  nl_kube_watch_decoder_free(&d);
  nl_buf_free(&s.log);
}

static void error_event_without_status(void **state) {
  seen_t s = {NL_BUF_INIT};
  nl_kube_watch_decoder_t d;
  nl_kube_watch_decoder_init(&d, 0, on_event, &s);
  nl_err_t *err = NULL;
  const char *in = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n"
                   "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Pod\",\"code\":410}}\n";
  assert_int_equal(nl_kube_watch_decoder_feed(&d, in, strlen(in), &err), 0);
  assert_string_equal(s.log.data,
                      "ERROR rv= code=410 reason=Gone msg= obj={\"kind\":\"Status\",\"code\":410}\n"
                      "ERROR rv= code=0 reason= msg= obj={\"kind\":\"Pod\",\"code\":410}\n");
  nl_kube_watch_decoder_free(&d);
  nl_buf_free(&s.log);
}

/* ---- protobuf ---- */

/* The differences pb.c documents (docs/KUBE.md): protobuf carries zero numbers
 * and false where Go's JSON omits them, no empty strings where JSON has them,
 * and a zero time is null. Both sides without those compare equal. */
static void normalize(json_t *v) {
  if (json_is_array(v)) {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) normalize(e);
    return;
  }
  if (!json_is_object(v)) return;
  const char *k;
  json_t *e;
  void *tmp;
  json_object_foreach_safe(v, tmp, k, e) {
    if ((json_is_string(e) && !*json_string_value(e)) || json_is_false(e) || json_is_null(e) ||
        (json_is_integer(e) && json_integer_value(e) == 0))
      json_object_del(v, k);
    else
      normalize(e);
  }
}

typedef struct evs {
  json_t *list; /* [{"type":..., "rv":..., "object":...}] */
} evs_t;

static int collect(void *ctx, const nl_kube_watch_event_t *ev) {
  evs_t *e = ctx;
  json_t *obj = json_loadb(ev->object, ev->object_len, 0, NULL);
  assert_non_null(obj);
  json_array_append_new(e->list, json_pack("{s:s,s:s,s:o}", "type", tname[ev->type], "rv",
                                           ev->resource_version, "object", obj));
  return 0;
}

static json_t *decode_pb(const char *in, size_t len, size_t piece) {
  evs_t e = {json_array()};
  nl_kube_watch_decoder_t d;
  nl_kube_watch_decoder_init(&d, 0, collect, &e);
  nl_kube_watch_decoder_protobuf(&d);
  nl_err_t *err = NULL;
  for (size_t off = 0; off < len; off += piece) {
    size_t n = len - off < piece ? len - off : piece;
    char *chunk = malloc(n);
    memcpy(chunk, in + off, n);
    int rc = nl_kube_watch_decoder_feed(&d, chunk, n, &err);
    free(chunk);
    if (rc) fail_msg("piece %zu at %zu: %s", piece, off, err ? err->msg : "stopped");
  }
  assert_int_equal(nl_kube_watch_decoder_finish(&d, &err), 0);
  nl_kube_watch_decoder_free(&d);
  return e.list;
}

/* A watch of one Node recorded from the apiserver (v1.36.3) both ways at
 * once: ADDED, a BOOKMARK, MODIFIED, DELETED, two BOOKMARKs. The protobuf
 * stream gives the same events, with the same objects, as the JSON one, in
 * whatever pieces it comes. */
static void protobuf_stream_gives_the_json_events(void **state) {
  size_t plen = 0, jlen = 0;
  char *pb = fixture_read("../api/node-watch.pb", &plen);
  char *js = fixture_read("../api/node-watch.json", &jlen);
  assert_non_null(pb);
  assert_non_null(js);
  evs_t je = {json_array()};
  nl_kube_watch_decoder_t d;
  nl_kube_watch_decoder_init(&d, 0, collect, &je);
  nl_err_t *err = NULL;
  assert_int_equal(nl_kube_watch_decoder_feed(&d, js, jlen, &err), 0);
  nl_kube_watch_decoder_free(&d);
  assert_int_equal(json_array_size(je.list), 6);
  for (size_t piece = 1; piece <= plen; piece += piece < 16 ? 1 : 97) {
    json_t *pe = decode_pb(pb, plen, piece);
    assert_int_equal(json_array_size(pe), 6);
    size_t i;
    json_t *ev;
    json_array_foreach(pe, i, ev) {
      json_t *exp = json_array_get(je.list, i);
      assert_string_equal(json_string_value(json_object_get(ev, "type")),
                          json_string_value(json_object_get(exp, "type")));
      assert_string_equal(json_string_value(json_object_get(ev, "rv")),
                          json_string_value(json_object_get(exp, "rv")));
      normalize(ev);
      normalize(exp);
      if (!json_equal(json_object_get(ev, "object"), json_object_get(exp, "object"))) {
        char *a = json_dumps(ev, JSON_COMPACT), *b = json_dumps(exp, JSON_COMPACT);
        fail_msg("event %zu (piece %zu):\n got %s\nwant %s", i, piece, a, b);
      }
    }
    json_decref(pe);
  }
  json_decref(je.list);
  free(pb);
  free(js);
}

static void pb_expect_error(const uint8_t *in, size_t len, size_t max, const char *msg) {
  evs_t e = {json_array()};
  nl_kube_watch_decoder_t d;
  nl_kube_watch_decoder_init(&d, max, collect, &e);
  nl_kube_watch_decoder_protobuf(&d);
  nl_err_t *err = NULL;
  if (nl_kube_watch_decoder_feed(&d, (const char *)in, len, &err) != -1)
    fail_msg("no error, want %s", msg);
  if (strncmp(err->msg, msg, strlen(msg)) != 0) fail_msg("got  %s\nwant %s", err->msg, msg);
  nl_err_free(&err);
  assert_int_equal(nl_kube_watch_decoder_feed(&d, "\0\0\0\0", 4, &err), -1);
  nl_err_free(&err);
  nl_kube_watch_decoder_free(&d);
  json_decref(e.list);
}

static void protobuf_errors_name_the_cause(void **state) {
  /* not a WatchEvent (field 1 as a varint) */
  pb_expect_error((const uint8_t *)"\0\0\0\2\x08\x01", 6, 0,
                  "malformed watch event: protobuf: the frame (WatchEvent) does not decode");
  /* a type nobody sends */
  pb_expect_error((const uint8_t *)"\0\0\0\6\x0a\x04SYNC", 10, 0,
                  "watch event of type \"SYNC\" is not supported");
  /* no object */
  pb_expect_error((const uint8_t *)"\0\0\0\7\x0a\x05" "ADDED", 11, 0,
                  "malformed watch event: ADDED without an object");
  /* an object without the envelope's magic */
  pb_expect_error((const uint8_t *)"\0\0\0\x0b\x0a\x05" "ADDED\x12\x02\x0a\x00", 15, 0,
                  "malformed watch event: ADDED: protobuf: the body does not start with the k8s magic");
  /* a kind pb.c does not know: v1 Pod */
  static const uint8_t pod[] = {0, 0, 0, 0x1c, 0x0a, 0x05, 'A', 'D', 'D', 'E', 'D', 0x12, 0x13,
                                0x0a, 0x11, 'k', '8', 's', 0, 0x0a, 0x09, 0x0a, 0x02, 'v', '1',
                                0x12, 0x03, 'P', 'o', 'd', 0x12, 0x00};
  pb_expect_error(pod, sizeof pod, 0, "malformed watch event: ADDED: protobuf: v1 Pod: kind not known");
  /* a length over the bound, refused before its bytes come */
  pb_expect_error((const uint8_t *)"\x01\0\0\x01", 4, 0, "watch event larger than 16777216 bytes");
  pb_expect_error((const uint8_t *)"\0\0\0\x41", 4, 64, "watch event larger than 64 bytes");
}

static void protobuf_torn_stream(void **state) {
  size_t plen = 0;
  char *pb = fixture_read("../api/node-watch.pb", &plen);
  assert_non_null(pb);
  evs_t e = {json_array()};
  nl_kube_watch_decoder_t d;
  nl_err_t *err = NULL;
  /* inside a frame's length, then inside its body */
  size_t cuts[] = {2, 300};
  for (size_t i = 0; i < 2; i++) {
    nl_kube_watch_decoder_init(&d, 0, collect, &e);
    nl_kube_watch_decoder_protobuf(&d);
    assert_int_equal(nl_kube_watch_decoder_feed(&d, pb, cuts[i], &err), 0);
    assert_int_equal(nl_kube_watch_decoder_finish(&d, &err), -1);
    assert_non_null(strstr(err->msg, "watch stream ended inside an event"));
    nl_err_free(&err);
    nl_kube_watch_decoder_free(&d);
  }
  assert_int_equal(json_array_size(e.list), 0);
  json_decref(e.list);
  free(pb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_chunking_gives_the_same_events),
      cmocka_unit_test(every_split_point),
      cmocka_unit_test(garbage_ends_the_stream),
      cmocka_unit_test(oversize_is_refused),
      cmocka_unit_test(torn_stream_and_stop),
      cmocka_unit_test(error_event_without_status),
      cmocka_unit_test(protobuf_stream_gives_the_json_events),
      cmocka_unit_test(protobuf_errors_name_the_cause),
      cmocka_unit_test(protobuf_torn_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
