#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "reactor/http_client.h"
#include "reactor/http_server.h"
#include "http_test_util.h"

#define FIX(name) FIXTURES "/tls/" name

/* One test's world: a loop, our server, results of calls. */
typedef struct world {
  uv_loop_t loop;
  nl_http_server_t srv;
  bool srv_up;
  canned_server_t canned;
  bool canned_up;
  int port;
  char base[64];
  /* the last result */
  int calls;
  int status;
  char *body;
  size_t body_len;
  bool truncated;
  int redirects;
  char *url;
  char *location;
  int err_code;
  char *err_msg;
  bool stop_after; /* stop the servers from the callback */
  nl_buf_t stream;
  int heads;
} world_t;

static void stop_servers(world_t *w) {
  if (w->srv_up) nl_http_server_stop(&w->srv, NULL, NULL);
  if (w->canned_up) canned_stop(&w->canned);
  w->srv_up = w->canned_up = false;
}

static void done_cb(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {
  world_t *w = ctx;
  w->calls++;
  free(w->body);
  free(w->url);
  free(w->err_msg);
  free(w->location);
  w->body = w->url = w->err_msg = w->location = NULL;
  w->err_code = 0;
  w->status = 0;
  if (err) {
    assert_null(resp);
    w->err_code = err->code;
    w->err_msg = nl_xstrdup(err->msg);
  } else {
    w->status = resp->status;
    w->body = nl_steal(&resp->body);
    w->body_len = resp->body_len;
    w->truncated = resp->truncated;
    w->redirects = resp->redirects;
    w->url = nl_xstrdup(resp->url);
    const char *loc = nl_http_headers_get(&resp->headers, "Location");
    w->location = loc ? nl_xstrdup(loc) : NULL;
  }
  if (w->stop_after) stop_servers(w);
  else uv_stop(&w->loop); /* the servers stay up for the next request */
}

static void w_free(world_t *w) {
  free(w->body);
  free(w->url);
  free(w->err_msg);
  free(w->location);
  nl_buf_free(&w->stream);
}

/* ---- server handlers ---------------------------------------------------- */

static void h_hello(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  char out[512];
  size_t multi = 0;
  for (size_t i = 0; i < req->headers->n; i++)
    if (!strcasecmp(req->headers->v[i].name, "X-Multi")) multi++;
  const char *ua = nl_http_headers_get(req->headers, "User-Agent");
  snprintf(out, sizeof(out), "host=%s multi=%zu ua=%s method=%s body=%.*s",
           nl_http_headers_get(req->headers, "Host"), multi, ua ? ua : "-", req->method,
           (int)req->body_len, req->body);
  nl_http_resp_send_str(resp, 200, out);
}

static void h_big(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  char body[100];
  memset(body, 'x', sizeof(body));
  nl_http_resp_send(resp, 200, body, sizeof(body));
}

static void h_redirect(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  world_t *w = ctx;
  char loc[128];
  if (!strcmp(req->path, "/r/1")) snprintf(loc, sizeof(loc), "2?x=1"); /* relative */
  else if (!strcmp(req->path, "/r/2")) snprintf(loc, sizeof(loc), "%s/r/final", w->base);
  else if (!strcmp(req->path, "/r/loop")) snprintf(loc, sizeof(loc), "/r/loop");
  else if (!strcmp(req->path, "/r/away")) snprintf(loc, sizeof(loc), "http://localhost:%d/r/final", w->port);
  else if (!strcmp(req->path, "/r/post")) snprintf(loc, sizeof(loc), "/hello");
  else {
    char out[256];
    snprintf(out, sizeof(out), "final host=%s query=%s", nl_http_headers_get(req->headers, "Host"),
             req->query);
    nl_http_resp_send_str(resp, 200, out);
    return;
  }
  nl_http_resp_header(resp, "Location", loc);
  nl_http_resp_send_str(resp, !strcmp(req->path, "/r/2") ? 301 : 302, "moved");
}

static void start_server(world_t *w, nl_tls_config_t *tls) {
  nl_err_t *err = NULL;
  nl_http_server_opts_t o = {.tls = tls};
  assert_int_equal(nl_http_server_init(&w->srv, &w->loop, &o, &err), 0);
  nl_http_server_route(&w->srv, NULL, "/hello", h_hello, w);
  nl_http_server_route(&w->srv, "GET", "/big", h_big, w);
  nl_http_server_route(&w->srv, NULL, "/r/", h_redirect, w);
  assert_int_equal(nl_http_server_listen(&w->srv, "127.0.0.1", 0, &err), 0);
  w->srv_up = true;
  w->port = nl_http_server_port(&w->srv);
  snprintf(w->base, sizeof(w->base), "%s://127.0.0.1:%d", tls ? "https" : "http", w->port);
}

static void world_init(world_t *w) {
  memset(w, 0, sizeof(*w));
  assert_int_equal(uv_loop_init(&w->loop), 0);
  w->stop_after = true;
}

static void world_end(world_t *w) {
  stop_servers(w);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&w->loop), 0);
  w_free(w);
}

static void get(world_t *w, const char *path, nl_http_request_opts_t *o) {
  char url[256];
  snprintf(url, sizeof(url), "%s%s", w->base, path);
  o->url = url;
  bool sync_called = false;
  int before = w->calls;
  nl_http_request(&w->loop, o, done_cb, w);
  sync_called = w->calls != before;
  assert_false(sync_called); /* never from inside nl_http_request */
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_int_equal(w->calls, before + 1);
}

/* ---- tests -------------------------------------------------------------- */

static void get_against_server(void **state) {
  world_t w;
  world_init(&w);
  start_server(&w, NULL);
  nl_http_header_t hs[] = {{"X-Multi", "a"}, {"X-Multi", "b"}, {"Host", "probe.example"}};
  nl_http_request_opts_t o = {.headers = hs, .n_headers = 3, .timeout_ms = 5000};
  get(&w, "/hello", &o);
  assert_int_equal(w.err_code, 0);
  assert_int_equal(w.status, 200);
  assert_string_equal(w.body, "host=probe.example multi=2 ua=nanolet/" NANOLET_VERSION
                              " method=GET body=");
  world_end(&w);

  world_init(&w);
  start_server(&w, NULL);
  nl_http_request_opts_t p = {.method = "POST", .body = "abc", .body_len = 3};
  get(&w, "/hello", &p);
  char want[128];
  snprintf(want, sizeof(want), "host=127.0.0.1:%d multi=0 ua=nanolet/" NANOLET_VERSION
           " method=POST body=abc", w.port);
  assert_string_equal(w.body, want);
  world_end(&w);
}

static void server_gone(nl_http_server_t *srv, void *ctx) { (void)ctx; }

static void connection_refused(void **state) {
  world_t w;
  world_init(&w);
  start_server(&w, NULL);
  int port = w.port;
  nl_http_server_stop(&w.srv, server_gone, NULL);
  w.srv_up = false;
  uv_run(&w.loop, UV_RUN_DEFAULT); /* the port is free again */
  nl_http_request_opts_t o = {.timeout_ms = 5000};
  get(&w, "/healthz", &o);
  assert_int_equal(w.err_code, ECONNREFUSED);
  char want[160];
  snprintf(want, sizeof(want),
           "Get \"http://127.0.0.1:%d/healthz\": dial tcp 127.0.0.1:%d: connect: connection refused",
           port, port);
  assert_string_equal(w.err_msg, want);
  world_end(&w);
}

static void timeout_against_silent_server(void **state) {
  world_t w;
  world_init(&w);
  w.port = canned_start(&w.canned, &w.loop, NULL);
  w.canned_up = true;
  snprintf(w.base, sizeof(w.base), "http://127.0.0.1:%d", w.port);
  uint64_t t0 = uv_now(&w.loop);
  nl_http_request_opts_t o = {.timeout_ms = 100};
  get(&w, "/healthz", &o);
  assert_true(uv_now(&w.loop) - t0 >= 100);
  assert_int_equal(w.err_code, NL_ETIMEOUT);
  char want[200];
  snprintf(want, sizeof(want),
           "Get \"%s/healthz\": context deadline exceeded (Client.Timeout exceeded while awaiting "
           "headers)",
           w.base);
  assert_string_equal(w.err_msg, want);
  assert_int_equal(w.canned.accepted, 1);
  world_end(&w);
}

static void body_cap(void **state) {
  world_t w;
  world_init(&w);
  start_server(&w, NULL);
  nl_http_request_opts_t o = {.body_cap = 10, .truncate_body = true};
  get(&w, "/big", &o);
  assert_int_equal(w.status, 200);
  assert_int_equal(w.body_len, 10);
  assert_true(w.truncated);
  assert_string_equal(w.body, "xxxxxxxxxx");
  world_end(&w);

  world_init(&w);
  start_server(&w, NULL);
  nl_http_request_opts_t p = {.body_cap = 10};
  get(&w, "/big", &p);
  assert_int_equal(w.err_code, EMSGSIZE);
  assert_non_null(strstr(w.err_msg, "response body exceeds 10 bytes"));
  world_end(&w);
}

static const char chunked_resp[] =
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
    "7\r\n{\"a\":1}\r\n"
    "1\r\n\n\r\n"
    "8\r\n{\"b\":22}\r\n"
    "0\r\n\r\n";

static void on_head(void *ctx, const nl_http_response_t *resp) {
  world_t *w = ctx;
  w->heads++;
  assert_int_equal(resp->status, 200);
  assert_string_equal(nl_http_headers_get(&resp->headers, "content-type"), "application/json");
}

static void on_chunk(void *ctx, const char *p, size_t n) {
  world_t *w = ctx;
  nl_buf_append(&w->stream, p, n);
}

static void chunked_response(void **state) {
  world_t w;
  world_init(&w);
  w.port = canned_start(&w.canned, &w.loop, chunked_resp);
  w.canned_up = true;
  snprintf(w.base, sizeof(w.base), "http://127.0.0.1:%d", w.port);
  nl_http_request_opts_t o = {.timeout_ms = 5000};
  get(&w, "/watch", &o);
  assert_int_equal(w.status, 200);
  assert_string_equal(w.body, "{\"a\":1}\n{\"b\":22}");
  world_end(&w);

  /* Streaming: chunks as they come, no buffered body. */
  world_init(&w);
  w.port = canned_start(&w.canned, &w.loop, chunked_resp);
  w.canned_up = true;
  snprintf(w.base, sizeof(w.base), "http://127.0.0.1:%d", w.port);
  nl_http_request_opts_t s = {.on_head = on_head, .on_chunk = on_chunk, .stream_ctx = &w};
  get(&w, "/watch?watch=true", &s);
  assert_int_equal(w.heads, 1);
  assert_int_equal(w.status, 200);
  assert_null(w.body);
  nl_buf_puts(&w.stream, "");
  assert_string_equal(w.stream.data, "{\"a\":1}\n{\"b\":22}");
  world_end(&w);
}

static void eof_before_response(void **state) {
  world_t w;
  world_init(&w);
  w.port = canned_start(&w.canned, &w.loop, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  w.canned_up = true;
  snprintf(w.base, sizeof(w.base), "http://127.0.0.1:%d", w.port);
  nl_http_request_opts_t o = {0};
  get(&w, "/", &o);
  assert_int_equal(w.err_code, EPROTO);
  assert_non_null(strstr(w.err_msg, "unexpected EOF"));
  world_end(&w);

  /* A response delimited by the end of the connection is complete. */
  world_init(&w);
  w.port = canned_start(&w.canned, &w.loop, "HTTP/1.0 200 OK\r\n\r\nall of it");
  w.canned_up = true;
  snprintf(w.base, sizeof(w.base), "http://127.0.0.1:%d", w.port);
  get(&w, "/", &o);
  assert_int_equal(w.status, 200);
  assert_string_equal(w.body, "all of it");
  world_end(&w);

  world_init(&w);
  w.port = canned_start(&w.canned, &w.loop, "garbage\r\n\r\n");
  w.canned_up = true;
  snprintf(w.base, sizeof(w.base), "http://127.0.0.1:%d", w.port);
  get(&w, "/", &o);
  assert_int_equal(w.err_code, EPROTO);
  assert_non_null(strstr(w.err_msg, "malformed response"));
  world_end(&w);
}

static void redirects(void **state) {
  world_t w;
  /* Probe policy: follow on the same host, up to 10. */
  nl_http_request_opts_t probe = {.max_redirects = 10, .redirect_same_host_only = true};
  world_init(&w);
  start_server(&w, NULL);
  get(&w, "/r/1", &probe);
  assert_int_equal(w.status, 200);
  assert_int_equal(w.redirects, 2);
  char want[128];
  snprintf(want, sizeof(want), "final host=127.0.0.1:%d query=", w.port);
  assert_string_equal(w.body, want);
  snprintf(want, sizeof(want), "%s/r/final", w.base);
  assert_string_equal(w.url, want);
  world_end(&w);

  /* A custom Host survives a relative redirect (as Go). */
  world_init(&w);
  start_server(&w, NULL);
  nl_http_request_opts_t host = probe;
  host.host = "custom.example";
  get(&w, "/r/post", &host);
  assert_int_equal(w.status, 200);
  assert_non_null(strstr(w.body, "host=custom.example "));
  world_end(&w);

  world_init(&w);
  start_server(&w, NULL);
  get(&w, "/r/loop", &probe);
  assert_int_equal(w.err_code, EPROTO);
  snprintf(want, sizeof(want), "Get \"%s/r/loop\": stopped after 10 redirects", w.base);
  assert_string_equal(w.err_msg, want);
  world_end(&w);

  /* To another host: the 3xx is the answer (a probe success with a warning). */
  world_init(&w);
  start_server(&w, NULL);
  get(&w, "/r/away", &probe);
  assert_int_equal(w.status, 302);
  assert_int_equal(w.redirects, 0);
  assert_string_equal(w.body, "moved");
  assert_non_null(strstr(w.location, "http://localhost:"));
  world_end(&w);

  /* Left to the caller. */
  world_init(&w);
  start_server(&w, NULL);
  nl_http_request_opts_t none = {0};
  get(&w, "/r/1", &none);
  assert_int_equal(w.status, 302);
  assert_string_equal(w.location, "2?x=1");
  world_end(&w);

  /* 302 turns POST into GET. */
  world_init(&w);
  start_server(&w, NULL);
  nl_http_request_opts_t post = {.method = "POST", .body = "x", .body_len = 1, .max_redirects = 10};
  get(&w, "/r/post", &post);
  assert_int_equal(w.status, 200);
  assert_non_null(strstr(w.body, "method=GET body="));
  world_end(&w);
}

static nl_tls_config_t *tls_cfg(bool server, bool verify, const char *ca, const char *cert,
                                const char *key) {
  nl_tls_config_t *c = NULL;
  nl_err_t *err = NULL;
  nl_tls_config_opts_t o = {.server = server, .verify = verify, .ca_file = ca, .cert_file = cert,
                            .key_file = key};
  if (nl_tls_config_new(&c, &o, &err) < 0) fail_msg("%s", nl_err_msg(err));
  return c;
}

static void https(void **state) {
  nl_tls_config_t *srv_cfg = tls_cfg(true, false, NULL, FIX("server.crt"), FIX("server.key"));
  nl_tls_config_t *insecure = tls_cfg(false, false, NULL, NULL, NULL);
  nl_tls_config_t *verify = tls_cfg(false, true, FIX("ca.crt"), NULL, NULL);
  nl_tls_config_t *wrong_ca = tls_cfg(false, true, FIX("other-ca.crt"), NULL, NULL);
  world_t w;

  /* Probes: no verification. */
  world_init(&w);
  start_server(&w, srv_cfg);
  nl_http_request_opts_t o = {.tls = insecure, .timeout_ms = 5000};
  get(&w, "/hello", &o);
  assert_int_equal(w.err_code, 0);
  assert_int_equal(w.status, 200);
  assert_non_null(strstr(w.body, "host=127.0.0.1:"));
  world_end(&w);

  /* Verified, by IP (subjectAltName IP entry) and by name. */
  world_init(&w);
  start_server(&w, srv_cfg);
  o.tls = verify;
  w.stop_after = false;
  get(&w, "/big", &o);
  assert_int_equal(w.status, 200);
  assert_int_equal(w.body_len, 100);
  snprintf(w.base, sizeof(w.base), "https://localhost:%d", w.port);
  w.stop_after = true;
  get(&w, "/hello", &o);
  assert_int_equal(w.err_code, 0);
  assert_int_equal(w.status, 200);
  world_end(&w);

  /* Untrusted CA. */
  world_init(&w);
  start_server(&w, srv_cfg);
  o.tls = wrong_ca;
  get(&w, "/hello", &o);
  assert_int_equal(w.err_code, EPROTO);
  assert_non_null(strstr(w.err_msg, "failed to verify certificate"));
  world_end(&w);

  /* Right CA, wrong name. */
  world_init(&w);
  start_server(&w, srv_cfg);
  o.tls = verify;
  o.server_name = "127.0.0.2";
  get(&w, "/hello", &o);
  assert_int_equal(w.err_code, EPROTO);
  assert_non_null(strstr(w.err_msg, "doesn't contain any IP SANs matching it"));
  o.server_name = "other.example";
  world_end(&w);
  world_init(&w);
  start_server(&w, srv_cfg);
  get(&w, "/hello", &o);
  assert_int_equal(w.err_code, EPROTO);
  assert_non_null(strstr(w.err_msg, "failed to verify certificate"));
  world_end(&w);

  /* Mutual TLS: the server requires a client certificate. */
  nl_tls_config_t *mtls_srv = tls_cfg(true, true, FIX("ca.crt"), FIX("server.crt"), FIX("server.key"));
  nl_tls_config_t *with_cert = tls_cfg(false, true, FIX("ca.crt"), FIX("client.crt"), FIX("client.key"));
  world_init(&w);
  start_server(&w, mtls_srv);
  nl_http_request_opts_t m = {.tls = with_cert, .timeout_ms = 5000};
  get(&w, "/hello", &m);
  assert_int_equal(w.err_code, 0);
  assert_int_equal(w.status, 200);
  world_end(&w);
  world_init(&w);
  start_server(&w, mtls_srv);
  m.tls = verify;
  get(&w, "/hello", &m);
  assert_int_not_equal(w.err_code, 0);
  world_end(&w);

  /* https without a TLS config is refused. */
  world_init(&w);
  snprintf(w.base, sizeof(w.base), "https://127.0.0.1:1");
  nl_http_request_opts_t none = {0};
  get(&w, "/", &none);
  assert_int_equal(w.err_code, NL_EINVAL);
  world_end(&w);

  nl_tls_config_unref(srv_cfg);
  nl_tls_config_unref(insecure);
  nl_tls_config_unref(verify);
  nl_tls_config_unref(wrong_ca);
  nl_tls_config_unref(mtls_srv);
  nl_tls_config_unref(with_cert);
}

static void cancel_later(uv_timer_t *t) {
  nl_http_cancel(t->data);
  uv_close((uv_handle_t *)t, NULL);
}

static void cancel_in_flight(void **state) {
  world_t w;
  world_init(&w);
  w.port = canned_start(&w.canned, &w.loop, NULL);
  w.canned_up = true;
  snprintf(w.base, sizeof(w.base), "http://127.0.0.1:%d", w.port);
  char url[128];
  snprintf(url, sizeof(url), "%s/slow", w.base);
  nl_http_request_opts_t o = {.url = url, .timeout_ms = 10000};
  nl_http_call_t *call = nl_http_request(&w.loop, &o, done_cb, &w);
  uv_timer_t t;
  uv_timer_init(&w.loop, &t);
  t.data = call;
  uv_timer_start(&t, cancel_later, 30, 0);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.err_code, NL_ECLOSED);
  snprintf(url, sizeof(url), "Get \"%s/slow\": request canceled", w.base);
  assert_string_equal(w.err_msg, url);
  world_end(&w);

  /* Cancelled before it even connected, then twice: one callback, later. */
  world_init(&w);
  start_server(&w, NULL);
  snprintf(url, sizeof(url), "%s/hello", w.base);
  call = nl_http_request(&w.loop, &o, done_cb, &w);
  nl_http_cancel(call);
  nl_http_cancel(call);
  assert_int_equal(w.calls, 0);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.err_code, NL_ECLOSED);
  world_end(&w);
}

static void bad_urls(void **state) {
  const char *bad[] = {"ftp://x/", "127.0.0.1:80/", "http://", "http://h:99999/", "http://u@h/",
                       "http://[::1/"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    world_t w;
    world_init(&w);
    nl_http_request_opts_t o = {.url = bad[i]};
    nl_http_request(&w.loop, &o, done_cb, &w);
    assert_int_equal(w.calls, 0);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err_code, NL_EINVAL);
    assert_non_null(strstr(w.err_msg, bad[i]));
    world_end(&w);
  }
  nl_http_url_t u;
  nl_err_t *err = NULL;
  assert_int_equal(nl_http_url_parse(&u, "HTTPS://[::1]:8443?a=b#frag", &err), 0);
  assert_true(u.https);
  assert_string_equal(u.host, "::1");
  assert_int_equal(u.port, 8443);
  assert_string_equal(u.path, "/?a=b");
  nl_http_url_free(&u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(get_against_server),
      cmocka_unit_test(connection_refused),
      cmocka_unit_test(timeout_against_silent_server),
      cmocka_unit_test(body_cap),
      cmocka_unit_test(chunked_response),
      cmocka_unit_test(eof_before_response),
      cmocka_unit_test(redirects),
      cmocka_unit_test(https),
      cmocka_unit_test(cancel_in_flight),
      cmocka_unit_test(bad_urls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
