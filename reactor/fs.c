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

/* As Go's os.MkdirAll: a stat first, so that the usual case (the directory is
 * there: a pod's directories at each of its syncs) is one system call, not a
 * mkdir of every component from the root; parents only when missing. */
static int mkdir_p(char *buf, mode_t mode) {
  struct stat st;
  if (stat(buf, &st) == 0) return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
  if (errno != ENOENT) return -errno;
  char *slash = strrchr(buf, '/');
  if (slash && slash != buf) {
    *slash = 0;
    int r = mkdir_p(buf, mode);
    *slash = '/';
    if (r < 0) return r;
  }
  if (mkdir(buf, mode) == 0) return 0;
  if (errno != EEXIST) return -errno;
  /* made meanwhile by someone else, or a dangling link */
  if (stat(buf, &st) < 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int nl_mkdir_p(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
  return mkdir_p(buf, mode);
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
