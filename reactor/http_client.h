/* An asynchronous HTTP/1.1 client on the loop: one request per connection
 * (Connection: close, as upstream probes use DisableKeepAlives), http and https,
 * numeric or DNS hosts (resolved with uv_getaddrinfo, never blocking the loop),
 * one timeout for the whole exchange, a body cap, redirects as Go's client
 * follows them, and a streaming mode for watches (chunked decoding by llhttp).
 *
 * Errors read like Go's net/http ones, because users compare them with the
 * upstream kubelet's events:
 *   Get "http://127.0.0.1:1/healthz": dial tcp 127.0.0.1:1: connect: connection refused
 *   Get "http://...": context deadline exceeded (Client.Timeout exceeded while awaiting headers)
 * Codes: an errno value for system errors (ECONNREFUSED, ECONNRESET, ...),
 * NL_ETIMEOUT for the timeout, NL_ECLOSED for cancellation, NL_EINVAL for a bad
 * URL or option, EPROTO for a malformed response or a TLS failure, EMSGSIZE for a
 * body over the cap (unless truncating), EHOSTUNREACH for a failed lookup. */
#ifndef NL_HTTP_CLIENT_H
#define NL_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "reactor/error.h"
#include "reactor/http_parse.h"
#include "reactor/tls.h"

typedef struct nl_http_call nl_http_call_t;

typedef struct nl_http_response {
  int status;
  nl_http_headers_t headers;
  char *body; /* NUL-terminated ("" when empty); NULL in streaming mode */
  size_t body_len;
  bool truncated; /* the body was longer than body_cap and was cut there */
  char *url;      /* the URL that produced this response (after redirects) */
  int redirects;  /* redirects followed */
} nl_http_response_t;

/* Called exactly once per call, never from inside nl_http_request() or
 * nl_http_cancel(). On success err is NULL and resp is set; on failure resp is
 * NULL. Both are freed after the callback returns; it may keep fields by
 * stealing them (nl_steal(&resp->body)). The call handle is invalid after it. */
typedef void (*nl_http_done_fn)(void *ctx, nl_http_response_t *resp, const nl_err_t *err);

/* Streaming: the final response's head (status, headers, url; no body). */
typedef void (*nl_http_head_fn)(void *ctx, const nl_http_response_t *resp);
/* Streaming: a piece of the decoded body. May call nl_http_cancel(). */
typedef void (*nl_http_chunk_fn)(void *ctx, const char *data, size_t len);

typedef struct nl_http_request_opts {
  const char *method; /* NULL: "GET" */
  const char *url;    /* "http://host[:port]/path?query" or https; required */
  /* Extra headers, in order; a name may repeat. A "Host" entry overrides the
   * Host header (upstream probes take it from httpHeaders). User-Agent defaults
   * to "nanolet/<version>" when absent. */
  const nl_http_header_t *headers;
  size_t n_headers;
  const char *host;   /* Host header override; wins over a "Host" entry */
  const void *body;   /* sent with Content-Length; copied */
  size_t body_len;
  uint64_t timeout_ms; /* DNS + connect + TLS + whole response (in streaming mode:
                          until the head); 0: none */
  size_t body_cap;     /* 0: 10 MiB */
  bool truncate_body;  /* over the cap: true keeps body_cap bytes and succeeds
                          with truncated set (probes read at most 10 KiB);
                          false fails with EMSGSIZE */
  nl_tls_config_t *tls;    /* a client config, required for https (referenced) */
  const char *server_name; /* TLS SNI and verified name; NULL: the URL's host */
  /* Redirects (301, 302, 303, 307, 308 with a Location), as Go's client: 0
   * returns them to the caller; N > 0 follows them, and the Nth fails with
   * "stopped after N redirects" (Go's default is 10). */
  int max_redirects;
  /* A redirect to another host name is not followed: its 3xx response is the
   * result (upstream probes, followNonLocalRedirects=false). */
  bool redirect_same_host_only;
  nl_http_head_fn on_head;   /* streaming when on_chunk is set */
  nl_http_chunk_fn on_chunk;
  void *stream_ctx;
} nl_http_request_opts_t;

/* Starts a request; everything in opts is copied. Never returns NULL: errors,
 * a bad URL included, arrive through cb. */
nl_http_call_t *nl_http_request(uv_loop_t *loop, const nl_http_request_opts_t *opts,
                                nl_http_done_fn cb, void *ctx);

/* Cancels a call whose callback has not run yet: cb runs once, later, with an
 * NL_ECLOSED error "... : request canceled". A no-op from inside its callback
 * or once a result is already on its way. */
void nl_http_cancel(nl_http_call_t *call);

/* A parsed http(s) URL; every string owned. */
typedef struct nl_http_url {
  bool https;
  char *host; /* without brackets */
  int port;
  char *path; /* path and query, at least "/" */
} nl_http_url_t;

/* Parses an absolute http/https URL. Returns 0, or -1 with *err naming the URL. */
int nl_http_url_parse(nl_http_url_t *u, const char *url, nl_err_t **err);
void nl_http_url_free(nl_http_url_t *u);

#endif
