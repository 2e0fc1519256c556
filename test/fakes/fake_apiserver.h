/* A scripted fake API server for tests: TLS on 127.0.0.1 (an ephemeral port)
 * with ALPN h2, driven by nghttp2's server session on the test's own loop; or
 * HTTP/1.1 only (reactor/http_server.c). Requests are answered from rules,
 * matched in order by method and path prefix; a rule is used once unless it
 * repeats. A request no rule matches gets 404 with a Status body. Every request
 * is recorded so tests can assert what reached the server.
 *
 * Certificates come from test/fixtures/tls (server.crt, CN localhost with IP
 * SANs 127.0.0.1 and ::1). */
#ifndef NL_FAKE_APISERVER_H
#define NL_FAKE_APISERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct nl_fake_as nl_fake_as_t;

typedef enum nl_fake_as_action {
  FAKE_AS_REPLY,   /* answer with the reply below */
  FAKE_AS_GOAWAY,  /* GOAWAY first (last stream id: this one, or the one before
                    * with goaway_refuse), then the reply unless refused */
  FAKE_AS_RST,     /* RST_STREAM(rst_code) after delay_ms (or after the chunks) */
  FAKE_AS_CLOSE,   /* close the socket after delay_ms (or after the chunks): a torn stream */
  FAKE_AS_SILENT,  /* stop reading and writing, socket left open: a dead peer */
  FAKE_AS_NOTHING, /* never answer (the request stays open) */
} nl_fake_as_action_t;

typedef struct nl_fake_as_rule {
  const char *method;      /* NULL: any */
  const char *path;        /* prefix of the request path (query included); NULL: any */
  bool repeat;             /* not consumed by a match */
  nl_fake_as_action_t action;
  int status;              /* 0: 200 */
  const char *content_type;/* NULL: application/json */
  const char *retry_after; /* Retry-After header, NULL: none */
  const char *body;        /* NULL: "" */
  size_t body_len;         /* 0: strlen(body); set for a binary body (protobuf) */
  uint64_t delay_ms;       /* before the head (h2 only) */
  /* Streaming (h2 only): after the head and body, these chunks, chunk_ms apart;
   * the stream ends after the last unless hold or an action follows. */
  const char *const *chunks;
  size_t n_chunks;
  uint64_t chunk_ms;
  bool hold;
  bool goaway_refuse;      /* FAKE_AS_GOAWAY: last stream id excludes this request */
  uint32_t rst_code;       /* FAKE_AS_RST: an HTTP/2 error code */
} nl_fake_as_rule_t;

typedef struct nl_fake_as_opts {
  bool http1_only;          /* ALPN http/1.1 and an HTTP/1.1 server */
  bool require_client_cert; /* verify client certificates against ca.crt */
  uint32_t stall_window;    /* > 0: this initial window and no WINDOW_UPDATE ever */
  uint32_t max_streams;     /* SETTINGS_MAX_CONCURRENT_STREAMS; 0: 100 */
} nl_fake_as_opts_t;

/* A request as it arrived; strings owned by the fake. */
typedef struct nl_fake_as_req {
  char *method, *path, *authority, *authorization, *user_agent, *content_type, *accept;
  char *body;
  size_t body_len;
  int conn;                 /* 1-based number of the TCP connection it came on */
} nl_fake_as_req_t;

/* Starts listening. opts may be NULL. Aborts the test on failure. */
nl_fake_as_t *nl_fake_as_start(uv_loop_t *loop, const nl_fake_as_opts_t *opts);
/* Closes every connection and the listener; the fake is freed from close
 * callbacks (run the loop). */
void nl_fake_as_stop(nl_fake_as_t *f);
/* Stops listening (connections then fail with "connection refused") and closes
 * the connections; nl_fake_as_listen() starts again on the same port. */
void nl_fake_as_down(nl_fake_as_t *f);
void nl_fake_as_listen(nl_fake_as_t *f);

int nl_fake_as_port(const nl_fake_as_t *f);
/* "https://127.0.0.1:<port>" */
const char *nl_fake_as_url(const nl_fake_as_t *f);
void nl_fake_as_add(nl_fake_as_t *f, const nl_fake_as_rule_t *rule);

size_t nl_fake_as_nreqs(const nl_fake_as_t *f);
const nl_fake_as_req_t *nl_fake_as_req(const nl_fake_as_t *f, size_t i);
/* Connections accepted so far, those still open, and the PINGs received. */
int nl_fake_as_nconns(const nl_fake_as_t *f);
int nl_fake_as_nopen(const nl_fake_as_t *f);
int nl_fake_as_npings(const nl_fake_as_t *f);

#endif
