/* Mirror pods (upstream pkg/kubelet/pod/mirror_client.go and the mirror-pod part
 * of the kubelet's syncPod): each static pod gets an API object of the same
 * namespace and name, with the kubernetes.io/config.mirror annotation set to the
 * static pod's config hash and an owner reference to the Node (controller), so
 * that kubectl sees it and the status manager can report to it.
 *
 * Once the Node is registered (its uid known), on every change and again every
 * sync period: list the node's pods (fieldSelector spec.nodeName, what the node
 * authorizer lets a node read; the pod watch makes it redundant once there is
 * one) and for each static pod: mirror pod missing -> POST it; outdated (another
 * config.mirror hash) or being deleted -> DELETE it with its uid as a
 * precondition, then POST the new one. A pod of that name that is no mirror pod
 * is left alone. A static pod that goes
 * away has its mirror pod deleted the same way. One list at a time, one request
 * per static pod at a time; a failure waits for the next round.
 *
 * Ownership: embedded by its owner; borrows the kube client and deps.ctx. */
#ifndef NL_MIRROR_H
#define NL_MIRROR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent/kube/client.h"
#include "agent/model/pod.h"
#include "reactor/map.h"

/* What is known of an existing API pod of the static pod's name. */
typedef struct nl_mirror_seen {
  const char *hash; /* its config.mirror annotation; NULL: not a mirror pod */
  bool deleting;    /* has a deletionTimestamp */
} nl_mirror_seen_t;

typedef enum nl_mirror_action {
  NL_MIRROR_KEEP,
  NL_MIRROR_CREATE,
  NL_MIRROR_DELETE, /* then CREATE when the static pod is still wanted */
} nl_mirror_action_t;

/* The decision of the kubelet's syncPod: want_hash is the static pod's
 * config.hash (NULL: the static pod is gone); seen is NULL when no pod of that
 * name exists. */
nl_mirror_action_t nl_mirror_decide(const char *want_hash, const nl_mirror_seen_t *seen);

/* The POST body: the static pod with config.mirror = its hash, an owner
 * reference to the Node, and no uid (the apiserver gives one). New reference. */
json_t *nl_mirror_pod_body(const nl_pod_t *pod, const char *node_name, const char *node_uid);

typedef struct nl_mirror_deps {
  nl_kube_client_t *kube;
  /* The Node's uid, "" until it is registered (nl_node_uid). */
  const char *(*node_uid)(void *ctx);
  /* A mirror pod was created (its uid is known now); may be NULL. */
  void (*created)(void *ctx);
  void *ctx;
} nl_mirror_deps_t;

typedef enum nl_mirror_state {
  NL_MIRROR_IDLE,
  NL_MIRROR_DELETING,
  NL_MIRROR_CREATING,
} nl_mirror_state_t;

typedef struct nl_mirror_manager nl_mirror_manager_t;

typedef struct nl_mirror_entry { /* one static pod (internal) */
  nl_mirror_manager_t *mm;
  char *key;           /* "namespace/name" */
  char *namespace_, *name;
  char *hash;          /* the static pod's config.hash; NULL once it is gone */
  json_t *body;        /* what to POST */
  char *mirror_uid;    /* the mirror pod's uid once seen; NULL otherwise */
  char *mirror_hash;   /* and the config hash it was made from */
  nl_mirror_state_t state;
  nl_kube_req_t *req;
} nl_mirror_entry_t;

struct nl_mirror_manager {
  uv_loop_t *loop;
  nl_mirror_deps_t deps;
  char *node_name;
  uint64_t sync_ms;
  uint64_t timeout_ms;
  nl_map_t pods;       /* key -> nl_mirror_entry_t (owned) */
  uv_timer_t timer;
  nl_kube_req_t *list_req; /* the node's pods */
  bool again;              /* list again once list_req is done */
  bool started, stopping;
  int pending;
  void (*done)(void *ctx);
  void *done_ctx;
  uint64_t gets, creates, deletes;
};

/* sync_ms 0: 10 s. */
void nl_mirror_manager_init(nl_mirror_manager_t *mm, uv_loop_t *loop, const nl_mirror_deps_t *deps,
                            const char *node_name, uint64_t sync_ms);
void nl_mirror_manager_start(nl_mirror_manager_t *mm);
void nl_mirror_manager_stop(nl_mirror_manager_t *mm, void (*done)(void *ctx), void *ctx);
/* A static pod added or updated (copied as needed). */
void nl_mirror_manager_set(nl_mirror_manager_t *mm, const nl_pod_t *static_pod);
/* The static pod is gone: its mirror pod is deleted. */
void nl_mirror_manager_remove(nl_mirror_manager_t *mm, const char *namespace_, const char *name);
/* Checks every static pod's mirror pod now. */
void nl_mirror_manager_sync(nl_mirror_manager_t *mm);
/* The uid of the mirror pod of the static pod static_uid, or NULL: none yet,
 * or one made from another version of the manifest (the status manager's
 * deps.mirror_uid). */
const char *nl_mirror_manager_uid(const nl_mirror_manager_t *mm, const char *namespace_,
                                  const char *name, const char *static_uid);

#endif
