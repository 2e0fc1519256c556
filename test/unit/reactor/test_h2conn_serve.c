/* The HTTP/2 connection driver serving an accepted socket
 * (nl_h2conn_adopt()): one end of a unix socketpair is adopted, the other is
 * a client in the test, an nghttp2 client session fed by hand. A request and
 * its response, the client closing, a client silent past the handshake
 * timeout, the server's goodbye when idle (its GOAWAY reaches the client), a
 * client that does not read (the server stops reading it and holds its
 * output at the mark, then finishes when the client reads) and a close while
 * writing; every test ends with the loop closing cleanly. */
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
#include <unistd.h>

#include "reactor/h2conn.h"
#include "reactor/xalloc.h"

static uv_loop_t loop;

/* ---- the served side ------------------------------------------------------- */

#define MAX_STREAMS 4
#define HIGH (64 * 1024)

typedef struct owner owner_t;

/* A stream the owner attaches to each request. */
typedef struct sst {
  nl_h2_stream_t h;
  owner_t *o;
} sst_t;

struct owner {
  nl_h2conn_t conn;
  sst_t st[MAX_STREAMS];
  int nst, requests, st_closes, lost, closed, idles;
  char lost_msg[256];
  bool lost_null;
  size_t body_len; /* of each response */
  uint8_t *body;
};

static owner_t *owner_of_stream(nl_h2_stream_t *h) { return container_of(h, sst_t, h)->o; }

static void on_end(nl_h2_stream_t *h) {
  owner_t *o = owner_of_stream(h);
  o->requests++;
  nghttp2_nv nv[] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0}};
  assert_int_equal(nl_h2_respond(h, nv, 1, false), 0);
  assert_int_equal(nl_h2_respond_data(h, o->body, o->body_len), 0);
  assert_int_equal(nl_h2_respond_end(h, NULL, 0), 0);
  nl_h2conn_flush(&o->conn);
}

static void on_st_close(nl_h2_stream_t *h, uint32_t code, bool refused) {
  (void)code, (void)refused;
  owner_of_stream(h)->st_closes++;
}

static const nl_h2_stream_cbs_t st_cbs = {.on_end = on_end, .on_close = on_st_close};

static nl_h2_stream_t *on_stream(nl_h2conn_t *c) {
  owner_t *o = c->data;
  if (o->nst == MAX_STREAMS) return NULL;
  sst_t *st = &o->st[o->nst++];
  memset(st, 0, sizeof *st);
  st->o = o;
  st->h.cbs = &st_cbs;
  return &st->h;
}

static void on_lost(nl_h2conn_t *c, const nl_err_t *err) {
  owner_t *o = c->data;
  o->lost++;
  o->lost_null = !err;
  snprintf(o->lost_msg, sizeof o->lost_msg, "%s", err ? err->msg : "");
  nl_h2_stream_t *h;
  while ((h = nl_h2_first_stream(c->h2))) nl_h2_stream_detach(h);
  nl_h2conn_close(c);
}

static void on_idle(nl_h2conn_t *c) {
  ((owner_t *)c->data)->idles++;
  nl_h2conn_goaway(c);
}

static void on_closed(nl_h2conn_t *c) { ((owner_t *)c->data)->closed++; }

static const nl_h2conn_cbs_t cbs = {
    .stream = on_stream, .lost = on_lost, .idle = on_idle, .closed = on_closed};

/* ---- the client: an nghttp2 session on the other end --------------------------- */

typedef struct peer {
  int fd;
  nghttp2_session *h2;
  int status, closes, goaways;
  size_t body;
  bool eof;
} peer_t;

static int p_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                    size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                    void *ud) {
  (void)s, (void)f, (void)flags;
  peer_t *p = ud;
  if (namelen == 7 && !memcmp(name, ":status", 7)) p->status = atoi((const char *)value);
  (void)valuelen;
  return 0;
}

static int p_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                  void *ud) {
  (void)s, (void)flags, (void)id, (void)d;
  ((peer_t *)ud)->body += n;
  return 0;
}

static int p_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud) {
  (void)s, (void)id, (void)code;
  ((peer_t *)ud)->closes++;
  return 0;
}

static int p_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  (void)s;
  if (f->hd.type == NGHTTP2_GOAWAY) ((peer_t *)ud)->goaways++;
  return 0;
}

/* window: the client's receive window, for the stream and the connection. */
static void peer_init(peer_t *p, int fd, int32_t window) {
  memset(p, 0, sizeof *p);
  p->fd = fd;
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, p_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, p_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, p_close);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, p_frame);
  assert_int_equal(nghttp2_session_client_new(&p->h2, cb, p), 0);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)window}};
  nghttp2_submit_settings(p->h2, NGHTTP2_FLAG_NONE, iv, 1);
  if (window > 65535)
    nghttp2_submit_window_update(p->h2, NGHTTP2_FLAG_NONE, 0, window - 65535);
}

static void peer_request(peer_t *p) {
  nghttp2_nv nv[] = {{(uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0},
                     {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
                     {(uint8_t *)":path", (uint8_t *)"/", 5, 1, 0},
                     {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0}};
  assert_true(nghttp2_submit_request(p->h2, NULL, nv, 4, NULL, NULL) > 0);
}

/* What the client session has for the server (small: it fits the socket). */
static void peer_send(peer_t *p) {
  const uint8_t *d;
  ssize_t n;
  while ((n = nghttp2_session_mem_send(p->h2, &d)) > 0)
    assert_int_equal(send(p->fd, d, (size_t)n, MSG_NOSIGNAL), n);
}

/* What the server sent, into the client session. */
static void peer_recv(peer_t *p) {
  uint8_t buf[16384];
  for (;;) {
    ssize_t n = recv(p->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      assert_true(nghttp2_session_mem_recv(p->h2, buf, (size_t)n) >= 0);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) p->eof = true;
    return;
  }
}

/* One step of the client: what it has goes out, what came in is read. */
static void peer_step(peer_t *p) {
  if (!p) return;
  peer_send(p);
  peer_recv(p);
}

static void peer_free(peer_t *p) {
  nghttp2_session_del(p->h2);
  if (p->fd >= 0) close(p->fd);
}

/* Runs the loop (and the client, unless p is NULL) until cond or about two
 * seconds. */
#define RUN_UNTIL(p, cond)                                                    \
  do {                                                                        \
    for (int i_ = 0; i_ < 2000 && !(cond); i_++) {                            \
      peer_step(p);                                                           \
      uv_run(&loop, UV_RUN_NOWAIT);                                           \
      if (!(cond)) usleep(1000);                                              \
    }                                                                         \
    assert_true(cond);                                                        \
  } while (0)

/* Serves one end of a new socketpair; the other is *client_fd. */
static void owner_adopt(owner_t *o, nl_h2conn_opts_t *opts, int *client_fd) {
  memset(o, 0, sizeof *o);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  *client_fd = sv[1];
  o->conn.data = o;
  o->body = nl_xmalloc(1);
  o->body[0] = 'x';
  o->body_len = 1;
  opts->words = NL_H2CONN_WORDS_SERVER;
  nl_h2conn_init(&o->conn, &loop, opts, &cbs);
  nl_err_t *err = NULL;
  assert_int_equal(nl_h2conn_adopt(&o->conn, sv[0], "test.sock", &err), 0);
  assert_null(err);
  assert_int_equal(o->conn.state, NL_H2CONN_READY);
  assert_true(o->conn.handshaking);
}

static void finish(owner_t *o, peer_t *p) {
  nl_h2conn_close(&o->conn);
  RUN_UNTIL((peer_t *)NULL, o->closed == 1);
  assert_int_equal(o->conn.state, NL_H2CONN_STOPPED);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(o->closed, 1);
  assert_int_equal(uv_loop_close(&loop), 0);
  peer_free(p);
  free(o->body);
}

static int setup(void **state) {
  (void)state;
  return uv_loop_init(&loop);
}

/* ---- tests ------------------------------------------------------------------- */

/* A request, its response; the client closes: lost as such. */
static void request_response_peer_close(void **state) {
  (void)state;
  owner_t o;
  peer_t p;
  int fd;
  owner_adopt(&o, &(nl_h2conn_opts_t){.handshake_ms = 5000}, &fd);
  o.body_len = 5;
  free(o.body);
  o.body = (uint8_t *)nl_xstrdup("hello");
  peer_init(&p, fd, 65535);
  peer_request(&p);
  RUN_UNTIL(&p, p.closes == 1);
  assert_false(o.conn.handshaking);
  assert_int_equal(o.requests, 1);
  assert_int_equal(p.status, 200);
  assert_int_equal(p.body, 5);
  RUN_UNTIL(&p, o.st_closes == 1);
  close(p.fd);
  p.fd = -1;
  RUN_UNTIL((peer_t *)NULL, o.lost == 1);
  assert_string_equal(o.lost_msg, "the client closed the connection");
  finish(&o, &p);
}

/* A client that says nothing is lost at the handshake timeout. */
static void handshake_timeout(void **state) {
  (void)state;
  owner_t o;
  peer_t p;
  int fd;
  owner_adopt(&o, &(nl_h2conn_opts_t){.handshake_ms = 50, .idle_ms = 10}, &fd);
  peer_init(&p, fd, 65535);
  RUN_UNTIL((peer_t *)NULL, o.lost == 1);
  assert_string_equal(o.lost_msg,
                      "no HTTP/2 preface and SETTINGS within the handshake timeout");
  assert_int_equal(o.idles, 0); /* the idle timer waits for the handshake */
  finish(&o, &p);
}

/* Idle after the handshake: the owner says goodbye; the GOAWAY reaches the
 * client before the socket closes. */
static void idle_goaway(void **state) {
  (void)state;
  owner_t o;
  peer_t p;
  int fd;
  owner_adopt(&o, &(nl_h2conn_opts_t){.handshake_ms = 5000, .idle_ms = 30}, &fd);
  peer_init(&p, fd, 65535);
  RUN_UNTIL(&p, o.lost == 1);
  assert_int_equal(o.idles, 1);
  assert_true(o.lost_null); /* drained */
  RUN_UNTIL(&p, p.eof);
  assert_int_equal(p.goaways, 1);
  finish(&o, &p);
}

/* A served connection with the mark at HIGH, answering 4 MiB to a client
 * with a large window that has sent one request and reads nothing yet. */
static void big_answer_unread(owner_t *o, peer_t *p) {
  int fd;
  owner_adopt(o, &(nl_h2conn_opts_t){.handshake_ms = 5000, .write_high = HIGH}, &fd);
  free(o->body);
  o->body_len = 4u << 20;
  o->body = nl_xmalloc(o->body_len);
  memset(o->body, 'b', o->body_len);
  peer_init(p, fd, 0x7fffffff);
  peer_request(p);
  peer_send(p);
}

/* A client that does not read: once the output waits above the mark, the
 * server reads it no more (its next request waits in the socket); when the
 * client reads, both are answered. */
static void client_not_reading(void **state) {
  (void)state;
  owner_t o;
  peer_t p;
  big_answer_unread(&o, &p);
  RUN_UNTIL((peer_t *)NULL, o.conn.stalled);
  assert_false(o.conn.poll_events & UV_READABLE);
  peer_request(&p);
  peer_send(&p);
  for (int i = 0; i < 50; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    usleep(200);
  }
  assert_true(o.conn.stalled);
  assert_int_equal(o.requests, 1);
  RUN_UNTIL(&p, p.closes == 2);
  assert_int_equal(o.requests, 2);
  assert_int_equal(p.body, 2 * o.body_len);
  assert_false(o.conn.stalled);
  finish(&o, &p);
}

/* Closed while output waits for the socket: one closed callback, no leak. */
static void close_while_writing(void **state) {
  (void)state;
  owner_t o;
  peer_t p;
  big_answer_unread(&o, &p);
  RUN_UNTIL((peer_t *)NULL, o.conn.w.pending.len > 0);
  finish(&o, &p);
  assert_int_equal(o.lost, 0); /* closed, not lost */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(request_response_peer_close, setup),
      cmocka_unit_test_setup(handshake_timeout, setup),
      cmocka_unit_test_setup(idle_goaway, setup),
      cmocka_unit_test_setup(client_not_reading, setup),
      cmocka_unit_test_setup(close_while_writing, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
