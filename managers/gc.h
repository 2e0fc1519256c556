/* Container and image garbage collection, as upstream's containerGC
 * (pkg/kubelet/kuberuntime/kuberuntime_gc.go) and realImageGCManager
 * (pkg/kubelet/images/image_gc_manager.go).
 *
 * Containers (every minute, the first round at start): dead containers created
 * more than minAge ago, grouped per (pod uid, container name) and newest first
 * by attempt then creation time; those of deleted pods all go (once every pod
 * source has reported), then each group keeps maxPerPodContainer, then
 * maxContainers is met by keeping an equal share per group and, failing that,
 * by removing the oldest. Sandboxes that are not ready and hold no container go
 * too, but the newest one of a pod that still exists. The log directories
 * (<podLogsDir>/<ns>_<name>_<uid>) of deleted pods go last, and the links to
 * the logs (nl_gc_sweep_log_links) whose log directory is gone.
 *
 * Images (every 5 minutes, the first round at start): each image seen gets a
 * first-detected time and, while a container (running or not) uses it, a
 * last-used time. When the image filesystem is at least imageGCHighThresholdPercent
 * full, unused images that are neither pinned nor the runtime's sandbox image and
 * were first detected at least imageMinimumGCAge ago are removed, least
 * recently used first, until it is back to imageGCLowThresholdPercent; images
 * unused for more than imageMaximumGCAge (when set) go whatever the usage.
 *
 * The eviction manager asks for more (nl_gc_reclaim): all dead containers of
 * terminated pods too, and every unused image.
 *
 * The runtime, and podLogsDir, may be shared with other agents: a pod this
 * agent does not know and that has no directory under its root dir
 * (NL_GC_POD_FOREIGN) is another agent's, and nothing of it is touched, its
 * log directory included (upstream assumes one kubelet per node).
 *
 * A CRI user: one round at a time; directory work on the thread pool. */
#ifndef NL_GC_H
#define NL_GC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "cri/image.h"
#include "cri/runtime.h"
#include "managers/events.h"
#include "reactor/map.h"

/* What the agent knows of a pod (upstream's podStateProvider). */
typedef enum {
  NL_GC_POD_ACTIVE,     /* wanted and not terminated */
  NL_GC_POD_TERMINATED, /* wanted, but its worker terminated it */
  NL_GC_POD_DELETED,    /* no longer wanted (IsPodDeleted) */
  NL_GC_POD_FOREIGN,    /* unknown and without a directory: another agent's */
} nl_gc_pod_state_t;

typedef struct nl_gc_policy {
  int64_t min_age_ns;       /* minimum-container-ttl-duration (0) */
  int max_per_pod_container; /* maximum-dead-containers-per-container (1; <0 no limit) */
  int max_containers;       /* maximum-dead-containers (-1: no limit) */
  int high_percent, low_percent; /* imageGCHigh/LowThresholdPercent (85, 80) */
  int64_t image_min_age_ns; /* imageMinimumGCAge (2m) */
  int64_t image_max_age_ns; /* imageMaximumGCAge (0: none) */
} nl_gc_policy_t;

/* ---- selection (pure) ---- */

typedef struct nl_gc_container {
  const char *id, *uid, *name, *sandbox_id; /* borrowed */
  int64_t created_ns;
  uint32_t attempt;
  bool running;
} nl_gc_container_t;

typedef struct nl_gc_sandbox {
  const char *id, *uid; /* borrowed */
  int64_t created_ns;
  uint32_t attempt;
  bool ready;
} nl_gc_sandbox_t;

/* Pod states for the selection: by uid. */
typedef nl_gc_pod_state_t (*nl_gc_state_fn)(void *ctx, const char *uid);

/* upstream evictContainers: fills out with the indexes into c of the containers
 * to remove (out holds n) and returns how many. deleted_ok: every source has
 * reported (allSourcesReady); evict_terminated: terminated pods count as deleted
 * (the eviction manager's reclaim). Reorders nothing in c. */
size_t nl_gc_select_containers(const nl_gc_policy_t *p, const nl_gc_container_t *c, size_t n,
                               int64_t now_ns, nl_gc_state_fn state, void *ctx, bool deleted_ok,
                               bool evict_terminated, size_t *out);

/* upstream evictSandboxes: indexes into s of the sandboxes to remove (out holds
 * n); a sandbox that a container in c (all of them, live or not, before this
 * round's removals) still names is active. */
size_t nl_gc_select_sandboxes(const nl_gc_sandbox_t *s, size_t n, const nl_gc_container_t *c,
                              size_t nc, nl_gc_state_fn state, void *ctx, bool evict_terminated,
                              size_t *out);

/* One image as the collector keeps it across rounds. */
typedef struct nl_gc_image {
  char *id;               /* owned */
  uint64_t size;
  int64_t first_detected_ns, last_used_ns;
  bool in_use, pinned;    /* this round */
} nl_gc_image_t;

/* upstream handleImageVolumes: the images a container mounts as volumes (its
 * status's mounts with an image) are in use, and used now. Returns how many
 * of imgs it marked. */
size_t nl_gc_mark_image_mounts(nl_gc_image_t *imgs, size_t n,
                               const Runtime__V1__ContainerStatus *status, int64_t now_ns);

/* upstream freeSpace: the indexes (into imgs) to remove to free at least
 * bytes_to_free, least recently used first (ties: first detected first), among
 * images neither in use nor pinned and detected at least min_age ago; with
 * max_age > 0, images unused for longer are chosen whatever bytes_to_free.
 * Returns the count; *freed: the bytes they hold. out holds n. */
size_t nl_gc_select_images(const nl_gc_image_t *imgs, size_t n, int64_t now_ns, int64_t min_age_ns,
                           int64_t max_age_ns, uint64_t bytes_to_free, size_t *out,
                           uint64_t *freed);

/* upstream's amountToFree: 0 below the high threshold, else what brings the
 * usage down to the low threshold. */
uint64_t nl_gc_image_bytes_to_free(uint64_t capacity, uint64_t available, int high_percent,
                                   int low_percent);

/* "<ns>_<name>_<uid>" -> "<uid>" (borrowed from name), or NULL. */
const char *nl_gc_logdir_uid(const char *name);
/* A pod log directory (its name) goes: its pod is deleted (not another
 * agent's: agents on other runtimes share podLogsDir and read their logs) and
 * the runtime has no sandbox of it (s, ns). */
bool nl_gc_logdir_removable(const char *name, const nl_gc_sandbox_t *s, size_t ns,
                            nl_gc_state_fn state, void *ctx);

/* ---- the collector ---- */

typedef struct nl_gc_deps {
  nl_gc_state_fn pod_state; /* has_dir known: see nl_gc_t.pod_dirs */
  bool (*sources_ready)(void *ctx);
  void *ctx;
  nl_event_sink_t events;   /* FreeDiskSpaceFailed, ImageGCFailed (node events) */
  const char *node_name;    /* the events' object */
} nl_gc_deps_t;

typedef struct nl_gc nl_gc_t;
typedef void (*nl_gc_done_fn)(nl_gc_t *gc);
/* A reclaim's end: bytes the image part freed (as the runtime reported the
 * images' sizes). */
typedef void (*nl_gc_reclaim_fn)(void *ctx, uint64_t image_bytes_freed);

typedef enum {
  NL_GC_IDLE,
  NL_GC_SCAN,          /* thread pool: <root>/pods and <podLogsDir> */
  NL_GC_LIST_CONTAINERS,
  NL_GC_LIST_SANDBOXES,
  NL_GC_REMOVE_CONTAINERS,
  NL_GC_STOP_SANDBOX,
  NL_GC_REMOVE_SANDBOX,
  NL_GC_LOGDIRS,       /* thread pool: remove the deleted pods' log directories */
  NL_GC_RUNTIME_CONFIG,/* Status verbose: the sandbox image */
  NL_GC_IMAGE_FS,      /* ImageFsInfo, then statvfs of its mount point */
  NL_GC_LIST_IMAGES,
  NL_GC_IMAGE_USERS,   /* ListContainers: the images in use */
  NL_GC_IMAGE_MOUNTS,  /* ContainerStatus of each: the images mounted as volumes */
  NL_GC_REMOVE_IMAGES,
  NL_GC_STOPPED,
} nl_gc_state_t;

struct nl_gc {
  uv_loop_t *loop;
  nl_cri_client_t *cri; /* borrowed */
  nl_gc_policy_t policy;
  nl_gc_deps_t deps;
  char *pods_dir, *logs_dir; /* owned */
  char *links_dir;           /* owned: the containers' log links (nl_rt_log_links_dir) */
  uint64_t container_period_ms, image_period_ms;
  nl_gc_state_t state;
  bool stopping, work_busy;
  uv_timer_t container_timer, image_timer;
  int timers_open;
  uv_work_t work;
  /* what is due: a periodic round, a reclaim (both parts) */
  bool containers_due, images_due, reclaim_due, reclaiming, reclaim_images;
  nl_gc_reclaim_fn reclaim_cb;
  void *reclaim_ctx;
  /* this round */
  nl_map_t pod_dirs;          /* uid -> 1: <root>/pods/<uid> exists */
  char **logdirs;             /* names under logs_dir */
  size_t n_logdirs;
  Runtime__V1__ListContainersResponse *containers; /* owned, unpacked */
  char **remove_ids;          /* containers, then sandboxes, then images; owned */
  size_t n_remove, next;
  size_t n_sandboxes_start;   /* index in remove_ids where sandboxes begin */
  char *sandbox_image;        /* from the runtime's config, or NULL */
  char *image_mount;
  uint64_t fs_capacity, fs_available;
  uint64_t to_free, freed;
  uint64_t *remove_sizes;
  /* across rounds */
  nl_gc_image_t *images;
  size_t n_images;
  nl_gc_done_fn done_cb;
  /* for tests and the bench */
  uint64_t containers_removed, sandboxes_removed, images_removed, logdirs_removed, links_removed;
  uint64_t last_image_bytes_freed;
  /* the clock (tests): wall ns; NULL the real one */
  int64_t (*now_ns)(void *ctx);
};

/* pods_dir: <root-dir>/pods; logs_dir: podLogsDir. Periods 0: upstream's 1 min
 * and 5 min. */
void nl_gc_init(nl_gc_t *gc, uv_loop_t *loop, nl_cri_client_t *cri, const nl_gc_policy_t *p,
                const nl_gc_deps_t *deps, const char *pods_dir, const char *logs_dir,
                uint64_t container_period_ms, uint64_t image_period_ms);
void nl_gc_start(nl_gc_t *gc);
/* upstream's removal of dead container log symlinks, part of each container
 * round: a link in links_dir whose log is gone with its container's log
 * directory (a log being rotated leaves the directory, and its link). Blocking
 * (the thread pool's); returns how many links went. */
size_t nl_gc_sweep_log_links(const char *links_dir);
/* The eviction manager's node-level reclaim: every dead container of deleted
 * or terminated pods and the per-container limits, then every unused image
 * (images=false: containers only). done is called once, from the loop, never
 * from inside this call (when the collector stops first: as it stops). */
void nl_gc_reclaim(nl_gc_t *gc, bool images, nl_gc_reclaim_fn done, void *ctx);
/* Ends the step in flight, closes the timers, then calls done. */
void nl_gc_stop(nl_gc_t *gc, nl_gc_done_fn done);

#endif
