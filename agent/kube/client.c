/* The API client: construction from a kubeconfig, the client's connection
 * state machine (idle, connecting, ready, back-off, HTTP/1.1), stop. Requests
 * are request.c's, one connection is conn.c's. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/utsname.h>

#include "agent/kube/client_int.h"
#include "agent/kube/kubeconfig.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_READ_IDLE_MS 30000 /* client-go's http2 ReadIdleTimeout */
#define DEFAULT_PING_TIMEOUT_MS 15000
#define DEFAULT_BACKOFF_INITIAL_MS 500
#define DEFAULT_BACKOFF_MAX_MS 30000

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

void nl_kube__step(nl_kube_client_t *c) {
  switch (c->state) {
  case NL_KUBE_IDLE:
    /* Connect only while there is demand. */
    if (nl_list_empty(&c->waiting)) return;
    c->state = NL_KUBE_CONNECTING;
    nl_vlog(4, "kube: connecting to %s", c->server);
    c->cur = nl_kube__conn_start(c);
    return;
  case NL_KUBE_READY:
    nl_kube__conn_submit(c->cur);
    return;
  case NL_KUBE_HTTP1:
    while (!nl_list_empty(&c->waiting))
      nl_kube__req_h1_start(nl_list_entry(c->waiting.next, nl_kube_req_t, link));
    return;
  case NL_KUBE_CONNECTING:
  case NL_KUBE_BACKOFF:
  case NL_KUBE_STOPPING:
    return;
  }
}

void nl_kube__conn_ready(nl_kube_client_t *c, nl_kube_conn_t *conn, bool h2) {
  assert(c->state == NL_KUBE_CONNECTING && c->cur == conn);
  nl_err_free(&c->last_err);
  nl_backoff_reset(&c->backoff);
  nl_list_t *p;
  for (p = c->waiting.next; p != &c->waiting; p = p->next)
    nl_list_entry(p, nl_kube_req_t, link)->had_conn = true;
  if (!h2) {
    nl_info("kube: %s does not offer HTTP/2; using HTTP/1.1, one connection per request",
            c->server);
    c->state = NL_KUBE_HTTP1;
    c->cur = NULL;
    nl_kube__conn_close(conn, NULL);
    return;
  }
  nl_vlog(4, "kube: connected to %s (%s)", c->server, conn->peer);
  c->state = NL_KUBE_READY;
  nl_kube__step(c);
}

void nl_kube__conn_gone(nl_kube_client_t *c, nl_kube_conn_t *conn, const nl_err_t *err) {
  if (c->cur != conn || c->state == NL_KUBE_STOPPING) return;
  c->cur = NULL;
  if (conn->was_ready) {
    /* Lost or draining: a new connection at once if anyone waits. */
    c->state = NL_KUBE_IDLE;
    return;
  }
  nl_err_free(&c->last_err);
  if (err) nl_err_set(&c->last_err, err->code, "%s", err->msg);
  /* Connection refused or unreachable may pass: requests wait for the next
   * attempt until their deadline, unless they asked to hear of it (fail_on_dial).
   * A TLS failure (the server's certificate is not trusted or not for this
   * name) is a configuration problem: every caller hears of it now. */
  if (err) {
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

bool nl_kube_client_connected(const nl_kube_client_t *c) { return c->state == NL_KUBE_READY; }

const char *nl_kube_client_server(const nl_kube_client_t *c) { return c->server; }

static void backoff_closed(uv_handle_t *h) { nl_kube__client_put(h->data); }

void nl_kube_client_stop(nl_kube_client_t *c, void (*done)(void *ctx), void *ctx) {
  if (c->state == NL_KUBE_STOPPING) return;
  c->state = NL_KUBE_STOPPING;
  c->done = done;
  c->done_ctx = ctx;
  c->cur = NULL;
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
  switch (c->state) {
  case NL_KUBE_READY:
    nl_kube__conn_drain(c->cur);
    break;
  case NL_KUBE_BACKOFF:
    /* likely refused for the old certificate: try the new one now */
    uv_timer_stop(&c->backoff_timer);
    nl_backoff_reset(&c->backoff);
    c->state = NL_KUBE_IDLE;
    nl_kube__step(c);
    break;
  default: /* a handshake in flight finishes with the old certificate */
    break;
  }
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
  c->default_timeout_ms = o->default_timeout_ms ? o->default_timeout_ms : DEFAULT_TIMEOUT_MS;
  c->read_idle_ms = o->read_idle_timeout_ms ? o->read_idle_timeout_ms : DEFAULT_READ_IDLE_MS;
  c->ping_timeout_ms = o->ping_timeout_ms ? o->ping_timeout_ms : DEFAULT_PING_TIMEOUT_MS;
  nl_kube_ratelimit_init(&c->rl, o->qps, o->burst, uv_now(loop));
  nl_backoff_init(&c->backoff, o->backoff_initial_ms ? o->backoff_initial_ms : DEFAULT_BACKOFF_INITIAL_MS,
                  o->backoff_max_ms ? o->backoff_max_ms : DEFAULT_BACKOFF_MAX_MS, 0.2);
  nl_list_init(&c->conns);
  nl_list_init(&c->waiting);
  nl_list_init(&c->reqs);
  uv_timer_init(loop, &c->backoff_timer);
  c->live = 1;
  c->state = NL_KUBE_IDLE;
  *out = c;
  return 0;
}
