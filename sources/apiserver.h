/* The API source (upstream pkg/kubelet/config/apiserver.go): the pods bound to
 * this node, listed and watched with a reflector on /api/v1/pods with
 * fieldSelector=spec.nodeName=<node>, fed to the merger under the source name
 * "api". A list is a SET (so the source is "seen" only once the first complete
 * list arrived, and housekeeping never acts before that); watch events are ADD,
 * UPDATE and REMOVE of single pods. Mirror pods go to the merger like any other;
 * the kubelet keeps them apart.
 *
 * Each pod object is decoded on its own: a bad one is logged with its name and
 * field (`api source: bad pod: pod ns/x: spec.containers[0].image: must be a
 * string, got a number`) and skipped; the others are not disturbed.
 *
 * The checkpoint (nanolet's own, sources/checkpoint.h): with a path, every
 * semantic change of the pods (not a status-only one) rewrites it on the thread
 * pool, one write at a time. At start the checkpoint is read; when the first
 * list fails with no answer (refused, unreachable, TLS) or no list has arrived
 * `offline_wait_ms` after start, its pods are delivered as an ADD (not a SET: the source stays
 * unseen, so nothing is deleted on their strength). The first list then replaces
 * them: pods deleted meanwhile are REMOVEd, the others are the same pods (same
 * uid and spec) and the kubelet carries on with their containers.
 *
 * Ownership: nl_api_source_new allocates; nl_api_source_stop stops the reflector,
 * the timer and waits for checkpoint I/O in flight, frees the source and then
 * calls done. Pods handed to the merger are the merger's. */
#ifndef NL_SOURCES_APISERVER_H
#define NL_SOURCES_APISERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent/kube/client.h"
#include "agent/kube/reflector.h"
#include "reactor/error.h"
#include "sources/config.h"

/* How long the first list may take before the checkpoint's pods run. */
#define NL_API_SOURCE_OFFLINE_WAIT_MS 2000
/* The file under the root directory. */
#define NL_API_SOURCE_CHECKPOINT_FILE "api-pods.checkpoint"

typedef struct nl_api_source nl_api_source_t;

typedef struct nl_api_source_opts {
  const char *node_name;       /* required */
  const char *checkpoint_path; /* NULL: no checkpoint */
  uint64_t offline_wait_ms;    /* 0: NL_API_SOURCE_OFFLINE_WAIT_MS */
  /* The reflector's tuning (tests); NULL: upstream's. path and selector are set here. */
  const nl_reflector_opts_t *reflector;
} nl_api_source_opts_t;

/* What happened so far (tests, the benchmark, logs). */
typedef struct nl_api_source_stats {
  unsigned lists;             /* complete lists delivered */
  unsigned events;            /* watch events handled */
  unsigned bad_pods;          /* objects skipped as undecodable */
  unsigned checkpoint_writes; /* completed writes */
  unsigned checkpoint_failures;
  size_t restored;            /* pods delivered from the checkpoint (0: none) */
  bool checkpoint_read;       /* the start-up read has completed */
} nl_api_source_stats_t;

/* Registers the "api" source with cfg (so sources_ready waits for its first
 * list). Returns 0, or -1 with *err (no node name, a bad reflector option). */
int nl_api_source_new(nl_api_source_t **out, uv_loop_t *loop, nl_kube_client_t *client,
                      nl_pod_config_t *cfg, const nl_api_source_opts_t *opts, nl_err_t **err);
void nl_api_source_start(nl_api_source_t *s);
void nl_api_source_stop(nl_api_source_t *s, void (*done)(void *ctx), void *ctx);
const nl_api_source_stats_t *nl_api_source_stats(const nl_api_source_t *s);

#endif
