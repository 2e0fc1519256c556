#include "cri/grpc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

#ifndef NANOLET_VERSION
#define NANOLET_VERSION "dev"
#endif

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

static nl_grpc_stream_t *grpc_stream(nl_h2_stream_t *h) {
  return container_of(h, nl_grpc_stream_t, h2);
}

static void stream_release(nl_grpc_stream_t *st) {
  free(nl_steal(&st->rx));
  free(nl_steal(&st->grpc_message));
  free(nl_steal(&st->local_message));
}

/* Fails the stream from our side (bad message, too large): the status is ours,
 * the peer gets RST_STREAM(CANCEL), the rest of its data is dropped. */
static void stream_fail(nl_grpc_stream_t *st, int code, char *msg) {
  if (st->local_code) {
    free(msg);
    return;
  }
  st->local_code = code;
  st->local_message = msg;
  nl_h2_stream_reset(&st->h2, NGHTTP2_CANCEL);
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

/* Ends st, which the HTTP/2 engine has already forgotten, with its status
 * and hands it back to the caller. reason: the session is going away. */
static void stream_finish(nl_grpc_stream_t *st, uint32_t error_code, bool refused,
                          const char *reason) {
  int code;
  char *msg = NULL;
  if (st->local_code) {
    code = st->local_code;
    msg = nl_steal(&st->local_message);
    refused = false;
  } else if (reason) {
    code = NL_GRPC_UNAVAILABLE;
    msg = nl_xstrdup(reason);
    refused = !st->h2.sent;
  } else if (st->grpc_status >= 0) {
    code = st->grpc_status;
    msg = nl_steal(&st->grpc_message);
    refused = false;
    if (code == NL_GRPC_OK && (st->hdr_len || st->rx)) {
      code = NL_GRPC_INTERNAL;
      free(msg);
      msg = nl_xstrdup("unexpected EOF: incomplete message");
    }
  } else if (error_code != NGHTTP2_NO_ERROR) {
    code = error_code == NGHTTP2_CANCEL           ? NL_GRPC_CANCELLED
           : error_code == NGHTTP2_REFUSED_STREAM ? NL_GRPC_UNAVAILABLE
                                                  : NL_GRPC_INTERNAL;
    msg = nl_xasprintf("stream terminated by RST_STREAM with error code: %s",
                       nghttp2_http2_strerror(error_code));
  } else if (st->http_status != 200 && st->http_status > 0) {
    code = http_to_grpc(st->http_status);
    msg = nl_xasprintf("unexpected HTTP status code received from server: %d",
                       st->http_status);
    refused = false;
  } else {
    code = NL_GRPC_INTERNAL;
    msg = nl_xstrdup("server closed the stream without sending trailers");
    refused = false;
  }
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
static void on_data(nl_h2_stream_t *h, const uint8_t *p, size_t len) {
  nl_grpc_stream_t *st = grpc_stream(h);
  size_t max_recv = st->channel->max_recv_msg_size ? st->channel->max_recv_msg_size
                                                   : NL_GRPC_DEFAULT_MAX_RECV;
  while (len > 0 && !st->local_code && st->h2.session) {
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
        stream_fail(st, NL_GRPC_INTERNAL,
                    nl_xstrdup("grpc: compressed flag set with identity or empty encoding"));
        return;
      }
      if (mlen > max_recv) {
        stream_fail(st, NL_GRPC_RESOURCE_EXHAUSTED,
                    nl_xasprintf("grpc: received message larger than max (%" PRIu32
                                 " vs. %zu)", mlen, max_recv));
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

static void on_header(nl_h2_stream_t *h, const uint8_t *name, size_t namelen,
                      const uint8_t *value, size_t valuelen) {
  nl_grpc_stream_t *st = grpc_stream(h);
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
}

static void on_close(nl_h2_stream_t *h, uint32_t error_code, bool refused) {
  stream_finish(grpc_stream(h), error_code, refused, NULL);
}

static const nl_h2_stream_cbs_t stream_cbs = {
    .on_header = on_header, .on_data = on_data, .on_close = on_close};

/* ---- On a session ------------------------------------------------------------ */

void nl_grpc_fail_streams(nl_h2_t *h2, const char *reason) {
  nl_h2_stream_t *h;
  while ((h = nl_h2_first_stream(h2))) {
    nl_h2_stream_detach(h);
    stream_finish(grpc_stream(h), NGHTTP2_NO_ERROR, false, reason ? reason : "transport is closing");
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

int nl_grpc_submit(nl_h2_t *h2, const nl_grpc_channel_t *ch, nl_grpc_stream_t *st,
                   const char *path, const uint8_t *framed, size_t framed_len,
                   uint64_t timeout_ms) {
  const char *authority = ch->authority ? ch->authority : "localhost";
  const char *user_agent = ch->user_agent ? ch->user_agent : "nanolet/" NANOLET_VERSION " grpc-c/nghttp2";
  st->rx = NULL;
  st->rx_len = st->rx_off = 0;
  st->hdr_len = 0;
  st->http_status = 0;
  st->grpc_status = -1;
  st->grpc_message = NULL;
  st->local_code = 0;
  st->local_message = NULL;
  st->h2.cbs = &stream_cbs;
  /* Names, and values that live as long as the session (the channel's) or are
   * static, are not copied; the timeout value is (the stream may end before
   * HEADERS go out). */
  nghttp2_nv nva[8] = {
      NVS(":method", "POST"),
      NVS(":scheme", "http"),
      NV(":path", path, strlen(path), NGHTTP2_NV_FLAG_NO_COPY_VALUE),
      NV(":authority", authority, strlen(authority), NGHTTP2_NV_FLAG_NO_COPY_VALUE),
      NVS("content-type", "application/grpc"),
      NVS("te", "trailers"),
      NV("user-agent", user_agent, strlen(user_agent), NGHTTP2_NV_FLAG_NO_COPY_VALUE),
  };
  size_t nnv = 7;
  if (timeout_ms > 0) {
    size_t tl = format_timeout(st->timeout, timeout_ms);
    nva[nnv++] = (nghttp2_nv)NV("grpc-timeout", st->timeout, tl, 0);
  }
  st->channel = ch;
  return nl_h2_submit(h2, &st->h2, nva, nnv, framed, framed_len);
}

void nl_grpc_stream_cancel(nl_grpc_stream_t *st) {
  if (!st->h2.session) return;
  nl_h2_stream_cancel(&st->h2);
  stream_release(st);
}
