/* Lifecycle hooks (upstream pkg/kubelet/lifecycle/handlers.go and
 * kuberuntime_container.go executePreStopHook): postStart and preStop handlers
 * (exec, httpGet, sleep) run on the loop through the probe checks of
 * managers/probe.h, with upstream's failure messages. The runtime runs them
 * (runtime_sync.c after StartContainer, runtime_kill.c / runtime_sync.c before
 * StopContainer) through the nl__prestop_run / nl__poststart_run helpers. */
#ifndef NL_HOOKS_H
#define NL_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "agent/model/pod.h"
#include "cri/conn.h"
#include "managers/probe.h"
#include "reactor/list.h"

typedef struct nl_hook nl_hook_t;

/* err is NULL on success, else upstream's message ("Exec lifecycle hook
 * ([sh -c exit 3]) for Container \"c\" in Pod \"p_ns(uid)\" failed - error:
 * ..."); borrowed for the call. */
typedef void (*nl_hook_cb)(void *ctx, const char *err);

typedef struct nl_hook_req {
  const nl_pod_t *pod;
  const nl_container_t *container;
  const char *container_id;
  const nl_handler_t *handler;
  const char *pod_ip;
  const char *hook_name; /* "PostStart" or "PreStop" (logs) */
  /* > 0: the hook is abandoned after this long (preStop: the grace period; a
   * sleep action ends then too); 0: no limit (upstream runs postStart exec and
   * HTTP hooks without one). */
  uint64_t limit_ms;
} nl_hook_req_t;

struct nl_hook {
  nl_list_t link;    /* for the owner (the runtime op tracks its hooks) */
  uv_timer_t timer;  /* sleep, limit, and deferred delivery */
  nl_check_t *check;
  nl_hook_cb cb;
  void *ctx;
  bool done;
  char *what;        /* "Exec lifecycle hook ([...])" or "HTTP lifecycle hook (/path)" */
  char *container, *pod_desc;
  char *pending_err; /* result waiting for the deferred delivery */
  bool pending_set;
};

/* Starts a hook; req is copied. cb runs exactly once, never inside this call
 * (also after nl_hook_cancel). Never returns NULL. */
nl_hook_t *nl_hook_run(uv_loop_t *loop, nl_cri_client_t *cri, const nl_hook_req_t *req,
                       nl_hook_cb cb, void *ctx);
/* Abandons the hook's work: cb runs soon with err "cancelled" unless it has
 * already been decided. The hook frees itself after cb. */
void nl_hook_cancel(nl_hook_t *h);

/* ---- runtime glue (hooks_runtime.c; op internals from runtime_internal.h) ---- */

struct nl_runtime_op;
/* Called with the hook's hold on op->pending: the callee drops it (nl__op_resume,
 * or op->pending-- when it holds another count). grace is what remains of the
 * grace period (upstream: minus the hook's whole seconds), 0 or less when the
 * hook took all of it; StopContainer then gets NL_RUNTIME_MIN_GRACE_SECONDS. */
typedef void (*nl__prestop_then)(struct nl_runtime_op *op, void *ctx, int64_t grace);
/* Runs spec's preStop hook (when it has one and grace > 0) bounded by grace,
 * then calls then(); without a hook then() runs at once. op->pending++ either way.
 * pod is op->pod, or a pod restored from the container's labels and annotations
 * (a pod no source knows); borrowed until then() runs. */
void nl__prestop_run(struct nl_runtime_op *op, const nl_pod_t *pod, const nl_container_t *spec,
                     const char *cid, const char *pod_ip, int64_t grace, nl__prestop_then then,
                     void *ctx);
/* Runs the current container's postStart hook (op->cur, cid); then(op, err) gets
 * the hold on op->pending and err NULL on success. */
void nl__poststart_run(struct nl_runtime_op *op, const char *cid, const char *pod_ip,
                       void (*then)(struct nl_runtime_op *op, const char *err));
/* Cancels the op's running hooks (nl_runtime_cancel, nl_runtime_stop). */
void nl__op_hooks_cancel(struct nl_runtime_op *op);

#endif
