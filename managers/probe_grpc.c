/* The grpc check (upstream pkg/probe/grpc): grpc.health.v1.Health/Check over
 * HTTP/2 on TCP: one call (cri/grpc.h's framing and status) on a connection
 * of the HTTP/2 driver (reactor/h2conn.h), which dials, reads and writes. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "managers/probe_internal.h"
#include "reactor/xalloc.h"

#define HEALTH_CHECK "/grpc.health.v1.Health/Check"

/* ---- wire format: HealthCheckRequest{string service = 1},
 * HealthCheckResponse{ServingStatus status = 1} ---- */

uint8_t *nl_probe_grpc_encode_request(const char *service, size_t *len) {
  size_t sl = service ? strlen(service) : 0;
  uint8_t *p = nl_xmalloc(sl + 11);
  size_t n = 0;
  if (sl) {
    p[n++] = 0x0a; /* field 1, length-delimited */
    for (size_t v = sl;; v >>= 7) {
      p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
      if (v <= 0x7f) break;
    }
    memcpy(p + n, service, sl);
    n += sl;
  }
  *len = n;
  return p;
}

static int varint(const uint8_t *p, size_t n, size_t *off, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*off >= n) return -1;
    uint8_t b = p[(*off)++];
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

int nl_probe_grpc_decode_response(const uint8_t *p, size_t n, int *status) {
  size_t off = 0;
  *status = 0; /* proto3 default: UNKNOWN */
  while (off < n) {
    uint64_t key, v;
    if (varint(p, n, &off, &key) < 0 || key >> 3 == 0) return -1;
    switch (key & 7) {
    case 0:
      if (varint(p, n, &off, &v) < 0) return -1;
      if (key >> 3 == 1) *status = (int)(int32_t)v;
      break;
    case 1:
      if (n - off < 8) return -1;
      off += 8;
      break;
    case 2:
      if (varint(p, n, &off, &v) < 0 || v > n - off) return -1;
      off += v;
      break;
    case 5:
      if (n - off < 4) return -1;
      off += 4;
      break;
    default:
      return -1;
    }
  }
  return 0;
}

const char *nl_probe_grpc_status_name(int s) {
  switch (s) {
  case 0: return "UNKNOWN";
  case 1: return "SERVING";
  case 2: return "NOT_SERVING";
  case 3: return "SERVICE_UNKNOWN";
  default: return "UNKNOWN";
  }
}

/* ---- the call ---- */

/* Stream callbacks run inside recv/flush: they only record what happened. */

static void on_message(nl_grpc_stream_t *st, const uint8_t *data, size_t len) {
  nl_check_t *c = st->user;
  int s;
  c->net->health = nl_probe_grpc_decode_response(data, len, &s) < 0 ? -2 : s;
}

static void on_close(nl_grpc_stream_t *st, const nl_grpc_status_t *status, bool refused) {
  (void)refused;
  nl_check_t *c = st->user;
  c->net->g_closed = true;
  c->net->g_code = status->code;
  free(c->net->g_message);
  c->net->g_message = nl_xstrdup(status->message);
}

static void report(nl_check_t *c) {
  if (!c->net->g_closed || c->done) return;
  char *m;
  nl_check_result_t r = NL_CHECK_FAILURE;
  if (c->net->g_code == NL_GRPC_OK && c->net->health == 1) {
    r = NL_CHECK_SUCCESS;
    m = nl_xstrdup("service healthy");
  } else if (c->net->g_code == NL_GRPC_OK && c->net->health >= 0) {
    m = nl_xasprintf("service unhealthy (responded with \"%s\")",
                     nl_probe_grpc_status_name(c->net->health));
  } else if (c->net->g_code == NL_GRPC_OK) {
    m = nl_xstrdup(c->net->health == -2 ? "error: health rpc probe failed: rpc error: code = Internal "
                                     "desc = grpc: failed to unmarshal the received message"
                                   : "error: health rpc probe failed: rpc error: code = Internal "
                                     "desc = no response message");
  } else if (c->net->g_code == NL_GRPC_UNIMPLEMENTED) {
    m = nl_xasprintf("error: this server does not implement the grpc health protocol "
                     "(grpc.health.v1.Health): %s",
                     c->net->g_message);
  } else if (c->net->g_code == NL_GRPC_DEADLINE_EXCEEDED) {
    m = nl_xasprintf("timeout: health rpc did not complete within %llus",
                     (unsigned long long)(c->timeout_ms / 1000));
  } else {
    nl_grpc_status_t st = {c->net->g_code, c->net->g_message};
    char *e = nl_grpc_status_format(&st);
    m = nl_xasprintf("error: health rpc probe failed: %s", e);
    free(e);
  }
  nl__check_finish(c, r, m);
  free(m);
}

#define UNAVAILABLE "error: health rpc probe failed: rpc error: code = Unavailable desc = "

static nl_check_t *check_of(nl_h2conn_t *conn) { return container_of(conn, nl_check_net_t, conn)->check; }

static void conn_ready(nl_h2conn_t *conn, bool h2) {
  nl_check_t *c = check_of(conn);
  assert(h2); /* plaintext: always HTTP/2 */
  c->net->connected = true;
  size_t len;
  uint8_t *msg = nl_probe_grpc_encode_request(c->net->service, &len);
  c->net->framed_len = len + 5;
  c->net->framed = nl_xmalloc(c->net->framed_len);
  c->net->framed[0] = 0;
  c->net->framed[1] = (uint8_t)(len >> 24);
  c->net->framed[2] = (uint8_t)(len >> 16);
  c->net->framed[3] = (uint8_t)(len >> 8);
  c->net->framed[4] = (uint8_t)len;
  memcpy(c->net->framed + 5, msg, len);
  free(msg);
  c->net->stream.on_message = on_message;
  c->net->stream.on_close = on_close;
  c->net->stream.user = c;
  if (nl_grpc_submit(conn->h2, &c->net->channel, &c->net->stream, HEALTH_CHECK, c->net->framed, c->net->framed_len,
                     c->timeout_ms) < 0) {
    nl__check_finish(c, NL_CHECK_FAILURE, UNAVAILABLE "cannot start the call");
    return;
  }
  nl_h2conn_flush(conn);
}

/* The session moved: the call may have ended. */
static void conn_moved(nl_h2conn_t *conn) { report(check_of(conn)); }

/* The dial failed, or the connection ended: the call ends with UNAVAILABLE,
 * as grpc-go reports a lost connection. */
static void conn_lost(nl_h2conn_t *conn, const nl_err_t *err) {
  nl_check_t *c = check_of(conn);
  if (c->done) return;
  if (!conn->connected) {
    char *m = nl_xasprintf("error: failed to connect service at \"%s\": %s", c->net->addr, err->msg);
    nl__check_finish(c, NL_CHECK_FAILURE, m);
    free(m);
    return;
  }
  if (conn->h2) nl_grpc_fail_streams(conn->h2, err->msg);
  if (!c->net->g_closed) {
    char *m = nl_xasprintf(UNAVAILABLE "%s", err->msg);
    nl__check_finish(c, NL_CHECK_FAILURE, m);
    free(m);
    return;
  }
  report(c);
}

static void conn_closed(nl_h2conn_t *conn) { nl__check_unref(check_of(conn)); }

static const nl_h2conn_cbs_t conn_cbs = {.ready = conn_ready, .moved = conn_moved,
                                         .lost = conn_lost, .closed = conn_closed};

void nl__check_grpc_start(nl_check_t *c, const char *host, int port) {
  c->net->channel = (nl_grpc_channel_t){
      .authority = c->net->addr,
      .user_agent = c->env.user_agent ? c->env.user_agent : "kube-probe/1.30"};
  nl_h2conn_opts_t o = {.dial = {.host = host, .port = port},
                        .h2 = {.window = 65535},
                        .words = NL_H2CONN_WORDS_GRPC,
                        .read_buf = 4096};
  c->net->conn.data = c;
  nl_h2conn_init(&c->net->conn, c->env.loop, &o, &conn_cbs);
  c->net->conn_open = true;
  c->refs++;
  nl_h2conn_start(&c->net->conn);
}

void nl__check_grpc_teardown(nl_check_t *c) {
  if (!c->net || !c->net->conn_open) return;
  c->net->conn_open = false;
  nl_h2conn_close(&c->net->conn);
}
