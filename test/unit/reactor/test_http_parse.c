#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>

#include "reactor/http_parse.h"

/* An accumulator, as nghttp2's tests keep one: what the callbacks saw. */
typedef struct acc {
  int heads, completes;
  nl_buf_t body;
  char method[16], target[64];
  int status;
  bool keep_alive;
  int head_rc;
} acc_t;

static int a_head(void *ctx, nl_http_msg_t *m) {
  acc_t *a = ctx;
  a->heads++;
  if (m->method) snprintf(a->method, sizeof(a->method), "%s", m->method);
  if (m->target) snprintf(a->target, sizeof(a->target), "%s", m->target);
  a->status = m->status;
  return a->head_rc;
}

static int a_body(void *ctx, const char *p, size_t n) {
  nl_buf_append(&((acc_t *)ctx)->body, p, n);
  return 0;
}

static int a_complete(void *ctx, nl_http_msg_t *m) {
  acc_t *a = ctx;
  a->completes++;
  a->keep_alive = m->keep_alive;
  return 0;
}

static const nl_http_parser_cbs_t cbs = {a_head, a_body, a_complete};

static void request_byte_by_byte(void **state) {
  const char req[] = "POST /x?y=1 HTTP/1.1\r\nHost: h\r\nX-A:  spaced \t\r\nX-A: two\r\n"
                     "Content-Length: 3\r\n\r\nabc";
  acc_t a = {0};
  nl_http_parser_t p;
  nl_http_parser_init(&p, true, NULL, &cbs, &a);
  size_t used;
  for (size_t i = 0; i < sizeof(req) - 1; i++) {
    int rc = nl_http_parser_feed(&p, req + i, 1, &used, NULL);
    assert_int_equal(used, 1);
    assert_int_equal(rc, i == sizeof(req) - 2 ? NL_HTTP_FEED_DONE : NL_HTTP_FEED_MORE);
  }
  assert_string_equal(a.method, "POST");
  assert_string_equal(a.target, "/x?y=1");
  assert_string_equal(p.msg.headers.v[1].value, "spaced");
  assert_string_equal(nl_http_headers_get(&p.msg.headers, "x-a"), "spaced");
  assert_int_equal(p.msg.headers.n, 4);
  assert_int_equal(p.msg.content_length, 3);
  assert_true(a.keep_alive);
  nl_buf_puts(&a.body, "");
  assert_string_equal(a.body.data, "abc");
  nl_http_parser_next(&p);
  nl_http_parser_free(&p);
  nl_buf_free(&a.body);
}

static void pipelined_requests(void **state) {
  const char two[] = "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.0\r\n\r\n";
  acc_t a = {0};
  nl_http_parser_t p;
  nl_http_parser_init(&p, true, NULL, &cbs, &a);
  size_t used;
  assert_int_equal(nl_http_parser_feed(&p, two, strlen(two), &used, NULL), NL_HTTP_FEED_DONE);
  assert_int_equal(used, strlen("GET /a HTTP/1.1\r\n\r\n"));
  assert_string_equal(a.target, "/a");
  assert_true(a.keep_alive);
  /* Feeding before next() is a caller bug and says so. */
  nl_http_parser_next(&p);
  assert_int_equal(nl_http_parser_feed(&p, two + used, strlen(two) - used, &used, NULL),
                   NL_HTTP_FEED_DONE);
  assert_string_equal(a.target, "/b");
  assert_false(a.keep_alive); /* HTTP/1.0 */
  nl_http_parser_next(&p);
  nl_err_t *err = NULL;
  int rc = nl_http_parser_finish(&p, &err);
  if (rc != NL_HTTP_FEED_MORE) fail_msg("%s", nl_err_msg(err));
  nl_http_parser_free(&p);
}

static void chunked_and_eof_responses(void **state) {
  const char r[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n";
  acc_t a = {0};
  nl_http_parser_t p;
  nl_http_parser_init(&p, false, NULL, &cbs, &a);
  size_t used;
  assert_int_equal(nl_http_parser_feed(&p, r, strlen(r), &used, NULL), NL_HTTP_FEED_DONE);
  assert_int_equal(used, strlen(r));
  assert_true(p.msg.chunked);
  assert_int_equal(a.status, 200);
  nl_buf_puts(&a.body, "");
  assert_string_equal(a.body.data, "abcde");
  nl_http_parser_free(&p);
  nl_buf_free(&a.body);

  /* No length: the body runs to the end of the connection. */
  acc_t b = {0};
  nl_http_parser_init(&p, false, NULL, &cbs, &b);
  const char e[] = "HTTP/1.1 200 OK\r\n\r\nuntil eof";
  assert_int_equal(nl_http_parser_feed(&p, e, strlen(e), &used, NULL), NL_HTTP_FEED_MORE);
  assert_true(nl_http_parser_busy(&p));
  assert_int_equal(nl_http_parser_finish(&p, NULL), NL_HTTP_FEED_DONE);
  nl_buf_puts(&b.body, "");
  assert_string_equal(b.body.data, "until eof");
  nl_http_parser_free(&p);
  nl_buf_free(&b.body);

  /* Cut short. */
  acc_t c = {0};
  nl_err_t *err = NULL;
  nl_http_parser_init(&p, false, NULL, &cbs, &c);
  const char s[] = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc";
  assert_int_equal(nl_http_parser_feed(&p, s, strlen(s), &used, NULL), NL_HTTP_FEED_MORE);
  assert_int_equal(nl_http_parser_finish(&p, &err), -1);
  assert_int_equal(err->code, EPROTO);
  assert_non_null(strstr(err->msg, "closed before the response was complete"));
  nl_err_free(&err);
  nl_http_parser_free(&p);
  nl_buf_free(&c.body);

  /* The answer to HEAD has a length but no body. */
  acc_t d = {.head_rc = 1};
  nl_http_parser_init(&p, false, NULL, &cbs, &d);
  const char h[] = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n";
  assert_int_equal(nl_http_parser_feed(&p, h, strlen(h), &used, NULL), NL_HTTP_FEED_DONE);
  nl_http_parser_free(&p);
}

static void limits_and_errors(void **state) {
  nl_http_parser_t p;
  acc_t a = {0};
  nl_err_t *err = NULL;
  size_t used;
  nl_http_parser_limits_t lim = {.max_head = 64, .max_headers = 2, .max_body = 4};

  nl_http_parser_init(&p, true, &lim, &cbs, &a);
  char big[200];
  snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nX: %080d\r\n\r\n", 0);
  assert_int_equal(nl_http_parser_feed(&p, big, strlen(big), &used, &err), -1);
  assert_int_equal(nl_http_parser_failure(&p), NL_HTTP_PERR_HEAD_TOO_BIG);
  assert_int_equal(err->code, EMSGSIZE);
  assert_string_equal(err->msg, "http: message head exceeds 64 bytes");
  nl_err_free(&err);
  /* Stays failed. */
  assert_int_equal(nl_http_parser_feed(&p, "x", 1, &used, &err), -1);
  nl_err_free(&err);
  nl_http_parser_free(&p);

  nl_http_parser_init(&p, true, &lim, &cbs, &a);
  const char many[] = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
  assert_int_equal(nl_http_parser_feed(&p, many, strlen(many), &used, &err), -1);
  assert_string_equal(err->msg, "http: more than 2 headers");
  nl_err_free(&err);
  nl_http_parser_free(&p);

  nl_http_parser_init(&p, true, &lim, &cbs, &a);
  const char body[] = "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
  assert_int_equal(nl_http_parser_feed(&p, body, strlen(body), &used, &err), -1);
  assert_int_equal(nl_http_parser_failure(&p), NL_HTTP_PERR_BODY_TOO_BIG);
  nl_err_free(&err);
  nl_http_parser_free(&p);

  /* A chunked body is counted as it arrives. */
  nl_http_parser_init(&p, true, &lim, &cbs, &a);
  const char ch[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n";
  assert_int_equal(nl_http_parser_feed(&p, ch, strlen(ch), &used, &err), -1);
  assert_int_equal(nl_http_parser_failure(&p), NL_HTTP_PERR_BODY_TOO_BIG);
  nl_err_free(&err);
  nl_http_parser_free(&p);
  nl_buf_free(&a.body);

  const char *bad[] = {"GET / HTTP/1.1\r\nBad Header\r\n\r\n", "GET / HTTP/9.9\r\n\r\n",
                       "BREW / HTTP/1.1\r\n\r\n",
                       "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                       "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    acc_t b = {0};
    nl_http_parser_init(&p, true, NULL, &cbs, &b);
    assert_int_equal(nl_http_parser_feed(&p, bad[i], strlen(bad[i]), &used, &err), -1);
    assert_int_equal(nl_http_parser_failure(&p), NL_HTTP_PERR_SYNTAX);
    assert_int_equal(err->code, EPROTO);
    assert_non_null(strstr(err->msg, "http: malformed request: "));
    nl_err_free(&err);
    nl_http_parser_free(&p);
  }
}

static void headers_list(void **state) {
  nl_http_headers_t h = NL_HTTP_HEADERS_INIT;
  nl_http_headers_add(&h, "A", "1");
  nl_http_headers_add(&h, "b", "2");
  nl_http_headers_add(&h, "a", "3");
  assert_string_equal(nl_http_headers_get(&h, "a"), "1");
  nl_http_headers_t c = NL_HTTP_HEADERS_INIT;
  nl_http_headers_copy(&c, &h);
  assert_int_equal(nl_http_headers_del(&h, "A"), 2);
  assert_int_equal(h.n, 1);
  assert_null(nl_http_headers_get(&h, "a"));
  assert_int_equal(c.n, 3);
  nl_http_headers_free(&h);
  nl_http_headers_free(&c);
  assert_string_equal(nl_http_status_text(404), "Not Found");
  assert_string_equal(nl_http_status_text(299), "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(request_byte_by_byte), cmocka_unit_test(pipelined_requests),
      cmocka_unit_test(chunked_and_eof_responses), cmocka_unit_test(limits_and_errors),
      cmocka_unit_test(headers_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
