/* computePodActions (upstream kuberuntime_manager.go, SidecarContainers on):
 * what SyncPod must do to move the runtime's pod toward the spec. */
#include <string.h>

#include "managers/runtime_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define REASON_LIVENESS "LivenessProbe"
#define REASON_STARTUP "StartupProbe"
#define REASON_UNKNOWN "Unknown"

static const nl_rt_container_t *find(const nl_rt_pod_status_t *s, const char *name) {
  return nl_rt_pod_status_find(s, name);
}

static const char *state_name(nl_rt_container_state_t s) {
  switch (s) {
  case NL_RT_CONTAINER_CREATED: return "created";
  case NL_RT_CONTAINER_RUNNING: return "running";
  case NL_RT_CONTAINER_EXITED: return "exited";
  default: return "unknown";
  }
}

static void push_idx(size_t **v, size_t *n, size_t i) {
  *v = nl_xrealloc(*v, (*n + 1) * sizeof **v);
  (*v)[(*n)++] = i;
}

static void to_kill(nl_pod_actions_t *a, const nl_rt_container_t *st, const nl_container_t *spec,
                 bool init, const char *reason, char *message) {
  for (size_t i = 0; i < a->n_to_kill; i++)
    if (strcmp(a->to_kill[i].id, st->id) == 0) { /* a map upstream: last write wins */
      free(a->to_kill[i].message);
      a->to_kill[i].message = message;
      a->to_kill[i].reason = reason;
      return;
    }
  a->to_kill = nl_xrealloc(a->to_kill, (a->n_to_kill + 1) * sizeof *a->to_kill);
  a->to_kill[a->n_to_kill++] = (nl_kill_info_t){
      .id = nl_xstrdup(st->id), .name = nl_xstrdup(st->name), .spec = spec, .init = init,
      .message = message, .reason = reason};
}

void nl__push_idx(size_t **v, size_t *n, size_t i) { push_idx(v, n, i); }

void nl__to_kill(nl_pod_actions_t *a, const nl_rt_container_t *st, const nl_container_t *spec,
                 bool init, const char *reason, char *message) {
  to_kill(a, st, spec, init, reason, message);
}

/* A container labelled before in-place resize carries the hash of its whole
 * spec: still the same container while that matches. */
static bool changed(const nl_container_t *c, const nl_rt_container_t *st) {
  return nl_container_hash(c) != st->hash && nl_container_hash_legacy(c) != st->hash;
}

static nl_probe_result_t probe(nl_runtime_probe_fn fn, void *ctx, const char *id,
                               nl_probe_kind_t k) {
  return fn ? fn(ctx, id, k) : NL_PROBE_RESULT_NONE;
}

bool nl_runtime_should_restart(const nl_container_t *c, const nl_pod_t *pod,
                               const nl_rt_pod_status_t *status) {
  const nl_rt_container_t *st = find(status, c->name);
  if (!st) return true;
  if (st->state == NL_RT_CONTAINER_RUNNING) return false;
  if (st->state == NL_RT_CONTAINER_UNKNOWN || st->state == NL_RT_CONTAINER_CREATED) return true;
  return nl_container_should_restart(&pod->spec, c, st->exit_code);
}

/* runtimeutil.PodSandboxChanged */
static bool sandbox_changed(const nl_pod_t *pod, const nl_rt_pod_status_t *s, uint32_t *attempt,
                            const char **id) {
  *attempt = 0;
  *id = NULL;
  if (!s || s->n_sandboxes == 0) return true;
  size_t ready = 0;
  for (size_t i = 0; i < s->n_sandboxes; i++) ready += s->sandboxes[i].state == NL_RT_SANDBOX_READY;
  const nl_rt_sandbox_t *sb = &s->sandboxes[0];
  *id = sb->id;
  *attempt = sb->attempt + 1;
  if (ready > 1 || sb->state != NL_RT_SANDBOX_READY) return true;
  if (sb->host_network != pod->spec.host_network) {
    *id = NULL; /* upstream: the network namespace changed, no id */
    return true;
  }
  if (!pod->spec.host_network && (!sb->ip || !*sb->ip)) return true;
  *attempt = sb->attempt;
  return false;
}

static bool init_failed(const nl_rt_container_t *st) {
  if (st->reason && strcmp(st->reason, "OOMKilled") == 0) return true;
  if (st->state == NL_RT_CONTAINER_EXITED && st->exit_code != 0) return true;
  return st->state == NL_RT_CONTAINER_UNKNOWN;
}

static bool any_regular_created(const nl_pod_t *pod, const nl_rt_pod_status_t *s) {
  for (size_t i = 0; i < pod->spec.n_containers; i++) {
    const nl_rt_container_t *st = find(s, pod->spec.containers[i].name);
    if (st && st->state != NL_RT_CONTAINER_UNKNOWN) return true;
  }
  return false;
}

/* computeInitContainerActions; returns whether the pod has initialized. */
static bool init_actions(const nl_pod_t *pod, const nl_rt_pod_status_t *s,
                         nl_runtime_probe_fn pf, void *pctx, nl_pod_actions_t *a) {
  const nl_pod_spec_t *spec = &pod->spec;
  if (spec->n_init_containers == 0) return true;
  bool initialized = false;
  for (size_t i = 0; i < spec->n_containers && !initialized; i++) {
    const nl_rt_container_t *st = find(s, spec->containers[i].name);
    /* Exited ones may belong to a previous sandbox (node reboot): ignored. */
    if (st && (st->state == NL_RT_CONTAINER_CREATED || st->state == NL_RT_CONTAINER_RUNNING))
      initialized = true;
  }
  bool prev_init = initialized;
  for (size_t i = spec->n_init_containers; i-- > 0;) {
    const nl_container_t *c = &spec->init_containers[i];
    const nl_rt_container_t *st = find(s, c->name);
    bool sidecar = nl__is_restartable_init(c);
    if (!st) {
      if (prev_init && sidecar) push_idx(&a->init_to_start, &a->n_init_to_start, i);
      continue;
    }
    if (prev_init && !sidecar) continue;
    switch (st->state) {
    case NL_RT_CONTAINER_CREATED:
      push_idx(&a->init_to_start, &a->n_init_to_start, i);
      break;
    case NL_RT_CONTAINER_RUNNING: {
      if (!sidecar) { /* InPlacePodVerticalScalingInitContainers: kept running, resizable */
        push_idx(&a->init_to_resize, &a->n_init_to_resize, i);
        break;
      }
      if (c->startup_probe) {
        nl_probe_result_t r = probe(pf, pctx, st->id, NL_PROBE_STARTUP);
        if (r == NL_PROBE_RESULT_NONE) break;
        if (r == NL_PROBE_RESULT_FAILURE) {
          to_kill(a, st, c, true, REASON_STARTUP,
               nl_xasprintf("Init container %s failed startup probe", c->name));
          push_idx(&a->init_to_start, &a->n_init_to_start, i);
          break;
        }
      }
      if (i == spec->n_init_containers - 1)
        initialized = true;
      else if (!prev_init)
        push_idx(&a->init_to_start, &a->n_init_to_start, i + 1);
      if (changed(c, st)) {
        to_kill(a, st, c, true, "", nl_xasprintf("Init container %s definition changed", c->name));
        push_idx(&a->init_to_start, &a->n_init_to_start, i);
        break;
      }
      if (c->liveness_probe) {
        nl_probe_result_t r = probe(pf, pctx, st->id, NL_PROBE_LIVENESS);
        if (r == NL_PROBE_RESULT_NONE) break; /* not probed yet: no resize either */
        if (r == NL_PROBE_RESULT_FAILURE) {
          to_kill(a, st, c, true, REASON_LIVENESS,
               nl_xasprintf("Init container %s failed liveness probe", c->name));
          push_idx(&a->init_to_start, &a->n_init_to_start, i);
          break;
        }
      }
      push_idx(&a->init_to_resize, &a->n_init_to_resize, i); /* upstream's resize check */
      break;
    }
    case NL_RT_CONTAINER_EXITED:
      if (sidecar) {
        push_idx(&a->init_to_start, &a->n_init_to_start, i);
      } else if (init_failed(st)) {
        if (!nl_runtime_should_restart(c, pod, s)) {
          a->kill_pod = true;
          a->n_init_to_start = 0;
          return false;
        }
        push_idx(&a->init_to_start, &a->n_init_to_start, i);
      } else if (i == spec->n_init_containers - 1) {
        initialized = true;
      } else {
        push_idx(&a->init_to_start, &a->n_init_to_start, i + 1);
      }
      break;
    default:
      /* no exit code for the rules to see: the container's policy alone */
      if (!sidecar && !nl_container_restarts_when_killed(spec, c)) {
        a->kill_pod = true;
        a->n_init_to_start = 0;
        return false;
      }
      to_kill(a, st, c, true, REASON_UNKNOWN,
           nl_xasprintf("Init container is in \"%s\" state, try killing it before restart",
                        state_name(st->state)));
      push_idx(&a->init_to_start, &a->n_init_to_start, i);
      break;
    }
    prev_init = true;
  }
  if (!prev_init) push_idx(&a->init_to_start, &a->n_init_to_start, 0);
  for (size_t i = 0; i < a->n_init_to_start / 2; i++) { /* back to spec order */
    size_t t = a->init_to_start[i];
    a->init_to_start[i] = a->init_to_start[a->n_init_to_start - 1 - i];
    a->init_to_start[a->n_init_to_start - 1 - i] = t;
  }
  return initialized;
}

void nl_runtime_compute_actions(const nl_pod_t *pod, const nl_rt_pod_status_t *s,
                                nl_runtime_probe_fn pf, void *pctx, nl_pod_actions_t *a) {
  memset(a, 0, sizeof *a);
  const nl_pod_spec_t *spec = &pod->spec;
  const char *sid;
  bool create = sandbox_changed(pod, s, &a->attempt, &sid);
  a->kill_pod = a->create_sandbox = create;
  a->sandbox_id = sid ? nl_xstrdup(sid) : NULL;
  if (create) {
    if (!nl__pod_restart_on_failure(pod) && a->attempt != 0 && s && s->n_containers != 0) {
      /* All done and not to be restarted: kill, don't create. */
      a->create_sandbox = false;
      return;
    }
    for (size_t i = 0; i < spec->n_containers; i++) {
      const nl_rt_container_t *st = find(s, spec->containers[i].name);
      if (nl_container_on_failure_only(spec, &spec->containers[i]) && st && st->state == NL_RT_CONTAINER_EXITED && st->exit_code == 0)
        continue; /* containerSucceeded */
      push_idx(&a->to_start, &a->n_to_start, i);
    }
    if (a->n_to_start == 0 && any_regular_created(pod, s)) {
      a->create_sandbox = false;
      return;
    }
    if (spec->n_init_containers) {
      a->n_to_start = 0;
      push_idx(&a->init_to_start, &a->n_init_to_start, 0);
    }
    return;
  }

  /* Ephemeral containers may start before initialization is complete; they
   * are never restarted. */
  for (size_t i = 0; i < spec->n_ephemeral_containers; i++)
    if (!find(s, spec->ephemeral_containers[i].name))
      push_idx(&a->ephemeral_to_start, &a->n_ephemeral_to_start, i);

  bool initialized = init_actions(pod, s, pf, pctx, a);
  if (a->kill_pod || !initialized) return;
  a->initialized = true;

  size_t keep = 0;
  for (size_t i = 0; i < spec->n_containers; i++) {
    const nl_container_t *c = &spec->containers[i];
    const nl_rt_container_t *st = find(s, c->name);
    if (!st || st->state != NL_RT_CONTAINER_RUNNING) {
      if (nl_runtime_should_restart(c, pod, s)) {
        nl_vlog(3, "container %s of pod %s is not in the desired state and shall be started",
                c->name, pod->metadata.name);
        push_idx(&a->to_start, &a->n_to_start, i);
        if (st && st->state == NL_RT_CONTAINER_UNKNOWN)
          to_kill(a, st, c, false, REASON_UNKNOWN,
               nl_xasprintf("Container is in \"%s\" state, try killing it before restart",
                            state_name(st->state)));
      }
      continue;
    }
    /* a running container has no exit code for the rules: its policy alone */
    bool restart = nl_container_restarts_when_killed(spec, c);
    char *msg;
    const char *reason = "";
    if (changed(c, st)) {
      msg = nl_xasprintf("Container %s definition changed", c->name);
      restart = true; /* regardless of the restart policy */
    } else if (probe(pf, pctx, st->id, NL_PROBE_LIVENESS) == NL_PROBE_RESULT_FAILURE) {
      msg = nl_xasprintf("Container %s failed liveness probe", c->name);
      reason = REASON_LIVENESS;
    } else if (probe(pf, pctx, st->id, NL_PROBE_STARTUP) == NL_PROBE_RESULT_FAILURE) {
      msg = nl_xasprintf("Container %s failed startup probe", c->name);
      reason = REASON_STARTUP;
    } else {
      keep++;
      continue;
    }
    if (restart) {
      char *m2 = nl_xasprintf("%s, will be restarted", msg);
      free(msg);
      msg = m2;
      push_idx(&a->to_start, &a->n_to_start, i);
    }
    to_kill(a, st, c, false, reason, msg);
  }
  if (keep == 0 && a->n_to_start == 0) {
    a->kill_pod = true;
    a->n_init_to_start = 0; /* sidecars must not keep the pod alive */
  }
}

void nl_pod_actions_free(nl_pod_actions_t *a) {
  free(a->sandbox_id);
  free(a->init_to_start);
  free(a->init_to_resize);
  free(a->to_start);
  free(a->ephemeral_to_start);
  for (size_t i = 0; i < a->n_to_kill; i++) {
    free(a->to_kill[i].id);
    free(a->to_kill[i].name);
    free(a->to_kill[i].message);
  }
  free(a->to_kill);
  for (size_t i = 0; i < a->n_to_update; i++) free(a->to_update[i].id);
  free(a->to_update);
  memset(a, 0, sizeof *a);
}
