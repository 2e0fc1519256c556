/* The static-pod file source (upstream pkg/kubelet/config/file*.go): watches
 * staticPodPath, a directory of manifests or one manifest file, and reports the
 * full set of pods it defines, like upstream's kubetypes.SET, every time that set
 * changes. The merger (sources/config.h) turns the sets into ADD/UPDATE/... .
 *
 * How changes are seen:
 * - An inotify watch (its descriptor polled on the loop) on the directory, or
 *   on the parent directory when the path is one file or does not exist yet (so
 *   that an atomic replace, write-to-temp-then-rename, and a path appearing
 *   later are both seen at once). A scan starts a few ms after the first
 *   event, so that a burst of writes is usually read once. A file deleted (or
 *   moved away) and written again before the scan is reported gone and back,
 *   as upstream's event-by-event handling does (its pod is removed and added:
 *   a static pod restarts); an atomic replace is not a deletion.
 * - A full re-read of every file every check_frequency_ms (fileCheckFrequency,
 *   default 20 s) as a safety net; every 1 s while no watch can be set up (the
 *   path and its parent do not exist), as upstream retries its watch.
 * - Files and directory listings are read on the libuv thread pool
 *   (uv_queue_work); decoding and everything else runs on the loop.
 *
 * Rules, as upstream: names starting with "." are ignored (editors' and tools'
 * temporary files); subdirectories are not recursed into; symlinks are followed;
 * every other directory entry is tried as a manifest. A file that cannot be read
 * or decoded (including a half-written one) is logged once per change of its
 * content with its path and the reason, and skipped: a pod that file defined
 * before stays in the set (the old pod keeps running), other files are not
 * touched. A file larger than NL_FILE_SOURCE_MAX_BYTES is rejected unread.
 */
#ifndef NL_SOURCES_FILE_H
#define NL_SOURCES_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "agent/model/pod.h"
#include "reactor/error.h"
#include "reactor/map.h"

/* Upstream has no cap; an edge node has little memory, and the API server itself
 * refuses objects over about 1.5 MiB (etcd's limit), so no real pod is larger. */
#define NL_FILE_SOURCE_MAX_BYTES (2 * 1024 * 1024)
#define NL_FILE_SOURCE_DEFAULT_CHECK_MS 20000

typedef struct nl_file_source nl_file_source_t;

/* A full snapshot of the pods defined by the path, sorted by file name. The
 * callee takes ownership of every pod and of the array (free each with
 * nl_pod_free, the array with free; nl_pod_config_set does both). n may be 0:
 * the first snapshot is always sent, so the source can be marked as seen. */
typedef void (*nl_file_source_cb)(nl_pod_t **pods, size_t n, void *ctx);
typedef void (*nl_file_source_done_cb)(nl_file_source_t *src);

struct nl_file_source {
  /* configuration (owned copies) */
  uv_loop_t *loop;
  char *path; /* trailing '/' trimmed, as upstream does */
  char *node_name;
  uint64_t check_frequency_ms;
  nl_file_source_cb cb;
  void *ctx;

  /* Optional, for tests and metrics: called on the loop after every scan is
   * applied (after cb, if cb was called). */
  void (*on_scan)(nl_file_source_t *src, void *ctx);

  /* handles (initialised by _start, closed by _stop) */
  uv_poll_t watch;   /* readable inotify_fd */
  int inotify_fd;    /* -1 before _start */
  int watch_wd;      /* the inotify watch of watch_dir */
  uv_timer_t timer;  /* the periodic re-read (or the retry while unwatched) */
  uv_timer_t settle; /* delays an event-driven scan by a few ms (file.c) */
  char *watch_dir;   /* the directory being watched, NULL when none */
  bool watch_is_dir; /* watching path itself (vs its parent) */
  dev_t watch_dev;   /* the directory inode watched: a directory renamed over */
  ino_t watch_ino;   /* the path (or a swapped symlink) needs a new watch */

  /* scan state */
  struct nl_file_scan *job; /* the scan in flight, NULL when idle */
  bool dirty;               /* something changed while a scan was in flight */
  bool force_all;           /* the next scan re-reads every file */
  nl_map_t force;           /* names from fs events: re-read regardless of stat */
  nl_map_t gone;            /* names deleted or moved away since the last scan */
  nl_map_t files;           /* full path -> struct nl_file_entry */
  bool sent_once;

  /* lifecycle */
  enum { NL_FILE_SOURCE_INIT, NL_FILE_SOURCE_RUNNING, NL_FILE_SOURCE_STOPPING,
         NL_FILE_SOURCE_STOPPED } state;
  int pending; /* close callbacks and scans still to come back */
  nl_file_source_done_cb done_cb;

  /* counters (read-only for users) */
  uint64_t scans;      /* scans applied */
  uint64_t errors;     /* bad-file errors reported (once per change) */
  uint64_t snapshots;  /* times cb was called */
};

/* Fills src. path is a directory or a file (it need not exist yet);
 * check_frequency_ms 0 means the default (20 s); node_name is used for the
 * static pods' names and UIDs. Returns 0, or -1 with *err set (empty path or
 * node name). Nothing runs until nl_file_source_start. */
int nl_file_source_init(nl_file_source_t *src, uv_loop_t *loop, const char *path,
                        uint64_t check_frequency_ms, const char *node_name,
                        nl_file_source_cb cb, void *ctx, nl_err_t **err);

/* Starts the handles and the first scan. Returns 0; -1 with *err if called twice. */
int nl_file_source_start(nl_file_source_t *src, nl_err_t **err);

/* Closes the handles and waits for a scan in flight; done_cb (may be NULL) runs
 * once all of them are back and every owned allocation is freed; src may then be
 * freed. A source that was never started is finished at once (done_cb is called
 * before this returns). cb is never called after this. */
void nl_file_source_stop(nl_file_source_t *src, nl_file_source_done_cb done_cb);

#endif
