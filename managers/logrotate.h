/* Container log rotation, as upstream's container log manager
 * (pkg/kubelet/logs/container_log_manager.go): every period (10 s) each
 * running container's CRI log file is looked at; one over containerLogMaxSize
 * is renamed to <file>.<YYYYMMDD-hhmmss> and the runtime is asked to reopen
 * it (ReopenContainerLog; on failure the rename is undone). Rotated files
 * beyond containerLogMaxFiles (the live one counted) are removed, oldest
 * first, and leftover *.tmp files with them. Upstream also gzips rotated files
 * but the newest; nanolet links no zlib and keeps them as they are.
 *
 * A CRI user: one round at a time, one container at a time, the file work in
 * the thread pool (uv_queue_work). A container's log path is asked for once
 * (ContainerStatus) and kept while it runs: the runtime never changes it, and
 * asking every 10 s was most of an idle node's CRI calls. */
#ifndef NL_LOGROTATE_H
#define NL_LOGROTATE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "cri/runtime.h"
#include "reactor/error.h"
#include "reactor/map.h"

typedef struct nl_logrotate nl_logrotate_t;
typedef void (*nl_logrotate_done_fn)(nl_logrotate_t *r);

typedef enum {
  NL_LR_IDLE,      /* the timer runs */
  NL_LR_LISTING,   /* ListContainers (running) */
  NL_LR_STATUS,    /* ContainerStatus of ids[next]: its log path */
  NL_LR_FILES,     /* the thread pool stats, prunes, renames */
  NL_LR_REOPEN,    /* ReopenContainerLog */
  NL_LR_UNDO,      /* the thread pool renames back */
  NL_LR_STOPPED,
} nl_logrotate_state_t;

struct nl_logrotate {
  uv_loop_t *loop;
  nl_cri_client_t *cri;        /* borrowed */
  int64_t max_size;            /* bytes */
  int max_files;
  uint64_t period_ms;
  nl_logrotate_state_t state;
  bool stopping, work_busy;
  uv_timer_t timer;
  uv_work_t work;
  char **ids;                  /* this round's running containers, owned */
  size_t n, next;
  char *path, *rotated;        /* the current container's log and its new name */
  nl_map_t paths;              /* container id -> its log path, for the last round's */
  nl_err_t *work_err;
  nl_logrotate_done_fn done_cb;
  uint64_t rotations;          /* for tests and logs */
};

/* max_size > 0 bytes, max_files >= 2, period_ms 0: 10 s. */
void nl_logrotate_init(nl_logrotate_t *r, uv_loop_t *loop, nl_cri_client_t *cri, int64_t max_size,
                       int max_files, uint64_t period_ms);
void nl_logrotate_start(nl_logrotate_t *r);
/* Finishes the step in flight, closes the timer, then calls done. */
void nl_logrotate_stop(nl_logrotate_t *r, nl_logrotate_done_fn done);

/* The file work of one container, synchronous (the thread pool runs it; tests
 * call it directly): when path is at least max_size bytes, removes *.tmp
 * leftovers and the oldest rotated files so that max_files - 2 remain, then
 * renames path to path.<now as YYYYMMDD-hhmmss (UTC)> and returns 1 with
 * *rotated (owned); 0 when the file is smaller (or gone); -1 with *err. */
int nl_logrotate_files(const char *path, int64_t max_size, int max_files, time_t now,
                       char **rotated, nl_err_t **err);

#endif
