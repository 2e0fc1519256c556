#include "managers/envfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/xalloc.h"

typedef struct cursor {
  const char *p, *end;
  int line;
} cursor_t;

/* The next line (without its newline) in [*s, *e); false at the end. */
static bool next_line(cursor_t *c, const char **s, const char **e) {
  if (c->p >= c->end) return false;
  const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
  *s = c->p;
  *e = nl ? nl : c->end;
  c->p = nl ? nl + 1 : c->end;
  c->line++;
  return true;
}

static bool blank(char ch) { return ch == ' ' || ch == '\t'; }

static const char *skip_blanks(const char *s, const char *e) {
  while (s < e && blank(*s)) s++;
  return s;
}

/* After a closing quote: only blanks, then nothing or a comment. */
static bool tail_ok(const char *s, const char *e) {
  s = skip_blanks(s, e);
  return s == e || *s == '#';
}

int nl_envfile_find(const char *data, size_t len, const char *key, char **value, nl_err_t **err) {
  cursor_t c = {data, data + len, 0};
  size_t klen = strlen(key);
  const char *s, *e;
  *value = NULL;
  while (next_line(&c, &s, &e)) {
    s = skip_blanks(s, e);
    if (s == e || *s == '#') continue;
    const char *eq = memchr(s, '=', (size_t)(e - s));
    if (!eq) return nl_err_set(err, NL_EINVAL, "line %d: missing '='", c.line);
    if (eq == s) return nl_err_set(err, NL_EINVAL, "line %d: empty variable name", c.line);
    if (blank(eq[-1]))
      return nl_err_set(err, NL_EINVAL, "line %d: whitespace before '=' is not allowed", c.line);
    bool mine = (size_t)(eq - s) == klen && memcmp(s, key, klen) == 0;
    const char *v = eq + 1;
    if (v < e && blank(*v)) { /* `KEY= 'x'`: KEY is empty, as in a shell */
      if (mine) return 0;
      continue;
    }
    if (v == e || *v != '\'')
      return nl_err_set(err, NL_EINVAL, "line %d: value must be enclosed in single quotes", c.line);
    int start = c.line;
    v++;
    char *acc = NULL;
    size_t n = 0;
    for (;;) {
      const char *q = memchr(v, '\'', (size_t)(e - v));
      size_t take = (size_t)((q ? q : e) - v);
      if (mine) {
        acc = nl_xrealloc(acc, n + take + 2);
        memcpy(acc + n, v, take);
        n += take;
        if (!q) acc[n++] = '\n';
        acc[n] = 0;
      }
      if (q) {
        if (!tail_ok(q + 1, e)) {
          free(acc);
          return nl_err_set(err, NL_EINVAL, "line %d: unexpected content after closing quote", c.line);
        }
        break;
      }
      if (!next_line(&c, &v, &e)) {
        free(acc);
        return nl_err_set(err, NL_EINVAL, "line %d: unclosed single quote", start);
      }
    }
    if (!mine) continue;
    if (memchr(acc, 0, n)) { /* a C string, and then an environment, cannot hold it */
      free(acc);
      return nl_err_set(err, NL_EINVAL, "line %d: the value holds a NUL byte", start);
    }
    if (n == 0) {
      free(acc);
      return 0;
    }
    *value = acc;
    return 1;
  }
  return 0;
}

/* Opens root/path one component at a time, never through a symbolic link. */
static int open_below(const char *root, const char *path, nl_err_t **err) {
  if (!*path || path[0] == '/')
    return nl_err_set(err, NL_EINVAL, "path %s must be relative", path), -1;
  int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return nl_err_set(err, errno, "open %s: %s", root, strerror(errno)), -1;
  char *copy = nl_xstrdup(path), *save = NULL;
  char *part = strtok_r(copy, "/", &save);
  while (part) {
    char *next = strtok_r(NULL, "/", &save);
    if (strcmp(part, "..") == 0) {
      nl_err_set(err, NL_EINVAL, "path %s must not contain '..'", path);
      close(fd);
      fd = -1;
      break;
    }
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (next ? O_DIRECTORY : 0);
    int sub = openat(fd, part, flags);
    int e = errno;
    close(fd);
    fd = sub;
    if (fd < 0) {
      nl_err_set(err, e, "open %s/%s: %s", root, path,
                 e == ELOOP ? "a symbolic link (not followed)" : strerror(e));
      break;
    }
    part = next;
  }
  free(copy);
  return fd;
}

int nl_envfile_read(const char *root, const char *path, const char *key, char **value,
                    nl_err_t **err) {
  *value = NULL;
  int fd = open_below(root, path, err);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return nl_err_set(err, EINVAL, "%s/%s: not a regular file", root, path);
  }
  if (st.st_size > NL_ENVFILE_MAX_BYTES) {
    close(fd);
    return nl_err_set(err, EFBIG, "%s/%s: larger than %d bytes", root, path, NL_ENVFILE_MAX_BYTES);
  }
  /* what it holds now; what a writer adds meanwhile is not read */
  char *buf = nl_xmalloc((size_t)st.st_size + 1);
  size_t n = 0;
  while (n < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      free(buf);
      return nl_err_set(err, e, "read %s/%s: %s", root, path, strerror(e));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  int rc = nl_envfile_find(buf, n, key, value, err);
  free(buf);
  return rc;
}
