/* The atomic writer of API volumes (upstream pkg/volume/util/atomic_writer.go). */
#include "managers/atomic_writer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "managers/volumes.h"
#include "reactor/fs.h"
#include "reactor/xalloc.h"

#define DATA_DIR "..data"
#define DATA_TMP "..data_tmp"
#define MAX_PATH_LEN 4096
#define MAX_FILE_NAME_LEN 255

void nl_aw_files_add(nl_aw_file_t **files, size_t *n, const char *path, const void *data,
                     size_t len, uint32_t mode) {
  nl_aw_file_t *f = NULL;
  for (size_t i = 0; i < *n && !f; i++)
    if (strcmp((*files)[i].path, path) == 0) f = &(*files)[i];
  if (f) {
    free(f->data);
  } else {
    *files = nl_xrealloc(*files, (*n + 1) * sizeof **files);
    f = &(*files)[(*n)++];
    f->path = nl_xstrdup(path);
  }
  f->data = nl_xmalloc(len ? len : 1);
  if (len) memcpy(f->data, data, len);
  f->len = len;
  f->mode = mode;
}

void nl_aw_files_free(nl_aw_file_t *files, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(files[i].path);
    free(files[i].data);
  }
  free(files);
}

/* upstream validatePath */
static int check_path(const char *p, nl_err_t **err) {
  if (!*p) return nl_err_set(err, NL_EINVAL, "invalid path: must not be empty");
  if (strlen(p) > MAX_PATH_LEN)
    return nl_err_set(err, NL_EINVAL, "invalid path: must be less than or equal to %d characters",
                      MAX_PATH_LEN);
  if (p[0] == '/') return nl_err_set(err, NL_EINVAL, "invalid path: must be relative path: %s", p);
  if (strncmp(p, "..", 2) == 0)
    return nl_err_set(err, NL_EINVAL, "invalid path: must not start with '..': %s", p);
  for (const char *s = p; *s;) {
    size_t k = strcspn(s, "/");
    if (k > MAX_FILE_NAME_LEN)
      return nl_err_set(err, NL_EINVAL,
                        "invalid path: must not contain path elements longer than %d "
                        "characters: %s", MAX_FILE_NAME_LEN, p);
    if (k == 2 && s[0] == '.' && s[1] == '.')
      return nl_err_set(err, NL_EINVAL, "invalid path: must not contain '..': %s", p);
    s += k;
    if (*s) s++;
  }
  return 0;
}

/* The first path element (a new string): what the user-visible symlink names. */
static char *top(const char *p) { return nl_xstrndup(p, strcspn(p, "/")); }

typedef struct strs {
  char **v;
  size_t n;
} strs_t;

static void strs_free(strs_t *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
}

/* The regular files under base/rel, as paths relative to base. */
static void walk(const char *base, const char *rel, strs_t *out) {
  char *dir = *rel ? nl_xasprintf("%s/%s", base, rel) : nl_xstrdup(base);
  DIR *d = opendir(dir);
  free(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char *r = *rel ? nl_xasprintf("%s/%s", rel, e->d_name) : nl_xstrdup(e->d_name);
    char *full = nl_xasprintf("%s/%s", base, r);
    struct stat st;
    if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
      walk(base, r, out);
      free(r);
    } else {
      out->v = nl_xrealloc(out->v, (out->n + 1) * sizeof *out->v);
      out->v[out->n++] = r;
    }
    free(full);
  }
  closedir(d);
}

/* The mode a file of the payload has on disk: the ownership pass adds owner
 * and group read. */
static mode_t disk_mode(const nl_aw_file_t *f, int64_t fs_group) {
  return (f->mode & 07777) | (fs_group >= 0 ? S_IRUSR | S_IRGRP : 0);
}

static bool same_file(const char *path, const nl_aw_file_t *f, int64_t fs_group) {
  struct stat st;
  if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != f->len ||
      (st.st_mode & 07777) != disk_mode(f, fs_group) ||
      (fs_group >= 0 && st.st_gid != (gid_t)fs_group))
    return false;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  unsigned char buf[8192];
  size_t off = 0;
  bool same = true;
  while (same) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      same = r == 0 && off == f->len;
      break;
    }
    same = off + (size_t)r <= f->len && memcmp(f->data + off, buf, (size_t)r) == 0;
    off += (size_t)r;
  }
  close(fd);
  return same;
}

/* The payload equals the content of the current data directory. */
static bool unchanged(const char *data_dir, const strs_t *old, const nl_aw_file_t *files,
                      size_t n, int64_t fs_group) {
  if (old->n != n) return false;
  for (size_t i = 0; i < n; i++) {
    char *p = nl_xasprintf("%s/%s", data_dir, files[i].path);
    bool same = same_file(p, &files[i], fs_group);
    free(p);
    if (!same) return false;
  }
  return true;
}

static int write_file(const char *ts, const nl_aw_file_t *f, nl_err_t **err) {
  char *p = nl_xasprintf("%s/%s", ts, f->path);
  char *slash = strrchr(p, '/');
  *slash = 0;
  int r = nl_mkdir_p(p, 0755);
  *slash = '/';
  if (r < 0) {
    nl_err_set(err, -r, "mkdir for %s: %s", p, strerror(-r));
    free(p);
    return -1;
  }
  int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  size_t off = 0;
  while (fd >= 0 && off < f->len) {
    ssize_t w = write(fd, f->data + off, f->len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) break;
    off += (size_t)w;
  }
  /* the mode as given, whatever the umask */
  if (fd < 0 || off < f->len || fchmod(fd, f->mode & 07777) < 0) {
    nl_err_set(err, errno, "write %s: %s", p, strerror(errno));
    if (fd >= 0) close(fd);
    free(p);
    return -1;
  }
  close(fd);
  free(p);
  return 0;
}

int nl_volume_set_ownership(const char *path, unsigned gid, bool read_only, bool recurse,
                            nl_err_t **err) {
  struct stat st;
  if (lstat(path, &st) < 0 || lchown(path, (uid_t)-1, (gid_t)gid) < 0)
    return nl_err_set(err, errno, "set ownership of %s: %s", path, strerror(errno));
  if (S_ISLNK(st.st_mode)) return 0;
  /* rwMask 0660 or roMask 0440; directories execMask 0110 and setgid */
  mode_t m = (st.st_mode & 07777) | S_IRUSR | S_IRGRP | (read_only ? 0 : S_IWUSR | S_IWGRP);
  if (S_ISDIR(st.st_mode)) m |= S_ISGID | S_IXUSR | S_IXGRP;
  if (chmod(path, m) < 0)
    return nl_err_set(err, errno, "set mode of %s: %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode) || !recurse) return 0;
  DIR *d = opendir(path);
  if (!d) return nl_err_set(err, errno, "open %s: %s", path, strerror(errno));
  struct dirent *e;
  int r = 0;
  while (r == 0 && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char *c = nl_xasprintf("%s/%s", path, e->d_name);
    r = nl_volume_set_ownership(c, gid, read_only, true, err);
    free(c);
  }
  closedir(d);
  return r;
}

static char *new_ts_dir(const char *dir, nl_err_t **err) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct tm tm;
  gmtime_r(&now.tv_sec, &tm);
  char stamp[64];
  strftime(stamp, sizeof stamp, "..%Y_%m_%d_%H_%M_%S.", &tm);
  char *ts = nl_xasprintf("%s/%sXXXXXX", dir, stamp);
  /* 0755 whatever the umask: group and others walk the tree (upstream) */
  if (!mkdtemp(ts) || chmod(ts, 0755) < 0) {
    nl_err_set(err, errno, "create data directory in %s: %s", dir, strerror(errno));
    free(ts);
    return NULL;
  }
  return ts;
}

static bool in_payload_top(const nl_aw_file_t *files, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++) {
    size_t k = strcspn(files[i].path, "/");
    if (strlen(name) == k && strncmp(files[i].path, name, k) == 0) return true;
  }
  return false;
}

/* Swaps ..data to ts (a path in dir) with one rename. */
static int swap(const char *dir, const char *ts, nl_err_t **err) {
  char *tmp = nl_xasprintf("%s/" DATA_TMP, dir), *data = nl_xasprintf("%s/" DATA_DIR, dir);
  unlink(tmp);
  int r = 0;
  if (symlink(strrchr(ts, '/') + 1, tmp) < 0 || rename(tmp, data) < 0)
    r = nl_err_set(err, errno, "swap %s: %s", data, strerror(errno));
  free(tmp);
  free(data);
  return r;
}

static int link_visible(const char *dir, const nl_aw_file_t *files, size_t n, nl_err_t **err) {
  for (size_t i = 0; i < n; i++) {
    char *name = top(files[i].path);
    char *link = nl_xasprintf("%s/%s", dir, name), *target = nl_xasprintf(DATA_DIR "/%s", name);
    struct stat st;
    int r = 0;
    if (lstat(link, &st) < 0 && symlink(target, link) < 0)
      r = nl_err_set(err, errno, "symlink %s: %s", link, strerror(errno));
    free(name);
    free(link);
    free(target);
    if (r < 0) return -1;
  }
  return 0;
}

static int write_payload(const char *dir, const nl_aw_file_t *files, size_t n, int64_t fs_group,
                         nl_err_t **err) {
  char *data = nl_xasprintf("%s/" DATA_DIR, dir);
  char old_name[NAME_MAX + 1];
  ssize_t k = readlink(data, old_name, sizeof old_name - 1);
  old_name[k > 0 ? k : 0] = 0;
  strs_t old = {0};
  if (k > 0) walk(data, "", &old);
  if (k > 0 && unchanged(data, &old, files, n, fs_group)) {
    free(data);
    strs_free(&old);
    return link_visible(dir, files, n, err) < 0 ? -1 : 0;
  }
  free(data);
  char *ts = new_ts_dir(dir, err);
  int r = ts ? 0 : -1;
  for (size_t i = 0; r == 0 && i < n; i++) r = write_file(ts, &files[i], err);
  if (r == 0 && fs_group >= 0) r = nl_volume_set_ownership(ts, (unsigned)fs_group, true, true, err);
  if (r == 0) r = swap(dir, ts, err);
  if (r < 0) {
    if (ts) nl__rm_rf(ts);
    free(ts);
    strs_free(&old);
    return -1;
  }
  free(ts);
  r = link_visible(dir, files, n, err);
  /* stale user-visible paths, then the previous data directory */
  for (size_t i = 0; r == 0 && i < old.n; i++) {
    char *name = top(old.v[i]);
    if (!in_payload_top(files, n, name)) {
      char *p = nl_xasprintf("%s/%s", dir, name);
      unlink(p);
      free(p);
    }
    free(name);
  }
  strs_free(&old);
  if (r == 0 && k > 0 && strncmp(old_name, "..", 2) == 0 && !strchr(old_name, '/')) {
    char *p = nl_xasprintf("%s/%s", dir, old_name);
    nl__rm_rf(p);
    free(p);
  }
  return r < 0 ? -1 : 1;
}

int nl_atomic_write(const char *dir, const nl_aw_file_t *files, size_t n, int64_t fs_group,
                    const char *what, nl_err_t **err) {
  for (size_t i = 0; i < n; i++)
    if (check_path(files[i].path, err) < 0) return nl_err_wrap(err, "%s", what);
  int r = write_payload(dir, files, n, fs_group, err);
  if (r == 0 || r == 1) {
    if (fs_group >= 0 && nl_volume_set_ownership(dir, (unsigned)fs_group, true, false, err) < 0) return nl_err_wrap(err, "%s", what);
    return r;
  }
  return nl_err_wrap(err, "%s", what);
}
