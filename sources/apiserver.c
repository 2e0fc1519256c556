/* The API source (see apiserver.h). One owner of: the reflector, the offline
 * timer, and at most one checkpoint read and one write in flight. The current
 * pods are the merger's (its "api" source); the checkpoint is encoded from them
 * when it is written, so the source keeps no copy of its own. */
#include "sources/apiserver.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"
#include "sources/checkpoint.h"

struct nl_api_source {
  uv_loop_t *loop;
  nl_pod_config_t *cfg;
  nl_reflector_t *reflector;
  char *checkpoint_path;
  uint64_t offline_wait_ms;
  uv_timer_t offline;
  bool synced;      /* a first list arrived */
  bool offline_due; /* no list in time, or no server: deliver once read */
  char *offline_why; /* for the log */
  /* the start-up read: the file and its items, until delivered or dropped */
  bool reading;
  char *restored_data;
  nl_kube_raw_t *restored;
  size_t n_restored;
  bool writing, dirty;
  nl_api_source_stats_t stats;
  int pending; /* reflector, timer, read and write still to come back when stopping */
  bool stopping;
  void (*done)(void *ctx);
  void *done_ctx;
};

static void drop_restored(nl_api_source_t *s) {
  free(s->restored_data);
  free(s->restored);
  s->restored_data = NULL;
  s->restored = NULL;
  s->n_restored = 0;
}

static void maybe_free(nl_api_source_t *s) {
  if (!s->stopping || s->pending) return;
  void (*done)(void *) = s->done;
  void *ctx = s->done_ctx;
  drop_restored(s);
  free(s->checkpoint_path);
  free(s->offline_why);
  free(s);
  if (done) done(ctx);
}

/* An API pod, decoded and defaulted (the apiserver defaulted it already; this
 * only fills what an older apiserver may not know). NULL when it is bad. */
static nl_pod_t *decode(nl_api_source_t *s, const char *json, size_t len) {
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode_api(json, len, &pod, &err) < 0) {
    nl_warn("api source: bad pod: %s", nl_err_msg(err));
    nl_err_free(&err);
    s->stats.bad_pods++;
    return NULL;
  }
  if (!pod->metadata.uid || !*pod->metadata.uid) {
    nl_warn("api source: bad pod: pod %s/%s: metadata.uid: required", pod->metadata.namespace_,
            pod->metadata.name);
    nl_pod_free(pod);
    s->stats.bad_pods++;
    return NULL;
  }
  nl_pod_set_defaults(pod);
  return pod;
}

static void feed(nl_api_source_t *s, bool set, nl_pod_op_t op, nl_pod_t **pods, size_t n) {
  nl_err_t *err = NULL;
  int rc = set ? nl_pod_config_set(s->cfg, NL_SOURCE_API, pods, n, &err)
               : nl_pod_config_update(s->cfg, NL_SOURCE_API, op, pods, n, &err);
  if (rc < 0) nl_warn("api source: %s", nl_err_msg(err)); /* a programming error */
  nl_err_free(&err);
}

/* ---- the checkpoint ---- */

static void write_checkpoint(nl_api_source_t *s);

static void on_written(void *ctx, const nl_err_t *err) {
  nl_api_source_t *s = ctx;
  s->writing = false;
  s->pending--;
  if (err) {
    s->stats.checkpoint_failures++;
    nl_warn("api source: %s", nl_err_msg(err));
  } else {
    s->stats.checkpoint_writes++;
    nl_vlog(4, "api source: checkpoint written");
  }
  if (s->stopping) maybe_free(s);
  else write_checkpoint(s);
}

/* Only the truth is written: nothing before the first list, which would replace
 * a good checkpoint with an empty one. Each pod is encoded whole (every field
 * the model knows, and the API's status), so that decoding it gives back the
 * same pod; mirror pods run nothing and are left out. */
static void write_checkpoint(nl_api_source_t *s) {
  if (!s->checkpoint_path || !s->synced || s->writing || !s->dirty || s->stopping) return;
  s->dirty = false;
  size_t n;
  const nl_pod_t **pods = nl_pod_config_list(s->cfg, NL_SOURCE_API, &n);
  nl_buf_t json = NL_BUF_INIT;
  size_t *ends = nl_xcalloc(n + 1, sizeof *ends);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (nl_pod_is_mirror(pods[i])) continue;
    nl_pod_encode_json(pods[i], &json, NL_POD_JSON_STATUS | NL_POD_JSON_FULL);
    ends[m++] = json.len;
  }
  free(pods);
  nl_kube_raw_t *items = nl_xcalloc(m + 1, sizeof *items);
  for (size_t i = 0; i < m; i++) {
    size_t start = i ? ends[i - 1] : 0;
    items[i] = (nl_kube_raw_t){json.data + start, ends[i] - start};
  }
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_checkpoint_encode(items, m, &b);
  free(items);
  free(ends);
  nl_buf_free(&json);
  size_t len = b.len;
  s->writing = true;
  s->pending++;
  nl_pod_checkpoint_write(s->loop, s->checkpoint_path, nl_buf_steal(&b), len, on_written, s);
}

/* The API server has not answered in time, or cannot be reached: run what the
 * checkpoint has. */
static void deliver_restored(nl_api_source_t *s) {
  if (s->synced || !s->offline_due || s->reading || !s->restored) return;
  nl_pod_t **pods = nl_xcalloc(s->n_restored + 1, sizeof *pods);
  size_t n = 0;
  for (size_t i = 0; i < s->n_restored; i++) {
    nl_pod_t *p = decode(s, s->restored[i].json, s->restored[i].len);
    if (p) pods[n++] = p;
  }
  drop_restored(s);
  s->stats.restored = n;
  nl_warn("api source: %s: running the %zu pods of the checkpoint %s until it answers",
          s->offline_why, n, s->checkpoint_path);
  feed(s, false, NL_POD_ADD, pods, n);
}

static void on_read(void *ctx, char *data, size_t len, size_t body_off, const nl_err_t *err) {
  nl_api_source_t *s = ctx;
  s->reading = false;
  s->pending--;
  s->stats.checkpoint_read = true;
  if (s->stopping) {
    free(data);
    maybe_free(s);
    return;
  }
  if (err) {
    nl_warn("api source: ignoring the checkpoint: %s", nl_err_msg(err));
  } else if (data && !s->synced) {
    nl_err_t *e = NULL;
    if (nl_pod_checkpoint_items(data + body_off, len - body_off, &s->restored, &s->n_restored,
                                &e) < 0) {
      nl_warn("api source: ignoring the checkpoint %s: %s", s->checkpoint_path, nl_err_msg(e));
      nl_err_free(&e);
    } else {
      s->restored_data = data;
      data = NULL;
    }
  }
  free(data);
  deliver_restored(s);
}

static void go_offline(nl_api_source_t *s, char *why) {
  if (s->synced || s->offline_due) {
    free(why);
    return;
  }
  s->offline_due = true;
  s->offline_why = why;
  deliver_restored(s);
}

static void on_offline_timer(uv_timer_t *t) {
  nl_api_source_t *s = container_of(t, nl_api_source_t, offline);
  go_offline(s, nl_xasprintf("no pod list from the API server after %llu ms",
                             (unsigned long long)s->offline_wait_ms));
}

/* No answer at all (refused, unreachable, TLS): waiting for the timer would
 * only delay the pods. An HTTP error means a server that answers: the list may
 * yet come. */
static void on_list_error(void *ctx, int status, const nl_err_t *err) {
  nl_api_source_t *s = ctx;
  if (status == 0)
    go_offline(s, nl_xasprintf("the API server cannot be reached (%s)", nl_err_msg(err)));
}

/* ---- the reflector's callbacks ---- */

static void on_list(void *ctx, const nl_kube_raw_t *items, size_t n, const char *rv) {
  nl_api_source_t *s = ctx;
  nl_pod_t **pods = nl_xcalloc(n + 1, sizeof *pods);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    nl_pod_t *p = decode(s, items[i].json, items[i].len);
    if (p) pods[m++] = p;
  }
  if (!s->synced)
    nl_info("api source: %zu pods bound to this node (resourceVersion %s)", m, rv);
  s->synced = true;
  s->stats.lists++;
  drop_restored(s);
  uv_timer_stop(&s->offline);
  s->dirty = true;
  feed(s, true, NL_POD_ADD, pods, m);
  write_checkpoint(s);
}

static void on_event(void *ctx, const nl_kube_watch_event_t *ev) {
  nl_api_source_t *s = ctx;
  s->stats.events++;
  nl_pod_t *p = decode(s, ev->object, ev->object_len);
  if (!p) return;
  nl_pod_op_t op = NL_POD_REMOVE;
  if (ev->type != NL_KUBE_WATCH_DELETED)
    op = ev->type == NL_KUBE_WATCH_ADDED ? NL_POD_ADD : NL_POD_UPDATE;
  nl_pod_t **pods = nl_xmalloc(sizeof *pods);
  pods[0] = p;
  uint64_t changes = s->cfg->changes;
  feed(s, false, op, pods, 1);
  /* a change of status alone is not worth a write: it is the API's to keep */
  if (s->cfg->changes != changes) s->dirty = true;
  write_checkpoint(s);
}

/* ---- life cycle ---- */

int nl_api_source_new(nl_api_source_t **out, uv_loop_t *loop, nl_kube_client_t *client,
                      nl_pod_config_t *cfg, const nl_api_source_opts_t *o, nl_err_t **err) {
  if (!o->node_name || !*o->node_name)
    return nl_err_set(err, NL_EINVAL, "api source: node name: required");
  nl_api_source_t *s = nl_xcalloc(1, sizeof *s);
  nl_reflector_opts_t ro = o->reflector ? *o->reflector : (nl_reflector_opts_t){0};
  char *selector = nl_xasprintf("spec.nodeName=%s", o->node_name);
  ro.path = "/api/v1/pods";
  ro.field_selector = selector;
  nl_reflector_cbs_t cbs = {on_list, on_event, on_list_error};
  int rc = nl_reflector_new(&s->reflector, loop, client, &ro, &cbs, s, err);
  free(selector);
  if (rc < 0) {
    free(s);
    return -1;
  }
  s->loop = loop;
  s->cfg = cfg;
  s->checkpoint_path = o->checkpoint_path ? nl_xstrdup(o->checkpoint_path) : NULL;
  s->offline_wait_ms = o->offline_wait_ms ? o->offline_wait_ms : NL_API_SOURCE_OFFLINE_WAIT_MS;
  uv_timer_init(loop, &s->offline);
  nl_pod_config_add_source(cfg, NL_SOURCE_API);
  *out = s;
  return 0;
}

void nl_api_source_start(nl_api_source_t *s) {
  assert(!s->stopping);
  nl_reflector_start(s->reflector);
  if (!s->checkpoint_path) return;
  s->reading = true;
  s->pending++;
  nl_pod_checkpoint_read(s->loop, s->checkpoint_path, on_read, s);
  uv_timer_start(&s->offline, on_offline_timer, s->offline_wait_ms, 0);
}

static void on_part_stopped(void *ctx) {
  nl_api_source_t *s = ctx;
  s->pending--;
  maybe_free(s);
}

static void on_timer_closed(uv_handle_t *h) {
  on_part_stopped(container_of((uv_timer_t *)h, nl_api_source_t, offline));
}

void nl_api_source_stop(nl_api_source_t *s, void (*done)(void *ctx), void *ctx) {
  assert(!s->stopping);
  s->stopping = true;
  s->done = done;
  s->done_ctx = ctx;
  s->pending += 2;
  nl_reflector_stop(s->reflector, on_part_stopped, s);
  uv_close((uv_handle_t *)&s->offline, on_timer_closed);
}

const nl_api_source_stats_t *nl_api_source_stats(const nl_api_source_t *s) { return &s->stats; }
