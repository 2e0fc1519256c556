/* A streaming session: lookup -> CRI Exec/Attach/PortForward -> connect to the
 * runtime's streaming server -> take the client's connection over, forward its
 * request, and pump bytes both ways until either side ends.
 *
 * Session states (one step per completion):
 *   CRI      waiting for the streaming URL      (resp held)
 *   CONNECT  connecting to the runtime          (resp held, backend open)
 *   PUMP     both connections copied            (tunnel and backend open)
 *   CLOSING  waiting for the close callbacks of what is open
 * The client going away early marks the session aborted; the pending
 * completion then answers the response object (releasing it) and closes. */
#include "agent/kserver_stream.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cri/runtime.h"
#include "reactor/http_client.h"
#include "reactor/log.h"
#include "reactor/pump.h"
#include "reactor/xalloc.h"

typedef enum { SESS_CRI, SESS_CONNECT, SESS_PUMP, SESS_CLOSING } sess_state_t;

typedef struct sess {
  nl_list_t link;
  nl_kserver_stream_t *owner;
  sess_state_t state;
  nl_stream_kind_t kind;
  nl_http_resp_t *resp; /* until answered or taken over */
  bool aborted, closing;
  nl_http_req_t req;    /* copies of what forwarding needs */
  nl_http_headers_t headers;
  char *method;
  uv_tcp_t backend;
  uv_connect_t connect;
  bool backend_open;
  nl_pump_stream_t bend;
  struct client_end {
    nl_pump_end_t end; /* first */
    nl_http_tunnel_t *tunnel;
  } cend;
  nl_pump_t pump;
  nl_http_url_t url;
  char *what; /* "exec ns/pod/container" for logs */
} sess_t;

static void sess_close(sess_t *s);

static void sess_free_if_closed(sess_t *s) {
  if (s->backend_open || s->cend.tunnel) return;
  nl_list_remove(&s->link);
  nl_kserver_stream_t *owner = s->owner;
  nl_http_headers_free(&s->headers);
  nl_http_url_free(&s->url);
  free(s->method);
  free(s->what);
  free(s);
  if (owner->stopping && nl_list_empty(&owner->sessions) && owner->stop_done)
    owner->stop_done(owner->stop_ctx);
}

/* Answers the held response with an error (upstream's http.Error text). */
static void sess_fail(sess_t *s, int status, const char *msg) {
  if (s->resp) {
    if (!s->aborted) nl_log_emit('E', __FILE__, __LINE__, "%s: %s", s->what, msg);
    nl_http_resp_send_str(s->resp, status, msg);
    s->resp = NULL;
  }
  sess_close(s);
}

/* ---- the client end: the server's tunnel --------------------------------- */

static int tun_write(nl_pump_end_t *e, const char *p, size_t n, nl_err_t **err) {
  return nl_http_tunnel_write(((struct client_end *)e)->tunnel, p, n, err);
}
static size_t tun_queued(const nl_pump_end_t *e) {
  return nl_http_tunnel_queued(((const struct client_end *)e)->tunnel);
}
static void tun_set_reading(nl_pump_end_t *e, bool on) {
  nl_http_tunnel_read(((struct client_end *)e)->tunnel, on);
}
static const nl_pump_end_ops_t tunnel_ops = {tun_write, tun_queued, tun_set_reading};

static void on_tun_data(void *ctx, const char *p, size_t n) {
  nl_pump_end_data(&((sess_t *)ctx)->cend.end, p, n);
}
static void on_tun_end(void *ctx, const nl_err_t *err) {
  nl_pump_end_eof(&((sess_t *)ctx)->cend.end, (nl_err_t *)err);
}
static void on_tun_drain(void *ctx) { nl_pump_end_drained(&((sess_t *)ctx)->cend.end); }
static void on_tun_close(void *ctx) {
  sess_t *s = ctx;
  s->cend.tunnel = NULL;
  if (s->closing)
    sess_free_if_closed(s);
  else
    sess_close(s);
}
static const nl_http_tunnel_cbs_t tunnel_cbs = {on_tun_data, on_tun_end, on_tun_drain,
                                                on_tun_close};

/* ---- closing ------------------------------------------------------------- */

static void on_backend_closed(uv_handle_t *h) {
  sess_t *s = nl_list_entry(h, sess_t, backend); /* data belongs to the pump end */
  s->backend_open = false;
  sess_free_if_closed(s);
}

static void sess_close(sess_t *s) {
  if (s->closing) return;
  s->closing = true;
  if (s->state == SESS_PUMP) nl_pump_stop(&s->pump);
  s->state = SESS_CLOSING;
  if (s->backend_open) uv_close((uv_handle_t *)&s->backend, on_backend_closed);
  if (s->cend.tunnel) {
    nl_http_tunnel_close(s->cend.tunnel); /* its on_close frees, maybe at once */
    return;
  }
  sess_free_if_closed(s);
}

static void on_pump_done(nl_pump_t *p, int side, nl_err_t *err, void *ctx) {
  (void)p;
  sess_t *s = ctx;
  if (err) nl_log_emit('I', __FILE__, __LINE__, "%s: %s side: %s", s->what,
                       side ? "runtime" : "client", nl_err_msg(err));
  sess_close(s);
}

/* ---- steps --------------------------------------------------------------- */

static void on_connect(uv_connect_t *req, int status) {
  sess_t *s = req->data;
  if (status == UV_ECANCELED) return; /* closing */
  if (s->aborted || s->owner->stopping) return sess_fail(s, 503, "stopping");
  if (status < 0) {
    char *m = nl_xasprintf("error dialing backend: dial tcp %s:%d: connect: %s", s->url.host,
                           s->url.port, uv_strerror(status));
    sess_fail(s, 500, m);
    free(m);
    return;
  }
  s->cend.end.ops = &tunnel_ops;
  s->cend.tunnel = nl_http_resp_takeover(s->resp, &tunnel_cbs, s);
  s->resp = NULL;
  if (!s->cend.tunnel) return sess_close(s);
  char *hp = nl_xasprintf("%s:%d", s->url.host, s->url.port);
  s->req.method = s->method;
  s->req.headers = &s->headers;
  char *head = nl_stream_forward_head(&s->req, hp, s->url.path);
  free(hp);
  nl_pump_stream_init(&s->bend, (uv_stream_t *)&s->backend);
  s->state = SESS_PUMP;
  nl_pump_init(&s->pump, &s->cend.end, &s->bend.end, s->owner->high_water, on_pump_done, s);
  nl_err_t *err = NULL;
  if (s->bend.end.ops->write(&s->bend.end, head, strlen(head), &err) != 0) {
    nl_log_emit('E', __FILE__, __LINE__, "%s: %s", s->what, nl_err_msg(err));
    nl_err_free(&err);
    free(head);
    return sess_close(s);
  }
  free(head);
  nl_pump_start(&s->pump);
}

static void got_url(sess_t *s, const nl_grpc_status_t *st, const char *url) {
  assert(s->state == SESS_CRI);
  if (s->aborted || s->owner->stopping) return sess_fail(s, 503, "stopping");
  if (st->code != NL_GRPC_OK) {
    char *m = nl_grpc_status_format(st);
    /* upstream streaming.WriteError: the gRPC code picks the status */
    sess_fail(s, st->code == 5 ? 404 : st->code == 8 ? 429 : 500, m);
    free(m);
    return;
  }
  nl_err_t *err = NULL;
  struct sockaddr_storage sa;
  if (nl_http_url_parse(&s->url, url, &err) != 0 || s->url.https ||
      (uv_ip4_addr(s->url.host, s->url.port, (struct sockaddr_in *)&sa) != 0 &&
       uv_ip6_addr(s->url.host, s->url.port, (struct sockaddr_in6 *)&sa) != 0)) {
    char *m = nl_xasprintf("streaming URL %s: %s", url,
                           err ? nl_err_msg(err) : "not an http URL on an IP address");
    nl_err_free(&err);
    sess_fail(s, 500, m);
    free(m);
    return;
  }
  s->state = SESS_CONNECT;
  uv_tcp_init(s->owner->loop, &s->backend);
  s->backend_open = true;
  s->connect.data = s;
  int rc = uv_tcp_connect(&s->connect, &s->backend, (struct sockaddr *)&sa, on_connect);
  if (rc < 0) on_connect(&s->connect, rc);
}

#define URL_CB(name, Resp)                                                           \
  static void on_##name(const nl_grpc_status_t *st, Runtime__V1__##Resp *r, void *ctx) { \
    got_url(ctx, st, r ? r->url : NULL);                                             \
  }
URL_CB(exec, ExecResponse)
URL_CB(attach, AttachResponse)
URL_CB(port_forward, PortForwardResponse)

static void on_abort(void *ctx) {
  sess_t *s = ctx;
  s->aborted = true;
}

static bool is_websocket(const nl_http_req_t *req) {
  const char *c = nl_http_headers_get(req->headers, "Connection");
  const char *u = nl_http_headers_get(req->headers, "Upgrade");
  return c && u && strcasestr(c, "upgrade") && strcasecmp(u, "websocket") == 0;
}

static void start(nl_kserver_stream_t *o, nl_stream_kind_t kind, const char *prefix,
                  const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_stream_params_t p;
  char *msg = NULL, *id = NULL;
  int status = nl_stream_params_parse(&p, kind, req->path + strlen(prefix), req->query,
                                      is_websocket(req), &msg);
  if (status == 0) {
    status = o->lookup(o->lookup_ctx, p.ns, p.pod, p.uid, p.container, &id, &msg);
    if (status) nl_stream_params_free(&p);
  }
  if (status) {
    nl_http_resp_send_str(resp, status, msg);
    free(msg);
    return;
  }
  sess_t *s = nl_xcalloc(1, sizeof *s);
  s->owner = o;
  s->kind = kind;
  s->resp = resp;
  s->method = nl_xstrdup(req->method);
  nl_http_headers_copy(&s->headers, req->headers);
  int plen = (int)strlen(prefix) - 2; /* "/exec/" -> "exec" */
  s->what = p.container ? nl_xasprintf("%.*s %s/%s/%s", plen, prefix + 1, p.ns, p.pod, p.container)
                        : nl_xasprintf("%.*s %s/%s", plen, prefix + 1, p.ns, p.pod);
  nl_list_insert_tail(&o->sessions, &s->link);
  nl_http_resp_on_abort(resp, on_abort, s);
  if (kind == NL_STREAM_EXEC) {
    Runtime__V1__ExecRequest r = RUNTIME__V1__EXEC_REQUEST__INIT;
    r.container_id = id, r.cmd = p.cmd, r.n_cmd = p.n_cmd;
    r.tty = p.tty, r.stdin = p.in, r.stdout = p.out, r.stderr = p.err;
    nl_cri_exec(o->cri, &r, on_exec, s);
  } else if (kind == NL_STREAM_ATTACH) {
    Runtime__V1__AttachRequest r = RUNTIME__V1__ATTACH_REQUEST__INIT;
    r.container_id = id, r.tty = p.tty, r.stdin = p.in, r.stdout = p.out, r.stderr = p.err;
    nl_cri_attach(o->cri, &r, on_attach, s);
  } else {
    Runtime__V1__PortForwardRequest r = RUNTIME__V1__PORT_FORWARD_REQUEST__INIT;
    r.pod_sandbox_id = id, r.port = p.ports, r.n_port = p.n_ports;
    nl_cri_port_forward(o->cri, &r, on_port_forward, s);
  }
  free(id);
  nl_stream_params_free(&p);
}

void nl_kserver_exec_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                             nl_http_resp_t *resp) {
  (void)user;
  start(ctx, NL_STREAM_EXEC, "/exec/", req, resp);
}

void nl_kserver_attach_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                               nl_http_resp_t *resp) {
  (void)user;
  start(ctx, NL_STREAM_ATTACH, "/attach/", req, resp);
}

void nl_kserver_port_forward_handler(void *ctx, const nl_http_req_t *req,
                                     const nl_kserver_user_t *user, nl_http_resp_t *resp) {
  (void)user;
  start(ctx, NL_STREAM_PORT_FORWARD, "/portForward/", req, resp);
}

void nl_kserver_stream_init(nl_kserver_stream_t *s, uv_loop_t *loop, nl_cri_client_t *cri,
                            nl_kserver_stream_lookup_fn lookup, void *lookup_ctx) {
  memset(s, 0, sizeof *s);
  s->loop = loop;
  s->cri = cri;
  s->lookup = lookup;
  s->lookup_ctx = lookup_ctx;
  nl_list_init(&s->sessions);
}

void nl_kserver_stream_stop(nl_kserver_stream_t *o, void (*done)(void *ctx), void *ctx) {
  o->stopping = true;
  o->stop_done = done;
  o->stop_ctx = ctx;
  if (nl_list_empty(&o->sessions)) {
    if (done) done(ctx);
    return;
  }
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &o->sessions) {
    sess_t *s = nl_list_entry(pos, sess_t, link);
    if (s->state == SESS_PUMP) sess_close(s);
    /* CRI and CONNECT sessions end in their completion (which sees stopping). */
  }
}
