/* HTTP/1.1 message parsing on llhttp, with no I/O (as nghttp2's session): feed
 * bytes in, get a parsed head, body chunks and a completion out. Used by the HTTP
 * server (requests) and client (responses), and fuzzed on bytes alone.
 *
 * Limits guard the agent against a hostile peer: the head (start line and
 * headers) and the body are capped, and the parser fails with a clear error. */
#ifndef NL_HTTP_PARSE_H
#define NL_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "reactor/buf.h"
#include "reactor/error.h"

/* ---- header lists ------------------------------------------------------- */

typedef struct nl_http_header {
  char *name;  /* owned, as received (case kept) */
  char *value; /* owned, surrounding whitespace removed */
} nl_http_header_t;

/* An ordered list; a name may repeat (multiple values). Owns its strings. */
typedef struct nl_http_headers {
  nl_http_header_t *v;
  size_t n;
  size_t cap;
} nl_http_headers_t;

#define NL_HTTP_HEADERS_INIT {NULL, 0, 0}

void nl_http_headers_add(nl_http_headers_t *h, const char *name, const char *value);
void nl_http_headers_addn(nl_http_headers_t *h, const char *name, size_t nlen,
                          const char *value, size_t vlen);
/* The first value of `name` (compared case-insensitively), or NULL. Borrowed. */
const char *nl_http_headers_get(const nl_http_headers_t *h, const char *name);
/* Removes every header called `name`; returns how many were removed. */
size_t nl_http_headers_del(nl_http_headers_t *h, const char *name);
void nl_http_headers_copy(nl_http_headers_t *dst, const nl_http_headers_t *src);
void nl_http_headers_free(nl_http_headers_t *h);

/* ---- messages ----------------------------------------------------------- */

typedef struct nl_http_msg {
  char *method;  /* requests: "GET", ...; NULL in responses. Owned. */
  char *target;  /* requests: the request-target as sent ("/a?b=c"). Owned. */
  int status;    /* responses: the status code */
  uint8_t major, minor;
  nl_http_headers_t headers;
  int64_t content_length; /* -1 when the message has none */
  bool chunked;
  bool keep_alive; /* valid from on_complete on */
  bool upgrade;    /* an Upgrade/CONNECT message; the parser stops after it */
} nl_http_msg_t;

typedef struct nl_http_parser_limits {
  size_t max_head;    /* start line + headers in bytes; 0 = NL_HTTP_DEFAULT_MAX_HEAD */
  size_t max_headers; /* header count; 0 = NL_HTTP_DEFAULT_MAX_HEADERS */
  uint64_t max_body;  /* body bytes per message; 0 = unlimited */
} nl_http_parser_limits_t;

#define NL_HTTP_DEFAULT_MAX_HEAD (16 * 1024)
#define NL_HTTP_DEFAULT_MAX_HEADERS 100

/* Why a parse failed; nl_err_t.code of the error is the errno value below. */
enum {
  NL_HTTP_PERR_SYNTAX = 1,    /* EPROTO: malformed message */
  NL_HTTP_PERR_HEAD_TOO_BIG,  /* EMSGSIZE: head or header count over limit */
  NL_HTTP_PERR_BODY_TOO_BIG,  /* EMSGSIZE: body over max_body */
  NL_HTTP_PERR_CALLBACK,      /* a callback returned an error (its code kept) */
};

/* Callbacks may be NULL. Each returns 0 to go on or -1 to stop parsing; a
 * callback that stops may set the parser's error first with
 * nl_http_parser_fail() (otherwise a generic one is set). on_head may return 1:
 * "this message has no body" (the response to a HEAD request), or
 * NL_HTTP_HEAD_PAUSE: stop after the head, before any body byte, until
 * nl_http_parser_resume() (a server reads a body only once the request is
 * authorized). */
#define NL_HTTP_HEAD_PAUSE 2
typedef struct nl_http_parser_cbs {
  int (*on_head)(void *ctx, nl_http_msg_t *msg);
  int (*on_body)(void *ctx, const char *p, size_t n);
  int (*on_complete)(void *ctx, nl_http_msg_t *msg);
} nl_http_parser_cbs_t;

/* Embedded in its owner. */
typedef struct nl_http_parser {
  llhttp_t ll;
  llhttp_settings_t settings;
  nl_http_parser_cbs_t cbs;
  void *ctx;
  nl_http_parser_limits_t limits;
  nl_http_msg_t msg;
  nl_buf_t field, value, url;
  size_t head_bytes;
  uint64_t body_bytes;
  bool in_head;
  bool in_message; /* begun and not completed */
  bool completed; /* a message completed; nl_http_parser_next() before more */
  bool head_paused; /* on_head paused; nl_http_parser_resume() before more */
  int perr;       /* NL_HTTP_PERR_* of the failure, 0 if none */
  nl_err_t *err;
} nl_http_parser_t;

/* request: true to parse requests, false for responses. */
void nl_http_parser_init(nl_http_parser_t *p, bool request, const nl_http_parser_limits_t *limits,
                         const nl_http_parser_cbs_t *cbs, void *ctx);
void nl_http_parser_free(nl_http_parser_t *p);

enum { NL_HTTP_FEED_MORE = 0, NL_HTTP_FEED_DONE = 1, NL_HTTP_FEED_HEAD = 2 };

/* Parses up to len bytes. Returns NL_HTTP_FEED_MORE when all bytes were consumed
 * and the message is not complete yet, NL_HTTP_FEED_DONE when a message completed
 * (on_complete ran) after *consumed bytes: the rest belongs to the next message
 * (pipelining) and must be fed after nl_http_parser_next(); NL_HTTP_FEED_HEAD
 * when on_head paused after *consumed bytes (the body's bytes follow, fed after
 * nl_http_parser_resume()). Returns -1 on a
 * malformed message, an exceeded limit or a callback that stopped; *err (if err
 * is not NULL) gets a copy of the error, and the parser stays failed. */
int nl_http_parser_feed(nl_http_parser_t *p, const char *data, size_t len, size_t *consumed,
                        nl_err_t **err);

/* The peer closed its side. Completes a message delimited by end of connection
 * (a response without Content-Length). Returns NL_HTTP_FEED_DONE if a message
 * completed now, NL_HTTP_FEED_MORE if nothing was pending (clean EOF between
 * messages), -1 (with *err) for a message cut short. */
int nl_http_parser_finish(nl_http_parser_t *p, nl_err_t **err);

/* Goes on with the body of a message whose on_head paused. */
void nl_http_parser_resume(nl_http_parser_t *p);

/* Releases the completed message and gets ready for the next one. */
void nl_http_parser_next(nl_http_parser_t *p);

/* True while a message has started but not completed. */
bool nl_http_parser_busy(const nl_http_parser_t *p);

/* For callbacks that stop parsing: records why (code is an errno or NL_E*). */
void nl_http_parser_fail(nl_http_parser_t *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The failure kind (NL_HTTP_PERR_*), 0 while healthy. */
static inline int nl_http_parser_failure(const nl_http_parser_t *p) { return p->perr; }

/* The reason phrase of a status code ("Not Found"), "" for unknown codes. */
const char *nl_http_status_text(int status);

#endif
