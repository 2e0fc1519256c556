/* One-shot checks: dispatch, lifetime, and the exec handler (upstream
 * pkg/probe/exec over CRI ExecSync, as the kubelet's RunInContainer). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/runtime.h"
#include "managers/probe_internal.h"
#include "reactor/buf.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static void timer_closed(uv_handle_t *h) {
  nl_check_t *c = container_of((uv_timer_t *)h, nl_check_t, timer);
  nl__check_unref(c);
}

static void dial_closed(nl_dial_t *d) {
  nl_check_t *c = container_of(d, nl_check_net_t, dial)->check;
  nl__check_unref(c);
}

void nl__check_unref(nl_check_t *c) {
  if (--c->refs > 0) return;
  free(c->pending_out);
  free(c->cmd_str);
  if (c->net) {
    free(c->net->addr);
    free(c->net->service);
    free(c->net->framed);
    free(c->net->g_message);
    free(c->net);
  }
  nl_tls_config_unref(c->own_tls);
  free(c);
}

nl_check_net_t *nl__check_net(nl_check_t *c) {
  if (!c->net) {
    c->net = nl_xcalloc(1, sizeof *c->net);
    c->net->check = c;
    c->net->health = -1;
  }
  return c->net;
}

/* Closes what the check holds on the loop. The CRI call and the HTTP request
 * keep their references until their callbacks, which see `done`. */
static void teardown(nl_check_t *c) {
  nl__check_grpc_teardown(c);
  if (c->net && c->net->dial_open) {
    c->net->dial_open = false;
    nl_dial_close(&c->net->dial, dial_closed);
  }
  if (c->http) nl_http_cancel(c->http); /* its callback comes later and unrefs */
  if (!uv_is_closing((uv_handle_t *)&c->timer)) uv_close((uv_handle_t *)&c->timer, timer_closed);
}

void nl__check_finish(nl_check_t *c, nl_check_result_t r, const char *output) {
  if (c->done) return;
  c->done = true;
  if (!c->cancelled) c->cb(c->ctx, r, output ? output : "");
  teardown(c);
}

void nl_check_cancel(nl_check_t *c) {
  if (c->done) return;
  c->cancelled = true;
  c->done = true;
  teardown(c);
}

static void deferred(uv_timer_t *t) {
  nl_check_t *c = container_of(t, nl_check_t, timer);
  nl__check_finish(c, c->pending_r, c->pending_out);
}

/* Reports a result on the next loop turn (never inside nl_check_start). */
static void defer(nl_check_t *c, nl_check_result_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void defer(nl_check_t *c, nl_check_result_t r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  free(c->pending_out);
  if (vasprintf(&c->pending_out, fmt, ap) < 0) abort();
  va_end(ap);
  c->pending_r = r;
  uv_timer_start(&c->timer, deferred, 0, 0);
}

/* ---- exec ---- */

static void append_capped(nl_buf_t *b, const uint8_t *p, size_t n) {
  if (b->len >= NL_PROBE_MAX_OUTPUT) return;
  if (n > NL_PROBE_MAX_OUTPUT - b->len) n = NL_PROBE_MAX_OUTPUT - b->len;
  nl_buf_append(b, p, n);
}

static void exec_done(const nl_grpc_status_t *st, Runtime__V1__ExecSyncResponse *resp, void *ctx) {
  nl_check_t *c = ctx;
  if (!c->done) {
    if (st->code == NL_GRPC_OK) {
      nl_buf_t out = {0};
      append_capped(&out, resp->stdout.data, resp->stdout.len);
      append_capped(&out, resp->stderr.data, resp->stderr.len);
      const char *o = out.data ? out.data : "";
      if (resp->exit_code == 0) {
        nl__check_finish(c, NL_CHECK_SUCCESS, o);
      } else if (!c->hook) {
        nl__check_finish(c, NL_CHECK_FAILURE, o);
      } else { /* the runtime client's CodeExitError, then the output */
        char *msg = nl_xasprintf("command '%s' exited with %d: %.*s, message: \"%s\"", c->cmd_str,
                                 resp->exit_code, (int)resp->stderr.len,
                                 resp->stderr.data ? (char *)resp->stderr.data : "", o);
        nl__check_finish(c, NL_CHECK_FAILURE, msg);
        free(msg);
      }
      nl_buf_free(&out);
    } else if (st->code == NL_GRPC_DEADLINE_EXCEEDED) {
      char *msg = nl_xasprintf("command \"%s\" timed out", c->cmd_str);
      nl__check_finish(c, NL_CHECK_FAILURE, msg);
      free(msg);
    } else {
      char *msg = nl_grpc_status_format(st);
      nl__check_finish(c, c->hook ? NL_CHECK_FAILURE : NL_CHECK_ERROR, msg);
      free(msg);
    }
  }
  nl__check_unref(c);
}

/* The runtime enforces the exec timeout; this timer is the backstop for one
 * that does not answer (a second later). */
static void exec_timeout(uv_timer_t *t) {
  nl_check_t *c = container_of(t, nl_check_t, timer);
  char *msg = nl_xasprintf("command \"%s\" timed out", c->cmd_str);
  nl__check_finish(c, NL_CHECK_FAILURE, msg);
  free(msg);
}

static void exec_start(nl_check_t *c, const nl_check_req_t *req) {
  const nl_strlist_t *cmd = &req->handler->exec->command;
  nl_buf_t s = {0};
  for (size_t i = 0; i < cmd->n; i++) {
    if (i) nl_buf_puts(&s, " ");
    nl_buf_puts(&s, cmd->items[i]);
  }
  c->cmd_str = s.data ? nl_buf_steal(&s) : nl_xstrdup("");
  if (!c->env.cri || !req->container_id) {
    defer(c, NL_CHECK_ERROR, "exec: no container runtime or container id");
    return;
  }
  Runtime__V1__ExecSyncRequest r = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
  r.container_id = (char *)req->container_id;
  r.cmd = cmd->items;
  r.n_cmd = cmd->n;
  r.timeout = (int64_t)((req->timeout_ms + 999) / 1000);
  c->refs++;
  nl_cri_exec_sync(c->env.cri, &r, exec_done, c);
  if (req->timeout_ms) uv_timer_start(&c->timer, exec_timeout, req->timeout_ms + 1000, 0);
}

/* ---- dispatch ---- */

nl_check_t *nl_check_start(const nl_check_env_t *env, const nl_check_req_t *req, nl_check_cb cb,
                           void *ctx) {
  nl_check_t *c = nl_xcalloc(1, sizeof *c);
  c->env = *env;
  c->cb = cb;
  c->ctx = ctx;
  c->hook = req->hook;
  c->timeout_ms = req->timeout_ms;
  c->refs = 1; /* the timer */
  uv_timer_init(env->loop, &c->timer);
  const nl_handler_t *h = req->handler;
  if (h && h->exec)
    exec_start(c, req);
  else if (h && h->http_get)
    nl__check_http_start(c, req);
  else if (h && h->tcp_socket)
    nl__check_tcp_start(c, req, false);
  else if (h && h->grpc)
    nl__check_tcp_start(c, req, true);
  else
    defer(c, NL_CHECK_ERROR, "missing probe handler");
  return c;
}

void nl__check_defer(nl_check_t *c, nl_check_result_t r, const char *msg) {
  defer(c, r, "%s", msg);
}

int nl_probe_resolve_port(const nl_intorstr_t *port, const nl_container_t *c, nl_err_t **err) {
  long p = -1;
  if (!port->set) return nl_err_set(err, NL_EINVAL, "intOrString had no kind");
  if (!port->is_str) {
    p = port->num;
  } else {
    bool found = false;
    for (size_t i = 0; c && i < c->n_ports; i++) {
      if (c->ports[i].name && strcmp(c->ports[i].name, port->str) == 0 &&
          (!c->ports[i].protocol || strcmp(c->ports[i].protocol, "TCP") == 0)) {
        p = c->ports[i].container_port;
        found = true;
        break;
      }
    }
    if (!found) { /* last ditch: an int stored as a string */
      char *end;
      errno = 0;
      p = strtol(port->str, &end, 10);
      if (!*port->str || *end || errno)
        return nl_err_set(err, NL_EINVAL, "port %s not found", port->str);
    }
  }
  if (p > 0 && p < 65536) return (int)p;
  return nl_err_set(err, NL_EINVAL, "invalid port number: %ld", p);
}

char *nl__probe_join_host_port(const char *host, int port) {
  if (strchr(host, ':')) return nl_xasprintf("[%s]:%d", host, port);
  return nl_xasprintf("%s:%d", host, port);
}
