#include "fake_client.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

fake_req_t *fake_reqs[FAKE_MAX];
size_t fake_nreqs;
bool fake_protobuf;

bool nl_kube_client_protobuf(const nl_kube_client_t *c) {
  (void)c;
  return fake_protobuf;
}

nl_kube_req_t *nl_kube_request(nl_kube_client_t *c, const nl_kube_request_opts_t *opts,
                               nl_kube_done_fn cb, void *ctx) {
  assert(fake_nreqs < FAKE_MAX);
  fake_req_t *r = nl_xcalloc(1, sizeof *r);
  r->method = nl_xstrdup(opts->method);
  r->path = nl_xstrdup(opts->path);
  r->body = opts->body ? nl_xstrndup(opts->body, opts->body_len) : NULL;
  r->content_type = opts->content_type ? nl_xstrdup(opts->content_type) : NULL;
  r->on_head = opts->on_head;
  r->on_data = opts->on_data;
  r->fail_on_dial = opts->fail_on_dial;
  r->timeout_ms = opts->timeout_ms;
  r->accept_protobuf = opts->accept_protobuf;
  r->cb = cb;
  r->ctx = ctx;
  fake_reqs[fake_nreqs++] = r;
  return (nl_kube_req_t *)r;
}

bool nl_kube_req_had_conn(const nl_kube_req_t *req) { return !((const fake_req_t *)req)->no_conn; }

void nl_kube_req_cancel(nl_kube_req_t *req) {
  fake_req_t *r = (fake_req_t *)req;
  if (!r->done) r->cancelled = true;
}

fake_req_t *fake_last(void) { return fake_nreqs ? fake_reqs[fake_nreqs - 1] : NULL; }

static void finish(fake_req_t *r, const nl_kube_response_t *resp, const nl_err_t *err) {
  assert(!r->done);
  r->done = true;
  r->cb(r->ctx, resp, err);
}

void fake_settle(void) {
  for (size_t i = 0; i < fake_nreqs; i++)
    if (fake_reqs[i]->cancelled && !fake_reqs[i]->done) fake_fail(fake_reqs[i], NL_ECLOSED, "cancelled");
}

void fake_respond(fake_req_t *r, int status, const char *body) {
  nl_kube_response_t resp = {status, body, strlen(body), "application/json"};
  finish(r, &resp, NULL);
}

void fake_head(fake_req_t *r, int status) { fake_head_type(r, status, "application/json"); }

void fake_head_type(fake_req_t *r, int status, const char *content_type) {
  assert(!r->done && r->on_head);
  r->on_head(r->ctx, status, content_type);
}

void fake_data_n(fake_req_t *r, const void *data, size_t len) {
  assert(!r->done && r->on_data);
  r->on_data(r->ctx, data, len);
}

void fake_data(fake_req_t *r, const char *data) {
  assert(!r->done && r->on_data);
  r->on_data(r->ctx, data, strlen(data));
}

void fake_end(fake_req_t *r, int status) {
  nl_kube_response_t resp = {status, "", 0, "application/json"};
  finish(r, &resp, NULL);
}

void fake_fail(fake_req_t *r, int code, const char *msg) {
  nl_err_t err = {code, (char *)msg};
  finish(r, NULL, &err);
}

void fake_fail_no_conn(fake_req_t *r, int code, const char *msg) {
  r->no_conn = true;
  fake_fail(r, code, msg);
}

void fake_reset(void) {
  for (size_t i = 0; i < fake_nreqs; i++) {
    free(fake_reqs[i]->method);
    free(fake_reqs[i]->path);
    free(fake_reqs[i]->body);
    free(fake_reqs[i]->content_type);
    free(fake_reqs[i]);
  }
  fake_nreqs = 0;
  fake_protobuf = false;
}

static void stop_loop(uv_timer_t *t) { uv_stop(t->loop); }

void fake_run_for(uv_loop_t *loop, uint64_t ms) {
  uv_timer_t t;
  uv_timer_init(loop, &t);
  uv_timer_start(&t, stop_loop, ms, 0);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
}
