/* v1 PodStatus generation, as upstream's generateAPIPodStatus and its helpers
 * (see status.h for the map). Feature-gated upstream behaviour follows the
 * gates' defaults in 1.36: PodReadyToStartContainersCondition, ContainerRestartRules
 * and RestartAllContainersOnContainerExits on; ChangeContainerStatusOnKubeletRestart off. */
#include "managers/status.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "managers/termmsg.h"
#include "reactor/log.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

#define REASON_CONTAINER_CREATING "ContainerCreating"
#define REASON_POD_INITIALIZING "PodInitializing"
#define REASON_STATUS_UNKNOWN "ContainerStatusUnknown"
#define REASON_RESTARTING_ALL "RestartingAllContainers"
#define MESSAGE_RESTARTING_ALL "The container is removed because RestartAllContainers in place"

static char *xdup(const char *s) { return s ? nl_xstrdup(s) : NULL; }
static bool empty(const char *s) { return !s || !*s; }
static int64_t secs(int64_t ns) { return ns > 0 ? ns / 1000000000 : 0; }

const char *nl_pod_phase_name(nl_pod_phase_t p) {
  static const char *const names[] = {"Pending", "Running", "Succeeded", "Failed", "Unknown"};
  return (unsigned)p < 5 ? names[p] : "Unknown";
}

/* ---- ownership helpers -------------------------------------------------- */

static void cstate_free(nl_cstate_t *s) {
  free(s->reason);
  free(s->message);
  free(s->container_id);
  memset(s, 0, sizeof(*s));
}

static void cstate_copy(nl_cstate_t *dst, const nl_cstate_t *src) {
  *dst = *src;
  dst->reason = xdup(src->reason);
  dst->message = xdup(src->message);
  dst->container_id = xdup(src->container_id);
}

static void alloc_status_free(nl_resource_status_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < v[i].n_resources; j++) {
      free(v[i].resources[j].id);
      free(v[i].resources[j].message);
    }
    free(v[i].resources);
    free(v[i].name);
  }
  free(v);
}

nl_resource_status_t *nl_container_status_resource(nl_container_status_t *c, const char *name) {
  for (size_t i = 0; i < c->n_alloc_status; i++) {
    nl_resource_status_t *r = &c->alloc_status[i];
    if (strcmp(r->name, name) != 0) continue;
    for (size_t j = 0; j < r->n_resources; j++) {
      free(r->resources[j].id);
      free(r->resources[j].message);
    }
    r->n_resources = 0;
    return r;
  }
  c->alloc_status = nl_xrealloc(c->alloc_status, (c->n_alloc_status + 1) * sizeof *c->alloc_status);
  nl_resource_status_t *r = &c->alloc_status[c->n_alloc_status++];
  *r = (nl_resource_status_t){.name = nl_xstrdup(name)};
  return r;
}

void nl_resource_status_add(nl_resource_status_t *r, const char *id, const char *health,
                            const char *message) {
  r->resources = nl_xrealloc(r->resources, (r->n_resources + 1) * sizeof *r->resources);
  r->resources[r->n_resources++] =
      (nl_resource_health_t){nl_xstrdup(id), health, message ? nl_xstrdup(message) : NULL};
}

static void cstatus_free(nl_container_status_t *c) {
  alloc_status_free(c->alloc_status, c->n_alloc_status);
  free(c->name);
  cstate_free(&c->state);
  cstate_free(&c->last_state);
  free(c->image);
  free(c->image_id);
  free(c->container_id);
  free(c->allocated_json);
  free(c->resources_json);
  free(c->volume_mounts_json);
  nl_rt_user_free(&c->user);
  memset(c, 0, sizeof(*c));
}

static void cstatus_copy(nl_container_status_t *dst, const nl_container_status_t *src) {
  *dst = *src;
  dst->name = xdup(src->name);
  cstate_copy(&dst->state, &src->state);
  cstate_copy(&dst->last_state, &src->last_state);
  dst->image = xdup(src->image);
  dst->image_id = xdup(src->image_id);
  dst->container_id = xdup(src->container_id);
  dst->allocated_json = xdup(src->allocated_json);
  dst->resources_json = xdup(src->resources_json);
  dst->volume_mounts_json = xdup(src->volume_mounts_json);
  nl_rt_user_copy(&dst->user, &src->user);
  dst->alloc_status = NULL;
  dst->n_alloc_status = 0;
  for (size_t i = 0; i < src->n_alloc_status; i++) {
    const nl_resource_status_t *r = &src->alloc_status[i];
    nl_resource_status_t *d = nl_container_status_resource(dst, r->name);
    for (size_t j = 0; j < r->n_resources; j++)
      nl_resource_status_add(d, r->resources[j].id, r->resources[j].health,
                             r->resources[j].message);
  }
}

static char **strv_dup(char *const *v, size_t n) {
  if (!n) return NULL;
  char **out = nl_xcalloc(n, sizeof(*out));
  for (size_t i = 0; i < n; i++) out[i] = xdup(v[i]);
  return out;
}

static void strv_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

void nl_pod_status_free(nl_pod_status_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_conditions; i++) {
    free(s->conditions[i].reason);
    free(s->conditions[i].message);
  }
  free(s->conditions);
  free(s->message);
  free(s->reason);
  free(s->host_ip);
  strv_free(s->host_ips, s->n_host_ips);
  free(s->pod_ip);
  strv_free(s->pod_ips, s->n_pod_ips);
  for (size_t i = 0; i < s->n_init_container_statuses; i++)
    cstatus_free(&s->init_container_statuses[i]);
  free(s->init_container_statuses);
  for (size_t i = 0; i < s->n_container_statuses; i++) cstatus_free(&s->container_statuses[i]);
  free(s->container_statuses);
  for (size_t i = 0; i < s->n_ephemeral_container_statuses; i++)
    cstatus_free(&s->ephemeral_container_statuses[i]);
  free(s->ephemeral_container_statuses);
  free(s->allocated_json);
  free(s->resources_json);
  free(s);
}

static nl_container_status_t *cstatuses_dup(const nl_container_status_t *s, size_t n) {
  nl_container_status_t *d = n ? nl_xcalloc(n, sizeof(*d)) : NULL;
  for (size_t i = 0; i < n; i++) cstatus_copy(&d[i], &s[i]);
  return d;
}

nl_pod_status_t *nl_pod_status_dup(const nl_pod_status_t *s) {
  nl_pod_status_t *d = nl_xcalloc(1, sizeof(*d));
  *d = *s;
  d->conditions = s->n_conditions ? nl_xcalloc(s->n_conditions, sizeof(*d->conditions)) : NULL;
  for (size_t i = 0; i < s->n_conditions; i++) {
    d->conditions[i] = s->conditions[i];
    d->conditions[i].reason = xdup(s->conditions[i].reason);
    d->conditions[i].message = xdup(s->conditions[i].message);
  }
  d->message = xdup(s->message);
  d->reason = xdup(s->reason);
  d->host_ip = xdup(s->host_ip);
  d->host_ips = strv_dup(s->host_ips, s->n_host_ips);
  d->pod_ip = xdup(s->pod_ip);
  d->pod_ips = strv_dup(s->pod_ips, s->n_pod_ips);
  d->init_container_statuses = cstatuses_dup(s->init_container_statuses, s->n_init_container_statuses);
  d->container_statuses = cstatuses_dup(s->container_statuses, s->n_container_statuses);
  d->ephemeral_container_statuses =
      cstatuses_dup(s->ephemeral_container_statuses, s->n_ephemeral_container_statuses);
  d->allocated_json = xdup(s->allocated_json);
  d->resources_json = xdup(s->resources_json);
  return d;
}

/* ---- small predicates (upstream podutil / kubecontainer helpers) -------- */

static bool is_sidecar(const nl_container_t *c) { /* IsRestartableInitContainer */
  return c->restart_policy && strcmp(c->restart_policy, "Always") == 0;
}

static bool is_static_pod(const nl_pod_t *pod) {
  const char *src = nl_kvlist_get(&pod->metadata.annotations, NL_ANNOTATION_CONFIG_SOURCE);
  return src && strcmp(src, "api") != 0;
}


/* kubecontainer.ShouldContainerBeRestarted. */
static bool should_be_restarted(const nl_pod_t *pod, const nl_container_t *c,
                                const nl_rt_pod_status_t *rt, bool deleted) {
  if (deleted) return false;
  const nl_rt_container_t *s = nl_rt_pod_status_find(rt, c->name);
  if (!s) return true;
  if (s->state == NL_RT_CONTAINER_RUNNING) return false;
  if (s->state == NL_RT_CONTAINER_UNKNOWN || s->state == NL_RT_CONTAINER_CREATED) return true;
  return nl_container_should_restart(&pod->spec, c, s->exit_code);
}

static bool spec_has_container(const nl_pod_t *pod, const char *name) {
  for (size_t i = 0; i < pod->spec.n_containers; i++)
    if (strcmp(pod->spec.containers[i].name, name) == 0) return true;
  return false;
}

/* kuberuntime.HasAnyRegularContainerCreated */
static bool any_regular_created(const nl_pod_t *pod, const nl_rt_pod_status_t *rt) {
  for (size_t i = 0; i < pod->spec.n_containers; i++) {
    const nl_rt_container_t *s = nl_rt_pod_status_find(rt, pod->spec.containers[i].name);
    if (s && s->state != NL_RT_CONTAINER_UNKNOWN) return true;
  }
  return false;
}

/* kubecontainer.HasAnyActiveRegularContainerStarted: a regular container of
 * the newest sandbox exists. */
static bool any_active_regular_started(const nl_pod_t *pod, const nl_rt_pod_status_t *rt) {
  if (!rt || !rt->n_sandboxes || !rt->sandboxes[0].id) return false;
  for (size_t i = 0; i < rt->n_containers; i++) {
    const nl_rt_container_t *c = &rt->containers[i];
    if (c->sandbox_id && strcmp(c->sandbox_id, rt->sandboxes[0].id) == 0 &&
        spec_has_container(pod, c->name))
      return true;
  }
  return false;
}

/* runtimeutil.PodSandboxChanged, the "needs a new sandbox" part. */
static bool sandbox_changed(const nl_pod_t *pod, const nl_rt_pod_status_t *rt) {
  if (!rt || !rt->n_sandboxes) return true;
  size_t ready = 0;
  for (size_t i = 0; i < rt->n_sandboxes; i++) ready += rt->sandboxes[i].state == NL_RT_SANDBOX_READY;
  const nl_rt_sandbox_t *sb = &rt->sandboxes[0];
  if (ready > 1 || sb->state != NL_RT_SANDBOX_READY) return true;
  if (sb->host_network != pod->spec.host_network) return true;
  if (!pod->spec.host_network && empty(sb->ip)) return true;
  return false;
}

static const nl_container_status_t *find_status(const nl_container_status_t *v, size_t n,
                                                const char *name) {
  for (size_t i = 0; v && i < n; i++)
    if (v[i].name && strcmp(v[i].name, name) == 0) return &v[i];
  return NULL;
}

/* ---- container statuses (convertToAPIContainerStatuses) ------------------ */

typedef struct gen {
  const nl_pod_t *pod;
  const nl_rt_pod_status_t *rt;
  const nl_status_reasons_t *reasons;
  const char *scheme;
  bool deleted;
  bool has_init;
  bool restarting; /* upstream ShouldAllContainersRestart: an in-place restart of all */
  const nl_status_opts_t *opts;
} gen_t;

static char *container_id(const gen_t *g, const char *id) {
  return id ? nl_xasprintf("%s://%s", g->scheme, id) : NULL;
}

static void convert_one(const gen_t *g, const nl_rt_container_t *cs, const nl_container_status_t *old,
                        nl_container_status_t *out) {
  memset(out, 0, sizeof(*out));
  out->started = -1;
  out->name = xdup(cs->name);
  out->restart_count = cs->restart_count;
  out->image = nl_xstrdup(cs->image ? cs->image : "");
  /* The digested image ref is the public imageID, historically. */
  out->image_id = nl_xstrdup(cs->image_ref ? cs->image_ref : "");
  out->container_id = container_id(g, cs->id);
  nl_rt_user_copy(&out->user, &cs->user);
  switch (cs->state) {
  case NL_RT_CONTAINER_RUNNING:
    out->state.kind = NL_CSTATE_RUNNING;
    out->state.started_at = secs(cs->started_at);
    break;
  case NL_RT_CONTAINER_CREATED: /* created, not running: waiting to run */
    out->state.kind = NL_CSTATE_WAITING;
    break;
  case NL_RT_CONTAINER_EXITED:
    out->state.kind = NL_CSTATE_TERMINATED;
    out->state.exit_code = cs->exit_code;
    out->state.reason = empty(cs->reason) ? NULL : nl_xstrdup(cs->reason);
    out->state.message = empty(cs->message) ? NULL : nl_xstrdup(cs->message);
    out->state.started_at = secs(cs->started_at);
    out->state.finished_at = secs(cs->finished_at);
    out->state.container_id = container_id(g, cs->id);
    break;
  default:
    if (old && old->state.kind == NL_CSTATE_RUNNING) {
      /* It ran and the runtime lost it: it ran and failed, not "never ran". */
      out->state.kind = NL_CSTATE_TERMINATED;
      out->state.reason = nl_xstrdup(g->restarting ? REASON_RESTARTING_ALL : REASON_STATUS_UNKNOWN);
      out->state.message = nl_xstrdup("The container could not be located when the pod was terminated");
      out->state.exit_code = 137;
      out->restart_count = old->restart_count + 1;
    } else {
      out->state.kind = NL_CSTATE_WAITING;
    }
    break;
  }
}

/* What the runtime no longer shows of a container an in-place restart of its
 * pod removed (upstream, RestartAllContainersOnContainerExits): its restart
 * count never goes down, a new instance counts one more restart than a
 * terminated old one, and the old one's end stays its last state. */
static void carry_over(nl_container_status_t *fresh, const nl_rt_container_t *cs,
                       const nl_container_status_t *old) {
  if (old->restart_count > fresh->restart_count) fresh->restart_count = old->restart_count;
  if (cs->state == NL_RT_CONTAINER_RUNNING && old->state.kind == NL_CSTATE_TERMINATED &&
      old->restart_count >= cs->restart_count)
    fresh->restart_count = old->restart_count + 1;
  const nl_cstate_t *last = NULL;
  bool same = old->container_id && fresh->container_id && !strcmp(old->container_id, fresh->container_id);
  if (!same && old->state.kind == NL_CSTATE_TERMINATED) last = &old->state;
  else if (old->last_state.kind == NL_CSTATE_TERMINATED) last = &old->last_state;
  if (!last) return;
  cstate_free(&fresh->last_state);
  cstate_copy(&fresh->last_state, last);
}

static int cmp_created_desc(const void *a, const void *b) {
  const nl_rt_container_t *x = *(const nl_rt_container_t *const *)a;
  const nl_rt_container_t *y = *(const nl_rt_container_t *const *)b;
  return x->created_at > y->created_at ? -1 : x->created_at < y->created_at ? 1 : 0;
}

static const nl_status_reason_t *find_reason(const gen_t *g, const char *name) {
  for (size_t i = 0; g->reasons && i < g->reasons->n; i++)
    if (g->reasons->items[i].container && strcmp(g->reasons->items[i].container, name) == 0)
      return &g->reasons->items[i];
  return NULL;
}

/* As upstream: made from the spec at the container's first status, then the
 * old status' kept as it is (immutable), so that it goes on saying how the
 * container was created whatever the runtime says later. */
static char *volume_mounts(const gen_t *g, const nl_container_t *c,
                           const nl_container_status_t *old) {
  if (old && old->volume_mounts_json) return nl_xstrdup(old->volume_mounts_json);
  return nl_status_volume_mounts_json(c, g->opts && g->opts->supports_rro);
}

static nl_container_status_t *convert_statuses(const gen_t *g, const nl_container_t *containers,
                                               size_t n, const nl_container_status_t *prev,
                                               size_t n_prev, bool is_init) {
  if (!n) return NULL;
  nl_container_status_t *st = nl_xcalloc(n, sizeof(*st));
  const nl_rt_pod_status_t *rt = g->rt;
  const char *dflt = g->has_init ? REASON_POD_INITIALIZING : REASON_CONTAINER_CREATING;

  /* Everything starts waiting; old values seed restart counts and history. */
  for (size_t i = 0; i < n; i++) {
    const nl_container_status_t *old = find_status(prev, n_prev, containers[i].name);
    if (old && old->state.kind == NL_CSTATE_TERMINATED) {
      cstatus_copy(&st[i], old);
      continue;
    }
    st[i].name = nl_xstrdup(containers[i].name);
    st[i].image = nl_xstrdup(containers[i].image ? containers[i].image : "");
    st[i].image_id = nl_xstrdup("");
    st[i].started = -1;
    st[i].state.kind = NL_CSTATE_WAITING;
    st[i].state.reason = nl_xstrdup(dflt);
    st[i].volume_mounts_json = volume_mounts(g, &containers[i], old);
    if (old) {
      st[i].restart_count = old->restart_count;
      cstate_copy(&st[i].last_state, &old->last_state);
    }
  }

  /* A container that was running and vanished from the runtime terminated,
   * even though we do not know how: keep the pod from going back to Pending.
   * One that an in-place restart of the pod removed waits to run again, its
   * removal its last state. */
  for (size_t i = 0; i < n; i++) {
    if (nl_rt_pod_status_find(rt, containers[i].name)) continue;
    const nl_container_status_t *old = find_status(prev, n_prev, containers[i].name);
    if (old && g->restarting && old->state.kind != NL_CSTATE_WAITING) {
      nl_container_status_t *s = &st[i];
      cstate_free(&s->state);
      cstate_free(&s->last_state);
      s->state = (nl_cstate_t){.kind = NL_CSTATE_WAITING,
                               .reason = nl_xstrdup(REASON_RESTARTING_ALL),
                               .message = nl_xstrdup(MESSAGE_RESTARTING_ALL)};
      s->last_state = (nl_cstate_t){.kind = NL_CSTATE_TERMINATED,
                                    .reason = nl_xstrdup(REASON_RESTARTING_ALL),
                                    .message = nl_xstrdup(MESSAGE_RESTARTING_ALL),
                                    .exit_code = 137};
      s->restart_count = old->restart_count + 1;
      s->ready = false;
      s->started = -1;
      continue;
    }
    if (!old || old->state.kind == NL_CSTATE_TERMINATED || old->state.kind != NL_CSTATE_RUNNING)
      continue;
    nl_container_status_t *s = &st[i];
    if (s->state.kind != NL_CSTATE_WAITING || !s->state.reason || strcmp(s->state.reason, dflt) != 0)
      continue;
    if (s->last_state.kind == NL_CSTATE_TERMINATED) continue;
    cstate_free(&s->last_state);
    s->last_state.kind = NL_CSTATE_TERMINATED;
    s->last_state.reason = nl_xstrdup(REASON_STATUS_UNKNOWN);
    s->last_state.message = nl_xstrdup(
        "The container could not be located when the pod was deleted.  The container used to be Running");
    s->last_state.exit_code = 137;
    if (!g->deleted) s->restart_count++;
  }

  /* The newest instance is the state, the one before it the lastState. */
  size_t nrt = rt ? rt->n_containers : 0;
  const nl_rt_container_t **sorted = nl_xcalloc(nrt ? nrt : 1, sizeof(*sorted));
  for (size_t i = 0; i < nrt; i++) sorted[i] = &rt->containers[i];
  if (nrt > 1) qsort(sorted, nrt, sizeof(*sorted), cmp_created_desc); /* stable enough: ids differ */
  int *seen = nl_xcalloc(n, sizeof(*seen));
  for (size_t k = 0; k < nrt; k++) {
    const nl_rt_container_t *cs = sorted[k];
    size_t i;
    for (i = 0; i < n; i++)
      if (cs->name && strcmp(containers[i].name, cs->name) == 0) break;
    if (i == n || seen[i] >= 2) continue; /* not in this list (or the sandbox) */
    const nl_container_status_t *old = find_status(prev, n_prev, containers[i].name);
    nl_container_status_t fresh;
    convert_one(g, cs, old, &fresh);
    if (cs->state == NL_RT_CONTAINER_RUNNING && old && old->started >= 0) fresh.started = old->started;
    if (seen[i] == 0 && old) carry_over(&fresh, cs, old);
    if (seen[i] == 0) {
      fresh.volume_mounts_json = st[i].volume_mounts_json;
      st[i].volume_mounts_json = NULL;
      cstatus_free(&st[i]);
      st[i] = fresh;
    } else {
      cstate_free(&st[i].last_state);
      st[i].last_state = fresh.state;
      memset(&fresh.state, 0, sizeof(fresh.state));
      cstatus_free(&fresh);
    }
    seen[i]++;
  }
  free(seen);
  free(sorted);

  /* Containers that will be (re)started are waiting, with the reason the last
   * start failed (reasonCache). */
  for (size_t i = 0; i < n; i++) {
    const nl_container_t *c = &containers[i];
    if (is_init) {
      const nl_rt_container_t *s = nl_rt_pod_status_find(rt, c->name);
      if (s && s->state == NL_RT_CONTAINER_EXITED && s->exit_code == 0) continue;
      if (!s && any_regular_created(g->pod, rt) && !is_sidecar(c) &&
          st[i].state.kind == NL_CSTATE_WAITING) {
        cstate_free(&st[i].state);
        st[i].state.kind = NL_CSTATE_TERMINATED;
        st[i].state.reason = nl_xstrdup("Completed");
        st[i].state.message = nl_xstrdup("Unable to get init container status from container runtime "
                                         "and pod has been initialized, treat it as exited normally");
        continue;
      }
    }
    if (!should_be_restarted(g->pod, c, rt, g->deleted)) continue;
    const nl_status_reason_t *r = find_reason(g, c->name);
    if (!r || empty(r->reason)) continue;
    if (st[i].state.kind == NL_CSTATE_TERMINATED) {
      cstate_free(&st[i].last_state);
      st[i].last_state = st[i].state;
    } else {
      cstate_free(&st[i].state);
    }
    memset(&st[i].state, 0, sizeof(st[i].state));
    st[i].state.kind = NL_CSTATE_WAITING;
    st[i].state.reason = nl_xstrdup(r->reason);
    st[i].state.message = empty(r->message) ? NULL : nl_xstrdup(r->message);
  }
  return st;
}

static int cmp_status_name(const void *a, const void *b) {
  return strcmp(((const nl_container_status_t *)a)->name, ((const nl_container_status_t *)b)->name);
}

/* ---- phase (getPhase) --------------------------------------------------- */

static const nl_container_status_t *find_in(const nl_container_status_t *v, size_t n,
                                            const char *name) {
  return find_status(v, n, name);
}

/* Whether a container that ended so runs again: its rules and policies, or
 * the in-place restart of its pod that removed it. */
static bool restarts(const nl_pod_spec_t *spec, const nl_container_t *c, const nl_cstate_t *end) {
  return nl_container_should_restart(spec, c, end->exit_code) ||
         (end->reason && !strcmp(end->reason, REASON_RESTARTING_ALL));
}

nl_pod_phase_t nl_pod_status_phase(const nl_pod_t *pod, const nl_container_status_t *info, size_t n,
                                   bool pod_is_terminal, bool pod_has_initialized) {
  const nl_pod_spec_t *spec = &pod->spec;
  /* ContainerRestartRules: a failed init container, or a stopped one, counts
   * against the pod only when its own decision is not to run again. */
  int pending_sidecars = 0, pending_init = 0, failed_init_final = 0;
  for (size_t i = 0; i < spec->n_init_containers; i++) {
    const nl_container_t *c = &spec->init_containers[i];
    if (is_sidecar(c)) continue;
    const nl_container_status_t *s = find_in(info, n, c->name);
    if (!s) {
      pending_init++;
      continue;
    }
    switch (s->state.kind) {
    case NL_CSTATE_RUNNING: pending_init++; break;
    case NL_CSTATE_TERMINATED:
      if (s->state.exit_code != 0 && !restarts(spec, c, &s->state)) failed_init_final++;
      break;
    case NL_CSTATE_WAITING:
      if (s->last_state.kind == NL_CSTATE_TERMINATED) {
        if (s->last_state.exit_code != 0 && !restarts(spec, c, &s->last_state)) failed_init_final++;
      } else {
        pending_init++;
      }
      break;
    default: pending_init++; break;
    }
  }

  int unknown = 0, running = 0, waiting = 0, stopped = 0, stopped_final = 0, succeeded = 0;
  for (size_t i = 0; i < spec->n_init_containers; i++) {
    const nl_container_t *c = &spec->init_containers[i];
    if (!is_sidecar(c)) continue;
    const nl_container_status_t *s = find_in(info, n, c->name);
    if (!s) {
      unknown++;
      continue;
    }
    switch (s->state.kind) {
    case NL_CSTATE_RUNNING:
      if (s->started != 1) pending_sidecars++;
      running++;
      break;
    case NL_CSTATE_TERMINATED: break; /* a stopped sidecar does not count */
    case NL_CSTATE_WAITING:
      if (s->last_state.kind != NL_CSTATE_TERMINATED) {
        pending_sidecars++;
        waiting++;
      }
      break;
    default:
      pending_sidecars++;
      unknown++;
      break;
    }
  }

  for (size_t i = 0; i < spec->n_containers; i++) {
    const nl_container_t *c = &spec->containers[i];
    const nl_container_status_t *s = find_in(info, n, c->name);
    if (!s) {
      unknown++;
      continue;
    }
    switch (s->state.kind) {
    case NL_CSTATE_RUNNING: running++; break;
    case NL_CSTATE_TERMINATED:
      stopped++;
      if (!restarts(spec, c, &s->state)) stopped_final++;
      if (s->state.exit_code == 0) succeeded++;
      break;
    case NL_CSTATE_WAITING:
      if (s->last_state.kind == NL_CSTATE_TERMINATED) {
        stopped++;
        if (!restarts(spec, c, &s->last_state)) stopped_final++;
      } else {
        waiting++;
      }
      break;
    default: unknown++; break;
    }
  }

  if (failed_init_final > 0) return NL_POD_FAILED;
  if (pending_init > 0 || (pending_sidecars > 0 && !pod_has_initialized) || waiting > 0)
    return NL_POD_PENDING;
  if (running > 0 && unknown == 0) return NL_POD_RUNNING;
  if (running == 0 && stopped > 0 && unknown == 0) {
    /* A terminal pod's containers are not restarted whatever the policy. */
    if (pod_is_terminal && !is_static_pod(pod)) return stopped == succeeded ? NL_POD_SUCCEEDED : NL_POD_FAILED;
    if (stopped != stopped_final) return NL_POD_RUNNING; /* some are restarting */
    return stopped == succeeded ? NL_POD_SUCCEEDED : NL_POD_FAILED;
  }
  return NL_POD_PENDING;
}

/* ---- probes (prober manager UpdatePodStatus) ------------------------------ */

static const char *cri_id(const char *cid) {
  const char *p = cid ? strstr(cid, "://") : NULL;
  return p ? p + 3 : cid;
}

static bool started_of(const gen_t *g, const nl_container_status_t *s) {
  if (s->state.kind != NL_CSTATE_RUNNING) return false;
  if (!g->opts || !g->opts->probe) return true;
  nl_status_probe_t r = g->opts->probe(g->opts->probe_ctx, s->name, cri_id(s->container_id), true);
  return r == NL_STATUS_PROBE_SUCCESS || r == NL_STATUS_PROBE_NONE;
}

static bool ready_of(const gen_t *g, const nl_container_status_t *s) {
  if (s->state.kind != NL_CSTATE_RUNNING) return false;
  if (!g->opts || !g->opts->probe) return true;
  nl_status_probe_t r = g->opts->probe(g->opts->probe_ctx, s->name, cri_id(s->container_id), false);
  return r == NL_STATUS_PROBE_SUCCESS || r == NL_STATUS_PROBE_NONE;
}

static void apply_probes(const gen_t *g, nl_pod_status_t *s) {
  for (size_t i = 0; i < s->n_container_statuses; i++) {
    nl_container_status_t *c = &s->container_statuses[i];
    bool started = started_of(g, c);
    c->started = started;
    if (started) c->ready = ready_of(g, c);
  }
  for (size_t i = 0; i < s->n_init_container_statuses; i++) {
    nl_container_status_t *c = &s->init_container_statuses[i];
    bool started = started_of(g, c);
    c->started = started;
    const nl_container_t *spec = &g->pod->spec.init_containers[i];
    if (!is_sidecar(spec)) {
      if (c->state.kind == NL_CSTATE_TERMINATED && c->state.exit_code == 0) c->ready = true;
      continue;
    }
    if (started) c->ready = ready_of(g, c);
  }
}

/* ---- conditions (status/generate.go) ----------------------------------- */

static void cond(nl_pod_condition_t *c, const char *type, bool ok, const char *reason, char *message) {
  c->type = type;
  c->status = ok ? "True" : "False";
  c->reason = xdup(reason);
  c->message = message;
}

/* "[a b]" as Go prints a []string. */
static void names_list(nl_buf_t *b, const char *prefix, const char **names, size_t n) {
  if (!n) return;
  if (b->len) nl_buf_puts(b, ", ");
  nl_buf_printf(b, "%s: [", prefix);
  for (size_t i = 0; i < n; i++) nl_buf_printf(b, "%s%s", i ? " " : "", names[i]);
  nl_buf_puts(b, "]");
}

static const nl_container_status_t *find_any(const nl_pod_status_t *s, const char *name) {
  const nl_container_status_t *c = find_status(s->init_container_statuses, s->n_init_container_statuses, name);
  return c ? c : find_status(s->container_statuses, s->n_container_statuses, name);
}

static void containers_ready(const nl_pod_t *pod, const nl_pod_status_t *s, nl_pod_condition_t *out,
                             const char *type) {
  size_t total = pod->spec.n_init_containers + pod->spec.n_containers;
  const char **unknown = nl_xcalloc(total + 1, sizeof(char *));
  const char **unready = nl_xcalloc(total + 1, sizeof(char *));
  size_t nu = 0, nr = 0;
  for (size_t i = 0; i < pod->spec.n_init_containers; i++) {
    const nl_container_t *c = &pod->spec.init_containers[i];
    if (!is_sidecar(c)) continue;
    const nl_container_status_t *cs = find_any(s, c->name);
    if (!cs) unknown[nu++] = c->name;
    else if (!cs->ready) unready[nr++] = c->name;
  }
  for (size_t i = 0; i < pod->spec.n_containers; i++) {
    const nl_container_t *c = &pod->spec.containers[i];
    const nl_container_status_t *cs = find_any(s, c->name);
    if (!cs) unknown[nu++] = c->name;
    else if (!cs->ready) unready[nr++] = c->name;
  }
  if ((s->phase == NL_POD_SUCCEEDED && nu == 0) || s->phase == NL_POD_FAILED) {
    cond(out, type, false, s->phase == NL_POD_FAILED ? "PodFailed" : "PodCompleted", NULL);
  } else if (nu || nr) {
    nl_buf_t b = NL_BUF_INIT;
    names_list(&b, "containers with unknown status", unknown, nu);
    names_list(&b, "containers with unready status", unready, nr);
    cond(out, type, false, "ContainersNotReady", nl_buf_steal(&b));
  } else {
    cond(out, type, true, NULL, NULL);
  }
  free(unknown);
  free(unready);
}

/* upstream GeneratePodReadyCondition: ContainersReady's verdict, then every
 * readiness gate's condition (set in the API by someone else) must be True. */
static const nl_api_condition_t *api_cond(const nl_pod_t *pod, const char *type) {
  const nl_api_pod_status_t *api = pod->status;
  for (size_t j = 0; api && j < api->n_conditions; j++)
    if (api->conditions[j].type && strcmp(api->conditions[j].type, type) == 0)
      return &api->conditions[j];
  return NULL;
}

/* Appends to b why the pod's readiness gates are not all True (nothing when
 * they are), as upstream words it. */
static void gates_unready(const nl_pod_t *pod, nl_buf_t *b) {
  for (size_t i = 0; i < pod->spec.readiness_gates.n; i++) {
    const char *type = pod->spec.readiness_gates.items[i];
    const nl_api_condition_t *c = api_cond(pod, type);
    if (c && c->status && strcmp(c->status, "True") == 0) continue;
    if (b->len) nl_buf_puts(b, ", ");
    if (!c)
      nl_buf_printf(b, "corresponding condition of pod readiness gate \"%s\" does not exist.", type);
    else
      nl_buf_printf(b, "the status of pod readiness gate \"%s\" is not \"True\", but %s", type,
                    c->status ? c->status : "");
  }
}

bool nl_pod_status_ready_needs_reconcile(const nl_pod_t *pod) {
  if (!pod->spec.readiness_gates.n) return false;
  const nl_api_condition_t *ready = api_cond(pod, "Ready");
  const nl_api_condition_t *cr = api_cond(pod, "ContainersReady");
  /* without ready containers the gates change nothing */
  if (!ready || !cr || !cr->status || strcmp(cr->status, "True") != 0) return false;
  nl_buf_t b = NL_BUF_INIT;
  gates_unready(pod, &b);
  const char *status = b.len ? "False" : "True";
  bool differs = !ready->status || strcmp(ready->status, status) != 0 ||
                 strcmp(ready->message ? ready->message : "", b.len ? b.data : "") != 0;
  nl_buf_free(&b);
  return differs;
}

static void pod_ready(const nl_pod_t *pod, const nl_pod_status_t *s, nl_pod_condition_t *out) {
  containers_ready(pod, s, out, "Ready");
  if (strcmp(out->status, "True") != 0 || !pod->spec.readiness_gates.n) return;
  nl_buf_t b = NL_BUF_INIT;
  gates_unready(pod, &b);
  if (!b.len) return;
  free(out->reason);
  free(out->message);
  cond(out, "Ready", false, "ReadinessGatesNotReady", nl_buf_steal(&b));
}

/* A pod once initialized stays so while its init containers run again (an
 * in-place restart of all: upstream, RestartAllContainersOnContainerExits). */
static bool was_initialized(const nl_pod_status_t *old) {
  const nl_pod_condition_t *c = nl_pod_status_condition(old, "Initialized");
  return c && strcmp(c->status, "True") == 0;
}

static bool any_regular_started(const nl_pod_t *pod, const nl_pod_status_t *s) {
  for (size_t i = 0; i < pod->spec.n_containers; i++) {
    const nl_container_status_t *cs =
        find_status(s->container_statuses, s->n_container_statuses, pod->spec.containers[i].name);
    if (cs && (cs->state.kind == NL_CSTATE_RUNNING || cs->state.kind == NL_CSTATE_TERMINATED))
      return true;
  }
  return false;
}

static void initialized(const nl_pod_t *pod, const nl_pod_status_t *s, const nl_pod_status_t *old,
                        nl_pod_condition_t *out) {
  const char *type = "Initialized";
  size_t n = pod->spec.n_init_containers;
  if (n && s->n_init_container_statuses + s->n_container_statuses == 0) {
    cond(out, type, false, "UnknownContainerStatuses", NULL);
    return;
  }
  const char **unknown = nl_xcalloc(n + 1, sizeof(char *));
  const char **incomplete = nl_xcalloc(n + 1, sizeof(char *));
  size_t nu = 0, ni = 0;
  for (size_t i = 0; i < n; i++) {
    const nl_container_t *c = &pod->spec.init_containers[i];
    const nl_container_status_t *cs = find_any(s, c->name);
    if (!cs) {
      unknown[nu++] = c->name;
      continue;
    }
    bool done = is_sidecar(c) ? cs->started == 1 : cs->ready;
    if (!done) incomplete[ni++] = c->name;
  }
  if (s->phase == NL_POD_SUCCEEDED && nu == 0) {
    cond(out, type, true, "PodCompleted", NULL);
  } else if (any_regular_started(pod, s)) {
    cond(out, type, true, NULL, NULL); /* initialized before; sidecars may restart */
  } else if ((nu || ni) && !was_initialized(old)) {
    nl_buf_t b = NL_BUF_INIT;
    names_list(&b, "containers with unknown status", unknown, nu);
    names_list(&b, "containers with incomplete status", incomplete, ni);
    cond(out, type, false, "ContainersNotInitialized", nl_buf_steal(&b));
  } else {
    cond(out, type, true, NULL, NULL);
  }
  free(unknown);
  free(incomplete);
}

/* ---- IPs ---------------------------------------------------------------- */

static int ip_family(const char *s, char out[INET6_ADDRSTRLEN]) {
  unsigned char buf[sizeof(struct in6_addr)];
  if (!s) return 0;
  if (inet_pton(AF_INET, s, buf) == 1) {
    if (out) inet_ntop(AF_INET, buf, out, INET6_ADDRSTRLEN);
    return 4;
  }
  if (inet_pton(AF_INET6, s, buf) == 1) {
    /* an IPv4-mapped address is IPv4 to Go's net.IP.To4 */
    const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(buf, mapped, 12) == 0) {
      if (out) inet_ntop(AF_INET, buf + 12, out, INET6_ADDRSTRLEN);
      return 4;
    }
    if (out) inet_ntop(AF_INET6, buf, out, INET6_ADDRSTRLEN);
    return 6;
  }
  return 0;
}

/* sortPodIPs: the first IP of the node's family, then the first of the other. */
static void set_pod_ips(nl_pod_status_t *s, const nl_rt_pod_status_t *rt, const char *host_ip) {
  if (!rt || !rt->n_ips) return;
  int primary = ip_family(host_ip, NULL) == 6 ? 6 : 4;
  int fams[2] = {primary, primary == 4 ? 6 : 4};
  s->pod_ips = nl_xcalloc(2, sizeof(char *));
  for (int f = 0; f < 2; f++) {
    for (size_t i = 0; i < rt->n_ips; i++) {
      char norm[INET6_ADDRSTRLEN];
      if (ip_family(rt->ips[i], norm) != fams[f]) continue;
      s->pod_ips[s->n_pod_ips++] = nl_xstrdup(norm);
      break;
    }
  }
  if (!s->n_pod_ips) {
    free(s->pod_ips);
    s->pod_ips = NULL;
    return;
  }
  s->pod_ip = nl_xstrdup(s->pod_ips[0]);
}

/* ---- generation -------------------------------------------------------- */

nl_pod_condition_t *nl_pod_status_condition(const nl_pod_status_t *s, const char *type) {
  for (size_t i = 0; s && i < s->n_conditions; i++)
    if (strcmp(s->conditions[i].type, type) == 0) return &s->conditions[i];
  return NULL;
}

static void cut_message(nl_cstate_t *c, size_t max) {
  if (c->kind == NL_CSTATE_TERMINATED && c->message && strlen(c->message) > max) c->message[max] = 0;
}

/* The status manager's normalizeStatus: a pod's containers share 12 KiB of
 * termination messages evenly. Bytes, as upstream: the JSON encoder turns a
 * character cut in two into U+FFFD. */
static void limit_messages(nl_pod_status_t *s, const nl_pod_t *pod) {
  size_t n = pod->spec.n_containers + pod->spec.n_init_containers;
  size_t max = NL_TERMMSG_MAX_POD_BYTES / (n ? n : 1);
  for (size_t i = 0; i < s->n_container_statuses; i++) {
    cut_message(&s->container_statuses[i].state, max);
    cut_message(&s->container_statuses[i].last_state, max);
  }
  for (size_t i = 0; i < s->n_init_container_statuses; i++) {
    cut_message(&s->init_container_statuses[i].state, max);
    cut_message(&s->init_container_statuses[i].last_state, max);
  }
}

/* ---- in-place restart of all containers (RestartAllContainers) ---------- */

#define COND_RESTARTING_ALL "AllContainersRestarting"

bool nl_pod_status_restarting_all(const nl_pod_status_t *s) {
  const nl_pod_condition_t *c = nl_pod_status_condition(s, COND_RESTARTING_ALL);
  return c && strcmp(c->status, "True") == 0;
}

/* upstream ShouldAllContainersRestart: the restart has begun, or a container
 * (as the runtime shows it, or as the status last said) ended with an exit
 * code whose rule restarts them all. */
static bool should_all_restart(const nl_pod_t *pod, const nl_rt_pod_status_t *rt,
                               const nl_pod_status_t *old) {
  if (!nl_pod_has_restart_all_rule(&pod->spec)) return false;
  if (nl_pod_status_restarting_all(old)) return true;
  /* after an agent restart the API's status is the one before (upstream's
   * status manager starts from it): a restart it began goes on */
  const nl_api_condition_t *api = old ? NULL : api_cond(pod, COND_RESTARTING_ALL);
  if (api && api->status && strcmp(api->status, "True") == 0) return true;
  for (int k = 0; k < 2; k++) {
    const nl_container_t *v = k ? pod->spec.containers : pod->spec.init_containers;
    size_t n = k ? pod->spec.n_containers : pod->spec.n_init_containers;
    for (size_t i = 0; i < n; i++) {
      const nl_rt_container_t *st = nl_rt_pod_status_find(rt, v[i].name);
      if (st && st->state == NL_RT_CONTAINER_EXITED && nl_container_restarts_all(&v[i], st->exit_code))
        return true;
      const nl_container_status_t *o = old ? find_any(old, v[i].name) : NULL;
      if (o && o->state.kind == NL_CSTATE_TERMINATED && nl_container_restarts_all(&v[i], o->state.exit_code))
        return true;
    }
  }
  return false;
}

/* upstream AllContainersRestartCleanedUp: none of the pod's init or regular
 * containers is left in the runtime. */
static bool restart_cleaned_up(const nl_pod_t *pod, const nl_rt_pod_status_t *rt) {
  for (size_t i = 0; i < pod->spec.n_init_containers; i++)
    if (nl_rt_pod_status_find(rt, pod->spec.init_containers[i].name)) return false;
  for (size_t i = 0; i < pod->spec.n_containers; i++)
    if (nl_rt_pod_status_find(rt, pod->spec.containers[i].name)) return false;
  return true;
}

/* upstream GenerateAllContainersRestartingCondition, for a pod with such a rule. */
static void restarting_all(const gen_t *g, const nl_pod_status_t *s, nl_pod_condition_t *out) {
  if (s->phase == NL_POD_SUCCEEDED)
    cond(out, COND_RESTARTING_ALL, false, "PodCompleted", NULL);
  else if (s->phase == NL_POD_FAILED)
    cond(out, COND_RESTARTING_ALL, false, "PodFailed", NULL);
  else if (!g->restarting || restart_cleaned_up(g->pod, g->rt))
    cond(out, COND_RESTARTING_ALL, false, NULL, NULL);
  else
    cond(out, COND_RESTARTING_ALL, true, "RestartAllContainersStarted",
         nl_xstrdup("container exited with restart policy rule"));
}

nl_pod_status_t *nl_pod_status_generate(const nl_pod_t *pod, const nl_rt_pod_status_t *rt,
                                        const nl_status_reasons_t *reasons,
                                        const nl_pod_status_t *old, bool pod_is_terminal,
                                        int64_t now_ns, const char *host_ip,
                                        const nl_status_opts_t *opts) {
  gen_t g = {
      .pod = pod,
      .rt = rt,
      .reasons = reasons,
      .scheme = opts && opts->runtime_name ? opts->runtime_name : "containerd",
      .deleted = opts && opts->deleted,
      .has_init = pod->spec.n_init_containers > 0,
      .restarting = should_all_restart(pod, rt, old),
      .opts = opts,
  };
  nl_pod_status_t *s = nl_xcalloc(1, sizeof(*s));
  set_pod_ips(s, rt, host_ip);
  s->qos_class = nl_pod_qos_class(pod);

  s->container_statuses = convert_statuses(&g, pod->spec.containers, pod->spec.n_containers,
                                           old ? old->container_statuses : NULL,
                                           old ? old->n_container_statuses : 0, false);
  s->n_container_statuses = pod->spec.n_containers;
  s->init_container_statuses = convert_statuses(
      &g, pod->spec.init_containers, pod->spec.n_init_containers,
      old ? old->init_container_statuses : NULL, old ? old->n_init_container_statuses : 0, true);
  s->n_init_container_statuses = pod->spec.n_init_containers;
  if (pod->spec.n_ephemeral_containers) {
    s->ephemeral_container_statuses = convert_statuses(
        &g, pod->spec.ephemeral_containers, pod->spec.n_ephemeral_containers,
        old ? old->ephemeral_container_statuses : NULL,
        old ? old->n_ephemeral_container_statuses : 0, false);
    s->n_ephemeral_container_statuses = pod->spec.n_ephemeral_containers;
  }
  limit_messages(s, pod);

  /* The phase sees init and regular statuses together. */
  size_t nall = s->n_container_statuses + s->n_init_container_statuses;
  nl_container_status_t *all = nl_xcalloc(nall ? nall : 1, sizeof(*all));
  if (s->n_container_statuses)
    memcpy(all, s->container_statuses, s->n_container_statuses * sizeof(*all));
  if (s->n_init_container_statuses)
    memcpy(all + s->n_container_statuses, s->init_container_statuses,
           s->n_init_container_statuses * sizeof(*all));
  s->phase = nl_pod_status_phase(pod, all, nall, pod_is_terminal, any_active_regular_started(pod, rt));
  free(all); /* shallow */

  /* A terminal phase never goes back (status manager and API merge). */
  if (s->phase != NL_POD_FAILED && s->phase != NL_POD_SUCCEEDED && old &&
      (old->phase == NL_POD_FAILED || old->phase == NL_POD_SUCCEEDED))
    s->phase = old->phase;
  if (old && s->phase == old->phase) { /* the reason belongs to the phase */
    s->reason = xdup(old->reason);
    s->message = xdup(old->message);
  }

  apply_probes(&g, s);
  if (s->n_container_statuses > 1)
    qsort(s->container_statuses, s->n_container_statuses, sizeof(*s->container_statuses),
          cmp_status_name);

  /* Kubelet-owned conditions, in upstream's order. */
  bool could_restart_all = nl_pod_has_restart_all_rule(&pod->spec);
  s->n_conditions = could_restart_all ? 6 : 5;
  s->conditions = nl_xcalloc(s->n_conditions, sizeof(*s->conditions));
  cond(&s->conditions[0], "PodReadyToStartContainers", !sandbox_changed(pod, rt), NULL, NULL);
  initialized(pod, s, old, &s->conditions[1]);
  pod_ready(pod, s, &s->conditions[2]);
  containers_ready(pod, s, &s->conditions[3], "ContainersReady");
  cond(&s->conditions[4], "PodScheduled", true, NULL, NULL);
  if (could_restart_all) restarting_all(&g, s, &s->conditions[5]);
  int64_t now = secs(now_ns);
  s->observed_generation = pod->metadata.generation;
  for (size_t i = 0; i < s->n_conditions; i++) {
    const nl_pod_condition_t *o = nl_pod_status_condition(old, s->conditions[i].type);
    s->conditions[i].last_transition_time =
        o && strcmp(o->status, s->conditions[i].status) == 0 ? o->last_transition_time : now;
    s->conditions[i].observed_generation = pod->metadata.generation;
  }

  if (host_ip && *host_ip) {
    s->host_ip = nl_xstrdup(host_ip);
    s->host_ips = nl_xcalloc(1, sizeof(char *));
    s->host_ips[0] = nl_xstrdup(host_ip);
    s->n_host_ips = 1;
    if (pod->spec.host_network && !s->pod_ip) { /* host-network pods have the node's IPs */
      s->pod_ip = nl_xstrdup(host_ip);
      s->pod_ips = nl_xcalloc(1, sizeof(char *));
      s->pod_ips[0] = nl_xstrdup(host_ip);
      s->n_pod_ips = 1;
    }
  }
  s->start_time = old && old->start_time ? old->start_time : now;
  return s;
}

void nl_pod_status_terminated_by_kubelet(nl_pod_status_t *s, const nl_pod_status_t *old,
                                         const char *reason, const char *message,
                                         const char *cond_message, int64_t now_ns) {
  /* upstream sets Failed, the reason and the message before the kill; the
   * status after it keeps them only while the phase stays Failed (the reason
   * belongs to the phase): containers that all exited 0 on SIGTERM make the
   * pod Succeeded, with the condition alone. */
  if (s->phase != NL_POD_SUCCEEDED) {
    s->phase = NL_POD_FAILED;
    free(s->reason);
    free(s->message);
    s->reason = nl_xstrdup(reason);
    s->message = nl_xstrdup(message);
  }
  if (nl_pod_status_condition(s, "DisruptionTarget")) return;
  s->conditions = nl_xrealloc(s->conditions, (s->n_conditions + 1) * sizeof(*s->conditions));
  nl_pod_condition_t *c = &s->conditions[s->n_conditions++];
  cond(c, "DisruptionTarget", true, "TerminationByKubelet",
       nl_xstrdup(cond_message ? cond_message : message));
  const nl_pod_condition_t *o = nl_pod_status_condition(old, "DisruptionTarget");
  c->last_transition_time = o && strcmp(o->status, "True") == 0 ? o->last_transition_time : secs(now_ns);
  c->observed_generation = s->observed_generation;
}

void nl_pod_status_add_condition(nl_pod_status_t *s, const char *type, const char *status,
                                 const char *reason, const char *message, int64_t since_s) {
  s->conditions = nl_xrealloc(s->conditions, (s->n_conditions + 1) * sizeof(*s->conditions));
  s->conditions[s->n_conditions++] = (nl_pod_condition_t){type, status, xdup(reason), xdup(message),
                                                          since_s};
}

/* upstream hasPodInitialized: evidence that a regular container ever started,
 * or that the last init container completed (a sidecar: started). */
static bool has_initialized(const nl_pod_t *pod, const nl_pod_status_t *s) {
  if (pod->spec.n_init_containers == 0) return true;
  for (size_t i = 0; i < s->n_container_statuses; i++) {
    const nl_container_status_t *cs = &s->container_statuses[i];
    if (cs->last_state.kind == NL_CSTATE_TERMINATED || cs->state.kind != NL_CSTATE_WAITING)
      return true;
  }
  size_t l = s->n_init_container_statuses;
  if (l == 0 || l > pod->spec.n_init_containers) return false;
  const nl_container_status_t *cs = &s->init_container_statuses[l - 1];
  if (is_sidecar(&pod->spec.init_containers[l - 1]))
    return cs->state.kind == NL_CSTATE_RUNNING && cs->started == 1;
  return (cs->last_state.kind == NL_CSTATE_TERMINATED && cs->last_state.exit_code == 0) ||
         (cs->state.kind == NL_CSTATE_TERMINATED && cs->state.exit_code == 0);
}

static void terminate_state(nl_container_status_t *cs) {
  if (cs->state.kind == NL_CSTATE_TERMINATED) return;
  free(cs->state.reason);
  free(cs->state.message);
  free(cs->state.container_id);
  cs->state = (nl_cstate_t){
      .kind = NL_CSTATE_TERMINATED,
      .reason = nl_xstrdup("ContainerStatusUnknown"),
      .message = nl_xstrdup("The container could not be located when the pod was terminated"),
      .exit_code = 137,
  };
}

void nl_pod_status_terminate(nl_pod_status_t *s, const nl_pod_t *pod) {
  /* once a pod has initialized, any missing status is treated as a failure */
  if (has_initialized(pod, s))
    for (size_t i = 0; i < s->n_container_statuses; i++) terminate_state(&s->container_statuses[i]);
  /* init containers up to the last that ever left Waiting (at least the first) */
  size_t n = s->n_init_container_statuses ? 1 : 0;
  for (size_t i = s->n_init_container_statuses; i > 0; i--) {
    const nl_container_status_t *cs = &s->init_container_statuses[i - 1];
    if (cs->state.kind != NL_CSTATE_WAITING || cs->last_state.kind == NL_CSTATE_TERMINATED) {
      n = i;
      break;
    }
  }
  for (size_t i = 0; i < n; i++) terminate_state(&s->init_container_statuses[i]);
  /* every API pod ends in a terminal phase (upstream leaves static pods alone) */
  if (!is_static_pod(pod) && s->phase != NL_POD_SUCCEEDED && s->phase != NL_POD_FAILED) {
    nl_vlog(3, "pod %s/%s: marking terminal pod as failed (was %s)", pod->metadata.namespace_,
            pod->metadata.name, nl_pod_phase_name(s->phase));
    s->phase = NL_POD_FAILED;
  }
}

