/* A test double of client.h's request functions: it records every request and
 * lets the test answer it (whole responses, or a stream piece by piece). */
#ifndef TEST_KUBE_FAKE_CLIENT_H
#define TEST_KUBE_FAKE_CLIENT_H

#include <stdbool.h>

#include "agent/kube/client.h"

typedef struct fake_req {
  char *method, *path;
  char *body, *content_type; /* NULL when none */
  nl_kube_head_fn on_head;
  nl_kube_data_fn on_data;
  nl_kube_done_fn cb;
  void *ctx;
  bool fail_on_dial;
  uint64_t timeout_ms;
  bool accept_protobuf;
  bool cancelled, done;
  bool no_conn; /* failed without a connection ever ready (fake_fail_no_conn) */
} fake_req_t;

#define FAKE_MAX 256
extern fake_req_t *fake_reqs[FAKE_MAX];
extern size_t fake_nreqs;
/* What nl_kube_client_protobuf() answers (the client's content type). */
extern bool fake_protobuf;

/* The latest request. */
fake_req_t *fake_last(void);
/* Completes cancelled requests with NL_ECLOSED (the real client does it later,
 * never from inside nl_kube_req_cancel). */
void fake_settle(void);
void fake_respond(fake_req_t *r, int status, const char *body);
void fake_head(fake_req_t *r, int status); /* application/json */
void fake_head_type(fake_req_t *r, int status, const char *content_type);
void fake_data(fake_req_t *r, const char *data);
void fake_data_n(fake_req_t *r, const void *data, size_t len);
void fake_end(fake_req_t *r, int status); /* the end of a stream */
void fake_fail(fake_req_t *r, int code, const char *msg);
/* Fails r as the client fails a request that never had a connection (the
 * server unreachable). */
void fake_fail_no_conn(fake_req_t *r, int code, const char *msg);
void fake_reset(void);
/* Runs loop for ms milliseconds (its timers fire; nothing else wakes it). */
void fake_run_for(uv_loop_t *loop, uint64_t ms);

#endif
