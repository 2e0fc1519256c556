#include "managers/shutdown.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

void nl_shutdown_init(nl_shutdown_t *m, int64_t grace_ns, int64_t critical_ns,
                      nl_shutdown_kill_fn kill, void *ctx) {
  memset(m, 0, sizeof *m);
  m->kill = kill;
  m->ctx = ctx;
  int64_t grace_s = grace_ns / 1000000000, critical_s = critical_ns / 1000000000;
  /* upstream migrateConfig: nothing to do without a period, or with a
   * critical period longer than the whole (configuration validation refuses it). */
  if (grace_s <= 0 || critical_s < 0 || critical_s > grace_s) return;
  m->groups = nl_xcalloc(2, sizeof *m->groups);
  m->groups[0] = (nl_shutdown_group_t){0, grace_s - critical_s};
  m->groups[1] = (nl_shutdown_group_t){NL_PRIORITY_SYSTEM_CRITICAL, critical_s};
  m->n_groups = 2;
}

static void free_pods(nl_shutdown_t *m) {
  for (size_t i = 0; i < m->n_pods; i++) {
    free((char *)m->pods[i].pod.uid);
    free((char *)m->pods[i].pod.namespace_);
    free((char *)m->pods[i].pod.name);
  }
  free(m->pods);
  m->pods = NULL;
  m->n_pods = 0;
}

void nl_shutdown_free(nl_shutdown_t *m) {
  free_pods(m);
  free(m->groups);
  m->groups = NULL;
  m->n_groups = 0;
}

bool nl_shutdown_enabled(const nl_shutdown_t *m) { return m->n_groups > 0; }

int64_t nl_shutdown_period_s(const nl_shutdown_t *m) {
  int64_t sum = 0;
  for (size_t i = 0; i < m->n_groups; i++) sum += m->groups[i].grace_s;
  return sum;
}

/* upstream groupByPriority. */
static size_t group_of(const nl_shutdown_t *m, int32_t priority) {
  size_t g = 0;
  for (size_t i = 0; i < m->n_groups; i++)
    if (m->groups[i].priority <= priority) g = i;
  return g;
}

static size_t pods_left(const nl_shutdown_t *m, size_t group) {
  size_t n = 0;
  for (size_t i = 0; i < m->n_pods; i++)
    if (m->pods[i].group == group && !m->pods[i].done) n++;
  return n;
}

static size_t pods_in(const nl_shutdown_t *m, size_t group) {
  size_t n = 0;
  for (size_t i = 0; i < m->n_pods; i++) n += m->pods[i].group == group;
  return n;
}

/* Starts group g: every pod of it is killed. */
static void start_group(nl_shutdown_t *m, size_t g, uint64_t now_ms) {
  const nl_shutdown_group_t *grp = &m->groups[g];
  m->group = g;
  m->group_deadline_ms = now_ms + (uint64_t)grp->grace_s * 1000;
  nl_info("shutdown: stopping %zu pods of priority >= %d within %llds", pods_in(m, g),
          grp->priority, (long long)grp->grace_s);
  for (size_t i = 0; i < m->n_pods; i++) {
    if (m->pods[i].group != g) continue;
    const nl_shutdown_pod_t *p = &m->pods[i].pod;
    int64_t grace = grp->grace_s;
    if (p->termination_grace_s >= 0 && p->termination_grace_s <= grace) grace = p->termination_grace_s;
    nl_vlog(1, "shutdown: killing pod %s/%s with a grace period of %llds", p->namespace_, p->name,
            (long long)grace);
    /* the kill may report the pod done from inside: step() then moves on */
    m->kill(m->ctx, p, grace);
  }
}

/* Moves through the groups: past the one whose pods are all done or whose
 * period has run out, to the next with pods, or to DONE. */
static void step(nl_shutdown_t *m, uint64_t now_ms) {
  if (m->stepping) return;
  m->stepping++;
  while (m->state == NL_SHUTDOWN_KILLING) {
    if (pods_left(m, m->group) && now_ms < m->group_deadline_ms) break;
    if (pods_left(m, m->group))
      nl_info("shutdown: %zu pods of priority >= %d still stopping after %llds: going on",
              pods_left(m, m->group), m->groups[m->group].priority,
              (long long)m->groups[m->group].grace_s);
    size_t next = m->group + 1;
    while (next < m->n_groups && !pods_in(m, next)) next++;
    if (next == m->n_groups) {
      m->state = NL_SHUTDOWN_DONE;
      m->ended_ms = now_ms;
      nl_info("shutdown: done in %llu ms", (unsigned long long)(now_ms - m->started_ms));
      break;
    }
    start_group(m, next, now_ms);
  }
  m->stepping--;
}

void nl_shutdown_begin(nl_shutdown_t *m, const nl_shutdown_pod_t *pods, size_t n, uint64_t now_ms) {
  assert(m->state == NL_SHUTDOWN_IDLE);
  m->started_ms = now_ms;
  m->pods = n ? nl_xcalloc(n, sizeof *m->pods) : NULL;
  for (size_t i = 0; i < n; i++) {
    nl_shutdown__pod_t *p = &m->pods[m->n_pods++];
    p->pod = pods[i];
    p->pod.uid = nl_xstrdup(pods[i].uid);
    p->pod.namespace_ = nl_xstrdup(pods[i].namespace_ ? pods[i].namespace_ : "");
    p->pod.name = nl_xstrdup(pods[i].name ? pods[i].name : "");
    p->group = group_of(m, pods[i].priority);
  }
  m->state = NL_SHUTDOWN_KILLING;
  if (!m->n_groups) {
    m->state = NL_SHUTDOWN_DONE;
    m->ended_ms = now_ms;
    return;
  }
  /* A "group" before the first, with nothing in it: step() starts the first
   * group with pods. */
  m->stepping++;
  size_t first = 0;
  while (first < m->n_groups && !pods_in(m, first)) first++;
  if (first < m->n_groups) start_group(m, first, now_ms);
  else m->group = m->n_groups - 1;
  m->stepping--;
  step(m, now_ms);
}

void nl_shutdown_pod_done(nl_shutdown_t *m, const char *uid, uint64_t now_ms) {
  if (m->state != NL_SHUTDOWN_KILLING) return;
  for (size_t i = 0; i < m->n_pods; i++) {
    if (strcmp(m->pods[i].pod.uid, uid) != 0 || m->pods[i].done) continue;
    m->pods[i].done = true;
    nl_vlog(1, "shutdown: pod %s/%s stopped", m->pods[i].pod.namespace_, m->pods[i].pod.name);
  }
  step(m, now_ms);
}

void nl_shutdown_tick(nl_shutdown_t *m, uint64_t now_ms) { step(m, now_ms); }

uint64_t nl_shutdown_deadline(const nl_shutdown_t *m) {
  return m->state == NL_SHUTDOWN_KILLING ? m->group_deadline_ms : 0;
}

int32_t nl_shutdown_pod_priority(const nl_pod_t *pod) {
  if (pod->spec.priority.set) return pod->spec.priority.v;
  const char *pc = pod->spec.priority_class_name;
  if (pc && strcmp(pc, "system-node-critical") == 0) return NL_PRIORITY_SYSTEM_NODE_CRITICAL;
  if (pc && strcmp(pc, "system-cluster-critical") == 0) return NL_PRIORITY_SYSTEM_CRITICAL;
  return 0;
}
