#include "reactor/fs.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

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
