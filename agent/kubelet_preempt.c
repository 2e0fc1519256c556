#include "agent/kubelet_preempt.h"

#include <stdlib.h>
#include <string.h>

#include "agent/kubelet_pods.h"
#include "managers/preemption.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define PREEMPT_REASON "Preempting" /* upstream events.PreemptContainer */
#define PREEMPT_MESSAGE "Preempted in order to admit critical pod"
#define PREEMPT_CONDITION "Pod was preempted by Kubelet to accommodate a critical pod."

/* A critical pod waiting for the pods it preempted. */
typedef struct wait {
  char **victims; /* uids */
  size_t n;
} wait_t;

static void wait_free(void *p) {
  wait_t *w = p;
  if (!w) return;
  for (size_t i = 0; i < w->n; i++) free(w->victims[i]);
  free(w->victims);
  free(w);
}

int nl__kubelet_preempt(nl_kubelet_t *k, const nl_pod_t *pod, const nl_admit_pods_t *others,
                        const nl_preempt_need_t *need, size_t n_need, nl_err_t **err) {
  const nl_pod_t **chosen;
  size_t n;
  if (nl_preempt_select(pod, others->items, others->n, need, n_need, &chosen, &n, err) < 0)
    return nl_err_wrap(err, "preemption: error finding a set of pods to preempt");
  wait_t *w = nl_xcalloc(1, sizeof *w);
  w->victims = nl_xcalloc(n + 1, sizeof *w->victims);
  for (size_t i = 0; i < n; i++) {
    /* others may hold copies (as allocated): the pod manager's is killed */
    const nl_pod_t *v = nl_pod_manager_get(&k->pods, chosen[i]->metadata.uid);
    if (!v) continue;
    nl_event_ref_t ref = nl_event_pod_ref(v);
    nl_events_record(&k->events, &ref, NL_EVENT_WARNING, PREEMPT_REASON, PREEMPT_MESSAGE);
    nl_info("preempting pod %s/%s (%s) to free up resources for %s/%s", v->metadata.namespace_,
            v->metadata.name, v->metadata.uid, pod->metadata.namespace_, pod->metadata.name);
    w->victims[w->n++] = nl_xstrdup(v->metadata.uid);
    nl__kubelet_pods_terminate(k, v, -1, PREEMPT_REASON, PREEMPT_MESSAGE, PREEMPT_CONDITION);
    nl_kmetrics_preemption(&k->metrics, n_need ? need[0].resource : "");
  }
  free(chosen);
  wait_free(nl_map_del(&k->preempt_waits, pod->metadata.uid));
  nl_map_put(&k->preempt_waits, pod->metadata.uid, w);
  return 0;
}

bool nl__kubelet_preempt_waiting(nl_kubelet_t *k, const char *uid) {
  return nl_map_has(&k->preempt_waits, uid);
}

void nl__kubelet_preempt_forget(nl_kubelet_t *k, const char *uid) {
  wait_free(nl_map_del(&k->preempt_waits, uid));
}

static bool victims_finished(nl_kubelet_t *k, const wait_t *w) {
  for (size_t i = 0; i < w->n; i++) {
    const nl_pod_worker_t *pw = nl_pod_workers_get(&k->workers, w->victims[i]);
    if (pw && !pw->finished) return false;
  }
  return true;
}

void nl__kubelet_preempt_pod_finished(nl_kubelet_t *k,
                                      void (*start)(nl_kubelet_t *k, const nl_pod_t *pod)) {
  for (;;) { /* start may change the map: look again from the beginning */
    nl_map_iter_t it;
    const char *uid;
    void *v;
    char *ready = NULL;
    nl_map_iter_init(&it, &k->preempt_waits);
    while (!ready && nl_map_iter_next(&it, &uid, &v))
      if (victims_finished(k, v)) ready = nl_xstrdup(uid);
    if (!ready) return;
    wait_free(nl_map_del(&k->preempt_waits, ready));
    const nl_pod_t *pod = nl_pod_manager_get(&k->pods, ready);
    if (pod && !pod->metadata.deletion_timestamp && !nl_pod_workers_get(&k->workers, ready)) {
      nl_info("pod %s/%s (%s) starts: the pods it preempted have terminated",
              pod->metadata.namespace_, pod->metadata.name, ready);
      start(k, pod);
    }
    free(ready);
  }
}

void nl__kubelet_preempt_free(nl_kubelet_t *k) { nl_map_free(&k->preempt_waits, wait_free); }
