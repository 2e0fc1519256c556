#include "agent/kserver_nodelog.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/nodelog.h"
#include "reactor/buf.h"
#include "reactor/http_query.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define CHUNK (64 * 1024)
#define OUT_CHUNK (64 * 1024)   /* a work item's output, at most about this */
#define HIGH_WATER (1024 * 1024) /* queued to the client: wait for it above */
#define MAX_LINE (1024 * 1024)   /* a longer line is filtered in pieces */
#define NS 1000000000LL

/* One request. The loop and the thread pool take turns: the loop queues one
 * work item at a time (W_PRODUCE, then W_CLOSE once) and touches the fields
 * the worker uses only between them. */
typedef enum { T_FILE, T_SERVICES } target_t;

typedef struct nreq {
  nl_kserver_nodelog_t *N;
  nl_http_resp_t *resp;
  uv_work_t work;
  bool in_work, closing, aborted, streaming, ended, waiting_drain;
  target_t target;
  nl_nodelog_query_t q;
  bool query_mode;
  char *path; /* T_FILE: relative to the log directory */
  /* ---- the worker's ---- */
  bool started, done;
  int dirfd, fd;
  char *own;  /* nanolet's own log, relative to the log directory */
  size_t svc; /* T_SERVICES: the service being read */
  bool raw;   /* no filter nor tail: bytes as they are */
  bool counting;
  int64_t off, matched, skip;
  int64_t now_ns, boot_ns;
  nl_nodelog_filter_t filter;
  nl_buf_t line;
  /* ---- handed to the loop ---- */
  nl_buf_t out;
  bool html;
  int status; /* an answer instead of a body, when nothing was sent yet */
  char *msg;
  char chunk[CHUNK];
} nreq_t;

/* ---- the worker -------------------------------------------------------- */

static int64_t boot_time_ns(void) {
  FILE *f = fopen("/proc/stat", "re");
  if (!f) return 0;
  char line[256];
  long long bt = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "btime %lld", &bt) == 1) break;
  fclose(f);
  return (int64_t)bt * NS;
}

/* nanolet's own log: its standard error, when that is a file under the log
 * directory (the sysvinit and OpenRC scripts send it to /var/log/nanolet.log). */
static char *own_log(const char *dir) {
  struct stat st;
  if (fstat(2, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/fd/2", path, sizeof path - 1);
  if (n <= 0) return NULL;
  path[n] = 0;
  size_t dl = strlen(dir);
  while (dl > 1 && dir[dl - 1] == '/') dl--;
  if (strncmp(path, dir, dl) != 0 || path[dl] != '/') return NULL;
  return nl_xstrdup(path + dl + 1);
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Go's http.FileServer's listing: names sorted, directories with a '/'. */
static void list_dir(nreq_t *r, int fd) {
  int dfd = dup(fd);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d) {
    if (dfd >= 0) close(dfd);
    r->status = 500;
    r->msg = nl_xstrdup("Error reading directory\n");
    return;
  }
  char **names = NULL;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    bool dir = e->d_type == DT_DIR;
    names = nl_xrealloc(names, (n + 1) * sizeof(*names));
    names[n++] = nl_xasprintf("%s%s", e->d_name, dir ? "/" : "");
  }
  closedir(d);
  qsort(names, n, sizeof(*names), cmp_names);
  r->html = true;
  nl_buf_puts(&r->out, "<!doctype html>\n"
                       "<meta name=\"viewport\" content=\"width=device-width\">\n<pre>\n");
  for (size_t i = 0; i < n; i++) {
    nl_buf_t href = NL_BUF_INIT, text = NL_BUF_INIT;
    for (const unsigned char *c = (const unsigned char *)names[i]; *c; c++) {
      if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          strchr("-._~/", *c))
        nl_buf_append(&href, c, 1);
      else
        nl_buf_printf(&href, "%%%02X", *c);
      const char *esc = *c == '<' ? "&lt;" : *c == '>' ? "&gt;" : *c == '&' ? "&amp;"
                        : *c == '"' ? "&#34;" : *c == '\'' ? "&#39;" : NULL;
      if (esc) nl_buf_puts(&text, esc);
      else nl_buf_append(&text, c, 1);
    }
    nl_buf_printf(&r->out, "<a href=\"%.*s\">%.*s</a>\n", (int)href.len, href.data, (int)text.len,
                  text.data);
    nl_buf_free(&href);
    nl_buf_free(&text);
    free(names[i]);
  }
  free(names);
  nl_buf_puts(&r->out, "</pre>\n");
}

/* Opens what T_FILE names: a regular file (r->fd) or a directory (listed). */
static void open_file(nreq_t *r) {
  int fd = nl_nodelog_open_beneath(r->dirfd, r->path);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) != 0) {
    close(fd);
    fd = -errno;
  }
  if (fd < 0) {
    if (r->query_mode) { /* upstream's validate: the file must be there */
      r->status = 406;
      r->msg = nl_xasprintf("query: Invalid value: []string{\"%s\"}: %s\n", r->path, strerror(-fd));
    } else if (fd == -ENOENT || fd == -ENOTDIR) {
      r->status = 404;
      r->msg = nl_xstrdup("404 page not found\n");
    } else {
      r->status = 403; /* ".." or a link, which could leave the directory */
      r->msg = nl_xstrdup("403 Forbidden\n");
    }
    r->done = true;
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    list_dir(r, fd);
    close(fd);
    r->done = true;
  } else if (!S_ISREG(st.st_mode)) {
    close(fd);
    r->status = 403;
    r->msg = nl_xstrdup("403 Forbidden\n");
    r->done = true;
  } else {
    r->fd = fd;
    r->raw = true;
  }
}

/* Opens the next service's log file, or says there is none. */
static void open_service(nreq_t *r) {
  const char *s = r->q.services[r->svc];
  if (r->q.has_boot && r->q.boot < 0) {
    nl_buf_printf(&r->out, "\nboot %" PRId64 ": the log file of %s does not tell earlier boots apart\n",
                  r->q.boot, s);
    r->svc++;
    return;
  }
  char *cand[NL_NODELOG_MAX_CANDIDATES];
  size_t n = nl_nodelog_candidates(s, r->own, cand);
  int err = -ENOENT;
  for (size_t i = 0; i < n && r->fd < 0; i++) {
    int fd = nl_nodelog_open_beneath(r->dirfd, cand[i]);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      r->fd = fd;
      break;
    }
    if (fd >= 0) close(fd); /* a directory: as upstream, the next name */
    if (fd < 0 && fd != -ENOENT && fd != -ENOTDIR) {
      err = fd;
      break;
    }
  }
  for (size_t i = 0; i < n; i++) free(cand[i]);
  if (r->fd < 0) {
    if (err == -ENOENT) nl_buf_printf(&r->out, "\nlog not found for %s\n", s);
    else nl_buf_printf(&r->out, "\nerror getting log for %s: %s\n", s, strerror(-err));
    r->svc++;
    return;
  }
  r->raw = !nl_nodelog_query_filters(&r->q) && !r->q.has_tail;
  r->counting = r->q.has_tail;
  r->off = r->matched = r->skip = 0;
  nl_nodelog_filter_init(&r->filter, &r->q, r->now_ns, r->boot_ns);
}

/* One line (without '\n'): counted, skipped or written. */
static void one_line(nreq_t *r, const char *s, size_t len, bool newline) {
  if (!nl_nodelog_filter_line(&r->filter, s, len)) return;
  if (r->counting) {
    r->matched++;
  } else if (r->skip > 0) {
    r->skip--;
  } else {
    nl_buf_append(&r->out, s, len);
    if (newline) nl_buf_puts(&r->out, "\n");
  }
}

static void lines(nreq_t *r, const char *data, size_t n, bool eof) {
  while (n > 0) {
    const char *nl = memchr(data, '\n', n);
    size_t take = nl ? (size_t)(nl - data) : n;
    if (r->line.len + take > MAX_LINE) take = MAX_LINE - r->line.len;
    nl_buf_append(&r->line, data, take);
    data += take;
    n -= take;
    if (n > 0 && *data == '\n') {
      data++;
      n--;
    } else if (r->line.len < MAX_LINE) {
      break; /* the line goes on in the next chunk */
    }
    one_line(r, r->line.data ? r->line.data : "", r->line.len, true);
    nl_buf_reset(&r->line);
  }
  if (eof && r->line.len) { /* the last line, without its newline */
    one_line(r, r->line.data, r->line.len, false);
    nl_buf_reset(&r->line);
  }
}

/* Reads the open file on until OUT_CHUNK is ready or its end. */
static void read_file(nreq_t *r) {
  while (r->out.len < OUT_CHUNK) {
    ssize_t n = pread(r->fd, r->chunk, sizeof r->chunk, r->off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      nl_buf_printf(&r->out, "\nerror reading log: %s\n", strerror(errno));
      n = 0;
    }
    r->off += n;
    if (r->raw) {
      nl_buf_append(&r->out, r->chunk, (size_t)n);
    } else {
      lines(r, r->chunk, (size_t)n, n == 0);
    }
    if (n > 0) continue;
    /* The end: after counting, the lines to keep are the last tail ones. */
    if (r->counting) {
      r->counting = false;
      r->skip = r->matched > r->q.tail ? r->matched - r->q.tail : 0;
      r->off = 0;
      nl_nodelog_filter_init(&r->filter, &r->q, r->now_ns, r->boot_ns);
      continue;
    }
    close(r->fd);
    r->fd = -1;
    r->svc++;
    return;
  }
}

static void produce(nreq_t *r) {
  if (!r->started) {
    r->started = true;
    const char *dir = r->N->log_dir ? r->N->log_dir : "/var/log";
    r->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r->dirfd < 0) {
      r->status = 500;
      r->msg = nl_xasprintf("%s: %s\n", dir, strerror(errno));
      r->done = true;
      return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->now_ns = (int64_t)ts.tv_sec * NS + ts.tv_nsec;
    r->boot_ns = boot_time_ns();
    r->own = own_log(dir);
    if (r->target == T_FILE) open_file(r);
  }
  while (!r->done && r->out.len < OUT_CHUNK) {
    if (r->fd >= 0) {
      read_file(r);
    } else if (r->target == T_SERVICES && r->svc < r->q.n_services) {
      open_service(r);
    } else {
      r->done = true;
    }
  }
}

static void work_cb(uv_work_t *w) {
  nreq_t *r = w->data;
  if (r->closing) {
    if (r->fd >= 0) close(r->fd);
    if (r->dirfd >= 0) close(r->dirfd);
    r->fd = r->dirfd = -1;
    return;
  }
  produce(r);
}

/* ---- the loop ---------------------------------------------------------- */

static void after_work(uv_work_t *w, int status);
static void on_drain(void *ctx);

static void queue(nreq_t *r) {
  assert(!r->in_work);
  r->in_work = true;
  r->work.data = r;
  int rc = uv_queue_work(r->N->loop, &r->work, work_cb, after_work);
  assert(rc == 0); /* only fails for a NULL callback */
  (void)rc;
}

static void req_free(nreq_t *r) {
  nl_nodelog_query_free(&r->q);
  nl_buf_free(&r->line);
  nl_buf_free(&r->out);
  free(r->path);
  free(r->own);
  free(r->msg);
  free(r);
}

/* Answers (if not yet) and closes the files in the thread pool. */
static void finish(nreq_t *r) {
  if (!r->ended) {
    r->ended = true;
    if (r->streaming) nl_http_resp_end(r->resp);
    else nl_http_resp_send_str(r->resp, r->status ? r->status : 200, r->msg ? r->msg : "");
    if (r->status >= 400) { /* the message without its newline */
      const char *m = r->msg ? r->msg : "";
      nl_info("kubelet server: logs: %d %.*s", r->status, (int)strcspn(m, "\n"), m);
    }
  }
  r->closing = true;
  queue(r);
}

static void after_work(uv_work_t *w, int status) {
  (void)status;
  nreq_t *r = w->data;
  r->in_work = false;
  if (r->closing) {
    req_free(r);
    return;
  }
  if (r->aborted) {
    finish(r);
    return;
  }
  if (r->out.len && !r->status) {
    if (!r->streaming) {
      r->streaming = true;
      if (r->html) nl_http_resp_header(r->resp, "Content-Type", "text/html; charset=utf-8");
      nl_http_resp_on_drain(r->resp, on_drain, r);
      nl_http_resp_stream(r->resp, 200);
    }
    nl_http_resp_write(r->resp, r->out.data, r->out.len);
    nl_buf_reset(&r->out);
  }
  if (r->done) {
    finish(r);
  } else if (nl_http_resp_queued(r->resp) > HIGH_WATER) {
    r->waiting_drain = true;
  } else {
    queue(r);
  }
}

static void on_drain(void *ctx) {
  nreq_t *r = ctx;
  if (!r->waiting_drain) return;
  r->waiting_drain = false;
  queue(r);
}

static void on_abort(void *ctx) {
  nreq_t *r = ctx;
  r->aborted = true;
  if (r->waiting_drain) {
    r->waiting_drain = false;
    finish(r);
  } /* else the work item in flight ends it */
}

void nl_kserver_nodelog_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                                nl_http_resp_t *resp) {
  nl_kserver_nodelog_t *N = ctx;
  const char *p = req->path + strlen("/logs/");
  nl_vlog(4, "kubelet server: %s reads the node's logs: /logs/%s?%s", user->name, p, req->query);
  char *path = nl_http_unescape(p, strlen(p));
  if (!path) {
    nl_http_resp_send_str(resp, 400, "invalid URL escape\n");
    return;
  }
  nreq_t *r = nl_xcalloc(1, sizeof(*r));
  r->N = N;
  r->resp = resp;
  r->fd = r->dirfd = -1;
  r->target = T_FILE;
  r->path = path;
  if (N->query) {
    char *msg = NULL;
    int rc = nl_nodelog_query_parse(req->query, &r->q, &msg);
    if (rc > 1) {
      nl_info("kubelet server: logs: %d %s", rc, msg);
      char *body = nl_xasprintf("%s\n", msg);
      nl_http_resp_send_str(resp, rc, body);
      free(body);
      free(msg);
      req_free(r);
      return;
    }
    if (rc == 0) {
      r->query_mode = true;
      if (*path) {
        nl_http_resp_send_str(resp, 406, "path not allowed in query mode\n");
        req_free(r);
        return;
      }
      if (r->q.file) {
        free(r->path);
        r->path = nl_xstrdup(r->q.file);
      } else {
        r->target = T_SERVICES;
      }
    }
  }
  nl_http_resp_on_abort(resp, on_abort, r);
  queue(r);
}
