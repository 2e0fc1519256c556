/* client-go's fileStore: timestamped pair files and the -current symlink. */
#include "agent/cert_store.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <mbedtls/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/fs.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

#define MAX_PEM (1u << 20)

char *nl_cert_store_current_path(const char *dir, const char *prefix) {
  return nl_xasprintf("%s/%s-current.pem", dir, prefix);
}

/* Writes path with a then b, synced, so that a rename or a
 * link made next never points at a torn file after a power cut. */
static int write_all(const char *path, const char *a, const char *b, mode_t mode,
                     nl_err_t **err) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_TRUNC, mode);
  if (fd < 0) return nl_err_set(err, errno, "write %s: %s", path, strerror(errno));
  const char *parts[] = {a, b};
  for (int i = 0; i < 2; i++) {
    size_t len = parts[i] ? strlen(parts[i]) : 0, off = 0;
    while (off < len) {
      ssize_t n = write(fd, parts[i] + off, len - off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) goto fail;
      off += (size_t)n;
    }
  }
  if (fsync(fd) < 0) goto fail;
  close(fd);
  return 0;
fail:;
  int e = errno;
  close(fd);
  unlink(path);
  return nl_err_set(err, e, "write %s: %s", path, strerror(e));
}

int nl_cert_store_update(const char *dir, const char *prefix, const char *cert_pem,
                         const char *key_pem, time_t now, char **path, nl_err_t **err) {
  *path = NULL;
  int r = nl_mkdir_p(dir, 0755);
  if (r < 0) return nl_err_set(err, -r, "mkdir %s: %s", dir, strerror(-r));
  struct tm tm;
  gmtime_r(&now, &tm);
  char ts[32];
  strftime(ts, sizeof ts, "%Y-%m-%d-%H-%M-%S", &tm);
  char *file = nl_xasprintf("%s/%s-%s.pem", dir, prefix, ts);
  /* Two pairs within a second: the later one wins, as upstream's WriteFile. */
  size_t klen = strlen(key_pem);
  char *key_nl = klen && key_pem[klen - 1] != '\n' ? nl_xasprintf("%s\n", key_pem) : NULL;
  size_t clen = strlen(cert_pem);
  char *cert_nl = clen && cert_pem[clen - 1] != '\n' ? nl_xasprintf("%s\n", cert_pem) : NULL;
  int rc = write_all(file, cert_nl ? cert_nl : cert_pem, key_nl ? key_nl : key_pem, 0600, err);
  free(key_nl);
  free(cert_nl);
  if (rc < 0) {
    free(file);
    return -1;
  }
  char *updated = nl_xasprintf("%s/%s-updated.pem", dir, prefix);
  char *current = nl_cert_store_current_path(dir, prefix);
  unlink(updated);
  if (symlink(file, updated) < 0) {
    rc = nl_err_set(err, errno, "symlink %s: %s", updated, strerror(errno));
  } else if (rename(updated, current) < 0) {
    rc = nl_err_set(err, errno, "rename %s to %s: %s", updated, current, strerror(errno));
    unlink(updated);
  }
  free(updated);
  free(current);
  if (rc < 0) {
    free(file);
    return -1;
  }
  *path = file;
  return 0;
}

int nl_cert_store_read(const char *path, char **pem, nl_err_t **err) {
  *pem = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  nl_buf_t b = NL_BUF_INIT;
  int rc = 0;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0) {
    rc = nl_err_set(err, errno, "%s: %s", path, strerror(errno));
  } else if (!S_ISREG(st.st_mode) || (size_t)st.st_size > MAX_PEM) {
    rc = nl_err_set(err, NL_EINVAL, "%s: not a regular file of at most %u bytes", path, MAX_PEM);
  } else {
    nl_buf_reserve(&b, (size_t)st.st_size + 1);
    for (;;) {
      ssize_t n = read(fd, b.data + b.len, b.cap - b.len - 1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        rc = nl_err_set(err, errno, "%s: %s", path, strerror(errno));
        break;
      }
      if (n == 0) break;
      b.len += (size_t)n;
      if (b.len > MAX_PEM) {
        rc = nl_err_set(err, NL_EINVAL, "%s: larger than %u bytes", path, MAX_PEM);
        break;
      }
      nl_buf_reserve(&b, 4096);
    }
  }
  if (fd >= 0) close(fd);
  if (rc < 0) {
    nl_buf_free(&b);
    return -1;
  }
  b.data[b.len] = 0;
  *pem = nl_buf_steal(&b);
  return 0;
}

int nl_cert_store_write_kubeconfig(const char *path, const nl_kubeconfig_t *boot,
                                   const char *pem_path, nl_err_t **err) {
  json_t *cluster = json_pack("{s:s}", "server", boot->server);
  if (boot->insecure) json_object_set_new(cluster, "insecure-skip-tls-verify", json_true());
  if (boot->ca_file) json_object_set_new(cluster, "certificate-authority", json_string(boot->ca_file));
  if (boot->ca_pem) {
    size_t len = strlen(boot->ca_pem), n = 0;
    mbedtls_base64_encode(NULL, 0, &n, (const unsigned char *)boot->ca_pem, len);
    unsigned char *b64 = nl_xmalloc(n);
    if (mbedtls_base64_encode(b64, n, &n, (const unsigned char *)boot->ca_pem, len) != 0) abort();
    json_object_set_new(cluster, "certificate-authority-data", json_stringn((char *)b64, n));
    free(b64);
  }
  if (boot->tls_server_name)
    json_object_set_new(cluster, "tls-server-name", json_string(boot->tls_server_name));
  /* JSON is YAML: client-go and every kubectl read it. */
  json_t *o = json_pack(
      "{s:s,s:s,s:[{s:s,s:o}],s:[{s:s,s:{s:s,s:s}}],s:[{s:s,s:{s:s,s:s,s:s}}],s:s}",
      "apiVersion", "v1", "kind", "Config", "clusters", "name", "default-cluster", "cluster",
      cluster, "users", "name", "default-auth", "user", "client-certificate", pem_path,
      "client-key", pem_path, "contexts", "name", "default-context", "context", "cluster",
      "default-cluster", "namespace", "default", "user", "default-auth", "current-context",
      "default-context");
  if (!o) abort();
  char *text = json_dumps(o, JSON_INDENT(2));
  json_decref(o);
  if (!text) abort();
  char *dir = nl_xstrdup(path), *slash = strrchr(dir, '/');
  int rc = 0;
  if (slash && slash != dir) {
    *slash = 0;
    int r = nl_mkdir_p(dir, 0755);
    if (r < 0) rc = nl_err_set(err, -r, "mkdir %s: %s", dir, strerror(-r));
  }
  free(dir);
  char *tmp = nl_xasprintf("%s.tmp", path);
  if (rc == 0) rc = write_all(tmp, text, "\n", 0600, err);
  if (rc == 0 && rename(tmp, path) < 0) {
    rc = nl_err_set(err, errno, "rename %s to %s: %s", tmp, path, strerror(errno));
    unlink(tmp);
  }
  free(tmp);
  free(text);
  return rc;
}
