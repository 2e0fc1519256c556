/* The kubelet's local HTTP endpoint on healthzBindAddress:healthzPort:
 * /healthz (upstream's checks: ping, syncloop, pleg). The kubelet server on
 * port 10250 (agent/kserver.h) serves the same /healthz through this
 * module's handler. */
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
} nl_agent_server_t;

/* Creates the server (routes included). Must be stopped with nl_agent_server_stop
 * once this returned 0. */
int nl_agent_server_init(nl_agent_server_t *s, uv_loop_t *loop, nl_err_t **err);
void nl_agent_server_add_check(nl_agent_server_t *s, const char *name, nl_health_check_fn fn,
                               void *ctx);
/* As upstream's healthz handler: "ok", or 500 with one line per check; ctx is
 * the nl_agent_server_t. */
void nl_agent_server_healthz(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp);
int nl_agent_server_listen(nl_agent_server_t *s, const char *host, int port, nl_err_t **err);
void nl_agent_server_stop(nl_agent_server_t *s, nl_http_server_done_fn done, void *ctx);

#endif
