/* Runs on the thread pool: only blocking syscalls and private memory here, no
 * logging of decisions, no loop state (see file_scan.h). */
#include "sources/file_scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/xalloc.h"

uint64_t nl__file_hash(const void *data, size_t len) {
  /* FNV-1a 64: enough to tell "same bytes again" apart from an edit. */
  const unsigned char *p = data;
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h | 1; /* never 0, so 0 can mean "none" */
}

static nl_file_key_t key_of(const struct stat *st) {
  return (nl_file_key_t){
      .dev = st->st_dev,
      .ino = st->st_ino,
      .size = st->st_size,
      .mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
      .ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec,
  };
}

static bool key_equal(const nl_file_key_t *a, const nl_file_key_t *b) {
  return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

static nl_file_result_t *add_result(nl_file_scan_t *s, char *path) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 16;
    s->results = nl_xrealloc(s->results, s->cap * sizeof *s->results);
  }
  nl_file_result_t *r = &s->results[s->n++];
  memset(r, 0, sizeof *r);
  r->path = path;
  return r;
}

/* Reads at most max+1 bytes of an open regular file: a file that grows past the
 * cap while being read is still rejected. */
static int read_capped(int fd, size_t max, char **out, size_t *out_len) {
  size_t cap = 4096, len = 0;
  char *buf = nl_xmalloc(cap + 1);
  for (;;) {
    if (len == cap) {
      if (cap > max) break;
      cap *= 2;
      buf = nl_xrealloc(buf, cap + 1);
    }
    ssize_t r = read(fd, buf + len, cap - len);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      free(buf);
      return e;
    }
    if (r == 0) break;
    len += (size_t)r;
  }
  if (len > max) {
    free(buf);
    return EFBIG;
  }
  buf[len] = '\0';
  *out = buf;
  *out_len = len;
  return 0;
}

static void scan_file(nl_file_scan_t *s, char *path, const char *name) {
  nl_file_result_t *r = add_result(s, path);
  const nl_file_entry_t *known = nl_map_get(s->known, path);
  bool force = s->force_all || (name && nl_map_has(&s->force, name));

  struct stat st;
  if (stat(path, &st) < 0) { /* follows symlinks, as upstream's os.Stat */
    r->err = errno;
    if (r->err == ENOENT && lstat(path, &st) < 0) {
      /* removed since readdir (not a dangling link): as if never listed */
      free(r->path);
      s->n--;
    }
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    r->not_regular = true;
    r->key = key_of(&st);
    return;
  }
  r->key = key_of(&st);
  if (!force && known && known->have_hash && key_equal(&known->key, &r->key)) {
    r->unchanged = true;
    r->hash = known->hash;
    return;
  }
  if ((size_t)st.st_size > s->max_bytes) {
    r->err = EFBIG;
    return;
  }
  /* O_NONBLOCK: the file may have been replaced by a FIFO since the stat. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    r->err = errno;
    return;
  }
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    r->err = S_ISREG(st.st_mode) ? errno : EINVAL;
    close(fd);
    return;
  }
  r->key = key_of(&st); /* of what is read: a later write changes it again */
  r->err = read_capped(fd, s->max_bytes, &r->data, &r->len);
  close(fd);
  if (r->err) return;
  r->hash = nl__file_hash(r->data, r->len);
  if (known && known->have_hash && known->hash == r->hash) {
    r->unchanged = true;
    free(r->data);
    r->data = NULL;
  }
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void scan_dir(nl_file_scan_t *s) {
  DIR *d = opendir(s->path);
  if (!d) {
    s->kind = errno == ENOENT ? NL_FK_MISSING : NL_FK_ERROR;
    s->path_err = errno;
    return;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue; /* also "." and ".." */
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      names = nl_xrealloc(names, cap * sizeof *names);
    }
    names[n++] = nl_xstrdup(de->d_name);
  }
  closedir(d);
  if (n > 1) qsort(names, n, sizeof *names, cmp_str); /* upstream sorts too: stable order */
  for (size_t i = 0; i < n; i++) {
    scan_file(s, nl_xasprintf("%s/%s", s->path, names[i]), names[i]);
    free(names[i]);
  }
  free(names);
}

void nl__file_scan_run(uv_work_t *req) {
  nl_file_scan_t *s = container_of(req, nl_file_scan_t, req);
  struct stat st;
  if (stat(s->path, &st) < 0) {
    s->kind = errno == ENOENT || errno == ENOTDIR ? NL_FK_MISSING : NL_FK_ERROR;
    s->path_err = errno;
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    s->kind = NL_FK_DIR;
    s->path_dev = st.st_dev;
    s->path_ino = st.st_ino;
    scan_dir(s);
  } else if (S_ISREG(st.st_mode)) {
    s->kind = NL_FK_REGULAR;
    const char *base = strrchr(s->path, '/');
    scan_file(s, nl_xstrdup(s->path), base ? base + 1 : s->path);
  } else {
    s->kind = NL_FK_OTHER;
  }
}

void nl__file_scan_free(nl_file_scan_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) {
    free(s->results[i].path);
    free(s->results[i].data);
  }
  free(s->results);
  nl_map_free(&s->force, NULL);
  nl_map_free(&s->gone, NULL);
  free(s->path);
  free(s);
}
