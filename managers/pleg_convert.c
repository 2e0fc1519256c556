/* Pure parts of PLEG: grouping CRI objects into pods, diffing two relists into
 * events, and converting CRI statuses into nl_rt_pod_status_t. No I/O. */
#include "managers/pleg_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

static char *dup_or_null(const char *s) { return s && *s ? nl_xstrdup(s) : NULL; }

/* ---- records ----------------------------------------------------------- */

void nl_pleg__pod_free(nl_pleg__pod_t *pod) {
  if (!pod) return;
  for (size_t i = 0; i < pod->n_items; i++) {
    free(pod->items[i].id);
    free(pod->items[i].sandbox_id);
    free(pod->items[i].name);
  }
  free(pod->items);
  free(pod->uid);
  free(pod->name);
  free(pod->namespace_);
  free(pod);
}

static void pod_free_cb(void *v) { nl_pleg__pod_free(v); }

void nl_pleg__snapshot_free(nl_map_t *snap) { nl_map_free(snap, pod_free_cb); }

static nl_pleg__pod_t *snapshot_pod(nl_map_t *snap, const char *uid, const char *name,
                                    const char *ns) {
  nl_pleg__pod_t *pod = nl_map_get(snap, uid);
  if (!pod) {
    pod = nl_xcalloc(1, sizeof(*pod));
    pod->uid = nl_xstrdup(uid);
    nl_map_put(snap, uid, pod);
  }
  /* Labels of the sandbox and its containers agree; take the first seen. */
  if (!pod->name && name) pod->name = nl_xstrdup(name);
  if (!pod->namespace_ && ns) pod->namespace_ = nl_xstrdup(ns);
  return pod;
}

static nl_pleg__item_t *pod_add_item(nl_pleg__pod_t *pod) {
  if (pod->n_items == pod->cap_items) {
    pod->cap_items = pod->cap_items ? 2 * pod->cap_items : 4;
    pod->items = nl_xrealloc(pod->items, pod->cap_items * sizeof(*pod->items));
  }
  nl_pleg__item_t *it = &pod->items[pod->n_items++];
  memset(it, 0, sizeof(*it));
  return it;
}

/* kubecontainer.SandboxToContainerState, then convertState. */
static nl_pleg__cstate_t sandbox_state(Runtime__V1__PodSandboxState s) {
  return s == RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY ? NL_PLEG__RUNNING : NL_PLEG__EXITED;
}

/* toKubeContainerState, then convertState: "created" is unknown to PLEG. */
static nl_pleg__cstate_t container_state(Runtime__V1__ContainerState s) {
  switch (s) {
  case RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING: return NL_PLEG__RUNNING;
  case RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED: return NL_PLEG__EXITED;
  default: return NL_PLEG__UNKNOWN;
  }
}

void nl_pleg__add_sandboxes(nl_map_t *snap, const Runtime__V1__Brief__ListPodSandboxResponse *resp) {
  for (size_t i = 0; resp && i < resp->n_items; i++) {
    const Runtime__V1__Brief__PodSandbox *sb = resp->items[i];
    if (!sb || !sb->id || !*sb->id) continue;
    const char *uid = NL_RT_LABEL(sb, NL_LABEL_POD_UID);
    if (!uid || !*uid) continue; /* not created by a kubelet: not ours */
    nl_pleg__pod_t *pod = snapshot_pod(snap, uid, NL_RT_LABEL(sb, NL_LABEL_POD_NAME),
                                       NL_RT_LABEL(sb, NL_LABEL_POD_NAMESPACE));
    nl_pleg__item_t *it = pod_add_item(pod);
    it->id = nl_xstrdup(sb->id);
    it->state = sandbox_state(sb->state);
    it->created_at = sb->created_at;
    it->sandbox = true;
  }
}

void nl_pleg__add_containers(nl_map_t *snap, const Runtime__V1__Brief__ListContainersResponse *resp) {
  for (size_t i = 0; resp && i < resp->n_containers; i++) {
    const Runtime__V1__Brief__Container *c = resp->containers[i];
    if (!c || !c->id || !*c->id) continue;
    const char *uid = NL_RT_LABEL(c, NL_LABEL_POD_UID);
    if (!uid || !*uid) continue;
    nl_pleg__pod_t *pod = snapshot_pod(snap, uid, NL_RT_LABEL(c, NL_LABEL_POD_NAME),
                                       NL_RT_LABEL(c, NL_LABEL_POD_NAMESPACE));
    nl_pleg__item_t *it = pod_add_item(pod);
    it->id = nl_xstrdup(c->id);
    it->sandbox_id = dup_or_null(c->pod_sandbox_id);
    it->name = dup_or_null(NL_RT_LABEL(c, NL_LABEL_CONTAINER_NAME));
    it->state = container_state(c->state);
    it->created_at = c->created_at;
  }
}

/* ---- unchanged lists --------------------------------------------------- */

static bool same_str(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

/* Marks the current item (uid, id) of that kind seen by list gen; true when it
 * holds what the list shows. */
static bool match(nl_map_t *records, const char *uid, const nl_pleg__item_t *want, uint64_t gen) {
  nl_pleg__record_t *rec = nl_map_get(records, uid);
  if (!rec || !rec->cur) return false;
  for (size_t i = 0; i < rec->cur->n_items; i++) {
    nl_pleg__item_t *it = &rec->cur->items[i];
    if (it->sandbox != want->sandbox || strcmp(it->id, want->id) != 0) continue;
    if (it->seen == gen) return false; /* listed twice */
    it->seen = gen;
    return it->state == want->state && it->created_at == want->created_at &&
           same_str(it->sandbox_id, want->sandbox_id) && same_str(it->name, want->name);
  }
  return false;
}

static bool all_seen(const nl_map_t *records, bool sandboxes, uint64_t gen) {
  nl_map_iter_t iter;
  void *v;
  nl_map_iter_init(&iter, records);
  while (nl_map_iter_next(&iter, NULL, &v)) {
    const nl_pleg__record_t *rec = v;
    for (size_t i = 0; rec->cur && i < rec->cur->n_items; i++)
      if (rec->cur->items[i].sandbox == sandboxes && rec->cur->items[i].seen != gen) return false;
  }
  return true;
}

bool nl_pleg__sandboxes_unchanged(nl_map_t *records,
                                  const Runtime__V1__Brief__ListPodSandboxResponse *resp, uint64_t gen) {
  for (size_t i = 0; resp && i < resp->n_items; i++) {
    const Runtime__V1__Brief__PodSandbox *sb = resp->items[i];
    if (!sb || !sb->id || !*sb->id) continue;
    const char *uid = NL_RT_LABEL(sb, NL_LABEL_POD_UID);
    if (!uid || !*uid) continue;
    nl_pleg__item_t want = {.id = sb->id, .state = sandbox_state(sb->state),
                            .created_at = sb->created_at, .sandbox = true};
    if (!match(records, uid, &want, gen)) return false;
  }
  return all_seen(records, true, gen);
}

bool nl_pleg__containers_unchanged(nl_map_t *records,
                                   const Runtime__V1__Brief__ListContainersResponse *resp, uint64_t gen) {
  for (size_t i = 0; resp && i < resp->n_containers; i++) {
    const Runtime__V1__Brief__Container *c = resp->containers[i];
    if (!c || !c->id || !*c->id) continue;
    const char *uid = NL_RT_LABEL(c, NL_LABEL_POD_UID);
    if (!uid || !*uid) continue;
    nl_pleg__item_t want = {.id = c->id, .sandbox_id = c->pod_sandbox_id,
                            .name = (char *)NL_RT_LABEL(c, NL_LABEL_CONTAINER_NAME),
                            .state = container_state(c->state), .created_at = c->created_at};
    if (!match(records, uid, &want, gen)) return false;
  }
  return all_seen(records, false, gen);
}

void nl_pleg__copy_current(nl_map_t *snap, const nl_map_t *records, bool sandboxes) {
  nl_map_iter_t iter;
  const char *uid;
  void *v;
  nl_map_iter_init(&iter, records);
  while (nl_map_iter_next(&iter, &uid, &v)) {
    const nl_pleg__pod_t *cur = ((const nl_pleg__record_t *)v)->cur;
    for (size_t i = 0; cur && i < cur->n_items; i++) {
      const nl_pleg__item_t *from = &cur->items[i];
      if (from->sandbox != sandboxes) continue;
      nl_pleg__item_t *it = pod_add_item(snapshot_pod(snap, uid, cur->name, cur->namespace_));
      it->id = nl_xstrdup(from->id);
      it->sandbox_id = from->sandbox_id ? nl_xstrdup(from->sandbox_id) : NULL;
      it->name = from->name ? nl_xstrdup(from->name) : NULL;
      it->state = from->state;
      it->created_at = from->created_at;
      it->sandbox = from->sandbox;
    }
  }
}

/* ---- events ------------------------------------------------------------ */

size_t nl_pleg__generate_events(const char *cid, nl_pleg__cstate_t old_state,
                                nl_pleg__cstate_t new_state, nl_pleg__event_t out[2]) {
  if (old_state == new_state) return 0;
  out[0].container_id = (char *)cid;
  switch (new_state) {
  case NL_PLEG__RUNNING: out[0].type = NL_PLEG_CONTAINER_STARTED; return 1;
  case NL_PLEG__EXITED: out[0].type = NL_PLEG_CONTAINER_DIED; return 1;
  case NL_PLEG__UNKNOWN: out[0].type = NL_PLEG_CONTAINER_CHANGED; return 1;
  case NL_PLEG__NONEXISTENT:
    if (old_state == NL_PLEG__EXITED) { /* its death was reported already */
      out[0].type = NL_PLEG_CONTAINER_REMOVED;
      return 1;
    }
    out[0].type = NL_PLEG_CONTAINER_DIED;
    out[1].type = NL_PLEG_CONTAINER_REMOVED;
    out[1].container_id = (char *)cid;
    return 2;
  }
  return 0;
}

static nl_pleg__cstate_t state_of(const nl_pleg__pod_t *pod, const char *id) {
  if (!pod) return NL_PLEG__NONEXISTENT;
  for (size_t i = 0; i < pod->n_items; i++)
    if (strcmp(pod->items[i].id, id) == 0) return pod->items[i].state;
  return NL_PLEG__NONEXISTENT;
}

/* Upstream visits a pod's containers before its sandboxes. */
static void collect_ids(const nl_pleg__pod_t *pod, const char ***ids, size_t *n, size_t *cap) {
  if (!pod) return;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < pod->n_items; i++) {
      const nl_pleg__item_t *it = &pod->items[i];
      if (it->sandbox != (pass == 1)) continue;
      bool seen = false;
      for (size_t j = 0; j < *n && !seen; j++) seen = strcmp((*ids)[j], it->id) == 0;
      if (seen) continue;
      if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *ids = nl_xrealloc(*ids, *cap * sizeof(**ids));
      }
      (*ids)[(*n)++] = it->id;
    }
  }
}

size_t nl_pleg__compute_events(const nl_pleg__pod_t *old, const nl_pleg__pod_t *cur,
                               nl_pleg__event_t **out) {
  const char **ids = NULL;
  size_t n_ids = 0, cap_ids = 0;
  collect_ids(old, &ids, &n_ids, &cap_ids);
  collect_ids(cur, &ids, &n_ids, &cap_ids);
  nl_pleg__event_t *ev = NULL;
  size_t n = 0;
  for (size_t i = 0; i < n_ids; i++) {
    nl_pleg__event_t two[2];
    size_t k = nl_pleg__generate_events(ids[i], state_of(old, ids[i]), state_of(cur, ids[i]), two);
    if (!k) continue;
    ev = nl_xrealloc(ev, (n + k) * sizeof(*ev));
    for (size_t j = 0; j < k; j++) {
      ev[n].type = two[j].type;
      ev[n].container_id = nl_xstrdup(ids[i]);
      n++;
    }
  }
  free(ids);
  *out = ev;
  return n;
}

void nl_pleg__events_free(nl_pleg__event_t *ev, size_t n) {
  for (size_t i = 0; i < n; i++) free(ev[i].container_id);
  free(ev);
}

/* ---- statuses ---------------------------------------------------------- */

uint32_t nl_pleg__parse_hash(const char *s) {
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 16);
  if (errno || *end || *s == '-' || *s == '+') return 0;
  return (uint32_t)v;
}

static int32_t parse_restart_count(const char *id, const char *s) {
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < 0 || v > INT32_MAX) {
    /* upstream logs and uses 0 */
    nl_warn("container %s: unable to get restartCount from annotation %s=\"%s\"", id,
            NL_ANN_CONTAINER_RESTART_COUNT, s);
    return 0;
  }
  return (int32_t)v;
}

int nl_pleg__convert_sandbox(const Runtime__V1__PodSandboxStatus *s, nl_rt_sandbox_t *out,
                             nl_err_t **err) {
  memset(out, 0, sizeof(*out));
  if (!s || !s->id || !*s->id) return nl_err_set(err, NL_EINVAL, "pod sandbox status has no id");
  out->id = nl_xstrdup(s->id);
  out->state = s->state == RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY ? NL_RT_SANDBOX_READY
                                                                       : NL_RT_SANDBOX_NOTREADY;
  out->attempt = s->metadata ? s->metadata->attempt : 0;
  out->created_at = s->created_at;
  if (s->network) {
    out->ip = dup_or_null(s->network->ip);
    for (size_t i = 0; i < s->network->n_additional_ips; i++) {
      const Runtime__V1__PodIP *ip = s->network->additional_ips[i];
      if (!ip || !ip->ip || !*ip->ip) continue;
      out->ips = nl_xrealloc(out->ips, (out->n_ips + 1) * sizeof(*out->ips));
      out->ips[out->n_ips++] = nl_xstrdup(ip->ip);
    }
  }
  out->host_network = s->linux && s->linux->namespaces && s->linux->namespaces->options &&
                      s->linux->namespaces->options->network == RUNTIME__V1__NAMESPACE_MODE__NODE;
  return 0;
}

/* upstream toKubeContainerUser: no user from the runtime (containerd 1.6) is
 * no user in the status; a user without its linux part is an empty one. */
static void convert_user(const Runtime__V1__ContainerUser *u, nl_rt_user_t *out) {
  if (!u) return;
  out->present = true;
  if (!u->linux) return;
  out->linux = true;
  out->uid = u->linux->uid;
  out->gid = u->linux->gid;
  out->n_groups = u->linux->n_supplemental_groups;
  if (out->n_groups) {
    out->groups = nl_xcalloc(out->n_groups, sizeof *out->groups);
    memcpy(out->groups, u->linux->supplemental_groups, out->n_groups * sizeof *out->groups);
  }
}

int nl_pleg__convert_container(const Runtime__V1__ContainerStatus *s, const char *sandbox_id,
                               nl_rt_container_t *out, nl_err_t **err) {
  memset(out, 0, sizeof(*out));
  if (!s || !s->id || !*s->id) return nl_err_set(err, NL_EINVAL, "container status has no id");
  /* upstream: "unable to convert a nil pointer to a runtime container status" */
  if (!s->metadata || !s->image)
    return nl_err_set(err, NL_EINVAL, "container %s: status has no %s", s->id,
                      !s->metadata ? "metadata" : "image");
  out->id = nl_xstrdup(s->id);
  const char *name = NL_RT_LABEL(s, NL_LABEL_CONTAINER_NAME);
  /* The label is the kubelet's; metadata carries the same name. */
  out->name = nl_xstrdup(name && *name ? name : (s->metadata->name ? s->metadata->name : ""));
  out->image = dup_or_null(s->image->image);
  out->image_ref = dup_or_null(s->image_ref);
  out->hash = nl_pleg__parse_hash(NL_RT_ANNOTATION(s, NL_ANN_CONTAINER_HASH));
  out->restart_count =
      parse_restart_count(s->id, NL_RT_ANNOTATION(s, NL_ANN_CONTAINER_RESTART_COUNT));
  out->termination_message_path =
      dup_or_null(NL_RT_ANNOTATION(s, NL_ANN_CONTAINER_TERMINATION_MESSAGE_PATH));
  out->log_path = dup_or_null(s->log_path);
  out->sandbox_id = dup_or_null(sandbox_id);
  out->created_at = s->created_at;
  convert_user(s->user, &out->user);
  switch (s->state) {
  case RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED: out->state = NL_RT_CONTAINER_CREATED; break;
  case RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING: out->state = NL_RT_CONTAINER_RUNNING; break;
  case RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED: out->state = NL_RT_CONTAINER_EXITED; break;
  default: out->state = NL_RT_CONTAINER_UNKNOWN; break;
  }
  /* Past "created" the container was started at least once. */
  if (out->state != NL_RT_CONTAINER_CREATED) out->started_at = s->started_at;
  if (out->state == NL_RT_CONTAINER_EXITED) {
    out->reason = dup_or_null(s->reason);
    out->message = dup_or_null(s->message);
    out->exit_code = s->exit_code;
    out->finished_at = s->finished_at;
  }
  return 0;
}

bool nl_pleg__termmsg_source(const Runtime__V1__ContainerStatus *s, const char **host_path,
                             bool *fallback) {
  *host_path = NULL;
  *fallback = false;
  if (s->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED) return false;
  const char *policy = NL_RT_ANNOTATION(s, NL_ANN_CONTAINER_TERMINATION_MESSAGE_POLICY);
  /* A container that could not even start has no logs to fall back to. */
  *fallback = policy && !strcmp(policy, "FallbackToLogsOnError") && s->exit_code != 0 &&
              !(s->reason && !strcmp(s->reason, "ContainerCannotRun"));
  const char *path = NL_RT_ANNOTATION(s, NL_ANN_CONTAINER_TERMINATION_MESSAGE_PATH);
  for (size_t i = 0; path && *path && i < s->n_mounts; i++) {
    const Runtime__V1__Mount *m = s->mounts[i];
    if (m && m->container_path && !strcmp(m->container_path, path) && m->host_path &&
        *m->host_path) {
      *host_path = m->host_path;
      break;
    }
  }
  return *host_path || *fallback;
}

void nl_pleg__add_termmsg(nl_rt_container_t *c, const char *msg) {
  if (!msg || !*msg) return;
  char *m = c->message ? nl_xasprintf("%s: %s", c->message, msg) : nl_xstrdup(msg);
  free(c->message);
  c->message = m;
}

bool nl_pleg__generic_reason(const nl_rt_container_t *c) {
  return !c->reason || !strcmp(c->reason, "Error");
}

nl_rt_container_t *nl_pleg__unsettled(nl_rt_container_t *c, size_t n, const nl_map_t *stopping,
                                      int64_t now_ns) {
  for (size_t i = 0; i < n; i++) {
    int64_t age = now_ns - c[i].finished_at;
    if (c[i].state == NL_RT_CONTAINER_EXITED && c[i].exit_code == 128 + 9 &&
        !nl_map_has(stopping, c[i].id) &&
        nl_pleg__generic_reason(&c[i]) && c[i].finished_at > 0 &&
        age > -NL_PLEG_OOM_SETTLE_NS && age < NL_PLEG_OOM_SETTLE_NS)
      return &c[i];
  }
  return NULL;
}

static int cmp_sandbox(const void *a, const void *b) {
  const nl_rt_sandbox_t *x = a, *y = b;
  return x->created_at > y->created_at ? -1 : x->created_at < y->created_at ? 1 : 0;
}

static int cmp_container(const void *a, const void *b) {
  const nl_rt_container_t *x = a, *y = b;
  return x->created_at > y->created_at ? -1 : x->created_at < y->created_at ? 1 : 0;
}

static void set_ips(nl_rt_pod_status_t *st, const char *primary, char *const *more, size_t n) {
  st->ips = nl_xcalloc(n + 1, sizeof(*st->ips));
  if (primary) st->ips[st->n_ips++] = nl_xstrdup(primary);
  for (size_t i = 0; i < n; i++) st->ips[st->n_ips++] = nl_xstrdup(more[i]);
  if (!st->n_ips) {
    free(st->ips);
    st->ips = NULL;
  }
}

nl_rt_pod_status_t *nl_pleg__build_status(const char *uid, const char *name, const char *ns,
                                          nl_rt_sandbox_t *sandboxes, size_t n_sandboxes,
                                          nl_rt_container_t *containers, size_t n_containers,
                                          const nl_rt_pod_status_t *prev, int64_t timestamp) {
  nl_rt_pod_status_t *st = nl_xcalloc(1, sizeof(*st));
  st->uid = nl_xstrdup(uid);
  st->name = name ? nl_xstrdup(name) : NULL;
  st->namespace_ = ns ? nl_xstrdup(ns) : NULL;
  st->timestamp = timestamp;
  if (n_sandboxes) qsort(sandboxes, n_sandboxes, sizeof(*sandboxes), cmp_sandbox);
  if (n_containers) qsort(containers, n_containers, sizeof(*containers), cmp_container);
  st->sandboxes = n_sandboxes ? sandboxes : (free(sandboxes), NULL);
  st->n_sandboxes = n_sandboxes;
  st->containers = n_containers ? containers : (free(containers), NULL);
  st->n_containers = n_containers;

  /* Only the newest sandbox gives the pod its IPs, and only while ready. */
  if (n_sandboxes && sandboxes[0].state == NL_RT_SANDBOX_READY)
    set_ips(st, sandboxes[0].ip, sandboxes[0].ips, sandboxes[0].n_ips);
  if (!st->n_ips && prev && prev->n_ips) {
    bool any_ready = false;
    for (size_t i = 0; i < n_sandboxes; i++) any_ready |= sandboxes[i].state == NL_RT_SANDBOX_READY;
    /* A finished pod keeps reporting the IP it had (upstream getPodIPs). */
    if (!any_ready) set_ips(st, NULL, prev->ips, prev->n_ips);
  }
  return st;
}
