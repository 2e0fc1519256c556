/* Termination messages (upstream kuberuntime_container.go getTerminationMessage
 * and readLastStringFromContainerLogs). */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "managers/runtime_internal.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

#define MAX_MSG_BYTES 4096      /* maxContainerTerminationMessageLength */
#define MAX_LOG_BYTES 2048      /* maxContainerTerminationMessageLogLength */
#define MAX_LOG_LINES 80        /* maxContainerTerminationMessageLogLines */

/* CRI log lines are "<RFC3339Nano> <stream> <P|F> <content>": P marks a partial
 * line continued by the next record. */
char *nl_runtime_tail_cri_log(const char *data, size_t len, size_t max_lines, size_t max_bytes) {
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
  int32_t exit_code;
  char *msg;
  nl_termmsg_cb cb;
  void *ctx;
} tm_job_t;

static char *read_tail(const char *path, size_t max, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  off_t off = 0;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size > max) off = st.st_size - (off_t)max;
  char *buf = nl_xmalloc(max + 1);
  ssize_t n = pread(fd, buf, max, off);
  close(fd);
  if (n < 0) n = 0;
  buf[n] = 0;
  *len = (size_t)n;
  return buf;
}

static void tm_work(uv_work_t *w) {
  tm_job_t *j = container_of(w, tm_job_t, w);
  size_t len = 0;
  if (j->host_path) {
    int fd = open(j->host_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char *buf = nl_xmalloc(MAX_MSG_BYTES + 1);
      ssize_t n = read(fd, buf, MAX_MSG_BYTES);
      close(fd);
      buf[n > 0 ? n : 0] = 0;
      j->msg = buf;
    }
  }
  if ((!j->msg || !*j->msg) && j->fallback && j->exit_code != 0 && j->log_path) {
    /* 80 lines of up to a few KiB each is plenty to read from the end */
    char *data = read_tail(j->log_path, 256 * 1024, &len);
    if (data) {
      free(j->msg);
      j->msg = nl_runtime_tail_cri_log(data, len, MAX_LOG_LINES, MAX_LOG_BYTES);
      free(data);
    }
  }
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

int nl_runtime_read_termination_message(uv_loop_t *loop, const char *host_path,
                                        const char *policy, int32_t exit_code,
                                        const char *log_path, nl_termmsg_cb cb, void *ctx) {
  tm_job_t *j = nl_xcalloc(1, sizeof *j);
  j->host_path = host_path ? nl_xstrdup(host_path) : NULL;
  j->log_path = log_path ? nl_xstrdup(log_path) : NULL;
  j->fallback = policy && strcmp(policy, "FallbackToLogsOnError") == 0;
  j->exit_code = exit_code;
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
