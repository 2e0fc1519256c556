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

static inline size_t raw_count(const nl_buf_t *b, const char *needle) {
  size_t n = 0;
  for (const char *p = b->data; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static inline void raw_write_cb(uv_write_t *w, int status) { free(w); }

static inline void raw_send_next(raw_peer_t *r) {
  const char *c = r->chunks[r->next++];
  uv_write_t *w = nl_xmalloc(sizeof(*w));
  uv_buf_t b = uv_buf_init((char *)c, (unsigned)strlen(c));
  if (uv_write(w, (uv_stream_t *)&r->tcp, &b, 1, raw_write_cb) < 0) free(w);
}

static inline void raw_closed(uv_handle_t *h) {
  raw_peer_t *r = h->data;
  r->closed = true;
  if (r->on_closed) r->on_closed(r);
}

static inline void raw_alloc(uv_handle_t *h, size_t s, uv_buf_t *b) {
  b->base = nl_xmalloc(4096);
  b->len = 4096;
}

static inline void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
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

static inline void raw_connected(uv_connect_t *c, int status) {
  raw_peer_t *r = c->data;
  r->status = status;
  if (status < 0) {
    uv_close((uv_handle_t *)&r->tcp, raw_closed);
    return;
  }
  uv_read_start((uv_stream_t *)&r->tcp, raw_alloc, raw_read);
  if (r->chunks[0]) raw_send_next(r);
}

static inline void raw_start(raw_peer_t *r, uv_loop_t *loop, int port, const char **chunks) {
  memset(r, 0, sizeof(*r));
  r->chunks = chunks;
  uv_tcp_init(loop, &r->tcp);
  r->tcp.data = r;
  r->connect.data = r;
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", port, &sa);
  uv_tcp_connect(&r->connect, &r->tcp, (struct sockaddr *)&sa, raw_connected);
}

static inline void run_until_closed(uv_loop_t *loop) {
  uv_run(loop, UV_RUN_DEFAULT);
}

#endif

/* A scripted server on 127.0.0.1: answers each connection, once the request
 * head has arrived, with `canned` and closes; with canned NULL it accepts and
 * never answers (a hung peer). Stop it with canned_stop(). */
typedef struct canned_conn {
  uv_tcp_t tcp;
  struct canned_server *srv;
  nl_buf_t in;
  bool answered;
  struct canned_conn *next;
} canned_conn_t;

typedef struct canned_server {
  uv_tcp_t listener;
  const char *canned;
  int port;
  int accepted;
  canned_conn_t *conns;
} canned_server_t;

static inline void canned_conn_closed(uv_handle_t *h) {
  canned_conn_t *c = h->data;
  nl_buf_free(&c->in);
  free(c);
}

static inline void canned_shutdown_cb(uv_shutdown_t *req, int status) {
  if (!uv_is_closing((uv_handle_t *)req->handle)) uv_close((uv_handle_t *)req->handle, canned_conn_closed);
  free(req);
}

static inline void canned_unlink(canned_conn_t *c) {
  for (canned_conn_t **p = &c->srv->conns; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
}

static inline void canned_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  canned_conn_t *c = s->data;
  if (n > 0) nl_buf_append(&c->in, b->base, (size_t)n);
  free(b->base);
  if (n < 0) {
    canned_unlink(c);
    uv_close((uv_handle_t *)s, canned_conn_closed);
    return;
  }
  if (!c->answered && c->srv->canned && c->in.data && strstr(c->in.data, "\r\n\r\n")) {
    c->answered = true;
    uv_write_t *w = nl_xmalloc(sizeof(*w));
    uv_buf_t out = uv_buf_init((char *)c->srv->canned, (unsigned)strlen(c->srv->canned));
    uv_write(w, s, &out, 1, raw_write_cb);
    uv_shutdown_t *sd = nl_xmalloc(sizeof(*sd));
    canned_unlink(c);
    uv_read_stop(s);
    uv_shutdown(sd, s, canned_shutdown_cb);
  }
}

static inline void canned_accept(uv_stream_t *l, int status) {
  canned_server_t *srv = l->data;
  canned_conn_t *c = calloc(1, sizeof(*c));
  c->srv = srv;
  uv_tcp_init(l->loop, &c->tcp);
  c->tcp.data = c;
  uv_accept(l, (uv_stream_t *)&c->tcp);
  srv->accepted++;
  c->next = srv->conns;
  srv->conns = c;
  uv_read_start((uv_stream_t *)&c->tcp, raw_alloc, canned_read);
}

static inline int canned_start(canned_server_t *srv, uv_loop_t *loop, const char *canned) {
  memset(srv, 0, sizeof(*srv));
  srv->canned = canned;
  uv_tcp_init(loop, &srv->listener);
  srv->listener.data = srv;
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", 0, &sa);
  uv_tcp_bind(&srv->listener, (struct sockaddr *)&sa, 0);
  uv_listen((uv_stream_t *)&srv->listener, 16, canned_accept);
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len);
  srv->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return srv->port;
}

static inline void canned_stop(canned_server_t *srv) {
  uv_close((uv_handle_t *)&srv->listener, NULL);
  while (srv->conns) {
    canned_conn_t *c = srv->conns;
    srv->conns = c->next;
    uv_close((uv_handle_t *)&c->tcp, canned_conn_closed);
  }
}
