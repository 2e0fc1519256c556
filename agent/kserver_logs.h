/* GET /containerLogs/{namespace}/{pod}/{container} on the kubelet server, as
 * upstream's getContainerLogs: the PodLogOptions of the query (follow,
 * tailLines, limitBytes, sinceSeconds, sinceTime, timestamps, previous),
 * the container's CRI log file read on the loop (uv_fs) and streamed with
 * back-pressure; with follow, new lines as they come, across a rotation of the
 * file, until the container stops or the client goes. */
#ifndef NL_KSERVER_LOGS_H
#define NL_KSERVER_LOGS_H

#include <stdbool.h>
#include <uv.h>

#include "agent/kserver.h"

typedef struct nl_cri_client nl_cri_client_t;

/* Finds the CRI id of a pod's container: 0 with *id (owned), or an HTTP
 * status with *msg (owned). */
typedef int (*nl_kserver_logs_lookup_fn)(void *ctx, const char *ns, const char *pod,
                                         const char *container, bool previous, char **id,
                                         char **msg);

typedef struct nl_kserver_logs {
  uv_loop_t *loop;
  nl_cri_client_t *cri; /* borrowed */
  nl_kserver_logs_lookup_fn lookup;
  void *lookup_ctx;
  uint64_t poll_ms;     /* follow: how often the file is looked at; 0: 250 ms */
  uint64_t state_ms;    /* follow: how often the container's state; 0: 5 s */
} nl_kserver_logs_t;

/* The route's handler; ctx is an nl_kserver_logs_t that outlives the server. */
void nl_kserver_logs_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                             nl_http_resp_t *resp);

#endif
