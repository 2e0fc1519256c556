/* The one typed decoder: walks the generic tree (tree.c) into nl_pod_t, with the
 * field path of every problem. Type mismatches are errors (as Go's JSON decoding
 * into typed structs); unknown fields are ignored; null leaves a field unset. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/internal.h"
#include "reactor/tree.h"
#include "reactor/xalloc.h"

typedef struct dec {
  nl_arena_t *a; /* the pod's */
  nl__errs_t e;
} dec_t;

/* ---- scalars ---- */

static const char *kind_of(const nl_tnode_t *v) { return nl_tree_kind_name(v->kind); }

static char *str(dec_t *d, const nl_tnode_t *v) {
  if (!v || v->kind == NL_T_NULL) return NULL;
  if (v->kind != NL_T_STR) {
    nl__errf(&d->e, "must be a string, got %s", kind_of(v));
    return NULL;
  }
  return nl_arena_strndup(d->a, v->s, v->len);
}

static void get_bool(dec_t *d, const nl_tnode_t *v, bool *out) {
  if (v->kind == NL_T_NULL) return;
  if (v->kind != NL_T_BOOL) nl__errf(&d->e, "must be a boolean, got %s", kind_of(v));
  else *out = v->b;
}

static void get_tri(dec_t *d, const nl_tnode_t *v, nl_tristate_t *out) {
  bool b = false;
  if (v->kind == NL_T_NULL) {
    *out = NL_UNSET;
    return;
  }
  if (v->kind != NL_T_BOOL) nl__errf(&d->e, "must be a boolean, got %s", kind_of(v));
  else get_bool(d, v, &b), *out = b;
}

/* Integral floats are accepted: YAML 1.0 reaches upstream's decoder as JSON 1. */
static bool get_int(dec_t *d, const nl_tnode_t *v, int64_t lo, int64_t hi, int64_t *out) {
  if (v->kind == NL_T_INT) {
    if (v->i < lo || v->i > hi) {
      nl__errf(&d->e, "number %s out of range", v->s);
      return false;
    }
    *out = v->i;
    return true;
  }
  if (v->kind == NL_T_FLOAT) {
    char *end;
    double f = strtod(v->s, &end);
    /* range first: casting an out-of-range double is undefined */
    if (!*end && f >= -9223372036854775808.0 && f < 9223372036854775808.0 &&
        f == (double)(int64_t)f && (int64_t)f >= lo && (int64_t)f <= hi) {
      *out = (int64_t)f;
      return true;
    }
    nl__errf(&d->e, "must be an integer, got %s", v->s);
    return false;
  }
  if (v->kind != NL_T_NULL) nl__errf(&d->e, "must be an integer, got %s", kind_of(v));
  return false;
}

static void get_i32(dec_t *d, const nl_tnode_t *v, int32_t *out) {
  int64_t x;
  if (get_int(d, v, INT32_MIN, INT32_MAX, &x)) *out = (int32_t)x;
}

static void get_i64(dec_t *d, const nl_tnode_t *v, int64_t *out) {
  get_int(d, v, INT64_MIN, INT64_MAX, out);
}

static void opt_i64(dec_t *d, const nl_tnode_t *v, nl_opt_i64_t *out) {
  out->set = get_int(d, v, INT64_MIN, INT64_MAX, &out->v);
}

static void opt_i32(dec_t *d, const nl_tnode_t *v, nl_opt_i32_t *out) {
  int64_t x;
  out->set = get_int(d, v, INT32_MIN, INT32_MAX, &x);
  if (out->set) out->v = (int32_t)x;
}

/* resource.Quantity's UnmarshalJSON takes a string or a bare number. */
static bool get_quantity(dec_t *d, const nl_tnode_t *v, nl_quantity_t *q) {
  if (v->kind == NL_T_NULL) return false;
  if (v->kind != NL_T_STR && v->kind != NL_T_INT && v->kind != NL_T_FLOAT) {
    nl__errf(&d->e, "must be a quantity, got %s", kind_of(v));
    return false;
  }
  nl_err_t *err = NULL;
  if (strlen(v->s) != v->len || nl_quantity_parse(v->s, q, &err) < 0) {
    nl__errf(&d->e, "%s", err ? err->msg : "quantities must not contain NUL");
    nl_err_free(&err);
    return false;
  }
  return true;
}

static void get_ios(dec_t *d, const nl_tnode_t *v, nl_intorstr_t *out) {
  *out = (nl_intorstr_t){0};
  if (v->kind == NL_T_STR) {
    out->set = out->is_str = true;
    out->str = nl_arena_strndup(d->a, v->s, v->len);
  } else if (v->kind == NL_T_INT || v->kind == NL_T_FLOAT) {
    int64_t x;
    if (get_int(d, v, INT32_MIN, INT32_MAX, &x)) out->set = true, out->num = (int32_t)x;
  } else if (v->kind != NL_T_NULL) {
    nl__errf(&d->e, "must be a number or a string, got %s", kind_of(v));
  }
}

/* ---- containers of things ---- */

static nl_tentry_t *map_entries(dec_t *d, const nl_tnode_t *v) {
  if (v->kind == NL_T_NULL) return NULL;
  if (v->kind != NL_T_MAP) {
    nl__errf(&d->e, "must be an object, got %s", kind_of(v));
    return NULL;
  }
  return v->first;
}

static nl_tentry_t *seq_entries(dec_t *d, const nl_tnode_t *v, size_t *n) {
  *n = 0;
  if (v->kind == NL_T_NULL) return NULL;
  if (v->kind != NL_T_SEQ) {
    nl__errf(&d->e, "must be a list, got %s", kind_of(v));
    return NULL;
  }
  *n = v->n;
  return v->first;
}

/* Walk an object's fields: `FIELDS(node) F("name") x = str(d, v); ... END_FIELDS`. */
#define FIELDS(node)                                                      \
  for (nl_tentry_t *e_ = map_entries(d, (node)); e_; e_ = e_->next) {     \
    size_t m_ = nl__path_key(&d->e, e_->key);                             \
    const char *k = e_->key;                                              \
    const nl_tnode_t *v = e_->val;                                        \
    (void)v;                                                              \
    if (0) {
#define F(name) } else if (e_->key_len == sizeof(name) - 1 && memcmp(k, name, sizeof(name) - 1) == 0) {
#define END_FIELDS                                                        \
  }                                                                       \
  nl__path_pop(&d->e, m_);                                                \
  }

/* A list of T decoded element by element with fn(d, node, T *). */
#define SEQ(node, arr, cnt, fn)                                           \
  do {                                                                    \
    size_t n_;                                                            \
    nl_tentry_t *it_ = seq_entries(d, (node), &n_);                       \
    (arr) = NULL;                                                         \
    (cnt) = 0;                                                            \
    if (!it_) break;                                                      \
    (arr) = nl_arena_alloc(d->a, n_ * sizeof *(arr));                    \
    (cnt) = n_;                                                           \
    for (size_t i_ = 0; it_; it_ = it_->next, i_++) {                     \
      size_t m2_ = nl__path_idx(&d->e, i_);                               \
      fn(d, it_->val, &(arr)[i_]);                                        \
      nl__path_pop(&d->e, m2_);                                           \
    }                                                                     \
  } while (0)

/* An optional sub-object (a Go pointer): NULL for null, allocated otherwise. */
#define OBJ(node, ptr, fn)                                                \
  do {                                                                    \
    if ((node)->kind == NL_T_NULL) break;                                 \
    if ((node)->kind != NL_T_MAP) {                                       \
      nl__errf(&d->e, "must be an object, got %s", kind_of(node));        \
      break;                                                              \
    }                                                                     \
    (ptr) = nl_arena_alloc(d->a, sizeof *(ptr));                         \
    fn(d, (node), (ptr));                                                 \
  } while (0)

static void str_item(dec_t *d, const nl_tnode_t *v, char **out) { *out = str(d, v); }

static void strlist(dec_t *d, const nl_tnode_t *v, nl_strlist_t *out) {
  *out = (nl_strlist_t){0};
  SEQ(v, out->items, out->n, str_item);
  for (size_t i = 0; i < out->n; i++) /* a null item is "" in Go */
    if (!out->items[i]) out->items[i] = nl_arena_strdup(d->a, "");
}

static void kvlist(dec_t *d, const nl_tnode_t *v, nl_kvlist_t *out) {
  *out = (nl_kvlist_t){0}; /* a repeated key: the last one wins */
  nl_tentry_t *it = map_entries(d, v);
  if (!it) return;
  out->items = nl_arena_alloc(d->a, v->n * sizeof *out->items);
  for (; it; it = it->next) {
    size_t m = nl__path_map(&d->e, it->key);
    char *val = str(d, it->val);
    nl_kv_t *kv = &out->items[out->n++];
    kv->key = nl_arena_strndup(d->a, it->key, it->key_len);
    kv->value = val ? val : nl_arena_strdup(d->a, "");
    nl__path_pop(&d->e, m);
  }
  nl__kvlist_sort(out);
  if (!out->n) out->items = NULL; /* nil and empty maps are one thing here */
}

static void resource_list(dec_t *d, const nl_tnode_t *v, nl_resource_list_t *out) {
  *out = (nl_resource_list_t){0};
  nl_tentry_t *it = map_entries(d, v);
  if (!it) return;
  out->items = nl_arena_alloc(d->a, v->n * sizeof *out->items);
  for (; it; it = it->next) {
    size_t m = nl__path_map(&d->e, it->key);
    nl_resource_t *r = &out->items[out->n];
    if (get_quantity(d, it->val, &r->q)) {
      r->name = nl_arena_strndup(d->a, it->key, it->key_len);
      out->n++;
    }
    nl__path_pop(&d->e, m);
  }
  nl__resource_list_sort(out);
  if (!out->n) out->items = NULL;
}

/* ---- metadata ---- */

static void owner_ref(dec_t *d, const nl_tnode_t *n, nl_owner_ref_t *o) {
  *o = (nl_owner_ref_t){.controller = NL_UNSET, .block_owner_deletion = NL_UNSET};
  FIELDS(n)
  F("apiVersion") o->api_version = str(d, v);
  F("kind") o->kind = str(d, v);
  F("name") o->name = str(d, v);
  F("uid") o->uid = str(d, v);
  F("controller") get_tri(d, v, &o->controller);
  F("blockOwnerDeletion") get_tri(d, v, &o->block_owner_deletion);
  END_FIELDS
}

static void object_meta(dec_t *d, const nl_tnode_t *n, nl_object_meta_t *m) {
  FIELDS(n)
  F("name") m->name = str(d, v);
  F("generateName") m->generate_name = str(d, v);
  F("namespace") m->namespace_ = str(d, v);
  F("uid") m->uid = str(d, v);
  F("labels") kvlist(d, v, &m->labels);
  F("annotations") kvlist(d, v, &m->annotations);
  F("ownerReferences") SEQ(v, m->owner_refs, m->n_owner_refs, owner_ref);
  F("resourceVersion") m->resource_version = str(d, v);
  F("generation") get_i64(d, v, &m->generation);
  F("creationTimestamp") m->creation_timestamp = str(d, v);
  F("deletionTimestamp") m->deletion_timestamp = str(d, v);
  F("deletionGracePeriodSeconds") opt_i64(d, v, &m->deletion_grace_period_seconds);
  F("finalizers") strlist(d, v, &m->finalizers);
  END_FIELDS
}

/* ---- env ---- */

static void field_ref(dec_t *d, const nl_tnode_t *n, nl_field_ref_t *f) {
  FIELDS(n)
  F("apiVersion") f->api_version = str(d, v);
  F("fieldPath") f->field_path = str(d, v);
  END_FIELDS
}

static void resource_field_ref(dec_t *d, const nl_tnode_t *n, nl_resource_field_ref_t *r) {
  FIELDS(n)
  F("containerName") r->container_name = str(d, v);
  F("resource") r->resource = str(d, v);
  F("divisor") r->has_divisor = get_quantity(d, v, &r->divisor);
  END_FIELDS
}

static void key_ref(dec_t *d, const nl_tnode_t *n, nl_key_ref_t *r) {
  r->optional = NL_UNSET;
  FIELDS(n)
  F("name") r->name = str(d, v);
  F("key") r->key = str(d, v);
  F("optional") get_tri(d, v, &r->optional);
  END_FIELDS
}

static void file_key_ref(dec_t *d, const nl_tnode_t *n, nl_file_key_ref_t *r) {
  r->optional = NL_UNSET;
  FIELDS(n)
  F("volumeName") r->volume_name = str(d, v);
  F("path") r->path = str(d, v);
  F("key") r->key = str(d, v);
  F("optional") get_tri(d, v, &r->optional);
  END_FIELDS
}

static void env_source(dec_t *d, const nl_tnode_t *n, nl_env_source_t *s) {
  FIELDS(n)
  F("fieldRef") OBJ(v, s->field_ref, field_ref);
  F("resourceFieldRef") OBJ(v, s->resource_field_ref, resource_field_ref);
  F("configMapKeyRef") OBJ(v, s->config_map_key_ref, key_ref);
  F("secretKeyRef") OBJ(v, s->secret_key_ref, key_ref);
  F("fileKeyRef") OBJ(v, s->file_key_ref, file_key_ref);
  END_FIELDS
}

static void env_var(dec_t *d, const nl_tnode_t *n, nl_env_var_t *ev) {
  FIELDS(n)
  F("name") ev->name = str(d, v);
  F("value") ev->value = str(d, v);
  F("valueFrom") OBJ(v, ev->value_from, env_source);
  END_FIELDS
}

static void local_ref(dec_t *d, const nl_tnode_t *n, nl_local_ref_t *r) {
  r->optional = NL_UNSET;
  FIELDS(n)
  F("name") r->name = str(d, v);
  F("optional") get_tri(d, v, &r->optional);
  END_FIELDS
}

static void env_from(dec_t *d, const nl_tnode_t *n, nl_env_from_t *ef) {
  FIELDS(n)
  F("prefix") ef->prefix = str(d, v);
  F("configMapRef") OBJ(v, ef->config_map_ref, local_ref);
  F("secretRef") OBJ(v, ef->secret_ref, local_ref);
  END_FIELDS
}

/* ---- ports, mounts, resources ---- */

static void container_port(dec_t *d, const nl_tnode_t *n, nl_container_port_t *p) {
  FIELDS(n)
  F("name") p->name = str(d, v);
  F("hostPort") get_i32(d, v, &p->host_port);
  F("containerPort") get_i32(d, v, &p->container_port);
  F("protocol") p->protocol = str(d, v);
  F("hostIP") p->host_ip = str(d, v);
  END_FIELDS
}

static void volume_mount(dec_t *d, const nl_tnode_t *n, nl_volume_mount_t *m) {
  FIELDS(n)
  F("name") m->name = str(d, v);
  F("readOnly") get_bool(d, v, &m->read_only);
  F("mountPath") m->mount_path = str(d, v);
  F("subPath") m->sub_path = str(d, v);
  F("subPathExpr") m->sub_path_expr = str(d, v);
  F("mountPropagation") m->mount_propagation = str(d, v);
  F("recursiveReadOnly") m->recursive_read_only = str(d, v);
  END_FIELDS
}

static void claim_ref(dec_t *d, const nl_tnode_t *n, nl_resource_claim_ref_t *c) {
  FIELDS(n)
  F("name") c->name = str(d, v);
  F("request") c->request = str(d, v);
  END_FIELDS
}

static void resources(dec_t *d, const nl_tnode_t *n, nl_resource_requirements_t *r) {
  FIELDS(n)
  F("limits") resource_list(d, v, &r->limits);
  F("requests") resource_list(d, v, &r->requests);
  F("claims") SEQ(v, r->claims, r->n_claims, claim_ref);
  END_FIELDS
}

static void pod_claim(dec_t *d, const nl_tnode_t *n, nl_pod_resource_claim_t *c) {
  FIELDS(n)
  F("name") c->name = str(d, v);
  F("resourceClaimName") c->resource_claim_name = str(d, v);
  F("resourceClaimTemplateName") c->resource_claim_template_name = str(d, v);
  END_FIELDS
}

/* ---- probes, hooks ---- */

static void exec_action(dec_t *d, const nl_tnode_t *n, nl_exec_action_t *x) {
  FIELDS(n)
  F("command") strlist(d, v, &x->command);
  END_FIELDS
}

static void http_header(dec_t *d, const nl_tnode_t *n, nl_kv_t *h) {
  FIELDS(n)
  F("name") h->key = str(d, v);
  F("value") h->value = str(d, v);
  END_FIELDS
}

static void http_get(dec_t *d, const nl_tnode_t *n, nl_http_get_action_t *h) {
  FIELDS(n)
  F("path") h->path = str(d, v);
  F("port") get_ios(d, v, &h->port);
  F("host") h->host = str(d, v);
  F("scheme") h->scheme = str(d, v);
  F("httpHeaders") SEQ(v, h->headers, h->n_headers, http_header);
  END_FIELDS
}

static void tcp_socket(dec_t *d, const nl_tnode_t *n, nl_tcp_socket_action_t *t) {
  FIELDS(n)
  F("port") get_ios(d, v, &t->port);
  F("host") t->host = str(d, v);
  END_FIELDS
}

static void grpc_action(dec_t *d, const nl_tnode_t *n, nl_grpc_action_t *g) {
  FIELDS(n)
  F("port") get_i32(d, v, &g->port);
  F("service") g->service = str(d, v);
  END_FIELDS
}

static void sleep_action(dec_t *d, const nl_tnode_t *n, nl_sleep_action_t *s) {
  FIELDS(n)
  F("seconds") get_i64(d, v, &s->seconds);
  END_FIELDS
}

/* One handler field; returns false when k is not one. */
static bool handler_field(dec_t *d, const char *k, const nl_tnode_t *v, nl_handler_t *h) {
  if (strcmp(k, "exec") == 0) OBJ(v, h->exec, exec_action);
  else if (strcmp(k, "httpGet") == 0) OBJ(v, h->http_get, http_get);
  else if (strcmp(k, "tcpSocket") == 0) OBJ(v, h->tcp_socket, tcp_socket);
  else if (strcmp(k, "grpc") == 0) OBJ(v, h->grpc, grpc_action);
  else if (strcmp(k, "sleep") == 0) OBJ(v, h->sleep, sleep_action);
  else return false;
  return true;
}

static void handler(dec_t *d, const nl_tnode_t *n, nl_handler_t *h) {
  FIELDS(n)
  } else {
    handler_field(d, k, v, h);
  END_FIELDS
}

static void probe(dec_t *d, const nl_tnode_t *n, nl_probe_t *p) {
  FIELDS(n)
  F("initialDelaySeconds") get_i32(d, v, &p->initial_delay_seconds);
  F("timeoutSeconds") get_i32(d, v, &p->timeout_seconds);
  F("periodSeconds") get_i32(d, v, &p->period_seconds);
  F("successThreshold") get_i32(d, v, &p->success_threshold);
  F("failureThreshold") get_i32(d, v, &p->failure_threshold);
  F("terminationGracePeriodSeconds") opt_i64(d, v, &p->termination_grace_period_seconds);
  } else if (handler_field(d, k, v, &p->handler)) {
  END_FIELDS
}

static void lifecycle(dec_t *d, const nl_tnode_t *n, nl_lifecycle_t *l) {
  FIELDS(n)
  F("postStart") OBJ(v, l->post_start, handler);
  F("preStop") OBJ(v, l->pre_stop, handler);
  END_FIELDS
}

/* ---- security ---- */

static void selinux(dec_t *d, const nl_tnode_t *n, nl_selinux_options_t *s) {
  FIELDS(n)
  F("user") s->user = str(d, v);
  F("role") s->role = str(d, v);
  F("type") s->type = str(d, v);
  F("level") s->level = str(d, v);
  END_FIELDS
}

static void seccomp(dec_t *d, const nl_tnode_t *n, nl_seccomp_profile_t *s) {
  FIELDS(n)
  F("type") s->type = str(d, v);
  F("localhostProfile") s->localhost_profile = str(d, v);
  END_FIELDS
}

static void capabilities(dec_t *d, const nl_tnode_t *n, nl_capabilities_t *c) {
  FIELDS(n)
  F("add") strlist(d, v, &c->add);
  F("drop") strlist(d, v, &c->drop);
  END_FIELDS
}

static void security_context(dec_t *d, const nl_tnode_t *n, nl_security_context_t *s) {
  s->privileged = s->run_as_non_root = s->read_only_root_filesystem =
      s->allow_privilege_escalation = NL_UNSET;
  FIELDS(n)
  F("capabilities") OBJ(v, s->capabilities, capabilities);
  F("privileged") get_tri(d, v, &s->privileged);
  F("seLinuxOptions") OBJ(v, s->se_linux_options, selinux);
  F("runAsUser") opt_i64(d, v, &s->run_as_user);
  F("runAsGroup") opt_i64(d, v, &s->run_as_group);
  F("runAsNonRoot") get_tri(d, v, &s->run_as_non_root);
  F("readOnlyRootFilesystem") get_tri(d, v, &s->read_only_root_filesystem);
  F("allowPrivilegeEscalation") get_tri(d, v, &s->allow_privilege_escalation);
  F("procMount") s->proc_mount = str(d, v);
  F("seccompProfile") OBJ(v, s->seccomp_profile, seccomp);
  F("appArmorProfile") OBJ(v, s->app_armor_profile, seccomp);
  END_FIELDS
}

static void i64_item(dec_t *d, const nl_tnode_t *v, int64_t *out) { get_i64(d, v, out); }

static void sysctl(dec_t *d, const nl_tnode_t *n, nl_kv_t *kv) {
  FIELDS(n)
  F("name") kv->key = str(d, v);
  F("value") kv->value = str(d, v);
  END_FIELDS
}

static void pod_security_context(dec_t *d, const nl_tnode_t *n, nl_pod_security_context_t *s) {
  s->run_as_non_root = NL_UNSET;
  FIELDS(n)
  F("seLinuxOptions") OBJ(v, s->se_linux_options, selinux);
  F("runAsUser") opt_i64(d, v, &s->run_as_user);
  F("runAsGroup") opt_i64(d, v, &s->run_as_group);
  F("runAsNonRoot") get_tri(d, v, &s->run_as_non_root);
  F("supplementalGroups") SEQ(v, s->supplemental_groups, s->n_supplemental_groups, i64_item);
  F("fsGroup") opt_i64(d, v, &s->fs_group);
  F("sysctls") SEQ(v, s->sysctls, s->n_sysctls, sysctl);
  F("fsGroupChangePolicy") s->fs_group_change_policy = str(d, v);
  F("supplementalGroupsPolicy") s->supplemental_groups_policy = str(d, v);
  F("seccompProfile") OBJ(v, s->seccomp_profile, seccomp);
  F("appArmorProfile") OBJ(v, s->app_armor_profile, seccomp);
  END_FIELDS
}

/* ---- containers ---- */

static void resize_policy(dec_t *d, const nl_tnode_t *n, nl_resize_policy_t *r) {
  FIELDS(n)
  F("resourceName") r->resource_name = str(d, v);
  F("restartPolicy") r->restart_policy = str(d, v);
  END_FIELDS
}

static void i32_item(dec_t *d, const nl_tnode_t *v, int32_t *out) { get_i32(d, v, out); }

static void restart_exit_codes(dec_t *d, const nl_tnode_t *n, nl_restart_rule_t *r) {
  r->has_exit_codes = n->kind != NL_T_NULL;
  FIELDS(n)
  F("operator") r->operator_ = str(d, v);
  F("values") SEQ(v, r->values, r->n_values, i32_item);
  END_FIELDS
}

static void restart_rule(dec_t *d, const nl_tnode_t *n, nl_restart_rule_t *r) {
  FIELDS(n)
  F("action") r->action = str(d, v);
  F("exitCodes") restart_exit_codes(d, v, r);
  END_FIELDS
}

static void container(dec_t *d, const nl_tnode_t *n, nl_container_t *c) {
  FIELDS(n)
  F("name") c->name = str(d, v);
  F("image") c->image = str(d, v);
  F("command") strlist(d, v, &c->command);
  F("args") strlist(d, v, &c->args);
  F("workingDir") c->working_dir = str(d, v);
  F("ports") SEQ(v, c->ports, c->n_ports, container_port);
  F("envFrom") SEQ(v, c->env_from, c->n_env_from, env_from);
  F("env") SEQ(v, c->env, c->n_env, env_var);
  F("resources") resources(d, v, &c->resources);
  F("resizePolicy") SEQ(v, c->resize_policy, c->n_resize_policy, resize_policy);
  F("restartPolicy") c->restart_policy = str(d, v);
  F("restartPolicyRules") SEQ(v, c->restart_policy_rules, c->n_restart_policy_rules, restart_rule);
  F("volumeMounts") SEQ(v, c->volume_mounts, c->n_volume_mounts, volume_mount);
  F("livenessProbe") OBJ(v, c->liveness_probe, probe);
  F("readinessProbe") OBJ(v, c->readiness_probe, probe);
  F("startupProbe") OBJ(v, c->startup_probe, probe);
  F("lifecycle") OBJ(v, c->lifecycle, lifecycle);
  F("terminationMessagePath") c->termination_message_path = str(d, v);
  F("terminationMessagePolicy") c->termination_message_policy = str(d, v);
  F("imagePullPolicy") c->image_pull_policy = str(d, v);
  F("securityContext") OBJ(v, c->security_context, security_context);
  F("stdin") get_bool(d, v, &c->stdin_);
  F("stdinOnce") get_bool(d, v, &c->stdin_once);
  F("tty") get_bool(d, v, &c->tty);
  F("targetContainerName") c->target_container_name = str(d, v);
  END_FIELDS
}

/* ---- volumes ---- */

static void key_to_path(dec_t *d, const nl_tnode_t *n, nl_key_to_path_t *kp) {
  FIELDS(n)
  F("key") kp->key = str(d, v);
  F("path") kp->path = str(d, v);
  F("mode") opt_i32(d, v, &kp->mode);
  END_FIELDS
}

static void host_path(dec_t *d, const nl_tnode_t *n, nl_host_path_source_t *h) {
  FIELDS(n)
  F("path") h->path = str(d, v);
  F("type") h->type = str(d, v);
  END_FIELDS
}

static void empty_dir(dec_t *d, const nl_tnode_t *n, nl_empty_dir_source_t *e) {
  FIELDS(n)
  F("medium") e->medium = str(d, v);
  F("sizeLimit") e->has_size_limit = get_quantity(d, v, &e->size_limit);
  END_FIELDS
}

static void config_map_src(dec_t *d, const nl_tnode_t *n, nl_config_map_source_t *c) {
  c->optional = NL_UNSET;
  FIELDS(n)
  F("name") c->name = str(d, v);
  F("items") SEQ(v, c->items, c->n_items, key_to_path);
  F("defaultMode") opt_i32(d, v, &c->default_mode);
  F("optional") get_tri(d, v, &c->optional);
  END_FIELDS
}

static void secret_src(dec_t *d, const nl_tnode_t *n, nl_secret_source_t *s) {
  s->optional = NL_UNSET;
  FIELDS(n)
  F("secretName") s->secret_name = str(d, v);
  F("items") SEQ(v, s->items, s->n_items, key_to_path);
  F("defaultMode") opt_i32(d, v, &s->default_mode);
  F("optional") get_tri(d, v, &s->optional);
  END_FIELDS
}

/* In a projection the secret is named by "name". */
static void secret_projection(dec_t *d, const nl_tnode_t *n, nl_secret_source_t *s) {
  s->optional = NL_UNSET;
  FIELDS(n)
  F("name") s->secret_name = str(d, v);
  F("items") SEQ(v, s->items, s->n_items, key_to_path);
  F("optional") get_tri(d, v, &s->optional);
  END_FIELDS
}

static void pvc_src(dec_t *d, const nl_tnode_t *n, nl_pvc_source_t *p) {
  FIELDS(n)
  F("claimName") p->claim_name = str(d, v);
  F("readOnly") get_bool(d, v, &p->read_only);
  END_FIELDS
}

static void downward_file(dec_t *d, const nl_tnode_t *n, nl_downward_api_file_t *f) {
  FIELDS(n)
  F("path") f->path = str(d, v);
  F("fieldRef") OBJ(v, f->field_ref, field_ref);
  F("resourceFieldRef") OBJ(v, f->resource_field_ref, resource_field_ref);
  F("mode") opt_i32(d, v, &f->mode);
  END_FIELDS
}

static void downward_src(dec_t *d, const nl_tnode_t *n, nl_downward_api_source_t *s) {
  FIELDS(n)
  F("items") SEQ(v, s->items, s->n_items, downward_file);
  F("defaultMode") opt_i32(d, v, &s->default_mode);
  END_FIELDS
}

static void sa_token(dec_t *d, const nl_tnode_t *n, nl_sa_token_projection_t *t) {
  FIELDS(n)
  F("audience") t->audience = str(d, v);
  F("expirationSeconds") get_i64(d, v, &t->expiration_seconds);
  F("path") t->path = str(d, v);
  END_FIELDS
}

static void projection(dec_t *d, const nl_tnode_t *n, nl_volume_projection_t *p) {
  FIELDS(n)
  F("secret") OBJ(v, p->secret, secret_projection);
  F("configMap") OBJ(v, p->config_map, config_map_src);
  F("downwardAPI") OBJ(v, p->downward_api, downward_src);
  F("serviceAccountToken") OBJ(v, p->service_account_token, sa_token);
  END_FIELDS
}

static void image_src(dec_t *d, const nl_tnode_t *n, nl_image_volume_source_t *im) {
  FIELDS(n)
  F("reference") im->reference = str(d, v);
  F("pullPolicy") im->pull_policy = str(d, v);
  END_FIELDS
}

static void projected_src(dec_t *d, const nl_tnode_t *n, nl_projected_source_t *p) {
  FIELDS(n)
  F("sources") SEQ(v, p->sources, p->n_sources, projection);
  F("defaultMode") opt_i32(d, v, &p->default_mode);
  END_FIELDS
}

static const char *const unsupported_volumes[] = {
    "awsElasticBlockStore", "gcePersistentDisk", "gitRepo", "nfs", "iscsi", "glusterfs",
    "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile", "azureDisk",
    "vsphereVolume", "quobyte", "photonPersistentDisk", "portworxVolume", "scaleIO",
    "storageos", "csi", "ephemeral", NULL};

static void volume(dec_t *d, const nl_tnode_t *n, nl_volume_t *vol) {
  FIELDS(n)
  F("name") vol->name = str(d, v);
  F("hostPath") OBJ(v, vol->host_path, host_path);
  F("emptyDir") OBJ(v, vol->empty_dir, empty_dir);
  F("configMap") OBJ(v, vol->config_map, config_map_src);
  F("secret") OBJ(v, vol->secret, secret_src);
  F("persistentVolumeClaim") OBJ(v, vol->persistent_volume_claim, pvc_src);
  F("downwardAPI") OBJ(v, vol->downward_api, downward_src);
  F("projected") OBJ(v, vol->projected, projected_src);
  F("image") OBJ(v, vol->image, image_src);
  } else if (v->kind != NL_T_NULL && !vol->unsupported) {
    for (const char *const *u = unsupported_volumes; *u; u++)
      if (strcmp(k, *u) == 0) vol->unsupported = *u;
  END_FIELDS
}

/* ---- pod spec ---- */

static void toleration(dec_t *d, const nl_tnode_t *n, nl_toleration_t *t) {
  FIELDS(n)
  F("key") t->key = str(d, v);
  F("operator") t->operator_ = str(d, v);
  F("value") t->value = str(d, v);
  F("effect") t->effect = str(d, v);
  F("tolerationSeconds") opt_i64(d, v, &t->toleration_seconds);
  END_FIELDS
}

static void selector_req(dec_t *d, const nl_tnode_t *n, nl_node_selector_req_t *r) {
  FIELDS(n)
  F("key") r->key = str(d, v);
  F("operator") r->operator_ = str(d, v);
  F("values") strlist(d, v, &r->values);
  END_FIELDS
}

static void selector_term(dec_t *d, const nl_tnode_t *n, nl_node_selector_term_t *t) {
  FIELDS(n)
  F("matchExpressions") SEQ(v, t->match_expressions, t->n_match_expressions, selector_req);
  F("matchFields") SEQ(v, t->match_fields, t->n_match_fields, selector_req);
  END_FIELDS
}

static void node_selector(dec_t *d, const nl_tnode_t *n, nl_node_selector_t *s) {
  FIELDS(n)
  F("nodeSelectorTerms") SEQ(v, s->terms, s->n_terms, selector_term);
  END_FIELDS
}

static void node_affinity(dec_t *d, const nl_tnode_t *n, nl_pod_spec_t *s) {
  FIELDS(n)
  F("requiredDuringSchedulingIgnoredDuringExecution")
    OBJ(v, s->required_node_affinity, node_selector);
  END_FIELDS
}

static void affinity(dec_t *d, const nl_tnode_t *n, nl_pod_spec_t *s) {
  FIELDS(n)
  F("nodeAffinity") if (v->kind == NL_T_MAP) node_affinity(d, v, s);
  END_FIELDS
}

static void pod_os(dec_t *d, const nl_tnode_t *n, nl_pod_spec_t *s) {
  FIELDS(n)
  F("name") s->os_name = str(d, v);
  END_FIELDS
}

static void host_alias(dec_t *d, const nl_tnode_t *n, nl_host_alias_t *h) {
  FIELDS(n)
  F("ip") h->ip = str(d, v);
  F("hostnames") strlist(d, v, &h->hostnames);
  END_FIELDS
}

static void dns_option(dec_t *d, const nl_tnode_t *n, nl_dns_option_t *o) {
  FIELDS(n)
  F("name") o->name = str(d, v);
  F("value") o->value = str(d, v);
  END_FIELDS
}

static void dns_config(dec_t *d, const nl_tnode_t *n, nl_dns_config_t *c) {
  FIELDS(n)
  F("nameservers") strlist(d, v, &c->nameservers);
  F("searches") strlist(d, v, &c->searches);
  F("options") SEQ(v, c->options, c->n_options, dns_option);
  END_FIELDS
}

static void pull_secret(dec_t *d, const nl_tnode_t *n, char **name) {
  FIELDS(n)
  F("name") *name = str(d, v);
  END_FIELDS
  if (!*name) *name = nl_arena_strdup(d->a, "");
}

static void readiness_gate(dec_t *d, const nl_tnode_t *n, char **type) {
  FIELDS(n)
  F("conditionType") *type = str(d, v);
  END_FIELDS
  if (!*type) *type = nl_arena_strdup(d->a, "");
}

static void pod_spec(dec_t *d, const nl_tnode_t *n, nl_pod_spec_t *s) {
  s->automount_service_account_token = s->share_process_namespace = s->enable_service_links =
      s->set_hostname_as_fqdn = s->host_users = NL_UNSET;
  FIELDS(n)
  F("volumes") SEQ(v, s->volumes, s->n_volumes, volume);
  F("initContainers") SEQ(v, s->init_containers, s->n_init_containers, container);
  F("containers") SEQ(v, s->containers, s->n_containers, container);
  F("ephemeralContainers") SEQ(v, s->ephemeral_containers, s->n_ephemeral_containers, container);
  F("restartPolicy") s->restart_policy = str(d, v);
  F("terminationGracePeriodSeconds") opt_i64(d, v, &s->termination_grace_period_seconds);
  F("activeDeadlineSeconds") opt_i64(d, v, &s->active_deadline_seconds);
  F("dnsPolicy") s->dns_policy = str(d, v);
  F("nodeSelector") kvlist(d, v, &s->node_selector);
  F("serviceAccountName") s->service_account_name = str(d, v);
  F("serviceAccount") if (!s->service_account_name) s->service_account_name = str(d, v);
  F("automountServiceAccountToken") get_tri(d, v, &s->automount_service_account_token);
  F("nodeName") s->node_name = str(d, v);
  F("hostNetwork") get_bool(d, v, &s->host_network);
  F("hostPID") get_bool(d, v, &s->host_pid);
  F("hostIPC") get_bool(d, v, &s->host_ipc);
  F("shareProcessNamespace") get_tri(d, v, &s->share_process_namespace);
  F("hostUsers") get_tri(d, v, &s->host_users);
  F("setHostnameAsFQDN") get_tri(d, v, &s->set_hostname_as_fqdn);
  F("securityContext") OBJ(v, s->security_context, pod_security_context);
  F("imagePullSecrets") SEQ(v, s->image_pull_secrets.items, s->image_pull_secrets.n, pull_secret);
  F("hostname") s->hostname = str(d, v);
  F("subdomain") s->subdomain = str(d, v);
  F("hostnameOverride") s->hostname_override = str(d, v);
  F("schedulerName") s->scheduler_name = str(d, v);
  F("tolerations") SEQ(v, s->tolerations, s->n_tolerations, toleration);
  F("hostAliases") SEQ(v, s->host_aliases, s->n_host_aliases, host_alias);
  F("priorityClassName") s->priority_class_name = str(d, v);
  F("priority") opt_i32(d, v, &s->priority);
  F("dnsConfig") OBJ(v, s->dns_config, dns_config);
  F("readinessGates") SEQ(v, s->readiness_gates.items, s->readiness_gates.n, readiness_gate);
  F("runtimeClassName") s->runtime_class_name = str(d, v);
  F("enableServiceLinks") get_tri(d, v, &s->enable_service_links);
  F("overhead") resource_list(d, v, &s->overhead);
  F("resources") OBJ(v, s->resources, resources);
  F("affinity") if (v->kind == NL_T_MAP) affinity(d, v, s);
  F("os") if (v->kind == NL_T_MAP) pod_os(d, v, s);
  F("resourceClaims") SEQ(v, s->resource_claims, s->n_resource_claims, pod_claim);
  END_FIELDS
}

/* ---- the object ---- */

/* A decoded API pod holds 3-5 KiB; in chunks of this size at most one chunk's
 * room is unused. */
#define POD_CHUNK 1024

nl_pod_t *nl__pod_new(void) {
  nl_arena_t *a = nl_arena_new_steady(POD_CHUNK);
  nl_pod_t *pod = nl_arena_alloc(a, sizeof *pod);
  pod->arena = a;
  pod->spec.automount_service_account_token = pod->spec.share_process_namespace =
      pod->spec.enable_service_links = pod->spec.set_hostname_as_fqdn = pod->spec.host_users =
          NL_UNSET;
  return pod;
}

nl_pod_t *nl_pod_ref(const nl_pod_t *pod) {
  assert(pod->arena->refs > 0);
  /* atomic: a holder may drop its reference while a thread-pool job reads the
   * pod through another */
  __atomic_add_fetch(&pod->arena->refs, 1, __ATOMIC_RELAXED);
  return (nl_pod_t *)pod;
}

void nl_pod_free(nl_pod_t *pod) {
  if (!pod) return;
  assert(pod->arena->refs > 0);
  if (__atomic_sub_fetch(&pod->arena->refs, 1, __ATOMIC_ACQ_REL) == 0)
    nl_arena_free(pod->arena); /* the pod itself lives in its arena */
}

/* ---- status (the API's) ---- */

static void st_waiting(dec_t *d, const nl_tnode_t *n, nl_api_state_waiting_t *w) {
  FIELDS(n)
  F("reason") w->reason = str(d, v);
  F("message") w->message = str(d, v);
  END_FIELDS
}

static void st_running(dec_t *d, const nl_tnode_t *n, nl_api_state_running_t *r) {
  FIELDS(n)
  F("startedAt") r->started_at = str(d, v);
  END_FIELDS
}

static void st_terminated(dec_t *d, const nl_tnode_t *n, nl_api_state_terminated_t *t) {
  FIELDS(n)
  F("exitCode") get_i32(d, v, &t->exit_code);
  F("signal") get_i32(d, v, &t->signal);
  F("reason") t->reason = str(d, v);
  F("message") t->message = str(d, v);
  F("startedAt") t->started_at = str(d, v);
  F("finishedAt") t->finished_at = str(d, v);
  F("containerID") t->container_id = str(d, v);
  END_FIELDS
}

static void cstate(dec_t *d, const nl_tnode_t *n, nl_api_container_state_t *s) {
  FIELDS(n)
  F("waiting") OBJ(v, s->waiting, st_waiting);
  F("running") OBJ(v, s->running, st_running);
  F("terminated") OBJ(v, s->terminated, st_terminated);
  END_FIELDS
}

static void cstatus(dec_t *d, const nl_tnode_t *n, nl_api_container_status_t *c) {
  c->started = NL_UNSET;
  FIELDS(n)
  F("name") c->name = str(d, v);
  F("state") cstate(d, v, &c->state);
  F("lastState") cstate(d, v, &c->last_state);
  F("ready") get_bool(d, v, &c->ready);
  F("restartCount") get_i32(d, v, &c->restart_count);
  F("image") c->image = str(d, v);
  F("imageID") c->image_id = str(d, v);
  F("containerID") c->container_id = str(d, v);
  F("started") get_tri(d, v, &c->started);
  END_FIELDS
}

static void condition(dec_t *d, const nl_tnode_t *n, nl_api_condition_t *c) {
  FIELDS(n)
  F("type") c->type = str(d, v);
  F("status") c->status = str(d, v);
  F("reason") c->reason = str(d, v);
  F("message") c->message = str(d, v);
  F("lastProbeTime") c->last_probe_time = str(d, v);
  F("lastTransitionTime") c->last_transition_time = str(d, v);
  END_FIELDS
}

/* hostIPs / podIPs: [{"ip": "10.0.0.1"}, ...] */
static void ip_item(dec_t *d, const nl_tnode_t *n, char **out) {
  FIELDS(n)
  F("ip") *out = str(d, v);
  END_FIELDS
  if (!*out) *out = nl_arena_strdup(d->a, "");
}

static void ip_list(dec_t *d, const nl_tnode_t *v, nl_strlist_t *out) {
  *out = (nl_strlist_t){0};
  SEQ(v, out->items, out->n, ip_item);
}

static void ext_mapping(dec_t *d, const nl_tnode_t *n, struct nl_pod_ext_mapping *m) {
  FIELDS(n)
  F("containerName") m->container_name = str(d, v);
  F("resourceName") m->resource_name = str(d, v);
  F("requestName") m->request_name = str(d, v);
  END_FIELDS
}

static void ext_claim_status(dec_t *d, const nl_tnode_t *n, struct nl_pod_ext_claim_status *c) {
  FIELDS(n)
  F("resourceClaimName") c->resource_claim_name = str(d, v);
  F("requestMappings") SEQ(v, c->request_mappings, c->n_request_mappings, ext_mapping);
  END_FIELDS
}

static void claim_status(dec_t *d, const nl_tnode_t *n, struct nl_pod_claim_status *c) {
  FIELDS(n)
  F("name") c->name = str(d, v);
  F("resourceClaimName") c->resource_claim_name = str(d, v);
  END_FIELDS
}

static void pod_status(dec_t *d, const nl_tnode_t *n, nl_api_pod_status_t *s) {
  FIELDS(n)
  F("phase") s->phase = str(d, v);
  F("conditions") SEQ(v, s->conditions, s->n_conditions, condition);
  F("message") s->message = str(d, v);
  F("reason") s->reason = str(d, v);
  F("nominatedNodeName") s->nominated_node_name = str(d, v);
  F("hostIP") s->host_ip = str(d, v);
  F("hostIPs") ip_list(d, v, &s->host_ips);
  F("podIP") s->pod_ip = str(d, v);
  F("podIPs") ip_list(d, v, &s->pod_ips);
  F("startTime") s->start_time = str(d, v);
  F("initContainerStatuses")
      SEQ(v, s->init_container_statuses, s->n_init_container_statuses, cstatus);
  F("containerStatuses") SEQ(v, s->container_statuses, s->n_container_statuses, cstatus);
  F("qosClass") s->qos_class = str(d, v);
  F("resourceClaimStatuses")
      SEQ(v, s->resource_claim_statuses, s->n_resource_claim_statuses, claim_status);
  F("extendedResourceClaimStatus")
      OBJ(v, s->extended_resource_claim_status, ext_claim_status);
  END_FIELDS
}

/* A decoded Pod object; type-checks apiVersion and kind unless `item_of_podlist`
 * (PodList items may omit them). */
static nl_pod_t *pod_object(dec_t *d, const nl_tnode_t *root, bool item_of_podlist) {
  if (root->kind != NL_T_MAP) {
    nl__errf(&d->e, "must be an object, got %s", kind_of(root));
    return NULL;
  }
  nl_pod_t *pod = nl__pod_new();
  d->a = pod->arena;
  const nl_tnode_t *kind = nl_tree_get(root, "kind"), *av = nl_tree_get(root, "apiVersion");
  size_t m = nl__path_key(&d->e, "kind");
  pod->kind = kind ? str(d, kind) : NULL;
  if (!item_of_podlist || pod->kind) {
    if (!pod->kind || !*pod->kind) nl__errf(&d->e, "required: must be Pod");
    else if (strcmp(pod->kind, "Pod") != 0) nl__errf(&d->e, "must be Pod, got %s", pod->kind);
  }
  nl__path_pop(&d->e, m);
  m = nl__path_key(&d->e, "apiVersion");
  pod->api_version = av ? str(d, av) : NULL;
  if (!item_of_podlist || pod->api_version) {
    if (!pod->api_version || !*pod->api_version) nl__errf(&d->e, "required: must be v1");
    else if (strcmp(pod->api_version, "v1") != 0)
      nl__errf(&d->e, "must be v1, got %s", pod->api_version);
  }
  nl__path_pop(&d->e, m);
  if (!pod->kind) pod->kind = nl_arena_strdup(pod->arena, "Pod");
  if (!pod->api_version) pod->api_version = nl_arena_strdup(pod->arena, "v1");
  FIELDS(root)
  F("metadata") object_meta(d, v, &pod->metadata);
  F("spec") pod_spec(d, v, &pod->spec);
  F("status") OBJ(v, pod->status, pod_status);
  END_FIELDS
  return pod;
}

int nl_pod_decode(const char *data, size_t len, const char *origin, nl_pod_t **out,
                  nl_err_t **err) {
  *out = NULL;
  nl_arena_t *scratch = nl_arena_new(4096);
  nl_tnode_t *root = nl_tree_parse(scratch, data, len, err);
  if (!root) {
    nl_arena_free(scratch);
    if (origin) nl_err_wrap(err, "%s", origin);
    return -1;
  }
  dec_t d = {0};
  nl__errs_init(&d.e, origin);
  nl_pod_t *pod = pod_object(&d, root, false);
  nl_arena_free(scratch);
  if (nl__errs_finish(&d.e, err) < 0) {
    nl_pod_free(pod);
    return -1;
  }
  *out = pod;
  return 0;
}

int nl_pod_decode_api(const char *data, size_t len, nl_pod_t **out, nl_err_t **err) {
  *out = NULL;
  nl_arena_t *scratch = nl_arena_new(len / 2 + 1024);
  nl_tnode_t *root = nl_tree_parse_json(scratch, data, len, err);
  if (!root) {
    nl_arena_free(scratch);
    nl_err_wrap(err, "pod from the API");
    return -1;
  }
  const nl_tnode_t *meta = nl_tree_get(root, "metadata");
  const nl_tnode_t *ns = nl_tree_get(meta, "namespace"), *name = nl_tree_get(meta, "name");
  char origin[320];
  snprintf(origin, sizeof origin, "pod %.*s/%.*s", ns && ns->kind == NL_T_STR ? (int)ns->len : 0,
           ns && ns->kind == NL_T_STR ? ns->s : "", name && name->kind == NL_T_STR ? (int)name->len : 0,
           name && name->kind == NL_T_STR ? name->s : "");
  dec_t d = {0};
  nl__errs_init(&d.e, origin);
  nl_pod_t *pod = pod_object(&d, root, true);
  nl_arena_free(scratch);
  if (nl__errs_finish(&d.e, err) < 0) {
    nl_pod_free(pod);
    return -1;
  }
  *out = pod;
  return 0;
}

int nl_pod_decode_list(const char *data, size_t len, const char *origin, nl_pod_t ***pods,
                       size_t *n, nl_err_t **err) {
  *pods = NULL;
  *n = 0;
  nl_arena_t *scratch = nl_arena_new(4096);
  nl_tnode_t *root = nl_tree_parse(scratch, data, len, err);
  if (!root) {
    nl_arena_free(scratch);
    if (origin) nl_err_wrap(err, "%s", origin);
    return -1;
  }
  dec_t d = {0};
  nl__errs_init(&d.e, origin);
  const nl_tnode_t *kind = nl_tree_get(root, "kind");
  const char *k = kind && kind->kind == NL_T_STR ? kind->s : NULL;
  nl_pod_t **out = NULL;
  size_t count = 0;
  if (k && (strcmp(k, "List") == 0 || strcmp(k, "PodList") == 0)) {
    const nl_tnode_t *items = nl_tree_get(root, "items");
    size_t m = nl__path_key(&d.e, "items");
    size_t ni = 0;
    nl_tentry_t *it = items ? seq_entries(&d, items, &ni) : NULL;
    out = nl_xcalloc(ni ? ni : 1, sizeof *out);
    for (size_t i = 0; it; it = it->next, i++) {
      size_t m2 = nl__path_idx(&d.e, i);
      nl_pod_t *p = pod_object(&d, it->val, strcmp(k, "PodList") == 0);
      if (p) out[count++] = p;
      nl__path_pop(&d.e, m2);
    }
    nl__path_pop(&d.e, m);
  } else {
    out = nl_xcalloc(1, sizeof *out);
    nl_pod_t *p = pod_object(&d, root, false);
    if (p) out[count++] = p;
  }
  nl_arena_free(scratch);
  if (nl__errs_finish(&d.e, err) < 0) {
    for (size_t i = 0; i < count; i++) nl_pod_free(out[i]);
    free(out);
    return -1;
  }
  *pods = out;
  *n = count;
  return 0;
}
