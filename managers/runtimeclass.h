/* RuntimeClasses (upstream pkg/kubelet/runtimeclass): one reflector on
 * /apis/node.k8s.io/v1/runtimeclasses keeps each class's name and handler, all
 * the kubelet reads of it; nl_runtimeclasses_lookup() is upstream's
 * LookupRuntimeHandler. A pod naming a class runs its sandbox with the class's
 * handler (RunPodSandbox's runtime_handler) and its recursive read-only mounts
 * resolve against that handler; a class the cache does not hold fails the
 * sandbox with the lister's NotFound text, as upstream (retried by the pod's
 * sync with back-off).
 *
 * Without an API client there is no manager, as upstream (the kubelet makes one
 * only with a client): nl_runtime_opts_t.runtime_class is left unset and every
 * pod gets the default handler "".
 *
 * Memory: a class costs its name (253 bytes at most) and handler (a DNS label,
 * 63 at most); at most NL_RUNTIMECLASS_MAX classes are held (a class past the
 * bound is not found, and a warning says so).
 *
 * Ownership: nl_runtimeclasses_t is embedded by its owner and borrows the
 * client, which must outlive nl_runtimeclasses_stop()'s done callback. */
#ifndef NL_MANAGERS_RUNTIMECLASS_H
#define NL_MANAGERS_RUNTIMECLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "agent/kube/reflector.h"
#include "reactor/error.h"
#include "reactor/map.h"

#define NL_RUNTIMECLASS_MAX 4096

/* The name and handler of a node.k8s.io/v1 RuntimeClass JSON object. Returns 0
 * with two new strings, or -1 with *err naming the field (a missing name, a
 * handler that is not a DNS label, as the API server's validation). */
int nl_runtimeclass_decode(const char *json, size_t len, char **name, char **handler,
                           nl_err_t **err);

typedef struct nl_runtimeclasses nl_runtimeclasses_t;
typedef void (*nl_runtimeclasses_done_cb)(nl_runtimeclasses_t *rc);

struct nl_runtimeclasses {
  nl_reflector_t *refl;
  nl_map_t by_name; /* name -> handler (char *) */
  bool synced;      /* a first list arrived */
  bool full_warned; /* the NL_RUNTIMECLASS_MAX warning was logged */
  nl_runtimeclasses_done_cb done;
};

/* An empty cache and its reflector (not started). Returns 0, or -1 with *err. */
int nl_runtimeclasses_init(nl_runtimeclasses_t *rc, uv_loop_t *loop, nl_kube_client_t *kube,
                           nl_err_t **err);
void nl_runtimeclasses_start(nl_runtimeclasses_t *rc);
/* Stops the watch, frees the cache, then calls done (may be NULL). */
void nl_runtimeclasses_stop(nl_runtimeclasses_t *rc, nl_runtimeclasses_done_cb done);

/* The cache's updates, as the reflector's list and events make them (exposed
 * for tests): a list replaces everything; an object JSON is added or replaced,
 * or removed. An object that does not decode is logged and ignored. */
void nl_runtimeclasses_replace(nl_runtimeclasses_t *rc, const nl_kube_raw_t *items, size_t n);
void nl_runtimeclasses_put(nl_runtimeclasses_t *rc, const char *json, size_t len);
void nl_runtimeclasses_delete(nl_runtimeclasses_t *rc, const char *json, size_t len);

/* upstream LookupRuntimeHandler, for nl_runtime_opts_t.runtime_class (ctx is
 * the nl_runtimeclasses_t): class NULL or "": 0 with *handler "" (the default
 * class); a cached class: 0 with its handler (valid until the next update);
 * else -1 with *err `runtimeclass.node.k8s.io "<class>" not found`. */
int nl_runtimeclasses_lookup(void *ctx, const char *class_name, const char **handler,
                             nl_err_t **err);

#endif
