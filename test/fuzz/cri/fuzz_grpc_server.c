/* libFuzzer target for the gRPC server (cri/grpc_server.c on reactor/h2.c's
 * server side) as a whole: the input is what a client sends on a real unix
 * socket connection, in pieces: the HTTP/2 preface, SETTINGS, HPACK, streams,
 * gRPC framing, deadlines, resets, GOAWAY. The method table answers at once
 * (/x.Y/Echo), from a timer (/x.Y/Later), streams (/x.Y/Stream: two messages,
 * one later, then OK) or holds the call until the server stops (/x.Y/Hold).
 * Checks: no crash or sanitizer report, every call handed to a handler is
 * answered exactly once by it (a leak otherwise), the loop closes cleanly.
 *
 * Input: byte 0: bit 0 the client shuts its side down after sending (the
 * server then closes the connection and cancels what is held), bits 1..7 the
 * piece size - 1; the rest is the byte stream. Seeds: fuzz_grpc_server_seeds
 * (gen_server_seeds.c). */
#include <assert.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "cri/grpc_server.h"
#include "reactor/log.h"

#define MAX_HELD 64

typedef struct world {
  uv_loop_t loop;
  nl_grpc_server_t srv;
  uv_pipe_t client;
  uv_connect_t connect;
  uv_shutdown_t shutdown;
  uv_timer_t deadline, later;
  bool stopping, shut;
  nl_grpc_call_t *held[MAX_HELD], *later_calls[MAX_HELD], *stream[MAX_HELD];
  size_t nheld, nlater, nstream;
  const uint8_t *data;
  size_t size, piece;
  char path[64];
} world_t;

static void h_echo(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  nl_grpc_call_reply(call, NL_GRPC_OK, NULL, req, len);
}

static void keep(nl_grpc_call_t **v, size_t *n, nl_grpc_call_t *call) {
  if (*n == MAX_HELD) {
    nl_grpc_call_reply(call, NL_GRPC_RESOURCE_EXHAUSTED, "full", NULL, 0);
    return;
  }
  v[(*n)++] = call;
}

static void h_later(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  keep(w->later_calls, &w->nlater, call);
}

static void h_hold(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  keep(w->held, &w->nheld, call);
}

static void h_stream(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  world_t *w = ctx;
  nl_grpc_call_send(call, req, len);
  nl_grpc_call_send(call, (const uint8_t *)"two", 3);
  keep(w->stream, &w->nstream, call);
}

/* Answers what waits for a timer: later calls, and streams' last message. */
static void on_later(uv_timer_t *t) {
  world_t *w = t->data;
  for (size_t i = 0; i < w->nlater; i++)
    nl_grpc_call_reply(w->later_calls[i], NL_GRPC_OK, NULL, (const uint8_t *)"later", 5);
  w->nlater = 0;
  for (size_t i = 0; i < w->nstream; i++) {
    nl_grpc_call_send(w->stream[i], (const uint8_t *)"three", 5);
    nl_grpc_call_finish(w->stream[i], NL_GRPC_OK, NULL);
  }
  w->nstream = 0;
}

static void stopped(nl_grpc_server_t *srv, void *ctx) {}

static void stop_all(world_t *w) {
  if (w->stopping) return;
  w->stopping = true;
  nl_grpc_server_stop(&w->srv, stopped, w);
  on_later(&w->later);
  for (size_t i = 0; i < w->nheld; i++) nl_grpc_call_finish(w->held[i], NL_GRPC_ABORTED, "stop");
  w->nheld = 0;
  uv_close((uv_handle_t *)&w->deadline, NULL);
  uv_close((uv_handle_t *)&w->later, NULL);
  if (!uv_is_closing((uv_handle_t *)&w->client)) uv_close((uv_handle_t *)&w->client, NULL);
}

static void on_deadline(uv_timer_t *t) { stop_all(t->data); }

static void c_alloc(uv_handle_t *h, size_t s, uv_buf_t *b) {
  static char buf[65536];
  *b = uv_buf_init(buf, sizeof buf);
}

static void c_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  if (n < 0) stop_all(s->data); /* the server closed: done */
}

static void c_written(uv_write_t *req, int status) { free(req); }
static void c_shut(uv_shutdown_t *req, int status) {}

static void c_connected(uv_connect_t *c, int status) {
  world_t *w = c->data;
  if (status < 0) {
    stop_all(w);
    return;
  }
  uv_read_start((uv_stream_t *)&w->client, c_alloc, c_read);
  for (size_t off = 0; off < w->size; off += w->piece) {
    size_t n = w->size - off < w->piece ? w->size - off : w->piece;
    uv_write_t *req = malloc(sizeof *req);
    uv_buf_t b = uv_buf_init((char *)w->data + off, (unsigned)n);
    if (uv_write(req, (uv_stream_t *)&w->client, &b, 1, c_written) < 0) {
      free(req);
      break;
    }
  }
  if (w->shut) uv_shutdown(&w->shutdown, (uv_stream_t *)&w->client, c_shut);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static bool once;
  if (!once) {
    nl_log_set_verbosity(-1);
    signal(SIGPIPE, SIG_IGN); /* the client's writes to a server that closed */
  }
  once = true;
  world_t w;
  memset(&w, 0, sizeof w);
  w.shut = data[0] & 1;
  w.piece = 1 + (data[0] >> 1);
  w.data = data + 1;
  w.size = size - 1;
  snprintf(w.path, sizeof w.path, "/tmp/nl-fuzz-grpc-%d.sock", (int)getpid());
  uv_loop_init(&w.loop);
  nl_grpc_server_opts_t o = {.max_conns = 2, .max_streams = 8, .max_recv_msg_size = 1024,
                             .max_send_msg_size = 2048, .max_header_list = 2048,
                             .handshake_timeout_ms = 20, .idle_timeout_ms = 20,
                             .request_timeout_ms = 20, .window = 4096};
  nl_grpc_server_init(&w.srv, &w.loop, &o);
  nl_grpc_server_method(&w.srv, "/x.Y/Echo", NL_GRPC_UNARY, h_echo, &w);
  nl_grpc_server_method(&w.srv, "/x.Y/Later", NL_GRPC_UNARY, h_later, &w);
  nl_grpc_server_method(&w.srv, "/x.Y/Hold", NL_GRPC_UNARY, h_hold, &w);
  nl_grpc_server_method(&w.srv, "/x.Y/Stream", NL_GRPC_SERVER_STREAMING, h_stream, &w);
  if (nl_grpc_server_listen(&w.srv, w.path, NULL) < 0) abort();
  uv_timer_init(&w.loop, &w.deadline);
  uv_timer_init(&w.loop, &w.later);
  w.deadline.data = w.later.data = &w;
  /* A net: the server's own deadlines (20 ms) end a stalled input first. */
  uv_timer_start(&w.deadline, on_deadline, 200, 0);
  uv_timer_start(&w.later, on_later, 2, 2);
  uv_pipe_init(&w.loop, &w.client, 0);
  w.client.data = &w;
  w.connect.data = &w;
  uv_pipe_connect(&w.connect, &w.client, w.path, c_connected);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&w.loop);
  assert(rc == 0);
  (void)rc;
  return 0;
}
