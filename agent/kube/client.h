/* The API-server client: TLS connections to the apiserver (mbedtls, ALPN h2)
 * carrying every request and watch as HTTP/2 streams (nghttp2), as client-go
 * does; HTTP/1.1 when the server does not offer h2. It runs on the loop and
 * never blocks it. One connection carries everything until the server's
 * concurrent-stream limit is reached; then another opens (up to a bound), and
 * an extra one closes once idle. Watches leave a share of each connection's
 * streams to short requests (Lease, status, events).
 *
 * Connections are state machines (idle, connecting, TLS handshake, ready,
 * draining after GOAWAY, back-off) that reconnect by themselves with jittered
 * back-off. Requests wait (bounded by their timeout) while no connection
 * takes them; a request whose bytes may have reached the server is never
 * replayed.
 *
 * Requests pass a client-side token bucket (kubeAPIQPS/kubeAPIBurst). A 429 or
 * 5xx with Retry-After is retried after that delay, as client-go does (at most
 * 10 times), then returned to the caller.
 *
 * Ownership: the client owns its handles and frees them in close callbacks;
 * nl_kube_client_stop() completes every outstanding request with an NL_ECLOSED
 * error before its done callback runs. */
#ifndef NL_KUBE_CLIENT_H
#define NL_KUBE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <uv.h>

#include "reactor/error.h"

typedef struct nl_kube_client nl_kube_client_t;
typedef struct nl_kube_req nl_kube_req_t;
typedef struct nl_kubeconfig nl_kubeconfig_t; /* agent/kube/kubeconfig.h */

typedef struct nl_kube_client_opts {
  const nl_kubeconfig_t *kubeconfig; /* server, CA, credentials; copied */
  double qps;                        /* kubeAPIQPS (upstream default 50); <= 0: no limit */
  int burst;                         /* kubeAPIBurst (upstream default 100) */
  const char *user_agent;            /* NULL: "nanolet/<version> (linux/<arch>)" */
  uint64_t default_timeout_ms;       /* for requests that set none; 0: 30 s */
  /* Tuning, mostly for tests; 0 takes the default. */
  uint64_t read_idle_timeout_ms;     /* PING after this long without a frame; 0: 30 s */
  uint64_t ping_timeout_ms;          /* close when the PING is not answered; 0: 15 s */
  uint64_t backoff_initial_ms;       /* reconnect back-off; 0: 500 ms */
  uint64_t backoff_max_ms;           /* 0: 7 s (each delay jittered up to 100%) */
  /* Connections: another opens when every stream of the open ones is taken. */
  unsigned max_conns;                /* at most this many at once; 0: 8 */
  uint64_t idle_conn_timeout_ms;     /* an extra one without a stream closes; 0: 90 s */
  /* contentType (--kube-api-content-type): "application/vnd.kubernetes.protobuf"
   * or "application/json" (NULL). nl_kube_request_kind() follows it. */
  const char *content_type;
} nl_kube_client_opts_t;

/* Creates the client; it connects lazily, on the first request. Returns 0, or -1
 * with *err naming the kubeconfig item that cannot be used (unreadable CA file,
 * key not matching the certificate, a server URL that is not https). */
int nl_kube_client_new(nl_kube_client_t **out, uv_loop_t *loop,
                       const nl_kube_client_opts_t *opts, nl_err_t **err);
/* Closes the connection, fails outstanding requests with NL_ECLOSED, then frees
 * the client and calls done (which may be NULL) from a close callback. */
void nl_kube_client_stop(nl_kube_client_t *c, void (*done)(void *ctx), void *ctx);

/* Certificate rotation: new connections present cert_pem/key_pem (PEM; the
 * key may be in the same text as the certificate); the open connection takes
 * no new requests and closes once its streams (watches, a Lease update) have
 * ended, so nothing in flight is lost. Returns 0, or -1 with *err when the pair
 * cannot be used (the old one stays). */
int nl_kube_client_set_cert(nl_kube_client_t *c, const char *cert_pem, const char *key_pem,
                            nl_err_t **err);

/* True while a connection is established and usable. */
bool nl_kube_client_connected(const nl_kube_client_t *c);
/* The server URL ("https://10.0.0.1:6443"). */
const char *nl_kube_client_server(const nl_kube_client_t *c);

typedef struct nl_kube_response {
  int status;          /* HTTP status */
  const char *body;    /* NUL-terminated, "" when empty; valid during the callback */
  size_t body_len;
  const char *content_type; /* "" when none */
} nl_kube_response_t;

/* Called exactly once, never from inside nl_kube_request()/nl_kube_req_cancel().
 * A response with any HTTP status arrives with err == NULL; err is set only when
 * no response could be had (connection, TLS, timeout, cancel):
 *   NL_ETIMEOUT, NL_ECLOSED (cancelled or client stopped), an errno value, or
 *   EPROTO (TLS or protocol failure; the message names the cause, e.g.
 *   "x509: certificate signed by unknown authority"). */
typedef void (*nl_kube_done_fn)(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err);

/* Streaming (watches): the head of the response (its status and Content-Type,
 * "" when none; borrowed), then its body in pieces. A streaming request has no
 * overall timeout beyond timeout_ms to the head. */
typedef void (*nl_kube_head_fn)(void *ctx, int status, const char *content_type);
typedef void (*nl_kube_data_fn)(void *ctx, const char *data, size_t len);

typedef struct nl_kube_request_opts {
  const char *method;       /* "GET", "POST", "PUT", "PATCH", "DELETE" */
  const char *path;         /* "/api/v1/nodes/n1?fieldSelector=..." (escaped by caller) */
  const char *content_type; /* NULL: "application/json" when there is a body */
  const void *body;         /* copied */
  size_t body_len;
  uint64_t timeout_ms;      /* 0: the client's default */
  bool no_rate_limit;       /* skip the token bucket (none use it today) */
  /* Fail at once when a connection attempt fails while it waits (refused,
   * unreachable), as Go's transport does, instead of waiting for the next
   * attempt until the deadline: for callers that retry on their own. */
  bool fail_on_dial;
  /* Accept protobuf, then JSON (agent/kube/pb.h), instead of JSON: for callers
   * that decode the answer with nl_kube_resp_json(). */
  bool accept_protobuf;
  /* Ask for the answer's metadata only (a meta.k8s.io/v1
   * PartialObjectMetadata, protobuf or JSON as accept_protobuf says), for
   * callers that need no more of a write's answer; an older server answers
   * the whole object, so the caller checks the kind. */
  bool accept_metadata;
  /* A write whose answer, on success, would only echo what was sent: the
   * status is all the caller gets (body ""), the 2xx body never crosses the
   * link (over HTTP/2 its stream's window stays closed and the stream is
   * reset after the head: reactor/h2.h). An error's body (a Status) arrives
   * as usual, and over HTTP/1.1 every body does: callers take either. */
  bool head_only;
  /* Streaming: set on_data (and optionally on_head). done still runs once, at
   * the end of the stream, with the final status and an empty body. */
  nl_kube_head_fn on_head;
  nl_kube_data_fn on_data;
} nl_kube_request_opts_t;

/* Starts a request; everything in opts is copied. Never returns NULL: every
 * error arrives through cb. */
nl_kube_req_t *nl_kube_request(nl_kube_client_t *c, const nl_kube_request_opts_t *opts,
                               nl_kube_done_fn cb, void *ctx);
/* A request whose answer is an object of apiVersion/kind, asked for as
 * protobuf (then JSON) when the client's content type is protobuf and
 * agent/kube/pb.c knows the kind (Lease), else as JSON; read it with
 * nl_kube_resp_json(), which takes either. The body obj (may be NULL; not
 * taken) is that object too when opts->content_type is NULL: sent as protobuf
 * in the same case, else as JSON (also when protobuf cannot carry it); with a
 * content type (a patch: "application/merge-patch+json", ...) it goes as JSON
 * of that type. opts->body is ignored. As nl_kube_request() otherwise. */
nl_kube_req_t *nl_kube_request_kind(nl_kube_client_t *c, const nl_kube_request_opts_t *opts,
                                    const char *api_version, const char *kind, const json_t *obj,
                                    nl_kube_done_fn cb, void *ctx);
/* Whether requests of the client's callers prefer protobuf (its content type). */
bool nl_kube_client_protobuf(const nl_kube_client_t *c);

/* Cancels a request whose callback has not run: cb runs later with NL_ECLOSED.
 * A no-op once the result is on its way. */
void nl_kube_req_cancel(nl_kube_req_t *r);
/* From inside r's done callback, when it failed: whether a connection to the
 * server was ever ready while r waited. False: the link failed it (every dial
 * refused, unreachable or timed out, or a TLS failure), not the server. */
bool nl_kube_req_had_conn(const nl_kube_req_t *r);

/* For a non-2xx response: fills *err with the apiserver's Status message
 * ("nodes \"n1\" is forbidden: User \"system:node:n2\" cannot ...") or, when the
 * body is no Status, client-go's wording for the code (401: "the server has asked
 * for the client to provide credentials"; otherwise "the server responded with
 * the status code <code> but did not return more information", ...); code is
 * the HTTP status. Always returns -1. The Status reason: agent/kube/status.h. */
/* Implemented in agent/kube/status.c. */
int nl_kube_status_err(const nl_kube_response_t *resp, nl_err_t **err);

#endif
