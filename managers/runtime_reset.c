/* The in-place restart of all of a pod's containers (upstream's
 * RestartAllContainers rule action, RestartAllContainersOnContainerExits):
 * every instance of the pod's init and regular containers is removed from the
 * runtime, one after the other, those not exited stopped first without grace
 * and without their preStop hooks (upstream kills them with a grace period of
 * 0). The sandbox stays, and so do the containers' logs: the next sync starts
 * the pod again from its first init container, and each new instance counts
 * its restarts on from its logs. The order is upstream's computePodActions':
 * the containers that did not trigger it (regular, then init), then those
 * that did. */
#include <assert.h>
#include <string.h>

#include "managers/runtime_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static const nl_container_t *spec_in(const nl_container_t *v, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].name, name) == 0) return &v[i];
  return NULL;
}

static void push(nl_runtime_op_t *op, size_t idx, bool init) {
  const nl_rt_container_t *c = &op->status->containers[idx];
  op->reset = nl_xrealloc(op->reset, (op->n_reset + 1) * sizeof(*op->reset));
  op->reset[op->n_reset++] = (nl__reset_step_t){idx, init, c->state != NL_RT_CONTAINER_EXITED};
}

/* The containers of one list (init or regular) that did (sources) or did not
 * trigger the restart, every instance of each. */
static void add(nl_runtime_op_t *op, bool init, bool sources) {
  const nl_pod_spec_t *spec = &op->pod->spec;
  const nl_container_t *v = init ? spec->init_containers : spec->containers;
  size_t n = init ? spec->n_init_containers : spec->n_containers;
  for (size_t i = 0; op->status && i < op->status->n_containers; i++) {
    const nl_rt_container_t *c = &op->status->containers[i];
    const nl_container_t *sc = c->name ? spec_in(v, n, c->name) : NULL;
    if (!sc) continue;
    bool source = c->state == NL_RT_CONTAINER_EXITED && nl_container_restarts_all(sc, c->exit_code);
    if (source == sources) push(op, i, init);
  }
}

static void next(nl_runtime_op_t *op);

/* Records a failed call on the current step; returns whether it went well. */
static bool check(nl_runtime_op_t *op, const nl_grpc_status_t *st, const char *reason) {
  if (st->code == NL_GRPC_OK || st->code == NL_GRPC_NOT_FOUND) return true;
  char *e = nl_grpc_status_format(st);
  nl_sync_step_t *s = &op->result.steps[op->result.n_steps - 1];
  nl__step_fail(s, reason, "%s", e);
  nl_err_set(&op->result.err, NL_ERUNTIME, "pod %s: %s %s: %s", op->desc,
             nl_sync_action_name(s->action), s->target, e);
  free(e);
  return false;
}

static void removed(const nl_grpc_status_t *st, Runtime__V1__RemoveContainerResponse *r, void *ctx) {
  (void)r;
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  if (!check(op, st, NL_REASON_REMOVE_CONTAINER)) {
    nl__op_finish(op);
    return;
  }
  op->cursor++;
  next(op);
}

static void remove_current(nl_runtime_op_t *op) {
  Runtime__V1__RemoveContainerRequest req = RUNTIME__V1__REMOVE_CONTAINER_REQUEST__INIT;
  req.container_id = op->status->containers[op->reset[op->cursor].idx].id;
  op->pending++;
  nl_cri_remove_container(op->rt->cri, &req, removed, op);
}

static void stopped(const nl_grpc_status_t *st, Runtime__V1__StopContainerResponse *r, void *ctx) {
  (void)r;
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  if (!check(op, st, NL_REASON_KILL_CONTAINER)) {
    nl__op_finish(op);
    return;
  }
  remove_current(op);
}

static void next(nl_runtime_op_t *op) {
  if (op->cursor == op->n_reset) {
    nl__op_finish(op);
    return;
  }
  const nl__reset_step_t *step = &op->reset[op->cursor];
  const nl_rt_container_t *c = &op->status->containers[step->idx];
  nl__result_add(&op->result, NL_SYNC_REMOVE_CONTAINER, c->name, step->init);
  nl_info("pod %s: removing container %s (%s) before the pod restarts", op->desc, c->name, c->id);
  if (!step->kill) {
    remove_current(op);
    return;
  }
  nl__op_event(op, op->pod, c->name, NL_EVENT_NORMAL, "Killing", "Stopping container %s", c->name);
  op->pending++;
  nl__stop_container(op->rt, c->id, 0, stopped, op);
}

static void reset_start(nl_runtime_op_t *op) {
  add(op, false, false);
  add(op, true, false);
  add(op, false, true);
  add(op, true, true);
  op->cursor = 0;
  next(op);
}

nl_runtime_op_t *nl_runtime_reset_pod(nl_runtime_t *rt, const nl_pod_t *pod,
                                      const nl_rt_pod_status_t *status, nl_runtime_sync_cb cb,
                                      void *ctx) {
  assert(pod);
  return nl__op_kick(nl__op_new(rt, NL__OP_RESET, pod, status, cb, ctx), reset_start);
}
