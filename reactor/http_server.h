/* A small HTTP/1.1 server on the loop (the kubelet's /healthz, later /pods and
 * the like): routes by method and path, keep-alive, a per-connection read
 * timeout, a connection limit, optional TLS. Handlers may answer later
 * (asynchronously) through their response object.
 *
 * Lifetime: nl_http_server_init() creates the listening handle, so every
 * initialised server must be stopped with nl_http_server_stop(); the owner keeps
 * the struct alive until the done callback has run. */
#ifndef NL_HTTP_SERVER_H
#define NL_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "reactor/error.h"
#include "reactor/http_parse.h"
#include "reactor/list.h"
#include "reactor/tls.h"

typedef struct nl_http_server nl_http_server_t;
typedef struct nl_http_resp nl_http_resp_t;

/* A request as the handler sees it. Everything is borrowed and valid until the
 * response is sent or aborted (copy what an asynchronous answer needs). */
typedef struct nl_http_req {
  const char *method; /* "GET" */
  const char *target; /* as sent: "/healthz?verbose" */
  const char *path;   /* target without the query, not percent-decoded */
  const char *query;  /* after '?', "" when none */
  const nl_http_headers_t *headers;
  const char *body; /* NUL-terminated; "" when none */
  size_t body_len;
  const char *remote; /* "127.0.0.1:53012" */
} nl_http_req_t;

/* Each request's handler must eventually call nl_http_resp_send() exactly once,
 * from the handler itself or later, even if the connection went away meanwhile
 * (then the call only frees the response). */
typedef void (*nl_http_handler_fn)(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp);

typedef struct nl_http_server_opts {
  uint64_t read_timeout_ms; /* from idle (or accept) to a complete request; 0: 60 s */
  size_t max_conns;         /* more are accepted and closed at once; 0: 128 */
  size_t max_head;          /* 0: NL_HTTP_DEFAULT_MAX_HEAD; over it: 431 */
  uint64_t max_body;        /* 0: 1 MiB; over it: 413 */
  nl_tls_config_t *tls;     /* a server config (referenced), or NULL for plain HTTP */
} nl_http_server_opts_t;

typedef void (*nl_http_server_done_fn)(nl_http_server_t *srv, void *ctx);

/* Embedded in its owner; fields are private. */
struct nl_http_server {
  uv_loop_t *loop;
  uv_tcp_t listener;
  nl_http_server_opts_t opts;
  nl_list_t routes;
  nl_list_t conns;
  size_t nconns;
  bool listening, stopping, listener_closed;
  nl_http_server_done_fn done_cb;
  void *done_ctx;
  char *addr; /* "127.0.0.1:10248" once listening */
};

/* opts may be NULL. Returns 0, or -1 with *err (the loop refused a handle). */
int nl_http_server_init(nl_http_server_t *srv, uv_loop_t *loop, const nl_http_server_opts_t *opts,
                        nl_err_t **err);

/* Routes `method path` to fn. method NULL matches any method; a GET route also
 * answers HEAD. A path ending in '/' matches its whole subtree (as Go's
 * ServeMux); otherwise the match is exact; the longest match wins. A path that
 * matches with another method gets 405, no match 404. */
void nl_http_server_route(nl_http_server_t *srv, const char *method, const char *path,
                          nl_http_handler_fn fn, void *ctx);

/* Listens on host:port. host is an IPv4 or IPv6 literal (brackets allowed),
 * "localhost" (127.0.0.1) or "" (all IPv4 addresses); no name resolution.
 * port 0 picks a free port (see nl_http_server_port). Returns 0, or -1 with
 * *err like "listen tcp 127.0.0.1:10248: address already in use". */
int nl_http_server_listen(nl_http_server_t *srv, const char *host, int port, nl_err_t **err);

/* The bound port, or -1 when not listening. */
int nl_http_server_port(const nl_http_server_t *srv);

/* Closes the listener and every connection (pending responses are aborted),
 * then calls done (may be NULL) from a close callback, once all memory is
 * freed. Calling it again is a no-op. */
void nl_http_server_stop(nl_http_server_t *srv, nl_http_server_done_fn done, void *ctx);

/* ---- responses ---------------------------------------------------------- */

/* Adds a response header (copied). Content-Length, Date and Connection are set
 * by the server. Content-Type defaults to "text/plain; charset=utf-8". */
void nl_http_resp_header(nl_http_resp_t *resp, const char *name, const char *value);

/* Sends status and body (copied) and releases resp, which must not be used
 * afterwards. If the connection is already gone, only releases resp. */
void nl_http_resp_send(nl_http_resp_t *resp, int status, const void *body, size_t len);

/* A convenience: sends a NUL-terminated string. */
void nl_http_resp_send_str(nl_http_resp_t *resp, int status, const char *body);

/* Asks to be told (once, synchronously from the server) when the connection
 * goes away before the response is sent; the handler must still call
 * nl_http_resp_send() to release resp, and req is invalid from then on. */
void nl_http_resp_on_abort(nl_http_resp_t *resp, void (*cb)(void *ctx), void *ctx);

/* True while the connection can still receive this response. */
bool nl_http_resp_alive(const nl_http_resp_t *resp);

#endif
