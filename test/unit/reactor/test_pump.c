/* The byte pump between two real socket pairs on one loop:
 *   client <-> [x  pump  y] <-> backend
 * Large transfers arrive intact both ways; a backend that does not read makes
 * the pump stop reading the client instead of queueing without bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <uv.h>

#include "reactor/pump.h"
#include "reactor/xalloc.h"

#define HIGH_WATER (64 * 1024)

/* One peer outside the pump: writes `total` bytes of a pattern seeded by
 * `seed`, checks that what it reads is the other peer's pattern. */
typedef struct peer {
  uv_pipe_t pipe;
  uint64_t seed_out, seed_in;
  size_t total, sent, received;
  bool mismatch, eof;
  uv_write_t wreq;
  char *wbuf;
} peer_t;

typedef struct fixture {
  uv_loop_t loop;
  peer_t client, backend;
  uv_pipe_t x, y;
  nl_pump_stream_t ex, ey;
  nl_pump_t pump;
  int done_side;
  bool done;
  int closed;
  uv_timer_t timer;
} fixture_t;

static uint8_t pattern(uint64_t seed, size_t i) {
  uint64_t v = (seed + i / 8) * 0x9E3779B97F4A7C15ull;
  return (uint8_t)(v >> (8 * (i % 8)));
}

static void on_closed(uv_handle_t *h) { (void)h; }
static void on_pump_closed(uv_handle_t *h) { ((fixture_t *)h->loop->data)->closed++; }

static void peer_write_more(peer_t *p);

static void on_peer_write(uv_write_t *req, int status) {
  peer_t *p = req->data;
  free(p->wbuf);
  p->wbuf = NULL;
  if (status == 0) peer_write_more(p);
}

static void peer_write_more(peer_t *p) {
  if (p->sent == p->total) return;
  size_t n = p->total - p->sent < 256 * 1024 ? p->total - p->sent : 256 * 1024;
  p->wbuf = nl_xmalloc(n);
  for (size_t i = 0; i < n; i++) p->wbuf[i] = (char)pattern(p->seed_out, p->sent + i);
  uv_buf_t b = uv_buf_init(p->wbuf, (unsigned)n);
  p->wreq.data = p;
  p->sent += n;
  assert_int_equal(uv_write(&p->wreq, (uv_stream_t *)&p->pipe, &b, 1, on_peer_write), 0);
}

static void peer_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)h;
  *b = uv_buf_init(nl_xmalloc(hint), (unsigned)hint);
}

static void peer_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  peer_t *p = s->data;
  for (ssize_t i = 0; i < n; i++)
    if ((uint8_t)b->base[i] != pattern(p->seed_in, p->received + (size_t)i)) p->mismatch = true;
  if (n > 0) p->received += (size_t)n;
  free(b->base);
  if (n < 0) {
    p->eof = true;
    uv_read_stop(s);
  }
}

static void on_pump_done(nl_pump_t *pump, int side, nl_err_t *err, void *ctx) {
  (void)pump;
  fixture_t *f = ctx;
  assert_null(err);
  f->done = true;
  f->done_side = side;
  uv_close((uv_handle_t *)&f->x, on_pump_closed);
  uv_close((uv_handle_t *)&f->y, on_pump_closed);
}

static void open_pair(uv_loop_t *loop, uv_pipe_t *a, uv_pipe_t *b) {
  int fds[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  assert_int_equal(uv_pipe_init(loop, a, 0), 0);
  assert_int_equal(uv_pipe_init(loop, b, 0), 0);
  assert_int_equal(uv_pipe_open(a, fds[0]), 0);
  assert_int_equal(uv_pipe_open(b, fds[1]), 0);
}

static fixture_t *setup(size_t up, size_t down) {
  fixture_t *f = nl_xcalloc(1, sizeof *f);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  f->loop.data = f;
  open_pair(&f->loop, &f->client.pipe, &f->x);
  open_pair(&f->loop, &f->y, &f->backend.pipe);
  f->client.pipe.data = &f->client;
  f->backend.pipe.data = &f->backend;
  f->client.seed_out = f->backend.seed_in = 11;
  f->backend.seed_out = f->client.seed_in = 77;
  f->client.total = up;
  f->backend.total = down;
  nl_pump_stream_init(&f->ex, (uv_stream_t *)&f->x);
  nl_pump_stream_init(&f->ey, (uv_stream_t *)&f->y);
  nl_pump_init(&f->pump, &f->ex.end, &f->ey.end, HIGH_WATER, on_pump_done, f);
  nl_pump_start(&f->pump);
  return f;
}

static void run_until(fixture_t *f, bool (*cond)(fixture_t *)) {
  while (!cond(f)) {
    if (!uv_run(&f->loop, UV_RUN_ONCE) && !cond(f)) {
      print_message("stalled: sent %zu/%zu received %zu/%zu copied %lu/%lu reading %d/%d queued %zu/%zu\n",
                    f->client.sent, f->backend.sent, f->client.received, f->backend.received,
                    (unsigned long)f->pump.copied[0], (unsigned long)f->pump.copied[1],
                    f->ex.end.reading, f->ey.end.reading, f->ex.queued, f->ey.queued);
      fail();
    }
  }
}

static bool all_received(fixture_t *f) {
  return f->backend.received == f->client.total && f->client.received == f->backend.total;
}

static bool pump_done(fixture_t *f) { return f->done && f->closed == 2; }

/* 8 MiB up and 12 MiB down at once, then the client closes: the backend sees
 * EOF, both sides saw every byte in order, and the queues stayed bounded. */
static void large_transfer_both_ways(void **state) {
  (void)state;
  fixture_t *f = setup(8 << 20, 12 << 20);
  uv_read_start((uv_stream_t *)&f->client.pipe, peer_alloc, peer_read);
  uv_read_start((uv_stream_t *)&f->backend.pipe, peer_alloc, peer_read);
  peer_write_more(&f->client);
  peer_write_more(&f->backend);
  run_until(f, all_received);
  assert_false(f->client.mismatch);
  assert_false(f->backend.mismatch);
  assert_int_equal(f->pump.copied[0], 8 << 20);
  assert_int_equal(f->pump.copied[1], 12 << 20);
  assert_true(f->pump.max_queued[0] <= HIGH_WATER + 64 * 1024);
  assert_true(f->pump.max_queued[1] <= HIGH_WATER + 64 * 1024);

  uv_close((uv_handle_t *)&f->client.pipe, on_closed);
  run_until(f, pump_done);
  assert_int_equal(f->done_side, 0);
  uv_read_start((uv_stream_t *)&f->backend.pipe, peer_alloc, peer_read);
  while (!f->backend.eof) uv_run(&f->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&f->backend.pipe, on_closed);
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  free(f);
}

static void on_timer(uv_timer_t *t) { (void)t; }

/* The backend reads nothing for a while: the client keeps writing 16 MiB, yet
 * the pump's queue toward the backend never passes the bound plus one read,
 * and the pump stopped reading the client. Then the backend reads: all of it
 * arrives intact. */
static void slow_reader_bounded(void **state) {
  (void)state;
  fixture_t *f = setup(16 << 20, 0);
  peer_write_more(&f->client);
  uv_timer_init(&f->loop, &f->timer);
  uv_timer_start(&f->timer, on_timer, 300, 0);
  while (uv_is_active((uv_handle_t *)&f->timer)) uv_run(&f->loop, UV_RUN_ONCE);
  assert_false(f->ex.end.reading);
  assert_true(f->pump.copied[0] < (16 << 20) / 4);
  assert_true(f->ey.queued > HIGH_WATER);
  assert_true(f->pump.max_queued[1] <= HIGH_WATER + 64 * 1024);

  uv_read_start((uv_stream_t *)&f->backend.pipe, peer_alloc, peer_read);
  run_until(f, all_received);
  assert_false(f->backend.mismatch);
  assert_true(f->pump.max_queued[1] <= HIGH_WATER + 64 * 1024);

  /* The backend ends first: done names side 1. */
  uv_close((uv_handle_t *)&f->backend.pipe, on_closed);
  run_until(f, pump_done);
  assert_int_equal(f->done_side, 1);
  uv_close((uv_handle_t *)&f->timer, on_closed);
  uv_close((uv_handle_t *)&f->client.pipe, on_closed);
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  free(f);
}

/* The owner stops the pump (its server is shutting down): done is not called,
 * and closing with writes still queued frees everything. */
static void stop_with_queued_writes(void **state) {
  (void)state;
  fixture_t *f = setup(4 << 20, 0);
  peer_write_more(&f->client);
  while (f->ex.end.reading) uv_run(&f->loop, UV_RUN_ONCE);
  assert_true(f->ey.queued > 0);
  nl_pump_stop(&f->pump);
  uv_close((uv_handle_t *)&f->x, on_pump_closed);
  uv_close((uv_handle_t *)&f->y, on_pump_closed);
  uv_close((uv_handle_t *)&f->client.pipe, on_closed);
  uv_close((uv_handle_t *)&f->backend.pipe, on_closed);
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_false(f->done);
  assert_int_equal(f->ey.queued, 0);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(large_transfer_both_ways),
      cmocka_unit_test(slow_reader_bounded),
      cmocka_unit_test(stop_with_queued_writes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
