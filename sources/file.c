/* The loop side of the file source: watch, timer, applying scans, snapshots.
 * The blocking part of a scan is in file_scan.c. */
#include "sources/file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"
#include "sources/file_scan.h"

/* Upstream retries its watch every second while the path is missing. */
#define RETRY_MS 1000
/* An fs event starts a scan this much later, not at once: a write(2) burst
 * (O_TRUNC, then the data) is then usually read once, complete, instead of
 * reporting the empty or partial file first. Not reset by later events, so a
 * file that is written without pause is still read. A burst takes micro-
 * seconds; every millisecond here is added to starting a static pod
 * (tools/bench/pods_bench.sh: 50 ms was a quarter of the CRI floor). */
#define SETTLE_MS 10

static void start_scan(nl_file_source_t *src);
static void on_tick(uv_timer_t *t);
static void on_settled(uv_timer_t *t);
static void finish(nl_file_source_t *src);

static void entry_free(void *p) {
  nl_file_entry_t *e = p;
  if (!e) return;
  if (e->pod) nl_pod_free(e->pod);
  free(e);
}

int nl_file_source_init(nl_file_source_t *src, uv_loop_t *loop, const char *path,
                        uint64_t check_frequency_ms, const char *node_name,
                        nl_file_source_cb cb, void *ctx, nl_err_t **err) {
  memset(src, 0, sizeof *src);
  src->inotify_fd = -1;
  nl_map_init(&src->force);
  nl_map_init(&src->gone);
  nl_map_init(&src->files);
  if (!path || !*path) return nl_err_set(err, NL_EINVAL, "file source: staticPodPath is empty");
  if (!node_name || !*node_name) return nl_err_set(err, NL_EINVAL, "file source: node name is empty");
  src->loop = loop;
  src->path = nl_xstrdup(path);
  /* upstream trims trailing separators (but "/" stays "/") */
  for (size_t n = strlen(src->path); n > 1 && src->path[n - 1] == '/'; n--) src->path[n - 1] = '\0';
  src->node_name = nl_xstrdup(node_name);
  src->check_frequency_ms = check_frequency_ms ? check_frequency_ms : NL_FILE_SOURCE_DEFAULT_CHECK_MS;
  src->cb = cb;
  src->ctx = ctx;
  src->state = NL_FILE_SOURCE_INIT;
  return 0;
}

/* ---- watching ---- */

static const char *basename_of(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

static void request_scan(nl_file_source_t *src) {
  if (src->state != NL_FILE_SOURCE_RUNNING) return;
  if (src->job) {
    src->dirty = true;
    return;
  }
  start_scan(src);
}

/* One inotify event: filename NULL for the watched directory itself. */
static void on_fs_event(nl_file_source_t *src, const char *filename, uint32_t mask) {
  if (filename) {
    if (!src->watch_is_dir) {
      /* watching the parent of a file (or of a path that does not exist yet) */
      if (strcmp(filename, basename_of(src->path)) != 0) return;
    } else if (filename[0] == '.') {
      /* Never read as a manifest; but a rename of a dot-name can swap the
       * targets of symlinks (Kubernetes' atomic writer swaps "..data"), so look
       * at the stats again: cheap, and nothing unchanged is read. */
      nl_vlog(5, "file source: event for dot-file %s/%s: re-checking stats", src->path, filename);
    } else {
      nl_map_put(&src->force, filename, NULL);
    }
    if (mask & (IN_DELETE | IN_MOVED_FROM)) nl_map_put(&src->gone, filename, NULL);
  } else {
    src->force_all = true; /* inotify overflow or the watched directory itself */
  }
  nl_vlog(5, "file source: event 0x%x for %s in %s", mask, filename ? filename : "(none)", src->watch_dir);
  if (!uv_is_active((uv_handle_t *)&src->settle)) uv_timer_start(&src->settle, on_settled, SETTLE_MS, 0);
}

static void on_inotify(uv_poll_t *h, int status, int events) {
  (void)events;
  nl_file_source_t *src = container_of(h, nl_file_source_t, watch);
  if (status < 0) {
    nl_warn("file source: watch on %s failed: %s; re-reading", src->watch_dir, uv_strerror(status));
    src->force_all = true;
    request_scan(src);
    return;
  }
  char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t n = read(src->inotify_fd, buf, sizeof buf);
    if (n <= 0) break; /* EAGAIN: all read */
    for (char *p = buf; p < buf + n;) {
      const struct inotify_event *ev = (const struct inotify_event *)p;
      p += sizeof *ev + ev->len;
      if (ev->mask & IN_Q_OVERFLOW) on_fs_event(src, NULL, ev->mask);
      else if (src->watch_dir && ev->wd == src->watch_wd && !(ev->mask & IN_IGNORED))
        on_fs_event(src, ev->len ? ev->name : NULL, ev->mask);
    }
  }
}

static void on_settled(uv_timer_t *t) {
  request_scan(container_of(t, nl_file_source_t, settle));
}

static void watch_stop(nl_file_source_t *src) {
  if (!src->watch_dir) return;
  inotify_rm_watch(src->inotify_fd, src->watch_wd);
  free(src->watch_dir);
  src->watch_dir = NULL;
}

/* Points the watch at dir. Returns true when a new watch was started, so the
 * caller re-scans to cover changes made before the watch existed. */
static bool watch_set(nl_file_source_t *src, const char *dir, bool is_dir, dev_t dev, ino_t ino) {
  if (src->watch_dir && strcmp(src->watch_dir, dir) == 0 && src->watch_is_dir == is_dir &&
      (!is_dir || (src->watch_dev == dev && src->watch_ino == ino)))
    return false;
  watch_stop(src);
  /* the events libuv's fs watch asks for */
  int wd = inotify_add_watch(src->inotify_fd, dir,
                             IN_ATTRIB | IN_CREATE | IN_MODIFY | IN_DELETE | IN_DELETE_SELF |
                                 IN_MOVE_SELF | IN_MOVED_FROM | IN_MOVED_TO);
  if (wd < 0) {
    nl_vlog(2, "file source: cannot watch %s: %s", dir, strerror(errno));
    return false;
  }
  src->watch_wd = wd;
  nl_vlog(1, "file source: watching %s for %s", dir, src->path);
  src->watch_dir = nl_xstrdup(dir);
  src->watch_is_dir = is_dir;
  src->watch_dev = dev;
  src->watch_ino = ino;
  return true;
}

static bool update_watch(nl_file_source_t *src, const nl_file_scan_t *s) {
  if (s->kind == NL_FK_DIR) return watch_set(src, src->path, true, s->path_dev, s->path_ino);
  char *parent = nl_xstrdup(src->path);
  char *slash = strrchr(parent, '/');
  if (!slash) {
    free(parent);
    parent = nl_xstrdup(".");
  } else if (slash == parent) {
    slash[1] = '\0';
  } else {
    *slash = '\0';
  }
  bool started = watch_set(src, parent, false, 0, 0);
  free(parent);
  return started;
}

/* ---- applying a scan ---- */

static uint64_t key_hash(const nl_file_key_t *k) {
  uint64_t v[5] = {(uint64_t)k->dev, (uint64_t)k->ino, (uint64_t)k->size, (uint64_t)k->mtime_ns,
                   (uint64_t)k->ctime_ns};
  return nl__file_hash(v, sizeof v);
}

/* Logs a bad file once per change (code + content hash); takes msg. */
static void report_bad(nl_file_source_t *src, nl_file_entry_t *e, int code, uint64_t hash, char *msg) {
  if (e->last_err != code || e->err_hash != hash) {
    e->last_err = code;
    e->err_hash = hash;
    src->errors++;
    nl_error("file source: %s%s", msg, e->pod ? " (keeping the pod it defined before)" : "");
  }
  free(msg);
}

/* Applies one result; returns true when the pod set changed. */
static bool apply_result(nl_file_source_t *src, nl_file_result_t *r) {
  nl_file_entry_t *e = nl_map_get(&src->files, r->path);
  if (!e) {
    e = nl_xcalloc(1, sizeof *e);
    nl_map_put(&src->files, r->path, e);
  }
  if (r->not_regular) {
    /* upstream: "Not recursing into manifest path" / not a file; reported once */
    report_bad(src, e, EISDIR, 0,
               nl_xasprintf("skipping %s: not a regular file (subdirectories are not read)", r->path));
    e->key = r->key;
    e->have_hash = false;
    if (e->pod) {
      nl_pod_free(e->pod);
      e->pod = NULL;
      return true;
    }
    return false;
  }
  if (r->err) {
    char *msg = r->err == EFBIG
                    ? nl_xasprintf("can't read manifest %s: larger than the %d-byte manifest limit",
                                   r->path, NL_FILE_SOURCE_MAX_BYTES)
                    : nl_xasprintf("can't read manifest %s: %s", r->path, strerror(r->err));
    /* the stat key stands in for the content: a new write is a new change */
    report_bad(src, e, r->err, key_hash(&r->key), msg);
    return false;
  }
  e->key = r->key;
  if (r->unchanged) {
    /* readable again, same bytes as before: a read error is over; a decode
     * error of these same bytes is not */
    if (e->last_err != NL_EINVAL) e->last_err = 0;
    return false;
  }

  nl_err_t *err = NULL;
  nl_pod_t *pod = NULL;
  e->hash = r->hash;
  e->have_hash = true;
  nl_static_source_t how = {.kind = "file", .location = r->path, .node_name = src->node_name};
  if (nl_pod_load_static(r->data, r->len, &how, &pod, &err) < 0) {
    /* the model's messages already start with the path */
    report_bad(src, e, NL_EINVAL, r->hash, nl_xasprintf("bad manifest: %s", nl_err_msg(err)));
    nl_err_free(&err);
    return false;
  }
  e->last_err = 0;
  e->err_hash = 0;
  if (e->pod) nl_pod_free(e->pod);
  e->pod = pod;
  nl_vlog(3, "file source: read manifest %s", r->path);
  return true;
}

static int cmp_path(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* skip: paths left out (may be NULL). */
static void send_snapshot(nl_file_source_t *src, const nl_map_t *skip) {
  size_t n = 0, cap = nl_map_size(&src->files);
  const char **paths = nl_xcalloc(cap ? cap : 1, sizeof *paths);
  nl_map_iter_t it;
  const char *k;
  void *v;
  nl_map_iter_init(&it, &src->files);
  while (nl_map_iter_next(&it, &k, &v))
    if (((nl_file_entry_t *)v)->pod && !(skip && nl_map_has(skip, k))) paths[n++] = k;
  if (n > 1) qsort(paths, n, sizeof *paths, cmp_path);
  nl_pod_t **pods = nl_xcalloc(n ? n : 1, sizeof *pods);
  for (size_t i = 0; i < n; i++) pods[i] = nl_pod_dup(((nl_file_entry_t *)nl_map_get(&src->files, paths[i]))->pod);
  free(paths);
  src->sent_once = true;
  src->snapshots++;
  nl_vlog(4, "file source: %zu pods from %s", n, src->path);
  if (src->cb) {
    src->cb(pods, n, src->ctx);
  } else {
    for (size_t i = 0; i < n; i++) nl_pod_free(pods[i]);
    free(pods);
  }
}

static void apply_scan(nl_file_source_t *src, nl_file_scan_t *s) {
  bool changed = false;
  nl_map_t seen;
  nl_map_init(&seen);
  if (s->kind == NL_FK_ERROR) {
    /* e.g. EACCES on the directory: keep what we have, try again later */
    nl_error("file source: unable to read config path %s: %s", src->path, strerror(s->path_err));
    nl_map_free(&seen, NULL);
    return;
  }
  if (s->kind == NL_FK_OTHER)
    nl_error("file source: config path %s is not a directory or file", src->path);
  /* A file deleted and written again since the last scan: its pod goes and
   * comes back (upstream sees the deletion and the creation one by one). */
  nl_map_t bounced;
  nl_map_init(&bounced);
  for (size_t i = 0; i < s->n; i++) {
    const nl_file_entry_t *e = nl_map_get(&src->files, s->results[i].path);
    if (e && e->pod && nl_map_has(&s->gone, basename_of(s->results[i].path)))
      nl_map_put(&bounced, s->results[i].path, NULL);
    changed |= apply_result(src, &s->results[i]);
    nl_map_put(&seen, s->results[i].path, NULL);
  }
  /* files that are gone take their pods with them */
  nl_map_iter_t it;
  const char *k;
  void *v;
  nl_map_iter_init(&it, &src->files);
  while (nl_map_iter_next(&it, &k, &v)) {
    if (nl_map_has(&seen, k)) continue;
    nl_file_entry_t *e = v;
    if (e->pod) changed = true;
    nl_vlog(3, "file source: %s is gone", k);
    nl_map_del(&src->files, k);
    entry_free(e);
  }
  nl_map_free(&seen, NULL);
  if (s->kind == NL_FK_MISSING && !src->sent_once)
    nl_info("file source: path %s does not exist, ignoring", src->path);
  if (nl_map_size(&bounced) && src->sent_once) {
    nl_vlog(3, "file source: %zu manifests deleted and written again", nl_map_size(&bounced));
    send_snapshot(src, &bounced);
    changed = true;
  }
  nl_map_free(&bounced, NULL);
  if (changed || !src->sent_once) send_snapshot(src, NULL);
}

static void on_scan_done(uv_work_t *req, int status) {
  nl_file_scan_t *s = container_of(req, nl_file_scan_t, req);
  nl_file_source_t *src = s->owner;
  src->job = NULL;
  if (src->state != NL_FILE_SOURCE_RUNNING || status < 0) {
    nl__file_scan_free(s);
    if (src->state == NL_FILE_SOURCE_STOPPING && --src->pending == 0) finish(src);
    return;
  }
  bool rewatched = update_watch(src, s);
  apply_scan(src, s);
  nl__file_scan_free(s);
  src->scans++;
  if (src->on_scan && src->state == NL_FILE_SOURCE_RUNNING) src->on_scan(src, src->ctx);
  if (src->state != NL_FILE_SOURCE_RUNNING) return; /* stopped from a callback */

  /* the re-read period runs on its own, whatever the events do */
  uint64_t period = src->check_frequency_ms;
  if (!src->watch_dir && period > RETRY_MS) period = RETRY_MS;
  if (!uv_is_active((uv_handle_t *)&src->timer) || uv_timer_get_repeat(&src->timer) != period)
    uv_timer_start(&src->timer, on_tick, period, period);
  if (rewatched) src->dirty = true; /* changes before the watch existed */
  if (src->dirty) {
    src->dirty = false;
    start_scan(src);
  }
}

static void on_tick(uv_timer_t *t) {
  nl_file_source_t *src = container_of(t, nl_file_source_t, timer);
  nl_vlog(5, "file source: periodic re-read of %s", src->path);
  src->force_all = true;
  request_scan(src);
}

static void start_scan(nl_file_source_t *src) {
  nl_file_scan_t *s = nl_xcalloc(1, sizeof *s);
  s->owner = src;
  s->path = nl_xstrdup(src->path);
  s->force_all = src->force_all;
  s->force = src->force; /* hand the event names over; start a fresh set */
  nl_map_init(&src->force);
  s->gone = src->gone;
  nl_map_init(&src->gone);
  s->known = &src->files;
  s->max_bytes = NL_FILE_SOURCE_MAX_BYTES;
  src->force_all = false;
  src->dirty = false;
  int rc = uv_queue_work(src->loop, &s->req, nl__file_scan_run, on_scan_done);
  if (rc < 0) { /* only on bad arguments; keep the timer as the retry */
    nl_error("file source: cannot queue a scan of %s: %s", src->path, uv_strerror(rc));
    nl__file_scan_free(s);
    return;
  }
  src->job = s;
}

/* ---- lifecycle ---- */

int nl_file_source_start(nl_file_source_t *src, nl_err_t **err) {
  if (src->state != NL_FILE_SOURCE_INIT)
    return nl_err_set(err, NL_EINVAL, "file source %s: already started", src->path);
  src->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (src->inotify_fd < 0)
    return nl_err_set(err, errno, "file source %s: inotify: %s", src->path, strerror(errno));
  uv_poll_init(src->loop, &src->watch, src->inotify_fd);
  uv_poll_start(&src->watch, UV_READABLE, on_inotify);
  uv_timer_init(src->loop, &src->timer);
  uv_timer_init(src->loop, &src->settle);
  src->state = NL_FILE_SOURCE_RUNNING;
  nl_vlog(1, "file source: reading %s every %llu ms and on change", src->path,
          (unsigned long long)src->check_frequency_ms);
  start_scan(src);
  return 0;
}

static void finish(nl_file_source_t *src) {
  src->state = NL_FILE_SOURCE_STOPPED;
  nl_map_free(&src->files, entry_free);
  nl_map_free(&src->force, NULL);
  nl_map_free(&src->gone, NULL);
  if (src->inotify_fd >= 0) close(src->inotify_fd); /* its poll handle is closed */
  src->inotify_fd = -1;
  free(src->path);
  free(src->node_name);
  free(src->watch_dir);
  src->path = src->node_name = src->watch_dir = NULL;
  if (src->done_cb) src->done_cb(src);
}

static void on_close(uv_handle_t *h) {
  nl_file_source_t *src = h->data;
  if (--src->pending == 0) finish(src);
}

void nl_file_source_stop(nl_file_source_t *src, nl_file_source_done_cb done_cb) {
  src->done_cb = done_cb;
  if (src->state == NL_FILE_SOURCE_INIT) {
    finish(src);
    return;
  }
  if (src->state != NL_FILE_SOURCE_RUNNING) return;
  src->state = NL_FILE_SOURCE_STOPPING;
  uv_poll_stop(&src->watch);
  src->watch.data = src;
  src->timer.data = src;
  src->settle.data = src;
  src->pending = 3 + (src->job ? 1 : 0);
  if (src->job) uv_cancel((uv_req_t *)&src->job->req);
  uv_close((uv_handle_t *)&src->watch, on_close);
  uv_close((uv_handle_t *)&src->timer, on_close);
  uv_close((uv_handle_t *)&src->settle, on_close);
}
