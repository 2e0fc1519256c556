/* The URL source: one timer, at most one fetch in flight. */
#include "sources/url.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

int nl_url_source_parse(const char *data, size_t len, const char *url, const char *node_name,
                        nl_pod_t ***pods, size_t *n, nl_err_t **err) {
  *pods = NULL;
  *n = 0;
  nl_pod_t **v;
  size_t nv;
  if (nl_pod_decode_list(data, len, url, &v, &nv, err) < 0) return -1;
  nl_static_source_t ss = {.kind = "http", .location = url, .node_name = node_name};
  for (size_t i = 0; i < nv; i++) {
    nl_pod_set_defaults(v[i]);
    nl_pod_apply_static(v[i], &ss);
    if (nl_pod_validate(v[i], url, err) < 0) {
      for (size_t j = 0; j < nv; j++) nl_pod_free(v[j]);
      free(v);
      return -1;
    }
  }
  *pods = v;
  *n = nv;
  return 0;
}

int nl_url_source_init(nl_url_source_t *src, uv_loop_t *loop, const char *url,
                       const nl_http_header_t *headers, size_t n_headers, uint64_t check_ms,
                       const char *node_name, nl_url_source_cb cb, void *ctx, nl_err_t **err) {
  memset(src, 0, sizeof *src);
  nl_http_url_t u;
  if (nl_http_url_parse(&u, url, err) < 0) return -1;
  nl_http_url_free(&u);
  if (!node_name || !*node_name) return nl_err_set(err, NL_EINVAL, "url source: no node name");
  src->loop = loop;
  src->url = nl_xstrdup(url);
  src->node_name = nl_xstrdup(node_name);
  src->headers = nl_xcalloc(n_headers ? n_headers : 1, sizeof *src->headers);
  for (size_t i = 0; i < n_headers; i++)
    src->headers[i] = (nl_http_header_t){nl_xstrdup(headers[i].name),
                                         nl_xstrdup(headers[i].value)};
  src->n_headers = n_headers;
  src->check_ms = check_ms ? check_ms : NL_URL_SOURCE_DEFAULT_CHECK_MS;
  src->cb = cb;
  src->ctx = ctx;
  return 0;
}

/* upstream run(): the first three failures are logged, then one more saying
 * so, then none until a success. */
static void failed(nl_url_source_t *src, const char *msg) {
  src->errors++;
  if (src->failure_logs < 3)
    nl_info("Failed to read pods from URL: %s", msg);
  else if (src->failure_logs == 3)
    nl_info("Failed to read pods from URL. Dropping verbose logging.: %s", msg);
  else
    nl_vlog(4, "Failed to read pods from URL: %s", msg);
  src->failure_logs++;
}

static void succeeded(nl_url_source_t *src) {
  if (src->failure_logs) nl_info("Successfully read pods from URL");
  src->failure_logs = 0;
}

static void send_set(nl_url_source_t *src, nl_pod_t **pods, size_t n) {
  src->snapshots++;
  src->cb(pods, n, src->ctx);
}

/* upstream extractFromURL on what the fetch brought. */
static void extract(nl_url_source_t *src, nl_http_response_t *resp) {
  if (resp->status != 200) {
    char *m = nl_xasprintf("%s: %d %s", src->url, resp->status,
                           nl_http_status_text(resp->status));
    failed(src, m);
    free(m);
    return;
  }
  if (resp->body_len == 0) {
    /* An empty set, so that the source counts as seen; still an error. */
    send_set(src, nl_xcalloc(1, sizeof(nl_pod_t *)), 0);
    char *m = nl_xasprintf("zero-length data received from %s", src->url);
    failed(src, m);
    free(m);
    return;
  }
  if (src->data && src->data_len == resp->body_len &&
      memcmp(src->data, resp->body, resp->body_len) == 0) {
    succeeded(src);
    return;
  }
  free(src->data);
  src->data_len = resp->body_len;
  src->data = nl_xmalloc(resp->body_len);
  memcpy(src->data, resp->body, resp->body_len);
  nl_pod_t **pods;
  size_t n;
  nl_err_t *err = NULL;
  if (nl_url_source_parse(resp->body, resp->body_len, src->url, src->node_name, &pods, &n,
                          &err) < 0) {
    failed(src, nl_err_msg(err));
    nl_err_free(&err);
    return;
  }
  succeeded(src);
  send_set(src, pods, n);
}

static void finish_stop(nl_url_source_t *src) {
  if (--src->pending > 0) return;
  for (size_t i = 0; i < src->n_headers; i++) {
    free(src->headers[i].name);
    free(src->headers[i].value);
  }
  free(src->headers);
  free(src->url);
  free(src->node_name);
  free(src->data);
  src->state = NL_URL_SOURCE_STOPPED;
  if (src->done_cb) src->done_cb(src);
}

static void on_fetched(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {
  nl_url_source_t *src = ctx;
  src->call = NULL;
  if (src->state != NL_URL_SOURCE_RUNNING) {
    finish_stop(src);
    return;
  }
  src->pending--;
  if (err) failed(src, nl_err_msg(err));
  else extract(src, resp);
}

static void on_tick(uv_timer_t *t) {
  nl_url_source_t *src = container_of(t, nl_url_source_t, timer);
  if (src->call) return; /* the last fetch is still out (it has a timeout) */
  src->fetches++;
  src->pending++;
  nl_http_request_opts_t o = {
      .url = src->url,
      .headers = src->headers,
      .n_headers = src->n_headers,
      .timeout_ms = NL_URL_SOURCE_TIMEOUT_MS,
      .body_cap = NL_URL_SOURCE_MAX_BYTES,
      .max_redirects = 10, /* Go's default client */
  };
  src->call = nl_http_request(src->loop, &o, on_fetched, src);
}

void nl_url_source_start(nl_url_source_t *src) {
  assert(src->state == NL_URL_SOURCE_INIT);
  src->state = NL_URL_SOURCE_RUNNING;
  uv_timer_init(src->loop, &src->timer);
  src->pending = 1; /* the timer's close */
  uv_timer_start(&src->timer, on_tick, 0, src->check_ms);
}

static void on_timer_closed(uv_handle_t *h) {
  finish_stop(container_of((uv_timer_t *)h, nl_url_source_t, timer));
}

void nl_url_source_stop(nl_url_source_t *src, nl_url_source_done_cb done) {
  if (src->state == NL_URL_SOURCE_STOPPING || src->state == NL_URL_SOURCE_STOPPED) return;
  src->done_cb = done;
  if (src->state == NL_URL_SOURCE_INIT) {
    src->pending = 1;
    src->state = NL_URL_SOURCE_STOPPING;
    finish_stop(src);
    return;
  }
  src->state = NL_URL_SOURCE_STOPPING;
  if (src->call) nl_http_cancel(src->call);
  uv_close((uv_handle_t *)&src->timer, on_timer_closed);
}
