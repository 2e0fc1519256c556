/* The gRPC server on a real unix socket, called by the project's own CRI
 * client (cri/conn.h and its typed wrappers) in the same loop: a test service
 * serves /runtime.v1.RuntimeService/Version (unary) and GetContainerEvents
 * (server streaming); unknown methods, deadlines, oversize messages, many
 * concurrent calls, a client that goes away mid-call, a server stopped with
 * calls in flight; and raw hostile clients (silent, too many, junk). Every
 * test ends with uv_loop_close() == 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cri/grpc_server.h"
#include "cri/image.h"
#include "cri/runtime.h"
#include "reactor/xalloc.h"

enum mode { ANSWER, LATER, HOLD };

typedef struct world {
  uv_loop_t loop;
  nl_grpc_server_t srv;
  nl_cri_client_t cli;
  char dir[64], path[128];
  enum mode mode;
  nl_grpc_call_t *held[300];
  size_t nheld;
  uv_timer_t later, guard;
  int answered, cancels, events, event_ends;
  /* what the client heard */
  int calls_done, ok, last_code;
  char last_msg[256];
  bool srv_done, cli_done, cli_started;
  nl_grpc_call_t *stream; /* the events stream the server holds */
} world_t;

/* ---- the test service ------------------------------------------------------- */

static void on_cancel(nl_grpc_call_t *call, void *ctx) {
  world_t *w = ctx;
  w->cancels++;
  assert_false(nl_grpc_call_alive(call));
}

static void answer(world_t *w, nl_grpc_call_t *call) {
  Runtime__V1__VersionResponse resp = RUNTIME__V1__VERSION_RESPONSE__INIT;
  resp.version = "0.1.0";
  resp.runtime_name = "nanolet-test";
  resp.runtime_version = (char *)nl_grpc_call_path(call);
  nl_grpc_call_reply_msg(call, &resp.base);
  w->answered++;
}

static void answer_held(uv_timer_t *t) {
  world_t *w = t->data;
  for (size_t i = 0; i < w->nheld; i++) answer(w, w->held[i]);
  w->nheld = 0;
}

static void h_version(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  Runtime__V1__VersionRequest *r = runtime__v1__version_request__unpack(NULL, len, req);
  if (!r) {
    nl_grpc_call_reply(call, NL_GRPC_INVALID_ARGUMENT, "bad request", NULL, 0);
    return;
  }
  bool odd = r->version && strcmp(r->version, "odd") == 0;
  runtime__v1__version_request__free_unpacked(r, NULL);
  if (w->mode == ANSWER || (w->mode == LATER && odd)) {
    answer(w, call);
    return;
  }
  nl_grpc_call_on_cancel(call, on_cancel, w);
  assert_true(w->nheld < sizeof w->held / sizeof w->held[0]);
  w->held[w->nheld++] = call;
  if (w->mode == LATER && !uv_is_active((uv_handle_t *)&w->later))
    uv_timer_start(&w->later, answer_held, 5, 0);
}

static void send_event(world_t *w, const char *id) {
  Runtime__V1__ContainerEventResponse ev = RUNTIME__V1__CONTAINER_EVENT_RESPONSE__INIT;
  ev.container_id = (char *)id;
  assert_int_equal(nl_grpc_call_send_msg(w->stream, &ev.base), 0);
}

static void events_more(uv_timer_t *t) {
  world_t *w = t->data;
  if (w->stream && nl_grpc_call_alive(w->stream)) send_event(w, "later");
}

static void h_events(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  w->stream = call;
  nl_grpc_call_on_cancel(call, on_cancel, w);
  send_event(w, "first");
  send_event(w, "second");
  uv_timer_start(&w->later, events_more, 10, 0); /* more, later, on the open stream */
}

/* ---- the client's side ---------------------------------------------------- */

static void version_done(const nl_grpc_status_t *st, Runtime__V1__VersionResponse *resp,
                         void *ctx) {
  world_t *w = ctx;
  w->calls_done++;
  w->last_code = st->code;
  snprintf(w->last_msg, sizeof w->last_msg, "%s", st->message);
  if (st->code == NL_GRPC_OK) {
    assert_string_equal(resp->runtime_name, "nanolet-test");
    assert_string_equal(resp->runtime_version, "/runtime.v1.RuntimeService/Version");
    w->ok++;
  }
}

static void call_version(world_t *w, const char *version) {
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  req.version = (char *)version;
  nl_cri_version(&w->cli, &req, version_done, w);
}

static void status_done(const nl_grpc_status_t *st, Runtime__V1__StatusResponse *resp,
                        void *ctx) {
  world_t *w = ctx;
  w->calls_done++;
  w->last_code = st->code;
  snprintf(w->last_msg, sizeof w->last_msg, "%s", st->message);
}

static void images_done(const nl_grpc_status_t *st, Runtime__V1__ListImagesResponse *resp,
                        void *ctx) {
  status_done(st, NULL, ctx);
}

static void on_event(const ProtobufCMessage *ev, void *ctx) { ((world_t *)ctx)->events++; }
static void on_events_end(const nl_grpc_status_t *st, void *ctx) {
  ((world_t *)ctx)->event_ends++;
}

/* ---- harness ------------------------------------------------------------------ */

static void on_guard(uv_timer_t *t) { fail_msg("the test did not finish within 10 s"); }

static void world_init(world_t *w, const nl_grpc_server_opts_t *opts, const nl_cri_opts_t *copts) {
  memset(w, 0, sizeof *w);
  assert_int_equal(uv_loop_init(&w->loop), 0);
  strcpy(w->dir, "/tmp/nl-grpcsrv-XXXXXX");
  assert_non_null(mkdtemp(w->dir));
  snprintf(w->path, sizeof w->path, "%s/plugins/kubelet.sock", w->dir);
  uv_timer_init(&w->loop, &w->later);
  w->later.data = w;
  uv_timer_init(&w->loop, &w->guard);
  uv_timer_start(&w->guard, on_guard, 10000, 0);
  nl_grpc_server_init(&w->srv, &w->loop, opts);
  nl_grpc_server_method(&w->srv, "/runtime.v1.RuntimeService/Version", NL_GRPC_UNARY, h_version, w);
  nl_grpc_server_method(&w->srv, "/runtime.v1.RuntimeService/GetContainerEvents",
                        NL_GRPC_SERVER_STREAMING, h_events, w);
  nl_err_t *err = NULL;
  int rc = nl_grpc_server_listen(&w->srv, w->path, &err);
  if (rc) fail_msg("%s", nl_err_msg(err));
  char endpoint[160];
  snprintf(endpoint, sizeof endpoint, "unix://%s", w->path);
  rc = nl_cri_client_init(&w->cli, &w->loop, endpoint, copts, &err);
  if (rc) fail_msg("%s", nl_err_msg(err));
  w->cli_started = true;
}

static void run_until(world_t *w, const int *counter, int want) {
  while (*counter < want) assert_true(uv_run(&w->loop, UV_RUN_ONCE) || *counter >= want);
}

static void cli_stopped(nl_cri_client_t *c) { container_of(c, world_t, cli)->cli_done = true; }
static void srv_stopped(nl_grpc_server_t *s, void *ctx) { ((world_t *)ctx)->srv_done = true; }

static void world_stop_client(world_t *w) {
  if (!w->cli_started) return;
  w->cli_started = false;
  nl_cri_client_stop(&w->cli, cli_stopped);
  while (!w->cli_done) uv_run(&w->loop, UV_RUN_ONCE);
}

static void world_free(world_t *w) {
  world_stop_client(w);
  nl_grpc_server_stop(&w->srv, srv_stopped, w);
  /* Calls still held are answered after the stop: that only frees them. */
  for (size_t i = 0; i < w->nheld; i++) nl_grpc_call_reply(w->held[i], NL_GRPC_OK, NULL, NULL, 0);
  w->nheld = 0;
  if (w->stream) nl_grpc_call_finish(w->stream, NL_GRPC_OK, NULL);
  w->stream = NULL;
  uv_close((uv_handle_t *)&w->later, NULL);
  uv_close((uv_handle_t *)&w->guard, NULL);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_true(w->srv_done);
  assert_int_equal(uv_loop_close(&w->loop), 0);
  /* The server removed its socket file. */
  struct stat st;
  assert_int_equal(lstat(w->path, &st), -1);
  char sub[160];
  snprintf(sub, sizeof sub, "%s/plugins", w->dir);
  rmdir(sub);
  rmdir(w->dir);
}

/* ---- tests ---------------------------------------------------------------------- */

static void unary_call(void **state) {
  world_t w;
  world_init(&w, NULL, NULL);
  struct stat st;
  assert_int_equal(lstat(w.path, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);
  call_version(&w, "v1");
  run_until(&w, &w.calls_done, 1);
  assert_int_equal(w.ok, 1);
  assert_int_equal(w.srv.stats_calls, 1);
  assert_int_equal(nl_grpc_server_conns(&w.srv), 1);
  /* Asynchronous answers, from a timer. */
  w.mode = LATER;
  call_version(&w, "v1");
  call_version(&w, "odd"); /* answered at once, overtakes the first */
  run_until(&w, &w.calls_done, 3);
  assert_int_equal(w.ok, 3);
  world_free(&w);
}

static void unknown_methods(void **state) {
  world_t w;
  world_init(&w, NULL, NULL);
  Runtime__V1__StatusRequest sreq = RUNTIME__V1__STATUS_REQUEST__INIT;
  nl_cri_status(&w.cli, &sreq, status_done, &w);
  run_until(&w, &w.calls_done, 1);
  assert_int_equal(w.last_code, NL_GRPC_UNIMPLEMENTED);
  assert_string_equal(w.last_msg, "unknown method Status for service runtime.v1.RuntimeService");
  Runtime__V1__ListImagesRequest ireq = RUNTIME__V1__LIST_IMAGES_REQUEST__INIT;
  nl_cri_list_images(&w.cli, &ireq, images_done, &w);
  run_until(&w, &w.calls_done, 2);
  assert_int_equal(w.last_code, NL_GRPC_UNIMPLEMENTED);
  assert_string_equal(w.last_msg, "unknown service runtime.v1.ImageService");
  assert_int_equal(w.srv.stats_calls, 0);
  world_free(&w);
}

/* The client's grpc-timeout: the handler that holds the call is told, the
 * client hears DEADLINE_EXCEEDED; the late answer only frees the call. */
static void deadline(void **state) {
  world_t w;
  world_init(&w, NULL, &(nl_cri_opts_t){.timeout_ms = 150});
  w.mode = HOLD;
  call_version(&w, "v1");
  run_until(&w, &w.calls_done, 1);
  assert_int_equal(w.last_code, NL_GRPC_DEADLINE_EXCEEDED);
  run_until(&w, &w.cancels, 1);
  assert_int_equal(w.nheld, 1);
  assert_false(nl_grpc_call_alive(w.held[0]));
  assert_int_equal(nl_grpc_call_time_left(w.held[0]), 0);
  nl_grpc_call_reply(w.held[0], NL_GRPC_OK, NULL, NULL, 0);
  w.nheld = 0;
  /* The connection serves on. */
  w.mode = ANSWER;
  call_version(&w, "v1");
  run_until(&w, &w.calls_done, 2);
  assert_int_equal(w.ok, 1);
  world_free(&w);
}

static void oversize_message(void **state) {
  world_t w;
  world_init(&w, &(nl_grpc_server_opts_t){.max_recv_msg_size = 64}, NULL);
  char big[1001];
  memset(big, 'v', 1000);
  big[1000] = 0;
  call_version(&w, big);
  run_until(&w, &w.calls_done, 1);
  assert_int_equal(w.last_code, NL_GRPC_RESOURCE_EXHAUSTED);
  assert_string_equal(w.last_msg, "grpc: received message larger than max (1003 vs. 64)");
  assert_int_equal(w.srv.stats_calls, 0);
  call_version(&w, "small");
  run_until(&w, &w.calls_done, 2);
  assert_int_equal(w.ok, 1);
  world_free(&w);
}

/* More calls at once than the connection's streams: the client queues them
 * (SETTINGS_MAX_CONCURRENT_STREAMS), all are answered. */
static void many_concurrent_calls(void **state) {
  world_t w;
  world_init(&w, &(nl_grpc_server_opts_t){.max_streams = 8}, NULL);
  w.mode = LATER;
  for (int i = 0; i < 200; i++) call_version(&w, i % 3 ? "v1" : "odd");
  run_until(&w, &w.calls_done, 200);
  assert_int_equal(w.ok, 200);
  assert_int_equal(w.srv.stats_calls, 200);
  world_free(&w);
}

static void client_goes_away(void **state) {
  world_t w;
  world_init(&w, NULL, NULL);
  w.mode = HOLD;
  call_version(&w, "v1");
  call_version(&w, "v1");
  while (w.nheld < 2) uv_run(&w.loop, UV_RUN_ONCE);
  world_stop_client(&w);
  assert_int_equal(w.last_code, NL_GRPC_CANCELLED);
  run_until(&w, &w.cancels, 2);
  assert_int_equal(nl_grpc_server_conns(&w.srv), 0);
  world_free(&w);
}

static void stop_with_calls_in_flight(void **state) {
  world_t w;
  world_init(&w, NULL, NULL);
  w.mode = HOLD;
  call_version(&w, "v1");
  nl_cri_client_watch_events(&w.cli, on_event, on_events_end, &w);
  while (w.nheld < 1 || w.events < 3) uv_run(&w.loop, UV_RUN_ONCE);
  assert_true(nl_grpc_call_alive(w.stream));
  nl_grpc_server_stop(&w.srv, srv_stopped, &w);
  assert_int_equal(w.cancels, 2); /* told from inside the stop */
  run_until(&w, &w.calls_done, 1);
  assert_int_equal(w.last_code, NL_GRPC_UNAVAILABLE);
  nl_cri_client_unwatch_events(&w.cli);
  world_free(&w);
}

/* ---- hostile clients ------------------------------------------------------------ */

static int raw_connect(world_t *w) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, w->path);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  return fd;
}

/* Whether the server closed fd (what it sent before is read and dropped). */
static bool raw_closed(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) continue;
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

static void run_for_done(uv_timer_t *t) { *(bool *)t->data = true; }

static void run_for(world_t *w, uint64_t ms) {
  uv_timer_t t;
  bool fired = false;
  uv_timer_init(&w->loop, &t);
  t.data = &fired;
  uv_timer_start(&t, run_for_done, ms, 0);
  while (!fired) uv_run(&w->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&w->loop, UV_RUN_NOWAIT);
}

static void silent_and_too_many(void **state) {
  world_t w;
  world_init(&w, &(nl_grpc_server_opts_t){.handshake_timeout_ms = 100, .max_conns = 3}, NULL);
  world_stop_client(&w);
  run_for(&w, 20);
  assert_int_equal(nl_grpc_server_conns(&w.srv), 0);
  int a = raw_connect(&w), b = raw_connect(&w), c = raw_connect(&w);
  run_for(&w, 20);
  assert_int_equal(nl_grpc_server_conns(&w.srv), 3);
  /* A fourth: the oldest silent one makes room. */
  int d = raw_connect(&w);
  run_for(&w, 20);
  assert_int_equal(nl_grpc_server_conns(&w.srv), 3);
  assert_true(raw_closed(a));
  assert_false(raw_closed(b));
  /* Junk for a preface: closed at once. */
  assert_int_equal(send(d, "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL), 18);
  run_for(&w, 20);
  assert_true(raw_closed(d));
  /* Silent past the handshake timeout: closed. */
  run_for(&w, 150);
  assert_true(raw_closed(b));
  assert_true(raw_closed(c));
  assert_int_equal(nl_grpc_server_conns(&w.srv), 0);
  close(a);
  close(b);
  close(c);
  close(d);
  world_free(&w);
}

static void stale_socket_and_errors(void **state) {
  world_t w;
  world_init(&w, NULL, NULL);
  world_stop_client(&w);
  /* A second server on the same path takes it over: the first's socket file
   * is stale to it (as upstream, a restarted kubelet removes it). */
  nl_grpc_server_t second;
  nl_grpc_server_init(&second, &w.loop, &(nl_grpc_server_opts_t){.mode = 0660});
  nl_err_t *err = NULL;
  assert_int_equal(nl_grpc_server_listen(&second, w.path, &err), 0);
  struct stat st;
  assert_int_equal(lstat(w.path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0660);
  assert_int_equal(nl_grpc_server_listen(&second, w.path, &err), -1);
  nl_err_free(&err);
  err = NULL;
  nl_grpc_server_stop(&second, NULL, NULL);
  /* Something else at the path is not removed. */
  char file[160];
  snprintf(file, sizeof file, "%s/plain", w.dir);
  FILE *fp = fopen(file, "w");
  fclose(fp);
  nl_grpc_server_t third;
  nl_grpc_server_init(&third, &w.loop, NULL);
  assert_int_equal(nl_grpc_server_listen(&third, file, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "is not a socket"));
  nl_err_free(&err);
  nl_grpc_server_stop(&third, NULL, NULL);
  unlink(file);
  world_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unary_call),
      cmocka_unit_test(unknown_methods),
      cmocka_unit_test(deadline),
      cmocka_unit_test(oversize_message),
      cmocka_unit_test(many_concurrent_calls),
      cmocka_unit_test(client_goes_away),
      cmocka_unit_test(stop_with_calls_in_flight),
      cmocka_unit_test(silent_and_too_many),
      cmocka_unit_test(stale_socket_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
