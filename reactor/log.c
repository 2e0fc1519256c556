#include "reactor/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static struct {
  int verbosity;
  int fd;
} log_state = {0, 2};

void nl_log_set_verbosity(int v) { log_state.verbosity = v; }
int nl_log_verbosity(void) { return log_state.verbosity; }
void nl_log_set_fd(int fd) { log_state.fd = fd < 0 ? 2 : fd; }

void nl_log_emit(char severity, const char *file, int line, const char *fmt, ...) {
  char buf[4096];
  struct timeval tv;
  struct tm tm;
  gettimeofday(&tv, NULL);
  localtime_r(&tv.tv_sec, &tm);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  int n = snprintf(buf, sizeof buf, "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ", severity,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   (long)tv.tv_usec, (int)getpid(), base, line);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof buf - 2) len = sizeof buf - 2; /* truncated: keep the newline */
  buf[len++] = '\n';
  ssize_t w = write(log_state.fd, buf, len);
  (void)w;
}
