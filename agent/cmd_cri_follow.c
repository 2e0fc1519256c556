/* `nanolet cri logs -f`: prints the container's log as it grows, until the
 * container is no longer running (as crictl logs -f). All on the loop: a 250 ms
 * timer, uv_fs reads from the last offset, a ContainerStatus call every second. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cmd_cri_follow.h"
#include "agent/cmd_cri_fmt.h"
#include "cri/runtime.h"
#include "reactor/xalloc.h"

#define TICK_MS 250
#define STATUS_EVERY 4 /* ticks: the container's state once a second */

struct nl_cmd_cri_follow {
  nl_cmd_cri_ctx_t *x;
  uv_timer_t timer;
  uv_fs_t req;
  uv_file fd;
  int64_t off;
  nl_buf_t pending;  /* read, not yet a whole line */
  bool first;        /* the content already there: --tail applies */
  bool last_round;   /* the container stopped: one more read, then done */
  int ticks;
  int rc;
  char chunk[65536];
};

static void read_more(nl_cmd_cri_follow_t *f);

static void timer_closed(uv_handle_t *h) {
  nl_cmd_cri_follow_t *f = h->data;
  nl_cmd_cri_ctx_t *x = f->x;
  int rc = f->rc;
  nl_buf_free(&f->pending);
  free(f);
  nl_cmd_cri__finish(x, rc);
}

static void file_closed(uv_fs_t *req) {
  nl_cmd_cri_follow_t *f = req->data;
  uv_fs_req_cleanup(req);
  f->timer.data = f;
  uv_close((uv_handle_t *)&f->timer, timer_closed);
}

static void done(nl_cmd_cri_follow_t *f, int rc) {
  f->rc = rc;
  uv_timer_stop(&f->timer);
  if (f->fd >= 0) {
    f->req.data = f;
    uv_fs_close(f->x->client.loop, &f->req, f->fd, file_closed);
    return;
  }
  f->timer.data = f;
  uv_close((uv_handle_t *)&f->timer, timer_closed);
}

/* Prints the whole lines of pending (the first time only the last --tail). */
static void emit(nl_cmd_cri_follow_t *f) {
  const char *end = f->pending.data ? memrchr(f->pending.data, '\n', f->pending.len) : NULL;
  if (!end) return;
  size_t whole = (size_t)(end - f->pending.data) + 1;
  nl_cmd_cri_log_line_t *lines;
  size_t n = nl_cmd_cri__log_parse(f->pending.data, whole, &lines, NULL);
  nl_cmd_cri__log_print(lines, n, f->first ? f->x->tail : -1);
  nl_cmd_cri__log_free(lines, n);
  nl_buf_consume(&f->pending, whole);
}

static void on_status(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *r,
                      void *ctx) {
  nl_cmd_cri_follow_t *f = ctx;
  /* NOT_FOUND: removed meanwhile. Other errors: keep following, as the file
   * is still there; the next check may answer. */
  if (st->code == NL_GRPC_NOT_FOUND ||
      (st->code == NL_GRPC_OK && r->status &&
       r->status->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING))
    f->last_round = true;
  read_more(f);
}

static void on_tick(uv_timer_t *t) {
  nl_cmd_cri_follow_t *f = container_of(t, nl_cmd_cri_follow_t, timer);
  if (f->ticks++ % STATUS_EVERY == 0) {
    Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
    req.container_id = f->x->id;
    nl_cri_container_status(&f->x->client, &req, on_status, f);
    return;
  }
  read_more(f);
}

static void on_read(uv_fs_t *req) {
  nl_cmd_cri_follow_t *f = req->data;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  if (n < 0) {
    nl_buf_printf(&f->x->err, "nanolet cri: logs: read %s: %s\n", f->x->log_path,
                  uv_strerror((int)n));
    done(f, 1);
    return;
  }
  if (n > 0) {
    nl_buf_append(&f->pending, f->chunk, (size_t)n);
    f->off += n;
    if ((size_t)n == sizeof f->chunk) { /* more is there already */
      read_more(f);
      return;
    }
  }
  emit(f);
  f->first = false; /* --tail counts what was there at the start only */
  if (f->last_round) {
    done(f, 0);
    return;
  }
  /* The first check comes at once: a container that has already stopped
   * ends the command after its log is printed. */
  uv_timer_start(&f->timer, on_tick, f->ticks == 0 ? 0 : TICK_MS, 0);
}

static void read_more(nl_cmd_cri_follow_t *f) {
  uv_buf_t b = uv_buf_init(f->chunk, sizeof f->chunk);
  f->req.data = f;
  int rc = uv_fs_read(f->x->client.loop, &f->req, f->fd, &b, 1, f->off, on_read);
  if (rc < 0) {
    nl_buf_printf(&f->x->err, "nanolet cri: logs: read %s: %s\n", f->x->log_path,
                  uv_strerror(rc));
    done(f, 1);
  }
}

static void on_open(uv_fs_t *req) {
  nl_cmd_cri_follow_t *f = req->data;
  ssize_t fd = req->result;
  uv_fs_req_cleanup(req);
  if (fd < 0) {
    nl_buf_printf(&f->x->err, "nanolet cri: logs: open %s: %s\n", f->x->log_path,
                  uv_strerror((int)fd));
    done(f, 1);
    return;
  }
  f->fd = (uv_file)fd;
  read_more(f);
}

void nl_cmd_cri__follow_start(nl_cmd_cri_ctx_t *x) {
  nl_cmd_cri_follow_t *f = nl_xcalloc(1, sizeof *f);
  f->x = x;
  f->fd = -1;
  f->first = true;
  uv_timer_init(x->client.loop, &f->timer);
  f->req.data = f;
  int rc = uv_fs_open(x->client.loop, &f->req, x->log_path, O_RDONLY | O_CLOEXEC, 0, on_open);
  if (rc < 0) {
    nl_buf_printf(&x->err, "nanolet cri: logs: open %s: %s\n", x->log_path, uv_strerror(rc));
    done(f, 1);
  }
}
