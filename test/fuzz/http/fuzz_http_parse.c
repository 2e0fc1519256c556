/* libFuzzer target for the HTTP/1.1 parsing path (reactor/http_parse.c over
 * llhttp), in both directions: requests as the server reads them and responses
 * as the client reads them, fed in uneven pieces, with pipelining and EOF.
 *
 * Input: byte 0 selects the mode (bit 0: response), whether responses answer
 * HEAD (bit 1), and the piece size (bits 2..7); the rest is the stream. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reactor/http_parse.h"

typedef struct seen {
  bool head_only;
  size_t body;
  int messages;
} seen_t;

static int on_head(void *ctx, nl_http_msg_t *m) {
  seen_t *s = ctx;
  for (size_t i = 0; i < m->headers.n; i++) {
    assert(m->headers.v[i].name && m->headers.v[i].value);
    (void)strlen(m->headers.v[i].value);
  }
  if (m->method) assert(m->target);
  return s->head_only ? 1 : 0;
}

static int on_body(void *ctx, const char *p, size_t n) {
  seen_t *s = ctx;
  s->body += n;
  if (n) (void)p[n - 1]; /* the bytes must be readable */
  return 0;
}

static int on_complete(void *ctx, nl_http_msg_t *m) {
  ((seen_t *)ctx)->messages++;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  bool response = data[0] & 1;
  seen_t seen = {.head_only = (data[0] & 2) != 0};
  size_t piece = 1 + (data[0] >> 2);
  data++;
  size--;
  nl_http_parser_limits_t lim = {.max_head = 1024, .max_headers = 16, .max_body = 4096};
  nl_http_parser_cbs_t cbs = {on_head, on_body, on_complete};
  nl_http_parser_t p;
  nl_http_parser_init(&p, !response, &lim, &cbs, &seen);
  size_t off = 0;
  bool stop = false;
  while (off < size && !stop) {
    size_t n = size - off < piece ? size - off : piece;
    const char *chunk = (const char *)data + off;
    while (n > 0) {
      size_t used = 0;
      nl_err_t *err = NULL;
      int rc = nl_http_parser_feed(&p, chunk, n, &used, &err);
      assert(used <= n);
      if (rc < 0) {
        assert(err && err->msg);
        nl_err_free(&err);
        stop = true;
        break;
      }
      off += used;
      chunk += used;
      n -= used;
      if (rc == NL_HTTP_FEED_DONE) {
        bool more = p.msg.keep_alive && !p.msg.upgrade;
        nl_http_parser_next(&p);
        if (!more) {
          stop = true;
          break;
        }
      }
    }
  }
  if (!stop) {
    nl_err_t *err = NULL;
    if (nl_http_parser_finish(&p, &err) < 0) assert(err);
    nl_err_free(&err);
  }
  assert(seen.body <= lim.max_body * (size_t)(seen.messages + 1));
  nl_http_parser_free(&p);
  return 0;
}
