#include "managers/status_manager.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kube/status.h"
#include "managers/status_patch.h"
#include "reactor/digest.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define PATCH_CTYPE "application/strategic-merge-patch+json"

static void step(nl_status_entry_t *e);
static void schedule(nl_status_manager_t *sm);

const char *nl_status_sync_state_name(nl_status_sync_state_t s) {
  switch (s) {
  case NL_STATUS_IDLE: return "idle";
  case NL_STATUS_GET: return "get";
  case NL_STATUS_PATCH: return "patch";
  case NL_STATUS_DELETE: return "delete";
  case NL_STATUS_BACKOFF: return "backoff";
  }
  return "?";
}

static void set_state(nl_status_entry_t *e, nl_status_sync_state_t s) {
  if (e->state == s) return;
  nl_vlog(4, "status: pod %s/%s: %s -> %s", e->namespace_, e->name,
          nl_status_sync_state_name(e->state), nl_status_sync_state_name(s));
  e->state = s;
}

static void replace_str(char **dst, const char *src) {
  free(*dst);
  *dst = src ? nl_xstrdup(src) : NULL;
}

static void entry_free(void *p) {
  nl_status_entry_t *e = p;
  assert(!e->req);
  free(e->uid);
  free(e->namespace_);
  free(e->name);
  free(e->api_uid);
  free(e->want);
  free(e->api);
  free(e);
}

static uint64_t now_ms(const nl_status_manager_t *sm) { return uv_now(sm->loop); }

/* ---- requests ---- */

static char *pod_path(const nl_status_entry_t *e, const char *suffix) {
  return nl_xasprintf("/api/v1/namespaces/%s/pods/%s%s", e->namespace_, e->name, suffix);
}

static void on_response(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err);

static void request(nl_status_entry_t *e, nl_status_sync_state_t s, const char *method,
                    const char *suffix, const char *ctype, const char *body) {
  assert(!e->req);
  char *path = pod_path(e, suffix);
  nl_kube_request_opts_t o = {
      .method = method,
      .path = path,
      .content_type = ctype,
      .body = body,
      .body_len = body ? strlen(body) : 0,
      .timeout_ms = e->sm->opts.timeout_ms,
  };
  set_state(e, s);
  e->req = nl_kube_request(e->sm->deps.kube, &o, on_response, e);
  free(path);
}

static uint64_t jitter(nl_status_manager_t *sm, uint64_t ms) {
  sm->rng ^= sm->rng << 13;
  sm->rng ^= sm->rng >> 7;
  sm->rng ^= sm->rng << 17;
  return ms + (ms / 4) * (sm->rng % 1000) / 1000;
}

static void fail(nl_status_entry_t *e, const char *what, const nl_kube_response_t *resp,
                 const nl_err_t *err) {
  nl_status_manager_t *sm = e->sm;
  nl_err_t *why = NULL;
  if (err)
    nl_err_set(&why, err->code, "%s", nl_err_msg(err));
  else
    nl_kube_status_err(resp, &why);
  sm->failures++;
  e->backoff_ms = e->backoff_ms ? e->backoff_ms * 2 : sm->opts.backoff_initial_ms;
  if (e->backoff_ms > sm->opts.backoff_max_ms) e->backoff_ms = sm->opts.backoff_max_ms;
  e->retry_at_ms = now_ms(sm) + jitter(sm, e->backoff_ms);
  /* the first failure of a series is news; the rest are at -v=4 */
  nl_vlog(e->backoff_ms == sm->opts.backoff_initial_ms ? 0 : 4,
          "status: %s pod %s/%s: %s (retrying in %llu ms)", what, e->namespace_, e->name,
          nl_err_msg(why), (unsigned long long)(e->retry_at_ms - now_ms(sm)));
  nl_err_free(&why);
  set_state(e, NL_STATUS_BACKOFF);
  schedule(sm);
}

/* The status object of a pod in a response body, or NULL. */
static json_t *pod_from(const nl_kube_response_t *resp) {
  return json_loadb(resp->body, resp->body_len, 0, NULL);
}

static char *dump(const json_t *j) { return json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER); }

/* Our own text: it parses. */
static json_t *load(const char *text) {
  json_t *j = json_loads(text, 0, NULL);
  assert(j);
  return j;
}

/* status: the API's (NULL: an empty one). */
static void set_api_status(nl_status_entry_t *e, const json_t *status) {
  free(e->api);
  json_t *empty = status ? NULL : json_object();
  e->api = dump(status ? status : empty);
  json_decref(empty);
  e->api_terminal = nl_status_phase_terminal(status);
  e->api_checked = false;
}

static void forget_api(nl_status_entry_t *e) {
  free(e->api);
  e->api = NULL;
  e->api_terminal = e->api_checked = false;
}

static void set_api(nl_status_entry_t *e, const json_t *pod) {
  set_api_status(e, json_object_get(pod, "status"));
}

static void on_get(nl_status_entry_t *e, const nl_kube_response_t *resp) {
  json_t *pod = pod_from(resp);
  const char *uid = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
  if (!uid || !e->api_uid || strcmp(uid, e->api_uid) != 0) {
    /* upstream: "Pod was deleted and then recreated, skipping status update" */
    nl_vlog(2, "status: pod %s/%s: the API has uid %s, not %s: not updating its status",
            e->namespace_, e->name, uid ? uid : "(none)", e->api_uid);
    e->acked = e->version;
  } else {
    set_api(e, pod);
  }
  json_decref(pod);
}

static void on_response(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  nl_status_entry_t *e = ctx;
  nl_status_manager_t *sm = e->sm;
  nl_status_sync_state_t was = e->state;
  e->req = NULL;
  if (e->removed) { /* forgotten while in flight; not counted by a stop */
    entry_free(e);
    return;
  }
  if (sm->stopping) {
    entry_free(e);
    if (--sm->pending == 0 && sm->done) sm->done(sm->done_ctx);
    return;
  }
  set_state(e, NL_STATUS_IDLE);
  const char *what = was == NL_STATUS_GET ? "get" : was == NL_STATUS_PATCH ? "update status of"
                                                                            : "delete";
  if (err || resp->status >= 300) {
    nl_kube_reason_t r = err ? NL_KUBE_REASON_UNKNOWN : nl_kube_status_reason(resp);
    if (r == NL_KUBE_REASON_NOT_FOUND || (was != NL_STATUS_GET && r == NL_KUBE_REASON_CONFLICT)) {
      /* Gone, or another object of that name (the uid precondition failed): the
       * status is not for it. A mirror pod gets recreated and observed again. */
      nl_vlog(2, "status: pod %s/%s: %s: %s", e->namespace_, e->name, what,
              nl_kube_reason_name(r));
      forget_api(e);
      e->acked = e->version;
      if (was == NL_STATUS_DELETE) e->deleted = true;
    } else {
      /* An answered refusal (say a patch built on a status another writer has
       * since changed): the next try starts from a fresh read, as upstream's
       * syncPod always does. */
      if (!err && was == NL_STATUS_PATCH) forget_api(e);
      fail(e, what, resp, err);
      return;
    }
  } else {
    e->backoff_ms = 0;
    if (was == NL_STATUS_GET) {
      on_get(e, resp);
    } else if (was == NL_STATUS_PATCH) {
      json_t *pod = pod_from(resp);
      set_api(e, pod);
      json_decref(pod);
      e->acked = e->in_flight;
    } else {
      nl_info("pod %s/%s: deleted from the API server after termination", e->namespace_,
              e->name);
      e->deleted = true;
    }
  }
  if (e->deleted && sm->deps.deleted) {
    e->calling_out = true; /* a removal now leaves e to us */
    sm->deps.deleted(sm->deps.ctx, e->uid);
    e->calling_out = false;
    if (e->removed) {
      entry_free(e);
      return;
    }
  }
  step(e);
}

/* ---- the per-pod machine ---- */

/* The uid of the API object that shows this pod's status, or NULL. */
static const char *target_uid(nl_status_entry_t *e) {
  if (!e->is_static) return e->uid;
  const nl_status_manager_deps_t *d = &e->sm->deps;
  return d->mirror_uid ? d->mirror_uid(d->ctx, e->namespace_, e->name, e->uid) : NULL;
}

/* upstream canBeDeleted: never a mirror pod (static pods are not deleted this way) */
static bool can_be_deleted(const nl_status_entry_t *e) {
  return e->deleting && !e->is_static && e->finished && !e->deleted && e->api &&
         e->api_terminal;
}

static void send_delete(nl_status_entry_t *e) {
  char *text = nl_status_delete_body(e->api_uid);
  e->sm->deletes++;
  request(e, NL_STATUS_DELETE, "DELETE", "", NULL, text);
  free(text);
}


/* mergePodStatus's delay: a terminal phase is not written while a container
 * of the pod could still run (its worker has not finished); the API keeps its
 * phase, reason and message until then, so that whoever waits for the phase
 * finds the containers stopped (a sidecar's last words in its log, say). */
static json_t *merge(const nl_status_entry_t *e, const json_t *api, const json_t *want) {
  json_t *m = nl_status_merge(api, want);
  if (e->finished || !nl_status_phase_terminal(m) || nl_status_phase_terminal(api)) return m;
  static const char *const held[] = {"phase", "reason", "message"};
  for (size_t i = 0; i < 3; i++) {
    json_t *v = json_object_get(api, held[i]);
    if (v) json_object_set(m, held[i], v);
    else json_object_del(m, held[i]);
  }
  return m;
}

static void step(nl_status_entry_t *e) {
  nl_status_manager_t *sm = e->sm;
  if (e->req || e->removed || e->deleted || sm->stopping || !sm->started) return;
  if (e->state == NL_STATUS_BACKOFF) {
    if (now_ms(sm) < e->retry_at_ms) return;
    set_state(e, NL_STATUS_IDLE);
  }
  assert(e->state == NL_STATUS_IDLE);
  const char *target = target_uid(e);
  if (!target) return; /* a static pod without a mirror pod yet */
  if (!e->api_uid || strcmp(e->api_uid, target) != 0) {
    replace_str(&e->api_uid, target);
    forget_api(e);
    e->acked = 0;
  }
  bool stale = e->acked < e->version;
  if (!stale && !can_be_deleted(e)) return;
  if (!e->api) {
    sm->gets++;
    request(e, NL_STATUS_GET, "GET", "", NULL, NULL);
    return;
  }
  if (stale) {
    json_t *api = load(e->api), *want = load(e->want);
    json_t *merged = merge(e, api, want);
    json_t *patch = nl_status_patch(e->api_uid, api, merged);
    json_decref(merged);
    json_decref(api);
    json_decref(want);
    if (patch) {
      char *text = nl_status_patch_dump(patch);
      json_decref(patch);
      nl_vlog(3, "status: patch pod %s/%s: %s", e->namespace_, e->name, text);
      e->in_flight = e->version;
      sm->patches++;
      request(e, NL_STATUS_PATCH, "PATCH", "/status", PATCH_CTYPE, text);
      free(text);
      return;
    }
    e->acked = e->version; /* the API has it already */
  }
  if (can_be_deleted(e)) send_delete(e);
}

/* ---- the timer: back-off ends and the periodic reconcile ---- */

static void reconcile(nl_status_manager_t *sm) {
  nl_map_iter_t it;
  void *v;
  nl_map_iter_init(&it, &sm->pods);
  while (nl_map_iter_next(&it, NULL, &v)) {
    nl_status_entry_t *e = v;
    if (e->req || e->deleted || e->acked < e->version || !e->api) continue;
    if (!e->api_checked) { /* neither changed since the last check: the same answer */
      json_t *api = load(e->api), *want = load(e->want);
      json_t *merged = merge(e, api, want);
      e->api_same = nl_status_equal(api, merged);
      e->api_checked = true;
      json_decref(merged);
      json_decref(api);
      json_decref(want);
    }
    if (!e->api_same) {
      nl_vlog(3, "status: pod %s/%s: the API's status differs from ours: reconciling",
              e->namespace_, e->name);
      e->acked = 0;
    }
  }
}

static void on_timer(uv_timer_t *t) {
  nl_status_manager_t *sm = container_of(t, nl_status_manager_t, timer);
  uint64_t now = now_ms(sm);
  if (now >= sm->next_reconcile_ms) {
    reconcile(sm);
    sm->next_reconcile_ms = now + sm->opts.sync_period_ms;
  }
  nl_status_manager_sync(sm);
  schedule(sm);
}

static void schedule(nl_status_manager_t *sm) {
  if (!sm->started || sm->stopping) return;
  uint64_t next = sm->next_reconcile_ms;
  nl_map_iter_t it;
  void *v;
  nl_map_iter_init(&it, &sm->pods);
  while (nl_map_iter_next(&it, NULL, &v)) {
    nl_status_entry_t *e = v;
    if (e->state == NL_STATUS_BACKOFF && e->retry_at_ms < next) next = e->retry_at_ms;
  }
  uint64_t now = now_ms(sm);
  uv_timer_start(&sm->timer, on_timer, next > now ? next - now : 0, 0);
}

/* ---- the API ---- */

void nl_status_manager_init(nl_status_manager_t *sm, uv_loop_t *loop,
                            const nl_status_manager_deps_t *deps,
                            const nl_status_manager_opts_t *opts) {
  memset(sm, 0, sizeof *sm);
  sm->loop = loop;
  sm->deps = *deps;
  if (opts) sm->opts = *opts;
  if (!sm->opts.sync_period_ms) sm->opts.sync_period_ms = 10000;
  if (!sm->opts.backoff_initial_ms) sm->opts.backoff_initial_ms = 500;
  if (!sm->opts.backoff_max_ms) sm->opts.backoff_max_ms = sm->opts.sync_period_ms;
  sm->rng = (uint64_t)(uintptr_t)sm | 1;
  nl_map_init(&sm->pods);
  uv_timer_init(loop, &sm->timer);
}

void nl_status_manager_start(nl_status_manager_t *sm) {
  sm->started = true;
  sm->next_reconcile_ms = now_ms(sm) + sm->opts.sync_period_ms;
  nl_status_manager_sync(sm);
  schedule(sm);
}

static void on_timer_closed(uv_handle_t *h) {
  nl_status_manager_t *sm = container_of((uv_timer_t *)h, nl_status_manager_t, timer);
  if (--sm->pending == 0 && sm->done) sm->done(sm->done_ctx);
}

void nl_status_manager_stop(nl_status_manager_t *sm, void (*done)(void *ctx), void *ctx) {
  if (sm->stopping) return;
  sm->stopping = true;
  sm->done = done;
  sm->done_ctx = ctx;
  sm->pending = 1; /* the timer */
  nl_map_iter_t it;
  const char *uid;
  void *v;
  nl_map_iter_init(&it, &sm->pods);
  while (nl_map_iter_next(&it, &uid, &v)) {
    nl_status_entry_t *e = v;
    nl_map_del(&sm->pods, uid);
    if (e->req) { /* freed by its completion */
      sm->pending++;
      nl_kube_req_cancel(e->req);
    } else {
      entry_free(e);
    }
  }
  nl_map_free(&sm->pods, NULL);
  uv_close((uv_handle_t *)&sm->timer, on_timer_closed);
}

void nl_status_manager_set(nl_status_manager_t *sm, const nl_status_pod_t *pod,
                           const nl_pod_status_t *status) {
  if (sm->stopping) return;
  nl_status_entry_t *e = nl_map_get(&sm->pods, pod->uid);
  if (!e) {
    e = nl_xcalloc(1, sizeof *e);
    e->sm = sm;
    e->uid = nl_xstrdup(pod->uid);
    nl_map_put(&sm->pods, e->uid, e);
  }
  replace_str(&e->namespace_, pod->namespace_);
  replace_str(&e->name, pod->name);
  e->is_static = pod->is_static;
  bool newly_deletable = (pod->deleting && !e->deleting) || (pod->finished && !e->finished);
  e->deleting = pod->deleting;
  e->finished = e->finished || pod->finished; /* once finished, always finished */
  nl_buf_t text = NL_BUF_INIT;
  nl_pod_status_encode_json(status, &text);
  /* The same status again: merging it into want (which already has it merged)
   * gives want back, so nothing is parsed. */
  unsigned char sum[32];
  nl_sha256(text.data, text.len, sum);
  if (e->has_generated && memcmp(e->generated, sum, sizeof sum) == 0 && !newly_deletable) {
    nl_buf_free(&text);
    return;
  }
  memcpy(e->generated, sum, sizeof sum);
  e->has_generated = true;
  json_t *st = load(text.data);
  nl_buf_free(&text);
  if (e->want) {
    /* A terminal phase recorded before is kept (the merge's guard). */
    json_t *want = load(e->want);
    json_t *kept = nl_status_merge(want, st);
    json_decref(st);
    st = kept;
    const char *was = json_string_value(json_object_get(want, "phase"));
    if (nl_status_phase_terminal(want) && strcmp(was, nl_pod_phase_name(status->phase)) != 0)
      nl_warn("status: pod %s/%s attempted an illegal phase transition to %s: kept %s",
              e->namespace_, e->name, nl_pod_phase_name(status->phase), was);
    bool same = nl_status_equal(want, st);
    json_decref(want);
    if (same && !newly_deletable) {
      json_decref(st); /* upstream: "Ignoring same status for pod" */
      return;
    }
  }
  free(e->want);
  e->want = dump(st);
  json_decref(st);
  e->api_checked = false;
  e->version++;
  step(e);
}

/* An empty value: what an encoder that writes every field gives for one the
 * API left out. */
static bool empty(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_NULL:
  case JSON_FALSE: return true;
  case JSON_STRING: return json_string_length(v) == 0;
  case JSON_INTEGER: return json_integer_value(v) == 0;
  case JSON_ARRAY: return json_array_size(v) == 0;
  case JSON_OBJECT: return json_object_size(v) == 0;
  default: return false;
  }
}

/* True when every field of w has the same value in a (lists element by element,
 * of the same length; an empty field of w matches one a leaves out). w is the
 * watched status as the pod model re-encodes it: the fields a kubelet reads,
 * not every field the API has (a volume mount's status, allocated resources),
 * so "the same" can only mean "the same in those". */
static bool covers(const json_t *a, const json_t *w) {
  if (!a) return empty(w);
  if (json_is_object(w)) {
    if (!json_is_object(a)) return false;
    const char *k;
    json_t *wv;
    json_object_foreach((json_t *)w, k, wv) {
      if (!covers(json_object_get(a, k), wv)) return false;
    }
    return true;
  }
  if (json_is_array(w)) {
    if (!json_is_array(a) || json_array_size(a) != json_array_size(w)) return false;
    for (size_t i = 0; i < json_array_size(w); i++)
      if (!covers(json_array_get(a, i), json_array_get(w, i))) return false;
    return true;
  }
  return json_equal((json_t *)a, (json_t *)w) || (empty(w) && empty(a));
}

void nl_status_manager_observe(nl_status_manager_t *sm, const char *namespace_,
                               const char *name, const char *api_uid, const json_t *status) {
  nl_map_iter_t it;
  void *v;
  nl_map_iter_init(&it, &sm->pods);
  while (nl_map_iter_next(&it, NULL, &v)) {
    nl_status_entry_t *e = v;
    if (e->req || !e->api_uid || strcmp(e->api_uid, api_uid) != 0 ||
        strcmp(e->namespace_, namespace_) != 0 || strcmp(e->name, name) != 0)
      continue;
    /* The watch shows our own writes too: what the last answer said already
     * (in the fields the watch carries) keeps that whole answer, so that a
     * status in sync is never patched again for fields the watch leaves out. */
    if (e->api && status) {
      json_t *api = load(e->api);
      bool same = covers(api, status);
      json_decref(api);
      if (same) continue;
    }
    set_api_status(e, status);
  }
}

void nl_status_manager_sync(nl_status_manager_t *sm) {
  nl_map_iter_t it;
  void *v;
  nl_map_iter_init(&it, &sm->pods);
  while (nl_map_iter_next(&it, NULL, &v)) step(v);
}

void nl_status_manager_remove(nl_status_manager_t *sm, const char *uid) {
  nl_status_entry_t *e = nl_map_del(&sm->pods, uid);
  if (!e) return;
  e->removed = true;
  if (e->req)
    nl_kube_req_cancel(e->req); /* on_response frees it */
  else if (!e->calling_out)
    entry_free(e);
}

const nl_status_entry_t *nl_status_manager_entry(const nl_status_manager_t *sm, const char *uid) {
  return nl_map_get(&sm->pods, uid);
}
