/* A raw TCP peer for the HTTP tests: sends scripted bytes to 127.0.0.1:port,
 * sending chunk i+1 once i responses ("HTTP/1.1 " lines) have arrived, and
 * collects everything until the server closes. */
#ifndef NL_TEST_HTTP_UTIL_H
#define NL_TEST_HTTP_UTIL_H

#include <string.h>
#include <uv.h>

#include "reactor/buf.h"
#include "reactor/xalloc.h"

typedef struct raw_peer {
  uv_tcp_t tcp;
  uv_connect_t connect;
  const char **chunks; /* NULL-terminated */
  size_t next;
  nl_buf_t in;
  bool eof, closed;
  int status;
  void (*on_closed)(struct raw_peer *r);
  void *data;
} raw_peer_t;

static size_t raw_count(const nl_buf_t *b, const char *needle) {
  size_t n = 0;
  for (const char *p = b->data; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static void raw_write_cb(uv_write_t *w, int status) { free(w); }

static void raw_send_next(raw_peer_t *r) {
  const char *c = r->chunks[r->next++];
  uv_write_t *w = nl_xmalloc(sizeof(*w));
  uv_buf_t b = uv_buf_init((char *)c, (unsigned)strlen(c));
  if (uv_write(w, (uv_stream_t *)&r->tcp, &b, 1, raw_write_cb) < 0) free(w);
}

static void raw_closed(uv_handle_t *h) {
  raw_peer_t *r = h->data;
  r->closed = true;
  if (r->on_closed) r->on_closed(r);
}

static void raw_alloc(uv_handle_t *h, size_t s, uv_buf_t *b) {
  b->base = nl_xmalloc(4096);
  b->len = 4096;
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  raw_peer_t *r = s->data;
  if (n > 0) {
    nl_buf_append(&r->in, b->base, (size_t)n);
    while (r->chunks[r->next] && raw_count(&r->in, "HTTP/1.1 ") >= r->next) raw_send_next(r);
  } else if (n < 0) {
    r->eof = n == UV_EOF;
    r->status = (int)n;
    uv_close((uv_handle_t *)&r->tcp, raw_closed);
  }
  free(b->base);
}

static void raw_connected(uv_connect_t *c, int status) {
  raw_peer_t *r = c->data;
  r->status = status;
  if (status < 0) {
    uv_close((uv_handle_t *)&r->tcp, raw_closed);
    return;
  }
  uv_read_start((uv_stream_t *)&r->tcp, raw_alloc, raw_read);
  if (r->chunks[0]) raw_send_next(r);
}

static void raw_start(raw_peer_t *r, uv_loop_t *loop, int port, const char **chunks) {
  memset(r, 0, sizeof(*r));
  r->chunks = chunks;
  uv_tcp_init(loop, &r->tcp);
  r->tcp.data = r;
  r->connect.data = r;
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", port, &sa);
  uv_tcp_connect(&r->connect, &r->tcp, (struct sockaddr *)&sa, raw_connected);
}

static void run_until_closed(uv_loop_t *loop) {
  uv_run(loop, UV_RUN_DEFAULT);
}

#endif
