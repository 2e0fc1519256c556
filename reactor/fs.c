#include "reactor/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/xalloc.h"

int nl_mkdir_p(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, mode) < 0 && errno != EEXIST) return -errno;
    *p = '/';
  }
  if (mkdir(buf, mode) < 0 && errno != EEXIST) return -errno;
  struct stat st;
  if (stat(buf, &st) < 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int nl_fs_replace(const char *path, const void *data, size_t len, const char **step) {
  char *tmp = nl_xasprintf("%s.tmp", path);
  char *dir = nl_xstrdup(path);
  int err = 0;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    err = errno, *step = "create";
    goto out;
  }
  if (write_all(fd, data, len) < 0 || fsync(fd) < 0) {
    err = errno, *step = "write";
    close(fd);
    unlink(tmp);
    goto out;
  }
  close(fd);
  if (rename(tmp, path) < 0) {
    err = errno, *step = "rename";
    unlink(tmp);
    goto out;
  }
  /* the rename itself must survive a power cut */
  fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    err = errno, *step = "open directory";
    goto out;
  }
  if (fsync(fd) < 0) err = errno, *step = "fsync directory";
  close(fd);
out:
  free(tmp);
  free(dir);
  return err;
}
