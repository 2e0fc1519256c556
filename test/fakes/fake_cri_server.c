/* The fake CRI server's transport: a unix-socket listener, one nghttp2 server
 * session per connection, gRPC framing, and the faults applied per call. */
#include <string.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "reactor/buf.h"
#include "reactor/xalloc.h"
#include "test/fakes/fake_cri_int.h"

#define READ_BUF 65536
#define WRITE_CHUNK (256 * 1024)
#define MAX_WRITES 4                 /* uv_write requests in flight per connection */
#define MAX_REQUEST (32 * 1024 * 1024)

typedef struct conn {
  nl_list_t link;
  fake_cri_t *f;
  uv_pipe_t pipe;
  nghttp2_session *h2;
  nl_list_t streams;
  int writes;
  bool closing;      /* uv_close called */
  bool drop;         /* close once the current nghttp2 call has returned */
  bool poison;       /* write a malformed frame once nghttp2 has returned */
  bool poisoned;     /* malformed frame written: no more HTTP/2 either way */
  char rbuf[READ_BUF];
} conn_t;

typedef struct sstream {
  nl_list_t link;
  conn_t *conn; /* NULL once detached from its connection */
  fake_cri_t *f;
  int32_t id;
  char method[96];
  nl_buf_t body;
  bool dispatched, answered;
  bool has_timer;
  uv_timer_t timer;
  fake_cri_fault_t fault; /* fault.message owned */
  bool has_fault;
  uint8_t *out; /* framed response head (or all of it) */
  size_t out_len;
  size_t gen_len; /* bytes of filler after out (oversize replies) */
  size_t off;
  bool events;    /* a GetContainerEvents stream: out_len grows as events come */
  nl_list_t elink; /* in fake_cri_t.event_streams while events */
} sstream_t;

typedef struct wreq {
  uv_write_t req;
  conn_t *conn;
  size_t len;
  uint8_t data[];
} wreq_t;

static void conn_service(conn_t *c);
static void conn_close(conn_t *c);

/* ---- lifetime ------------------------------------------------------------ */

static void maybe_finish(fake_cri_t *f) {
  if (!f->stopping || f->open_handles > 0) return;
  fake_cri__faults_free(f);
  fake_cri__store_free(&f->store);
  unlink(f->path);
  free(f->path);
  fake_cri_stop_cb done = f->done;
  void *ctx = f->done_ctx;
  free(f);
  if (done) done(ctx);
}

static void stream_free(sstream_t *st) {
  nl_buf_free(&st->body);
  free(st->out);
  free((char *)st->fault.message);
  free(st);
}

static void timer_closed(uv_handle_t *h) {
  sstream_t *st = container_of((uv_timer_t *)h, sstream_t, timer);
  fake_cri_t *f = st->f;
  stream_free(st);
  f->open_handles--;
  maybe_finish(f);
}

/* Detaches st from its connection and frees it (after its timer has closed). */
static void stream_release(sstream_t *st) {
  if (st->events) nl_list_remove(&st->elink);
  st->events = false;
  if (st->conn) {
    nl_list_remove(&st->link);
    st->conn = NULL;
    st->f->stats.open_streams--;
    if (st->dispatched && !st->answered) st->f->stats.cancelled++;
  }
  if (st->has_timer)
    uv_close((uv_handle_t *)&st->timer, timer_closed);
  else
    stream_free(st);
}

static void conn_closed(uv_handle_t *h) {
  conn_t *c = container_of((uv_pipe_t *)h, conn_t, pipe);
  fake_cri_t *f = c->f;
  free(c);
  f->open_handles--;
  maybe_finish(f);
}

/* Never called from inside an nghttp2 callback (the session is deleted here). */
static void conn_close(conn_t *c) {
  if (c->closing) return;
  c->closing = true;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &c->streams) {
    sstream_t *st = nl_list_entry(pos, sstream_t, link);
    nghttp2_session_set_stream_user_data(c->h2, st->id, NULL);
    stream_release(st);
  }
  nghttp2_session_del(c->h2);
  c->h2 = NULL;
  nl_list_remove(&c->link);
  c->f->stats.open_conns--;
  uv_close((uv_handle_t *)&c->pipe, conn_closed);
}

/* ---- output ---------------------------------------------------------------- */

static void write_done(uv_write_t *req, int status) {
  wreq_t *w = container_of(req, wreq_t, req);
  conn_t *c = w->conn;
  free(w);
  c->writes--;
  if (c->closing) return;
  if (status < 0) {
    conn_close(c);
    return;
  }
  conn_service(c);
}

static void conn_write(conn_t *c, const void *data, size_t len) {
  wreq_t *w = nl_xmalloc(sizeof(*w) + len);
  w->conn = c;
  w->len = len;
  memcpy(w->data, data, len);
  uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)len);
  c->writes++;
  if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, write_done) < 0) {
    c->writes--;
    free(w);
    conn_close(c);
  }
}

/* Drains nghttp2's output into at most MAX_WRITES writes of WRITE_CHUNK bytes;
 * write_done() resumes, so an oversize reply never sits in memory whole. */
static int flush_h2(conn_t *c) {
  nl_buf_t b = NL_BUF_INIT;
  while (c->writes < MAX_WRITES) {
    const uint8_t *p;
    ssize_t n = nghttp2_session_mem_send(c->h2, &p);
    if (n < 0) {
      nl_buf_free(&b);
      return -1;
    }
    if (n > 0) nl_buf_append(&b, p, (size_t)n);
    if ((n == 0 && b.len > 0) || b.len >= WRITE_CHUNK) {
      conn_write(c, b.data, b.len);
      nl_buf_reset(&b);
      if (c->closing) break;
    }
    if (n == 0) break;
  }
  nl_buf_free(&b);
  return 0;
}

static void conn_service(conn_t *c) {
  if (c->closing || c->poisoned) return;
  if (c->drop) {
    conn_close(c);
    return;
  }
  if (flush_h2(c) < 0) {
    conn_close(c);
    return;
  }
  if (c->poison && !c->closing) {
    /* A DATA frame on stream 0: a connection error (RFC 9113 6.1). */
    static const uint8_t bad[] = {0, 0, 4, 0x0, 0x0, 0, 0, 0, 0, 'b', 'a', 'd', '!'};
    c->poisoned = true;
    conn_write(c, bad, sizeof(bad));
  }
}

/* ---- answers --------------------------------------------------------------- */

static void pct_encode(nl_buf_t *b, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p < 0x20 || *p > 0x7e || *p == '%')
      nl_buf_printf(b, "%%%02X", *p);
    else
      nl_buf_append(b, p, 1);
  }
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

/* Trailers-Only: the status in the response headers, no body. */
static void answer_status(sstream_t *st, int code, const char *msg) {
  char codebuf[16];
  snprintf(codebuf, sizeof(codebuf), "%d", code);
  nl_buf_t m = NL_BUF_INIT;
  pct_encode(&m, msg ? msg : "");
  nghttp2_nv hdrs[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                       NV("grpc-status", codebuf), NV("grpc-message", m.data ? m.data : "")};
  nghttp2_submit_response(st->conn->h2, st->id, hdrs, m.len ? 4 : 3, NULL);
  nl_buf_free(&m);
}

static ssize_t read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *user) {
  sstream_t *st = src->ptr;
  size_t total = st->out_len + st->gen_len;
  size_t n = total - st->off < len ? total - st->off : len;
  for (size_t i = 0; i < n; i++) {
    size_t o = st->off + i;
    buf[i] = o < st->out_len ? st->out[o] : 'x';
  }
  st->off += n;
  if (st->off == total) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    nghttp2_nv tr[] = {NV("grpc-status", "0")};
    if (nghttp2_submit_trailer(h2, id, tr, 1) != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return (ssize_t)n;
}

/* Takes ownership of msg (a protobuf message without the gRPC prefix). When
 * gen_len > 0 the message is declared that much longer and filled with 'x'. */
static void answer_data(sstream_t *st, uint8_t *msg, size_t len, size_t gen_len) {
  size_t mlen = len + gen_len;
  st->out = nl_xmalloc(len + 5);
  st->out[0] = 0;
  st->out[1] = (uint8_t)(mlen >> 24);
  st->out[2] = (uint8_t)(mlen >> 16);
  st->out[3] = (uint8_t)(mlen >> 8);
  st->out[4] = (uint8_t)mlen;
  memcpy(st->out + 5, msg, len);
  free(msg);
  st->out_len = len + 5;
  st->gen_len = gen_len;
  nghttp2_nv hdrs[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
  nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
  nghttp2_submit_response(st->conn->h2, st->id, hdrs, 2, &prd);
}

/* GetContainerEvents: a response whose DATA is each event's message as it
 * comes; the stream stays open until the client or the connection ends it. */
static ssize_t read_events(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len,
                           uint32_t *flags, nghttp2_data_source *src, void *user) {
  sstream_t *st = src->ptr;
  size_t n = st->out_len - st->off < len ? st->out_len - st->off : len;
  if (n == 0) return NGHTTP2_ERR_DEFERRED;
  memcpy(buf, st->out + st->off, n);
  st->off += n;
  return (ssize_t)n;
}

static void events_open(sstream_t *st) {
  st->events = true;
  nl_list_insert_tail(&st->f->event_streams, &st->elink);
  nghttp2_nv hdrs[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
  nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_events};
  nghttp2_submit_response(st->conn->h2, st->id, hdrs, 2, &prd);
}

static void events_flush(uv_timer_t *t) {
  fake_cri_t *f = container_of(t, fake_cri_t, event_timer);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &f->event_streams) {
    conn_t *c = nl_list_entry(pos, sstream_t, elink)->conn;
    if (c) conn_service(c); /* may close c and release its streams */
  }
}

/* The store's event: framed, queued on every open events stream. */
static void on_store_event(void *ctx, const uint8_t *msg, size_t len) {
  fake_cri_t *f = ctx;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &f->event_streams) {
    sstream_t *st = nl_list_entry(pos, sstream_t, elink);
    st->out = nl_xrealloc(st->out, st->out_len + len + 5);
    uint8_t *p = st->out + st->out_len;
    p[0] = 0;
    p[1] = (uint8_t)(len >> 24);
    p[2] = (uint8_t)(len >> 16);
    p[3] = (uint8_t)(len >> 8);
    p[4] = (uint8_t)len;
    memcpy(p + 5, msg, len);
    st->out_len += len + 5;
    nghttp2_session_resume_data(st->conn->h2, st->id);
    f->stats.events++;
  }
  /* Written on the next loop turn: a handler runs inside nghttp2's callbacks,
   * where its session must not send. */
  if (!nl_list_empty(&f->event_streams)) uv_timer_start(&f->event_timer, events_flush, 0, 0);
}

static void answer_call(sstream_t *st) {
  const uint8_t *b = (const uint8_t *)st->body.data;
  size_t len = st->body.len;
  if (len < 5 || b[0] != 0 ||
      ((size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4]) != len - 5) {
    answer_status(st, 13, "fake-cri: bad gRPC request framing");
    return;
  }
  uint8_t *resp = NULL;
  size_t resp_len = 0;
  char *msg = NULL;
  int code = fake_cri__handle(&st->f->store, st->method, b + 5, len - 5, &resp, &resp_len, &msg);
  if (code == 0)
    answer_data(st, resp, resp_len, 0);
  else
    answer_status(st, code, msg);
  free(msg);
}

/* Acts on a complete request (at once, or when its delay has passed). */
static void act(sstream_t *st) {
  conn_t *c = st->conn;
  fake_cri_fault_kind_t kind = st->has_fault ? st->fault.kind : FAKE_CRI_ANSWER;
  switch (kind) {
  case FAKE_CRI_ANSWER:
    if (!strcmp(st->method, "GetContainerEvents")) events_open(st);
    else answer_call(st);
    break;
  case FAKE_CRI_STATUS:
    answer_status(st, st->fault.code, st->fault.message);
    break;
  case FAKE_CRI_DROP:
    c->drop = true;
    return;
  case FAKE_CRI_MALFORMED:
    c->poison = true;
    return;
  case FAKE_CRI_BAD_MESSAGE: {
    /* Field 1, length-delimited, with a length far beyond the message. */
    static const uint8_t bad[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
    uint8_t *m = nl_xmalloc(sizeof(bad));
    memcpy(m, bad, sizeof(bad));
    answer_data(st, m, sizeof(bad), 0);
    break;
  }
  case FAKE_CRI_OVERSIZE: {
    /* A VersionResponse-shaped message: field 1 string of the remaining bytes. */
    size_t payload = FAKE_CRI_OVERSIZE_LEN - 5;
    uint8_t *m = nl_xmalloc(5);
    m[0] = 0x0a;
    m[1] = (uint8_t)(0x80 | (payload & 0x7f));
    m[2] = (uint8_t)(0x80 | ((payload >> 7) & 0x7f));
    m[3] = (uint8_t)(0x80 | ((payload >> 14) & 0x7f));
    m[4] = (uint8_t)((payload >> 21) & 0x7f);
    answer_data(st, m, 5, payload);
    break;
  }
  case FAKE_CRI_STALL:
    return;
  }
  st->answered = true;
  st->f->stats.answered++;
}

static void delay_done(uv_timer_t *t) {
  sstream_t *st = container_of(t, sstream_t, timer);
  conn_t *c = st->conn;
  if (!c) return;
  act(st);
  conn_service(c);
}

static void dispatch(sstream_t *st) {
  fake_cri_t *f = st->f;
  st->dispatched = true;
  f->stats.calls++;
  st->has_fault = fake_cri__fault_take(f, st->method, &st->fault);
  if (st->has_fault) f->stats.faults++;
  if (st->has_fault && st->fault.delay_ms > 0) {
    uv_timer_init(f->loop, &st->timer);
    st->has_timer = true;
    f->open_handles++;
    uv_timer_start(&st->timer, delay_done, st->fault.delay_ms, 0);
    return;
  }
  act(st);
}

/* ---- nghttp2 callbacks ------------------------------------------------------ */

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  conn_t *c = user;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  sstream_t *st = nl_xcalloc(1, sizeof(*st));
  st->conn = c;
  st->f = c->f;
  st->id = frame->hd.stream_id;
  nl_list_insert_tail(&c->streams, &st->link);
  c->f->stats.open_streams++;
  nghttp2_session_set_stream_user_data(h2, st->id, st);
  return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user) {
  sstream_t *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
  if (!st || namelen != 5 || memcmp(name, ":path", 5) != 0) return 0;
  const uint8_t *slash = value;
  for (size_t i = 0; i < valuelen; i++)
    if (value[i] == '/') slash = value + i + 1;
  size_t n = valuelen - (size_t)(slash - value);
  if (n >= sizeof(st->method)) n = sizeof(st->method) - 1;
  memcpy(st->method, slash, n);
  st->method[n] = 0;
  return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user) {
  sstream_t *st = nghttp2_session_get_stream_user_data(h2, id);
  if (!st) return 0;
  if (st->body.len + len > MAX_REQUEST)
    return nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
  nl_buf_append(&st->body, data, len);
  return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
      !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    return 0;
  sstream_t *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
  if (st && !st->dispatched) dispatch(st);
  return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *user) {
  sstream_t *st = nghttp2_session_get_stream_user_data(h2, id);
  if (st) {
    nghttp2_session_set_stream_user_data(h2, id, NULL);
    stream_release(st);
  }
  return 0;
}

/* ---- connections ------------------------------------------------------------ */

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  conn_t *c = container_of((uv_pipe_t *)h, conn_t, pipe);
  *buf = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  conn_t *c = container_of((uv_pipe_t *)s, conn_t, pipe);
  if (c->closing) return;
  if (n < 0) {
    conn_close(c);
    return;
  }
  if (n == 0 || c->poisoned) return;
  ssize_t rv = nghttp2_session_mem_recv(c->h2, (const uint8_t *)buf->base, (size_t)n);
  if (rv < 0) {
    conn_close(c);
    return;
  }
  conn_service(c);
}

static void on_connection(uv_stream_t *server, int status) {
  fake_cri_t *f = container_of((uv_pipe_t *)server, fake_cri_t, listener);
  if (status < 0 || f->stopping) return;
  conn_t *c = nl_xcalloc(1, sizeof(*c));
  c->f = f;
  nl_list_init(&c->streams);
  uv_pipe_init(f->loop, &c->pipe, 0);
  f->open_handles++;
  if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
    uv_close((uv_handle_t *)&c->pipe, conn_closed);
    return;
  }
  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  int rv = nghttp2_session_server_new(&c->h2, cbs, c);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) abort();
  /* Large windows, as grpc-go's BDP estimator ends up with: the fake should not
   * be the bottleneck of a benchmark. */
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16 * 1024 * 1024}};
  nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 1);
  nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, 64 * 1024 * 1024);
  nl_list_insert_tail(&f->conns, &c->link);
  f->stats.connections++;
  f->stats.open_conns++;
  uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb);
  conn_service(c);
}

/* ---- public ------------------------------------------------------------------ */

static void listener_failed_closed(uv_handle_t *h) {
  fake_cri_t *f = container_of((uv_pipe_t *)h, fake_cri_t, listener);
  free(f->path);
  free(f);
}

fake_cri_t *fake_cri_new(uv_loop_t *loop, const char *path, nl_err_t **err) {
  fake_cri_t *f = nl_xcalloc(1, sizeof(*f));
  f->loop = loop;
  f->path = nl_xstrdup(path);
  nl_list_init(&f->conns);
  nl_list_init(&f->event_streams);
  nl_map_init(&f->rules);
  fake_cri__store_init(&f->store);
  f->store.on_event = on_store_event;
  f->store.event_ctx = f;
  uv_pipe_init(loop, &f->listener, 0);
  f->listener.data = f;
  unlink(path);
  int rv = uv_pipe_bind(&f->listener, path);
  if (rv == 0) rv = uv_listen((uv_stream_t *)&f->listener, 512, on_connection);
  if (rv < 0) {
    nl_err_set(err, -rv, "fake-cri: listen on %s: %s", path, uv_strerror(rv));
    nl_map_free(&f->rules, NULL);
    fake_cri__store_free(&f->store);
    uv_close((uv_handle_t *)&f->listener, listener_failed_closed);
    return NULL;
  }
  uv_timer_init(loop, &f->event_timer);
  f->event_timer.data = f;
  f->open_handles = 2; /* the listener and the event timer */
  return f;
}

static void listener_closed(uv_handle_t *h) { /* the listener's or the event timer's */
  fake_cri_t *f = h->data;
  f->open_handles--;
  maybe_finish(f);
}

void fake_cri_stop(fake_cri_t *f, fake_cri_stop_cb done, void *ctx) {
  if (f->stopping) return;
  f->stopping = true;
  f->done = done;
  f->done_ctx = ctx;
  while (!nl_list_empty(&f->conns)) conn_close(nl_list_entry(f->conns.next, conn_t, link));
  uv_close((uv_handle_t *)&f->listener, listener_closed);
  uv_close((uv_handle_t *)&f->event_timer, listener_closed);
}

void fake_cri_set_cgroup_driver(fake_cri_t *f, const char *driver) {
  f->store.cgroup_driver = strcmp(driver, "systemd") == 0 ? 1 : 2;
}

void fake_cri_add_image(fake_cri_t *f, const char *ref) {
  fake_cri__store_add_image(&f->store, ref);
}

int fake_cri_add_container(fake_cri_t *f, const char *pod, const char *name, const char *image,
                           char *id, size_t id_len) {
  return fake_cri__store_add_container(&f->store, pod, name, image, false, id, id_len);
}

int fake_cri_add_kube_container(fake_cri_t *f, const char *pod, const char *name, const char *image,
                                char *id, size_t id_len) {
  return fake_cri__store_add_container(&f->store, pod, name, image, true, id, id_len);
}

int fake_cri_oom_kill(fake_cri_t *f, const char *id, uint64_t reason_after_ms) {
  return fake_cri__store_oom_kill(&f->store, id, reason_after_ms);
}

fake_cri_stats_t fake_cri_stats(const fake_cri_t *f) { return f->stats; }

size_t fake_cri_sandbox_count(const fake_cri_t *f) { return nl_map_size(&f->store.sandboxes); }

size_t fake_cri_container_count(const fake_cri_t *f) {
  return nl_map_size(&f->store.containers);
}

void fake_cri_set_pull_auth(fake_cri_t *f, const char *username, const char *password) {
  free(f->store.pull_auth);
  f->store.pull_auth = username ? nl_xasprintf("%s:%s", username, password) : NULL;
}

const char *fake_cri_pull_users(const fake_cri_t *f) {
  return f->store.pull_users ? f->store.pull_users : "";
}

void fake_cri_set_stream_base(fake_cri_t *f, const char *base) {
  free(f->store.stream_base);
  f->store.stream_base = base ? nl_xstrdup(base) : NULL;
}
