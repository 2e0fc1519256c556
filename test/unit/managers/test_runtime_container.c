/* ContainerConfig, environment, $(VAR) expansion, resources and QoS. */
#include "rt_test_util.h"

static void test_expand(void **state) {
  (void)state;
  nl_env_t env[] = {{"A", "1"}, {"B", "two"}, {"A", "3"}};
  struct { const char *in, *out; } cases[] = {
      {"$(A)", "3"},          {"x$(B)y", "xtwoy"},   {"$(C)", "$(C)"},
      {"$$(A)", "$(A)"},      {"$$", "$"},           {"$(A", "$(A"},
      {"$", "$"},             {"a$b", "a$b"},        {"$()", "$()"},
      {"$(A)$(B)$$", "3two$"}, {"", ""},             {"plain", "plain"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *s = nl_runtime_expand(cases[i].in, env, 3);
    assert_string_equal(s, cases[i].out);
    free(s);
  }
}

static const char *POD =
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: edge\n  uid: u-1\n"
    "  labels: {app: web, tier: fe}\n  annotations: {note: hi}\n"
    "spec:\n  nodeName: node1\n  serviceAccountName: sa\n  terminationGracePeriodSeconds: 20\n"
    "  volumes:\n  - {name: data, emptyDir: {}}\n  - {name: host, hostPath: {path: /srv}}\n"
    "  containers:\n  - name: app\n    image: busybox:1.36\n"
    "    command: [sh, -c, 'echo $(GREETING) $(POD_NAME) $(MISSING)']\n"
    "    args: ['$(NODE)', '$$(NODE)']\n    workingDir: /w\n    tty: true\n"
    "    env:\n    - {name: GREETING, value: hello}\n"
    "    - {name: REF, value: 'x-$(GREETING)-$(LATER)'}\n    - {name: LATER, value: l}\n"
    "    - name: POD_NAME\n      valueFrom: {fieldRef: {fieldPath: metadata.name}}\n"
    "    - name: NS\n      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}\n"
    "    - name: UID\n      valueFrom: {fieldRef: {fieldPath: metadata.uid}}\n"
    "    - name: NODE\n      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}\n"
    "    - name: SA\n      valueFrom: {fieldRef: {fieldPath: spec.serviceAccountName}}\n"
    "    - name: PODIP\n      valueFrom: {fieldRef: {fieldPath: status.podIP}}\n"
    "    - name: HOSTIP\n      valueFrom: {fieldRef: {fieldPath: status.hostIP}}\n"
    "    - name: APP\n      valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}\n"
    "    - name: LABELS\n      valueFrom: {fieldRef: {fieldPath: metadata.labels}}\n"
    "    - name: CPU\n      valueFrom: {resourceFieldRef: {resource: limits.cpu}}\n"
    "    - name: MEM\n      valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}\n"
    "    - name: REQCPU\n      valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1m}}\n"
    "    resources:\n      requests: {cpu: 250m, memory: 64Mi}\n      limits: {cpu: 500m, memory: 128Mi}\n"
    "    ports: [{containerPort: 80, name: http}]\n"
    "    lifecycle: {preStop: {exec: {command: [sleep, '1']}}}\n"
    "    securityContext:\n      runAsUser: 1001\n      readOnlyRootFilesystem: true\n"
    "      allowPrivilegeEscalation: false\n      capabilities: {add: [NET_ADMIN], drop: [ALL]}\n"
    "      seccompProfile: {type: RuntimeDefault}\n"
    "    volumeMounts:\n    - {name: data, mountPath: /data}\n"
    "    - {name: host, mountPath: /h, readOnly: true, subPath: sub/dir, mountPropagation: HostToContainer}\n";

static const char *env_get(Runtime__V1__ContainerConfig *c, const char *k) {
  for (size_t i = 0; i < c->n_envs; i++)
    if (strcmp(c->envs[i]->key, k) == 0) return c->envs[i]->value;
  return NULL;
}

static void test_container_config(void **state) {
  (void)state;
  nl_pod_t *pod = pod_from_yaml(POD);
  nl_runtime_opts_t o = test_opts();
  char *ips[] = {"10.88.0.5"};
  nl_container_input_t in = {.container = &pod->spec.containers[0], .restart_count = 2,
                             .image_ref = "sha256:abc", .pod_ip = "10.88.0.5", .pod_ips = ips,
                             .n_pod_ips = 1,
                             .termination_message_host_path = "/var/lib/kubelet/pods/u-1/containers/app/x1"};
  Runtime__V1__ContainerConfig *c = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), 0);
  assert_string_equal(c->metadata->name, "app");
  assert_int_equal(c->metadata->attempt, 2);
  assert_string_equal(c->image->image, "sha256:abc");
  assert_string_equal(c->image->user_specified_image, "busybox:1.36");
  assert_int_equal(c->n_command, 3);
  assert_string_equal(c->command[2], "echo hello web $(MISSING)");
  assert_string_equal(c->args[0], "node1");
  assert_string_equal(c->args[1], "$(NODE)");
  assert_string_equal(c->working_dir, "/w");
  assert_true(c->tty);
  assert_string_equal(c->log_path, "app/2.log");
  assert_string_equal(env_get(c, "REF"), "x-hello-$(LATER)"); /* only earlier ones */
  assert_string_equal(env_get(c, "POD_NAME"), "web");
  assert_string_equal(env_get(c, "NS"), "edge");
  assert_string_equal(env_get(c, "UID"), "u-1");
  assert_string_equal(env_get(c, "NODE"), "node1");
  assert_string_equal(env_get(c, "SA"), "sa");
  assert_string_equal(env_get(c, "PODIP"), "10.88.0.5");
  assert_string_equal(env_get(c, "HOSTIP"), "192.168.1.10");
  assert_string_equal(env_get(c, "APP"), "web");
  assert_string_equal(env_get(c, "LABELS"), "app=\"web\"\ntier=\"fe\"");
  assert_string_equal(env_get(c, "CPU"), "1"); /* ceil(500m / 1) */
  assert_string_equal(env_get(c, "MEM"), "128");
  assert_string_equal(env_get(c, "REQCPU"), "250");
  /* labels and annotations */
  assert_string_equal(MAP_GET(c, labels, "io.kubernetes.container.name"), "app");
  assert_string_equal(MAP_GET(c, labels, "io.kubernetes.pod.uid"), "u-1");
  char hash[16];
  snprintf(hash, sizeof hash, "%x", nl_container_hash(&pod->spec.containers[0]));
  assert_string_equal(MAP_GET(c, annotations, "io.kubernetes.container.hash"), hash);
  assert_string_equal(MAP_GET(c, annotations, "io.kubernetes.container.restartCount"), "2");
  assert_string_equal(MAP_GET(c, annotations, "io.kubernetes.container.terminationMessagePath"),
                      "/dev/termination-log");
  assert_string_equal(MAP_GET(c, annotations, "io.kubernetes.container.terminationMessagePolicy"),
                      "File");
  assert_string_equal(MAP_GET(c, annotations, "io.kubernetes.pod.terminationGracePeriod"), "20");
  assert_string_equal(MAP_GET(c, annotations, "io.kubernetes.container.ports"),
                      "[{\"name\":\"http\",\"containerPort\":80,\"protocol\":\"TCP\"}]");
  assert_string_equal(MAP_GET(c, annotations, "io.kubernetes.container.preStopHandler"),
                      "{\"exec\":{\"command\":[\"sleep\",\"1\"]}}");
  /* mounts */
  assert_int_equal(c->n_mounts, 3);
  assert_string_equal(c->mounts[0]->container_path, "/data");
  assert_string_equal(c->mounts[0]->host_path,
                      "/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~empty-dir/data");
  assert_false(c->mounts[0]->readonly);
  assert_string_equal(c->mounts[1]->host_path, "/srv/sub/dir");
  assert_true(c->mounts[1]->readonly);
  assert_int_equal(c->mounts[1]->propagation,
                   RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_HOST_TO_CONTAINER);
  assert_string_equal(c->mounts[2]->container_path, "/dev/termination-log");
  assert_string_equal(c->mounts[2]->host_path, "/var/lib/kubelet/pods/u-1/containers/app/x1");
  /* resources: Burstable */
  Runtime__V1__LinuxContainerResources *r = c->linux->resources;
  assert_int_equal(r->cpu_shares, 256);
  assert_int_equal(r->cpu_period, 100000);
  assert_int_equal(r->cpu_quota, 50000);
  assert_int_equal(r->memory_limit_in_bytes, 128 << 20);
  /* 1000 - 1000*64Mi/4Gi = 985 */
  assert_int_equal(r->oom_score_adj, 985);
  /* security context */
  Runtime__V1__LinuxContainerSecurityContext *s = c->linux->security_context;
  assert_int_equal(s->run_as_user->value, 1001);
  assert_true(s->readonly_rootfs);
  assert_true(s->no_new_privs);
  assert_false(s->privileged);
  assert_string_equal(s->capabilities->add_capabilities[0], "NET_ADMIN");
  assert_string_equal(s->capabilities->drop_capabilities[0], "ALL");
  assert_int_equal(s->seccomp->profile_type,
                   RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault);
  assert_true(s->n_masked_paths > 5);
  assert_int_equal(s->n_readonly_paths, 5);
  assert_int_equal(s->namespace_options->pid, RUNTIME__V1__NAMESPACE_MODE__CONTAINER);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_pod_free(pod);
}

static void test_config_errors(void **state) {
  (void)state;
  nl_runtime_opts_t o = test_opts();
  const char *bad[] = {
      /* unknown volume */
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  containers: [{name: c, image: b, volumeMounts: [{name: nope, mountPath: /x}]}]\n",
      /* subPath escaping the volume */
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  volumes: [{name: v, emptyDir: {}}]\n"
      "  containers: [{name: c, image: b, volumeMounts: [{name: v, mountPath: /x, subPath: ../up}]}]\n",
      /* configMap key (no API objects) */
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  containers: [{name: c, image: b, env: [{name: X, valueFrom: {configMapKeyRef: {name: cm, key: k}}}]}]\n",
  };
  for (size_t i = 0; i < 3; i++) {
    nl_pod_t *pod = pod_from_yaml(bad[i]);
    nl_container_input_t in = {.container = &pod->spec.containers[0]};
    Runtime__V1__ContainerConfig *c = NULL;
    nl_err_t *err = NULL;
    assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), -1);
    assert_non_null(err);
    if (i < 2) assert_non_null(strstr(err->msg, "container c"));
    else assert_string_equal(err->msg, "couldn't get configMap nsx/cm, no kubeClient defined");
    nl_err_free(&err);
    nl_pod_free(pod);
  }
  /* an optional configMap key is skipped */
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  containers: [{name: c, image: b, env: [{name: X, valueFrom: {configMapKeyRef: {name: cm, key: k, optional: true}}}]}]\n");
  nl_env_t *env;
  size_t n;
  nl_err_t *err = NULL;
  assert_int_equal(nl_runtime_make_env(&o, pod, &pod->spec.containers[0], NULL, NULL, 0, NULL, 0, &env,
                                       &n, &err), 0);
  assert_int_equal(n, 0);
  nl_env_free(env, n);
  nl_pod_free(pod);
}

/* An image volume's CRI Mount: no host path, the pulled image's id and the
 * pod's reference, subPath inside the image, read-only whatever the mount
 * says; a mount of an image volume that was not pulled is a config error. */
static void test_image_volume_mounts(void **state) {
  (void)state;
  nl_runtime_opts_t o = test_opts();
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u, annotations: {a: b}}\n"
      "spec:\n  volumes:\n  - name: tools\n    image: {reference: example/tools, pullPolicy: Never}\n"
      "  - {name: data, emptyDir: {}}\n"
      "  containers:\n  - name: c\n    image: b\n    volumeMounts:\n"
      "    - {name: tools, mountPath: /opt/tools, subPath: bin, mountPropagation: HostToContainer}\n"
      "    - {name: data, mountPath: /data}\n"
      "    - {name: tools, mountPath: /all, readOnly: false}\n");
  nl_image_volume_ref_t iv = {"tools", "sha256:feed", "example/tools"};
  nl_container_input_t in = {.container = &pod->spec.containers[0], .image_volumes = &iv,
                             .n_image_volumes = 1};
  Runtime__V1__ContainerConfig *c = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), 0);
  assert_int_equal(c->n_mounts, 3);
  Runtime__V1__Mount *m = c->mounts[0];
  assert_string_equal(m->container_path, "/opt/tools");
  assert_string_equal(m->host_path, "");
  assert_non_null(m->image);
  assert_string_equal(m->image->image, "sha256:feed");
  assert_string_equal(m->image->user_specified_image, "example/tools");
  assert_int_equal(m->image->n_annotations, 1);
  assert_string_equal(m->image->annotations[0]->key, "a");
  assert_string_equal(m->image_sub_path, "bin");
  assert_true(m->readonly);
  assert_int_equal(m->propagation, RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_HOST_TO_CONTAINER);
  assert_null(c->mounts[1]->image);
  assert_string_equal(c->mounts[1]->host_path,
                      "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/data");
  assert_string_equal(c->mounts[2]->image_sub_path, "");
  assert_true(c->mounts[2]->readonly);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  /* not pulled: no mount without its image */
  in.n_image_volumes = 0;
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), -1);
  assert_non_null(strstr(err->msg, "image volume \"tools\" was not pulled"));
  nl_err_free(&err);
  nl_pod_free(pod);
  /* a subPath leaving the image is refused as any other */
  pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\n"
      "spec:\n  volumes:\n  - name: tools\n    image: {reference: example/tools}\n"
      "  containers: [{name: c, image: b, volumeMounts: [{name: tools, mountPath: /t, subPath: ../x}]}]\n");
  in.container = &pod->spec.containers[0];
  in.n_image_volumes = 1;
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), -1);
  assert_non_null(strstr(err->msg, "must not contain '..'"));
  nl_err_free(&err);
  nl_pod_free(pod);
}

/* Runtimes that ignore the Mount's image field are known by their version. */
static void test_image_volume_runtimes(void **state) {
  (void)state;
  char *why = nl_runtime_image_volumes_unsupported("containerd", "1.6.20");
  assert_non_null(why);
  assert_string_equal(why, "the container runtime containerd 1.6.20 does not mount images "
                           "(containerd 2.1 or later does)");
  free(why);
  why = nl_runtime_image_volumes_unsupported("containerd", "v2.0.5");
  assert_non_null(why);
  free(why);
  why = nl_runtime_image_volumes_unsupported("cri-o", "1.30.2");
  assert_non_null(why);
  free(why);
  assert_null(nl_runtime_image_volumes_unsupported("containerd", "v2.1.0"));
  assert_null(nl_runtime_image_volumes_unsupported("containerd", "2.4.1"));
  assert_null(nl_runtime_image_volumes_unsupported("containerd", "3.0.0"));
  assert_null(nl_runtime_image_volumes_unsupported("cri-o", "1.31.0"));
  assert_null(nl_runtime_image_volumes_unsupported("other", "0.1"));
  assert_null(nl_runtime_image_volumes_unsupported("containerd", NULL));
  assert_null(nl_runtime_image_volumes_unsupported("containerd", "devel"));
}

static void node_allocatable(void *ctx, nl_runtime_allocatable_t *out) {
  (void)ctx;
  *out = (nl_runtime_allocatable_t){1500, 3LL << 30, 10LL << 30};
}

static void env_of(const nl_runtime_opts_t *o, const char *yaml, const char *const *want) {
  nl_pod_t *pod = pod_from_yaml(yaml);
  nl_env_t *env;
  size_t n;
  nl_err_t *err = NULL;
  if (nl_runtime_make_env(o, pod, &pod->spec.containers[0], NULL, NULL, 0, NULL, 0, &env, &n, &err) < 0)
    fail_msg("make_env: %s", nl_err_msg(err));
  for (size_t i = 0; want[i]; i += 2) {
    const char *v = NULL;
    for (size_t j = 0; j < n; j++)
      if (strcmp(env[j].name, want[i]) == 0) v = env[j].value;
    if (!v || strcmp(v, want[i + 1]) != 0)
      fail_msg("%s: want %s, got %s", want[i], want[i + 1], v ? v : "(unset)");
  }
  nl_env_free(env, n);
  nl_pod_free(pod);
}

/* The API server sends an unset divisor as "0" (upstream reads it as 1), and an
 * unset limit is the Node's allocatable (defaultPodLimitsForDownwardAPI). */
static void test_resource_defaults(void **state) {
  (void)state;
  const char *pod =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  containers:\n  - name: c\n    image: b\n"
      "    resources: {requests: {cpu: 250m, memory: 32Mi}}\n    env:\n"
      "    - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: '0'}}}\n"
      "    - {name: MEM_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: '0'}}}\n"
      "    - {name: EPH_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.ephemeral-storage, divisor: 1Gi}}}\n"
      "    - {name: CPU_REQ, valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: '0'}}}\n"
      "    - {name: CPU_REQ_M, valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1m}}}\n"
      "    - {name: MEM_REQ, valueFrom: {resourceFieldRef: {resource: requests.memory, divisor: '0'}}}\n"
      "    - {name: EPH_REQ, valueFrom: {resourceFieldRef: {resource: requests.ephemeral-storage}}}\n";
  nl_runtime_opts_t o = test_opts();
  o.allocatable = node_allocatable;
  env_of(&o, pod,
         (const char *const[]){"CPU_LIMIT", "2", "MEM_LIMIT", "3221225472", "EPH_LIMIT", "10",
                               "CPU_REQ", "1", "CPU_REQ_M", "250", "MEM_REQ", "33554432",
                               "EPH_REQ", "0", NULL});
  /* Without a Node: the machine's cpus and memory; ephemeral-storage unknown. */
  o.allocatable = NULL;
  env_of(&o, pod,
         (const char *const[]){"CPU_LIMIT", "2", "MEM_LIMIT", "4294967296", "EPH_LIMIT", "0",
                               NULL});
  /* A limit that is set wins; a zero divisor is 1 there too. */
  env_of(&o,
         "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
         "  containers:\n  - name: c\n    image: b\n"
         "    resources: {limits: {cpu: 1250m, memory: 64Mi}}\n    env:\n"
         "    - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: '0'}}}\n"
         "    - {name: MEM_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}\n",
         (const char *const[]){"CPU_LIMIT", "2", "MEM_LIMIT", "64", NULL});
}

/* The device plugins' Allocate answers go first, the container's own after. */
static void test_container_devices(void **state) {
  (void)state;
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  containers: [{name: c, image: b, env: [{name: OWN, value: x}]}]\n");
  V1beta1__ContainerAllocateResponse r = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
  V1beta1__ContainerAllocateResponse__EnvsEntry e = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ENVS_ENTRY__INIT;
  e.key = "DEV";
  e.value = "Dev-1";
  V1beta1__ContainerAllocateResponse__EnvsEntry *es[] = {&e};
  V1beta1__Mount m = V1BETA1__MOUNT__INIT;
  m.container_path = "/tmp/Dev-1";
  m.host_path = "/tmp/Dev-1";
  m.read_only = true;
  V1beta1__Mount *ms[] = {&m};
  V1beta1__DeviceSpec d = V1BETA1__DEVICE_SPEC__INIT;
  d.container_path = "/dev/ttyUSB0";
  d.host_path = "/dev/ttyUSB3";
  d.permissions = "rw";
  V1beta1__DeviceSpec *ds[] = {&d};
  V1beta1__ContainerAllocateResponse__AnnotationsEntry a =
      V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ANNOTATIONS_ENTRY__INIT;
  a.key = "example.com/dev";
  a.value = "1";
  V1beta1__ContainerAllocateResponse__AnnotationsEntry *as[] = {&a};
  V1beta1__CDIDevice cdi = V1BETA1__CDIDEVICE__INIT;
  cdi.name = "example.com/class=dev1";
  V1beta1__CDIDevice *cdis[] = {&cdi};
  r.envs = es, r.n_envs = 1, r.mounts = ms, r.n_mounts = 1, r.devices = ds, r.n_devices = 1;
  r.annotations = as, r.n_annotations = 1, r.cdi_devices = cdis, r.n_cdi_devices = 1;
  V1beta1__ContainerAllocateResponse *rs[] = {&r};
  nl_runtime_opts_t o = test_opts();
  nl_container_input_t in = {.container = &pod->spec.containers[0], .devices = rs, .n_devices = 1};
  Runtime__V1__ContainerConfig *c = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), 0);
  assert_true(c->n_envs >= 2);
  assert_string_equal(c->envs[0]->key, "DEV");
  assert_string_equal(c->envs[0]->value, "Dev-1");
  assert_string_equal(c->envs[1]->key, "OWN");
  assert_true(c->n_mounts >= 1);
  assert_string_equal(c->mounts[0]->container_path, "/tmp/Dev-1");
  assert_true(c->mounts[0]->readonly);
  assert_int_equal(c->n_devices, 1);
  assert_string_equal(c->devices[0]->host_path, "/dev/ttyUSB3");
  assert_string_equal(c->devices[0]->container_path, "/dev/ttyUSB0");
  assert_string_equal(c->devices[0]->permissions, "rw");
  assert_int_equal(c->n_cdi_devices, 1);
  assert_string_equal(c->cdi_devices[0]->name, "example.com/class=dev1");
  bool found = false;
  for (size_t i = 0; i < c->n_annotations; i++)
    found |= strcmp(c->annotations[i]->key, "example.com/dev") == 0;
  assert_true(found);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_pod_free(pod);
}

static void test_qos(void **state) {
  (void)state;
  nl_pod_t *g = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  containers: [{name: c, image: b, resources: {limits: {cpu: '1', memory: 1Gi}}}]\n");
  assert_string_equal(nl_pod_qos_class(g), "Guaranteed");
  assert_int_equal(nl_runtime_oom_score_adj(g, &g->spec.containers[0], 4LL << 30), -997);
  nl_pod_t *be = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  containers: [{name: c, image: b}]\n");
  assert_string_equal(nl_pod_qos_class(be), "BestEffort");
  assert_int_equal(nl_runtime_oom_score_adj(be, &be->spec.containers[0], 4LL << 30), 1000);
  nl_pod_t *b = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  containers:\n  - {name: c, image: b, resources: {requests: {cpu: 100m}}}\n"
      "  - {name: d, image: b, resources: {requests: {memory: 4Gi}}}\n");
  assert_string_equal(nl_pod_qos_class(b), "Burstable");
  assert_int_equal(nl_runtime_oom_score_adj(b, &b->spec.containers[0], 4LL << 30), 999);
  assert_int_equal(nl_runtime_oom_score_adj(b, &b->spec.containers[1], 4LL << 30), 3);
  /* BestEffort container: cpu shares 2, no quota */
  nl_runtime_opts_t o = test_opts();
  nl_container_input_t in = {.container = &be->spec.containers[0]};
  Runtime__V1__ContainerConfig *c = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_runtime_build_container_config(&o, be, &in, &c, &err), 0);
  assert_int_equal(c->linux->resources->cpu_shares, 2);
  assert_int_equal(c->linux->resources->cpu_quota, 0);
  assert_int_equal(c->linux->resources->memory_limit_in_bytes, 0);
  assert_int_equal(c->linux->security_context->seccomp->profile_type,
                   RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined);
  assert_false(c->linux->security_context->no_new_privs);
  assert_string_equal(c->log_path, "c/0.log");
  assert_int_equal(c->n_mounts, 0); /* no termination-message file given */
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_pod_free(g);
  nl_pod_free(be);
  nl_pod_free(b);
}

/* Pod-level resources (upstream getCPULimit/getMemoryLimit and the OOM score's
 * pod-level share): a container without a limit of its own gets the pod's; the
 * pod's memory request beyond its containers' is shared out for the score. */
static void test_pod_level_container_resources(void **state) {
  (void)state;
  nl_pod_t *p = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  resources: {requests: {cpu: 200m, memory: 1Gi}, limits: {cpu: 400m, memory: 2Gi}}\n"
      "  containers:\n  - {name: a, image: b}\n"
      "  - {name: c, image: b, resources: {requests: {cpu: 100m, memory: 512Mi}, limits: {cpu: "
      "100m, memory: 512Mi}}}\n");
  assert_string_equal(nl_pod_qos_class(p), "Burstable");
  nl_runtime_opts_t o = test_opts(); /* 4Gi of memory */
  nl_container_input_t in = {.container = &p->spec.containers[0]};
  Runtime__V1__ContainerConfig *c = NULL;
  assert_int_equal(nl_runtime_build_container_config(&o, p, &in, &c, NULL), 0);
  Runtime__V1__LinuxContainerResources *r = c->linux->resources;
  assert_int_equal(r->memory_limit_in_bytes, 2LL << 30);
  assert_int_equal(r->cpu_quota, 40000);
  assert_int_equal(r->cpu_shares, 409); /* no request: from the limit, as upstream */
  /* (1Gi - 512Mi) / 2 = 256Mi each: 1000 - 1000*256Mi/4Gi = 938 */
  assert_int_equal(r->oom_score_adj, 938);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  in.container = &p->spec.containers[1];
  assert_int_equal(nl_runtime_build_container_config(&o, p, &in, &c, NULL), 0);
  r = c->linux->resources;
  assert_int_equal(r->memory_limit_in_bytes, 512LL << 20); /* its own wins */
  assert_int_equal(r->cpu_quota, 10000);
  /* 1000 - 1000*(512Mi+256Mi)/4Gi = 813 */
  assert_int_equal(r->oom_score_adj, 813);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_pod_free(p);
  /* pod-level hugepages bound a container without its own of that size */
  p = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
      "  resources: {limits: {memory: 1Gi, hugepages-2Mi: 8Mi, hugepages-1Gi: 2Gi}}\n"
      "  containers:\n  - {name: a, image: b, resources: {limits: {hugepages-1Gi: 1Gi}}}\n");
  in.container = &p->spec.containers[0];
  assert_int_equal(nl_runtime_build_container_config(&o, p, &in, &c, NULL), 0);
  r = c->linux->resources;
  assert_int_equal(r->n_hugepage_limits, 2);
  assert_string_equal(r->hugepage_limits[0]->page_size, "1GB");
  assert_int_equal(r->hugepage_limits[0]->limit, 1LL << 30);
  assert_string_equal(r->hugepage_limits[1]->page_size, "2MB");
  assert_int_equal(r->hugepage_limits[1]->limit, 8LL << 20);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_pod_free(p);
}

/* The downward API's limits.cpu/memory fall back to the pod-level limit before
 * the node's allocatable (defaultPodLimitsForDownwardAPI, 1.34+). */
static void test_pod_level_downward(void **state) {
  (void)state;
  nl_runtime_opts_t o = test_opts();
  o.allocatable = node_allocatable;
  env_of(&o,
         "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
         "  resources: {limits: {cpu: 1250m, memory: 64Mi}}\n"
         "  containers:\n  - name: c\n    image: b\n    env:\n"
         "    - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}\n"
         "    - {name: MEM_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}\n"
         "    - {name: EPH_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.ephemeral-storage, divisor: 1Gi}}}\n",
         (const char *const[]){"CPU_LIMIT", "1250", "MEM_LIMIT", "67108864", "EPH_LIMIT", "10",
                               NULL});
  /* only memory at pod level: cpu still the node's */
  env_of(&o,
         "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\nspec:\n"
         "  resources: {limits: {memory: 64Mi}}\n"
         "  containers:\n  - name: c\n    image: b\n"
         "    resources: {limits: {memory: 32Mi}}\n    env:\n"
         "    - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}\n"
         "    - {name: MEM_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}\n",
         (const char *const[]){"CPU_LIMIT", "1500", "MEM_LIMIT", "33554432", NULL});
}

/* seccompDefault: a container that names no seccomp profile, nor its pod,
 * gets the runtime's default; one that names Unconfined keeps it. */
static void test_seccomp_default(void **state) {
  (void)state;
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\nspec:\n"
      "  containers:\n  - {name: none, image: b}\n"
      "  - {name: unconfined, image: b, securityContext: {seccompProfile: {type: Unconfined}}}\n");
  static const int want_off[] = {RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined,
                                 RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined};
  static const int want_on[] = {RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault,
                                RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined};
  for (int on = 0; on < 2; on++) {
    nl_runtime_opts_t o = test_opts();
    o.seccomp_default = on;
    for (size_t i = 0; i < 2; i++) {
      nl_container_input_t in = {.container = &pod->spec.containers[i]};
      Runtime__V1__ContainerConfig *c = NULL;
      nl_err_t *err = NULL;
      assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), 0);
      assert_int_equal(c->linux->security_context->seccomp->profile_type,
                       on ? want_on[i] : want_off[i]);
      protobuf_c_message_free_unpacked(&c->base, NULL);
    }
  }
  nl_pod_free(pod);
}

static void test_backoff_key(void **state) {
  (void)state;
  nl_pod_t *p = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\n"
                              "spec:\n  containers: [{name: c, image: b}]\n");
  char *k = nl_runtime_backoff_key(p, &p->spec.containers[0]);
  char want[128];
  snprintf(want, sizeof want, "p_nsx_u_c_%x", nl_container_hash(&p->spec.containers[0]));
  assert_string_equal(k, want);
  free(k);
  nl_pod_free(p);
}

/* The managed /etc/hosts: upstream's managedHostsFileContent byte for byte. */
static void test_etc_hosts_content(void **state) {
  (void)state;
  nl_pod_t *p = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: edge, uid: u}\n"
      "spec:\n  hostname: h1\n  subdomain: sub\n"
      "  hostAliases:\n  - {ip: 10.1.2.3, hostnames: [foo.remote, bar.remote]}\n"
      "  - {ip: 127.0.0.1, hostnames: [foo.local]}\n"
      "  containers: [{name: c, image: b}]\n");
  nl_runtime_opts_t o = test_opts();
  o.cluster_domain = "cluster.local";
  char *domain = NULL;
  char *host = nl_runtime_pod_hostname(&o, p, &domain, NULL);
  char *aliases = nl_runtime_hosts_aliases(p);
  char *ips[] = {"10.88.0.7", "fd00::7"};
  char *got = nl_runtime_hosts_content(host, domain, ips, 2, aliases);
  assert_string_equal(got,
                      "# Kubernetes-managed hosts file.\n"
                      "127.0.0.1\tlocalhost\n"
                      "::1\tlocalhost ip6-localhost ip6-loopback\n"
                      "fe00::0\tip6-localnet\n"
                      "fe00::0\tip6-mcastprefix\n"
                      "fe00::1\tip6-allnodes\n"
                      "fe00::2\tip6-allrouters\n"
                      "10.88.0.7\th1.sub.edge.svc.cluster.local\th1\n"
                      "fd00::7\th1.sub.edge.svc.cluster.local\th1\n"
                      "\n# Entries added by HostAliases.\n"
                      "10.1.2.3\tfoo.remote\tbar.remote\n"
                      "127.0.0.1\tfoo.local\n");
  free(got);
  got = nl_runtime_node_hosts_content("127.0.0.1 localhost node1\n", 26, aliases);
  assert_string_equal(got, "# Kubernetes-managed hosts file (host network).\n"
                           "127.0.0.1 localhost node1\n"
                           "\n# Entries added by HostAliases.\n"
                           "10.1.2.3\tfoo.remote\tbar.remote\n"
                           "127.0.0.1\tfoo.local\n");
  free(got);
  free(aliases);
  free(host);
  free(domain);
  nl_pod_free(p);

  /* No subdomain, no aliases: "<ip>\t<pod name>" and nothing after. */
  p = pod_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: edge, uid: u}\n"
                    "spec:\n  containers: [{name: c, image: b}]\n");
  host = nl_runtime_pod_hostname(&o, p, &domain, NULL);
  aliases = nl_runtime_hosts_aliases(p);
  assert_string_equal(aliases, "");
  got = nl_runtime_hosts_content(host, domain, ips, 1, aliases);
  const char *tail = got + strlen(got) - strlen("fe00::2\tip6-allrouters\n10.88.0.7\tweb\n");
  assert_string_equal(tail, "fe00::2\tip6-allrouters\n10.88.0.7\tweb\n");
  free(got);
  free(aliases);
  free(host);
  free(domain);
  nl_pod_free(p);
}

static const Runtime__V1__Mount *find_mount(const Runtime__V1__ContainerConfig *c,
                                            const char *path) {
  for (size_t i = 0; i < c->n_mounts; i++)
    if (!strcmp(c->mounts[i]->container_path, path)) return c->mounts[i];
  return NULL;
}

/* The hosts file is mounted at /etc/hosts unless the container mounts a volume
 * there itself. */
static void test_etc_hosts_mount(void **state) {
  (void)state;
  nl_pod_t *p = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: edge, uid: u}\n"
      "spec:\n  volumes: [{name: h, hostPath: {path: /etc/hosts}}]\n"
      "  containers:\n  - {name: a, image: b}\n"
      "  - {name: own, image: b, volumeMounts: [{name: h, mountPath: /etc/hosts}]}\n");
  nl_runtime_opts_t o = test_opts();
  char *ips[] = {"10.88.0.7"};
  nl_container_input_t in = {.container = &p->spec.containers[0], .pod_ip = ips[0],
                             .pod_ips = ips, .n_pod_ips = 1,
                             .etc_hosts_host_path = "/var/lib/kubelet/pods/u/etc-hosts"};
  Runtime__V1__ContainerConfig *c = NULL;
  assert_true(nl_runtime_wants_etc_hosts(&p->spec.containers[0]));
  assert_int_equal(nl_runtime_build_container_config(&o, p, &in, &c, NULL), 0);
  const Runtime__V1__Mount *m = find_mount(c, "/etc/hosts");
  assert_non_null(m);
  assert_string_equal(m->host_path, "/var/lib/kubelet/pods/u/etc-hosts");
  assert_false(m->readonly);
  protobuf_c_message_free_unpacked(&c->base, NULL);

  in.container = &p->spec.containers[1];
  assert_false(nl_runtime_wants_etc_hosts(&p->spec.containers[1]));
  assert_int_equal(nl_runtime_build_container_config(&o, p, &in, &c, NULL), 0);
  m = find_mount(c, "/etc/hosts");
  assert_non_null(m);
  assert_string_equal(m->host_path, "/etc/hosts"); /* the container's own volume */
  assert_int_equal(c->n_mounts, 1);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  nl_pod_free(p);
}

/* A container's labels and annotations give back its pod and preStop hook
 * (restoreSpecsFromContainerLabels), for a pod no source knows any more. */
/* upstream verifyRunAsNonRoot: the container's settings over the pod's; an
 * explicit runAsUser decides, else the image's user (root when it has none). */
static void test_verify_non_root(void **state) {
  (void)state;
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: edge, uid: u-1}\n"
      "spec:\n  securityContext: {runAsNonRoot: true}\n  containers:\n"
      "  - {name: plain, image: busybox}\n"
      "  - {name: root, image: busybox, securityContext: {runAsUser: 0}}\n"
      "  - {name: user, image: busybox, securityContext: {runAsUser: 1000}}\n"
      "  - {name: allowed, image: busybox, securityContext: {runAsNonRoot: false}}\n");
  const nl_container_t *plain = &pod->spec.containers[0], *root = &pod->spec.containers[1];
  const nl_container_t *user = &pod->spec.containers[2], *allowed = &pod->spec.containers[3];
  int64_t zero = 0, uid = 1234, big = 1LL << 40;
  assert_true(nl_runtime_non_root_needs_image(pod, plain));
  assert_false(nl_runtime_non_root_needs_image(pod, root));
  assert_false(nl_runtime_non_root_needs_image(pod, allowed));
  char *m = nl_runtime_verify_non_root(pod, root, NULL, NULL);
  assert_string_equal(m, "container's runAsUser breaks non-root policy (pod: \"web_edge(u-1)\", "
                         "container: root)");
  free(m);
  assert_null(nl_runtime_verify_non_root(pod, user, &zero, NULL)); /* runAsUser decides */
  assert_null(nl_runtime_verify_non_root(pod, allowed, &zero, NULL));
  m = nl_runtime_verify_non_root(pod, plain, &zero, NULL);
  assert_string_equal(m, "container has runAsNonRoot and image will run as root (pod: "
                         "\"web_edge(u-1)\", container: plain)");
  free(m);
  assert_null(nl_runtime_verify_non_root(pod, plain, &uid, NULL));
  m = nl_runtime_verify_non_root(pod, plain, NULL, "nobody");
  assert_string_equal(m, "container has runAsNonRoot and image has non-numeric user (nobody), "
                         "cannot verify user is non-root (pod: \"web_edge(u-1)\", container: plain)");
  free(m);
  m = nl_runtime_verify_non_root(pod, plain, &big, NULL);
  assert_non_null(strstr(m, "image has an invalid user id (1099511627776)"));
  free(m);
  nl_pod_free(pod);
}

static void test_restore_pod(void **state) {
  (void)state;
  nl_pod_t *p = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: edge, uid: u-9}\n"
      "spec:\n  terminationGracePeriodSeconds: 7\n  containers:\n  - name: app\n    image: b\n"
      "    ports: [{name: http, containerPort: 8080}]\n"
      "    lifecycle: {preStop: {httpGet: {path: /quit, port: http}}}\n"
      "  - {name: plain, image: b}\n");
  nl_runtime_opts_t o = test_opts();
  Runtime__V1__ContainerConfig *cfg[2];
  for (int i = 0; i < 2; i++) {
    nl_container_input_t in = {.container = &p->spec.containers[i]};
    assert_int_equal(nl_runtime_build_container_config(&o, p, &in, &cfg[i], NULL), 0);
  }
  /* What ContainerStatus gives back: the config's labels and annotations. */
  Runtime__V1__ContainerStatus st = RUNTIME__V1__CONTAINER_STATUS__INIT;
  st.n_labels = cfg[0]->n_labels;
  st.labels = (Runtime__V1__ContainerStatus__LabelsEntry **)cfg[0]->labels;
  st.n_annotations = cfg[0]->n_annotations;
  st.annotations = (Runtime__V1__ContainerStatus__AnnotationsEntry **)cfg[0]->annotations;
  nl_pod_t *r = nl__restore_pod(&st);
  assert_non_null(r);
  assert_string_equal(r->metadata.name, "web");
  assert_string_equal(r->metadata.namespace_, "edge");
  assert_string_equal(r->metadata.uid, "u-9");
  assert_true(r->spec.termination_grace_period_seconds.set);
  assert_int_equal(r->spec.termination_grace_period_seconds.v, 7);
  assert_int_equal(r->spec.n_containers, 1);
  const nl_container_t *c = &r->spec.containers[0];
  assert_string_equal(c->name, "app");
  assert_non_null(c->lifecycle);
  assert_non_null(c->lifecycle->pre_stop);
  assert_non_null(c->lifecycle->pre_stop->http_get);
  assert_string_equal(c->lifecycle->pre_stop->http_get->path, "/quit");
  assert_int_equal(c->n_ports, 1); /* the named port resolves as before */
  assert_string_equal(c->ports[0].name, "http");
  assert_int_equal(c->ports[0].container_port, 8080);
  nl_pod_free(r);

  /* Without a preStop handler there is nothing to restore. */
  st.n_labels = cfg[1]->n_labels;
  st.labels = (Runtime__V1__ContainerStatus__LabelsEntry **)cfg[1]->labels;
  st.n_annotations = cfg[1]->n_annotations;
  st.annotations = (Runtime__V1__ContainerStatus__AnnotationsEntry **)cfg[1]->annotations;
  assert_null(nl__restore_pod(&st));
  for (int i = 0; i < 2; i++) protobuf_c_message_free_unpacked(&cfg[i]->base, NULL);
  nl_pod_free(p);
}

static bool rro_support(void *ctx, const char *handler) {
  assert_string_equal(handler, "");
  return *(bool *)ctx;
}

/* recursiveReadOnly as the CRI Mount's recursive_read_only: Enabled and
 * IfPossible when the default handler supports it, neither Disabled nor
 * unset; without support IfPossible is a plain read-only mount, and Enabled
 * fails the container's config with upstream's message as it is. */
static void test_recursive_read_only_mounts(void **state) {
  (void)state;
  nl_pod_t *pod = pod_from_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nsx, uid: u}\n"
      "spec:\n  volumes: [{name: mnt, emptyDir: {}}]\n"
      "  containers:\n  - name: c\n    image: b\n    volumeMounts:\n"
      "    - {name: mnt, mountPath: /rro, readOnly: true, recursiveReadOnly: Enabled}\n"
      "    - {name: mnt, mountPath: /maybe, readOnly: true, recursiveReadOnly: IfPossible}\n"
      "    - {name: mnt, mountPath: /no, readOnly: true, recursiveReadOnly: Disabled}\n"
      "    - {name: mnt, mountPath: /ro, readOnly: true}\n"
      "    - {name: mnt, mountPath: /rw}\n"
      "  - name: d\n    image: b\n    volumeMounts:\n"
      "    - {name: mnt, mountPath: /maybe, readOnly: true, recursiveReadOnly: IfPossible}\n");
  bool supported = true;
  nl_runtime_opts_t o = test_opts();
  o.supports_rro = rro_support;
  o.supports_rro_ctx = &supported;
  nl_container_input_t in = {.container = &pod->spec.containers[0]};
  Runtime__V1__ContainerConfig *c = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), 0);
  assert_int_equal(c->n_mounts, 5);
  static const bool rro[] = {true, true, false, false, false};
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(c->mounts[i]->recursive_read_only, rro[i]);
    assert_int_equal(c->mounts[i]->readonly, i < 4);
  }
  protobuf_c_message_free_unpacked(&c->base, NULL);

  supported = false;
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), -1);
  assert_string_equal(err->msg, "failed to resolve recursive read-only mode: volume \"mnt\" "
                                "requested recursive read-only mode, but it is not supported by "
                                "the runtime");
  nl_err_free(&err);
  in.container = &pod->spec.containers[1];
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), 0);
  assert_true(c->mounts[0]->readonly);
  assert_false(c->mounts[0]->recursive_read_only);
  protobuf_c_message_free_unpacked(&c->base, NULL);
  /* no source of support (standalone): not supported */
  o.supports_rro = NULL;
  in.container = &pod->spec.containers[0];
  assert_int_equal(nl_runtime_build_container_config(&o, pod, &in, &c, &err), -1);
  nl_err_free(&err);
  nl_pod_free(pod);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recursive_read_only_mounts),
      cmocka_unit_test(test_expand),        cmocka_unit_test(test_container_config),
      cmocka_unit_test(test_verify_non_root), cmocka_unit_test(test_resource_defaults),
      cmocka_unit_test(test_config_errors), cmocka_unit_test(test_qos),
      cmocka_unit_test(test_container_devices),
      cmocka_unit_test(test_pod_level_container_resources),
      cmocka_unit_test(test_pod_level_downward),
      cmocka_unit_test(test_seccomp_default), cmocka_unit_test(test_backoff_key),   cmocka_unit_test(test_etc_hosts_content),
      cmocka_unit_test(test_etc_hosts_mount), cmocka_unit_test(test_restore_pod),
      cmocka_unit_test(test_image_volume_mounts), cmocka_unit_test(test_image_volume_runtimes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
