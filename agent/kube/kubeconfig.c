/* kubeconfig (clientcmd v1 Config), read into the model's generic tree (YAML or
 * JSON, as client-go accepts both) and resolved to the current context. Only the
 * current context, its cluster and its user are checked, as client-go's
 * ConfirmUsable does for the kubelet; the first problem is reported. */
#include "agent/kube/kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mbedtls/base64.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/tree.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

/* Larger than any real kubeconfig (a few KiB with embedded certificates), small
 * enough that a wrong path (a log file, /dev/zero) fails fast. */
#define MAX_FILE (4u << 20)
#define MAX_TOKEN (64u << 10)

typedef struct kc {
  nl_kubeconfig_t *out;
  const char *path, *dir;
  nl_err_t **err;
} kc_t;

static int fail(kc_t *k, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(kc_t *k, const char *field, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) abort();
  va_end(ap);
  nl_err_set(k->err, NL_EINVAL, "kubeconfig %s: %s%s%s", k->path, field ? field : "",
             field ? ": " : "", msg);
  free(msg);
  return -1;
}

/* A string field; absent, null and "" all leave *out NULL (Go's zero value). */
static int get_str(kc_t *k, const nl_tnode_t *map, const char *key, const char *at,
                   const char **out) {
  *out = NULL;
  const nl_tnode_t *v = nl_tree_get(map, key);
  if (!v || v->kind == NL_T_NULL) return 0;
  if (v->kind != NL_T_STR) {
    /* YAML 1.1 typing makes `token: 123` an int; Go's decoder refuses it too */
    return fail(k, NULL, "%s.%s: must be a string, got %s", at, key, nl_tree_kind_name(v->kind));
  }
  if (strlen(v->s) != v->len) return fail(k, NULL, "%s.%s: contains a NUL byte", at, key);
  if (v->len) *out = v->s;
  return 0;
}

static int get_map(kc_t *k, const nl_tnode_t *map, const char *key, const char *at,
                   const nl_tnode_t **out) {
  *out = nl_tree_get(map, key);
  if (*out && (*out)->kind == NL_T_NULL) *out = NULL;
  if (*out && (*out)->kind != NL_T_MAP)
    return fail(k, NULL, "%s%s%s: must be an object, got %s", at, *at ? "." : "", key,
                nl_tree_kind_name((*out)->kind));
  return 0;
}

/* Finds the entry named `name` in the list `list` (clusters, users, contexts),
 * checking every entry's name as client-go's conversion does. *idx is its index. */
static int find_named(kc_t *k, const nl_tnode_t *root, const char *list, const char *name,
                      const nl_tnode_t **found, size_t *idx) {
  *found = NULL;
  const nl_tnode_t *seq = nl_tree_get(root, list);
  if (!seq || seq->kind == NL_T_NULL) return 0;
  if (seq->kind != NL_T_SEQ)
    return fail(k, list, "must be a list, got %s", nl_tree_kind_name(seq->kind));
  size_t i = 0;
  for (const nl_tentry_t *e = seq->first; e; e = e->next, i++) {
    char at[64];
    snprintf(at, sizeof at, "%s[%zu]", list, i);
    if (e->val->kind != NL_T_MAP)
      return fail(k, at, "must be an object, got %s", nl_tree_kind_name(e->val->kind));
    const char *n;
    if (get_str(k, e->val, "name", at, &n) < 0) return -1;
    if (!n) return fail(k, NULL, "%s.name: not set", at);
    size_t j = 0;
    for (const nl_tentry_t *p = seq->first; p != e; p = p->next, j++) {
      const nl_tnode_t *pn = nl_tree_get(p->val, "name");
      if (strcmp(pn->s, n) == 0)
        return fail(k, NULL, "%s.name: duplicate name \"%s\" (also %s[%zu])", at, n, list, j);
    }
    if (strcmp(n, name) == 0) *found = e->val, *idx = i;
  }
  return 0;
}

/* client-go resolves relative paths against the directory of the file that
 * names them (clientcmd.ResolvePaths). */
static char *resolve(kc_t *k, const char *p) {
  if (p[0] == '/' || !k->dir) return nl_xstrdup(p);
  size_t n = strlen(k->dir);
  return nl_xasprintf("%s%s%s", k->dir, n && k->dir[n - 1] == '/' ? "" : "/", p);
}

static int b64(kc_t *k, const char *at, const char *key, const char *s, char **out) {
  size_t n = 0, len = strlen(s);
  int rc = mbedtls_base64_decode(NULL, 0, &n, (const unsigned char *)s, len);
  if (rc == MBEDTLS_ERR_BASE64_INVALID_CHARACTER)
    return fail(k, NULL, "%s.%s: not valid base64", at, key);
  char *buf = nl_xmalloc(n + 1);
  if (mbedtls_base64_decode((unsigned char *)buf, n, &n, (const unsigned char *)s, len) != 0) {
    free(buf);
    return fail(k, NULL, "%s.%s: not valid base64", at, key);
  }
  buf[n] = 0;
  if (n == 0 || strlen(buf) != n) { /* PEM is text; an empty or binary blob cannot be used */
    free(buf);
    return fail(k, NULL, "%s.%s: must hold PEM data", at, key);
  }
  *out = buf;
  return 0;
}

/* One of `file` / `file-data`: both given is an error, as client-go's validation. */
static int file_or_data(kc_t *k, const nl_tnode_t *m, const char *at, const char *fkey,
                        char **file, char **pem) {
  char dkey[64];
  snprintf(dkey, sizeof dkey, "%s-data", fkey);
  const char *f, *d;
  if (get_str(k, m, fkey, at, &f) < 0 || get_str(k, m, dkey, at, &d) < 0) return -1;
  if (f && d) return fail(k, at, "%s and %s are both set; use one", fkey, dkey);
  if (d) return b64(k, at, dkey, d, pem);
  if (f) *file = resolve(k, f);
  return 0;
}

static int cluster(kc_t *k, const nl_tnode_t *c, const char *at) {
  nl_kubeconfig_t *kc = k->out;
  const char *server, *sni, *proxy;
  if (get_str(k, c, "server", at, &server) < 0) return -1;
  if (!server) return fail(k, NULL, "%s.server: not set", at);
  if (strncmp(server, "https://", 8) != 0)
    return fail(k, NULL, "%s.server: must be an https:// URL, got \"%s\"", at, server);
  if (!server[8] || server[8] == '/')
    return fail(k, NULL, "%s.server: no host in \"%s\"", at, server);
  size_t n = strlen(server);
  while (n > 8 && server[n - 1] == '/') n--;
  kc->server = nl_xstrndup(server, n);
  if (get_str(k, c, "tls-server-name", at, &sni) < 0) return -1;
  if (sni) kc->tls_server_name = nl_xstrdup(sni);
  if (get_str(k, c, "proxy-url", at, &proxy) < 0) return -1;
  if (proxy) return fail(k, NULL, "%s.proxy-url: proxies are not supported", at);
  const nl_tnode_t *v = nl_tree_get(c, "insecure-skip-tls-verify");
  if (v && v->kind != NL_T_NULL && v->kind != NL_T_BOOL)
    return fail(k, NULL, "%s.insecure-skip-tls-verify: must be a boolean, got %s", at,
                nl_tree_kind_name(v->kind));
  kc->insecure = v && v->kind == NL_T_BOOL && v->b;
  if (file_or_data(k, c, at, "certificate-authority", &kc->ca_file, &kc->ca_pem) < 0) return -1;
  if (kc->insecure && (kc->ca_file || kc->ca_pem)) /* client-go's transport refuses it too */
    return fail(k, NULL, "%s.insecure-skip-tls-verify: a certificate authority cannot be "
                "used together with insecure-skip-tls-verify", at);
  return 0;
}

static int user(kc_t *k, const nl_tnode_t *u, const char *at) {
  nl_kubeconfig_t *kc = k->out;
  static const char *const unsupported[][2] = {
      {"exec", "exec credential plugins are not supported"},
      {"auth-provider", "auth-provider plugins are not supported"},
      {"username", "basic authentication is not supported"},
      {"password", "basic authentication is not supported"},
      {"as", "impersonation is not supported"},
      {"as-uid", "impersonation is not supported"},
      {"as-groups", "impersonation is not supported"},
      {"as-user-extra", "impersonation is not supported"},
  };
  for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
    const nl_tnode_t *v = nl_tree_get(u, unsupported[i][0]);
    if (v && v->kind != NL_T_NULL && !(v->kind == NL_T_STR && v->len == 0))
      return fail(k, NULL, "%s.%s: %s", at, unsupported[i][0], unsupported[i][1]);
  }
  if (file_or_data(k, u, at, "client-certificate", &kc->cert_file, &kc->cert_pem) < 0 ||
      file_or_data(k, u, at, "client-key", &kc->key_file, &kc->key_pem) < 0)
    return -1;
  bool cert = kc->cert_file || kc->cert_pem, key = kc->key_file || kc->key_pem;
  if (cert && !key) return fail(k, at, "client-certificate is set without client-key");
  if (key && !cert) return fail(k, at, "client-key is set without client-certificate");
  const char *token, *token_file;
  if (get_str(k, u, "token", at, &token) < 0 || get_str(k, u, "tokenFile", at, &token_file) < 0)
    return -1;
  if (token) kc->token = nl_xstrdup(token);
  /* with both, client-go sends token and keeps tokenFile for later refreshes */
  if (token_file) kc->token_file = resolve(k, token_file);
  return 0;
}

static int parse_tree(kc_t *k, const nl_tnode_t *root) {
  nl_kubeconfig_t *kc = k->out;
  if (root->kind == NL_T_NULL) return fail(k, NULL, "the file holds no configuration");
  if (root->kind != NL_T_MAP)
    return fail(k, NULL, "must be an object, got %s", nl_tree_kind_name(root->kind));
  const char *cur;
  if (get_str(k, root, "current-context", "", &cur) < 0) return -1;
  if (!cur) return fail(k, "current-context", "not set");
  kc->context = nl_xstrdup(cur);

  const nl_tnode_t *ctx, *cl, *us, *m;
  size_t ci, cli, ui;
  char at[96];
  if (find_named(k, root, "contexts", cur, &ctx, &ci) < 0) return -1;
  if (!ctx) return fail(k, "current-context", "context \"%s\" not found", cur);
  snprintf(at, sizeof at, "contexts[%zu]", ci);
  if (get_map(k, ctx, "context", at, &m) < 0) return -1;
  if (!m) return fail(k, NULL, "%s.context: not set", at);
  snprintf(at, sizeof at, "contexts[%zu].context", ci);
  const char *cname, *uname;
  if (get_str(k, m, "cluster", at, &cname) < 0 || get_str(k, m, "user", at, &uname) < 0)
    return -1;
  if (!cname) return fail(k, NULL, "%s.cluster: not set", at);
  if (!uname) return fail(k, NULL, "%s.user: not set", at);
  if (find_named(k, root, "clusters", cname, &cl, &cli) < 0) return -1;
  if (!cl) return fail(k, NULL, "%s.cluster: cluster \"%s\" not found", at, cname);
  if (find_named(k, root, "users", uname, &us, &ui) < 0) return -1;
  if (!us) return fail(k, NULL, "%s.user: user \"%s\" not found", at, uname);

  snprintf(at, sizeof at, "clusters[%zu]", cli);
  if (get_map(k, cl, "cluster", at, &m) < 0) return -1;
  if (!m) return fail(k, NULL, "%s.cluster: not set", at);
  snprintf(at, sizeof at, "clusters[%zu].cluster", cli);
  if (cluster(k, m, at) < 0) return -1;

  snprintf(at, sizeof at, "users[%zu]", ui);
  if (get_map(k, us, "user", at, &m) < 0) return -1;
  snprintf(at, sizeof at, "users[%zu].user", ui);
  return m ? user(k, m, at) : 0; /* `user: {}` or absent: anonymous */
}

int nl_kubeconfig_parse(nl_kubeconfig_t *kc, const char *data, size_t len, const char *path,
                        const char *dir, nl_err_t **err) {
  memset(kc, 0, sizeof *kc);
  kc->path = nl_xstrdup(path);
  kc_t k = {kc, path, dir, err};
  nl_arena_t *a = nl_arena_new(4096);
  nl_tnode_t *root = nl_tree_parse(a, data, len, err);
  int rc = root ? parse_tree(&k, root) : nl_err_wrap(err, "kubeconfig %s", path);
  nl_arena_free(a);
  if (rc < 0) nl_kubeconfig_free(kc);
  return rc;
}

/* Reads at most max bytes of a regular file (a FIFO or a device is refused, so
 * start-up cannot hang on it). */
static int read_file(const char *path, size_t max, nl_buf_t *out, nl_err_t **err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return nl_err_set(err, errno, "%s", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int e = errno;
    close(fd);
    return nl_err_set(err, e, "%s", strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    close(fd);
    return nl_err_set(err, e, "not a regular file");
  }
  if ((size_t)st.st_size > max) {
    close(fd);
    return nl_err_set(err, EFBIG, "larger than %zu bytes", max);
  }
  nl_buf_reserve(out, (size_t)st.st_size + 1);
  for (;;) {
    ssize_t n = read(fd, out->data + out->len, out->cap - out->len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return nl_err_set(err, e, "%s", strerror(e));
    }
    if (n == 0) break;
    out->len += (size_t)n;
    if (out->len > max) {
      close(fd);
      return nl_err_set(err, EFBIG, "larger than %zu bytes", max);
    }
    nl_buf_reserve(out, 4096);
  }
  out->data[out->len] = 0;
  close(fd);
  return 0;
}

/* The files the transport reads later are checked now, so that a wrong path is an
 * exit-worthy start-up error naming its field, as client-go's validation opens them. */
static int check_files(nl_kubeconfig_t *kc, nl_err_t **err) {
  const struct { const char *p, *field; } files[] = {
      {kc->ca_file, "certificate-authority"},
      {kc->cert_file, "client-certificate"},
      {kc->key_file, "client-key"},
  };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    if (!files[i].p) continue;
    nl_buf_t b = NL_BUF_INIT;
    int rc = read_file(files[i].p, MAX_FILE, &b, err);
    nl_buf_free(&b);
    if (rc < 0)
      return nl_err_wrap(err, "kubeconfig %s: %s %s", kc->path, files[i].field, files[i].p);
  }
  if (kc->token_file && !kc->token) {
    nl_buf_t b = NL_BUF_INIT;
    if (read_file(kc->token_file, MAX_TOKEN, &b, err) < 0) {
      nl_buf_free(&b);
      return nl_err_wrap(err, "kubeconfig %s: tokenFile %s", kc->path, kc->token_file);
    }
    while (b.len && strchr(" \t\r\n", b.data[b.len - 1])) b.data[--b.len] = 0;
    if (b.len == 0 || strlen(b.data) != b.len) {
      nl_buf_free(&b);
      return nl_err_set(err, NL_EINVAL, "kubeconfig %s: tokenFile %s: no token in the file",
                        kc->path, kc->token_file);
    }
    kc->token = nl_buf_steal(&b);
  }
  return 0;
}

int nl_kubeconfig_load(nl_kubeconfig_t *kc, const char *path, nl_err_t **err) {
  memset(kc, 0, sizeof *kc);
  nl_buf_t b = NL_BUF_INIT;
  if (read_file(path, MAX_FILE, &b, err) < 0) {
    nl_buf_free(&b);
    return nl_err_wrap(err, "kubeconfig %s", path);
  }
  char *slash = strrchr(path, '/');
  char *dir = slash ? nl_xstrndup(path, slash == path ? 1 : (size_t)(slash - path))
                    : nl_xstrdup(".");
  int rc = nl_kubeconfig_parse(kc, b.data, b.len, path, dir, err);
  free(dir);
  nl_buf_free(&b);
  if (rc == 0 && check_files(kc, err) < 0) {
    nl_kubeconfig_free(kc);
    rc = -1;
  }
  return rc;
}

void nl_kubeconfig_free(nl_kubeconfig_t *kc) {
  char **fields[] = {&kc->path, &kc->context, &kc->server, &kc->tls_server_name,
                     &kc->ca_file, &kc->ca_pem, &kc->cert_file, &kc->cert_pem,
                     &kc->key_file, &kc->key_pem, &kc->token, &kc->token_file};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    free(*fields[i]);
    *fields[i] = NULL;
  }
  kc->insecure = false;
}
