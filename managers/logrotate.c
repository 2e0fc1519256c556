#include "managers/logrotate.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

#define DEFAULT_PERIOD_MS 10000 /* upstream's containerLogMonitorInterval */

/* ---- the file work (thread pool) ----------------------------------------- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int nl_logrotate_files(const char *path, int64_t max_size, int max_files, time_t now,
                       char **rotated, nl_err_t **err) {
  *rotated = NULL;
  struct stat st;
  if (stat(path, &st) < 0) return errno == ENOENT ? 0 : nl_err_set(err, errno, "stat %s: %s", path, strerror(errno));
  if ((int64_t)st.st_size < max_size) return 0;
  char *dir = nl_xstrdup(path), *slash = strrchr(dir, '/');
  const char *base = slash ? slash + 1 : path;
  if (slash) *slash = 0;
  size_t blen = strlen(base);
  DIR *d = opendir(slash ? (*dir ? dir : "/") : ".");
  if (!d) {
    nl_err_set(err, errno, "open %s: %s", dir, strerror(errno));
    free(dir);
    return -1;
  }
  char **old = NULL;
  size_t n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, base, blen) != 0 || e->d_name[blen] != '.') continue;
    char *full = nl_xasprintf("%s/%s", slash ? dir : ".", e->d_name);
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0) {
      unlink(full); /* a compression upstream left half done */
      free(full);
      continue;
    }
    old = nl_xrealloc(old, (n + 1) * sizeof(*old));
    old[n++] = full;
  }
  closedir(d);
  /* The timestamps sort as strings; the live file and the one about to be
   * rotated leave max_files - 2 places. */
  if (n > 1) qsort(old, n, sizeof(*old), cmp_str);
  size_t keep = max_files > 2 ? (size_t)(max_files - 2) : 0;
  for (size_t i = 0; i < n; i++) {
    if (i + keep < n && unlink(old[i]) < 0 && errno != ENOENT)
      nl_vlog(2, "log rotation: remove %s: %s", old[i], strerror(errno));
    free(old[i]);
  }
  free(old);
  free(dir);
  struct tm tm;
  gmtime_r(&now, &tm);
  char stamp[32];
  strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  char *to = nl_xasprintf("%s.%s", path, stamp);
  if (rename(path, to) < 0) {
    nl_err_set(err, errno, "rename %s to %s: %s", path, to, strerror(errno));
    free(to);
    return -1;
  }
  *rotated = to;
  return 1;
}

/* ---- the machine --------------------------------------------------------- */

static void step(nl_logrotate_t *r);

static void free_round(nl_logrotate_t *r) {
  for (size_t i = 0; i < r->n; i++) {
    free(r->items[i].id);
    free(r->items[i].path);
    free(r->items[i].rotated);
    nl_err_free(&r->items[i].err);
  }
  free(r->items);
  r->items = NULL;
  r->n = r->next = 0;
}

static void timer_closed(uv_handle_t *h) {
  nl_logrotate_t *r = h->data;
  free_round(r);
  nl_map_free(&r->paths, free);
  r->state = NL_LR_STOPPED;
  if (r->done_cb) r->done_cb(r);
}

/* Called when a step completes: stops if asked, else goes on. */
static bool go_on(nl_logrotate_t *r) {
  if (!r->stopping) return true;
  uv_close((uv_handle_t *)&r->timer, timer_closed);
  return false;
}

static void on_list(const nl_grpc_status_t *st, Runtime__V1__Brief__ListContainersResponse *resp,
                    void *ctx) {
  nl_logrotate_t *r = ctx;
  if (!go_on(r)) return;
  if (st->code != NL_GRPC_OK) {
    nl_vlog(2, "log rotation: list containers: %s", st->message);
    r->state = NL_LR_IDLE;
    step(r);
    return;
  }
  r->items = nl_xcalloc(resp->n_containers + 1, sizeof(*r->items));
  nl_map_t paths; /* the known paths of the containers still running */
  nl_map_init(&paths);
  for (size_t i = 0; i < resp->n_containers; i++) {
    nl_logrotate_item_t *it = &r->items[r->n++];
    it->id = nl_xstrdup(resp->containers[i]->id);
    char *known = nl_map_del(&r->paths, it->id);
    if (known) {
      it->path = nl_xstrdup(known);
      nl_map_put(&paths, it->id, known);
    }
  }
  nl_map_free(&r->paths, free);
  r->paths = paths;
  r->next = 0;
  r->state = NL_LR_STATUS;
  step(r);
}

static void on_status(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *resp,
                      void *ctx) {
  nl_logrotate_t *r = ctx;
  if (!go_on(r)) return;
  nl_logrotate_item_t *it = &r->items[r->next++];
  if (st->code == NL_GRPC_OK && resp->status && *resp->status->log_path &&
      resp->status->state == RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING) {
    it->path = nl_xstrdup(resp->status->log_path);
    free(nl_map_put(&r->paths, it->id, nl_xstrdup(it->path)));
  }
  step(r);
}

/* One work item a round for every file, not one a container: a round of an
 * idle node is then one hand-off to the thread pool instead of one per
 * running container (110 every 10 s was most of the agent's idle thread
 * switches). */
static void files_work(uv_work_t *w) {
  nl_logrotate_t *r = container_of(w, nl_logrotate_t, work);
  if (r->state == NL_LR_UNDO) {
    nl_logrotate_item_t *it = &r->items[r->next];
    if (rename(it->rotated, it->path) < 0)
      nl_err_set(&it->err, errno, "rename %s back to %s: %s", it->rotated, it->path, strerror(errno));
    return;
  }
  time_t now = time(NULL);
  for (size_t i = 0; i < r->n; i++) {
    nl_logrotate_item_t *it = &r->items[i];
    if (it->path) nl_logrotate_files(it->path, r->max_size, r->max_files, now, &it->rotated, &it->err);
  }
}

static void files_done(uv_work_t *w, int status) {
  (void)status;
  nl_logrotate_t *r = container_of(w, nl_logrotate_t, work);
  r->work_busy = false;
  for (size_t i = 0; i < r->n; i++)
    if (r->items[i].err) {
      nl_warn("log rotation of container %s: %s", r->items[i].id, nl_err_msg(r->items[i].err));
      nl_err_free(&r->items[i].err);
    }
  if (!go_on(r)) return;
  if (r->state == NL_LR_UNDO) r->next++;
  else r->next = 0;
  r->state = NL_LR_REOPEN;
  step(r);
}

static void on_reopen(const nl_grpc_status_t *st, Runtime__V1__ReopenContainerLogResponse *resp,
                      void *ctx) {
  (void)resp;
  nl_logrotate_t *r = ctx;
  nl_logrotate_item_t *it = &r->items[r->next];
  if (st->code != NL_GRPC_OK) {
    /* As upstream: the runtime still writes to the renamed file; undo. */
    nl_warn("log rotation of container %s: reopen: %s", it->id, st->message);
    if (!go_on(r)) return;
    r->state = NL_LR_UNDO;
    step(r);
    return;
  }
  r->rotations++;
  nl_vlog(3, "log rotation: %s rotated to %s", it->path, it->rotated);
  if (!go_on(r)) return;
  r->next++;
  step(r);
}

static void on_tick(uv_timer_t *t) {
  nl_logrotate_t *r = t->data;
  r->state = NL_LR_LISTING;
  step(r);
}

static void step(nl_logrotate_t *r) {
  assert(r->state != NL_LR_STOPPED && !r->stopping);
  switch (r->state) {
  case NL_LR_IDLE:
    if (r->items) r->rounds++;
    free_round(r);
    uv_timer_start(&r->timer, on_tick, r->period_ms, 0);
    return;
  case NL_LR_LISTING: {
    Runtime__V1__ListContainersRequest q = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
    Runtime__V1__ContainerFilter f = RUNTIME__V1__CONTAINER_FILTER__INIT;
    Runtime__V1__ContainerStateValue sv = RUNTIME__V1__CONTAINER_STATE_VALUE__INIT;
    sv.state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
    f.state = &sv;
    q.filter = &f;
    nl_cri_list_containers_brief(r->cri, &q, 0, NULL, on_list, r);
    return;
  }
  case NL_LR_STATUS: { /* the log path of each container new since the last round */
    while (r->next < r->n && r->items[r->next].path) r->next++;
    if (r->next == r->n) {
      r->state = r->n ? NL_LR_FILES : NL_LR_IDLE;
      step(r);
      return;
    }
    Runtime__V1__ContainerStatusRequest q = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
    q.container_id = r->items[r->next].id;
    nl_cri_container_status(r->cri, &q, on_status, r);
    return;
  }
  case NL_LR_FILES:
  case NL_LR_UNDO:
    r->work_busy = true;
    if (uv_queue_work(r->loop, &r->work, files_work, files_done) < 0) {
      r->work_busy = false;
      r->state = NL_LR_IDLE;
      step(r);
    }
    return;
  case NL_LR_REOPEN: { /* each file the work renamed */
    while (r->next < r->n && !r->items[r->next].rotated) r->next++;
    if (r->next == r->n) {
      r->state = NL_LR_IDLE;
      step(r);
      return;
    }
    Runtime__V1__ReopenContainerLogRequest q = RUNTIME__V1__REOPEN_CONTAINER_LOG_REQUEST__INIT;
    q.container_id = r->items[r->next].id;
    nl_cri_reopen_container_log(r->cri, &q, on_reopen, r);
    return;
  }
  case NL_LR_STOPPED:
    return;
  }
}

void nl_logrotate_init(nl_logrotate_t *r, uv_loop_t *loop, nl_cri_client_t *cri, int64_t max_size,
                       int max_files, uint64_t period_ms) {
  memset(r, 0, sizeof(*r));
  r->loop = loop;
  r->cri = cri;
  r->max_size = max_size;
  r->max_files = max_files;
  r->period_ms = period_ms ? period_ms : DEFAULT_PERIOD_MS;
  uv_timer_init(loop, &r->timer);
  r->timer.data = r;
  nl_map_init(&r->paths);
  r->state = NL_LR_IDLE;
}

void nl_logrotate_start(nl_logrotate_t *r) { step(r); }

void nl_logrotate_stop(nl_logrotate_t *r, nl_logrotate_done_fn done) {
  if (r->stopping) return;
  r->stopping = true;
  r->done_cb = done;
  if (r->state == NL_LR_IDLE) {
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->timer, timer_closed);
  }
  /* Otherwise the step in flight ends in go_on(), which closes. */
}
