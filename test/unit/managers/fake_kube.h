/* A fake of agent/kube/client.h for manager tests: requests are recorded in
 * kf.reqs for the test to inspect and answer; cancellations are delivered from
 * a timer, never from inside nl_kube_req_cancel, as the real client does. */
#ifndef FAKE_KUBE_H
#define FAKE_KUBE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent/kube/client.h"
#include "reactor/xalloc.h"

struct nl_kube_req {
  char method[8], path[256], ctype[64];
  char *body; /* NULL without one */
  nl_kube_done_fn cb;
  nl_kube_head_fn on_head; /* streaming (a watch) */
  nl_kube_data_fn on_data;
  void *ctx;
  bool done, cancelled;
  bool accept_metadata; /* the answer's metadata only, please */
  bool head_only;       /* a 2xx answer's body is not wanted */
  uint64_t at_ms;
};

#define KF_MAXREQ 4096
static struct {
  uv_loop_t *loop;
  nl_kube_req_t *reqs[KF_MAXREQ];
  size_t n;
  uv_timer_t deliver;
} kf;

#ifndef FAKE_KUBE_REAL_STATUS /* else the kube library's (a test that links it) */
int nl_kube_status_err(const nl_kube_response_t *resp, nl_err_t **err) {
  return nl_err_set(err, resp->status, "the server responded with HTTP %d", resp->status);
}
#endif

static void answer(nl_kube_req_t *r, int status, const char *body) {
  assert_false(r->done);
  r->done = true;
  nl_kube_response_t resp = {status, body, strlen(body), "application/json"};
  r->cb(r->ctx, &resp, NULL);
}

static void fail_req(nl_kube_req_t *r, int code) {
  r->done = true;
  nl_err_t *e = NULL;
  nl_err_set(&e, code, "dial tcp 10.0.0.1:6443: connect: connection refused");
  r->cb(r->ctx, NULL, e);
  nl_err_free(&e);
}

static void kf_on_deliver(uv_timer_t *t) {
  (void)t;
  for (size_t i = 0; i < kf.n; i++)
    if (kf.reqs[i]->cancelled && !kf.reqs[i]->done) fail_req(kf.reqs[i], NL_ECLOSED);
}

nl_kube_req_t *nl_kube_request(nl_kube_client_t *c, const nl_kube_request_opts_t *o,
                               nl_kube_done_fn cb, void *ctx) {
  (void)c;
  assert_true(kf.n < KF_MAXREQ);
  nl_kube_req_t *r = nl_xcalloc(1, sizeof *r);
  snprintf(r->method, sizeof r->method, "%s", o->method);
  snprintf(r->path, sizeof r->path, "%s", o->path);
  snprintf(r->ctype, sizeof r->ctype, "%s", o->content_type ? o->content_type : "");
  r->body = o->body ? nl_xstrndup(o->body, o->body_len) : NULL;
  r->cb = cb;
  r->on_head = o->on_head;
  r->on_data = o->on_data;
  r->accept_metadata = o->accept_metadata;
  r->head_only = o->head_only;
  r->ctx = ctx;
  r->at_ms = uv_now(kf.loop);
  /* Managers' own requests carry their deadline; a reflector's list and watch
   * (by a selector) take the client's default. */
  assert_true(o->timeout_ms > 0 || strstr(o->path, "fieldSelector=") != NULL);
  kf.reqs[kf.n++] = r;
  return r;
}

/* As the real one with a JSON client: the body goes as JSON. */
nl_kube_req_t *nl_kube_request_kind(nl_kube_client_t *c, const nl_kube_request_opts_t *o,
                                    const char *api_version, const char *kind, const json_t *obj,
                                    nl_kube_done_fn cb, void *ctx) {
  (void)api_version, (void)kind;
  nl_kube_request_opts_t j = *o;
  char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
  j.body = text;
  j.body_len = text ? strlen(text) : 0;
  if (text && !j.content_type) j.content_type = "application/json";
  nl_kube_req_t *r = nl_kube_request(c, &j, cb, ctx);
  free(text);
  return r;
}

bool nl_kube_req_had_conn(const nl_kube_req_t *r) { return true; }

bool nl_kube_client_protobuf(const nl_kube_client_t *c) {
  (void)c;
  return false;
}

void nl_kube_req_cancel(nl_kube_req_t *r) {
  if (r->done) return;
  r->cancelled = true;
  uv_timer_start(&kf.deliver, kf_on_deliver, 0, 0);
}

/* Frees the requests recorded. */
static void kf_free(void) {
  for (size_t i = 0; i < kf.n; i++) {
    free(kf.reqs[i]->body);
    free(kf.reqs[i]);
  }
  kf.n = 0;
}

/* Forgets the requests of the last test and starts on loop. */
static void kf_reset(uv_loop_t *loop) {
  kf_free();
  kf.loop = loop;
  uv_timer_init(loop, &kf.deliver);
}

#endif
