/* The eviction manager and the container and image collector, wired to the
 * agent: the figures the manager observes (as upstream's summary provider
 * gives them: /proc, the root memory cgroup, statvfs of the root dir and of
 * the runtime's image filesystem, the runtime's container stats, the pods'
 * emptyDir volumes and logs), the pods it may evict, and the pod states the
 * collector asks about. */
#include "agent/kubelet_evict.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/kubelet_pods.h"
#include "agent/stats.h"
#include "cri/image.h"
#include "managers/runtime_types.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define MEMCG "/sys/fs/cgroup/memory"

/* ---- the collector's questions ---- */

static nl_gc_pod_state_t gc_pod_state(void *ctx, const char *uid) {
  nl_kubelet_t *k = ctx;
  const nl_pod_t *pod = nl_pod_manager_get(&k->pods, uid);
  const nl_pod_worker_t *w = nl_pod_workers_get(&k->workers, uid);
  if (pod && !pod->metadata.deletion_timestamp)
    return w && w->state == NL_POD_TERMINATED ? NL_GC_POD_TERMINATED : NL_GC_POD_ACTIVE;
  /* being killed: its dead containers wait for the end */
  if ((w && !w->finished) || nl_map_has(&k->orphans, uid)) return NL_GC_POD_ACTIVE;
  return NL_GC_POD_DELETED;
}

static bool gc_sources_ready(void *ctx) {
  nl_kubelet_t *k = ctx;
  return nl_pod_config_sources_ready(&k->pod_config) && k->pleg.relists;
}

/* ---- the figures ---- */

/* What the thread pool measures of one pod, beside its volumes. */
typedef struct pod_dir {
  char *logdir;  /* <podLogsDir>/<ns>_<name>_<uid> */
  bool limited;  /* local storage limits: its log files and etc-hosts too */
} pod_dir_t;

typedef struct collect {
  nl_kubelet_t *k;
  nl_ev_stats_t *out;
  nl_eviction_done_fn done;
  void *done_ctx;
  uv_work_t work;
  char *image_mount;
  pod_dir_t *dirs;
  size_t n_dirs;
  nl_node_sample_t sample;
  nl_sys_ctr_t root; /* the root memory cgroup (memory.available) */
  bool dedicated;
  /* the pods cgroup (allocatableMemory.available), when the thresholds have
   * that signal: its filesystem and name (owned), what was read */
  char *pods_fs, *pods_cgroup;
  bool pods_v2;
  nl_sys_ctr_t pods;
} collect_t;

static void collect_work(uv_work_t *w) {
  collect_t *c = container_of(w, collect_t, work);
  const nl_kubelet_config_t *cfg = c->k->cfg;
  nl_node_sample_read_light(&c->sample, cfg->root_dir, c->image_mount);
  /* cgroup v1's root memory cgroup, which the threshold notification watches
   * too (MEMCG); elsewhere /proc/meminfo below */
  nl_stats_cgroup_read(&c->root, "/sys/fs/cgroup", false, "/", "/");
  struct stat a, b;
  c->dedicated = c->image_mount && stat(cfg->root_dir, &a) == 0 && stat(c->image_mount, &b) == 0 &&
                 a.st_dev != b.st_dev;
  if (c->pods_cgroup) nl_stats_cgroup_read(&c->pods, c->pods_fs, c->pods_v2, c->pods_cgroup, c->pods_cgroup);
  for (size_t i = 0; i < c->out->n_pods; i++) {
    nl_ev_pod_stats_t *p = &c->out->pods[i];
    for (size_t j = 0; j < p->n_vols; j++) {
      char *vol = nl_xasprintf("%s/pods/%s/volumes/kubernetes.io~empty-dir/%s", cfg->root_dir,
                               p->uid, p->vols[j].name);
      p->vols[j].used = nl_stats_du(vol, &p->volume_inodes);
      if (p->vols[j].used > 0) p->volumes += p->vols[j].used;
      free(vol);
    }
    const char *logdir = c->dirs[i].logdir;
    for (size_t j = 0; j < p->n_containers; j++) {
      char *ld = nl_xasprintf("%s/%s", logdir, p->containers[j].name);
      p->containers[j].logs = nl_stats_files_in(ld, NULL);
      free(ld);
    }
    if (!c->dirs[i].limited) continue;
    p->pod_logs = nl_stats_files_in(logdir, NULL);
    char *hosts = nl_xasprintf("%s/pods/%s/etc-hosts", cfg->root_dir, p->uid);
    p->etc_hosts = nl_stats_du(hosts, NULL);
    free(hosts);
  }
}

static void collect_free(collect_t *c) {
  for (size_t i = 0; i < c->n_dirs; i++) free(c->dirs[i].logdir);
  free(c->dirs);
  free(c->image_mount);
  free(c->pods_fs);
  free(c->pods_cgroup);
  free(c);
}

static void collect_done(uv_work_t *w, int status) {
  (void)status;
  collect_t *c = container_of(w, collect_t, work);
  nl_ev_stats_t *o = c->out;
  const nl_node_sample_t *s = &c->sample;
  /* upstream: memory.available = capacity - the root cgroup's working set
   * (usage - inactive file); without the memory cgroup, from /proc/meminfo */
  bool memcg = c->root.mem && c->root.mem_ws > 0;
  uint64_t ws = memcg ? c->root.mem_ws : s->mem_total - s->mem_free - s->inactive_file;
  if (s->mem_total) o->obs[NL_EV_MEMORY] = (nl_ev_observation_t){true, (int64_t)s->mem_total - (int64_t)ws, (int64_t)s->mem_total};
  if (s->root_fs.ok) {
    o->obs[NL_EV_NODEFS] = (nl_ev_observation_t){true, (int64_t)s->root_fs.available, (int64_t)s->root_fs.capacity};
    o->obs[NL_EV_NODEFS_INODES] = (nl_ev_observation_t){true, (int64_t)s->root_fs.inodes_free, (int64_t)s->root_fs.inodes};
  }
  const nl_stats_fs_t *img = s->image_fs.ok ? &s->image_fs : &s->root_fs;
  if (img->ok) {
    o->obs[NL_EV_IMAGEFS] = (nl_ev_observation_t){true, (int64_t)img->available, (int64_t)img->capacity};
    o->obs[NL_EV_IMAGEFS_INODES] = (nl_ev_observation_t){true, (int64_t)img->inodes_free, (int64_t)img->inodes};
  }
  if (s->maxpid)
    o->obs[NL_EV_PID] = (nl_ev_observation_t){true, (int64_t)s->maxpid - (int64_t)s->curproc, (int64_t)s->maxpid};
  /* upstream: the pods system container's memory, available = its limit (node
   * allocatable, when enforced) - its working set; no limit, no signal */
  if (c->pods.mem && c->pods.mem_limit)
    o->obs[NL_EV_ALLOC_MEMORY] = (nl_ev_observation_t){
        true, (int64_t)c->pods.mem_limit - (int64_t)c->pods.mem_ws, (int64_t)c->pods.mem_limit};
  o->dedicated_imagefs = c->dedicated;
  if (memcg) o->memory_inactive_file = (int64_t)(c->root.mem_usage - c->root.mem_ws);
  nl_eviction_done_fn done = c->done;
  void *done_ctx = c->done_ctx;
  collect_free(c);
  done(done_ctx);
}

static void run_work(collect_t *c) {
  if (uv_queue_work(c->k->loop, &c->work, collect_work, collect_done) != 0) collect_done(&c->work, -1);
}

/* An entry for each pod that may be evicted, with its local volumes, before
 * the runtime's figures come. */
static void pod_entries(collect_t *c, const nl_pod_t **pods, size_t n) {
  nl_ev_stats_t *o = c->out;
  o->pods = nl_xcalloc(n + 1, sizeof *o->pods);
  c->dirs = nl_xcalloc(n + 1, sizeof *c->dirs);
  for (size_t i = 0; i < n; i++) {
    const nl_pod_t *pod = pods[i];
    const nl_object_meta_t *md = &pod->metadata;
    c->dirs[c->n_dirs++] = (pod_dir_t){nl_xasprintf("%s/%s_%s_%s", c->k->cfg->pod_logs_dir,
                                                    md->namespace_, md->name, md->uid),
                                       nl_ev_local_storage_limited(pod)};
    nl_ev_pod_stats_t *p = &o->pods[o->n_pods++];
    *p = (nl_ev_pod_stats_t){.uid = nl_xstrdup(md->uid)};
    p->vols = nl_xcalloc(pod->spec.n_volumes + 1, sizeof *p->vols);
    for (size_t j = 0; j < pod->spec.n_volumes; j++)
      if (nl_ev_local_volume(&pod->spec.volumes[j]))
        p->vols[p->n_vols++] = (nl_ev_volume_stats_t){nl_xstrdup(pod->spec.volumes[j].name), -1};
  }
}

static nl_ev_pod_stats_t *pod_entry(collect_t *c, const char *uid) {
  for (size_t i = 0; i < c->out->n_pods; i++)
    if (!strcmp(c->out->pods[i].uid, uid)) return &c->out->pods[i];
  return NULL;
}

/* upstream's summary has the running containers only
 * (removeTerminatedContainers): those the PLEG has seen stop are left out; one
 * it has not relisted yet is new, hence running. */
static bool running(nl_kubelet_t *k, const char *uid, const char *id) {
  const nl_rt_pod_status_t *st = k->pleg_up ? nl_pleg_get(&k->pleg, uid) : NULL;
  for (size_t i = 0; st && i < st->n_containers; i++)
    if (!strcmp(st->containers[i].id, id)) return st->containers[i].state == NL_RT_CONTAINER_RUNNING;
  return true;
}

static void on_container_stats(const nl_grpc_status_t *st,
                               Runtime__V1__ListContainerStatsResponse *resp, void *ctx) {
  collect_t *c = ctx;
  for (size_t i = 0; st->code == NL_GRPC_OK && i < resp->n_stats; i++) {
    const Runtime__V1__ContainerStats *cs = resp->stats[i];
    const Runtime__V1__ContainerAttributes *a = cs->attributes;
    const char *uid = a ? NL_RT_LABEL(a, NL_LABEL_POD_UID) : NULL;
    nl_ev_pod_stats_t *p = uid && a->metadata && a->id ? pod_entry(c, uid) : NULL;
    if (!p || !running(c->k, uid, a->id)) continue;
    int64_t mem = cs->memory && cs->memory->working_set_bytes ? (int64_t)cs->memory->working_set_bytes->value : -1;
    int64_t rootfs = cs->writable_layer && cs->writable_layer->used_bytes
                         ? (int64_t)cs->writable_layer->used_bytes->value : -1;
    if (mem > 0) p->memory += mem;
    p->containers = nl_xrealloc(p->containers, (p->n_containers + 1) * sizeof *p->containers);
    p->containers[p->n_containers++] = (nl_ev_container_stats_t){nl_xstrdup(a->metadata->name), mem, rootfs, -1};
  }
  if (st->code != NL_GRPC_OK) {
    /* no pod figures this round: the pods rank as without stats, and no
     * local storage limit is judged on volumes alone */
    nl_vlog(2, "eviction manager: container stats: %s", st->message);
    nl_ev_stats_free(c->out);
  }
  run_work(c);
}

static void on_image_fs(const nl_grpc_status_t *st, Runtime__V1__ImageFsInfoResponse *resp, void *ctx) {
  collect_t *c = ctx;
  if (st->code == NL_GRPC_OK && resp->n_image_filesystems && resp->image_filesystems[0]->fs_id &&
      *resp->image_filesystems[0]->fs_id->mountpoint)
    c->image_mount = nl_xstrdup(resp->image_filesystems[0]->fs_id->mountpoint);
  if (!c->dirs) { /* the node's figures alone */
    run_work(c);
    return;
  }
  Runtime__V1__ListContainerStatsRequest q = RUNTIME__V1__LIST_CONTAINER_STATS_REQUEST__INIT;
  nl_cri_list_container_stats(&c->k->cri, &q, on_container_stats, c);
}

static void ev_collect(void *ctx, bool pods, nl_ev_stats_t *out, nl_eviction_done_fn done,
                       void *done_ctx) {
  collect_t *c = nl_xcalloc(1, sizeof *c);
  *c = (collect_t){.k = ctx, .out = out, .done = done, .done_ctx = done_ctx};
  memset(out, 0, sizeof *out);
  nl_kubelet_t *k = c->k;
  if (k->evict_alloc_memory && k->cgroups_up && k->cgroups.kubepods) {
    c->pods_fs = nl_xstrdup(k->cgroups.fs_root ? k->cgroups.fs_root : "/sys/fs/cgroup");
    c->pods_cgroup = nl_xstrdup(k->cgroups.kubepods);
    c->pods_v2 = k->cgroups.v2;
  }
  size_t n;
  const nl_pod_t **active = nl__kubelet_pods_active(c->k, &n);
  for (size_t i = 0; i < n && !pods; i++) pods = nl_ev_local_storage_limited(active[i]);
  if (pods) pod_entries(c, active, n);
  free(active);
  Runtime__V1__ImageFsInfoRequest q = RUNTIME__V1__IMAGE_FS_INFO_REQUEST__INIT;
  nl_cri_image_fs_info(&c->k->cri, &q, on_image_fs, c);
}

static const nl_pod_t **ev_active_pods(void *ctx, size_t *n) {
  return nl__kubelet_pods_active(ctx, n);
}

static void ev_evict(void *ctx, const nl_pod_t *pod, int64_t grace, const char *message,
                     const nl_kvlist_t *annotations, bool condition) {
  nl__kubelet_pods_evict(ctx, pod, grace, message, annotations, condition);
}

static bool ev_cleaned_up(void *ctx, const char *uid) {
  nl_kubelet_t *k = ctx;
  return !nl_pod_workers_could_have_running_containers(&k->workers, uid);
}

typedef struct reclaim_call {
  nl_eviction_done_fn done;
  void *done_ctx;
} reclaim_call_t;

static void on_reclaim(void *ctx, uint64_t freed) {
  reclaim_call_t *r = ctx;
  if (freed) nl_info("eviction manager: image GC freed %llu bytes", (unsigned long long)freed);
  r->done(r->done_ctx);
  free(r);
}

static void ev_reclaim(void *ctx, bool images, nl_eviction_done_fn done, void *done_ctx) {
  nl_kubelet_t *k = ctx;
  reclaim_call_t *r = nl_xcalloc(1, sizeof *r);
  *r = (reclaim_call_t){done, done_ctx};
  nl_gc_reclaim(&k->gc, images, on_reclaim, r);
}

/* ---- wiring ---- */

static nl_ev_config_map_t cmap(const nl_config_map_t *m) {
  return (nl_ev_config_map_t){(const char *const *)m->keys, m->first, m->n};
}

int nl__kubelet_evict_init(nl_kubelet_t *k, nl_err_t **err) {
  const nl_kubelet_config_t *cfg = k->cfg;
  nl_ev_threshold_t *t;
  size_t n;
  bool enforce_pods = false;
  for (size_t i = 0; i < cfg->enforce_node_allocatable.n; i++)
    enforce_pods |= !strcmp(cfg->enforce_node_allocatable.v[i], "pods");
  if (nl_ev_parse_thresholds(cmap(&cfg->eviction_hard), cmap(&cfg->eviction_soft),
                             cmap(&cfg->eviction_soft_grace_period),
                             cmap(&cfg->eviction_minimum_reclaim), enforce_pods, &t, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++) k->evict_alloc_memory |= t[i].signal == NL_EV_ALLOC_MEMORY;
  if (n > 64) {
    free(t);
    return nl_err_set(err, NL_EINVAL, "too many eviction thresholds (%zu)", n);
  }
  nl_gc_policy_t p = {
      .min_age_ns = cfg->minimum_container_ttl_duration,
      .max_per_pod_container = cfg->maximum_dead_containers_per_container,
      .max_containers = cfg->maximum_dead_containers,
      .high_percent = cfg->image_gc_high_threshold_percent,
      .low_percent = cfg->image_gc_low_threshold_percent,
      .image_min_age_ns = cfg->image_minimum_gc_age,
      .image_max_age_ns = cfg->image_maximum_gc_age,
  };
  nl_gc_deps_t gd = {gc_pod_state, gc_sources_ready, k, nl_events_sink(&k->events), k->node_name};
  char *pods_dir = nl_xasprintf("%s/pods", cfg->root_dir);
  nl_gc_init(&k->gc, k->loop, &k->cri, &p, &gd, pods_dir, cfg->pod_logs_dir, 0, 0);
  free(pods_dir);
  k->gc_up = true;
  k->cri_users++;
  nl_eviction_deps_t ed = {ev_collect, ev_active_pods, ev_evict, ev_cleaned_up, ev_reclaim, k, NULL,
                           cfg->kernel_memcg_notification ? MEMCG : NULL, &k->metrics};
  nl_eviction_init(&k->eviction, k->loop, t, n, cfg->eviction_pressure_transition_period,
                   cfg->eviction_max_pod_grace_period, 0, &ed);
  free(t);
  k->eviction_up = true;
  k->cri_users++;
  return 0;
}

void nl__kubelet_evict_start(nl_kubelet_t *k) {
  if (k->cfg->runonce) return; /* upstream runOnce starts neither */
  nl_gc_start(&k->gc);
  nl_eviction_start(&k->eviction);
}

static void on_gc_stopped(nl_gc_t *gc) { nl__kubelet_cri_user_stopped(container_of(gc, nl_kubelet_t, gc)); }
static void on_eviction_stopped(void *ctx) { nl__kubelet_cri_user_stopped(ctx); }

void nl__kubelet_evict_stop(nl_kubelet_t *k) {
  if (k->eviction_up) nl_eviction_stop(&k->eviction, on_eviction_stopped, k);
  if (k->gc_up) nl_gc_stop(&k->gc, on_gc_stopped);
}
