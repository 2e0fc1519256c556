/* httpGet (upstream pkg/probe/http and NewRequestForHTTPGetAction) and
 * tcpSocket (pkg/probe/tcp) checks. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "managers/probe_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define PROBE_USER_AGENT "kube-probe/1.30"
#define HOOK_USER_AGENT "kube-lifecycle/1.30"

/* ---- httpGet ---- */

static void http_done(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {
  nl_check_t *c = ctx;
  c->http = NULL;
  if (!c->done) {
    if (err) {
      nl__check_finish(c, NL_CHECK_FAILURE, nl_err_msg(err));
    } else if (c->hook) { /* upstream hooks only look at the transport */
      nl__check_finish(c, NL_CHECK_SUCCESS, "");
    } else if (resp->status >= 200 && resp->status < 400) {
      if (resp->status >= 300) {
        char *m = nl_xasprintf("Probe terminated redirects, Response body: %s", resp->body);
        nl__check_finish(c, NL_CHECK_WARNING, m);
        free(m);
      } else {
        nl__check_finish(c, NL_CHECK_SUCCESS, resp->body);
      }
    } else {
      char *m = nl_xasprintf("HTTP probe failed with statuscode: %d", resp->status);
      nl__check_finish(c, NL_CHECK_FAILURE, m);
      free(m);
    }
  }
  nl__check_unref(c);
}

static bool has_header(const nl_http_get_action_t *a, const char *name) {
  for (size_t i = 0; i < a->n_headers; i++)
    if (strcasecmp(a->headers[i].key, name) == 0) return true;
  return false;
}

void nl__check_http_start(nl_check_t *c, const nl_check_req_t *req) {
  const nl_http_get_action_t *a = req->handler->http_get;
  nl_err_t *err = NULL;
  int port = nl_probe_resolve_port(&a->port, req->container, &err);
  if (port < 0) {
    nl__check_defer(c, NL_CHECK_ERROR, nl_err_msg(err));
    nl_err_free(&err);
    return;
  }
  const char *host = a->host && *a->host ? a->host : req->pod_ip;
  if (!host || !*host) {
    nl__check_defer(c, NL_CHECK_ERROR, "no pod IP to probe");
    return;
  }
  bool https = a->scheme && strcasecmp(a->scheme, "HTTPS") == 0;
  const char *path = a->path ? a->path : "";
  char *hp = nl__probe_join_host_port(host, port);
  char *url = nl_xasprintf("%s://%s%s%s", https ? "https" : "http", hp, *path == '/' ? "" : "/",
                           path);
  free(hp);
  size_t n = a->n_headers;
  nl_http_header_t hs[n + 2];
  for (size_t i = 0; i < a->n_headers; i++)
    hs[i] = (nl_http_header_t){a->headers[i].key, a->headers[i].value};
  if (!has_header(a, "User-Agent"))
    hs[n++] = (nl_http_header_t){"User-Agent",
                                 (char *)(c->env.user_agent
                                              ? c->env.user_agent
                                              : req->hook ? HOOK_USER_AGENT : PROBE_USER_AGENT)};
  if (!has_header(a, "Accept")) hs[n++] = (nl_http_header_t){"Accept", "*/*"};
  nl_tls_config_t *tls = c->env.tls;
  if (https && !tls) {
    nl_tls_config_opts_t to = {.server = false, .verify = false};
    if (nl_tls_config_new(&c->own_tls, &to, &err) < 0) {
      nl__check_defer(c, NL_CHECK_ERROR, nl_err_msg(err));
      nl_err_free(&err);
      free(url);
      return;
    }
    tls = c->own_tls;
  }
  nl_http_request_opts_t o = {
      .url = url,
      .headers = hs,
      .n_headers = n,
      .timeout_ms = req->timeout_ms,
      .body_cap = NL_PROBE_MAX_OUTPUT,
      .truncate_body = true,
      .tls = https ? tls : NULL,
      .max_redirects = 10,
      .redirect_same_host_only = true,
  };
  c->refs++;
  c->http = nl_http_request(c->env.loop, &o, http_done, c);
  free(url);
}

/* ---- tcpSocket (and the connection of a grpc check) ---- */

static void tcp_timeout(uv_timer_t *t) {
  nl_check_t *c = container_of(t, nl_check_t, timer);
  char *m;
  if (c->net->service) /* grpc */
    m = c->net->connected
            ? nl_xasprintf("timeout: health rpc did not complete within %llus",
                           (unsigned long long)(c->timeout_ms / 1000))
            : nl_xasprintf("timeout: failed to connect service \"%s\" within %llus: context "
                           "deadline exceeded",
                           c->net->addr, (unsigned long long)(c->timeout_ms / 1000));
  else
    m = nl_xasprintf("dial tcp %s: i/o timeout", c->net->addr);
  nl__check_finish(c, NL_CHECK_FAILURE, m);
  free(m);
}

static void dialed(nl_dial_t *d, const nl_err_t *err) {
  nl_check_t *c = container_of(d, nl_check_net_t, dial)->check;
  if (c->done) return;
  if (err) {
    nl__check_finish(c, NL_CHECK_FAILURE, err->msg);
    return;
  }
  c->net->connected = true;
  nl__check_finish(c, NL_CHECK_SUCCESS, "");
}

void nl__check_tcp_start(nl_check_t *c, const nl_check_req_t *req, bool grpc) {
  nl__check_net(c);
  nl_err_t *err = NULL;
  int port;
  const char *host = req->pod_ip;
  if (grpc) {
    port = req->handler->grpc->port;
    if (port <= 0 || port > 65535) {
      nl__check_defer(c, NL_CHECK_ERROR, "invalid port number");
      return;
    }
    c->net->service = nl_xstrdup(req->handler->grpc->service ? req->handler->grpc->service : "");
  } else {
    const nl_tcp_socket_action_t *a = req->handler->tcp_socket;
    port = nl_probe_resolve_port(&a->port, req->container, &err);
    if (port < 0) {
      nl__check_defer(c, NL_CHECK_ERROR, nl_err_msg(err));
      nl_err_free(&err);
      return;
    }
    if (a->host && *a->host) host = a->host;
  }
  if (!host || !*host) {
    nl__check_defer(c, NL_CHECK_ERROR, "no pod IP to probe");
    return;
  }
  if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
  c->net->addr = nl__probe_join_host_port(host, port);
  struct sockaddr_storage sa;
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&sa) != 0 &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&sa) != 0) {
    /* Probe targets are pod IPs; names are not looked up (docs/PROBES.md). */
    char *m = nl_xasprintf("dial tcp %s: lookup %s: host names are not supported", c->net->addr, host);
    nl__check_defer(c, NL_CHECK_FAILURE, m);
    free(m);
    return;
  }
  if (grpc) {
    nl__check_grpc_start(c, host, port);
  } else {
    c->net->dial_open = true;
    c->refs++;
    nl_dial_start(&c->net->dial, c->env.loop,
                  &(nl_dial_opts_t){.host = host, .port = port, .raw = true}, dialed);
  }
  if (req->timeout_ms) uv_timer_start(&c->timer, tcp_timeout, req->timeout_ms, 0);
}
