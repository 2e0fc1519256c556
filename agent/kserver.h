/* The kubelet API on address:port (10250): HTTPS, every request authenticated
 * (x509 client certificate, webhook bearer token, anonymous when enabled) and
 * authorized (AlwaysAllow, or a SubjectAccessReview on nodes/<subresource>) as
 * upstream's pkg/kubelet/server/auth.go, then routed to a handler. The read-only
 * port (10255) serves a subset without authentication.
 *
 * Modules plug in through the route table: a handler gets the request, the
 * authenticated user and the response object, which answers once
 * (nl_http_resp_send), streams (nl_http_resp_stream/_write/_end, with
 * back-pressure through nl_http_resp_queued and nl_http_resp_on_drain) or
 * takes the connection over after an Upgrade (nl_http_resp_takeover) — see
 * reactor/http_server.h. */
#ifndef NL_KSERVER_H
#define NL_KSERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "reactor/error.h"
#include "reactor/http_server.h"

/* The authenticated user (upstream's user.Info). Borrowed: valid until the
 * response is released; copy what an asynchronous answer needs. */
typedef struct nl_kserver_user {
  const char *name;            /* "system:kube-apiserver-kubelet-client", "system:anonymous" */
  const char *uid;             /* "" when none */
  const char *const *groups;   /* NULL-terminated */
} nl_kserver_user_t;

typedef void (*nl_kserver_handler_fn)(void *ctx, const nl_http_req_t *req,
                                      const nl_kserver_user_t *user, nl_http_resp_t *resp);

/* One entry of the route table. */
typedef struct nl_kserver_route {
  const char *method;  /* "GET", "POST", ...; NULL: any (GET also answers HEAD) */
  const char *path;    /* exact, or its whole subtree when it ends in '/' ("/exec/") */
  nl_kserver_handler_fn fn;
  void *ctx;
  bool read_only;      /* also served on readOnlyPort, without authentication */
} nl_kserver_route_t;

typedef struct nl_kserver nl_kserver_t;

/* Adds routes (copied) before nl_kserver_start(). The longest path wins; a
 * path matched only with another method answers 405, none 404 — after
 * authorization, as upstream (an unauthorized client learns nothing). */
void nl_kserver_route(nl_kserver_t *s, const nl_kserver_route_t *routes, size_t n);

#endif
