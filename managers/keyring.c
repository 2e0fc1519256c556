/* BasicDockerKeyring (upstream pkg/credentialprovider/keyring.go, config.go):
 * docker configs from pull secrets, and the registry matching of Lookup. */
#include "managers/keyring.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <mbedtls/base64.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

struct nl_keyring_entry {
  char *key; /* host[:port][/path], no scheme */
  nl_keyring_cred_t cred;
  size_t seq; /* insertion order: creds under one key keep it */
};

/* Docker Hub's entry ("https://index.docker.io/v1/" once added). */
#define DEFAULT_REGISTRY_KEY "index.docker.io"

static void entry_free(struct nl_keyring_entry *e) {
  free(e->key);
  free(e->cred.username);
  free(e->cred.password);
}

void nl_keyring_free(nl_keyring_t *k) {
  for (size_t i = 0; i < k->n; i++) entry_free(&k->entries[i]);
  free(k->entries);
  k->entries = NULL;
  k->n = 0;
}

/* A schemeless URL cut as Go's url.Parse cuts "https://" + s: the host (after
 * any userinfo) and the path (before any query or fragment). */
typedef struct {
  const char *host;
  size_t host_len;
  const char *path;
  size_t path_len;
} url_t;

static void url_split(const char *s, url_t *u) {
  size_t auth_len = strcspn(s, "/?#");
  const char *at = NULL;
  for (const char *p = s; p < s + auth_len; p++)
    if (*p == '@') at = p;
  u->host = at ? at + 1 : s;
  u->host_len = (size_t)(s + auth_len - u->host);
  u->path = s + auth_len;
  u->path_len = *u->path == '/' ? strcspn(u->path, "?#") : 0;
}

/* What url.Parse refuses in a host: a port that is not digits, a character
 * that would need escaping. */
static bool host_valid(const char *h, size_t n) {
  const char *port = NULL;
  if (n && h[0] == '[') {
    const char *end = memchr(h, ']', n);
    if (!end) return false;
    if (end + 1 < h + n) {
      if (end[1] != ':') return false;
      port = end + 1;
    }
  } else {
    port = memchr(h, ':', n);
    for (size_t i = 0; i < n; i++)
      if (!(h[i] >= 'a' && h[i] <= 'z') && !(h[i] >= 'A' && h[i] <= 'Z') &&
          !(h[i] >= '0' && h[i] <= '9') && !strchr("-._~!$&'()*+,;=:%[]", h[i]))
        return false;
  }
  if (port)
    for (const char *p = port + 1; p < h + n; p++)
      if (*p < '0' || *p > '9') return false;
  return true;
}

/* Add's key for a registry of a docker config, or NULL when it is not a URL. */
static char *registry_key(const char *loc) {
  const char *s = loc;
  if (!strncmp(s, "https://", 8)) s += 8;
  else if (!strncmp(s, "http://", 7)) s += 7;
  url_t u;
  url_split(s, &u);
  if (!host_valid(u.host, u.host_len)) return NULL;
  for (const char *p = loc; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == ' ') return NULL;
  const char *path = u.path;
  size_t plen = u.path_len;
  /* The docker client treats /v1/ and /v2/ as the host itself. */
  if (plen >= 4 && (!strncmp(path, "/v1/", 4) || !strncmp(path, "/v2/", 4))) {
    path += 3;
    plen -= 3;
  }
  if (plen == 0 || (plen == 1 && path[0] == '/'))
    return nl_xstrndup(u.host, u.host_len);
  return nl_xasprintf("%.*s%.*s", (int)u.host_len, u.host, (int)plen, path);
}

/* A string field of an entry: absent and null are "", anything else but a
 * string is an error (as json.Unmarshal into a string field). */
static int str_field(json_t *v, const char *name, const char **out, nl_err_t **err) {
  if (!v || json_is_null(v)) return 0;
  if (!json_is_string(v)) return nl_err_set(err, NL_EINVAL, "%s: must be a string", name);
  *out = json_string_value(v);
  return 0;
}

static int entry_decode(json_t *e, nl_keyring_cred_t *c, nl_err_t **err) {
  if (json_is_null(e)) return 0;
  if (!json_is_object(e)) return nl_err_set(err, NL_EINVAL, "must be an object");
  const char *user = "", *pass = "", *email = "", *auth = "";
  const char *k;
  json_t *v;
  json_object_foreach(e, k, v) {
    int rc = 0;
    if (!strcasecmp(k, "username")) rc = str_field(v, "username", &user, err);
    else if (!strcasecmp(k, "password")) rc = str_field(v, "password", &pass, err);
    else if (!strcasecmp(k, "email")) rc = str_field(v, "email", &email, err);
    else if (!strcasecmp(k, "auth")) rc = str_field(v, "auth", &auth, err);
    if (rc) return rc;
  }
  (void)email; /* kept by upstream, never sent: the CRI AuthConfig has no email */
  if (!*auth) {
    c->username = nl_xstrdup(user);
    c->password = nl_xstrdup(pass);
    return 0;
  }
  size_t n = 0, alen = strlen(auth);
  int rc = mbedtls_base64_decode(NULL, 0, &n, (const unsigned char *)auth, alen);
  if (rc != 0 && rc != MBEDTLS_ERR_BASE64_BUFFER_TOO_SMALL)
    return nl_err_set(err, NL_EINVAL, "auth: illegal base64 data");
  nl_cleanup_free char *buf = nl_xmalloc(n + 1);
  if (mbedtls_base64_decode((unsigned char *)buf, n, &n, (const unsigned char *)auth, alen) != 0)
    return nl_err_set(err, NL_EINVAL, "auth: illegal base64 data");
  buf[n] = '\0';
  char *colon = memchr(buf, ':', n);
  if (!colon || memchr(buf, '\0', n))
    return nl_err_set(err, NL_EINVAL,
                      "auth: unable to parse auth field, must be formatted as "
                      "base64(username:password)");
  c->username = nl_xstrndup(buf, (size_t)(colon - buf));
  c->password = nl_xstrdup(colon + 1);
  return 0;
}

/* Reverse string order of keys, insertion order within a key. */
static int entry_cmp(const void *a, const void *b) {
  const struct nl_keyring_entry *x = a, *y = b;
  int c = strcmp(y->key, x->key);
  if (c) return c;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int nl_keyring_add(nl_keyring_t *k, const char *data, size_t len, bool config_json,
                   nl_err_t **err) {
  json_error_t je;
  json_t *root = json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
  if (!root)
    return nl_err_set(err, NL_EINVAL, "%s (line %d, column %d)", je.text, je.line, je.column);
  json_t *auths = root;
  if (config_json) {
    if (!json_is_object(root)) {
      json_decref(root);
      return nl_err_set(err, NL_EINVAL, "must be an object");
    }
    auths = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
      if (!strcasecmp(key, "auths")) auths = v;
    if (!auths || json_is_null(auths)) {
      json_decref(root);
      return 0;
    }
  }
  if (!json_is_object(auths)) {
    json_decref(root);
    return nl_err_set(err, NL_EINVAL, "%smust be an object", config_json ? "auths: " : "");
  }
  size_t base = k->n, seq = 0;
  for (size_t i = 0; i < k->n; i++) /* sorted by key: the last added is anywhere */
    if (k->entries[i].seq >= seq) seq = k->entries[i].seq + 1;
  k->entries = nl_xrealloc(k->entries, (k->n + json_object_size(auths)) * sizeof *k->entries);
  const char *loc;
  json_t *e;
  json_object_foreach(auths, loc, e) {
    nl_keyring_cred_t c = {0};
    if (entry_decode(e, &c, err) < 0) {
      while (k->n > base) entry_free(&k->entries[--k->n]);
      nl_err_wrap(err, "%s%s", config_json ? "auths." : "", loc); /* loc lives in root */
      json_decref(root);
      return -1;
    }
    if (!c.username) { /* a null entry */
      c.username = nl_xstrdup("");
      c.password = nl_xstrdup("");
    }
    char *key = registry_key(loc);
    if (!key) {
      nl_warn("image pull secret: entry \"%s\" is not a valid registry URL, ignoring it", loc);
      free(c.username);
      free(c.password);
      continue;
    }
    k->entries[k->n++] = (struct nl_keyring_entry){.key = key, .cred = c, .seq = seq++};
  }
  json_decref(root);
  qsort(k->entries, k->n, sizeof *k->entries, entry_cmp);
  return 0;
}

int nl_keyring_add_cred(nl_keyring_t *k, const char *registry, const char *username,
                        const char *password) {
  char *key = registry_key(registry);
  if (!key) return -1;
  size_t seq = 0;
  for (size_t i = 0; i < k->n; i++)
    if (k->entries[i].seq >= seq) seq = k->entries[i].seq + 1;
  k->entries = nl_xrealloc(k->entries, (k->n + 1) * sizeof *k->entries);
  k->entries[k->n++] = (struct nl_keyring_entry){
      .key = key,
      .cred = {.username = nl_xstrdup(username), .password = nl_xstrdup(password)},
      .seq = seq};
  qsort(k->entries, k->n, sizeof *k->entries, entry_cmp);
  return 0;
}

char *nl_keyring_repo(const char *image) {
  if (!image || !*image) return NULL;
  size_t end = strcspn(image, "@");
  const char *slash = memchr(image, '/', end);
  /* A tag is a colon after the last slash. */
  const char *last = image;
  for (const char *p = image; p < image + end; p++)
    if (*p == '/') last = p + 1;
  const char *colon = memchr(last, ':', (size_t)(image + end - last));
  if (colon) end = (size_t)(colon - image);
  /* splitDockerDomain: a first component with '.' or ':', or "localhost",
   * names a registry; anything else is on Docker Hub. */
  if (slash) {
    size_t hl = (size_t)(slash - image);
    bool domain = memchr(image, '.', hl) || memchr(image, ':', hl) ||
                  (hl == 9 && !strncmp(image, "localhost", 9));
    if (domain) {
      if (hl == 15 && !strncmp(image, "index.docker.io", 15))
        return nl_xasprintf("docker.io%.*s", (int)(end - hl), slash);
      return nl_xstrndup(image, end);
    }
    return nl_xasprintf("docker.io/%.*s", (int)end, image);
  }
  return nl_xasprintf("docker.io/library/%.*s", (int)end, image);
}

/* SplitURL: the host (copied into host, cap bytes) and the port; false when
 * the host is too long to be one. */
static bool host_port(const url_t *u, char *host, size_t cap, const char **port, size_t *port_len) {
  size_t n = u->host_len;
  const char *h = u->host;
  *port = "";
  *port_len = 0;
  const char *colon = memchr(h, ':', n);
  if (n && h[0] == '[') {
    const char *close = memchr(h, ']', n);
    if (close && close + 1 < h + n && close[1] == ':') {
      *port = close + 2;
      *port_len = (size_t)(h + n - *port);
      h++;
      n = (size_t)(close - h);
    }
  } else if (colon && !memchr(colon + 1, ':', (size_t)(h + n - colon - 1))) {
    *port = colon + 1;
    *port_len = (size_t)(h + n - *port);
    n = (size_t)(colon - h);
  }
  if (n >= cap) return false;
  memcpy(host, h, n);
  host[n] = '\0';
  return true;
}

static size_t count_parts(const char *h) {
  size_t n = 1;
  for (; *h; h++) n += *h == '.';
  return n;
}

bool nl_keyring_urls_match(const char *glob, const char *target) {
  url_t g, t;
  url_split(glob, &g);
  url_split(target, &t);
  char gh[256], th[256];
  const char *gport, *tport;
  size_t gpl, tpl;
  if (!host_port(&g, gh, sizeof gh, &gport, &gpl) || !host_port(&t, th, sizeof th, &tport, &tpl))
    return false;
  if (gpl != tpl || strncmp(gport, tport, gpl)) return false;
  if (count_parts(gh) != count_parts(th)) return false;
  if (g.path_len > t.path_len || strncmp(t.path, g.path, g.path_len)) return false;
  for (char *gp = gh, *tp = th;;) { /* as many parts on both sides (above) */
    char *gd = strchr(gp, '.'), *td = strchr(tp, '.');
    if (gd) *gd = '\0';
    if (td) *td = '\0';
    if (fnmatch(gp, tp, 0) != 0) return false;
    if (!gd) return true;
    gp = gd + 1;
    tp = td + 1;
  }
}

/* isDefaultRegistryMatch, on a normalised repository. */
static bool default_registry(const char *repo) {
  size_t hl = strcspn(repo, "/");
  if (!repo[hl]) return hl > 0;
  if ((hl == 9 && !strncmp(repo, "docker.io", 9)) || (hl == 15 && !strncmp(repo, "index.docker.io", 15)))
    return true;
  return !memchr(repo, '.', hl) && !memchr(repo, ':', hl);
}

size_t nl_keyring_lookup(const nl_keyring_t *k, const char *image,
                         const nl_keyring_cred_t ***out) {
  *out = NULL;
  nl_cleanup_free char *repo = nl_keyring_repo(image);
  if (!repo || !k->n) return 0;
  const nl_keyring_cred_t **v = nl_xcalloc(k->n, sizeof *v);
  size_t n = 0;
  for (size_t i = 0; i < k->n; i++)
    if (nl_keyring_urls_match(k->entries[i].key, repo)) v[n++] = &k->entries[i].cred;
  if (!n && default_registry(repo))
    for (size_t i = 0; i < k->n; i++)
      if (!strcmp(k->entries[i].key, DEFAULT_REGISTRY_KEY)) v[n++] = &k->entries[i].cred;
  if (!n) {
    free(v);
    return 0;
  }
  *out = v;
  return n;
}
