#include "agent/server.h"

#include <string.h>

#include "reactor/log.h"

void nl_agent_server_healthz(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_agent_server_t *s = ctx;
  bool verbose = strstr(req->query, "verbose") != NULL;
  const char *only = strncmp(req->path, "/healthz/", 9) == 0 ? req->path + 9 : NULL;
  nl_buf_t out = NL_BUF_INIT;
  bool healthy = true, found = only == NULL || strcmp(only, "ping") == 0;
  nl_buf_puts(&out, only && strcmp(only, "ping") == 0 ? "" : "[+]ping ok\n");
  for (int i = 0; i < s->nchecks; i++) {
    if (only && strcmp(only, s->checks[i].name) != 0) continue;
    found = true;
    nl_err_t *err = NULL;
    if (s->checks[i].fn(s->checks[i].ctx, &err) < 0) {
      healthy = false;
      nl_buf_printf(&out, "[-]%s failed: reason withheld\n", s->checks[i].name);
      nl_info("healthz check %s failed: %s", s->checks[i].name, nl_err_msg(err));
      nl_err_free(&err);
    } else {
      nl_buf_printf(&out, "[+]%s ok\n", s->checks[i].name);
    }
  }
  if (!found) {
    nl_buf_free(&out);
    nl_http_resp_send_str(resp, 404, "404 page not found\n");
    return;
  }
  if (!healthy) {
    nl_buf_puts(&out, "healthz check failed\n");
    nl_http_resp_send(resp, 500, out.data, out.len);
  } else if (verbose) {
    nl_buf_puts(&out, "healthz check passed\n");
    nl_http_resp_send(resp, 200, out.data, out.len);
  } else {
    nl_http_resp_send_str(resp, 200, "ok");
  }
  nl_buf_free(&out);
}

int nl_agent_server_init(nl_agent_server_t *s, uv_loop_t *loop, nl_err_t **err) {
  memset(s, 0, sizeof *s);
  /* Its routes take no body: none is ever read. */
  nl_http_server_opts_t o = {.lazy_body = true};
  if (nl_http_server_init(&s->http, loop, &o, err) < 0) return -1;
  nl_http_server_route(&s->http, "GET", "/healthz", nl_agent_server_healthz, s);
  nl_http_server_route(&s->http, "GET", "/healthz/", nl_agent_server_healthz, s);
  return 0;
}

void nl_agent_server_add_check(nl_agent_server_t *s, const char *name, nl_health_check_fn fn,
                               void *ctx) {
  if (s->nchecks == NL_SERVER_MAX_CHECKS) return;
  s->checks[s->nchecks++] = (nl_health_check_t){name, fn, ctx};
}

int nl_agent_server_listen(nl_agent_server_t *s, const char *host, int port, nl_err_t **err) {
  return nl_http_server_listen(&s->http, host, port, err);
}

void nl_agent_server_stop(nl_agent_server_t *s, nl_http_server_done_fn done, void *ctx) {
  nl_http_server_stop(&s->http, done, ctx);
}
