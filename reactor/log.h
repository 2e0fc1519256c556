/* klog-style logging: "I1122 10:00:00.000000    1234 file.c:42] message".
 * Severity I/W/E; verbose lines (nl_vlog) print when -v is at least their level.
 * Each line is one write(2) to stderr, as klog does; the verbosity is the one piece
 * of process-wide state in nanolet, because every module logs. */
#ifndef NL_LOG_H
#define NL_LOG_H

void nl_log_set_verbosity(int v);
int nl_log_verbosity(void);
/* Redirects output to fd (tests); -1 restores stderr. */
void nl_log_set_fd(int fd);

void nl_log_emit(char severity, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define NL_V(n) (nl_log_verbosity() >= (n))
#define nl_info(...) nl_log_emit('I', __FILE__, __LINE__, __VA_ARGS__)
#define nl_warn(...) nl_log_emit('W', __FILE__, __LINE__, __VA_ARGS__)
#define nl_error(...) nl_log_emit('E', __FILE__, __LINE__, __VA_ARGS__)
#define nl_vlog(n, ...)                                        \
  do {                                                         \
    if (NL_V(n)) nl_log_emit('I', __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif
