/* A tiny gRPC server for independent clients (grpc_python_client.py, on
 * Debian's python3-grpcio): serves raw bytes on the unix socket given, until
 * SIGTERM, then stops and exits 0 only if the loop closed cleanly.
 *   /x.Y/Echo   unary: answers the request's bytes
 *   /x.Y/Fail   unary: NOT_FOUND with a message that needs percent-encoding
 *   /x.Y/Hold   unary: never answers (the client's deadline, or the stop)
 *   /x.Y/Count  server streaming: request byte 0 = n; answers "0".."n-1",
 *               one every 5 ms, then OK
 *   grpc_serve SOCKET */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/grpc_server.h"
#include "reactor/list.h"
#include "reactor/xalloc.h"

typedef struct counter {
  nl_list_t link;
  nl_grpc_call_t *call;
  int n, sent;
} counter_t;

typedef struct app {
  uv_loop_t loop;
  nl_grpc_server_t srv;
  uv_signal_t sigterm;
  uv_timer_t tick;
  nl_list_t counters;
  nl_grpc_call_t *held[64];
  size_t nheld;
} app_t;

static void h_echo(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  nl_grpc_call_reply(call, NL_GRPC_OK, NULL, req, len);
}

static void h_fail(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  nl_grpc_call_reply(call, NL_GRPC_NOT_FOUND, "no such thing: caf\xc3\xa9 100% \"x\"\n", NULL, 0);
}

static void h_hold(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  app_t *a = ctx;
  if (a->nheld == sizeof a->held / sizeof a->held[0]) {
    nl_grpc_call_reply(call, NL_GRPC_RESOURCE_EXHAUSTED, "too many held", NULL, 0);
    return;
  }
  a->held[a->nheld++] = call;
}

static void h_count(void *ctx, nl_grpc_call_t *call, const uint8_t *req, size_t len) {
  app_t *a = ctx;
  counter_t *c = nl_xcalloc(1, sizeof *c);
  c->call = call;
  c->n = len > 0 ? req[0] : 0;
  nl_list_insert_tail(&a->counters, &c->link);
}

static void on_tick(uv_timer_t *t) {
  app_t *a = t->data;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &a->counters) {
    counter_t *c = nl_list_entry(pos, counter_t, link);
    char msg[16];
    int n = snprintf(msg, sizeof msg, "%d", c->sent);
    if (c->sent < c->n && nl_grpc_call_send(c->call, (const uint8_t *)msg, (size_t)n) == 0) {
      c->sent++;
      continue;
    }
    nl_grpc_call_finish(c->call, NL_GRPC_OK, NULL);
    nl_list_remove(&c->link);
    free(c);
  }
}

static void stopped(nl_grpc_server_t *srv, void *ctx) {}

static void on_sigterm(uv_signal_t *s, int sig) {
  app_t *a = s->data;
  nl_grpc_server_stop(&a->srv, stopped, a);
  for (size_t i = 0; i < a->nheld; i++) nl_grpc_call_reply(a->held[i], NL_GRPC_OK, NULL, NULL, 0);
  a->nheld = 0;
  while (!nl_list_empty(&a->counters)) {
    counter_t *c = nl_list_entry(a->counters.next, counter_t, link);
    nl_grpc_call_finish(c->call, NL_GRPC_OK, NULL);
    nl_list_remove(&c->link);
    free(c);
  }
  uv_close((uv_handle_t *)&a->sigterm, NULL);
  uv_close((uv_handle_t *)&a->tick, NULL);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SOCKET\n", argv[0]);
    return 2;
  }
  app_t a;
  memset(&a, 0, sizeof a);
  nl_list_init(&a.counters);
  uv_loop_init(&a.loop);
  nl_grpc_server_init(&a.srv, &a.loop, NULL);
  nl_grpc_server_method(&a.srv, "/x.Y/Echo", NL_GRPC_UNARY, h_echo, &a);
  nl_grpc_server_method(&a.srv, "/x.Y/Fail", NL_GRPC_UNARY, h_fail, &a);
  nl_grpc_server_method(&a.srv, "/x.Y/Hold", NL_GRPC_UNARY, h_hold, &a);
  nl_grpc_server_method(&a.srv, "/x.Y/Count", NL_GRPC_SERVER_STREAMING, h_count, &a);
  nl_err_t *err = NULL;
  if (nl_grpc_server_listen(&a.srv, argv[1], &err) < 0) {
    fprintf(stderr, "grpc_serve: %s\n", nl_err_msg(err));
    return 1;
  }
  uv_signal_init(&a.loop, &a.sigterm);
  a.sigterm.data = &a;
  uv_signal_start(&a.sigterm, on_sigterm, SIGTERM);
  uv_timer_init(&a.loop, &a.tick);
  a.tick.data = &a;
  uv_timer_start(&a.tick, on_tick, 5, 5);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&a.loop);
  if (rc != 0) fprintf(stderr, "grpc_serve: the loop did not close: %s\n", uv_strerror(rc));
  return rc == 0 ? 0 : 1;
}
