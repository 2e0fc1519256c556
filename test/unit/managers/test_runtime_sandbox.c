/* PodSandboxConfig, DNS, hostname and resolv.conf parsing. */
#include "rt_test_util.h"

#include "managers/sysctl.h"

static const char *POD =
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: edge\n  uid: u-1\n"
    "  labels: {app: web}\n  annotations: {note: hi}\n"
    "spec:\n"
    "  securityContext:\n    runAsUser: 1000\n    fsGroup: 2000\n    supplementalGroups: [3000]\n"
    "    sysctls:\n    - {name: net/ipv4/ip_forward, value: '1'}\n"
    "  containers:\n  - name: c\n    image: busybox\n"
    "    ports:\n    - {containerPort: 80, hostPort: 8080}\n    - {containerPort: 53, protocol: UDP}\n";

static void test_sandbox_config(void **state) {
  (void)state;
  nl_pod_t *pod = pod_from_yaml(POD);
  nl_runtime_opts_t o = test_opts();
  nl_host_dns_t host;
  const char *rc = "nameserver 1.1.1.1\nsearch example.com.\noptions edns0\n";
  nl_runtime_parse_resolv_conf(rc, strlen(rc), &host);
  Runtime__V1__PodSandboxConfig *c = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 3, &host, &c, &err), 0);
  assert_string_equal(c->metadata->name, "web");
  assert_string_equal(c->metadata->namespace_, "edge");
  assert_string_equal(c->metadata->uid, "u-1");
  assert_int_equal(c->metadata->attempt, 3);
  assert_string_equal(c->hostname, "web");
  assert_string_equal(c->log_directory, "/var/log/pods/edge_web_u-1");
  assert_string_equal(MAP_GET(c, labels, "app"), "web");
  assert_string_equal(MAP_GET(c, labels, "io.kubernetes.pod.name"), "web");
  assert_string_equal(MAP_GET(c, labels, "io.kubernetes.pod.namespace"), "edge");
  assert_string_equal(MAP_GET(c, labels, "io.kubernetes.pod.uid"), "u-1");
  assert_string_equal(MAP_GET(c, annotations, "note"), "hi");
  assert_int_equal(c->n_port_mappings, 2);
  assert_int_equal(c->port_mappings[0]->container_port, 80);
  assert_int_equal(c->port_mappings[0]->host_port, 8080);
  assert_int_equal(c->port_mappings[1]->protocol, RUNTIME__V1__PROTOCOL__UDP);
  /* ClusterFirst: cluster DNS only, cluster searches then the host's, ndots:5 */
  assert_int_equal(c->dns_config->n_servers, 1);
  assert_string_equal(c->dns_config->servers[0], "10.96.0.10");
  assert_int_equal(c->dns_config->n_searches, 4);
  assert_string_equal(c->dns_config->searches[0], "edge.svc.cluster.local");
  assert_string_equal(c->dns_config->searches[1], "svc.cluster.local");
  assert_string_equal(c->dns_config->searches[2], "cluster.local");
  assert_string_equal(c->dns_config->searches[3], "example.com");
  assert_int_equal(c->dns_config->n_options, 1);
  assert_string_equal(c->dns_config->options[0], "ndots:5");
  Runtime__V1__LinuxSandboxSecurityContext *sc = c->linux->security_context;
  assert_string_equal(c->linux->cgroup_parent, "");
  assert_int_equal(sc->run_as_user->value, 1000);
  assert_null(sc->run_as_group);
  assert_int_equal(sc->n_supplemental_groups, 2);
  assert_int_equal(sc->supplemental_groups[0], 2000);
  assert_int_equal(sc->supplemental_groups[1], 3000);
  assert_false(sc->privileged);
  assert_int_equal(sc->seccomp->profile_type,
                   RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault);
  assert_int_equal(sc->namespace_options->network, RUNTIME__V1__NAMESPACE_MODE__POD);
  assert_int_equal(sc->namespace_options->pid, RUNTIME__V1__NAMESPACE_MODE__CONTAINER);
  assert_int_equal(sc->namespace_options->ipc, RUNTIME__V1__NAMESPACE_MODE__POD);
  assert_int_equal(c->linux->n_sysctls, 1);
  assert_string_equal(c->linux->sysctls[0]->key, "net.ipv4.ip_forward");
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_host_dns_free(&host);
  nl_pod_free(pod);
}

/* The sandbox config carries the pod's resources as a whole (upstream
 * calculateSandboxResources: pod-level where set, no overhead) and its overhead. */
static void test_sandbox_resources(void **state) {
  (void)state;
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\nspec:\n"
      "  overhead: {cpu: 10m, memory: 8Mi}\n"
      "  resources: {requests: {cpu: 250m}, limits: {cpu: 500m, memory: 64Mi}}\n"
      "  containers: [{name: c, image: b}]\n");
  nl_runtime_opts_t o = test_opts();
  nl_host_dns_t host = {0};
  Runtime__V1__PodSandboxConfig *c = NULL;
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &c, NULL), 0);
  Runtime__V1__LinuxContainerResources *r = c->linux->resources;
  assert_non_null(r);
  assert_int_equal(r->cpu_shares, 256);
  assert_int_equal(r->cpu_quota, 50000);
  assert_int_equal(r->cpu_period, 100000);
  assert_int_equal(r->memory_limit_in_bytes, 64 << 20);
  assert_int_equal(c->linux->overhead->cpu_shares, 10);
  assert_int_equal(c->linux->overhead->cpu_quota, 1000);
  assert_int_equal(c->linux->overhead->memory_limit_in_bytes, 8 << 20);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_pod_free(pod);
}

static void test_host_network(void **state) {
  (void)state;
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: h, namespace: default, uid: u2}\n"
      "spec:\n  hostNetwork: true\n  hostPID: true\n  hostIPC: true\n"
      "  containers:\n  - {name: c, image: busybox, securityContext: {privileged: true}}\n");
  nl_runtime_opts_t o = test_opts();
  nl_host_dns_t host;
  const char *rc = "nameserver 9.9.9.9\nnameserver 8.8.8.8\nsearch a.b c.d\n";
  nl_runtime_parse_resolv_conf(rc, strlen(rc), &host);
  Runtime__V1__PodSandboxConfig *c = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &c, &err), 0);
  assert_string_equal(c->hostname, ""); /* none under hostNetwork */
  Runtime__V1__NamespaceOption *ns = c->linux->security_context->namespace_options;
  assert_int_equal(ns->network, RUNTIME__V1__NAMESPACE_MODE__NODE);
  assert_int_equal(ns->pid, RUNTIME__V1__NAMESPACE_MODE__NODE);
  assert_int_equal(ns->ipc, RUNTIME__V1__NAMESPACE_MODE__NODE);
  assert_true(c->linux->security_context->privileged);
  /* ClusterFirst under hostNetwork falls back to the host's resolver */
  assert_int_equal(c->dns_config->n_servers, 2);
  assert_string_equal(c->dns_config->servers[0], "9.9.9.9");
  assert_int_equal(c->dns_config->n_searches, 2);
  assert_string_equal(c->dns_config->searches[1], "c.d");
  /* hostPort defaults to containerPort under hostNetwork: none here */
  assert_int_equal(c->n_port_mappings, 0);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_host_dns_free(&host);
  nl_pod_free(pod);
}

static void test_dns_policies(void **state) {
  (void)state;
  nl_runtime_opts_t o = test_opts();
  nl_host_dns_t host;
  const char *rc = "nameserver 1.1.1.1\nsearch x.y\noptions ndots:2 rotate\n";
  nl_runtime_parse_resolv_conf(rc, strlen(rc), &host);
  /* None + dnsConfig */
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
      "spec:\n  dnsPolicy: None\n  dnsConfig:\n    nameservers: [1.2.3.4]\n"
      "    searches: [s1]\n    options: [{name: ndots, value: '1'}, {name: edns0}]\n"
      "  containers: [{name: c, image: busybox}]\n");
  Runtime__V1__DNSConfig *d = nl_runtime_pod_dns(&o, pod, &host);
  assert_int_equal(d->n_servers, 1);
  assert_string_equal(d->servers[0], "1.2.3.4");
  assert_int_equal(d->n_searches, 1);
  assert_int_equal(d->n_options, 2);
  assert_string_equal(d->options[0], "ndots:1");
  assert_string_equal(d->options[1], "edns0");
  protobuf_c_message_free_unpacked(&d->base, NULL);
  nl_pod_free(pod);
  /* Default: the host's, with the pod's option overriding by name */
  pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
      "spec:\n  dnsPolicy: Default\n  dnsConfig:\n    options: [{name: ndots, value: '3'}]\n"
      "  containers: [{name: c, image: busybox}]\n");
  d = nl_runtime_pod_dns(&o, pod, &host);
  assert_int_equal(d->n_servers, 1);
  assert_string_equal(d->servers[0], "1.1.1.1");
  assert_int_equal(d->n_options, 2);
  assert_string_equal(d->options[0], "ndots:3");
  assert_string_equal(d->options[1], "rotate");
  protobuf_c_message_free_unpacked(&d->base, NULL);
  /* ClusterFirst without clusterDNS: falls back to Default */
  o.n_cluster_dns = 0;
  nl_pod_free(pod);
  pod = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
                      "spec:\n  containers: [{name: c, image: busybox}]\n");
  d = nl_runtime_pod_dns(&o, pod, &host);
  assert_string_equal(d->servers[0], "1.1.1.1");
  protobuf_c_message_free_unpacked(&d->base, NULL);
  /* resolvConf "": the local server and "." */
  o.resolv_conf = "";
  d = nl_runtime_pod_dns(&o, pod, NULL);
  assert_string_equal(d->servers[0], "127.0.0.1");
  assert_string_equal(d->searches[0], ".");
  protobuf_c_message_free_unpacked(&d->base, NULL);
  nl_pod_free(pod);
  nl_host_dns_free(&host);
}

static void test_resolv_conf(void **state) {
  (void)state;
  const char *rc = "# comment\n; other\nnameserver 10.0.0.1 # x\nsearch a. . b\n"
                   "search c.d. e\nnameserver\noptions timeout:1\ndomain z\n";
  nl_host_dns_t h;
  nl_runtime_parse_resolv_conf(rc, strlen(rc), &h);
  assert_int_equal(h.n_servers, 1);
  assert_string_equal(h.servers[0], "10.0.0.1");
  assert_int_equal(h.n_searches, 2); /* the last search line wins */
  assert_string_equal(h.searches[0], "c.d");
  assert_string_equal(h.searches[1], "e");
  assert_int_equal(h.n_options, 1);
  nl_host_dns_free(&h);
}

static void test_hostname(void **state) {
  (void)state;
  nl_runtime_opts_t o = test_opts();
  char longname[80];
  memset(longname, 'a', 62);
  longname[62] = '-';
  strcpy(longname + 63, "bbbb");
  char yaml[512];
  snprintf(yaml, sizeof yaml,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: ns, uid: u}\n"
           "spec:\n  subdomain: sub\n  containers: [{name: c, image: busybox}]\n", longname);
  nl_pod_t *pod = pod_from_yaml(yaml);
  char *dom;
  nl_err_t *err = NULL;
  char *h = nl_runtime_pod_hostname(&o, pod, &dom, &err);
  assert_int_equal(strlen(h), 62); /* truncated to 63, trailing '-' trimmed */
  assert_string_equal(dom, "sub.ns.svc.cluster.local");
  free(h);
  free(dom);
  nl_pod_free(pod);
  pod = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
                      "spec:\n  hostname: myhost\n  containers: [{name: c, image: busybox}]\n");
  h = nl_runtime_pod_hostname(&o, pod, &dom, &err);
  assert_string_equal(h, "myhost");
  assert_null(dom);
  free(h);
  nl_pod_free(pod);
  /* hostnameOverride wins over hostname and subdomain, with no domain (the
   * sandbox's hostname and the /etc/hosts line follow it) */
  pod = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
                      "spec:\n  hostname: myhost\n  subdomain: sub\n"
                      "  hostnameOverride: override.example.host\n"
                      "  containers: [{name: c, image: busybox}]\n");
  h = nl_runtime_pod_hostname(&o, pod, &dom, &err);
  assert_string_equal(h, "override.example.host");
  assert_null(dom);
  free(h);
  Runtime__V1__PodSandboxConfig *c = NULL;
  nl_host_dns_t hd = {0};
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &hd, &c, &err), 0);
  assert_string_equal(c->hostname, "override.example.host");
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_host_dns_free(&hd);
  char *ips[] = {"10.88.0.9"};
  char *hosts = nl_runtime_hosts_content("override.example.host", NULL, ips, 1, "");
  assert_non_null(strstr(hosts, "10.88.0.9\toverride.example.host\n"));
  free(hosts);
  nl_pod_free(pod);
  /* not a subdomain: upstream's error */
  pod = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
                      "spec:\n  hostnameOverride: Not-RFC1123\n"
                      "  containers: [{name: c, image: busybox}]\n");
  assert_null(nl_runtime_pod_hostname(&o, pod, &dom, &err));
  assert_string_equal(err->msg, "pod HostnameOverride \"Not-RFC1123\" is not a valid DNS subdomain");
  nl_err_free(&err);
  nl_pod_free(pod);
}

/* setHostnameAsFQDN: the sandbox's hostname is the FQDN when the pod has a
 * subdomain, the short name without; an FQDN over the kernel's 64 bytes is
 * upstream's error (its FailedCreatePodSandBox event's message). */
static void test_hostname_as_fqdn(void **state) {
  (void)state;
  nl_runtime_opts_t o = test_opts();
  nl_host_dns_t hd = {0};
  Runtime__V1__PodSandboxConfig *c = NULL;
  nl_err_t *err = NULL;
  nl_pod_t *pod = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
                                "spec:\n  subdomain: t\n  setHostnameAsFQDN: true\n"
                                "  containers: [{name: c, image: busybox}]\n");
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &hd, &c, &err), 0);
  assert_string_equal(c->hostname, "p.t.ns.svc.cluster.local");
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_pod_free(pod);
  pod = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
                      "spec:\n  setHostnameAsFQDN: true\n  containers: [{name: c, image: busybox}]\n");
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &hd, &c, &err), 0);
  assert_string_equal(c->hostname, "p");
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_pod_free(pod);
  pod = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: hostfqdnveryveryveryverylongforfqdntobemorethan64bytes-1,"
                      " namespace: ns, uid: u}\nspec:\n  subdomain: t\n  setHostnameAsFQDN: true\n"
                      "  containers: [{name: c, image: busybox}]\n");
  assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &hd, &c, &err), -1);
  assert_string_equal(err->msg, "failed to construct FQDN from pod hostname and cluster domain, FQDN "
                                "hostfqdnveryveryveryverylongforfqdntobemorethan64bytes-1.t.ns.svc."
                                "cluster.local is too long (64 characters is the max, 79 characters "
                                "requested)");
  nl_err_free(&err);
  nl_pod_free(pod);
}

static void test_sysctl_dots(void **state) {
  (void)state;
  char *s = nl_sysctl_normalize("kernel.shm_rmid_forced");
  assert_string_equal(s, "kernel.shm_rmid_forced");
  free(s);
  s = nl_sysctl_normalize("net/ipv4/conf/eno2.100/rp_filter");
  assert_string_equal(s, "net.ipv4.conf.eno2/100.rp_filter");
  free(s);
}

/* supplementalGroupsPolicy goes to the runtime in both the sandbox's and every
 * container's security context, with fsGroup and supplementalGroups; unset is
 * Merge (the runtime adds the groups the image's /etc/group gives the user). */
static void test_supplemental_groups_policy(void **state) {
  (void)state;
  static const struct {
    const char *field;
    Runtime__V1__SupplementalGroupsPolicy want;
  } cases[] = {
      {"", RUNTIME__V1__SUPPLEMENTAL_GROUPS_POLICY__Merge},
      {", supplementalGroupsPolicy: Merge", RUNTIME__V1__SUPPLEMENTAL_GROUPS_POLICY__Merge},
      {", supplementalGroupsPolicy: Strict", RUNTIME__V1__SUPPLEMENTAL_GROUPS_POLICY__Strict},
  };
  nl_runtime_opts_t o = test_opts();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char y[512];
    snprintf(y, sizeof y,
             "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\nspec:\n"
             "  securityContext: {runAsUser: 1000, fsGroup: 70000, supplementalGroups: [60000]%s}\n"
             "  containers: [{name: c, image: b}]\n",
             cases[i].field);
    nl_pod_t *pod = pod_from_yaml(y);
    Runtime__V1__PodSandboxConfig *sb = NULL;
    nl_err_t *err = NULL;
    nl_host_dns_t host = {0};
    assert_int_equal(nl_runtime_build_sandbox_config(&o, pod, 0, &host, &sb, &err), 0);
    const Runtime__V1__LinuxSandboxSecurityContext *ssc = sb->linux->security_context;
    assert_int_equal(ssc->supplemental_groups_policy, cases[i].want);
    assert_int_equal(ssc->n_supplemental_groups, 2);
    assert_int_equal(ssc->supplemental_groups[0], 70000);
    assert_int_equal(ssc->supplemental_groups[1], 60000);
    nl_container_input_t in = {.container = &pod->spec.containers[0]};
    Runtime__V1__ContainerConfig *c = NULL;
    assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), 0);
    const Runtime__V1__LinuxContainerSecurityContext *csc = c->linux->security_context;
    assert_int_equal(csc->supplemental_groups_policy, cases[i].want);
    assert_int_equal(csc->n_supplemental_groups, 2);
    assert_int_equal(csc->supplemental_groups[0], 70000);
    assert_int_equal(csc->supplemental_groups[1], 60000);
    assert_int_equal(csc->run_as_user->value, 1000);
    protobuf_c_message_free_unpacked(&c->base, NULL);
    protobuf_c_message_free_unpacked(&sb->base, NULL);
    nl_pod_free(pod);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sandbox_config), cmocka_unit_test(test_host_network),
      cmocka_unit_test(test_sandbox_resources),
      cmocka_unit_test(test_dns_policies),   cmocka_unit_test(test_resolv_conf),
      cmocka_unit_test(test_hostname),
      cmocka_unit_test(test_hostname_as_fqdn),
      cmocka_unit_test(test_sysctl_dots),
      cmocka_unit_test(test_supplemental_groups_policy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
