/* Internal to the API client: the client (client.c), its connections (conn.c)
 * and its requests (request.c). */
#ifndef NL_KUBE_CLIENT_INT_H
#define NL_KUBE_CLIENT_INT_H

#include <netdb.h>

#include "agent/kube/client.h"
#include "agent/kube/h2.h"
#include "agent/kube/ratelimit.h"
#include "reactor/backoff.h"
#include "reactor/buf.h"
#include "reactor/h2conn.h"
#include "reactor/http_client.h"
#include "reactor/list.h"
#include "reactor/tls.h"

#define NL_KUBE_WINDOW (16u * 1024 * 1024)   /* per stream and per connection */
#define NL_KUBE_MAX_BODY (128u * 1024 * 1024) /* a buffered (not streamed) response */
#define NL_KUBE_MAX_RETRIES 10                /* client-go's maxRetries */
/* A connection attempt (lookup, connect, TLS handshake) gives up after this:
 * client-go's dialer times out at 30 s, so a server that drops packets
 * sends the client to its back-off instead of waiting for the kernel. */
#define NL_KUBE_DIAL_TIMEOUT_MS 30000

/* The client's dialer: how the next connection gets opened. Ready connections
 * (in conns) carry streams whatever the state; draining ones (after GOAWAY or
 * a new certificate) live on until their streams end. */
typedef enum nl_kube_state {
  NL_KUBE_IDLE,       /* no attempt; one starts when a request waits that no
                       * ready connection can take, below the bound */
  NL_KUBE_CONNECTING, /* dialing is resolving, connecting or in the TLS handshake */
  NL_KUBE_BACKOFF,    /* the last attempt failed; backoff_timer runs */
  NL_KUBE_HTTP1,      /* the server offers no h2: one connection per request */
  NL_KUBE_STOPPING,
} nl_kube_state_t;

/* One connection: its state is the driver's (h2c.state: DIALING, READY,
 * DRAINING after GOAWAY or a new certificate, ...), closed once detached. */
typedef struct nl_kube_conn {
  nl_kube_client_t *client;
  nl_list_t link;   /* in client->conns */
  nl_h2conn_t h2c;  /* the connection (reactor/h2conn.h); h2c.h2 the session */
  nl_list_t reqs;   /* requests with a stream on this connection */
  bool was_ready;
  bool closed;      /* detached from the client; freed once the driver has closed */
  bool dirty;       /* streams submitted, not yet flushed */
} nl_kube_conn_t;

typedef enum nl_kube_req_state {
  RQ_THROTTLED, /* waiting for a token of the rate limiter */
  RQ_WAITING,   /* waiting for a connection (client->waiting) */
  RQ_ACTIVE,    /* a stream on conn, or an HTTP/1.1 call */
  RQ_RETRY,     /* waiting out a Retry-After */
  RQ_DONE,      /* the result is decided; delivered from the timer */
} nl_kube_req_state_t;

struct nl_kube_req {
  nl_kube_client_t *client;
  nl_list_t link;     /* client->waiting or conn->reqs */
  nl_list_t all;      /* client->reqs until delivered */
  nl_kube_req_state_t state;
  uv_timer_t timer;   /* deadline, throttle or retry wake-up, then delivery */
  nl_kube_conn_t *conn;
  nl_kube_h2_stream_t stream;
  nl_http_call_t *h1;
  char *method, *path, *url, *content_type;
  char *body;
  size_t body_len;
  uint64_t deadline;  /* loop ms; UINT64_MAX after a stream's head */
  uint64_t wake;      /* RQ_THROTTLED, RQ_RETRY: when to go on */
  uint64_t started;   /* loop ms at nl_kube_request(), for the -v=6 line */
  int retries;
  bool no_rate_limit;
  bool fail_on_dial;
  bool accept_protobuf;
  bool accept_metadata;
  bool head_only;
  bool had_conn;      /* a connection was ready while it waited */
  bool retry_pending; /* a streaming answer to be retried: not the caller's */
  nl_kube_done_fn cb;
  nl_kube_head_fn on_head;
  nl_kube_data_fn on_data;
  void *ctx;
  int status;
  char *resp_type;
  nl_buf_t resp_body;
  nl_err_t *err;
};

struct nl_kube_client {
  uv_loop_t *loop;
  nl_kube_state_t state;
  char *server;       /* as configured */
  nl_http_url_t url;  /* host and port to dial */
  char *prefix;       /* the server URL's path, "" or "/prefix" */
  char *authority;
  char *server_name;  /* verified and sent as SNI */
  nl_tls_config_t *tls;
  char *ca_file, *ca_pem; /* to build the TLS config again with a new certificate */
  bool insecure;
  char *authorization;
  char *user_agent;
  bool protobuf;       /* contentType is protobuf */
  uint64_t default_timeout_ms, read_idle_ms, ping_timeout_ms, idle_conn_ms;
  unsigned max_conns;
  bool at_bound;      /* every connection allowed is open and full (logged once) */
  nl_kube_ratelimit_t rl;
  nl_backoff_t backoff;
  uv_timer_t backoff_timer;
  nl_kube_conn_t *dialing; /* the connection being opened (CONNECTING) */
  nl_list_t conns;    /* every connection not yet closed, oldest first */
  nl_list_t waiting;
  nl_list_t reqs;
  nl_err_t *last_err; /* why the last connection attempt failed */
  int live;           /* the timer, requests and connections not yet freed */
  void (*done)(void *ctx);
  void *done_ctx;
};

/* conn.c */
/* Opens a connection: it is c->dialing until ready or failed. */
void nl_kube__conn_start(nl_kube_client_t *c);
/* Detaches conn from its client: its requests fail with err (those never sent
 * go back to waiting), its handles close, and it frees itself. */
void nl_kube__conn_close(nl_kube_conn_t *conn, const nl_err_t *err);
/* Takes no new streams: those in flight finish on it, then it closes (the
 * client's credentials changed). */
void nl_kube__conn_drain(nl_kube_conn_t *conn);
/* Whether the connection takes r as a new stream now: a watch leaves the
 * connection's reserved streams to short requests. */
bool nl_kube__conn_takes(const nl_kube_conn_t *conn, const nl_kube_req_t *r);
/* Asks for what the session holds to be sent (once per loop turn). */
void nl_kube__conn_flush(nl_kube_conn_t *conn);

/* client.c: the client's connection state machine */
/* Places waiting requests on ready connections, and opens a connection when
 * one waits that none can take. */
void nl_kube__step(nl_kube_client_t *c);
size_t nl_kube__client_nready(const nl_kube_client_t *c);
/* The TLS handshake is done; h2 false: the server chose HTTP/1.1. */
void nl_kube__conn_ready(nl_kube_client_t *c, nl_kube_conn_t *conn, bool h2);
/* The connection failed before it was ready (err), or was lost, drained or
 * closed. */
void nl_kube__conn_gone(nl_kube_client_t *c, nl_kube_conn_t *conn, const nl_err_t *err);
/* A request or connection of c was freed (c->live drops); frees a stopping
 * client with nothing left. */
void nl_kube__client_put(nl_kube_client_t *c);

/* request.c */
void nl_kube__req_submit(nl_kube_req_t *r, nl_kube_conn_t *conn, int *rc);
/* Ends a request on a broken connection: back to waiting when the server
 * never saw it, else failed with err. */
void nl_kube__req_conn_lost(nl_kube_req_t *r, const nl_err_t *err);
/* Sends a waiting request as its own HTTP/1.1 call (state HTTP1). */
void nl_kube__req_h1_start(nl_kube_req_t *r);
/* Fails a request not yet done with NL_ECLOSED (the client stops). */
void nl_kube__req_stop(nl_kube_req_t *r);
/* A connection attempt failed in a way waiting cannot mend (TLS: an untrusted
 * or mismatched certificate): a request that never had a connection fails now
 * with err, as a dial error in client-go does. */
void nl_kube__req_dial_failed(nl_kube_req_t *r, const nl_err_t *err);

#endif
