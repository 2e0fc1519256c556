/* The PLEG state machine on the loop: WAITING -> LISTING -> INSPECTING ->
 * WAITING. One relist at a time; its CRI completions carry the relist run
 * (refcounted, detached from the pleg by stop), so a stopped pleg is never
 * touched by a late completion. */
#include "managers/pleg.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/runtime.h"
#include "managers/metrics.h"
#include "managers/pleg_internal.h"
#include "managers/termmsg.h"
#include "reactor/duration.h"
#include "reactor/grid.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

struct nl_pleg__entry { /* upstream cache data */
  nl_rt_pod_status_t *status;
  int64_t modified;
};

struct nl_pleg__waiter {
  nl_list_t link;
  uint64_t id;
  char *uid;
  int64_t after;
  nl_pleg_newer_cb cb;
  void *ctx;
};

typedef struct inspect_call {
  struct nl_pleg__relist *r;
  size_t pod;        /* index in r->pods */
  char *sandbox_id;  /* containers: their sandbox, for the status */
} inspect_call_t;

typedef struct inspect { /* one pod whose status is read this relist */
  char *uid, *name, *ns;
  nl_pleg__event_t *events;
  size_t n_events;
  bool has_pod;      /* false: the pod is gone from the runtime */
  bool failed;
  bool settling;     /* kept from the cache: nl_pleg__unsettled */
  char *error;       /* why it failed (the first error) */
  nl_rt_sandbox_t *sandboxes;
  size_t n_sandboxes;
  nl_rt_container_t *containers;
  size_t n_containers;
  inspect_call_t *calls;
  size_t n_calls;
} inspect_t;

struct nl_pleg__relist {
  nl_pleg_t *p; /* NULL once the pleg stopped: completions only release */
  int refs;
  int64_t timestamp;  /* p->now when the relist began */
  int64_t wall_start; /* the wall clock then (the last-seen metric) */
  uint64_t start_hr;  /* monotonic, for the duration */
  nl_map_t snap;      /* uid -> nl_pleg__pod_t*, filled by the lists that changed */
  uint64_t gen;       /* marks the records' items an unchanged list showed */
  uint64_t sandboxes_fp, containers_fp; /* the answers' fingerprints */
  bool same_sandboxes, same_containers; /* a list showed the records' current pods */
  int list_pending;
  char *list_error;
  inspect_t *pods;
  size_t n_pods;
  size_t inspect_pending;
  int64_t inspect_time;
  int64_t inspect_wall; /* the wall clock then: the runtime's exit times compare with it */
};

int64_t nl_pleg_monotonic_ns(void *unused) {
  (void)unused;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t nl_pleg_realtime_ns(void *unused) {
  (void)unused;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *nl_pleg_event_type_name(nl_pleg_event_type_t t) {
  switch (t) {
  case NL_PLEG_CONTAINER_STARTED: return "ContainerStarted";
  case NL_PLEG_CONTAINER_DIED: return "ContainerDied";
  case NL_PLEG_CONTAINER_REMOVED: return "ContainerRemoved";
  case NL_PLEG_POD_SYNC: return "PodSync";
  case NL_PLEG_CONTAINER_CHANGED: return "ContainerChanged";
  }
  return "Unknown";
}

static const char *state_name(nl_pleg_state_t s) {
  static const char *const names[] = {"idle", "waiting", "listing", "inspecting", "stopping",
                                      "stopped"};
  return names[s];
}

static void set_state(nl_pleg_t *p, nl_pleg_state_t s) {
  if (p->state != s) nl_vlog(5, "PLEG: %s -> %s", state_name(p->state), state_name(s));
  p->state = s;
}

/* ---- relist runs ------------------------------------------------------- */

static void inspect_clear(inspect_t *in) {
  free(in->uid);
  free(in->name);
  free(in->ns);
  free(in->error);
  nl_pleg__events_free(in->events, in->n_events);
  if (in->sandboxes || in->containers) {
    /* Results not handed to a status: free them through one. */
    nl_rt_pod_status_t *tmp = nl_xcalloc(1, sizeof(*tmp));
    tmp->sandboxes = in->sandboxes;
    tmp->n_sandboxes = in->n_sandboxes;
    tmp->containers = in->containers;
    tmp->n_containers = in->n_containers;
    nl_rt_pod_status_free(tmp);
  }
  for (size_t i = 0; i < in->n_calls; i++) free(in->calls[i].sandbox_id);
  free(in->calls);
}

static void relist_unref(struct nl_pleg__relist *r) {
  if (--r->refs > 0) return;
  nl_pleg__snapshot_free(&r->snap);
  for (size_t i = 0; i < r->n_pods; i++) inspect_clear(&r->pods[i]);
  free(r->pods);
  free(r->list_error);
  free(r);
}

static void on_relist_timer(uv_timer_t *t);

static uint64_t period(const nl_pleg_t *p) {
  return p->events_up ? NL_PLEG_EVENTED_RELIST_PERIOD_MS : p->period_ms;
}

/* On the loop's whole seconds (reactor/grid.h), where the probes' checks are
 * due: the relist and the probes of that second share a wake-up. */
static void schedule(nl_pleg_t *p, uint64_t delay_ms) {
  set_state(p, NL_PLEG_WAITING);
  uv_timer_start(&p->relist_timer, on_relist_timer,
                 nl_grid_delay(uv_now(p->loop), delay_ms, NL_GRID_MS), 0);
}

/* Ends the run (success or not) and arms the next one. */
static void relist_done(nl_pleg_t *p, struct nl_pleg__relist *r, bool ok) {
  p->relist_duration_ns = (int64_t)(uv_hrtime() - r->start_hr);
  if (p->metrics)
    nl_kmetrics_pleg_relist(p->metrics, r->timestamp, r->wall_start,
                            (uint64_t)p->relist_duration_ns, p->relist_time == r->timestamp);
  p->relists++;
  if (!ok) p->relist_failures++;
  p->cur = NULL;
  bool again = p->relist_again;
  p->relist_again = false;
  /* A pod to inspect again waits for the next relist, not for the runtime's
   * next event. */
  uint64_t next = period(p);
  if (nl_map_size(&p->reinspect) > 0 && next > p->period_ms) next = p->period_ms;
  schedule(p, again ? 0 : next);
  relist_unref(r); /* the pleg's reference */
}

/* ---- cache ------------------------------------------------------------- */

static void entry_free(void *v) {
  struct nl_pleg__entry *e = v;
  if (!e) return;
  nl_rt_pod_status_free(e->status);
  free(e);
}

static void record_free(void *v) {
  nl_pleg__record_t *rec = v;
  if (!rec) return;
  if (rec->old != rec->cur) nl_pleg__pod_free(rec->old);
  nl_pleg__pod_free(rec->cur);
  free(rec);
}

/* upstream cache.getIfNewerThan; *status is the cached status or NULL. */
static bool newer_than(const nl_pleg_t *p, const char *uid, int64_t after,
                       const nl_rt_pod_status_t **status) {
  const struct nl_pleg__entry *e = nl_map_get(&p->cache, uid);
  *status = e ? e->status : NULL;
  if (p->cache_time == 0 || nl_map_get(&p->reinspect, uid) == NL_PLEG__SETTLING)
    return e && e->modified > after;
  return (e && e->modified > after) || p->cache_time > after;
}

static void deliver_waiters(nl_pleg_t *p) {
  /* One at a time from the list itself: a callback may cancel another waiter,
   * add one, or stop the pleg. */
  for (;;) {
    if (p->state == NL_PLEG_STOPPING || p->state == NL_PLEG_STOPPED) return;
    struct nl_pleg__waiter *ready = NULL;
    const nl_rt_pod_status_t *st = NULL;
    nl_list_t *pos, *tmp;
    nl_list_foreach_safe(pos, tmp, &p->waiters) {
      struct nl_pleg__waiter *w = nl_list_entry(pos, struct nl_pleg__waiter, link);
      if (newer_than(p, w->uid, w->after, &st)) {
        ready = w;
        break;
      }
    }
    if (!ready) return;
    nl_list_remove(&ready->link);
    ready->cb(st, ready->ctx);
    free(ready->uid);
    free(ready);
  }
}

static void on_notify_timer(uv_timer_t *t) {
  deliver_waiters(container_of(t, nl_pleg_t, notify_timer));
}

/* ---- applying an inspected relist --------------------------------------- */

static void records_update(nl_pleg_t *p, const char *uid) {
  nl_pleg__record_t *rec = nl_map_get(&p->records, uid);
  if (!rec) return;
  if (!rec->cur) { /* the pod no longer exists */
    record_free(nl_map_del(&p->records, uid));
    return;
  }
  if (rec->old != rec->cur) nl_pleg__pod_free(rec->old);
  rec->old = rec->cur; /* shared until a relist lists the pod changed */
}

static void name_oom_killed(nl_rt_container_t *c) {
  free(c->reason);
  c->reason = nl_xstrdup("OOMKilled");
}

/* The first container of the pod whose exit reason may still change, after
 * naming OOMKilled those the kernel is known to have OOM-killed (containerd
 * never learns of an OOM kill that comes before its shim watches the cgroup). */
static nl_rt_container_t *settle(nl_pleg_t *p, inspect_t *in, int64_t wall_now) {
  nl_rt_container_t *c;
  while (in->has_pod &&
         (c = nl_pleg__unsettled(in->containers, in->n_containers, &p->stopping, wall_now))) {
    if (!p->oom_killed || !p->oom_killed(p->oom_ctx, c->id)) return c;
    nl_info("pod %s/%s: container %s: the runtime says %s but the kernel OOM-killed it: "
            "OOMKilled", in->ns ? in->ns : "", in->name ? in->name : "", c->id,
            c->reason ? c->reason : "no reason");
    name_oom_killed(c);
  }
  return NULL;
}

static void apply(struct nl_pleg__relist *r) {
  nl_pleg_t *p = r->p;
  nl_map_t reinspect;
  nl_map_init(&reinspect);
  for (size_t i = 0; i < r->n_pods; i++) {
    inspect_t *in = &r->pods[i];
    if (in->failed) {
      nl_vlog(4, "PLEG: Ignoring events for pod %s/%s (%s): %s", in->ns ? in->ns : "",
              in->name ? in->name : "", in->uid, in->error ? in->error : "");
      nl_map_put(&reinspect, in->uid, NL_PLEG__FAILED);
      continue;
    }
    struct nl_pleg__entry *e = nl_map_get(&p->cache, in->uid);
    nl_rt_container_t *c = settle(p, in, r->inspect_wall);
    if (c && e) {
      /* As a failed inspection, but the cache's time does not make the old
       * status newer either: no sync acts on it, no status shows "Error". A
       * pod new to the cache is not kept out of it: housekeeping would take
       * it for gone from the runtime and remove its directory. */
      nl_vlog(4, "PLEG: pod %s/%s (%s): container %s was killed and its runtime says %s: "
              "reading it again", in->ns ? in->ns : "", in->name ? in->name : "", in->uid,
              c->id, c->reason ? c->reason : "no reason");
      nl_map_put(&reinspect, in->uid, NL_PLEG__SETTLING);
      in->settling = true;
      continue;
    }
    if (!in->has_pod) {
      nl_vlog(4, "PLEG: Delete status for pod %s", in->uid);
      entry_free(nl_map_del(&p->cache, in->uid));
    } else {
      for (size_t j = 0; j < in->n_containers; j++) /* seen dead: the note has served */
        if (in->containers[j].state == NL_RT_CONTAINER_EXITED)
          nl_map_del(&p->stopping, in->containers[j].id);
      nl_rt_pod_status_t *st = nl_pleg__build_status(
          in->uid, in->name, in->ns, in->sandboxes, in->n_sandboxes, in->containers,
          in->n_containers, e ? e->status : NULL, r->inspect_time);
      in->sandboxes = NULL;
      in->containers = NULL;
      nl_vlog(4, "PLEG: Write status for pod %s/%s", in->ns ? in->ns : "", in->name ? in->name : "");
      if (!e) {
        e = nl_xcalloc(1, sizeof(*e));
        nl_map_put(&p->cache, in->uid, e);
      }
      nl_rt_pod_status_free(e->status);
      e->status = st;
      e->modified = r->inspect_time;
    }
    records_update(p, in->uid);
  }
  nl_map_free(&p->reinspect, NULL);
  p->reinspect = reinspect;
  /* After every pod is updated (upstream cache.UpdateTime). */
  p->cache_time = r->timestamp;
  relist_done(p, r, true);

  for (size_t i = 0; i < r->n_pods; i++) {
    inspect_t *in = &r->pods[i];
    if (in->failed || in->settling) continue;
    for (size_t j = 0; j < in->n_events; j++) {
      if (in->events[j].type == NL_PLEG_CONTAINER_CHANGED) continue; /* unreliable */
      nl_pleg_event_t ev = {in->uid, in->events[j].type, in->events[j].container_id};
      nl_vlog(4, "PLEG: pod %s: %s %s", in->uid, nl_pleg_event_type_name(ev.type),
              ev.container_id);
      p->event_cb(&ev, p->ctx);
      /* The callback may have stopped the pleg (its memory lives until the
       * close callbacks, which run on a later iteration). */
      if (p->state == NL_PLEG_STOPPING || p->state == NL_PLEG_STOPPED) return;
    }
  }
  deliver_waiters(p);
}

/* ---- inspection -------------------------------------------------------- */

static void inspect_fail(inspect_t *in, const nl_grpc_status_t *st, const char *what) {
  if (!in->failed) {
    char *m = st ? nl_grpc_status_format(st) : NULL;
    in->error = nl_xasprintf("%s: %s", what, m ? m : "invalid response");
    free(m);
  }
  in->failed = true;
}

/* Called by each status completion after it recorded its result. */
static void inspect_step(struct nl_pleg__relist *r) {
  if (r->p && --r->inspect_pending == 0) apply(r);
  relist_unref(r);
}

/* Fills the pod's next slot from one status reply's status; fails leaving the
 * slot unused. */
typedef int (*inspect_add_fn)(inspect_t *in, const inspect_call_t *c, const void *status,
                              nl_err_t **err);

static int add_sandbox(inspect_t *in, const inspect_call_t *c, const void *status,
                       nl_err_t **err) {
  (void)c;
  if (nl_pleg__convert_sandbox(status, &in->sandboxes[in->n_sandboxes], err) < 0) return -1;
  in->n_sandboxes++;
  return 0;
}

typedef struct termmsg_call { /* one termination message being read */
  struct nl_pleg__relist *r;
  size_t pod, container; /* indexes in r->pods and its containers */
} termmsg_call_t;

static void inspect_step(struct nl_pleg__relist *r);

static void on_termmsg(const char *msg, void *ctx) {
  termmsg_call_t *t = ctx;
  struct nl_pleg__relist *r = t->r;
  if (r->p) nl_pleg__add_termmsg(&r->pods[t->pod].containers[t->container], msg);
  free(t);
  inspect_step(r);
}

static const nl_rt_container_t *cached_container(const nl_pleg_t *p, const char *uid,
                                                 const char *id) {
  const struct nl_pleg__entry *e = nl_map_get(&p->cache, uid);
  for (size_t i = 0; e && i < e->status->n_containers; i++)
    if (!strcmp(e->status->containers[i].id, id)) return &e->status->containers[i];
  return NULL;
}

/* Completes an exited container: its message with its termination message;
 * the inspection waits for the read (thread pool), as upstream's GetPodStatus
 * reads it before the status is cached. This covers containers that died while
 * the agent was down too: the first relist inspects every pod. */
static void complete_exited(struct nl_pleg__relist *r, size_t pod, size_t idx,
                            const Runtime__V1__ContainerStatus *s) {
  nl_rt_container_t *c = &r->pods[pod].containers[idx];
  const char *host_path;
  bool fallback;
  if (c->state != NL_RT_CONTAINER_EXITED) return;
  /* A dead container's message never changes, nor the OOMKilled that an
   * earlier relist named (settle) where the runtime still says Error: keep
   * what an earlier relist read. */
  const nl_rt_container_t *prev = cached_container(r->p, r->pods[pod].uid, c->id);
  if (prev && prev->state == NL_RT_CONTAINER_EXITED) {
    free(c->message);
    c->message = prev->message ? nl_xstrdup(prev->message) : NULL;
    if (prev->reason && !strcmp(prev->reason, "OOMKilled") && nl_pleg__generic_reason(c))
      name_oom_killed(c);
    return;
  }
  if (!nl_pleg__termmsg_source(s, &host_path, &fallback)) return;
  termmsg_call_t *t = nl_xcalloc(1, sizeof(*t));
  *t = (termmsg_call_t){r, pod, idx};
  int rc = nl_termmsg_read(r->p->loop, host_path, fallback, c->log_path, on_termmsg, t);
  if (rc < 0) {
    nl_warn("container %s: termination message not read: %s", c->id, uv_strerror(rc));
    free(t);
    return;
  }
  r->inspect_pending++;
  r->refs++;
}

static int add_container(inspect_t *in, const inspect_call_t *c, const void *status,
                         nl_err_t **err) {
  if (nl_pleg__convert_container(status, c->sandbox_id, &in->containers[in->n_containers], err) < 0)
    return -1;
  complete_exited(c->r, c->pod, in->n_containers++, status);
  return 0;
}

/* One PodSandboxStatus or ContainerStatus reply (what) for call c: OK adds the
 * status (status NULL: nil_msg fails the pod), NotFound means it was removed
 * meanwhile, anything else fails the pod. */
static void inspect_reply(inspect_call_t *c, const nl_grpc_status_t *st, const void *status,
                          const char *what, const char *nil_msg, inspect_add_fn add) {
  struct nl_pleg__relist *r = c->r;
  if (r->p) {
    inspect_t *in = &r->pods[c->pod];
    if (st->code == NL_GRPC_OK) {
      nl_err_t *err = NULL;
      if (!status) {
        inspect_fail(in, NULL, nil_msg);
      } else if (add(in, c, status, &err) < 0) {
        inspect_fail(in, NULL, nl_err_msg(err));
        nl_err_free(&err);
      }
    } else if (st->code != NL_GRPC_NOT_FOUND) {
      inspect_fail(in, st, what);
    }
  }
  inspect_step(r);
}

static void on_sandbox_status(const nl_grpc_status_t *st, Runtime__V1__PodSandboxStatusResponse *resp,
                              void *ctx) {
  inspect_reply(ctx, st, resp ? resp->status : NULL, "PodSandboxStatus",
                "PodSandboxStatus: pod sandbox status is nil", add_sandbox);
}

static void on_container_status(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *resp,
                                void *ctx) {
  inspect_reply(ctx, st, resp ? resp->status : NULL, "ContainerStatus",
                "ContainerStatus: container status is nil", add_container);
}

/* setCurrent: the snapshot's pods become the records' current pods. */
static void set_current(nl_pleg_t *p, nl_map_t *snap) {
  nl_map_iter_t it;
  const char *uid;
  void *v;
  nl_map_iter_init(&it, &p->records);
  while (nl_map_iter_next(&it, &uid, &v)) {
    nl_pleg__record_t *rec = v;
    if (rec->cur != rec->old) nl_pleg__pod_free(rec->cur);
    rec->cur = NULL;
  }
  nl_map_iter_init(&it, snap);
  while (nl_map_iter_next(&it, &uid, &v)) {
    nl_pleg__record_t *rec = nl_map_get(&p->records, uid);
    if (!rec) {
      rec = nl_xcalloc(1, sizeof(*rec));
      nl_map_put(&p->records, uid, rec);
    }
    rec->cur = v;
  }
  nl_map_free(snap, NULL); /* the pods now belong to the records */
  nl_map_init(snap);
}

/* Queues the pod for inspection when it has events or failed last time. */
static void consider(struct nl_pleg__relist *r, const char *uid, const nl_pleg__record_t *rec,
                     size_t *cap) {
  nl_pleg__event_t *ev = NULL;
  size_t n = nl_pleg__compute_events(rec->old, rec->cur, &ev);
  if (n == 0 && !nl_map_has(&r->p->reinspect, uid)) return;
  if (r->n_pods == *cap) {
    *cap = *cap ? 2 * *cap : 8;
    r->pods = nl_xrealloc(r->pods, *cap * sizeof(*r->pods));
  }
  inspect_t *in = &r->pods[r->n_pods++];
  memset(in, 0, sizeof(*in));
  in->uid = nl_xstrdup(uid);
  in->events = ev;
  in->n_events = n;
  const nl_pleg__pod_t *pod = rec->cur;
  in->has_pod = pod != NULL;
  if (!pod) return;
  in->name = pod->name ? nl_xstrdup(pod->name) : NULL;
  in->ns = pod->namespace_ ? nl_xstrdup(pod->namespace_) : NULL;
  in->calls = nl_xcalloc(pod->n_items ? pod->n_items : 1, sizeof(*in->calls));
  size_t nsb = 0;
  for (size_t i = 0; i < pod->n_items; i++) nsb += pod->items[i].sandbox;
  in->sandboxes = nl_xcalloc(nsb ? nsb : 1, sizeof(*in->sandboxes));
  in->containers = nl_xcalloc(pod->n_items - nsb ? pod->n_items - nsb : 1, sizeof(*in->containers));
}

/* changed: the lists differ from the records (r->snap holds them whole).
 * Otherwise only the pods whose inspection failed last time can have events,
 * and nothing per pod is allocated. */
static void start_inspection(struct nl_pleg__relist *r, bool changed) {
  nl_pleg_t *p = r->p;
  p->relist_time = r->timestamp; /* the lists worked: PLEG is alive */
  if (changed) set_current(p, &r->snap);

  nl_map_iter_t it;
  const char *uid;
  void *v;
  size_t cap = 0;
  nl_map_iter_init(&it, changed ? &p->records : &p->reinspect);
  while (nl_map_iter_next(&it, &uid, &v)) {
    const nl_pleg__record_t *rec = changed ? v : nl_map_get(&p->records, uid);
    if (rec) consider(r, uid, rec, &cap);
  }
  set_state(p, NL_PLEG_INSPECTING);
  r->inspect_time = p->now(p->clock_ctx);
  r->inspect_wall = nl_pleg_realtime_ns(NULL);

  /* Count every call before issuing any (completions never run inside the
   * call functions, but keep the count honest regardless). */
  for (size_t k = 0; k < r->n_pods; k++) {
    const nl_pleg__pod_t *pod = r->pods[k].has_pod ? ((nl_pleg__record_t *)nl_map_get(
                                                          &p->records, r->pods[k].uid))->cur
                                                   : NULL;
    if (pod) r->inspect_pending += pod->n_items;
  }
  r->refs++; /* held across issuing */
  for (size_t k = 0; k < r->n_pods; k++) {
    inspect_t *in = &r->pods[k];
    if (!in->has_pod) continue;
    const nl_pleg__pod_t *pod = ((nl_pleg__record_t *)nl_map_get(&p->records, in->uid))->cur;
    for (size_t i = 0; i < pod->n_items; i++) {
      const nl_pleg__item_t *item = &pod->items[i];
      inspect_call_t *c = &in->calls[in->n_calls++];
      c->r = r;
      c->pod = k;
      r->refs++;
      if (item->sandbox) {
        Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
        req.pod_sandbox_id = item->id;
        nl_cri_pod_sandbox_status(p->cri, &req, on_sandbox_status, c);
      } else {
        c->sandbox_id = item->sandbox_id ? nl_xstrdup(item->sandbox_id) : NULL;
        Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
        req.container_id = item->id;
        nl_cri_container_status(p->cri, &req, on_container_status, c);
      }
    }
  }
  if (r->p && r->inspect_pending == 0) apply(r);
  relist_unref(r);
}

/* ---- listing ----------------------------------------------------------- */

static void list_step(struct nl_pleg__relist *r, const nl_grpc_status_t *st, const char *what) {
  if (r->p && st->code != NL_GRPC_OK && !r->list_error) {
    char *m = nl_grpc_status_format(st);
    r->list_error = nl_xasprintf("%s: %s", what, m);
    free(m);
  }
  if (r->p && --r->list_pending == 0) {
    if (r->list_error) {
      nl_error("GenericPLEG: Unable to retrieve pods: %s", r->list_error);
      relist_done(r->p, r, false);
      relist_unref(r);
      return;
    }
    /* The records are, or become, these answers: their fingerprints stand for
     * them (an answer whose bytes differ in what a relist does not read is the
     * records' too). */
    r->p->sandboxes_fp = r->sandboxes_fp;
    r->p->containers_fp = r->containers_fp;
    if (r->same_sandboxes && r->same_containers) {
      start_inspection(r, false);
    } else {
      if (r->same_sandboxes) nl_pleg__copy_current(&r->snap, &r->p->records, true);
      if (r->same_containers) nl_pleg__copy_current(&r->snap, &r->p->records, false);
      start_inspection(r, true);
    }
  }
  relist_unref(r);
}

static void on_list_sandboxes(const nl_grpc_status_t *st,
                              Runtime__V1__Brief__ListPodSandboxResponse *resp,
                              void *ctx) {
  struct nl_pleg__relist *r = ctx;
  if (r->p && st->code == NL_GRPC_OK) {
    /* no answer: the one the records hold (its fingerprint) */
    if (!resp) r->p->lists_same_fp++;
    if (!resp || nl_pleg__sandboxes_unchanged(&r->p->records, resp, r->gen)) r->same_sandboxes = true;
    else nl_pleg__add_sandboxes(&r->snap, resp);
  }
  list_step(r, st, "ListPodSandbox");
}

static void on_list_containers(const nl_grpc_status_t *st,
                               Runtime__V1__Brief__ListContainersResponse *resp,
                               void *ctx) {
  struct nl_pleg__relist *r = ctx;
  if (r->p && st->code == NL_GRPC_OK) {
    if (!resp) r->p->lists_same_fp++;
    if (!resp || nl_pleg__containers_unchanged(&r->p->records, resp, r->gen))
      r->same_containers = true;
    else nl_pleg__add_containers(&r->snap, resp);
  }
  list_step(r, st, "ListContainers");
}

static void relist_start(nl_pleg_t *p) {
  nl_vlog(5, "GenericPLEG: Relisting");
  struct nl_pleg__relist *r = nl_xcalloc(1, sizeof(*r));
  r->p = p;
  r->refs = 1; /* the pleg's, dropped by relist_done or stop */
  r->timestamp = p->now(p->clock_ctx);
  r->wall_start = nl_pleg_realtime_ns(NULL);
  r->start_hr = uv_hrtime();
  nl_map_init(&r->snap);
  r->gen = ++p->list_gen;
  r->list_pending = 2;
  p->cur = r;
  set_state(p, NL_PLEG_LISTING);
  Runtime__V1__ListPodSandboxRequest sreq = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
  Runtime__V1__ListContainersRequest creq = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
  r->refs += 2;
  nl_cri_list_pod_sandbox_brief(p->cri, &sreq, p->sandboxes_fp, &r->sandboxes_fp, on_list_sandboxes,
                                r);
  nl_cri_list_containers_brief(p->cri, &creq, p->containers_fp, &r->containers_fp,
                               on_list_containers, r);
}

static void on_relist_timer(uv_timer_t *t) {
  nl_pleg_t *p = container_of(t, nl_pleg_t, relist_timer);
  if (p->state == NL_PLEG_WAITING) relist_start(p);
}

/* ---- public ------------------------------------------------------------ */

int nl_pleg_init(nl_pleg_t *p, uv_loop_t *loop, nl_cri_client_t *cri, uint64_t period_ms,
                 nl_pleg_event_cb event_cb, void *ctx) {
  memset(p, 0, sizeof(*p));
  p->loop = loop;
  p->cri = cri;
  p->period_ms = period_ms ? period_ms : NL_PLEG_DEFAULT_RELIST_PERIOD_MS;
  p->event_cb = event_cb;
  p->ctx = ctx;
  p->now = nl_pleg_monotonic_ns;
  p->next_waiter_id = 1;
  nl_map_init(&p->records);
  nl_map_init(&p->cache);
  nl_map_init(&p->reinspect);
  nl_map_init(&p->stopping);
  nl_list_init(&p->waiters);
  uv_timer_init(loop, &p->relist_timer);
  uv_timer_init(loop, &p->notify_timer);
  p->open_handles = 2;
  p->state = NL_PLEG_IDLE;
  return 0;
}

/* ---- the runtime's events ------------------------------------------------ */

static void on_cri_event(const ProtobufCMessage *m, void *ctx) {
  nl_pleg_t *p = ctx;
  const Runtime__V1__ContainerEventResponse *ev = (const void *)m;
  p->events++;
  nl_vlog(4, "Evented PLEG: container %s: event %d", ev->container_id,
          (int)ev->container_event_type);
  if (!p->events_up) nl_info("Evented PLEG: the runtime's container events are back");
  p->events_up = true;
  nl_pleg_force_relist(p);
}

static void on_cri_events_end(const nl_grpc_status_t *st, void *ctx) {
  nl_pleg_t *p = ctx;
  if (!p->events_up) return;
  p->events_up = false;
  if (st->code == NL_GRPC_UNIMPLEMENTED)
    nl_info("Evented PLEG: the runtime has no container events (%s): relisting every %llu ms",
            st->message, (unsigned long long)p->period_ms);
  else
    nl_warn("Evented PLEG: Failed to get container events, relisting every %llu ms until they "
            "are back: %s", (unsigned long long)p->period_ms, st->message);
  if (p->state == NL_PLEG_WAITING &&
      uv_timer_get_due_in(&p->relist_timer) > p->period_ms)
    uv_timer_start(&p->relist_timer, on_relist_timer, p->period_ms, 0);
}

void nl_pleg_use_events(nl_pleg_t *p) { p->events_wanted = true; }

void nl_pleg_start(nl_pleg_t *p) {
  if (p->state != NL_PLEG_IDLE) return;
  set_state(p, NL_PLEG_WAITING);
  uv_timer_start(&p->relist_timer, on_relist_timer, 0, 0);
  if (!p->events_wanted) return;
  p->events_up = true; /* until the stream says otherwise */
  nl_cri_client_watch_events(p->cri, on_cri_event, on_cri_events_end, p);
}

void nl_pleg_force_relist(nl_pleg_t *p) {
  switch (p->state) {
  case NL_PLEG_WAITING: uv_timer_start(&p->relist_timer, on_relist_timer, 0, 0); break;
  case NL_PLEG_LISTING:
  case NL_PLEG_INSPECTING: p->relist_again = true; break;
  default: break;
  }
}

void nl_pleg_set_oom_source(nl_pleg_t *p, nl_pleg_oom_fn fn, void *ctx) {
  p->oom_killed = fn;
  p->oom_ctx = ctx;
}

/* A note outlives its container only when the container went before a relist
 * saw it dead; the map stays small by dropping notes too old to matter (a
 * dropped note costs the container's exit one settling wait). */
#define STOPPING_MAX 256
#define STOPPING_MAX_AGE_S (10 * 60)

void nl_pleg_stopping(nl_pleg_t *p, const char *container_id) {
  uintptr_t now_s = (uintptr_t)(p->now(p->clock_ctx) / 1000000000);
  if (nl_map_size(&p->stopping) >= STOPPING_MAX) {
    nl_map_iter_t it;
    const char *id;
    void *v;
    nl_map_t keep;
    nl_map_init(&keep);
    nl_map_iter_init(&it, &p->stopping);
    while (nl_map_iter_next(&it, &id, &v))
      if (now_s - (uintptr_t)v < STOPPING_MAX_AGE_S && nl_map_size(&keep) < STOPPING_MAX / 2)
        nl_map_put(&keep, id, v);
    nl_map_free(&p->stopping, NULL);
    p->stopping = keep;
  }
  nl_map_put(&p->stopping, container_id, (void *)now_s);
}

static void on_close(uv_handle_t *h) {
  nl_pleg_t *p = h->data;
  if (--p->open_handles > 0) return;
  set_state(p, NL_PLEG_STOPPED);
  if (p->stop_cb) p->stop_cb(p);
}

void nl_pleg_stop(nl_pleg_t *p, nl_pleg_stop_cb done_cb) {
  if (p->state == NL_PLEG_STOPPING || p->state == NL_PLEG_STOPPED) return;
  set_state(p, NL_PLEG_STOPPING);
  p->stop_cb = done_cb;
  if (p->events_wanted) nl_cri_client_unwatch_events(p->cri);
  p->events_up = false;
  if (p->cur) {
    p->cur->p = NULL; /* late completions only release the run */
    relist_unref(p->cur);
    p->cur = NULL;
  }
  nl_map_free(&p->records, record_free);
  nl_map_free(&p->cache, entry_free);
  nl_map_free(&p->reinspect, NULL);
  nl_map_free(&p->stopping, NULL);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &p->waiters) {
    struct nl_pleg__waiter *w = nl_list_entry(pos, struct nl_pleg__waiter, link);
    nl_list_remove(pos);
    free(w->uid);
    free(w);
  }
  uv_timer_stop(&p->relist_timer);
  uv_timer_stop(&p->notify_timer);
  p->relist_timer.data = p;
  p->notify_timer.data = p;
  uv_close((uv_handle_t *)&p->relist_timer, on_close);
  uv_close((uv_handle_t *)&p->notify_timer, on_close);
}

const nl_rt_pod_status_t *nl_pleg_get(const nl_pleg_t *p, const char *uid) {
  const struct nl_pleg__entry *e = nl_map_get(&p->cache, uid);
  return e ? e->status : NULL;
}

int64_t nl_pleg_cache_time(const nl_pleg_t *p, const char *uid) {
  const struct nl_pleg__entry *e = nl_map_get(&p->cache, uid);
  return e ? e->modified : 0;
}

uint64_t nl_pleg_when_newer(nl_pleg_t *p, const char *uid, int64_t after_ns,
                            nl_pleg_newer_cb cb, void *ctx) {
  struct nl_pleg__waiter *w = nl_xcalloc(1, sizeof(*w));
  w->id = p->next_waiter_id++;
  w->uid = nl_xstrdup(uid);
  w->after = after_ns;
  w->cb = cb;
  w->ctx = ctx;
  if (p->state == NL_PLEG_STOPPING || p->state == NL_PLEG_STOPPED) {
    uint64_t id = w->id; /* never called: the pleg is going away */
    free(w->uid);
    free(w);
    return id;
  }
  nl_list_insert_tail(&p->waiters, &w->link);
  const nl_rt_pod_status_t *st;
  if (newer_than(p, uid, after_ns, &st)) uv_timer_start(&p->notify_timer, on_notify_timer, 0, 0);
  return w->id;
}

bool nl_pleg_is_newer(const nl_pleg_t *p, const char *uid, int64_t after_ns) {
  const nl_rt_pod_status_t *st;
  return newer_than(p, uid, after_ns, &st);
}

bool nl_pleg_cancel_when_newer(nl_pleg_t *p, uint64_t id) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &p->waiters) {
    struct nl_pleg__waiter *w = nl_list_entry(pos, struct nl_pleg__waiter, link);
    if (w->id != id) continue;
    nl_list_remove(pos);
    free(w->uid);
    free(w);
    return true;
  }
  return false;
}

bool nl_pleg_healthy(const nl_pleg_t *p, int64_t now_ns, nl_err_t **err) {
  if (p->relist_time == 0) {
    if (err) nl_err_set(err, NL_ETIMEOUT, "pleg has yet to be successful");
    return false;
  }
  int64_t elapsed = now_ns - p->relist_time;
  int64_t threshold = p->events_up ? NL_PLEG_EVENTED_RELIST_THRESHOLD_NS : NL_PLEG_RELIST_THRESHOLD_NS;
  if (elapsed > threshold) {
    char a[64], b[64];
    if (err)
      nl_err_set(err, NL_ETIMEOUT, "pleg was last seen active %s ago; threshold is %s",
                 nl_duration_format(elapsed, a, sizeof(a)),
                 nl_duration_format(threshold, b, sizeof(b)));
    return false;
  }
  return true;
}

void nl_pleg_foreach(const nl_pleg_t *p, nl_pleg_iter_cb cb, void *ctx) {
  nl_map_iter_t it;
  const char *uid;
  void *v;
  nl_map_iter_init(&it, &p->cache);
  while (nl_map_iter_next(&it, &uid, &v)) {
    const struct nl_pleg__entry *e = v;
    if (e->status && !cb(e->status, ctx)) return;
  }
}
