#include "agent/kube/h2.h"

#include <string.h>

#include <nghttp2/nghttp2.h>

#include "reactor/xalloc.h"

struct nl_kube_h2 {
  nghttp2_session *h2;
  nl_kube_h2_cbs_t cbs;
  void *user;
  nl_list_t streams; /* open streams with a caller attached */
  size_t nactive;
  size_t nopen;      /* streams nghttp2 holds open, cancelled ones included */
  bool goaway;
  bool broken;
};

static nl_kube_h2_stream_t *stream_of(nl_kube_h2_t *s, int32_t id) {
  return id > 0 ? nghttp2_session_get_stream_user_data(s->h2, id) : NULL;
}

static void stream_detach(nl_kube_h2_stream_t *st) {
  nl_kube_h2_t *s = st->session;
  nl_list_remove(&st->link);
  nghttp2_session_set_stream_user_data(s->h2, st->id, NULL);
  st->session = NULL;
  s->nactive--;
}

static void stream_clear(nl_kube_h2_stream_t *st) {
  free(st->content_type);
  st->content_type = NULL;
  free(st->retry_after);
  st->retry_after = NULL;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  nl_kube_h2_stream_t *st = stream_of(user, frame->hd.stream_id);
  if (!st) return 0;
  st->got_response = true;
  if (st->head_done) return 0; /* trailers */
  /* nghttp2's HTTP messaging checks have validated :status (3 digits). */
  if (namelen == 7 && !memcmp(name, ":status", 7)) {
    int v = 0;
    for (size_t i = 0; i < valuelen; i++) v = v * 10 + (value[i] - '0');
    st->status = v;
  } else if (namelen == 12 && !memcmp(name, "content-type", 12)) {
    free(st->content_type);
    st->content_type = nl_xstrndup((const char *)value, valuelen);
  } else if (namelen == 11 && !memcmp(name, "retry-after", 11)) {
    free(st->retry_after);
    st->retry_after = nl_xstrndup((const char *)value, valuelen);
  }
  return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  nl_kube_h2_t *s = user;
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    nl_kube_h2_stream_t *st = stream_of(s, frame->hd.stream_id);
    /* nghttp2 has checked that a final head came first. */
    if (st) st->complete = true;
  }
  switch (frame->hd.type) {
  case NGHTTP2_HEADERS: {
    nl_kube_h2_stream_t *st = stream_of(s, frame->hd.stream_id);
    /* The final head: a 1xx is followed by another, which nghttp2 files as
     * NGHTTP2_HCAT_HEADERS, as it does trailers. Any other status is final,
     * as for nghttp2 and Go ("001" too: the caller sees an odd status). */
    if (st && !st->head_done && st->status / 100 != 1) {
      st->head_done = true;
      if (st->on_head) st->on_head(st);
    }
    break;
  }
  case NGHTTP2_PING:
    if ((frame->hd.flags & NGHTTP2_FLAG_ACK) && s->cbs.ping_ack) s->cbs.ping_ack(s->user);
    break;
  case NGHTTP2_GOAWAY:
    s->goaway = true;
    if (s->cbs.goaway)
      s->cbs.goaway(s->user, frame->goaway.error_code, frame->goaway.last_stream_id);
    break;
  }
  return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user) {
  nl_kube_h2_stream_t *st = stream_of(user, id);
  if (!st) return 0;
  st->got_response = true;
  if (st->on_data) st->on_data(st, data, len);
  return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *user) {
  nl_kube_h2_t *s = user;
  s->nopen--;
  nl_kube_h2_stream_t *st = stream_of(s, id);
  if (!st) return 0;
  bool refused = error_code == NGHTTP2_REFUSED_STREAM && !st->got_response;
  stream_detach(st);
  /* The head's fields stay readable during the callback. */
  char *ct = st->content_type, *ra = st->retry_after;
  st->on_close(st, error_code, refused);
  free(ct);
  free(ra);
  return 0;
}

static int on_frame_send(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  nl_kube_h2_stream_t *st = stream_of(user, frame->hd.stream_id);
  if (st) st->sent = true;
  return 0;
}

static ssize_t read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *user) {
  nl_kube_h2_stream_t *st = source->ptr;
  size_t n = st->body_len - st->body_off;
  if (n > length) n = length;
  memcpy(buf, st->body + st->body_off, n);
  st->body_off += n;
  if (st->body_off == st->body_len) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

nl_kube_h2_t *nl_kube_h2_new(uint32_t window, const nl_kube_h2_cbs_t *cbs, void *user) {
  nl_kube_h2_t *s = nl_xcalloc(1, sizeof *s);
  s->cbs = *cbs;
  s->user = user;
  nl_list_init(&s->streams);
  nghttp2_session_callbacks *cb = NULL;
  nghttp2_option *opt = NULL;
  if (nghttp2_session_callbacks_new(&cb)) goto fail;
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  if (nghttp2_option_new(&opt)) goto fail;
  /* Until the server's SETTINGS arrive: the RFC's suggested minimum. */
  nghttp2_option_set_peer_max_concurrent_streams(opt, 100);
  if (nghttp2_session_client_new2(&s->h2, cb, s, opt)) goto fail;
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  opt = NULL;
  cb = NULL;
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window},
  };
  if (nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, iv, 2)) goto fail;
  /* A watch's bursts must not wait for WINDOW_UPDATEs; nghttp2 sends them as
   * the data is consumed (on receipt). */
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

void nl_kube_h2_free(nl_kube_h2_t *s) {
  if (!s) return;
  while (!nl_list_empty(&s->streams)) {
    nl_kube_h2_stream_t *st = nl_list_entry(s->streams.next, nl_kube_h2_stream_t, link);
    stream_detach(st);
    stream_clear(st);
  }
  nghttp2_session_del(s->h2);
  free(s);
}

int nl_kube_h2_recv(nl_kube_h2_t *s, const uint8_t *data, size_t len) {
  if (s->broken) return NGHTTP2_ERR_EOF;
  ssize_t n = nghttp2_session_mem_recv(s->h2, data, len);
  if (n < 0) {
    s->broken = true;
    return (int)n;
  }
  return 0;
}

int nl_kube_h2_flush(nl_kube_h2_t *s) {
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

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}

int nl_kube_h2_submit(nl_kube_h2_t *s, nl_kube_h2_stream_t *st, const char *method,
                      const char *path, const char *authority,
                      const nl_kube_h2_header_t *hdrs, size_t n_hdrs, const void *body,
                      size_t body_len) {
  if (nl_kube_h2_free_streams(s) == 0) return NL_KUBE_H2_EBUSY;
  st->session = s;
  st->status = 0;
  st->content_type = st->retry_after = NULL;
  st->body = body;
  st->body_len = body_len;
  st->body_off = 0;
  st->got_response = st->head_done = st->complete = st->sent = false;
  nghttp2_nv *nva = nl_xmalloc((4 + n_hdrs) * sizeof *nva);
  nva[0] = (nghttp2_nv)NV(":method", method);
  nva[1] = (nghttp2_nv)NV(":scheme", "https");
  nva[2] = (nghttp2_nv)NV(":path", path);
  nva[3] = (nghttp2_nv)NV(":authority", authority);
  for (size_t i = 0; i < n_hdrs; i++) nva[4 + i] = (nghttp2_nv)NV(hdrs[i].name, hdrs[i].value);
  nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
  int32_t id = nghttp2_submit_request(s->h2, NULL, nva, 4 + n_hdrs, body ? &prd : NULL, st);
  free(nva);
  if (id < 0) {
    st->session = NULL;
    return id;
  }
  st->id = id;
  nl_list_insert_tail(&s->streams, &st->link);
  s->nactive++;
  s->nopen++;
  return 0;
}

void nl_kube_h2_cancel(nl_kube_h2_stream_t *st) {
  nl_kube_h2_t *s = st->session;
  if (!s) return;
  nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
  stream_detach(st);
  stream_clear(st);
}

int nl_kube_h2_ping(nl_kube_h2_t *s) {
  if (s->broken) return NGHTTP2_ERR_EOF;
  return nghttp2_submit_ping(s->h2, NGHTTP2_FLAG_NONE, NULL);
}

size_t nl_kube_h2_active(const nl_kube_h2_t *s) { return s->nactive; }

uint32_t nl_kube_h2_max_streams(const nl_kube_h2_t *s) {
  return nghttp2_session_get_remote_settings(s->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

size_t nl_kube_h2_free_streams(const nl_kube_h2_t *s) {
  if (s->broken || s->goaway) return 0;
  uint32_t max = nl_kube_h2_max_streams(s);
  return s->nopen < max ? max - s->nopen : 0;
}
