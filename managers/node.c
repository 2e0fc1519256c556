/* The node machine: facts, registration, status (see node.h). One step()
 * switches on the state; completions record their result and call step(). */
#include "managers/node.h"

#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/kube/pb.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define STATUS_TRIES 5 /* upstream nodeStatusUpdateRetry */

struct nl_node__runtime_q {
  nl_node_t *owner; /* NULL once the manager stopped: the answer is dropped */
};

static void step(nl_node_t *n);

static const char *const state_names[] = {
    "Idle", "Facts", "Runtime", "Register", "GetExisting", "Reconcile",
    "Backoff", "Wait", "StatusGet", "StatusPatch", "Stopped"};

const char *nl_node_state_name(nl_node_state_t s) { return state_names[s]; }

static void set_state(nl_node_t *n, nl_node_state_t s) {
  nl_vlog(4, "node %s: %s -> %s", n->opts.conf.name, state_names[n->state], state_names[s]);
  n->state = s;
}

const json_t *nl_node_object(const nl_node_t *n) { return n->prev ? n->prev : n->initial; }
const char *nl_node_uid(const nl_node_t *n) { return n->uid ? n->uid : ""; }
bool nl_node_ready(const nl_node_t *n) { return n->ready; }

uint64_t nl_node__jittered(nl_backoff_t *rng, uint64_t period_ms) {
  return period_ms + (uint64_t)((double)period_ms * 0.04 * nl_backoff_random(rng));
}

int64_t nl_node__now_ns(const nl_node_t *n) {
  if (n->deps.now_ns) return n->deps.now_ns(n->deps.ctx);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t nl_node__timeout_ms(const nl_node_t *n) {
  uint64_t lease_ms = (uint64_t)n->opts.lease_duration_s * 1000;
  return n->opts.update_ms < lease_ms ? n->opts.update_ms : lease_ms;
}

void nl_node__fail(nl_node_faillog_t *l, uint64_t now_ms, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  l->failures++;
  if (l->failures == 1 || now_ms - l->last_log_ms >= 60000) {
    if (l->failures == 1) nl_error("%s: %s", l->what, msg);
    else nl_error("%s: %s (%u failures so far)", l->what, msg, l->failures);
    l->last_log_ms = now_ms;
  } else {
    nl_vlog(4, "%s: %s", l->what, msg);
  }
}

void nl_node__ok(nl_node_faillog_t *l) {
  if (l->failures) nl_info("%s: succeeded after %u failures", l->what, l->failures);
  l->failures = 0;
}

void nl_node__req_err(const nl_kube_response_t *resp, const nl_err_t *err, nl_err_t **out) {
  if (err) nl_err_set(out, err->code, "%s", nl_err_msg(err));
  else nl_kube_status_err(resp, out);
}

/* ---- requests ---- */

static void on_response(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err);

nl_kube_req_t *nl_node__request(nl_node_t *n, const char *method, const char *path,
                                const char *kind, const char *ctype, json_t *body,
                                nl_node_answer_t answer, nl_kube_done_fn cb, void *ctx) {
  nl_kube_request_opts_t o = {.method = method, .path = path, .content_type = ctype,
                              .timeout_ms = nl_node__timeout_ms(n),
                              .accept_metadata = answer != NL_NODE_ANSWER_OBJECT,
                              .head_only = answer == NL_NODE_ANSWER_STATUS};
  const char *api_version = strcmp(kind, "Lease") == 0 ? "coordination.k8s.io/v1" : "v1";
  nl_kube_req_t *r = nl_kube_request_kind(n->deps.kube, &o, api_version, kind, body, cb, ctx);
  json_decref(body);
  return r;
}

bool nl_node__partial(const json_t *obj) {
  const char *kind = json_string_value(json_object_get(obj, "kind"));
  return kind && strcmp(kind, "PartialObjectMetadata") == 0;
}

json_t *nl_node__object(const nl_kube_response_t *resp) {
  json_t *o = NULL;
  nl_cleanup_err nl_err_t *err = NULL;
  if (nl_kube_resp_json(resp, &o, &err) < 0 || !json_is_object(o)) {
    nl_warn("node: an answer of the API server does not decode: %s", err ? nl_err_msg(err) : "not an object");
    json_decref(o);
    return NULL;
  }
  return o;
}

static void request(nl_node_t *n, const char *method, const char *path, const char *ctype,
                    json_t *body) {
  assert(!n->req);
  /* A status patch needs no more of its answer than its status: the watch
   * brings the patched Node (~2 KB, every report) anyway. */
  nl_node_answer_t a = n->state == NL_NODE_STATUS_PATCH ? NL_NODE_ANSWER_STATUS : NL_NODE_ANSWER_OBJECT;
  n->req = nl_node__request(n, method, path, "Node", ctype, body, a, on_response, n);
}

static char *node_path(const nl_node_t *n, const char *suffix) {
  return nl_xasprintf("/api/v1/nodes/%s%s", n->opts.conf.name, suffix);
}

/* ---- the runtime ---- */

static void set_cond(nl_node_cri_cond_t *dst, const nl_node_cri_cond_t *src) {
  free((char *)dst->reason);
  free((char *)dst->message);
  *dst = *src;
  dst->reason = src->reason ? nl_xstrdup(src->reason) : NULL;
  dst->message = src->message ? nl_xstrdup(src->message) : NULL;
}

static void free_images(nl_node_t *n) {
  for (size_t i = 0; i < n->n_images; i++) {
    for (size_t j = 0; j < n->images[i].n_names; j++) free((char *)n->images[i].names[j]);
    free((void *)n->images[i].names);
  }
  free(n->images);
  n->images = NULL;
  n->n_images = 0;
}

static void free_handlers(nl_node_t *n) {
  for (size_t i = 0; i < n->n_handlers; i++) free((char *)n->handlers[i].name);
  free(n->handlers);
  n->handlers = NULL;
  n->n_handlers = 0;
}

bool nl_node_supports_rro(const nl_node_t *n, const char *handler) {
  for (size_t i = 0; i < n->n_handlers; i++)
    if (strcmp(n->handlers[i].name, handler) == 0) return n->handlers[i].recursive_read_only_mounts;
  return false;
}

int nl_node_supports_userns(const nl_node_t *n, const char *handler) {
  if (!n->status_seen) return -2;
  if (!n->n_handlers) return 0;
  for (size_t i = 0; i < n->n_handlers; i++)
    if (strcmp(n->handlers[i].name, handler) == 0) return n->handlers[i].user_namespaces;
  return -1;
}

/* Upstream's updateRuntimeUp: the state holds until the next good Status. */
static void observe_runtime(nl_node_t *n, const nl_node_runtime_info_t *in) {
  if (in->status_ok) {
    n->status_seen = true;
    set_cond(&n->runtime_ready, &in->runtime_ready);
    set_cond(&n->network_ready, &in->network_ready);
    free_handlers(n);
    n->handlers = nl_xcalloc(in->n_handlers ? in->n_handlers : 1, sizeof *n->handlers);
    for (size_t i = 0; i < in->n_handlers; i++) {
      n->handlers[i] = in->handlers[i];
      n->handlers[i].name = nl_xstrdup(in->handlers[i].name);
    }
    n->n_handlers = in->n_handlers;
    n->features = in->features;
    if (in->runtime_ready.present && in->runtime_ready.status)
      n->runtime_sync_ns = nl_node__now_ns(n);
  }
  if (in->runtime_name) {
    free(n->runtime_type);
    free(n->runtime_version);
    n->runtime_type = nl_xstrdup(in->runtime_name);
    n->runtime_version = nl_xasprintf("%s://%s", in->runtime_name,
                                      in->runtime_version ? in->runtime_version : "Unknown");
  }
  if (in->images_ok) {
    free_images(n);
    n->images = nl_xcalloc(in->n_images ? in->n_images : 1, sizeof *n->images);
    for (size_t i = 0; i < in->n_images; i++) {
      const nl_node_image_t *src = &in->images[i];
      const char **names = nl_xcalloc(src->n_names ? src->n_names : 1, sizeof *names);
      for (size_t j = 0; j < src->n_names; j++) names[j] = nl_xstrdup(src->names[j]);
      n->images[i] = (nl_node_image_t){names, src->n_names, src->size_bytes};
    }
    n->n_images = in->n_images;
    n->images_known = true;
  }
}

static void on_runtime(void *ctx, const nl_node_runtime_info_t *info) {
  struct nl_node__runtime_q *q = ctx;
  nl_node_t *n = q->owner;
  free(q);
  if (!n) return;
  n->rq = NULL;
  observe_runtime(n, info);
  set_state(n, n->registered || !n->opts.register_node ? NL_NODE_STATUS_GET : NL_NODE_REGISTER);
  if (!n->status_retry) n->status_tries = 0; /* a new round */
  n->status_retry = false;
  step(n);
}

static nl_node_inputs_t inputs(nl_node_t *n, nl_err_t **pleg_err) {
  nl_node_inputs_t in = {
      .now_ns = nl_node__now_ns(n),
      .runtime_sync_ns = n->runtime_sync_ns,
      .status_seen = n->status_seen,
      .runtime_ready = n->runtime_ready,
      .network_ready = n->network_ready,
      .runtime_version = n->runtime_version,
      .runtime_type = n->runtime_type,
      .images = n->images,
      .n_images = n->n_images,
      .images_known = n->images_known,
      .handlers = n->handlers,
      .n_handlers = n->n_handlers,
      .features = n->features,
      .shutting_down = n->shutting_down,
  };
  if (n->deps.pressure)
    n->deps.pressure(n->deps.ctx, &in.memory_pressure, &in.disk_pressure, &in.pid_pressure);
  if (n->deps.extended) {
    free(n->extended);
    n->extended = n->deps.extended(n->deps.ctx, &n->n_extended);
    in.extended = n->extended;
    in.n_extended = n->n_extended;
  }
  if (n->deps.pleg_healthy && !n->deps.pleg_healthy(n->deps.ctx, in.now_ns, pleg_err))
    in.pleg_error = *pleg_err ? nl_err_msg(*pleg_err) : "unhealthy";
  return in;
}

/* ---- facts ---- */

static void facts_work(uv_work_t *w) {
  nl_node_t *n = container_of(w, nl_node_t, facts_work);
  nl_node_facts_read(&n->opts.paths, &n->facts);
}

static void facts_done(uv_work_t *w, int status) {
  nl_node_t *n = container_of(w, nl_node_t, facts_work);
  n->facts_busy = false;
  if (n->state == NL_NODE_STOPPED) {
    nl_node__closed(n);
    return;
  }
  nl_vlog(2, "node %s: %lld CPUs, %lld bytes of memory, boot id %s", n->opts.conf.name,
          (long long)n->facts.cpus, (long long)n->facts.memory_bytes, n->facts.boot_id);
  set_state(n, NL_NODE_RUNTIME);
  step(n);
}

/* ---- timers ---- */

void nl_node_status_kick(nl_node_t *n) {
  if (n->state != NL_NODE_WAIT) return; /* the round under way or the next reads it */
  uv_timer_stop(&n->timer);
  set_state(n, NL_NODE_RUNTIME);
  step(n);
}

void nl_node_set_shutting_down(nl_node_t *n) {
  n->shutting_down = true;
  if (n->state != NL_NODE_WAIT) return; /* the round under way or the next reads it */
  uv_timer_stop(&n->timer);
  set_state(n, NL_NODE_RUNTIME);
  step(n);
}

static void on_timer(uv_timer_t *t) {
  nl_node_t *n = container_of(t, nl_node_t, timer);
  assert(n->state == NL_NODE_BACKOFF || n->state == NL_NODE_WAIT);
  set_state(n, NL_NODE_RUNTIME);
  step(n);
}

/* A Lease renewal succeeded after failures: the link is back. The status
 * round goes now rather than at its next tick (up to 10 s on), reading the
 * Node afresh (read_fresh), so that a node the node lifecycle controller
 * marked Unknown meanwhile is Ready again as soon as the link allows. */
void nl_node__link_back(nl_node_t *n) {
  n->read_fresh = true;
  if (n->state == NL_NODE_WAIT) uv_timer_start(&n->timer, on_timer, 0, 0);
}

/* What is kept of the Node between rounds (nl_node_object: admission reads its
 * name, labels, taints, allocatable and features): the rest (images, conditions, nodeInfo)
 * is read again at the next round, and holding it would only cost memory. */
static json_t *slim_node(const json_t *node) {
  const json_t *md = json_object_get(node, "metadata");
  json_t *slim = json_pack("{s:{},s:{},s:{}}", "metadata", "spec", "status");
  const char *keys[][2] = {{"metadata", "name"}, {"metadata", "labels"}, {"metadata", "uid"},
                           {"spec", "taints"}, {"status", "allocatable"},
                           {"status", "features"}};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    json_t *v = json_object_get(i < 3 ? md : json_object_get(node, keys[i][0]), keys[i][1]);
    if (v) json_object_set(json_object_get(slim, keys[i][0]), keys[i][1], v);
  }
  return slim;
}

static void wait_next(nl_node_t *n) {
  if (n->prev) {
    json_t *slim = slim_node(n->prev);
    json_decref(n->prev);
    n->prev = slim;
  }
  uint64_t fast = n->opts.fast_ms ? n->opts.fast_ms : 1000;
  /* every nodeStatusUpdateFrequency, jittered (upstream's syncNodeStatus loop);
   * the fast rounds before Ready are not */
  uint64_t delay = n->ready || fast > n->opts.update_ms ? nl_node__jittered(&n->backoff, n->opts.update_ms)
                                                        : fast;
  set_state(n, NL_NODE_WAIT);
  uv_timer_start(&n->timer, on_timer, delay, 0);
}

static void register_failed(nl_node_t *n, const char *msg) {
  nl_node__fail(&n->log, uv_now(n->loop), "unable to register node %s with API server: %s",
                n->opts.conf.name, msg);
  set_state(n, NL_NODE_BACKOFF);
  uv_timer_start(&n->timer, on_timer, nl_backoff_next(&n->backoff), 0);
}

/* ---- the Node ---- */

static void start_watch(nl_node_t *n);

/* Takes node (the Node of an answer or of the watch; NULL when it did not decode). */
static void learn_node(nl_node_t *n, json_t *node) {
  start_watch(n);
  const char *uid = json_string_value(json_object_get(json_object_get(node, "metadata"), "uid"));
  if (uid && (!n->uid || strcmp(uid, n->uid) != 0)) {
    free(n->uid);
    n->uid = nl_xstrdup(uid);
    nl_node__lease_kick(&n->lease);
  }
  json_decref(n->prev);
  n->prev = node;
}

static void registered(nl_node_t *n) {
  json_decref(n->initial); /* kept only for the reconcile of an existing Node */
  n->initial = NULL;
  nl_node__ok(&n->log);
  nl_backoff_reset(&n->backoff);
  n->registered = true;
  n->last_report_ms = uv_now(n->loop);
}

static bool ready_of(const json_t *status) {
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(status, "conditions"), i, c) {
    if (strcmp(json_string_value(json_object_get(c, "type")), "Ready") == 0)
      return strcmp(json_string_value(json_object_get(c, "status")), "True") == 0;
  }
  return false;
}

static void on_response(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  nl_node_t *n = ctx;
  n->req = NULL;
  if (n->state == NL_NODE_STOPPED) {
    nl_node__closed(n);
    return;
  }
  int code = err ? 0 : resp->status;
  nl_cleanup_err nl_err_t *e = NULL;
  if (code < 200 || code > 299) nl_node__req_err(resp, err, &e);
  switch (n->state) {
  case NL_NODE_REGISTER:
    if (code == 201 || code == 200) {
      learn_node(n, nl_node__object(resp));
      n->ready = ready_of(json_object_get(n->initial, "status"));
      registered(n);
      nl_info("Successfully registered node %s", n->opts.conf.name);
      set_state(n, NL_NODE_STATUS_GET);
    } else if (code == 409) {
      set_state(n, NL_NODE_GET_EXISTING);
    } else {
      register_failed(n, nl_err_msg(e));
      return;
    }
    break;
  case NL_NODE_GET_EXISTING:
    if (code != 200) {
      register_failed(n, e ? nl_err_msg(e) : "error getting existing node");
      return;
    }
    learn_node(n, nl_node__object(resp));
    nl_info("Node %s was previously registered", n->opts.conf.name);
    set_state(n, NL_NODE_RECONCILE);
    break;
  case NL_NODE_RECONCILE:
    if (code != 200) {
      register_failed(n, nl_err_msg(e));
      return;
    }
    learn_node(n, nl_node__object(resp));
    registered(n);
    set_state(n, NL_NODE_STATUS_GET);
    break;
  case NL_NODE_STATUS_GET:
  case NL_NODE_STATUS_PATCH:
    if (code == 404 && n->opts.register_node) {
      nl_warn("node %s: not found on the API server (deleted?); registering it again",
              n->opts.conf.name);
      n->registered = false;
      n->ready = false;
      set_state(n, NL_NODE_RUNTIME);
      break;
    }
    if (!e) {
      bool patched = n->state == NL_NODE_STATUS_PATCH;
      json_t *got = patched && resp->body_len == 0 ? NULL : nl_node__object(resp);
      if (patched && n->prev && (!got || nl_node__partial(got))) {
        /* The Node patched, as far as the node's own view goes, until the
         * watch brings it: the one the round diffed against, with the
         * status it sent (status_round) and the new metadata when the
         * answer had any. */
        json_t *node = json_deep_copy(n->prev);
        if (got) json_object_set(node, "metadata", json_object_get(got, "metadata"));
        json_decref(got);
        got = node;
      }
      learn_node(n, got);
      if (n->state == NL_NODE_STATUS_GET) {
        set_state(n, NL_NODE_STATUS_PATCH);
      } else {
        nl_node__ok(&n->log);
        n->last_report_ms = uv_now(n->loop);
        wait_next(n);
        return;
      }
      break;
    }
    nl_node__fail(&n->log, uv_now(n->loop), "error updating node status of %s: %s",
                  n->opts.conf.name, nl_err_msg(e));
    if (++n->status_tries >= STATUS_TRIES) {
      wait_next(n);
      return;
    }
    /* Ask the runtime again first: a round of failed tries against an absent
     * apiserver lasts longer than the runtime's staleness threshold, and the
     * status that goes out when it answers must not call the runtime down. */
    n->status_retry = true;
    set_state(n, NL_NODE_RUNTIME);
    break;
  default:
    assert(0 && "response in a state without a request");
  }
  step(n);
}

/* upstream's status setters record an event when a condition is new or its
 * status changed: "Node n1 status is now: NodeReady". */
static const struct {
  const char *type, *if_true, *if_false;
} cond_events[] = {
    {"MemoryPressure", "NodeHasInsufficientMemory", "NodeHasSufficientMemory"},
    {"DiskPressure", "NodeHasDiskPressure", "NodeHasNoDiskPressure"},
    {"PIDPressure", "NodeHasInsufficientPID", "NodeHasSufficientPID"},
    {"Ready", "NodeReady", "NodeNotReady"},
};

static const char *cond_status(const json_t *status, const char *type) {
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(status, "conditions"), i, c) {
    if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
      return json_string_value(json_object_get(c, "status"));
  }
  return NULL;
}

static void status_events(nl_node_t *n, const json_t *status, const json_t *prev) {
  const char *name = n->opts.conf.name;
  nl_event_ref_t ref = nl_event_node_ref(name);
  for (size_t i = 0; i < sizeof cond_events / sizeof *cond_events; i++) {
    const char *now = cond_status(status, cond_events[i].type);
    const char *was = prev ? cond_status(prev, cond_events[i].type) : NULL;
    if (!now || (was && strcmp(was, now) == 0)) continue;
    const char *reason = strcmp(now, "True") == 0 ? cond_events[i].if_true : cond_events[i].if_false;
    nl_event_record(&n->deps.events, &ref, NL_EVENT_NORMAL, reason, "Node %s status is now: %s",
                    name, reason);
  }
  const char *boot = json_string_value(
      json_object_get(json_object_get(prev, "nodeInfo"), "bootID"));
  if (boot && *boot && n->facts.boot_id && *n->facts.boot_id && strcmp(boot, n->facts.boot_id))
    nl_event_record(&n->deps.events, &ref, NL_EVENT_WARNING, "Rebooted",
                    "Node %s has been rebooted, boot id: %s", name, n->facts.boot_id);
}

/* Computes the status against the Node just read; patches it when needed. */
static void status_round(nl_node_t *n) {
  nl_cleanup_err nl_err_t *pleg = NULL, *e = NULL;
  nl_node_inputs_t in = inputs(n, &pleg);
  const json_t *prev = json_object_get(n->prev, "status");
  json_t *status = nl_node_status(&n->opts.conf, &n->facts, &in, prev, &e);
  assert(status); /* reservations were checked by nl_node_init */
  bool ready = ready_of(status);
  status_events(n, status, prev);
  bool due = uv_now(n->loop) - n->last_report_ms >= n->opts.report_ms;
  if (!due && !nl_node_status_changed(status, prev)) {
    json_decref(status);
    n->ready = ready;
    wait_next(n);
    return;
  }
  if (ready != n->ready) nl_info("node %s: Ready=%s", n->opts.conf.name, ready ? "True" : "False");
  n->ready = ready;
  char *path = node_path(n, "/status");
  request(n, "PATCH", path, "application/strategic-merge-patch+json",
          json_pack("{s:o}", "status", nl_node_status_patch(status, prev)));
  /* Admission and the downward API read the Node (nl_node_object): the
   * status written now, not the Node read before it, which stays until the
   * next round, 10 s on (the patch's answer is metadata only). A Strict pod
   * right after the first status would be rejected on its features, and a
   * pod right after a restart that freed huge pages measured against the
   * allocatable memory they took. */
  if (n->prev) {
    json_t *st = json_object_get(n->prev, "status");
    if (!json_is_object(st)) json_object_set_new(n->prev, "status", st = json_object());
    json_object_update(st, status);
  }
  json_decref(status);
  free(path);
}

/* ---- the watch (upstream's node informer: fieldSelector metadata.name) ---- */

static void watched(nl_node_t *n, const char *json, size_t len) {
  free(n->watched);
  n->watched = json ? nl_xstrndup(json, len) : NULL;
}

static void on_watch_list(void *ctx, const nl_kube_raw_t *items, size_t len, const char *rv) {
  (void)rv;
  watched(ctx, len ? items[0].json : NULL, len ? items[0].len : 0);
}

static void on_watch_event(void *ctx, const nl_kube_watch_event_t *ev) {
  bool gone = ev->type == NL_KUBE_WATCH_DELETED;
  watched(ctx, gone ? NULL : ev->object, gone ? 0 : ev->object_len);
}

static void start_watch(nl_node_t *n) {
  if (n->watch_started || !n->watch) return;
  n->watch_started = true;
  nl_reflector_start(n->watch);
}

static void watch_stopped(void *ctx) { nl_node__closed(ctx); }

static void step(nl_node_t *n) {
  switch (n->state) {
  case NL_NODE_FACTS:
    n->facts_busy = true;
    uv_queue_work(n->loop, &n->facts_work, facts_work, facts_done);
    return;
  case NL_NODE_RUNTIME: {
    struct nl_node__runtime_q *q = nl_xcalloc(1, sizeof *q);
    q->owner = n;
    n->rq = q;
    n->deps.query_runtime(n->deps.ctx, on_runtime, q);
    return;
  }
  case NL_NODE_REGISTER: {
    nl_cleanup_err nl_err_t *pleg = NULL, *e = NULL;
    nl_node_inputs_t in = inputs(n, &pleg);
    json_decref(n->initial);
    n->initial = nl_node_initial(&n->opts.conf, &n->facts, &in, &e);
    assert(n->initial);
    status_events(n, json_object_get(n->initial, "status"), NULL);
    nl_vlog(2, "Attempting to register node %s", n->opts.conf.name);
    request(n, "POST", "/api/v1/nodes", NULL, json_incref(n->initial));
    return;
  }
  case NL_NODE_GET_EXISTING: {
    char *path = node_path(n, "");
    request(n, "GET", path, NULL, NULL);
    free(path);
    return;
  }
  case NL_NODE_RECONCILE: {
    json_t *patch = nl_node_reconcile(n->initial, n->prev);
    if (!patch) {
      registered(n);
      set_state(n, NL_NODE_STATUS_GET);
      step(n);
      return;
    }
    char *path = node_path(n, "/status");
    request(n, "PATCH", path, "application/strategic-merge-patch+json", patch);
    free(path);
    return;
  }
  case NL_NODE_STATUS_GET: {
    /* The first try takes the Node from the watch (upstream's nodeLister), or
     * reads the apiserver's cache while the watch has none; retries read etcd
     * (upstream). */
    if (n->status_tries == 0 && n->watched && !n->read_fresh) {
      learn_node(n, json_loads(n->watched, 0, NULL));
      set_state(n, NL_NODE_STATUS_PATCH);
      step(n);
      return;
    }
    if (n->status_tries == 0) n->read_fresh = false;
    char *path = node_path(n, n->status_tries == 0 ? "?resourceVersion=0" : "");
    request(n, "GET", path, NULL, NULL);
    free(path);
    return;
  }
  case NL_NODE_STATUS_PATCH:
    status_round(n);
    return;
  default:
    assert(0 && "step in a waiting state");
  }
}

int nl_node_init(nl_node_t *n, uv_loop_t *loop, const nl_node_opts_t *opts,
                 const nl_node_deps_t *deps, nl_err_t **err) {
  static const char *const res[] = {"cpu", "memory", "ephemeral-storage"};
  for (size_t i = 0; i < 3; i++) {
    int64_t r;
    if (nl_node_reserved(&opts->conf, res[i], 0, &r, err) < 0) return -1;
  }
  memset(n, 0, sizeof *n);
  n->loop = loop;
  n->opts = *opts;
  n->deps = *deps;
  uint64_t max = opts->backoff_max_ms ? opts->backoff_max_ms : 7000;
  nl_backoff_init(&n->backoff, opts->register_backoff_ms ? opts->register_backoff_ms : 100, max, 0);
  nl_backoff_init(&n->lease.backoff, opts->lease_backoff_ms ? opts->lease_backoff_ms : 200, max, 0);
  n->log.what = "node";
  n->lease.log.what = "node lease";
  n->lease.node = n;
  n->facts.ephemeral_bytes = -1;
  if (deps->kube) {
    char *sel = nl_xasprintf("metadata.name=%s", opts->conf.name);
    nl_reflector_opts_t ro = {.path = "/api/v1/nodes", .field_selector = sel,
                              .api_version = "v1", .kind = "Node"};
    nl_reflector_cbs_t cbs = {.on_list = on_watch_list, .on_event = on_watch_event};
    int rc = nl_reflector_new(&n->watch, loop, deps->kube, &ro, &cbs, n, err);
    free(sel);
    if (rc < 0) return -1;
  }
  uv_timer_init(loop, &n->timer);
  uv_timer_init(loop, &n->lease.timer);
  return 0;
}

void nl_node_start(nl_node_t *n) {
  assert(n->state == NL_NODE_IDLE);
  set_state(n, NL_NODE_FACTS);
  step(n);
}

static void timer_closed(uv_handle_t *h) {
  nl_node_t *n = h->data;
  nl_node__closed(n);
}

void nl_node__closed(nl_node_t *n) {
  assert(n->pending > 0);
  if (--n->pending > 0) return;
  nl_node_facts_free(&n->facts);
  set_cond(&n->runtime_ready, &(nl_node_cri_cond_t){0});
  set_cond(&n->network_ready, &(nl_node_cri_cond_t){0});
  free(n->runtime_version);
  free(n->runtime_type);
  free_handlers(n);
  free_images(n);
  free(n->extended);
  n->extended = NULL;
  json_decref(n->initial);
  json_decref(n->prev);
  free(n->watched);
  json_decref(n->lease.base);
  json_decref(n->lease.sent);
  free(n->uid);
  if (n->done_cb) n->done_cb(n);
}

void nl_node_stop(nl_node_t *n, nl_node_done_cb done_cb) {
  if (n->state == NL_NODE_STOPPED) return;
  set_state(n, NL_NODE_STOPPED);
  n->done_cb = done_cb;
  n->pending = 1; /* held until every cancel below is issued */
  if (n->rq) n->rq->owner = NULL;
  n->rq = NULL;
  if (n->facts_busy) n->pending++;
  if (n->req) {
    n->pending++;
    nl_kube_req_cancel(n->req);
  }
  if (n->watch) {
    n->pending++;
    nl_reflector_stop(n->watch, watch_stopped, n);
    n->watch = NULL;
  }
  n->pending += 2;
  n->timer.data = n;
  n->lease.timer.data = n;
  uv_close((uv_handle_t *)&n->timer, timer_closed);
  uv_close((uv_handle_t *)&n->lease.timer, timer_closed);
  nl_node__lease_stop(&n->lease);
  nl_node__closed(n);
}
