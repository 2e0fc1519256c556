/* The collector's machine: one round at a time, container part then image
 * part, each CRI call's completion recording its result and stepping on. */
#include "managers/gc.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "managers/runtime_types.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define CONTAINER_PERIOD_MS 60000 /* upstream ContainerGCPeriod */
#define IMAGE_PERIOD_MS 300000    /* upstream ImageGCPeriod */

static void step(nl_gc_t *gc);

static int64_t now_ns(nl_gc_t *gc) {
  if (gc->now_ns) return gc->now_ns(gc->deps.ctx);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The agent's word, with pods it does not know and that have no directory
 * under its root dir taken as another agent's. */
static nl_gc_pod_state_t pod_state(void *ctx, const char *uid) {
  nl_gc_t *gc = ctx;
  nl_gc_pod_state_t st = gc->deps.pod_state(gc->deps.ctx, uid);
  if (st == NL_GC_POD_DELETED && !nl_map_has(&gc->pod_dirs, uid)) return NL_GC_POD_FOREIGN;
  return st;
}

static void strv_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

static void free_round(nl_gc_t *gc) {
  nl_map_free(&gc->pod_dirs, NULL);
  nl_map_init(&gc->pod_dirs);
  strv_free(gc->logdirs, gc->n_logdirs);
  gc->logdirs = NULL;
  gc->n_logdirs = 0;
  if (gc->containers) protobuf_c_message_free_unpacked(&gc->containers->base, NULL);
  gc->containers = NULL;
  strv_free(gc->remove_ids, gc->n_remove);
  gc->remove_ids = NULL;
  free(gc->remove_sizes);
  gc->remove_sizes = NULL;
  gc->n_remove = gc->next = gc->n_sandboxes_start = 0;
  free(gc->sandbox_image);
  free(gc->image_mount);
  gc->sandbox_image = gc->image_mount = NULL;
  gc->fs_capacity = gc->fs_available = gc->to_free = gc->freed = 0;
}

static void timer_closed(uv_handle_t *h) {
  nl_gc_t *gc = h->data;
  if (--gc->timers_open > 0) return;
  free_round(gc);
  nl_map_free(&gc->pod_dirs, NULL);
  for (size_t i = 0; i < gc->n_images; i++) free(gc->images[i].id);
  free(gc->images);
  gc->images = NULL;
  gc->n_images = 0;
  free(gc->pods_dir);
  free(gc->logs_dir);
  free(gc->links_dir);
  gc->pods_dir = gc->logs_dir = gc->links_dir = NULL;
  gc->state = NL_GC_STOPPED;
  /* A reclaim cut short still ends for its caller, which may be waiting to stop. */
  nl_gc_reclaim_fn cb = gc->reclaim_cb;
  gc->reclaim_cb = NULL;
  if (cb) cb(gc->reclaim_ctx, 0);
  if (gc->done_cb) gc->done_cb(gc);
}

static void close_timers(nl_gc_t *gc) {
  gc->timers_open = 2;
  uv_close((uv_handle_t *)&gc->container_timer, timer_closed);
  uv_close((uv_handle_t *)&gc->image_timer, timer_closed);
}

/* Called when a step completes: stops if asked, else goes on. */
static bool go_on(nl_gc_t *gc) {
  if (!gc->stopping) return true;
  close_timers(gc);
  return false;
}

static void set_state(nl_gc_t *gc, nl_gc_state_t st) {
  nl_vlog(4, "gc: state %d -> %d", gc->state, st);
  gc->state = st;
}

/* A round's end: the reclaim's caller hears of it; what else is due runs. */
static void round_done(nl_gc_t *gc) {
  if (gc->reclaiming) {
    gc->reclaiming = false;
    nl_gc_reclaim_fn cb = gc->reclaim_cb;
    gc->reclaim_cb = NULL;
    uint64_t freed = gc->freed;
    free_round(gc);
    set_state(gc, NL_GC_IDLE);
    if (cb) cb(gc->reclaim_ctx, freed);
    if (gc->stopping || gc->state != NL_GC_IDLE) return;
  }
  free_round(gc);
  set_state(gc, NL_GC_IDLE);
  step(gc);
}

/* ---- the container part ---- */

typedef struct scan_result {
  nl_map_t dirs;
  char **logdirs;
  size_t n_logdirs;
} scan_result_t;

#define LOGDIR_MIN_AGE_S 60

static void scan_work(uv_work_t *w) {
  nl_gc_t *gc = container_of(w, nl_gc_t, work);
  DIR *d = opendir(gc->pods_dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') nl_map_put(&gc->pod_dirs, e->d_name, (void *)1);
  if (d) closedir(d);
  /* A pod's log directory is made before its sandbox: a young one may belong
   * to a pod still starting (of this agent, or of another agent sharing the
   * runtime), which the sandbox check below cannot see yet. */
  time_t young = time(NULL) - LOGDIR_MIN_AGE_S;
  d = opendir(gc->logs_dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' || !nl_gc_logdir_uid(e->d_name)) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_mtime > young) continue;
    gc->logdirs = nl_xrealloc(gc->logdirs, (gc->n_logdirs + 1) * sizeof *gc->logdirs);
    gc->logdirs[gc->n_logdirs++] = nl_xstrdup(e->d_name);
  }
  if (d) closedir(d);
}

static int rm_tree(const char *path) {
  DIR *d = opendir(path);
  if (!d) return errno == ENOTDIR ? unlink(path) : errno == ENOENT ? 0 : -1;
  int rc = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *sub = nl_xasprintf("%s/%s", path, e->d_name);
    if (e->d_type == DT_DIR ? rm_tree(sub) : unlink(sub)) rc = -1;
    free(sub);
  }
  closedir(d);
  return rmdir(path) ? -1 : rc;
}

size_t nl_gc_sweep_log_links(const char *links_dir) {
  size_t removed = 0;
  DIR *d = opendir(links_dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".log") != 0) continue;
    char target[4096];
    ssize_t t = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1);
    struct stat st;
    if (t <= 0 || fstatat(dirfd(d), e->d_name, &st, 0) == 0 || errno != ENOENT) continue;
    target[t] = 0;
    char *slash = strrchr(target, '/');
    if (slash && slash != target) *slash = 0;
    if (stat(target, &st) == 0 || errno != ENOENT) continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
  }
  if (d) closedir(d);
  return removed;
}

/* remove_ids[next..] are log directory names here. */
static void logdirs_work(uv_work_t *w) {
  nl_gc_t *gc = container_of(w, nl_gc_t, work);
  for (size_t i = 0; i < gc->n_logdirs; i++) {
    if (!gc->logdirs[i][0]) continue; /* kept */
    char *p = nl_xasprintf("%s/%s", gc->logs_dir, gc->logdirs[i]);
    if (rm_tree(p) == 0) gc->logdirs_removed++;
    else nl_warn("container GC: remove pod log directory %s: %s", p, strerror(errno));
    free(p);
  }
  gc->links_removed += nl_gc_sweep_log_links(gc->links_dir);
}

static void work_done(uv_work_t *w, int status) {
  (void)status;
  nl_gc_t *gc = container_of(w, nl_gc_t, work);
  gc->work_busy = false;
  if (!go_on(gc)) return;
  if (gc->state == NL_GC_SCAN) {
    set_state(gc, NL_GC_LIST_CONTAINERS);
  } else if (gc->state == NL_GC_LOGDIRS) {
    /* the container part is over */
    if (gc->reclaiming && gc->reclaim_images) {
      free_round(gc);
      set_state(gc, NL_GC_RUNTIME_CONFIG);
    } else {
      round_done(gc);
      return;
    }
  } else {
    assert(gc->state == NL_GC_IMAGE_FS);
    set_state(gc, NL_GC_LIST_IMAGES);
  }
  step(gc);
}

static void queue(nl_gc_t *gc, uv_work_cb fn) {
  gc->work_busy = true;
  int e = uv_queue_work(gc->loop, &gc->work, fn, work_done);
  assert(e == 0); /* only fails for a NULL callback */
  (void)e;
}

static void on_containers(const nl_grpc_status_t *st, Runtime__V1__ListContainersResponse *resp,
                          void *ctx) {
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  if (st->code != NL_GRPC_OK) {
    nl_warn("container GC: list containers: %s", st->message);
    round_done(gc);
    return;
  }
  /* Kept whole for the sandbox selection and the image part (a copy, as the
   * response is only borrowed). */
  size_t len = protobuf_c_message_get_packed_size(&resp->base);
  uint8_t *buf = nl_xmalloc(len + 1);
  protobuf_c_message_pack(&resp->base, buf);
  gc->containers = runtime__v1__list_containers_response__unpack(NULL, len, buf);
  free(buf);
  assert(gc->containers);
  gc->next = 0;
  set_state(gc, gc->state == NL_GC_IMAGE_USERS ? NL_GC_IMAGE_MOUNTS : NL_GC_LIST_SANDBOXES);
  step(gc);
}

/* One ContainerStatus per container, as upstream's detectImages: the
 * container list does not say which images a container mounts. */
static void on_container_status(const nl_grpc_status_t *st,
                                Runtime__V1__ContainerStatusResponse *resp, void *ctx) {
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  if (st->code == NL_GRPC_OK) {
    nl_gc_mark_image_mounts(gc->images, gc->n_images, resp->status, now_ns(gc));
  } else if (st->code != NL_GRPC_NOT_FOUND) { /* upstream stops the round */
    nl_warn("image GC: container status of %s: %s", gc->containers->containers[gc->next]->id,
            st->message);
    round_done(gc);
    return;
  }
  gc->next++;
  step(gc);
}

static void image_mounts(nl_gc_t *gc) {
  if (gc->next >= gc->containers->n_containers) {
    gc->next = 0;
    set_state(gc, NL_GC_REMOVE_IMAGES);
    step(gc);
    return;
  }
  Runtime__V1__ContainerStatusRequest q = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
  q.container_id = gc->containers->containers[gc->next]->id;
  nl_cri_container_status(gc->cri, &q, on_container_status, gc);
}

/* The runtime's containers that this agent made (they carry the pod uid). */
static size_t gc_containers(nl_gc_t *gc, nl_gc_container_t *out) {
  size_t n = 0;
  for (size_t i = 0; gc->containers && i < gc->containers->n_containers; i++) {
    const Runtime__V1__Container *c = gc->containers->containers[i];
    const char *uid = NL_RT_LABEL(c, NL_LABEL_POD_UID);
    if (!uid || !c->metadata) continue;
    out[n++] = (nl_gc_container_t){c->id, uid, c->metadata->name, c->pod_sandbox_id, c->created_at,
                                   c->metadata->attempt,
                                   c->state == RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING};
  }
  return n;
}

static void add_remove(nl_gc_t *gc, const char *id, uint64_t size) {
  gc->remove_ids = nl_xrealloc(gc->remove_ids, (gc->n_remove + 1) * sizeof *gc->remove_ids);
  gc->remove_sizes = nl_xrealloc(gc->remove_sizes, (gc->n_remove + 1) * sizeof *gc->remove_sizes);
  gc->remove_sizes[gc->n_remove] = size;
  gc->remove_ids[gc->n_remove++] = nl_xstrdup(id);
}

static bool sources_ready(nl_gc_t *gc) {
  return !gc->deps.sources_ready || gc->deps.sources_ready(gc->deps.ctx);
}

static void on_sandboxes(const nl_grpc_status_t *st, Runtime__V1__ListPodSandboxResponse *resp,
                         void *ctx) {
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  if (st->code != NL_GRPC_OK) {
    nl_warn("container GC: list pod sandboxes: %s", st->message);
    round_done(gc);
    return;
  }
  size_t nc = gc->containers ? gc->containers->n_containers : 0;
  nl_gc_container_t *c = nl_xcalloc(nc + 1, sizeof *c);
  size_t *idx = nl_xcalloc(nc + resp->n_items + 1, sizeof *idx);
  nc = gc_containers(gc, c);
  bool ready = sources_ready(gc);
  size_t n = nl_gc_select_containers(&gc->policy, c, nc, now_ns(gc), pod_state, gc, ready,
                                     gc->reclaiming, idx);
  for (size_t i = 0; i < n; i++) add_remove(gc, c[idx[i]].id, 0);
  gc->n_sandboxes_start = gc->n_remove;
  nl_gc_sandbox_t *s = nl_xcalloc(resp->n_items + 1, sizeof *s);
  size_t ns = 0;
  for (size_t i = 0; i < resp->n_items; i++) {
    const Runtime__V1__PodSandbox *sb = resp->items[i];
    if (!sb->metadata || !sb->metadata->uid || !*sb->metadata->uid) continue;
    s[ns++] = (nl_gc_sandbox_t){sb->id, sb->metadata->uid, sb->created_at, sb->metadata->attempt,
                                sb->state == RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY};
  }
  n = nl_gc_select_sandboxes(s, ns, c, nc, pod_state, gc, gc->reclaiming, idx);
  for (size_t i = 0; i < n; i++) add_remove(gc, s[idx[i]].id, 0);
  /* Log directories of deleted pods, once every source has reported. */
  for (size_t i = 0; i < gc->n_logdirs; i++)
    if (!ready || !nl_gc_logdir_removable(gc->logdirs[i], s, ns, pod_state, gc)) gc->logdirs[i][0] = 0;
  free(s);
  free(idx);
  free(c);
  if (gc->n_remove)
    nl_vlog(2, "container GC: removing %zu containers and %zu sandboxes", gc->n_sandboxes_start,
            gc->n_remove - gc->n_sandboxes_start);
  gc->next = 0;
  set_state(gc, gc->n_sandboxes_start ? NL_GC_REMOVE_CONTAINERS
                : gc->n_remove       ? NL_GC_STOP_SANDBOX
                                     : NL_GC_LOGDIRS);
  step(gc);
}

static void next_removal(nl_gc_t *gc) {
  gc->next++;
  if (gc->next < gc->n_sandboxes_start) set_state(gc, NL_GC_REMOVE_CONTAINERS);
  else if (gc->next < gc->n_remove) set_state(gc, NL_GC_STOP_SANDBOX);
  else set_state(gc, NL_GC_LOGDIRS);
  step(gc);
}

static void on_container_removed(const nl_grpc_status_t *st,
                                 Runtime__V1__RemoveContainerResponse *resp, void *ctx) {
  (void)resp;
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  if (st->code == NL_GRPC_OK) gc->containers_removed++;
  else nl_warn("container GC: remove container %s: %s", gc->remove_ids[gc->next], st->message);
  next_removal(gc);
}

static void on_sandbox_stopped(const nl_grpc_status_t *st, Runtime__V1__StopPodSandboxResponse *resp,
                               void *ctx) {
  (void)resp;
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  if (st->code != NL_GRPC_OK) {
    nl_warn("container GC: stop sandbox %s before removing: %s", gc->remove_ids[gc->next],
            st->message);
    next_removal(gc);
    return;
  }
  set_state(gc, NL_GC_REMOVE_SANDBOX);
  step(gc);
}

static void on_sandbox_removed(const nl_grpc_status_t *st,
                               Runtime__V1__RemovePodSandboxResponse *resp, void *ctx) {
  (void)resp;
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  if (st->code == NL_GRPC_OK) gc->sandboxes_removed++;
  else nl_warn("container GC: remove sandbox %s: %s", gc->remove_ids[gc->next], st->message);
  next_removal(gc);
}

/* ---- the image part ---- */

static void on_runtime_status(const nl_grpc_status_t *st, Runtime__V1__StatusResponse *resp,
                              void *ctx) {
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  /* containerd 1.6 does not mark its sandbox image pinned (1.7 does): the
   * sandbox image of its config is kept as upstream kept it before `pinned`. */
  for (size_t i = 0; st->code == NL_GRPC_OK && i < resp->n_info; i++) {
    if (strcmp(resp->info[i]->key, "config") != 0) continue;
    json_t *cfg = json_loads(resp->info[i]->value, 0, NULL);
    const char *img = json_string_value(json_object_get(cfg, "sandboxImage"));
    if (img && *img) gc->sandbox_image = nl_xstrdup(img);
    json_decref(cfg);
  }
  set_state(gc, NL_GC_IMAGE_FS);
  step(gc);
}

static void statvfs_work(uv_work_t *w) {
  nl_gc_t *gc = container_of(w, nl_gc_t, work);
  struct statvfs v;
  if (!gc->image_mount || statvfs(gc->image_mount, &v) != 0) return;
  gc->fs_capacity = (uint64_t)v.f_blocks * v.f_frsize;
  gc->fs_available = (uint64_t)v.f_bavail * v.f_frsize;
}

static void on_image_fs(const nl_grpc_status_t *st, Runtime__V1__ImageFsInfoResponse *resp,
                        void *ctx) {
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  if (st->code != NL_GRPC_OK || !resp->n_image_filesystems ||
      !resp->image_filesystems[0]->fs_id || !*resp->image_filesystems[0]->fs_id->mountpoint) {
    nl_warn("image GC: the runtime did not say where its images are: %s",
            st->code != NL_GRPC_OK ? st->message : "no image filesystem");
    round_done(gc);
    return;
  }
  gc->image_mount = nl_xstrdup(resp->image_filesystems[0]->fs_id->mountpoint);
  queue(gc, statvfs_work);
}

static nl_gc_image_t *image_record(nl_gc_t *gc, const char *id) {
  for (size_t i = 0; i < gc->n_images; i++)
    if (!strcmp(gc->images[i].id, id)) return &gc->images[i];
  return NULL;
}

static bool has_tag(const Runtime__V1__Image *im, const char *name) {
  for (size_t i = 0; name && i < im->n_repo_tags; i++)
    if (!strcmp(im->repo_tags[i], name)) return true;
  return false;
}

/* upstream detectImages: records follow the runtime's list; an image in use
 * now was last used now. */
static void detect_images(nl_gc_t *gc, const Runtime__V1__ListImagesResponse *resp) {
  int64_t now = now_ns(gc);
  nl_gc_image_t *next = nl_xcalloc(resp->n_images + 1, sizeof *next);
  for (size_t i = 0; i < resp->n_images; i++) {
    const Runtime__V1__Image *im = resp->images[i];
    nl_gc_image_t *old = image_record(gc, im->id);
    next[i] = old ? *old : (nl_gc_image_t){.first_detected_ns = now};
    next[i].id = nl_xstrdup(im->id);
    next[i].size = im->size;
    next[i].pinned = im->pinned || has_tag(im, gc->sandbox_image);
    next[i].in_use = false;
  }
  for (size_t i = 0; i < gc->n_images; i++) free(gc->images[i].id);
  free(gc->images);
  gc->images = next;
  gc->n_images = resp->n_images;
}

static void on_images(const nl_grpc_status_t *st, Runtime__V1__ListImagesResponse *resp, void *ctx) {
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  if (st->code != NL_GRPC_OK) {
    nl_warn("image GC: list images: %s", st->message);
    round_done(gc);
    return;
  }
  detect_images(gc, resp);
  set_state(gc, NL_GC_IMAGE_USERS);
  step(gc);
}

static void select_images(nl_gc_t *gc) {
  int64_t now = now_ns(gc);
  for (size_t i = 0; gc->containers && i < gc->containers->n_containers; i++) {
    const Runtime__V1__Container *c = gc->containers->containers[i];
    nl_gc_image_t *im = image_record(gc, c->image_ref);
    if (!im && c->image) im = image_record(gc, c->image->image);
    if (im) im->in_use = true, im->last_used_ns = now;
  }
  gc->to_free = gc->reclaiming ? UINT64_MAX
                               : nl_gc_image_bytes_to_free(gc->fs_capacity, gc->fs_available,
                                                           gc->policy.high_percent,
                                                           gc->policy.low_percent);
  if (gc->to_free && !gc->reclaiming)
    nl_info("image GC: image filesystem %s is %llu%% full (high threshold %d%%): freeing %llu bytes",
            gc->image_mount,
            (unsigned long long)(100 - gc->fs_available * 100 / (gc->fs_capacity ? gc->fs_capacity : 1)),
            gc->policy.high_percent, (unsigned long long)gc->to_free);
  size_t *idx = nl_xcalloc(gc->n_images + 1, sizeof *idx);
  uint64_t eligible;
  size_t n = nl_gc_select_images(gc->images, gc->n_images, now, gc->policy.image_min_age_ns,
                                 gc->policy.image_max_age_ns, gc->to_free, idx, &eligible);
  for (size_t i = 0; i < n; i++) add_remove(gc, gc->images[idx[i]].id, gc->images[idx[i]].size);
  free(idx);
  if (gc->to_free && !gc->reclaiming && eligible < gc->to_free) {
    nl_event_ref_t ref = nl_event_node_ref(gc->deps.node_name ? gc->deps.node_name : "");
    nl_event_record(&gc->deps.events, &ref, NL_EVENT_WARNING, "FreeDiskSpaceFailed",
                    "Failed to garbage collect required amount of images. Attempted to free %llu "
                    "bytes, but only found %llu bytes eligible to free.",
                    (unsigned long long)gc->to_free, (unsigned long long)eligible);
  }
  gc->next = 0;
}

static void next_image(nl_gc_t *gc) {
  gc->next++;
  if (gc->next < gc->n_remove) {
    step(gc);
    return;
  }
  gc->last_image_bytes_freed = gc->freed;
  if (gc->freed) nl_info("image GC: removed images of %llu bytes", (unsigned long long)gc->freed);
  round_done(gc);
}

static void on_image_removed(const nl_grpc_status_t *st, Runtime__V1__RemoveImageResponse *resp,
                             void *ctx) {
  (void)resp;
  nl_gc_t *gc = ctx;
  if (!go_on(gc)) return;
  if (st->code == NL_GRPC_OK) {
    gc->images_removed++;
    gc->freed += gc->remove_sizes[gc->next];
    nl_vlog(2, "image GC: removed image %s", gc->remove_ids[gc->next]);
  } else {
    nl_warn("image GC: remove image %s: %s", gc->remove_ids[gc->next], st->message);
  }
  next_image(gc);
}

/* ---- the machine ---- */

static void list_containers(nl_gc_t *gc) {
  Runtime__V1__ListContainersRequest q = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
  nl_cri_list_containers(gc->cri, &q, on_containers, gc);
}

static void step(nl_gc_t *gc) {
  assert(gc->state != NL_GC_STOPPED && !gc->stopping);
  switch (gc->state) {
  case NL_GC_IDLE:
    if (gc->reclaim_due) {
      gc->reclaim_due = gc->containers_due = false; /* it has a container round */
      gc->reclaiming = true;
      set_state(gc, NL_GC_SCAN);
    } else if (gc->containers_due) {
      gc->containers_due = false;
      set_state(gc, NL_GC_SCAN);
    } else if (gc->images_due) {
      gc->images_due = false;
      set_state(gc, NL_GC_RUNTIME_CONFIG);
    } else {
      return;
    }
    step(gc);
    return;
  case NL_GC_SCAN:
    queue(gc, scan_work);
    return;
  case NL_GC_LIST_CONTAINERS:
  case NL_GC_IMAGE_USERS:
    list_containers(gc);
    return;
  case NL_GC_LIST_SANDBOXES: {
    Runtime__V1__ListPodSandboxRequest q = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
    nl_cri_list_pod_sandbox(gc->cri, &q, on_sandboxes, gc);
    return;
  }
  case NL_GC_REMOVE_CONTAINERS: {
    Runtime__V1__RemoveContainerRequest q = RUNTIME__V1__REMOVE_CONTAINER_REQUEST__INIT;
    q.container_id = gc->remove_ids[gc->next];
    nl_vlog(3, "container GC: removing container %s", q.container_id);
    nl_cri_remove_container(gc->cri, &q, on_container_removed, gc);
    return;
  }
  case NL_GC_STOP_SANDBOX: {
    /* As upstream: stopped first, in case the agent did not. */
    Runtime__V1__StopPodSandboxRequest q = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;
    q.pod_sandbox_id = gc->remove_ids[gc->next];
    nl_cri_stop_pod_sandbox(gc->cri, &q, on_sandbox_stopped, gc);
    return;
  }
  case NL_GC_REMOVE_SANDBOX: {
    Runtime__V1__RemovePodSandboxRequest q = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
    q.pod_sandbox_id = gc->remove_ids[gc->next];
    nl_vlog(3, "container GC: removing sandbox %s", q.pod_sandbox_id);
    nl_cri_remove_pod_sandbox(gc->cri, &q, on_sandbox_removed, gc);
    return;
  }
  case NL_GC_LOGDIRS:
    queue(gc, logdirs_work);
    return;
  case NL_GC_RUNTIME_CONFIG: {
    Runtime__V1__StatusRequest q = RUNTIME__V1__STATUS_REQUEST__INIT;
    q.verbose = true;
    nl_cri_status(gc->cri, &q, on_runtime_status, gc);
    return;
  }
  case NL_GC_IMAGE_FS: {
    Runtime__V1__ImageFsInfoRequest q = RUNTIME__V1__IMAGE_FS_INFO_REQUEST__INIT;
    nl_cri_image_fs_info(gc->cri, &q, on_image_fs, gc);
    return;
  }
  case NL_GC_LIST_IMAGES: {
    Runtime__V1__ListImagesRequest q = RUNTIME__V1__LIST_IMAGES_REQUEST__INIT;
    nl_cri_list_images(gc->cri, &q, on_images, gc);
    return;
  }
  case NL_GC_IMAGE_MOUNTS:
    image_mounts(gc);
    return;
  case NL_GC_REMOVE_IMAGES: {
    if (gc->next == 0 && !gc->remove_ids) {
      select_images(gc);
      if (!gc->n_remove) {
        gc->last_image_bytes_freed = 0;
        round_done(gc);
        return;
      }
    }
    Runtime__V1__RemoveImageRequest q = RUNTIME__V1__REMOVE_IMAGE_REQUEST__INIT;
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    spec.image = gc->remove_ids[gc->next];
    q.image = &spec;
    nl_cri_remove_image(gc->cri, &q, on_image_removed, gc);
    return;
  }
  case NL_GC_STOPPED:
    return;
  }
}

static void on_container_tick(uv_timer_t *t) {
  nl_gc_t *gc = t->data;
  gc->containers_due = true;
  if (gc->state == NL_GC_IDLE) step(gc);
}

static void on_image_tick(uv_timer_t *t) {
  nl_gc_t *gc = t->data;
  gc->images_due = true;
  if (gc->state == NL_GC_IDLE) step(gc);
}

void nl_gc_init(nl_gc_t *gc, uv_loop_t *loop, nl_cri_client_t *cri, const nl_gc_policy_t *p,
                const nl_gc_deps_t *deps, const char *pods_dir, const char *logs_dir,
                uint64_t container_period_ms, uint64_t image_period_ms) {
  memset(gc, 0, sizeof *gc);
  gc->loop = loop;
  gc->cri = cri;
  gc->policy = *p;
  gc->deps = *deps;
  gc->pods_dir = nl_xstrdup(pods_dir);
  gc->logs_dir = nl_xstrdup(logs_dir);
  gc->links_dir = nl_rt_log_links_dir(logs_dir);
  gc->container_period_ms = container_period_ms ? container_period_ms : CONTAINER_PERIOD_MS;
  gc->image_period_ms = image_period_ms ? image_period_ms : IMAGE_PERIOD_MS;
  nl_map_init(&gc->pod_dirs);
  uv_timer_init(loop, &gc->container_timer);
  uv_timer_init(loop, &gc->image_timer);
  gc->container_timer.data = gc->image_timer.data = gc;
  gc->state = NL_GC_IDLE;
}

/* upstream StartGarbageCollection: wait.Until runs each at once, then every period. */
void nl_gc_start(nl_gc_t *gc) {
  uv_timer_start(&gc->container_timer, on_container_tick, 0, gc->container_period_ms);
  uv_timer_start(&gc->image_timer, on_image_tick, 0, gc->image_period_ms);
}

void nl_gc_reclaim(nl_gc_t *gc, bool images, nl_gc_reclaim_fn done, void *ctx) {
  assert(!gc->stopping && !gc->reclaim_cb && !gc->reclaiming);
  gc->reclaim_due = true;
  gc->reclaim_cb = done;
  gc->reclaim_ctx = ctx;
  gc->reclaim_images = images; /* after its container part */
  /* From the loop, not from inside this call: the container tick, now. */
  if (gc->state == NL_GC_IDLE)
    uv_timer_start(&gc->container_timer, on_container_tick, 0, gc->container_period_ms);
}

void nl_gc_stop(nl_gc_t *gc, nl_gc_done_fn done) {
  if (gc->stopping) return;
  gc->stopping = true;
  gc->done_cb = done;
  if (gc->state == NL_GC_IDLE) close_timers(gc);
  /* Otherwise the step in flight ends in go_on(), which closes. */
}
