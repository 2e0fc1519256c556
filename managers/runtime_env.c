/* Container environment (upstream kubelet_pods.go makeEnvironmentVariables) and
 * $(VAR) expansion (third_party/forked/golang/expansion). */
#include <math.h>
#include <string.h>

#include "managers/runtime_internal.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

static const char *lookup1(const nl_env_t *env, size_t n, const char *name, size_t len) {
  /* Later definitions win, as the Go map built in order does. */
  for (size_t i = n; i-- > 0;)
    if (strlen(env[i].name) == len && memcmp(env[i].name, name, len) == 0) return env[i].value;
  return NULL;
}

/* MappingFuncFor(env, services): the container's variables, then the services'. */
static const char *lookup(const nl_env_t *env, size_t n, const nl_env_t *svc, size_t n_svc,
                          const char *name, size_t len) {
  const char *v = lookup1(env, n, name, len);
  return v ? v : lookup1(svc, n_svc, name, len);
}

static char *expand(const char *in, const nl_env_t *env, size_t n, const nl_env_t *svc,
                    size_t n_svc) {
  nl_buf_t b = NL_BUF_INIT;
  size_t len = strlen(in), checkpoint = 0;
  for (size_t cur = 0; cur < len; cur++) {
    if (in[cur] != '$' || cur + 1 >= len) continue;
    nl_buf_append(&b, in + checkpoint, cur - checkpoint);
    const char *rest = in + cur + 1;
    size_t advance = 1;
    if (rest[0] == '$') {
      nl_buf_puts(&b, "$"); /* escaped operator */
    } else if (rest[0] == '(') {
      const char *close = strchr(rest + 1, ')');
      if (close) {
        size_t nlen = (size_t)(close - rest - 1);
        const char *v = lookup(env, n, svc, n_svc, rest + 1, nlen);
        if (v)
          nl_buf_puts(&b, v);
        else
          nl_buf_append(&b, rest - 1, nlen + 3); /* "$(NAME)" kept */
        advance = nlen + 2;
      } else {
        nl_buf_puts(&b, "$("); /* incomplete reference */
      }
    } else {
      nl_buf_append(&b, rest - 1, 2); /* "$x" */
    }
    cur += advance;
    checkpoint = cur + 1;
  }
  if (checkpoint < len) nl_buf_append(&b, in + checkpoint, len - checkpoint);
  if (!b.data) return nl_xstrdup("");
  return nl_buf_steal(&b);
}

char *nl_runtime_expand(const char *in, const nl_env_t *env, size_t n) {
  return expand(in, env, n, NULL, 0);
}

/* fieldpath.FormatMap: sorted "k=\"v\"" lines (the kvlist is sorted already). */
static char *format_map(const nl_kvlist_t *l) {
  nl_buf_t b = NL_BUF_INIT;
  for (size_t i = 0; i < l->n; i++) {
    nl_buf_printf(&b, "%s=\"", l->items[i].key);
    for (const char *p = l->items[i].value; *p; p++) {
      /* strconv.Quote-ish escaping for the common cases */
      if (*p == '"' || *p == '\\') nl_buf_append(&b, "\\", 1);
      if (*p == '\n') {
        nl_buf_puts(&b, "\\n");
        continue;
      }
      nl_buf_append(&b, p, 1);
    }
    nl_buf_puts(&b, "\"");
    if (i + 1 < l->n) nl_buf_puts(&b, "\n");
  }
  return b.data ? nl_buf_steal(&b) : nl_xstrdup("");
}

/* A subscript "metadata.labels['key']": returns the key (new string) or NULL. */
static char *subscript(const char *path, const char *prefix) {
  size_t pl = strlen(prefix);
  if (strncmp(path, prefix, pl) != 0 || path[pl] != '[') return NULL;
  const char *k = path + pl + 1;
  size_t kl = strlen(k);
  if (kl < 3 || k[0] != '\'' || k[kl - 1] != ']' || k[kl - 2] != '\'') return NULL;
  return nl_xstrndup(k + 1, kl - 3);
}

int nl_runtime_field_value(const nl_runtime_opts_t *opts, const nl_pod_t *pod, const char *path,
                           const char *pod_ip, char *const *pod_ips, size_t n_pod_ips, char **out,
                           nl_err_t **err) {
  const nl_object_meta_t *m = &pod->metadata;
  const char *v = NULL;
  char *key;
  if (strcmp(path, "spec.nodeName") == 0)
    v = pod->spec.node_name;
  else if (strcmp(path, "spec.serviceAccountName") == 0)
    v = pod->spec.service_account_name;
  else if (strcmp(path, "status.hostIP") == 0 || strcmp(path, "status.hostIPs") == 0)
    v = opts->node_ip;
  else if (strcmp(path, "status.podIP") == 0)
    v = pod_ip;
  else if (strcmp(path, "status.podIPs") == 0) {
    nl_buf_t b = NL_BUF_INIT;
    for (size_t i = 0; i < n_pod_ips; i++) nl_buf_printf(&b, "%s%s", i ? "," : "", pod_ips[i]);
    if (n_pod_ips == 0 && pod_ip) nl_buf_puts(&b, pod_ip);
    *out = b.data ? nl_buf_steal(&b) : nl_xstrdup("");
    return 0;
  } else if (strcmp(path, "metadata.name") == 0)
    v = m->name;
  else if (strcmp(path, "metadata.namespace") == 0)
    v = m->namespace_;
  else if (strcmp(path, "metadata.uid") == 0)
    v = m->uid;
  else if (strcmp(path, "metadata.labels") == 0) {
    *out = format_map(&m->labels);
    return 0;
  } else if (strcmp(path, "metadata.annotations") == 0) {
    *out = format_map(&m->annotations);
    return 0;
  } else if ((key = subscript(path, "metadata.labels"))) {
    v = nl__kv_get(&m->labels, key);
    free(key);
  } else if ((key = subscript(path, "metadata.annotations"))) {
    v = nl__kv_get(&m->annotations, key);
    free(key);
  } else
    return nl_err_set(err, NL_EINVAL, "unsupported fieldPath: %s", path);
  *out = nl_xstrdup(v ? v : "");
  return 0;
}

/* resource.ExtractContainerResourceValue with node allocatable as the default
 * limit (upstream containerResourceRuntimeValue). */
int nl_runtime_resource_value(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                              const nl_container_t *self, const nl_resource_field_ref_t *ref,
                              char **out, nl_err_t **err) {
  const nl_container_t *c = self;
  if (ref->container_name && *ref->container_name) {
    c = NULL;
    for (size_t i = 0; i < pod->spec.n_containers && !c; i++)
      if (strcmp(pod->spec.containers[i].name, ref->container_name) == 0)
        c = &pod->spec.containers[i];
    for (size_t i = 0; i < pod->spec.n_init_containers && !c; i++)
      if (strcmp(pod->spec.init_containers[i].name, ref->container_name) == 0)
        c = &pod->spec.init_containers[i];
  }
  if (!c) {
    if (!ref->container_name || !*ref->container_name)
      return nl_err_set(err, NL_EINVAL, "resourceFieldRef %s: containerName is required",
                        ref->resource ? ref->resource : "");
    return nl_err_set(err, NL_EINVAL, "container %s not found", ref->container_name);
  }
  const char *res = ref->resource ? ref->resource : "";
  bool limits = strncmp(res, "limits.", 7) == 0;
  bool requests = strncmp(res, "requests.", 9) == 0;
  if (!limits && !requests)
    return nl_err_set(err, NL_EINVAL, "unsupported container resource : %s", res);
  const char *name = res + (limits ? 7 : 9);
  const nl_quantity_t *q =
      nl_resource_list_get(limits ? &c->resources.limits : &c->resources.requests, name);
  nl_quantity_t one = {1, 0, NL_QUANTITY_DECIMAL_SI};
  const nl_quantity_t *div = ref->has_divisor ? &ref->divisor : &one;
  bool is_cpu = strcmp(name, "cpu") == 0;
  int64_t milli;
  if (q)
    milli = nl_quantity_milli_value(q);
  else if (is_cpu)
    milli = limits ? opts->node_cpu_milli : 0;
  else if (strcmp(name, "memory") == 0)
    milli = limits ? opts->node_memory_bytes * 1000 : 0;
  else if (strcmp(name, "ephemeral-storage") == 0 || strncmp(name, "hugepages-", 10) == 0)
    milli = 0;
  else
    return nl_err_set(err, NL_EINVAL, "unsupported container resource : %s", res);
  int64_t dm = nl_quantity_milli_value(div);
  if (dm <= 0) return nl_err_set(err, NL_EINVAL, "invalid divisor for %s", res);
  /* cpu: ceil(milli/divisorMilli); others: ceil(value/divisorValue) */
  double v = is_cpu ? ceil((double)milli / (double)dm)
                    : ceil(((double)milli / 1000.0) / ((double)dm / 1000.0));
  *out = nl_xasprintf("%lld", (long long)v);
  return 0;
}

int nl_runtime_make_env(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                        const nl_container_t *c, const char *pod_ip, char *const *pod_ips,
                        size_t n_pod_ips, nl_env_t **out, size_t *n, nl_err_t **err) {
  nl__kvs_t env = {0};
  nl_env_t *svc = NULL;
  size_t n_svc = 0;
  if (opts->service_env && opts->service_env(opts->service_env_ctx, pod, &svc, &n_svc, err) < 0)
    return -1;
  for (size_t i = 0; i < c->n_env_from; i++) {
    const nl_env_from_t *f = &c->env_from[i];
    const nl_local_ref_t *r = f->config_map_ref ? f->config_map_ref : f->secret_ref;
    if (r && r->optional != 1) {
      nl_err_set(err, NL_EINVAL, "couldn't get %s %s/%s: no API server objects on this node",
                 f->config_map_ref ? "configMap" : "secret",
                 pod->metadata.namespace_ ? pod->metadata.namespace_ : "", r->name);
      goto fail;
    }
  }
  for (size_t i = 0; i < c->n_env; i++) {
    const nl_env_var_t *e = &c->env[i];
    if (!e->value_from) {
      nl__kvs_put_take(&env, e->name,
                       expand(e->value ? e->value : "", env.items, env.n, svc, n_svc));
      continue;
    }
    const nl_env_source_t *src = e->value_from;
    char *v = NULL;
    if (src->field_ref) {
      if (nl_runtime_field_value(opts, pod, src->field_ref->field_path ? src->field_ref->field_path : "",
                      pod_ip, pod_ips, n_pod_ips, &v, err) < 0) {
        nl_err_wrap(err, "env %s", e->name);
        goto fail;
      }
    } else if (src->resource_field_ref) {
      if (nl_runtime_resource_value(opts, pod, c, src->resource_field_ref, &v, err) < 0) {
        nl_err_wrap(err, "env %s", e->name);
        goto fail;
      }
    } else {
      const nl_key_ref_t *k = src->config_map_key_ref ? src->config_map_key_ref
                                                      : src->secret_key_ref;
      if (k && k->optional == 1) continue; /* optional and absent: skipped */
      nl_err_set(err, NL_EINVAL, "env %s: couldn't find key %s in %s %s/%s", e->name,
                 k && k->key ? k->key : "", src->config_map_key_ref ? "ConfigMap" : "Secret",
                 pod->metadata.namespace_ ? pod->metadata.namespace_ : "",
                 k && k->name ? k->name : "");
      goto fail;
    }
    nl__kvs_put_take(&env, e->name, v);
  }
  /* Then the service variables the container does not set itself. */
  for (size_t i = 0; i < n_svc; i++)
    if (!nl__kvs_get(&env, svc[i].name)) nl__kvs_put(&env, svc[i].name, svc[i].value);
  nl_env_free(svc, n_svc);
  *out = env.items;
  *n = env.n;
  return 0;
fail:
  nl_env_free(svc, n_svc);
  nl__kvs_free(&env);
  return -1;
}
