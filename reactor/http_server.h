/* A small HTTP/1.1 server on the loop (the kubelet's /healthz, later /pods and
 * the like): routes by method and path, keep-alive, a per-connection read
 * timeout, a connection limit, optional TLS. Handlers may answer later
 * (asynchronously) through their response object.
 *
 * Every connection follows one discipline against hostile clients: one request
 * in hand at a time (the next pipelined one is parsed once the answer is
 * queued and the connection's queued output is under NL_HTTP_OUT_HIGH);
 * reading stops while unparsed input or queued output is over its bound and
 * resumes when it drains; the head must be complete header_timeout_ms after
 * the request's first byte (for TLS, the handshake's); at the connection bound
 * the least valuable connection goes, never the newcomer. docs/SERVER.md has the
 * figures.
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
  const char *body; /* NUL-terminated; "" when none (and, with lazy_body, always at dispatch) */
  size_t body_len;
  const char *remote; /* "127.0.0.1:53012" */
  nl_tls_t *tls;      /* the connection's TLS session (peer certificate), or NULL */
} nl_http_req_t;

/* Each request's handler must eventually call nl_http_resp_send() exactly once,
 * from the handler itself or later, even if the connection went away meanwhile
 * (then the call only frees the response). */
typedef void (*nl_http_handler_fn)(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp);

/* Queued output of a connection over which no further request is parsed and
 * reading stops; and unparsed input over which reading stops. */
#define NL_HTTP_OUT_HIGH (16 * 1024)
#define NL_HTTP_PENDING_HIGH (16 * 1024)

typedef struct nl_http_server_opts {
  uint64_t read_timeout_ms; /* from the first byte of a request to all of it; 0: 60 s */
  uint64_t header_timeout_ms; /* from the first byte (of the TLS handshake, for the first
                                 request) to the end of the head; 0: 10 s */
  uint64_t idle_timeout_ms; /* from accept or the last answer to a request's first byte;
                               0: read_timeout_ms */
  /* At the bound, a new connection closes the least valuable one: a TLS
   * connection whose handshake has not completed (a plain one that sent
   * nothing), then one that has not completed a request, oldest first; then
   * the one idle longest between requests; then the oldest with a request in
   * hand. 0: 128. */
  size_t max_conns;
  /* While the connections with no request answered yet are at their bound, a
   * newcomer from an address that already holds its share of them is closed
   * at accept instead (docs/SERVER.md, "Connections"): an attacker that
   * reopens what is closed then costs an accept, not a TLS handshake. For
   * listeners reached from many addresses (the kubelet server's). Off, the
   * newcomer always gets in: a loopback-only listener (the local /healthz),
   * whose clients all share one address, must not refuse a check because a
   * local process holds silent connections. */
  bool refuse_crowded;
  size_t max_head;          /* 0: NL_HTTP_DEFAULT_MAX_HEAD; over it: 431 */
  uint64_t max_body;        /* 0: 1 MiB; over it: 413 */
  /* Handlers run when the head is complete, before any body byte is read; one
   * that wants the body asks for it with nl_http_resp_read_body(). An answer
   * to a request whose body was not read ends the connection. Without it the
   * server reads the body (up to max_body) before the handler runs. */
  bool lazy_body;
  nl_tls_config_t *tls;     /* a server config (referenced), or NULL for plain HTTP */
} nl_http_server_opts_t;

typedef void (*nl_http_server_done_fn)(nl_http_server_t *srv, void *ctx);

/* Embedded in its owner; fields are private. */
struct nl_http_server {
  uv_loop_t *loop;
  uv_tcp_t listener;
  nl_http_server_opts_t opts;
  nl_list_t routes;
  nl_list_t conns; /* live and lingering connections */
  nl_list_t dead;  /* those whose handles are closing */
  size_t nconns; /* every connection not yet freed */
  size_t nlive;  /* those not closing */
  size_t nlinger; /* those closing after their last answer: with nlive, what
                     max_conns bounds */
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
/* New connections use tls (a server config, referenced) from now on; open ones
 * keep theirs. For certificate rotation. */
void nl_http_server_set_tls(nl_http_server_t *srv, nl_tls_config_t *tls);
int nl_http_server_listen(nl_http_server_t *srv, const char *host, int port, nl_err_t **err);

/* The bound port, or -1 when not listening. */
int nl_http_server_port(const nl_http_server_t *srv);

/* Closes the listener and every connection (pending responses are aborted),
 * then calls done (may be NULL) from a close callback, once all memory is
 * freed. Calling it again is a no-op. */
void nl_http_server_stop(nl_http_server_t *srv, nl_http_server_done_fn done, void *ctx);

/* ---- responses ---------------------------------------------------------- */

/* The request's body, for a handler of a lazy_body server (elsewhere the
 * body is already there): reads at most max bytes (also bounded by the
 * server's max_body), then calls cb once with it, NUL-terminated and borrowed
 * until the answer. A body over max is answered 413 by the server without
 * being read. cb gets body NULL when there is no answer to give any more (413,
 * a timeout, the client went away): it must still release resp. cb may run
 * inside this call. */
typedef void (*nl_http_body_fn)(void *ctx, nl_http_resp_t *resp, const char *body, size_t len);
void nl_http_resp_read_body(nl_http_resp_t *resp, size_t max, nl_http_body_fn cb, void *ctx);

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

/* ---- streamed responses ------------------------------------------------- */

/* Sends the head with status and the headers added so far, and a body of
 * unknown length (chunked; HTTP/1.0 clients: delimited by the close). Then
 * nl_http_resp_write() any number of times and nl_http_resp_end() once, which
 * releases resp. The connection's timeouts do not run while streaming; the
 * client closing its side ends the stream (the abort callback runs). */
void nl_http_resp_stream(nl_http_resp_t *resp, int status);
/* Queues body bytes (copied). Returns 0, or -1 when the connection is gone. */
int nl_http_resp_write(nl_http_resp_t *resp, const void *data, size_t len);
/* Bytes queued to the peer and not yet written to the socket: a producer stops
 * above its own mark and goes on in the drain callback. 0 when gone. */
size_t nl_http_resp_queued(const nl_http_resp_t *resp);
/* Called (from the server, never from inside a call) each time the queue
 * empties after a write. */
void nl_http_resp_on_drain(nl_http_resp_t *resp, void (*cb)(void *ctx), void *ctx);
/* Ends the body and releases resp. */
void nl_http_resp_end(nl_http_resp_t *resp);

/* ---- taking over the connection (Upgrade) ------------------------------- */

typedef struct nl_http_tunnel nl_http_tunnel_t;

typedef struct nl_http_tunnel_cbs {
  /* Plaintext from the peer (after TLS). Bytes the client sent after the
   * request head come first, on a later loop turn. */
  void (*on_data)(void *ctx, const char *p, size_t n);
  /* The peer closed its side (err NULL) or the connection failed; no more
   * data follows. The tunnel stays open until nl_http_tunnel_close(). */
  void (*on_end)(void *ctx, const nl_err_t *err);
  /* The write queue emptied (optional). */
  void (*on_drain)(void *ctx);
  /* Last call: the tunnel is freed (after nl_http_tunnel_close() or when the
   * server stops). */
  void (*on_close)(void *ctx);
} nl_http_tunnel_cbs_t;

/* Hands the raw connection to the caller: the server writes nothing (the
 * caller writes its own "HTTP/1.1 101 Switching Protocols" head or a proxied
 * one) and reads no more HTTP. Releases resp. Returns NULL when the connection
 * is already gone. */
nl_http_tunnel_t *nl_http_resp_takeover(nl_http_resp_t *resp, const nl_http_tunnel_cbs_t *cbs,
                                        void *ctx);
/* Queues bytes (copied; encrypted under TLS). Returns 0 or -1 with *err. */
int nl_http_tunnel_write(nl_http_tunnel_t *t, const void *data, size_t len, nl_err_t **err);
/* Bytes queued and not yet written to the socket. */
size_t nl_http_tunnel_queued(const nl_http_tunnel_t *t);
/* Back-pressure on the peer: stop (false) or resume (true) reading. */
void nl_http_tunnel_read(nl_http_tunnel_t *t, bool on);
/* Closes after the queued writes; on_close follows. Calling it again is a no-op. */
void nl_http_tunnel_close(nl_http_tunnel_t *t);

#endif
