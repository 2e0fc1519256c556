#include "managers/pod_workers.h"

#include <stdlib.h>
#include <string.h>

#include "managers/metrics.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static const char *state_name[] = {"syncing", "terminating", "terminated"};

static uint64_t now_ms(nl_pod_workers_t *pw) { return uv_now(pw->loop); }

void nl_pod_workers_init(nl_pod_workers_t *pw, uv_loop_t *loop, const nl_pod_syncer_t *syncer,
                         void *ctx, uint64_t resync_ms, uint64_t backoff_ms) {
  memset(pw, 0, sizeof *pw);
  pw->loop = loop;
  pw->syncer = *syncer;
  pw->ctx = ctx;
  pw->resync_ms = resync_ms;
  pw->backoff_ms = backoff_ms;
  nl_map_init(&pw->workers);
}

static void worker_free(void *p) {
  nl_pod_worker_t *w = p;
  if (w->inflight) w->inflight->workers = NULL; /* orphaned: complete() frees it */
  nl_pod_free(w->pod);
  free(w->uid);
  free(w);
}

void nl_pod_workers_free(nl_pod_workers_t *pw) { nl_map_free(&pw->workers, worker_free); }

static int64_t pod_grace(const nl_pod_t *pod) {
  if (pod && pod->spec.termination_grace_period_seconds.set)
    return pod->spec.termination_grace_period_seconds.v;
  return 30;
}

/* upstream calculateEffectiveGracePeriod: a grace period only shrinks. */
static int64_t effective_grace(const nl_pod_worker_t *w, const nl_pod_t *pod, int64_t override) {
  int64_t g = w->kill_requested ? w->grace_seconds : 0;
  bool overridden = false;
  const nl_opt_i64_t *dg = &pod->metadata.deletion_grace_period_seconds;
  if (dg->set && (g == 0 || dg->v < g)) g = dg->v, overridden = true;
  if (override >= 0 && (g == 0 || override < g)) g = override, overridden = true;
  if (!overridden && g == 0) g = pod_grace(pod);
  return g < 1 ? 1 : g;
}

static void transition(nl_pod_worker_t *w, nl_pod_work_state_t to) {
  nl_vlog(4, "pod worker %s: %s -> %s", w->uid, state_name[w->state], state_name[to]);
  w->state = to;
  w->generation++;
  w->pending = true;
  w->next_sync_ms = 0;
}

static void start_next(nl_pod_workers_t *pw, nl_pod_worker_t *w) {
  if (w->inflight || w->finished || !w->pending) return;
  if (w->state == NL_POD_SYNCING && w->kill_requested) transition(w, NL_POD_TERMINATING);
  w->pending = false;
  nl_pod_work_t *t = nl_xcalloc(1, sizeof *t);
  t->workers = pw;
  t->uid = nl_xstrdup(w->uid);
  t->pod = nl_pod_ref(w->pod);
  t->kind = w->state;
  t->type = w->state == NL_POD_SYNCING ? w->pending_type : NL_SYNC_KILL;
  t->grace_seconds = w->grace_seconds;
  t->generation = w->generation;
  t->started = uv_hrtime();
  t->retry_in_ms = -1;
  w->pending_type = NL_SYNC_SYNC;
  w->inflight = t;
  pw->inflight++;
  switch (t->kind) {
  case NL_POD_SYNCING:
    pw->syncer.sync_pod(t, pw->ctx);
    break;
  case NL_POD_TERMINATING:
    pw->syncer.sync_terminating(t, pw->ctx);
    break;
  case NL_POD_TERMINATED:
    pw->syncer.sync_terminated(t, pw->ctx);
    break;
  }
}

static nl_pod_worker_t *get_or_create(nl_pod_workers_t *pw, const nl_pod_t *pod, bool *created) {
  const char *uid = pod->metadata.uid;
  nl_pod_worker_t *w = nl_map_get(&pw->workers, uid);
  *created = !w;
  if (w) return w;
  w = nl_xcalloc(1, sizeof *w);
  w->uid = nl_xstrdup(uid);
  w->pod = nl_pod_ref(pod);
  w->state = NL_POD_SYNCING;
  w->pending_type = NL_SYNC_CREATE;
  w->started_ms = now_ms(pw);
  nl_map_put(&pw->workers, uid, w);
  return w;
}

void nl_pod_workers_update(nl_pod_workers_t *pw, const nl_pod_t *pod, nl_sync_type_t type,
                           int64_t grace_seconds) {
  if (!pod || !pod->metadata.uid) return;
  bool created;
  nl_pod_worker_t *w = get_or_create(pw, pod, &created);
  if (pod->metadata.deletion_timestamp) type = NL_SYNC_KILL; /* upstream: "deleted" */
  if (type == NL_SYNC_KILL) {
    if (w->state == NL_POD_TERMINATED) return;
    int64_t grace = effective_grace(w, pod, grace_seconds);
    bool shortened = w->kill_requested && grace < w->grace_seconds;
    w->grace_seconds = grace;
    if (!w->kill_requested) {
      w->kill_requested = true;
      /* Even mid-sync: the in-flight sync's completion is now stale. */
      if (w->state == NL_POD_SYNCING) transition(w, NL_POD_TERMINATING);
    } else if (shortened && w->inflight && w->inflight->kind == NL_POD_TERMINATING &&
               pw->syncer.cancel_terminating) {
      nl_vlog(2, "pod worker %s: grace period shortened to %llds", w->uid, (long long)grace);
      nl_pod_work_t *t = w->inflight;
      w->generation++; /* its completion is stale: terminate again, shorter */
      w->pending = true;
      if (pw->syncer.cancel_terminating(t, pw->ctx)) return; /* completed: next started */
      w->generation--;
      w->pending = false;
    }
    start_next(pw, w);
    return;
  }
  if (w->state != NL_POD_SYNCING) {
    nl_vlog(4, "pod worker %s: update ignored, pod is %s", w->uid, state_name[w->state]);
    return;
  }
  if (!created) {
    nl_pod_free(w->pod);
    w->pod = nl_pod_ref(pod);
    /* A CREATE not yet started stays a CREATE. */
    if (w->pending_type != NL_SYNC_CREATE || !w->pending) w->pending_type = type;
  }
  w->pending = true;
  start_next(pw, w);
}

void nl_pod_workers_reconcile(nl_pod_workers_t *pw, const nl_pod_t *pod) {
  nl_pod_worker_t *w = pod->metadata.uid ? nl_map_get(&pw->workers, pod->metadata.uid) : NULL;
  /* a SYNCING worker has the merger's latest spec (an update replaces it); a
   * terminating one keeps the version it was killed with */
  if (!w || w->pod == pod || w->state != NL_POD_SYNCING) return;
  nl_pod_free(w->pod);
  w->pod = nl_pod_ref(pod);
}

void nl_pod_workers_sync_now(nl_pod_workers_t *pw, const char *uid) {
  nl_pod_worker_t *w = nl_map_get(&pw->workers, uid);
  if (!w || w->finished) return;
  w->pending = true;
  start_next(pw, w);
}

size_t nl_pod_workers_sync_due(nl_pod_workers_t *pw) {
  uint64_t now = now_ms(pw);
  size_t started = 0;
  nl_map_iter_t it;
  void *v;
  nl_map_iter_init(&it, &pw->workers);
  while (nl_map_iter_next(&it, NULL, &v)) {
    nl_pod_worker_t *w = v;
    if (w->inflight || w->finished || !w->next_sync_ms || now < w->next_sync_ms) continue;
    w->next_sync_ms = 0;
    w->pending = true;
    start_next(pw, w);
    started++;
  }
  return started;
}

void nl_pod_workers_complete(nl_pod_work_t *t, const nl_err_t *err, bool is_terminal) {
  nl_pod_workers_t *pw = t->workers;
  nl_pod_worker_t *w = pw ? nl_map_get(&pw->workers, t->uid) : NULL;
  if (pw) pw->inflight--;
  if (pw && pw->metrics && t->kind == NL_POD_SYNCING) { /* upstream times SyncPod only */
    static const char *const op[] = {"create", "update", "sync", "kill"};
    nl_kmetrics_pod_worker(pw->metrics, op[t->type], uv_hrtime() - t->started);
  }
  if (!w || w->inflight != t) goto out; /* the worker was forgotten meanwhile */
  w->inflight = NULL;
  if (t->generation != w->generation) {
    nl_vlog(4, "pod worker %s: dropping stale %s result", w->uid, state_name[t->kind]);
  } else if (err) {
    uint64_t retry = pw->backoff_ms;
    if (t->retry_in_ms >= 0)
      retry = (uint64_t)t->retry_in_ms < pw->resync_ms ? (uint64_t)t->retry_in_ms : pw->resync_ms;
    nl_vlog(2, "pod worker %s: %s failed, retrying in %llums: %s", w->uid, state_name[t->kind],
            (unsigned long long)retry, nl_err_msg(err));
    w->next_sync_ms = now_ms(pw) + retry;
  } else if (t->kind == NL_POD_SYNCING) {
    w->next_sync_ms = now_ms(pw) + pw->resync_ms;
    if (is_terminal && !w->kill_requested) {
      w->kill_requested = true;
      w->grace_seconds = pod_grace(w->pod);
      transition(w, NL_POD_TERMINATING);
    }
  } else if (t->kind == NL_POD_TERMINATING) {
    transition(w, NL_POD_TERMINATED);
  } else {
    w->finished = true;
    w->next_sync_ms = 0;
    if (pw->syncer.finished) pw->syncer.finished(w->uid, pw->ctx);
  }
  start_next(pw, w);
out:
  nl_pod_free(t->pod);
  free(t->uid);
  free(t);
}

void nl_pod_workers_sync_known(nl_pod_workers_t *pw, nl_pod_workers_known_fn known, void *ctx) {
  nl_map_iter_t it;
  const char *uid;
  void *v;
  nl_map_iter_init(&it, &pw->workers);
  while (nl_map_iter_next(&it, &uid, &v)) {
    nl_pod_worker_t *w = v;
    if (known(ctx, uid)) continue;
    if (w->finished) {
      nl_vlog(4, "pod worker %s: forgotten", w->uid);
      worker_free(nl_map_del(&pw->workers, uid));
    } else if (!w->kill_requested) {
      nl_pod_workers_update(pw, w->pod, NL_SYNC_KILL, -1);
    }
  }
}

void nl_pod_workers_forget(nl_pod_workers_t *pw, const char *uid) {
  nl_pod_worker_t *w = nl_map_get(&pw->workers, uid);
  if (!w || !w->finished) return;
  nl_vlog(4, "pod worker %s: forgotten", w->uid);
  worker_free(nl_map_del(&pw->workers, uid));
}

const nl_pod_worker_t *nl_pod_workers_get(const nl_pod_workers_t *pw, const char *uid) {
  return nl_map_get(&pw->workers, uid);
}

int64_t nl_pod_workers_grace(const nl_pod_workers_t *pw, const char *uid) {
  const nl_pod_worker_t *w = nl_map_get(&pw->workers, uid);
  return w && w->kill_requested ? w->grace_seconds : -1;
}

bool nl_pod_workers_could_have_running_containers(const nl_pod_workers_t *pw, const char *uid) {
  const nl_pod_worker_t *w = nl_map_get(&pw->workers, uid);
  return !w || !w->finished;
}

bool nl_pod_workers_is_terminating(const nl_pod_workers_t *pw, const char *uid) {
  const nl_pod_worker_t *w = nl_map_get(&pw->workers, uid);
  return w && (w->kill_requested || w->state != NL_POD_SYNCING);
}
