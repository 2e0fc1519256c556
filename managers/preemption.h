/* Critical pod admission (upstream pkg/kubelet/preemption, the
 * CriticalPodAdmissionHandler): a critical pod (nl_ev_pod_is_critical: static,
 * mirror, or priority >= 2000000000) that admission refuses only for want of
 * resources is admitted after other pods are preempted to free what it lacks.
 * This module chooses them (getPodsToPreempt); a pure function of the pods.
 *
 * The choice takes Guaranteed pods only when the BestEffort and Burstable pods
 * together cannot free enough, Burstable ones only when the BestEffort pods
 * and the Guaranteed ones chosen cannot, and BestEffort ones last for what is
 * still missing. Within a class, each round takes the pod whose requests come
 * closest to covering what remains (the sum over resources of the squared
 * uncovered fraction), the smaller request (memory, then cpu) on a tie. */
#ifndef NL_PREEMPTION_H
#define NL_PREEMPTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/model/pod.h"
#include "reactor/error.h"

/* What must be freed of one resource ("pods", "cpu" in millicores, "memory"
 * and the others in units): upstream's admissionRequirement. */
typedef struct nl_preempt_need {
  const char *resource;
  int64_t quantity;
} nl_preempt_need_t;

/* upstream kubetypes.Preemptable: a critical preemptor may preempt any pod
 * that is not critical; otherwise only a pod of lower priority (both set). */
bool nl_preemptable(const nl_pod_t *preemptor, const nl_pod_t *preemptee);

/* What pod gives back of resource when it goes (upstream
 * GetResourceRequest): 1 of "pods", its request of any other. */
int64_t nl_preempt_request(const nl_pod_t *pod, const char *resource);

/* upstream getPodsToPreempt: the pods among pods[0..n) (borrowed) that
 * preemptor may preempt and whose preemption frees needs[0..n_needs), chosen
 * as the header says. Returns 0 with *out (an array of borrowed pods, the
 * caller frees it; BestEffort first, then Burstable, then Guaranteed) and
 * *n_out, or -1 with *err "no set of running pods found to reclaim resources:
 * [(res: cpu, q: 100), ]" (what even all of them would leave missing). */
int nl_preempt_select(const nl_pod_t *preemptor, const nl_pod_t *const *pods, size_t n,
                      const nl_preempt_need_t *needs, size_t n_needs, const nl_pod_t ***out,
                      size_t *n_out, nl_err_t **err);

#endif
