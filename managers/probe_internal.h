/* Shared by the probe_*.c files; not a public interface. */
#ifndef NL_PROBE_INTERNAL_H
#define NL_PROBE_INTERNAL_H

#include "managers/probe.h"
#include "cri/grpc.h"
#include "reactor/dial.h"
#include "reactor/h2conn.h"
#include "reactor/http_client.h"

typedef struct nl_check_net nl_check_net_t;

/* What a check that dials itself holds (tcpSocket, grpc): most of a
 * check's bytes (the dialer, the HTTP/2 connection: 3.3 KiB), allocated only
 * for those, so that an exec check (an ExecSync) allocates and clears a few
 * hundred bytes. Freed with the check. */
struct nl_check_net {
  nl_check_t *check;
  /* tcp */
  nl_dial_t dial;  /* raw: connecting is all a tcpSocket check does */
  bool dial_open;
  char *addr;     /* "10.88.0.5:80" as Go's JoinHostPort writes it */
  bool connected;
  /* grpc */
  char *service;
  nl_h2conn_t conn; /* the HTTP/2 connection (reactor/h2conn.h) */
  bool conn_open;
  nl_grpc_channel_t channel;
  nl_grpc_stream_t stream;
  uint8_t *framed;
  size_t framed_len;
  int health;     /* grpc: -1 until a response message, -2 malformed */
  bool g_closed;  /* grpc: the stream ended with g_code, g_message */
  int g_code;
  char *g_message;
};

struct nl_check {
  nl_check_env_t env;
  nl_check_cb cb;
  void *ctx;
  bool hook;
  bool cancelled; /* the owner is gone: no callback */
  bool done;      /* the result is decided (delivered, or dropped when cancelled) */
  int refs;       /* timer + outstanding CRI call / HTTP call / dialer */
  uv_timer_t timer;
  uint64_t timeout_ms;
  /* deferred result (errors found at start) */
  nl_check_result_t pending_r;
  char *pending_out;
  /* exec */
  char *cmd_str;
  /* http */
  nl_http_call_t *http;
  nl_tls_config_t *own_tls;
  nl_check_net_t *net; /* tcpSocket and grpc; NULL for exec and httpGet */
};

/* The check's nl_check_net_t, made on first use. */
nl_check_net_t *nl__check_net(nl_check_t *c);
/* Delivers the result once (unless cancelled) and tears the check down. */
void nl__check_finish(nl_check_t *c, nl_check_result_t r, const char *output);
/* Reports msg on the next loop turn (errors found while starting). */
void nl__check_defer(nl_check_t *c, nl_check_result_t r, const char *msg);
/* Drops one reference; frees the check at zero. */
void nl__check_unref(nl_check_t *c);

void nl__check_http_start(nl_check_t *c, const nl_check_req_t *req);
void nl__check_tcp_start(nl_check_t *c, const nl_check_req_t *req, bool grpc);
/* grpc: connects to host:port (an address) and makes the call. */
void nl__check_grpc_start(nl_check_t *c, const char *host, int port);
void nl__check_grpc_teardown(nl_check_t *c);
/* The host:port text of a target ("[::1]:80" for IPv6). New string. */
char *nl__probe_join_host_port(const char *host, int port);

#endif
