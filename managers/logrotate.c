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
  for (size_t i = 0; i < r->n; i++) free(r->ids[i]);
  free(r->ids);
  r->ids = NULL;
  r->n = r->next = 0;
  free(r->path);
  free(r->rotated);
  r->path = r->rotated = NULL;
  nl_err_free(&r->work_err);
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

static void next_container(nl_logrotate_t *r) {
  free(r->path);
  free(r->rotated);
  r->path = r->rotated = NULL;
  r->next++;
  r->state = r->next < r->n ? NL_LR_STATUS : NL_LR_IDLE;
  step(r);
}

static void on_list(const nl_grpc_status_t *st, Runtime__V1__ListContainersResponse *resp,
                    void *ctx) {
  nl_logrotate_t *r = ctx;
  if (!go_on(r)) return;
  if (st->code != NL_GRPC_OK) {
    nl_vlog(2, "log rotation: list containers: %s", st->message);
    r->state = NL_LR_IDLE;
    step(r);
    return;
  }
  r->ids = nl_xcalloc(resp->n_containers + 1, sizeof(char *));
  nl_map_t paths; /* the known paths of the containers still running */
  nl_map_init(&paths);
  for (size_t i = 0; i < resp->n_containers; i++) {
    const char *id = resp->containers[i]->id;
    r->ids[r->n++] = nl_xstrdup(id);
    char *known = nl_map_del(&r->paths, id);
    if (known) nl_map_put(&paths, id, known);
  }
  nl_map_free(&r->paths, free);
  r->paths = paths;
  r->next = 0;
  r->state = r->n ? NL_LR_STATUS : NL_LR_IDLE;
  step(r);
}

static void on_status(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *resp,
                      void *ctx) {
  nl_logrotate_t *r = ctx;
  if (!go_on(r)) return;
  if (st->code != NL_GRPC_OK || !resp->status || !*resp->status->log_path ||
      resp->status->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING) {
    next_container(r);
    return;
  }
  r->path = nl_xstrdup(resp->status->log_path);
  free(nl_map_put(&r->paths, r->ids[r->next], nl_xstrdup(r->path)));
  r->state = NL_LR_FILES;
  step(r);
}

static void files_work(uv_work_t *w) {
  nl_logrotate_t *r = container_of(w, nl_logrotate_t, work);
  if (r->state == NL_LR_UNDO) {
    if (rename(r->rotated, r->path) < 0)
      nl_err_set(&r->work_err, errno, "rename %s back to %s: %s", r->rotated, r->path, strerror(errno));
    return;
  }
  nl_logrotate_files(r->path, r->max_size, r->max_files, time(NULL), &r->rotated, &r->work_err);
}

static void files_done(uv_work_t *w, int status) {
  nl_logrotate_t *r = container_of(w, nl_logrotate_t, work);
  r->work_busy = false;
  if (r->work_err) {
    nl_warn("log rotation of container %s: %s", r->ids[r->next], nl_err_msg(r->work_err));
    nl_err_free(&r->work_err);
  }
  if (!go_on(r)) return;
  if (r->state == NL_LR_FILES && r->rotated) {
    r->state = NL_LR_REOPEN;
    step(r);
    return;
  }
  next_container(r);
}

static void on_reopen(const nl_grpc_status_t *st, Runtime__V1__ReopenContainerLogResponse *resp,
                      void *ctx) {
  nl_logrotate_t *r = ctx;
  if (st->code != NL_GRPC_OK) {
    /* As upstream: the runtime still writes to the renamed file; undo. */
    nl_warn("log rotation of container %s: reopen: %s", r->ids[r->next], st->message);
    if (!go_on(r)) return;
    r->state = NL_LR_UNDO;
    step(r);
    return;
  }
  r->rotations++;
  nl_vlog(3, "log rotation: %s rotated to %s", r->path, r->rotated);
  if (!go_on(r)) return;
  next_container(r);
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
    nl_cri_list_containers(r->cri, &q, on_list, r);
    return;
  }
  case NL_LR_STATUS: {
    const char *known = nl_map_get(&r->paths, r->ids[r->next]);
    if (known) {
      r->path = nl_xstrdup(known);
      r->state = NL_LR_FILES;
      step(r);
      return;
    }
    Runtime__V1__ContainerStatusRequest q = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
    q.container_id = r->ids[r->next];
    nl_cri_container_status(r->cri, &q, on_status, r);
    return;
  }
  case NL_LR_FILES:
  case NL_LR_UNDO:
    r->work_busy = true;
    if (uv_queue_work(r->loop, &r->work, files_work, files_done) < 0) {
      r->work_busy = false;
      next_container(r);
    }
    return;
  case NL_LR_REOPEN: {
    Runtime__V1__ReopenContainerLogRequest q = RUNTIME__V1__REOPEN_CONTAINER_LOG_REQUEST__INIT;
    q.container_id = r->ids[r->next];
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
