/* /metrics/cadvisor's text: the series upstream's kubelet serves from its
 * embedded cAdvisor (google/cadvisor metrics/prometheus.go, with the
 * kubelet's labels container, id, image, name, namespace, pod), from the
 * runtime's stats, the node's sample and what stats_cadvisor.c read. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/stats.h"
#include "reactor/metrics.h"
#include "reactor/xalloc.h"

/* ---- the text ---------------------------------------------------------------- */

/* One cgroup as cAdvisor lists it, with what is known of it. */
typedef struct row {
  const char *container, *image, *name, *namespace_, *pod;
  char *id;  /* owned */
  char *lab; /* owned: the base labels, formatted (format_labels) */
  size_t at[7]; /* where each base label starts in lab (at[6]: past the end) */
  int64_t ts_ns;
  bool net_only; /* a sandbox: cAdvisor's containerd handler gives it the network */
  bool cpu, mem, rss, usage, fs;
  double cpu_s, ws, rss_b, usage_b, fs_b;
  const char *fs_dev;
  const nl_stats_fs_t *fs_info; /* the root's filesystem: limit and inodes */
  const uint64_t *disk;         /* the root's /proc/diskstats figures */
  const nl_stats_if_t *ifs;
  size_t n_ifs;
  const nl_cgroup_sample_t *spec; /* NULL: unknown */
  const nl_cgroup_more_t *more;   /* NULL: unknown */
  double start_s;                 /* 0: unknown */
} row_t;

typedef struct rows {
  row_t *v;
  size_t n, cap;
} rows_t;

static row_t *add(rows_t *r) {
  if (r->n == r->cap) r->v = nl_xrealloc(r->v, (r->cap = r->cap ? r->cap * 2 : 64) * sizeof *r->v);
  row_t *x = &r->v[r->n++];
  memset(x, 0, sizeof *x);
  x->container = x->image = x->name = x->namespace_ = x->pod = "";
  return x;
}

/* The base labels, in client_golang's order (sorted). */
static const char *const base[6] = {"container", "id", "image", "name", "namespace", "pod"};

/* The base labels of r, formatted once: `container=".."`, `id=".."`, ...
 * one after the other (no commas), at[] marking where each starts. */
static void format_labels(row_t *r) {
  const char *v[6] = {r->container, r->id, r->image, r->name, r->namespace_, r->pod};
  nl_buf_t b = NL_BUF_INIT;
  for (int k = 0; k < 6; k++) {
    r->at[k] = b.len;
    nl_buf_printf(&b, "%s=\"", base[k]);
    nl_metrics_format_label(&b, v[k]);
    nl_buf_puts(&b, "\"");
  }
  r->at[6] = b.len;
  r->lab = b.data;
}

/* An extra label of a family (cpu, device, interface, ...). */
typedef struct xl {
  const char *n, *v;
} xl_t;

/* {labels}, the extras (sorted among themselves) merged in their places. */
static void labels(nl_buf_t *o, const row_t *r, const xl_t *x, size_t nx) {
  nl_buf_puts(o, "{");
  size_t xi = 0;
  bool first = true;
  for (int k = 0; k <= 6; k++) {
    for (; xi < nx && (k == 6 || strcmp(x[xi].n, base[k]) < 0); xi++, first = false) {
      nl_buf_printf(o, "%s%s=\"", first ? "" : ",", x[xi].n);
      nl_metrics_format_label(o, x[xi].v);
      nl_buf_puts(o, "\"");
    }
    if (k == 6) break;
    if (!first) nl_buf_puts(o, ",");
    nl_buf_append(o, r->lab + r->at[k], r->at[k + 1] - r->at[k]);
    first = false;
  }
  nl_buf_puts(o, "}");
}

/* name{labels} v [ts]; ts_ns 0: no timestamp (cAdvisor's spec series have none). */
static void putx(nl_buf_t *o, const char *name, const row_t *r, const xl_t *x, size_t nx, double v,
                 int64_t ts_ns) {
  nl_buf_puts(o, name);
  labels(o, r, x, nx);
  nl_buf_puts(o, " ");
  nl_metrics_format_float(o, v);
  if (ts_ns) nl_buf_printf(o, " %lld", (long long)(ts_ns / 1000000));
  nl_buf_puts(o, "\n");
}

static void put(nl_buf_t *o, const char *name, const row_t *r, const char *xn, const char *xv,
                double v, int64_t ts_ns) {
  xl_t x = {xn, xv};
  putx(o, name, r, &x, xn ? 1 : 0, v, ts_ns);
}

/* What a family shows of a cgroup. */
typedef enum {
  W_CPU, W_FS, W_LAST, W_RSS, W_USAGE, W_WS,  /* usage, with the sample's time */
  W_RX, W_RXE, W_TX, W_TXE,                   /* per interface */
  W_RXP, W_RXD, W_TXP, W_TXD,                 /* per interface, from /proc/<pid>/net/dev */
  W_PERIOD, W_QUOTA, W_SHARES, W_MEM, W_START, /* spec, without a time */
  W_RESERVATION, W_SWAP_LIMIT,
  W_USER, W_SYSTEM, W_CACHE, W_MAPPED, W_SWAP, W_FAILCNT, W_MAX_USAGE, W_OOM, /* cgroup files */
  W_FAILURES, W_THREADS, W_THREADS_MAX, W_PROCS, W_FDS, W_SOCKETS, W_ULIMIT,
  W_BLKIO, W_READ_BYTES, W_WRITE_BYTES, W_READS, W_WRITES, /* per device: blkio (and the root's disk) */
  W_DISK,                                                 /* the root's disk: disk_field */
  W_INODES_FREE, W_INODES, W_FS_LIMIT,
  W_SCRAPE, W_CORES, W_MEMORY,                /* one series each */
} what_t;

/* One figure of the more sample, per family; false when not read. */
static bool more_value(const nl_cgroup_more_t *m, what_t w, double *v) {
  switch (w) {
  case W_USER: *v = (double)m->user_ns / 1e9; return m->cpu;
  case W_SYSTEM: *v = (double)m->system_ns / 1e9; return m->cpu;
  case W_CACHE: *v = (double)m->cache; return m->mem;
  case W_MAPPED: *v = (double)m->mapped_file; return m->mem;
  case W_SWAP: *v = (double)m->swap; return m->mem;
  case W_FAILCNT: *v = (double)m->failcnt_v; return m->failcnt;
  case W_MAX_USAGE: *v = (double)m->max_usage_v; return m->max_usage;
  case W_OOM: *v = (double)m->oom_kills; return m->oom;
  case W_THREADS: *v = (double)m->threads_v; return m->threads;
  case W_THREADS_MAX: *v = (double)m->threads_max; return m->threads;
  case W_PROCS: *v = (double)m->processes; return m->procs;
  case W_FDS: *v = (double)m->fds; return m->procs;
  case W_SOCKETS: *v = (double)m->sockets; return m->procs;
  case W_ULIMIT: *v = (double)m->nofile_soft; return m->nofile;
  case W_RESERVATION: *v = (double)m->reservation; return m->mem_spec;
  case W_SWAP_LIMIT: *v = (double)m->swap_limit; return m->mem_spec;
  default: return false;
  }
}

static bool spec_family(what_t w) { return w == W_RESERVATION || w == W_SWAP_LIMIT; }

/* The per-device series of the cgroup's blkio figures. */
static void devices(nl_buf_t *o, const row_t *r, what_t w, const char *name) {
  const nl_cgroup_more_t *m = r->more;
  for (size_t i = 0; m && i < m->n_devs; i++) {
    const nl_cadvisor_dev_t *d = &m->devs[i];
    if (w == W_BLKIO) {
      char maj[16], min[16];
      snprintf(maj, sizeof maj, "%u", d->major);
      snprintf(min, sizeof min, "%u", d->minor);
      for (int op = 0; op < NL_IO_OPS; op++) {
        if (!(d->has & (1u << op))) continue;
        xl_t x[] = {{"device", d->name}, {"major", maj}, {"minor", min},
                    {"operation", nl_io_op_names[op]}};
        putx(o, name, r, x, 4, (double)d->bytes[op], r->ts_ns);
      }
      continue;
    }
    /* the root's disk counts from /proc/diskstats: one series a device */
    if (r->disk && (w == W_READS || w == W_WRITES) && strcmp(d->name, r->fs_dev) == 0) continue;
    const uint64_t *src = w == W_READ_BYTES || w == W_WRITE_BYTES ? d->bytes : d->ios;
    int op = w == W_READ_BYTES || w == W_READS ? NL_IO_READ : NL_IO_WRITE;
    put(o, name, r, "device", d->name, (double)src[op], r->ts_ns);
  }
}

/* /proc/diskstats' fields, as cAdvisor's root filesystem series use them. */
static const struct {
  const char *name;
  int field;
  double scale; /* ms to s, or 1 */
} disk_fields[] = {
    {"container_fs_io_current", 8, 1},
    {"container_fs_io_time_seconds_total", 9, 1e-3},
    {"container_fs_io_time_weighted_seconds_total", 10, 1e-3},
    {"container_fs_read_seconds_total", 3, 1e-3},
    {"container_fs_reads_merged_total", 1, 1},
    {"container_fs_sector_reads_total", 2, 1},
    {"container_fs_sector_writes_total", 6, 1},
    {"container_fs_write_seconds_total", 7, 1e-3},
    {"container_fs_writes_merged_total", 5, 1},
};

/* The series of one family for every cgroup that has the figure. */
static void series(nl_buf_t *o, const rows_t *rs, what_t w, const char *name, int64_t now_ns) {
  for (size_t i = 0; i < rs->n; i++) {
    const row_t *r = &rs->v[i];
    const nl_cgroup_sample_t *s = r->spec && r->spec->spec ? r->spec : NULL;
    double v;
    switch (w) {
    case W_LAST: put(o, name, r, NULL, NULL, (double)(now_ns / 1000000000), now_ns); break;
    case W_CPU: if (r->cpu && !r->net_only) put(o, name, r, "cpu", "total", r->cpu_s, r->ts_ns); break;
    case W_FS: if (r->fs && !r->net_only) put(o, name, r, "device", r->fs_dev, r->fs_b, r->ts_ns); break;
    case W_RSS: if (r->rss && !r->net_only) put(o, name, r, NULL, NULL, r->rss_b, r->ts_ns); break;
    case W_USAGE: if (r->usage && !r->net_only) put(o, name, r, NULL, NULL, r->usage_b, r->ts_ns); break;
    case W_WS: if (r->mem && !r->net_only) put(o, name, r, NULL, NULL, r->ws, r->ts_ns); break;
    case W_RX: case W_RXE: case W_TX: case W_TXE: case W_RXP: case W_RXD: case W_TXP: case W_TXD:
      for (size_t j = 0; j < r->n_ifs; j++) {
        const nl_stats_if_t *x = &r->ifs[j];
        uint64_t u = w == W_RX ? x->rx : w == W_RXE ? x->rx_errors : w == W_TX ? x->tx
                   : w == W_TXE ? x->tx_errors : w == W_RXP ? x->rx_packets
                   : w == W_RXD ? x->rx_dropped : w == W_TXP ? x->tx_packets : x->tx_dropped;
        if (w >= W_RXP && !x->packets) continue;
        put(o, name, r, "interface", x->name, (double)u, r->ts_ns);
      }
      break;
    case W_PERIOD: if (s) put(o, name, r, NULL, NULL, (double)s->cpu_period, 0); break;
    case W_QUOTA: if (s && s->cpu_quota) put(o, name, r, NULL, NULL, (double)s->cpu_quota, 0); break;
    case W_SHARES: if (s) put(o, name, r, NULL, NULL, (double)s->cpu_shares, 0); break;
    case W_MEM: if (s) put(o, name, r, NULL, NULL, (double)s->mem_limit, 0); break;
    case W_START: if (r->start_s) put(o, name, r, NULL, NULL, r->start_s, 0); break;
    case W_FAILURES:
      if (r->more && r->more->mem && !r->net_only) {
        /* cAdvisor gives the container's and the hierarchy's the same figures */
        static const char *const scope[] = {"container", "hierarchy"};
        for (int k = 0; k < 2; k++) {
          xl_t f[] = {{"failure_type", "pgfault"}, {"scope", scope[k]}};
          putx(o, name, r, f, 2, (double)r->more->pgfault, r->ts_ns);
          xl_t g[] = {{"failure_type", "pgmajfault"}, {"scope", scope[k]}};
          putx(o, name, r, g, 2, (double)r->more->pgmajfault, r->ts_ns);
        }
      }
      break;
    case W_ULIMIT:
      if (r->more && !r->net_only && more_value(r->more, w, &v))
        put(o, name, r, "ulimit", "max_open_files", v, r->ts_ns);
      break;
    case W_BLKIO: case W_READ_BYTES: case W_WRITE_BYTES: case W_READS: case W_WRITES:
      if (!r->net_only) devices(o, r, w, name);
      if (r->disk && (w == W_READS || w == W_WRITES))
        put(o, name, r, "device", r->fs_dev, (double)r->disk[w == W_READS ? 0 : 4], r->ts_ns);
      break;
    case W_DISK:
      for (size_t k = 0; r->disk && k < sizeof disk_fields / sizeof disk_fields[0]; k++)
        if (strcmp(disk_fields[k].name, name) == 0)
          put(o, name, r, "device", r->fs_dev,
              (double)r->disk[disk_fields[k].field] * disk_fields[k].scale, r->ts_ns);
      break;
    case W_INODES_FREE: case W_INODES: case W_FS_LIMIT:
      if (r->fs_info && r->fs_info->ok)
        put(o, name, r, "device", r->fs_dev,
            (double)(w == W_INODES_FREE ? r->fs_info->inodes_free
                     : w == W_INODES    ? r->fs_info->inodes
                                        : r->fs_info->capacity),
            r->ts_ns);
      break;
    case W_SCRAPE: case W_CORES: case W_MEMORY: assert(0 && "not per cgroup"); break;
    default:
      if (r->more && !r->net_only && more_value(r->more, w, &v))
        put(o, name, r, NULL, NULL, v, spec_family(w) ? 0 : r->ts_ns);
      break;
    }
  }
}

/* cAdvisor's families (metrics/prometheus.go, prometheus_machine.go) that the
 * kubelet serves, in client_golang's order (by name). */
static const struct {
  const char *name, *type, *help;
  what_t what;
} families[] = {
    {"container_blkio_device_usage_total", "counter", "Blkio Device bytes usage", W_BLKIO},
    {"container_cpu_system_seconds_total", "counter", "Cumulative system cpu time consumed in seconds.", W_SYSTEM},
    {"container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed in seconds.", W_CPU},
    {"container_cpu_user_seconds_total", "counter", "Cumulative user cpu time consumed in seconds.", W_USER},
    {"container_file_descriptors", "gauge", "Number of open file descriptors for the container.", W_FDS},
    {"container_fs_inodes_free", "gauge", "Number of available Inodes", W_INODES_FREE},
    {"container_fs_inodes_total", "gauge", "Number of Inodes", W_INODES},
    {"container_fs_io_current", "gauge", "Number of I/Os currently in progress", W_DISK},
    {"container_fs_io_time_seconds_total", "counter", "Cumulative count of seconds spent doing I/Os", W_DISK},
    {"container_fs_io_time_weighted_seconds_total", "counter", "Cumulative weighted I/O time in seconds", W_DISK},
    {"container_fs_limit_bytes", "gauge", "Number of bytes that can be consumed by the container on this filesystem.", W_FS_LIMIT},
    {"container_fs_read_seconds_total", "counter", "Cumulative count of seconds spent reading", W_DISK},
    {"container_fs_reads_bytes_total", "counter", "Cumulative count of bytes read", W_READ_BYTES},
    {"container_fs_reads_merged_total", "counter", "Cumulative count of reads merged", W_DISK},
    {"container_fs_reads_total", "counter", "Cumulative count of reads completed", W_READS},
    {"container_fs_sector_reads_total", "counter", "Cumulative count of sector reads completed", W_DISK},
    {"container_fs_sector_writes_total", "counter", "Cumulative count of sector writes completed", W_DISK},
    {"container_fs_usage_bytes", "gauge", "Number of bytes that are consumed by the container on this filesystem.", W_FS},
    {"container_fs_write_seconds_total", "counter", "Cumulative count of seconds spent writing", W_DISK},
    {"container_fs_writes_bytes_total", "counter", "Cumulative count of bytes written", W_WRITE_BYTES},
    {"container_fs_writes_merged_total", "counter", "Cumulative count of writes merged", W_DISK},
    {"container_fs_writes_total", "counter", "Cumulative count of writes completed", W_WRITES},
    {"container_last_seen", "gauge", "Last time a container was seen by the exporter", W_LAST},
    {"container_memory_cache", "gauge", "Number of bytes of page cache memory.", W_CACHE},
    {"container_memory_failcnt", "counter", "Number of memory usage hits limits", W_FAILCNT},
    {"container_memory_failures_total", "counter", "Cumulative count of memory allocation failures.", W_FAILURES},
    {"container_memory_mapped_file", "gauge", "Size of memory mapped files in bytes.", W_MAPPED},
    {"container_memory_max_usage_bytes", "gauge", "Maximum memory usage recorded in bytes", W_MAX_USAGE},
    {"container_memory_rss", "gauge", "Size of RSS in bytes.", W_RSS},
    {"container_memory_swap", "gauge", "Container swap usage in bytes.", W_SWAP},
    {"container_memory_usage_bytes", "gauge", "Current memory usage in bytes, including all memory regardless of when it was accessed", W_USAGE},
    {"container_memory_working_set_bytes", "gauge", "Current working set in bytes.", W_WS},
    {"container_network_receive_bytes_total", "counter", "Cumulative count of bytes received", W_RX},
    {"container_network_receive_errors_total", "counter", "Cumulative count of errors encountered while receiving", W_RXE},
    {"container_network_receive_packets_dropped_total", "counter", "Cumulative count of packets dropped while receiving", W_RXD},
    {"container_network_receive_packets_total", "counter", "Cumulative count of packets received", W_RXP},
    {"container_network_transmit_bytes_total", "counter", "Cumulative count of bytes transmitted", W_TX},
    {"container_network_transmit_errors_total", "counter", "Cumulative count of errors encountered while transmitting", W_TXE},
    {"container_network_transmit_packets_dropped_total", "counter", "Cumulative count of packets dropped while transmitting", W_TXD},
    {"container_network_transmit_packets_total", "counter", "Cumulative count of packets transmitted", W_TXP},
    {"container_oom_events_total", "counter", "Count of out of memory events observed for the container", W_OOM},
    {"container_processes", "gauge", "Number of processes running inside the container.", W_PROCS},
    {"container_scrape_error", "gauge", "1 if there was an error while getting container metrics, 0 otherwise", W_SCRAPE},
    {"container_sockets", "gauge", "Number of open sockets for the container.", W_SOCKETS},
    {"container_spec_cpu_period", "gauge", "CPU period of the container.", W_PERIOD},
    {"container_spec_cpu_quota", "gauge", "CPU quota of the container.", W_QUOTA},
    {"container_spec_cpu_shares", "gauge", "CPU share of the container.", W_SHARES},
    {"container_spec_memory_limit_bytes", "gauge", "Memory limit for the container.", W_MEM},
    {"container_spec_memory_reservation_limit_bytes", "gauge", "Memory reservation limit for the container.", W_RESERVATION},
    {"container_spec_memory_swap_limit_bytes", "gauge", "Memory swap limit for the container.", W_SWAP_LIMIT},
    {"container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds.", W_START},
    {"container_threads", "gauge", "Number of threads running inside the container", W_THREADS},
    {"container_threads_max", "gauge", "Maximum number of threads allowed inside the container, infinity if value is zero", W_THREADS_MAX},
    {"container_ulimits_soft", "gauge", "Soft ulimit values for the container root process. Unlimited if -1, except priority and nice", W_ULIMIT},
    {"machine_cpu_cores", "gauge", "Number of logical CPU cores.", W_CORES},
    {"machine_memory_bytes", "gauge", "Amount of memory installed on the machine.", W_MEMORY},
};
static void from_cgroup(row_t *r, const nl_cgroup_sample_t *s) {
  r->spec = s;
  if (s->created_s) r->start_s = (double)s->created_s;
  if (!s->usage) return;
  r->cpu = r->mem = r->rss = r->usage = true;
  r->cpu_s = (double)s->cpu_ns / 1e9;
  r->ws = (double)s->mem_ws, r->rss_b = (double)s->mem_rss, r->usage_b = (double)s->mem_usage;
}

static void build(rows_t *rs, const nl_node_sample_t *n,
                  const Runtime__V1__ListPodSandboxStatsResponse *pods, const nl_cadvisor_t *c) {
  /* the root cgroup: the node's figures, as cAdvisor's root container */
  row_t *r = add(rs);
  r->id = nl_xstrdup("/");
  r->ts_ns = n->time_ns;
  r->cpu = r->mem = r->rss = r->usage = true;
  r->cpu_s = (double)n->cpu_ns / 1e9;
  uint64_t usage = n->mem_total - n->mem_free;
  r->usage_b = (double)usage;
  r->ws = (double)(usage > n->inactive_file ? usage - n->inactive_file : 0);
  r->rss_b = (double)n->anon;
  r->ifs = n->ifs, r->n_ifs = n->n_ifs;
  if (n->root_fs.ok) r->fs = true, r->fs_b = (double)n->root_fs.used;
  r->fs_info = &n->root_fs;
  r->fs_dev = c && c->root_dev[0] ? c->root_dev : "";
  if (c && c->root_disk) r->disk = c->root_diskstats;
  if (c && c->fs_root) r->spec = &c->root, r->more = &c->root_more;
  r->start_s = (double)n->boot_time_s;
  for (size_t i = 0; pods && i < pods->n_stats; i++) {
    const Runtime__V1__PodSandboxStats *ps = pods->stats[i];
    const Runtime__V1__PodSandboxMetadata *md = ps->attributes ? ps->attributes->metadata : NULL;
    const Runtime__V1__LinuxPodSandboxStats *l = ps->linux;
    const nl_cadvisor_pod_t *p = c && i < c->n_pods ? &c->pods[i] : NULL;
    if (!md || !l) continue;
    const char *pod_cg = p && p->cgroup ? p->cgroup : "";
    if (p && p->cgroup) {
      r = add(rs);
      r->id = nl_xstrdup(p->cgroup);
      r->pod = md->name, r->namespace_ = md->namespace_;
      r->ts_ns = n->time_ns;
      from_cgroup(r, &p->cg);
      r->more = &p->more;
    }
    if (p && p->sandbox_id && p->net) {
      r = add(rs);
      r->id = nl__stats_ctr_cgroup(pod_cg, p->sandbox_id);
      r->name = p->sandbox_id;
      r->pod = md->name, r->namespace_ = md->namespace_;
      r->ts_ns = n->time_ns;
      r->net_only = true;
      r->ifs = p->ifs, r->n_ifs = p->n_ifs;
    }
    for (size_t j = 0; j < l->n_containers; j++) {
      const Runtime__V1__ContainerStats *cs = l->containers[j];
      const Runtime__V1__ContainerAttributes *a = cs->attributes;
      if (!a || !a->id) continue;
      const nl_cadvisor_ctr_t *x = p && j < p->n_ctrs ? &p->ctrs[j] : NULL;
      r = add(rs);
      r->id = nl__stats_ctr_cgroup(pod_cg, a->id);
      r->name = a->id;
      r->container = a->metadata && a->metadata->name ? a->metadata->name : "";
      r->pod = md->name, r->namespace_ = md->namespace_;
      r->image = x && x->image ? x->image : "";
      r->ts_ns = n->time_ns;
      if (x && x->cg.spec) r->spec = &x->cg;
      if (x && c && c->fs_root) r->more = &x->more;
      if (x && x->created_ns) r->start_s = (double)(x->created_ns / 1000000000);
      const Runtime__V1__CpuUsage *cpu = cs->cpu;
      const Runtime__V1__MemoryUsage *mem = cs->memory;
      if (cpu && cpu->usage_core_nano_seconds) {
        r->cpu = true, r->cpu_s = (double)cpu->usage_core_nano_seconds->value / 1e9;
        if (cpu->timestamp) r->ts_ns = cpu->timestamp;
      }
      if (mem && mem->working_set_bytes) r->mem = true, r->ws = (double)mem->working_set_bytes->value;
      if (mem && mem->rss_bytes) r->rss = true, r->rss_b = (double)mem->rss_bytes->value;
      if (mem && mem->usage_bytes) r->usage = true, r->usage_b = (double)mem->usage_bytes->value;
      if (cs->writable_layer && cs->writable_layer->used_bytes) {
        r->fs = true, r->fs_b = (double)cs->writable_layer->used_bytes->value;
        r->fs_dev = c && c->image_dev[0] ? c->image_dev : "";
      }
    }
  }
}

/* cAdvisor's machine series carry the machine's ids. */
static void machine(nl_buf_t *o, const char *name, const nl_cadvisor_t *c, double v) {
  nl_buf_printf(o, "%s{boot_id=\"", name);
  nl_metrics_format_label(o, c ? c->boot_id : "");
  nl_buf_puts(o, "\",machine_id=\"");
  nl_metrics_format_label(o, c ? c->machine_id : "");
  nl_buf_puts(o, "\",system_uuid=\"");
  nl_metrics_format_label(o, c ? c->system_uuid : "");
  nl_buf_puts(o, "\"} ");
  nl_metrics_format_float(o, v);
  nl_buf_puts(o, "\n");
}

void nl_stats_cadvisor_metrics(const nl_node_sample_t *n,
                               const Runtime__V1__ListPodSandboxStatsResponse *pods,
                               const nl_cadvisor_t *c, bool scrape_error, nl_buf_t *o) {
  rows_t rs = {0};
  build(&rs, n, pods, c);
  for (size_t i = 0; i < rs.n; i++) format_labels(&rs.v[i]);
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
    const char *name = families[i].name;
    nl_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, families[i].help, name, families[i].type);
    if (families[i].what == W_SCRAPE)
      nl_buf_printf(o, "%s %d\n", name, scrape_error);
    else if (families[i].what == W_CORES)
      machine(o, name, c, c && c->cores > 0 ? (double)c->cores : 0);
    else if (families[i].what == W_MEMORY)
      machine(o, name, c, (double)n->mem_total);
    else
      series(o, &rs, families[i].what, name, n->time_ns);
  }
  for (size_t i = 0; i < rs.n; i++) free(rs.v[i].id), free(rs.v[i].lab);
  free(rs.v);
}
