/* The API client: construction from a kubeconfig, the client's connection
 * state machine (idle, connecting, back-off, HTTP/1.1), which requests go on
 * which connection, stop. Requests are request.c's, one connection is
 * conn.c's. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/utsname.h>

#include "agent/kube/client_int.h"
#include "agent/kube/pb.h"
#include "agent/kube/kubeconfig.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_READ_IDLE_MS 30000 /* client-go's http2 ReadIdleTimeout */
#define DEFAULT_PING_TIMEOUT_MS 15000
/* Reconnect back-off. client-go has none (each request dials); the kubelet's
 * most frequent caller while the server is unreachable is the Lease, whose
 * retries back off to 7 s (the lease controller's maxBackoff): a link that comes
 * back is used as soon as upstream's would use it, not up to 36 s later. Each
 * delay stretched by up to 100% (client-go's backoff manager's jitter), so that a
 * fleet cut off together does not dial again in step. */
#define DEFAULT_BACKOFF_INITIAL_MS 500
#define DEFAULT_BACKOFF_MAX_MS 7000
#define BACKOFF_JITTER 1.0
#define DEFAULT_IDLE_CONN_MS 90000 /* Go's http.DefaultTransport IdleConnTimeout */
#define DEFAULT_MAX_CONNS 8

static const char *const alpn_h2[] = {"h2", "http/1.1", NULL};

static void client_maybe_free(nl_kube_client_t *c) {
  if (c->state != NL_KUBE_STOPPING || c->live > 0) return;
  void (*done)(void *) = c->done;
  void *ctx = c->done_ctx;
  free(c->server);
  nl_http_url_free(&c->url);
  free(c->prefix);
  free(c->authority);
  free(c->server_name);
  nl_tls_config_unref(c->tls);
  free(c->ca_file);
  free(c->ca_pem);
  free(c->authorization);
  free(c->user_agent);
  nl_err_free(&c->last_err);
  free(c);
  if (done) done(ctx);
}

void nl_kube__client_put(nl_kube_client_t *c) {
  assert(c->live > 0);
  c->live--;
  client_maybe_free(c);
}

/* ---- the connection state machine -------------------------------------- */

static void on_backoff(uv_timer_t *t) {
  nl_kube_client_t *c = container_of(t, nl_kube_client_t, backoff_timer);
  assert(c->state == NL_KUBE_BACKOFF);
  c->state = NL_KUBE_IDLE;
  nl_kube__step(c);
}

size_t nl_kube__client_nready(const nl_kube_client_t *c) {
  size_t n = 0;
  const nl_list_t *p;
  for (p = c->conns.next; p != &c->conns; p = p->next)
    n += nl_h2conn_ready(&nl_list_entry(p, nl_kube_conn_t, link)->h2c);
  return n;
}

static nl_kube_conn_t *first_ready(nl_kube_client_t *c) {
  nl_list_t *p;
  for (p = c->conns.next; p != &c->conns; p = p->next) {
    nl_kube_conn_t *conn = nl_list_entry(p, nl_kube_conn_t, link);
    if (nl_h2conn_ready(&conn->h2c)) return conn;
  }
  return NULL;
}

/* Each waiting request goes on the oldest ready connection that takes it, so
 * streams pack onto few connections and extra ones go idle; one that none
 * takes waits without holding back the requests behind it (a Lease renewal
 * behind watches). Returns whether any is left waiting. */
static bool dispatch(nl_kube_client_t *c) {
  bool left = false;
  nl_list_t *p, *tmp;
  nl_list_foreach_safe(p, tmp, &c->waiting) {
    nl_kube_req_t *r = nl_list_entry(p, nl_kube_req_t, link);
    nl_kube_conn_t *conn = NULL;
    nl_list_t *q;
    for (q = c->conns.next; q != &c->conns && !conn; q = q->next) {
      conn = nl_list_entry(q, nl_kube_conn_t, link);
      if (!nl_kube__conn_takes(conn, r)) conn = NULL;
    }
    int rc = NL_KUBE_H2_EBUSY;
    if (conn) nl_kube__req_submit(r, conn, &rc);
    if (rc == NL_KUBE_H2_EBUSY) left = true;
    else if (conn) conn->dirty = true;
  }
  /* One write per connection. A failed write closes its connection and
   * changes the list: look again from the start each time. */
  for (;;) {
    nl_kube_conn_t *conn = NULL;
    for (p = c->conns.next; p != &c->conns && !conn; p = p->next) {
      conn = nl_list_entry(p, nl_kube_conn_t, link);
      if (!conn->dirty) conn = NULL;
    }
    if (!conn) return left;
    conn->dirty = false;
    nl_kube__conn_flush(conn);
  }
}

void nl_kube__step(nl_kube_client_t *c) {
  switch (c->state) {
  case NL_KUBE_STOPPING:
    return;
  case NL_KUBE_HTTP1:
    while (!nl_list_empty(&c->waiting))
      nl_kube__req_h1_start(nl_list_entry(c->waiting.next, nl_kube_req_t, link));
    return;
  case NL_KUBE_IDLE:
  case NL_KUBE_CONNECTING:
  case NL_KUBE_BACKOFF:
    break;
  }
  /* Connect only while a request waits that no connection takes (Go's
   * transport with StrictMaxConcurrentStreams off), up to the bound. */
  bool left = dispatch(c);
  if (!left) c->at_bound = false;
  if (!left || c->state != NL_KUBE_IDLE) return;
  size_t open = nl_kube__client_nready(c);
  if (open >= c->max_conns) {
    if (!c->at_bound)
      nl_warn("kube: %zu connections to %s and every stream they allow is taken; "
              "requests wait for a stream",
              open, c->server);
    c->at_bound = true;
    return;
  }
  c->at_bound = false;
  c->state = NL_KUBE_CONNECTING;
  if (open == 0) nl_vlog(4, "kube: connecting to %s", c->server);
  else
    nl_vlog(2, "kube: the %zu connection(s) to %s have no free stream: opening another", open,
            c->server);
  nl_kube__conn_start(c);
}

void nl_kube__conn_ready(nl_kube_client_t *c, nl_kube_conn_t *conn, bool h2) {
  assert(c->state == NL_KUBE_CONNECTING && c->dialing == conn);
  c->dialing = NULL;
  c->state = NL_KUBE_IDLE;
  nl_err_free(&c->last_err);
  nl_backoff_reset(&c->backoff);
  nl_list_t *p;
  for (p = c->waiting.next; p != &c->waiting; p = p->next)
    nl_list_entry(p, nl_kube_req_t, link)->had_conn = true;
  if (!h2) {
    nl_info("kube: %s does not offer HTTP/2; using HTTP/1.1, one connection per request",
            c->server);
    c->state = NL_KUBE_HTTP1;
    nl_kube__conn_close(conn, NULL);
    return;
  }
  nl_vlog(4, "kube: connected to %s (%s), %zu connection(s)", c->server, conn->h2c.dial.peer,
          nl_kube__client_nready(c));
  nl_kube__step(c);
}

void nl_kube__conn_gone(nl_kube_client_t *c, nl_kube_conn_t *conn, const nl_err_t *err) {
  /* A ready connection lost or draining: step() dials again if anyone waits. */
  if (c->dialing != conn || c->state == NL_KUBE_STOPPING) return;
  c->dialing = NULL;
  c->state = NL_KUBE_IDLE;
  if (conn->was_ready) return;
  nl_err_free(&c->last_err);
  if (err) nl_err_set(&c->last_err, err->code, "%s", err->msg);
  /* Connection refused or unreachable may pass: requests wait for the next
   * attempt until their deadline, unless they asked to hear of it (fail_on_dial).
   * A TLS failure (the server's certificate is not trusted or not for this
   * name) is a configuration problem: every caller hears of it now. Requests
   * waiting for a stream of an open connection wait on. */
  if (err && nl_kube__client_nready(c) == 0) {
    nl_list_t *p, *tmp;
    nl_list_foreach_safe(p, tmp, &c->waiting) {
      nl_kube_req_t *r = nl_list_entry(p, nl_kube_req_t, link);
      if (err->code == EPROTO || r->fail_on_dial) nl_kube__req_dial_failed(r, err);
    }
  }
  c->state = NL_KUBE_BACKOFF;
  uint64_t delay = nl_backoff_next(&c->backoff);
  nl_vlog(2, "kube: connecting to %s failed: %s; retrying in %" PRIu64 " ms", c->server,
          err ? err->msg : "", delay);
  uv_timer_start(&c->backoff_timer, on_backoff, delay, 0);
}

/* ---- public API --------------------------------------------------------- */

bool nl_kube_client_connected(const nl_kube_client_t *c) {
  return c->state != NL_KUBE_STOPPING && nl_kube__client_nready(c) > 0;
}

const char *nl_kube_client_server(const nl_kube_client_t *c) { return c->server; }

static void backoff_closed(uv_handle_t *h) { nl_kube__client_put(h->data); }

void nl_kube_client_stop(nl_kube_client_t *c, void (*done)(void *ctx), void *ctx) {
  if (c->state == NL_KUBE_STOPPING) return;
  c->state = NL_KUBE_STOPPING;
  c->done = done;
  c->done_ctx = ctx;
  c->dialing = NULL;
  nl_list_t *p, *tmp;
  nl_list_foreach_safe(p, tmp, &c->reqs) {
    nl_kube__req_stop(nl_list_entry(p, nl_kube_req_t, all));
  }
  while (!nl_list_empty(&c->conns))
    nl_kube__conn_close(nl_list_entry(c->conns.next, nl_kube_conn_t, link), NULL);
  c->backoff_timer.data = c;
  uv_close((uv_handle_t *)&c->backoff_timer, backoff_closed);
}

int nl_kube_client_set_cert(nl_kube_client_t *c, const char *cert_pem, const char *key_pem,
                            nl_err_t **err) {
  assert(c->state != NL_KUBE_STOPPING);
  nl_tls_config_opts_t to = {.verify = !c->insecure, .ca_file = c->ca_file, .ca_pem = c->ca_pem,
                             .cert_pem = cert_pem, .key_pem = key_pem, .alpn = alpn_h2};
  nl_tls_config_t *tls = NULL;
  if (nl_tls_config_new(&tls, &to, err) < 0) return nl_err_wrap(err, "new client certificate");
  nl_tls_config_unref(c->tls); /* sessions on it keep their reference */
  c->tls = tls;
  nl_info("kube: new client certificate: new connections to %s use it; open ones drain",
          c->server);
  /* Draining changes the list (a connection with no stream closes at once). */
  nl_kube_conn_t *conn;
  while ((conn = first_ready(c)) != NULL) nl_kube__conn_drain(conn);
  if (c->state == NL_KUBE_BACKOFF) {
    /* likely refused for the old certificate: try the new one now */
    uv_timer_stop(&c->backoff_timer);
    nl_backoff_reset(&c->backoff);
    c->state = NL_KUBE_IDLE;
    nl_kube__step(c);
  }
  /* A handshake in flight finishes with the old certificate. */
  return 0;
}

static char *default_user_agent(void) {
  struct utsname u;
  const char *arch = "unknown";
  if (uname(&u) == 0) {
    arch = !strcmp(u.machine, "x86_64")    ? "amd64"
           : !strcmp(u.machine, "aarch64") ? "arm64"
           : !strncmp(u.machine, "arm", 3) ? "arm"
                                           : u.machine;
  }
  return nl_xasprintf("nanolet/%s (linux/%s)", NANOLET_VERSION, arch);
}

int nl_kube_client_new(nl_kube_client_t **out, uv_loop_t *loop, const nl_kube_client_opts_t *o,
                       nl_err_t **err) {
  *out = NULL;
  const nl_kubeconfig_t *kc = o->kubeconfig;
  const char *where = kc->path ? kc->path : "(in memory)";
  nl_http_url_t url;
  if (!kc->server || nl_http_url_parse(&url, kc->server, err) < 0) {
    if (!kc->server) nl_err_set(err, NL_EINVAL, "no server");
    return nl_err_wrap(err, "kubeconfig %s: cluster.server", where);
  }
  if (!url.https) {
    nl_http_url_free(&url);
    return nl_err_set(err, NL_EINVAL, "kubeconfig %s: cluster.server %s: only https is supported",
                      where, kc->server);
  }
  if (!kc->insecure && !kc->ca_file && !kc->ca_pem) {
    nl_http_url_free(&url);
    return nl_err_set(err, NL_EINVAL,
                      "kubeconfig %s: cluster: no certificate-authority(-data) and "
                      "insecure-skip-tls-verify is not set (system roots are not used)",
                      where);
  }
  nl_tls_config_opts_t to = {.verify = !kc->insecure,
                             .ca_file = kc->insecure ? NULL : kc->ca_file,
                             .ca_pem = kc->insecure ? NULL : kc->ca_pem,
                             .cert_file = kc->cert_file, .cert_pem = kc->cert_pem,
                             .key_file = kc->key_file, .key_pem = kc->key_pem,
                             .alpn = alpn_h2};
  nl_tls_config_t *tls = NULL;
  if (nl_tls_config_new(&tls, &to, err) < 0) {
    nl_http_url_free(&url);
    return nl_err_wrap(err, "kubeconfig %s", where);
  }
  nl_kube_client_t *c = nl_xcalloc(1, sizeof *c);
  c->loop = loop;
  c->url = url;
  c->tls = tls;
  c->insecure = kc->insecure;
  if (!kc->insecure) {
    c->ca_file = kc->ca_file ? nl_xstrdup(kc->ca_file) : NULL;
    c->ca_pem = kc->ca_pem ? nl_xstrdup(kc->ca_pem) : NULL;
  }
  /* The server URL without a trailing '/'; its path is a prefix of every request. */
  size_t slen = strlen(kc->server);
  while (slen > 8 && kc->server[slen - 1] == '/') slen--;
  c->server = nl_xstrndup(kc->server, slen);
  const char *hp = c->server + 8;
  size_t hplen = strcspn(hp, "/?#");
  c->authority = nl_xstrndup(hp, hplen);
  c->prefix = nl_xstrndup(hp + hplen, strcspn(hp + hplen, "?#"));
  c->server_name = nl_xstrdup(kc->tls_server_name && *kc->tls_server_name ? kc->tls_server_name
                                                                          : url.host);
  if (kc->token && *kc->token) c->authorization = nl_xasprintf("Bearer %s", kc->token);
  c->user_agent = o->user_agent ? nl_xstrdup(o->user_agent) : default_user_agent();
  c->protobuf = nl_kube_pb_wanted(o->content_type);
  c->default_timeout_ms = o->default_timeout_ms ? o->default_timeout_ms : DEFAULT_TIMEOUT_MS;
  c->read_idle_ms = o->read_idle_timeout_ms ? o->read_idle_timeout_ms : DEFAULT_READ_IDLE_MS;
  c->ping_timeout_ms = o->ping_timeout_ms ? o->ping_timeout_ms : DEFAULT_PING_TIMEOUT_MS;
  c->idle_conn_ms = o->idle_conn_timeout_ms ? o->idle_conn_timeout_ms : DEFAULT_IDLE_CONN_MS;
  c->max_conns = o->max_conns ? o->max_conns : DEFAULT_MAX_CONNS;
  nl_kube_ratelimit_init(&c->rl, o->qps, o->burst, uv_now(loop));
  nl_backoff_init(&c->backoff, o->backoff_initial_ms ? o->backoff_initial_ms : DEFAULT_BACKOFF_INITIAL_MS,
                  o->backoff_max_ms ? o->backoff_max_ms : DEFAULT_BACKOFF_MAX_MS, BACKOFF_JITTER);
  nl_list_init(&c->conns);
  nl_list_init(&c->waiting);
  nl_list_init(&c->reqs);
  uv_timer_init(loop, &c->backoff_timer);
  c->live = 1;
  c->state = NL_KUBE_IDLE;
  *out = c;
  return 0;
}
