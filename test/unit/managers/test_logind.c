/* The logind client against a fake system bus on a unix socket: SASL EXTERNAL
 * with fd passing, Hello, the PrepareForShutdown match, InhibitDelayMaxUSec,
 * Inhibit with the lock's descriptor passed back, PrepareForShutdown(true) and
 * the release (logind's end of the lock sees EOF), a cancellation taking the
 * lock again; an error reply and a missing bus leave it idle. The wire format
 * itself both ways, little- and big-endian. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "managers/dbus.h"
#include "managers/logind.h"

static void wire_round_trip(void **state) {
  (void)state;
  nl_buf_t body = NL_BUF_INIT, out = NL_BUF_INIT;
  nl_dbus_put_str(&body, "a");
  nl_dbus_put_bool(&body, true);
  nl_dbus_put_variant_u64(&body, UINT64_C(0x123456789));
  nl_dbus_hdr_t h = {.type = NL_DBUS_SIGNAL, .serial = 9, .path = "/p", .interface = "i.f",
                     .member = "M", .signature = "sbv", .unix_fds = 1, .reply_serial = 3};
  nl_dbus_encode(&h, &body, &out);
  nl_dbus_msg_t m;
  assert_int_equal(nl_dbus_parse((const uint8_t *)out.data, out.len - 1, &m), 0); /* more needed */
  assert_int_equal(nl_dbus_parse((const uint8_t *)out.data, out.len, &m), (ssize_t)out.len);
  assert_int_equal(m.type, NL_DBUS_SIGNAL);
  assert_int_equal(m.serial, 9);
  assert_int_equal(m.reply_serial, 3);
  assert_int_equal(m.unix_fds, 1);
  assert_string_equal(m.path, "/p");
  assert_string_equal(m.member, "M");
  assert_string_equal(m.signature, "sbv");
  nl_dbus_reader_t r = {&m, 0};
  const char *s;
  bool b;
  uint64_t v;
  assert_int_equal(nl_dbus_read_str(&r, &s), 0);
  assert_string_equal(s, "a");
  assert_int_equal(nl_dbus_read_bool(&r, &b), 0);
  assert_true(b);
  assert_int_equal(nl_dbus_read_variant_u64(&r, &v), 0);
  assert_true(v == UINT64_C(0x123456789));
  assert_int_equal(nl_dbus_read_u32(&r, (uint32_t *)&v), -1); /* past the end */
  /* a corrupt header */
  out.data[3] = 2;
  assert_int_equal(nl_dbus_parse((const uint8_t *)out.data, out.len, &m), -1);
  nl_buf_free(&out);
  nl_buf_free(&body);
  /* big-endian, as a big-endian peer writes it: METHOD_RETURN, serial 2,
   * REPLY_SERIAL 1, SIGNATURE "b", body true */
  static const uint8_t be[] = {'B', 2, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 0x0f,
                               5, 1, 'u', 0, 0, 0, 0, 1, 8, 1, 'g', 0, 1, 'b', 0, 0,
                               0, 0, 0, 1};
  assert_int_equal(nl_dbus_parse(be, sizeof be, &m), (ssize_t)sizeof be);
  assert_true(m.big_endian);
  assert_int_equal(m.reply_serial, 1);
  assert_string_equal(m.signature, "b");
  r = (nl_dbus_reader_t){&m, 0};
  assert_int_equal(nl_dbus_read_bool(&r, &b), 0);
  assert_true(b);
}

/* ---- the fake bus ---- */

typedef struct bus {
  uv_loop_t *loop;
  int lfd, cfd;
  nl_buf_t in;
  char path[108];
} bus_t;

static void bus_listen(bus_t *b, uv_loop_t *loop) {
  memset(b, 0, sizeof *b);
  b->loop = loop;
  snprintf(b->path, sizeof b->path, "/tmp/nl-test-bus.%d", (int)getpid());
  unlink(b->path);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, b->path);
  b->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_int_equal(bind(b->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(b->lfd, 1), 0);
}

static void bus_close(bus_t *b) {
  if (b->cfd > 0) close(b->cfd);
  close(b->lfd);
  unlink(b->path);
  nl_buf_free(&b->in);
}

/* Runs the loop until the client has sent n bytes more than consumed. */
static void bus_wait(bus_t *b, size_t n) {
  for (int i = 0; i < 200 && b->in.len < n; i++) {
    uv_run(b->loop, UV_RUN_NOWAIT);
    char buf[4096];
    ssize_t k = recv(b->cfd, buf, sizeof buf, MSG_DONTWAIT);
    if (k > 0) nl_buf_append(&b->in, buf, (size_t)k);
    else usleep(1000);
  }
}

/* The next message from the client (consumed). */
static nl_dbus_msg_t bus_next(bus_t *b, nl_buf_t *keep) {
  nl_dbus_msg_t m;
  ssize_t n = 0;
  for (size_t want = 16; (n = nl_dbus_parse((const uint8_t *)b->in.data, b->in.len, &m)) == 0; want = b->in.len + 1)
    bus_wait(b, want);
  assert_true(n > 0);
  nl_buf_reset(keep);
  nl_buf_append(keep, b->in.data, (size_t)n);
  nl_buf_consume(&b->in, (size_t)n);
  nl_dbus_parse((const uint8_t *)keep->data, keep->len, &m);
  return m;
}

static void bus_send(bus_t *b, const nl_dbus_hdr_t *h, const nl_buf_t *body, int fd) {
  nl_buf_t out = NL_BUF_INIT;
  nl_dbus_encode(h, body, &out);
  struct iovec iov = {out.data, out.len};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl;
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  assert_int_equal(sendmsg(b->cfd, &mh, 0), (ssize_t)out.len);
  nl_buf_free(&out);
  for (int i = 0; i < 5; i++) uv_run(b->loop, UV_RUN_NOWAIT);
}

static void reply(bus_t *b, const nl_dbus_msg_t *to, const char *sig, const nl_buf_t *body, int fd) {
  static uint32_t serial = 100;
  nl_dbus_hdr_t h = {.type = NL_DBUS_METHOD_RETURN, .serial = ++serial, .reply_serial = to->serial,
                     .signature = sig, .unix_fds = fd >= 0 ? 1 : 0};
  bus_send(b, &h, body, fd);
}

static void signal_shutdown(bus_t *b, bool down) {
  nl_buf_t body = NL_BUF_INIT;
  nl_dbus_put_bool(&body, down);
  nl_dbus_hdr_t h = {.type = NL_DBUS_SIGNAL, .serial = 500 + down, .path = "/org/freedesktop/login1",
                     .interface = "org.freedesktop.login1.Manager", .member = "PrepareForShutdown",
                     .sender = ":1.2", .signature = "b"};
  bus_send(b, &h, &body, -1);
  nl_buf_free(&body);
}

typedef struct calls {
  int n;
  bool last;
} calls_t;

static void on_shutdown(void *ctx, bool down) {
  calls_t *c = ctx;
  c->n++;
  c->last = down;
}

static int stopped;
static void on_stopped(nl_logind_t *l) {
  (void)l;
  stopped++;
}

/* Answers the client up to the Inhibit call, which is returned. */
static nl_dbus_msg_t handshake(bus_t *b, nl_buf_t *keep) {
  b->cfd = accept(b->lfd, NULL, NULL);
  assert_true(b->cfd > 0);
  bus_wait(b, 64);
  char want[64];
  snprintf(want, sizeof want, "AUTH EXTERNAL ");
  assert_int_equal(b->in.data[0], 0);
  assert_memory_equal(b->in.data + 1, want, strlen(want));
  char *begin = memmem(b->in.data, b->in.len, "NEGOTIATE_UNIX_FD\r\nBEGIN\r\n", 26);
  assert_non_null(begin);
  nl_buf_consume(&b->in, (size_t)(begin + 26 - b->in.data));
  static const char ok[] = "OK 0123456789abcdef\r\nAGREE_UNIX_FD\r\n";
  assert_int_equal(send(b->cfd, ok, sizeof ok - 1, 0), (ssize_t)(sizeof ok - 1));
  nl_dbus_msg_t m = bus_next(b, keep);
  assert_string_equal(m.member, "Hello");
  nl_buf_t body = NL_BUF_INIT;
  nl_dbus_put_str(&body, ":1.7");
  reply(b, &m, "s", &body, -1);
  m = bus_next(b, keep);
  assert_string_equal(m.member, "AddMatch");
  nl_dbus_reader_t r = {&m, 0};
  const char *s;
  assert_int_equal(nl_dbus_read_str(&r, &s), 0);
  assert_non_null(strstr(s, "member='PrepareForShutdown'"));
  reply(b, &m, NULL, NULL, -1);
  m = bus_next(b, keep);
  assert_string_equal(m.member, "Get");
  assert_string_equal(m.destination, "org.freedesktop.login1");
  nl_buf_reset(&body);
  nl_dbus_put_variant_u64(&body, 5000000); /* 5 s, less than the 10 s asked: a warning */
  reply(b, &m, "v", &body, -1);
  nl_buf_free(&body);
  m = bus_next(b, keep);
  assert_string_equal(m.member, "Inhibit");
  assert_string_equal(m.signature, "ssss");
  return m;
}

/* A client started against a fresh bus, answered up to its Inhibit call. */
static nl_dbus_msg_t start(uv_loop_t *loop, bus_t *b, nl_logind_t *l, calls_t *c, nl_buf_t *keep) {
  uv_loop_init(loop);
  bus_listen(b, loop);
  nl_logind_init(l, loop, b->path, 10, on_shutdown, c);
  assert_int_equal(nl_logind_start(l), 0);
  return handshake(b, keep);
}

static void inhibit_then_shutdown(void **state) {
  (void)state;
  uv_loop_t loop;
  bus_t b;
  calls_t c = {0};
  nl_logind_t l;
  nl_buf_t keep = NL_BUF_INIT;
  nl_dbus_msg_t m = start(&loop, &b, &l, &c, &keep);
  nl_dbus_reader_t r = {&m, 0};
  const char *what, *who, *why, *mode;
  assert_int_equal(nl_dbus_read_str(&r, &what), 0);
  assert_int_equal(nl_dbus_read_str(&r, &who), 0);
  assert_int_equal(nl_dbus_read_str(&r, &why), 0);
  assert_int_equal(nl_dbus_read_str(&r, &mode), 0);
  assert_string_equal(what, "shutdown");
  assert_string_equal(who, "kubelet");
  assert_string_equal(mode, "delay");
  int lock[2];
  assert_int_equal(pipe(lock), 0);
  nl_buf_t body = NL_BUF_INIT;
  nl_dbus_put_u32(&body, 0);
  reply(&b, &m, "h", &body, lock[1]);
  close(lock[1]); /* the client holds the only write end now */
  assert_int_equal(l.state, NL_LOGIND_WATCHING);
  assert_true(l.lock_fd >= 0);
  assert_int_equal(l.delay_max_usec, 5000000);

  signal_shutdown(&b, true);
  assert_int_equal(c.n, 1);
  assert_true(c.last);
  nl_logind_release(&l);
  char x;
  assert_int_equal(read(lock[0], &x, 1), 0); /* logind sees the lock go */
  close(lock[0]);

  /* cancelled: the lock is taken again */
  signal_shutdown(&b, false);
  assert_int_equal(c.n, 2);
  assert_false(c.last);
  m = bus_next(&b, &keep);
  assert_string_equal(m.member, "Inhibit");

  nl_logind_stop(&l, on_stopped);
  assert_int_equal(stopped, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(stopped, 1);
  nl_buf_free(&body);
  nl_buf_free(&keep);
  bus_close(&b);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void error_reply_and_no_bus(void **state) {
  (void)state;
  uv_loop_t loop;
  bus_t b;
  calls_t c = {0};
  nl_logind_t l;
  nl_buf_t keep = NL_BUF_INIT;
  nl_dbus_msg_t m = start(&loop, &b, &l, &c, &keep);
  nl_buf_t body = NL_BUF_INIT;
  nl_dbus_put_str(&body, "Access denied");
  nl_dbus_hdr_t h = {.type = NL_DBUS_ERROR, .serial = 77, .reply_serial = m.serial,
                     .error_name = "org.freedesktop.DBus.Error.AccessDenied", .signature = "s"};
  bus_send(&b, &h, &body, -1);
  assert_int_equal(l.state, NL_LOGIND_IDLE);
  assert_int_equal(l.lock_fd, -1);
  stopped = 0;
  nl_logind_stop(&l, on_stopped); /* closing already: called back once closed */
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(stopped, 1);
  nl_buf_free(&body);
  nl_buf_free(&keep);
  bus_close(&b);

  nl_logind_init(&l, &loop, "/nonexistent/bus", 10, on_shutdown, &c);
  assert_int_equal(nl_logind_start(&l), -1);
  nl_logind_stop(&l, on_stopped);
  assert_int_equal(stopped, 2);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(wire_round_trip),
      cmocka_unit_test(inhibit_then_shutdown),
      cmocka_unit_test(error_reply_and_no_bus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
