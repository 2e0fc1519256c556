#include "agent/kserver_logs.h"

#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/crilog.h"
#include "cri/runtime.h"
#include "reactor/http_query.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define CHUNK (16 * 1024)
#define HIGH_WATER (1024 * 1024) /* queued to the client: stop reading above it */
#define DEFAULT_POLL_MS 250
#define DEFAULT_STATE_MS 5000    /* upstream's stateCheckPeriod */

/* One request's reader. Exactly one asynchronous step is in flight at a time
 * (a CRI call, an fs request or the timer), so a completion always finds the
 * state it left; a client that goes away is noticed there (aborted). */
typedef enum {
  L_STATUS,  /* ContainerStatus: the log path (and, following, the state) */
  L_OPEN,    /* opening the log file (again after a rotation) */
  L_COUNT,   /* tailLines: counting the file's lines */
  L_READ,    /* reading and writing out */
  L_DRAIN,   /* the client has HIGH_WATER queued: wait for it */
  L_WAIT,    /* following: at the end of the file, the timer runs */
  L_STAT,    /* following: has the file been rotated? */
  L_CLOSE,   /* closing the file (rotation or the end) */
  L_DONE,
} lstate_t;

typedef struct reader {
  nl_kserver_logs_t *L;
  nl_http_resp_t *resp;
  lstate_t state;
  bool aborted, streaming, ended, reopen, last_round;
  bool rotated;  /* a new file is at the path: read the old one to its end first */
  bool reopened; /* after a rotation: tailLines applied already */
  nl_crilog_opts_t opts;
  nl_crilog_writer_t w;
  char *id, *path;
  uv_fs_t req;
  uv_file fd;
  uint64_t ino;
  int64_t off;
  int64_t lines, skip; /* COUNT: lines seen; READ: lines still to skip */
  nl_buf_t line;       /* a line read in part */
  uv_timer_t timer;
  uint64_t last_state_check;
  char chunk[CHUNK];
} reader_t;

static void step(reader_t *r);
static void fs_closed(uv_fs_t *q);

static void timer_closed(uv_handle_t *h) {
  reader_t *r = h->data;
  nl_buf_free(&r->line);
  free(r->id);
  free(r->path);
  free(r);
}

/* Releases the response and, once nothing is in flight, the reader. */
static void finish(reader_t *r, int status, const char *msg) {
  if (!r->ended) {
    r->ended = true;
    if (r->streaming) nl_http_resp_end(r->resp);
    else nl_http_resp_send_str(r->resp, status ? status : 200, msg ? msg : "");
    if (!r->streaming && status >= 400) /* what the API server's client sees as its reason */
      nl_info("kubelet server: log of container %s: %d %s", r->id, status, msg ? msg : "(no message)");
  }
  if (r->fd >= 0) {
    r->state = L_CLOSE;
    r->reopen = false;
    uv_fs_t *q = &r->req;
    q->data = r;
    uv_file fd = r->fd;
    r->fd = -1;
    if (uv_fs_close(r->L->loop, q, fd, fs_closed) == 0) return;
  }
  r->state = L_DONE;
  uv_close((uv_handle_t *)&r->timer, timer_closed);
}

static void fs_closed(uv_fs_t *q) {
  reader_t *r = q->data;
  uv_fs_req_cleanup(q);
  bool reopen = r->reopen && !r->aborted;
  r->reopen = false;
  if (reopen) {
    r->state = L_OPEN;
    step(r);
  } else if (!r->ended) { /* the client left during a rotation's reopen */
    finish(r, 503, NULL);
  } else {
    r->state = L_DONE;
    uv_close((uv_handle_t *)&r->timer, timer_closed);
  }
}

static void on_abort(void *ctx) {
  reader_t *r = ctx;
  r->aborted = true;
  /* Waiting on nothing but the timer or the client: end now. */
  if (r->state == L_WAIT || r->state == L_DRAIN) {
    uv_timer_stop(&r->timer);
    finish(r, 503, NULL);
  }
}

static void on_drain(void *ctx) {
  reader_t *r = ctx;
  if (r->state != L_DRAIN) return;
  r->state = L_READ;
  step(r);
}

static void start_stream(reader_t *r) {
  if (r->streaming) return;
  r->streaming = true;
  nl_http_resp_on_drain(r->resp, on_drain, r);
  nl_http_resp_stream(r->resp, 200);
}

/* Writes the whole lines of data (continuing r->line). Returns false when
 * limitBytes is used up. */
static bool emit(reader_t *r, const char *data, size_t n) {
  nl_buf_t out = NL_BUF_INIT;
  bool more = true;
  while (n > 0 && more) {
    const char *nl = memchr(data, '\n', n);
    size_t take = nl ? (size_t)(nl - data) + 1 : n;
    nl_buf_append(&r->line, data, nl ? take - 1 : take);
    data += take;
    n -= take;
    if (!nl) break;
    if (r->state == L_COUNT) {
      r->lines++;
    } else if (r->skip > 0) {
      r->skip--;
    } else {
      more = nl_crilog_write(&r->w, r->line.data ? r->line.data : "", r->line.len, &out);
    }
    nl_buf_reset(&r->line);
  }
  if (out.len) {
    start_stream(r);
    nl_http_resp_write(r->resp, out.data, out.len);
  }
  nl_buf_free(&out);
  return more;
}

/* ---- completions -------------------------------------------------------- */

static void on_status(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *resp,
                      void *ctx) {
  reader_t *r = ctx;
  if (r->aborted) {
    finish(r, 503, NULL);
    return;
  }
  bool first = r->path == NULL;
  if (st->code != NL_GRPC_OK) {
    if (first) {
      char *e = nl_grpc_status_format(st);
      char *msg = nl_xasprintf("failed to get container status \"%s\": %s", r->id, e);
      free(e);
      finish(r, 400, msg);
      free(msg);
      return;
    }
    /* Removed (NOT_FOUND) or the runtime is away: the end once read. */
    r->last_round = st->code == NL_GRPC_NOT_FOUND;
  } else if (first) {
    if (!resp->status || !*resp->status->log_path) {
      char *msg = nl_xasprintf("container \"%s\" has no log file", r->id);
      finish(r, 400, msg);
      free(msg);
      return;
    }
    r->path = nl_xstrdup(resp->status->log_path);
    r->state = L_OPEN;
    step(r);
    return;
  } else {
    r->last_round = !resp->status ||
                    resp->status->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
  }
  r->state = L_STAT;
  step(r);
}

static void on_open(uv_fs_t *q) {
  reader_t *r = q->data;
  ssize_t fd = q->result;
  uv_fs_req_cleanup(q);
  if (fd >= 0) r->fd = (uv_file)fd;
  if (r->aborted) {
    finish(r, 503, NULL);
    return;
  }
  if (fd < 0) {
    char *msg = nl_xasprintf("failed to open log file \"%s\": %s", r->path, uv_strerror((int)fd));
    if (r->streaming) nl_warn("kubelet server: %s", msg);
    finish(r, 400, msg);
    free(msg);
    return;
  }
  r->off = 0;
  start_stream(r);
  /* The inode tells a rotation (a new file at the path) apart. */
  struct stat stt;
  if (fstat(r->fd, &stt) == 0) r->ino = stt.st_ino;
  r->state = r->opts.tail_lines >= 0 && !r->reopened ? L_COUNT : L_READ;
  step(r);
}

static void on_read(uv_fs_t *q) {
  reader_t *r = q->data;
  ssize_t n = q->result;
  uv_fs_req_cleanup(q);
  if (r->aborted) {
    finish(r, 503, NULL);
    return;
  }
  if (n < 0) {
    nl_warn("kubelet server: read %s: %s", r->path, uv_strerror((int)n));
    finish(r, 400, NULL);
    return;
  }
  r->off += n;
  if (n > 0) {
    if (!emit(r, r->chunk, (size_t)n)) {
      finish(r, 0, NULL); /* limitBytes reached */
      return;
    }
    if (r->state == L_READ && nl_http_resp_queued(r->resp) > HIGH_WATER) r->state = L_DRAIN;
    step(r);
    return;
  }
  /* The end of the file. */
  if (r->state == L_COUNT) {
    if (r->line.len) r->lines++; /* a last line without its newline */
    r->skip = r->lines > r->opts.tail_lines ? r->lines - r->opts.tail_lines : 0;
    nl_buf_reset(&r->line);
    r->off = 0;
    r->state = L_READ;
    step(r);
    return;
  }
  if (r->rotated) {
    /* The old file is read to its end; go on at the start of the new one. */
    nl_vlog(4, "kubelet server: %s was rotated, reopening", r->path);
    r->rotated = false;
    nl_buf_reset(&r->line);
    r->reopen = r->reopened = true;
    r->skip = 0;
    r->state = L_CLOSE;
    uv_file fd = r->fd;
    r->fd = -1;
    r->req.data = r;
    if (uv_fs_close(r->L->loop, &r->req, fd, fs_closed) < 0) finish(r, 0, NULL);
    return;
  }
  if (!r->opts.follow || r->last_round) {
    if (r->line.len && r->skip == 0) { /* the unterminated last line */
      nl_buf_t out = NL_BUF_INIT;
      nl_crilog_write(&r->w, r->line.data, r->line.len, &out);
      if (out.len) nl_http_resp_write(r->resp, out.data, out.len);
      nl_buf_free(&out);
    }
    finish(r, 0, NULL);
    return;
  }
  r->state = L_WAIT;
  step(r);
}

static void on_stat(uv_fs_t *q) {
  reader_t *r = q->data;
  bool rotated = q->result == 0 && q->statbuf.st_ino != r->ino;
  bool shorter = q->result == 0 && !rotated && (int64_t)q->statbuf.st_size < r->off;
  uv_fs_req_cleanup(q);
  if (r->aborted) {
    finish(r, 503, NULL);
    return;
  }
  /* Rotated: the runtime may have written to the old file until it reopened;
   * read that first (on_read then moves to the new file). */
  r->rotated = rotated;
  if (shorter) r->off = 0; /* truncated in place */
  r->state = L_READ;
  step(r);
}

static void on_tick(uv_timer_t *t) {
  reader_t *r = t->data;
  uint64_t now = uv_now(r->L->loop);
  uint64_t every = r->L->state_ms ? r->L->state_ms : DEFAULT_STATE_MS;
  if (now - r->last_state_check >= every) {
    r->last_state_check = now;
    r->state = L_STATUS;
  } else {
    r->state = L_STAT;
  }
  step(r);
}

/* ---- the machine -------------------------------------------------------- */

static void step(reader_t *r) {
  assert(r->state != L_DONE);
  if (r->aborted) {
    finish(r, 503, NULL);
    return;
  }
  int rc = 0;
  r->req.data = r;
  switch (r->state) {
  case L_STATUS: {
    Runtime__V1__ContainerStatusRequest q = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
    q.container_id = r->id;
    nl_cri_container_status(r->L->cri, &q, on_status, r);
    return;
  }
  case L_OPEN:
    rc = uv_fs_open(r->L->loop, &r->req, r->path, O_RDONLY | O_CLOEXEC, 0, on_open);
    break;
  case L_COUNT:
  case L_READ: {
    uv_buf_t b = uv_buf_init(r->chunk, sizeof r->chunk);
    rc = uv_fs_read(r->L->loop, &r->req, r->fd, &b, 1, r->off, on_read);
    break;
  }
  case L_DRAIN:
    if (nl_http_resp_queued(r->resp) <= HIGH_WATER) {
      r->state = L_READ;
      step(r);
    }
    return; /* on_drain goes on */
  case L_WAIT:
    uv_timer_start(&r->timer, on_tick, r->L->poll_ms ? r->L->poll_ms : DEFAULT_POLL_MS, 0);
    return;
  case L_STAT:
    rc = uv_fs_stat(r->L->loop, &r->req, r->path, on_stat);
    break;
  case L_CLOSE:
  case L_DONE:
    return;
  }
  if (rc < 0) {
    nl_warn("kubelet server: logs of %s: %s", r->id, uv_strerror(rc));
    finish(r, 500, NULL);
  }
}

/* ---- the handler -------------------------------------------------------- */

static void send_error(nl_http_resp_t *resp, int status, const char *msg) {
  nl_info("kubelet server: containerLogs: %d %s", status, msg ? msg : "");
  nl_http_resp_send_str(resp, status, msg);
}

void nl_kserver_logs_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                             nl_http_resp_t *resp) {
  nl_kserver_logs_t *L = ctx;
  /* /containerLogs/{podNamespace}/{podID}/{containerName} */
  const char *p = req->path + strlen("/containerLogs/");
  char *parts[3] = {NULL, NULL, NULL};
  int n = 0;
  while (n < 3) {
    const char *slash = strchr(p, '/');
    size_t len = slash && n < 2 ? (size_t)(slash - p) : strlen(p);
    parts[n++] = nl_http_unescape(p, len);
    if (!slash || n == 3) break;
    p = slash + 1;
  }
  const char *missing = !parts[1] || !*parts[1]   ? "{\"message\": \"Missing podID.\"}"
                        : !parts[2] || !*parts[2] ? "{\"message\": \"Missing container name.\"}"
                        : !parts[0] || !*parts[0] ? "{\"message\": \"Missing podNamespace.\"}"
                                                  : NULL;
  reader_t *r = NULL;
  char *id = NULL, *msg = NULL;
  if (missing) {
    send_error(resp, 400, missing);
    goto out;
  }
  nl_crilog_opts_t o;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
  int bad = nl_crilog_opts_parse(req->query, now_ns, &o);
  if (bad == 400) {
    send_error(resp, 400, "{\"message\": \"Unable to decode query.\"}");
    goto out;
  }
  if (bad) {
    send_error(resp, 422, "{\"message\": \"Invalid request.\"}");
    goto out;
  }
  int status = L->lookup(L->lookup_ctx, parts[0], parts[1], parts[2], o.previous, &id, &msg);
  if (status) {
    send_error(resp, status, msg);
    goto out;
  }
  nl_vlog(4, "kubelet server: %s reads the log of %s/%s/%s (container %s)", user->name, parts[0],
          parts[1], parts[2], id);
  r = nl_xcalloc(1, sizeof(*r));
  r->L = L;
  r->resp = resp;
  r->opts = o;
  r->fd = -1;
  r->id = nl_steal(&id);
  r->last_state_check = uv_now(L->loop);
  nl_crilog_writer_init(&r->w, &o);
  uv_timer_init(L->loop, &r->timer);
  r->timer.data = r;
  nl_http_resp_on_abort(resp, on_abort, r);
  r->state = L_STATUS;
  step(r);
out:
  for (int i = 0; i < 3; i++) free(parts[i]);
  free(id);
  free(msg);
}
