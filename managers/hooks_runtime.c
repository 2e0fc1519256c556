/* The runtime's side of lifecycle hooks: a hook holds its operation
 * (op->pending) and is cancelled with it, so that a stopping runtime never
 * waits on a hook that hangs. */
#include <stdlib.h>
#include <string.h>

#include "managers/hooks.h"
#include "managers/runtime_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

typedef struct hold {
  nl_runtime_op_t *op;
  nl_hook_t *hook;
  const nl_pod_t *pod;       /* preStop: the pod and container the event names */
  const char *container;
  uint64_t started_ms;
  int64_t grace;
  nl__prestop_then then;
  void (*post_then)(nl_runtime_op_t *op, const char *err);
  void *ctx;
} hold_t;

static void track(nl_runtime_op_t *op, nl_hook_t *h) {
  if (!op->hooks.next) nl_list_init(&op->hooks);
  nl_list_insert_tail(&op->hooks, &h->link);
}

void nl__op_hooks_cancel(nl_runtime_op_t *op) {
  if (!op->hooks.next) return;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &op->hooks) nl_hook_cancel(nl_list_entry(pos, nl_hook_t, link));
}

static void prestop_done(void *ctx, const char *err) {
  hold_t *h = ctx;
  nl_runtime_op_t *op = h->op;
  nl_list_remove(&h->hook->link);
  if (err && strcmp(err, "cancelled") != 0)
    /* upstream records FailedPreStopHook without the message (it may hold secrets) */
  {
    nl_warn("pod %s: PreStop hook failed: %s", op->desc, err);
    nl__op_event(op, h->pod, h->container, NL_EVENT_WARNING, "FailedPreStopHook",
                 "PreStopHook failed");
  }
  int64_t elapsed = (int64_t)((uv_now(op->rt->loop) - h->started_ms) / 1000);
  int64_t grace = h->grace - elapsed; /* may be 0 or less: the callee clamps */
  nl__prestop_then then = h->then;
  void *tctx = h->ctx;
  free(h);
  then(op, tctx, grace);
}

void nl__prestop_run(nl_runtime_op_t *op, const nl_pod_t *pod, const nl_container_t *spec,
                     const char *cid, const char *pod_ip, int64_t grace, nl__prestop_then then,
                     void *ctx) {
  op->pending++;
  if (!pod || !spec || !spec->lifecycle || !spec->lifecycle->pre_stop || grace <= 0) {
    then(op, ctx, grace);
    return;
  }
  nl_info("pod %s: running PreStop hook of container %s (grace period %llds)", op->desc,
          spec->name, (long long)grace);
  hold_t *h = nl_xcalloc(1, sizeof *h);
  h->op = op;
  h->pod = pod;
  h->container = spec->name;
  h->started_ms = uv_now(op->rt->loop);
  h->grace = grace;
  h->then = then;
  h->ctx = ctx;
  nl_hook_req_t req = {.pod = pod,
                       .container = spec,
                       .container_id = cid,
                       .handler = spec->lifecycle->pre_stop,
                       .pod_ip = pod_ip,
                       .hook_name = "PreStop",
                       .limit_ms = (uint64_t)grace * 1000};
  h->hook = nl_hook_run(op->rt->loop, op->rt->cri, &req, prestop_done, h);
  track(op, h->hook);
}

static void poststart_done(void *ctx, const char *err) {
  hold_t *h = ctx;
  nl_runtime_op_t *op = h->op;
  nl_list_remove(&h->hook->link);
  void (*then)(nl_runtime_op_t *, const char *) = h->post_then;
  free(h);
  then(op, err);
}

void nl__poststart_run(nl_runtime_op_t *op, const char *cid, const char *pod_ip,
                       void (*then)(nl_runtime_op_t *op, const char *err)) {
  op->pending++;
  hold_t *h = nl_xcalloc(1, sizeof *h);
  h->op = op;
  h->post_then = then;
  nl_hook_req_t req = {.pod = op->pod,
                       .container = op->cur,
                       .container_id = cid,
                       .handler = op->cur->lifecycle->post_start,
                       .pod_ip = pod_ip,
                       .hook_name = "PostStart"};
  h->hook = nl_hook_run(op->rt->loop, op->rt->cri, &req, poststart_done, h);
  track(op, h->hook);
}
