#include "reactor/pump.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

void nl_pump_init(nl_pump_t *p, nl_pump_end_t *a, nl_pump_end_t *b, size_t high_water,
                  nl_pump_done_fn done, void *ctx) {
  memset(p, 0, sizeof *p);
  p->end[0] = a;
  p->end[1] = b;
  p->high_water = high_water ? high_water : NL_PUMP_DEFAULT_HIGH_WATER;
  p->done_cb = done;
  p->done_ctx = ctx;
  a->pump = b->pump = p;
  a->reading = b->reading = false;
}

static void set_reading(nl_pump_end_t *e, bool on) {
  if (e->reading == on) return;
  e->reading = on;
  e->ops->set_reading(e, on);
}

void nl_pump_start(nl_pump_t *p) {
  assert(!p->started);
  p->started = true;
  set_reading(p->end[0], true);
  set_reading(p->end[1], true);
}

void nl_pump_stop(nl_pump_t *p) {
  p->done = true;
  set_reading(p->end[0], false);
  set_reading(p->end[1], false);
}

static int side_of(const nl_pump_end_t *e) {
  assert(e->pump && (e->pump->end[0] == e || e->pump->end[1] == e));
  return e->pump->end[1] == e;
}

static void finish(nl_pump_t *p, int side, nl_err_t *err) {
  nl_pump_stop(p);
  if (p->done_cb) p->done_cb(p, side, err, p->done_ctx);
}

void nl_pump_end_data(nl_pump_end_t *e, const char *data, size_t n) {
  nl_pump_t *p = e->pump;
  if (p->done || n == 0) return;
  int i = side_of(e);
  nl_pump_end_t *to = p->end[!i];
  nl_err_t *err = NULL;
  if (to->ops->write(to, data, n, &err) != 0) {
    nl_err_wrap(&err, "copy %zu bytes", n);
    finish(p, !i, err);
    nl_err_free(&err);
    return;
  }
  p->copied[i] += n;
  size_t q = to->ops->queued(to);
  if (q > p->max_queued[!i]) p->max_queued[!i] = q;
  if (q > p->high_water) set_reading(e, false);
}

void nl_pump_end_eof(nl_pump_end_t *e, nl_err_t *err) {
  nl_pump_t *p = e->pump;
  if (p->done) return;
  finish(p, side_of(e), err);
}

void nl_pump_end_drained(nl_pump_end_t *e) {
  nl_pump_t *p = e->pump;
  if (p->done) return;
  nl_pump_end_t *from = p->end[!side_of(e)];
  if (!from->reading && e->ops->queued(e) <= p->high_water / 2) set_reading(from, true);
}

/* ---- the uv stream end ----------------------------------------------------- */

typedef struct stream_write {
  uv_write_t req;
  nl_pump_stream_t *s;
  size_t n;
  char data[];
} stream_write_t;

#define STREAM_READ_SIZE (64 * 1024)

static void on_write(uv_write_t *req, int status) {
  stream_write_t *w = (stream_write_t *)req;
  nl_pump_stream_t *s = w->s;
  assert(s->queued >= w->n);
  s->queued -= w->n;
  free(w);
  if (status == UV_ECANCELED) return; /* closing: the pump may be gone */
  if (status < 0) {
    nl_err_t *err = NULL;
    nl_err_set(&err, -status, "write: %s", uv_strerror(status));
    nl_pump_end_eof(&s->end, err);
    nl_err_free(&err);
    return;
  }
  nl_pump_end_drained(&s->end);
}

static int stream_write(nl_pump_end_t *e, const char *p, size_t n, nl_err_t **err) {
  nl_pump_stream_t *s = (nl_pump_stream_t *)e;
  stream_write_t *w = nl_xmalloc(sizeof *w + n);
  w->s = s;
  w->n = n;
  memcpy(w->data, p, n);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
  int rc = uv_write(&w->req, s->stream, &b, 1, on_write);
  if (rc < 0) {
    free(w);
    return nl_err_set(err, -rc, "write: %s", uv_strerror(rc));
  }
  s->queued += n;
  return 0;
}

static size_t stream_queued(const nl_pump_end_t *e) { return ((const nl_pump_stream_t *)e)->queued; }

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)h;
  (void)hint;
  /* One buffer per read, released once its bytes are copied into a write. */
  *buf = uv_buf_init(nl_xmalloc(STREAM_READ_SIZE), STREAM_READ_SIZE);
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
  nl_pump_stream_t *s = stream->data;
  if (n > 0) nl_pump_end_data(&s->end, buf->base, (size_t)n);
  free(buf->base);
  if (n >= 0) return;
  nl_err_t *err = NULL;
  if (n != UV_EOF) nl_err_set(&err, (int)-n, "read: %s", uv_strerror((int)n));
  uv_read_stop(stream);
  nl_pump_end_eof(&s->end, err);
  nl_err_free(&err);
}

static void stream_set_reading(nl_pump_end_t *e, bool on) {
  nl_pump_stream_t *s = (nl_pump_stream_t *)e;
  if (uv_is_closing((uv_handle_t *)s->stream)) return;
  if (!on) {
    uv_read_stop(s->stream);
    return;
  }
  int rc = uv_read_start(s->stream, on_alloc, on_read);
  if (rc < 0) {
    nl_err_t *err = NULL;
    nl_err_set(&err, -rc, "read: %s", uv_strerror(rc));
    nl_pump_end_eof(e, err);
    nl_err_free(&err);
  }
}

static const nl_pump_end_ops_t stream_ops = {
    .write = stream_write,
    .queued = stream_queued,
    .set_reading = stream_set_reading,
};

void nl_pump_stream_init(nl_pump_stream_t *s, uv_stream_t *stream) {
  memset(s, 0, sizeof *s);
  s->end.ops = &stream_ops;
  s->stream = stream;
  stream->data = s;
}
