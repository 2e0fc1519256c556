/* libFuzzer target for the server's request handling as a whole
 * (reactor/http_server.c with lazy bodies, as the kubelet server runs it): the
 * input is sent over a real loopback connection that pipelines, in pieces,
 * to a route table behind a fake authentication (a head-time decision, as
 * agent/kserver.c makes with its webhooks): "Authorization: Bearer good" is
 * allowed, anything else 401 without its body being read. Routes answer at
 * once, later (a timer), with a body they read (at most 8 bytes), streamed, or
 * by taking the connection over. The client reads its answers as they come,
 * or only once everything is sent and its side shut (a client that does not
 * read while it pipelines: the server's back-pressure and deadlines).
 *
 * Input: byte 0: bit 0 the client reads at once, bits 1..7 the piece size - 1
 * (the pieces go out back to back); the rest is the byte stream. The server's
 * deadlines are short so that an input that stalls ends within tens of ms. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "reactor/http_server.h"
#include "reactor/log.h"

typedef struct world {
  uv_loop_t loop;
  nl_http_server_t srv;
  uv_tcp_t client;
  uv_connect_t connect;
  uv_shutdown_t shutdown;
  uv_timer_t deadline, later;
  bool client_closed, stopping;
  nl_http_resp_t *held;
  const uint8_t *data;
  size_t size, piece;
  bool reads;
  size_t got;
} world_t;

static void send_later(uv_timer_t *t) {
  world_t *w = t->data;
  if (w->held) nl_http_resp_send_str(w->held, 200, "later\n");
  w->held = NULL;
}

static void body_done(void *ctx, nl_http_resp_t *resp, const char *body, size_t len) {
  if (!body) {
    assert(!nl_http_resp_alive(resp));
    nl_http_resp_send_str(resp, 500, "");
    return;
  }
  assert(strlen(body) <= len && len <= 8);
  nl_http_resp_send(resp, 200, body, len);
}

static void t_data(void *ctx, const char *p, size_t n) {
  nl_http_tunnel_t **t = ctx;
  nl_http_tunnel_write(*t, p, n, NULL);
}
static void t_end(void *ctx, const nl_err_t *err) {
  nl_http_tunnel_t **t = ctx;
  nl_http_tunnel_close(*t);
}
static void t_closed(void *ctx) { free(ctx); }
static const nl_http_tunnel_cbs_t tunnel_cbs = {.on_data = t_data, .on_end = t_end,
                                                .on_close = t_closed};

/* The fake authentication, then the route table. */
static void handle(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  world_t *w = ctx;
  assert(req->body_len == 0); /* nothing is read before the handler decides */
  const char *auth = nl_http_headers_get(req->headers, "Authorization");
  if (!auth || strcmp(auth, "Bearer good") != 0) {
    nl_http_resp_send_str(resp, 401, "Unauthorized");
    return;
  }
  if (strcmp(req->path, "/flags") == 0) {
    nl_http_resp_read_body(resp, 8, body_done, w);
  } else if (strcmp(req->path, "/later") == 0 && !w->held) {
    w->held = resp;
    uv_timer_start(&w->later, send_later, 1, 0);
  } else if (strcmp(req->path, "/stream") == 0) {
    nl_http_resp_stream(resp, 200);
    for (int i = 0; i < 3; i++) nl_http_resp_write(resp, "chunk\n", 6);
    nl_http_resp_end(resp);
  } else if (strcmp(req->path, "/up") == 0) {
    nl_http_tunnel_t **t = malloc(sizeof(*t));
    *t = nl_http_resp_takeover(resp, &tunnel_cbs, t);
    if (!*t) free(t);
  } else if (strcmp(req->path, "/big") == 0) {
    static char big[64 * 1024];
    nl_http_resp_send(resp, 200, big, sizeof(big));
  } else {
    nl_http_resp_send_str(resp, 404, "404 page not found\n");
  }
}

static void stopped(nl_http_server_t *srv, void *ctx) {}

static void stop_all(world_t *w) {
  if (w->stopping) return;
  w->stopping = true;
  uv_close((uv_handle_t *)&w->deadline, NULL);
  uv_close((uv_handle_t *)&w->later, NULL);
  if (w->held) {
    nl_http_resp_t *r = w->held;
    w->held = NULL;
    nl_http_server_stop(&w->srv, stopped, w);
    nl_http_resp_send_str(r, 200, "");
  } else {
    nl_http_server_stop(&w->srv, stopped, w);
  }
  if (!uv_is_closing((uv_handle_t *)&w->client)) uv_close((uv_handle_t *)&w->client, NULL);
}

static void on_deadline(uv_timer_t *t) { stop_all(t->data); }

static void c_alloc(uv_handle_t *h, size_t s, uv_buf_t *b) {
  static char buf[16384];
  b->base = buf;
  b->len = sizeof(buf);
}

static void c_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  world_t *w = s->data;
  if (n > 0) w->got += (size_t)n;
  if (n < 0) stop_all(w); /* the server closed: done */
}

static void c_written(uv_write_t *req, int status) { free(req); }

static void c_shut(uv_shutdown_t *req, int status) {
  world_t *w = req->data;
  if (!w->reads && !uv_is_closing((uv_handle_t *)&w->client))
    uv_read_start((uv_stream_t *)&w->client, c_alloc, c_read);
}

static void c_connected(uv_connect_t *c, int status) {
  world_t *w = c->data;
  if (status < 0) {
    stop_all(w);
    return;
  }
  for (size_t off = 0; off < w->size; off += w->piece) {
    size_t n = w->size - off < w->piece ? w->size - off : w->piece;
    uv_write_t *req = malloc(sizeof(*req));
    uv_buf_t b = uv_buf_init((char *)w->data + off, (unsigned)n);
    if (uv_write(req, (uv_stream_t *)&w->client, &b, 1, c_written) < 0) {
      free(req);
      break;
    }
  }
  w->shutdown.data = w;
  if (uv_shutdown(&w->shutdown, (uv_stream_t *)&w->client, c_shut) < 0) w->reads = true;
  if (w->reads) uv_read_start((uv_stream_t *)&w->client, c_alloc, c_read);
}

static void quiet(void) {
  static bool done;
  if (!done) nl_log_set_verbosity(-1);
  done = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  quiet();
  world_t w = {0};
  w.reads = data[0] & 1;
  w.piece = 1 + (data[0] >> 1);
  w.data = data + 1;
  w.size = size - 1;
  uv_loop_init(&w.loop);
  nl_http_server_opts_t o = {.read_timeout_ms = 40, .header_timeout_ms = 20,
                             .idle_timeout_ms = 20, .max_conns = 4, .max_head = 2048,
                             .max_body = 64, .lazy_body = true};
  if (nl_http_server_init(&w.srv, &w.loop, &o, NULL) < 0) abort();
  nl_http_server_route(&w.srv, NULL, "/", handle, &w);
  if (nl_http_server_listen(&w.srv, "127.0.0.1", 0, NULL) < 0) abort();
  uv_timer_init(&w.loop, &w.deadline);
  uv_timer_init(&w.loop, &w.later);
  w.deadline.data = w.later.data = &w;
  uv_timer_start(&w.deadline, on_deadline, 500, 0); /* a net: the server's deadlines end it first */
  uv_tcp_init(&w.loop, &w.client);
  w.client.data = &w;
  w.connect.data = &w;
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", nl_http_server_port(&w.srv), &sa);
  uv_tcp_connect(&w.connect, &w.client, (struct sockaddr *)&sa, c_connected);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&w.loop);
  assert(rc == 0);
  (void)rc;
  return 0;
}
