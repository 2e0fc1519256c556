/* Disk usage as upstream measures it (volume/util/fs and the host stats
 * provider), for the eviction manager and /stats/summary. Blocking: the
 * thread pool. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/stats.h"
#include "reactor/xalloc.h"

/* upstream's du (volume/util/fs DiskUsage): the blocks and inodes of path
 * and everything under it on the same filesystem, a file with several links
 * once. */
typedef struct du {
  dev_t dev;
  int64_t bytes, inodes;
  ino_t *linked; /* files with more than one link, seen */
  size_t n_linked;
} du_t;

static bool seen_link(du_t *d, ino_t ino) {
  for (size_t i = 0; i < d->n_linked; i++)
    if (d->linked[i] == ino) return true;
  d->linked = nl_xrealloc(d->linked, (d->n_linked + 1) * sizeof *d->linked);
  d->linked[d->n_linked++] = ino;
  return false;
}

static void du_walk(du_t *d, const char *path, const struct stat *st) {
  if (st->st_dev != d->dev) return; /* another filesystem mounted here */
  if (!S_ISDIR(st->st_mode) && st->st_nlink > 1 && seen_link(d, st->st_ino)) return;
  d->bytes += (int64_t)st->st_blocks * 512;
  d->inodes++;
  if (!S_ISDIR(st->st_mode)) return;
  DIR *dir = opendir(path);
  if (!dir) return;
  for (struct dirent *e; (e = readdir(dir));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *p = nl_xasprintf("%s/%s", path, e->d_name);
    struct stat sub;
    if (lstat(p, &sub) == 0) du_walk(d, p, &sub);
    free(p);
  }
  closedir(dir);
}

int64_t nl_stats_du(const char *path, int64_t *inodes) {
  struct stat st;
  if (lstat(path, &st) != 0) return -1;
  du_t d = {.dev = st.st_dev};
  du_walk(&d, path, &st);
  free(d.linked);
  if (inodes) *inodes += d.inodes;
  return d.bytes;
}

int64_t nl_stats_files_in(const char *dir, int64_t *inodes) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int64_t bytes = 0;
  for (struct dirent *e; (e = readdir(d));) {
    char *p = nl_xasprintf("%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && !S_ISDIR(st.st_mode)) {
      bytes += (int64_t)st.st_blocks * 512;
      if (inodes) ++*inodes;
    }
    free(p);
  }
  closedir(d);
  return bytes;
}
