/* v1 JSON out of nl_pod_t: upstream's field order, omitempty as upstream (unless
 * `full`), maps sorted by key. Also the hashes built on it. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/model/internal.h"

enum { HASH_NONE, HASH_NO_RESIZE, HASH_LEGACY };

typedef struct jw {
  nl_buf_t *b;
  bool pretty, full;
  int depth;
  bool first; /* no member written yet at this level */
  int hash; /* HASH_*: what the container hash leaves out */
} jw_t;

static void nl_(jw_t *w) {
  if (!w->pretty) return;
  nl_buf_puts(w->b, "\n");
  for (int i = 0; i < w->depth; i++) nl_buf_puts(w->b, "  ");
}

static void put_str(nl_buf_t *b, const char *s) {
  nl_buf_puts(b, "\"");
  const char *run = s;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    const char *esc = NULL;
    char tmp[8];
    switch (*p) {
    case '"': esc = "\\\""; break;
    case '\\': esc = "\\\\"; break;
    case '\n': esc = "\\n"; break;
    case '\r': esc = "\\r"; break;
    case '\t': esc = "\\t"; break;
    case '<': case '>': case '&': /* as Go's encoder */
      snprintf(tmp, sizeof tmp, "\\u%04x", *p);
      esc = tmp;
      break;
    default:
      if (*p < 0x20) {
        snprintf(tmp, sizeof tmp, "\\u%04x", *p);
        esc = tmp;
      }
    }
    if (esc) {
      nl_buf_append(b, run, (size_t)((const char *)p - run));
      nl_buf_puts(b, esc);
      run = (const char *)p + 1;
    }
  }
  nl_buf_puts(b, run);
  nl_buf_puts(b, "\"");
}

static void key(jw_t *w, const char *k) {
  if (!w->first) nl_buf_puts(w->b, ",");
  w->first = false;
  nl_(w);
  if (k) {
    put_str(w->b, k);
    nl_buf_puts(w->b, w->pretty ? ": " : ":");
  }
}

static void open_(jw_t *w, const char *k, const char *br) {
  key(w, k);
  nl_buf_puts(w->b, br);
  w->depth++;
  w->first = true;
}

static void close_(jw_t *w, const char *br) {
  w->depth--;
  if (!w->first) nl_(w);
  w->first = false;
  nl_buf_puts(w->b, br);
}

#define OBJ_BEGIN(k) open_(w, k, "{")
#define OBJ_END() close_(w, "}")
#define ARR_BEGIN(k) open_(w, k, "[")
#define ARR_END() close_(w, "]")

static void s_(jw_t *w, const char *k, const char *v) {
  if (!v || (!*v && !w->full)) return;
  key(w, k);
  put_str(w->b, v);
}

/* a string field without omitempty */
static void s_always(jw_t *w, const char *k, const char *v) {
  if (!v && w->full) return; /* keep NULL and "" apart for round trips */
  key(w, k);
  put_str(w->b, v ? v : "");
}

static void i_(jw_t *w, const char *k, int64_t v) {
  if (!v && !w->full) return;
  key(w, k);
  nl_buf_printf(w->b, "%" PRId64, v);
}

static void i_always(jw_t *w, const char *k, int64_t v) {
  key(w, k);
  nl_buf_printf(w->b, "%" PRId64, v);
}

static void b_(jw_t *w, const char *k, bool v) {
  if (!v && !w->full) return;
  key(w, k);
  nl_buf_puts(w->b, v ? "true" : "false");
}

static void t_(jw_t *w, const char *k, nl_tristate_t v) {
  if (v == NL_UNSET) return;
  key(w, k);
  nl_buf_puts(w->b, v ? "true" : "false");
}

static void o64(jw_t *w, const char *k, nl_opt_i64_t v) {
  if (v.set) i_always(w, k, v.v);
}

static void o32(jw_t *w, const char *k, nl_opt_i32_t v) {
  if (v.set) i_always(w, k, v.v);
}

static void q_(jw_t *w, const char *k, const nl_quantity_t *q) {
  char buf[NL_QUANTITY_STRLEN];
  s_always(w, k, nl_quantity_format(q, buf));
}

static void ios(jw_t *w, const char *k, const nl_intorstr_t *v) {
  if (!v->set) return;
  if (v->is_str) s_always(w, k, v->str);
  else i_always(w, k, v->num);
}

static void strlist(jw_t *w, const char *k, const nl_strlist_t *l) {
  if (!l->n && !(w->full && l->items)) return;
  ARR_BEGIN(k);
  for (size_t i = 0; i < l->n; i++) s_always(w, NULL, l->items[i]);
  ARR_END();
}

static void kvmap(jw_t *w, const char *k, const nl_kvlist_t *l) {
  if (!l->n && !(w->full && l->items)) return;
  OBJ_BEGIN(k);
  for (size_t i = 0; i < l->n; i++) s_always(w, l->items[i].key, l->items[i].value);
  OBJ_END();
}

static void reslist(jw_t *w, const char *k, const nl_resource_list_t *l) {
  if (!l->n && !(w->full && l->items)) return;
  OBJ_BEGIN(k);
  for (size_t i = 0; i < l->n; i++) q_(w, l->items[i].name, &l->items[i].q);
  OBJ_END();
}

#define LIST(k, arr, n, fn)                          \
  do {                                               \
    if (!(n) && !(w->full && (arr))) break;          \
    ARR_BEGIN(k);                                    \
    for (size_t i_ = 0; i_ < (n); i_++) {            \
      OBJ_BEGIN(NULL);                               \
      fn(w, &(arr)[i_]);                             \
      OBJ_END();                                     \
    }                                                \
    ARR_END();                                       \
  } while (0)

#define SUB(k, ptr, fn)                              \
  do {                                               \
    if (!(ptr)) break;                               \
    OBJ_BEGIN(k);                                    \
    fn(w, (ptr));                                    \
    OBJ_END();                                       \
  } while (0)

/* ---- the types ---- */

static void field_ref(jw_t *w, const nl_field_ref_t *f) {
  s_(w, "apiVersion", f->api_version);
  s_always(w, "fieldPath", f->field_path);
}

static void resource_field_ref(jw_t *w, const nl_resource_field_ref_t *r) {
  s_(w, "containerName", r->container_name);
  s_always(w, "resource", r->resource);
  if (r->has_divisor) q_(w, "divisor", &r->divisor);
}

static void key_ref(jw_t *w, const nl_key_ref_t *r) {
  s_(w, "name", r->name);
  s_always(w, "key", r->key);
  t_(w, "optional", r->optional);
}

static void file_key_ref(jw_t *w, const nl_file_key_ref_t *r) {
  s_always(w, "volumeName", r->volume_name);
  s_always(w, "path", r->path);
  s_always(w, "key", r->key);
  t_(w, "optional", r->optional);
}

static void env_source(jw_t *w, const nl_env_source_t *s) {
  SUB("fieldRef", s->field_ref, field_ref);
  SUB("resourceFieldRef", s->resource_field_ref, resource_field_ref);
  SUB("configMapKeyRef", s->config_map_key_ref, key_ref);
  SUB("secretKeyRef", s->secret_key_ref, key_ref);
  SUB("fileKeyRef", s->file_key_ref, file_key_ref);
}

static void env_var(jw_t *w, const nl_env_var_t *e) {
  s_always(w, "name", e->name);
  s_(w, "value", e->value);
  SUB("valueFrom", e->value_from, env_source);
}

static void local_ref(jw_t *w, const nl_local_ref_t *r) {
  s_(w, "name", r->name);
  t_(w, "optional", r->optional);
}

static void env_from(jw_t *w, const nl_env_from_t *e) {
  s_(w, "prefix", e->prefix);
  SUB("configMapRef", e->config_map_ref, local_ref);
  SUB("secretRef", e->secret_ref, local_ref);
}

static void port(jw_t *w, const nl_container_port_t *p) {
  s_(w, "name", p->name);
  i_(w, "hostPort", p->host_port);
  i_always(w, "containerPort", p->container_port);
  s_(w, "protocol", p->protocol);
  s_(w, "hostIP", p->host_ip);
}

static void mount(jw_t *w, const nl_volume_mount_t *m) {
  s_always(w, "name", m->name);
  b_(w, "readOnly", m->read_only);
  s_(w, "recursiveReadOnly", m->recursive_read_only);
  s_always(w, "mountPath", m->mount_path);
  s_(w, "subPath", m->sub_path);
  s_(w, "mountPropagation", m->mount_propagation);
  s_(w, "subPathExpr", m->sub_path_expr);
}

static void exec_action(jw_t *w, const nl_exec_action_t *x) { strlist(w, "command", &x->command); }

static void header(jw_t *w, const nl_kv_t *h) {
  s_always(w, "name", h->key);
  s_always(w, "value", h->value);
}

static void http_get(jw_t *w, const nl_http_get_action_t *h) {
  s_(w, "path", h->path);
  if (h->port.set) ios(w, "port", &h->port);
  else if (!w->full) i_always(w, "port", 0); /* no omitempty upstream */
  s_(w, "host", h->host);
  s_(w, "scheme", h->scheme);
  LIST("httpHeaders", h->headers, h->n_headers, header);
}

static void tcp_socket(jw_t *w, const nl_tcp_socket_action_t *t) {
  if (t->port.set) ios(w, "port", &t->port);
  else if (!w->full) i_always(w, "port", 0);
  s_(w, "host", t->host);
}

static void grpc(jw_t *w, const nl_grpc_action_t *g) {
  i_always(w, "port", g->port);
  s_(w, "service", g->service);
}

static void sleep_(jw_t *w, const nl_sleep_action_t *s) { i_always(w, "seconds", s->seconds); }

static void handler(jw_t *w, const nl_handler_t *h) {
  SUB("exec", h->exec, exec_action);
  SUB("httpGet", h->http_get, http_get);
  SUB("tcpSocket", h->tcp_socket, tcp_socket);
  SUB("grpc", h->grpc, grpc);
  SUB("sleep", h->sleep, sleep_);
}

static void probe(jw_t *w, const nl_probe_t *p) {
  handler(w, &p->handler);
  i_(w, "initialDelaySeconds", p->initial_delay_seconds);
  i_(w, "timeoutSeconds", p->timeout_seconds);
  i_(w, "periodSeconds", p->period_seconds);
  i_(w, "successThreshold", p->success_threshold);
  i_(w, "failureThreshold", p->failure_threshold);
  o64(w, "terminationGracePeriodSeconds", p->termination_grace_period_seconds);
}

static void lifecycle(jw_t *w, const nl_lifecycle_t *l) {
  SUB("postStart", l->post_start, handler);
  SUB("preStop", l->pre_stop, handler);
}

static void selinux(jw_t *w, const nl_selinux_options_t *s) {
  s_(w, "user", s->user);
  s_(w, "role", s->role);
  s_(w, "type", s->type);
  s_(w, "level", s->level);
}

static void seccomp(jw_t *w, const nl_seccomp_profile_t *s) {
  s_always(w, "type", s->type);
  s_(w, "localhostProfile", s->localhost_profile);
}

static void caps(jw_t *w, const nl_capabilities_t *c) {
  strlist(w, "add", &c->add);
  strlist(w, "drop", &c->drop);
}

static void sec_ctx(jw_t *w, const nl_security_context_t *s) {
  SUB("capabilities", s->capabilities, caps);
  t_(w, "privileged", s->privileged);
  SUB("seLinuxOptions", s->se_linux_options, selinux);
  o64(w, "runAsUser", s->run_as_user);
  o64(w, "runAsGroup", s->run_as_group);
  t_(w, "runAsNonRoot", s->run_as_non_root);
  t_(w, "readOnlyRootFilesystem", s->read_only_root_filesystem);
  t_(w, "allowPrivilegeEscalation", s->allow_privilege_escalation);
  s_(w, "procMount", s->proc_mount);
  SUB("seccompProfile", s->seccomp_profile, seccomp);
  SUB("appArmorProfile", s->app_armor_profile, seccomp);
}

static void sysctl(jw_t *w, const nl_kv_t *kv) {
  s_always(w, "name", kv->key);
  s_always(w, "value", kv->value);
}

static void pod_sec_ctx(jw_t *w, const nl_pod_security_context_t *s) {
  SUB("seLinuxOptions", s->se_linux_options, selinux);
  o64(w, "runAsUser", s->run_as_user);
  o64(w, "runAsGroup", s->run_as_group);
  t_(w, "runAsNonRoot", s->run_as_non_root);
  if (s->n_supplemental_groups || (w->full && s->supplemental_groups)) {
    ARR_BEGIN("supplementalGroups");
    for (size_t i = 0; i < s->n_supplemental_groups; i++)
      i_always(w, NULL, s->supplemental_groups[i]);
    ARR_END();
  }
  o64(w, "fsGroup", s->fs_group);
  LIST("sysctls", s->sysctls, s->n_sysctls, sysctl);
  s_(w, "fsGroupChangePolicy", s->fs_group_change_policy);
  s_(w, "supplementalGroupsPolicy", s->supplemental_groups_policy);
  SUB("seccompProfile", s->seccomp_profile, seccomp);
  SUB("appArmorProfile", s->app_armor_profile, seccomp);
}

static void claim_ref(jw_t *w, const nl_resource_claim_ref_t *c) {
  s_always(w, "name", c->name);
  s_(w, "request", c->request);
}

static void resources(jw_t *w, const nl_resource_requirements_t *r) {
  reslist(w, "limits", &r->limits);
  reslist(w, "requests", &r->requests);
  LIST("claims", r->claims, r->n_claims, claim_ref);
}

static void pod_claim(jw_t *w, const nl_pod_resource_claim_t *c) {
  s_always(w, "name", c->name);
  s_(w, "resourceClaimName", c->resource_claim_name);
  s_(w, "resourceClaimTemplateName", c->resource_claim_template_name);
}

static void claim_status(jw_t *w, const struct nl_pod_claim_status *c) {
  s_always(w, "name", c->name);
  s_(w, "resourceClaimName", c->resource_claim_name);
}

static void ext_mapping(jw_t *w, const struct nl_pod_ext_mapping *m) {
  s_always(w, "containerName", m->container_name);
  s_always(w, "resourceName", m->resource_name);
  s_always(w, "requestName", m->request_name);
}

static void ext_claim_status(jw_t *w, const struct nl_pod_ext_claim_status *c) {
  LIST("requestMappings", c->request_mappings, c->n_request_mappings, ext_mapping);
  s_always(w, "resourceClaimName", c->resource_claim_name);
}

static void resize_policy(jw_t *w, const nl_resize_policy_t *r) {
  s_always(w, "resourceName", r->resource_name);
  s_always(w, "restartPolicy", r->restart_policy);
}

static void restart_rule(jw_t *w, const nl_restart_rule_t *r) {
  s_always(w, "action", r->action);
  if (!r->has_exit_codes) return;
  OBJ_BEGIN("exitCodes");
  s_always(w, "operator", r->operator_);
  if (r->n_values || (w->full && r->values)) {
    ARR_BEGIN("values");
    for (size_t i = 0; i < r->n_values; i++) i_always(w, NULL, r->values[i]);
    ARR_END();
  }
  OBJ_END();
}

static void container(jw_t *w, const nl_container_t *c) {
  s_always(w, "name", c->name);
  s_(w, "image", c->image);
  strlist(w, "command", &c->command);
  strlist(w, "args", &c->args);
  s_(w, "workingDir", c->working_dir);
  LIST("ports", c->ports, c->n_ports, port);
  LIST("envFrom", c->env_from, c->n_env_from, env_from);
  LIST("env", c->env, c->n_env, env_var);
  if (w->hash != HASH_NO_RESIZE) {
    OBJ_BEGIN("resources");
    resources(w, &c->resources);
    OBJ_END();
  }
  /* (before in-place resize, resizePolicy was not decoded at all) */
  if (w->hash == HASH_NONE) LIST("resizePolicy", c->resize_policy, c->n_resize_policy, resize_policy);
  s_(w, "restartPolicy", c->restart_policy);
  /* (not in the hash: the rules decide restarts, not what runs) */
  if (w->hash == HASH_NONE)
    LIST("restartPolicyRules", c->restart_policy_rules, c->n_restart_policy_rules, restart_rule);
  LIST("volumeMounts", c->volume_mounts, c->n_volume_mounts, mount);
  SUB("livenessProbe", c->liveness_probe, probe);
  SUB("readinessProbe", c->readiness_probe, probe);
  SUB("startupProbe", c->startup_probe, probe);
  SUB("lifecycle", c->lifecycle, lifecycle);
  s_(w, "terminationMessagePath", c->termination_message_path);
  s_(w, "terminationMessagePolicy", c->termination_message_policy);
  s_(w, "imagePullPolicy", c->image_pull_policy);
  SUB("securityContext", c->security_context, sec_ctx);
  b_(w, "stdin", c->stdin_);
  b_(w, "stdinOnce", c->stdin_once);
  b_(w, "tty", c->tty);
  s_(w, "targetContainerName", c->target_container_name);
}

static void key_to_path(jw_t *w, const nl_key_to_path_t *k) {
  s_always(w, "key", k->key);
  s_always(w, "path", k->path);
  o32(w, "mode", k->mode);
}

static void host_path(jw_t *w, const nl_host_path_source_t *h) {
  s_always(w, "path", h->path);
  if (h->type) s_always(w, "type", h->type); /* a pointer upstream: "" is written */
}

static void empty_dir(jw_t *w, const nl_empty_dir_source_t *e) {
  s_(w, "medium", e->medium);
  if (e->has_size_limit) q_(w, "sizeLimit", &e->size_limit);
}

static void config_map(jw_t *w, const nl_config_map_source_t *c) {
  s_(w, "name", c->name);
  LIST("items", c->items, c->n_items, key_to_path);
  o32(w, "defaultMode", c->default_mode);
  t_(w, "optional", c->optional);
}

static void secret(jw_t *w, const nl_secret_source_t *s) {
  s_(w, "secretName", s->secret_name);
  LIST("items", s->items, s->n_items, key_to_path);
  o32(w, "defaultMode", s->default_mode);
  t_(w, "optional", s->optional);
}

static void secret_projection(jw_t *w, const nl_secret_source_t *s) {
  s_(w, "name", s->secret_name);
  LIST("items", s->items, s->n_items, key_to_path);
  t_(w, "optional", s->optional);
}

static void pvc(jw_t *w, const nl_pvc_source_t *p) {
  s_always(w, "claimName", p->claim_name);
  b_(w, "readOnly", p->read_only);
}

static void downward_file(jw_t *w, const nl_downward_api_file_t *f) {
  s_always(w, "path", f->path);
  SUB("fieldRef", f->field_ref, field_ref);
  SUB("resourceFieldRef", f->resource_field_ref, resource_field_ref);
  o32(w, "mode", f->mode);
}

static void downward(jw_t *w, const nl_downward_api_source_t *d) {
  LIST("items", d->items, d->n_items, downward_file);
  o32(w, "defaultMode", d->default_mode);
}

static void sa_token(jw_t *w, const nl_sa_token_projection_t *t) {
  s_(w, "audience", t->audience);
  i_(w, "expirationSeconds", t->expiration_seconds);
  s_always(w, "path", t->path);
}

static void projection(jw_t *w, const nl_volume_projection_t *p) {
  SUB("secret", p->secret, secret_projection);
  SUB("downwardAPI", p->downward_api, downward);
  SUB("configMap", p->config_map, config_map);
  SUB("serviceAccountToken", p->service_account_token, sa_token);
}

static void projected(jw_t *w, const nl_projected_source_t *p) {
  LIST("sources", p->sources, p->n_sources, projection);
  o32(w, "defaultMode", p->default_mode);
}

static void image_vol(jw_t *w, const nl_image_volume_source_t *im) {
  s_(w, "reference", im->reference);
  s_(w, "pullPolicy", im->pull_policy);
}

static void volume(jw_t *w, const nl_volume_t *v) {
  s_always(w, "name", v->name);
  SUB("hostPath", v->host_path, host_path);
  SUB("emptyDir", v->empty_dir, empty_dir);
  SUB("secret", v->secret, secret);
  SUB("persistentVolumeClaim", v->persistent_volume_claim, pvc);
  SUB("downwardAPI", v->downward_api, downward);
  SUB("configMap", v->config_map, config_map);
  SUB("projected", v->projected, projected);
  SUB("image", v->image, image_vol);
  if (v->unsupported) {
    OBJ_BEGIN(v->unsupported);
    OBJ_END();
  }
}

static void toleration(jw_t *w, const nl_toleration_t *t) {
  s_(w, "key", t->key);
  s_(w, "operator", t->operator_);
  s_(w, "value", t->value);
  s_(w, "effect", t->effect);
  o64(w, "tolerationSeconds", t->toleration_seconds);
}

static void selector_req(jw_t *w, const nl_node_selector_req_t *r) {
  s_always(w, "key", r->key);
  s_always(w, "operator", r->operator_);
  strlist(w, "values", &r->values);
}

static void selector_term(jw_t *w, const nl_node_selector_term_t *t) {
  LIST("matchExpressions", t->match_expressions, t->n_match_expressions, selector_req);
  LIST("matchFields", t->match_fields, t->n_match_fields, selector_req);
}

static void node_selector(jw_t *w, const nl_node_selector_t *s) {
  ARR_BEGIN("nodeSelectorTerms");
  for (size_t i = 0; i < s->n_terms; i++) {
    OBJ_BEGIN(NULL);
    selector_term(w, &s->terms[i]);
    OBJ_END();
  }
  ARR_END();
}

static void host_alias(jw_t *w, const nl_host_alias_t *h) {
  s_(w, "ip", h->ip);
  strlist(w, "hostnames", &h->hostnames);
}

static void dns_option(jw_t *w, const nl_dns_option_t *o) {
  s_(w, "name", o->name);
  if (o->value) s_always(w, "value", o->value);
}

static void dns_config(jw_t *w, const nl_dns_config_t *c) {
  strlist(w, "nameservers", &c->nameservers);
  strlist(w, "searches", &c->searches);
  LIST("options", c->options, c->n_options, dns_option);
}

static void pull_secret(jw_t *w, char *const *name) { s_(w, "name", *name); }
static void readiness_gate(jw_t *w, char *const *type) { s_always(w, "conditionType", *type); }

static void owner_ref(jw_t *w, const nl_owner_ref_t *o) {
  s_always(w, "apiVersion", o->api_version);
  s_always(w, "kind", o->kind);
  s_always(w, "name", o->name);
  s_always(w, "uid", o->uid);
  t_(w, "controller", o->controller);
  t_(w, "blockOwnerDeletion", o->block_owner_deletion);
}

static void spec(jw_t *w, const nl_pod_spec_t *s) {
  LIST("volumes", s->volumes, s->n_volumes, volume);
  LIST("initContainers", s->init_containers, s->n_init_containers, container);
  if (s->n_containers || !s->containers) { /* no omitempty upstream */
    ARR_BEGIN("containers");
    for (size_t i = 0; i < s->n_containers; i++) {
      OBJ_BEGIN(NULL);
      container(w, &s->containers[i]);
      OBJ_END();
    }
    ARR_END();
  } else {
    ARR_BEGIN("containers");
    ARR_END();
  }
  LIST("ephemeralContainers", s->ephemeral_containers, s->n_ephemeral_containers, container);
  s_(w, "restartPolicy", s->restart_policy);
  o64(w, "terminationGracePeriodSeconds", s->termination_grace_period_seconds);
  o64(w, "activeDeadlineSeconds", s->active_deadline_seconds);
  s_(w, "dnsPolicy", s->dns_policy);
  kvmap(w, "nodeSelector", &s->node_selector);
  s_(w, "serviceAccountName", s->service_account_name);
  if (!w->full) s_(w, "serviceAccount", s->service_account_name); /* deprecated alias */
  t_(w, "automountServiceAccountToken", s->automount_service_account_token);
  s_(w, "nodeName", s->node_name);
  b_(w, "hostNetwork", s->host_network);
  b_(w, "hostPID", s->host_pid);
  b_(w, "hostIPC", s->host_ipc);
  t_(w, "shareProcessNamespace", s->share_process_namespace);
  t_(w, "hostUsers", s->host_users);
  SUB("securityContext", s->security_context, pod_sec_ctx);
  LIST("imagePullSecrets", s->image_pull_secrets.items, s->image_pull_secrets.n, pull_secret);
  s_(w, "hostname", s->hostname);
  s_(w, "subdomain", s->subdomain);
  s_(w, "hostnameOverride", s->hostname_override);
  if (s->required_node_affinity) {
    OBJ_BEGIN("affinity");
    OBJ_BEGIN("nodeAffinity");
    SUB("requiredDuringSchedulingIgnoredDuringExecution", s->required_node_affinity, node_selector);
    OBJ_END();
    OBJ_END();
  }
  s_(w, "schedulerName", s->scheduler_name);
  LIST("tolerations", s->tolerations, s->n_tolerations, toleration);
  LIST("hostAliases", s->host_aliases, s->n_host_aliases, host_alias);
  s_(w, "priorityClassName", s->priority_class_name);
  o32(w, "priority", s->priority);
  SUB("dnsConfig", s->dns_config, dns_config);
  LIST("readinessGates", s->readiness_gates.items, s->readiness_gates.n, readiness_gate);
  s_(w, "runtimeClassName", s->runtime_class_name);
  t_(w, "enableServiceLinks", s->enable_service_links);
  reslist(w, "overhead", &s->overhead);
  SUB("resources", s->resources, resources);
  t_(w, "setHostnameAsFQDN", s->set_hostname_as_fqdn);
  if (s->os_name) {
    OBJ_BEGIN("os");
    s_always(w, "name", s->os_name);
    OBJ_END();
  }
  LIST("resourceClaims", s->resource_claims, s->n_resource_claims, pod_claim);
}

static void metadata(jw_t *w, const nl_object_meta_t *m) {
  s_(w, "name", m->name);
  s_(w, "generateName", m->generate_name);
  s_(w, "namespace", m->namespace_);
  s_(w, "uid", m->uid);
  s_(w, "resourceVersion", m->resource_version);
  i_(w, "generation", m->generation);
  s_(w, "creationTimestamp", m->creation_timestamp);
  s_(w, "deletionTimestamp", m->deletion_timestamp);
  o64(w, "deletionGracePeriodSeconds", m->deletion_grace_period_seconds);
  kvmap(w, "labels", &m->labels);
  kvmap(w, "annotations", &m->annotations);
  LIST("ownerReferences", m->owner_refs, m->n_owner_refs, owner_ref);
  strlist(w, "finalizers", &m->finalizers);
}

/* ---- status (the API's) ---- */

static void st_waiting(jw_t *w, const nl_api_state_waiting_t *s) {
  s_(w, "reason", s->reason);
  s_(w, "message", s->message);
}

static void st_running(jw_t *w, const nl_api_state_running_t *s) {
  s_(w, "startedAt", s->started_at);
}

static void st_terminated(jw_t *w, const nl_api_state_terminated_t *s) {
  i_always(w, "exitCode", s->exit_code);
  i_(w, "signal", s->signal);
  s_(w, "reason", s->reason);
  s_(w, "message", s->message);
  s_always(w, "startedAt", s->started_at);
  s_always(w, "finishedAt", s->finished_at);
  s_(w, "containerID", s->container_id);
}

static void cstate(jw_t *w, const char *k, const nl_api_container_state_t *s) {
  OBJ_BEGIN(k);
  SUB("waiting", s->waiting, st_waiting);
  SUB("running", s->running, st_running);
  SUB("terminated", s->terminated, st_terminated);
  OBJ_END();
}

static void cstatus(jw_t *w, const nl_api_container_status_t *c) {
  s_always(w, "name", c->name);
  cstate(w, "state", &c->state);
  cstate(w, "lastState", &c->last_state);
  key(w, "ready");
  nl_buf_puts(w->b, c->ready ? "true" : "false");
  i_always(w, "restartCount", c->restart_count);
  s_always(w, "image", c->image);
  s_always(w, "imageID", c->image_id);
  s_(w, "containerID", c->container_id);
  t_(w, "started", c->started);
}

static void condition(jw_t *w, const nl_api_condition_t *c) {
  s_always(w, "type", c->type);
  s_always(w, "status", c->status);
  s_(w, "lastProbeTime", c->last_probe_time);
  s_(w, "lastTransitionTime", c->last_transition_time);
  s_(w, "reason", c->reason);
  s_(w, "message", c->message);
}

static void ip_list(jw_t *w, const char *k, const nl_strlist_t *l) {
  if (!l->n && !(w->full && l->items)) return;
  ARR_BEGIN(k);
  for (size_t i = 0; i < l->n; i++) {
    OBJ_BEGIN(NULL);
    s_always(w, "ip", l->items[i]);
    OBJ_END();
  }
  ARR_END();
}

static void status(jw_t *w, const nl_api_pod_status_t *s) {
  s_(w, "phase", s->phase);
  LIST("conditions", s->conditions, s->n_conditions, condition);
  s_(w, "message", s->message);
  s_(w, "reason", s->reason);
  s_(w, "nominatedNodeName", s->nominated_node_name);
  s_(w, "hostIP", s->host_ip);
  ip_list(w, "hostIPs", &s->host_ips);
  s_(w, "podIP", s->pod_ip);
  ip_list(w, "podIPs", &s->pod_ips);
  s_(w, "startTime", s->start_time);
  LIST("initContainerStatuses", s->init_container_statuses, s->n_init_container_statuses,
       cstatus);
  LIST("containerStatuses", s->container_statuses, s->n_container_statuses, cstatus);
  s_(w, "qosClass", s->qos_class);
  LIST("resourceClaimStatuses", s->resource_claim_statuses, s->n_resource_claim_statuses,
       claim_status);
  SUB("extendedResourceClaimStatus", s->extended_resource_claim_status, ext_claim_status);
}

void nl__pod_encode(const nl_pod_t *pod, nl_buf_t *out, bool pretty, bool full, bool with_status) {
  jw_t jw = {out, pretty, full, 0, true}, *w = &jw;
  OBJ_BEGIN(NULL);
  s_(w, "kind", pod->kind ? pod->kind : "Pod");
  s_(w, "apiVersion", pod->api_version ? pod->api_version : "v1");
  OBJ_BEGIN("metadata");
  metadata(w, &pod->metadata);
  OBJ_END();
  OBJ_BEGIN("spec");
  spec(w, &pod->spec);
  OBJ_END();
  if (with_status) SUB("status", pod->status, status);
  OBJ_END();
  if (pretty) nl_buf_puts(out, "\n");
}

void nl_pod_encode_json(const nl_pod_t *pod, nl_buf_t *out, int flags) {
  nl__pod_encode(pod, out, flags & NL_POD_JSON_PRETTY, flags & NL_POD_JSON_FULL,
                 flags & NL_POD_JSON_STATUS);
}

void nl_container_encode_json(const nl_container_t *c, nl_buf_t *out) {
  jw_t jw = {out, false, false, 0, true}, *w = &jw;
  OBJ_BEGIN(NULL);
  container(w, c);
  OBJ_END();
}

static uint32_t fnv32a(const char *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 16777619u;
  }
  return h;
}

uint32_t nl_pod_hash(const nl_pod_t *pod) {
  nl_buf_t b = NL_BUF_INIT;
  nl__pod_encode(pod, &b, false, true, true);
  uint32_t h = fnv32a(b.data, b.len);
  nl_buf_free(&b);
  return h;
}

static uint32_t container_hash(const nl_container_t *c, int mode) {
  nl_buf_t b = NL_BUF_INIT;
  jw_t jw = {&b, false, true, 0, true, mode}, *w = &jw;
  OBJ_BEGIN(NULL);
  container(w, c);
  OBJ_END();
  uint32_t h = fnv32a(b.data, b.len);
  nl_buf_free(&b);
  return h;
}

uint32_t nl_container_hash(const nl_container_t *c) { return container_hash(c, HASH_NO_RESIZE); }

uint32_t nl_container_hash_legacy(const nl_container_t *c) { return container_hash(c, HASH_LEGACY); }
