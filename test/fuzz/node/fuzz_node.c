/* libFuzzer target over what the node manager does with the apiserver's JSON
 * (docs/FUZZING.md, "Node and Lease"): the Node it reads back each status round
 * (the previous status the conditions keep their transition times from, the
 * change test, the reconcile of an existing Node) and the Lease it updates from
 * (nl_node_lease with a hostile base). Input: the Node's JSON, then optionally
 * a NUL byte and the Lease's JSON. Nothing may crash, leak or trip a sanitizer;
 * every result must be a JSON object. */
#include <assert.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/node.h"
#include "reactor/error.h"

static const char *const label_keys[] = {"site"}, *const label_values[] = {"lab"};
static const char *const mem_keys[] = {"memory"}, *const mem_values[] = {"100Mi"};
static const char *const ev_keys[] = {"memory.available"}, *const ev_values[] = {"5%"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *nul = memchr(data, 0, size);
  size_t node_len = nul ? (size_t)(nul - (const char *)data) : size;
  /* As the manager reads responses: json_loads without JSON_DECODE_ANY (an
   * object or an array); a Lease is kept only when it is an object. */
  json_t *existing = json_loadb((const char *)data, node_len, 0, NULL);
  json_t *lease_base = nul ? json_loadb(nul + 1, size - node_len - 1, 0, NULL) : NULL;
  if (lease_base && !json_is_object(lease_base)) {
    json_decref(lease_base);
    lease_base = NULL;
  }

  nl_node_taint_t taint = {.key = "edge", .value = "gw", .effect = "NoSchedule"};
  nl_node_conf_t conf = {.name = "n1", .hostname = "n1", .node_ip = "10.0.0.2",
                         .kubelet_version = NL_NODE_KUBE_VERSION "+nanolet.fuzz",
                         .label_keys = label_keys, .label_values = label_values, .n_labels = 1,
                         .taints = &taint, .n_taints = 1, .register_schedulable = true,
                         .port = 10250, .max_pods = 110, .max_images = 50,
                         .kube_reserved_keys = mem_keys, .kube_reserved_values = mem_values,
                         .n_kube_reserved = 1, .eviction_keys = ev_keys,
                         .eviction_values = ev_values, .n_eviction = 1};
  nl_node_facts_t facts = {.machine_id = "m", .system_uuid = "", .boot_id = "b",
                           .kernel_version = "6.1", .os_image = "Debian", .cpus = 2,
                           .memory_bytes = 1 << 30, .ephemeral_bytes = 1 << 30};
  nl_node_inputs_t in = {.now_ns = 1700000000000000000, .runtime_sync_ns = 1700000000000000000,
                         .status_seen = true,
                         .runtime_ready = {.present = true, .status = true},
                         .network_ready = {.present = true, .status = true},
                         .runtime_version = "containerd://1.6.20", .images_known = true};
  nl_err_t *err = NULL;

  const json_t *prev = json_object_get(existing, "status");
  json_t *status = nl_node_status(&conf, &facts, &in, prev, &err);
  assert(status && json_is_object(status));
  (void)nl_node_status_changed(status, prev);
  (void)nl_node_status_changed(status, existing);
  json_t *initial = nl_node_initial(&conf, &facts, &in, &err);
  assert(initial && json_is_object(initial));
  if (existing) {
    json_t *patch = nl_node_reconcile(initial, existing);
    assert(!patch || json_is_object(patch));
    json_decref(patch);
  }
  const char *uid = json_string_value(json_object_get(json_object_get(existing, "metadata"), "uid"));
  json_t *lease = nl_node_lease("n1", uid, 40, in.now_ns, lease_base);
  assert(lease && json_is_object(lease));
  char *text = json_dumps(lease, JSON_COMPACT);
  free(text);

  json_decref(lease);
  json_decref(initial);
  json_decref(status);
  json_decref(lease_base);
  json_decref(existing);
  nl_err_free(&err);
  return 0;
}
