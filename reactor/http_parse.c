#include "reactor/http_parse.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

#include "reactor/xalloc.h"

/* ---- header lists ------------------------------------------------------- */

void nl_http_headers_addn(nl_http_headers_t *h, const char *name, size_t nlen,
                          const char *value, size_t vlen) {
  if (h->n == h->cap) {
    h->cap = h->cap ? h->cap * 2 : 8;
    h->v = nl_xrealloc(h->v, h->cap * sizeof(*h->v));
  }
  h->v[h->n].name = nl_xstrndup(name, nlen);
  h->v[h->n].value = nl_xstrndup(value, vlen);
  h->n++;
}

void nl_http_headers_add(nl_http_headers_t *h, const char *name, const char *value) {
  nl_http_headers_addn(h, name, strlen(name), value, strlen(value));
}

const char *nl_http_headers_get(const nl_http_headers_t *h, const char *name) {
  for (size_t i = 0; i < h->n; i++)
    if (strcasecmp(h->v[i].name, name) == 0) return h->v[i].value;
  return NULL;
}

size_t nl_http_headers_del(nl_http_headers_t *h, const char *name) {
  size_t j = 0, removed = 0;
  for (size_t i = 0; i < h->n; i++) {
    if (strcasecmp(h->v[i].name, name) == 0) {
      free(h->v[i].name);
      free(h->v[i].value);
      removed++;
    } else {
      h->v[j++] = h->v[i];
    }
  }
  h->n = j;
  return removed;
}

void nl_http_headers_copy(nl_http_headers_t *dst, const nl_http_headers_t *src) {
  for (size_t i = 0; i < src->n; i++) nl_http_headers_add(dst, src->v[i].name, src->v[i].value);
}

void nl_http_headers_free(nl_http_headers_t *h) {
  for (size_t i = 0; i < h->n; i++) {
    free(h->v[i].name);
    free(h->v[i].value);
  }
  free(h->v);
  h->v = NULL;
  h->n = h->cap = 0;
}

/* ---- parser ------------------------------------------------------------- */

static nl_http_parser_t *P(llhttp_t *ll) { return container_of(ll, nl_http_parser_t, ll); }

static void msg_reset(nl_http_msg_t *m) {
  free(m->method);
  free(m->target);
  nl_http_headers_free(&m->headers);
  memset(m, 0, sizeof(*m));
  m->content_length = -1;
}

__attribute__((format(printf, 4, 0)))
static void vfail(nl_http_parser_t *p, int perr, int code, const char *fmt, va_list ap) {
  if (p->perr) return; /* the first cause wins */
  p->perr = perr;
  nl_err_setv(&p->err, code, fmt, ap);
}

static void fail(nl_http_parser_t *p, int perr, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(nl_http_parser_t *p, int perr, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(p, perr, code, fmt, ap);
  va_end(ap);
}

void nl_http_parser_fail(nl_http_parser_t *p, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(p, NL_HTTP_PERR_CALLBACK, code, fmt, ap);
  va_end(ap);
}

/* Counts head bytes as they arrive, so a peer cannot grow a header forever. */
static int head_grow(nl_http_parser_t *p, size_t n) {
  p->head_bytes += n;
  if (p->head_bytes > p->limits.max_head) {
    fail(p, NL_HTTP_PERR_HEAD_TOO_BIG, EMSGSIZE, "http: message head exceeds %zu bytes",
         p->limits.max_head);
    return -1;
  }
  return 0;
}

static int on_message_begin(llhttp_t *ll) {
  nl_http_parser_t *p = P(ll);
  msg_reset(&p->msg);
  nl_buf_reset(&p->url);
  nl_buf_reset(&p->field);
  nl_buf_reset(&p->value);
  p->head_bytes = 0;
  p->body_bytes = 0;
  p->in_head = true;
  p->in_message = true;
  return 0;
}

static int on_url(llhttp_t *ll, const char *at, size_t n) {
  nl_http_parser_t *p = P(ll);
  if (head_grow(p, n) < 0) return -1;
  nl_buf_append(&p->url, at, n);
  return 0;
}

static int on_status(llhttp_t *ll, const char *at, size_t n) { return head_grow(P(ll), n); }

static int on_header_field(llhttp_t *ll, const char *at, size_t n) {
  nl_http_parser_t *p = P(ll);
  if (head_grow(p, n) < 0) return -1;
  nl_buf_append(&p->field, at, n);
  return 0;
}

static int on_header_value(llhttp_t *ll, const char *at, size_t n) {
  nl_http_parser_t *p = P(ll);
  if (head_grow(p, n) < 0) return -1;
  nl_buf_append(&p->value, at, n);
  return 0;
}

static int on_header_value_complete(llhttp_t *ll) {
  nl_http_parser_t *p = P(ll);
  if (p->msg.headers.n >= p->limits.max_headers) {
    fail(p, NL_HTTP_PERR_HEAD_TOO_BIG, EMSGSIZE, "http: more than %zu headers",
         p->limits.max_headers);
    return -1;
  }
  /* Per-line overhead (": ", CRLF) counts too: many empty headers are not free. */
  if (head_grow(p, 4) < 0) return -1;
  size_t vlen = p->value.len;
  const char *v = p->value.data ? p->value.data : "";
  while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
  size_t skip = 0;
  while (skip < vlen && (v[skip] == ' ' || v[skip] == '\t')) skip++;
  nl_http_headers_addn(&p->msg.headers, p->field.data ? p->field.data : "", p->field.len,
                       v + skip, vlen - skip);
  nl_buf_reset(&p->field);
  nl_buf_reset(&p->value);
  return 0;
}

static int on_headers_complete(llhttp_t *ll) {
  nl_http_parser_t *p = P(ll);
  nl_http_msg_t *m = &p->msg;
  p->in_head = false;
  m->major = ll->http_major;
  m->minor = ll->http_minor;
  if (ll->type == HTTP_REQUEST) {
    m->method = nl_xstrdup(llhttp_method_name((llhttp_method_t)ll->method));
    m->target = nl_xstrndup(p->url.data ? p->url.data : "", p->url.len);
  } else {
    m->status = ll->status_code;
  }
  m->chunked = (ll->flags & F_CHUNKED) != 0;
  if (ll->flags & F_CONTENT_LENGTH) m->content_length = (int64_t)ll->content_length;
  m->upgrade = ll->upgrade;
  m->keep_alive = llhttp_should_keep_alive(ll); /* again at the end */
  if (p->limits.max_body && m->content_length > 0 &&
      (uint64_t)m->content_length > p->limits.max_body) {
    fail(p, NL_HTTP_PERR_BODY_TOO_BIG, EMSGSIZE,
         "http: body of %" PRId64 " bytes exceeds the limit of %" PRIu64, m->content_length,
         p->limits.max_body);
    return -1;
  }
  int rc = 0;
  if (p->cbs.on_head) {
    rc = p->cbs.on_head(p->ctx, m);
    if (rc < 0) {
      if (!p->perr) fail(p, NL_HTTP_PERR_CALLBACK, EPROTO, "http: message refused");
      return -1;
    }
  }
  if (rc == NL_HTTP_HEAD_PAUSE) {
    p->head_paused = true;
    return HPE_PAUSED;
  }
  return rc == 1 ? 1 : 0;
}

static int on_body(llhttp_t *ll, const char *at, size_t n) {
  nl_http_parser_t *p = P(ll);
  p->body_bytes += n;
  if (p->limits.max_body && p->body_bytes > p->limits.max_body) {
    fail(p, NL_HTTP_PERR_BODY_TOO_BIG, EMSGSIZE, "http: body exceeds the limit of %" PRIu64,
         p->limits.max_body);
    return -1;
  }
  if (p->cbs.on_body && p->cbs.on_body(p->ctx, at, n) < 0) {
    if (!p->perr) fail(p, NL_HTTP_PERR_CALLBACK, EPROTO, "http: body refused");
    return -1;
  }
  return 0;
}

static int on_message_complete(llhttp_t *ll) {
  nl_http_parser_t *p = P(ll);
  p->msg.keep_alive = llhttp_should_keep_alive(ll);
  p->completed = true;
  p->in_message = false;
  if (p->cbs.on_complete && p->cbs.on_complete(p->ctx, &p->msg) < 0) {
    if (!p->perr) fail(p, NL_HTTP_PERR_CALLBACK, EPROTO, "http: message refused");
    return -1;
  }
  /* One message at a time: the owner answers before the next is parsed. */
  return HPE_PAUSED;
}

void nl_http_parser_init(nl_http_parser_t *p, bool request, const nl_http_parser_limits_t *limits,
                         const nl_http_parser_cbs_t *cbs, void *ctx) {
  memset(p, 0, sizeof(*p));
  if (limits) p->limits = *limits;
  if (!p->limits.max_head) p->limits.max_head = NL_HTTP_DEFAULT_MAX_HEAD;
  if (!p->limits.max_headers) p->limits.max_headers = NL_HTTP_DEFAULT_MAX_HEADERS;
  if (cbs) p->cbs = *cbs;
  p->ctx = ctx;
  p->msg.content_length = -1;
  llhttp_settings_init(&p->settings);
  p->settings.on_message_begin = on_message_begin;
  p->settings.on_url = on_url;
  p->settings.on_status = on_status;
  p->settings.on_header_field = on_header_field;
  p->settings.on_header_value = on_header_value;
  p->settings.on_header_value_complete = on_header_value_complete;
  p->settings.on_headers_complete = on_headers_complete;
  p->settings.on_body = on_body;
  p->settings.on_message_complete = on_message_complete;
  llhttp_init(&p->ll, request ? HTTP_REQUEST : HTTP_RESPONSE, &p->settings);
}

void nl_http_parser_free(nl_http_parser_t *p) {
  msg_reset(&p->msg);
  nl_buf_free(&p->field);
  nl_buf_free(&p->value);
  nl_buf_free(&p->url);
  nl_err_free(&p->err);
}

static int failed(nl_http_parser_t *p, llhttp_errno_t e, nl_err_t **err) {
  if (!p->perr) {
    const char *reason = llhttp_get_error_reason(&p->ll);
    fail(p, NL_HTTP_PERR_SYNTAX, EPROTO, "http: malformed %s: %s (%s)",
         p->ll.type == HTTP_REQUEST ? "request" : "response", reason ? reason : "?",
         llhttp_errno_name(e));
  }
  if (err) nl_err_set(err, p->err->code, "%s", p->err->msg);
  return -1;
}

int nl_http_parser_feed(nl_http_parser_t *p, const char *data, size_t len, size_t *consumed,
                        nl_err_t **err) {
  *consumed = 0;
  if (p->perr) return failed(p, HPE_USER, err);
  if (p->completed || p->head_paused) {
    fail(p, NL_HTTP_PERR_CALLBACK, EINVAL, "http: fed before nl_http_parser_%s()",
         p->completed ? "next" : "resume");
    return failed(p, HPE_USER, err);
  }
  if (len == 0) return NL_HTTP_FEED_MORE;
  llhttp_errno_t e = llhttp_execute(&p->ll, data, len);
  if (e == HPE_OK) {
    *consumed = len;
    return NL_HTTP_FEED_MORE;
  }
  if ((e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) && (p->completed || p->head_paused)) {
    const char *pos = llhttp_get_error_pos(&p->ll);
    *consumed = pos && pos >= data && pos <= data + len ? (size_t)(pos - data) : len;
    if (!p->completed) return NL_HTTP_FEED_HEAD;
    if (e == HPE_PAUSED_UPGRADE) p->msg.upgrade = true;
    return NL_HTTP_FEED_DONE;
  }
  return failed(p, e, err);
}

int nl_http_parser_finish(nl_http_parser_t *p, nl_err_t **err) {
  if (p->perr) return failed(p, HPE_USER, err);
  if (p->completed || !p->in_message) return NL_HTTP_FEED_MORE;
  llhttp_errno_t e = llhttp_finish(&p->ll);
  if (p->completed) return NL_HTTP_FEED_DONE;
  if (e == HPE_OK && !nl_http_parser_busy(p)) return NL_HTTP_FEED_MORE;
  if (!p->perr)
    fail(p, NL_HTTP_PERR_SYNTAX, EPROTO, "http: connection closed before the %s was complete",
         p->ll.type == HTTP_REQUEST ? "request" : "response");
  return failed(p, e, err);
}

void nl_http_parser_resume(nl_http_parser_t *p) {
  assert(p->head_paused);
  p->head_paused = false;
  llhttp_resume(&p->ll);
}

void nl_http_parser_next(nl_http_parser_t *p) {
  msg_reset(&p->msg);
  if (p->completed) {
    p->completed = false;
    if (llhttp_get_errno(&p->ll) == HPE_PAUSED) llhttp_resume(&p->ll);
    else if (llhttp_get_errno(&p->ll) == HPE_PAUSED_UPGRADE) llhttp_resume_after_upgrade(&p->ll);
  }
}

bool nl_http_parser_busy(const nl_http_parser_t *p) {
  return p->in_message;
}

const char *nl_http_status_text(int status) {
  const char *s = NULL;
  switch (status) {
  case 100: s = "Continue"; break;
  case 101: s = "Switching Protocols"; break;
  case 200: s = "OK"; break;
  case 201: s = "Created"; break;
  case 202: s = "Accepted"; break;
  case 204: s = "No Content"; break;
  case 206: s = "Partial Content"; break;
  case 301: s = "Moved Permanently"; break;
  case 302: s = "Found"; break;
  case 303: s = "See Other"; break;
  case 304: s = "Not Modified"; break;
  case 307: s = "Temporary Redirect"; break;
  case 308: s = "Permanent Redirect"; break;
  case 400: s = "Bad Request"; break;
  case 401: s = "Unauthorized"; break;
  case 403: s = "Forbidden"; break;
  case 404: s = "Not Found"; break;
  case 405: s = "Method Not Allowed"; break;
  case 408: s = "Request Timeout"; break;
  case 409: s = "Conflict"; break;
  case 410: s = "Gone"; break;
  case 411: s = "Length Required"; break;
  case 413: s = "Request Entity Too Large"; break;
  case 414: s = "Request URI Too Long"; break;
  case 415: s = "Unsupported Media Type"; break;
  case 422: s = "Unprocessable Entity"; break;
  case 429: s = "Too Many Requests"; break;
  case 431: s = "Request Header Fields Too Large"; break;
  case 500: s = "Internal Server Error"; break;
  case 501: s = "Not Implemented"; break;
  case 502: s = "Bad Gateway"; break;
  case 503: s = "Service Unavailable"; break;
  case 504: s = "Gateway Timeout"; break;
  case 505: s = "HTTP Version Not Supported"; break;
  default: s = ""; break;
  }
  return s;
}
