#include "agent/config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "agent/config_fields.h"
#include "agent/model/node.h"
#include "agent/model/quantity.h"
#include "managers/runtime.h"
#include "reactor/duration.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define SEC NL_NS_PER_S

void nl_config_defaults(nl_kubelet_config_t *c) {
  memset(c, 0, sizeof *c);
  c->file_check_frequency = 20 * SEC;
  c->http_check_frequency = 20 * SEC;
  c->sync_frequency = 60 * SEC;
  c->address = nl_xstrdup("0.0.0.0");
  c->port = 10250;
  c->read_only_port = 0;
  c->healthz_port = 10248;
  c->healthz_bind_address = nl_xstrdup("127.0.0.1");
  c->container_runtime_endpoint = nl_xstrdup("unix:///run/containerd/containerd.sock");
  c->runtime_request_timeout = 120 * SEC;
  c->max_pods = 110;
  c->pod_pids_limit = -1;
  c->userns_ids_per_pod = 65536;
  c->cgroup_driver = nl_xstrdup("cgroupfs");
  c->cgroups_per_qos = true;
  c->cpu_cfs_quota = true;
  c->cpu_cfs_quota_period = SEC / 10;
  c->cpu_manager_reconcile_period = 10 * SEC;
  nl__strlist_add(&c->enforce_node_allocatable, "pods");
  c->resolv_conf = nl_xstrdup("/etc/resolv.conf");
  c->serialize_image_pulls = true;
  c->container_log_max_size = nl_xstrdup("10Mi");
  c->container_log_max_files = 5;
  c->node_status_update_frequency = 10 * SEC;
  c->node_status_report_frequency = 300 * SEC;
  c->node_lease_duration_seconds = 40;
  nl__strmap_add(&c->eviction_hard, "memory.available", "100Mi", 1);
  nl__strmap_add(&c->eviction_hard, "nodefs.available", "10%", 1);
  nl__strmap_add(&c->eviction_hard, "nodefs.inodesFree", "5%", 1);
  nl__strmap_add(&c->eviction_hard, "imagefs.available", "15%", 1);
  c->eviction_pressure_transition_period = 300 * SEC;
  c->kernel_memcg_notification = true; /* upstream false: see docs/DIFFERENCES.md */
  c->image_gc_high_threshold_percent = 85;
  c->image_gc_low_threshold_percent = 80;
  c->image_minimum_gc_age = 120 * SEC;
  c->maximum_dead_containers_per_container = 1;
  c->maximum_dead_containers = -1;
  c->streaming_connection_idle_timeout = 4 * 3600 * SEC;
  c->oom_score_adj = -999;
  c->fail_swap_on = true;
  c->enable_server = true;
  c->enable_debugging_handlers = true;
  c->enable_system_log_handler = true;
  c->hairpin_mode = nl_xstrdup("promiscuous-bridge");
  c->config_map_and_secret_change_detection_strategy = nl_xstrdup("Watch");
  c->pod_logs_dir = nl_xstrdup("/var/log/pods");
  c->enable_controller_attach_detach = true;
  c->make_iptables_util_chains = true;
  c->registry_pull_qps = 5;
  c->registry_burst = 10;
  c->event_record_qps = 50;
  c->event_burst = 100;
  c->kube_api_qps = 50;
  c->kube_api_burst = 100;
  c->content_type = nl_xstrdup("application/vnd.kubernetes.protobuf");
  c->register_node = true;
  c->register_schedulable = true;
  c->pod_checkpoint = true;
  c->node_status_max_images = 50;
  c->root_dir = nl_xstrdup("/var/lib/kubelet");
  c->cert_dir = nl_xstrdup("/var/lib/kubelet/pki");
  c->authn_webhook_enabled = true;
  c->authn_webhook_cache_ttl = 120 * SEC;
  c->authn_anonymous_enabled = false;
  c->authz_mode = nl_xstrdup("Webhook");
  c->authz_webhook_cache_authorized_ttl = 300 * SEC;
  c->authz_webhook_cache_unauthorized_ttl = 30 * SEC;
}

void nl_config_legacy_defaults(nl_kubelet_config_t *c) {
  c->authn_anonymous_enabled = true;
  c->authn_webhook_enabled = false;
  free(c->authz_mode);
  c->authz_mode = nl_xstrdup("AlwaysAllow");
}

void nl_config_free(nl_kubelet_config_t *c) {
  for (size_t i = 0; i < nl__config_nfields; i++) {
    const nl_config_field_t *f = &nl__config_fields[i];
    void *p = (char *)c + f->offset;
    switch (f->type) {
    case NL_F_STRING:
      free(*(char **)p);
      *(char **)p = NULL;
      break;
    case NL_F_STRLIST:
    case NL_F_TAINTS:
    case NL_F_PRIORITIES:
      nl__strlist_free(p);
      break;
    case NL_F_STRMAP:
    case NL_F_BOOLMAP:
    case NL_F_STRLISTMAP:
      nl__strmap_free(p);
      break;
    default:
      break;
    }
  }
}

static const nl_config_field_t *field_by_name(const char *name) {
  for (size_t i = 0; i < nl__config_nfields; i++)
    if (nl__config_fields[i].name && strcmp(nl__config_fields[i].name, name) == 0)
      return &nl__config_fields[i];
  return NULL;
}

static const char *scalar(yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* YAML's null ("", "~", "null" unquoted) leaves a field at its default, as Go's
 * decoder does. */
static bool is_null(yaml_node_t *n) {
  if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  const char *s = scalar(n);
  return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
         strcmp(s, "NULL") == 0;
}

/* A drop-in's null: the field goes back to its default, as upstream's merge
 * patch deletes it and defaulting fills it again. */
static void reset_field(nl_kubelet_config_t *c, const nl_config_field_t *f) {
  nl_kubelet_config_t def;
  nl_config_defaults(&def);
  nl__config_field_copy(c, &def, f);
  nl_config_free(&def);
  c->set_by[f - nl__config_fields] = NL_CONFIG_UNSET;
}

/* shutdownGracePeriodByPodPriority: [{priority, shutdownGracePeriodSeconds}]. */
static int set_priorities(nl_config_list_t *l, yaml_document_t *doc, yaml_node_t *v,
                          nl_err_t **err) {
  if (v->type != YAML_SEQUENCE_NODE)
    return nl_err_set(err, NL_EINVAL, "must be a list of {priority, shutdownGracePeriodSeconds}");
  nl__strlist_free(l);
  int idx = 0;
  for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
       it++, idx++) {
    yaml_node_t *e = yaml_document_get_node(doc, *it);
    if (!e || e->type != YAML_MAPPING_NODE)
      return nl_err_set(err, NL_EINVAL, "[%d]: must be {priority, shutdownGracePeriodSeconds}", idx);
    long long prio = 0, secs = 0;
    for (yaml_node_pair_t *pr = e->data.mapping.pairs.start; pr < e->data.mapping.pairs.top; pr++) {
      const char *k = scalar(yaml_document_get_node(doc, pr->key));
      const char *s = scalar(yaml_document_get_node(doc, pr->value));
      bool is_prio = k && !strcmp(k, "priority");
      if (!k || (!is_prio && strcmp(k, "shutdownGracePeriodSeconds"))) continue;
      char *end;
      errno = 0;
      long long n = s ? strtoll(s, &end, 10) : 0;
      if (!s || !*s || *end || errno || (is_prio && (n < INT32_MIN || n > INT32_MAX)))
        return nl_err_set(err, NL_EINVAL, "[%d].%s: invalid integer \"%s\"", idx, k, s ? s : "");
      *(is_prio ? &prio : &secs) = n;
    }
    char *spec = nl_xasprintf("%lld=%lld", prio, secs);
    nl__strlist_add(l, spec);
    free(spec);
  }
  return 0;
}

/* A mapping into a map field; a drop-in's (merge) adds to the map key by key
 * and deletes the keys it sets to null, a --config file's replaces it. */
static int set_map(nl_config_map_t *m, yaml_document_t *doc, const nl_config_field_t *f,
                   yaml_node_t *v, bool merge, nl_err_t **err) {
  if (v->type != YAML_MAPPING_NODE) return nl_err_set(err, NL_EINVAL, "must be a mapping");
  if (!merge) nl__strmap_free(m);
  for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top; pr++) {
    const char *k = scalar(yaml_document_get_node(doc, pr->key));
    yaml_node_t *vn = yaml_document_get_node(doc, pr->value);
    if (!k) return nl_err_set(err, NL_EINVAL, "keys must be strings");
    if (merge && is_null(vn)) {
      nl__strmap_del(m, k);
      continue;
    }
    if (f->type != NL_F_STRLISTMAP) {
      const char *s = scalar(vn);
      if (!s) return nl_err_set(err, NL_EINVAL, "%s: must be a string", k);
      if (f->type == NL_F_BOOLMAP && !(s = nl__config_bool_text(s)))
        return nl__config_gate_error(k, scalar(vn), err);
      nl__strmap_add(m, k, s, 1);
      continue;
    }
    if (!vn || vn->type != YAML_SEQUENCE_NODE)
      return nl_err_set(err, NL_EINVAL, "%s: must be a list of strings", k);
    nl__strmap_add(m, k, NULL, 1);
    for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top;
         it++) {
      const char *s = scalar(yaml_document_get_node(doc, *it));
      if (!s) return nl_err_set(err, NL_EINVAL, "%s: must be a list of strings", k);
      nl__strmap_add(m, k, s, 0);
    }
  }
  return 0;
}

static int set_field(nl_kubelet_config_t *c, yaml_document_t *doc, const nl_config_field_t *f,
                     yaml_node_t *v, bool merge, nl_err_t **err) {
  void *p = (char *)c + f->offset;
  if (is_null(v)) {
    if (merge) reset_field(c, f);
    return 0;
  }
  c->set_by[f - nl__config_fields] = NL_CONFIG_FILE;
  switch (f->type) {
  case NL_F_STRLIST: {
    if (v->type != YAML_SEQUENCE_NODE) return nl_err_set(err, NL_EINVAL, "must be a list of strings");
    nl__strlist_free(p);
    int idx = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++, idx++) {
      const char *s = scalar(yaml_document_get_node(doc, *it));
      if (!s) return nl_err_set(err, NL_EINVAL, "[%d]: must be a string", idx);
      nl__strlist_add(p, s);
    }
    return 0;
  }
  case NL_F_TAINTS: {
    if (v->type != YAML_SEQUENCE_NODE) return nl_err_set(err, NL_EINVAL, "must be a list of taints");
    nl__strlist_free(p);
    int idx = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++, idx++) {
      yaml_node_t *t = yaml_document_get_node(doc, *it);
      if (!t || t->type != YAML_MAPPING_NODE)
        return nl_err_set(err, NL_EINVAL, "[%d]: must be a taint (key, value, effect)", idx);
      const char *kv[3] = {"", "", ""};
      static const char *const names[3] = {"key", "value", "effect"};
      for (yaml_node_pair_t *pr = t->data.mapping.pairs.start; pr < t->data.mapping.pairs.top; pr++) {
        const char *k = scalar(yaml_document_get_node(doc, pr->key));
        const char *s = scalar(yaml_document_get_node(doc, pr->value));
        for (int i = 0; i < 3; i++)
          if (k && s && strcmp(k, names[i]) == 0) kv[i] = s;
      }
      char *spec = nl_xasprintf("%s%s%s:%s", kv[0], *kv[1] ? "=" : "", kv[1], kv[2]);
      nl__strlist_add(p, spec);
      free(spec);
    }
    return 0;
  }
  case NL_F_PRIORITIES: return set_priorities(p, doc, v, err);
  case NL_F_STRMAP:
  case NL_F_BOOLMAP:
  case NL_F_STRLISTMAP: return set_map(p, doc, f, v, merge, err);
  default: {
    const char *s = scalar(v);
    if (!s) return nl_err_set(err, NL_EINVAL, "must be a scalar");
    return nl__config_set_scalar(c, f, s, err);
  }
  }
}

/* Whether a field lives under prefix ("authentication." ...). */
static bool has_fields_under(const char *prefix) {
  size_t n = strlen(prefix);
  for (size_t i = 0; i < nl__config_nfields; i++)
    if (nl__config_fields[i].name && strncmp(nl__config_fields[i].name, prefix, n) == 0)
      return true;
  return false;
}

/* A drop-in's null for a whole struct (authentication: null): all its fields
 * back to their defaults. */
static void reset_fields_under(nl_kubelet_config_t *c, const char *prefix) {
  size_t n = strlen(prefix);
  for (size_t i = 0; i < nl__config_nfields; i++)
    if (nl__config_fields[i].name && strncmp(nl__config_fields[i].name, prefix, n) == 0)
      reset_field(c, &nl__config_fields[i]);
}

/* The fields of a mapping; nested structs (authentication.x509...) are named
 * by their path in the field table. */
static int load_mapping(nl_kubelet_config_t *c, const char *name, yaml_document_t *doc,
                        yaml_node_t *map, const char *prefix, bool merge, nl_err_t **err) {
  for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
       pr++) {
    const char *k = scalar(yaml_document_get_node(doc, pr->key));
    if (!k || (!*prefix && (strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0))) continue;
    char *path = nl_xasprintf("%s%s", prefix, k);
    yaml_node_t *v = yaml_document_get_node(doc, pr->value);
    const nl_config_field_t *f = field_by_name(path);
    int rc = 0;
    if (f) {
      rc = set_field(c, doc, f, v, merge, err);
      if (rc < 0) nl_err_wrap(err, "%s: %s", name, path);
    } else {
      char *sub = nl_xasprintf("%s.", path);
      if (v && v->type == YAML_MAPPING_NODE && has_fields_under(sub))
        rc = load_mapping(c, name, doc, v, sub, merge, err);
      else if (merge && is_null(v) && has_fields_under(sub))
        reset_fields_under(c, sub);
      else if (!is_null(v) || !has_fields_under(sub))
        nl_warn("%s: unknown field \"%s\" ignored", name, path);
      free(sub);
    }
    free(path);
    if (rc < 0) return -1;
  }
  return 0;
}

int nl__config_load_bytes(nl_kubelet_config_t *c, const char *name, const char *data, size_t len,
                          bool merge, nl_err_t **err) {
  yaml_parser_t parser;
  yaml_document_t doc;
  int rc = -1;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
  if (!yaml_parser_load(&parser, &doc)) {
    nl_err_set(err, NL_EINVAL, "%s: line %zu: %s", name, parser.problem_mark.line + 1,
               parser.problem ? parser.problem : "invalid YAML");
    yaml_parser_delete(&parser);
    return -1;
  }
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (!root || root->type != YAML_MAPPING_NODE) {
    nl_err_set(err, NL_EINVAL, "%s: not a KubeletConfiguration object", name);
    goto out;
  }
  const char *api_version = NULL, *kind = NULL;
  for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top;
       pr++) {
    const char *k = scalar(yaml_document_get_node(&doc, pr->key));
    const char *v = scalar(yaml_document_get_node(&doc, pr->value));
    if (k && strcmp(k, "apiVersion") == 0) api_version = v;
    if (k && strcmp(k, "kind") == 0) kind = v;
  }
  if (!api_version || strcmp(api_version, "kubelet.config.k8s.io/v1beta1") != 0) {
    nl_err_set(err, NL_EINVAL, "%s: apiVersion: must be kubelet.config.k8s.io/v1beta1, got \"%s\"",
               name, api_version ? api_version : "");
    goto out;
  }
  if (!kind || strcmp(kind, "KubeletConfiguration") != 0) {
    nl_err_set(err, NL_EINVAL, "%s: kind: must be KubeletConfiguration, got \"%s\"", name,
               kind ? kind : "");
    goto out;
  }
  rc = load_mapping(c, name, &doc, root, "", merge, err);
out:
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  return rc;
}

int nl_config_load_bytes(nl_kubelet_config_t *c, const char *name, const char *data, size_t len,
                         nl_err_t **err) {
  return nl__config_load_bytes(c, name, data, len, false, err);
}

int nl__config_load_path(nl_kubelet_config_t *c, const char *path, bool dropin, nl_err_t **err) {
  /* Read once at start-up, before the loop runs: nothing else is waiting. */
  FILE *f = fopen(path, "rb");
  if (!f) return nl_err_set(err, errno, "failed to read kubelet config file \"%s\": %s", path,
                            strerror(errno));
  char *data = NULL;
  size_t len = 0, cap = 0, n;
  do {
    if (len + 4096 > cap) data = nl_xrealloc(data, cap = cap ? cap * 2 : 8192);
    n = fread(data + len, 1, cap - len, f);
    len += n;
  } while (n > 0 && len < (1u << 20));
  fclose(f);
  int rc = nl__config_load_bytes(c, path, data ? data : "", len, dropin, err);
  free(data);
  return rc;
}

int nl_config_load_file(nl_kubelet_config_t *c, const char *path, nl_err_t **err) {
  return nl__config_load_path(c, path, false, err);
}

/* What node registration and status need, checked at start as upstream does. */
static int validate_node(const nl_kubelet_config_t *c, nl_err_t **err) {
  if (c->node_status_update_frequency <= 0)
    return nl_err_set(err, NL_EINVAL, "nodeStatusUpdateFrequency (--node-status-update-frequency) "
                                      "must be greater than 0");
  if (c->node_status_report_frequency <= 0)
    return nl_err_set(err, NL_EINVAL, "nodeStatusReportFrequency must be greater than 0");
  if (nl_node_labels_validate((const char *const *)c->node_labels.keys,
                              c->node_labels.first,
                              c->node_labels.n, err) < 0)
    return -1;
  for (size_t i = 0; i < c->register_with_taints.n; i++) {
    nl_node_taint_t t;
    if (nl_node_taint_parse(c->register_with_taints.v[i], &t, err) < 0)
      return nl_err_wrap(err, "registerWithTaints[%zu]", i);
    nl_node_taint_free(&t);
  }
  nl_node_conf_t conf = {
      .kube_reserved_keys = (const char *const *)c->kube_reserved.keys,
      .kube_reserved_values = c->kube_reserved.first,
      .n_kube_reserved = c->kube_reserved.n,
      .system_reserved_keys = (const char *const *)c->system_reserved.keys,
      .system_reserved_values = c->system_reserved.first,
      .n_system_reserved = c->system_reserved.n,
      .eviction_keys = (const char *const *)c->eviction_hard.keys,
      .eviction_values = c->eviction_hard.first,
      .n_eviction = c->eviction_hard.n,
  };
  static const char *const res[] = {"cpu", "memory", "ephemeral-storage"};
  for (size_t i = 0; i < 3; i++) {
    int64_t r;
    if (nl_node_reserved(&conf, res[i], 0, &r, err) < 0) return -1;
  }
  return 0;
}

/* upstream ValidateKubeletConfiguration on enforceNodeAllocatable. */
static int validate_allocatable(const nl_kubelet_config_t *c, nl_err_t **err) {
  const nl_config_list_t *l = &c->enforce_node_allocatable;
  for (size_t i = 0; i < l->n; i++) {
    const char *v = l->v[i];
    if (!strcmp(v, "pods")) {
      if (!c->cgroups_per_qos)
        return nl_err_set(err, NL_EINVAL,
                          "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) "
                          "contains \"pods\" but cgroupsPerQOS (--cgroups-per-qos) is false");
    } else if (!strcmp(v, "system-reserved")) {
      if (!c->system_reserved_cgroup || !*c->system_reserved_cgroup)
        return nl_err_set(err, NL_EINVAL,
                          "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) "
                          "must be specified when \"system-reserved\" contained in "
                          "enforceNodeAllocatable (--enforce-node-allocatable)");
    } else if (!strcmp(v, "kube-reserved")) {
      if (!c->kube_reserved_cgroup || !*c->kube_reserved_cgroup)
        return nl_err_set(err, NL_EINVAL,
                          "invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) "
                          "must be specified when \"kube-reserved\" contained in "
                          "enforceNodeAllocatable (--enforce-node-allocatable)");
    } else if (!strcmp(v, "none")) {
      if (l->n > 1)
        return nl_err_set(err, NL_EINVAL,
                          "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) "
                          "may not contain additional enforcements when \"none\" is specified");
    } else {
      return nl_err_set(err, NL_EINVAL,
                        "invalid configuration: option \"%s\" specified for enforceNodeAllocatable "
                        "(--enforce-node-allocatable). Valid options are \"pods\", "
                        "\"system-reserved\", \"kube-reserved\", or \"none\"",
                        v);
    }
  }
  return 0;
}

bool nl_config_gate(const nl_kubelet_config_t *cfg, const char *name, bool def) {
  const nl_config_map_t *m = &cfg->feature_gates;
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->keys[i], name)) return !strcmp(m->first[i], "true");
  return def;
}

/* The crash-loop back-off as upstream's newCrashLoopBackOff: 10 s doubling to
 * 5 min; 1 s to 1 min with ReduceDefaultCrashLoopBackOffDecay; the
 * configured maximum wins (KubeletCrashLoopBackOffMax), and the first delay
 * is never longer than it. */
void nl_config_crash_loop_backoff(const nl_kubelet_config_t *cfg, uint64_t *initial_ms,
                                  uint64_t *max_ms) {
  *initial_ms = NL_RUNTIME_BACKOFF_INITIAL_MS;
  *max_ms = NL_RUNTIME_BACKOFF_MAX_MS;
  if (nl_config_gate(cfg, "ReduceDefaultCrashLoopBackOffDecay", false)) {
    *initial_ms = 1000;
    *max_ms = 60 * 1000;
  }
  if (cfg->crash_loop_backoff_max && nl_config_gate(cfg, "KubeletCrashLoopBackOffMax", true)) {
    *max_ms = (uint64_t)(cfg->crash_loop_backoff_max / 1000000);
    if (*max_ms < *initial_ms) *initial_ms = *max_ms;
  }
}

int nl_config_validate(const nl_kubelet_config_t *c, nl_err_t **err) {
  if (c->image_gc_low_threshold_percent >= c->image_gc_high_threshold_percent)
    return nl_err_set(err, NL_EINVAL,
                      "imageGCLowThresholdPercent (%d) must be less than imageGCHighThresholdPercent (%d)",
                      c->image_gc_low_threshold_percent, c->image_gc_high_threshold_percent);
  if (c->sync_frequency <= 0)
    return nl_err_set(err, NL_EINVAL, "syncFrequency: must be greater than 0");
  if (c->cgroup_driver && strcmp(c->cgroup_driver, "cgroupfs") && strcmp(c->cgroup_driver, "systemd"))
    return nl_err_set(err, NL_EINVAL, "cgroupDriver: must be cgroupfs or systemd, got \"%s\"",
                      c->cgroup_driver);
  if (validate_allocatable(c, err) < 0) return -1;
  if (c->enable_system_log_query && !c->enable_system_log_handler)
    return nl_err_set(err, NL_EINVAL, "invalid configuration: enableSystemLogHandler is required for "
                                      "enableSystemLogQuery");
  /* client-go knows these two serializers; any other fails each request there. */
  if (c->content_type && strcmp(c->content_type, "application/json") &&
      strcmp(c->content_type, "application/vnd.kubernetes.protobuf"))
    return nl_err_set(err, NL_EINVAL,
                      "contentType: must be application/vnd.kubernetes.protobuf or application/json, "
                      "got \"%s\"", c->content_type);
  if (c->hairpin_mode && strcmp(c->hairpin_mode, "promiscuous-bridge") &&
      strcmp(c->hairpin_mode, "hairpin-veth") && strcmp(c->hairpin_mode, "none"))
    return nl_err_set(err, NL_EINVAL,
                      "hairpinMode: must be promiscuous-bridge, hairpin-veth or none, got \"%s\"",
                      c->hairpin_mode);
  const char *cms = c->config_map_and_secret_change_detection_strategy;
  if (cms && strcmp(cms, "Watch") && strcmp(cms, "Get") && strcmp(cms, "Cache"))
    return nl_err_set(err, NL_EINVAL,
                      "configMapAndSecretChangeDetectionStrategy: must be Watch, Get or Cache, "
                      "got \"%s\"",
                      cms);
  if (c->static_pod_path && c->static_pod_path[0] && c->static_pod_path[0] != '/')
    return nl_err_set(err, NL_EINVAL, "staticPodPath: must be an absolute path, got \"%s\"",
                      c->static_pod_path);
  if (c->shutdown_grace_period_by_pod_priority.n &&
      (c->shutdown_grace_period || c->shutdown_grace_period_critical_pods))
    return nl_err_set(err, NL_EINVAL, "invalid configuration: Cannot specify both "
                                      "shutdownGracePeriodByPodPriority and shutdownGracePeriod at "
                                      "the same time");
  if (c->shutdown_grace_period_critical_pods > c->shutdown_grace_period)
    return nl_err_set(err, NL_EINVAL,
                      "shutdownGracePeriodCriticalPods must be <= shutdownGracePeriod");
  nl_quantity_t q;
  nl_err_t *qerr = NULL;
  if (c->container_log_max_size && nl_quantity_parse(c->container_log_max_size, &q, &qerr) < 0) {
    nl_err_set(err, NL_EINVAL, "containerLogMaxSize: %s", nl_err_msg(qerr));
    nl_err_free(&qerr);
    return -1;
  }
  if (c->container_log_max_size && nl_quantity_value(&q) <= 0)
    return nl_err_set(err, NL_EINVAL, "containerLogMaxSize: must be greater than 0, got \"%s\"",
                      c->container_log_max_size);
  /* upstream validation_linux.go */
  if (c->userns_ids_per_pod < 65536)
    return nl_err_set(err, NL_EINVAL,
                      "invalid configuration: userNamespaces.idsPerPod must not be less than 65536");
  if (c->userns_ids_per_pod % 65536 != 0)
    return nl_err_set(err, NL_EINVAL,
                      "invalid configuration: userNamespaces.idsPerPod must be a multiple of 65536");
  if (c->userns_ids_per_pod > UINT32_MAX)
    return nl_err_set(err, NL_EINVAL,
                      "invalid configuration: userNamespaces.idsPerPod must not be more than 4294967295");
  /* upstream validation.go: the field belongs to KubeletCrashLoopBackOffMax
   * (beta, on by default) */
  if (c->crash_loop_backoff_max && !nl_config_gate(c, "KubeletCrashLoopBackOffMax", true))
    return nl_err_set(err, NL_EINVAL,
                      "invalid configuration: FeatureGate KubeletCrashLoopBackOffMax not enabled, "
                      "crashLoopBackOff.maxContainerRestartPeriod must not be set");
  if (c->crash_loop_backoff_max &&
      (c->crash_loop_backoff_max < SEC || c->crash_loop_backoff_max > 300 * SEC))
    return nl_err_set(err, NL_EINVAL,
                      "invalid configuration: crashLoopBackOff.maxContainerRestartPeriod (got: %g "
                      "seconds) must be set between 1s and 300s",
                      (double)c->crash_loop_backoff_max / SEC);
  if (c->authz_mode && strcmp(c->authz_mode, "AlwaysAllow") && strcmp(c->authz_mode, "Webhook"))
    return nl_err_set(err, NL_EINVAL,
                      "authorization.mode: must be AlwaysAllow or Webhook, got \"%s\"",
                      c->authz_mode);
  return validate_node(c, err);
}
