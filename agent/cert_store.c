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

/* nl_fs_replace's failure as the store's error, naming the file. */
static int replace(const char *path, const char *text, nl_err_t **err) {
  const char *step = NULL;
  int e = nl_fs_replace(path, text, strlen(text), &step);
  if (e) return nl_err_set(err, e, "write %s: %s: %s", path, step, strerror(e));
  return 0;
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
  /* Written whole or not at all (nl_fs_replace: a temporary file, fsync,
   * rename), so that a kill or a power cut never leaves a torn pair where the
   * link points: two pairs within a second share a name, and the later one
   * wins, as upstream's WriteFile, without truncating the one in use. */
  size_t clen = strlen(cert_pem);
  char *pair = nl_xasprintf("%s%s%s%s", cert_pem, clen && cert_pem[clen - 1] != '\n' ? "\n" : "",
                            key_pem, *key_pem && key_pem[strlen(key_pem) - 1] != '\n' ? "\n" : "");
  int rc = replace(file, pair, err);
  free(pair);
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
  if (rc == 0) {
    char *yaml = nl_xasprintf("%s\n", text);
    rc = replace(path, yaml, err);
    free(yaml);
  }
  free(text);
  return rc;
}
