/* The Summary JSON and /metrics/resource from one round of figures. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/stats.h"
#include "reactor/metrics.h"
#include "reactor/utf8.h"
#include "reactor/xalloc.h"

#define NL_STATS_RATE_WINDOW_NS 2000000000LL

typedef struct prev {
  int64_t ts;
  uint64_t core_ns;
  uint64_t nano; /* the rate computed at ts */
  bool has_nano;
  bool seen; /* in this round */
} prev_t;

void nl_stats_init(nl_stats_t *st) { nl_map_init(&st->prev); }
void nl_stats_free(nl_stats_t *st) { nl_map_free(&st->prev, free); }

/* usageNanoCores over the time since the previous sample of key; false on the
 * first sample or when the counter went back (a new container instance). */
static bool rate(nl_stats_t *st, const char *key, int64_t ts, uint64_t core_ns, uint64_t *out) {
  prev_t *p = nl_map_get(&st->prev, key);
  /* A sample within the window of the last one (the same sample again from a
   * runtime's cache, or a client asking twice in a row) gives the last rate:
   * over a fraction of a second the counters' granularity (a tick per CPU)
   * would make it noise. Upstream's rates too are over its 10 s updates. */
  if (p && ts >= p->ts && ts - p->ts < NL_STATS_RATE_WINDOW_NS) {
    p->seen = true;
    *out = p->nano;
    return p->has_nano;
  }
  bool ok = p && ts > p->ts && core_ns >= p->core_ns;
  if (ok) *out = (uint64_t)((double)(core_ns - p->core_ns) * 1e9 / (double)(ts - p->ts));
  if (!p) {
    p = nl_xcalloc(1, sizeof *p);
    nl_map_put(&st->prev, key, p);
  }
  p->ts = ts;
  p->core_ns = core_ns;
  p->nano = ok ? *out : 0;
  p->has_nano = ok;
  p->seen = true;
  return ok;
}

static json_t *time_json(int64_t ns) {
  time_t s = (time_t)(ns / 1000000000);
  struct tm tm;
  gmtime_r(&s, &tm);
  char b[32];
  strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return json_string(b);
}

static void set_u64(json_t *o, const char *k, uint64_t v) {
  json_object_set_new(o, k, json_integer((json_int_t)v));
}

static void set_opt(json_t *o, const char *k, const Runtime__V1__UInt64Value *v) {
  if (v) set_u64(o, k, v->value);
}

static json_t *cpu_json(nl_stats_t *st, const char *key, const Runtime__V1__CpuUsage *c) {
  if (!c) return NULL;
  json_t *o = json_object();
  json_object_set_new(o, "time", time_json(c->timestamp));
  uint64_t nano;
  /* as upstream's CRI stats provider (its default, not PodAndContainerStatsFromCRI):
   * its own rate from its previous sample; the runtime's figure only without
   * a counter (the runtime's rate is over the time since any client's request) */
  if (c->usage_core_nano_seconds) {
    if (rate(st, key, c->timestamp, c->usage_core_nano_seconds->value, &nano))
      set_u64(o, "usageNanoCores", nano);
  } else if (c->usage_nano_cores) {
    set_u64(o, "usageNanoCores", c->usage_nano_cores->value);
  }
  set_opt(o, "usageCoreNanoSeconds", c->usage_core_nano_seconds);
  return o;
}

static json_t *mem_json(const Runtime__V1__MemoryUsage *m) {
  if (!m) return NULL;
  json_t *o = json_object();
  json_object_set_new(o, "time", time_json(m->timestamp));
  set_opt(o, "availableBytes", m->available_bytes);
  set_opt(o, "usageBytes", m->usage_bytes);
  set_opt(o, "workingSetBytes", m->working_set_bytes);
  set_opt(o, "rssBytes", m->rss_bytes);
  set_opt(o, "pageFaults", m->page_faults);
  set_opt(o, "majorPageFaults", m->major_page_faults);
  return o;
}

/* A node's, pod's or container's swap as upstream's summary has it. */
typedef struct swap {
  bool ok;
  int64_t ts;
  bool has_usage, has_avail;
  uint64_t usage, avail;
} swap_t;

/* cAdvisor's: the usage, and what the limit leaves when there is one. */
static swap_t cgroup_swap(const nl_cgroup_swap_t *g, int64_t ts) {
  swap_t s = {.ok = true, .ts = ts, .has_usage = true, .usage = g->usage};
  if (g->limited) s.has_avail = true, s.avail = g->limit > g->usage ? g->limit - g->usage : 0;
  return s;
}

/* Upstream's CRI stats provider: the container's cgroup (cAdvisor) when it
 * has one, else the runtime's figures, else zeros at the time of asking. */
static swap_t ctr_swap(const Runtime__V1__ContainerStats *c, const nl_cadvisor_ctr_t *cc,
                       int64_t now) {
  if (cc && cc->swap.ok) return cgroup_swap(&cc->swap, now);
  const Runtime__V1__SwapUsage *r = c->swap;
  if (!r) return (swap_t){.ok = true, .ts = now, .has_usage = true, .has_avail = true};
  return (swap_t){.ok = true, .ts = r->timestamp ? r->timestamp : now,
                  .has_usage = r->swap_usage_bytes != NULL, .has_avail = r->swap_available_bytes != NULL,
                  .usage = r->swap_usage_bytes ? r->swap_usage_bytes->value : 0,
                  .avail = r->swap_available_bytes ? r->swap_available_bytes->value : 0};
}

/* The node's: /proc/meminfo (cAdvisor's machine swap capacity is its limit). */
static swap_t node_swap(const nl_node_sample_t *n) {
  if (!n->swap) return (swap_t){0};
  uint64_t used = n->swap_total > n->swap_free ? n->swap_total - n->swap_free : 0;
  return (swap_t){.ok = true, .ts = n->time_ns, .has_usage = true, .has_avail = true,
                  .usage = used, .avail = n->swap_total - used};
}

static json_t *swap_json(swap_t s) {
  if (!s.ok) return NULL;
  json_t *o = json_object();
  json_object_set_new(o, "time", time_json(s.ts));
  if (s.has_avail) json_object_set_new(o, "swapAvailableBytes", json_integer((json_int_t)s.avail));
  if (s.has_usage) json_object_set_new(o, "swapUsageBytes", json_integer((json_int_t)s.usage));
  return o;
}

static json_t *if_json(const char *name, uint64_t rx, uint64_t rxe, uint64_t tx, uint64_t txe) {
  json_t *o = json_object();
  json_object_set_new(o, "name", nl_json_str(name));
  set_u64(o, "rxBytes", rx);
  set_u64(o, "rxErrors", rxe);
  set_u64(o, "txBytes", tx);
  set_u64(o, "txErrors", txe);
  return o;
}

static json_t *cri_if_json(const Runtime__V1__NetworkInterfaceUsage *i) {
  return if_json(i->name, i->rx_bytes ? i->rx_bytes->value : 0,
                 i->rx_errors ? i->rx_errors->value : 0, i->tx_bytes ? i->tx_bytes->value : 0,
                 i->tx_errors ? i->tx_errors->value : 0);
}

static json_t *fs_json(int64_t ts, const nl_stats_fs_t *fs, const Runtime__V1__FilesystemUsage *u) {
  json_t *o = json_object();
  json_object_set_new(o, "time", time_json(u ? u->timestamp : ts));
  if (fs && fs->ok) {
    set_u64(o, "availableBytes", fs->available);
    set_u64(o, "capacityBytes", fs->capacity);
    set_u64(o, "inodesFree", fs->inodes_free);
    set_u64(o, "inodes", fs->inodes);
  }
  if (u) {
    set_opt(o, "usedBytes", u->used_bytes);
    set_opt(o, "inodesUsed", u->inodes_used);
  } else if (fs && fs->ok) {
    set_u64(o, "usedBytes", fs->used);
    set_u64(o, "inodesUsed", fs->inodes - fs->inodes_free);
  }
  return o;
}

static void set_obj(json_t *o, const char *k, json_t *v) {
  if (v) json_object_set_new(o, k, v);
}

static json_t *psi_data_json(const nl_psi_data_t *d) {
  json_t *o = json_object();
  set_u64(o, "total", d->total);
  json_object_set_new(o, "avg10", json_real(d->avg10));
  json_object_set_new(o, "avg60", json_real(d->avg60));
  json_object_set_new(o, "avg300", json_real(d->avg300));
  return o;
}

/* "psi" on cpu, memory or io, when its file was read. */
static json_t *with_psi(json_t *o, const nl_psi_t *p) {
  if (o && p && p->ok) {
    json_t *j = json_object();
    json_object_set_new(j, "full", psi_data_json(&p->full));
    json_object_set_new(j, "some", psi_data_json(&p->some));
    json_object_set_new(o, "psi", j);
  }
  return o;
}

static json_t *io_json(int64_t ts, const nl_psi_t *p) {
  if (!p || !p->ok) return NULL;
  json_t *o = json_object();
  json_object_set_new(o, "time", time_json(ts));
  return with_psi(o, p);
}

/* cpu, memory and io of a node, pod or container with its pressure. */
static void set_usage(json_t *o, json_t *cpu, json_t *mem, int64_t ts, const nl_psi3_t *psi) {
  set_obj(o, "cpu", with_psi(cpu, psi ? &psi->cpu : NULL));
  set_obj(o, "memory", with_psi(mem, psi ? &psi->memory : NULL));
  set_obj(o, "io", io_json(ts, psi ? &psi->io : NULL));
}

static json_t *sys_json(nl_stats_t *st, const nl_node_sample_t *n, const nl_sys_ctr_t *s) {
  json_t *o = json_object();
  json_object_set_new(o, "name", json_string(s->name));
  json_object_set_new(o, "startTime",
                      time_json((s->start_s ? s->start_s : n->boot_time_s) * 1000000000));
  char key[32];
  snprintf(key, sizeof key, "sys/%s", s->name);
  Runtime__V1__UInt64Value core = {.value = s->cpu_ns};
  Runtime__V1__CpuUsage cpu = {.timestamp = s->time_ns ? s->time_ns : n->time_ns,
                               .usage_core_nano_seconds = &core};
  Runtime__V1__UInt64Value avail = {.value = s->mem_limit > s->mem_ws ? s->mem_limit - s->mem_ws : 0},
                           use = {.value = s->mem_usage}, wsv = {.value = s->mem_ws},
                           rss = {.value = s->mem_rss}, pf = {.value = s->pgfault},
                           mpf = {.value = s->pgmajfault};
  Runtime__V1__MemoryUsage mem = {.timestamp = n->time_ns, .usage_bytes = &use,
                                  .working_set_bytes = &wsv, .rss_bytes = &rss,
                                  .page_faults = &pf, .major_page_faults = &mpf};
  if (s->mem_limit) mem.available_bytes = &avail; /* upstream: only under a limit */
  set_usage(o, s->cpu ? cpu_json(st, key, &cpu) : NULL, s->mem ? mem_json(&mem) : NULL, n->time_ns,
            &s->psi);
  return o;
}

static json_t *node_json(nl_stats_t *st, const char *node_name, const nl_node_sample_t *n,
                         const Runtime__V1__ImageFsInfoResponse *img, const nl_summary_sys_t *sx) {
  json_t *o = json_object();
  json_object_set_new(o, "nodeName", nl_json_str(node_name));
  if (n->boot_time_s) json_object_set_new(o, "startTime", time_json(n->boot_time_s * 1000000000));
  Runtime__V1__UInt64Value core = {.value = n->cpu_ns};
  Runtime__V1__CpuUsage cpu = {.timestamp = n->time_ns, .usage_core_nano_seconds = &core};
  json_t *cpu_j = cpu_json(st, "node", &cpu);
  /* Two readings a few microseconds off their timestamps can put a node busy
   * on every CPU a hair above them; no node uses more than it has. */
  json_t *nano = json_object_get(cpu_j, "usageNanoCores");
  if (nano && n->ncpu && (uint64_t)json_integer_value(nano) > (uint64_t)n->ncpu * 1000000000)
    json_integer_set(nano, (json_int_t)n->ncpu * 1000000000);
  uint64_t usage = n->mem_total - n->mem_free;
  uint64_t ws = usage > n->inactive_file ? usage - n->inactive_file : 0;
  Runtime__V1__UInt64Value avail = {.value = n->mem_total - ws}, use = {.value = usage},
                           wsv = {.value = ws}, rss = {.value = n->anon},
                           pf = {.value = n->pgfault}, mpf = {.value = n->pgmajfault};
  Runtime__V1__MemoryUsage mem = {.timestamp = n->time_ns, .available_bytes = &avail,
                                  .usage_bytes = &use, .working_set_bytes = &wsv,
                                  .rss_bytes = &rss, .page_faults = &pf,
                                  .major_page_faults = &mpf};
  set_usage(o, cpu_j, mem_json(&mem), n->time_ns, sx ? &sx->node : NULL);
  if (sx && sx->n_sys) {
    json_t *sys = json_array();
    for (size_t i = 0; i < sx->n_sys; i++) json_array_append_new(sys, sys_json(st, n, &sx->sys[i]));
    json_object_set_new(o, "systemContainers", sys);
  }
  if (n->n_ifs) {
    const nl_stats_if_t *d = &n->ifs[0]; /* eth0 when there is one, as upstream's default */
    for (size_t i = 0; i < n->n_ifs; i++)
      if (strcmp(n->ifs[i].name, "eth0") == 0) d = &n->ifs[i];
    json_t *net = if_json(d->name, d->rx, d->rx_errors, d->tx, d->tx_errors);
    json_object_set_new(net, "time", time_json(n->time_ns));
    json_t *ifs = json_array();
    for (size_t i = 0; i < n->n_ifs; i++) {
      const nl_stats_if_t *x = &n->ifs[i];
      json_array_append_new(ifs, if_json(x->name, x->rx, x->rx_errors, x->tx, x->tx_errors));
    }
    json_object_set_new(net, "interfaces", ifs);
    json_object_set_new(o, "network", net);
  }
  if (n->root_fs.ok) json_object_set_new(o, "fs", fs_json(n->time_ns, &n->root_fs, NULL));
  if (img && img->n_image_filesystems) {
    json_t *rt = json_object();
    json_object_set_new(rt, "imageFs",
                        fs_json(n->time_ns, &n->image_fs, img->image_filesystems[0]));
    /* upstream: the image filesystem's when the runtime names no other */
    json_object_set_new(rt, "containerFs",
                        fs_json(n->time_ns, &n->image_fs,
                                img->n_container_filesystems ? img->container_filesystems[0]
                                                             : img->image_filesystems[0]));
    json_object_set_new(o, "runtime", rt);
  }
  json_t *rl = json_object();
  json_object_set_new(rl, "time", time_json(n->time_ns));
  set_u64(rl, "maxpid", n->maxpid);
  set_u64(rl, "curproc", n->curproc);
  json_object_set_new(o, "rlimit", rl);
  set_obj(o, "swap", swap_json(node_swap(n)));
  return o;
}

/* A filesystem's figures with usage measured by du (logs, volumes). */
static json_t *du_json(int64_t ts, const nl_stats_fs_t *fs, uint64_t used, uint64_t inodes) {
  Runtime__V1__UInt64Value u = {.value = used}, i = {.value = inodes};
  Runtime__V1__FilesystemUsage fu = {.timestamp = ts, .used_bytes = &u, .inodes_used = &i};
  return fs_json(ts, fs, &fu);
}

static json_t *container_json(nl_stats_t *st, const nl_node_sample_t *n,
                              const Runtime__V1__ContainerStats *c, const nl_cadvisor_ctr_t *cc,
                              const nl_psi3_t *psi, int64_t log_used, int64_t log_inodes) {
  json_t *o = json_object();
  const Runtime__V1__ContainerAttributes *a = c->attributes;
  json_object_set_new(o, "name", nl_json_str(a && a->metadata ? a->metadata->name : ""));
  if (cc && cc->created_ns) json_object_set_new(o, "startTime", time_json(cc->created_ns));
  set_usage(o, cpu_json(st, a ? a->id : "", c->cpu), mem_json(c->memory),
            c->cpu ? c->cpu->timestamp : n->time_ns, psi);
  if (c->writable_layer)
    json_object_set_new(o, "rootfs", fs_json(n->time_ns, &n->image_fs, c->writable_layer));
  /* upstream: the log directory's files, on the node's root filesystem */
  if (log_used >= 0)
    json_object_set_new(o, "logs", du_json(n->time_ns, &n->root_fs, (uint64_t)log_used,
                                           (uint64_t)log_inodes));
  set_obj(o, "swap", swap_json(ctr_swap(c, cc, n->time_ns)));
  return o;
}

static void add_opt(uint64_t *sum, const Runtime__V1__UInt64Value *v) {
  if (v) *sum += v->value;
}

static const char *ctr_name(const Runtime__V1__ContainerStats *c) {
  return c->attributes && c->attributes->metadata ? c->attributes->metadata->name : "";
}

/* Upstream leaves out the terminated instances of a restarted container: of
 * those with one name, the running one (the runtime gives it cpu figures), or
 * the newest. */
static bool shown(const Runtime__V1__LinuxPodSandboxStats *l, const nl_cadvisor_pod_t *cp, size_t j) {
  const Runtime__V1__ContainerStats *c = l->containers[j];
  for (size_t k = 0; k < l->n_containers; k++) {
    const Runtime__V1__ContainerStats *o = l->containers[k];
    if (k == j || strcmp(ctr_name(o), ctr_name(c)) != 0) continue;
    if (!o->cpu != !c->cpu) return c->cpu != NULL;
    int64_t tj = cp && j < cp->n_ctrs ? cp->ctrs[j].created_ns : 0;
    int64_t tk = cp && k < cp->n_ctrs ? cp->ctrs[k].created_ns : 0;
    if (tk > tj || (tk == tj && k > j)) return false;
  }
  return true;
}

static const nl_cadvisor_ctr_t *ctr_of(const nl_cadvisor_pod_t *cp, size_t j) {
  return cp && j < cp->n_ctrs ? &cp->ctrs[j] : NULL;
}

/* Upstream: the pod cgroup's (cAdvisor), else the sum of its containers'. */
static swap_t pod_swap(const Runtime__V1__LinuxPodSandboxStats *l, const nl_cadvisor_pod_t *cp,
                       int64_t now) {
  if (cp && cp->swap.ok) return cgroup_swap(&cp->swap, now);
  swap_t sum = {.ts = now, .has_usage = true, .has_avail = true};
  for (size_t j = 0; l && j < l->n_containers; j++) {
    if (!shown(l, cp, j)) continue;
    swap_t c = ctr_swap(l->containers[j], ctr_of(cp, j), now);
    sum.ok = true, sum.ts = c.ts, sum.usage += c.usage, sum.avail += c.avail;
  }
  return sum;
}

/* The pod's memory from its cgroup when the runtime's figures are its
 * containers' sums (nl_stats_pods_from_containers): upstream reads the
 * pod cgroup. */
static json_t *pod_mem_json(const nl_node_sample_t *n, const Runtime__V1__LinuxPodSandboxStats *l,
                            const nl_cadvisor_pod_t *cp) {
  if ((l->memory && l->memory->usage_bytes) || !cp || !cp->cg.usage) return mem_json(l->memory);
  const nl_cgroup_sample_t *g = &cp->cg;
  uint64_t pf = 0, mpf = 0;
  for (size_t i = 0; i < l->n_containers; i++)
    if (l->containers[i]->memory) {
      add_opt(&pf, l->containers[i]->memory->page_faults);
      add_opt(&mpf, l->containers[i]->memory->major_page_faults);
    }
  Runtime__V1__UInt64Value avail = {.value = g->mem_limit > g->mem_ws ? g->mem_limit - g->mem_ws : 0},
                           use = {.value = g->mem_usage}, wsv = {.value = g->mem_ws},
                           rss = {.value = g->mem_rss}, pfv = {.value = pf}, mpfv = {.value = mpf};
  Runtime__V1__MemoryUsage m = {.timestamp = n->time_ns, .usage_bytes = &use,
                                .working_set_bytes = &wsv, .rss_bytes = &rss,
                                .page_faults = &pfv, .major_page_faults = &mpfv};
  if (g->mem_limit) m.available_bytes = &avail;
  return mem_json(&m);
}

static json_t *pod_cpu_json(nl_stats_t *st, const char *key, const nl_node_sample_t *n,
                            const Runtime__V1__LinuxPodSandboxStats *l, const nl_cadvisor_pod_t *cp) {
  if ((l->memory && l->memory->usage_bytes) || !cp || !cp->cg.usage) return cpu_json(st, key, l->cpu);
  Runtime__V1__UInt64Value core = {.value = cp->cg.cpu_ns};
  Runtime__V1__CpuUsage cpu = {.timestamp = n->time_ns, .usage_core_nano_seconds = &core};
  return cpu_json(st, key, &cpu);
}

/* Sums used bytes and inodes of an FsStats into u and i. */
static void add_used(json_t *fs, uint64_t *u, uint64_t *i) {
  json_t *a = json_object_get(fs, "usedBytes"), *b = json_object_get(fs, "inodesUsed");
  if (a) *u += (uint64_t)json_integer_value(a);
  if (b) *i += (uint64_t)json_integer_value(b);
}

static json_t *pod_json(nl_stats_t *st, const nl_node_sample_t *n,
                        const Runtime__V1__PodSandboxStats *p, const nl_cadvisor_pod_t *cp,
                        const nl_summary_pod_t *sp) {
  const Runtime__V1__PodSandboxAttributes *a = p->attributes;
  const Runtime__V1__PodSandboxMetadata *md = a ? a->metadata : NULL;
  json_t *o = json_object(), *ref = json_object(), *cs = json_array();
  json_object_set_new(ref, "name", nl_json_str(md ? md->name : ""));
  json_object_set_new(ref, "namespace", nl_json_str(md ? md->namespace_ : ""));
  json_object_set_new(ref, "uid", nl_json_str(md ? md->uid : ""));
  json_object_set_new(o, "podRef", ref);
  /* upstream: the sandbox's creation; here its cgroup's */
  if (cp && cp->cg.created_s) json_object_set_new(o, "startTime", time_json(cp->cg.created_s * 1000000000));
  const Runtime__V1__LinuxPodSandboxStats *l = p->linux;
  uint64_t eph_used = 0, eph_inodes = 0; /* upstream's calcEphemeralStorage */
  for (size_t i = 0; l && i < l->n_containers; i++) {
    if (!shown(l, cp, i)) continue;
    json_t *c = container_json(st, n, l->containers[i], ctr_of(cp, i),
                               sp && sp->ctr_psi ? &sp->ctr_psi[i] : NULL,
                               sp ? sp->log_used[i] : -1, sp ? sp->log_inodes[i] : 0);
    add_used(json_object_get(c, "rootfs"), &eph_used, &eph_inodes);
    add_used(json_object_get(c, "logs"), &eph_used, &eph_inodes);
    json_array_append_new(cs, c);
  }
  json_object_set_new(o, "containers", cs);
  if (l) {
    char key[160];
    snprintf(key, sizeof key, "pod/%s", md ? md->uid : "");
    set_usage(o, pod_cpu_json(st, key, n, l, cp), pod_mem_json(n, l, cp),
              l->cpu ? l->cpu->timestamp : n->time_ns, sp ? &sp->psi : NULL);
    if (l->network && l->network->default_interface) {
      json_t *net = cri_if_json(l->network->default_interface), *ifs = json_array();
      int64_t ts = l->network->timestamp ? l->network->timestamp : n->time_ns;
      json_object_set_new(net, "time", time_json(ts));
      for (size_t i = 0; i < l->network->n_interfaces; i++)
        json_array_append_new(ifs, cri_if_json(l->network->interfaces[i]));
      json_object_set_new(net, "interfaces", ifs);
      json_object_set_new(o, "network", net);
    } else if (cp && cp->net && cp->n_ifs) {
      /* the sandbox's interfaces as read from its network namespace */
      const nl_stats_if_t *d = &cp->ifs[0];
      for (size_t i = 0; i < cp->n_ifs; i++)
        if (!strcmp(cp->ifs[i].name, "eth0")) d = &cp->ifs[i];
      json_t *net = if_json(d->name, d->rx, d->rx_errors, d->tx, d->tx_errors), *ifs = json_array();
      json_object_set_new(net, "time", time_json(n->time_ns));
      for (size_t i = 0; i < cp->n_ifs; i++) {
        const nl_stats_if_t *f = &cp->ifs[i];
        json_array_append_new(ifs, if_json(f->name, f->rx, f->rx_errors, f->tx, f->tx_errors));
      }
      json_object_set_new(net, "interfaces", ifs);
      json_object_set_new(o, "network", net);
    }
  }
  if (sp && sp->n_vols) {
    json_t *vols = json_array();
    for (size_t i = 0; i < sp->n_vols; i++) {
      const nl_summary_vol_t *v = &sp->vols[i];
      json_t *vj = du_json(n->time_ns, &v->fs, (uint64_t)v->used, (uint64_t)v->inodes);
      json_object_set_new(vj, "name", nl_json_str(v->name));
      eph_used += (uint64_t)v->used, eph_inodes += (uint64_t)v->inodes;
      json_array_append_new(vols, vj);
    }
    json_object_set_new(o, "volume", vols);
  }
  if (n->root_fs.ok) json_object_set_new(o, "ephemeral-storage", du_json(n->time_ns, &n->root_fs, eph_used, eph_inodes));
  if (l && l->process && l->process->process_count) {
    json_t *ps = json_object();
    set_u64(ps, "process_count", l->process->process_count->value);
    json_object_set_new(o, "process_stats", ps);
  } else if (sp && sp->procs_ok) {
    json_t *ps = json_object();
    set_u64(ps, "process_count", sp->procs);
    json_object_set_new(o, "process_stats", ps);
  }
  if (l) set_obj(o, "swap", swap_json(pod_swap(l, cp, n->time_ns)));
  return o;
}

void nl_stats_summary_json(nl_stats_t *st, const char *node_name, const nl_node_sample_t *node,
                           const Runtime__V1__ListPodSandboxStatsResponse *pods,
                           const Runtime__V1__ImageFsInfoResponse *img, nl_buf_t *out) {
  nl_stats_summary_json_ext(st, node_name, node, pods, img, NULL, NULL, out);
}

void nl_stats_summary_json_ext(nl_stats_t *st, const char *node_name, const nl_node_sample_t *node,
                               const Runtime__V1__ListPodSandboxStatsResponse *pods,
                               const Runtime__V1__ImageFsInfoResponse *img,
                               const nl_summary_sys_t *x, const nl_cadvisor_t *c, nl_buf_t *out) {
  nl_map_iter_t it;
  const char *k;
  void *v;
  for (nl_map_iter_init(&it, &st->prev); nl_map_iter_next(&it, &k, &v);) ((prev_t *)v)->seen = false;
  json_t *root = json_object(), *arr = json_array();
  json_object_set_new(root, "node", node_json(st, node_name, node, img, x));
  for (size_t i = 0; pods && i < pods->n_stats; i++)
    json_array_append_new(arr, pod_json(st, node, pods->stats[i],
                                        c && i < c->n_pods ? &c->pods[i] : NULL,
                                        x && i < x->n_pods ? &x->pods[i] : NULL));
  json_object_set_new(root, "pods", arr);
  char *s = nl_json_xdumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  nl_buf_puts(out, s);
  free(s);
  json_decref(root);
  /* forget what is gone (stopped containers, deleted pods) */
  for (nl_map_iter_init(&it, &st->prev); nl_map_iter_next(&it, &k, &v);)
    if (!((prev_t *)v)->seen) free(nl_map_del(&st->prev, k));
}

/* ---- /metrics/resource ------------------------------------------------------ */

/* The families in the order of upstream's exposition (by name), with its help
 * and stability. */
typedef enum {
  C_CPU, C_MEM, C_START, C_SWAP_LIMIT, C_SWAP, N_CPU, N_MEM, N_SWAP, P_CPU, P_MEM, P_SWAP, N_FAMILIES
} family_t;

static const struct {
  const char *name, *type, *help;
} families[N_FAMILIES] = {
    {"container_cpu_usage_seconds_total", "counter",
     "[STABLE] Cumulative cpu time consumed by the container in core-seconds"},
    {"container_memory_working_set_bytes", "gauge",
     "[STABLE] Current working set of the container in bytes"},
    {"container_start_time_seconds", "gauge",
     "[STABLE] Start time of the container since unix epoch in seconds"},
    {"container_swap_limit_bytes", "gauge",
     "[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems"},
    {"container_swap_usage_bytes", "gauge",
     "[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems"},
    {"node_cpu_usage_seconds_total", "counter",
     "[STABLE] Cumulative cpu time consumed by the node in core-seconds"},
    {"node_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the node in bytes"},
    {"node_swap_usage_bytes", "gauge",
     "[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems"},
    {"pod_cpu_usage_seconds_total", "counter",
     "[STABLE] Cumulative cpu time consumed by the pod in core-seconds"},
    {"pod_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the pod in bytes"},
    {"pod_swap_usage_bytes", "gauge",
     "[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems"},
};

/* A sample into its family's buffer; ts_ns 0: none (upstream's start time). */
static void sample(nl_buf_t *f, family_t w, const char *labels, double v, int64_t ts_ns) {
  nl_buf_printf(&f[w], "%s%s ", families[w].name, labels);
  nl_metrics_format_float(&f[w], v);
  if (ts_ns) nl_buf_printf(&f[w], " %lld", (long long)(ts_ns / 1000000)); /* ms */
  nl_buf_puts(&f[w], "\n");
}

static void cpu_mem(nl_buf_t *f, family_t cpu_w, family_t mem_w, const char *labels,
                    const Runtime__V1__CpuUsage *cpu, const Runtime__V1__MemoryUsage *mem) {
  if (cpu && cpu->usage_core_nano_seconds)
    sample(f, cpu_w, labels, (double)cpu->usage_core_nano_seconds->value / 1e9, cpu->timestamp);
  if (mem && mem->working_set_bytes)
    sample(f, mem_w, labels, (double)mem->working_set_bytes->value, mem->timestamp);
}

/* A pod's containers (upstream's: not the terminated instances of a
 * restarted one), then the pod. */
static void pod_samples(nl_buf_t *f, const nl_node_sample_t *n, const Runtime__V1__PodSandboxStats *p,
                        const nl_cadvisor_pod_t *cp) {
  const Runtime__V1__PodSandboxMetadata *md = p->attributes ? p->attributes->metadata : NULL;
  const Runtime__V1__LinuxPodSandboxStats *l = p->linux;
  if (!md || !l) return;
  for (size_t j = 0; j < l->n_containers; j++) {
    if (!shown(l, cp, j)) continue;
    const Runtime__V1__ContainerStats *c = l->containers[j];
    const nl_cadvisor_ctr_t *cc = ctr_of(cp, j);
    char *labels = nl_xasprintf("{container=\"%s\",namespace=\"%s\",pod=\"%s\"}", ctr_name(c),
                                md->namespace_, md->name);
    if (cc && cc->created_ns > 0) sample(f, C_START, labels, (double)cc->created_ns / 1e9, 0);
    cpu_mem(f, C_CPU, C_MEM, labels, c->cpu, c->memory);
    swap_t sw = ctr_swap(c, cc, n->time_ns);
    if (sw.has_usage) sample(f, C_SWAP, labels, (double)sw.usage, sw.ts);
    /* upstream: the limit is what is left plus what is used */
    if (sw.has_avail) sample(f, C_SWAP_LIMIT, labels, (double)(sw.avail + sw.usage), sw.ts);
    free(labels);
  }
  char *labels = nl_xasprintf("{namespace=\"%s\",pod=\"%s\"}", md->namespace_, md->name);
  cpu_mem(f, P_CPU, P_MEM, labels, l->cpu, l->memory);
  swap_t sw = pod_swap(l, cp, n->time_ns);
  if (sw.ok && sw.has_usage) sample(f, P_SWAP, labels, (double)sw.usage, sw.ts);
  free(labels);
}

void nl_stats_resource_metrics(const nl_node_sample_t *n,
                               const Runtime__V1__ListPodSandboxStatsResponse *pods,
                               const nl_cadvisor_t *c, bool scrape_error, nl_buf_t *o) {
  nl_buf_t f[N_FAMILIES];
  for (size_t i = 0; i < N_FAMILIES; i++) f[i] = (nl_buf_t)NL_BUF_INIT;
  sample(f, N_CPU, "", (double)n->cpu_ns / 1e9, n->time_ns);
  uint64_t usage = n->mem_total - n->mem_free;
  sample(f, N_MEM, "", (double)(usage > n->inactive_file ? usage - n->inactive_file : 0), n->time_ns);
  swap_t ns = node_swap(n);
  if (ns.ok) sample(f, N_SWAP, "", (double)ns.usage, ns.ts);
  for (size_t i = 0; pods && i < pods->n_stats; i++)
    pod_samples(f, n, pods->stats[i], c && i < c->n_pods ? &c->pods[i] : NULL);
  /* as the Go client's registry: a family without samples is not shown */
  for (size_t i = 0; i < N_FAMILIES; i++) {
    if (f[i].len) {
      nl_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", families[i].name, families[i].help,
                    families[i].name, families[i].type);
      nl_buf_append(o, f[i].data, f[i].len);
    }
    nl_buf_free(&f[i]);
  }
  /* scrape_error, deprecated in 1.29, is hidden by upstream since */
  nl_buf_printf(o, "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting "
                   "container metrics, 0 otherwise\n# TYPE resource_scrape_error gauge\n"
                   "resource_scrape_error %d\n",
                scrape_error);
}
