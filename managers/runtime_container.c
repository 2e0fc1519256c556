/* ContainerConfig (upstream kuberuntime_container.go generateContainerConfig,
 * kuberuntime_container_linux.go, labels.go, security_context.go, qos/). */
#include <assert.h>
#include <jansson.h>
#include <string.h>

#include "managers/apparmor.h"
#include "managers/runtime_internal.h"
#include "managers/volumes.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define GUARANTEED_OOM_SCORE_ADJ (-997)
#define BESTEFFORT_OOM_SCORE_ADJ 1000

static const char *s0(const char *s) { return s ? s : ""; }

static bool node_critical(const nl_pod_t *pod) {
  const char *src = nl__kv_get(&pod->metadata.annotations, NL_ANNOTATION_CONFIG_SOURCE);
  bool critical = (src && strcmp(src, "api") != 0) ||
                  nl__kv_get(&pod->metadata.annotations, NL_ANNOTATION_CONFIG_MIRROR) ||
                  (pod->spec.priority.set && pod->spec.priority.v >= 2000000000);
  return critical && pod->spec.priority_class_name &&
         strcmp(pod->spec.priority_class_name, "system-node-critical") == 0;
}

int64_t nl_runtime_oom_score_adj(const nl_pod_t *pod, const nl_container_t *c,
                                 int64_t memory_capacity) {
  if (node_critical(pod)) return GUARANTEED_OOM_SCORE_ADJ;
  const char *q = nl_pod_qos_class(pod);
  if (strcmp(q, "Guaranteed") == 0) return GUARANTEED_OOM_SCORE_ADJ;
  if (strcmp(q, "BestEffort") == 0) return BESTEFFORT_OOM_SCORE_ADJ;
  const nl_quantity_t *mr = nl_resource_list_get(&c->resources.requests, "memory");
  int64_t req = mr ? nl_quantity_value(mr) : 0;
  const nl_quantity_t *pm = nl_pod_level_request(pod, "memory");
  if (nl_pod_level_requests_set(pod) && pm && !nl_quantity_is_zero(pm)) {
    /* the pod's memory request beyond its containers' is shared out evenly */
    bool all;
    size_t n = pod->spec.n_containers + pod->spec.n_init_containers;
    int64_t rest = nl_quantity_value(pm) - nl_pod_containers_amount(pod, "memory", false, &all);
    req += n ? rest / (int64_t)n : 0;
  }
  if (memory_capacity <= 0) memory_capacity = 1;
  int64_t adj = 1000 - (1000 * req) / memory_capacity;
  if (adj < 1000 + GUARANTEED_OOM_SCORE_ADJ) return 1000 + GUARANTEED_OOM_SCORE_ADJ;
  if (adj == BESTEFFORT_OOM_SCORE_ADJ) return adj - 1;
  return adj;
}

/* ---- resources ---- */

/* upstream getCPULimit/getMemoryLimit: a container without a limit of its own
 * is bounded by the pod-level one. */
static const nl_quantity_t *limit_of(const nl_pod_t *pod, const nl_container_t *c,
                                     const char *resource) {
  const nl_quantity_t *q = nl_resource_list_get(&c->resources.limits, resource);
  if ((!q || nl_quantity_is_zero(q)) && nl_pod_level_set(pod))
    return nl_pod_level_limit(pod, resource);
  return q;
}

/* Appends res to r's hugepage limits when it is a hugepages-<size> one. */
static void hugepage_limit(Runtime__V1__LinuxContainerResources *r, const nl_resource_t *res) {
  if (strncmp(res->name, "hugepages-", 10) != 0) return;
  Runtime__V1__HugepageLimit *h =
      NL__NEW(Runtime__V1__HugepageLimit, RUNTIME__V1__HUGEPAGE_LIMIT__INIT);
  /* "hugepages-2Mi" -> "2MB", as upstream's HugePageUnitSizeFromByteSize */
  const char *sz = res->name + 10;
  size_t n = strlen(sz);
  if (n > 2 && sz[n - 1] == 'i')
    h->page_size = nl_xasprintf("%.*s%cB", (int)(n - 2), sz, sz[n - 2]);
  else
    h->page_size = nl_xstrdup(sz);
  h->limit = (uint64_t)nl_quantity_value(&res->q);
  r->hugepage_limits = nl_xrealloc(r->hugepage_limits, (r->n_hugepage_limits + 1) * sizeof(void *));
  r->hugepage_limits[r->n_hugepage_limits++] = h;
}

Runtime__V1__LinuxContainerResources *nl__container_resources(const nl_runtime_opts_t *opts,
                                                               const nl_pod_t *pod,
                                                               const nl_container_t *c) {
  Runtime__V1__LinuxContainerResources *r =
      NL__NEW(Runtime__V1__LinuxContainerResources, RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT);
  const nl_quantity_t *creq = nl_resource_list_get(&c->resources.requests, "cpu");
  const nl_quantity_t *clim = limit_of(pod, c, "cpu");
  const nl_quantity_t *mlim = limit_of(pod, c, "memory");
  int64_t lim_milli = clim ? nl_quantity_milli_value(clim) : 0;
  /* A missing request defaults to the limit, as the API server would. */
  r->cpu_shares = nl_cgroups_milli_to_shares(creq ? nl_quantity_milli_value(creq) : lim_milli);
  if (mlim && nl_quantity_value(mlim) != 0) r->memory_limit_in_bytes = nl_quantity_value(mlim);
  if (opts->cpu_cfs_quota) {
    r->cpu_period = NL_CGROUPS_QUOTA_PERIOD;
    r->cpu_quota = nl_cgroups_milli_to_quota(lim_milli, NL_CGROUPS_QUOTA_PERIOD);
  }
  r->oom_score_adj = nl_runtime_oom_score_adj(pod, c, opts->node_memory_bytes);
  for (size_t i = 0; i < c->resources.limits.n; i++)
    hugepage_limit(r, &c->resources.limits.items[i]);
  /* GetHugepageLimitsFromResources: a pod-level hugepages limit bounds a
   * container that has none of that size (its own wins) */
  const nl_resource_list_t *pl = nl_pod_level_set(pod) ? &pod->spec.resources->limits : NULL;
  for (size_t i = 0; pl && i < pl->n; i++)
    if (!nl_resource_list_get(&c->resources.limits, pl->items[i].name))
      hugepage_limit(r, &pl->items[i]);
  return r;
}

/* ---- security context ---- */

static const char *const masked_paths[] = {
    "/proc/asound",  "/proc/acpi",        "/proc/kcore",       "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
    "/proc/scsi",    "/sys/firmware",     "/sys/devices/virtual/powercap"};
static const char *const readonly_paths[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                             "/proc/sysrq-trigger"};

/* upstream getAppArmorProfile: none unless asked for (the runtime's default
 * then applies); a Localhost profile by its name. */
static Runtime__V1__SecurityProfile *apparmor(const nl_pod_t *pod, const nl_container_t *c) {
  nl_seccomp_profile_t tmp;
  const nl_seccomp_profile_t *p = nl_apparmor_profile(pod, c, &tmp);
  if (!p || !p->type) return NULL;
  Runtime__V1__SecurityProfile *s =
      NL__NEW(Runtime__V1__SecurityProfile, RUNTIME__V1__SECURITY_PROFILE__INIT);
  if (strcmp(p->type, "RuntimeDefault") == 0) {
    s->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  } else if (strcmp(p->type, "Localhost") == 0) {
    s->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost;
    s->localhost_ref = nl_xstrdup(s0(p->localhost_profile));
  } else {
    s->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined;
  }
  return s;
}

/* The container's profile, else its pod's (the caller picks); with neither,
 * the runtime's default under seccompDefault, else Unconfined. */
static Runtime__V1__SecurityProfile *seccomp(const nl_runtime_opts_t *opts,
                                             const nl_seccomp_profile_t *p) {
  Runtime__V1__SecurityProfile *s =
      NL__NEW(Runtime__V1__SecurityProfile, RUNTIME__V1__SECURITY_PROFILE__INIT);
  s->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined;
  if (!p || !p->type) {
    if (opts->seccomp_default)
      s->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  } else if (strcmp(p->type, "RuntimeDefault") == 0) {
    s->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  } else if (strcmp(p->type, "Localhost") == 0) {
    s->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost;
    s->localhost_ref = nl_xasprintf("%s/seccomp/%s", opts->root_dir, s0(p->localhost_profile));
  }
  return s;
}

/* DetermineEffectiveSecurityContext for the two fields the check reads. */
static bool non_root_asked(const nl_pod_t *pod, const nl_container_t *c, nl_opt_i64_t *uid) {
  const nl_security_context_t *cs = c->security_context;
  const nl_pod_security_context_t *ps = pod->spec.security_context;
  nl_tristate_t nr = cs && cs->run_as_non_root != NL_UNSET ? cs->run_as_non_root
                     : ps ? ps->run_as_non_root : NL_UNSET;
  *uid = cs && cs->run_as_user.set ? cs->run_as_user : ps ? ps->run_as_user : (nl_opt_i64_t){0};
  return nr == 1;
}

bool nl_runtime_non_root_needs_image(const nl_pod_t *pod, const nl_container_t *c) {
  nl_opt_i64_t uid;
  return non_root_asked(pod, c, &uid) && !uid.set;
}

char *nl_runtime_verify_non_root(const nl_pod_t *pod, const nl_container_t *c,
                                 const int64_t *image_uid, const char *image_user) {
  nl_opt_i64_t uid;
  if (!non_root_asked(pod, c, &uid)) return NULL;
  char *desc = nl__pod_desc(pod), *msg = NULL;
  if (uid.set) {
    if (uid.v == 0)
      msg = nl_xasprintf("container's runAsUser breaks non-root policy (pod: \"%s\", container: %s)",
                         desc, c->name);
  } else if (!image_uid && image_user && *image_user) {
    msg = nl_xasprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot "
                       "verify user is non-root (pod: \"%s\", container: %s)",
                       image_user, desc, c->name);
  } else if (image_uid && *image_uid == 0) {
    msg = nl_xasprintf("container has runAsNonRoot and image will run as root (pod: \"%s\", "
                       "container: %s)", desc, c->name);
  } else if (image_uid && (*image_uid < 0 || *image_uid > INT32_MAX)) {
    msg = nl_xasprintf("container has runAsNonRoot and image has an invalid user id (%lld). (Must "
                       "be 1-(%d)): must be between 0 and %d, inclusive (pod: \"%s\", "
                       "container: %s)",
                       (long long)*image_uid, INT32_MAX, INT32_MAX, desc, c->name);
  }
  free(desc);
  return msg;
}

static Runtime__V1__LinuxContainerSecurityContext *security(const nl_runtime_opts_t *opts,
                                                            const nl_pod_t *pod,
                                                            const nl_container_t *c,
                                                            const char *target_id) {
  Runtime__V1__LinuxContainerSecurityContext *s = NL__NEW(
      Runtime__V1__LinuxContainerSecurityContext, RUNTIME__V1__LINUX_CONTAINER_SECURITY_CONTEXT__INIT);
  const nl_security_context_t *cs = c->security_context;
  const nl_pod_security_context_t *ps = pod->spec.security_context;
  nl_opt_i64_t uid = cs && cs->run_as_user.set ? cs->run_as_user
                     : ps ? ps->run_as_user : (nl_opt_i64_t){0};
  nl_opt_i64_t gid = cs && cs->run_as_group.set ? cs->run_as_group
                     : ps ? ps->run_as_group : (nl_opt_i64_t){0};
  if (uid.set) {
    s->run_as_user = NL__NEW(Runtime__V1__Int64Value, RUNTIME__V1__INT64_VALUE__INIT);
    s->run_as_user->value = uid.v;
  }
  if (gid.set) {
    s->run_as_group = NL__NEW(Runtime__V1__Int64Value, RUNTIME__V1__INT64_VALUE__INIT);
    s->run_as_group->value = gid.v;
  }
  const nl_selinux_options_t *se = cs && cs->se_linux_options ? cs->se_linux_options
                                   : ps ? ps->se_linux_options : NULL;
  if (se) {
    s->selinux_options = NL__NEW(Runtime__V1__SELinuxOption, RUNTIME__V1__SELINUX_OPTION__INIT);
    s->selinux_options->user = nl__pstr(se->user);
    s->selinux_options->role = nl__pstr(se->role);
    s->selinux_options->type = nl__pstr(se->type);
    s->selinux_options->level = nl__pstr(se->level);
  }
  nl__pod_groups(ps, &s->supplemental_groups, &s->n_supplemental_groups,
                 &s->supplemental_groups_policy);
  if (cs) {
    s->privileged = cs->privileged == 1;
    s->readonly_rootfs = cs->read_only_root_filesystem == 1;
    /* AddNoNewPrivileges: only an explicit allowPrivilegeEscalation=false */
    s->no_new_privs = cs->allow_privilege_escalation == 0;
    if (cs->capabilities) {
      s->capabilities = NL__NEW(Runtime__V1__Capability, RUNTIME__V1__CAPABILITY__INIT);
      s->capabilities->n_add_capabilities = cs->capabilities->add.n;
      s->capabilities->add_capabilities = nl__pstrv(cs->capabilities->add.items, cs->capabilities->add.n);
      s->capabilities->n_drop_capabilities = cs->capabilities->drop.n;
      s->capabilities->drop_capabilities =
          nl__pstrv(cs->capabilities->drop.items, cs->capabilities->drop.n);
    }
  }
  s->seccomp = seccomp(opts, cs && cs->seccomp_profile ? cs->seccomp_profile
                                 : ps ? ps->seccomp_profile : NULL);
  s->apparmor = apparmor(pod, c);
  bool unmasked = cs && cs->proc_mount && strcmp(cs->proc_mount, "Unmasked") == 0;
  if (!unmasked) {
    size_t nm = sizeof masked_paths / sizeof *masked_paths;
    size_t nr = sizeof readonly_paths / sizeof *readonly_paths;
    s->masked_paths = nl__pstrv((char *const *)masked_paths, nm);
    s->n_masked_paths = nm;
    s->readonly_paths = nl__pstrv((char *const *)readonly_paths, nr);
    s->n_readonly_paths = nr;
  }
  s->namespace_options = nl__namespaces_for_pod(pod);
  if (target_id && s->namespace_options->pid == RUNTIME__V1__NAMESPACE_MODE__CONTAINER) {
    s->namespace_options->pid = RUNTIME__V1__NAMESPACE_MODE__TARGET;
    s->namespace_options->target_id = nl_xstrdup(target_id);
  }
  return s;
}

/* ---- annotations ---- */

static json_t *intorstr(const nl_intorstr_t *v) {
  return v->is_str ? json_string(s0(v->str)) : json_integer(v->num);
}

static char *handler_json(const nl_handler_t *h) {
  json_t *o = json_object();
  if (h->exec) {
    json_t *cmd = json_array();
    for (size_t i = 0; i < h->exec->command.n; i++)
      json_array_append_new(cmd, json_string(h->exec->command.items[i]));
    json_object_set_new(o, "exec", json_pack("{s:o}", "command", cmd));
  }
  if (h->http_get) {
    json_t *g = json_object();
    if (h->http_get->path) json_object_set_new(g, "path", json_string(h->http_get->path));
    json_object_set_new(g, "port", intorstr(&h->http_get->port));
    if (h->http_get->host) json_object_set_new(g, "host", json_string(h->http_get->host));
    if (h->http_get->scheme) json_object_set_new(g, "scheme", json_string(h->http_get->scheme));
    if (h->http_get->n_headers) {
      json_t *hs = json_array();
      for (size_t i = 0; i < h->http_get->n_headers; i++)
        json_array_append_new(hs, json_pack("{s:s,s:s}", "name", h->http_get->headers[i].key,
                                            "value", s0(h->http_get->headers[i].value)));
      json_object_set_new(g, "httpHeaders", hs);
    }
    json_object_set_new(o, "httpGet", g);
  }
  if (h->tcp_socket) {
    json_t *t = json_object();
    json_object_set_new(t, "port", intorstr(&h->tcp_socket->port));
    if (h->tcp_socket->host) json_object_set_new(t, "host", json_string(h->tcp_socket->host));
    json_object_set_new(o, "tcpSocket", t);
  }
  if (h->sleep) json_object_set_new(o, "sleep", json_pack("{s:I}", "seconds", (json_int_t)h->sleep->seconds));
  char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  return s;
}

static char *ports_json(const nl_container_t *c) {
  json_t *a = json_array();
  for (size_t i = 0; i < c->n_ports; i++) {
    const nl_container_port_t *p = &c->ports[i];
    json_t *o = json_object();
    if (p->name && *p->name) json_object_set_new(o, "name", json_string(p->name));
    if (p->host_port) json_object_set_new(o, "hostPort", json_integer(p->host_port));
    json_object_set_new(o, "containerPort", json_integer(p->container_port));
    if (p->protocol && *p->protocol) json_object_set_new(o, "protocol", json_string(p->protocol));
    if (p->host_ip && *p->host_ip) json_object_set_new(o, "hostIP", json_string(p->host_ip));
    json_array_append_new(a, o);
  }
  char *s = json_dumps(a, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(a);
  return s;
}

/* ---- mounts ---- */

static Runtime__V1__MountPropagation propagation(const char *p) {
  if (p && strcmp(p, "HostToContainer") == 0)
    return RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_HOST_TO_CONTAINER;
  if (p && strcmp(p, "Bidirectional") == 0)
    return RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_BIDIRECTIONAL;
  return RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_PRIVATE;
}

static void push_mount(Runtime__V1__ContainerConfig *cfg, Runtime__V1__Mount *m) {
  cfg->mounts = nl_xrealloc(cfg->mounts, (cfg->n_mounts + 1) * sizeof *cfg->mounts);
  cfg->mounts[cfg->n_mounts++] = m;
}

static const nl_image_volume_ref_t *image_volume(const nl_container_input_t *in,
                                                 const char *name) {
  for (size_t i = 0; i < in->n_image_volumes; i++)
    if (strcmp(in->image_volumes[i].name, name) == 0) return &in->image_volumes[i];
  return NULL;
}

/* upstream makeMounts for an image volume: no host path; the runtime mounts
 * the image (its ImageSpec as getImageVolumes made it), subPath inside it,
 * always read-only (the image plugin's attributes). */
static Runtime__V1__Mount *image_mount(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                                       const nl_image_volume_ref_t *iv, char *sub) {
  Runtime__V1__Mount *m = NL__NEW(Runtime__V1__Mount, RUNTIME__V1__MOUNT__INIT);
  Runtime__V1__ImageSpec *spec = NL__NEW(Runtime__V1__ImageSpec, RUNTIME__V1__IMAGE_SPEC__INIT);
  spec->image = nl__pstr(iv->image_ref);
  spec->user_specified_image = nl__pstr(iv->reference);
  /* upstream passes the pod's handler here only with the alpha gate
   * RuntimeClassInImageCriAPI (off by default): the default handler */
  spec->runtime_handler = nl__pstr(NULL);
  nl__kvs_t ann = {0};
  nl__kvs_put_all(&ann, &pod->metadata.annotations);
  spec->n_annotations = ann.n;
  spec->annotations = (Runtime__V1__ImageSpec__AnnotationsEntry **)nl__kv_entries(
      &runtime__v1__image_spec__annotations_entry__descriptor, &ann);
  nl__kvs_free(&ann);
  m->image = spec;
  m->host_path = nl__pstr(NULL);
  m->image_sub_path = sub ? sub : nl__pstr(NULL);
  m->readonly = true;
  return m;
}

int nl_runtime_pod_handler(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                           const char **handler, nl_err_t **err) {
  *handler = "";
  if (!opts->runtime_class) return 0;
  return opts->runtime_class(opts->runtime_class_ctx, pod->spec.runtime_class_name, handler, err);
}

bool nl_runtime_supports_rro(const nl_runtime_opts_t *opts, const nl_pod_t *pod) {
  if (!opts->supports_rro) return false;
  const char *handler;
  nl_err_t *err = NULL;
  if (nl_runtime_pod_handler(opts, pod, &handler, &err) < 0) {
    nl_vlog(2, "pod %s/%s: failed to look up the runtime handler: %s",
            pod->metadata.namespace_ ? pod->metadata.namespace_ : "", pod->metadata.name,
            nl_err_msg(err));
    nl_err_free(&err);
    return false;
  }
  return opts->supports_rro(opts->supports_rro_ctx, handler);
}

/* upstream makeMounts' first failure of the kind: its text as it is, the
 * waiting container's message. */
static int check_rro(const nl_container_t *c, bool supports, nl_err_t **err) {
  for (size_t i = 0; i < c->n_volume_mounts; i++) {
    bool rro;
    if (nl_volume_mount_rro(&c->volume_mounts[i], supports, &rro, err) < 0)
      return nl_err_wrap(err, "failed to resolve recursive read-only mode");
  }
  return 0;
}

static int mounts(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                  const nl_container_input_t *in, const nl_env_t *env, size_t n_env,
                  Runtime__V1__ContainerConfig *cfg, nl_err_t **err) {
  const nl_container_t *c = in->container;
  bool supports = nl_runtime_supports_rro(opts, pod);
  for (size_t i = 0; i < c->n_volume_mounts; i++) {
    const nl_volume_mount_t *vm = &c->volume_mounts[i];
    const nl_image_volume_ref_t *iv = image_volume(in, vm->name);
    bool api_ro = false;
    char *host = iv ? NULL : nl_volumes_host_path(opts->root_dir, pod, vm->name, &api_ro, err);
    if (!iv && !host) return nl_err_wrap(err, "volumeMounts[%zu]", i);
    char *sub = NULL;
    if (vm->sub_path && *vm->sub_path)
      sub = nl_xstrdup(vm->sub_path);
    else if (vm->sub_path_expr && *vm->sub_path_expr)
      sub = nl_runtime_expand(vm->sub_path_expr, env, n_env);
    if (sub && nl_volumes_check_subpath(sub, err) < 0) {
      free(sub);
      free(host);
      return nl_err_wrap(err, "volumeMounts[%zu] (%s)", i, vm->name);
    }
    Runtime__V1__Mount *m;
    if (iv) {
      m = image_mount(opts, pod, iv, sub);
    } else {
      if (sub) {
        char *j = nl_xasprintf("%s/%s", host, sub);
        free(host);
        free(sub);
        host = j;
      }
      m = NL__NEW(Runtime__V1__Mount, RUNTIME__V1__MOUNT__INIT);
      m->host_path = host;
      m->readonly = vm->read_only || api_ro;
    }
    m->container_path = nl__pstr(vm->mount_path);
    m->propagation = propagation(vm->mount_propagation);
    bool rro = false;
    int ok = nl_volume_mount_rro(vm, supports, &rro, err);
    assert(ok == 0); /* check_rro passed */
    (void)ok;
    m->recursive_read_only = rro;
    push_mount(cfg, m);
  }
  if (in->termination_message_host_path && c->termination_message_path &&
      *c->termination_message_path) {
    Runtime__V1__Mount *m = NL__NEW(Runtime__V1__Mount, RUNTIME__V1__MOUNT__INIT);
    m->container_path = nl__pstr(c->termination_message_path);
    m->host_path = nl__pstr(in->termination_message_host_path);
    push_mount(cfg, m);
  }
  if (in->etc_hosts_host_path && nl_runtime_wants_etc_hosts(c)) {
    Runtime__V1__Mount *m = NL__NEW(Runtime__V1__Mount, RUNTIME__V1__MOUNT__INIT);
    m->container_path = nl__pstr("/etc/hosts");
    m->host_path = nl__pstr(in->etc_hosts_host_path);
    m->selinux_relabel = true;
    push_mount(cfg, m);
  }
  return 0;
}

/* upstream applyPlatformSpecificContainerConfig: in a user namespace every
 * mount is idmapped with the pod's mappings, so that what the agent wrote as
 * root (volumes, /etc/hosts, the termination log) is root's inside. */
static Runtime__V1__IDMapping **copy_mappings(Runtime__V1__IDMapping *const *v, size_t n) {
  Runtime__V1__IDMapping **out = nl_xcalloc(n ? n : 1, sizeof *out);
  for (size_t i = 0; i < n; i++) {
    out[i] = NL__NEW(Runtime__V1__IDMapping, RUNTIME__V1__IDMAPPING__INIT);
    out[i]->host_id = v[i]->host_id;
    out[i]->container_id = v[i]->container_id;
    out[i]->length = v[i]->length;
  }
  return out;
}

static void idmap_mounts(Runtime__V1__ContainerConfig *cfg, const Runtime__V1__UserNamespace *u) {
  for (size_t i = 0; i < cfg->n_mounts; i++) {
    Runtime__V1__Mount *m = cfg->mounts[i];
    m->n_uidmappings = u->n_uids;
    m->uidmappings = copy_mappings(u->uids, u->n_uids);
    m->n_gidmappings = u->n_gids;
    m->gidmappings = copy_mappings(u->gids, u->n_gids);
  }
}

/* ---- devices (the device plugins' Allocate answers) ---- */

/* Prepends n items of size sz to *arr (of *n). */
static void *prepend(void *arr, size_t *n, const void *items, size_t k, size_t sz) {
  if (!k) return arr;
  char *out = nl_xmalloc((*n + k) * sz);
  memcpy(out, items, k * sz);
  if (*n) memcpy(out + k * sz, arr, *n * sz);
  free(arr);
  *n += k;
  return out;
}

static void device_options(const nl_container_input_t *in, Runtime__V1__ContainerConfig *cfg) {
  size_t ne = 0, nm = 0;
  for (size_t i = 0; i < in->n_devices; i++) {
    ne += in->devices[i]->n_envs;
    nm += in->devices[i]->n_mounts;
  }
  Runtime__V1__KeyValue **envs = nl_xcalloc(ne + 1, sizeof *envs);
  Runtime__V1__Mount **mnts = nl_xcalloc(nm + 1, sizeof *mnts);
  ne = nm = 0;
  for (size_t i = 0; i < in->n_devices; i++) {
    const V1beta1__ContainerAllocateResponse *r = in->devices[i];
    for (size_t j = 0; j < r->n_envs; j++) {
      Runtime__V1__KeyValue *kv = NL__NEW(Runtime__V1__KeyValue, RUNTIME__V1__KEY_VALUE__INIT);
      kv->key = nl__pstr(r->envs[j]->key);
      kv->value = nl__pstr(r->envs[j]->value);
      envs[ne++] = kv;
    }
    for (size_t j = 0; j < r->n_mounts; j++) {
      Runtime__V1__Mount *m = NL__NEW(Runtime__V1__Mount, RUNTIME__V1__MOUNT__INIT);
      m->container_path = nl__pstr(r->mounts[j]->container_path);
      m->host_path = nl__pstr(r->mounts[j]->host_path);
      m->readonly = r->mounts[j]->read_only;
      m->propagation = RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_PRIVATE;
      mnts[nm++] = m;
    }
    for (size_t j = 0; j < r->n_devices; j++) {
      Runtime__V1__Device *d = NL__NEW(Runtime__V1__Device, RUNTIME__V1__DEVICE__INIT);
      d->container_path = nl__pstr(r->devices[j]->container_path);
      d->host_path = nl__pstr(r->devices[j]->host_path);
      d->permissions = nl__pstr(r->devices[j]->permissions);
      cfg->devices = nl_xrealloc(cfg->devices, (cfg->n_devices + 1) * sizeof *cfg->devices);
      cfg->devices[cfg->n_devices++] = d;
    }
    for (size_t j = 0; j < r->n_cdi_devices; j++) {
      Runtime__V1__CDIDevice *d = NL__NEW(Runtime__V1__CDIDevice, RUNTIME__V1__CDIDEVICE__INIT);
      d->name = nl__pstr(r->cdi_devices[j]->name);
      cfg->cdi_devices =
          nl_xrealloc(cfg->cdi_devices, (cfg->n_cdi_devices + 1) * sizeof *cfg->cdi_devices);
      cfg->cdi_devices[cfg->n_cdi_devices++] = d;
    }
  }
  cfg->envs = prepend(cfg->envs, &cfg->n_envs, envs, ne, sizeof *envs);
  cfg->mounts = prepend(cfg->mounts, &cfg->n_mounts, mnts, nm, sizeof *mnts);
  free(envs);
  free(mnts);
}

/* ---- the config ---- */

char *nl_runtime_backoff_key(const nl_pod_t *pod, const nl_container_t *c) {
  return nl_xasprintf("%s_%s_%s_%s_%x", s0(pod->metadata.name), s0(pod->metadata.namespace_),
                      s0(pod->metadata.uid), c->name, nl_container_hash(c));
}

int nl_runtime_build_container_config(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                                      const nl_container_input_t *in,
                                      Runtime__V1__ContainerConfig **out, nl_err_t **err) {
  const nl_container_t *c = in->container;
  nl_env_t *env = NULL;
  size_t n_env = 0;
  /* upstream's text as it is (`couldn't find key k in ConfigMap ns/app`): the
   * waiting container's message */
  if (nl_runtime_make_env(opts, pod, c, in->pod_ip, in->pod_ips, in->n_pod_ips, in->file_env,
                          in->n_file_env, &env, &n_env, err) < 0)
    return -1;
  Runtime__V1__UserNamespace *userns = NULL;
  if (check_rro(c, nl_runtime_supports_rro(opts, pod), err) < 0 ||
      nl__userns_for_pod(opts, pod, &userns, err) < 0) {
    nl_env_free(env, n_env);
    return -1;
  }
  Runtime__V1__ContainerConfig *cfg =
      NL__NEW(Runtime__V1__ContainerConfig, RUNTIME__V1__CONTAINER_CONFIG__INIT);
  if (mounts(opts, pod, in, env, n_env, cfg, err) < 0) {
    protobuf_c_message_free_unpacked(&userns->base, NULL);
    protobuf_c_message_free_unpacked(&cfg->base, NULL);
    nl_env_free(env, n_env);
    return nl_err_wrap(err, "container %s", c->name);
  }
  cfg->metadata = NL__NEW(Runtime__V1__ContainerMetadata, RUNTIME__V1__CONTAINER_METADATA__INIT);
  cfg->metadata->name = nl__pstr(c->name);
  cfg->metadata->attempt = (uint32_t)in->restart_count;
  cfg->image = NL__NEW(Runtime__V1__ImageSpec, RUNTIME__V1__IMAGE_SPEC__INIT);
  cfg->image->image = nl__pstr(in->image_ref ? in->image_ref : c->image);
  cfg->image->user_specified_image = nl__pstr(c->image);
  /* ExpandContainerCommandAndArgs */
  cfg->n_command = c->command.n;
  cfg->command = c->command.n ? nl_xcalloc(c->command.n, sizeof(char *)) : NULL;
  for (size_t i = 0; i < c->command.n; i++)
    cfg->command[i] = nl_runtime_expand(c->command.items[i], env, n_env);
  cfg->n_args = c->args.n;
  cfg->args = c->args.n ? nl_xcalloc(c->args.n, sizeof(char *)) : NULL;
  for (size_t i = 0; i < c->args.n; i++)
    cfg->args[i] = nl_runtime_expand(c->args.items[i], env, n_env);
  cfg->working_dir = nl__pstr(c->working_dir);
  cfg->n_envs = n_env;
  cfg->envs = n_env ? nl_xcalloc(n_env, sizeof *cfg->envs) : NULL;
  for (size_t i = 0; i < n_env; i++) {
    cfg->envs[i] = NL__NEW(Runtime__V1__KeyValue, RUNTIME__V1__KEY_VALUE__INIT);
    cfg->envs[i]->key = nl__pstr(env[i].name);
    cfg->envs[i]->value = nl__pstr(env[i].value);
  }
  nl_env_free(env, n_env);

  device_options(in, cfg);

  nl__kvs_t labels = {0}, ann = {0};
  /* the plugins' annotations first: the kubelet's own win (newContainerAnnotations) */
  for (size_t i = 0; i < in->n_devices; i++)
    for (size_t j = 0; j < in->devices[i]->n_annotations; j++)
      nl__kvs_put(&ann, in->devices[i]->annotations[j]->key, in->devices[i]->annotations[j]->value);
  nl__kvs_put(&labels, NL_LABEL_POD_NAME, pod->metadata.name);
  nl__kvs_put(&labels, NL_LABEL_POD_NAMESPACE, pod->metadata.namespace_);
  nl__kvs_put(&labels, NL_LABEL_POD_UID, pod->metadata.uid);
  nl__kvs_put(&labels, NL_LABEL_CONTAINER_NAME, c->name);
  nl__kvs_put_take(&ann, NL_ANN_CONTAINER_HASH, nl_xasprintf("%x", nl_container_hash(c)));
  nl__kvs_put_take(&ann, NL_ANN_CONTAINER_RESTART_COUNT, nl_xasprintf("%d", in->restart_count));
  nl__kvs_put(&ann, NL_ANN_CONTAINER_TERMINATION_MESSAGE_PATH, c->termination_message_path);
  nl__kvs_put(&ann, NL_ANN_CONTAINER_TERMINATION_MESSAGE_POLICY, c->termination_message_policy);
  if (pod->spec.termination_grace_period_seconds.set)
    nl__kvs_put_take(&ann, NL_ANN_POD_TERMINATION_GRACE,
                     nl_xasprintf("%lld", (long long)pod->spec.termination_grace_period_seconds.v));
  if (c->lifecycle && c->lifecycle->pre_stop)
    nl__kvs_put_take(&ann, NL_ANN_CONTAINER_PRESTOP_HANDLER, handler_json(c->lifecycle->pre_stop));
  if (c->n_ports) nl__kvs_put_take(&ann, NL_ANN_CONTAINER_PORTS, ports_json(c));
  cfg->n_labels = labels.n;
  cfg->labels = (Runtime__V1__ContainerConfig__LabelsEntry **)nl__kv_entries(
      &runtime__v1__container_config__labels_entry__descriptor, &labels);
  cfg->n_annotations = ann.n;
  cfg->annotations = (Runtime__V1__ContainerConfig__AnnotationsEntry **)nl__kv_entries(
      &runtime__v1__container_config__annotations_entry__descriptor, &ann);
  nl__kvs_free(&labels);
  nl__kvs_free(&ann);

  cfg->log_path = nl_runtime_container_log_path(c, in->restart_count);
  cfg->stdin = c->stdin_;
  cfg->stdin_once = c->stdin_once;
  cfg->tty = c->tty;
  cfg->linux = NL__NEW(Runtime__V1__LinuxContainerConfig, RUNTIME__V1__LINUX_CONTAINER_CONFIG__INIT);
  cfg->linux->resources = nl__container_resources(opts, pod, c);
  cfg->linux->security_context = security(opts, pod, c, in->target_id);
  cfg->linux->security_context->namespace_options->userns_options = userns;
  if (userns->mode == RUNTIME__V1__NAMESPACE_MODE__POD)
    idmap_mounts(cfg, userns);
  *out = cfg;
  return 0;
}
