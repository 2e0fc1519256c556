/* /containerLogs on real files and a real HTTP server, with a test double of
 * the CRI's ContainerStatus (this file's definition wins over the library's):
 * tailLines, timestamps, limitBytes, errors, and follow across a rotation
 * until the container stops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <unistd.h>

#include "agent/kserver_logs.h"
#include "cri/runtime.h"
#include "reactor/http_client.h"
#include "reactor/xalloc.h"

static char dir[64], path[128];
static bool running = true;
static int status_calls;

/* ---- the test double of ContainerStatus ---------------------------------- */

typedef struct pending_status {
  uv_timer_t t;
  nl_cri_container_status_cb cb;
  void *ctx;
  bool known;
} pending_status_t;

static void status_closed(uv_handle_t *h) { free(h->data); }

static void status_fire(uv_timer_t *t) {
  pending_status_t *p = t->data;
  Runtime__V1__ContainerStatus st = RUNTIME__V1__CONTAINER_STATUS__INIT;
  st.log_path = path;
  st.state = running ? RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING
                     : RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
  Runtime__V1__ContainerStatusResponse resp = RUNTIME__V1__CONTAINER_STATUS_RESPONSE__INIT;
  resp.status = &st;
  nl_grpc_status_t ok = {NL_GRPC_OK, ""}, nf = {NL_GRPC_NOT_FOUND, "not found"};
  p->cb(p->known ? &ok : &nf, p->known ? &resp : NULL, p->ctx);
  uv_close((uv_handle_t *)t, status_closed);
}

void nl_cri_container_status(nl_cri_client_t *c, const Runtime__V1__ContainerStatusRequest *req,
                             nl_cri_container_status_cb cb, void *ctx) {
  uv_loop_t *loop = (uv_loop_t *)c; /* the test passes its loop as the client */
  pending_status_t *p = nl_xcalloc(1, sizeof(*p));
  p->cb = cb;
  p->ctx = ctx;
  p->known = strcmp(req->container_id, "c1") == 0;
  status_calls++;
  uv_timer_init(loop, &p->t);
  p->t.data = p;
  uv_timer_start(&p->t, status_fire, 0, 0);
}

/* ---- the world ------------------------------------------------------------ */

typedef struct world {
  uv_loop_t loop;
  nl_http_server_t srv;
  nl_kserver_logs_t logs;
  int status;
  nl_buf_t body;
  bool done;
  uv_timer_t later;
  int step;
} world_t;

static int lookup(void *ctx, const char *ns, const char *pod, const char *container,
                  bool previous, char **id, char **msg) {
  if (strcmp(pod, "p") != 0) {
    *msg = nl_xasprintf("pod \"%s\" does not exist", pod);
    return 404;
  }
  *id = nl_xstrdup(strcmp(container, "gone") == 0 ? "c2" : "c1");
  return 0;
}

static void route(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  static const char *const groups[] = {NULL};
  nl_kserver_user_t u = {"tester", "", groups};
  nl_kserver_logs_handler(ctx, req, &u, resp);
}

static void append(const char *text) {
  FILE *f = fopen(path, "a");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void setup(world_t *w) {
  memset(w, 0, sizeof(*w));
  assert_int_equal(uv_loop_init(&w->loop), 0);
  strcpy(dir, "/tmp/nl-klogs.XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/0.log", dir);
  running = true;
  append("2024-05-01T08:00:01Z stdout F one\n"
         "2024-05-01T08:00:02Z stderr F two\n"
         "2024-05-01T08:00:03Z stdout P thr\n"
         "2024-05-01T08:00:03Z stdout F ee\n"
         "2024-05-01T08:00:04Z stdout F four\n");
  w->logs = (nl_kserver_logs_t){.loop = &w->loop,
                                .cri = (nl_cri_client_t *)&w->loop,
                                .lookup = lookup,
                                .poll_ms = 10,
                                .state_ms = 50};
  nl_err_t *err = NULL;
  assert_int_equal(nl_http_server_init(&w->srv, &w->loop, NULL, &err), 0);
  nl_http_server_route(&w->srv, "GET", "/containerLogs/", route, &w->logs);
  assert_int_equal(nl_http_server_listen(&w->srv, "127.0.0.1", 0, &err), 0);
}

static void done(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {
  world_t *w = ctx;
  assert_null(err);
  w->status = resp->status;
  nl_buf_reset(&w->body);
  nl_buf_append(&w->body, resp->body, resp->body_len);
  nl_buf_puts(&w->body, "");
  w->done = true;
  nl_http_server_stop(&w->srv, NULL, NULL);
}

static void get(world_t *w, const char *target) {
  char url[256];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", nl_http_server_port(&w->srv), target);
  nl_http_request_opts_t o = {.url = url, .timeout_ms = 10000};
  nl_http_request(&w->loop, &o, done, w);
}

static void finish(world_t *w) {
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_true(w->done);
  assert_int_equal(uv_loop_close(&w->loop), 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

static void whole_file_and_options(void **state) {
  const struct {
    const char *target;
    int status;
    const char *body;
  } cases[] = {
      {"/containerLogs/ns/p/c", 200, "one\ntwo\nthree\nfour\n"},
      {"/containerLogs/ns/p/c?tailLines=2", 200, "ee\nfour\n"},
      {"/containerLogs/ns/p/c?tailLines=0", 200, ""},
      {"/containerLogs/ns/p/c?tail=all&timestamps=true&limitBytes=40", 200,
       "2024-05-01T08:00:01Z one\n2024-05-01T08:0"},
      {"/containerLogs/ns/p/c?sinceTime=2024-05-01T08:00:03Z", 200, "three\nfour\n"},
      {"/containerLogs/ns/nope/c", 404, "pod \"nope\" does not exist"},
      {"/containerLogs/ns/p/", 400, "{\"message\": \"Missing container name.\"}"},
      {"/containerLogs/ns/p/c?limitBytes=0", 422, "{\"message\": \"Invalid request.\"}"},
      {"/containerLogs/ns/p/c?follow=maybe", 400, "{\"message\": \"Unable to decode query.\"}"},
      {"/containerLogs/ns/p/gone", 400, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    world_t w;
    setup(&w);
    get(&w, cases[i].target);
    finish(&w);
    assert_int_equal(w.status, cases[i].status);
    if (cases[i].body) assert_string_equal(w.body.data, cases[i].body);
    nl_buf_free(&w.body);
  }
}

/* Following: lines appended, then the file rotated (renamed, a new one at the
 * path, more written to the old one before the runtime reopened), then the
 * container stops: every line once, in order, and the answer ends. */
static void on_later(uv_timer_t *t) {
  world_t *w = t->data;
  char rotated[160];
  switch (w->step++) {
  case 0:
    append("2024-05-01T08:00:05Z stdout F five\n");
    break;
  case 1:
    snprintf(rotated, sizeof rotated, "%s.20240501-080006", path);
    assert_int_equal(rename(path, rotated), 0);
    { /* the runtime writes on to the renamed file until it reopens */
      FILE *f = fopen(rotated, "a");
      fputs("2024-05-01T08:00:06Z stdout F six\n", f);
      fclose(f);
    }
    break;
  case 2:
    append("2024-05-01T08:00:07Z stdout F seven\n");
    break;
  case 3:
    running = false;
    uv_close((uv_handle_t *)t, NULL);
    return;
  }
  uv_timer_start(t, on_later, 100, 0);
}

static void follow_across_rotation(void **state) {
  world_t w;
  setup(&w);
  get(&w, "/containerLogs/ns/p/c?follow=true&tailLines=1");
  uv_timer_init(&w.loop, &w.later);
  w.later.data = &w;
  uv_timer_start(&w.later, on_later, 100, 0);
  finish(&w);
  assert_int_equal(w.status, 200);
  assert_string_equal(w.body.data, "four\nfive\nsix\nseven\n");
  assert_true(status_calls > 2); /* the state was asked while following */
  nl_buf_free(&w.body);
}

/* A client that goes away from a quiet follow ends it: no more polling. */
typedef struct quiet {
  world_t *w;
  nl_http_call_t *call;
  uv_timer_t t;
  int phase, calls_after;
} quiet_t;

static void cancelled(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {}
static void chunk(void *ctx, const char *data, size_t len) {}

static void quiet_tick(uv_timer_t *t) {
  quiet_t *q = t->data;
  if (q->phase++ == 0) {
    nl_http_cancel(q->call);
    uv_timer_start(t, quiet_tick, 100, 0);
  } else if (q->phase == 2) {
    q->calls_after = status_calls;
    uv_timer_start(t, quiet_tick, 300, 0);
  } else {
    q->calls_after = status_calls - q->calls_after;
    q->w->done = true;
    nl_http_server_stop(&q->w->srv, NULL, NULL);
    uv_close((uv_handle_t *)t, NULL);
  }
}

static void client_leaves(void **state) {
  world_t w;
  setup(&w);
  char url[256];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/containerLogs/ns/p/c?follow=true",
           nl_http_server_port(&w.srv));
  quiet_t q = {.w = &w};
  nl_http_request_opts_t o = {.url = url, .on_chunk = chunk};
  q.call = nl_http_request(&w.loop, &o, cancelled, &q);
  uv_timer_init(&w.loop, &q.t);
  q.t.data = &q;
  uv_timer_start(&q.t, quiet_tick, 200, 0);
  finish(&w);
  assert_int_equal(q.calls_after, 0);
  nl_buf_free(&w.body);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(whole_file_and_options),
      cmocka_unit_test(follow_across_rotation),
      cmocka_unit_test(client_leaves),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
