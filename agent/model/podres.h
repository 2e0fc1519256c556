/* A pod's resources as one whole (upstream component-helpers' resource
 * helpers PodRequests/PodLimits and the API's GetPodQOS): what its containers
 * sum to, the pod-level spec.resources (PodLevelResources) that stand in for
 * that sum where set, and the QoS class that follows. Pure functions of the
 * pod; cpu in millicores, every other resource in units (bytes). */
#ifndef NL_PODRES_H
#define NL_PODRES_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/model/pod.h"

/* cpu, memory and hugepages-*: the only resources spec.resources may name. */
bool nl_pod_level_resource(const char *name);
/* spec.resources.requests names a supported resource (IsPodLevelRequestsSet). */
bool nl_pod_level_requests_set(const nl_pod_t *pod);
/* spec.resources.requests or .limits does (IsPodLevelResourcesSet). */
bool nl_pod_level_set(const nl_pod_t *pod);
/* The pod-level request or limit of resource, or NULL when spec.resources has
 * none (or resource is not one spec.resources may set). */
const nl_quantity_t *nl_pod_level_request(const nl_pod_t *pod, const char *resource);
const nl_quantity_t *nl_pod_level_limit(const nl_pod_t *pod, const char *resource);

/* What the containers sum to (AggregateContainerRequests/Limits):
 * max(containers + sidecars, each init container + the sidecars started before
 * it). With limits, *all says whether every container and sidecar declares a
 * non-zero limit of resource. */
int64_t nl_pod_containers_amount(const nl_pod_t *pod, const char *resource, bool limits,
                                 bool *all);
/* PodRequests (limits false) or PodLimits (true): the pod-level amount where
 * set, else the containers' sum; plus spec.overhead when asked for (to a
 * non-zero limit only). With limits, *all (may be NULL) says whether the limit
 * bounds the whole pod: a non-zero pod-level limit, or one on every container
 * and sidecar. */
int64_t nl_pod_amount(const nl_pod_t *pod, const char *resource, bool limits, bool overhead,
                      bool *all);
/* The usual cases: with the overhead. */
static inline int64_t nl_pod_request(const nl_pod_t *pod, const char *resource) {
  return nl_pod_amount(pod, resource, false, true, NULL);
}
static inline int64_t nl_pod_limit(const nl_pod_t *pod, const char *resource, bool *all) {
  return nl_pod_amount(pod, resource, true, true, all);
}

/* Whether the container's extended resource is served by the claim the
 * scheduler made for the pod (status.extendedResourceClaimStatus maps it to a
 * request: DRAExtendedResource): then no device plugin allocates it. */
bool nl_pod_dra_extended(const nl_pod_t *pod, const char *container, const char *resource);

/* "Guaranteed", "Burstable" or "BestEffort" (ComputePodQOS): from spec.resources
 * when the pod has it, else from its containers' and init containers'. */
const char *nl_pod_qos_class(const nl_pod_t *pod);

#endif
