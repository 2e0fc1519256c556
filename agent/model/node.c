/* The Node and Lease objects (see node.h). Keys are inserted in Go's field
 * order, resource maps in sorted order, so the JSON reads as upstream's. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/model/node.h"
#include "agent/model/quantity.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

void nl_node_facts_free(nl_node_facts_t *f) {
  free(f->machine_id);
  free(f->system_uuid);
  free(f->boot_id);
  free(f->kernel_version);
  free(f->os_image);
  *f = (nl_node_facts_t){0};
}

const char *nl_node_goarch(void) {
#if defined(__x86_64__)
  return "amd64";
#elif defined(__aarch64__)
  return "arm64";
#elif defined(__arm__)
  return "arm";
#elif defined(__i386__)
  return "386";
#elif defined(__riscv) && __riscv_xlen == 64
  return "riscv64";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return "ppc64le";
#elif defined(__s390x__)
  return "s390x";
#else
  return "unknown";
#endif
}

char *nl_node_time(int64_t ns, bool micro, char *buf, size_t len) {
  time_t t = (time_t)(ns / 1000000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
  if (micro) snprintf(buf + n, len - n, ".%06dZ", (int)(ns % 1000000000 / 1000));
  else snprintf(buf + n, len - n, "Z");
  return buf;
}

static json_t *jtime(int64_t ns) {
  char b[40];
  return json_string(nl_node_time(ns, false, b, sizeof b));
}

static const char *jstr(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

/* ---- capacity and allocatable ---- */

typedef struct resource {
  char name[32];
  int64_t cap, alloc; /* cpu in millicores */
  nl_quantity_format_t fmt;
} resource_t;

static int by_name(const void *a, const void *b) {
  return strcmp(((const resource_t *)a)->name, ((const resource_t *)b)->name);
}

static json_t *quantity(const resource_t *r, int64_t v) {
  nl_quantity_t q = {v, strcmp(r->name, "cpu") == 0 ? -3 : 0, r->fmt};
  char s[NL_QUANTITY_STRLEN];
  return json_string(nl_quantity_format(&q, s));
}

static int resources(const nl_node_conf_t *c, const nl_node_facts_t *f,
                     const nl_node_inputs_t *in, json_t *status, nl_err_t **err) {
  resource_t r[8];
  size_t n = 0;
  r[n++] = (resource_t){"cpu", f->cpus * 1000, 0, NL_QUANTITY_DECIMAL_SI};
  r[n++] = (resource_t){"memory", f->memory_bytes, 0, NL_QUANTITY_BINARY_SI};
  r[n++] = (resource_t){"pods", c->max_pods, 0, NL_QUANTITY_DECIMAL_SI};
  if (f->ephemeral_bytes >= 0)
    r[n++] = (resource_t){"ephemeral-storage", f->ephemeral_bytes, 0, NL_QUANTITY_BINARY_SI};
  int64_t hugepages = 0;
  for (size_t i = 0; i < f->n_hugepages && n < 8; i++) {
    nl_quantity_t q = {f->hugepages[i].page_bytes, 0, NL_QUANTITY_BINARY_SI};
    char s[NL_QUANTITY_STRLEN];
    r[n] = (resource_t){"", f->hugepages[i].total_bytes, 0, NL_QUANTITY_BINARY_SI};
    snprintf(r[n++].name, sizeof r->name, "hugepages-%s", nl_quantity_format(&q, s));
    hugepages += f->hugepages[i].total_bytes;
  }
  for (size_t i = 0; i < n; i++) {
    int64_t reserved;
    if (nl_node_reserved(c, r[i].name, r[i].cap, &reserved, err) < 0) return -1;
    /* Memory backing huge pages is not allocatable as memory. */
    if (strcmp(r[i].name, "memory") == 0) reserved += hugepages;
    r[i].alloc = r[i].cap - reserved < 0 ? 0 : r[i].cap - reserved;
  }
  qsort(r, n, sizeof *r, by_name);
  json_t *cap = json_object(), *alloc = json_object();
  for (size_t i = 0; i < n; i++) {
    json_object_set_new(cap, r[i].name, quantity(&r[i], r[i].cap));
    json_object_set_new(alloc, r[i].name, quantity(&r[i], r[i].alloc));
  }
  /* upstream's MachineInfo setter: the device manager's GetCapacity, devices
   * in capacity and healthy ones in allocatable, with no reservation */
  for (size_t i = 0; in && i < in->n_extended; i++) {
    resource_t x = {"", 0, 0, NL_QUANTITY_DECIMAL_SI};
    json_object_set_new(cap, in->extended[i].name, quantity(&x, in->extended[i].capacity));
    json_object_set_new(alloc, in->extended[i].name, quantity(&x, in->extended[i].allocatable));
  }
  json_object_set_new(status, "capacity", cap);
  json_object_set_new(status, "allocatable", alloc);
  return 0;
}

/* ---- conditions ---- */

static const json_t *find_condition(const json_t *prev, const char *type) {
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(prev, "conditions"), i, c) {
    if (strcmp(jstr(c, "type"), type) == 0) return c;
  }
  return NULL;
}

static json_t *condition(const json_t *prev, const char *type, bool status, const char *reason,
                         const char *message, int64_t now_ns) {
  const json_t *old = find_condition(prev, type);
  const char *st = status ? "True" : "False";
  bool same = old && strcmp(jstr(old, "status"), st) == 0;
  json_t *c = json_object();
  json_object_set_new(c, "type", json_string(type));
  json_object_set_new(c, "status", json_string(st));
  json_object_set_new(c, "lastHeartbeatTime", jtime(now_ns));
  json_t *transition = same ? json_object_get(old, "lastTransitionTime") : NULL;
  json_object_set_new(c, "lastTransitionTime", transition ? json_incref(transition) : jtime(now_ns));
  json_object_set_new(c, "reason", json_string(reason));
  json_object_set_new(c, "message", json_string(message));
  return c;
}

/* "RuntimeReady=false reason:X message:Y" (kubecontainer.RuntimeCondition). */
static void cri_cond(nl_buf_t *b, const char *prefix, const char *type, const nl_node_cri_cond_t *c) {
  if (!c->present) {
    nl_buf_printf(b, "%s: <nil>", prefix);
    return;
  }
  nl_buf_printf(b, "%s: %s=%s reason:%s message:%s", prefix, type, c->status ? "true" : "false",
                c->reason ? c->reason : "", c->message ? c->message : "");
}

#define RUNTIME_SYNC_THRESHOLD_NS (INT64_C(30) * 1000000000) /* maxWaitForContainerRuntime */

/* The runtime, network and capacity errors, joined as utilerrors.Aggregate:
 * one message alone, several as "[a, b]". */
static char *ready_errors(const nl_node_inputs_t *in, const json_t *capacity) {
  nl_buf_t errs[7];
  size_t n = 0;
  memset(errs, 0, sizeof errs);
  if (!in->runtime_sync_ns)
    nl_buf_puts(&errs[n++], "container runtime status check may not have completed yet");
  else if (in->runtime_sync_ns + RUNTIME_SYNC_THRESHOLD_NS <= in->now_ns)
    nl_buf_puts(&errs[n++], "container runtime is down");
  if (in->pleg_error) nl_buf_printf(&errs[n++], "PLEG is not healthy: %s", in->pleg_error);
  if (in->status_seen && !(in->runtime_ready.present && in->runtime_ready.status))
    cri_cond(&errs[n++], "container runtime not ready", "RuntimeReady", &in->runtime_ready);
  if (in->status_seen && !(in->network_ready.present && in->network_ready.status))
    cri_cond(&errs[n++], "container runtime network not ready", "NetworkReady", &in->network_ready);
  /* upstream's nodeShutdownManagerErrors, before the capacity check */
  if (in->shutting_down) nl_buf_puts(&errs[n++], "node is shutting down");
  static const char *const required[] = {"cpu", "memory", "pods", "ephemeral-storage"};
  nl_buf_t missing = NL_BUF_INIT;
  for (size_t i = 0; i < 4; i++)
    if (!json_object_get(capacity, required[i]))
      nl_buf_printf(&missing, "%s%s", missing.len ? ", " : "", required[i]);
  if (missing.len) nl_buf_printf(&errs[n++], "missing node capacity for resources: %s", missing.data);
  nl_buf_free(&missing);
  if (n == 0) return NULL;
  nl_buf_t out = NL_BUF_INIT;
  if (n > 1) nl_buf_puts(&out, "[");
  for (size_t i = 0; i < n; i++) {
    nl_buf_printf(&out, "%s%s", i ? ", " : "", errs[i].data);
    nl_buf_free(&errs[i]);
  }
  if (n > 1) nl_buf_puts(&out, "]");
  return nl_buf_steal(&out);
}

static json_t *conditions(const nl_node_inputs_t *in, const json_t *capacity, const json_t *prev) {
  /* The eviction manager's pressure, with upstream's reasons and messages.
   * Ready stays last, as upstream keeps it. */
  json_t *a = json_array();
  json_array_append_new(a, in->memory_pressure
      ? condition(prev, "MemoryPressure", true, "KubeletHasInsufficientMemory",
                  "kubelet has insufficient memory available", in->now_ns)
      : condition(prev, "MemoryPressure", false, "KubeletHasSufficientMemory",
                  "kubelet has sufficient memory available", in->now_ns));
  json_array_append_new(a, in->disk_pressure
      ? condition(prev, "DiskPressure", true, "KubeletHasDiskPressure", "kubelet has disk pressure",
                  in->now_ns)
      : condition(prev, "DiskPressure", false, "KubeletHasNoDiskPressure",
                  "kubelet has no disk pressure", in->now_ns));
  json_array_append_new(a, in->pid_pressure
      ? condition(prev, "PIDPressure", true, "KubeletHasInsufficientPID",
                  "kubelet has insufficient PID available", in->now_ns)
      : condition(prev, "PIDPressure", false, "KubeletHasSufficientPID",
                  "kubelet has sufficient PID available", in->now_ns));
  char *errs = ready_errors(in, capacity);
  json_array_append_new(a, errs ? condition(prev, "Ready", false, "KubeletNotReady", errs, in->now_ns)
                                : condition(prev, "Ready", true, "KubeletReady",
                                            "kubelet is posting ready status", in->now_ns));
  free(errs);
  return a;
}

/* ---- the status ---- */

static void address(json_t *a, const char *type, const char *addr) {
  json_t *o = json_object();
  json_object_set_new(o, "type", json_string(type));
  json_object_set_new(o, "address", json_string(addr));
  json_array_append_new(a, o);
}

#define MAX_NAMES_PER_IMAGE 5 /* upstream MaxNamesPerImageInNodeStatus */

static json_t *images(const nl_node_conf_t *c, const nl_node_inputs_t *in) {
  json_t *a = json_array();
  size_t n = in->n_images;
  if (c->max_images >= 0 && (size_t)c->max_images < n) n = (size_t)c->max_images;
  for (size_t i = 0; i < n; i++) {
    const nl_node_image_t *im = &in->images[i];
    /* An image with neither digest nor tag has null names, as upstream's nil
     * slice: the API server returns null for [], and an image list holding []
     * never equalled the Node read back, so the status was patched every
     * round, image list and all (uplink_impaired). */
    json_t *o = json_object(), *names = im->n_names ? json_array() : json_null();
    for (size_t j = 0; j < im->n_names && j < MAX_NAMES_PER_IMAGE; j++)
      json_array_append_new(names, json_string(im->names[j]));
    json_object_set_new(o, "names", names);
    json_object_set_new(o, "sizeBytes", json_integer(im->size_bytes));
    json_array_append_new(a, o);
  }
  return a;
}

/* upstream's RuntimeHandlers setter: every handler with both features,
 * false included; none (containerd 1.6 lists none) leaves it out. */
static json_t *runtime_handlers(const nl_node_inputs_t *in) {
  json_t *a = json_array();
  for (size_t i = 0; i < in->n_handlers; i++) {
    const nl_node_runtime_handler_t *h = &in->handlers[i];
    json_array_append_new(a, json_pack("{s:s,s:{s:b,s:b}}", "name", h->name, "features",
                                       "recursiveReadOnlyMounts", h->recursive_read_only_mounts,
                                       "userNamespaces", h->user_namespaces));
  }
  return a;
}

json_t *nl_node_status(const nl_node_conf_t *c, const nl_node_facts_t *f,
                       const nl_node_inputs_t *in, const json_t *prev, nl_err_t **err) {
  json_t *s = json_object();
  if (resources(c, f, in, s, err) < 0) {
    json_decref(s);
    return NULL;
  }
  json_object_set_new(s, "conditions", conditions(in, json_object_get(s, "capacity"), prev));
  json_t *addrs = json_array();
  if (c->node_ip && *c->node_ip) address(addrs, "InternalIP", c->node_ip);
  address(addrs, "Hostname", c->hostname);
  json_object_set_new(s, "addresses", addrs);
  json_object_set_new(s, "daemonEndpoints",
                      json_pack("{s:{s:i}}", "kubeletEndpoint", "Port", (int)c->port));
  char runtime[256];
  if (in->runtime_version) snprintf(runtime, sizeof runtime, "%s", in->runtime_version);
  else snprintf(runtime, sizeof runtime, "%s://Unknown", in->runtime_type ? in->runtime_type : "");
  json_object_set_new(s, "nodeInfo",
                      json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "machineID",
                                f->machine_id ? f->machine_id : "", "systemUUID",
                                f->system_uuid ? f->system_uuid : "", "bootID",
                                f->boot_id ? f->boot_id : "", "kernelVersion",
                                f->kernel_version ? f->kernel_version : "", "osImage",
                                f->os_image ? f->os_image : "", "containerRuntimeVersion", runtime,
                                "kubeletVersion", c->kubelet_version, "kubeProxyVersion", "",
                                "operatingSystem", "linux", "architecture", nl_node_goarch()));
  if (in->images_known) json_object_set_new(s, "images", images(c, in));
  if (in->n_handlers) json_object_set_new(s, "runtimeHandlers", runtime_handlers(in));
  else if (json_array_size(json_object_get(prev, "runtimeHandlers")))
    json_object_set_new(s, "runtimeHandlers", json_null()); /* the runtime lists none now */
  /* upstream's NodeFeatures setter: what the runtime's Status says, or
   * nothing (the Node keeps what it had) when it says nothing. Admission
   * rejects a pod with supplementalGroupsPolicy Strict unless it is true. */
  if (in->features.known)
    json_object_set_new(s, "features", json_pack("{s:b}", "supplementalGroupsPolicy",
                                                 in->features.supplemental_groups_policy));
  /* NodeDeclaredFeatures (beta, on in 1.36): of upstream's features whose
   * gates are on, those nanolet has, sorted as upstream lists them. The
   * scheduler places a pod that needs one (a RestartAllContainers rule) only
   * on a node that declares it, and the API server accepts a resize of
   * spec.resources, or of a non-sidecar init container's resources, only for
   * a pod on a node that declares InPlacePodLevelResourcesVerticalScaling, or
   * InPlacePodVerticalScalingInitContainers (RESIZE.md). Not declared:
   * ExtendWebSocketsToKubelet (the kubelet server speaks SPDY). */
  json_object_set_new(s, "declaredFeatures",
                      json_pack("[s, s, s]", "InPlacePodLevelResourcesVerticalScaling",
                                "InPlacePodVerticalScalingInitContainers",
                                "RestartAllContainersOnContainerExits"));
  return s;
}

json_t *nl_node_initial(const nl_node_conf_t *c, const nl_node_facts_t *f,
                        const nl_node_inputs_t *in, nl_err_t **err) {
  json_t *status = nl_node_status(c, f, in, NULL, err);
  if (!status) return NULL;
  json_t *labels = json_object();
  const char *os = "linux", *arch = nl_node_goarch();
  json_object_set_new(labels, "beta.kubernetes.io/arch", json_string(arch));
  json_object_set_new(labels, "beta.kubernetes.io/os", json_string(os));
  json_object_set_new(labels, "kubernetes.io/arch", json_string(arch));
  json_object_set_new(labels, "kubernetes.io/hostname", json_string(c->hostname));
  json_object_set_new(labels, "kubernetes.io/os", json_string(os));
  for (size_t i = 0; i < c->n_labels; i++)
    json_object_set_new(labels, c->label_keys[i], json_string(c->label_values[i]));
  json_t *meta = json_pack("{s:s,s:o}", "name", c->name, "labels", labels);
  if (c->controller_attach_detach)
    json_object_set_new(meta, "annotations",
                        json_pack("{s:s}", "volumes.kubernetes.io/controller-managed-attach-detach",
                                  "true"));
  json_t *spec = json_object(), *taints = json_array();
  bool unschedulable_taint = false;
  for (size_t i = 0; i < c->n_taints; i++) {
    const nl_node_taint_t *t = &c->taints[i];
    json_t *o = json_pack("{s:s}", "key", t->key);
    if (*t->value) json_object_set_new(o, "value", json_string(t->value));
    json_object_set_new(o, "effect", json_string(t->effect));
    json_array_append_new(taints, o);
    unschedulable_taint |= strcmp(t->key, "node.kubernetes.io/unschedulable") == 0 &&
                           strcmp(t->effect, "NoSchedule") == 0;
  }
  if (!c->register_schedulable) {
    json_object_set_new(spec, "unschedulable", json_true());
    /* Tainted at creation so that no pod lands before the controller acts. */
    if (!unschedulable_taint)
      json_array_append_new(taints, json_pack("{s:s,s:s}", "key", "node.kubernetes.io/unschedulable",
                                              "effect", "NoSchedule"));
  }
  if (json_array_size(taints)) json_object_set_new(spec, "taints", taints);
  else json_decref(taints);
  return json_pack("{s:s,s:s,s:o,s:o,s:o}", "kind", "Node", "apiVersion", "v1", "metadata", meta,
                   "spec", spec, "status", status);
}

/* ---- the change test ---- */

static bool empty(const json_t *v) {
  return !v || json_is_null(v) || (json_is_string(v) && !*json_string_value(v)) ||
         (json_is_array(v) && !json_array_size(v)) || (json_is_object(v) && !json_object_size(v));
}

/* Equal as Go structs: an absent field, null and an empty string, list or
 * object are one value. The Node read back (protobuf decoded, or JSON that
 * the apiserver wrote with omitempty) leaves out what nanolet sends empty,
 * such as an untagged image's "names" or nodeInfo's "systemUUID". */
static bool same(const json_t *a, const json_t *b) {
  if (empty(a) || empty(b)) return empty(a) && empty(b);
  if (json_is_object(a) && json_is_object(b)) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)a, k, v) {
      if (!same(v, json_object_get(b, k))) return false;
    }
    json_object_foreach((json_t *)b, k, v) {
      if (!json_object_get(a, k) && !empty(v)) return false;
    }
    return true;
  }
  if (json_is_array(a) && json_is_array(b)) {
    if (json_array_size(a) != json_array_size(b)) return false;
    for (size_t i = 0; i < json_array_size(a); i++)
      if (!same(json_array_get(a, i), json_array_get(b, i))) return false;
    return true;
  }
  return json_equal(a, b);
}

/* Whether merging a into b leaves b as it is (lists compared whole). */
static bool subset(const json_t *a, const json_t *b) {
  if (!b || json_is_null(b)) return empty(a);
  if (!json_is_object(a)) return same(a, b);
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)a, k, v) {
    if (!subset(v, json_object_get(b, k))) return false;
  }
  return true;
}

bool nl_node_status_changed(const json_t *status, const json_t *prev) {
  if (!prev) return true;
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)status, k, v) {
    if (strcmp(k, "conditions") == 0) {
      size_t i;
      json_t *c;
      json_array_foreach(v, i, c) {
        const json_t *old = find_condition(prev, jstr(c, "type"));
        if (!old) return true;
        static const char *const keys[] = {"status", "lastTransitionTime", "reason", "message"};
        for (size_t j = 0; j < 4; j++)
          if (strcmp(jstr(c, keys[j]), jstr(old, keys[j])) != 0) return true;
      }
    } else if (strcmp(k, "addresses") == 0) {
      /* A merge list keyed by type: what others added stays and is no change. */
      size_t i, j;
      json_t *a, *b;
      json_array_foreach(v, i, a) {
        bool found = false;
        json_array_foreach(json_object_get(prev, "addresses"), j, b) found |= same(a, b);
        if (!found) return true;
      }
    } else if (!subset(v, json_object_get(prev, k))) {
      return true;
    }
  }
  return false;
}

/* The conditions as upstream's two-way strategic merge patch has them (a
 * list merged by type): a condition with only its fields that changed (one
 * gone is null), a new one whole, an unchanged one not at all; NULL when none
 * changed. A report thus sends each heartbeat, not each condition whole. */
static json_t *conditions_patch(const json_t *now, const json_t *prev) {
  json_t *out = json_array();
  size_t i;
  json_t *c;
  json_array_foreach(now, i, c) {
    json_t *type = json_object_get(c, "type");
    const json_t *was = NULL;
    size_t j;
    json_t *p;
    json_array_foreach(prev, j, p) {
      if (json_is_string(type) && json_equal(json_object_get(p, "type"), type)) {
        was = p;
        break;
      }
    }
    if (!was) {
      json_array_append(out, c);
      continue;
    }
    json_t *d = json_pack("{s:O}", "type", type);
    const char *k;
    json_t *v;
    json_object_foreach(c, k, v) {
      if (!same(v, json_object_get(was, k))) json_object_set(d, k, v);
    }
    json_object_foreach((json_t *)was, k, v) {
      if (!json_object_get(c, k) && !empty(v)) json_object_set_new(d, k, json_null());
    }
    if (json_object_size(d) > 1) json_array_append(out, d);
    json_decref(d);
  }
  if (json_array_size(out)) return out;
  json_decref(out);
  return NULL;
}

json_t *nl_node_status_patch(const json_t *status, const json_t *prev) {
  json_t *patch = json_object();
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)status, k, v) {
    const json_t *was = json_object_get(prev, k);
    if (same(v, was)) continue;
    if (strcmp(k, "conditions") == 0 && json_is_array(was)) {
      json_t *c = conditions_patch(v, was);
      if (c) json_object_set_new(patch, k, c);
      continue;
    }
    json_object_set(patch, k, v);
  }
  return patch;
}

/* ---- reconcile of an existing Node ---- */

/* updateDefaultLabels' list. */
static const char *const default_labels[] = {
    "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type", "kubernetes.io/os",
    "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch"};

/* reconcileHugePageResource's removal: a huge page size in the Node's capacity
 * that the node no longer has leaves capacity and allocatable (null in the
 * patch: a strategic merge keeps map keys it does not name). The sizes it has
 * go with the status patch that follows. NULL when none is stale. */
static json_t *stale_hugepages(const json_t *initial, const json_t *existing) {
  const json_t *have = json_object_get(json_object_get(initial, "status"), "capacity");
  const json_t *was = json_object_get(json_object_get(existing, "status"), "capacity");
  json_t *gone = json_object();
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)was, k, v) {
    if (strncmp(k, "hugepages-", 10) == 0 && !json_object_get(have, k))
      json_object_set_new(gone, k, json_null());
  }
  if (!json_object_size(gone)) {
    json_decref(gone);
    return NULL;
  }
  return json_pack("{s:o,s:o}", "capacity", json_deep_copy(gone), "allocatable", gone);
}

json_t *nl_node_reconcile(const json_t *initial, const json_t *existing) {
  const json_t *im = json_object_get(initial, "metadata");
  const json_t *em = json_object_get(existing, "metadata");
  const json_t *il = json_object_get(im, "labels"), *el = json_object_get(em, "labels");
  json_t *labels = json_object(), *annotations = json_object();
  for (size_t i = 0; i < sizeof default_labels / sizeof *default_labels; i++) {
    const json_t *want = json_object_get(il, default_labels[i]);
    if (!want) continue;
    const char *have = json_string_value(json_object_get(el, default_labels[i]));
    if (!have || strcmp(have, json_string_value(want)) != 0)
      json_object_set_new(labels, default_labels[i],
                          *json_string_value(want) ? json_incref((json_t *)want) : json_null());
  }
  static const char cmad[] = "volumes.kubernetes.io/controller-managed-attach-detach";
  const char *want = json_string_value(json_object_get(json_object_get(im, "annotations"), cmad));
  const char *have = json_string_value(json_object_get(json_object_get(em, "annotations"), cmad));
  if (want && (!have || strcmp(want, have) != 0))
    json_object_set_new(annotations, cmad, json_string(want));
  else if (!want && have)
    json_object_set_new(annotations, cmad, json_null());
  json_t *meta = json_object(), *patch = json_object(), *status = stale_hugepages(initial, existing);
  if (json_object_size(labels)) json_object_set(meta, "labels", labels);
  if (json_object_size(annotations)) json_object_set(meta, "annotations", annotations);
  json_decref(labels);
  json_decref(annotations);
  if (json_object_size(meta)) json_object_set(patch, "metadata", meta);
  json_decref(meta);
  if (status) json_object_set_new(patch, "status", status);
  if (json_object_size(patch)) return patch;
  json_decref(patch);
  return NULL;
}

/* ---- the Lease ---- */

json_t *nl_node_lease(const char *node, const char *node_uid, int32_t duration_s, int64_t now_ns,
                      const json_t *base) {
  json_t *l = base ? json_deep_copy(base)
                   : json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "coordination.k8s.io/v1",
                               "kind", "Lease", "metadata", "name", node, "namespace",
                               "kube-node-lease");
  json_t *meta = json_object_get(l, "metadata");
  if (!json_is_object(meta)) json_object_set_new(l, "metadata", meta = json_object());
  if (node_uid && *node_uid && !json_array_size(json_object_get(meta, "ownerReferences")))
    json_object_set_new(meta, "ownerReferences",
                        json_pack("[{s:s,s:s,s:s,s:s}]", "apiVersion", "v1", "kind", "Node", "name",
                                  node, "uid", node_uid));
  json_t *spec = json_object_get(l, "spec");
  if (!json_is_object(spec)) json_object_set_new(l, "spec", spec = json_object());
  char t[40];
  json_object_set_new(spec, "holderIdentity", json_string(node));
  json_object_set_new(spec, "leaseDurationSeconds", json_integer(duration_s));
  json_object_set_new(spec, "renewTime", json_string(nl_node_time(now_ns, true, t, sizeof t)));
  return l;
}

json_t *nl_node_lease_renewal(const char *node, const char *node_uid, int32_t duration_s,
                              int64_t now_ns, const json_t *base) {
  json_t *full = nl_node_lease(node, node_uid, duration_s, now_ns, base);
  const json_t *bmeta = json_object_get(base, "metadata");
  json_t *meta = json_object(), *spec = json_object();
  json_t *rv = json_object_get(bmeta, "resourceVersion");
  if (rv) json_object_set(meta, "resourceVersion", rv);
  /* The apiserver's documented reset ([{}]) empties them, and it tracks no
   * manager on updates of an object without any (until a server-side
   * apply): every later answer is ~250 bytes smaller (DIFFERENCES.md). */
  if (json_array_size(json_object_get(bmeta, "managedFields")) > 0)
    json_object_set_new(meta, "managedFields", json_pack("[{}]"));
  json_t *owners = json_object_get(json_object_get(full, "metadata"), "ownerReferences");
  if (owners && !json_equal(owners, json_object_get(bmeta, "ownerReferences")))
    json_object_set(meta, "ownerReferences", owners);
  const char *k;
  json_t *v;
  json_object_foreach(json_object_get(full, "spec"), k, v) {
    if (!json_equal(v, json_object_get(json_object_get(base, "spec"), k)))
      json_object_set(spec, k, v);
  }
  json_decref(full);
  return json_pack("{s:o,s:o}", "metadata", meta, "spec", spec);
}

json_t *nl_node_lease_renewal_tested(const char *node, int32_t duration_s, int64_t now_ns) {
  char t[40];
  return json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:i},{s:s,s:s,s:s}]",
                   "op", "test", "path", "/spec/holderIdentity", "value", node,
                   "op", "test", "path", "/spec/leaseDurationSeconds", "value", (int)duration_s,
                   "op", "replace", "path", "/spec/renewTime", "value",
                   nl_node_time(now_ns, true, t, sizeof t));
}
