/* /exec, /attach and /portForward on the kubelet server, as upstream's
 * getExec/getAttach/getPortForward with the default (non-redirecting) streaming
 * mode: the runtime's streaming URL comes from CRI Exec, Attach or PortForward,
 * the client's Upgrade request goes to that URL with the path rewritten, and
 * from then on the bytes are copied both ways, unchanged, by a pump with
 * back-pressure (reactor/pump.h). So SPDY/3.1 and WebSocket (channel.k8s.io,
 * v4/v5) pass alike: nanolet never reads the streams.
 *
 * Routes: /exec/{namespace}/{pod}/{container}, /exec/{ns}/{pod}/{uid}/{container}
 * (GET and POST), the same for /attach, and /portForward/{ns}/{pod},
 * /portForward/{ns}/{pod}/{uid}. The query carries command (repeated), input,
 * output, error and tty ("1"), and ports for WebSocket port forwarding, as
 * the apiserver writes them. */
#ifndef NL_KSERVER_STREAM_H
#define NL_KSERVER_STREAM_H

#include <stdbool.h>
#include <uv.h>

#include "agent/kserver.h"
#include "reactor/list.h"

typedef struct nl_cri_client nl_cri_client_t;

/* Finds the CRI id of a pod's running container (container non-NULL) or of
 * its sandbox (container NULL). uid is NULL unless the path carried one (then
 * a pod with another uid is not found). Returns 0 with *id (owned), or an HTTP
 * status with *msg (owned; upstream: 404 "pod does not exist"). */
typedef int (*nl_kserver_stream_lookup_fn)(void *ctx, const char *ns, const char *pod,
                                           const char *uid, const char *container, char **id,
                                           char **msg);

/* Embedded in its owner; sessions in flight hang off it. */
typedef struct nl_kserver_stream {
  uv_loop_t *loop;
  nl_cri_client_t *cri; /* borrowed */
  nl_kserver_stream_lookup_fn lookup;
  void *lookup_ctx;
  size_t high_water;    /* per direction; 0: NL_PUMP_DEFAULT_HIGH_WATER */
  nl_list_t sessions;
  bool stopping;
  void (*stop_done)(void *ctx);
  void *stop_ctx;
} nl_kserver_stream_t;

void nl_kserver_stream_init(nl_kserver_stream_t *s, uv_loop_t *loop, nl_cri_client_t *cri,
                            nl_kserver_stream_lookup_fn lookup, void *lookup_ctx);

/* Route handlers; ctx is the nl_kserver_stream_t. */
void nl_kserver_exec_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                             nl_http_resp_t *resp);
void nl_kserver_attach_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                               nl_http_resp_t *resp);
void nl_kserver_port_forward_handler(void *ctx, const nl_http_req_t *req,
                                     const nl_kserver_user_t *user, nl_http_resp_t *resp);

/* Ends every session (its connections closed) and calls done once all memory
 * is freed (at once when there is none). Call before the CRI client stops. */
void nl_kserver_stream_stop(nl_kserver_stream_t *s, void (*done)(void *ctx), void *ctx);

/* ---- pieces, public for tests ------------------------------------------- */

typedef enum { NL_STREAM_EXEC, NL_STREAM_ATTACH, NL_STREAM_PORT_FORWARD } nl_stream_kind_t;

typedef struct nl_stream_params {
  char *ns, *pod, *uid, *container; /* uid NULL when absent; container NULL for portForward */
  char **cmd;                       /* NULL-terminated (exec) */
  size_t n_cmd;
  bool tty, in, out, err;
  int *ports; /* portForward over WebSocket: the ports query */
  size_t n_ports;
} nl_stream_params_t;

/* Reads the path (after "/exec/" etc.) and query as upstream's NewOptions and
 * NewV4Options. Returns 0, or an HTTP status (400/404) with *msg (owned):
 * "you must specify at least 1 of stdin, stdout, stderr". tty with stderr
 * drops stderr, as upstream. */
int nl_stream_params_parse(nl_stream_params_t *p, nl_stream_kind_t kind, const char *path,
                           const char *query, bool websocket, char **msg);
void nl_stream_params_free(nl_stream_params_t *p);

/* The request to send to the runtime's URL path: the client's method and
 * headers with the target replaced, Host set to host_port, and the client's
 * Authorization dropped (the runtime needs none and gets no credential).
 * Returns an allocated head ending in CRLFCRLF. */
char *nl_stream_forward_head(const nl_http_req_t *req, const char *host_port, const char *target);

#endif
