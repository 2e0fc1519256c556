/* Shared helpers for the runtime unit tests. */
#ifndef RT_TEST_UTIL_H
#define RT_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/model/pod.h"
#include "managers/runtime.h"
#include "managers/runtime_internal.h"

static inline nl_pod_t *pod_from_yaml(const char *yaml) {
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(yaml, strlen(yaml), "test", &pod, &err) < 0) {
    fail_msg("decode: %s", nl_err_msg(err));
  }
  nl_pod_set_defaults(pod);
  return pod;
}

static inline nl_runtime_opts_t test_opts(void) {
  static char *dns[] = {"10.96.0.10"};
  nl_runtime_opts_t o = {0};
  o.node_name = "node1";
  o.root_dir = "/var/lib/kubelet";
  o.pod_logs_dir = "/var/log/pods";
  o.max_dead_per_container = 1;
  o.cluster_dns = dns;
  o.n_cluster_dns = 1;
  o.cluster_domain = "cluster.local";
  o.resolv_conf = "/etc/resolv.conf";
  o.node_ip = "192.168.1.10";
  o.node_cpu_milli = 2000;
  o.node_memory_bytes = 4LL << 30;
  o.cpu_cfs_quota = true;
  return o;
}

/* The value of key in a protobuf-c map (entries {base,key,value}) or NULL. */
typedef struct { ProtobufCMessage base; char *key; char *value; } test_kv_t;
static inline const char *map_get(void **entries, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++) {
    test_kv_t *e = entries[i];
    if (strcmp(e->key, key) == 0) return e->value;
  }
  return NULL;
}
#define MAP_GET(msg, field, key) map_get((void **)(msg)->field, (msg)->n_##field, key)

#endif
