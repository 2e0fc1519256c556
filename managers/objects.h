/* ConfigMaps and Secrets that this node's pods reference (upstream's
 * configmap/secret managers). Only referenced objects are fetched: the Node
 * authorizer refuses anything else. configMapAndSecretChangeDetectionStrategy
 * picks how: Watch (default; one watch per object on metadata.name, dropped
 * when no pod needs it), Get (a GET at every lookup of a pod sync) or Cache
 * (a GET when the cached copy is older than its TTL).
 *
 * Lookups are synchronous reads of the cache, so that the environment and the
 * volume writers stay plain functions. An object not fetched yet is an error
 * (the pod's sync fails with CreateContainerConfigError or a volume error and is
 * retried); when it arrives, or changes, the changed callback names it so that
 * the kubelet re-syncs the pods that use it. */
#ifndef NL_OBJECTS_H
#define NL_OBJECTS_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "agent/kube/client.h"
#include "agent/model/pod.h"
#include "reactor/error.h"

typedef enum nl_object_kind { NL_OBJECT_CONFIG_MAP, NL_OBJECT_SECRET } nl_object_kind_t;

typedef enum nl_objects_strategy {
  NL_OBJECTS_WATCH = 0, /* upstream default */
  NL_OBJECTS_GET,
  NL_OBJECTS_CACHE,
} nl_objects_strategy_t;

/* One key of an object. ConfigMap data and binaryData, Secret data decoded
 * from base64 (stringData never reaches a kubelet). value is not terminated. */
typedef struct nl_object_item {
  const char *key;
  const unsigned char *value;
  size_t len;
  bool binary; /* a ConfigMap's binaryData: volumes only, never the environment */
} nl_object_item_t;

/* A fetched object. Immutable: a change replaces it. Borrowed from the cache
 * until the caller returns to the loop. */
typedef struct nl_object {
  nl_object_kind_t kind;
  const char *namespace_;
  const char *name;
  const char *type; /* Secret type ("Opaque", "kubernetes.io/dockerconfigjson" ...); NULL for ConfigMaps */
  const nl_object_item_t *items; /* sorted by key */
  size_t n_items;
} nl_object_t;

/* The item named key, or NULL. */
const nl_object_item_t *nl_object_find(const nl_object_t *o, const char *key);

/* Decodes a v1 ConfigMap or Secret as the API sends it (outside input) into
 * one allocation, freed with nl_object_free(). Returns 0 with *out and
 * *immutable (the object's `immutable` field), or -1 with *err naming the
 * field ("secret default/db: data[\"pw\"]: illegal base64"). */
int nl_object_decode(nl_object_kind_t kind, const char *json, size_t len, nl_object_t **out,
                     bool *immutable, nl_err_t **err);
void nl_object_free(nl_object_t *o);

/* The API's resource name: "configmaps", "secrets". */
const char *nl_object_resource(nl_object_kind_t kind);
/* Fills *err with upstream's NotFound text (`configmaps "app" not found`) and
 * returns -1: what a lookup's 0 means to a pod that needs the object. */
int nl_objects_not_found(nl_err_t **err, nl_object_kind_t kind, const char *name);

/* What the environment and volume code call; a manager or a test fake stands
 * behind it. Returns 1 with *out (borrowed, see above), 0 when the object does
 * not exist (the API said 404), or -1 with *err when it is not known yet or
 * the API failed (the message names the object, e.g.
 * `configmap "app-config" not registered` or `failed to sync configmap cache`). */
typedef struct nl_objects_lookup {
  int (*fn)(void *ctx, nl_object_kind_t kind, const char *ns, const char *name,
            const nl_object_t **out, nl_err_t **err);
  void *ctx;
} nl_objects_lookup_t;

typedef struct nl_objects nl_objects_t;

/* The API client opens another connection when the server's streams per
 * connection (SETTINGS_MAX_CONCURRENT_STREAMS, 100) are taken, up to 8, and
 * keeps a tenth of each for the Lease, status and events: 720 watches in all.
 * The object watches leave room in that for the pod, Services, node and CSR
 * watches; past it, objects are fetched with GETs rather than wait. */
#define NL_OBJECTS_MAX_WATCHES 512

/* An object that a registered pod references arrived, changed or went away. */
typedef void (*nl_objects_changed_cb)(nl_object_kind_t kind, const char *ns, const char *name,
                                      void *ctx);

typedef struct nl_objects_opts {
  nl_objects_strategy_t strategy;
  uint64_t cache_ttl_ms; /* Cache strategy; 0: upstream's default */
  /* Watch: at most this many watches at once (0: NL_OBJECTS_MAX_WATCHES); the
   * objects beyond are fetched as with Cache until a watch is free. */
  unsigned max_watches;
  nl_objects_changed_cb changed;
  void *changed_ctx;
} nl_objects_opts_t;

int nl_objects_new(nl_objects_t **out, uv_loop_t *loop, nl_kube_client_t *client,
                   const nl_objects_opts_t *opts, nl_err_t **err);

/* The pod's references (volumes, projected sources, env valueFrom, envFrom and
 * imagePullSecrets) replace what was registered for its uid before. */
void nl_objects_register_pod(nl_objects_t *m, const nl_pod_t *pod);
void nl_objects_unregister_pod(nl_objects_t *m, const char *uid);

/* True when the pod references that object of its namespace (volumes,
 * projected sources, env, envFrom, imagePullSecrets): whom a change concerns. */
bool nl_objects_pod_references(const nl_pod_t *pod, nl_object_kind_t kind, const char *name);

/* The lookup backed by this manager. */
nl_objects_lookup_t nl_objects_lookup(nl_objects_t *m);

/* Cancels requests and watches; the manager is freed once its handles and
 * requests are closed, then done(ctx) is called (NULL: none). */
void nl_objects_stop(nl_objects_t *m, void (*done)(void *ctx), void *ctx);

#endif
