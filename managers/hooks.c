/* Lifecycle hooks: one handler run with upstream's messages (handlers.go). */
#include "managers/hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/buf.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static void hook_closed(uv_handle_t *h) {
  nl_hook_t *k = container_of((uv_timer_t *)h, nl_hook_t, timer);
  free(k->what);
  free(k->container);
  free(k->pod_desc);
  free(k->pending_err);
  free(k);
}

/* Delivers once; the hook closes itself afterwards. */
static void deliver(nl_hook_t *k, const char *err) {
  if (k->done) return;
  k->done = true;
  if (k->check) nl_check_cancel(k->check);
  k->check = NULL;
  uv_timer_stop(&k->timer);
  k->cb(k->ctx, err);
  uv_close((uv_handle_t *)&k->timer, hook_closed);
}

static void deferred(uv_timer_t *t) {
  nl_hook_t *k = container_of(t, nl_hook_t, timer);
  char *e = k->pending_err;
  k->pending_err = NULL;
  deliver(k, e);
  free(e);
}

static void defer(nl_hook_t *k, const char *err) {
  free(k->pending_err);
  k->pending_err = err ? nl_xstrdup(err) : NULL;
  k->pending_set = true;
  uv_timer_start(&k->timer, deferred, 0, 0);
}

static void checked(void *ctx, nl_check_result_t r, const char *out) {
  nl_hook_t *k = ctx;
  k->check = NULL;
  if (r == NL_CHECK_SUCCESS || r == NL_CHECK_WARNING) {
    deliver(k, NULL);
    return;
  }
  char *msg = nl_xasprintf("%s for Container \"%s\" in Pod \"%s\" failed - error: %s", k->what,
                           k->container, k->pod_desc, out);
  deliver(k, msg);
  free(msg);
}

/* The grace period ended (preStop) or the sleep is over: both are no error
 * (upstream logs "PreStop hook not completed in grace period"). */
static void limit_hit(uv_timer_t *t) {
  nl_hook_t *k = container_of(t, nl_hook_t, timer);
  if (k->check) nl_vlog(2, "%s for Container \"%s\" in Pod \"%s\": not completed in time", k->what,
                        k->container, k->pod_desc);
  deliver(k, NULL);
}

nl_hook_t *nl_hook_run(uv_loop_t *loop, nl_cri_client_t *cri, const nl_hook_req_t *req,
                       nl_hook_cb cb, void *ctx) {
  nl_hook_t *k = nl_xcalloc(1, sizeof *k);
  nl_list_init(&k->link);
  k->cb = cb;
  k->ctx = ctx;
  uv_timer_init(loop, &k->timer);
  const nl_pod_t *pod = req->pod;
  k->container = nl_xstrdup(req->container->name);
  k->pod_desc = nl_xasprintf("%s_%s(%s)", pod->metadata.name, pod->metadata.namespace_,
                             pod->metadata.uid);
  const nl_handler_t *h = req->handler;
  if (h->sleep) { /* upstream runSleepHandler: a timer, cut short by the limit */
    k->what = nl_xstrdup("Sleep lifecycle hook");
    uint64_t ms = h->sleep->seconds > 0 ? (uint64_t)h->sleep->seconds * 1000 : 0;
    if (req->limit_ms && req->limit_ms < ms) ms = req->limit_ms;
    uv_timer_start(&k->timer, limit_hit, ms, 0);
    return k;
  }
  if (h->exec) {
    nl_buf_t b = {0};
    nl_buf_puts(&b, "Exec lifecycle hook ([");
    for (size_t i = 0; i < h->exec->command.n; i++)
      nl_buf_printf(&b, "%s%s", i ? " " : "", h->exec->command.items[i]);
    nl_buf_puts(&b, "])");
    k->what = nl_buf_steal(&b);
  } else if (h->http_get) {
    k->what = nl_xasprintf("HTTP lifecycle hook (%s)", h->http_get->path ? h->http_get->path : "");
  } else {
    k->what = nl_xstrdup("Lifecycle hook");
    defer(k, "invalid handler");
    return k;
  }
  nl_check_env_t env = {.loop = loop, .cri = cri};
  nl_check_req_t cr = {.handler = h,
                       .container = req->container,
                       .container_id = req->container_id,
                       .pod_ip = req->pod_ip,
                       .timeout_ms = 0,
                       .hook = true};
  k->check = nl_check_start(&env, &cr, checked, k);
  if (req->limit_ms) uv_timer_start(&k->timer, limit_hit, req->limit_ms, 0);
  return k;
}

void nl_hook_cancel(nl_hook_t *k) {
  if (k->done || k->pending_set) return;
  if (k->check) nl_check_cancel(k->check);
  k->check = NULL;
  defer(k, "cancelled");
}
