/* GET /logs/ on the kubelet server, as upstream's system log handler: the
 * node's log directory (/var/log) file by file (a directory as a list of
 * links), and, with enableSystemLogQuery, the node log query
 * (`?query=kubelet&tailLines=3`, agent/nodelog.h) over the services' log
 * files. Files are read in the thread pool, a chunk at a time, and streamed
 * with back-pressure; nothing outside the log directory is ever opened. */
#ifndef NL_KSERVER_NODELOG_H
#define NL_KSERVER_NODELOG_H

#include <stdbool.h>
#include <uv.h>

#include "agent/kserver.h"

typedef struct nl_kserver_nodelog {
  uv_loop_t *loop;
  const char *log_dir; /* NULL: /var/log */
  bool query;          /* enableSystemLogQuery: serve ?query= */
} nl_kserver_nodelog_t;

/* The route's handler; ctx is an nl_kserver_nodelog_t that outlives the
 * server. */
void nl_kserver_nodelog_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                                nl_http_resp_t *resp);

#endif
