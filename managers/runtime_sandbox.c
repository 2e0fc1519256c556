/* PodSandboxConfig (upstream kuberuntime_sandbox.go generatePodSandboxConfig), pod
 * DNS (pkg/kubelet/network/dns) and hostname (GeneratePodHostNameAndDomain). */
#include <ctype.h>
#include <string.h>

#include "managers/runtime_internal.h"
#include "managers/sysctl.h"
#include "reactor/xalloc.h"

#define MAX_DNS_NAMESERVERS 3
#define MAX_DNS_SEARCH_PATHS 32
#define MAX_DNS_SEARCH_CHARS 256 * 8 /* MaxDNSSearchListChars 2048 */

static const char *s0(const char *s) { return s ? s : ""; }

/* ---- resolv.conf ---- */

static void push_own(char ***v, size_t *n, const char *s, size_t len) {
  *v = nl_xrealloc(*v, (*n + 1) * sizeof **v);
  (*v)[(*n)++] = nl_xstrndup(s, len);
}

void nl_runtime_parse_resolv_conf(const char *data, size_t len, nl_host_dns_t *out) {
  memset(out, 0, sizeof *out);
  const char *p = data, *end = data + len;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    /* Tokenize the line; comments start with # or ;. */
    const char *tok[64];
    size_t tl[64], nt = 0;
    const char *q = p;
    while (q < eol && nt < 64) {
      while (q < eol && isspace((unsigned char)*q)) q++;
      if (q >= eol || *q == '#' || *q == ';') break;
      const char *s = q;
      while (q < eol && !isspace((unsigned char)*q)) q++;
      tok[nt] = s;
      tl[nt++] = (size_t)(q - s);
    }
    if (nt > 0) {
      if (tl[0] == 10 && memcmp(tok[0], "nameserver", 10) == 0 && nt > 1) {
        push_own(&out->servers, &out->n_servers, tok[1], tl[1]);
      } else if (tl[0] == 6 && memcmp(tok[0], "search", 6) == 0) {
        for (size_t i = 0; i < out->n_searches; i++) free(out->searches[i]);
        free(out->searches);
        out->searches = NULL;
        out->n_searches = 0;
        for (size_t i = 1; i < nt; i++) {
          size_t l = tl[i];
          if (l == 1 && tok[i][0] == '.') continue;
          if (l > 0 && tok[i][l - 1] == '.') l--;
          push_own(&out->searches, &out->n_searches, tok[i], l);
        }
      } else if (tl[0] == 7 && memcmp(tok[0], "options", 7) == 0) {
        for (size_t i = 1; i < nt; i++) push_own(&out->options, &out->n_options, tok[i], tl[i]);
      }
    }
    p = eol + 1;
  }
}

static void strv_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

void nl_host_dns_free(nl_host_dns_t *d) {
  strv_free(d->servers, d->n_servers);
  strv_free(d->searches, d->n_searches);
  strv_free(d->options, d->n_options);
  memset(d, 0, sizeof *d);
}

/* ---- DNS ---- */

static void push_unique(char ***v, size_t *n, const char *s) {
  if (!nl__strv_has(*v, *n, s)) nl__strv_push(v, n, s);
}

static size_t opt_name_len(const char *o) {
  const char *c = strchr(o, ':');
  return c ? (size_t)(c - o) : strlen(o);
}

Runtime__V1__DNSConfig *nl_runtime_pod_dns(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                                          const nl_host_dns_t *host) {
  Runtime__V1__DNSConfig *d = NL__NEW(Runtime__V1__DNSConfig, RUNTIME__V1__DNSCONFIG__INIT);
  const char *policy = pod->spec.dns_policy ? pod->spec.dns_policy : "ClusterFirst";
  enum { NONE, CLUSTER, HOST } type = CLUSTER;
  if (strcmp(policy, "None") == 0)
    type = NONE;
  else if (strcmp(policy, "ClusterFirstWithHostNet") == 0)
    type = CLUSTER;
  else if (strcmp(policy, "ClusterFirst") == 0)
    type = pod->spec.host_network ? HOST : CLUSTER;
  else if (strcmp(policy, "Default") == 0)
    type = HOST;
  if (type == CLUSTER && opts->n_cluster_dns == 0) type = HOST; /* MissingClusterDNS */

  if (type == CLUSTER) {
    for (size_t i = 0; i < opts->n_cluster_dns; i++)
      nl__strv_push(&d->servers, &d->n_servers, opts->cluster_dns[i]);
    const char *dom = opts->cluster_domain;
    if (dom && *dom) {
      char *a = nl_xasprintf("%s.svc.%s", s0(pod->metadata.namespace_), dom);
      char *b = nl_xasprintf("svc.%s", dom);
      push_unique(&d->searches, &d->n_searches, a);
      push_unique(&d->searches, &d->n_searches, b);
      push_unique(&d->searches, &d->n_searches, dom);
      free(a);
      free(b);
    }
    if (host)
      for (size_t i = 0; i < host->n_searches; i++)
        push_unique(&d->searches, &d->n_searches, host->searches[i]);
    nl__strv_push(&d->options, &d->n_options, "ndots:5");
  } else if (type == HOST) {
    if (!opts->resolv_conf || !*opts->resolv_conf) {
      /* No resolver file: the local server, and no search path (upstream). */
      bool v6 = opts->node_ip && strchr(opts->node_ip, ':');
      nl__strv_push(&d->servers, &d->n_servers, v6 ? "::1" : "127.0.0.1");
      nl__strv_push(&d->searches, &d->n_searches, ".");
    } else if (host) {
      for (size_t i = 0; i < host->n_servers; i++)
        nl__strv_push(&d->servers, &d->n_servers, host->servers[i]);
      for (size_t i = 0; i < host->n_searches; i++)
        nl__strv_push(&d->searches, &d->n_searches, host->searches[i]);
      for (size_t i = 0; i < host->n_options; i++)
        nl__strv_push(&d->options, &d->n_options, host->options[i]);
    }
  }

  const nl_dns_config_t *pc = pod->spec.dns_config;
  if (pc) {
    for (size_t i = 0; i < pc->nameservers.n; i++)
      push_unique(&d->servers, &d->n_servers, pc->nameservers.items[i]);
    for (size_t i = 0; i < pc->searches.n; i++)
      push_unique(&d->searches, &d->n_searches, pc->searches.items[i]);
    /* mergeDNSOptions: the pod's options replace the base's of the same name. */
    for (size_t i = 0; i < pc->n_options; i++) {
      const nl_dns_option_t *o = &pc->options[i];
      char *s = o->value ? nl_xasprintf("%s:%s", o->name, o->value) : nl_xstrdup(o->name);
      size_t nl = strlen(o->name);
      size_t j;
      for (j = 0; j < d->n_options; j++)
        if (opt_name_len(d->options[j]) == nl && strncmp(d->options[j], o->name, nl) == 0) break;
      if (j < d->n_options) {
        free(d->options[j]);
        d->options[j] = s;
      } else {
        nl__strv_push(&d->options, &d->n_options, s);
        free(s);
      }
    }
  }

  /* formDNSConfigFitsLimits */
  while (d->n_servers > MAX_DNS_NAMESERVERS) free(d->servers[--d->n_servers]);
  while (d->n_searches > MAX_DNS_SEARCH_PATHS) free(d->searches[--d->n_searches]);
  for (;;) {
    size_t chars = 0;
    for (size_t i = 0; i < d->n_searches; i++) chars += strlen(d->searches[i]) + (i ? 1 : 0);
    if (chars <= MAX_DNS_SEARCH_CHARS || d->n_searches == 0) break;
    free(d->searches[--d->n_searches]);
  }
  return d;
}

/* ---- hostname ---- */

char *nl_runtime_pod_hostname(const nl_runtime_opts_t *opts, const nl_pod_t *pod, char **domain,
                              nl_err_t **err) {
  *domain = NULL;
  const char *h = s0(pod->metadata.name);
  /* hostnameOverride wins over name, hostname and subdomain, with no domain
   * (GeneratePodHostNameAndDomain with HostnameOverride, on in 1.36; an API
   * server with the gate off drops the field). */
  const char *over = pod->spec.hostname_override;
  if (over) {
    if (!nl_is_dns1123_subdomain(over)) {
      nl_err_set(err, NL_EINVAL, "pod HostnameOverride \"%s\" is not a valid DNS subdomain", over);
      return NULL;
    }
    h = over;
  } else if (pod->spec.hostname && *pod->spec.hostname) {
    if (!nl_is_dns1123_label(pod->spec.hostname)) {
      nl_err_set(err, NL_EINVAL, "pod Hostname \"%s\" is not a valid DNS label",
                 pod->spec.hostname);
      return NULL;
    }
    h = pod->spec.hostname;
  }
  char *out = nl_xstrndup(h, 63);
  size_t n = strlen(out);
  while (n > 0 && (out[n - 1] == '-' || out[n - 1] == '.')) out[--n] = 0;
  if (n == 0) {
    free(out);
    nl_err_set(err, NL_EINVAL, "hostname for pod \"%s\" was invalid: \"%s\"",
               s0(pod->metadata.name), h);
    return NULL;
  }
  if (!over && pod->spec.subdomain && *pod->spec.subdomain)
    *domain = nl_xasprintf("%s.%s.svc.%s", pod->spec.subdomain, s0(pod->metadata.namespace_),
                           s0(opts->cluster_domain));
  return out;
}

/* ---- paths ---- */

char *nl_runtime_pod_log_dir(const nl_runtime_opts_t *opts, const nl_pod_t *pod) {
  char *name = nl__pod_full_dir_name(pod);
  char *out = nl_xasprintf("%s/%s", opts->pod_logs_dir, name);
  free(name);
  return out;
}

char *nl_runtime_container_log_path(const nl_container_t *c, int32_t restart_count) {
  return nl_xasprintf("%s/%d.log", c->name, restart_count);
}

char *nl_runtime_pod_dir(const nl_runtime_opts_t *opts, const char *uid) {
  return nl_xasprintf("%s/pods/%s", opts->root_dir, uid);
}

/* ---- the sandbox config ---- */

static Runtime__V1__Protocol protocol(const char *p) {
  if (p && strcmp(p, "UDP") == 0) return RUNTIME__V1__PROTOCOL__UDP;
  if (p && strcmp(p, "SCTP") == 0) return RUNTIME__V1__PROTOCOL__SCTP;
  return RUNTIME__V1__PROTOCOL__TCP;
}

static bool privileged(const nl_container_t *c, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (c[i].security_context && c[i].security_context->privileged == 1) return true;
  return false;
}

static Runtime__V1__SELinuxOption *selinux(const nl_selinux_options_t *o) {
  if (!o) return NULL;
  Runtime__V1__SELinuxOption *s =
      NL__NEW(Runtime__V1__SELinuxOption, RUNTIME__V1__SELINUX_OPTION__INIT);
  s->user = nl__pstr(o->user);
  s->role = nl__pstr(o->role);
  s->type = nl__pstr(o->type);
  s->level = nl__pstr(o->level);
  return s;
}

static Runtime__V1__Int64Value *i64(int64_t v) {
  Runtime__V1__Int64Value *x = NL__NEW(Runtime__V1__Int64Value, RUNTIME__V1__INT64_VALUE__INIT);
  x->value = v;
  return x;
}

/* upstream calculateSandboxResources and convertOverheadToLinuxResources:
 * what the pod as a whole asks for (its pod-level resources where set), and
 * its overhead as requests equal to limits; for the runtime's information. */
static Runtime__V1__LinuxContainerResources *sandbox_resources(const nl_runtime_opts_t *opts,
                                                               int64_t cpu_req, int64_t cpu_lim,
                                                               int64_t mem_lim) {
  Runtime__V1__LinuxContainerResources *r =
      NL__NEW(Runtime__V1__LinuxContainerResources, RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT);
  r->cpu_shares = nl_cgroups_milli_to_shares(cpu_req > 0 ? cpu_req : cpu_lim);
  if (mem_lim != 0) r->memory_limit_in_bytes = mem_lim;
  if (opts->cpu_cfs_quota) {
    r->cpu_period = NL_CGROUPS_QUOTA_PERIOD;
    r->cpu_quota = nl_cgroups_milli_to_quota(cpu_lim, NL_CGROUPS_QUOTA_PERIOD);
  }
  return r;
}

static Runtime__V1__LinuxPodSandboxConfig *linux_config(const nl_runtime_opts_t *opts,
                                                        const nl_pod_t *pod) {
  Runtime__V1__LinuxPodSandboxConfig *lc =
      NL__NEW(Runtime__V1__LinuxPodSandboxConfig, RUNTIME__V1__LINUX_POD_SANDBOX_CONFIG__INIT);
  Runtime__V1__LinuxSandboxSecurityContext *sc = NL__NEW(
      Runtime__V1__LinuxSandboxSecurityContext, RUNTIME__V1__LINUX_SANDBOX_SECURITY_CONTEXT__INIT);
  lc->security_context = sc;
  /* "": the runtime's default cgroup parent */
  lc->cgroup_parent = opts->cgroups ? nl_cgroups_pod_parent(opts->cgroups, pod) : nl__pstr(NULL);
  lc->resources = sandbox_resources(opts, nl_pod_amount(pod, "cpu", false, false, NULL),
                                    nl_pod_amount(pod, "cpu", true, false, NULL),
                                    nl_pod_amount(pod, "memory", true, false, NULL));
  if (pod->spec.overhead.n) {
    const nl_quantity_t *oc = nl_resource_list_get(&pod->spec.overhead, "cpu");
    const nl_quantity_t *om = nl_resource_list_get(&pod->spec.overhead, "memory");
    int64_t cpu = oc ? nl_quantity_milli_value(oc) : 0;
    lc->overhead = sandbox_resources(opts, cpu, cpu, om ? nl_quantity_value(om) : 0);
  } else {
    lc->overhead = NL__NEW(Runtime__V1__LinuxContainerResources,
                           RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT);
  }
  sc->privileged = privileged(pod->spec.containers, pod->spec.n_containers) ||
                   privileged(pod->spec.init_containers, pod->spec.n_init_containers);
  /* Upstream forces runtime/default on the sandbox (issue #84623). */
  sc->seccomp = NL__NEW(Runtime__V1__SecurityProfile, RUNTIME__V1__SECURITY_PROFILE__INIT);
  sc->seccomp->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  sc->namespace_options = nl__namespaces_for_pod(pod);
  const nl_pod_security_context_t *psc = pod->spec.security_context;
  nl__kvs_t sysctls = {0};
  if (psc) {
    for (size_t i = 0; i < psc->n_sysctls; i++) {
      char *k = nl_sysctl_normalize(psc->sysctls[i].key);
      nl__kvs_put(&sysctls, k, psc->sysctls[i].value);
      free(k);
    }
    if (psc->run_as_user.set) sc->run_as_user = i64(psc->run_as_user.v);
    if (psc->run_as_group.set) sc->run_as_group = i64(psc->run_as_group.v);
    nl__pod_groups(psc, &sc->supplemental_groups, &sc->n_supplemental_groups,
                   &sc->supplemental_groups_policy);
    sc->selinux_options = selinux(psc->se_linux_options);
  }
  lc->n_sysctls = sysctls.n;
  lc->sysctls = (Runtime__V1__LinuxPodSandboxConfig__SysctlsEntry **)nl__kv_entries(
      &runtime__v1__linux_pod_sandbox_config__sysctls_entry__descriptor, &sysctls);
  nl__kvs_free(&sysctls);
  return lc;
}

int nl_runtime_build_sandbox_config(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                                    uint32_t attempt, const nl_host_dns_t *host_dns,
                                    Runtime__V1__PodSandboxConfig **out, nl_err_t **err) {
  char *hostname = NULL, *domain = NULL;
  if (!pod->spec.host_network) {
    hostname = nl_runtime_pod_hostname(opts, pod, &domain, err);
    if (!hostname) return -1;
    /* upstream GetNodenameForKernel: the FQDN, when asked for, must fit the
     * kernel's 64-byte nodename */
    if (domain && *domain && pod->spec.set_hostname_as_fqdn == 1) {
      char *fqdn = nl_xasprintf("%s.%s", hostname, domain);
      free(hostname);
      free(domain);
      if (strlen(fqdn) > 64) {
        nl_err_set(err, NL_EINVAL,
                   "failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too "
                   "long (64 characters is the max, %zu characters requested)",
                   fqdn, strlen(fqdn));
        free(fqdn);
        return -1;
      }
      hostname = fqdn;
      domain = NULL;
    }
  }
  Runtime__V1__UserNamespace *userns;
  if (nl__userns_for_pod(opts, pod, &userns, err) < 0) {
    free(hostname);
    free(domain);
    return -1;
  }
  Runtime__V1__PodSandboxConfig *c =
      NL__NEW(Runtime__V1__PodSandboxConfig, RUNTIME__V1__POD_SANDBOX_CONFIG__INIT);
  c->metadata = NL__NEW(Runtime__V1__PodSandboxMetadata, RUNTIME__V1__POD_SANDBOX_METADATA__INIT);
  c->metadata->name = nl__pstr(pod->metadata.name);
  c->metadata->namespace_ = nl__pstr(pod->metadata.namespace_);
  c->metadata->uid = nl__pstr(pod->metadata.uid);
  c->metadata->attempt = attempt;
  c->hostname = nl__pstr(hostname); /* none for host-network pods (TESTENV trap 2) */
  free(hostname);
  free(domain);
  char *logdir = nl_runtime_pod_log_dir(opts, pod);
  c->log_directory = nl__pstr(logdir);
  free(logdir);
  c->dns_config = nl_runtime_pod_dns(opts, pod, host_dns);

  nl__kvs_t labels = {0}, ann = {0};
  nl__kvs_put_all(&labels, &pod->metadata.labels);
  nl__kvs_put(&labels, NL_LABEL_POD_NAME, pod->metadata.name);
  nl__kvs_put(&labels, NL_LABEL_POD_NAMESPACE, pod->metadata.namespace_);
  nl__kvs_put(&labels, NL_LABEL_POD_UID, pod->metadata.uid);
  nl__kvs_put_all(&ann, &pod->metadata.annotations);
  c->n_labels = labels.n;
  c->labels = (Runtime__V1__PodSandboxConfig__LabelsEntry **)nl__kv_entries(
      &runtime__v1__pod_sandbox_config__labels_entry__descriptor, &labels);
  c->n_annotations = ann.n;
  c->annotations = (Runtime__V1__PodSandboxConfig__AnnotationsEntry **)nl__kv_entries(
      &runtime__v1__pod_sandbox_config__annotations_entry__descriptor, &ann);
  nl__kvs_free(&labels);
  nl__kvs_free(&ann);

  /* kubecontainer.MakePortMappings over the regular containers; a repeated
   * protocol/port pair is dropped as upstream does. */
  for (size_t i = 0; i < pod->spec.n_containers; i++) {
    const nl_container_t *ct = &pod->spec.containers[i];
    for (size_t j = 0; j < ct->n_ports; j++) {
      const nl_container_port_t *p = &ct->ports[j];
      bool dup = false;
      for (size_t k = 0; k < c->n_port_mappings && !dup; k++) {
        Runtime__V1__PortMapping *m = c->port_mappings[k];
        dup = m->container_port == p->container_port && m->host_port == p->host_port &&
              m->protocol == protocol(p->protocol) && strcmp(m->host_ip, s0(p->host_ip)) == 0;
      }
      if (dup) continue;
      Runtime__V1__PortMapping *m =
          NL__NEW(Runtime__V1__PortMapping, RUNTIME__V1__PORT_MAPPING__INIT);
      m->protocol = protocol(p->protocol);
      m->container_port = p->container_port;
      m->host_port = p->host_port;
      m->host_ip = nl__pstr(p->host_ip);
      c->port_mappings =
          nl_xrealloc(c->port_mappings, (c->n_port_mappings + 1) * sizeof *c->port_mappings);
      c->port_mappings[c->n_port_mappings++] = m;
    }
  }
  c->linux = linux_config(opts, pod);
  c->linux->security_context->namespace_options->userns_options = userns;
  *out = c;
  return 0;
}
