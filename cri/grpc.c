#include "cri/grpc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

/* PINGs awaiting their ACK when the owner defers ACKs; one more is
 * acknowledged at once, so a peer's PING flood costs no memory. */
#define NL_GRPC_MAX_UNACKED_PINGS 4

#ifndef NANOLET_VERSION
#define NANOLET_VERSION "dev"
#endif

struct nl_grpc_session {
  nghttp2_session *h2;
  nl_grpc_session_cbs_t cbs;
  void *user;
  char *authority;
  char *user_agent;
  size_t max_recv;
  nl_list_t streams; /* open streams with a caller attached */
  size_t nactive;    /* streams with a caller attached */
  size_t nopen;      /* streams nghttp2 holds open, cancelled ones included */
  /* The last stream looked up: a response's frames come together, and each
   * callback would otherwise search nghttp2's stream map again. */
  int32_t last_id;
  nl_grpc_stream_t *last_st;
  bool goaway;
  bool broken;
  uint8_t unacked[NL_GRPC_MAX_UNACKED_PINGS][8]; /* payloads of PINGs to acknowledge */
  size_t n_unacked;
};

/* ---- Status helpers ------------------------------------------------------- */

static const char *const code_names[] = {
    "OK",         "Canceled",          "Unknown",          "InvalidArgument",
    "DeadlineExceeded", "NotFound",    "AlreadyExists",    "PermissionDenied",
    "ResourceExhausted", "FailedPrecondition", "Aborted",  "OutOfRange",
    "Unimplemented", "Internal",       "Unavailable",      "DataLoss",
    "Unauthenticated",
};

const char *nl_grpc_code_name(int code) {
  if (code < 0 || code > NL_GRPC_UNAUTHENTICATED) return NULL;
  return code_names[code];
}

char *nl_grpc_status_format(const nl_grpc_status_t *st) {
  const char *name = nl_grpc_code_name(st->code);
  const char *msg = st->message ? st->message : "";
  if (name) return nl_xasprintf("rpc error: code = %s desc = %s", name, msg);
  return nl_xasprintf("rpc error: code = Code(%d) desc = %s", st->code, msg);
}

int nl_grpc_status_to_err(const nl_grpc_status_t *st, nl_err_t **err) {
  if (st->code == NL_GRPC_OK) return 0;
  nl_cleanup_free char *msg = nl_grpc_status_format(st);
  return nl_err_set(err, st->code, "%s", msg);
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

char *nl_grpc_percent_decode(const char *s, size_t len) {
  char *out = nl_xmalloc(len + 1);
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    int hi, lo;
    if (s[i] == '%' && i + 2 < len &&
        (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0) {
      out[o++] = (char)(hi << 4 | lo);
      i += 2;
    } else {
      out[o++] = s[i];
    }
  }
  out[o] = '\0';
  return out;
}

/* ---- Counting allocator ---------------------------------------------------- */

/* A 16-byte header keeps the size so frees can be counted (alignment kept). */
#define MEM_HDR 16

static void *mem_malloc(size_t n, void *ud) {
  nl_grpc_mem_t *m = ud;
  m->nallocs++;
  if (m->fail_at && m->nallocs == m->fail_at) {
    m->nfailed++;
    return NULL;
  }
  size_t *p = malloc(n + MEM_HDR);
  if (!p) return NULL;
  p[0] = n;
  m->in_use += n;
  if (m->in_use > m->peak) m->peak = m->in_use;
  return (char *)p + MEM_HDR;
}

static void mem_free(void *ptr, void *ud) {
  nl_grpc_mem_t *m = ud;
  if (!ptr) return;
  size_t *p = (size_t *)((char *)ptr - MEM_HDR);
  m->in_use -= p[0];
  free(p);
}

static void *mem_calloc(size_t nmemb, size_t size, void *ud) {
  if (size && nmemb > SIZE_MAX / size) return NULL;
  void *p = mem_malloc(nmemb * size, ud);
  if (p) memset(p, 0, nmemb * size);
  return p;
}

static void *mem_realloc(void *ptr, size_t n, void *ud) {
  nl_grpc_mem_t *m = ud;
  if (!ptr) return mem_malloc(n, ud);
  m->nallocs++;
  if (m->fail_at && m->nallocs == m->fail_at) {
    m->nfailed++;
    return NULL;
  }
  size_t *p = (size_t *)((char *)ptr - MEM_HDR);
  size_t old = p[0];
  size_t *q = realloc(p, n + MEM_HDR);
  if (!q) return NULL;
  q[0] = n;
  m->in_use = m->in_use - old + n;
  if (m->in_use > m->peak) m->peak = m->in_use;
  return (char *)q + MEM_HDR;
}

static void *pb_alloc(void *ud, size_t n) { return mem_malloc(n, ud); }
static void pb_free(void *ud, void *p) { mem_free(p, ud); }

void nl_grpc_mem_init(nl_grpc_mem_t *m) {
  memset(m, 0, sizeof *m);
  m->nghttp2 = (nghttp2_mem){m, mem_malloc, mem_free, mem_calloc, mem_realloc};
  m->protobuf = (ProtobufCAllocator){pb_alloc, pb_free, m};
}

/* ---- Framing -------------------------------------------------------------- */

size_t nl_grpc_frame_size(const ProtobufCMessage *msg) {
  return 5 + protobuf_c_message_get_packed_size(msg);
}

void nl_grpc_frame(const ProtobufCMessage *msg, uint8_t *buf) {
  size_t n = protobuf_c_message_pack(msg, buf + 5);
  buf[0] = 0; /* not compressed */
  buf[1] = (uint8_t)(n >> 24);
  buf[2] = (uint8_t)(n >> 16);
  buf[3] = (uint8_t)(n >> 8);
  buf[4] = (uint8_t)n;
}

/* ---- Streams -------------------------------------------------------------- */

static nl_grpc_stream_t *stream_of(nl_grpc_session_t *s, int32_t id) {
  if (id == s->last_id) return s->last_st;
  if (id <= 0) return NULL;
  s->last_id = id;
  s->last_st = nghttp2_session_get_stream_user_data(s->h2, id);
  return s->last_st;
}

static void stream_release(nl_grpc_stream_t *st) {
  free(st->rx);
  st->rx = NULL;
  free(st->grpc_message);
  st->grpc_message = NULL;
  free(st->local_message);
  st->local_message = NULL;
}

static void stream_detach(nl_grpc_session_t *s, nl_grpc_stream_t *st) {
  nl_list_remove(&st->link);
  if (st->id > 0) nghttp2_session_set_stream_user_data(s->h2, st->id, NULL);
  if (s->last_st == st) s->last_st = NULL;
  st->session = NULL;
  s->nactive--;
}

/* Fails the stream from our side (bad message, too large): the status is ours,
 * the peer gets RST_STREAM(CANCEL), the rest of its data is dropped. */
static void stream_fail(nl_grpc_session_t *s, nl_grpc_stream_t *st, int code, char *msg) {
  if (st->local_code) {
    free(msg);
    return;
  }
  st->local_code = code;
  st->local_message = msg;
  nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
}

static int http_to_grpc(int http) {
  switch (http) {
  case 400: return NL_GRPC_INTERNAL;
  case 401: return NL_GRPC_UNAUTHENTICATED;
  case 403: return NL_GRPC_PERMISSION_DENIED;
  case 404: return NL_GRPC_UNIMPLEMENTED;
  case 429: case 502: case 503: case 504: return NL_GRPC_UNAVAILABLE;
  default: return NL_GRPC_UNKNOWN;
  }
}

/* Ends st with its status and hands it back to the caller. */
static void stream_finish(nl_grpc_session_t *s, nl_grpc_stream_t *st, uint32_t error_code,
                          const char *reason) {
  int code;
  char *msg = NULL;
  bool refused = false;
  if (st->local_code) {
    code = st->local_code;
    msg = nl_steal(&st->local_message);
  } else if (reason) {
    code = NL_GRPC_UNAVAILABLE;
    msg = nl_xstrdup(reason);
    refused = !st->sent;
  } else if (st->grpc_status >= 0) {
    code = st->grpc_status;
    msg = nl_steal(&st->grpc_message);
    if (code == NL_GRPC_OK && (st->hdr_len || st->rx)) {
      code = NL_GRPC_INTERNAL;
      free(msg);
      msg = nl_xstrdup("unexpected EOF: incomplete message");
    }
  } else if (error_code != NGHTTP2_NO_ERROR) {
    refused = error_code == NGHTTP2_REFUSED_STREAM && !st->got_response;
    code = error_code == NGHTTP2_CANCEL           ? NL_GRPC_CANCELLED
           : error_code == NGHTTP2_REFUSED_STREAM ? NL_GRPC_UNAVAILABLE
                                                  : NL_GRPC_INTERNAL;
    msg = nl_xasprintf("stream terminated by RST_STREAM with error code: %s",
                       nghttp2_http2_strerror(error_code));
  } else if (st->http_status != 200 && st->http_status > 0) {
    code = http_to_grpc(st->http_status);
    msg = nl_xasprintf("unexpected HTTP status code received from server: %d",
                       st->http_status);
  } else {
    code = NL_GRPC_INTERNAL;
    msg = nl_xstrdup("server closed the stream without sending trailers");
  }
  stream_detach(s, st);
  stream_release(st);
  nl_grpc_status_t status = {code, msg ? msg : ""};
  st->on_close(st, &status, refused);
  free(msg);
}

static void deliver(nl_grpc_stream_t *st, const uint8_t *data, size_t len) {
  if (st->on_message) st->on_message(st, data, len);
}

/* Reassembles length-prefixed messages from DATA chunks. A message that lies
 * whole inside one chunk is delivered without a copy. */
static void stream_data(nl_grpc_session_t *s, nl_grpc_stream_t *st, const uint8_t *p,
                        size_t len) {
  while (len > 0 && !st->local_code && st->session) {
    if (st->hdr_len < 5) {
      size_t need = 5u - st->hdr_len, n = need < len ? need : len;
      memcpy(st->hdr + st->hdr_len, p, n);
      st->hdr_len += n;
      p += n;
      len -= n;
      if (st->hdr_len < 5) return;
      uint32_t mlen = (uint32_t)st->hdr[1] << 24 | (uint32_t)st->hdr[2] << 16 |
                      (uint32_t)st->hdr[3] << 8 | st->hdr[4];
      if (st->hdr[0] & 1) {
        stream_fail(s, st, NL_GRPC_INTERNAL,
                    nl_xstrdup("grpc: compressed flag set with identity or empty encoding"));
        return;
      }
      if (mlen > s->max_recv) {
        stream_fail(s, st, NL_GRPC_RESOURCE_EXHAUSTED,
                    nl_xasprintf("grpc: received message larger than max (%" PRIu32
                                 " vs. %zu)", mlen, s->max_recv));
        return;
      }
      if (len >= mlen) {
        st->hdr_len = 0;
        deliver(st, p, mlen);
        p += mlen;
        len -= mlen;
        continue;
      }
      st->rx = nl_xmalloc(mlen);
      st->rx_len = mlen;
      st->rx_off = 0;
    }
    size_t n = st->rx_len - st->rx_off < len ? st->rx_len - st->rx_off : len;
    memcpy(st->rx + st->rx_off, p, n);
    st->rx_off += n;
    p += n;
    len -= n;
    if (st->rx_off == st->rx_len) {
      uint8_t *m = nl_steal(&st->rx);
      st->hdr_len = 0;
      deliver(st, m, st->rx_len);
      free(m);
    }
  }
}

/* ---- nghttp2 callbacks ------------------------------------------------------ */

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  nl_grpc_stream_t *st = stream_of(user, frame->hd.stream_id);
  if (!st) return 0;
  st->got_response = true;
  if (namelen == 7 && !memcmp(name, ":status", 7)) {
    int v = 0;
    for (size_t i = 0; i < valuelen && i < 4; i++) v = v * 10 + (value[i] - '0');
    st->http_status = (int16_t)v;
  } else if (namelen == 11 && !memcmp(name, "grpc-status", 11)) {
    int v = 0;
    for (size_t i = 0; i < valuelen && i < 4; i++) {
      if (value[i] < '0' || value[i] > '9') {
        v = NL_GRPC_UNKNOWN;
        break;
      }
      v = v * 10 + (value[i] - '0');
    }
    st->grpc_status = (int16_t)v;
  } else if (namelen == 12 && !memcmp(name, "grpc-message", 12)) {
    free(st->grpc_message);
    st->grpc_message = nl_grpc_percent_decode((const char *)value, valuelen);
  }
  return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user) {
  nl_grpc_stream_t *st = stream_of(user, id);
  if (!st) return 0;
  st->got_response = true;
  stream_data(user, st, data, len);
  return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *user) {
  nl_grpc_session_t *s = user;
  s->nopen--;
  nl_grpc_stream_t *st = stream_of(user, id);
  if (st) stream_finish(s, st, error_code, NULL);
  return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  nl_grpc_session_t *s = user;
  if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK)) {
    if (s->cbs.ping_ack) s->cbs.ping_ack(s->user);
  } else if (frame->hd.type == NGHTTP2_PING) {
    if (!s->cbs.ping || s->n_unacked == NL_GRPC_MAX_UNACKED_PINGS)
      return nghttp2_submit_ping(h2, NGHTTP2_FLAG_ACK, frame->ping.opaque_data);
    memcpy(s->unacked[s->n_unacked++], frame->ping.opaque_data, 8);
    s->cbs.ping(s->user);
  } else if (frame->hd.type == NGHTTP2_GOAWAY) {
    s->goaway = true;
    if (s->cbs.goaway) s->cbs.goaway(s->user, frame->goaway.error_code);
  }
  return 0;
}

static int on_frame_send(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  nl_grpc_stream_t *st = stream_of(user, frame->hd.stream_id);
  if (st) st->sent = true;
  return 0;
}

static ssize_t read_request(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                            uint32_t *data_flags, nghttp2_data_source *source, void *user) {
  nl_grpc_stream_t *st = stream_of(user, id);
  if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  size_t n = st->req_len - st->req_off;
  if (n > length) n = length;
  memcpy(buf, st->req + st->req_off, n);
  st->req_off += n;
  if (st->req_off == st->req_len) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

/* ---- Session ---------------------------------------------------------------- */

nl_grpc_session_t *nl_grpc_session_new(const nl_grpc_session_opts_t *opts,
                                       const nl_grpc_session_cbs_t *cbs, void *user) {
  nl_grpc_session_opts_t o = opts ? *opts : (nl_grpc_session_opts_t){0};
  nl_grpc_session_t *s = nl_xcalloc(1, sizeof *s);
  s->cbs = *cbs;
  s->user = user;
  s->authority = nl_xstrdup(o.authority ? o.authority : "localhost");
  s->user_agent = o.user_agent ? nl_xstrdup(o.user_agent)
                               : nl_xstrdup("nanolet/" NANOLET_VERSION " grpc-c/nghttp2");
  s->max_recv = o.max_recv_msg_size ? o.max_recv_msg_size : 16 * 1024 * 1024;
  uint32_t window = o.window_size ? o.window_size : 32 * 1024 * 1024;
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
  /* Until the server's SETTINGS arrive we assume the RFC's suggested minimum. */
  nghttp2_option_set_peer_max_concurrent_streams(opt, 100);
  /* on_frame_recv acknowledges PINGs, at once or through cbs.ping. */
  nghttp2_option_set_no_auto_ping_ack(opt, 1);
  if (nghttp2_session_client_new3(&s->h2, cb, s, opt, o.mem ? &o.mem->nghttp2 : NULL))
    goto fail;
  nghttp2_option_del(opt);
  opt = NULL;
  nghttp2_session_callbacks_del(cb);
  cb = NULL;

  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window},
  };
  if (nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, iv, 2)) goto fail;
  /* A large ListContainers reply must not wait for WINDOW_UPDATEs. */
  if (nghttp2_session_set_local_window_size(s->h2, NGHTTP2_FLAG_NONE, 0, (int32_t)window))
    goto fail;
  return s;

fail:
  if (opt) nghttp2_option_del(opt);
  if (cb) nghttp2_session_callbacks_del(cb);
  if (s->h2) nghttp2_session_del(s->h2);
  free(s->authority);
  free(s->user_agent);
  free(s);
  return NULL;
}

void nl_grpc_session_free(nl_grpc_session_t *s, const char *reason) {
  if (!s) return;
  s->broken = true;
  while (!nl_list_empty(&s->streams)) {
    nl_grpc_stream_t *st = nl_list_entry(s->streams.next, nl_grpc_stream_t, link);
    stream_finish(s, st, NGHTTP2_NO_ERROR, reason ? reason : "transport is closing");
  }
  nghttp2_session_del(s->h2);
  free(s->authority);
  free(s->user_agent);
  free(s);
}

int nl_grpc_session_recv(nl_grpc_session_t *s, const uint8_t *data, size_t len) {
  if (s->broken) return NGHTTP2_ERR_EOF;
  ssize_t n = nghttp2_session_mem_recv(s->h2, data, len);
  if (n < 0) {
    s->broken = true;
    return (int)n;
  }
  return 0;
}

int nl_grpc_session_flush(nl_grpc_session_t *s) {
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

/* Formats the grpc-timeout value into out (at least 10 bytes) and returns
 * its length: at most 8 digits (gRPC over HTTP/2 spec), coarser units for long
 * ones. By hand: snprintf cost about 750 instructions, 4 % of a call. */
static size_t format_timeout(char *out, uint64_t ms) {
  char unit = 'm';
  uint64_t v = ms;
  if (v > 99999999) {
    unit = 'S';
    v = ms / 1000;
  }
  if (v > 99999999) {
    unit = 'M';
    v = ms / 60000;
  }
  if (v > 99999999) {
    unit = 'H';
    v = ms / 3600000 > 99999999 ? 99999999 : ms / 3600000;
  }
  char digits[8];
  size_t n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++) out[i] = digits[n - 1 - i];
  out[n] = unit;
  out[n + 1] = '\0';
  return n + 1;
}

#define NV(n, v, vlen, fl)                                                      \
  {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vlen),                       \
   NGHTTP2_NV_FLAG_NO_COPY_NAME | (fl)}
#define NVS(n, v) NV(n, v, sizeof(v) - 1, NGHTTP2_NV_FLAG_NO_COPY_VALUE)

int nl_grpc_session_submit(nl_grpc_session_t *s, nl_grpc_stream_t *st, const char *path,
                           const uint8_t *framed, size_t framed_len, uint64_t timeout_ms) {
  if (!nl_grpc_session_can_submit(s)) return NL_GRPC_EBUSY;
  st->session = s;
  st->req = framed;
  st->req_len = framed_len;
  st->req_off = 0;
  st->rx = NULL;
  st->rx_len = st->rx_off = 0;
  st->hdr_len = 0;
  st->http_status = 0;
  st->grpc_status = -1;
  st->grpc_message = NULL;
  st->local_code = 0;
  st->local_message = NULL;
  st->got_response = false;
  st->sent = false;
  /* Names, and values that live as long as the session or are static, are not
   * copied; the timeout value is (the stream may end before HEADERS go out). */
  nghttp2_nv nva[8] = {
      NVS(":method", "POST"),
      NVS(":scheme", "http"),
      NV(":path", path, strlen(path), NGHTTP2_NV_FLAG_NO_COPY_VALUE),
      NV(":authority", s->authority, strlen(s->authority), NGHTTP2_NV_FLAG_NO_COPY_VALUE),
      NVS("content-type", "application/grpc"),
      NVS("te", "trailers"),
      NV("user-agent", s->user_agent, strlen(s->user_agent), NGHTTP2_NV_FLAG_NO_COPY_VALUE),
  };
  size_t nnv = 7;
  if (timeout_ms > 0) {
    size_t tl = format_timeout(st->timeout, timeout_ms);
    nva[nnv++] = (nghttp2_nv)NV("grpc-timeout", st->timeout, tl, 0);
  }
  nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_request};
  int32_t id = nghttp2_submit_request(s->h2, NULL, nva, nnv, &prd, st);
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

void nl_grpc_stream_cancel(nl_grpc_stream_t *st) {
  nl_grpc_session_t *s = st->session;
  if (!s) return;
  nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
  stream_detach(s, st);
  stream_release(st);
}

int nl_grpc_session_ping(nl_grpc_session_t *s) {
  if (s->broken) return NGHTTP2_ERR_EOF;
  return nghttp2_submit_ping(s->h2, NGHTTP2_FLAG_NONE, NULL);
}

int nl_grpc_session_ack_pings(nl_grpc_session_t *s) {
  for (size_t i = 0; i < s->n_unacked; i++) {
    int rc = nghttp2_submit_ping(s->h2, NGHTTP2_FLAG_ACK, s->unacked[i]);
    if (rc) return rc;
  }
  s->n_unacked = 0;
  return 0;
}

bool nl_grpc_session_can_submit(const nl_grpc_session_t *s) {
  if (s->broken || s->goaway) return false;
  uint32_t max = nghttp2_session_get_remote_settings(s->h2,
                                                     NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return s->nopen < max;
}

size_t nl_grpc_session_active(const nl_grpc_session_t *s) { return s->nactive; }

bool nl_grpc_session_want_io(const nl_grpc_session_t *s) {
  return nghttp2_session_want_read(s->h2) || nghttp2_session_want_write(s->h2);
}
