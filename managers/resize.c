/* The resize state: allocations, actuated resources, conditions, and their
 * checkpoint (managers/resize.h). */
#include "managers/resize.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reactor/fs.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define CHECKPOINT_NAME "pod_resources_state"
/* The pod-level resources' entry beside the containers': no container can
 * have this name (a DNS-1123 label has no '.'). */
#define POD_LEVEL_KEY "spec.resources"

typedef struct rsz_ctr {
  char *name;
  bool has_alloc, has_act;
  nl_rsz_res_t alloc, act;
} rsz_ctr_t;

struct nl_rsz_pod {
  rsz_ctr_t *c;
  size_t n;
  rsz_ctr_t level; /* the pod-level resources (spec.resources), name NULL */
  nl_rsz_cond_t pending, in_progress;
};

/* ---- amounts ---- */

static int64_t milli_of(const nl_resource_list_t *l, const char *name, unsigned bit,
                        unsigned *set) {
  const nl_quantity_t *q = nl_resource_list_get(l, name);
  if (!q) return 0;
  *set |= bit;
  return strcmp(name, "cpu") == 0 ? nl_quantity_milli_value(q) : nl_quantity_value(q);
}

nl_rsz_res_t nl_rsz_reqs_res(const nl_resource_requirements_t *res) {
  nl_rsz_res_t r = {0};
  if (!res) return r;
  r.cpu_req = milli_of(&res->requests, "cpu", NL_RSZ_CPU_REQ, &r.set);
  r.cpu_lim = milli_of(&res->limits, "cpu", NL_RSZ_CPU_LIM, &r.set);
  r.mem_req = milli_of(&res->requests, "memory", NL_RSZ_MEM_REQ, &r.set);
  r.mem_lim = milli_of(&res->limits, "memory", NL_RSZ_MEM_LIM, &r.set);
  return r;
}

nl_rsz_res_t nl_rsz_res_of(const nl_container_t *c) { return nl_rsz_reqs_res(&c->resources); }

nl_rsz_res_t nl_rsz_effective(nl_rsz_res_t c, const nl_rsz_res_t *pod) {
  if (!c.cpu_lim && pod->cpu_lim) {
    c.cpu_lim = pod->cpu_lim;
    c.set |= NL_RSZ_CPU_LIM;
  }
  if (!c.mem_lim && pod->mem_lim) {
    c.mem_lim = pod->mem_lim;
    c.set |= NL_RSZ_MEM_LIM;
  }
  return c;
}

bool nl_rsz_res_equal(const nl_rsz_res_t *a, const nl_rsz_res_t *b) {
  return a->cpu_req == b->cpu_req && a->cpu_lim == b->cpu_lim && a->mem_req == b->mem_req &&
         a->mem_lim == b->mem_lim;
}

nl_container_t *nl_rsz_find(const nl_pod_t *pod, const char *name) {
  for (size_t i = 0; i < pod->spec.n_containers; i++)
    if (strcmp(pod->spec.containers[i].name, name) == 0) return &pod->spec.containers[i];
  for (size_t i = 0; i < pod->spec.n_init_containers; i++)
    if (strcmp(pod->spec.init_containers[i].name, name) == 0) return &pod->spec.init_containers[i];
  return NULL;
}

static int res_cmp(const void *a, const void *b) {
  return strcmp(((const nl_resource_t *)a)->name, ((const nl_resource_t *)b)->name);
}

/* One list: what spec has but cpu and memory, then those two as res says. */
static void build_list(const nl_resource_list_t *spec, bool has_cpu, int64_t cpu, bool has_mem,
                       int64_t mem, nl_resource_list_t *out) {
  nl_resource_t *items = nl_xcalloc(spec->n + 2, sizeof *items);
  size_t n = 0;
  for (size_t i = 0; i < spec->n; i++) {
    const nl_resource_t *r = &spec->items[i];
    bool is_cpu = strcmp(r->name, "cpu") == 0, is_mem = strcmp(r->name, "memory") == 0;
    if (is_cpu && has_cpu && nl_quantity_milli_value(&r->q) == cpu) { /* as written */
      items[n++] = *r;
      has_cpu = false;
    } else if (is_mem && has_mem && nl_quantity_value(&r->q) == mem) {
      items[n++] = *r;
      has_mem = false;
    } else if (!is_cpu && !is_mem) {
      items[n++] = *r;
    }
  }
  if (has_cpu)
    items[n++] = (nl_resource_t){(char *)"cpu", {cpu, -3, NL_QUANTITY_DECIMAL_SI}};
  if (has_mem)
    items[n++] = (nl_resource_t){(char *)"memory", {mem, 0, NL_QUANTITY_BINARY_SI}};
  qsort(items, n, sizeof *items, res_cmp);
  *out = (nl_resource_list_t){items, n};
}

void nl_rsz_reqs_build(const nl_resource_requirements_t *spec, const nl_rsz_res_t *res,
                       nl_resource_requirements_t *out) {
  build_list(&spec->requests, res->set & NL_RSZ_CPU_REQ, res->cpu_req, res->set & NL_RSZ_MEM_REQ,
             res->mem_req, &out->requests);
  build_list(&spec->limits, res->set & NL_RSZ_CPU_LIM, res->cpu_lim, res->set & NL_RSZ_MEM_LIM,
             res->mem_lim, &out->limits);
}

void nl_rsz_reqs_free(nl_resource_requirements_t *r) {
  free(r->requests.items);
  free(r->limits.items);
  memset(r, 0, sizeof *r);
}

/* ---- state ---- */

static void cond_clear(nl_rsz_cond_t *c) {
  free(c->reason);
  free(c->message);
  memset(c, 0, sizeof *c);
}

static void pod_free(void *p) {
  nl_rsz_pod_t *rp = p;
  if (!rp) return;
  for (size_t i = 0; i < rp->n; i++) free(rp->c[i].name);
  free(rp->c);
  cond_clear(&rp->pending);
  cond_clear(&rp->in_progress);
  free(rp);
}

static nl_rsz_pod_t *pod_get(nl_resize_t *rs, const char *uid) {
  nl_rsz_pod_t *rp = nl_map_get(&rs->pods, uid);
  if (!rp) {
    rp = nl_xcalloc(1, sizeof *rp);
    nl_map_put(&rs->pods, uid, rp);
  }
  return rp;
}

static rsz_ctr_t *ctr_get(nl_rsz_pod_t *rp, const char *name) {
  for (size_t i = 0; i < rp->n; i++)
    if (strcmp(rp->c[i].name, name) == 0) return &rp->c[i];
  rp->c = nl_xrealloc(rp->c, (rp->n + 1) * sizeof *rp->c);
  rp->c[rp->n] = (rsz_ctr_t){.name = nl_xstrdup(name)};
  return &rp->c[rp->n++];
}

static const rsz_ctr_t *ctr_find(const nl_resize_t *rs, const char *uid, const char *name) {
  const nl_rsz_pod_t *rp = nl_map_get(&rs->pods, uid);
  if (!rp) return NULL;
  for (size_t i = 0; i < rp->n; i++)
    if (strcmp(rp->c[i].name, name) == 0) return &rp->c[i];
  return NULL;
}

/* ---- the checkpoint ---- */

static uint32_t fnv32a(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static json_t *res_json(const nl_rsz_res_t *r) {
  return json_pack("{s:I, s:I, s:I, s:I, s:i}", "cpuRequest", (json_int_t)r->cpu_req, "cpuLimit",
                   (json_int_t)r->cpu_lim, "memoryRequest", (json_int_t)r->mem_req,
                   "memoryLimit", (json_int_t)r->mem_lim, "set", (int)r->set);
}

static bool res_from_json(const json_t *j, nl_rsz_res_t *r) {
  if (!json_is_object(j)) return false;
  json_int_t cr = 0, cl = 0, mr = 0, ml = 0;
  int set = 0;
  if (json_unpack((json_t *)j, "{s:I, s:I, s:I, s:I, s:i}", "cpuRequest", &cr, "cpuLimit", &cl,
                  "memoryRequest", &mr, "memoryLimit", &ml, "set", &set) < 0)
    return false;
  *r = (nl_rsz_res_t){cr, cl, mr, ml, (unsigned)set & 15u};
  return true;
}

static json_t *checkpoint_data(const nl_resize_t *rs) {
  json_t *pods = json_object();
  nl_map_iter_t it;
  const char *uid;
  void *v;
  nl_map_iter_init(&it, &rs->pods);
  while (nl_map_iter_next(&it, &uid, &v)) {
    const nl_rsz_pod_t *rp = v;
    json_t *ctrs = json_object();
    for (size_t i = 0; i < rp->n; i++) {
      json_t *c = json_object();
      if (rp->c[i].has_alloc) json_object_set_new(c, "allocated", res_json(&rp->c[i].alloc));
      if (rp->c[i].has_act) json_object_set_new(c, "actuated", res_json(&rp->c[i].act));
      json_object_set_new(ctrs, rp->c[i].name, c);
    }
    if (rp->level.has_alloc || rp->level.has_act) {
      json_t *c = json_object();
      if (rp->level.has_alloc) json_object_set_new(c, "allocated", res_json(&rp->level.alloc));
      if (rp->level.has_act) json_object_set_new(c, "actuated", res_json(&rp->level.act));
      json_object_set_new(ctrs, POD_LEVEL_KEY, c);
    }
    json_object_set_new(pods, uid, ctrs);
  }
  return json_pack("{s:i, s:o}", "version", 1, "pods", pods);
}

static void write_work(uv_work_t *w) {
  nl_resize_t *rs = container_of(w, nl_resize_t, work);
  rs->werr = nl_fs_replace(rs->path, rs->text, strlen(rs->text), &rs->wstep);
}

static void write_start(nl_resize_t *rs);

static void finish_stop(nl_resize_t *rs) {
  nl_map_free(&rs->pods, pod_free);
  free(rs->path);
  rs->path = NULL;
  if (rs->done_cb) rs->done_cb(rs);
}

static void write_done(uv_work_t *w, int status) {
  nl_resize_t *rs = container_of(w, nl_resize_t, work);
  if (status < 0) nl_error("resize: write checkpoint %s: cancelled", rs->path);
  else if (rs->werr)
    nl_error("resize: write checkpoint %s: %s: %s", rs->path, rs->wstep, strerror(rs->werr));
  free(rs->text);
  rs->text = NULL;
  rs->busy = false;
  if (rs->dirty) write_start(rs); /* the latest state, even when stopping */
  else if (rs->stopping) finish_stop(rs);
}

static void write_start(nl_resize_t *rs) {
  json_t *data = checkpoint_data(rs);
  char *sum_text = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);
  json_t *doc = json_pack("{s:o, s:I}", "data", data, "checksum", (json_int_t)fnv32a(sum_text));
  free(sum_text);
  rs->text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(doc);
  rs->dirty = false;
  rs->busy = true;
  int r = uv_queue_work(rs->loop, &rs->work, write_work, write_done);
  assert(r == 0); /* only fails for a NULL work_cb */
  (void)r;
}

static void changed(nl_resize_t *rs) {
  rs->dirty = true;
  if (!rs->busy) write_start(rs);
}

static void read_checkpoint(nl_resize_t *rs) {
  json_error_t je;
  json_t *doc = json_load_file(rs->path, 0, &je);
  if (!doc) {
    if (access(rs->path, F_OK) < 0 && errno == ENOENT) return;
    nl_warn("resize: read %s: %s; starting with no allocations", rs->path, je.text);
    return;
  }
  json_t *data = json_object_get(doc, "data");
  json_t *sum = json_object_get(doc, "checksum");
  char *text = data ? json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  bool ok = text && json_is_integer(sum) && (json_int_t)fnv32a(text) == json_integer_value(sum) &&
            json_integer_value(json_object_get(data, "version")) == 1;
  free(text);
  if (!ok) {
    nl_warn("resize: %s: checksum mismatch or unknown version; starting with no allocations",
            rs->path);
    json_decref(doc);
    return;
  }
  const char *uid, *name;
  json_t *ctrs, *c;
  json_object_foreach(json_object_get(data, "pods"), uid, ctrs) {
    nl_rsz_pod_t *rp = pod_get(rs, uid);
    json_object_foreach(ctrs, name, c) {
      rsz_ctr_t *rc = strcmp(name, POD_LEVEL_KEY) == 0 ? &rp->level : ctr_get(rp, name);
      rc->has_alloc = res_from_json(json_object_get(c, "allocated"), &rc->alloc);
      rc->has_act = res_from_json(json_object_get(c, "actuated"), &rc->act);
    }
  }
  json_decref(doc);
  nl_info("resize: read %s (%zu pods)", rs->path, nl_map_size(&rs->pods));
}

int nl_resize_init(nl_resize_t *rs, uv_loop_t *loop, const char *root_dir, nl_err_t **err) {
  (void)err;
  memset(rs, 0, sizeof *rs);
  rs->loop = loop;
  rs->path = nl_xasprintf("%s/%s", root_dir, CHECKPOINT_NAME);
  nl_map_init(&rs->pods);
  read_checkpoint(rs);
  return 0;
}

void nl_resize_stop(nl_resize_t *rs, void (*done_cb)(nl_resize_t *rs)) {
  rs->stopping = true;
  rs->done_cb = done_cb;
  if (!rs->busy) finish_stop(rs);
}

/* ---- allocation ---- */

void nl_resize_allocate(nl_resize_t *rs, const nl_pod_t *pod) {
  nl_rsz_pod_t *rp = pod_get(rs, pod->metadata.uid);
  bool any = false;
  for (int init = 0; init < 2; init++) {
    size_t n = init ? pod->spec.n_init_containers : pod->spec.n_containers;
    const nl_container_t *cs = init ? pod->spec.init_containers : pod->spec.containers;
    for (size_t i = 0; i < n; i++) {
      rsz_ctr_t *rc = ctr_get(rp, cs[i].name);
      nl_rsz_res_t r = nl_rsz_res_of(&cs[i]);
      if (rc->has_alloc && nl_rsz_res_equal(&rc->alloc, &r) && rc->alloc.set == r.set) continue;
      rc->alloc = r;
      rc->has_alloc = true;
      any = true;
    }
  }
  if (pod->spec.resources) {
    nl_rsz_res_t r = nl_rsz_reqs_res(pod->spec.resources);
    if (!rp->level.has_alloc || !nl_rsz_res_equal(&rp->level.alloc, &r) ||
        rp->level.alloc.set != r.set) {
      rp->level.alloc = r;
      rp->level.has_alloc = true;
      any = true;
    }
  }
  if (any) changed(rs);
}

bool nl_resize_known(const nl_resize_t *rs, const char *uid) {
  const nl_rsz_pod_t *rp = nl_map_get(&rs->pods, uid);
  if (!rp) return false;
  for (size_t i = 0; i < rp->n; i++)
    if (rp->c[i].has_alloc) return true;
  return rp->level.has_alloc;
}

/* A container's allocation or actuated resources into *out, if known. */
static bool lookup(const nl_resize_t *rs, const char *uid, const char *container, bool actuated,
                   nl_rsz_res_t *out) {
  const rsz_ctr_t *rc = ctr_find(rs, uid, container);
  if (!rc || !(actuated ? rc->has_act : rc->has_alloc)) return false;
  *out = actuated ? rc->act : rc->alloc;
  return true;
}

bool nl_resize_allocated(const nl_resize_t *rs, const char *uid, const char *container,
                         nl_rsz_res_t *out) {
  return lookup(rs, uid, container, false, out);
}

nl_pod_t *nl_resize_allocated_pod(const nl_resize_t *rs, const nl_pod_t *pod) {
  nl_pod_t *copy = NULL;
  for (int init = 0; init < 2; init++) {
    size_t n = init ? pod->spec.n_init_containers : pod->spec.n_containers;
    for (size_t i = 0; i < n; i++) {
      const nl_container_t *c = init ? &pod->spec.init_containers[i] : &pod->spec.containers[i];
      nl_rsz_res_t a;
      if (!nl_resize_allocated(rs, pod->metadata.uid, c->name, &a)) continue;
      nl_rsz_res_t s = nl_rsz_res_of(c);
      if (nl_rsz_res_equal(&a, &s) && a.set == s.set) continue;
      if (!copy) copy = nl_pod_dup(pod);
      nl_container_t *cc = init ? &copy->spec.init_containers[i] : &copy->spec.containers[i];
      nl_resource_requirements_t r;
      nl_rsz_reqs_build(&c->resources, &a, &r);
      nl_pod_set_container_resources(copy, cc, &r);
      nl_rsz_reqs_free(&r);
    }
  }
  nl_rsz_res_t a;
  if (pod->spec.resources && nl_resize_pod_allocated(rs, pod->metadata.uid, &a)) {
    nl_rsz_res_t s = nl_rsz_reqs_res(pod->spec.resources);
    if (!nl_rsz_res_equal(&a, &s) || a.set != s.set) {
      if (!copy) copy = nl_pod_dup(pod);
      nl_resource_requirements_t r;
      nl_rsz_reqs_build(pod->spec.resources, &a, &r);
      nl_pod_set_pod_resources(copy, &r);
      nl_rsz_reqs_free(&r);
    }
  }
  return copy;
}

/* The pod-level record's allocation or actuated resources, if known. */
static bool pod_lookup(const nl_resize_t *rs, const char *uid, bool actuated, nl_rsz_res_t *out) {
  const nl_rsz_pod_t *rp = nl_map_get(&rs->pods, uid);
  if (!rp || !(actuated ? rp->level.has_act : rp->level.has_alloc)) return false;
  *out = actuated ? rp->level.act : rp->level.alloc;
  return true;
}

bool nl_resize_pod_allocated(const nl_resize_t *rs, const char *uid, nl_rsz_res_t *out) {
  return pod_lookup(rs, uid, false, out);
}

bool nl_resize_pod_actuated(const nl_resize_t *rs, const char *uid, nl_rsz_res_t *out) {
  return pod_lookup(rs, uid, true, out);
}

void nl_resize_set_pod_actuated(nl_resize_t *rs, const char *uid, const nl_rsz_res_t *res) {
  rsz_ctr_t *l = &pod_get(rs, uid)->level;
  if (l->has_act && nl_rsz_res_equal(&l->act, res) && l->act.set == res->set) return;
  l->act = *res;
  l->has_act = true;
  changed(rs);
}

bool nl_resize_actuated(const nl_resize_t *rs, const char *uid, const char *container,
                        nl_rsz_res_t *out) {
  return lookup(rs, uid, container, true, out);
}

void nl_resize_set_actuated(nl_resize_t *rs, const char *uid, const char *container,
                            const nl_rsz_res_t *res) {
  rsz_ctr_t *rc = ctr_get(pod_get(rs, uid), container);
  if (rc->has_act && nl_rsz_res_equal(&rc->act, res) && rc->act.set == res->set) return;
  rc->act = *res;
  rc->has_act = true;
  changed(rs);
}

void nl_resize_forget(nl_resize_t *rs, const char *uid) {
  nl_rsz_pod_t *rp = nl_map_del(&rs->pods, uid);
  if (!rp) return;
  pod_free(rp);
  changed(rs);
}

void nl_resize_forget_others(nl_resize_t *rs, bool (*keep)(void *ctx, const char *uid),
                             void *ctx) {
  nl_map_iter_t it;
  const char *uid;
  void *v;
  bool any = false;
  nl_map_iter_init(&it, &rs->pods);
  while (nl_map_iter_next(&it, &uid, &v)) {
    if (keep(ctx, uid)) continue;
    pod_free(nl_map_del(&rs->pods, uid));
    any = true;
  }
  if (any) changed(rs);
}

/* ---- conditions ---- */

static bool cond_set(nl_rsz_cond_t *c, const char *reason, const char *message,
                     int64_t generation, int64_t now_ns) {
  bool was = c->reason != NULL;
  bool diff = !was || strcmp(c->reason, reason) != 0 || c->generation != generation;
  if (!was) c->since_ns = now_ns;
  if (!was || strcmp(c->reason, reason) != 0) {
    free(c->reason);
    c->reason = nl_xstrdup(reason);
  }
  free(c->message);
  c->message = message && *message ? nl_xstrdup(message) : NULL;
  c->generation = generation;
  return diff;
}

bool nl_resize_set_pending(nl_resize_t *rs, const char *uid, const char *reason,
                           const char *message, int64_t generation, int64_t now_ns) {
  return cond_set(&pod_get(rs, uid)->pending, reason, message, generation, now_ns);
}

/* The pod's pending or in-progress condition, NULL when absent. */
static nl_rsz_cond_t *cond_of(const nl_resize_t *rs, const char *uid, bool pending) {
  nl_rsz_pod_t *rp = nl_map_get(&rs->pods, uid);
  nl_rsz_cond_t *c = rp ? (pending ? &rp->pending : &rp->in_progress) : NULL;
  return c && c->reason ? c : NULL;
}

static bool cond_drop(nl_resize_t *rs, const char *uid, bool pending) {
  nl_rsz_cond_t *c = cond_of(rs, uid, pending);
  if (c) cond_clear(c);
  return c != NULL;
}

bool nl_resize_clear_pending(nl_resize_t *rs, const char *uid) { return cond_drop(rs, uid, true); }

const nl_rsz_cond_t *nl_resize_pending(const nl_resize_t *rs, const char *uid) {
  return cond_of(rs, uid, true);
}

bool nl_resize_set_in_progress(nl_resize_t *rs, const char *uid, const char *reason,
                               const char *message, int64_t generation, int64_t now_ns) {
  nl_rsz_cond_t *c = &pod_get(rs, uid)->in_progress;
  if (c->reason) { /* upstream keeps the generation, and an error until cleared */
    generation = c->generation;
    if (!*reason) {
      reason = c->reason;
      message = c->message;
    }
  }
  char *keep = message ? nl_xstrdup(message) : NULL; /* message may be c->message */
  bool r = cond_set(c, reason, keep, generation, now_ns);
  free(keep);
  return r;
}

bool nl_resize_clear_in_progress(nl_resize_t *rs, const char *uid) {
  return cond_drop(rs, uid, false);
}

const nl_rsz_cond_t *nl_resize_in_progress(const nl_resize_t *rs, const char *uid) {
  return cond_of(rs, uid, false);
}

typedef struct pending_item {
  const char *uid;
  int64_t since;
} pending_item_t;

static int pending_cmp(const void *a, const void *b) {
  const pending_item_t *x = a, *y = b;
  return x->since < y->since ? -1 : x->since > y->since;
}

const char **nl_resize_pending_list(const nl_resize_t *rs, size_t *n) {
  pending_item_t *items = nl_xcalloc(nl_map_size(&rs->pods) + 1, sizeof *items);
  size_t k = 0;
  nl_map_iter_t it;
  const char *uid;
  void *v;
  nl_map_iter_init(&it, &rs->pods);
  while (nl_map_iter_next(&it, &uid, &v)) {
    const nl_rsz_pod_t *rp = v;
    if (rp->pending.reason) items[k++] = (pending_item_t){uid, rp->pending.since_ns};
  }
  qsort(items, k, sizeof *items, pending_cmp);
  const char **out = nl_xcalloc(k + 1, sizeof *out);
  for (size_t i = 0; i < k; i++) out[i] = items[i].uid;
  free(items);
  *n = k;
  return out;
}
