/* Termination messages (upstream kuberuntime_container.go getTerminationMessage
 * and readLastStringFromContainerLogs). The files are read on the thread pool. */
#include "managers/termmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/buf.h"
#include "reactor/xalloc.h"

/* 80 lines of up to a few KiB each: plenty to read from the end of a log. */
#define LOG_READ_BYTES (256 * 1024)

/* CRI log lines are "<RFC3339Nano> <stream> <P|F> <content>": P marks a partial
 * line continued by the next record. */
char *nl_termmsg_tail_cri_log(const char *data, size_t len, size_t max_lines, size_t max_bytes) {
  nl_buf_t all = NL_BUF_INIT;
  const char *p = data, *end = data + len;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    const char *f = p;
    int field = 0;
    const char *content = NULL;
    bool partial = false;
    while (f < eol && field < 3) {
      const char *sp = memchr(f, ' ', (size_t)(eol - f));
      if (!sp) break;
      if (field == 2) partial = sp - f == 1 && f[0] == 'P';
      f = sp + 1;
      field++;
    }
    if (field == 3) content = f;
    if (content) {
      nl_buf_append(&all, content, (size_t)(eol - content));
      if (!partial) nl_buf_append(&all, "\n", 1);
    }
    p = eol + 1;
  }
  if (!all.data) return nl_xstrdup("");
  /* keep the last max_lines lines, then the last max_bytes bytes */
  size_t n = all.len, lines = 0, start = 0;
  for (size_t i = n; i-- > 0;) {
    if (all.data[i] == '\n' && i != n - 1 && ++lines >= max_lines) {
      start = i + 1;
      break;
    }
  }
  if (n - start > max_bytes) start = n - max_bytes;
  char *out = nl_xstrndup(all.data + start, n - start);
  nl_buf_free(&all);
  return out;
}

typedef struct tm_job {
  uv_work_t w;
  char *host_path, *log_path;
  bool fallback;
  char *msg;
  nl_termmsg_cb cb;
  void *ctx;
} tm_job_t;

/* The last max bytes of a file (upstream tail.ReadAtMost); NULL with *e set when
 * it cannot be read. */
static char *read_tail(const char *path, size_t max, size_t *len, int *e) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *e = errno;
    return NULL;
  }
  struct stat st;
  off_t off = 0;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size > max) off = st.st_size - (off_t)max;
  char *buf = nl_xmalloc(max + 1);
  ssize_t n = pread(fd, buf, max, off);
  *e = errno;
  close(fd);
  if (n < 0) {
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = (size_t)n;
  return buf;
}

static void tm_work(uv_work_t *w) {
  tm_job_t *j = container_of(w, tm_job_t, w);
  size_t len = 0;
  int e = 0;
  bool logs = j->fallback;
  if (j->host_path) {
    j->msg = read_tail(j->host_path, NL_TERMMSG_MAX_BYTES, &len, &e);
    if (j->msg) {
      logs = j->fallback && len == 0;
    } else if (e != ENOENT) {
      j->msg = nl_xasprintf("Error on reading termination log %s: %s", j->host_path, strerror(e));
      return;
    }
  }
  if (!logs) return;
  free(j->msg);
  const char *log = j->log_path ? j->log_path : "";
  char *data = read_tail(log, LOG_READ_BYTES, &len, &e);
  if (!data) {
    j->msg = nl_xasprintf(
        "Error on reading termination message from logs: failed to open log file \"%s\": %s", log,
        strerror(e));
    return;
  }
  j->msg = nl_termmsg_tail_cri_log(data, len, NL_TERMMSG_MAX_LOG_LINES, NL_TERMMSG_MAX_LOG_BYTES);
  free(data);
}

static void tm_done(uv_work_t *w, int status) {
  (void)status;
  tm_job_t *j = container_of(w, tm_job_t, w);
  j->cb(j->msg ? j->msg : "", j->ctx);
  free(j->msg);
  free(j->host_path);
  free(j->log_path);
  free(j);
}

int nl_termmsg_read(uv_loop_t *loop, const char *host_path, bool fallback_to_logs,
                    const char *log_path, nl_termmsg_cb cb, void *ctx) {
  tm_job_t *j = nl_xcalloc(1, sizeof *j);
  j->host_path = host_path ? nl_xstrdup(host_path) : NULL;
  j->log_path = log_path ? nl_xstrdup(log_path) : NULL;
  j->fallback = fallback_to_logs;
  j->cb = cb;
  j->ctx = ctx;
  int r = uv_queue_work(loop, &j->w, tm_work, tm_done);
  if (r < 0) {
    free(j->host_path);
    free(j->log_path);
    free(j);
  }
  return r;
}
