#include "reactor/dial.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

static void connect_next(nl_dial_t *d);
static void fail_later(nl_dial_t *d, nl_err_t *err);

static const char *net_of(const nl_dial_t *d) { return d->unix_path ? "unix" : "tcp"; }

static void maybe_closed(nl_dial_t *d) {
  if (!d->closing || d->live > 0) return;
  if (d->ai) uv_freeaddrinfo(d->ai);
  d->ai = d->ai_next = NULL;
  free(d->host);
  free(d->unix_path);
  free(d->server_name);
  nl_tls_config_unref(d->tls);
  d->host = d->unix_path = d->server_name = NULL;
  d->tls = NULL;
  d->closed(d);
}

/* The outcome, once; what is still open stays until nl_dial_close(). */
static void finish(nl_dial_t *d, nl_err_t *err) {
  if (d->done) {
    nl_err_free(&err);
    return;
  }
  d->done = true;
  uv_timer_stop(&d->timer);
  if (err && d->gai_pending) uv_cancel((uv_req_t *)&d->gai);
  d->cb(d, err);
  nl_err_free(&err);
}

nl_err_t *nl_dial_io_error(const nl_dial_t *d, const nl_err_t *err) {
  if (!err) return NULL;
  nl_err_t *e = NULL;
  if (!strncmp(err->msg, "read: ", 6) || !strncmp(err->msg, "write: ", 7))
    nl_err_set(&e, err->code, "%s %s %s: %s", err->msg[0] == 'r' ? "read" : "write", net_of(d),
               d->peer, strchr(err->msg, ':') + 2);
  else
    nl_err_set(&e, err->code, "%s", err->msg);
  return e;
}

/* ---- the stream, until connected ------------------------------------------ */

static void io_ready(nl_io_t *io) {
  nl_dial_t *d = container_of(io, nl_dial_t, io);
  if (!d->closing) finish(d, NULL);
}

static void io_data(nl_io_t *io, const char *p, size_t n) {
  nl_dial_t *d = container_of(io, nl_dial_t, io);
  if (d->done && !d->closing) d->io_cbs->on_data(io, p, n);
}

static void io_end(nl_io_t *io, nl_err_t *err) {
  nl_dial_t *d = container_of(io, nl_dial_t, io);
  if (d->closing) return;
  if (d->done) {
    d->io_cbs->on_end(io, err);
    return;
  }
  /* The TLS handshake failed, or the peer hung up during it. */
  nl_err_t *e = nl_dial_io_error(d, err);
  finish(d, e ? e : nl_err_newf(ECONNRESET, "EOF"));
}

static void io_drain(nl_io_t *io) {
  nl_dial_t *d = container_of(io, nl_dial_t, io);
  if (d->done && !d->closing && d->io_cbs->on_drain) d->io_cbs->on_drain(io);
}

static const nl_io_cbs_t dial_io_cbs = {
    .on_ready = io_ready, .on_data = io_data, .on_end = io_end, .on_drain = io_drain};

static void io_closed(uv_handle_t *h) {
  nl_dial_t *d = h->data;
  nl_io_release(&d->io);
  d->io_open = false;
  d->live--;
  if (!d->closing && !d->done && d->ai_next) {
    connect_next(d); /* the previous address failed */
    return;
  }
  maybe_closed(d);
}

static void on_connect(uv_connect_t *req, int status) {
  nl_dial_t *d = req->data;
  if (d->closing || d->done) return;
  if (status < 0) {
    if (d->ai_next) {
      nl_vlog(4, "dial %s %s: %s, trying the next address", net_of(d), d->peer,
              uv_strerror(status));
      nl_io_close(&d->io, io_closed); /* its close callback goes on */
      return;
    }
    finish(d, nl_err_newf(-status, "dial %s %s: connect: %s", net_of(d), d->peer,
                           uv_strerror(status)));
    return;
  }
  if (d->raw) {
    finish(d, NULL);
    return;
  }
  if (d->tls) nl_io_set_tls(&d->io, nl_tls_new(d->tls, d->server_name ? d->server_name
                                                                             : d->host));
  nl_err_t *err = NULL;
  if (nl_io_start(&d->io, &err) < 0) {
    finish(d, err);
    return;
  }
  if (!d->tls) finish(d, NULL);
}

static void open_io(nl_dial_t *d) {
  int rc = d->unix_path ? nl_io_init_pipe(&d->io, d->loop, &dial_io_cbs)
                        : nl_io_init(&d->io, d->loop, &dial_io_cbs);
  if (rc < 0) abort(); /* only fails for a bad loop or out of memory */
  d->io.tcp.data = d;
  d->io_open = true;
  d->live++;
  d->connect.data = d;
}

static void connect_to(nl_dial_t *d, const struct sockaddr *sa) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    uv_ip4_name((const struct sockaddr_in *)sa, ip, sizeof ip);
    snprintf(d->peer, sizeof d->peer, "%s:%d", ip, d->port);
  } else {
    uv_ip6_name((const struct sockaddr_in6 *)sa, ip, sizeof ip);
    snprintf(d->peer, sizeof d->peer, "[%s]:%d", ip, d->port);
  }
  open_io(d);
  int rc = uv_tcp_connect(&d->connect, &d->io.tcp, sa, on_connect);
  if (rc < 0) {
    fail_later(d, nl_err_newf(-rc, "dial tcp %s: connect: %s", d->peer, uv_strerror(rc)));
  }
}

static void connect_next(nl_dial_t *d) {
  struct addrinfo *ai = d->ai_next;
  d->ai_next = ai->ai_next;
  union {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
  } addr;
  memset(&addr, 0, sizeof addr);
  memcpy(&addr, ai->ai_addr, ai->ai_addrlen < sizeof addr ? ai->ai_addrlen : sizeof addr);
  if (addr.sa.sa_family == AF_INET) addr.in.sin_port = htons((uint16_t)d->port);
  else addr.in6.sin6_port = htons((uint16_t)d->port);
  connect_to(d, &addr.sa);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  nl_dial_t *d = req->data;
  d->gai_pending = false;
  d->live--;
  if (d->closing || d->done) {
    if (res) uv_freeaddrinfo(res);
    maybe_closed(d);
    return;
  }
  if (status < 0 || !res) {
    if (res) uv_freeaddrinfo(res);
    finish(d, nl_err_newf(EHOSTUNREACH, "dial tcp: lookup %s: %s", d->host,
                          status == UV_EAI_NONAME ? "no such host" : uv_strerror(status)));
    return;
  }
  d->ai = d->ai_next = res;
  connect_next(d);
}

static void on_deadline(uv_timer_t *t) {
  nl_dial_t *d = container_of(t, nl_dial_t, timer);
  if (d->io_open && d->io.tls)
    finish(d, nl_err_newf(NL_ETIMEOUT, "net/http: TLS handshake timeout"));
  else if (d->peer[0])
    finish(d, nl_err_newf(NL_ETIMEOUT, "dial %s %s: i/o timeout", net_of(d), d->peer));
  else
    finish(d, nl_err_newf(NL_ETIMEOUT, "dial tcp: lookup %s: i/o timeout", d->host));
}

static void timer_closed(uv_handle_t *h) {
  nl_dial_t *d = container_of((uv_timer_t *)h, nl_dial_t, timer);
  d->live--;
  maybe_closed(d);
}

static void deliver_later(uv_timer_t *t) {
  nl_dial_t *d = container_of(t, nl_dial_t, timer);
  finish(d, nl_steal(&d->later));
}

/* A failure found while starting: reported from the loop, so that the
 * callback never runs from inside nl_dial_start(). */
static void fail_later(nl_dial_t *d, nl_err_t *err) {
  if (d->later || d->done) {
    nl_err_free(&err);
    return;
  }
  d->later = err;
  uv_timer_start(&d->timer, deliver_later, 0, 0);
}

void nl_dial_start(nl_dial_t *d, uv_loop_t *loop, const nl_dial_opts_t *o, nl_dial_cb cb) {
  void *data = d->data;
  memset(d, 0, sizeof *d);
  d->data = data;
  d->loop = loop;
  d->cb = cb;
  d->io_cbs = o->io_cbs;
  d->raw = o->raw;
  d->port = o->port;
  d->host = o->host ? nl_xstrdup(o->host) : NULL;
  d->unix_path = o->unix_path ? nl_xstrdup(o->unix_path) : NULL;
  d->server_name = o->server_name ? nl_xstrdup(o->server_name) : NULL;
  d->tls = o->tls && !o->raw ? nl_tls_config_ref(o->tls) : NULL;
  assert(d->raw || (d->io_cbs && d->io_cbs->on_data && d->io_cbs->on_end));
  if (uv_timer_init(loop, &d->timer) < 0) abort();
  d->live = 1;
  if (o->timeout_ms) uv_timer_start(&d->timer, on_deadline, o->timeout_ms, 0);
  nl_err_t *err = NULL;
  if (d->unix_path) {
    snprintf(d->peer, sizeof d->peer, "%s", d->unix_path);
    open_io(d);
    uv_pipe_connect(&d->connect, &d->io.pipe, d->unix_path, on_connect);
    return;
  }
  if (!d->host || !*d->host || d->port < 1 || d->port > 65535) {
    nl_err_set(&err, NL_EINVAL, "dial tcp %s:%d: missing address", d->host ? d->host : "",
               d->port);
    fail_later(d, err);
    return;
  }
  union {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
  } addr;
  if (uv_ip4_addr(d->host, d->port, &addr.in) == 0 ||
      uv_ip6_addr(d->host, d->port, &addr.in6) == 0) {
    connect_to(d, &addr.sa);
    return;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  d->gai.data = d;
  int rc = uv_getaddrinfo(loop, &d->gai, on_resolved, d->host, NULL, &hints);
  if (rc < 0) {
    nl_err_set(&err, EHOSTUNREACH, "dial tcp: lookup %s: %s", d->host, uv_strerror(rc));
    fail_later(d, err);
    return;
  }
  d->gai_pending = true;
  d->live++;
}

void nl_dial_close(nl_dial_t *d, nl_dial_closed_cb closed) {
  assert(!d->closing);
  d->closing = true;
  d->done = true;
  d->closed = closed;
  nl_err_free(&d->later);
  if (d->gai_pending) uv_cancel((uv_req_t *)&d->gai);
  if (d->io_open && !nl_io_closing(&d->io)) nl_io_close(&d->io, io_closed);
  uv_close((uv_handle_t *)&d->timer, timer_closed);
}
