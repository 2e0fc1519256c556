/* The node manager against a fake of agent/kube/client.h: requests are recorded
 * and answered by the test (or by a tiny apiserver of one Node and one Lease),
 * timers run short. Also the host facts on fixture files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fake_kube.h"
#include "managers/node.h"
#include "managers/node_cri.h"
#include "reactor/xalloc.h"

/* ---- the fake client (fake_kube.h) and the test's state ---- */

static struct {
  /* the tiny apiserver: NULL = answer by hand */
  bool auto_answer;
  int fail_status;    /* answer everything with this status (0: off) */
  json_t *node, *lease;
  int rv;
  size_t patches, puts, posts, lease_patches; /* patches: of the Node */
  int fail_next_patch; /* the next PATCH of the Node answers this (0: off) */
  bool whole_answers;  /* an apiserver that answers whole objects when metadata is asked */
  nl_kube_req_t *watch; /* the watch on the Node, while open */
  size_t rounds;        /* runtime queries: one a status round */
  /* the runtime */
  nl_node_runtime_done rt_done;
  void *rt_ctx;
  bool runtime_ready;
  bool features_sgp; /* the runtime's Status features: supplementalGroupsPolicy (else none) */
  bool create_drops_status;
} fk;

/* ---- the tiny apiserver ---- */

static char *dumps(json_t *j) { return json_dumps(j, JSON_COMPACT); }

static bool watching(void) { return fk.watch && !fk.watch->done && !fk.watch->cancelled; }

/* One event on the open watch, as the apiserver frames it. */
static void watch_send(const char *type, json_t *obj) {
  if (!watching()) return;
  char *o = dumps(obj);
  char *ev = nl_xasprintf("{\"type\":\"%s\",\"object\":%s}\n", type, o);
  fk.watch->on_data(fk.watch->ctx, ev, strlen(ev));
  free(ev);
  free(o);
}

/* The list and the watch of the Node by metadata.name. */
static void serve_watch(nl_kube_req_t *r) {
  assert_non_null(strstr(r->path, "fieldSelector=metadata.name%3Dn1"));
  if (strstr(r->path, "watch=true")) {
    fk.watch = r;
    r->on_head(r->ctx, 200, "application/json");
    return;
  }
  json_t *list = json_pack("{s:s,s:{s:s},s:[]}", "kind", "NodeList", "metadata",
                           "resourceVersion", "1", "items");
  if (fk.node) json_array_append(json_object_get(list, "items"), fk.node);
  char *out = dumps(list);
  json_decref(list);
  answer(r, 200, out);
  free(out);
}

/* A strategic merge patch of the Node's status as the apiserver applies it:
 * conditions merged by type (a null field deleted), the rest replaced. */
static void merge_status(json_t *node, json_t *patch) {
  json_t *st = json_object_get(node, "status"), *ps = json_object_get(patch, "status");
  json_t *conds = json_incref(json_object_get(ps, "conditions"));
  if (conds) json_object_del(ps, "conditions");
  json_object_update_recursive(node, patch);
  size_t i;
  json_t *c;
  json_array_foreach(conds, i, c) {
    json_t *have = NULL, *h;
    size_t j;
    json_array_foreach(json_object_get(st, "conditions"), j, h) {
      if (json_equal(json_object_get(h, "type"), json_object_get(c, "type"))) have = h;
    }
    if (!have) {
      json_array_append(json_object_get(st, "conditions"), c);
      continue;
    }
    const char *k;
    json_t *v;
    json_object_foreach(c, k, v) {
      if (json_is_null(v)) json_object_del(have, k);
      else json_object_set(have, k, v);
    }
  }
  json_decref(conds);
}

/* A JSON patch (RFC 6902) of the Lease's spec as the apiserver applies it:
 * test and replace only, all or nothing; false when an operation fails (the
 * apiserver's 422). */
static bool json_patch_spec(json_t *lease, const json_t *ops) {
  json_t *spec = json_deep_copy(json_object_get(lease, "spec"));
  size_t i;
  json_t *op;
  bool ok = json_is_array(ops) && spec;
  json_array_foreach(ops, i, op) {
    const char *o = json_string_value(json_object_get(op, "op"));
    const char *path = json_string_value(json_object_get(op, "path"));
    json_t *v = json_object_get(op, "value");
    if (!ok || !o || !path || strncmp(path, "/spec/", 6) != 0 || !v) {
      ok = false;
      break;
    }
    json_t *have = json_object_get(spec, path + 6);
    if (strcmp(o, "test") == 0) ok = have && json_equal(have, v);
    else if (strcmp(o, "replace") == 0 && have) json_object_set(spec, path + 6, v);
    else ok = false;
  }
  if (ok) json_object_set(lease, "spec", spec);
  json_decref(spec);
  return ok;
}

static void serve(nl_kube_req_t *r) {
  if (strncmp(r->path, "/api/v1/nodes?", 14) == 0) {
    serve_watch(r);
    return;
  }
  if (fk.fail_status) {
    answer(r, fk.fail_status, "");
    return;
  }
  json_t *body = r->body ? json_loads(r->body, 0, NULL) : NULL;
  bool lease = strstr(r->path, "/leases") != NULL;
  json_t **obj = lease ? &fk.lease : &fk.node;
  char rv[16];
  snprintf(rv, sizeof rv, "%d", ++fk.rv);
  int status = 200;
  if (strcmp(r->method, "GET") == 0) {
    status = *obj ? 200 : 404;
  } else if (strcmp(r->method, "POST") == 0) {
    fk.posts++;
    if (*obj) {
      status = 409;
    } else {
      *obj = json_incref(body);
      /* as the apiserver, which drops a Node's status on create: the status
       * patch writes it (most tests keep it, to see no patch while unchanged) */
      if (!lease && fk.create_drops_status) json_object_set_new(*obj, "status", json_object());
      json_object_set_new(json_object_get(*obj, "metadata"), "uid",
                          json_string(lease ? "lease-uid" : "node-uid-1"));
      status = 201;
    }
  } else if (strcmp(r->method, "PUT") == 0) {
    fk.puts++;
    const char *want = json_string_value(json_object_get(json_object_get(body, "metadata"), "resourceVersion"));
    const char *have = *obj ? json_string_value(json_object_get(json_object_get(*obj, "metadata"), "resourceVersion")) : NULL;
    if (!*obj) status = 404;
    else if (!want || !have || strcmp(want, have) != 0) status = 409;
    else json_decref(*obj), *obj = json_incref(body);
  } else if (strcmp(r->method, "PATCH") == 0) {
    /* The Lease's renewal: a merge patch, on the resourceVersion it read
     * when it carries one, or a JSON patch that tests before it replaces. */
    const char *want = json_string_value(json_object_get(json_object_get(body, "metadata"), "resourceVersion"));
    const char *have = *obj ? json_string_value(json_object_get(json_object_get(*obj, "metadata"), "resourceVersion")) : NULL;
    bool tested = strcmp(r->ctype, "application/json-patch+json") == 0;
    if (lease) fk.lease_patches++;
    else fk.patches++;
    if (!tested)
      assert_string_equal(r->ctype, lease ? "application/merge-patch+json"
                                          : "application/strategic-merge-patch+json");
    assert_true(!tested || lease);
    if (!*obj) status = 404;
    else if (tested) status = json_patch_spec(*obj, body) ? 200 : 422;
    else if (lease && want && (!have || strcmp(want, have) != 0)) status = 409;
    else if (!lease && fk.fail_next_patch) status = fk.fail_next_patch, fk.fail_next_patch = 0;
    else if (lease) json_object_update_recursive(*obj, body);
    else merge_status(*obj, body);
  }
  if (status < 300 && strcmp(r->method, "GET") != 0) {
    json_object_set_new(json_object_get(*obj, "metadata"), "resourceVersion", json_string(rv));
    if (!lease) watch_send(status == 201 ? "ADDED" : "MODIFIED", *obj);
  }
  json_t *meta = NULL;
  if (status < 300 && r->accept_metadata && !fk.whole_answers)
    meta = json_pack("{s:s,s:s,s:O}", "apiVersion", "meta.k8s.io/v1", "kind",
                     "PartialObjectMetadata", "metadata", json_object_get(*obj, "metadata"));
  char *out = status >= 300 ? nl_xstrdup("{\"kind\":\"Status\"}")
              : r->head_only ? nl_xstrdup("")
                             : dumps(meta ? meta : *obj);
  json_decref(meta);
  json_decref(body);
  answer(r, status, out);
  free(out);
}

static void query_runtime(void *ctx, nl_node_runtime_done done, void *done_ctx) {
  assert_null(fk.rt_done);
  fk.rounds++;
  fk.rt_done = done;
  fk.rt_ctx = done_ctx;
}

static void deliver_runtime(void) {
  static const char *const names[] = {"localhost/pause:3.9"};
  static const nl_node_image_t img[] = {{names, 1, 300000}};
  nl_node_runtime_info_t info = {
      .status_ok = true, .runtime_ready = {true, fk.runtime_ready, "", ""},
      .network_ready = {true, true, "", ""}, .runtime_name = "containerd",
      .runtime_version = "1.6.20", .images_ok = true, .images = img, .n_images = 1,
      .features = {fk.features_sgp, fk.features_sgp}};
  nl_node_runtime_done d = fk.rt_done;
  fk.rt_done = NULL;
  d(fk.rt_ctx, &info);
}

static bool matches(const nl_kube_req_t *r, const char *method, const char *prefix) {
  return (!method || strcmp(r->method, method) == 0) &&
         (!prefix || strncmp(r->path, prefix, strlen(prefix)) == 0);
}

static nl_kube_req_t *pending(const char *method, const char *prefix) {
  for (size_t i = 0; i < kf.n; i++)
    if (kf.reqs[i] != fk.watch && !kf.reqs[i]->done && !kf.reqs[i]->cancelled && matches(kf.reqs[i], method, prefix))
      return kf.reqs[i];
  return NULL;
}

/* A pending request the caller does not wait for. */
static nl_kube_req_t *pending_other(const char *method, const char *prefix) {
  for (size_t i = 0; i < kf.n; i++)
    if (kf.reqs[i] != fk.watch && !kf.reqs[i]->done && !kf.reqs[i]->cancelled &&
        (!(method || prefix) || !matches(kf.reqs[i], method, prefix)))
      return kf.reqs[i];
  return NULL;
}

static void on_guard(uv_timer_t *t) {}

/* Runs the loop (answering the runtime, and requests when auto) until a
 * request matching method and prefix is pending, or until ms passed. */
static nl_kube_req_t *run_until(const char *method, const char *prefix, uint64_t ms) {
  uint64_t end = uv_now(kf.loop) + ms;
  static uv_timer_t guard;
  uv_timer_init(kf.loop, &guard);
  uv_timer_start(&guard, on_guard, ms, 0);
  nl_kube_req_t *r = NULL;
  for (;;) {
    if (fk.rt_done) deliver_runtime();
    if ((method || prefix) && (r = pending(method, prefix))) break;
    if (fk.auto_answer)
      for (nl_kube_req_t *a; (a = pending_other(method, prefix));) serve(a);
    if (fk.rt_done) continue;
    if ((method || prefix) && (r = pending(method, prefix))) break;
    uv_update_time(kf.loop);
    if (uv_now(kf.loop) >= end) break;
    uv_run(kf.loop, UV_RUN_ONCE);
  }
  uv_close((uv_handle_t *)&guard, NULL);
  uv_run(kf.loop, UV_RUN_NOWAIT);
  return r;
}

static size_t count(const char *method, const char *prefix) {
  size_t c = 0;
  for (size_t i = 0; i < kf.n; i++)
    c += strcmp(kf.reqs[i]->method, method) == 0 &&
         strncmp(kf.reqs[i]->path, prefix, strlen(prefix)) == 0;
  return c;
}

/* ---- fixture ---- */

static uv_loop_t loop;
static nl_node_t node;
static bool stopped;

static nl_node_opts_t opts(void) {
  nl_node_opts_t o = {
      .conf = {.name = "n1", .hostname = "n1", .node_ip = "10.0.0.5",
               .kubelet_version = "v1.36.3+nanolet.0.1.0", .register_schedulable = true,
               .controller_attach_detach = true, .port = 10250, .max_pods = 110, .max_images = 50},
      .paths = nl_node_paths_host(FIXTURES "/node"),
      .register_node = true,
      .update_ms = 40,
      .report_ms = 400,
      .lease_duration_s = 1, /* renew every 250 ms */
      .register_backoff_ms = 10,
      .lease_backoff_ms = 20,
      .backoff_max_ms = 80,
      .fast_ms = 10,
  };
  const char *f = FIXTURES "/node/";
  static char p[6][256];
  const char *names[] = {"machine-id", "product_uuid", "boot_id", "os-release", "meminfo", "cpu_online"};
  for (int i = 0; i < 6; i++) snprintf(p[i], sizeof p[i], "%s%s", f, names[i]);
  o.paths.machine_id = p[0], o.paths.product_uuid = p[1], o.paths.boot_id = p[2];
  o.paths.os_release = p[3], o.paths.meminfo = p[4], o.paths.cpu_online = p[5];
  o.paths.hugepages = FIXTURES "/node/hugepages";
  return o;
}

/* Node events, as recorded through the sink. */
static char events[64][96];
static size_t n_events;

static void record_event(void *ctx, const nl_event_ref_t *obj, const nl_kvlist_t *annotations,
                         const char *type, const char *reason, const char *message) {
  assert_null(annotations);
  assert_string_equal(obj->kind, "Node");
  assert_string_equal(obj->uid, "n1");
  if (n_events < 64) snprintf(events[n_events++], sizeof events[0], "%s %s: %s", type, reason, message);
}

static size_t count_events(const char *prefix) {
  size_t c = 0;
  for (size_t i = 0; i < n_events; i++) c += strncmp(events[i], prefix, strlen(prefix)) == 0;
  return c;
}

static int setup(void **state) {
  memset(&fk, 0, sizeof fk);
  n_events = 0;
  fk.runtime_ready = true;
  assert_int_equal(uv_loop_init(&loop), 0);
  kf_reset(&loop);
  nl_node_opts_t o = opts();
  nl_node_deps_t d = {.kube = (nl_kube_client_t *)&fk, .query_runtime = query_runtime,
                      .events = {record_event, NULL}};
  assert_int_equal(nl_node_init(&node, &loop, &o, &d, NULL), 0);
  stopped = false;
  return 0;
}

static void on_stopped(nl_node_t *n) { stopped = true; }

static int teardown(void **state) {
  nl_node_stop(&node, on_stopped);
  while (!stopped) {
    if (fk.rt_done) deliver_runtime();
    uv_run(&loop, UV_RUN_ONCE);
  }
  uv_close((uv_handle_t *)&kf.deliver, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  kf_free();
  json_decref(fk.node);
  json_decref(fk.lease);
  return 0;
}

static json_t *body_of(nl_kube_req_t *r) {
  json_t *j = json_loads(r->body, 0, NULL);
  assert_non_null(j);
  return j;
}

/* ---- tests ---- */

static void test_facts_from_fixtures(void **state) {
  nl_node_opts_t o = opts();
  nl_node_facts_t f;
  nl_node_facts_read(&o.paths, &f);
  assert_string_equal(f.machine_id, "b5f4c3d2e1a0b5f4c3d2e1a0b5f4c3d2");
  assert_string_equal(f.system_uuid, "4C4C4544-0042-3510-8052-B4C04F4E3732");
  assert_string_equal(f.boot_id, "2f1e3c1a-5b7d-4e8f-9a0b-1c2d3e4f5a6b");
  assert_string_equal(f.os_image, "Debian GNU/Linux 12 (bookworm)");
  assert_true(strlen(f.kernel_version) > 0);
  assert_int_equal(f.cpus, 5); /* 0-3,6 */
  assert_int_equal(f.memory_bytes, INT64_C(4028536) * 1024);
  assert_true(f.ephemeral_bytes > 0);
  assert_int_equal(f.n_hugepages, 2);
  int64_t two_mi = f.hugepages[0].page_bytes == 2097152 ? f.hugepages[0].total_bytes
                                                        : f.hugepages[1].total_bytes;
  assert_int_equal(two_mi, 8 * 2097152);
  nl_node_facts_free(&f);
  /* Unreadable files leave their fields empty (a non-root agent cannot read
   * product_uuid). */
  o.paths.product_uuid = FIXTURES "/node/missing";
  o.paths.os_release = FIXTURES "/node/missing";
  o.paths.root_dir = FIXTURES "/node/missing";
  nl_node_facts_read(&o.paths, &f);
  assert_string_equal(f.system_uuid, "");
  assert_string_equal(f.os_image, "Linux");
  assert_int_equal(f.ephemeral_bytes, -1);
  nl_node_facts_free(&f);
}

static void test_register_201_then_lease(void **state) {
  nl_node_start(&node);
  nl_kube_req_t *r = run_until("POST", "/api/v1/nodes", 2000);
  assert_non_null(r);
  json_t *b = body_of(r);
  json_t *labels = json_object_get(json_object_get(b, "metadata"), "labels");
  assert_string_equal(json_string_value(json_object_get(labels, "kubernetes.io/hostname")), "n1");
  json_t *cap = json_object_get(json_object_get(b, "status"), "capacity");
  assert_string_equal(json_string_value(json_object_get(cap, "cpu")), "5");
  assert_string_equal(json_string_value(json_object_get(cap, "memory")), "4028536Ki");
  json_decref(b);
  fk.auto_answer = true;
  serve(r);
  assert_string_equal(nl_node_uid(&node), "node-uid-1");
  assert_true(nl_node_ready(&node));
  /* The Lease: not there, created with an owner reference to the Node. */
  r = run_until("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", 2000);
  assert_non_null(r);
  assert_int_equal(count("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"), 1);
  b = body_of(r);
  json_t *owner = json_array_get(json_object_get(json_object_get(b, "metadata"), "ownerReferences"), 0);
  assert_string_equal(json_string_value(json_object_get(owner, "kind")), "Node");
  assert_string_equal(json_string_value(json_object_get(owner, "uid")), "node-uid-1");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(b, "spec"), "leaseDurationSeconds")), 1);
  json_decref(b);
  serve(r);
  /* Renewals every 250 ms: renewTime alone, without the resourceVersion,
   * answered with their status alone (the Lease holds what nanolet would
   * write otherwise), a JSON patch that tests the holder and the duration
   * first. */
  uint64_t t0 = uv_now(&loop);
  run_until(NULL, NULL, 880);
  assert_int_equal(fk.lease_patches, 3);
  assert_int_equal(fk.puts, 0);
  nl_kube_req_t *last = NULL;
  for (size_t i = 0; i < kf.n; i++)
    if (strcmp(kf.reqs[i]->method, "PATCH") == 0 && strstr(kf.reqs[i]->path, "/leases/n1")) last = kf.reqs[i];
  assert_true(last->at_ms - t0 >= 740);
  assert_true(last->head_only);
  assert_string_equal(last->ctype, "application/json-patch+json");
  char *want = nl_xasprintf(
      "[{\"op\":\"test\",\"path\":\"/spec/holderIdentity\",\"value\":\"n1\"},"
      "{\"op\":\"test\",\"path\":\"/spec/leaseDurationSeconds\",\"value\":1},"
      "{\"op\":\"replace\",\"path\":\"/spec/renewTime\",\"value\":\"%s\"}]",
      json_string_value(json_object_get(json_object_get(fk.lease, "spec"), "renewTime")));
  assert_string_equal(last->body, want);
  free(want);
  /* The node's view of its Lease is what it sent. */
  assert_string_equal(json_string_value(json_object_get(json_object_get(node.lease.base, "spec"),
                                                        "renewTime")),
                      json_string_value(json_object_get(json_object_get(fk.lease, "spec"),
                                                        "renewTime")));
  assert_string_equal(json_string_value(json_object_get(json_object_get(fk.lease, "spec"), "holderIdentity")), "n1");
  /* A renewal with more to change (the Lease as last read has another
   * holder) goes on the resourceVersion, answered with the metadata; that
   * resourceVersion is stale: 409, GET the Lease again, and renew that. */
  json_object_set_new(json_object_get(node.lease.base, "spec"), "holderIdentity",
                      json_string("other"));
  size_t gets = count("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1");
  fk.auto_answer = false;
  r = run_until("PATCH", "/apis/coordination.k8s.io", 1000);
  fk.auto_answer = true;
  assert_false(r->head_only);
  assert_true(r->accept_metadata);
  assert_non_null(strstr(r->body, "\"resourceVersion\""));
  assert_non_null(strstr(r->body, "\"holderIdentity\":\"n1\""));
  serve(r); /* 409 */
  r = run_until("GET", "/apis/coordination.k8s.io", 100);
  assert_non_null(r);
  assert_int_equal(count("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"), gets + 1);
  serve(r);
  /* (the Lease read holds what nanolet would write: renewTime alone) */
  r = run_until("PATCH", "/apis/coordination.k8s.io", 100);
  assert_non_null(r);
  assert_true(r->head_only);
  serve(r);
  assert_string_equal(nl_node_lease_state_name(node.lease.state), "Idle");
  /* The Lease deleted: a renewal's 404 makes it again. */
  json_decref(fk.lease);
  fk.lease = NULL;
  size_t posts = fk.posts;
  run_until(NULL, NULL, 600);
  assert_int_equal(fk.posts, posts + 1);
  assert_non_null(fk.lease);
  assert_string_equal(nl_node_lease_state_name(node.lease.state), "Idle");
}

/* Someone else takes the Lease (kubectl patch of its holder) while the
 * renewals go without the resourceVersion: the next renewal's test of the
 * holder fails (422), the Lease is read again and nanolet's holder written
 * back on its resourceVersion, as upstream after its PUT's conflict; then the
 * tested renewals again. Not a failure of the link. */
static void test_lease_taken_back(void **state) {
  static const char lease[] = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1";
  fk.auto_answer = true;
  nl_node_start(&node);
  nl_kube_req_t *r = run_until("PATCH", lease, 1000);
  assert_non_null(r);
  assert_string_equal(r->ctype, "application/json-patch+json");
  serve(r);
  json_object_set_new(json_object_get(fk.lease, "spec"), "holderIdentity",
                      json_string("someone-else"));
  size_t gets = count("GET", lease);
  fk.auto_answer = false;
  r = run_until("PATCH", lease, 1000);
  assert_non_null(r);
  assert_string_equal(r->ctype, "application/json-patch+json");
  assert_true(r->head_only);
  serve(r); /* 422: the holder's test failed */
  r = run_until(NULL, lease, 100);
  assert_non_null(r);
  assert_string_equal(r->method, "GET");
  assert_int_equal(count("GET", lease), gets + 1);
  serve(r);
  /* The Lease read is someone else's: a merge patch on its resourceVersion
   * with the holder, answered with the metadata. */
  r = run_until("PATCH", lease, 100);
  assert_non_null(r);
  assert_string_equal(r->ctype, "application/merge-patch+json");
  assert_false(r->head_only);
  json_t *b = body_of(r);
  assert_string_equal(json_string_value(json_object_get(json_object_get(b, "metadata"), "resourceVersion")),
                      json_string_value(json_object_get(json_object_get(fk.lease, "metadata"), "resourceVersion")));
  assert_string_equal(json_string_value(json_object_get(json_object_get(b, "spec"), "holderIdentity")), "n1");
  assert_non_null(json_object_get(json_object_get(b, "spec"), "renewTime"));
  json_decref(b);
  serve(r);
  assert_string_equal(json_string_value(json_object_get(json_object_get(fk.lease, "spec"), "holderIdentity")), "n1");
  assert_string_equal(nl_node_lease_state_name(node.lease.state), "Idle");
  assert_int_equal(node.lease.log.failures, 0);
  /* Then the tested renewals again, which pass. */
  fk.auto_answer = true;
  size_t patches = fk.lease_patches;
  r = run_until("PATCH", lease, 1000);
  assert_non_null(r);
  assert_string_equal(r->ctype, "application/json-patch+json");
  run_until(NULL, NULL, 100);
  assert_int_equal(fk.lease_patches, patches + 1);
  assert_int_equal(count("GET", lease), gets + 1);
  assert_int_equal(node.lease.log.failures, 0);
}

/* The Lease's renewals and the status rounds wait their period stretched by up
 * to 4%, as upstream's wait.JitterUntil(..., 0.04, true): spread over the
 * whole range, so that a fleet does not renew in step. */
static void test_periods_jittered(void **state) {
  nl_backoff_t rng;
  nl_backoff_init(&rng, 1, 1, 0);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t d = nl_node__jittered(&rng, 10000);
    assert_true(d >= 10000 && d <= 10400);
    lo = d < lo ? d : lo;
    hi = d > hi ? d : hi;
  }
  assert_true(lo < 10040);
  assert_true(hi > 10360);
}

/* Images largest first, equal sizes by id descending (upstream's
 * ByImageSize), whatever order the runtime lists them in: the Node's image
 * list, and so its status, stays the same from round to round. */
static void test_images_sorted_stably(void **state) {
  const char *ids[2][4] = {{"sha256:a", "sha256:c", "sha256:big", "sha256:b"},
                           {"sha256:b", "sha256:big", "sha256:c", "sha256:a"}};
  for (int k = 0; k < 2; k++) {
    nl_node_image_t im[4];
    for (int i = 0; i < 4; i++)
      im[i] = (nl_node_image_t){.names = (const char **)&ids[k][i], .n_names = 1,
                                .size_bytes = strcmp(ids[k][i], "sha256:big") ? 322406 : 5000000};
    nl_node_images_sort(im, ids[k], 4);
    const char *want[] = {"sha256:big", "sha256:c", "sha256:b", "sha256:a"};
    for (int i = 0; i < 4; i++) assert_string_equal(im[i].names[0], want[i]);
  }
}

static void test_register_409_reconciles(void **state) {
  fk.node = json_loads("{\"metadata\":{\"name\":\"n1\",\"uid\":\"old-uid\",\"labels\":{"
                       "\"kubernetes.io/hostname\":\"other\"}},\"status\":{}}", 0, NULL);
  nl_node_start(&node);
  nl_kube_req_t *r = run_until("POST", "/api/v1/nodes", 2000);
  serve(r);
  r = run_until("GET", "/api/v1/nodes/n1", 100);
  assert_non_null(r);
  assert_string_equal(r->path, "/api/v1/nodes/n1");
  serve(r);
  r = run_until("PATCH", "/api/v1/nodes/n1/status", 100);
  assert_non_null(r);
  json_t *b = body_of(r);
  json_t *meta = json_object_get(b, "metadata");
  assert_string_equal(json_string_value(json_object_get(json_object_get(meta, "labels"), "kubernetes.io/hostname")), "n1");
  assert_string_equal(json_string_value(json_object_get(json_object_get(meta, "annotations"),
                          "volumes.kubernetes.io/controller-managed-attach-detach")), "true");
  assert_null(json_object_get(b, "status"));
  json_decref(b);
  serve(r);
  assert_string_equal(nl_node_uid(&node), "old-uid");
  /* Then the status of the existing Node is brought up to date. */
  fk.auto_answer = true;
  r = run_until("PATCH", "/api/v1/nodes/n1/status", 500);
  assert_non_null(r);
  assert_non_null(strstr(r->body, "\"conditions\""));
}

/* The runtime's features reach the Node that admission reads (a Strict pod
 * is admitted only where status.features.supplementalGroupsPolicy is true)
 * with the status patch that writes them, and stay there between rounds. */
static void test_features_for_admission(void **state) {
  fk.auto_answer = true;
  fk.features_sgp = true;
  fk.create_drops_status = true;
  nl_node_start(&node);
  nl_kube_req_t *r = run_until("PATCH", "/api/v1/nodes/n1/status", 500);
  assert_non_null(r);
  assert_non_null(strstr(r->body, "\"features\":{\"supplementalGroupsPolicy\":true}"));
  const json_t *f = json_object_get(json_object_get(nl_node_object(&node), "status"), "features");
  assert_true(json_is_true(json_object_get(f, "supplementalGroupsPolicy")));
  serve(r);
  run_until(NULL, NULL, 300); /* rounds from the watch, the Node slimmed between them */
  f = json_object_get(json_object_get(nl_node_object(&node), "status"), "features");
  assert_true(json_is_true(json_object_get(f, "supplementalGroupsPolicy")));
}

/* After a restart, the Node on the server still has the allocatable of the
 * agent that ran before (huge pages reserved then, freed since). Admission
 * measures pods against the allocatable the status patch writes, from the
 * moment it is sent, not against the Node read before it. */
static void test_allocatable_for_admission_after_restart(void **state) {
  fk.node = json_loads("{\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\"},\"status\":{"
                       "\"capacity\":{\"memory\":\"2Gi\",\"hugepages-1Gi\":\"1Gi\"},"
                       "\"allocatable\":{\"memory\":\"1Gi\",\"hugepages-1Gi\":\"1Gi\"}}}",
                       0, NULL);
  fk.auto_answer = true;
  nl_node_start(&node);
  /* the reconcile's patch first: the Node read lacks the hostname label */
  nl_kube_req_t *r = run_until("PATCH", "/api/v1/nodes/n1/status", 2000);
  json_t *b = body_of(r);
  assert_null(json_object_get(b, "status"));
  json_decref(b);
  serve(r);
  r = run_until("PATCH", "/api/v1/nodes/n1/status", 500);
  b = body_of(r);
  const json_t *sent = json_object_get(json_object_get(json_object_get(b, "status"), "allocatable"), "memory");
  assert_non_null(sent);
  assert_string_not_equal(json_string_value(sent), "1Gi");
  const json_t *st = json_object_get(nl_node_object(&node), "status");
  assert_string_equal(json_string_value(json_object_get(json_object_get(st, "allocatable"), "memory")),
                      json_string_value(sent));
  serve(r); /* answered with metadata only */
  run_until(NULL, NULL, 5);
  st = json_object_get(nl_node_object(&node), "status");
  assert_string_equal(json_string_value(json_object_get(json_object_get(st, "allocatable"), "memory")),
                      json_string_value(sent));
  json_decref(b);
}

static void test_register_backoff(void **state) {
  nl_node_start(&node);
  nl_kube_req_t *r = run_until("POST", "/api/v1/nodes", 2000);
  answer(r, 500, "{\"kind\":\"Status\",\"message\":\"etcdserver: leader changed\"}");
  r = run_until("POST", "/api/v1/nodes", 1000);
  uint64_t d1 = r->at_ms - kf.reqs[0]->at_ms;
  fail_req(r, NL_ETIMEOUT);
  nl_kube_req_t *r3 = run_until("POST", "/api/v1/nodes", 1000);
  uint64_t d2 = r3->at_ms - r->at_ms;
  assert_true(d1 >= 10);
  assert_true(d2 >= 20); /* doubled */
  fk.auto_answer = true;
  serve(r3);
  assert_true(node.registered);
  assert_int_equal(node.log.failures, 0);
}

static void test_status_only_on_change_or_report(void **state) {
  fk.auto_answer = true;
  nl_node_start(&node);
  run_until(NULL, NULL, 300);
  /* Registered and unchanged: a round every 40 ms, each taking the Node from
   * the watch (upstream's node informer), not from a GET; no PATCH before
   * report_ms. Only the first round, before the watch's list, reads it. */
  assert_int_equal(count("POST", "/api/v1/nodes"), 1);
  assert_true(fk.rounds >= 5);
  assert_int_equal(count("GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1"), 1); /* the list */
  assert_true(watching());
  assert_in_range(count("GET", "/api/v1/nodes/n1"), 0, 1);
  assert_int_equal(fk.patches, 0);
  /* The runtime goes away: the change is patched at once. */
  fk.runtime_ready = false;
  nl_kube_req_t *r = run_until("PATCH", "/api/v1/nodes/n1/status", 200);
  assert_non_null(r);
  assert_non_null(strstr(r->body, "container runtime not ready: RuntimeReady=false"));
  /* Only what changed: the conditions, not the image list or nodeInfo. */
  json_t *b = body_of(r);
  assert_non_null(json_object_get(json_object_get(b, "status"), "conditions"));
  assert_null(json_object_get(json_object_get(b, "status"), "images"));
  assert_null(json_object_get(json_object_get(b, "status"), "nodeInfo"));
  json_decref(b);
  /* The status patch asks for the answer's metadata only; the Node the
   * agent holds keeps its status (allocatable for admission) all the same. */
  assert_true(r->accept_metadata);
  serve(r);
  assert_false(nl_node_ready(&node));
  assert_non_null(json_object_get(json_object_get(nl_node_object(&node), "status"), "allocatable"));
  assert_string_equal(json_string_value(json_object_get(json_object_get(
                          nl_node_object(&node), "metadata"), "uid")), "node-uid-1");
  /* Not ready: rounds every fast_ms, still no PATCH without a change... */
  size_t patches = fk.patches;
  run_until(NULL, NULL, 200);
  assert_int_equal(fk.patches, patches);
  /* ...until the report frequency passes. */
  r = run_until("PATCH", "/api/v1/nodes/n1/status", 400);
  assert_non_null(r);
  serve(r);
  /* Ready again: patched at once, with a new transition time. */
  fk.runtime_ready = true;
  r = run_until("PATCH", "/api/v1/nodes/n1/status", 200);
  assert_non_null(strstr(r->body, "\"reason\":\"KubeletReady\""));
  serve(r);
  assert_true(nl_node_ready(&node));
  /* Events on registration and on each change of a condition, not per round. */
  assert_int_equal(count_events("Normal NodeHasSufficientMemory: Node n1 status is now: "
                                "NodeHasSufficientMemory"), 1);
  assert_int_equal(count_events("Normal NodeHasNoDiskPressure"), 1);
  assert_int_equal(count_events("Normal NodeHasSufficientPID"), 1);
  assert_int_equal(count_events("Normal NodeNotReady: Node n1 status is now: NodeNotReady"), 1);
  assert_int_equal(count_events("Normal NodeReady"), 2);
  assert_int_equal(count_events("Warning Rebooted"), 0);
}

static void test_rebooted_event(void **state) {
  fk.node = json_loads("{\"metadata\":{\"name\":\"n1\",\"uid\":\"old-uid\"},"
                       "\"status\":{\"nodeInfo\":{\"bootID\":\"an-older-boot\"}}}", 0, NULL);
  fk.auto_answer = true;
  nl_node_start(&node);
  run_until(NULL, NULL, 300); /* registered (409), reconciled, a status round */
  assert_int_equal(count_events("Warning Rebooted: Node n1 has been rebooted, boot id: "), 1);
}

static void test_deleted_node_registers_again(void **state) {
  fk.auto_answer = true;
  nl_node_start(&node);
  run_until(NULL, NULL, 300);
  assert_string_equal(nl_node_uid(&node), "node-uid-1");
  /* The watch tells of the deletion: the next round reads the Node, gets a
   * 404 and registers it again. */
  watch_send("DELETED", fk.node);
  json_decref(fk.node);
  fk.node = NULL;
  fk.auto_answer = false;
  nl_kube_req_t *r = run_until("GET", "/api/v1/nodes/n1", 200);
  serve(r); /* 404 */
  r = run_until("POST", "/api/v1/nodes", 200);
  assert_non_null(r);
  fk.auto_answer = true;
  serve(r);
  assert_int_equal(count("POST", "/api/v1/nodes"), 2);
  assert_true(node.registered);
}

static void test_patch_conflict_reads_etcd(void **state) {
  fk.auto_answer = true;
  fk.whole_answers = true; /* a server that cannot answer metadata alone: the same */
  nl_node_start(&node);
  run_until(NULL, NULL, 300);
  size_t gets = count("GET", "/api/v1/nodes/n1");
  /* Someone else changes the Node: the watch brings it, no GET. */
  json_object_set_new(json_object_get(fk.node, "metadata"), "labels",
                      json_pack("{s:s}", "team", "edge"));
  watch_send("MODIFIED", fk.node);
  fk.runtime_ready = false; /* a change to patch */
  fk.fail_next_patch = 409;
  nl_kube_req_t *r = run_until("GET", "/api/v1/nodes/n1", 300);
  assert_non_null(r);
  /* The retry after the conflict reads etcd (no resourceVersion=0), then patches. */
  assert_string_equal(r->path, "/api/v1/nodes/n1");
  assert_int_equal(count("GET", "/api/v1/nodes/n1"), gets + 1);
  serve(r);
  r = run_until("PATCH", "/api/v1/nodes/n1/status", 300);
  assert_non_null(r);
  serve(r);
  assert_false(nl_node_ready(&node));
  assert_int_equal(count("GET", "/api/v1/nodes/n1"), gets + 1);
}

static uint64_t max_lag;
static uint64_t ticks;
static void on_tick(uv_timer_t *t) {
  uint64_t want = (uint64_t)(uintptr_t)t->data + 5;
  uint64_t lag = uv_now(t->loop) - want;
  if (ticks++ && lag > max_lag) max_lag = lag;
  t->data = (void *)(uintptr_t)uv_now(t->loop);
}

static void test_apiserver_down(void **state) {
  fk.auto_answer = true;
  fk.fail_status = 503;
  static uv_timer_t tick;
  uv_timer_init(&loop, &tick);
  tick.data = (void *)(uintptr_t)uv_now(&loop);
  uv_timer_start(&tick, on_tick, 5, 5);
  nl_node_start(&node);
  run_until(NULL, NULL, 600);
  /* Closed before any assertion: a failed one must not leave a repeating
   * timer for the teardown's loop to run forever. */
  uv_close((uv_handle_t *)&tick, NULL);
  /* 10, 20, 40, 80, 80, ... ms apart: about 9 attempts in 600 ms, not hundreds. */
  size_t posts = count("POST", "/api/v1/nodes");
  assert_in_range(posts, 5, 12);
  assert_true(node.log.failures == posts);
  assert_null(pending(NULL, NULL));
  /* The loop stayed responsive: a 5 ms timer never waited for the retries
   * (room for a loaded machine under the sanitizers, where 30 ms was seen). */
  assert_true(max_lag < 200);
  /* Back: registered and the Lease follows. */
  fk.fail_status = 0;
  run_until("PATCH", "/apis/coordination.k8s.io", 1000);
  assert_true(node.registered);
  assert_int_equal(node.log.failures, 0);
}

static void test_lease_failures_back_off(void **state) {
  fk.auto_answer = true;
  nl_node_start(&node);
  run_until("PATCH", "/apis/coordination.k8s.io", 1000);
  /* Every Lease write fails: five tries, then GETs with back-off. */
  fk.fail_status = 500;
  size_t before = kf.n;
  run_until(NULL, NULL, 400);
  size_t lease_reqs = 0;
  for (size_t i = before; i < kf.n; i++) lease_reqs += strstr(kf.reqs[i]->path, "/leases") != NULL;
  assert_in_range(lease_reqs, 5, 20);
  assert_true(node.lease.log.failures >= 5);
}

/* ... and that round goes at once, not at its next tick: a node marked
 * Unknown during the outage is Ready again as soon as the link allows. */
static void test_link_back_reports_at_once(void **state) {
  node.opts.update_ms = 10000; /* its next tick is 8 s or more after the link is back */
  fk.auto_answer = true;
  nl_node_start(&node);
  run_until("PATCH", "/apis/coordination.k8s.io", 1000);
  run_until(NULL, NULL, 100);
  fk.fail_status = 503;
  run_until(NULL, NULL, 300);
  assert_true(node.lease.log.failures >= 1);
  fk.fail_status = 0;
  uint64_t back = uv_now(&loop);
  nl_kube_req_t *r = run_until("GET", "/api/v1/nodes/n1?resourceVersion=0", 4000);
  assert_non_null(r);
  /* the Lease's back-off (80 ms at most here) and a loaded machine's slack, not 10 s */
  assert_true(r->at_ms - back < 2000);
}

/* The renewal period is a quarter of nodeLeaseDurationSeconds, as
 * upstream's renewIntervalFraction, its one setting: 500 ms at 2 s (250 ms
 * at the fixture's 1 s). */
static void test_lease_period_from_duration(void **state) {
  node.opts.lease_duration_s = 2; /* 500 ms */
  fk.auto_answer = true;
  nl_node_start(&node);
  run_until("PATCH", "/apis/coordination.k8s.io", 1500);
  run_until(NULL, NULL, 1600);
  uint64_t last = 0;
  size_t n = 0;
  for (size_t i = 0; i < kf.n; i++) {
    if (strcmp(kf.reqs[i]->method, "PATCH") || !strstr(kf.reqs[i]->path, "/leases/n1")) continue;
    /* 500 ms from the end of the last renewal, +4 % jitter, and the loop's slack
     * on a loaded machine: well past the fixture's 250 */
    if (n++) assert_in_range(kf.reqs[i]->at_ms - last, 500, 650);
    last = kf.reqs[i]->at_ms;
  }
  assert_in_range(n, 3, 5);
}

/* Once a Lease renewal succeeds after failures (the link is back), the next
 * status round reads the Node from the apiserver's cache rather than from the
 * watch, which may not have caught up with what was written meanwhile (the
 * node lifecycle controller's Ready=Unknown): one GET, then the watch again. */
static void test_link_back_reads_the_node(void **state) {
  fk.auto_answer = true;
  nl_node_start(&node);
  run_until("PATCH", "/apis/coordination.k8s.io", 1000);
  assert_non_null(fk.watch);
  run_until(NULL, NULL, 100);
  size_t gets = count("GET", "/api/v1/nodes/n1?resourceVersion=0");
  fk.fail_status = 503;
  run_until(NULL, NULL, 300);
  assert_true(node.lease.log.failures >= 1);
  assert_int_equal(count("GET", "/api/v1/nodes/n1?resourceVersion=0"), gets);
  fk.fail_status = 0;
  run_until(NULL, NULL, 400);
  assert_int_equal(node.lease.log.failures, 0);
  assert_int_equal(count("GET", "/api/v1/nodes/n1?resourceVersion=0"), gets + 1);
  assert_false(node.read_fresh);
}

static void test_stop_mid_request(void **state) {
  nl_node_start(&node);
  nl_kube_req_t *r = run_until("POST", "/api/v1/nodes", 2000);
  assert_non_null(r);
  /* teardown stops with the POST in flight: cancelled, closed, loop clean */
}

static void test_stop_while_runtime_asked(void **state) {
  nl_node_start(&node);
  while (!fk.rt_done) uv_run(&loop, UV_RUN_ONCE);
  nl_node_stop(&node, on_stopped);
  /* The runtime answers after the stop: ignored. */
  deliver_runtime();
  while (!stopped) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(kf.n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_facts_from_fixtures),
      cmocka_unit_test(test_periods_jittered),
      cmocka_unit_test(test_images_sorted_stably),
      cmocka_unit_test_setup_teardown(test_register_201_then_lease, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lease_taken_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_register_409_reconciles, setup, teardown),
      cmocka_unit_test_setup_teardown(test_register_backoff, setup, teardown),
      cmocka_unit_test_setup_teardown(test_status_only_on_change_or_report, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deleted_node_registers_again, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rebooted_event, setup, teardown),
      cmocka_unit_test_setup_teardown(test_patch_conflict_reads_etcd, setup, teardown),
      cmocka_unit_test_setup_teardown(test_apiserver_down, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lease_failures_back_off, setup, teardown),
      cmocka_unit_test_setup_teardown(test_link_back_reads_the_node, setup, teardown),
      cmocka_unit_test_setup_teardown(test_link_back_reports_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lease_period_from_duration, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_mid_request, setup, teardown),
      cmocka_unit_test_setup_teardown(test_features_for_admission, setup, teardown),
      cmocka_unit_test_setup_teardown(test_allocatable_for_admission_after_restart, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_while_runtime_asked, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
