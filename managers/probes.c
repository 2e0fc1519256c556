/* The probe manager and its workers (upstream prober_manager.go, worker.go,
 * results_manager.go). A worker is a repeating timer and one check at a time;
 * its state lives in worker_t and changes only in step() and checked(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "managers/metrics.h"
#include "managers/probe_internal.h"
#include "reactor/grid.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

typedef enum { W_IDLE, W_PROBING, W_STOPPED } wstate_t;

typedef struct ppod {
  nl_pod_t *pod; /* a reference: workers point into its spec */
  nl_list_t workers;
} ppod_t;

typedef struct worker {
  nl_list_t link; /* in ppod.workers */
  nl_probe_manager_t *m;
  ppod_t *pp;     /* NULL once stopped */
  nl_probe_type_t type;
  const nl_container_t *spec;
  const nl_probe_t *probe;
  uv_timer_t timer;
  wstate_t state;
  char *cid;      /* the container instance being probed */
  char *key;      /* "<type>/<cid>" in m->results */
  nl_probe_result_t result;   /* cached result for cid */
  nl_probe_result_t last;     /* upstream lastResult */
  int run;                    /* upstream resultRun */
  bool on_hold;
  nl_check_t *check;
  uint64_t check_started; /* uv_hrtime() */
} worker_t;

static const char *const type_names[] = {"Liveness", "Readiness", "Startup"};
const char *nl_probe_type_name(nl_probe_type_t t) { return type_names[t]; }

static int64_t realtime_ns(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rnd(nl_probe_manager_t *m) { /* xorshift64 */
  m->rng ^= m->rng << 13;
  m->rng ^= m->rng >> 7;
  m->rng ^= m->rng << 17;
  return m->rng;
}

int nl_probe_manager_init(nl_probe_manager_t *m, uv_loop_t *loop, nl_cri_client_t *cri,
                          const nl_probe_manager_opts_t *opts, nl_err_t **err) {
  if (!opts || !opts->status)
    return nl_err_set(err, NL_EINVAL, "probe manager: a status source is required");
  memset(m, 0, sizeof *m);
  m->loop = loop;
  m->cri = cri;
  m->opts = *opts;
  if (!m->opts.now_ns) m->opts.now_ns = realtime_ns;
  m->host_ip = nl_xstrdup(opts->host_ip && *opts->host_ip ? opts->host_ip : "127.0.0.1");
  m->opts.host_ip = m->host_ip;
  nl_map_init(&m->pods);
  nl_map_init(&m->results);
  m->started_ms = uv_now(loop);
  m->rng = opts->seed ? opts->seed : (uint64_t)realtime_ns(NULL) | 1;
  return 0;
}

/* ---- results (upstream results.Manager: cached per container id) ---- */

static void results_forget(worker_t *w) {
  if (w->key && nl_map_get(&w->m->results, w->key) == w) nl_map_del(&w->m->results, w->key);
  free(w->key);
  w->key = NULL;
}

/* Sets the cached result; reports a change. The callback may remove the pod:
 * callers check w->state afterwards. */
static void set_result(worker_t *w, nl_probe_result_t r) {
  if (w->result == r) return;
  w->result = r;
  nl_probe_manager_t *m = w->m;
  nl_vlog(4, "probe %s/%s %s: %s", w->pp->pod->metadata.name, w->spec->name,
          type_names[w->type],
          r == NL_PROBE_RESULT_SUCCESS ? "success" : r == NL_PROBE_RESULT_FAILURE ? "failure"
                                                                                  : "unknown");
  if (m->opts.changed)
    m->opts.changed(m->opts.ctx, w->pp->pod->metadata.uid, w->spec->name, w->type, r);
}

nl_probe_result_t nl_probe_manager_result(const nl_probe_manager_t *m, const char *cid,
                                          nl_probe_type_t type) {
  if (!cid) return NL_PROBE_RESULT_NONE;
  char key[strlen(cid) + 4];
  snprintf(key, sizeof key, "%d/%s", (int)type, cid);
  worker_t *w = nl_map_get(&m->results, key);
  return w ? w->result : NL_PROBE_RESULT_NONE;
}

nl_probe_result_t nl_probe_manager_runtime_result(void *ctx, const char *cid,
                                                  nl_probe_kind_t kind) {
  return nl_probe_manager_result(
      ctx, cid, kind == NL_PROBE_LIVENESS ? NL_PROBE_TYPE_LIVENESS : NL_PROBE_TYPE_STARTUP);
}

/* ---- events ---- */

static void event(worker_t *w, const char *reason, const char *verb, const char *out) {
  nl_probe_manager_t *m = w->m;
  char *msg = nl_xasprintf("%s probe %s: %s", type_names[w->type], verb, out);
  const nl_pod_t *pod = w->pp->pod;
  if (m->opts.event)
    m->opts.event(m->opts.ctx, pod, w->spec->name, "Warning", reason, msg);
  else
    nl_info("pod %s/%s container %s: Warning %s: %s", pod->metadata.namespace_,
            pod->metadata.name, w->spec->name, reason, msg);
  free(msg);
}

/* ---- workers ---- */

static void finish_stop(nl_probe_manager_t *m) {
  nl_map_free(&m->pods, NULL);
  nl_map_free(&m->results, NULL);
  nl_tls_config_unref(m->tls);
  m->tls = NULL;
  free(m->host_ip);
  m->host_ip = NULL;
  m->stopping = false;
  nl_probe_manager_stop_cb cb = m->stop_cb;
  m->stop_cb = NULL;
  if (cb) cb(m);
}

static void worker_closed(uv_handle_t *h) {
  worker_t *w = container_of((uv_timer_t *)h, worker_t, timer);
  nl_probe_manager_t *m = w->m;
  free(w->cid);
  free(w);
  m->workers--;
  if (--m->closing == 0 && m->stopping) finish_stop(m);
}

/* Stops probing; the timer closes (and frees the worker) later. */
static void worker_halt(worker_t *w) {
  if (w->state == W_STOPPED) return;
  w->state = W_STOPPED;
  if (w->check) nl_check_cancel(w->check);
  w->check = NULL;
  uv_timer_stop(&w->timer);
}

/* Upstream's prober metrics: an errored probe counts nowhere, a warning as a
 * success. */
static void count(const worker_t *w, nl_check_result_t r) {
  nl_kmetrics_t *km = w->m->opts.metrics;
  if (!km || r == NL_CHECK_ERROR || !w->pp) return;
  const nl_pod_t *pod = w->pp->pod;
  nl_kmetrics_probe(km, type_names[w->type], r == NL_CHECK_FAILURE ? "failed" : "successful",
                    w->spec->name, pod->metadata.name, pod->metadata.namespace_,
                    pod->metadata.uid, (double)(uv_hrtime() - w->check_started) / 1e9);
}

static void worker_free(worker_t *w) {
  if (w->m->opts.metrics) {
    const nl_pod_t *pod = w->pp->pod;
    nl_kmetrics_probe_forget(w->m->opts.metrics, type_names[w->type], w->spec->name,
                             pod->metadata.name, pod->metadata.namespace_, pod->metadata.uid);
  }
  worker_halt(w);
  results_forget(w);
  nl_list_remove(&w->link);
  w->pp = NULL;
  w->m->closing++;
  uv_close((uv_handle_t *)&w->timer, worker_closed);
}

static worker_t *sibling(const worker_t *w, nl_probe_type_t type) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &w->pp->workers) {
    worker_t *o = nl_list_entry(pos, worker_t, link);
    if (o->type == type && o->spec == w->spec) return o;
  }
  return NULL;
}

/* upstream: started = the startup probe succeeded for this instance, or there is
 * no startup probe. */
static bool started(const worker_t *w) {
  const worker_t *s = sibling(w, NL_PROBE_TYPE_STARTUP);
  if (!s) return true;
  return s->cid && w->cid && strcmp(s->cid, w->cid) == 0 && s->result == NL_PROBE_RESULT_SUCCESS;
}

static void checked(void *ctx, nl_check_result_t r, const char *out) {
  worker_t *w = ctx;
  w->check = NULL;
  w->state = W_IDLE;
  w->m->checks_done++;
  count(w, r);
  if (r == NL_CHECK_ERROR) { /* upstream throws the result away */
    event(w, "Unhealthy", "errored", out);
    return;
  }
  if (r == NL_CHECK_FAILURE) event(w, "Unhealthy", "failed", out);
  if (r == NL_CHECK_WARNING) event(w, "ProbeWarning", "warning", out);
  if (w->state == W_STOPPED) return; /* an event callback removed the pod */
  nl_probe_result_t res = r == NL_CHECK_FAILURE ? NL_PROBE_RESULT_FAILURE : NL_PROBE_RESULT_SUCCESS;
  if (w->last == res) {
    w->run++;
  } else {
    w->last = res;
    w->run = 1;
  }
  if ((res == NL_PROBE_RESULT_FAILURE && w->run < w->probe->failure_threshold) ||
      (res == NL_PROBE_RESULT_SUCCESS && w->run < w->probe->success_threshold))
    return; /* below the threshold: the cached result stands */
  if (w->type != NL_PROBE_TYPE_READINESS && res == NL_PROBE_RESULT_FAILURE) {
    /* The container will be killed: no more probes until a new instance. */
    w->on_hold = true;
    w->run = 0;
  }
  set_result(w, res);
}

static const char *pod_ip(const worker_t *w, const nl_rt_pod_status_t *st) {
  if (w->pp->pod->spec.host_network) return w->m->host_ip;
  return st->n_ips ? st->ips[0] : NULL;
}

static bool wants_tls(const nl_probe_t *p) {
  return p->handler.http_get && p->handler.http_get->scheme &&
         strcasecmp(p->handler.http_get->scheme, "HTTPS") == 0;
}

static void start_check(worker_t *w, const nl_rt_pod_status_t *st) {
  nl_probe_manager_t *m = w->m;
  if (wants_tls(w->probe) && !m->tls) {
    nl_tls_config_opts_t to = {.server = false, .verify = false};
    nl_err_t *err = NULL;
    if (nl_tls_config_new(&m->tls, &to, &err) < 0) {
      nl_warn("probes: TLS: %s", nl_err_msg(err));
      nl_err_free(&err);
    }
  }
  nl_check_env_t env = {.loop = m->loop, .cri = m->cri, .tls = m->tls};
  nl_check_req_t req = {
      .handler = &w->probe->handler,
      .container = w->spec,
      .container_id = w->cid,
      .pod_ip = pod_ip(w, st),
      .timeout_ms = (uint64_t)(w->probe->timeout_seconds > 0 ? w->probe->timeout_seconds : 1) * 1000,
  };
  w->state = W_PROBING;
  m->checks_started++;
  w->check_started = uv_hrtime();
  w->check = nl_check_start(&env, &req, checked, w);
}

static nl_probe_result_t initial(nl_probe_type_t t) {
  switch (t) {
  case NL_PROBE_TYPE_READINESS: return NL_PROBE_RESULT_FAILURE;
  case NL_PROBE_TYPE_LIVENESS: return NL_PROBE_RESULT_SUCCESS;
  default: return NL_PROBE_RESULT_NONE; /* upstream Unknown: not started yet */
  }
}

/* upstream worker.doProbe. Returns false when the worker should stop. */
static bool step(worker_t *w) {
  nl_probe_manager_t *m = w->m;
  const nl_pod_t *pod = w->pp->pod;
  const nl_rt_pod_status_t *st = m->opts.status(m->opts.status_ctx, pod->metadata.uid);
  if (!st) return true; /* not created yet, or gone */
  const nl_rt_container_t *c = nl_rt_pod_status_find(st, w->spec->name);
  if (!c || !c->id) return true;
  if (!w->cid || strcmp(w->cid, c->id) != 0) { /* a new instance: resume probing */
    results_forget(w);
    free(w->cid);
    w->cid = nl_xstrdup(c->id);
    w->key = nl_xasprintf("%d/%s", (int)w->type, c->id);
    nl_map_put(&m->results, w->key, w);
    w->result = NL_PROBE_RESULT_NONE;
    w->on_hold = false;
    set_result(w, initial(w->type));
    if (w->state == W_STOPPED) return false;
    st = m->opts.status(m->opts.status_ctx, pod->metadata.uid); /* the callback may relist */
    if (!st || !(c = nl_rt_pod_status_find(st, w->spec->name)) || strcmp(c->id, w->cid) != 0)
      return true;
  }
  if (w->on_hold) return true;
  /* Created, not started yet: nothing to judge. The cache shows this while the
   * pod's sync is between CreateContainer and StartContainer; a Failure set now
   * would stay under this id (startup gating and initialDelaySeconds keep the
   * worker from checking, and so from clearing it, after the start) and the
   * sync after the start would kill a container no probe ever saw fail.
   * Upstream's workers read the status manager, whose status each sync makes
   * from a cache newer than the end of the previous sync (so not from the
   * middle of a start); this worker reads the PLEG cache, relisted any time. */
  if (c->state == NL_RT_CONTAINER_CREATED) return true;
  if (c->state != NL_RT_CONTAINER_RUNNING) {
    /* a container that will not run again is not probed again */
    bool stop = c->state == NL_RT_CONTAINER_EXITED &&
                !nl_container_should_restart(&pod->spec, w->spec, c->exit_code);
    set_result(w, NL_PROBE_RESULT_FAILURE);
    return !stop;
  }
  int64_t since = m->opts.now_ns(m->opts.now_ctx) - c->started_at;
  if (since / 1000000000 < w->probe->initial_delay_seconds) return true;
  bool s = started(w);
  if (s && w->type == NL_PROBE_TYPE_STARTUP) return true;
  if (!s && w->type != NL_PROBE_TYPE_STARTUP) return true;
  start_check(w, st);
  return true;
}

static uint64_t period_ms(const nl_probe_manager_t *m, const nl_probe_t *p);
static void tick(uv_timer_t *t);

/* A probe's second is the agent's: its checks are due on the loop's whole
 * seconds (reactor/grid.h), with every other probe's and the relist, so that
 * the probes of many pods share the wake-ups and the writes of their calls. A
 * check is then up to half a second from where upstream's own ticker would
 * put it; its period stays the period. */
static void arm(worker_t *w, uint64_t delay) {
  uint64_t unit = w->m->opts.ms_per_period_second ? w->m->opts.ms_per_period_second : NL_GRID_MS;
  uv_timer_start(&w->timer, tick, nl_grid_delay(uv_now(w->m->loop), delay, unit), 0);
}

static void tick(uv_timer_t *t) {
  worker_t *w = container_of(t, worker_t, timer);
  arm(w, period_ms(w->m, w->probe));
  if (w->state != W_IDLE) return; /* the previous check still runs */
  if (!step(w) && w->state != W_STOPPED) {
    nl_vlog(4, "probe %s/%s %s: container will not restart, worker stops",
            w->pp->pod->metadata.name, w->spec->name, type_names[w->type]);
    worker_halt(w);
  }
}

static uint64_t period_ms(const nl_probe_manager_t *m, const nl_probe_t *p) {
  uint64_t unit = m->opts.ms_per_period_second ? m->opts.ms_per_period_second : 1000;
  return (uint64_t)(p->period_seconds > 0 ? p->period_seconds : 10) * unit;
}

static void add_worker(nl_probe_manager_t *m, ppod_t *pp, const nl_container_t *c,
                       const nl_probe_t *p, nl_probe_type_t type) {
  if (!p) return;
  worker_t *w = nl_xcalloc(1, sizeof *w);
  w->m = m;
  w->pp = pp;
  w->type = type;
  w->spec = c;
  w->probe = p;
  w->last = NL_PROBE_RESULT_NONE;
  uv_timer_init(m->loop, &w->timer);
  nl_list_insert_tail(&pp->workers, &w->link);
  m->workers++;
  uint64_t period = period_ms(m, p);
  uint64_t first = 0;
  /* upstream: after a (re)start of the agent, spread the first probes over a
   * period so that they do not all run at once */
  if (!m->opts.no_jitter && uv_now(m->loop) - m->started_ms < period) first = rnd(m) % period;
  arm(w, first);
}

static void add_container(nl_probe_manager_t *m, ppod_t *pp, const nl_container_t *c) {
  add_worker(m, pp, c, c->startup_probe, NL_PROBE_TYPE_STARTUP);
  add_worker(m, pp, c, c->liveness_probe, NL_PROBE_TYPE_LIVENESS);
  add_worker(m, pp, c, c->readiness_probe, NL_PROBE_TYPE_READINESS);
}

void nl_probe_manager_add_pod(nl_probe_manager_t *m, const nl_pod_t *pod) {
  if (m->stopping || !pod->metadata.uid || nl_map_has(&m->pods, pod->metadata.uid)) return;
  ppod_t *pp = nl_xcalloc(1, sizeof *pp);
  pp->pod = nl_pod_ref(pod);
  nl_list_init(&pp->workers);
  nl_map_put(&m->pods, pp->pod->metadata.uid, pp);
  const nl_pod_spec_t *s = &pp->pod->spec;
  for (size_t i = 0; i < s->n_init_containers; i++) /* sidecars only, as upstream */
    if (s->init_containers[i].restart_policy &&
        strcmp(s->init_containers[i].restart_policy, "Always") == 0)
      add_container(m, pp, &s->init_containers[i]);
  for (size_t i = 0; i < s->n_containers; i++) add_container(m, pp, &s->containers[i]);
}

static const nl_container_t *find_spec(const nl_pod_t *pod, const char *name) {
  for (size_t i = 0; i < pod->spec.n_containers; i++)
    if (strcmp(pod->spec.containers[i].name, name) == 0) return &pod->spec.containers[i];
  for (size_t i = 0; i < pod->spec.n_init_containers; i++)
    if (strcmp(pod->spec.init_containers[i].name, name) == 0) return &pod->spec.init_containers[i];
  return NULL;
}

static const nl_probe_t *probe_of(const nl_container_t *c, nl_probe_type_t type) {
  return type == NL_PROBE_TYPE_STARTUP  ? c->startup_probe
         : type == NL_PROBE_TYPE_LIVENESS ? c->liveness_probe
                                          : c->readiness_probe;
}

void nl_probe_manager_reconcile_pod(nl_probe_manager_t *m, const nl_pod_t *pod) {
  ppod_t *pp = pod->metadata.uid ? nl_map_get(&m->pods, pod->metadata.uid) : NULL;
  if (!pp || pp->pod == pod) return;
  nl_list_t *pos, *tmp;
  /* The API keeps containers and probes immutable; a pod that breaks that
   * keeps the version its workers were made from. */
  nl_list_foreach_safe(pos, tmp, &pp->workers) {
    worker_t *w = nl_list_entry(pos, worker_t, link);
    const nl_container_t *c = find_spec(pod, w->spec->name);
    if (!c || !probe_of(c, w->type)) return;
  }
  nl_list_foreach_safe(pos, tmp, &pp->workers) {
    worker_t *w = nl_list_entry(pos, worker_t, link);
    w->spec = find_spec(pod, w->spec->name);
    w->probe = probe_of(w->spec, w->type);
  }
  nl_pod_free(pp->pod);
  pp->pod = nl_pod_ref(pod);
}

bool nl_probe_manager_has_pod(const nl_probe_manager_t *m, const char *uid) {
  return nl_map_has(&m->pods, uid);
}

static void pod_free(ppod_t *pp) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &pp->workers) worker_free(nl_list_entry(pos, worker_t, link));
  nl_pod_free(pp->pod);
  free(pp);
}

void nl_probe_manager_remove_pod(nl_probe_manager_t *m, const char *uid) {
  ppod_t *pp = nl_map_del(&m->pods, uid);
  if (pp) pod_free(pp);
}

void nl_probe_manager_stop_liveness(nl_probe_manager_t *m, const char *uid) {
  ppod_t *pp = nl_map_get(&m->pods, uid);
  if (!pp) return;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &pp->workers) {
    worker_t *w = nl_list_entry(pos, worker_t, link);
    if (w->type == NL_PROBE_TYPE_READINESS) continue;
    worker_halt(w);
    w->result = NL_PROBE_RESULT_SUCCESS; /* a terminating pod is not killed for failing */
  }
}

void nl_probe_manager_stop(nl_probe_manager_t *m, nl_probe_manager_stop_cb done_cb) {
  m->stop_cb = done_cb;
  m->stopping = true;
  nl_map_iter_t it;
  const char *uid;
  void *v;
  nl_map_iter_init(&it, &m->pods);
  while (nl_map_iter_next(&it, &uid, &v)) pod_free(v);
  nl_map_free(&m->pods, NULL);
  nl_map_init(&m->pods);
  if (m->closing == 0) finish_stop(m);
}

/* ---- status inputs (upstream UpdatePodStatus) ---- */

nl_status_probe_t nl_probe_manager_status_probe(void *ctx, const char *name, const char *cid,
                                                bool startup) {
  nl_probe_status_ctx_t *sc = ctx;
  const nl_container_t *c = sc->pod ? find_spec(sc->pod, name) : NULL;
  if (!c) return NL_STATUS_PROBE_NONE;
  if (!(startup ? c->startup_probe : c->readiness_probe)) return NL_STATUS_PROBE_NONE;
  nl_probe_type_t type = startup ? NL_PROBE_TYPE_STARTUP : NL_PROBE_TYPE_READINESS;
  nl_probe_result_t r = nl_probe_manager_result(sc->m, cid, type);
  if (r == NL_PROBE_RESULT_SUCCESS) return NL_STATUS_PROBE_SUCCESS;
  /* upstream UpdatePodStatus: a container not (yet) ready gets a manual run of
   * its readiness probe, e.g. right after its startup probe succeeded (whose
   * result syncs the pod), instead of waiting up to a period */
  if (!startup) {
    ppod_t *pp = nl_map_get(&sc->m->pods, sc->pod->metadata.uid);
    nl_list_t *pos, *tmp;
    if (pp) nl_list_foreach_safe(pos, tmp, &pp->workers) {
        worker_t *w = nl_list_entry(pos, worker_t, link);
        if (w->spec == find_spec(pp->pod, name) && w->type == type && w->state == W_IDLE)
          arm(w, 0);
      }
  }
  return r == NL_PROBE_RESULT_FAILURE ? NL_STATUS_PROBE_FAILURE : NL_STATUS_PROBE_PENDING;
}
