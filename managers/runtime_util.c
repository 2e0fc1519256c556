#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "managers/runtime_internal.h"
#include "managers/userns.h"
#include "reactor/xalloc.h"

void nl__kvs_put_all(nl__kvs_t *m, const nl_kvlist_t *l) {
  for (size_t i = 0; i < l->n; i++) nl__kvs_put(m, l->items[i].key, l->items[i].value);
}

void nl__kvs_put_take(nl__kvs_t *m, const char *k, char *v) {
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(m->items[i].name, k) == 0) {
      free(m->items[i].value);
      m->items[i].value = v;
      return;
    }
  if (m->n == m->cap) {
    m->cap = m->cap ? m->cap * 2 : 8;
    m->items = nl_xrealloc(m->items, m->cap * sizeof *m->items);
  }
  m->items[m->n].name = nl_xstrdup(k);
  m->items[m->n].value = v;
  m->n++;
}

void nl__kvs_put(nl__kvs_t *m, const char *k, const char *v) {
  nl__kvs_put_take(m, k, nl_xstrdup(v ? v : ""));
}

const char *nl__kvs_get(const nl__kvs_t *m, const char *k) {
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(m->items[i].name, k) == 0) return m->items[i].value;
  return NULL;
}

void nl__kvs_free(nl__kvs_t *m) {
  nl_env_free(m->items, m->n);
  m->items = NULL;
  m->n = m->cap = 0;
}

void nl_env_free(nl_env_t *env, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(env[i].name);
    free(env[i].value);
  }
  free(env);
}

typedef struct kv_msg {
  ProtobufCMessage base;
  char *key;
  char *value;
} kv_msg_t;

void **nl__kv_entries(const ProtobufCMessageDescriptor *desc, const nl__kvs_t *m) {
  if (m->n == 0) return NULL;
  void **out = nl_xcalloc(m->n, sizeof *out);
  for (size_t i = 0; i < m->n; i++) {
    kv_msg_t *e = nl_xmalloc(desc->sizeof_message);
    protobuf_c_message_init(desc, e);
    e->key = nl__pstr(m->items[i].name);
    e->value = nl__pstr(m->items[i].value);
    out[i] = e;
  }
  return out;
}

char *nl__pstr(const char *s) {
  if (!s || !*s) return (char *)protobuf_c_empty_string;
  return nl_xstrdup(s);
}

char **nl__pstrv(char *const *v, size_t n) {
  if (n == 0) return NULL;
  char **out = nl_xcalloc(n, sizeof *out);
  for (size_t i = 0; i < n; i++) out[i] = nl__pstr(v[i]);
  return out;
}

void nl__strv_push(char ***v, size_t *n, const char *s) {
  *v = nl_xrealloc(*v, (*n + 1) * sizeof **v);
  (*v)[(*n)++] = nl__pstr(s);
}

bool nl__strv_has(char *const *v, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i], s) == 0) return true;
  return false;
}

bool nl__is_restartable_init(const nl_container_t *c) {
  return c->restart_policy && strcmp(c->restart_policy, "Always") == 0;
}

bool nl__pod_restart_on_failure(const nl_pod_t *pod) {
  return !pod->spec.restart_policy || strcmp(pod->spec.restart_policy, "Never") != 0;
}

const char *nl__kv_get(const nl_kvlist_t *l, const char *key) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->items[i].key, key) == 0) return l->items[i].value;
  return NULL;
}

static const char *s0(const char *s) { return s ? s : ""; }

char *nl__pod_desc(const nl_pod_t *pod) {
  return nl_xasprintf("%s_%s(%s)", s0(pod->metadata.name), s0(pod->metadata.namespace_),
                      s0(pod->metadata.uid));
}

char *nl__pod_full_dir_name(const nl_pod_t *pod) {
  return nl_xasprintf("%s_%s_%s", s0(pod->metadata.namespace_), s0(pod->metadata.name),
                      s0(pod->metadata.uid));
}

static char *dup0(const char *s) { return s ? nl_xstrdup(s) : NULL; }

/* ---- results ---- */

const char *nl_sync_action_name(nl_sync_action_t a) {
  switch (a) {
  case NL_SYNC_START_CONTAINER: return "StartContainer";
  case NL_SYNC_KILL_CONTAINER: return "KillContainer";
  case NL_SYNC_INIT_CONTAINER: return "InitContainer";
  case NL_SYNC_CREATE_POD_SANDBOX: return "CreatePodSandbox";
  case NL_SYNC_CONFIG_POD_SANDBOX: return "ConfigPodSandbox";
  case NL_SYNC_KILL_POD_SANDBOX: return "KillPodSandbox";
  case NL_SYNC_REMOVE_CONTAINER: return "RemoveContainer";
  case NL_SYNC_REMOVE_POD_SANDBOX: return "RemovePodSandbox";
  case NL_SYNC_RESIZE_POD: return "ResizePodInPlace";
  }
  return "Unknown";
}

nl_sync_step_t *nl__result_add(nl_sync_result_t *r, nl_sync_action_t a, const char *target,
                               bool init) {
  r->steps = nl_xrealloc(r->steps, (r->n_steps + 1) * sizeof *r->steps);
  nl_sync_step_t *s = &r->steps[r->n_steps++];
  memset(s, 0, sizeof *s);
  s->action = a;
  s->target = nl_xstrdup(target ? target : "");
  s->init = init;
  return s;
}

void nl__step_fail(nl_sync_step_t *s, const char *reason, const char *fmt, ...) {
  free(s->reason);
  free(s->message);
  s->reason = nl_xstrdup(reason);
  va_list ap;
  va_start(ap, fmt);
  char *m = NULL;
  if (vasprintf(&m, fmt, ap) < 0) abort();
  va_end(ap);
  s->message = m;
}

const nl_sync_step_t *nl_sync_result_find(const nl_sync_result_t *r, const char *container) {
  if (!r) return NULL;
  const nl_sync_step_t *found = NULL;
  for (size_t i = 0; i < r->n_steps; i++) {
    const nl_sync_step_t *s = &r->steps[i];
    if ((s->action == NL_SYNC_START_CONTAINER || s->action == NL_SYNC_INIT_CONTAINER) &&
        s->reason && strcmp(s->target, container) == 0)
      found = s;
  }
  return found;
}

nl_sync_result_t *nl_sync_result_dup(const nl_sync_result_t *r) {
  nl_sync_result_t *d = nl_xcalloc(1, sizeof *d);
  if (!r) return d;
  d->cancelled = r->cancelled;
  d->backoff_until_ms = r->backoff_until_ms;
  for (size_t i = 0; i < r->n_steps; i++) {
    nl_sync_step_t *s = nl__result_add(d, r->steps[i].action, r->steps[i].target,
                                       r->steps[i].init);
    s->reason = dup0(r->steps[i].reason);
    s->message = dup0(r->steps[i].message);
  }
  if (r->err) nl_err_set(&d->err, r->err->code, "%s", r->err->msg);
  return d;
}

void nl__sync_result_clear(nl_sync_result_t *r) {
  for (size_t i = 0; i < r->n_steps; i++) {
    free(r->steps[i].target);
    free(r->steps[i].reason);
    free(r->steps[i].message);
  }
  free(r->steps);
  nl_err_free(&r->err);
  memset(r, 0, sizeof *r);
}

void nl_sync_result_free(nl_sync_result_t *r) {
  if (!r) return;
  nl__sync_result_clear(r);
  free(r);
}

/* ---- namespaces ---- */

void nl__pod_groups(const nl_pod_security_context_t *psc, int64_t **groups, size_t *n,
                    Runtime__V1__SupplementalGroupsPolicy *policy) {
  *groups = NULL;
  *n = 0;
  *policy = RUNTIME__V1__SUPPLEMENTAL_GROUPS_POLICY__Merge;
  if (!psc) return;
  size_t ng = psc->n_supplemental_groups + (psc->fs_group.set ? 1 : 0);
  if (ng) *groups = nl_xcalloc(ng, sizeof(int64_t));
  if (psc->fs_group.set) (*groups)[(*n)++] = psc->fs_group.v;
  for (size_t i = 0; i < psc->n_supplemental_groups; i++)
    (*groups)[(*n)++] = psc->supplemental_groups[i];
  /* Strict: the runtime adds none of the groups the image's /etc/group gives
   * the user (validation admits only Merge and Strict) */
  if (psc->supplemental_groups_policy && strcmp(psc->supplemental_groups_policy, "Strict") == 0)
    *policy = RUNTIME__V1__SUPPLEMENTAL_GROUPS_POLICY__Strict;
}

Runtime__V1__NamespaceOption *nl__namespaces_for_pod(const nl_pod_t *pod) {
  Runtime__V1__NamespaceOption *ns =
      NL__NEW(Runtime__V1__NamespaceOption, RUNTIME__V1__NAMESPACE_OPTION__INIT);
  ns->network = pod->spec.host_network ? RUNTIME__V1__NAMESPACE_MODE__NODE
                                       : RUNTIME__V1__NAMESPACE_MODE__POD;
  ns->ipc = pod->spec.host_ipc ? RUNTIME__V1__NAMESPACE_MODE__NODE
                               : RUNTIME__V1__NAMESPACE_MODE__POD;
  if (pod->spec.host_pid)
    ns->pid = RUNTIME__V1__NAMESPACE_MODE__NODE;
  else if (pod->spec.share_process_namespace == 1)
    ns->pid = RUNTIME__V1__NAMESPACE_MODE__POD;
  else
    ns->pid = RUNTIME__V1__NAMESPACE_MODE__CONTAINER;
  return ns;
}

int nl__userns_check_handler(const nl_runtime_opts_t *opts, const nl_pod_t *pod, nl_err_t **err) {
  const char *handler;
  if (nl_runtime_pod_handler(opts, pod, &handler, err) < 0) return -1;
  int s = opts->supports_userns ? opts->supports_userns(opts->supports_userns_ctx, handler) : 0;
  if (s == 1) return 0;
  /* A pod with a slot already (read back at start) ran in its user namespace
   * before this start; it is not refused while the runtime's first Status is
   * awaited, a new one waits for it (the sync is retried). */
  uint32_t host_id;
  if (s == -2 && opts->userns && nl_userns_get(opts->userns, pod->metadata.uid, &host_id)) return 0;
  if (s == -2)
    return nl_err_set(err, NL_ERUNTIME,
                      "can't set `spec.hostUsers: false` yet: the runtime's handlers are not known");
  char *msg = *handler ? nl_xasprintf("can't set `spec.hostUsers: false`, RuntimeClass handler \"%s\" "
                                      "does not support user namespaces",
                                      handler)
                       : nl_xstrdup("can't set `spec.hostUsers: false`, runtime does not support "
                                    "user namespaces");
  if (s < 0)
    nl_err_set(err, NL_EINVAL, "%s: the handler \"%s\" is not known", msg, handler);
  else
    nl_err_set(err, NL_EINVAL, "%s", msg);
  free(msg);
  return -1;
}

static Runtime__V1__IDMapping **id_mappings(uint32_t host_id, uint32_t length) {
  Runtime__V1__IDMapping **v = nl_xcalloc(1, sizeof *v);
  v[0] = NL__NEW(Runtime__V1__IDMapping, RUNTIME__V1__IDMAPPING__INIT);
  v[0]->host_id = host_id;
  v[0]->container_id = 0;
  v[0]->length = length;
  return v;
}

int nl__userns_for_pod(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                       Runtime__V1__UserNamespace **out, nl_err_t **err) {
  Runtime__V1__UserNamespace *u =
      NL__NEW(Runtime__V1__UserNamespace, RUNTIME__V1__USER_NAMESPACE__INIT);
  u->mode = RUNTIME__V1__NAMESPACE_MODE__NODE;
  if (pod->spec.host_users != 0) {
    *out = u;
    return 0;
  }
  uint32_t host_id;
  if (nl__userns_check_handler(opts, pod, err) < 0) {
    free(u);
    return -1;
  }
  if (!opts->userns || !nl_userns_get(opts->userns, pod->metadata.uid, &host_id)) {
    free(u);
    return nl_err_set(err, NL_ERUNTIME, "user namespace: pod %s has no user namespace allocation",
                      pod->metadata.uid);
  }
  uint32_t len = opts->userns->ids_per_pod;
  u->mode = RUNTIME__V1__NAMESPACE_MODE__POD;
  u->n_uids = u->n_gids = 1;
  u->uids = id_mappings(host_id, len);
  u->gids = id_mappings(host_id, len);
  *out = u;
  return 0;
}

uint64_t nl__wall_ms(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void nl__op_event(nl_runtime_op_t *op, const nl_pod_t *pod, const char *container,
                  const char *type, const char *reason, const char *fmt, ...) {
  if (!pod) return;
  char fp[320];
  nl_event_ref_t ref = container ? nl_event_container_ref(pod, container, fp, sizeof fp)
                                 : nl_event_pod_ref(pod);
  va_list ap;
  va_start(ap, fmt);
  nl_event_vrecord(&op->rt->opts.events, &ref, type, reason, fmt, ap);
  va_end(ap);
}
