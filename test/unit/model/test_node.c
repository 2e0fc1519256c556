/* The Node and Lease objects: registration body, status, conditions,
 * allocatable, reconcile, labels and taints, on golden JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent/model/node.h"

#define NOW INT64_C(1733238764123456789) /* 2024-12-03T15:12:44.123456789Z */
#define SEC INT64_C(1000000000)

static const char *const lk[] = {"node.kubernetes.io/edge", "site"};
static const char *const lv[] = {"true", "berlin"};
static const char *const rk[] = {"cpu", "memory"};
static const char *const rv[] = {"100m", "256Mi"};
static const char *const sk[] = {"cpu", "ephemeral-storage"};
static const char *const sv[] = {"150m", "1Gi"};
static const char *const ek[] = {"memory.available", "nodefs.available"};
static const char *const ev[] = {"100Mi", "10%"};

static nl_node_taint_t taints[1];

static nl_node_conf_t conf(void) {
  return (nl_node_conf_t){
      .name = "edge-1", .hostname = "edge-1", .node_ip = "10.0.0.5",
      .kubelet_version = "v1.36.3+nanolet.0.1.0", .label_keys = lk, .label_values = lv,
      .n_labels = 2, .taints = taints, .n_taints = 1, .register_schedulable = true,
      .controller_attach_detach = true, .port = 10250, .max_pods = 110, .max_images = 50};
}

static nl_node_facts_t facts(void) {
  return (nl_node_facts_t){
      .machine_id = "m1", .system_uuid = "u1", .boot_id = "b1", .kernel_version = "6.1.0-18-amd64",
      .os_image = "Debian GNU/Linux 12 (bookworm)", .cpus = 4,
      .memory_bytes = INT64_C(4125220864), /* 4028536 kB */
      .ephemeral_bytes = INT64_C(31526481920),
      .hugepages = {{2097152, 16777216}, {1073741824, 0}}, .n_hugepages = 2};
}

static const char *const names_a[] = {"localhost/nginx@sha256:aa", "localhost/nginx:1.25"};
static const char *const names_b[] = {"localhost/pause:3.9"};
static const nl_node_image_t images[] = {{names_a, 2, 70000000}, {names_b, 1, 300000}};

static nl_node_inputs_t ready_inputs(void) {
  return (nl_node_inputs_t){
      .now_ns = NOW, .runtime_sync_ns = NOW - SEC, .status_seen = true,
      .runtime_ready = {true, true, "", ""}, .network_ready = {true, true, "", ""},
      .runtime_version = "containerd://1.6.20", .images = images, .n_images = 2,
      .images_known = true};
}

/* The registration body; @ARCH@ stands for this build's GOARCH. */
static const char node_golden[] =
    "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"edge-1\",\"labels\":{\"beta.kubernetes."
    "io/arch\":\"@ARCH@\",\"beta.kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"@ARCH@\",\"kuberne"
    "tes.io/hostname\":\"edge-1\",\"kubernetes.io/os\":\"linux\",\"node.kubernetes.io/edge\":\"true\",\"s"
    "ite\":\"berlin\"},\"annotations\":{\"volumes.kubernetes.io/controller-managed-attach-detach\":\""
    "true\"}},\"spec\":{\"taints\":[{\"key\":\"dedicated\",\"value\":\"edge\",\"effect\":\"NoSchedule\"}]},\"st"
    "atus\":{\"capacity\":{\"cpu\":\"4\",\"ephemeral-storage\":\"30787580Ki\",\"hugepages-1Gi\":\"0\",\"hugep"
    "ages-2Mi\":\"16Mi\",\"memory\":\"4028536Ki\",\"pods\":\"110\"},\"allocatable\":{\"cpu\":\"4\",\"ephemeral-"
    "storage\":\"30787580Ki\",\"hugepages-1Gi\":\"0\",\"hugepages-2Mi\":\"16Mi\",\"memory\":\"4012152Ki\",\"p"
    "ods\":\"110\"},\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":"
    "\"2024-12-03T15:12:44Z\",\"lastTransitionTime\":\"2024-12-03T15:12:44Z\",\"reason\":\"KubeletHasS"
    "ufficientMemory\",\"message\":\"kubelet has sufficient memory available\"},{\"type\":\"DiskPress"
    "ure\",\"status\":\"False\",\"lastHeartbeatTime\":\"2024-12-03T15:12:44Z\",\"lastTransitionTime\":\"2"
    "024-12-03T15:12:44Z\",\"reason\":\"KubeletHasNoDiskPressure\",\"message\":\"kubelet has no disk "
    "pressure\"},{\"type\":\"PIDPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"2024-12-03T15:12:"
    "44Z\",\"lastTransitionTime\":\"2024-12-03T15:12:44Z\",\"reason\":\"KubeletHasSufficientPID\",\"mes"
    "sage\":\"kubelet has sufficient PID available\"},{\"type\":\"Ready\",\"status\":\"True\",\"lastHeart"
    "beatTime\":\"2024-12-03T15:12:44Z\",\"lastTransitionTime\":\"2024-12-03T15:12:44Z\",\"reason\":\"K"
    "ubeletReady\",\"message\":\"kubelet is posting ready status\"}],\"addresses\":[{\"type\":\"Interna"
    "lIP\",\"address\":\"10.0.0.5\"},{\"type\":\"Hostname\",\"address\":\"edge-1\"}],\"daemonEndpoints\":{\"k"
    "ubeletEndpoint\":{\"Port\":10250}},\"nodeInfo\":{\"machineID\":\"m1\",\"systemUUID\":\"u1\",\"bootID\":"
    "\"b1\",\"kernelVersion\":\"6.1.0-18-amd64\",\"osImage\":\"Debian GNU/Linux 12 (bookworm)\",\"conta"
    "inerRuntimeVersion\":\"containerd://1.6.20\",\"kubeletVersion\":\"v1.36.3+nanolet.0.1.0\",\"kube"
    "ProxyVersion\":\"\",\"operatingSystem\":\"linux\",\"architecture\":\"@ARCH@\"},\"images\":[{\"names\":["
    "\"localhost/nginx@sha256:aa\",\"localhost/nginx:1.25\"],\"sizeBytes\":70000000"
    "},{\"names\":[\"localhost/pause:3.9\"],\"sizeBytes\":300000}],\"declaredFeatures\":[\"InPlacePod"
    "LevelResourcesVerticalScaling\",\"InPlacePodVerticalScalingInitContainers\",\"RestartAllCon"
    "tainersOnContainerExits\"]}}";

static char *dump(const json_t *j) { return json_dumps(j, JSON_COMPACT); }

static void expect_json(json_t *j, const char *want) {
  char *got = dump(j);
  if (strcmp(got, want) != 0) fprintf(stderr, "got:  %s\nwant: %s\n", got, want);
  assert_string_equal(got, want);
  free(got);
}

static int setup(void **state) {
  assert_int_equal(nl_node_taint_parse("dedicated=edge:NoSchedule", &taints[0], NULL), 0);
  return 0;
}

static int teardown(void **state) {
  nl_node_taint_free(&taints[0]);
  return 0;
}

/* The ready message of a status computed from in. */
static char *ready_message(const nl_node_inputs_t *in, const char **status) {
  nl_node_conf_t c = conf();
  nl_node_facts_t f = facts();
  json_t *s = nl_node_status(&c, &f, in, NULL, NULL);
  json_t *ready = json_array_get(json_object_get(s, "conditions"), 3);
  assert_string_equal(json_string_value(json_object_get(ready, "type")), "Ready");
  static char st[8];
  snprintf(st, sizeof st, "%s", json_string_value(json_object_get(ready, "status")));
  *status = st;
  char *m = strdup(json_string_value(json_object_get(ready, "message")));
  json_decref(s);
  return m;
}

/* status.runtimeHandlers as upstream's setter: each handler the runtime's
 * Status lists, with both features (false ones too), so that the node e2e
 * specs' supportsRRO reads the default handler's; none listed (containerd
 * 1.6): no field. A change of support is a status change. */
static void test_runtime_handlers(void **state) {
  nl_node_conf_t c = conf();
  nl_node_facts_t f = facts();
  nl_node_inputs_t in = ready_inputs();
  json_t *none = nl_node_status(&c, &f, &in, NULL, NULL);
  assert_null(json_object_get(none, "runtimeHandlers"));
  const nl_node_runtime_handler_t hs[] = {{"", true, false}, {"runc", true, false}};
  in.handlers = hs;
  in.n_handlers = 2;
  json_t *s = nl_node_status(&c, &f, &in, NULL, NULL);
  expect_json(json_object_get(s, "runtimeHandlers"),
              "[{\"name\":\"\",\"features\":{\"recursiveReadOnlyMounts\":true,\"userNamespaces\":false}},"
              "{\"name\":\"runc\",\"features\":{\"recursiveReadOnlyMounts\":true,\"userNamespaces\":false}}]");
  assert_true(nl_node_status_changed(s, none));
  assert_false(nl_node_status_changed(s, s));
  const nl_node_runtime_handler_t off[] = {{"", false, false}, {"runc", true, false}};
  in.handlers = off;
  json_t *s2 = nl_node_status(&c, &f, &in, s, NULL);
  assert_true(nl_node_status_changed(s2, s));
  /* a runtime that lists none any more: the Node's go (null in the patch) */
  in.n_handlers = 0;
  json_t *s3 = nl_node_status(&c, &f, &in, s, NULL);
  assert_true(nl_node_status_changed(s3, s));
  json_t *patch = nl_node_status_patch(s3, s);
  assert_true(json_is_null(json_object_get(patch, "runtimeHandlers")));
  json_decref(patch);
  json_t *s4 = nl_node_status(&c, &f, &in, none, NULL);
  assert_null(json_object_get(s4, "runtimeHandlers"));
  assert_false(nl_node_status_changed(s4, none));
  json_decref(s4);
  json_decref(s3);
  json_decref(s2);
  json_decref(s);
  json_decref(none);
}

/* status.features as upstream's NodeFeatures setter: the runtime's Status
 * features when it sends them (containerd 2: supplementalGroupsPolicy true),
 * nothing when it does not (containerd 1.6); a change is a status change. */
static void test_runtime_features(void **state) {
  nl_node_conf_t c = conf();
  nl_node_facts_t f = facts();
  nl_node_inputs_t in = ready_inputs();
  json_t *none = nl_node_status(&c, &f, &in, NULL, NULL);
  assert_null(json_object_get(none, "features"));
  in.features = (nl_node_runtime_features_t){.known = true, .supplemental_groups_policy = true};
  json_t *yes = nl_node_status(&c, &f, &in, none, NULL);
  expect_json(json_object_get(yes, "features"), "{\"supplementalGroupsPolicy\":true}");
  assert_true(nl_node_status_changed(yes, none));
  in.features.supplemental_groups_policy = false;
  json_t *no = nl_node_status(&c, &f, &in, yes, NULL);
  expect_json(json_object_get(no, "features"), "{\"supplementalGroupsPolicy\":false}");
  assert_true(nl_node_status_changed(no, yes));
  json_t *patch = nl_node_status_patch(no, yes);
  expect_json(json_object_get(patch, "features"), "{\"supplementalGroupsPolicy\":false}");
  json_decref(patch);
  json_decref(no);
  json_decref(yes);
  json_decref(none);
}

static void test_initial_node(void **state) {
  nl_node_conf_t c = conf();
  nl_node_facts_t f = facts();
  nl_node_inputs_t in = ready_inputs();
  json_t *n = nl_node_initial(&c, &f, &in, NULL);
  assert_non_null(n);
  char want[sizeof node_golden + 64], *w = want;
  for (const char *g = node_golden; *g;)
    if (strncmp(g, "@ARCH@", 6) == 0) w += sprintf(w, "%s", nl_node_goarch()), g += 6;
    else *w++ = *g++;
  *w = '\0';
  expect_json(n, want);
  json_decref(n);
}

static void test_unschedulable(void **state) {
  nl_node_conf_t c = conf();
  c.register_schedulable = false;
  c.n_taints = 0;
  nl_node_facts_t f = facts();
  nl_node_inputs_t in = ready_inputs();
  json_t *n = nl_node_initial(&c, &f, &in, NULL);
  expect_json(json_object_get(n, "spec"),
              "{\"unschedulable\":true,\"taints\":[{\"key\":\"node.kubernetes.io/unschedulable\","
              "\"effect\":\"NoSchedule\"}]}");
  json_decref(n);
}

static void test_allocatable(void **state) {
  nl_node_conf_t c = conf();
  c.kube_reserved_keys = rk, c.kube_reserved_values = rv, c.n_kube_reserved = 2;
  c.system_reserved_keys = sk, c.system_reserved_values = sv, c.n_system_reserved = 2;
  c.eviction_keys = ek, c.eviction_values = ev, c.n_eviction = 2;
  nl_node_facts_t f = facts();
  nl_node_inputs_t in = ready_inputs();
  json_t *s = nl_node_status(&c, &f, &in, NULL, NULL);
  /* cpu 4 - 100m - 150m; memory 4028536Ki - 256Mi - 100Mi - 16Mi of huge pages;
   * ephemeral 31526481920 - 1Gi - int64(31526481920 * float32(0.1)). */
  expect_json(json_object_get(s, "allocatable"),
              "{\"cpu\":\"3750m\",\"ephemeral-storage\":\"27300091858\",\"hugepages-1Gi\":\"0\","
              "\"hugepages-2Mi\":\"16Mi\",\"memory\":\"3647608Ki\",\"pods\":\"110\"}");
  json_decref(s);
  /* Reservations beyond capacity floor at zero. */
  static const char *const big[] = {"64", "64Gi"};
  c.kube_reserved_values = big;
  s = nl_node_status(&c, &f, &in, NULL, NULL);
  assert_string_equal(json_string_value(json_object_get(json_object_get(s, "allocatable"), "cpu")), "0");
  assert_string_equal(json_string_value(json_object_get(json_object_get(s, "allocatable"), "memory")), "0");
  json_decref(s);
  /* A bad value names its field. */
  static const char *const bad[] = {"lots", "1Gi"};
  c.kube_reserved_values = bad;
  nl_err_t *err = NULL;
  assert_null(nl_node_status(&c, &f, &in, NULL, &err));
  assert_non_null(strstr(nl_err_msg(err), "kubeReserved: cpu: "));
  nl_err_free(&err);
}

static void test_ready_messages(void **state) {
  const char *st;
  nl_node_inputs_t in = ready_inputs();
  char *m = ready_message(&in, &st);
  assert_string_equal(st, "True");
  assert_string_equal(m, "kubelet is posting ready status");
  free(m);

  in = ready_inputs();
  in.network_ready = (nl_node_cri_cond_t){true, false, "NetworkPluginNotReady",
                                          "Network plugin returns error: cni plugin not initialized"};
  m = ready_message(&in, &st);
  assert_string_equal(st, "False");
  assert_string_equal(m, "container runtime network not ready: NetworkReady=false "
                         "reason:NetworkPluginNotReady message:Network plugin returns error: "
                         "cni plugin not initialized");
  free(m);

  in = ready_inputs();
  in.runtime_ready = (nl_node_cri_cond_t){true, false, "ContainerdNotReady", "starting"};
  in.runtime_sync_ns = 0;
  in.network_ready = (nl_node_cri_cond_t){0};
  m = ready_message(&in, &st);
  assert_string_equal(m, "[container runtime status check may not have completed yet, "
                         "container runtime not ready: RuntimeReady=false "
                         "reason:ContainerdNotReady message:starting, "
                         "container runtime network not ready: <nil>]");
  free(m);

  in = ready_inputs();
  in.runtime_sync_ns = NOW - 31 * SEC;
  in.pleg_error = "pleg was last seen active 3m0.5s ago; threshold is 3m0s";
  m = ready_message(&in, &st);
  assert_string_equal(m, "[container runtime is down, PLEG is not healthy: pleg was last seen "
                         "active 3m0.5s ago; threshold is 3m0s]");
  free(m);

  /* Before any Status answer only the first check speaks. */
  in = (nl_node_inputs_t){.now_ns = NOW};
  m = ready_message(&in, &st);
  assert_string_equal(m, "container runtime status check may not have completed yet");
  free(m);
}

static void test_conditions_and_change(void **state) {
  nl_node_conf_t c = conf();
  nl_node_facts_t f = facts();
  nl_node_inputs_t in = ready_inputs();
  json_t *s1 = nl_node_status(&c, &f, &in, NULL, NULL);
  assert_true(nl_node_status_changed(s1, NULL));
  /* Ten seconds later, same inputs: heartbeats move, transitions stay, no change. */
  in.now_ns += 10 * SEC;
  json_t *s2 = nl_node_status(&c, &f, &in, s1, NULL);
  json_t *r1 = json_array_get(json_object_get(s1, "conditions"), 3);
  json_t *r2 = json_array_get(json_object_get(s2, "conditions"), 3);
  assert_string_equal(json_string_value(json_object_get(r2, "lastHeartbeatTime")),
                      "2024-12-03T15:12:54Z");
  assert_string_equal(json_string_value(json_object_get(r2, "lastTransitionTime")),
                      json_string_value(json_object_get(r1, "lastTransitionTime")));
  assert_false(nl_node_status_changed(s2, s1));
  /* Others' conditions and addresses on the Node are no change of ours. */
  json_t *prev = json_deep_copy(s1);
  json_array_insert_new(json_object_get(prev, "conditions"), 0,
                        json_pack("{s:s,s:s}", "type", "NetworkUnavailable", "status", "False"));
  json_array_append_new(json_object_get(prev, "addresses"),
                        json_pack("{s:s,s:s}", "type", "ExternalIP", "address", "1.2.3.4"));
  assert_false(nl_node_status_changed(s2, prev));
  json_decref(prev);
  /* The runtime going away flips Ready with a new transition time. */
  in.now_ns += 10 * SEC;
  in.runtime_ready.status = false;
  json_t *s3 = nl_node_status(&c, &f, &in, s2, NULL);
  json_t *r3 = json_array_get(json_object_get(s3, "conditions"), 3);
  assert_string_equal(json_string_value(json_object_get(r3, "status")), "False");
  assert_string_equal(json_string_value(json_object_get(r3, "reason")), "KubeletNotReady");
  assert_string_equal(json_string_value(json_object_get(r3, "lastTransitionTime")),
                      "2024-12-03T15:13:04Z");
  assert_true(nl_node_status_changed(s3, s2));
  /* Graceful node shutdown joins the runtime's error, as upstream's aggregate. */
  in.shutting_down = true;
  json_t *s5 = nl_node_status(&c, &f, &in, s3, NULL);
  json_t *r5 = json_array_get(json_object_get(s5, "conditions"), 3);
  assert_string_equal(json_string_value(json_object_get(r5, "message")),
                      "[container runtime not ready: RuntimeReady=false reason: message:, "
                      "node is shutting down]");
  in.runtime_ready.status = true;
  json_decref(s5);
  s5 = nl_node_status(&c, &f, &in, s3, NULL);
  r5 = json_array_get(json_object_get(s5, "conditions"), 3);
  assert_string_equal(json_string_value(json_object_get(r5, "status")), "False");
  assert_string_equal(json_string_value(json_object_get(r5, "message")), "node is shutting down");
  json_decref(s5);
  /* An image more is a change; images capped at nodeStatusMaxImages. */
  in = ready_inputs();
  c.max_images = 1;
  json_t *s4 = nl_node_status(&c, &f, &in, s1, NULL);
  assert_int_equal(json_array_size(json_object_get(s4, "images")), 1);
  assert_true(nl_node_status_changed(s4, s1));
  /* An untagged image (no digest, no tag) has null names, as upstream: the
   * API server gives [] back as null, and the status read back is no change. */
  static const nl_node_image_t untagged[] = {{NULL, 0, 322406}};
  in.images = untagged;
  in.n_images = 1;
  json_t *s6 = nl_node_status(&c, &f, &in, s1, NULL);
  json_t *names = json_object_get(json_array_get(json_object_get(s6, "images"), 0), "names");
  assert_non_null(names);
  assert_true(json_is_null(names));
  json_t *back = json_loads("{\"images\":[{\"names\":null,\"sizeBytes\":322406}]}", 0, NULL);
  json_t *only = json_pack("{s:O}", "images", json_object_get(s6, "images"));
  assert_false(nl_node_status_changed(only, back));
  json_decref(only);
  json_decref(back);
  /* The Node as a protobuf watch brings it leaves out every empty field
   * ("names", nodeInfo's empty strings): no change, and nothing to patch. */
  back = json_deep_copy(s6);
  json_object_del(json_array_get(json_object_get(back, "images"), 0), "names");
  json_t *info = json_object_get(back, "nodeInfo");
  json_object_set_new(info, "systemUUID", json_string(""));
  json_t *mine = json_deep_copy(back);
  json_object_del(info, "systemUUID");
  json_object_set_new(json_object_get(mine, "nodeInfo"), "kubeProxyVersion", json_string(""));
  assert_false(nl_node_status_changed(mine, back));
  json_t *patch = nl_node_status_patch(mine, back);
  assert_int_equal(json_object_size(patch), 0);
  json_decref(patch);
  /* ... but a field that went empty is still a change. */
  json_object_set_new(json_object_get(mine, "nodeInfo"), "machineID", json_string(""));
  assert_true(nl_node_status_changed(mine, back));
  patch = nl_node_status_patch(mine, back);
  assert_non_null(json_object_get(patch, "nodeInfo"));
  json_decref(patch);
  json_decref(mine);
  json_decref(back);
  json_decref(s6);
  json_decref(s1);
  json_decref(s2);
  json_decref(s3);
  json_decref(s4);
}

static void test_reconcile(void **state) {
  nl_node_conf_t c = conf();
  nl_node_facts_t f = facts();
  nl_node_inputs_t in = ready_inputs();
  json_t *initial = nl_node_initial(&c, &f, &in, NULL);
  json_t *same = json_deep_copy(initial);
  assert_null(nl_node_reconcile(initial, same));
  json_t *old = json_loads("{\"metadata\":{\"name\":\"edge-1\",\"labels\":{\"kubernetes.io/hostname\":"
                           "\"old\",\"kubernetes.io/os\":\"linux\",\"site\":\"paris\"}}}", 0, NULL);
  json_t *p = nl_node_reconcile(initial, old);
  /* --node-labels are not reconciled (upstream neither): site stays paris. */
  char want[1024];
  snprintf(want, sizeof want,
           "{\"metadata\":{\"labels\":{\"kubernetes.io/hostname\":\"edge-1\",\"kubernetes.io/arch\":"
           "\"%s\",\"beta.kubernetes.io/os\":\"linux\",\"beta.kubernetes.io/arch\":\"%s\"},"
           "\"annotations\":{\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\"}}}",
           nl_node_goarch(), nl_node_goarch());
  expect_json(p, want);
  json_decref(p);
  /* Attach-detach turned off: the annotation is removed. */
  c.controller_attach_detach = false;
  json_t *initial2 = nl_node_initial(&c, &f, &in, NULL);
  p = nl_node_reconcile(initial2, same);
  expect_json(p, "{\"metadata\":{\"annotations\":{\"volumes.kubernetes.io/"
                 "controller-managed-attach-detach\":null}}}");
  json_decref(p);
  /* A huge page size the node no longer has (hugepages-3Mi, patched in by
   * hand) leaves capacity and allocatable; the sizes it has stay. */
  json_t *stale = json_deep_copy(initial);
  json_t *st = json_object_get(stale, "status");
  json_object_set_new(json_object_get(st, "capacity"), "hugepages-3Mi", json_string("9Mi"));
  json_object_set_new(json_object_get(st, "allocatable"), "hugepages-3Mi", json_string("9Mi"));
  p = nl_node_reconcile(initial, stale);
  expect_json(p, "{\"status\":{\"capacity\":{\"hugepages-3Mi\":null},"
                 "\"allocatable\":{\"hugepages-3Mi\":null}}}");
  json_decref(p);
  json_decref(stale);
  json_decref(initial);
  json_decref(initial2);
  json_decref(same);
  json_decref(old);
}

static void test_labels(void **state) {
  const char *ok_k[] = {"node.kubernetes.io/edge", "foo.kubelet.kubernetes.io/x", "example.com/a",
                        "kubernetes.io/hostname", "plain"};
  const char *ok_v[] = {"true", "", "b", "h", "v-1.2_3"};
  assert_int_equal(nl_node_labels_validate(ok_k, ok_v, 5, NULL), 0);
  nl_err_t *err = NULL;
  const char *bad_k[] = {"node-role.kubernetes.io/worker", "k8s.io/x", "ok"};
  const char *bad_v[] = {"", "y", "z"};
  assert_int_equal(nl_node_labels_validate(bad_k, bad_v, 3, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "unknown 'kubernetes.io' or 'k8s.io' labels specified "
                                          "with --node-labels: [node-role.kubernetes.io/worker k8s.io/x]"));
  const char *inv_k[] = {"Bad_Prefix.com/x", "a"};
  const char *inv_v[] = {"1", "-x"};
  assert_int_equal(nl_node_labels_validate(inv_k, inv_v, 2, &err), -1);
  assert_string_equal(nl_err_msg(err),
                      "invalid node labels: 'Bad_Prefix.com/x=1' - prefix must be a lowercase RFC "
                      "1123 subdomain; 'a=-x' - must start and end with an alphanumeric character");
  nl_err_free(&err);
}

static void test_taints(void **state) {
  nl_node_taint_t t;
  assert_int_equal(nl_node_taint_parse("edge:NoExecute", &t, NULL), 0);
  assert_string_equal(t.key, "edge");
  assert_string_equal(t.value, "");
  assert_string_equal(t.effect, "NoExecute");
  nl_node_taint_free(&t);
  nl_err_t *err = NULL;
  assert_int_equal(nl_node_taint_parse("a=b:Sometimes", &t, &err), -1);
  assert_string_equal(nl_err_msg(err), "invalid taint effect: Sometimes, unsupported taint effect");
  assert_int_equal(nl_node_taint_parse("a=b", &t, &err), -1);
  assert_string_equal(nl_err_msg(err), "invalid taint spec: a=b (want key=value:Effect)");
  assert_int_equal(nl_node_taint_parse("a=b=c:NoSchedule", &t, &err), -1);
  assert_int_equal(nl_node_taint_parse("=b:NoSchedule", &t, &err), -1);
  nl_err_free(&err);
}

static void test_lease(void **state) {
  json_t *l = nl_node_lease("edge-1", "uid-1", 40, NOW, NULL);
  expect_json(l, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{"
                 "\"name\":\"edge-1\",\"namespace\":\"kube-node-lease\",\"ownerReferences\":[{"
                 "\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"edge-1\",\"uid\":\"uid-1\"}]},"
                 "\"spec\":{\"holderIdentity\":\"edge-1\",\"leaseDurationSeconds\":40,"
                 "\"renewTime\":\"2024-12-03T15:12:44.123456Z\"}}");
  /* An update keeps the server's resourceVersion and owner references. */
  json_t *base = json_loads("{\"metadata\":{\"name\":\"edge-1\",\"resourceVersion\":\"77\","
                            "\"ownerReferences\":[{\"uid\":\"old\"}]},\"spec\":{\"holderIdentity\":"
                            "\"edge-1\",\"renewTime\":\"x\"}}", 0, NULL);
  json_t *u = nl_node_lease("edge-1", "uid-2", 40, NOW + SEC, base);
  expect_json(u, "{\"metadata\":{\"name\":\"edge-1\",\"resourceVersion\":\"77\",\"ownerReferences\":"
                 "[{\"uid\":\"old\"}]},\"spec\":{\"holderIdentity\":\"edge-1\",\"renewTime\":"
                 "\"2024-12-03T15:12:45.123456Z\",\"leaseDurationSeconds\":40}}");
  json_decref(l);
  json_decref(u);
  json_decref(base);
}

static void test_lease_renewal(void **state) {
  /* Only the resourceVersion (the precondition) and what changes. */
  json_t *base = json_loads("{\"metadata\":{\"name\":\"edge-1\",\"resourceVersion\":\"77\","
                            "\"uid\":\"l1\","
                            "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\","
                            "\"name\":\"edge-1\",\"uid\":\"uid-1\"}]},\"spec\":{\"holderIdentity\":"
                            "\"edge-1\",\"leaseDurationSeconds\":40,\"renewTime\":\"x\"}}", 0, NULL);
  json_t *p = nl_node_lease_renewal("edge-1", "uid-1", 40, NOW, base);
  expect_json(p, "{\"metadata\":{\"resourceVersion\":\"77\"},\"spec\":{\"renewTime\":"
                 "\"2024-12-03T15:12:44.123456Z\"}}");
  json_decref(p);
  /* managedFields as the create left them: reset, so that the answers carry
   * none. */
  json_t *created = json_loads(
      "[{\"manager\":\"nanolet\",\"operation\":\"Update\",\"fieldsV1\":{\"f:metadata\":{"
      "\"f:ownerReferences\":{}},\"f:spec\":{\"f:holderIdentity\":{},\"f:renewTime\":{}}}}]",
      0, NULL);
  json_object_set_new(json_object_get(base, "metadata"), "managedFields", created);
  p = nl_node_lease_renewal("edge-1", "uid-1", 40, NOW, base);
  expect_json(p, "{\"metadata\":{\"resourceVersion\":\"77\",\"managedFields\":[{}]},"
                 "\"spec\":{\"renewTime\":\"2024-12-03T15:12:44.123456Z\"}}");
  json_decref(p);
  /* What the reset leaves (none, or an empty list): no reset again. */
  json_object_set_new(json_object_get(base, "metadata"), "managedFields", json_array());
  p = nl_node_lease_renewal("edge-1", "uid-1", 40, NOW, base);
  expect_json(p, "{\"metadata\":{\"resourceVersion\":\"77\"},\"spec\":{\"renewTime\":"
                 "\"2024-12-03T15:12:44.123456Z\"}}");
  json_decref(p);
  /* Another holder, another duration, no owner: each goes with the renewal. */
  json_t *other = json_loads("{\"metadata\":{\"resourceVersion\":\"78\"},\"spec\":{"
                             "\"holderIdentity\":\"x\",\"leaseDurationSeconds\":10}}", 0, NULL);
  p = nl_node_lease_renewal("edge-1", "uid-1", 40, NOW, other);
  expect_json(p, "{\"metadata\":{\"resourceVersion\":\"78\",\"ownerReferences\":[{\"apiVersion\":"
                 "\"v1\",\"kind\":\"Node\",\"name\":\"edge-1\",\"uid\":\"uid-1\"}]},\"spec\":{"
                 "\"holderIdentity\":\"edge-1\",\"leaseDurationSeconds\":40,\"renewTime\":"
                 "\"2024-12-03T15:12:44.123456Z\"}}");
  json_decref(p);
  json_decref(other);
  json_decref(base);
  /* Only renewTime moves: a JSON patch that tests holder and duration first. */
  p = nl_node_lease_renewal_tested("edge-1", 40, NOW);
  expect_json(p, "[{\"op\":\"test\",\"path\":\"/spec/holderIdentity\",\"value\":\"edge-1\"},"
                 "{\"op\":\"test\",\"path\":\"/spec/leaseDurationSeconds\",\"value\":40},"
                 "{\"op\":\"replace\",\"path\":\"/spec/renewTime\","
                 "\"value\":\"2024-12-03T15:12:44.123456Z\"}]");
  json_decref(p);
}

static void test_status_patch(void **state) {
  json_t *prev = json_loads("{\"capacity\":{\"cpu\":\"2\"},\"images\":[{\"names\":[\"a\"]}],"
                            "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}", 0, NULL);
  json_t *now = json_loads("{\"capacity\":{\"cpu\":\"2\"},\"images\":[{\"names\":[\"a\"]}],"
                           "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}],"
                           "\"nodeInfo\":{\"bootID\":\"b\"}}", 0, NULL);
  json_t *p = nl_node_status_patch(now, prev);
  expect_json(p, "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}],"
                 "\"nodeInfo\":{\"bootID\":\"b\"}}");
  json_decref(p);
  p = nl_node_status_patch(now, NULL); /* nothing known: all of it */
  assert_true(json_equal(p, now));
  json_decref(p);
  /* A report: of each condition its heartbeat (and type) alone; a field gone
   * is deleted (null); a new condition goes whole; an unchanged one not. */
  json_t *was = json_loads(
      "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\","
      "\"lastHeartbeatTime\":\"t1\",\"lastTransitionTime\":\"t0\"},{\"type\":\"DiskPressure\","
      "\"status\":\"False\",\"message\":\"m\",\"lastHeartbeatTime\":\"t1\"},{\"type\":\"Gone\","
      "\"status\":\"True\"},{\"type\":\"Same\",\"status\":\"True\"}]}", 0, NULL);
  json_t *is = json_loads(
      "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\","
      "\"lastHeartbeatTime\":\"t2\",\"lastTransitionTime\":\"t0\"},{\"type\":\"DiskPressure\","
      "\"status\":\"False\",\"lastHeartbeatTime\":\"t2\"},{\"type\":\"PIDPressure\",\"status\":"
      "\"False\"},{\"type\":\"Same\",\"status\":\"True\"}]}", 0, NULL);
  p = nl_node_status_patch(is, was);
  expect_json(p, "{\"conditions\":[{\"type\":\"Ready\",\"lastHeartbeatTime\":\"t2\"},"
                 "{\"type\":\"DiskPressure\",\"lastHeartbeatTime\":\"t2\",\"message\":null},"
                 "{\"type\":\"PIDPressure\",\"status\":\"False\"}]}");
  json_decref(p);
  json_decref(was);
  json_decref(is);
  json_decref(prev);
  json_decref(now);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runtime_handlers),
      cmocka_unit_test(test_runtime_features),
      cmocka_unit_test(test_initial_node),      cmocka_unit_test(test_unschedulable),
      cmocka_unit_test(test_allocatable),       cmocka_unit_test(test_ready_messages),
      cmocka_unit_test(test_conditions_and_change), cmocka_unit_test(test_reconcile),
      cmocka_unit_test(test_labels),            cmocka_unit_test(test_taints),
      cmocka_unit_test(test_lease),             cmocka_unit_test(test_lease_renewal),
      cmocka_unit_test(test_status_patch),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
