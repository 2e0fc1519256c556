#include "agent/kube/h2.h"

#include <string.h>

#include <nghttp2/nghttp2.h>

#include "reactor/xalloc.h"

static nl_kube_h2_stream_t *kube_stream(nl_h2_stream_t *h) {
  return container_of(h, nl_kube_h2_stream_t, h2);
}

static void stream_clear(nl_kube_h2_stream_t *st) {
  free(nl_steal(&st->content_type));
  free(nl_steal(&st->retry_after));
}

static void on_header(nl_h2_stream_t *h, const uint8_t *name, size_t namelen,
                      const uint8_t *value, size_t valuelen) {
  nl_kube_h2_stream_t *st = kube_stream(h);
  if (st->head_done) return; /* trailers */
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
}

/* The final head: a 1xx is followed by another, which nghttp2 files as
 * NGHTTP2_HCAT_HEADERS, as it does trailers. Any other status is final, as
 * for nghttp2 and Go ("001" too: the caller sees an odd status). */
static void on_headers(nl_h2_stream_t *h) {
  nl_kube_h2_stream_t *st = kube_stream(h);
  if (h->complete) st->complete = true;
  if (!st->head_done && st->status / 100 != 1) {
    st->head_done = true;
    if (h->head_only && st->status / 100 != 2) nl_h2_stream_want_body(h);
    if (st->on_head) st->on_head(st);
  }
}

static void on_data(nl_h2_stream_t *h, const uint8_t *data, size_t len) {
  nl_kube_h2_stream_t *st = kube_stream(h);
  if (st->on_data) st->on_data(st, data, len);
}

static void on_close(nl_h2_stream_t *h, uint32_t error_code, bool refused) {
  nl_kube_h2_stream_t *st = kube_stream(h);
  st->complete = h->complete;
  /* The head's fields stay readable during the callback. */
  char *ct = st->content_type, *ra = st->retry_after;
  st->on_close(st, error_code, refused);
  free(ct);
  free(ra);
}

static const nl_h2_stream_cbs_t stream_cbs = {
    .on_header = on_header, .on_headers = on_headers, .on_data = on_data, .on_close = on_close};

nl_h2_opts_t nl_kube_h2_opts(uint32_t window) {
  return (nl_h2_opts_t){.window = window, .head_only_streams = true};
}

void nl_kube_h2_forget(nl_kube_h2_t *s) {
  nl_h2_stream_t *h;
  while ((h = nl_h2_first_stream(s))) {
    nl_h2_stream_detach(h);
    stream_clear(kube_stream(h));
  }
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}

int nl_kube_h2_submit(nl_kube_h2_t *s, nl_kube_h2_stream_t *st, const char *method,
                      const char *path, const char *authority,
                      const nl_kube_h2_header_t *hdrs, size_t n_hdrs, const void *body,
                      size_t body_len) {
  if (nl_h2_free_streams(s) == 0) return NL_KUBE_H2_EBUSY;
  st->status = 0;
  st->content_type = st->retry_after = NULL;
  st->head_done = st->complete = false;
  st->h2.cbs = &stream_cbs;
  nghttp2_nv *nva = nl_xmalloc((4 + n_hdrs) * sizeof *nva);
  nva[0] = (nghttp2_nv)NV(":method", method);
  nva[1] = (nghttp2_nv)NV(":scheme", "https");
  nva[2] = (nghttp2_nv)NV(":path", path);
  nva[3] = (nghttp2_nv)NV(":authority", authority);
  for (size_t i = 0; i < n_hdrs; i++) nva[4 + i] = (nghttp2_nv)NV(hdrs[i].name, hdrs[i].value);
  int rc = nl_h2_submit(s, &st->h2, nva, 4 + n_hdrs, body, body_len);
  free(nva);
  return rc;
}

void nl_kube_h2_cancel(nl_kube_h2_stream_t *st) {
  if (!st->h2.session) return;
  nl_h2_stream_cancel(&st->h2);
  stream_clear(st);
}
