/* Merges the pod sources ("file", "http", "api") into one stream of pod updates,
 * as upstream's PodConfig in PodConfigNotificationIncremental mode
 * (pkg/kubelet/config/config.go, podStorage.merge):
 *
 * - Pods are kept per source, keyed by UID. A source reports either its full set
 *   (nl_pod_config_set, upstream's SET) or changes (nl_pod_config_update).
 * - Each merge emits, in this order and only when non-empty: REMOVE (pods gone
 *   from the source), ADD (new UIDs), UPDATE (a semantic change), DELETE (a
 *   change that sets a deletion timestamp: graceful delete), then RECONCILE (only
 *   the status changed). The first SET of a source that yields no ADD, UPDATE or
 *   DELETE emits one empty ADD, so the consumer learns the source is ready.
 * - "Semantic" is upstream's podsDifferSemantically: spec, labels, the deletion
 *   timestamp and grace period, and the annotations other than the kubelet's own
 *   (config.source, config.seen, config.mirror). A change of the status alone is a
 *   RECONCILE (the stored pod is replaced, so consumers see the API's latest
 *   status); anything else (a re-read of the same file, a reformatted manifest, a
 *   changed ownerReference or resourceVersion) is dropped.
 * - Every stored pod carries config.source = the source name, and config.seen =
 *   the time the UID was first seen (RFC 3339, kept across updates).
 * - Within one batch, a second pod with the same namespace/name is dropped and
 *   logged (upstream filterInvalidPods).
 *
 * Single-threaded, on the loop; no handles (nothing to close).
 */
#ifndef NL_SOURCES_CONFIG_H
#define NL_SOURCES_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/model/pod.h"
#include "reactor/error.h"
#include "reactor/map.h"

typedef enum nl_pod_op {
  NL_POD_ADD,       /* new pods from a source */
  NL_POD_UPDATE,    /* pods whose spec/labels/annotations changed */
  NL_POD_DELETE,    /* pods being gracefully deleted (deletion timestamp set) */
  NL_POD_REMOVE,    /* pods gone from their source: stop them now */
  NL_POD_RECONCILE, /* only the status changed */
} nl_pod_op_t;

/* Upstream's source names (kubetypes.FileSource, HTTPSource, ApiserverSource). */
#define NL_SOURCE_FILE "file"
#define NL_SOURCE_HTTP "http"
#define NL_SOURCE_API "api"

/* Called once per non-empty op of a merge (and once for the empty first ADD).
 * The pods are owned by the config and are only valid during the call: a
 * consumer that keeps one takes a reference (nl_pod_ref); they never change. They are sorted (ADD, UPDATE,
 * DELETE, RECONCILE in the order the source gave them; REMOVE by
 * namespace/name). The callback must not call back into the config. */
typedef void (*nl_pod_config_cb)(nl_pod_op_t op, const char *source, const nl_pod_t *const *pods,
                                 size_t n, void *ctx);

typedef struct nl_pod_config {
  nl_pod_config_cb cb;
  void *ctx;
  struct nl_pod_source_state *sources; /* registration order */
  size_t n_sources;
  bool busy; /* in a merge: catches re-entry from the callback */
  /* Pods emitted as ADD, UPDATE, DELETE or REMOVE so far (not RECONCILE): a
   * source learns from it whether its input changed anything but statuses. */
  uint64_t changes;
  /* The clock for config.seen, nanoseconds since the epoch; tests replace it. */
  int64_t (*now_ns)(void *ctx);
} nl_pod_config_t;

const char *nl_pod_op_name(nl_pod_op_t op);

void nl_pod_config_init(nl_pod_config_t *cfg, nl_pod_config_cb cb, void *ctx);
/* Frees every stored pod. No callback runs. */
void nl_pod_config_free(nl_pod_config_t *cfg);

/* Registers a source (upstream PodConfig.Channel); sources_ready waits for all
 * registered sources. Registering twice is harmless. */
void nl_pod_config_add_source(nl_pod_config_t *cfg, const char *source);

/* The full set of pods of a source (upstream's SET). Takes ownership of every pod
 * and of the array itself (freed with free(); NULL is fine when n is 0). Marks
 * the source as seen. An unregistered source is registered. Returns 0, or -1
 * with *err (NL_EINVAL) when the source name is empty, in which case the pods are
 * freed all the same. */
int nl_pod_config_set(nl_pod_config_t *cfg, const char *source, nl_pod_t **pods, size_t n,
                      nl_err_t **err);

/* Incremental changes (upstream's ADD, UPDATE, DELETE and REMOVE ops): ADD,
 * UPDATE and DELETE add or change the given pods (by UID); REMOVE drops them.
 * Ownership as nl_pod_config_set. Does not mark the source as seen. Returns 0,
 * or -1 with *err for an empty source name or RECONCILE (not an input op). */
int nl_pod_config_update(nl_pod_config_t *cfg, const char *source, nl_pod_op_t op, nl_pod_t **pods,
                         size_t n, nl_err_t **err);

/* True once every registered source has reported a full set at least once
 * (upstream SeenAllSources); false with no source registered. Nothing may be
 * deleted on the strength of the merged state before this is true. */
bool nl_pod_config_sources_ready(const nl_pod_config_t *cfg);
bool nl_pod_config_source_seen(const nl_pod_config_t *cfg, const char *source);

/* The stored pod of a source by UID, or NULL; valid until the next merge. */
const nl_pod_t *nl_pod_config_get(const nl_pod_config_t *cfg, const char *source, const char *uid);
/* The stored pods of a source, in an array the caller frees (not the pods), in
 * no particular order; valid until the next merge. */
const nl_pod_t **nl_pod_config_list(const nl_pod_config_t *cfg, const char *source, size_t *n);
/* Number of pods stored for source, or for all sources when source is NULL. */
size_t nl_pod_config_count(const nl_pod_config_t *cfg, const char *source);

/* Upstream's podsDifferSemantically (exposed for tests and benchmarks). */
bool nl_pod_config_differ(const nl_pod_t *a, const nl_pod_t *b);

#endif
