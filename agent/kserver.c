#include "agent/kserver.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/kauth.h"
#include "agent/kserver_cert.h"
#include "reactor/fs.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define DEFAULT_IDLE_TIMEOUT_MS (90 * 1000) /* upstream's IdleTimeout */
#define DEFAULT_READ_TIMEOUT_MS (60 * 1000)
#define DEFAULT_HEADER_TIMEOUT_MS (10 * 1000)
#define DEFAULT_MAX_CONNS 1024
#define MAX_CIPHERSUITES 64

typedef struct route {
  nl_kserver_route_t r; /* method and path owned */
  bool subtree;
} route_t;

struct nl_kserver {
  uv_loop_t *loop;
  char *address;
  int port, read_only_port;
  bool x509; /* client certificates are verified against clientCAFile */
  nl_tls_config_t *tls;
  nl_tls_config_opts_t tls_opts; /* to build it again with a new certificate */
  char *client_ca;
  int ciphersuites[MAX_CIPHERSUITES];
  nl_http_server_t https, ro;
  bool ro_up;
  bool secure; /* port is served (not read_only_only) */
  int closing;
  nl_kauth_t auth;
  route_t *routes;
  size_t nroutes;
  void (*done)(void *ctx);
  void *done_ctx;
};

/* ---- the route table ---------------------------------------------------- */

void nl_kserver_route(nl_kserver_t *s, const nl_kserver_route_t *routes, size_t n) {
  s->routes = nl_xrealloc(s->routes, (s->nroutes + n) * sizeof(route_t));
  for (size_t i = 0; i < n; i++) {
    route_t *r = &s->routes[s->nroutes++];
    r->r = routes[i];
    r->r.method = routes[i].method ? nl_xstrdup(routes[i].method) : NULL;
    r->r.path = nl_xstrdup(routes[i].path);
    size_t len = strlen(r->r.path);
    r->subtree = len > 0 && r->r.path[len - 1] == '/';
  }
}

/* The longest matching path; *wrong_method when only other methods match. */
static const route_t *route_find(const nl_kserver_t *s, const char *method, const char *path,
                                 bool read_only, bool *wrong_method) {
  const route_t *best = NULL;
  size_t best_len = 0;
  bool path_seen = false;
  for (size_t i = 0; i < s->nroutes; i++) {
    const route_t *r = &s->routes[i];
    if (read_only && !r->r.read_only) continue;
    size_t n = strlen(r->r.path);
    bool match = r->subtree ? strncmp(path, r->r.path, n) == 0 : strcmp(path, r->r.path) == 0;
    if (!match || n < best_len) continue;
    bool method_ok = !r->r.method || strcmp(r->r.method, method) == 0 ||
                     (strcmp(r->r.method, "GET") == 0 && strcmp(method, "HEAD") == 0);
    if (!method_ok) {
      path_seen = true;
      continue;
    }
    if (!best || n > best_len) {
      best = r;
      best_len = n;
    }
  }
  *wrong_method = !best && path_seen;
  return best;
}

/* ---- requests held while the server waits ------------------------------ */

/* A copy of a request head (its body is read only once it is authorized):
 * the connection may go while the apiserver answers or the body arrives. */
typedef struct held {
  nl_kserver_t *s;
  nl_http_resp_t *resp;
  bool aborted;
  char *method, *target, *path, *query, *remote;
  nl_http_headers_t headers;
  nl_tls_t *tls; /* valid while resp is alive */
  /* Waiting for the body: the route's handler and the user, copied. */
  nl_kserver_handler_fn fn;
  void *ctx;
  char *name, *uid;
  char **groups;
} held_t;

static held_t *held_new(nl_kserver_t *s, const nl_http_req_t *req, nl_http_resp_t *resp) {
  held_t *h = nl_xcalloc(1, sizeof(*h));
  h->s = s;
  h->resp = resp;
  h->method = nl_xstrdup(req->method);
  h->target = nl_xstrdup(req->target);
  h->path = nl_xstrdup(req->path);
  h->query = nl_xstrdup(req->query);
  h->remote = nl_xstrdup(req->remote);
  h->tls = req->tls;
  nl_http_headers_copy(&h->headers, req->headers);
  return h;
}

static void held_free(held_t *h) {
  free(h->method);
  free(h->target);
  free(h->path);
  free(h->query);
  free(h->remote);
  nl_http_headers_free(&h->headers);
  free(h->name);
  free(h->uid);
  for (size_t i = 0; h->groups && h->groups[i]; i++) free(h->groups[i]);
  free(h->groups);
  free(h);
}

/* The request as a handler sees it, with body. */
static nl_http_req_t held_req(const held_t *h, const char *body, size_t len) {
  return (nl_http_req_t){.method = h->method,
                         .target = h->target,
                         .path = h->path,
                         .query = h->query,
                         .headers = &h->headers,
                         .body = body,
                         .body_len = len,
                         .remote = h->remote,
                         .tls = nl_http_resp_alive(h->resp) ? h->tls : NULL};
}

static void body_arrived(void *ctx, nl_http_resp_t *resp, const char *body, size_t len) {
  held_t *h = ctx;
  if (!body) {
    nl_http_resp_send_str(resp, 400, ""); /* only releases resp: the server answered */
  } else {
    nl_http_req_t req = held_req(h, body, len);
    nl_kserver_user_t u = {.name = h->name, .uid = h->uid, .groups = (const char *const *)h->groups};
    h->fn(h->ctx, &req, &u, resp);
  }
  held_free(h);
}

/* Reads the body the route takes (the request is authorized by now), then
 * calls its handler. */
static void call_with_body(nl_kserver_t *s, const route_t *r, const nl_http_req_t *req,
                           const nl_kserver_user_t *user, nl_http_resp_t *resp) {
  held_t *h = held_new(s, req, resp);
  h->fn = r->r.fn;
  h->ctx = r->r.ctx;
  h->name = nl_xstrdup(user->name);
  h->uid = nl_xstrdup(user->uid ? user->uid : "");
  size_t n = 0;
  while (user->groups && user->groups[n]) n++;
  h->groups = nl_xcalloc(n + 1, sizeof(char *));
  for (size_t i = 0; i < n; i++) h->groups[i] = nl_xstrdup(user->groups[i]);
  nl_http_resp_read_body(resp, r->r.max_body, body_arrived, h);
}

static void dispatch(nl_kserver_t *s, const nl_http_req_t *req, const nl_kserver_user_t *user,
                     nl_http_resp_t *resp, bool read_only) {
  bool wrong_method;
  const route_t *r = route_find(s, req->method, req->path, read_only, &wrong_method);
  if (!r) {
    nl_http_resp_send_str(resp, wrong_method ? 405 : 404,
                          wrong_method ? "Method Not Allowed\n" : "404 page not found\n");
    return;
  }
  if (r->r.max_body) call_with_body(s, r, req, user, resp);
  else r->r.fn(r->r.ctx, req, user, resp);
}

/* ---- requests waiting for authentication and authorization --------------- */

static void held_aborted(void *ctx) {
  held_t *h = ctx;
  h->aborted = true;
}

static void auth_done(void *ctx, int status, const nl_kauth_user_t *user, const char *body) {
  held_t *p = ctx;
  nl_http_resp_on_abort(p->resp, NULL, NULL);
  if (p->aborted || status != 0) {
    if (status == 401 || status == 403)
      nl_vlog(4, "kubelet server: %s %s from %s: %d", p->method, p->path, p->remote, status);
    nl_http_resp_send_str(p->resp, p->aborted ? 503 : status, body ? body : "");
  } else {
    nl_http_req_t req = held_req(p, "", 0);
    nl_kserver_user_t u = {.name = user->name,
                           .uid = user->uid,
                           .groups = (const char *const *)user->groups};
    dispatch(p->s, &req, &u, p->resp, false);
  }
  held_free(p);
}

static void on_secure(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_kserver_t *s = ctx;
  held_t *p = held_new(s, req, resp);
  nl_http_resp_on_abort(resp, held_aborted, p);
  nl_tls_peer_t peer = {0};
  int peer_rc = 0;
  if (req->tls && s->x509) {
    nl_cleanup_err nl_err_t *err = NULL;
    peer_rc = nl_tls_peer_identity(req->tls, &peer, &err);
    if (peer_rc < 0)
      nl_info("kubelet server: %s: client certificate: %s", req->remote, nl_err_msg(err));
  }
  nl_kauth_check(&s->auth, peer_rc, peer.cn, peer.orgs,
                 nl_http_headers_get(req->headers, "Authorization"), req->method, req->path,
                 auth_done, p);
  nl_tls_peer_free(&peer);
}

/* readOnlyPort: no authentication, only the routes marked read_only. */
static void on_read_only(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  static const char *const groups[] = {"system:unauthenticated", NULL};
  nl_kserver_user_t anon = {.name = "system:anonymous", .uid = "", .groups = groups};
  dispatch(ctx, req, &anon, resp, true);
}

/* ---- TLS ---------------------------------------------------------------- */

static bool readable(const char *path) { return access(path, R_OK) == 0; }

static int tls_setup(nl_kserver_t *s, const nl_kserver_opts_t *o, nl_err_t **err) {
  nl_tls_config_opts_t t = {.server = true};
  char *cert = NULL, *key = NULL;
  bool own = false; /* the self-signed pair in cert-dir: ours to replace */
  int rc = -1;
  if ((o->cert_file && *o->cert_file) || (o->key_file && *o->key_file)) {
    cert = nl_xstrdup(o->cert_file ? o->cert_file : "");
    key = nl_xstrdup(o->key_file ? o->key_file : "");
  } else {
    const char *dir = o->cert_dir && *o->cert_dir ? o->cert_dir : "/var/lib/kubelet/pki";
    cert = nl_xasprintf("%s/kubelet.crt", dir);
    key = nl_xasprintf("%s/kubelet.key", dir);
    own = true;
    if (!readable(cert) || !readable(key)) {
      int r = nl_mkdir_p(dir, 0755); /* as upstream's MkdirAll */
      if (r < 0) {
        nl_err_set(err, -r, "--cert-dir %s: %s", dir, strerror(-r));
        goto out;
      }
      if (nl_kserver_self_signed(cert, key, o->hostname, o->node_ip, err) < 0) {
        nl_err_wrap(err, "unable to generate self signed cert");
        goto out;
      }
    }
  }
  t.cert_file = cert;
  t.key_file = key;
  if (o->client_ca_file && *o->client_ca_file) {
    s->client_ca = nl_xstrdup(o->client_ca_file);
    t.ca_file = s->client_ca;
    t.request_client_cert = true;
  }
  if (nl_tls_version_parse(o->tls_min_version, &t.min_minor, err) < 0) {
    nl_err_wrap(err, "tlsMinVersion");
    goto out;
  }
  if (o->n_tls_cipher_suites >= MAX_CIPHERSUITES) {
    nl_err_set(err, NL_EINVAL, "tlsCipherSuites: at most %d suites", MAX_CIPHERSUITES - 1);
    goto out;
  }
  size_t n = 0;
  for (size_t i = 0; i < o->n_tls_cipher_suites; i++) {
    int id;
    if (nl_tls_ciphersuite_parse(o->tls_cipher_suites[i], &id, err) < 0) {
      nl_err_wrap(err, "tlsCipherSuites");
      goto out;
    }
    if (id) s->ciphersuites[n++] = id;
  }
  s->ciphersuites[n] = 0;
  if (n > 0) t.ciphersuites = s->ciphersuites;
  int made = nl_tls_config_new(&s->tls, &t, err);
  if (made < 0 && own) {
    /* A pair of our own that cannot be used (damaged on disk, or a key
     * that is not the certificate's): upstream's kubelet stops there; an
     * unattended node makes a new one, as it did the first. */
    nl_warn("kubelet server: %s; generating a new self-signed certificate", nl_err_msg(*err));
    nl_err_free(err);
    if (nl_kserver_self_signed(cert, key, o->hostname, o->node_ip, err) < 0) {
      nl_err_wrap(err, "unable to generate self signed cert");
      goto out;
    }
    made = nl_tls_config_new(&s->tls, &t, err);
  }
  if (made < 0) {
    nl_err_wrap(err, "kubelet server TLS");
    goto out;
  }
  s->tls_opts = t;
  s->tls_opts.cert_file = s->tls_opts.key_file = NULL;
  rc = 0;
out:
  free(cert);
  free(key);
  return rc;
}

int nl_kserver_set_cert(nl_kserver_t *s, const char *pem, nl_err_t **err) {
  assert(s->secure);
  nl_tls_config_opts_t t = s->tls_opts;
  t.cert_pem = t.key_pem = pem;
  nl_tls_config_t *tls;
  if (nl_tls_config_new(&tls, &t, err) < 0) return nl_err_wrap(err, "kubelet server TLS");
  nl_http_server_set_tls(&s->https, tls);
  nl_tls_config_unref(s->tls);
  s->tls = tls;
  return 0;
}

/* ---- life cycle --------------------------------------------------------- */

static uint64_t loop_now(void *ctx) { return uv_now(ctx); }

int nl_kserver_new(nl_kserver_t **out, uv_loop_t *loop, const nl_kserver_opts_t *o,
                   nl_kube_client_t *kube, nl_err_t **err) {
  *out = NULL;
  nl_kserver_t *s = nl_xcalloc(1, sizeof(*s));
  s->loop = loop;
  s->address = nl_xstrdup(o->address ? o->address : "");
  s->port = o->port;
  s->read_only_port = o->read_only_port;
  s->secure = !o->read_only_only;
  assert(s->secure || o->read_only_port > 0);
  s->x509 = s->secure && o->client_ca_file && *o->client_ca_file;
  nl_kauth_opts_t ao = {.node_name = o->node_name,
                        .anonymous = o->anonymous,
                        .webhook = o->webhook,
                        .authn_ttl_ms = o->authn_ttl_ms,
                        .mode = o->authz_webhook ? NL_KAUTHZ_WEBHOOK : NL_KAUTHZ_ALWAYS_ALLOW,
                        .allowed_ttl_ms = o->allowed_ttl_ms,
                        .denied_ttl_ms = o->denied_ttl_ms};
  if (!s->secure) /* no authenticator: the port this serves is never opened */
    ao = (nl_kauth_opts_t){.node_name = o->node_name, .mode = NL_KAUTHZ_ALWAYS_ALLOW};
  if (nl_kauth_init(&s->auth, &ao, kube, loop_now, loop, err) < 0) goto fail_auth;
  if (s->secure && tls_setup(s, o, err) < 0) goto fail_tls;
  nl_http_server_opts_t ho = {
      .idle_timeout_ms = o->idle_timeout_ms ? o->idle_timeout_ms : DEFAULT_IDLE_TIMEOUT_MS,
      .read_timeout_ms = o->read_timeout_ms ? o->read_timeout_ms : DEFAULT_READ_TIMEOUT_MS,
      .header_timeout_ms = o->header_timeout_ms ? o->header_timeout_ms : DEFAULT_HEADER_TIMEOUT_MS,
      .max_conns = o->max_conns ? o->max_conns : DEFAULT_MAX_CONNS,
      .lazy_body = true, /* bodies only after authorization */
      .refuse_crowded = true, /* reached from the network, from many addresses */
      .tls = s->tls};
  if (nl_http_server_init(&s->https, loop, &ho, err) < 0) goto fail_http;
  nl_http_server_route(&s->https, NULL, "/", on_secure, s);
  if (o->read_only_port > 0) {
    ho.tls = NULL;
    if (nl_http_server_init(&s->ro, loop, &ho, err) < 0) {
      nl_kserver_stop(s, NULL, NULL); /* frees s once the listener has closed */
      return -1;
    }
    s->ro_up = true;
    nl_http_server_route(&s->ro, NULL, "/", on_read_only, s);
  }
  *out = s;
  return 0;
fail_http:
  nl_tls_config_unref(s->tls);
fail_tls:
  free(s->client_ca);
  nl_kauth_free(&s->auth);
fail_auth:
  free(s->address);
  free(s);
  return -1;
}

int nl_kserver_listen(nl_kserver_t *s, nl_err_t **err) {
  if (s->secure) {
    if (nl_http_server_listen(&s->https, s->address, s->port, err) < 0)
      return nl_err_wrap(err, "kubelet server");
    nl_info("kubelet server: serving on %s:%d (TLS)", *s->address ? s->address : "0.0.0.0",
            nl_http_server_port(&s->https));
  }
  if (s->ro_up) {
    if (nl_http_server_listen(&s->ro, s->address, s->read_only_port, err) < 0)
      return nl_err_wrap(err, "kubelet read-only server");
    nl_info("kubelet server: read-only port %d", s->read_only_port);
  }
  return 0;
}

int nl_kserver_port(const nl_kserver_t *s) { return nl_http_server_port(&s->https); }

static void http_stopped(nl_http_server_t *srv, void *ctx) {
  nl_kserver_t *s = ctx;
  if (--s->closing > 0) return;
  nl_kauth_free(&s->auth);
  nl_tls_config_unref(s->tls);
  free(s->client_ca);
  for (size_t i = 0; i < s->nroutes; i++) {
    free((char *)s->routes[i].r.method);
    free((char *)s->routes[i].r.path);
  }
  free(s->routes);
  free(s->address);
  void (*done)(void *) = s->done;
  void *done_ctx = s->done_ctx;
  free(s);
  if (done) done(done_ctx);
}

void nl_kserver_stop(nl_kserver_t *s, void (*done)(void *ctx), void *ctx) {
  if (s->closing) return;
  s->done = done;
  s->done_ctx = ctx;
  s->closing = s->ro_up ? 2 : 1;
  nl_kauth_stop(&s->auth);
  nl_http_server_stop(&s->https, http_stopped, s);
  if (s->ro_up) nl_http_server_stop(&s->ro, http_stopped, s);
}
