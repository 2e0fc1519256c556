/* Whether a pod's resize can be allocated (managers/resize.h): upstream's
 * allocation manager runs its admit handlers with the ResizeOperation; what
 * can never fit is Infeasible, what does not fit beside the other pods now is
 * Deferred (the status manager turns every other reason into Deferred). */
#include <stdio.h>
#include <string.h>

#include "managers/resize.h"
#include "managers/status.h"
#include "reactor/xalloc.h"

/* "cpu, requested: 3000, capacity: 2000" for each resource over allocatable
 * (upstream's wording before the apiserver took this check over). */
static char *over_allocatable(const nl_admit_node_t *node, const nl_pod_t *pod) {
  int64_t cpu = nl_pod_request(pod, "cpu"), mem = nl_pod_request(pod, "memory");
  char cpu_msg[96] = "", mem_msg[96] = "";
  if (node->cpu_milli >= 0 && cpu > node->cpu_milli)
    snprintf(cpu_msg, sizeof cpu_msg, "cpu, requested: %lld, capacity: %lld", (long long)cpu,
             (long long)node->cpu_milli);
  if (node->memory >= 0 && mem > node->memory)
    snprintf(mem_msg, sizeof mem_msg, "memory, requested: %lld, capacity: %lld", (long long)mem,
             (long long)node->memory);
  if (!*cpu_msg && !*mem_msg) return NULL;
  return nl_xasprintf("Node didn't have enough capacity: %s%s%s", cpu_msg,
                      *cpu_msg && *mem_msg ? "; " : "", mem_msg);
}

nl_resize_verdict_t nl_resize_admit(const nl_admit_node_t *node, const nl_pod_t *desired,
                                    const nl_pod_t *allocated, const nl_admit_pods_t *others,
                                    bool is_static, char **message) {
  *message = NULL;
  /* What the API server refuses on the resize subresource, for pods that did
   * not come through it. */
  if (is_static) {
    *message = nl_xstrdup("static pods cannot be resized");
    return NL_RESIZE_INFEASIBLE;
  }
  if (strcmp(nl_pod_qos_class(desired), nl_pod_qos_class(allocated)) != 0) {
    *message = nl_xasprintf("Pod QOS Class may not change as a result of resizing (%s to %s)",
                            nl_pod_qos_class(allocated), nl_pod_qos_class(desired));
    return NL_RESIZE_INFEASIBLE;
  }
  if ((*message = over_allocatable(node, desired))) return NL_RESIZE_INFEASIBLE;
  nl_admit_result_t r = {0};
  if (nl_admit_fits(node, desired, others, &r)) return NL_RESIZE_FITS;
  *message = r.message;
  return NL_RESIZE_DEFERRED;
}
