#include "agent/cmd_shutdown.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/config.h"
#include "agent/kubelet_shutdown.h"

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The agent's configuration as the agent reads it: 0, 2 on errors, -1 after
 * --help. */
static int load(nl_kubelet_config_t *cfg, int argc, char **argv) {
  nl_err_t *err = NULL;
  bool help = false, version = false;
  if (nl_config_read(cfg, argc, argv, &err) < 0 ||
      nl_flags_parse(cfg, argc, argv, &help, &version, &err) < 0 ||
      nl_config_validate(cfg, &err) < 0) {
    fprintf(stderr, "nanolet shutdown-hook: %s\n", nl_err_msg(err));
    nl_err_free(&err);
    return 2;
  }
  if (help || version) {
    printf("Usage: nanolet shutdown-hook [nanolet's flags, e.g. --config FILE]\n"
           "Tells the running nanolet that the node is shutting down and waits until it has\n"
           "stopped the pods (at most shutdownGracePeriod). Run it before halt or reboot.\n");
    return -1;
  }
  return 0;
}

/* Connects to the agent; -1 with errno when none listens. */
static int dial(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(sa.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* Prints the agent's lines until it closes the connection or the deadline. */
static int follow(int fd, int64_t deadline_ms) {
  char buf[513];
  bool done = false;
  for (;;) {
    int64_t left = deadline_ms - mono_ms();
    if (left <= 0) {
      fprintf(stderr, "nanolet shutdown-hook: no answer within the shutdown grace period\n");
      return 1;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, (int)left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf[n] = 0;
    fputs(buf, stdout);
    fflush(stdout);
    /* the agent's last line (one short line: it comes in one read) */
    if (strstr(buf, "done in") || strstr(buf, "is off")) done = true;
  }
  if (!done) fprintf(stderr, "nanolet shutdown-hook: the agent stopped before it finished\n");
  return done ? 0 : 1;
}

int nl_cmd_shutdown_hook(int argc, char **argv) {
  nl_kubelet_config_t cfg;
  int rc = load(&cfg, argc, argv);
  if (rc) {
    nl_config_free(&cfg);
    return rc < 0 ? 0 : rc;
  }
  char *path = nl_kshutdown_socket_path(cfg.root_dir);
  int64_t deadline = mono_ms() + cfg.shutdown_grace_period / 1000000 + 1000;
  nl_config_free(&cfg);
  int fd = dial(path);
  if (fd < 0) {
    printf("nanolet is not running (%s: %s): no pods to stop\n", path, strerror(errno));
    free(path);
    return 0;
  }
  free(path);
  static const char req[] = "shutdown\n";
  if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
    fprintf(stderr, "nanolet shutdown-hook: write: %s\n", strerror(errno));
    close(fd);
    return 1;
  }
  rc = follow(fd, deadline);
  close(fd);
  return rc;
}
