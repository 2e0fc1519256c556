/* The static-pod URL source (upstream pkg/kubelet/config/http.go): GETs
 * staticPodURL with the staticPodURLHeader headers every httpCheckFrequency
 * (default 20 s; the first fetch at start) and reports the pods it serves as a
 * full set, like the file source, under the source name "http".
 *
 * Rules, as upstream:
 * - The body is one Pod or a v1 PodList/List, YAML or JSON. Pods are named and
 *   uid'd as static pods ("<name>-<node>", uid from the pod and "url:<url>"),
 *   with the config.source annotation "http".
 * - A body identical to the last one is not decoded again and sends nothing.
 * - An empty body (200) sends the empty set: the URL's pods go away.
 * - A failed fetch (connection error, timeout of 10 s, a status other than
 *   200, a body over 10 MiB) or a body that does not decode or validate sends
 *   nothing: the last set stays and its pods keep running. Failures are logged
 *   three times, then once more saying verbose logging stops, then not until a
 *   fetch succeeds again.
 * - Until a fetch succeeds the source has sent nothing, so the merger does not
 *   count it as seen.
 *
 * Ownership: the source copies its configuration; stop closes its timer and
 * cancels a fetch in flight before done runs. */
#ifndef NL_SOURCES_URL_H
#define NL_SOURCES_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent/model/pod.h"
#include "reactor/error.h"
#include "reactor/http_client.h"

#define NL_URL_SOURCE_DEFAULT_CHECK_MS 20000
#define NL_URL_SOURCE_TIMEOUT_MS 10000          /* upstream's http.Client Timeout */
#define NL_URL_SOURCE_MAX_BYTES (10 * 1024 * 1024) /* upstream maxConfigLength */

typedef struct nl_url_source nl_url_source_t;
/* A full set of pods; the callee takes the pods and the array (as the file
 * source's callback). */
typedef void (*nl_url_source_cb)(nl_pod_t **pods, size_t n, void *ctx);
typedef void (*nl_url_source_done_cb)(nl_url_source_t *src);

struct nl_url_source {
  uv_loop_t *loop;
  char *url, *node_name;  /* owned */
  nl_http_header_t *headers; /* owned copies */
  size_t n_headers;
  uint64_t check_ms;
  nl_url_source_cb cb;
  void *ctx;
  uv_timer_t timer;
  nl_http_call_t *call;   /* the fetch in flight, or NULL */
  char *data;             /* the last body decoded (owned), NULL before */
  size_t data_len;
  unsigned failure_logs;
  enum { NL_URL_SOURCE_INIT, NL_URL_SOURCE_RUNNING, NL_URL_SOURCE_STOPPING,
         NL_URL_SOURCE_STOPPED } state;
  int pending;            /* the timer's close and a fetch still to come back */
  nl_url_source_done_cb done_cb;
  /* counters */
  uint64_t fetches, errors, snapshots;
};

/* Fills src; headers are copied. check_ms 0: 20 s. Returns 0, or -1 with *err
 * for a URL that is not http(s) or an empty node name. */
int nl_url_source_init(nl_url_source_t *src, uv_loop_t *loop, const char *url,
                       const nl_http_header_t *headers, size_t n_headers, uint64_t check_ms,
                       const char *node_name, nl_url_source_cb cb, void *ctx, nl_err_t **err);
void nl_url_source_start(nl_url_source_t *src);
/* Cancels a fetch in flight, closes the timer; done (may be NULL) runs when all
 * is back and freed. cb is never called after this. */
void nl_url_source_stop(nl_url_source_t *src, nl_url_source_done_cb done);

/* The pods of one body: decoded as one Pod or a list, defaulted, named as static
 * pods of url and validated. Returns 0 with *pods (an array of *n new pods), or
 * -1 with *err; no pods are returned when any of them is bad. */
int nl_url_source_parse(const char *data, size_t len, const char *url, const char *node_name,
                        nl_pod_t ***pods, size_t *n, nl_err_t **err);

#endif
