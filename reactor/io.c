#include "reactor/io.h"

#include <errno.h>
#include <string.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

typedef struct wreq {
  uv_write_t req;
  char *data;
} wreq_t;

typedef struct sreq {
  uv_shutdown_t req;
  uv_close_cb cb;
} sreq_t;

#define READ_CHUNK (16 * 1024)

int nl_io_init(nl_io_t *io, uv_loop_t *loop, const nl_io_cbs_t *cbs) {
  memset(io, 0, sizeof(*io));
  io->cbs = cbs;
  return uv_tcp_init(loop, &io->tcp);
}

int nl_io_init_pipe(nl_io_t *io, uv_loop_t *loop, const nl_io_cbs_t *cbs) {
  memset(io, 0, sizeof(*io));
  io->cbs = cbs;
  return uv_pipe_init(loop, &io->pipe, 0);
}

void nl_io_set_tls(nl_io_t *io, nl_tls_t *tls) { io->tls = tls; }

void nl_io_set_tls_later(nl_io_t *io, nl_tls_config_t *cfg) {
  io->tls_later = nl_tls_config_ref(cfg);
}

bool nl_io_handshaking(const nl_io_t *io) {
  if (io->tls) return !nl_tls_handshake_done(io->tls);
  return io->tls_later != NULL;
}

bool nl_io_closing(const nl_io_t *io) {
  return uv_is_closing((const uv_handle_t *)&io->tcp);
}

static void end(nl_io_t *io, nl_err_t *err) {
  if (io->ended || nl_io_closing(io)) return;
  io->ended = true;
  uv_read_stop((uv_stream_t *)&io->tcp);
  io->cbs->on_end(io, err);
}

static void write_cb(uv_write_t *req, int status) {
  wreq_t *w = container_of(req, wreq_t, req);
  uv_stream_t *s = req->handle;
  free(w->data);
  free(w);
  if (uv_is_closing((uv_handle_t *)s)) return;
  nl_io_t *io = container_of((uv_tcp_t *)s, nl_io_t, tcp);
  if (status < 0 && status != UV_ECANCELED) {
    nl_cleanup_err nl_err_t *err = NULL;
    nl_err_set(&err, -status, "write: %s", uv_strerror(status));
    end(io, err);
    return;
  }
  if (io->cbs->on_drain && uv_stream_get_write_queue_size(s) == 0) io->cbs->on_drain(io);
}

size_t nl_io_queued(const nl_io_t *io) {
  return uv_stream_get_write_queue_size((const uv_stream_t *)&io->tcp);
}

/* Queues an owned buffer. */
static int send_raw(nl_io_t *io, char *data, size_t len, nl_err_t **err) {
  wreq_t *w = nl_xmalloc(sizeof(*w));
  w->data = data;
  uv_buf_t b = uv_buf_init(data, (unsigned)len);
  int rc = uv_write(&w->req, (uv_stream_t *)&io->tcp, &b, 1, write_cb);
  if (rc < 0) {
    free(data);
    free(w);
    return nl_err_set(err, -rc, "write: %s", uv_strerror(rc));
  }
  return 0;
}

static int flush_tls(nl_io_t *io, nl_err_t **err) {
  size_t len;
  char *out = nl_tls_take(io->tls, &len);
  return out ? send_raw(io, out, len, err) : 0;
}

int nl_io_write(nl_io_t *io, const void *data, size_t len, nl_err_t **err) {
  if (nl_io_closing(io)) return nl_err_set(err, ECONNRESET, "write: connection closed");
  if (!io->tls) return send_raw(io, nl_xstrndup(data, len), len, err);
  if (nl_tls_write(io->tls, data, len, err) < 0) return -1;
  return flush_tls(io, err);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  buf->base = nl_xmalloc(READ_CHUNK);
  buf->len = READ_CHUNK;
}

/* Runs TLS on new ciphertext; returns false when the io was closed or ended. */
static bool tls_input(nl_io_t *io, const char *p, size_t n) {
  nl_cleanup_err nl_err_t *err = NULL;
  nl_tls_feed(io->tls, p, n);
  if (!nl_tls_handshake_done(io->tls)) {
    int rc = nl_tls_handshake(io->tls, &err);
    if (flush_tls(io, &err) < 0 || rc < 0) {
      end(io, err);
      return false;
    }
    if (rc == 0) return true;
    if (io->cbs->on_ready) io->cbs->on_ready(io);
    if (io->ended || nl_io_closing(io)) return false;
  }
  char plain[READ_CHUNK];
  for (;;) {
    ssize_t r = nl_tls_read(io->tls, plain, sizeof(plain), &err);
    if (flush_tls(io, &err) < 0) r = -1;
    if (r == 0) return true;
    if (r == NL_TLS_EOF) {
      end(io, NULL);
      return false;
    }
    if (r < 0) {
      end(io, err);
      return false;
    }
    io->cbs->on_data(io, plain, (size_t)r);
    if (io->ended || nl_io_closing(io)) return false;
  }
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  nl_io_t *io = container_of((uv_tcp_t *)s, nl_io_t, tcp);
  if (io->discard_cb) {
    /* Closing: what the peer still sends is dropped until its end. */
    free(buf->base);
    if (nread < 0 && !nl_io_closing(io)) uv_close((uv_handle_t *)s, io->discard_cb);
    return;
  }
  if (nread > 0 && !io->got_bytes) {
    io->got_bytes = true;
    if (io->tls_later) io->tls = nl_tls_new(io->tls_later, NULL);
    if (io->cbs->on_first_byte) io->cbs->on_first_byte(io);
  }
  if (nread > 0 && (io->ended || nl_io_closing(io))) {
    /* on_first_byte closed it */
  } else if (nread > 0) {
    if (io->tls) tls_input(io, buf->base, (size_t)nread);
    else io->cbs->on_data(io, buf->base, (size_t)nread);
  } else if (nread == UV_EOF) {
    end(io, NULL);
  } else if (nread < 0) {
    nl_cleanup_err nl_err_t *err = NULL;
    nl_err_set(&err, (int)-nread, "read: %s", uv_strerror((int)nread));
    end(io, err);
  }
  free(buf->base);
}

int nl_io_start(nl_io_t *io, nl_err_t **err) {
  int rc = uv_read_start((uv_stream_t *)&io->tcp, alloc_cb, read_cb);
  if (rc < 0) return nl_err_set(err, -rc, "read: %s", uv_strerror(rc));
  if (io->tls && !nl_tls_is_server(io->tls)) {
    /* The client speaks first: its ClientHello. */
    if (nl_tls_handshake(io->tls, err) < 0) return -1;
    return flush_tls(io, err);
  }
  return 0;
}

void nl_io_read(nl_io_t *io, bool on) {
  if (io->ended || nl_io_closing(io)) return;
  if (on) uv_read_start((uv_stream_t *)&io->tcp, alloc_cb, read_cb);
  else uv_read_stop((uv_stream_t *)&io->tcp);
}

void nl_io_close(nl_io_t *io, uv_close_cb cb) {
  if (!nl_io_closing(io)) uv_close((uv_handle_t *)&io->tcp, cb);
}

static void shutdown_cb(uv_shutdown_t *req, int status) {
  sreq_t *s = container_of(req, sreq_t, req);
  uv_handle_t *h = (uv_handle_t *)req->handle;
  uv_close_cb cb = s->cb;
  free(s);
  if (uv_is_closing(h)) return;
  nl_io_t *io = container_of((uv_tcp_t *)h, nl_io_t, tcp);
  /* Closing a socket with unread input resets it, and the peer may lose the
   * answer it has not read yet (a 401 to a request whose body was not read):
   * read to the peer's end first, as Go's server does for a while. The
   * owner bounds how long. */
  if (status == 0 && io->discard_input) {
    io->discard_cb = cb;
    if (uv_read_start((uv_stream_t *)h, alloc_cb, read_cb) == 0) return;
  }
  uv_close(h, cb);
}

void nl_io_close_after_writes(nl_io_t *io, uv_close_cb cb, bool discard_input) {
  io->discard_input = discard_input;
  if (nl_io_closing(io)) return;
  if (io->tls && nl_tls_handshake_done(io->tls)) {
    nl_tls_close_notify(io->tls);
    flush_tls(io, NULL);
  }
  /* Everything is encrypted and queued: the session is not needed any more
   * (what the peer still sends is dropped unread). */
  nl_io_release(io);
  uv_read_stop((uv_stream_t *)&io->tcp);
  io->ended = true;
  sreq_t *s = nl_xmalloc(sizeof(*s));
  s->cb = cb;
  if (uv_shutdown(&s->req, (uv_stream_t *)&io->tcp, shutdown_cb) < 0) {
    free(s);
    uv_close((uv_handle_t *)&io->tcp, cb);
  }
}

void nl_io_release(nl_io_t *io) {
  nl_tls_free(io->tls);
  io->tls = NULL;
  nl_tls_config_unref(io->tls_later);
  io->tls_later = NULL;
}
