#include "reactor/h2.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

/* PINGs held for a deferred ACK; one more is acknowledged at once, so a
 * peer's PING flood costs no memory. */
#define NL_H2_MAX_UNACKED_PINGS 4

struct nl_h2 {
  nghttp2_session *h2;
  nl_h2_cbs_t cbs;
  void *user;
  nl_list_t streams; /* open streams with an owner attached */
  size_t nactive;    /* streams with an owner attached */
  size_t nopen;      /* streams nghttp2 holds open, cancelled ones included */
  /* The last stream looked up: a response's frames come together, and each
   * callback would otherwise search nghttp2's stream map again. */
  int32_t last_id;
  nl_h2_stream_t *last_st;
  bool goaway;
  bool broken;
  bool stream_flow_control;
  bool head_only_streams;
  uint32_t window;   /* each stream's receive window */
  uint8_t unacked[NL_H2_MAX_UNACKED_PINGS][8]; /* payloads of PINGs to acknowledge */
  size_t n_unacked;
  /* server sessions */
  bool server;
  bool peer_settled;      /* the peer's first SETTINGS arrived */
  size_t max_header_list; /* a received header block over it resets its stream */
};

static nl_h2_stream_t *stream_of(nl_h2_t *s, int32_t id) {
  if (id == s->last_id) return s->last_st;
  if (id <= 0) return NULL;
  s->last_id = id;
  s->last_st = nghttp2_session_get_stream_user_data(s->h2, id);
  return s->last_st;
}

void nl_h2_stream_detach(nl_h2_stream_t *st) {
  nl_h2_t *s = st->session;
  if (!s) return;
  nl_list_remove(&st->link);
  if (st->id > 0) nghttp2_session_set_stream_user_data(s->h2, st->id, NULL);
  if (s->last_st == st) s->last_st = NULL;
  st->session = NULL;
  nl_buf_free(&st->out); /* a server stream's unsent answer */
  free(nl_steal(&st->trailers));
  st->ntrailers = 0;
  assert(s->nactive > 0);
  s->nactive--;
}

/* ---- nghttp2 callbacks ------------------------------------------------------ */

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  nl_h2_stream_t *st = stream_of(user, frame->hd.stream_id);
  if (!st) return 0;
  st->got_response = true;
  if (namelen == 7 && !memcmp(name, ":status", 7) && valuelen > 0 && value[0] != '1')
    st->final_head = true;
  if (st->cbs->on_header) st->cbs->on_header(st, name, namelen, value, valuelen);
  return 0;
}

static int open_window(nl_h2_t *s, nl_h2_stream_t *st) {
  return nghttp2_session_set_local_window_size(s->h2, NGHTTP2_FLAG_NONE, st->id,
                                               (int32_t)s->window);
}

/* A head_only stream whose final head came without the end of the stream:
 * the body the peer cannot send is not waited for. */
static void end_head_only(nl_h2_t *s, nl_h2_stream_t *st) {
  nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
  st->complete = true;
  nl_h2_stream_detach(st);
  st->cbs->on_close(st, NGHTTP2_NO_ERROR, false);
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user) {
  nl_h2_t *s = user;
  nl_h2_stream_t *st = stream_of(s, id);
  if (s->stream_flow_control) {
    /* The connection window is never held: one slow stream must not stop
     * the others. A stream nobody reads any more gives its bytes back too. */
    if (!st) return nghttp2_session_consume(h2, id, len) == 0 ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
    if (nghttp2_session_consume_connection(h2, len)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->held += len;
  }
  if (!st) return 0;
  st->got_response = true;
  if (st->cbs->on_data) st->cbs->on_data(st, data, len);
  return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *user) {
  nl_h2_t *s = user;
  assert(s->nopen > 0);
  s->nopen--;
  nl_h2_stream_t *st = stream_of(s, id);
  if (!st) return 0;
  bool refused = error_code == NGHTTP2_REFUSED_STREAM && !st->got_response;
  nl_h2_stream_detach(st);
  st->cbs->on_close(st, error_code, refused);
  return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  nl_h2_t *s = user;
  if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK))
    s->peer_settled = true;
  switch (frame->hd.type) {
  case NGHTTP2_DATA:
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) break;
    /* fall through */
  case NGHTTP2_HEADERS: {
    nl_h2_stream_t *st = stream_of(s, frame->hd.stream_id);
    if (!st) break;
    /* nghttp2's HTTP messaging checks have seen a final head first. */
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) st->complete = true;
    if (frame->hd.type != NGHTTP2_HEADERS) break;
    if (st->cbs->on_headers) st->cbs->on_headers(st);
    /* (unless the owner cancelled it from on_headers) */
    if (st->session && st->head_only && st->final_head && !st->complete && !st->want_body)
      end_head_only(s, st);
    break;
  }
  case NGHTTP2_PING:
    if (frame->hd.flags & NGHTTP2_FLAG_ACK) {
      if (s->cbs.ping_ack) s->cbs.ping_ack(s->user);
    } else if (!s->cbs.ping || s->n_unacked == NL_H2_MAX_UNACKED_PINGS) {
      return nghttp2_submit_ping(h2, NGHTTP2_FLAG_ACK, frame->ping.opaque_data);
    } else {
      memcpy(s->unacked[s->n_unacked++], frame->ping.opaque_data, 8);
      s->cbs.ping(s->user);
    }
    break;
  case NGHTTP2_GOAWAY:
    s->goaway = true;
    if (s->cbs.goaway)
      s->cbs.goaway(s->user, frame->goaway.error_code, frame->goaway.last_stream_id);
    break;
  }
  return 0;
}

static int on_frame_send(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  nl_h2_t *s = user;
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  nl_h2_stream_t *st = stream_of(s, frame->hd.stream_id);
  if (!st) return 0;
  st->sent = true;
  /* Not before: a WINDOW_UPDATE on a stream the peer has not seen opened is
   * a protocol error. */
  if (s->head_only_streams && !st->head_only && open_window(s, st))
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  return 0;
}

/* Looked up by id, not source->ptr: a cancelled stream's owner may be gone
 * while its DATA is still queued ahead of the RST_STREAM. */
static ssize_t read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *user) {
  nl_h2_stream_t *st = stream_of(user, id);
  if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  size_t n = st->body_len - st->body_off;
  if (n > length) n = length;
  memcpy(buf, st->body + st->body_off, n);
  st->body_off += n;
  if (st->body_off == st->body_len) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

/* ---- Session ---------------------------------------------------------------- */

nl_h2_t *nl_h2_new(const nl_h2_opts_t *opts, const nl_h2_cbs_t *cbs, void *user) {
  nl_h2_opts_t o = opts ? *opts : (nl_h2_opts_t){0};
  assert(cbs && cbs->write);
  uint32_t window = o.window ? o.window : 16u * 1024 * 1024;
  nl_h2_t *s = nl_xcalloc(1, sizeof *s);
  s->cbs = *cbs;
  s->user = user;
  s->stream_flow_control = o.stream_flow_control;
  s->head_only_streams = o.head_only_streams;
  s->window = window;
  nl_list_init(&s->streams);

  nghttp2_session_callbacks *cb = NULL;
  nghttp2_option *opt = NULL;
  if (nghttp2_session_callbacks_new(&cb)) goto fail;
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  if (nghttp2_option_new(&opt)) goto fail;
  /* Until the peer's SETTINGS arrive we assume the RFC's suggested minimum. */
  nghttp2_option_set_peer_max_concurrent_streams(opt, 100);
  /* on_frame_recv acknowledges PINGs, at once or through cbs.ping. */
  nghttp2_option_set_no_auto_ping_ack(opt, 1);
  if (o.stream_flow_control) nghttp2_option_set_no_auto_window_update(opt, 1);
  if (nghttp2_session_client_new3(&s->h2, cb, s, opt, o.mem)) goto fail;
  nghttp2_option_del(opt);
  opt = NULL;
  nghttp2_session_callbacks_del(cb);
  cb = NULL;

  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, o.head_only_streams ? 0 : window},
  };
  if (nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, iv, 2)) goto fail;
  /* A large answer (ListContainers, a watch's burst) must not wait for
   * WINDOW_UPDATEs: the connection window is as large as a stream's. */
  if (nghttp2_session_set_local_window_size(s->h2, NGHTTP2_FLAG_NONE, 0, (int32_t)window))
    goto fail;
  return s;

fail:
  if (opt) nghttp2_option_del(opt);
  if (cb) nghttp2_session_callbacks_del(cb);
  if (s->h2) nghttp2_session_del(s->h2);
  free(s);
  return NULL;
}

void nl_h2_free(nl_h2_t *s) {
  if (!s) return;
  s->broken = true;
  while (!nl_list_empty(&s->streams))
    nl_h2_stream_detach(nl_list_entry(s->streams.next, nl_h2_stream_t, link));
  nghttp2_session_del(s->h2);
  free(s);
}

int nl_h2_recv(nl_h2_t *s, const uint8_t *data, size_t len) {
  if (s->broken) return NGHTTP2_ERR_EOF;
  ssize_t n = nghttp2_session_mem_recv(s->h2, data, len);
  if (n < 0) {
    s->broken = true;
    return (int)n;
  }
  return 0;
}

int nl_h2_flush(nl_h2_t *s) {
  if (s->broken) return NGHTTP2_ERR_EOF;
  for (;;) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(s->h2, &data);
    if (n < 0) {
      s->broken = true;
      return (int)n;
    }
    if (n == 0) return 0;
    if (s->cbs.write(s->user, data, (size_t)n) < 0) {
      s->broken = true;
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
  }
}

int nl_h2_submit(nl_h2_t *s, nl_h2_stream_t *st, const nghttp2_nv *nva, size_t nnv,
                 const void *body, size_t body_len) {
  assert(st->cbs && st->cbs->on_close);
  assert(!st->head_only || s->head_only_streams);
  if (nl_h2_free_streams(s) == 0) return NL_H2_EBUSY;
  st->session = s;
  st->body = body;
  st->body_len = body_len;
  st->body_off = 0;
  st->held = 0;
  st->got_response = st->sent = st->complete = st->final_head = st->want_body = false;
  nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
  int32_t id = nghttp2_submit_request(s->h2, NULL, nva, nnv, body ? &prd : NULL, st);
  if (id < 0) {
    st->session = NULL;
    return id;
  }
  st->id = id;
  if (s->last_id == id) s->last_st = st;
  nl_list_insert_tail(&s->streams, &st->link);
  s->nactive++;
  s->nopen++;
  return 0;
}

void nl_h2_stream_reset(nl_h2_stream_t *st, uint32_t error_code) {
  if (!st->session) return;
  nghttp2_submit_rst_stream(st->session->h2, NGHTTP2_FLAG_NONE, st->id, error_code);
}

void nl_h2_stream_cancel(nl_h2_stream_t *st) {
  nl_h2_t *s = st->session;
  if (!s) return;
  nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
  nl_h2_stream_detach(st);
}

int nl_h2_stream_want_body(nl_h2_stream_t *st) {
  nl_h2_t *s = st->session;
  if (!s || !st->head_only || st->want_body) return 0;
  st->want_body = true;
  return open_window(s, st);
}

int nl_h2_stream_consume(nl_h2_stream_t *st, size_t n) {
  nl_h2_t *s = st->session;
  if (!s || !s->stream_flow_control) return 0;
  assert(n <= st->held);
  st->held -= n;
  return nghttp2_session_consume_stream(s->h2, st->id, n);
}

int nl_h2_ping(nl_h2_t *s) {
  if (s->broken) return NGHTTP2_ERR_EOF;
  return nghttp2_submit_ping(s->h2, NGHTTP2_FLAG_NONE, NULL);
}

int nl_h2_ack_pings(nl_h2_t *s) {
  for (size_t i = 0; i < s->n_unacked; i++) {
    int rc = nghttp2_submit_ping(s->h2, NGHTTP2_FLAG_ACK, s->unacked[i]);
    if (rc) return rc;
  }
  s->n_unacked = 0;
  return 0;
}

int nl_h2_goaway(nl_h2_t *s, uint32_t error_code) {
  if (s->broken) return NGHTTP2_ERR_EOF;
  s->goaway = true;
  return nghttp2_submit_goaway(s->h2, NGHTTP2_FLAG_NONE,
                               nghttp2_session_get_last_proc_stream_id(s->h2), error_code,
                               NULL, 0);
}

nl_h2_stream_t *nl_h2_first_stream(const nl_h2_t *s) {
  return nl_list_empty(&s->streams) ? NULL : nl_list_entry(s->streams.next, nl_h2_stream_t, link);
}

size_t nl_h2_active(const nl_h2_t *s) { return s->nactive; }

uint32_t nl_h2_max_streams(const nl_h2_t *s) {
  return nghttp2_session_get_remote_settings(s->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

size_t nl_h2_free_streams(const nl_h2_t *s) {
  if (s->broken || s->goaway) return 0;
  uint32_t max = nl_h2_max_streams(s);
  return s->nopen < max ? max - s->nopen : 0;
}

bool nl_h2_want_io(const nl_h2_t *s) {
  return nghttp2_session_want_read(s->h2) || nghttp2_session_want_write(s->h2);
}


/* ---- Server side ------------------------------------------------------------ */

#define NL_H2_SERVER_MAX_STREAMS 32
#define NL_H2_SERVER_MAX_HEADER_LIST (64 * 1024)

/* A request's HEADERS begin: a new stream for the owner to attach its own
 * to; or trailers on one it has. */
static int srv_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  nl_h2_t *s = user;
  int32_t id = frame->hd.stream_id;
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
    nl_h2_stream_t *st = stream_of(s, id);
    if (st) st->head_bytes = 0;
    return 0;
  }
  s->nopen++; /* nghttp2 has opened it: on_stream_close follows */
  nl_h2_stream_t *st = s->broken ? NULL : s->cbs.on_stream(s->user);
  if (!st) {
    s->last_id = id;
    s->last_st = NULL;
    return nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM) == 0
               ? 0
               : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  assert(st->cbs && st->cbs->on_close && !st->session);
  st->session = s;
  st->id = id;
  st->body = NULL;
  st->body_len = st->body_off = st->held = st->head_bytes = 0;
  st->out = (nl_buf_t)NL_BUF_INIT;
  st->trailers = NULL;
  st->ntrailers = 0;
  st->head_only = st->got_response = st->final_head = st->want_body = false;
  st->complete = st->responded = st->out_end = st->deferred = st->out_done = false;
  st->sent = true; /* the peer's own stream: it exists on both sides */
  nghttp2_session_set_stream_user_data(h2, id, st);
  s->last_id = id;
  s->last_st = st;
  nl_list_insert_tail(&s->streams, &st->link);
  s->nactive++;
  return 0;
}

/* The header list bound, then the header as on a client. */
static int srv_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                      size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                      void *user) {
  nl_h2_t *s = user;
  nl_h2_stream_t *st = stream_of(s, frame->hd.stream_id);
  if (!st || frame->hd.type != NGHTTP2_HEADERS) return 0;
  /* RFC 9113 6.5.2: name, value and 32 bytes of overhead per field. */
  st->head_bytes += namelen + valuelen + 32;
  if (st->head_bytes > s->max_header_list) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return on_header(h2, frame, name, namelen, value, valuelen, flags, user);
}

static int srv_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  nl_h2_t *s = user;
  int rv = on_frame_recv(h2, frame, user);
  if (rv) return rv;
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    /* (unless the owner let it go from on_headers) */
    nl_h2_stream_t *st = stream_of(s, frame->hd.stream_id);
    if (st && st->cbs->on_end) st->cbs->on_end(st);
  }
  return 0;
}

/* Our END_STREAM left: a peer still sending is told to stop. */
static int srv_frame_send(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  nl_h2_t *s = user;
  if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
      !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    return 0;
  nl_h2_stream_t *st = stream_of(s, frame->hd.stream_id);
  if (!st) return 0;
  st->out_done = true;
  if (!st->complete &&
      nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR) != 0)
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  return 0;
}

/* The answer's body from st->out; waits (DEFERRED) for more until the owner
 * ends it, then the trailers. Looked up by id: an owner that let its stream
 * go leaves nothing to send (the stream is reset). */
static ssize_t read_out(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *data_flags, nghttp2_data_source *source, void *user) {
  nl_h2_stream_t *st = stream_of(user, id);
  if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  size_t n = st->out.len < length ? st->out.len : length;
  if (n == 0 && !st->out_end) {
    st->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  memcpy(buf, st->out.data, n);
  nl_buf_consume(&st->out, n);
  if (st->out.len == 0 && st->out_end) {
    nl_buf_free(&st->out);
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    if (st->ntrailers) {
      *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      if (nghttp2_submit_trailer(h2, id, st->trailers, st->ntrailers) != 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
      free(nl_steal(&st->trailers));
      st->ntrailers = 0;
    }
  }
  return (ssize_t)n;
}

nl_h2_t *nl_h2_server_new(const nl_h2_opts_t *opts, const nl_h2_cbs_t *cbs, void *user) {
  nl_h2_opts_t o = opts ? *opts : (nl_h2_opts_t){0};
  assert(cbs && cbs->write && cbs->on_stream);
  assert(!o.head_only_streams);
  uint32_t window = o.window ? o.window : 16u * 1024 * 1024;
  nl_h2_t *s = nl_xcalloc(1, sizeof *s);
  s->cbs = *cbs;
  s->user = user;
  s->server = true;
  s->stream_flow_control = o.stream_flow_control;
  s->window = window;
  s->max_header_list = o.max_header_list ? o.max_header_list : NL_H2_SERVER_MAX_HEADER_LIST;
  uint32_t max_streams = o.max_streams ? o.max_streams : NL_H2_SERVER_MAX_STREAMS;
  nl_list_init(&s->streams);

  nghttp2_session_callbacks *cb = NULL;
  nghttp2_option *opt = NULL;
  if (nghttp2_session_callbacks_new(&cb)) goto fail;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, srv_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, srv_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_frame_recv);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, srv_frame_send);
  if (nghttp2_option_new(&opt)) goto fail;
  nghttp2_option_set_no_auto_ping_ack(opt, 1);
  if (o.stream_flow_control) nghttp2_option_set_no_auto_window_update(opt, 1);
  if (nghttp2_session_server_new3(&s->h2, cb, s, opt, o.mem)) goto fail;
  nghttp2_option_del(opt);
  opt = NULL;
  nghttp2_session_callbacks_del(cb);
  cb = NULL;

  /* (A server omits SETTINGS_ENABLE_PUSH: it is the client's to say.) */
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)s->max_header_list},
  };
  if (nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, iv, 3)) goto fail;
  if (nghttp2_session_set_local_window_size(s->h2, NGHTTP2_FLAG_NONE, 0, (int32_t)window))
    goto fail;
  return s;

fail:
  if (opt) nghttp2_option_del(opt);
  if (cb) nghttp2_session_callbacks_del(cb);
  if (s->h2) nghttp2_session_del(s->h2);
  free(s);
  return NULL;
}

bool nl_h2_peer_settled(const nl_h2_t *s) { return s->peer_settled; }

int nl_h2_respond(nl_h2_stream_t *st, const nghttp2_nv *nva, size_t nnv, bool end) {
  nl_h2_t *s = st->session;
  if (!s || !s->server || st->responded) return NGHTTP2_ERR_INVALID_STATE;
  st->responded = true;
  st->out_end = end;
  nghttp2_data_provider prd = {.source.ptr = NULL, .read_callback = read_out};
  return nghttp2_submit_response(s->h2, st->id, nva, nnv, end ? NULL : &prd);
}

int nl_h2_respond_data(nl_h2_stream_t *st, const void *data, size_t len) {
  nl_h2_t *s = st->session;
  if (!s || !st->responded || st->out_end) return NGHTTP2_ERR_INVALID_STATE;
  nl_buf_append(&st->out, data, len);
  if (!st->deferred || len == 0) return 0;
  st->deferred = false;
  return nghttp2_session_resume_data(s->h2, st->id);
}

/* One allocation for the copies of the fields and their bytes. */
static nghttp2_nv *nv_copy(const nghttp2_nv *nva, size_t n) {
  size_t bytes = n * sizeof *nva;
  for (size_t i = 0; i < n; i++) bytes += nva[i].namelen + nva[i].valuelen;
  nghttp2_nv *out = nl_xmalloc(bytes ? bytes : 1);
  uint8_t *p = (uint8_t *)(out + n);
  for (size_t i = 0; i < n; i++) {
    out[i] = nva[i];
    out[i].flags = NGHTTP2_NV_FLAG_NONE;
    memcpy(p, nva[i].name, nva[i].namelen);
    out[i].name = p;
    p += nva[i].namelen;
    memcpy(p, nva[i].value, nva[i].valuelen);
    out[i].value = p;
    p += nva[i].valuelen;
  }
  return out;
}

int nl_h2_respond_end(nl_h2_stream_t *st, const nghttp2_nv *trailers, size_t ntr) {
  nl_h2_t *s = st->session;
  if (!s || !st->responded || st->out_end) return NGHTTP2_ERR_INVALID_STATE;
  st->out_end = true;
  if (ntr) {
    st->trailers = nv_copy(trailers, ntr);
    st->ntrailers = ntr;
  }
  if (!st->deferred) return 0;
  st->deferred = false;
  return nghttp2_session_resume_data(s->h2, st->id);
}

size_t nl_h2_respond_queued(const nl_h2_stream_t *st) { return st->session ? st->out.len : 0; }
