/* Pods from container stats. containerd 1.6 fails ListPodSandboxStats as a
 * whole when a sandbox has no cgroup parent ("cgroupPath is empty"), which is
 * how nanolet runs sandboxes; ListContainerStats works per container. The
 * containers are grouped into pods by the labels the kubelet puts on them,
 * and a pod's CPU and memory are the sums of its containers'. */
#include <stdlib.h>
#include <string.h>

#include "agent/stats.h"
#include "reactor/xalloc.h"

typedef struct pod {
  Runtime__V1__PodSandboxStats ps;
  Runtime__V1__PodSandboxAttributes attrs;
  Runtime__V1__PodSandboxMetadata md;
  Runtime__V1__LinuxPodSandboxStats linux;
  Runtime__V1__CpuUsage cpu;
  Runtime__V1__MemoryUsage mem;
  Runtime__V1__UInt64Value core, ws;
  bool has_cpu, has_mem;
} pod_t;

static const char *label(const Runtime__V1__ContainerAttributes *a, const char *key) {
  for (size_t i = 0; a && i < a->n_labels; i++)
    if (strcmp(a->labels[i]->key, key) == 0) return a->labels[i]->value;
  return NULL;
}

Runtime__V1__ListPodSandboxStatsResponse *nl_stats_pods_from_containers(
    const Runtime__V1__ListContainerStatsResponse *c) {
  Runtime__V1__ListPodSandboxStatsResponse *r = nl_xcalloc(1, sizeof *r);
  runtime__v1__list_pod_sandbox_stats_response__init(r);
  r->stats = nl_xcalloc(c->n_stats ? c->n_stats : 1, sizeof *r->stats);
  for (size_t i = 0; i < c->n_stats; i++) {
    const Runtime__V1__ContainerStats *cs = c->stats[i];
    const char *uid = label(cs->attributes, "io.kubernetes.pod.uid");
    if (!uid) continue; /* not the kubelet's */
    pod_t *p = NULL;
    for (size_t j = 0; j < r->n_stats && !p; j++)
      if (strcmp(((pod_t *)r->stats[j])->md.uid, uid) == 0) p = (pod_t *)r->stats[j];
    if (!p) {
      p = nl_xcalloc(1, sizeof *p);
      runtime__v1__pod_sandbox_stats__init(&p->ps);
      runtime__v1__pod_sandbox_attributes__init(&p->attrs);
      runtime__v1__pod_sandbox_metadata__init(&p->md);
      runtime__v1__linux_pod_sandbox_stats__init(&p->linux);
      runtime__v1__cpu_usage__init(&p->cpu);
      runtime__v1__memory_usage__init(&p->mem);
      runtime__v1__uint64_value__init(&p->core);
      runtime__v1__uint64_value__init(&p->ws);
      p->md.uid = (char *)uid; /* borrowed from c, like the containers */
      const char *name = label(cs->attributes, "io.kubernetes.pod.name");
      const char *ns = label(cs->attributes, "io.kubernetes.pod.namespace");
      p->md.name = (char *)(name ? name : "");
      p->md.namespace_ = (char *)(ns ? ns : "");
      p->attrs.metadata = &p->md;
      p->ps.attributes = &p->attrs;
      p->ps.linux = &p->linux;
      p->linux.containers = nl_xcalloc(c->n_stats, sizeof *p->linux.containers);
      r->stats[r->n_stats++] = &p->ps; /* ps is the first member */
    }
    p->linux.containers[p->linux.n_containers++] = (Runtime__V1__ContainerStats *)cs;
    if (cs->cpu && cs->cpu->usage_core_nano_seconds) {
      p->core.value += cs->cpu->usage_core_nano_seconds->value;
      if (cs->cpu->timestamp > p->cpu.timestamp) p->cpu.timestamp = cs->cpu->timestamp;
      p->cpu.usage_core_nano_seconds = &p->core;
      p->linux.cpu = &p->cpu;
    }
    if (cs->memory && cs->memory->working_set_bytes) {
      p->ws.value += cs->memory->working_set_bytes->value;
      if (cs->memory->timestamp > p->mem.timestamp) p->mem.timestamp = cs->memory->timestamp;
      p->mem.working_set_bytes = &p->ws;
      p->linux.memory = &p->mem;
    }
  }
  return r;
}

void nl_stats_pods_free(Runtime__V1__ListPodSandboxStatsResponse *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_stats; i++) {
    pod_t *p = (pod_t *)r->stats[i];
    free(p->linux.containers);
    free(p);
  }
  free(r->stats);
  free(r);
}
