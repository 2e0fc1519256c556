/* The credential provider configuration and the plugins' messages
 * (upstream pkg/credentialprovider/plugin/config.go and the
 * credentialprovider.kubelet.k8s.io types). Pure: the one reader of files is
 * nl_credprov_config_load, at start-up. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "managers/credprov.h"
#include "reactor/arena.h"
#include "reactor/buf.h"
#include "reactor/digest.h"
#include "reactor/duration.h"
#include "reactor/log.h"
#include "reactor/tree.h"
#include "reactor/xalloc.h"

#define CONFIG_KIND "CredentialProviderConfig"
#define MAX_CONFIG_BYTES (1 << 20)

static const char *const config_versions[] = {"kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1",
                                              "kubelet.config.k8s.io/v1alpha1", NULL};
static const char *const plugin_versions[] = {NL_CREDPROV_API_V1, "credentialprovider.kubelet.k8s.io/v1beta1",
                                              "credentialprovider.kubelet.k8s.io/v1alpha1", NULL};

static bool one_of(const char *s, const char *const *set) {
  for (; *set; set++)
    if (!strcmp(s, *set)) return true;
  return false;
}

static void strv_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

static void provider_free(nl_credprov_provider_t *p) {
  free(p->name);
  strv_free(p->match_images, p->n_match);
  free(p->api_version);
  strv_free(p->args, p->n_args);
  strv_free(p->env, p->n_env);
}

void nl_credprov_config_free(nl_credprov_config_t *c) {
  for (size_t i = 0; i < c->n; i++) provider_free(&c->providers[i]);
  free(c->providers);
  memset(c, 0, sizeof *c);
}

static bool is_str(const nl_tnode_t *n) { return n && n->kind == NL_T_STR; }

/* A list of strings at key of provider i; -1 with *err naming it. */
static int strings(const nl_tnode_t *list, size_t i, const char *key, char ***out, size_t *n,
                   nl_err_t **err) {
  if (!list || list->kind == NL_T_NULL) return 0;
  if (list->kind != NL_T_SEQ) return nl_err_set(err, NL_EINVAL, "providers[%zu].%s: must be a list", i, key);
  *out = nl_xcalloc(list->n ? list->n : 1, sizeof **out);
  for (nl_tentry_t *e = list->first; e; e = e->next) {
    if (!is_str(e->val))
      return nl_err_set(err, NL_EINVAL, "providers[%zu].%s[%zu]: must be a string", i, key, *n);
    (*out)[(*n)++] = nl_xstrdup(e->val->s);
  }
  return 0;
}

/* A matchImages entry as upstream's ParseSchemelessURL and SplitURL take it:
 * no scheme, a host (globs allowed) with an optional numeric port, an
 * optional path. */
static bool match_image_valid(const char *m) {
  if (!*m || strstr(m, "://")) return false;
  for (const char *p = m; *p; p++)
    if ((unsigned char)*p <= 0x20 || *p == 0x7f) return false;
  size_t hl = strcspn(m, "/");
  const char *colon = memchr(m, ':', hl);
  if (colon) {
    if (colon + 1 == m + hl) return false;
    for (const char *p = colon + 1; p < m + hl; p++)
      if (*p < '0' || *p > '9') return false;
  }
  return hl > 0 && !memchr(m, '?', hl) && !memchr(m, '#', hl) && !memchr(m, '@', hl);
}

static int provider_decode(nl_credprov_provider_t *p, const nl_tnode_t *n, size_t i,
                           nl_err_t **err) {
  if (!n || n->kind != NL_T_MAP) return nl_err_set(err, NL_EINVAL, "providers[%zu]: must be an object", i);
  for (nl_tentry_t *e = n->first; e; e = e->next) {
    const char *k = e->key;
    if (!strcmp(k, "name") || !strcmp(k, "matchImages") || !strcmp(k, "defaultCacheDuration") ||
        !strcmp(k, "apiVersion") || !strcmp(k, "args") || !strcmp(k, "env"))
      continue;
    if (!strcmp(k, "tokenAttributes"))
      return nl_err_set(err, NL_EINVAL,
                        "providers[%zu].tokenAttributes: not supported: nanolet does not request "
                        "service account tokens for credential providers",
                        i);
    nl_warn("credential provider config: providers[%zu].%s is not a field nanolet knows; ignored", i, k);
  }
  const nl_tnode_t *v = nl_tree_get(n, "name");
  if (!is_str(v) || !*v->s) return nl_err_set(err, NL_EINVAL, "providers[%zu].name: Required value", i);
  const char *name = v->s;
  if (strchr(name, '/'))
    return nl_err_set(err, NL_EINVAL, "providers[%zu].name: Invalid value: \"%s\": provider name cannot contain '/'", i, name);
  if (strchr(name, ' '))
    return nl_err_set(err, NL_EINVAL, "providers[%zu].name: Invalid value: \"%s\": provider name cannot contain spaces", i, name);
  if (!strcmp(name, ".") || !strcmp(name, ".."))
    return nl_err_set(err, NL_EINVAL, "providers[%zu].name: Invalid value: \"%s\": provider name cannot be '%s'", i, name, name);
  p->name = nl_xstrdup(name);
  v = nl_tree_get(n, "apiVersion");
  if (!is_str(v) || !*v->s) return nl_err_set(err, NL_EINVAL, "providers[%zu].apiVersion: Required value", i);
  if (!one_of(v->s, plugin_versions))
    return nl_err_set(err, NL_EINVAL,
                      "providers[%zu].apiVersion: Unsupported value: \"%s\": supported values: "
                      "\"%s\", \"%s\", \"%s\"",
                      i, v->s, plugin_versions[0], plugin_versions[1], plugin_versions[2]);
  p->api_version = nl_xstrdup(v->s);
  if (strings(nl_tree_get(n, "matchImages"), i, "matchImages", &p->match_images, &p->n_match, err) < 0)
    return -1;
  if (!p->n_match)
    return nl_err_set(err, NL_EINVAL, "providers[%zu].matchImages: Required value: at least 1 item in matchImages is required", i);
  for (size_t j = 0; j < p->n_match; j++)
    if (!match_image_valid(p->match_images[j]))
      return nl_err_set(err, NL_EINVAL, "providers[%zu].matchImages: Invalid value: \"%s\": match image is invalid", i,
                        p->match_images[j]);
  v = nl_tree_get(n, "defaultCacheDuration");
  if (!v || v->kind == NL_T_NULL)
    return nl_err_set(err, NL_EINVAL, "providers[%zu].defaultCacheDuration: Required value", i);
  if (!is_str(v))
    return nl_err_set(err, NL_EINVAL, "providers[%zu].defaultCacheDuration: must be a duration string", i);
  if (nl_duration_parse(v->s, &p->default_cache_ns, err) < 0)
    return nl_err_wrap(err, "providers[%zu].defaultCacheDuration", i), -1;
  if (p->default_cache_ns < 0)
    return nl_err_set(err, NL_EINVAL, "providers[%zu].defaultCacheDuration: Invalid value: \"%s\": must be greater than or equal to 0", i, v->s);
  if (strings(nl_tree_get(n, "args"), i, "args", &p->args, &p->n_args, err) < 0) return -1;
  const nl_tnode_t *env = nl_tree_get(n, "env");
  if (env && env->kind != NL_T_NULL) {
    if (env->kind != NL_T_SEQ) return nl_err_set(err, NL_EINVAL, "providers[%zu].env: must be a list", i);
    p->env = nl_xcalloc(env->n ? env->n : 1, sizeof *p->env);
    for (nl_tentry_t *e = env->first; e; e = e->next) {
      const nl_tnode_t *en = nl_tree_get(e->val, "name"), *ev = nl_tree_get(e->val, "value");
      if (e->val->kind != NL_T_MAP || !is_str(en) || !*en->s || strchr(en->s, '='))
        return nl_err_set(err, NL_EINVAL, "providers[%zu].env[%zu].name: Required value", i, p->n_env);
      if (ev && ev->kind != NL_T_NULL && !is_str(ev))
        return nl_err_set(err, NL_EINVAL, "providers[%zu].env[%zu].value: must be a string", i, p->n_env);
      p->env[p->n_env++] = nl_xasprintf("%s=%s", en->s, is_str(ev) ? ev->s : "");
    }
  }
  return 0;
}

int nl_credprov_config_add(nl_credprov_config_t *c, const char *file, const char *data, size_t len,
                           nl_err_t **err) {
  nl_arena_t *a = nl_arena_new(4096);
  nl_tnode_t *root = nl_tree_parse(a, data, len, err);
  nl_credprov_provider_t *ps = NULL;
  size_t n = 0;
  int rc = -1;
  if (!root) goto out;
  if (root->kind != NL_T_MAP) {
    nl_err_set(err, NL_EINVAL, "must be an object");
    goto out;
  }
  const nl_tnode_t *v = nl_tree_get(root, "kind");
  if (!is_str(v) || strcmp(v->s, CONFIG_KIND)) {
    nl_err_set(err, NL_EINVAL, "kind: must be %s, not \"%s\"", CONFIG_KIND, is_str(v) ? v->s : "");
    goto out;
  }
  v = nl_tree_get(root, "apiVersion");
  if (!is_str(v) || !one_of(v->s, config_versions)) {
    nl_err_set(err, NL_EINVAL, "apiVersion: Unsupported value: \"%s\": supported values: \"%s\", \"%s\", \"%s\"",
               is_str(v) ? v->s : "", config_versions[0], config_versions[1], config_versions[2]);
    goto out;
  }
  const nl_tnode_t *list = nl_tree_get(root, "providers");
  if (list && list->kind != NL_T_NULL && list->kind != NL_T_SEQ) {
    nl_err_set(err, NL_EINVAL, "providers: must be a list");
    goto out;
  }
  ps = nl_xcalloc(list && list->n ? list->n : 1, sizeof *ps);
  for (nl_tentry_t *e = list ? list->first : NULL; e; e = e->next, n++) {
    if (provider_decode(&ps[n], e->val, n, err) < 0) {
      n++;
      goto out;
    }
    for (size_t j = 0; j < c->n + n; j++) {
      const char *other = j < c->n ? c->providers[j].name : ps[j - c->n].name;
      if (!strcmp(other, ps[n].name)) {
        nl_err_set(err, NL_EINVAL, "duplicate provider name \"%s\" found in configuration file(s)", other);
        n++;
        goto out;
      }
    }
  }
  c->providers = nl_xrealloc(c->providers, (c->n + n + 1) * sizeof *c->providers);
  memcpy(c->providers + c->n, ps, n * sizeof *ps);
  c->n += n;
  n = 0;
  rc = 0;
out:
  for (size_t j = 0; j < n; j++) provider_free(&ps[j]);
  free(ps);
  nl_arena_free(a);
  if (rc < 0) nl_err_wrap(err, "credential provider config %s", file);
  return rc;
}

static bool is_config_file(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (!strcmp(dot, ".json") || !strcmp(dot, ".yaml") || !strcmp(dot, ".yml"));
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static int load_file(nl_credprov_config_t *c, nl_buf_t *h, const char *path,
                     nl_err_t **err) {
  FILE *f = fopen(path, "re");
  if (!f) return nl_err_set(err, errno, "unable to read file \"%s\": %s", path, strerror(errno));
  char *buf = nl_xmalloc(MAX_CONFIG_BYTES + 1);
  size_t len = fread(buf, 1, MAX_CONFIG_BYTES + 1, f);
  bool bad = ferror(f);
  fclose(f);
  int rc;
  if (bad)
    rc = nl_err_set(err, EIO, "unable to read file \"%s\"", path);
  else if (len > MAX_CONFIG_BYTES)
    rc = nl_err_set(err, NL_EINVAL, "%s: larger than %d bytes", path, MAX_CONFIG_BYTES);
  else {
    uint8_t be[8];
    for (int i = 0; i < 8; i++) be[i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    nl_buf_append(h, be, sizeof be);
    nl_buf_append(h, buf, len);
    rc = nl_credprov_config_add(c, path, buf, len, err);
  }
  free(buf);
  return rc;
}

int nl_credprov_config_load(nl_credprov_config_t *c, const char *path, nl_err_t **err) {
  struct stat st;
  if (!path || !*path) return nl_err_set(err, NL_EINVAL, "credential provider config path is empty");
  if (stat(path, &st) < 0)
    return nl_err_set(err, errno, "unable to access path \"%s\": %s", path, strerror(errno));
  nl_buf_t h = NL_BUF_INIT; /* what the hash covers, as upstream's */
  int rc = 0;
  if (S_ISDIR(st.st_mode)) {
    struct dirent **names;
    int n = scandir(path, &names, NULL, by_name);
    if (n < 0) {
      rc = nl_err_set(err, errno, "unable to read directory \"%s\": %s", path, strerror(errno));
      goto out;
    }
    int files = 0;
    for (int i = 0; i < n; i++) {
      char *p = nl_xasprintf("%s/%s", path, names[i]->d_name);
      if (rc == 0 && is_config_file(names[i]->d_name) && stat(p, &st) == 0 && !S_ISDIR(st.st_mode)) {
        files++;
        rc = load_file(c, &h, p, err);
      }
      free(p);
      free(names[i]);
    }
    free(names);
    if (rc == 0 && !files)
      rc = nl_err_set(err, NL_EINVAL, "no configuration files found in directory \"%s\"", path);
  } else {
    rc = load_file(c, &h, path, err);
  }
  if (rc == 0 && !c->n) rc = nl_err_set(err, NL_EINVAL, "providers: Required value: at least 1 item in plugins is required");
out:
  if (rc == 0) nl_sha256(h.data ? h.data : "", h.len, c->hash);
  nl_buf_free(&h);
  if (rc < 0) nl_credprov_config_free(c);
  return rc;
}

/* ---- the plugins' messages -------------------------------------------------- */

char *nl_credprov_request_json(const char *api_version, const char *image) {
  json_t *o = json_pack("{s:s, s:s, s:s}", "kind", "CredentialProviderRequest", "apiVersion",
                        api_version, "image", image);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s ? s : nl_xstrdup("{}");
}

char *nl_credprov_registry(const char *image) { return nl_xstrndup(image, strcspn(image, "/")); }

void nl_credprov_response_free(nl_credprov_response_t *r) {
  for (size_t i = 0; i < r->n_auth; i++) {
    free(r->auth[i].match);
    free(r->auth[i].username);
    free(r->auth[i].password);
  }
  free(r->auth);
  memset(r, 0, sizeof *r);
}

static const char *str_of(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

int nl_credprov_response_parse(nl_credprov_response_t *r, const char *api_version, const char *data,
                               size_t len, nl_err_t **err) {
  memset(r, 0, sizeof *r);
  json_error_t je;
  json_t *root = json_loadb(data, len, 0, &je);
  if (!root) return nl_err_set(err, NL_EINVAL, "error decoding credential provider plugin response from stdout");
  int rc = -1;
  const char *v = str_of(root, "apiVersion"), *kind = str_of(root, "kind");
  if (!json_is_object(root)) {
    nl_err_set(err, NL_EINVAL, "error decoding credential provider plugin response from stdout");
    goto out;
  }
  if (!v || strcmp(v, api_version)) {
    nl_err_set(err, NL_EINVAL,
               "apiVersion from credential plugin response did not match expected apiVersion:%s, "
               "actual apiVersion:%.64s",
               api_version, v ? v : "");
    goto out;
  }
  if (!kind || strcmp(kind, "CredentialProviderResponse")) {
    nl_err_set(err, NL_EINVAL, "failed to decode CredentialProviderResponse, unexpected Kind: \"%.64s\"",
               kind ? kind : "");
    goto out;
  }
  const char *kt = str_of(root, "cacheKeyType");
  if (kt && !strcmp(kt, "Image")) r->key_type = NL_CREDPROV_KEY_IMAGE;
  else if (kt && !strcmp(kt, "Registry")) r->key_type = NL_CREDPROV_KEY_REGISTRY;
  else if (kt && !strcmp(kt, "Global")) r->key_type = NL_CREDPROV_KEY_GLOBAL;
  else {
    nl_err_set(err, NL_EINVAL, "credential provider plugin did not return a valid cacheKeyType: %.64s",
               kt ? kt : "");
    goto out;
  }
  json_t *d = json_object_get(root, "cacheDuration");
  if (d && !json_is_null(d)) {
    nl_err_t *de = NULL;
    if (!json_is_string(d) || nl_duration_parse(json_string_value(d), &r->duration_ns, &de) < 0) {
      nl_err_free(&de);
      nl_err_set(err, NL_EINVAL, "error decoding credential provider plugin response from stdout: cacheDuration");
      goto out;
    }
    r->has_duration = true;
  }
  json_t *auth = json_object_get(root, "auth");
  if (auth && !json_is_null(auth)) {
    if (!json_is_object(auth)) {
      nl_err_set(err, NL_EINVAL, "error decoding credential provider plugin response from stdout: auth");
      goto out;
    }
    r->auth = nl_xcalloc(json_object_size(auth) + 1, sizeof *r->auth);
    const char *match;
    json_t *e;
    json_object_foreach(auth, match, e) {
      json_t *u = json_object_get(e, "username"), *p = json_object_get(e, "password");
      if (!json_is_object(e) || (u && !json_is_string(u) && !json_is_null(u)) ||
          (p && !json_is_string(p) && !json_is_null(p))) {
        nl_err_set(err, NL_EINVAL, "error decoding credential provider plugin response from stdout: auth");
        goto out;
      }
      nl_credprov_auth_t *a = &r->auth[r->n_auth++];
      a->match = nl_xstrdup(match);
      a->username = nl_xstrdup(json_is_string(u) ? json_string_value(u) : "");
      a->password = nl_xstrdup(json_is_string(p) ? json_string_value(p) : "");
    }
  }
  rc = 0;
out:
  json_decref(root);
  if (rc < 0) nl_credprov_response_free(r);
  return rc;
}
