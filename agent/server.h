/* The kubelet's local HTTP endpoints on healthzBindAddress:healthzPort:
 * /healthz (upstream's checks: ping, syncloop, pleg) and /pods. The
 * authenticated kubelet API on port 10250 is not served yet (docs/DIFFERENCES.md). */
#ifndef NL_SERVER_H
#define NL_SERVER_H

#include <stdbool.h>

#include "reactor/buf.h"
#include "reactor/error.h"
#include "reactor/http_server.h"

/* A named health check: returns 0 when healthy, or -1 with *err saying why. */
typedef int (*nl_health_check_fn)(void *ctx, nl_err_t **err);

typedef struct nl_health_check {
  const char *name;
  nl_health_check_fn fn;
  void *ctx;
} nl_health_check_t;

#define NL_SERVER_MAX_CHECKS 4

typedef struct nl_agent_server {
  nl_http_server_t http;
  nl_health_check_t checks[NL_SERVER_MAX_CHECKS];
  int nchecks;
  /* Writes the v1 PodList for GET /pods into out. */
  void (*pods_json)(void *ctx, nl_buf_t *out);
  void *pods_ctx;
} nl_agent_server_t;

/* Creates the server (routes included). Must be stopped with nl_agent_server_stop
 * once this returned 0. */
int nl_agent_server_init(nl_agent_server_t *s, uv_loop_t *loop, nl_err_t **err);
void nl_agent_server_add_check(nl_agent_server_t *s, const char *name, nl_health_check_fn fn,
                               void *ctx);
int nl_agent_server_listen(nl_agent_server_t *s, const char *host, int port, nl_err_t **err);
void nl_agent_server_stop(nl_agent_server_t *s, nl_http_server_done_fn done, void *ctx);

#endif
