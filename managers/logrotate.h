/* Container log rotation, as upstream's container log manager
 * (pkg/kubelet/logs/container_log_manager.go): every period (10 s) each
 * running container's CRI log file is looked at; one over containerLogMaxSize
 * is renamed to <file>.<YYYYMMDD-hhmmss> and the runtime is asked to reopen
 * it (ReopenContainerLog; on failure the rename is undone). Rotated files
 * beyond containerLogMaxFiles (the live one counted) are removed, oldest
 * first, and leftover *.tmp files with them. Upstream also gzips rotated files
 * but the newest; nanolet links no zlib and keeps them as they are.
 *
 * A CRI user: one round at a time. A round lists the running containers (the
 * brief decoding: ids only are read), asks each new one's log path once
 * (ContainerStatus; the runtime never changes it, and asking every 10 s was
 * most of an idle node's CRI calls), does the file work of all of them in one
 * thread-pool item (uv_queue_work), then asks the runtime to reopen each file
 * it renamed, one at a time. */
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

/* A running container of the round. */
typedef struct nl_logrotate_item {
  char *id, *path;             /* owned; path NULL while unknown */
  char *rotated;               /* owned: its new name when the work renamed it */
  nl_err_t *err;               /* the work's */
} nl_logrotate_item_t;
typedef void (*nl_logrotate_done_fn)(nl_logrotate_t *r);

typedef enum {
  NL_LR_IDLE,      /* the timer runs */
  NL_LR_LISTING,   /* ListContainers (running) */
  NL_LR_STATUS,    /* ContainerStatus of items[next], whose log path is unknown */
  NL_LR_FILES,     /* the thread pool stats, prunes, renames every item's file */
  NL_LR_REOPEN,    /* ReopenContainerLog of items[next], whose file was renamed */
  NL_LR_UNDO,      /* the thread pool renames items[next]'s file back */
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
  nl_logrotate_item_t *items;  /* this round's running containers, owned */
  size_t n, next;
  nl_map_t paths;              /* container id -> its log path, for the last round's */
  nl_logrotate_done_fn done_cb;
  uint64_t rotations;          /* for tests and logs */
  int rounds;                  /* rounds ended, for tests */
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
