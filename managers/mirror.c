#include "managers/mirror.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kube/status.h"
#include "managers/status_patch.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

nl_mirror_action_t nl_mirror_decide(const char *want_hash, const nl_mirror_seen_t *seen) {
  /* Not a mirror pod: someone else's, never touched (upstream's pod manager
   * knows mirror pods only; creating ours then fails with AlreadyExists). */
  if (seen && !seen->hash) return NL_MIRROR_KEEP;
  if (!want_hash) return seen ? NL_MIRROR_DELETE : NL_MIRROR_KEEP;
  if (!seen) return NL_MIRROR_CREATE;
  /* upstream IsMirrorPodOf, and a mirror pod being deleted is replaced */
  if (strcmp(seen->hash, want_hash) != 0 || seen->deleting) return NL_MIRROR_DELETE;
  return NL_MIRROR_KEEP;
}

json_t *nl_mirror_pod_body(const nl_pod_t *pod, const char *node_name, const char *node_uid) {
  nl_buf_t b = {0};
  nl_pod_encode_json(pod, &b, 0);
  json_t *j = json_loadb(b.data, b.len, 0, NULL);
  nl_buf_free(&b);
  assert(j); /* our own encoding */
  json_t *md = json_object_get(j, "metadata");
  json_object_del(md, "uid");
  json_t *ann = json_object_get(md, "annotations");
  if (!ann) {
    ann = json_object();
    json_object_set_new(md, "annotations", ann);
  }
  const char *hash = nl_kvlist_get(&pod->metadata.annotations, NL_ANNOTATION_CONFIG_HASH);
  json_object_set_new(ann, NL_ANNOTATION_CONFIG_MIRROR, json_string(hash ? hash : ""));
  json_object_set_new(md, "ownerReferences",
                      json_pack("[{s:s,s:s,s:s,s:s,s:b}]", "apiVersion", "v1", "kind", "Node",
                                "name", node_name, "uid", node_uid, "controller", 1));
  return j;
}

/* ---- the machine ---- */

static void entry_free(nl_mirror_entry_t *e) {
  assert(!e->req);
  free(e->key);
  free(e->namespace_);
  free(e->name);
  free(e->hash);
  free(e->mirror_uid);
  free(e->mirror_hash);
  json_decref(e->body);
  free(e);
}

static void set_state(nl_mirror_entry_t *e, nl_mirror_state_t s) {
  static const char *const names[] = {"idle", "deleting", "creating"};
  if (e->state != s)
    nl_vlog(4, "mirror: pod %s: %s -> %s", e->key, names[e->state], names[s]);
  e->state = s;
}

static void on_response(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err);

static void request(nl_mirror_entry_t *e, nl_mirror_state_t s, const char *method, bool named,
                    const char *body) {
  nl_mirror_manager_t *mm = e->mm;
  char *path = named ? nl_xasprintf("/api/v1/namespaces/%s/pods/%s", e->namespace_, e->name)
                     : nl_xasprintf("/api/v1/namespaces/%s/pods", e->namespace_);
  nl_kube_request_opts_t o = {.method = method, .path = path, .body = body,
                              .body_len = body ? strlen(body) : 0, .timeout_ms = mm->timeout_ms};
  set_state(e, s);
  e->req = nl_kube_request(mm->deps.kube, &o, on_response, e);
  free(path);
}

static void create(nl_mirror_entry_t *e) {
  const char *node_uid = e->mm->deps.node_uid(e->mm->deps.ctx);
  json_t *owner = json_array_get(json_object_get(json_object_get(e->body, "metadata"),
                                                 "ownerReferences"), 0);
  json_object_set_new(owner, "uid", json_string(node_uid));
  char *text = json_dumps(e->body, JSON_COMPACT | JSON_PRESERVE_ORDER);
  e->mm->creates++;
  request(e, NL_MIRROR_CREATING, "POST", false, text);
  free(text);
}

static void delete_mirror(nl_mirror_entry_t *e, const char *uid) {
  char *text = nl_status_delete_body(uid);
  e->mm->deletes++;
  request(e, NL_MIRROR_DELETING, "DELETE", true, text);
  free(text);
}

static const char *meta_str(const json_t *pod, const char *key) {
  return json_string_value(json_object_get(json_object_get(pod, "metadata"), key));
}

static const char *mirror_annotation(const json_t *pod) {
  const json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");
  return json_string_value(json_object_get(ann, NL_ANNOTATION_CONFIG_MIRROR));
}

/* The mirror pod in the API (NULL: none of ours). */
static void set_mirror(nl_mirror_entry_t *e, const json_t *pod) {
  free(e->mirror_uid);
  free(e->mirror_hash);
  e->mirror_uid = e->mirror_hash = NULL;
  if (pod && meta_str(pod, "uid") && mirror_annotation(pod)) {
    e->mirror_uid = nl_xstrdup(meta_str(pod, "uid"));
    e->mirror_hash = nl_xstrdup(mirror_annotation(pod));
  }
}

static void on_seen(nl_mirror_entry_t *e, const json_t *pod) {
  set_mirror(e, NULL);
  nl_mirror_seen_t seen = {0};
  const nl_mirror_seen_t *sp = NULL;
  if (pod) {
    seen.hash = mirror_annotation(pod);
    seen.deleting = meta_str(pod, "deletionTimestamp") != NULL;
    sp = &seen;
  }
  switch (nl_mirror_decide(e->hash, sp)) {
  case NL_MIRROR_KEEP:
    set_mirror(e, pod);
    break;
  case NL_MIRROR_CREATE:
    nl_info("mirror: creating the mirror pod of static pod %s", e->key);
    create(e);
    break;
  case NL_MIRROR_DELETE:
    nl_info("mirror: deleting %s pod %s", e->hash ? "the outdated mirror" : "the mirror", e->key);
    delete_mirror(e, meta_str(pod, "uid") ? meta_str(pod, "uid") : "");
    break;
  }
}

static void on_response(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  nl_mirror_entry_t *e = ctx;
  nl_mirror_manager_t *mm = e->mm;
  nl_mirror_state_t was = e->state;
  e->req = NULL;
  set_state(e, NL_MIRROR_IDLE);
  if (mm->stopping) {
    entry_free(e);
    if (--mm->pending == 0 && mm->done) mm->done(mm->done_ctx);
    return;
  }
  bool ok = !err && resp->status < 300;
  nl_kube_reason_t r = ok || err ? NL_KUBE_REASON_UNKNOWN : nl_kube_status_reason(resp);
  json_t *pod = ok ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
  if (was == NL_MIRROR_CREATING && ok) {
    set_mirror(e, pod);
    if (mm->deps.created) mm->deps.created(mm->deps.ctx);
  } else if (was == NL_MIRROR_DELETING &&
             (ok || r == NL_KUBE_REASON_NOT_FOUND || r == NL_KUBE_REASON_CONFLICT)) {
    if (e->hash) {
      create(e); /* replaced */
    } else { /* the static pod and its mirror are gone */
      nl_map_del(&mm->pods, e->key);
      entry_free(e);
      json_decref(pod);
      return;
    }
  } else {
    nl_err_t *why = NULL;
    if (err)
      nl_err_set(&why, err->code, "%s", nl_err_msg(err));
    else
      nl_kube_status_err(resp, &why);
    nl_info("mirror: pod %s: %s failed: %s", e->key,
            was == NL_MIRROR_CREATING ? "create" : "delete", nl_err_msg(why));
    nl_err_free(&why);
  }
  json_decref(pod);
}

static void on_timer(uv_timer_t *t);

/* The node's pods as listed: each static pod's mirror pod is decided on. */
static void on_list(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  nl_mirror_manager_t *mm = ctx;
  mm->list_req = NULL;
  if (mm->stopping) {
    if (--mm->pending == 0 && mm->done) mm->done(mm->done_ctx);
    return;
  }
  if (err || resp->status >= 300) {
    nl_err_t *why = NULL;
    if (err)
      nl_err_set(&why, err->code, "%s", nl_err_msg(err));
    else
      nl_kube_status_err(resp, &why);
    nl_info("mirror: list the node's pods: %s", nl_err_msg(why));
    nl_err_free(&why);
    return;
  }
  json_t *list = json_loadb(resp->body, resp->body_len, 0, NULL);
  nl_map_t seen;
  nl_map_init(&seen);
  size_t i;
  json_t *pod;
  json_array_foreach(json_object_get(list, "items"), i, pod) {
    const char *ns = meta_str(pod, "namespace"), *name = meta_str(pod, "name");
    if (!ns || !name) continue;
    char *key = nl_xasprintf("%s/%s", ns, name);
    nl_map_put(&seen, key, pod);
    free(key);
  }
  nl_map_iter_t it;
  void *v;
  nl_map_iter_init(&it, &mm->pods);
  while (nl_map_iter_next(&it, NULL, &v)) {
    nl_mirror_entry_t *e = v;
    if (e->req) continue;
    const json_t *p = nl_map_get(&seen, e->key);
    const char *node_uid = mm->deps.node_uid(mm->deps.ctx);
    if (!p && !e->hash) { /* nothing left to delete */
      nl_map_del(&mm->pods, e->key);
      entry_free(e);
      continue;
    }
    if (e->hash && (!node_uid || !*node_uid)) { /* created once the Node is registered */
      uv_timer_start(&mm->timer, on_timer, 1000, mm->sync_ms); /* soon */
      continue;
    }
    on_seen(e, p);
  }
  nl_map_free(&seen, NULL);
  json_decref(list);
  if (mm->again) nl_mirror_manager_sync(mm);
}

static void list(nl_mirror_manager_t *mm) {
  mm->again = false;
  char *path = nl_xasprintf("/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", mm->node_name);
  nl_kube_request_opts_t o = {.method = "GET", .path = path, .timeout_ms = mm->timeout_ms};
  mm->gets++;
  mm->list_req = nl_kube_request(mm->deps.kube, &o, on_list, mm);
  free(path);
}

static void on_timer(uv_timer_t *t) {
  nl_mirror_manager_sync(container_of(t, nl_mirror_manager_t, timer));
}

void nl_mirror_manager_sync(nl_mirror_manager_t *mm) {
  if (!mm->started || mm->stopping || !nl_map_size(&mm->pods)) return;
  if (mm->list_req)
    mm->again = true;
  else
    list(mm);
}

void nl_mirror_manager_init(nl_mirror_manager_t *mm, uv_loop_t *loop, const nl_mirror_deps_t *deps,
                            const char *node_name, uint64_t sync_ms) {
  memset(mm, 0, sizeof *mm);
  mm->loop = loop;
  mm->deps = *deps;
  mm->node_name = nl_xstrdup(node_name);
  mm->sync_ms = sync_ms ? sync_ms : 10000;
  nl_map_init(&mm->pods);
  uv_timer_init(loop, &mm->timer);
}

void nl_mirror_manager_start(nl_mirror_manager_t *mm) {
  mm->started = true;
  uv_timer_start(&mm->timer, on_timer, 0, mm->sync_ms);
}

static void on_timer_closed(uv_handle_t *h) {
  nl_mirror_manager_t *mm = container_of((uv_timer_t *)h, nl_mirror_manager_t, timer);
  if (--mm->pending == 0 && mm->done) mm->done(mm->done_ctx);
}

void nl_mirror_manager_stop(nl_mirror_manager_t *mm, void (*done)(void *ctx), void *ctx) {
  if (mm->stopping) return;
  mm->stopping = true;
  mm->done = done;
  mm->done_ctx = ctx;
  mm->pending = 1;
  if (mm->list_req) {
    mm->pending++;
    nl_kube_req_cancel(mm->list_req);
  }
  nl_map_iter_t it;
  const char *key;
  void *v;
  nl_map_iter_init(&it, &mm->pods);
  while (nl_map_iter_next(&it, &key, &v)) {
    nl_mirror_entry_t *e = v;
    nl_map_del(&mm->pods, key);
    if (e->req) {
      mm->pending++;
      nl_kube_req_cancel(e->req);
    } else {
      entry_free(e);
    }
  }
  nl_map_free(&mm->pods, NULL);
  free(mm->node_name);
  mm->node_name = NULL;
  uv_close((uv_handle_t *)&mm->timer, on_timer_closed);
}

static nl_mirror_entry_t *entry_get(nl_mirror_manager_t *mm, const char *ns, const char *name) {
  char *key = nl_xasprintf("%s/%s", ns, name);
  nl_mirror_entry_t *e = nl_map_get(&mm->pods, key);
  if (e) {
    free(key);
    return e;
  }
  e = nl_xcalloc(1, sizeof *e);
  e->mm = mm;
  e->key = key;
  e->namespace_ = nl_xstrdup(ns);
  e->name = nl_xstrdup(name);
  nl_map_put(&mm->pods, key, e);
  return e;
}

void nl_mirror_manager_set(nl_mirror_manager_t *mm, const nl_pod_t *pod) {
  if (mm->stopping) return;
  const char *hash = nl_kvlist_get(&pod->metadata.annotations, NL_ANNOTATION_CONFIG_HASH);
  nl_mirror_entry_t *e = entry_get(mm, pod->metadata.namespace_, pod->metadata.name);
  bool changed = !e->hash || !hash || strcmp(e->hash, hash) != 0;
  free(e->hash);
  e->hash = nl_xstrdup(hash ? hash : "");
  json_decref(e->body);
  e->body = nl_mirror_pod_body(pod, mm->node_name, "");
  if (changed) nl_mirror_manager_sync(mm);
}

void nl_mirror_manager_remove(nl_mirror_manager_t *mm, const char *ns, const char *name) {
  if (mm->stopping) return;
  nl_mirror_entry_t *e = entry_get(mm, ns, name);
  free(e->hash);
  e->hash = NULL;
  set_mirror(e, NULL);
  nl_mirror_manager_sync(mm);
}

const char *nl_mirror_manager_uid(const nl_mirror_manager_t *mm, const char *ns, const char *name,
                                  const char *static_uid) {
  char *key = nl_xasprintf("%s/%s", ns, name);
  const nl_mirror_entry_t *e = nl_map_get(&mm->pods, key);
  free(key);
  /* upstream TranslatePodUID: a static pod's uid is its config hash, and only
   * the one the mirror pod was made from reports there. */
  bool ours = e && e->hash && e->mirror_hash && strcmp(e->mirror_hash, static_uid) == 0;
  return ours ? e->mirror_uid : NULL;
}
