/* The container manager's configuration: capacity from the host, the
 * reservations and enforceNodeAllocatable from the KubeletConfiguration, and
 * the Burstable pods' requests for the QoS update. */
#include "agent/kubelet_cgroups.h"

#include <stdio.h>
#include <string.h>

#include "agent/kubelet_pods.h"
#include "agent/kubelet_resize.h"
#include "agent/model/quantity.h"
#include "managers/admission.h"
#include "managers/node.h"
#include "reactor/xalloc.h"

static int64_t pid_max(void) {
  FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
  long long v = -1;
  if (f) {
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

/* cpu, memory and pid of a kubeReserved / systemReserved map. */
static int amounts(const char *field, const nl_config_map_t *m, nl_cgroups_amounts_t *a,
                   nl_err_t **err) {
  *a = (nl_cgroups_amounts_t){-1, -1, -1};
  for (size_t i = 0; i < m->n; i++) {
    int64_t *dst = !strcmp(m->keys[i], "cpu")      ? &a->cpu_milli
                   : !strcmp(m->keys[i], "memory") ? &a->memory
                   : !strcmp(m->keys[i], "pid")    ? &a->pids
                                                   : NULL;
    if (!dst) continue;
    nl_quantity_t q;
    if (nl_quantity_parse(m->first[i], &q, err) < 0)
      return nl_err_wrap(err, "%s: %s", field, m->keys[i]);
    *dst = dst == &a->cpu_milli ? nl_quantity_milli_value(&q) : nl_quantity_value(&q);
  }
  return 0;
}

static bool enforces(const nl_kubelet_config_t *cfg, const char *what) {
  for (size_t i = 0; i < cfg->enforce_node_allocatable.n; i++)
    if (!strcmp(cfg->enforce_node_allocatable.v[i], what)) return true;
  return false;
}

/* upstream's QoS manager sums the requests of the active Burstable pods. */
static int64_t burstable_cpu(void *ctx) {
  nl_kubelet_t *k = ctx;
  size_t n;
  const nl_pod_t **pods = nl_pod_manager_list(&k->pods, &n);
  int64_t sum = 0;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(nl_pod_qos_class(pods[i]), "Burstable") && !nl__kubelet_pod_finished(k, pods[i])) {
      nl_pod_t *alloc; /* the requests allocated (a resize may be pending) */
      sum += nl_pod_request(nl__kubelet_resize_pod(k, pods[i], &alloc), "cpu");
      nl_pod_free(alloc);
    }
  free(pods);
  return sum;
}

int nl__kubelet_cgroups_init(nl_kubelet_t *k, nl_err_t **err) {
  const nl_kubelet_config_t *cfg = k->cfg;
  nl_node_facts_t facts = {0};
  nl_node_paths_t paths = nl_node_paths_host(cfg->root_dir);
  paths.root_dir = NULL; /* no statfs: only cpu and memory are wanted */
  nl_node_facts_read(&paths, &facts);
  nl_cgroups_opts_t o = {
      .systemd = !strcmp(cfg->cgroup_driver, "systemd"),
      .cgroup_root = cfg->cgroup_root,
      .per_qos = cfg->cgroups_per_qos,
      .cfs_quota = cfg->cpu_cfs_quota,
      .pod_pids_limit = cfg->pod_pids_limit,
      .fail_swap_on = cfg->fail_swap_on,
      .capacity = {facts.cpus * 1000, facts.memory_bytes, pid_max()},
      .enforce_pods = enforces(cfg, "pods"),
      .enforce_system_reserved = enforces(cfg, "system-reserved"),
      .enforce_kube_reserved = enforces(cfg, "kube-reserved"),
      .system_reserved_cgroup = cfg->system_reserved_cgroup,
      .kube_reserved_cgroup = cfg->kube_reserved_cgroup,
      .burstable_cpu = burstable_cpu,
      .ctx = k,
  };
  nl_node_facts_free(&facts);
  if (amounts("systemReserved", &cfg->system_reserved, &o.system_reserved, err) < 0 ||
      amounts("kubeReserved", &cfg->kube_reserved, &o.kube_reserved, err) < 0)
    return -1;
  k->cgroups_up = true;
  k->pending++;
  return nl_cgroups_init(&k->cgroups, k->loop, &o, err);
}

static void on_stopped(nl_cgroups_t *cg) {
  nl__kubelet_release(container_of(cg, nl_kubelet_t, cgroups));
}

void nl__kubelet_cgroups_stop(nl_kubelet_t *k) {
  if (k->cgroups_up) nl_cgroups_stop(&k->cgroups, on_stopped);
}
