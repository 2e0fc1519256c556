#include "reactor/http_client.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <string.h>
#include <strings.h>

#include "reactor/buf.h"
#include "reactor/dial.h"
#include "reactor/io.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define DEFAULT_BODY_CAP (10 * 1024 * 1024)
#define MAX_RESPONSE_HEAD (64 * 1024)

typedef struct attempt attempt_t;

struct nl_http_call {
  uv_loop_t *loop;
  uv_timer_t timer; /* the timeout, then the deferred completion */
  attempt_t *att;  /* the connection in use */
  int live;        /* handles and requests still to come back */

  /* The request, copied. */
  char *method;
  nl_http_url_t url;
  char *url_str;
  nl_http_headers_t headers;
  char *host_override;
  char *body;
  size_t body_len;
  uint64_t timeout_ms;
  size_t body_cap;
  bool truncate_body;
  nl_tls_config_t *tls;
  char *server_name;
  int max_redirects;
  bool same_host_only;
  nl_http_head_fn on_head;
  nl_http_chunk_fn on_chunk;
  void *stream_ctx;
  nl_http_done_fn cb;
  void *ctx;

  nl_http_response_t resp;
  nl_buf_t body_buf;
  bool got_head;
  bool finished;  /* the result is decided */
  bool delivered; /* cb ran */
  nl_err_t *err;
};

struct attempt {
  nl_http_call_t *call; /* NULL once detached (closing) */
  nl_dial_t dial;       /* the connection (dial.io once connected) */
  nl_http_parser_t parser;
  bool redirecting; /* discard this response's body, then follow it */
  nl_http_url_t next; /* where a followed redirect goes */
  char *next_str;
};

static void call_maybe_free(nl_http_call_t *c);
static void start_attempt(nl_http_call_t *c);
static char *resolve_location(nl_http_call_t *c, const char *loc);

/* ---- URLs --------------------------------------------------------------- */

void nl_http_url_free(nl_http_url_t *u) {
  free(u->host);
  free(u->path);
  memset(u, 0, sizeof(*u));
}

int nl_http_url_parse(nl_http_url_t *u, const char *url, nl_err_t **err) {
  memset(u, 0, sizeof(*u));
  const char *p;
  if (strncasecmp(url, "http://", 7) == 0) {
    p = url + 7;
  } else if (strncasecmp(url, "https://", 8) == 0) {
    u->https = true;
    p = url + 8;
  } else {
    const char *colon = strstr(url, "://");
    if (colon)
      return nl_err_set(err, NL_EINVAL, "parse \"%s\": unsupported protocol scheme \"%.*s\"", url,
                        (int)(colon - url), url);
    return nl_err_set(err, NL_EINVAL, "parse \"%s\": not an absolute http or https URL", url);
  }
  size_t alen = strcspn(p, "/?#");
  const char *rest = p + alen;
  if (memchr(p, '@', alen))
    return nl_err_set(err, NL_EINVAL, "parse \"%s\": user information is not supported", url);
  const char *host = p, *port = NULL;
  size_t hlen;
  if (*p == '[') {
    const char *close = memchr(p, ']', alen);
    if (!close) return nl_err_set(err, NL_EINVAL, "parse \"%s\": missing ']' in host", url);
    host = p + 1;
    hlen = (size_t)(close - host);
    if (close + 1 < rest) {
      if (close[1] != ':') return nl_err_set(err, NL_EINVAL, "parse \"%s\": bad host", url);
      port = close + 2;
    }
  } else {
    const char *colon = memchr(p, ':', alen);
    hlen = colon ? (size_t)(colon - p) : alen;
    if (colon) port = colon + 1;
  }
  if (hlen == 0) return nl_err_set(err, NL_EINVAL, "parse \"%s\": missing host", url);
  u->port = u->https ? 443 : 80;
  if (port && port < rest) {
    int v = 0;
    for (const char *q = port; q < rest; q++) {
      if (!isdigit((unsigned char)*q) || v > 65535)
        return nl_err_set(err, NL_EINVAL, "parse \"%s\": invalid port \"%.*s\"", url,
                          (int)(rest - port), port);
      v = v * 10 + (*q - '0');
    }
    if (v < 1 || v > 65535)
      return nl_err_set(err, NL_EINVAL, "parse \"%s\": invalid port \"%.*s\"", url,
                        (int)(rest - port), port);
    u->port = v;
  }
  u->host = nl_xstrndup(host, hlen);
  for (char *h = u->host; *h; h++) *h = (char)tolower((unsigned char)*h);
  size_t plen = strcspn(rest, "#");
  for (size_t i = 0; i < plen; i++) {
    if ((unsigned char)rest[i] <= ' ' || rest[i] == 0x7f) {
      nl_http_url_free(u);
      return nl_err_set(err, NL_EINVAL, "parse \"%s\": invalid character in path", url);
    }
  }
  u->path = *rest == '/' ? nl_xstrndup(rest, plen) : nl_xasprintf("/%.*s", (int)plen, rest);
  return 0;
}

/* "host:port" as Go prints a dial address. */
static char *host_port(const char *host, int port) {
  return strchr(host, ':') ? nl_xasprintf("[%s]:%d", host, port) : nl_xasprintf("%s:%d", host, port);
}

/* ---- completion --------------------------------------------------------- */

/* Go's url.Error prefix: `Get "http://x/": `. */
static void wrap_op(nl_http_call_t *c, nl_err_t **err) {
  char op[16];
  snprintf(op, sizeof(op), "%s", c->method);
  for (char *p = op + 1; *p; p++) *p = (char)tolower((unsigned char)*p);
  nl_err_wrap(err, "%s \"%s\"", op, c->url_str);
}

static void attempt_closed(nl_dial_t *d) {
  attempt_t *a = d->data;
  nl_http_call_t *c = a->call;
  nl_http_parser_free(&a->parser);
  nl_http_url_free(&a->next);
  free(a->next_str);
  free(a);
  c->live--;
  call_maybe_free(c);
}

/* Detaches and closes the current connection; the attempt frees itself. */
static void attempt_drop(nl_http_call_t *c) {
  attempt_t *a = c->att;
  if (!a) return;
  c->att = NULL;
  /* Keep a->call for the close callback's bookkeeping, but mark it dead. */
  a->redirecting = false;
  nl_dial_close(&a->dial, attempt_closed);
}

static bool attempt_live(attempt_t *a) { return a->call && a->call->att == a && !a->call->finished; }

static void timer_closed(uv_handle_t *h) {
  nl_http_call_t *c = h->data;
  c->live--;
  call_maybe_free(c);
}

static void deliver(uv_timer_t *t) {
  nl_http_call_t *c = t->data;
  c->delivered = true;
  c->cb(c->ctx, c->err ? NULL : &c->resp, c->err);
  uv_close((uv_handle_t *)&c->timer, timer_closed);
}

/* Decides the result (err owned, NULL for success), closes what is open, and
 * delivers from the next loop iteration. */
static void finish(nl_http_call_t *c, nl_err_t *err) {
  if (c->finished) {
    nl_err_free(&err);
    return;
  }
  c->finished = true;
  c->err = err;
  if (err) {
    wrap_op(c, &c->err);
  } else if (!c->on_chunk) {
    nl_buf_puts(&c->body_buf, "");
    c->resp.body_len = c->body_buf.len;
    c->resp.body = nl_buf_steal(&c->body_buf);
  }
  if (!c->resp.url) c->resp.url = nl_xstrdup(c->url_str);
  attempt_drop(c);
  uv_timer_stop(&c->timer);
  uv_timer_start(&c->timer, deliver, 0, 0);
}

static void finish_errf(nl_http_call_t *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finish_errf(nl_http_call_t *c, int code, const char *fmt, ...) {
  nl_err_t *err = NULL;
  va_list ap;
  va_start(ap, fmt);
  nl_err_setv(&err, code, fmt, ap);
  va_end(ap);
  finish(c, err);
}

static void call_maybe_free(nl_http_call_t *c) {
  if (c->live > 0 || !c->delivered) return;
  free(c->method);
  nl_http_url_free(&c->url);
  free(c->url_str);
  nl_http_headers_free(&c->headers);
  free(c->host_override);
  free(c->body);
  nl_tls_config_unref(c->tls);
  free(c->server_name);
  nl_http_headers_free(&c->resp.headers);
  free(c->resp.body);
  free(c->resp.url);
  nl_buf_free(&c->body_buf);
  nl_err_free(&c->err);
  free(c);
}

void nl_http_cancel(nl_http_call_t *c) {
  if (c->finished) return;
  finish_errf(c, NL_ECLOSED, "request canceled");
}

static void on_timeout(uv_timer_t *t) {
  nl_http_call_t *c = t->data;
  finish_errf(c, NL_ETIMEOUT, "context deadline exceeded (Client.Timeout exceeded while %s)",
              c->got_head ? "reading body" : "awaiting headers");
}

/* ---- the response ------------------------------------------------------- */

static bool is_redirect(int s) { return s == 301 || s == 302 || s == 303 || s == 307 || s == 308; }

static void take_head(nl_http_call_t *c, nl_http_msg_t *m) {
  c->got_head = true;
  c->resp.status = m->status;
  nl_http_headers_free(&c->resp.headers);
  c->resp.headers = m->headers;
  memset(&m->headers, 0, sizeof(m->headers));
  free(c->resp.url);
  c->resp.url = nl_xstrdup(c->url_str);
}

static int on_resp_head(void *ctx, nl_http_msg_t *m) {
  attempt_t *a = ctx;
  nl_http_call_t *c = a->call;
  if (!attempt_live(a)) return -1;
  bool head_only = strcmp(c->method, "HEAD") == 0;
  if (m->status >= 100 && m->status < 200 && m->status != 101) {
    /* An interim response (100 Continue): the real one follows. */
    return 0;
  }
  const char *loc = nl_http_headers_get(&m->headers, "Location");
  if (c->max_redirects > 0 && is_redirect(m->status) && loc) {
    nl_cleanup_free char *next = resolve_location(c, loc);
    nl_cleanup_err nl_err_t *err = NULL;
    if (nl_http_url_parse(&a->next, next, &err) < 0) {
      finish_errf(c, NL_EINVAL, "failed to follow redirect: %s", nl_err_msg(err));
      return -1;
    }
    if (c->same_host_only && strcmp(a->next.host, c->url.host) != 0) {
      /* As Go's http.ErrUseLastResponse: this 3xx, body and all, is the answer. */
      nl_vlog(4, "http: not following redirect from %s to %s (another host)", c->url_str, next);
    } else {
      a->redirecting = true;
      a->next_str = nl_steal(&next);
      return head_only ? 1 : 0;
    }
  }
  take_head(c, m);
  if (c->on_chunk) {
    /* The head arrived: the timeout no longer applies to a stream. */
    uv_timer_stop(&c->timer);
    if (c->on_head) c->on_head(c->stream_ctx, &c->resp);
    if (!attempt_live(a)) return -1;
  }
  return head_only ? 1 : 0;
}

static int on_resp_body(void *ctx, const char *p, size_t n) {
  attempt_t *a = ctx;
  nl_http_call_t *c = a->call;
  if (!attempt_live(a)) return -1;
  if (a->redirecting || !c->got_head) return 0;
  if (c->on_chunk) {
    c->on_chunk(c->stream_ctx, p, n);
    return attempt_live(a) ? 0 : -1;
  }
  size_t room = c->body_cap - c->body_buf.len;
  if (n <= room) {
    nl_buf_append(&c->body_buf, p, n);
    return 0;
  }
  if (!c->truncate_body) {
    finish_errf(c, EMSGSIZE, "response body exceeds %zu bytes", c->body_cap);
    return -1;
  }
  nl_buf_append(&c->body_buf, p, room);
  c->resp.truncated = true;
  finish(c, NULL); /* no need to read the rest */
  return -1;
}

/* Resolves Location against the current URL (RFC 3986 reference forms, without
 * dot-segment removal). */
static char *resolve_location(nl_http_call_t *c, const char *loc) {
  if (strncasecmp(loc, "http://", 7) == 0 || strncasecmp(loc, "https://", 8) == 0)
    return nl_xstrdup(loc);
  const char *scheme = c->url.https ? "https" : "http";
  if (strncmp(loc, "//", 2) == 0) return nl_xasprintf("%s:%s", scheme, loc);
  nl_cleanup_free char *hp = NULL;
  int def = c->url.https ? 443 : 80;
  if (c->url.port == def) hp = strchr(c->url.host, ':') ? nl_xasprintf("[%s]", c->url.host) : nl_xstrdup(c->url.host);
  else hp = host_port(c->url.host, c->url.port);
  if (loc[0] == '/') return nl_xasprintf("%s://%s%s", scheme, hp, loc);
  size_t qpos = strcspn(c->url.path, "?");
  if (loc[0] == '?') return nl_xasprintf("%s://%s%.*s%s", scheme, hp, (int)qpos, c->url.path, loc);
  if (loc[0] == 0) return nl_xasprintf("%s://%s%s", scheme, hp, c->url.path);
  const char *slash = c->url.path;
  for (size_t i = 0; i < qpos; i++)
    if (c->url.path[i] == '/') slash = c->url.path + i;
  return nl_xasprintf("%s://%s%.*s/%s", scheme, hp, (int)(slash - c->url.path), c->url.path, loc);
}

static void follow_redirect(nl_http_call_t *c, attempt_t *a, nl_http_msg_t *m) {
  const char *loc = nl_http_headers_get(&m->headers, "Location");
  if (c->resp.redirects + 1 >= c->max_redirects) {
    finish_errf(c, EPROTO, "stopped after %d redirects", c->max_redirects);
    return;
  }
  nl_http_url_t u = a->next;
  memset(&a->next, 0, sizeof(a->next));
  char *next = nl_steal(&a->next_str);
  c->resp.redirects++;
  /* As Go: 301/302/303 turn a non-GET/HEAD request into a bodiless GET. */
  if ((m->status == 301 || m->status == 302 || m->status == 303) && strcmp(c->method, "GET") &&
      strcmp(c->method, "HEAD")) {
    free(c->method);
    c->method = nl_xstrdup("GET");
    free(c->body);
    c->body = NULL;
    c->body_len = 0;
  }
  bool relative = strncasecmp(loc, "http://", 7) && strncasecmp(loc, "https://", 8) && strncmp(loc, "//", 2);
  if (strcmp(u.host, c->url.host) != 0) {
    /* Credentials stay with their host. */
    nl_http_headers_del(&c->headers, "Authorization");
    nl_http_headers_del(&c->headers, "Cookie");
    nl_http_headers_del(&c->headers, "Www-Authenticate");
    free(c->server_name);
    c->server_name = NULL;
  }
  if (!relative) {
    /* Go keeps a custom Host only across relative redirects. */
    free(c->host_override);
    c->host_override = NULL;
  }
  nl_vlog(4, "http: following redirect %d from %s to %s", m->status, c->url_str, next);
  nl_http_url_free(&c->url);
  c->url = u;
  free(c->url_str);
  c->url_str = next;
  attempt_drop(c);
  start_attempt(c);
}

static int on_resp_complete(void *ctx, nl_http_msg_t *m) {
  attempt_t *a = ctx;
  nl_http_call_t *c = a->call;
  if (!attempt_live(a)) return -1;
  if (m->status >= 100 && m->status < 200 && m->status != 101) return 0; /* see on_resp_head */
  if (a->redirecting) follow_redirect(c, a, m);
  else finish(c, NULL);
  return 0;
}

static const nl_http_parser_cbs_t resp_cbs = {
    .on_head = on_resp_head, .on_body = on_resp_body, .on_complete = on_resp_complete};

static void io_data(nl_io_t *io, const char *p, size_t n) {
  attempt_t *a = container_of(io, attempt_t, dial.io);
  while (n > 0 && attempt_live(a)) {
    size_t used = 0;
    nl_cleanup_err nl_err_t *err = NULL;
    int rc = nl_http_parser_feed(&a->parser, p, n, &used, &err);
    if (rc < 0) {
      if (attempt_live(a)) finish(a->call, nl_steal(&err));
      return;
    }
    if (rc == NL_HTTP_FEED_DONE) nl_http_parser_next(&a->parser); /* an interim 1xx */
    p += used;
    n -= used;
  }
}

static void io_end(nl_io_t *io, nl_err_t *err) {
  attempt_t *a = container_of(io, attempt_t, dial.io);
  if (!attempt_live(a)) return;
  nl_http_call_t *c = a->call;
  if (err) {
    finish(c, nl_dial_io_error(&a->dial, err));
    return;
  }
  nl_cleanup_err nl_err_t *perr = NULL;
  int rc = nl_http_parser_finish(&a->parser, &perr);
  if (!attempt_live(a)) return; /* on_complete decided */
  if (rc == NL_HTTP_FEED_DONE) return;
  if (!c->got_head) finish_errf(c, EPROTO, "EOF"); /* Go says just that */
  else finish_errf(c, EPROTO, "unexpected EOF");
}

static void send_request(attempt_t *a) {
  nl_http_call_t *c = a->call;
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_printf(&b, "%s %s HTTP/1.1\r\n", c->method, c->url.path);
  if (c->host_override) {
    nl_buf_printf(&b, "Host: %s\r\n", c->host_override);
  } else {
    int def = c->url.https ? 443 : 80;
    bool v6 = strchr(c->url.host, ':') != NULL;
    if (c->url.port == def) nl_buf_printf(&b, "Host: %s%s%s\r\n", v6 ? "[" : "", c->url.host, v6 ? "]" : "");
    else nl_buf_printf(&b, "Host: %s%s%s:%d\r\n", v6 ? "[" : "", c->url.host, v6 ? "]" : "", c->url.port);
  }
  bool has_ua = false;
  for (size_t i = 0; i < c->headers.n; i++) {
    const nl_http_header_t *h = &c->headers.v[i];
    if (!strcasecmp(h->name, "User-Agent")) has_ua = true;
    nl_buf_printf(&b, "%s: %s\r\n", h->name, h->value);
  }
  if (!has_ua) nl_buf_puts(&b, "User-Agent: nanolet/" NANOLET_VERSION "\r\n");
  if (c->body_len > 0 || !strcmp(c->method, "POST") || !strcmp(c->method, "PUT") ||
      !strcmp(c->method, "PATCH"))
    nl_buf_printf(&b, "Content-Length: %zu\r\n", c->body_len);
  nl_buf_puts(&b, "Connection: close\r\n\r\n");
  if (c->body_len) nl_buf_append(&b, c->body, c->body_len);
  nl_cleanup_err nl_err_t *err = NULL;
  int rc = nl_io_write(&a->dial.io, b.data, b.len, &err);
  nl_buf_free(&b);
  if (rc < 0) finish_errf(c, err->code, "write tcp %s: %s", a->dial.peer, nl_err_msg(err));
}

static const nl_io_cbs_t attempt_io_cbs = {.on_data = io_data, .on_end = io_end};

static void on_dialed(nl_dial_t *d, const nl_err_t *err) {
  attempt_t *a = d->data;
  if (!attempt_live(a)) return;
  if (err) finish_errf(a->call, err->code, "%s", err->msg);
  else send_request(a);
}

static void start_attempt(nl_http_call_t *c) {
  if (c->url.https && !c->tls) {
    finish_errf(c, NL_EINVAL, "https needs a TLS configuration");
    return;
  }
  attempt_t *a = nl_xcalloc(1, sizeof(*a));
  a->call = c;
  nl_http_parser_limits_t lim = {.max_head = MAX_RESPONSE_HEAD};
  nl_http_parser_init(&a->parser, false, &lim, &resp_cbs, a);
  c->att = a;
  c->live++;
  a->dial.data = a;
  nl_dial_opts_t o = {.host = c->url.host, .port = c->url.port,
                      .tls = c->url.https ? c->tls : NULL, .server_name = c->server_name,
                      .io_cbs = &attempt_io_cbs};
  nl_dial_start(&a->dial, c->loop, &o, on_dialed);
}

nl_http_call_t *nl_http_request(uv_loop_t *loop, const nl_http_request_opts_t *o, nl_http_done_fn cb,
                                void *ctx) {
  nl_http_call_t *c = nl_xcalloc(1, sizeof(*c));
  c->loop = loop;
  c->cb = cb;
  c->ctx = ctx;
  c->method = nl_xstrdup(o->method ? o->method : "GET");
  c->url_str = nl_xstrdup(o->url ? o->url : "");
  for (size_t i = 0; i < o->n_headers; i++) {
    if (!strcasecmp(o->headers[i].name, "Host")) {
      free(c->host_override);
      c->host_override = nl_xstrdup(o->headers[i].value);
    } else {
      nl_http_headers_add(&c->headers, o->headers[i].name, o->headers[i].value);
    }
  }
  if (o->host) {
    free(c->host_override);
    c->host_override = nl_xstrdup(o->host);
  }
  if (o->body_len) {
    c->body = nl_xmalloc(o->body_len);
    memcpy(c->body, o->body, o->body_len);
    c->body_len = o->body_len;
  }
  c->timeout_ms = o->timeout_ms;
  c->body_cap = o->body_cap ? o->body_cap : DEFAULT_BODY_CAP;
  c->truncate_body = o->truncate_body;
  c->tls = o->tls ? nl_tls_config_ref(o->tls) : NULL;
  c->server_name = o->server_name ? nl_xstrdup(o->server_name) : NULL;
  c->max_redirects = o->max_redirects;
  c->same_host_only = o->redirect_same_host_only;
  c->on_head = o->on_head;
  c->on_chunk = o->on_chunk;
  c->stream_ctx = o->stream_ctx;
  if (uv_timer_init(loop, &c->timer) < 0) abort();
  c->timer.data = c;
  c->live = 1;
  nl_err_t *err = NULL;
  if (o->tls && nl_tls_config_is_server(o->tls)) {
    nl_err_set(&err, NL_EINVAL, "the TLS configuration is a server one");
    finish(c, err);
    return c;
  }
  if (nl_http_url_parse(&c->url, c->url_str, &err) < 0) {
    finish(c, err);
    return c;
  }
  if (c->timeout_ms) uv_timer_start(&c->timer, on_timeout, c->timeout_ms, 0);
  start_attempt(c);
  return c;
}
