/* Critical pod admission in the kubelet (upstream CriticalPodAdmissionHandler,
 * managers/preemption.h chooses the pods): the chosen pods are killed as the
 * kubelet's own kills are (nl__kubelet_pods_terminate), and the critical pod,
 * admitted, starts once they have all finished (upstream's killPodFunc blocks
 * admission until then). */
#ifndef NL_KUBELET_PREEMPT_H
#define NL_KUBELET_PREEMPT_H

#include "agent/kubelet.h"
#include "managers/admission.h"

/* upstream evictPodsToFreeRequests: chooses among others the pods whose
 * going frees need[0..n_need) for pod, and kills each with its own grace
 * period: a Warning event "Preempting", its status Failed (Succeeded if its
 * containers exit 0) with reason Preempting and the DisruptionTarget
 * condition, one more kubelet_preemptions{preemption_signal=<need[0]'s
 * resource>}. pod then waits for them (nl__kubelet_preempt_waiting). Returns
 * 0, or -1 with *err (upstream's message) when no set of pods frees enough:
 * nothing is killed. */
int nl__kubelet_preempt(nl_kubelet_t *k, const nl_pod_t *pod, const nl_admit_pods_t *others,
                        const nl_preempt_need_t *need, size_t n_need, nl_err_t **err);
/* pod (by uid) waits for the pods it preempted to finish. */
bool nl__kubelet_preempt_waiting(nl_kubelet_t *k, const char *uid);
/* pod no longer waits (admission refused it after all, or it is gone). */
void nl__kubelet_preempt_forget(nl_kubelet_t *k, const char *uid);
/* A pod finished: each waiting pod whose victims have all finished is handed
 * to start (still wanted, not deleted, not started yet). */
void nl__kubelet_preempt_pod_finished(nl_kubelet_t *k,
                                      void (*start)(nl_kubelet_t *k, const nl_pod_t *pod));
/* Frees what waits (the agent stops). */
void nl__kubelet_preempt_free(nl_kubelet_t *k);

#endif
