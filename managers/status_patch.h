/* The pod status as the status manager writes it, on v1 JSON (jansson): what
 * upstream's status manager does between the generated status and the API
 * (pkg/kubelet/status/status_manager.go mergePodStatus, isPodStatusByKubeletEqual,
 * the terminal-phase guard of updateStatusInternal) and the patch itself
 * (pkg/util/pod PatchPodStatus: a two-way strategic merge patch from the API's
 * status to the new one, with the pod's uid as a precondition).
 *
 * Pure functions of their inputs. Every json_t returned is a new reference the
 * caller owns; inputs are borrowed and never modified. */
#ifndef NL_STATUS_PATCH_H
#define NL_STATUS_PATCH_H

#include <jansson.h>
#include <stdbool.h>

/* kubetypes.PodConditionByKubelet: the condition types the kubelet owns
 * (PodScheduled, Ready, Initialized, ContainersReady, PodReadyToStartContainers,
 * PodResizePending, PodResizeInProgress). */
bool nl_status_condition_by_kubelet(const char *type);

/* "Succeeded" or "Failed". */
bool nl_status_phase_terminal(const json_t *status);

/* mergePodStatus and the terminal guard: the status to write is ours, plus
 *  - the conditions of api the kubelet does not own (first, in api's order, as
 *    upstream), e.g. DisruptionTarget or a readiness gate's; a DisruptionTarget
 *    of ours (the kubelet terminated the pod) replaces the API's or is added;
 *  - the fields of api the kubelet never sets (nominatedNodeName, resize,
 *    resourceClaimStatuses, ...): kept as they are;
 *  - api's observedGeneration when it is greater than ours (it never goes
 *    back, as upstream's updateStatusInternal);
 *  - api's phase when it is terminal and ours differs (a terminal phase never
 *    goes back, upstream's "Pod attempted illegal phase transition").
 * api may be NULL (nothing known yet). */
json_t *nl_status_merge(const json_t *api, const json_t *ours);

/* isPodStatusByKubeletEqual: the kubelet-owned and shared (DisruptionTarget)
 * conditions match by type,
 * status, reason and message (transition times ignored) and every field the
 * kubelet sets is equal. NULL equals nothing but NULL. */
bool nl_status_equal(const json_t *a, const json_t *b);

/* The strategic merge patch that turns api (NULL: {}) into want:
 * {"metadata":{"uid":<uid>},"status":{<diff>}}. Fields are diffed recursively;
 * a removed field is null; the merge lists of PodStatus (conditions by type,
 * podIPs and hostIPs by ip, resourceClaimStatuses by name) carry only the
 * changed elements with their key, removed ones as {"$patch":"delete",...}, and a
 * "$setElementOrder/<list>" of the new order; other lists are replaced whole.
 * Returns NULL when the status would not change. */
json_t *nl_status_patch(const char *uid, const json_t *api, const json_t *want);

/* The JSON text of a patch as upstream sends it (keys sorted, compact), in a
 * new string. */
char *nl_status_patch_dump(const json_t *patch);

/* The DeleteOptions body of a kubelet's pod deletion: gracePeriodSeconds 0 and
 * the uid as a precondition (the status manager's final DELETE, and a mirror
 * pod's), in a new string. */
char *nl_status_delete_body(const char *uid);

#endif
