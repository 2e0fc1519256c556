/* In-place resize: the allocation decision (fits / Deferred / Infeasible), the
 * action plan (which containers change in place, which restart, in what order
 * with the pod cgroup), the allocated pod, and the checkpoint across a
 * restart. */
#include "rt_test_util.h"

#include <stdio.h>
#include <unistd.h>

#include "managers/status.h"
#include "reactor/xalloc.h"

/* A pod with containers c1 (resizePolicy NotRequired) and c2 (memory:
 * RestartContainer), each with cpu and memory requests and limits. */
static nl_pod_t *mkpod(const char *uid, const char *c1, const char *c2) {
  char *y = nl_xasprintf(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p-%s, namespace: ns, uid: %s}\n"
      "spec:\n  containers:\n"
      "  - {name: c1, image: busybox, resources: %s}\n"
      "  - {name: c2, image: busybox, resources: %s,\n"
      "     resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]}\n",
      uid, uid, c1, c2);
  nl_pod_t *p = pod_from_yaml(y);
  free(y);
  return p;
}

#define SMALL "{requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 200m, memory: 128Mi}}"
#define BIG "{requests: {cpu: 300m, memory: 64Mi}, limits: {cpu: 400m, memory: 128Mi}}"

static nl_admit_node_t node(int64_t cpu_milli, int64_t memory) {
  nl_admit_node_t n = {0};
  n.cpu_milli = cpu_milli;
  n.memory = memory;
  n.ephemeral_storage = -1;
  n.pods = 110;
  return n;
}

static void test_admit(void **state) {
  (void)state;
  nl_pod_t *alloc = mkpod("u", SMALL, SMALL), *want = mkpod("u", BIG, SMALL);
  nl_pod_t *other = mkpod("o", "{requests: {cpu: 1600m}, limits: {cpu: 1600m}}", SMALL);
  nl_admit_node_t n = node(2000, 4LL << 30);
  char *msg;
  /* alone: 400m of 2000m fits */
  nl_admit_pods_t none = {NULL, 0};
  assert_int_equal(nl_resize_admit(&n, want, alloc, &none, false, &msg), NL_RESIZE_FITS);
  assert_null(msg);
  /* beside a pod holding 1700m: 400m does not fit now */
  const nl_pod_t *o[] = {other};
  nl_admit_pods_t others = {o, 1};
  assert_int_equal(nl_resize_admit(&n, want, alloc, &others, false, &msg), NL_RESIZE_DEFERRED);
  assert_string_equal(msg, "Node didn't have enough resource: cpu, requested: 400, used: 1700, "
                           "capacity: 2000");
  free(msg);
  /* more than the node has: never */
  nl_admit_node_t small = node(300, 4LL << 30);
  assert_int_equal(nl_resize_admit(&small, want, alloc, &none, false, &msg), NL_RESIZE_INFEASIBLE);
  assert_string_equal(msg, "Node didn't have enough capacity: cpu, requested: 400, capacity: 300");
  free(msg);
  nl_admit_node_t tiny = node(300, 100 << 20);
  assert_int_equal(nl_resize_admit(&tiny, want, alloc, &none, false, &msg), NL_RESIZE_INFEASIBLE);
  assert_string_equal(msg, "Node didn't have enough capacity: cpu, requested: 400, capacity: 300; "
                           "memory, requested: 134217728, capacity: 104857600");
  free(msg);
  /* a static pod, a change of QoS class */
  assert_int_equal(nl_resize_admit(&n, want, alloc, &none, true, &msg), NL_RESIZE_INFEASIBLE);
  assert_string_equal(msg, "static pods cannot be resized");
  free(msg);
  nl_pod_t *guaranteed = mkpod("u", "{limits: {cpu: 200m, memory: 128Mi}}",
                               "{limits: {cpu: 200m, memory: 128Mi}}");
  assert_int_equal(nl_resize_admit(&n, guaranteed, alloc, &none, false, &msg), NL_RESIZE_INFEASIBLE);
  assert_non_null(strstr(msg, "Pod QOS Class may not change"));
  free(msg);
  nl_pod_free(guaranteed);
  nl_pod_free(other);
  nl_pod_free(want);
  nl_pod_free(alloc);
}

/* A state in a temporary root dir, on a loop the test runs to the end. */
typedef struct fixture {
  uv_loop_t loop;
  char dir[64];
  nl_resize_t rs;
} fixture_t;

static void fx_init(fixture_t *f) {
  uv_loop_init(&f->loop);
  snprintf(f->dir, sizeof f->dir, "/tmp/nl-resize-test.XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  assert_int_equal(nl_resize_init(&f->rs, &f->loop, f->dir, NULL), 0);
}

static void fx_stop(fixture_t *f) {
  nl_resize_stop(&f->rs, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
}

static void fx_done(fixture_t *f) {
  char *p = nl_xasprintf("%s/pod_resources_state", f->dir);
  unlink(p);
  free(p);
  rmdir(f->dir);
  assert_int_equal(uv_loop_close(&f->loop), 0);
}

static nl_rt_pod_status_t *running(const char *uid) {
  nl_rt_pod_status_t *s = nl_xcalloc(1, sizeof *s);
  s->uid = nl_xstrdup(uid);
  s->sandboxes = nl_xcalloc(1, sizeof *s->sandboxes);
  s->n_sandboxes = 1;
  s->sandboxes[0] = (nl_rt_sandbox_t){.id = nl_xstrdup("sb"), .ip = nl_xstrdup("10.88.0.2")};
  s->containers = nl_xcalloc(2, sizeof *s->containers);
  s->n_containers = 2;
  const char *names[] = {"c1", "c2"};
  for (int i = 0; i < 2; i++)
    s->containers[i] = (nl_rt_container_t){.id = nl_xasprintf("id-%s", names[i]),
                                           .name = nl_xstrdup(names[i]),
                                           .state = NL_RT_CONTAINER_RUNNING};
  return s;
}

static void actions(const nl_pod_t *pod, nl_rt_pod_status_t *s, const nl_resize_t *rs,
                    nl_pod_actions_t *a) {
  for (size_t i = 0; i < s->n_containers; i++)
    s->containers[i].hash = nl_container_hash(&pod->spec.containers[i]);
  nl_runtime_compute_actions(pod, s, NULL, NULL, a);
  nl_runtime_resize_actions(pod, s, rs, a);
}

static void test_plan(void **state) {
  (void)state;
  fixture_t f;
  fx_init(&f);
  nl_pod_t *old = mkpod("u", SMALL, SMALL);
  nl_resize_allocate(&f.rs, old);
  for (size_t i = 0; i < 2; i++) {
    nl_rsz_res_t r = nl_rsz_res_of(&old->spec.containers[i]);
    nl_resize_set_actuated(&f.rs, "u", old->spec.containers[i].name, &r);
  }
  nl_rt_pod_status_t *s = running("u");
  nl_pod_actions_t a;
  /* nothing changed: nothing to do */
  actions(old, s, &f.rs, &a);
  assert_false(a.resize);
  assert_int_equal(a.n_to_update + a.n_to_kill + a.n_to_start, 0);
  nl_pod_actions_free(&a);
  /* c1's cpu grows (NotRequired), c2's memory shrinks (RestartContainer) */
  nl_pod_t *now = mkpod("u", BIG, "{requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}");
  actions(now, s, &f.rs, &a);
  assert_true(a.resize);
  assert_int_equal(a.n_to_update, 1); /* c1 in place */
  assert_string_equal(a.to_update[0].id, "id-c1");
  assert_int_equal(a.to_update[0].cpu_dir, 1);
  assert_int_equal(a.to_update[0].mem_dir, 0);
  assert_int_equal(a.to_update[0].want.cpu_lim, 400);
  assert_int_equal(a.to_update[0].cur.cpu_lim, 200);
  assert_int_equal(a.n_to_kill, 1); /* c2 restarts, once */
  assert_string_equal(a.to_kill[0].name, "c2");
  assert_string_equal(a.to_kill[0].message, "Container c2 resize requires restart");
  assert_int_equal(a.n_to_start, 1);
  assert_int_equal(a.to_start[0], 1);
  assert_false(a.kill_pod);
  /* the pod cgroup: memory shrinks after the containers, cpu grows before them */
  nl_cgroup_res_t cur = {.cpu_shares = 204, .cpu_quota = 40000, .cpu_period = 100000, .memory = 256 << 20};
  nl_cgroup_res_t want = {.cpu_shares = 409, .cpu_quota = 60000, .cpu_period = 100000, .memory = 192 << 20};
  size_t n;
  nl_resize_step_t *st = nl_runtime_resize_steps(&a, &cur, &want, &n);
  assert_int_equal(n, 4);
  assert_true(st[0].pod); /* memory: nothing in place to do; the pod shrinks */
  assert_int_equal(st[0].res.memory, 192 << 20);
  assert_true(st[1].pod); /* cpu: the quota, then the shares grow first */
  assert_int_equal(st[1].res.cpu_quota, 60000);
  assert_true(st[2].pod);
  assert_int_equal(st[2].res.cpu_shares, 409);
  assert_false(st[3].pod); /* then c1's cpu */
  assert_false(st[3].memory);
  assert_int_equal(st[3].update, 0);
  free(st);
  /* shrinking cpu: the containers first, then the shares, then the quota */
  nl_resize_step_t *st2 = nl_runtime_resize_steps(&a, &want, &cur, &n);
  assert_int_equal(n, 4);
  assert_true(st2[0].pod); /* memory grows before */
  assert_int_equal(st2[0].res.memory, 256 << 20);
  assert_false(st2[1].pod);
  assert_true(st2[2].pod);
  assert_int_equal(st2[2].res.cpu_shares, 204);
  assert_true(st2[3].pod);
  assert_int_equal(st2[3].res.cpu_quota, 40000);
  free(st2);
  nl_pod_actions_free(&a);
  /* without a pod cgroup: the containers alone */
  nl_pod_t *both = mkpod("u", BIG, "{requests: {cpu: 50m, memory: 64Mi}, limits: {cpu: 100m, memory: 128Mi}}");
  actions(both, s, &f.rs, &a);
  assert_int_equal(a.n_to_update, 2); /* c2's cpu changes in place: only memory restarts it */
  assert_int_equal(a.n_to_kill, 0);
  st = nl_runtime_resize_steps(&a, NULL, NULL, &n);
  assert_int_equal(n, 2);
  assert_int_equal(st[0].update, 1); /* c2 shrinks before c1 grows */
  assert_int_equal(st[1].update, 0);
  free(st);
  nl_pod_actions_free(&a);
  /* a container not running is sized when it starts; a pod being killed is not resized */
  s->containers[0].state = NL_RT_CONTAINER_EXITED;
  s->containers[1].state = NL_RT_CONTAINER_EXITED;
  actions(both, s, &f.rs, &a);
  assert_int_equal(a.n_to_update, 0);
  assert_false(a.resize);
  nl_pod_actions_free(&a);
  nl_pod_free(both);
  nl_pod_free(now);
  nl_pod_free(old);
  nl_rt_pod_status_free(s);
  fx_stop(&f);
  fx_done(&f);
}

static void test_allocated_pod_and_checkpoint(void **state) {
  (void)state;
  fixture_t f;
  fx_init(&f);
  nl_pod_t *old = mkpod("u", SMALL, SMALL), *now = mkpod("u", BIG, SMALL);
  nl_resize_allocate(&f.rs, old);
  assert_true(nl_resize_known(&f.rs, "u"));
  assert_null(nl_resize_allocated_pod(&f.rs, old)); /* as allocated already */
  nl_pod_t *a = nl_resize_allocated_pod(&f.rs, now);
  assert_non_null(a); /* the spec's resize is not allocated yet: the old amounts */
  nl_rsz_res_t r = nl_rsz_res_of(&a->spec.containers[0]);
  assert_int_equal(r.cpu_req, 100);
  assert_int_equal(r.cpu_lim, 200);
  assert_int_equal(r.mem_lim, 128 << 20);
  char q[NL_QUANTITY_STRLEN];
  assert_string_equal(nl_quantity_format(nl_resource_list_get(&a->spec.containers[0].resources.limits, "cpu"), q), "200m");
  nl_pod_free(a);
  nl_resize_allocate(&f.rs, now);
  assert_null(nl_resize_allocated_pod(&f.rs, now));
  nl_rsz_res_t act = {.cpu_req = 100, .cpu_lim = 200, .mem_req = 64 << 20, .mem_lim = 128 << 20, .set = 15};
  nl_resize_set_actuated(&f.rs, "u", "c1", &act);
  nl_resize_set_pending(&f.rs, "u", "Deferred", "no room", 2, 1);
  fx_stop(&f);
  /* a restart: the allocation and the actuated amounts come back */
  assert_int_equal(nl_resize_init(&f.rs, &f.loop, f.dir, NULL), 0);
  assert_true(nl_resize_allocated(&f.rs, "u", "c1", &r));
  assert_int_equal(r.cpu_req, 300);
  assert_int_equal(r.cpu_lim, 400);
  assert_true(nl_resize_actuated(&f.rs, "u", "c1", &r));
  assert_int_equal(r.cpu_lim, 200);
  assert_false(nl_resize_actuated(&f.rs, "u", "c2", &r));
  assert_null(nl_resize_pending(&f.rs, "u")); /* conditions are not kept */
  nl_resize_forget(&f.rs, "u");
  assert_false(nl_resize_known(&f.rs, "u"));
  fx_stop(&f);
  nl_pod_free(now);
  nl_pod_free(old);
  fx_done(&f);
}

/* A pod with a sidecar s1 (a liveness probe), an init container i1 and a
 * regular container c1 (SMALL); s1's resources are S1, i1's I1. */
static nl_pod_t *mkinit(const char *s1, const char *i1) {
  char *y = nl_xasprintf(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
      "spec:\n  initContainers:\n"
      "  - {name: s1, image: busybox, restartPolicy: Always, resources: %s,\n"
      "     livenessProbe: {exec: {command: [\"true\"]}}}\n"
      "  - {name: i1, image: busybox, resources: %s}\n"
      "  containers:\n"
      "  - {name: c1, image: busybox, resources: " SMALL "}\n", s1, i1);
  nl_pod_t *p = pod_from_yaml(y);
  free(y);
  return p;
}

static nl_rt_pod_status_t *with(const nl_pod_t *pod, const char *const *names,
                                const nl_rt_container_state_t *states, size_t n) {
  nl_rt_pod_status_t *s = running("u");
  for (size_t i = 0; i < s->n_containers; i++) {
    free(s->containers[i].id);
    free(s->containers[i].name);
  }
  s->containers = nl_xrealloc(s->containers, n * sizeof *s->containers);
  s->n_containers = n;
  for (size_t i = 0; i < n; i++) {
    const nl_container_t *c = nl_rsz_find(pod, names[i]);
    s->containers[i] = (nl_rt_container_t){.id = nl_xasprintf("id-%s", names[i]),
                                           .name = nl_xstrdup(names[i]),
                                           .state = states[i],
                                           .hash = nl_container_hash(c)};
  }
  return s;
}

static nl_probe_result_t live(void *ctx, const char *id, nl_probe_kind_t k) {
  (void)id;
  return k == NL_PROBE_LIVENESS ? *(nl_probe_result_t *)ctx : NL_PROBE_RESULT_NONE;
}

/* InPlacePodVerticalScalingInitContainers: an init container is allocated as
 * the others are; while it runs (the pod initializing) it is resized in place;
 * once it has completed, only its allocation changes. A sidecar is resized
 * once its liveness probe has a result that is not a failure (upstream). */
static void test_init_containers(void **state) {
  (void)state;
  fixture_t f;
  fx_init(&f);
  nl_pod_t *old = mkinit(SMALL, SMALL), *now = mkinit(SMALL, BIG);
  nl_resize_allocate(&f.rs, old);
  nl_rsz_res_t r;
  assert_true(nl_resize_allocated(&f.rs, "u", "i1", &r));
  assert_int_equal(r.cpu_lim, 200);
  nl_pod_t *ap = nl_resize_allocated_pod(&f.rs, now); /* not allocated yet: the old amounts */
  assert_non_null(ap);
  assert_int_equal(nl_rsz_res_of(&ap->spec.init_containers[1]).cpu_lim, 200);
  nl_pod_free(ap);
  nl_resize_allocate(&f.rs, now);
  assert_true(nl_resize_allocated(&f.rs, "u", "i1", &r));
  assert_int_equal(r.cpu_lim, 400);
  const char *names[] = {"s1", "i1", "c1"};
  for (size_t i = 0; i < 3; i++) {
    nl_rsz_res_t o = nl_rsz_res_of(i < 2 ? &old->spec.init_containers[i] : &old->spec.containers[0]);
    nl_resize_set_actuated(&f.rs, "u", names[i], &o);
  }
  /* i1 runs, c1 is not there yet: i1 is updated in place, nothing restarts */
  nl_rt_container_state_t st1[] = {NL_RT_CONTAINER_RUNNING, NL_RT_CONTAINER_RUNNING};
  nl_rt_pod_status_t *s = with(now, names, st1, 2);
  nl_pod_actions_t a;
  nl_probe_result_t ok = NL_PROBE_RESULT_SUCCESS;
  nl_runtime_compute_actions(now, s, live, &ok, &a);
  nl_runtime_resize_actions(now, s, &f.rs, &a);
  assert_false(a.initialized);
  assert_true(a.resize);
  assert_int_equal(a.n_to_update, 1);
  assert_string_equal(a.to_update[0].id, "id-i1");
  assert_int_equal(a.to_update[0].cpu_dir, 1);
  assert_int_equal(a.to_update[0].want.cpu_lim, 400);
  assert_int_equal(a.n_to_kill + a.n_to_start + a.n_init_to_start, 0);
  nl_pod_actions_free(&a);
  /* the sidecar's resize waits for its liveness probe's first result */
  nl_pod_t *side = mkinit(BIG, BIG);
  nl_probe_result_t none = NL_PROBE_RESULT_NONE;
  nl_runtime_compute_actions(side, s, live, &none, &a);
  nl_runtime_resize_actions(side, s, &f.rs, &a);
  assert_int_equal(a.n_to_update, 1); /* i1 alone */
  assert_string_equal(a.to_update[0].id, "id-i1");
  nl_pod_actions_free(&a);
  nl_runtime_compute_actions(side, s, live, &ok, &a);
  nl_runtime_resize_actions(side, s, &f.rs, &a);
  assert_int_equal(a.n_to_update, 2); /* both */
  nl_pod_actions_free(&a);
  nl_pod_free(side);
  nl_rt_pod_status_free(s);
  /* i1 has completed and c1 runs: nothing to actuate for i1 */
  nl_rt_container_state_t st2[] = {NL_RT_CONTAINER_RUNNING, NL_RT_CONTAINER_EXITED,
                                   NL_RT_CONTAINER_RUNNING};
  s = with(now, names, st2, 3);
  nl_runtime_compute_actions(now, s, live, &ok, &a);
  nl_runtime_resize_actions(now, s, &f.rs, &a);
  assert_true(a.initialized);
  assert_false(a.resize);
  assert_int_equal(a.n_to_update + a.n_to_kill + a.n_to_start + a.n_init_to_start, 0);
  nl_pod_actions_free(&a);
  nl_rt_pod_status_free(s);
  /* across a restart the init container's allocation comes back */
  fx_stop(&f);
  assert_int_equal(nl_resize_init(&f.rs, &f.loop, f.dir, NULL), 0);
  assert_true(nl_resize_allocated(&f.rs, "u", "i1", &r));
  assert_int_equal(r.cpu_lim, 400);
  fx_stop(&f);
  nl_pod_free(now);
  nl_pod_free(old);
  fx_done(&f);
}

/* A pod with pod-level resources POD and containers c1 (cpu limit 100m of its
 * own) and c2 (no limits: the pod's bound it), both NotRequired. */
static nl_pod_t *mkplr(const char *pod_res) {
  char *y = nl_xasprintf(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
      "spec:\n  resources: %s\n  containers:\n"
      "  - {name: c1, image: busybox, resources: {limits: {cpu: 100m}}}\n"
      "  - {name: c2, image: busybox}\n", pod_res);
  nl_pod_t *p = pod_from_yaml(y);
  free(y);
  return p;
}

/* InPlacePodLevelResourcesVerticalScaling: spec.resources is allocated, kept
 * across a restart and substituted in the allocated pod; its change resizes
 * the pod cgroup and the containers that run with the pod-level limits, and
 * admission and the QoS check read the pod-level amounts. */
static void test_pod_level(void **state) {
  (void)state;
  fixture_t f;
  fx_init(&f);
  nl_pod_t *old = mkplr("{requests: {cpu: 200m, memory: 64Mi}, limits: {cpu: 400m, memory: 128Mi}}");
  nl_pod_t *now = mkplr("{requests: {cpu: 300m, memory: 64Mi}, limits: {cpu: 600m, memory: 256Mi}}");
  nl_resize_allocate(&f.rs, old);
  nl_rsz_res_t r;
  assert_true(nl_resize_pod_allocated(&f.rs, "u", &r));
  assert_int_equal(r.cpu_lim, 400);
  /* what runs: c2 with the pod's limits, c1 with its own cpu limit */
  nl_rsz_res_t pl = nl_rsz_reqs_res(old->spec.resources);
  nl_resize_set_pod_actuated(&f.rs, "u", &pl);
  for (size_t i = 0; i < 2; i++) {
    nl_rsz_res_t e = nl_rsz_effective(nl_rsz_res_of(&old->spec.containers[i]), &pl);
    nl_resize_set_actuated(&f.rs, "u", old->spec.containers[i].name, &e);
  }
  assert_true(nl_resize_actuated(&f.rs, "u", "c2", &r));
  assert_int_equal(r.cpu_lim, 400);
  assert_int_equal(r.mem_lim, 128 << 20);
  assert_true(nl_resize_actuated(&f.rs, "u", "c1", &r));
  assert_int_equal(r.cpu_lim, 100);
  /* not allocated yet: the allocated pod has the old pod-level amounts */
  nl_pod_t *a = nl_resize_allocated_pod(&f.rs, now);
  assert_non_null(a);
  assert_int_equal(nl_pod_limit(a, "memory", NULL), 128 << 20);
  assert_int_equal(nl_pod_request(a, "cpu"), 200);
  /* the decision reads the pod-level requests: 300m does not fit beside 1800m */
  nl_admit_node_t n = node(2000, 4LL << 30);
  nl_pod_t *other = mkpod("o", "{requests: {cpu: 1800m}}", "{}");
  const nl_pod_t *others[] = {other};
  nl_admit_pods_t op = {others, 1};
  char *msg = NULL;
  assert_int_equal(nl_resize_admit(&n, now, a, &op, false, &msg), NL_RESIZE_DEFERRED);
  free(msg);
  op.n = 0;
  assert_int_equal(nl_resize_admit(&n, now, a, &op, false, &msg), NL_RESIZE_FITS);
  nl_pod_free(other);
  nl_pod_free(a);
  nl_resize_allocate(&f.rs, now);
  assert_null(nl_resize_allocated_pod(&f.rs, now));
  /* the plan: c2 (no limits of its own) follows the pod's; c1 keeps its cpu
   * limit and follows the pod's memory */
  nl_rt_pod_status_t *s = running("u");
  nl_pod_actions_t act;
  actions(now, s, &f.rs, &act);
  assert_true(act.resize);
  assert_true(act.resize_pod_level);
  assert_int_equal(act.n_to_update, 2);
  assert_string_equal(act.to_update[0].id, "id-c1");
  assert_int_equal(act.to_update[0].want.cpu_lim, 100);
  assert_int_equal(act.to_update[0].want.mem_lim, 256 << 20);
  assert_int_equal(act.to_update[0].cpu_dir, 0);
  assert_int_equal(act.to_update[0].mem_dir, 1);
  assert_string_equal(act.to_update[1].id, "id-c2");
  assert_int_equal(act.to_update[1].want.cpu_lim, 600);
  assert_int_equal(act.to_update[1].want.mem_lim, 256 << 20);
  assert_int_equal(act.to_update[1].cpu_dir, 1);
  assert_int_equal(act.to_update[1].mem_dir, 1);
  /* the pod cgroup grows first, for memory and for cpu */
  nl_cgroup_res_t cur = nl_cgroups_pod_res(old, true, 0), want = nl_cgroups_pod_res(now, true, 0);
  assert_int_equal(want.memory, 256 << 20);
  assert_int_equal(want.cpu_quota, 60000);
  assert_int_equal(want.cpu_shares, 307);
  size_t ns;
  nl_resize_step_t *st = nl_runtime_resize_steps(&act, &cur, &want, &ns);
  assert_int_equal(ns, 6);
  assert_true(st[0].pod);
  assert_int_equal(st[0].res.memory, 256 << 20);
  assert_false(st[1].pod); /* c1's and c2's memory */
  assert_true(st[1].memory);
  assert_false(st[2].pod);
  assert_true(st[3].pod);
  assert_int_equal(st[3].res.cpu_quota, 60000);
  assert_true(st[4].pod);
  assert_int_equal(st[4].res.cpu_shares, 307);
  assert_false(st[5].pod); /* c2's cpu */
  assert_false(st[5].memory);
  assert_int_equal(st[5].update, 1);
  free(st);
  nl_pod_actions_free(&act);
  /* only the pod-level requests change: the pod cgroup alone */
  nl_pod_t *req = mkplr("{requests: {cpu: 500m, memory: 64Mi}, limits: {cpu: 600m, memory: 256Mi}}");
  nl_resize_allocate(&f.rs, req);
  pl = nl_rsz_reqs_res(now->spec.resources);
  nl_resize_set_pod_actuated(&f.rs, "u", &pl);
  for (size_t i = 0; i < 2; i++) {
    nl_rsz_res_t e = nl_rsz_effective(nl_rsz_res_of(&now->spec.containers[i]), &pl);
    nl_resize_set_actuated(&f.rs, "u", now->spec.containers[i].name, &e);
  }
  actions(req, s, &f.rs, &act);
  assert_true(act.resize_pod_level);
  assert_int_equal(act.n_to_update, 0);
  nl_pod_actions_free(&act);
  fx_stop(&f);
  /* the pod-level allocation and actuated record survive a restart */
  assert_int_equal(nl_resize_init(&f.rs, &f.loop, f.dir, NULL), 0);
  assert_true(nl_resize_pod_allocated(&f.rs, "u", &r));
  assert_int_equal(r.cpu_req, 500);
  assert_true(nl_resize_pod_actuated(&f.rs, "u", &r));
  assert_int_equal(r.cpu_req, 300);
  assert_true(nl_resize_allocated(&f.rs, "u", "c1", &r));
  assert_int_equal(r.cpu_lim, 100);
  fx_stop(&f);
  nl_rt_pod_status_free(s);
  nl_pod_free(req);
  nl_pod_free(now);
  nl_pod_free(old);
  fx_done(&f);
}

static void test_conditions(void **state) {
  (void)state;
  fixture_t f;
  fx_init(&f);
  assert_true(nl_resize_set_pending(&f.rs, "u", "Deferred", "m1", 2, 5));
  assert_false(nl_resize_set_pending(&f.rs, "u", "Deferred", "m2", 2, 9)); /* same reason */
  assert_string_equal(nl_resize_pending(&f.rs, "u")->message, "m2");
  assert_int_equal(nl_resize_pending(&f.rs, "u")->since_ns, 5);
  assert_true(nl_resize_set_pending(&f.rs, "u", "Infeasible", "m3", 2, 9));
  assert_true(nl_resize_set_pending(&f.rs, "v", "Deferred", "m", 3, 7));
  size_t n;
  const char **l = nl_resize_pending_list(&f.rs, &n);
  assert_int_equal(n, 2);
  assert_string_equal(l[0], "u"); /* the oldest first */
  free(l);
  assert_true(nl_resize_clear_pending(&f.rs, "u"));
  assert_false(nl_resize_clear_pending(&f.rs, "u"));
  /* in progress: an error stays until cleared, the generation is kept */
  assert_true(nl_resize_set_in_progress(&f.rs, "u", "", NULL, 4, 10));
  assert_null(nl_resize_in_progress(&f.rs, "u")->message);
  assert_true(nl_resize_set_in_progress(&f.rs, "u", "Error", "boom", 5, 11));
  assert_int_equal(nl_resize_in_progress(&f.rs, "u")->generation, 4);
  assert_false(nl_resize_set_in_progress(&f.rs, "u", "", NULL, 6, 12));
  assert_string_equal(nl_resize_in_progress(&f.rs, "u")->reason, "Error");
  assert_string_equal(nl_resize_in_progress(&f.rs, "u")->message, "boom");
  assert_true(nl_resize_clear_in_progress(&f.rs, "u"));
  fx_stop(&f);
  fx_done(&f);
}

/* A resize changes no container's hash (no restart); a container labelled
 * before (the hash with its resources) still matches; resizePolicy is checked. */
static void test_model(void **state) {
  (void)state;
  nl_pod_t *a = mkpod("u", SMALL, SMALL), *b = mkpod("u", BIG, SMALL);
  assert_int_equal(nl_container_hash(&a->spec.containers[0]), nl_container_hash(&b->spec.containers[0]));
  assert_int_not_equal(nl_container_hash_legacy(&a->spec.containers[0]),
                       nl_container_hash_legacy(&b->spec.containers[0]));
  assert_int_equal(a->spec.containers[1].n_resize_policy, 1);
  assert_string_equal(a->spec.containers[1].resize_policy[0].restart_policy, "RestartContainer");
  nl_rt_pod_status_t *s = running("u");
  s->containers[0].hash = nl_container_hash_legacy(&a->spec.containers[0]);
  s->containers[1].hash = nl_container_hash(&a->spec.containers[1]);
  nl_pod_actions_t act;
  nl_runtime_compute_actions(a, s, NULL, NULL, &act);
  assert_int_equal(act.n_to_kill, 0);
  nl_pod_actions_free(&act);
  nl_rt_pod_status_free(s);
  /* a copy keeps the policy (nl_pod_dup goes through JSON) */
  nl_pod_t *d = nl_pod_dup(a);
  assert_int_equal(d->spec.containers[1].n_resize_policy, 1);
  nl_pod_free(d);
  const char *bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n"
                    "spec:\n  containers:\n  - {name: c, image: busybox,\n"
                    "     resizePolicy: [{resourceName: gpu, restartPolicy: Sometimes}]}\n";
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_decode(bad, strlen(bad), "t.yaml", &p, &err), 0);
  nl_pod_set_defaults(p);
  assert_int_equal(nl_pod_validate(p, "t.yaml", &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "spec.containers[0].resizePolicy[0].resourceName: must be one of cpu, memory, got gpu"));
  nl_err_free(&err);
  nl_pod_free(p);
  nl_pod_free(b);
  nl_pod_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_admit),
      cmocka_unit_test(test_plan),
      cmocka_unit_test(test_init_containers),
      cmocka_unit_test(test_allocated_pod_and_checkpoint),
      cmocka_unit_test(test_conditions),
      cmocka_unit_test(test_pod_level),
      cmocka_unit_test(test_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
