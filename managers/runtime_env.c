/* Container environment (upstream kubelet_pods.go makeEnvironmentVariables) and
 * $(VAR) expansion (third_party/forked/golang/expansion). */
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
  else if (strcmp(path, "status.hostIPs") == 0)
    v = opts->node_ip; /* "IPv4,IPv6" for a dual-stack node, as upstream joins them */
  else if (strcmp(path, "status.hostIP") == 0) {
    const char *ip = opts->node_ip ? opts->node_ip : "";
    *out = nl_xstrndup(ip, strcspn(ip, ","));
    return 0;
  }
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

/* ceil(a / b) for b > 0, in integers: exact where upstream's float64 division
 * is, and no libm in the self-contained build. */
static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b > 0); }

/* The node allocatable an unset (or zero) cpu, memory or ephemeral-storage limit
 * defaults to (upstream defaultPodLimitsForDownwardAPI with
 * MergeContainerResourceLimits); -1: none, the limit stays 0. */
static int64_t node_default(const nl_runtime_opts_t *opts, const char *name) {
  nl_runtime_allocatable_t a = {-1, -1, -1};
  if (opts->allocatable) opts->allocatable(opts->allocatable_ctx, &a);
  if (strcmp(name, "cpu") == 0) return a.cpu_milli >= 0 ? a.cpu_milli : opts->node_cpu_milli;
  if (strcmp(name, "memory") == 0) return a.memory >= 0 ? a.memory : opts->node_memory_bytes;
  if (strcmp(name, "ephemeral-storage") == 0) return a.ephemeral_storage;
  return -1;
}

/* resource.ExtractContainerResourceValue on the container with its limits
 * defaulted from node allocatable (upstream containerResourceRuntimeValue). */
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
  bool is_cpu = strcmp(name, "cpu") == 0;
  if (!is_cpu && strcmp(name, "memory") != 0 && strcmp(name, "ephemeral-storage") != 0 &&
      strncmp(name, "hugepages-", 10) != 0)
    return nl_err_set(err, NL_EINVAL, "unsupported container resource : %s", res);
  const nl_quantity_t *q =
      nl_resource_list_get(limits ? &c->resources.limits : &c->resources.requests, name);
  /* The API server sends an unset divisor as "0": upstream reads zero as 1. */
  nl_quantity_t one = {1, 0, NL_QUANTITY_DECIMAL_SI};
  const nl_quantity_t *div =
      ref->has_divisor && !nl_quantity_is_zero(&ref->divisor) ? &ref->divisor : &one;
  /* cpu in millis, the others in units (upstream's MilliValue / Value). */
  int64_t v = 0;
  if (q && !nl_quantity_is_zero(q))
    v = is_cpu ? nl_quantity_milli_value(q) : nl_quantity_value(q);
  else if (limits && strncmp(name, "hugepages-", 10) != 0) {
    /* upstream defaultPodLimitsForDownwardAPI (1.34+): the pod-level limit
     * stands in for the container's before the node's allocatable does */
    int64_t d = node_default(opts, name);
    const nl_quantity_t *pl =
        strcmp(name, "ephemeral-storage") != 0 ? nl_pod_level_limit(pod, name) : NULL;
    if (pl && !nl_quantity_is_zero(pl) && d >= 0)
      d = is_cpu ? nl_quantity_milli_value(pl) : nl_quantity_value(pl);
    v = d > 0 ? d : 0;
  }
  int64_t dv = is_cpu ? nl_quantity_milli_value(div) : nl_quantity_value(div);
  if (dv <= 0) return nl_err_set(err, NL_EINVAL, "invalid divisor for %s", res);
  *out = nl_xasprintf("%lld", (long long)ceil_div(v, dv));
  return 0;
}

/* The object a reference names: 1 with *out, 0 when it does not exist and the
 * reference is optional, or -1 with *err. */
static int get_object(const nl_runtime_opts_t *opts, const nl_pod_t *pod, nl_object_kind_t kind,
                      const char *name, bool optional, const nl_object_t **out, nl_err_t **err) {
  const char *ns = pod->metadata.namespace_ ? pod->metadata.namespace_ : "";
  if (!opts->objects.fn && optional) return 0; /* standalone: nothing exists */
  if (!opts->objects.fn)
    return nl_err_set(err, NL_EINVAL, "couldn't get %s %s/%s, no kubeClient defined",
                      kind == NL_OBJECT_SECRET ? "secret" : "configMap", ns, name);
  int rc = opts->objects.fn(opts->objects.ctx, kind, ns, name, out, err);
  if (rc == 0 && !optional) return nl_objects_not_found(err, kind, name);
  return rc;
}

/* validation.IsRelaxedEnvVarName (RelaxedEnvironmentVariableValidation, GA
 * in 1.34): printable ASCII but '='. Every key the API server accepts passes;
 * the check keeps what could never be a variable out of the container. */
static bool env_name_ok(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (*s < 32 || *s > 126 || *s == '=') return false;
  return true;
}

static int env_from(const nl_runtime_opts_t *opts, const nl_pod_t *pod, const nl_env_from_t *f,
                    nl__kvs_t *env, nl_err_t **err) {
  const nl_local_ref_t *r = f->config_map_ref ? f->config_map_ref : f->secret_ref;
  if (!r) return 0;
  nl_object_kind_t kind = f->config_map_ref ? NL_OBJECT_CONFIG_MAP : NL_OBJECT_SECRET;
  const nl_object_t *o = NULL;
  int rc = get_object(opts, pod, kind, r->name ? r->name : "", r->optional == 1, &o, err);
  if (rc <= 0) return rc;
  const char *prefix = f->prefix ? f->prefix : "";
  nl_buf_t invalid = NL_BUF_INIT; /* sorted: the items are */
  for (size_t i = 0; i < o->n_items; i++) {
    const nl_object_item_t *it = &o->items[i];
    if (it->binary) continue; /* configMap.Data only */
    char *name = nl_xasprintf("%s%s", prefix, it->key);
    if (!env_name_ok(name)) {
      nl_buf_printf(&invalid, "%s%s", invalid.len ? ", " : "", name);
      free(name);
      continue;
    }
    nl__kvs_put_take(env, name, nl_xstrndup((const char *)it->value, it->len));
    free(name);
  }
  if (invalid.len) {
    nl_event_ref_t ref = nl_event_pod_ref(pod);
    nl_event_record(&opts->events, &ref, NL_EVENT_WARNING, "InvalidEnvironmentVariableNames",
                    "Keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered "
                    "invalid environment variable names.",
                    invalid.data, kind == NL_OBJECT_SECRET ? "secret" : "configMap",
                    o->namespace_, o->name);
  }
  nl_buf_free(&invalid);
  return 0;
}

/* configMapKeyRef / secretKeyRef: 1 with *out, 0 to skip (optional), -1. */
static int key_value(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                     const nl_env_source_t *src, char **out, nl_err_t **err) {
  const nl_key_ref_t *k = src->config_map_key_ref ? src->config_map_key_ref : src->secret_key_ref;
  nl_object_kind_t kind = src->config_map_key_ref ? NL_OBJECT_CONFIG_MAP : NL_OBJECT_SECRET;
  const char *name = k->name ? k->name : "", *key = k->key ? k->key : "";
  const nl_object_t *o = NULL;
  int rc = get_object(opts, pod, kind, name, k->optional == 1, &o, err);
  if (rc <= 0) return rc;
  const nl_object_item_t *it = nl_object_find(o, key);
  if (!it || it->binary) {
    if (k->optional == 1) return 0;
    return nl_err_set(err, NL_EINVAL, "couldn't find key %s in %s %s/%s", key,
                      kind == NL_OBJECT_SECRET ? "Secret" : "ConfigMap",
                      pod->metadata.namespace_ ? pod->metadata.namespace_ : "", name);
  }
  *out = nl_xstrndup((const char *)it->value, it->len);
  return 1;
}

int nl_runtime_make_env(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                        const nl_container_t *c, const char *pod_ip, char *const *pod_ips,
                        size_t n_pod_ips, const nl_env_t *files, size_t n_files, nl_env_t **out,
                        size_t *n, nl_err_t **err) {
  nl__kvs_t env = {0};
  nl_env_t *svc = NULL;
  size_t n_svc = 0;
  if (opts->service_env && opts->service_env(opts->service_env_ctx, pod, &svc, &n_svc, err) < 0)
    return -1;
  /* envFrom first: env overrides it */
  for (size_t i = 0; i < c->n_env_from; i++)
    if (env_from(opts, pod, &c->env_from[i], &env, err) < 0) goto fail;
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
    } else if (src->config_map_key_ref || src->secret_key_ref) {
      int rc = key_value(opts, pod, src, &v, err);
      if (rc < 0) goto fail; /* upstream's message as it is: it is the pod's status */
      if (rc == 0) continue;
    } else if (src->file_key_ref) {
      const char *fv = lookup1(files, n_files, e->name, strlen(e->name));
      if (!fv) continue;
      v = nl_xstrdup(fv);
    } else {
      continue; /* validation refuses a valueFrom with no source */
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
