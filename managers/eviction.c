/* The eviction manager's machine (upstream managerImpl.synchronize). */
#include "managers/eviction.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "managers/metrics.h"
#include "managers/status.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define PERIOD_MS 10000       /* upstream evictionMonitoringPeriod */
#define CLEANUP_CHECK_MS 1000 /* upstream podCleanupPollFreq */
#define CLEANUP_CHECKS 30     /* upstream podCleanupTimeout: 30 s */
#define IMMEDIATE_GRACE_S 1   /* upstream immediateEvictionGracePeriodSeconds */
#define NOTIFIER_REFRESH_NS (10 * 1000000000LL) /* upstream notifierRefreshInterval */

enum { COND_MEMORY, COND_DISK, COND_PID };
static const char *const cond_names[] = {"MemoryPressure", "DiskPressure", "PIDPressure"};

static void step(nl_eviction_t *m);

static int64_t now_ns(nl_eviction_t *m) {
  if (m->deps.now_ns) return m->deps.now_ns(m->deps.ctx);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cond_of(nl_ev_signal_t s) {
  return nl_ev_is_memory(s) ? COND_MEMORY : s == NL_EV_PID ? COND_PID : COND_DISK;
}

static void set_state(nl_eviction_t *m, nl_ev_state_t st) {
  nl_vlog(4, "eviction manager: state %d -> %d", m->state, st);
  m->state = st;
}

/* The pods the next round waits for are these (none: forget them). */
static void clear_evicted(nl_eviction_t *m) {
  for (size_t i = 0; i < m->n_evicted; i++) free(m->evicted_uids[i]);
  free(m->evicted_uids);
  m->evicted_uids = NULL;
  m->n_evicted = 0;
}

static void add_evicted(nl_eviction_t *m, const nl_pod_t *pod, const char *signal) {
  m->evicted_uids = nl_xrealloc(m->evicted_uids, (m->n_evicted + 1) * sizeof *m->evicted_uids);
  m->evicted_uids[m->n_evicted++] = nl_xstrdup(pod->metadata.uid);
  m->evictions++;
  if (m->deps.metrics) nl_kmetrics_eviction(m->deps.metrics, signal);
  m->last_eviction_ns = now_ns(m);
}

static void closed_one(nl_eviction_t *m) {
  assert(m->closing > 0);
  if (--m->closing) return;
  nl_ev_stats_free(&m->stats);
  free(m->thresholds);
  clear_evicted(m);
  m->thresholds = NULL;
  m->state = NL_EV_STOPPED;
  if (m->done_cb) m->done_cb(m->done_ctx);
}

static void timer_closed(uv_handle_t *h) { closed_one(h->data); }
static void memcg_stopped(void *ctx) { closed_one(ctx); }

static bool go_on(nl_eviction_t *m) {
  if (!m->stopping) return true;
  uv_close((uv_handle_t *)&m->timer, timer_closed);
  return false;
}

static void on_tick(uv_timer_t *t) {
  nl_eviction_t *m = t->data;
  if (m->state == NL_EV_IDLE) set_state(m, NL_EV_COLLECT);
  step(m);
}

static void idle(nl_eviction_t *m) {
  set_state(m, NL_EV_IDLE);
  uv_timer_start(&m->timer, on_tick, m->poked ? 0 : m->period_ms, 0);
  m->poked = false;
}

/* upstream UpdateThreshold: the working set reaches capacity - threshold when
 * memory.usage_in_bytes reaches that plus the inactive file pages. Armed
 * again at most every 10 s, as the inactive pages drift. */
static void rearm_memcg(nl_eviction_t *m) {
  const nl_ev_observation_t *o = &m->stats.obs[NL_EV_MEMORY];
  int64_t now = now_ns(m);
  if (!m->memcg_up || !o->ok || (m->memcg_armed_ns && now - m->memcg_armed_ns < NOTIFIER_REFRESH_NS))
    return;
  int64_t usage[NL_MEMCG_NOTIFY_MAX];
  size_t n = 0;
  for (size_t i = 0; i < m->n_thresholds && n < NL_MEMCG_NOTIFY_MAX; i++)
    if (m->thresholds[i].signal == NL_EV_MEMORY)
      usage[n++] = o->capacity - nl_ev_quantity(&m->thresholds[i].value, o->capacity) +
                   m->stats.memory_inactive_file;
  m->memcg_armed_ns = now;
  nl_memcg_notify_set(&m->memcg, usage, n);
}

static void on_memcg_crossed(void *ctx) {
  nl_vlog(2, "eviction manager: memory eviction threshold crossed");
  nl_eviction_poke(ctx);
}

/* The thresholds met now, the conditions, and the thresholds whose grace
 * period has passed (upstream's sequence in synchronize). */
static void observe(nl_eviction_t *m, bool *act) {
  int64_t now = now_ns(m);
  const nl_ev_observation_t *obs = m->stats.obs;
  for (size_t i = 0; i < m->n_thresholds; i++) {
    const nl_ev_threshold_t *t = &m->thresholds[i];
    /* one met before stays met until it has reclaimed its minimum too */
    bool met = nl_ev_threshold_met(t, obs, false) || (m->met[i] && nl_ev_threshold_met(t, obs, true));
    if (!met) {
      m->first_observed[i] = 0;
      act[i] = false;
      continue;
    }
    if (!m->first_observed[i]) {
      m->first_observed[i] = now;
      nl_info("eviction manager: threshold %s %s met: available %lld, threshold %lld",
              nl_ev_signal_name(t->signal), t->hard ? "hard" : "soft",
              (long long)obs[t->signal].available,
              (long long)nl_ev_quantity(&t->value, obs[t->signal].capacity));
    }
    m->condition_observed[cond_of(t->signal)] = now;
    act[i] = now - m->first_observed[i] >= t->grace_ns;
  }
  for (int c = 0; c < 3; c++) {
    bool p = m->condition_observed[c] && now - m->condition_observed[c] < m->transition_ns;
    if (p != m->pressure[c]) nl_info("eviction manager: node condition %s is now %s", cond_names[c], p ? "True" : "False");
    m->pressure[c] = p;
  }
  for (size_t i = 0; i < m->n_thresholds; i++) m->met[i] = act[i];
}

/* upstream byEvictionPriority: memory first, then in configuration order. */
static int pick(const nl_eviction_t *m, const bool *act) {
  int found = -1;
  for (size_t i = 0; i < m->n_thresholds; i++) {
    if (!act[i]) continue;
    if (nl_ev_is_memory(m->thresholds[i].signal)) return (int)i;
    if (found < 0) found = (int)i;
  }
  return found;
}

static const nl_ev_pod_stats_t *pod_stats(const nl_eviction_t *m, const char *uid) {
  for (size_t i = 0; i < m->stats.n_pods; i++)
    if (!strcmp(m->stats.pods[i].uid, uid)) return &m->stats.pods[i];
  return NULL;
}

/* Ranks the active pods and evicts the first that may be. */
static bool evict_one(nl_eviction_t *m, int ti) {
  const nl_ev_threshold_t *t = &m->thresholds[ti];
  size_t n;
  const nl_pod_t **pods = m->deps.active_pods(m->deps.ctx, &n);
  nl_ev_candidate_t *c = nl_xcalloc(n + 1, sizeof *c);
  for (size_t i = 0; i < n; i++) c[i] = (nl_ev_candidate_t){pods[i], pod_stats(m, pods[i]->metadata.uid)};
  nl_ev_rank(t->signal, m->stats.dedicated_imagefs, c, n);
  bool done = false;
  for (size_t i = 0; i < n && !done; i++) {
    const nl_pod_t *pod = c[i].pod;
    if (nl_ev_pod_is_critical(pod)) {
      nl_warn("eviction manager: cannot evict a critical pod %s/%s", pod->metadata.namespace_,
              pod->metadata.name);
      continue;
    }
    int64_t grace = IMMEDIATE_GRACE_S;
    if (!t->hard) {
      grace = m->max_pod_grace_s;
      if (pod->spec.termination_grace_period_seconds.set &&
          pod->spec.termination_grace_period_seconds.v < grace)
        grace = pod->spec.termination_grace_period_seconds.v;
    }
    nl_kvlist_t annotations;
    char *msg = nl_ev_message(t->signal, t, m->stats.obs, pod, c[i].stats, &annotations);
    nl_info("eviction manager: evicting pod %s/%s: %s", pod->metadata.namespace_,
            pod->metadata.name, msg);
    clear_evicted(m);
    m->deps.evict(m->deps.ctx, pod, grace, msg, &annotations, true);
    free(msg);
    nl_ev_annotations_free(&annotations);
    add_evicted(m, pod, nl_ev_signal_name(t->signal));
    done = true;
  }
  if (!done && n) nl_warn("eviction manager: unable to evict any pods from the node");
  free(c);
  free(pods);
  return done;
}

/* upstream signalToNodeReclaimFuncs: disk signals reclaim dead containers,
 * and images when the images share the filesystem or are what is short. */
static bool reclaims(const nl_eviction_t *m, nl_ev_signal_t s, bool *images) {
  if (nl_ev_is_memory(s) || s == NL_EV_PID || !m->deps.reclaim) return false;
  *images = !m->stats.dedicated_imagefs || s == NL_EV_IMAGEFS || s == NL_EV_IMAGEFS_INODES;
  return true;
}

/* upstream localStorageEviction: every pod over a local storage limit goes at
 * once (grace 1 s), whatever the node's thresholds; a round that evicts here
 * does nothing else. Returns how many were evicted. */
static size_t local_storage_eviction(nl_eviction_t *m) {
  clear_evicted(m);
  if (!m->stats.n_pods) return 0; /* a round without the pods' figures: no pod has a limit */
  size_t n;
  const nl_pod_t **pods = m->deps.active_pods(m->deps.ctx, &n);
  for (size_t i = 0; i < n; i++) {
    const nl_pod_t *pod = pods[i];
    const nl_ev_pod_stats_t *s = pod_stats(m, pod->metadata.uid);
    char *msg;
    const char *signal = s ? nl_ev_local_storage_exceeded(pod, s, m->stats.dedicated_imagefs, &msg) : NULL;
    if (!signal) continue;
    if (nl_ev_pod_is_critical(pod)) {
      nl_warn("eviction manager: cannot evict a critical pod %s/%s", pod->metadata.namespace_,
              pod->metadata.name);
    } else {
      nl_info("eviction manager: evicting pod %s/%s: %s", pod->metadata.namespace_, pod->metadata.name, msg);
      m->deps.evict(m->deps.ctx, pod, IMMEDIATE_GRACE_S, msg, NULL, false);
      add_evicted(m, pod, signal);
    }
    free(msg);
  }
  free(pods);
  return m->n_evicted;
}

static void wait_cleanup(nl_eviction_t *m) {
  m->cleanup_checks = 0;
  set_state(m, NL_EV_CLEANUP);
  uv_timer_start(&m->timer, on_tick, CLEANUP_CHECK_MS, 0);
}

static void synchronize(nl_eviction_t *m) {
  bool act[64] = {0};
  observe(m, act);
  int ti = pick(m, act);
  m->want_pods = ti >= 0;
  if (ti >= 0 && !m->stats_pods) {
    /* a threshold to act on: its ranking needs the pods' figures, which an
     * idle round leaves out; the same round again, with them */
    step(m);
    return;
  }
  m->rounds++;
  rearm_memcg(m);
  if (local_storage_eviction(m)) {
    wait_cleanup(m);
    return;
  }
  if (ti < 0) {
    idle(m);
    return;
  }
  bool images;
  if (reclaims(m, m->thresholds[ti].signal, &images)) {
    m->reclaim_threshold = ti;
    set_state(m, NL_EV_RECLAIM);
    step(m);
    return;
  }
  if (evict_one(m, ti)) {
    wait_cleanup(m);
    return;
  }
  idle(m);
}

/* After node-level reclaim: done when no threshold met before is met now,
 * minimum reclaim included (upstream reclaimNodeLevelResources). */
static void after_reclaim(nl_eviction_t *m) {
  bool still = false;
  for (size_t i = 0; i < m->n_thresholds && !still; i++)
    still = m->met[i] && nl_ev_threshold_met(&m->thresholds[i], m->stats.obs, true);
  if (!still) {
    nl_info("eviction manager: node-level reclaim freed enough for %s",
            nl_ev_signal_name(m->thresholds[m->reclaim_threshold].signal));
    idle(m);
    return;
  }
  if (evict_one(m, m->reclaim_threshold)) {
    wait_cleanup(m);
    return;
  }
  idle(m);
}

typedef struct collect_call {
  nl_eviction_t *m;
  uint64_t generation;
  bool pods;
  nl_ev_stats_t stats;
} collect_call_t;

static void on_collected(void *ctx) {
  collect_call_t *cc = ctx;
  nl_eviction_t *m = cc->m;
  if (m->stopping) {
    nl_ev_stats_free(&cc->stats);
    free(cc);
    go_on(m);
    return;
  }
  assert(cc->generation == m->generation);
  nl_ev_stats_free(&m->stats);
  m->stats = cc->stats;
  m->stats_pods = cc->pods;
  free(cc);
  if (m->state == NL_EV_COLLECT) synchronize(m);
  else after_reclaim(m);
}

static void on_reclaimed(void *ctx) {
  nl_eviction_t *m = ctx;
  if (!go_on(m)) return;
  set_state(m, NL_EV_RECOLLECT);
  step(m);
}

static bool all_cleaned_up(nl_eviction_t *m) {
  for (size_t i = 0; i < m->n_evicted; i++)
    if (!m->deps.pod_cleaned_up(m->deps.ctx, m->evicted_uids[i])) return false;
  return true;
}

static void step(nl_eviction_t *m) {
  assert(m->state != NL_EV_STOPPED && !m->stopping);
  switch (m->state) {
  case NL_EV_IDLE:
    return;
  case NL_EV_COLLECT:
  case NL_EV_RECOLLECT: {
    collect_call_t *cc = nl_xcalloc(1, sizeof *cc);
    cc->m = m;
    cc->generation = ++m->generation;
    cc->pods = m->want_pods;
    m->deps.collect(m->deps.ctx, cc->pods, &cc->stats, on_collected, cc);
    return;
  }
  case NL_EV_RECLAIM: {
    bool images = false;
    reclaims(m, m->thresholds[m->reclaim_threshold].signal, &images);
    nl_info("eviction manager: attempting to reclaim %s (dead containers%s)",
            nl_ev_signal_name(m->thresholds[m->reclaim_threshold].signal),
            images ? ", unused images" : "");
    m->deps.reclaim(m->deps.ctx, images, on_reclaimed, m);
    return;
  }
  case NL_EV_CLEANUP:
    /* upstream waitForPodsCleanup: the next round waits for the pods, or 30 s */
    if (all_cleaned_up(m) || ++m->cleanup_checks >= CLEANUP_CHECKS) {
      set_state(m, NL_EV_COLLECT);
      step(m);
      return;
    }
    uv_timer_start(&m->timer, on_tick, CLEANUP_CHECK_MS, 0);
    return;
  case NL_EV_STOPPED:
    return;
  }
}

int nl_eviction_init(nl_eviction_t *m, uv_loop_t *loop, const nl_ev_threshold_t *thresholds,
                     size_t n, int64_t transition_ns, int64_t max_pod_grace_s,
                     uint64_t period_ms, const nl_eviction_deps_t *deps) {
  memset(m, 0, sizeof *m);
  assert(n <= 64);
  m->loop = loop;
  m->deps = *deps;
  m->thresholds = nl_xcalloc(n + 1, sizeof *m->thresholds);
  if (n) memcpy(m->thresholds, thresholds, n * sizeof *thresholds);
  m->n_thresholds = n;
  m->transition_ns = transition_ns;
  m->max_pod_grace_s = max_pod_grace_s;
  m->period_ms = period_ms ? period_ms : PERIOD_MS;
  uv_timer_init(loop, &m->timer);
  m->timer.data = m;
  m->state = NL_EV_IDLE;
  bool memory = false;
  for (size_t i = 0; i < n; i++) memory |= thresholds[i].signal == NL_EV_MEMORY;
  nl_err_t *err = NULL;
  if (memory && deps->memcg_dir) {
    if (nl_memcg_notify_init(&m->memcg, loop, deps->memcg_dir, on_memcg_crossed, m, &err) == 0)
      m->memcg_up = true;
    else
      nl_warn("eviction manager: memory threshold notifications unavailable (%s): memory is polled",
              nl_err_msg(err));
    nl_err_free(&err);
  }
  return 0;
}

void nl_eviction_start(nl_eviction_t *m) { uv_timer_start(&m->timer, on_tick, 0, 0); }

void nl_eviction_poke(nl_eviction_t *m) {
  if (m->stopping) return;
  if (m->state == NL_EV_IDLE) uv_timer_start(&m->timer, on_tick, 0, 0);
  else m->poked = true;
}

void nl_eviction_stop(nl_eviction_t *m, nl_eviction_done_fn done, void *done_ctx) {
  if (m->stopping) return;
  m->stopping = true;
  m->done_cb = done;
  m->done_ctx = done_ctx;
  m->closing = 1 + m->memcg_up;
  if (m->memcg_up) nl_memcg_notify_stop(&m->memcg, memcg_stopped, m);
  /* A collection or reclaim in flight closes the timer when it completes. */
  if (m->state == NL_EV_IDLE || m->state == NL_EV_CLEANUP) {
    uv_timer_stop(&m->timer);
    uv_close((uv_handle_t *)&m->timer, timer_closed);
  }
}

bool nl_eviction_memory_pressure(const nl_eviction_t *m) { return m->pressure[COND_MEMORY]; }
bool nl_eviction_disk_pressure(const nl_eviction_t *m) { return m->pressure[COND_DISK]; }
bool nl_eviction_pid_pressure(const nl_eviction_t *m) { return m->pressure[COND_PID]; }

static bool tolerates_memory_pressure(const nl_pod_t *pod) {
  for (size_t i = 0; i < pod->spec.n_tolerations; i++) {
    const nl_toleration_t *t = &pod->spec.tolerations[i];
    bool exists = t->operator_ && !strcmp(t->operator_, "Exists");
    bool key = t->key && *t->key ? !strcmp(t->key, "node.kubernetes.io/memory-pressure") : exists;
    bool effect = !t->effect || !*t->effect || !strcmp(t->effect, "NoSchedule");
    bool value = exists || !t->value || !*t->value;
    if (key && effect && value) return true;
  }
  return false;
}

bool nl_eviction_admit(const nl_eviction_t *m, const nl_pod_t *pod, const char **reason,
                       char **message) {
  if (!m->pressure[0] && !m->pressure[1] && !m->pressure[2]) return true;
  if (nl_ev_pod_is_critical(pod)) return true;
  bool memory_only = m->pressure[COND_MEMORY] && !m->pressure[COND_DISK] && !m->pressure[COND_PID];
  if (memory_only && (strcmp(nl_pod_qos_class(pod), "BestEffort") != 0 || tolerates_memory_pressure(pod)))
    return true;
  /* Go prints the conditions as a slice: [MemoryPressure DiskPressure] */
  char list[64] = "";
  for (int c = 0; c < 3; c++)
    if (m->pressure[c]) {
      if (*list) strcat(list, " ");
      strcat(list, cond_names[c]);
    }
  *reason = "Evicted";
  *message = nl_xasprintf("The node had condition: [%s]. ", list);
  return false;
}
