/* The eviction manager (managers/eviction.c, eviction_helpers.c): threshold
 * parsing with upstream's errors, ranking in upstream's order, and the
 * machine on a loop with a fake clock and fake figures: hard and soft
 * thresholds, the pressure transition period, minimum reclaim, node-level
 * reclaim before evicting, admission under pressure, and local storage
 * limits (emptyDir sizeLimit, the pod's and a container's ephemeral-storage). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <cmocka.h>

#include "managers/eviction.h"
#include "managers/metrics.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

#define S 1000000000LL
#define MI (1024LL * 1024)

/* ---- parsing ---- */

static nl_ev_config_map_t kv(const char *const *keys, const char *const *values, size_t n) {
  return (nl_ev_config_map_t){keys, values, n};
}
static const nl_ev_config_map_t none = {NULL, NULL, 0};

/* Returns the count of thresholds, or -1 with the error's message in msg. */
static bool enforce_pods; /* enforceNodeAllocatable has "pods" */

static int parse(nl_ev_config_map_t hard, nl_ev_config_map_t soft, nl_ev_config_map_t grace,
                 nl_ev_config_map_t reclaim, nl_ev_threshold_t **t, char *msg) {
  size_t n;
  nl_err_t *err = NULL;
  *msg = 0;
  if (nl_ev_parse_thresholds(hard, soft, grace, reclaim, enforce_pods, t, &n, &err) < 0) {
    snprintf(msg, 256, "%s", nl_err_msg(err));
    nl_err_free(&err);
    assert_null(*t);
    return -1;
  }
  return (int)n;
}

static void test_parse_quantities_and_percentages(void **state) {
  (void)state;
  const char *hk[] = {"memory.available", "nodefs.available", "imagefs.available", "nodefs.inodesFree"};
  const char *hv[] = {"100Mi", "10%", "0%", "100%"};
  const char *sk[] = {"memory.available"}, *sv[] = {"300Mi"};
  const char *gk[] = {"memory.available"}, *gv[] = {"1m30s"};
  const char *rk[] = {"nodefs.available", "memory.available"}, *rv[] = {"5%", "50Mi"};
  nl_ev_threshold_t *t;
  char msg[256];
  /* 0% and 100% are ignored, as upstream */
  assert_int_equal(parse(kv(hk, hv, 4), kv(sk, sv, 1), kv(gk, gv, 1), kv(rk, rv, 2), &t, msg), 3);
  assert_int_equal(t[0].signal, NL_EV_MEMORY);
  assert_true(t[0].hard);
  assert_int_equal(nl_ev_quantity(&t[0].value, 8000 * MI), 100 * MI);
  assert_int_equal(nl_ev_quantity(&t[0].min_reclaim, 8000 * MI), 50 * MI);
  assert_int_equal(t[1].signal, NL_EV_NODEFS);
  assert_int_equal(nl_ev_quantity(&t[1].value, 1000000), 100000);
  assert_int_equal(nl_ev_quantity(&t[1].min_reclaim, 1000000), 50000);
  assert_int_equal(t[2].signal, NL_EV_MEMORY);
  assert_false(t[2].hard);
  assert_int_equal(t[2].grace_ns, 90 * S);
  assert_int_equal(nl_ev_quantity(&t[2].value, 0), 300 * MI);
  free(t);
}

static void test_parse_errors(void **state) {
  (void)state;
  static const struct {
    const char *hk, *hv, *sk, *sv, *gk, *gv, *rk, *rv, *want;
  } cases[] = {
      {"memory.bogus", "1Gi", NULL, NULL, NULL, NULL, NULL, NULL, "unsupported eviction signal memory.bogus"},
      {"nodefs.available", "120%", NULL, NULL, NULL, NULL, NULL, NULL,
       "eviction percentage threshold nodefs.available must be <= 100%: 120%"},
      {"nodefs.available", "-5%", NULL, NULL, NULL, NULL, NULL, NULL,
       "eviction percentage threshold nodefs.available must be >= 0%: -5%"},
      {"memory.available", "-1Mi", NULL, NULL, NULL, NULL, NULL, NULL,
       "eviction threshold memory.available must be positive: -1Mi"},
      {"memory.available", "0", NULL, NULL, NULL, NULL, NULL, NULL,
       "eviction threshold memory.available must be positive: 0"},
      {NULL, NULL, "imagefs.available", "5%", NULL, NULL, NULL, NULL,
       "grace period must be specified for the soft eviction threshold imagefs.available"},
      {NULL, NULL, "memory.available", "1Gi", "memory.available", "-1s", NULL, NULL,
       "invalid eviction grace period specified: -1s, must be a positive value"},
      {NULL, NULL, NULL, NULL, "pid.bogus", "1m", NULL, NULL, "unsupported eviction signal pid.bogus"},
      {"memory.available", "1Gi", NULL, NULL, NULL, NULL, "memory.available", "-1Mi",
       "negative eviction minimum reclaim specified for memory.available"},
      {"memory.available", "1Gi", NULL, NULL, NULL, NULL, "nodefs.available", "0%",
       "eviction percentage minimum reclaim nodefs.available must be positive: 0%"},
      {"memory.available", "lots", NULL, NULL, NULL, NULL, NULL, NULL, "memory.available"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    nl_ev_threshold_t *t;
    char msg[256];
    int r = parse(kv(&cases[i].hk, &cases[i].hv, cases[i].hk != NULL),
                  kv(&cases[i].sk, &cases[i].sv, cases[i].sk != NULL),
                  kv(&cases[i].gk, &cases[i].gv, cases[i].gk != NULL),
                  kv(&cases[i].rk, &cases[i].rv, cases[i].rk != NULL), &t, msg);
    if (r != -1 || !strstr(msg, cases[i].want)) fail_msg("case %zu: got %d \"%s\", want \"%s\"", i, r, msg, cases[i].want);
  }
}

/* ---- pods ---- */

/* An API pod (not critical) named name with the given spec lines. */
static nl_pod_t *pod_of(const char *name, const char *uid, const char *spec) {
  char y[4096];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: default, uid: %s,"
           " annotations: {kubernetes.io/config.source: api}}\nspec:\n%s",
           name, uid, spec);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(y, strlen(y), "test.yaml", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_pod_set_defaults(pod);
  return pod;
}

#define BESTEFFORT "  containers: [{name: c, image: i}]\n"
#define BURSTABLE(mem) "  containers: [{name: c, image: i, resources: {requests: {memory: " mem "}}}]\n"
#define PRIORITY(p) "  priority: " #p "\n"

static nl_ev_pod_stats_t pod_stats(const char *uid, int64_t memory, int64_t procs) {
  nl_ev_pod_stats_t s = {.uid = nl_xstrdup(uid), .memory = memory, .procs = procs};
  s.containers = nl_xcalloc(1, sizeof *s.containers);
  s.containers[0] = (nl_ev_container_stats_t){nl_xstrdup("c"), memory, 0, 0};
  s.n_containers = 1;
  return s;
}

static void free_stats(nl_ev_pod_stats_t *s, size_t n) {
  nl_ev_stats_t all = {.pods = s, .n_pods = n};
  nl_ev_stats_free(&all);
}

/* upstream rankMemoryPressure: pods without stats, then usage over requests,
 * then lower priority, then the larger usage above requests. */
static void test_rank_memory(void **state) {
  (void)state;
  nl_pod_t *p[] = {
      pod_of("under", "u1", BURSTABLE("200Mi")),             /* 150Mi of 200Mi */
      pod_of("over-high", "u2", BESTEFFORT PRIORITY(1000)), /* 500Mi over 0 */
      pod_of("over-small", "u3", BESTEFFORT),               /* 100Mi over 0 */
      pod_of("over-big", "u4", BURSTABLE("100Mi")),           /* 400Mi: 300Mi over */
      pod_of("nostats", "u5", BURSTABLE("1Gi")),
  };
  nl_ev_pod_stats_t *st = nl_xcalloc(4, sizeof *st);
  st[0] = pod_stats("u1", 150 * MI, 1);
  st[1] = pod_stats("u2", 500 * MI, 1);
  st[2] = pod_stats("u3", 100 * MI, 1);
  st[3] = pod_stats("u4", 400 * MI, 1);
  nl_ev_candidate_t c[5] = {{p[0], &st[0]}, {p[1], &st[1]}, {p[2], &st[2]}, {p[3], &st[3]}, {p[4], NULL}};
  nl_ev_rank(NL_EV_MEMORY, false, c, 5);
  const char *want[] = {"nostats", "over-big", "over-small", "over-high", "under"};
  for (int i = 0; i < 5; i++) assert_string_equal(c[i].pod->metadata.name, want[i]);
  free_stats(st, 4);
  for (int i = 0; i < 5; i++) nl_pod_free(p[i]);
}

/* upstream rankPIDPressure: lower priority first, then more processes. */
static void test_rank_pids(void **state) {
  (void)state;
  nl_pod_t *p[] = {
      pod_of("few", "u1", BESTEFFORT),
      pod_of("many-high", "u2", BESTEFFORT PRIORITY(10)),
      pod_of("many", "u3", BESTEFFORT),
  };
  nl_ev_pod_stats_t *st = nl_xcalloc(3, sizeof *st);
  st[0] = pod_stats("u1", 0, 3);
  st[1] = pod_stats("u2", 0, 900);
  st[2] = pod_stats("u3", 0, 800);
  nl_ev_candidate_t c[3] = {{p[0], &st[0]}, {p[1], &st[1]}, {p[2], &st[2]}};
  nl_ev_rank(NL_EV_PID, false, c, 3);
  const char *want[] = {"many", "few", "many-high"};
  for (int i = 0; i < 3; i++) assert_string_equal(c[i].pod->metadata.name, want[i]);
  free_stats(st, 3);
  for (int i = 0; i < 3; i++) nl_pod_free(p[i]);
}

/* upstream rankDiskPressureFunc: on one filesystem nodefs counts volumes, logs
 * and writable layers; with a dedicated image filesystem only volumes and logs. */
static void test_rank_disk(void **state) {
  (void)state;
  nl_pod_t *p[] = {pod_of("layer", "u1", BESTEFFORT), pod_of("volume", "u2", BESTEFFORT)};
  nl_ev_pod_stats_t *st = nl_xcalloc(2, sizeof *st);
  st[0] = pod_stats("u1", 0, 1);
  st[0].containers[0].rootfs = 900 * MI;
  st[1] = pod_stats("u2", 0, 1);
  st[1].volumes = 300 * MI;
  st[1].containers[0].logs = 10 * MI;
  assert_int_equal(nl_ev_pod_usage(NL_EV_NODEFS, false, &st[0]), 900 * MI);
  assert_int_equal(nl_ev_pod_usage(NL_EV_NODEFS, true, &st[0]), 0);
  assert_int_equal(nl_ev_pod_usage(NL_EV_IMAGEFS, true, &st[0]), 900 * MI);
  assert_int_equal(nl_ev_pod_usage(NL_EV_NODEFS, true, &st[1]), 310 * MI);
  nl_ev_candidate_t c[2] = {{p[1], &st[1]}, {p[0], &st[0]}};
  nl_ev_rank(NL_EV_NODEFS, false, c, 2);
  assert_string_equal(c[0].pod->metadata.name, "layer");
  nl_ev_rank(NL_EV_NODEFS, true, c, 2);
  assert_string_equal(c[0].pod->metadata.name, "volume");
  free_stats(st, 2);
  for (int i = 0; i < 2; i++) nl_pod_free(p[i]);
}

/* ---- the manager, on a loop, with a fake clock and fake figures ---- */

typedef struct fixture {
  uv_loop_t loop;
  uv_timer_t defer; /* completes collect and reclaim on a later loop turn */
  nl_eviction_t m;
  int64_t now;
  /* what collect reports */
  int64_t mem_available, mem_capacity, disk_available, disk_capacity;
  int64_t alloc_available, alloc_capacity; /* the pods cgroup's; capacity 0: not observed */
  int64_t disk_after_reclaim; /* what reclaim leaves; <0: unchanged */
  nl_pod_t *pods[3];
  size_t n_pods;
  int64_t rootfs[3], vol_used[3]; /* each pod's container "c" and its volume "data" */
  /* in flight */
  nl_ev_stats_t *out;
  nl_eviction_done_fn done;
  void *done_ctx;
  /* what happened */
  int collects, collects_with_pods;
  int reclaims, reclaim_images;
  int evictions;
  char evicted[64];
  int64_t evicted_grace;
  char message[512];
  char annotations[256]; /* "k=v;" each */
  bool condition;        /* DisruptionTarget asked for */
  bool stopped;
  nl_kmetrics_t metrics;
} fixture_t;

static int64_t fake_now(void *ctx) { return ((fixture_t *)ctx)->now; }

static void on_defer(uv_timer_t *t) {
  fixture_t *f = container_of(t, fixture_t, defer);
  nl_eviction_done_fn done = f->done;
  f->done = NULL;
  done(f->done_ctx);
  uv_stop(&f->loop); /* round_at looks again before the loop waits */
}

/* As agent/kubelet_evict.c's: the pods' figures when asked for, or when a pod
 * has a local storage limit. */
static void fake_collect(void *ctx, bool pods, nl_ev_stats_t *out, nl_eviction_done_fn done,
                         void *done_ctx) {
  fixture_t *f = ctx;
  memset(out, 0, sizeof *out);
  out->obs[NL_EV_MEMORY] = (nl_ev_observation_t){true, f->mem_available, f->mem_capacity};
  if (f->alloc_capacity)
    out->obs[NL_EV_ALLOC_MEMORY] = (nl_ev_observation_t){true, f->alloc_available, f->alloc_capacity};
  out->obs[NL_EV_NODEFS] = (nl_ev_observation_t){true, f->disk_available, f->disk_capacity};
  out->obs[NL_EV_IMAGEFS] = out->obs[NL_EV_NODEFS];
  out->memory_inactive_file = 50 * MI;
  for (size_t i = 0; i < f->n_pods; i++) pods = pods || nl_ev_local_storage_limited(f->pods[i]);
  f->collects++;
  f->collects_with_pods += pods;
  out->pods = nl_xcalloc(f->n_pods + 1, sizeof *out->pods);
  for (size_t i = 0; pods && i < f->n_pods; i++) {
    nl_ev_pod_stats_t *p = &out->pods[out->n_pods++];
    *p = pod_stats(f->pods[i]->metadata.uid, (int64_t)(i + 1) * 100 * MI, 1);
    p->containers[0].rootfs = f->rootfs[i];
    p->vols = nl_xcalloc(1, sizeof *p->vols);
    p->vols[p->n_vols++] = (nl_ev_volume_stats_t){nl_xstrdup("data"), f->vol_used[i]};
  }
  f->done = done;
  f->done_ctx = done_ctx;
  uv_timer_start(&f->defer, on_defer, 0, 0);
}

static const nl_pod_t **fake_active(void *ctx, size_t *n) {
  fixture_t *f = ctx;
  const nl_pod_t **p = nl_xcalloc(f->n_pods + 1, sizeof *p);
  for (size_t i = 0; i < f->n_pods; i++) p[i] = f->pods[i];
  *n = f->n_pods;
  return p;
}

static void fake_evict(void *ctx, const nl_pod_t *pod, int64_t grace, const char *message,
                       const nl_kvlist_t *annotations, bool condition) {
  fixture_t *f = ctx;
  f->evictions++;
  snprintf(f->evicted, sizeof f->evicted, "%s", pod->metadata.name);
  snprintf(f->message, sizeof f->message, "%s", message);
  f->evicted_grace = grace;
  f->condition = condition;
  f->annotations[0] = 0;
  for (size_t i = 0; annotations && i < annotations->n; i++)
    snprintf(f->annotations + strlen(f->annotations), sizeof f->annotations - strlen(f->annotations),
             "%s=%s;", annotations->items[i].key, annotations->items[i].value);
}

static bool fake_cleaned_up(void *ctx, const char *uid) {
  (void)ctx;
  (void)uid;
  return true;
}

static void fake_reclaim(void *ctx, bool images, nl_eviction_done_fn done, void *done_ctx) {
  fixture_t *f = ctx;
  f->reclaims++;
  f->reclaim_images += images;
  if (f->disk_after_reclaim >= 0) f->disk_available = f->disk_after_reclaim;
  f->done = done;
  f->done_ctx = done_ctx;
  uv_timer_start(&f->defer, on_defer, 0, 0);
}

/* A manager with the thresholds given as in the configuration file, and
 * memcg_dir standing in for the memory cgroup (NULL: none). */
static fixture_t *setup_memcg(nl_ev_config_map_t hard, nl_ev_config_map_t soft,
                              nl_ev_config_map_t grace, nl_ev_config_map_t reclaim,
                              int64_t transition_ns, const char *memcg_dir) {
  fixture_t *f = nl_xcalloc(1, sizeof *f);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  uv_timer_init(&f->loop, &f->defer);
  f->now = 1000 * S;
  f->mem_capacity = 1000 * MI;
  f->mem_available = 800 * MI;
  f->disk_capacity = 10000 * MI;
  f->disk_available = 5000 * MI;
  f->disk_after_reclaim = -1;
  f->pods[0] = pod_of("small", "u1", BESTEFFORT "  terminationGracePeriodSeconds: 5\n");
  f->pods[1] = pod_of("big", "u2", BESTEFFORT "  terminationGracePeriodSeconds: 5\n");
  f->n_pods = 2;
  nl_ev_threshold_t *t;
  char msg[256];
  int n = parse(hard, soft, grace, reclaim, &t, msg);
  assert_true(n >= 0);
  nl_eviction_deps_t d = {fake_collect, fake_active, fake_evict, fake_cleaned_up, fake_reclaim, f,
                         fake_now, memcg_dir, &f->metrics};
  nl_kmetrics_init(&f->metrics, "node-1");
  /* a period of an hour: rounds run when the test pokes */
  assert_int_equal(nl_eviction_init(&f->m, &f->loop, t, (size_t)n, transition_ns, 30, 3600000, &d), 0);
  free(t);
  return f;
}

static fixture_t *setup(nl_ev_config_map_t hard, nl_ev_config_map_t soft,
                        nl_ev_config_map_t grace, nl_ev_config_map_t reclaim,
                        int64_t transition_ns) {
  return setup_memcg(hard, soft, grace, reclaim, transition_ns, NULL);
}

/* One round at the fake time now (seconds after the start); returns when the
 * manager is idle again or has evicted. */
static void round_at(fixture_t *f, int64_t s) {
  f->now = 1000 * S + s * S;
  uint64_t r = f->m.rounds;
  int e = f->evictions;
  nl_eviction_poke(&f->m);
  while (f->m.rounds == r || (f->m.state != NL_EV_IDLE && f->evictions == e)) uv_run(&f->loop, UV_RUN_ONCE);
}

static void on_stopped(void *ctx) { ((fixture_t *)ctx)->stopped = true; }

static void teardown(fixture_t *f) {
  nl_eviction_stop(&f->m, on_stopped, f);
  uv_close((uv_handle_t *)&f->defer, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_true(f->stopped);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  for (size_t i = 0; i < f->n_pods; i++) nl_pod_free(f->pods[i]);
  nl_kmetrics_free(&f->metrics);
  free(f);
}

static const char *mem_k[] = {"memory.available"};
static const char *disk_k[] = {"nodefs.available"};
static const char *v100[] = {"100Mi"};
static const char *v10pct[] = {"10%"};
static const char *v50[] = {"50Mi"};
static const char *g60[] = {"60s"};

/* A hard memory threshold: the pod using the most memory above its request
 * goes at once, with a grace of 1 s and upstream's message; MemoryPressure. */
static void test_hard_memory(void **state) {
  (void)state;
  fixture_t *f = setup(kv(mem_k, v100, 1), none, none, none, 300 * S);
  round_at(f, 0);
  assert_int_equal(f->evictions, 0);
  assert_false(nl_eviction_memory_pressure(&f->m));
  /* an idle round reads the node's figures only, not the pods' */
  assert_int_equal(f->collects, 1);
  assert_int_equal(f->collects_with_pods, 0);
  f->mem_available = 60 * MI;
  round_at(f, 10);
  /* the threshold met: the round again with the pods' figures, to rank them */
  assert_int_equal(f->collects, 3);
  assert_int_equal(f->collects_with_pods, 1);
  assert_int_equal(f->evictions, 1);
  assert_string_equal(f->evicted, "big");
  assert_int_equal(f->evicted_grace, 1);
  assert_string_equal(f->message, "The node was low on resource: memory. Threshold quantity: 100Mi, "
                                  "available: 60Mi. Container c was using 200Mi, request is 0, has "
                                  "larger consumption of memory. ");
  assert_string_equal(f->annotations, "offending_containers=c;offending_containers_usage=200Mi;"
                                      "starved_resource=memory;");
  assert_true(f->condition);
  assert_true(nl_eviction_memory_pressure(&f->m));
  assert_false(nl_eviction_disk_pressure(&f->m));
  assert_int_equal(f->reclaims, 0); /* memory has no node-level reclaim */
  nl_buf_t text = NL_BUF_INIT;
  nl_metrics_encode(&f->metrics.reg, &text);
  assert_non_null(strstr(text.data, "\nkubelet_evictions{eviction_signal=\"memory.available\"} 1\n"));
  nl_buf_free(&text);
  teardown(f);
}

/* enforceNodeAllocatable "pods": each hard memory.available threshold has an
 * allocatableMemory.available copy (not the soft ones), as upstream's
 * addAllocatableThresholds; the pods cgroup's memory running short evicts for
 * memory with MemoryPressure while the node has plenty. */
static void test_allocatable_memory(void **state) {
  (void)state;
  const char *sk[] = {"memory.available"}, *sv[] = {"300Mi"}, *gv[] = {"1m"};
  nl_ev_threshold_t *t;
  char msg[256];
  enforce_pods = true;
  assert_int_equal(parse(kv(mem_k, v100, 1), kv(sk, sv, 1), kv(sk, gv, 1), kv(mem_k, v50, 1), &t, msg), 3);
  assert_int_equal(t[2].signal, NL_EV_ALLOC_MEMORY);
  assert_true(t[2].hard);
  assert_int_equal(nl_ev_quantity(&t[2].value, 0), 100 * MI);
  assert_int_equal(nl_ev_quantity(&t[2].min_reclaim, 0), 50 * MI);
  assert_string_equal(nl_ev_signal_name(t[2].signal), "allocatableMemory.available");
  free(t);
  fixture_t *f = setup(kv(mem_k, v100, 1), none, none, none, 300 * S);
  enforce_pods = false;
  f->alloc_capacity = 500 * MI;
  f->alloc_available = 400 * MI;
  round_at(f, 0);
  assert_int_equal(f->evictions, 0);
  f->alloc_available = 80 * MI; /* the node has 800Mi free */
  round_at(f, 10);
  assert_int_equal(f->evictions, 1);
  assert_string_equal(f->evicted, "big");
  assert_string_equal(f->message, "The node was low on resource: memory. Threshold quantity: 100Mi, "
                                  "available: 80Mi. Container c was using 200Mi, request is 0, has "
                                  "larger consumption of memory. ");
  assert_true(nl_eviction_memory_pressure(&f->m));
  nl_buf_t text = NL_BUF_INIT;
  nl_metrics_encode(&f->metrics.reg, &text);
  assert_non_null(strstr(text.data, "\nkubelet_evictions{eviction_signal=\"allocatableMemory.available\"} 1\n"));
  nl_buf_free(&text);
  teardown(f);
}

/* A soft threshold evicts only once met for its whole grace period, with
 * min(evictionMaxPodGracePeriod, the pod's grace); the condition is at once. */
static void test_soft_grace_period(void **state) {
  (void)state;
  fixture_t *f = setup(none, kv(mem_k, v100, 1), kv(mem_k, g60, 1), none, 300 * S);
  f->mem_available = 60 * MI;
  round_at(f, 0);
  assert_true(nl_eviction_memory_pressure(&f->m));
  assert_int_equal(f->evictions, 0);
  round_at(f, 59);
  assert_int_equal(f->evictions, 0);
  /* a dip above the threshold restarts the grace period */
  f->mem_available = 200 * MI;
  round_at(f, 60);
  f->mem_available = 60 * MI;
  round_at(f, 70);
  round_at(f, 120);
  assert_int_equal(f->evictions, 0);
  round_at(f, 130);
  assert_int_equal(f->evictions, 1);
  assert_int_equal(f->evicted_grace, 5); /* the pod's 5 s under the maximum 30 s */
  teardown(f);
}

/* The condition stays for evictionPressureTransitionPeriod after the last
 * time the threshold was met. */
static void test_transition_period(void **state) {
  (void)state;
  fixture_t *f = setup(kv(disk_k, v10pct, 1), none, none, none, 300 * S);
  f->disk_available = 500 * MI; /* under 10% of 10000Mi */
  f->disk_after_reclaim = 5000 * MI;
  round_at(f, 0);
  assert_true(nl_eviction_disk_pressure(&f->m));
  assert_int_equal(f->evictions, 0); /* node-level reclaim was enough */
  round_at(f, 10);
  assert_true(nl_eviction_disk_pressure(&f->m));
  round_at(f, 299);
  assert_true(nl_eviction_disk_pressure(&f->m));
  round_at(f, 300);
  assert_false(nl_eviction_disk_pressure(&f->m));
  teardown(f);
}

/* Disk: dead containers and unused images first (the images share nodefs);
 * a pod goes only when that was not enough. */
static void test_disk_reclaim_then_evict(void **state) {
  (void)state;
  fixture_t *f = setup(kv(disk_k, v10pct, 1), none, none, none, 300 * S);
  f->disk_available = 500 * MI;
  f->disk_after_reclaim = 600 * MI;
  round_at(f, 0);
  assert_int_equal(f->reclaims, 1);
  assert_int_equal(f->reclaim_images, 1);
  assert_int_equal(f->evictions, 1);
  const char *want = "The node was low on resource: ephemeral-storage. ";
  assert_memory_equal(f->message, want, strlen(want));
  assert_non_null(strstr(f->annotations, "starved_resource=ephemeral-storage;"));
  assert_true(f->condition);
  teardown(f);
}

/* A threshold once met stays met until its minimum reclaim is reached too. */
static void test_minimum_reclaim(void **state) {
  (void)state;
  fixture_t *f = setup(kv(mem_k, v100, 1), none, none, kv(mem_k, v50, 1), 0);
  f->mem_available = 90 * MI;
  round_at(f, 0);
  assert_int_equal(f->evictions, 1);
  f->mem_available = 120 * MI; /* above 100Mi, under 100Mi + 50Mi */
  round_at(f, 10);
  assert_int_equal(f->evictions, 2);
  f->mem_available = 160 * MI;
  round_at(f, 20);
  assert_int_equal(f->evictions, 2);
  /* met no more: the plain threshold applies again */
  f->mem_available = 120 * MI;
  round_at(f, 30);
  assert_int_equal(f->evictions, 2);
  teardown(f);
}

/* upstream's admit handler. */
static void test_admission(void **state) {
  (void)state;
  const char *k[] = {"memory.available", "nodefs.available"}, *v[] = {"100Mi", "10%"};
  fixture_t *f = setup(kv(k, v, 2), none, none, none, 300 * S);
  nl_pod_t *be = pod_of("be", "a1", BESTEFFORT);
  nl_pod_t *bu = pod_of("bu", "a2", BURSTABLE("10Mi"));
  nl_pod_t *tol = pod_of("tol", "a3", BESTEFFORT "  tolerations: [{key: node.kubernetes.io/memory-pressure,"
                                                  " operator: Exists, effect: NoSchedule}]\n");
  nl_pod_t *crit = pod_of("crit", "a4", BESTEFFORT PRIORITY(2000000000));
  const char *reason = NULL;
  char *msg = NULL;
  assert_true(nl_eviction_admit(&f->m, be, &reason, &msg));
  /* memory pressure: BestEffort only, unless tolerated */
  f->mem_available = 10 * MI;
  f->n_pods = 0; /* nothing to evict */
  round_at(f, 0);
  assert_true(nl_eviction_memory_pressure(&f->m));
  assert_false(nl_eviction_admit(&f->m, be, &reason, &msg));
  assert_string_equal(reason, "Evicted");
  assert_string_equal(msg, "The node had condition: [MemoryPressure]. ");
  free(msg);
  assert_true(nl_eviction_admit(&f->m, bu, &reason, &msg));
  assert_true(nl_eviction_admit(&f->m, tol, &reason, &msg));
  /* and disk pressure: every pod but the critical ones */
  f->disk_available = 100 * MI;
  round_at(f, 10);
  assert_false(nl_eviction_admit(&f->m, bu, &reason, &msg));
  assert_string_equal(msg, "The node had condition: [MemoryPressure DiskPressure]. ");
  free(msg);
  assert_false(nl_eviction_admit(&f->m, tol, &reason, &msg));
  free(msg);
  assert_true(nl_eviction_admit(&f->m, crit, &reason, &msg));
  f->n_pods = 2;
  teardown(f);
  nl_pod_free(be), nl_pod_free(bu), nl_pod_free(tol), nl_pod_free(crit);
}

/* Critical pods are never evicted; the next one in rank is. */
static void test_critical_skipped(void **state) {
  (void)state;
  fixture_t *f = setup(kv(mem_k, v100, 1), none, none, none, 300 * S);
  nl_pod_free(f->pods[1]);
  f->pods[1] = pod_of("big", "u2", BESTEFFORT PRIORITY(2000001000));
  f->mem_available = 10 * MI;
  round_at(f, 0);
  assert_int_equal(f->evictions, 1);
  assert_string_equal(f->evicted, "small");
  teardown(f);
}

/* Each memory threshold is armed on the memory cgroup at the usage where the
 * working set reaches it; a crossing starts a round with no tick. */
static void test_memory_threshold_notification(void **state) {
  (void)state;
  char dir[] = "/tmp/nl-evict-memcg-XXXXXX", p[128];
  assert_non_null(mkdtemp(dir));
  const char *files[] = {"memory.usage_in_bytes", "cgroup.event_control"};
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    fclose(fopen(p, "w"));
  }
  fixture_t *f = setup_memcg(kv(mem_k, v100, 1), none, none, none, 300 * S, dir);
  assert_true(f->m.memcg_up);
  round_at(f, 0);
  while (f->m.memcg.state == NL_MEMCG_ARMING) uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(f->m.memcg.state, NL_MEMCG_ARMED);
  /* capacity 1000Mi - threshold 100Mi + inactive file 50Mi */
  snprintf(p, sizeof p, "%s/cgroup.event_control", dir);
  FILE *fp = fopen(p, "r");
  int efd, watch;
  long long usage = 0;
  assert_int_equal(fscanf(fp, "%d %d %lld", &efd, &watch, &usage), 3);
  fclose(fp);
  assert_int_equal(usage, 950 * MI);
  assert_int_equal(efd, f->m.memcg.efd);
  /* the kernel signals: a round at once, which evicts */
  f->mem_available = 60 * MI;
  assert_int_equal(eventfd_write(efd, 1), 0);
  while (f->evictions == 0) uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(f->m.rounds, 2);
  teardown(f);
  snprintf(p, sizeof p, "rm -rf %s", dir);
  assert_int_equal(system(p), 0);
}

/* ---- local storage limits ---- */

#define EPHEMERAL(name, l) "{name: " name ", image: i, resources: {limits: {ephemeral-storage: " l "}}}"
#define EMPTYDIR(medium, size) "  volumes: [{name: data, emptyDir: {medium: \"" medium "\", sizeLimit: " size "}}]\n"

/* A pod's figures: containers c1, c2 (writable layer and logs), volume data. */
static nl_ev_pod_stats_t local_stats(int64_t c1_rootfs, int64_t c1_logs, int64_t c2_rootfs, int64_t data) {
  nl_ev_pod_stats_t s = {.uid = nl_xstrdup("u1"), .pod_logs = 0, .etc_hosts = 4096};
  s.containers = nl_xcalloc(2, sizeof *s.containers);
  s.containers[s.n_containers++] = (nl_ev_container_stats_t){nl_xstrdup("c1"), 0, c1_rootfs, c1_logs};
  s.containers[s.n_containers++] = (nl_ev_container_stats_t){nl_xstrdup("c2"), 0, c2_rootfs, 0};
  s.vols = nl_xcalloc(1, sizeof *s.vols);
  s.vols[s.n_vols++] = (nl_ev_volume_stats_t){nl_xstrdup("data"), data};
  return s;
}

/* What upstream's check of one pod says, "" for nothing; msg gets the message. */
static const char *check(const char *spec, nl_ev_pod_stats_t s, bool dedicated, char *msg) {
  nl_pod_t *pod = pod_of("p", "u1", spec);
  char *m = NULL;
  const char *sig = nl_ev_local_storage_exceeded(pod, &s, dedicated, &m);
  snprintf(msg, 256, "%s", m ? m : "");
  assert_true((sig == NULL) == (m == NULL));
  free(m);
  nl_pod_free(pod);
  nl_ev_pod_stats_t *owned = nl_xcalloc(1, sizeof *owned);
  *owned = s;
  free_stats(owned, 1);
  return sig ? sig : "";
}

/* upstream emptyDirLimitEviction: a disk emptyDir over its sizeLimit; one in
 * memory is a tmpfs of that size and never checked. */
static void test_local_storage_empty_dir(void **state) {
  (void)state;
  char msg[256];
  const char *two = "  containers: [{name: c1, image: i}, {name: c2, image: i}]\n";
  char spec[512];
  snprintf(spec, sizeof spec, "%s" EMPTYDIR("", "10Mi"), two);
  assert_string_equal(check(spec, local_stats(0, 0, 0, 11 * MI), false, msg), "emptydirfs.limit");
  assert_string_equal(msg, "Usage of EmptyDir volume \"data\" exceeds the limit \"10Mi\". ");
  assert_string_equal(check(spec, local_stats(0, 0, 0, 10 * MI), false, msg), ""); /* at the limit */
  assert_string_equal(check(spec, local_stats(0, 0, 0, -1), false, msg), "");     /* not measured */
  snprintf(spec, sizeof spec, "%s" EMPTYDIR("Memory", "10Mi"), two);
  assert_string_equal(check(spec, local_stats(0, 0, 0, 11 * MI), false, msg), "");
  nl_pod_t *pod = pod_of("p", "u1", spec);
  assert_false(nl_ev_local_storage_limited(pod));
  assert_false(nl_ev_local_volume(&pod->spec.volumes[0]));
  nl_pod_free(pod);
  /* a pod with no limits at all has nothing to check, whatever it uses */
  pod = pod_of("p", "u1", two);
  assert_false(nl_ev_local_storage_limited(pod));
  nl_pod_free(pod);
  assert_string_equal(check(two, local_stats(900 * MI, 900 * MI, 0, 900 * MI), false, msg), "");
}

/* upstream podEphemeralStorageLimitEviction: the sum of the containers'
 * limits against the writable layers, logs, local volumes and etc-hosts. */
static void test_local_storage_pod_total(void **state) {
  (void)state;
  char msg[256];
  const char *spec = "  containers: [" EPHEMERAL("c1", "5Mi") ", " EPHEMERAL("c2", "5Mi") "]\n"
                     "  volumes: [{name: data, emptyDir: {}}]\n";
  nl_pod_t *pod = pod_of("p", "u1", spec);
  assert_true(nl_ev_local_storage_limited(pod));
  nl_pod_free(pod);
  /* 4Mi + 1Mi + 1Mi + 4Mi + etc-hosts 4Ki: over 10Mi, each container within its own */
  assert_string_equal(check(spec, local_stats(4 * MI, MI, MI, 4 * MI), false, msg), "ephemeralpodfs.limit");
  assert_string_equal(msg, "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. ");
  assert_string_equal(check(spec, local_stats(4 * MI, MI, MI, 4 * MI - 4096), false, msg), "");
  /* an emptyDir with no sizeLimit counts toward the pod's limit (a single container's too) */
  const char *one = "  containers: [" EPHEMERAL("c1", "100Mi") "]\n  volumes: [{name: data, emptyDir: {}}]\n";
  assert_string_equal(check(one, local_stats(0, 0, 0, 101 * MI), false, msg), "ephemeralpodfs.limit");
  assert_string_equal(msg, "Pod ephemeral local storage usage exceeds the total limit of containers 100Mi. ");
  assert_string_equal(check(one, local_stats(0, 0, 0, 99 * MI), false, msg), "");
  /* the writable layer counts toward the pod even on a dedicated image filesystem */
  assert_string_equal(check(one, local_stats(101 * MI, 0, 0, 0), true, msg), "ephemeralpodfs.limit");
}

/* upstream containerEphemeralStorageLimitEviction: one container's writable
 * layer and logs over its own limit (the logs alone with a dedicated image
 * filesystem). */
static void test_local_storage_container(void **state) {
  (void)state;
  char msg[256];
  const char *spec = "  containers: [" EPHEMERAL("c1", "5Mi") ", " EPHEMERAL("c2", "1Gi") "]\n";
  assert_string_equal(check(spec, local_stats(5 * MI, MI, 0, 0), false, msg), "ephemeralcontainerfs.limit");
  assert_string_equal(msg, "Container c1 exceeded its local ephemeral storage limit \"5Mi\". ");
  assert_string_equal(check(spec, local_stats(4 * MI, MI, 0, 0), false, msg), "");
  assert_string_equal(check(spec, local_stats(5 * MI, MI, 0, 0), true, msg), "");
  assert_string_equal(check(spec, local_stats(0, 6 * MI, 0, 0), true, msg), "ephemeralcontainerfs.limit");
  /* a container not running has no figures: nothing to hold against it */
  nl_ev_pod_stats_t s = local_stats(0, 0, 0, 0);
  s.n_containers = 1; /* c2 only stays in the array, freed below */
  free(s.containers[1].name);
  free(s.containers[0].name);
  s.containers[0] = (nl_ev_container_stats_t){nl_xstrdup("c2"), 0, 900 * MI, 0};
  assert_string_equal(check(spec, s, false, msg), "");
}

/* The manager: with no threshold configured, every pod over a limit goes in
 * the same round with a grace of 1 s, counted by its signal; the others stay. */
static void test_local_storage_eviction(void **state) {
  (void)state;
  fixture_t *f = setup(none, none, none, none, 300 * S);
  for (size_t i = 0; i < f->n_pods; i++) nl_pod_free(f->pods[i]);
  f->pods[0] = pod_of("layer", "u1", "  containers: [" EPHEMERAL("c", "5Mi") "]\n");
  f->pods[1] = pod_of("volume", "u2", "  containers: [{name: c, image: i}]\n" EMPTYDIR("", "10Mi"));
  f->pods[2] = pod_of("within", "u3", "  containers: [" EPHEMERAL("c", "5Mi") "]\n");
  f->n_pods = 3;
  f->rootfs[0] = 4 * MI; /* within 5Mi, and volume "data" within 10Mi */
  f->vol_used[1] = 10 * MI;
  f->rootfs[2] = 4 * MI;
  round_at(f, 0);
  assert_int_equal(f->evictions, 0);
  f->rootfs[0] = 6 * MI;
  f->vol_used[1] = 11 * MI;
  round_at(f, 10);
  assert_int_equal(f->evictions, 2);
  assert_int_equal(f->evicted_grace, 1);
  assert_string_equal(f->evicted, "volume");
  assert_string_equal(f->message, "Usage of EmptyDir volume \"data\" exceeds the limit \"10Mi\". ");
  /* upstream: a local storage limit's eviction has no annotations and no
   * DisruptionTarget condition */
  assert_string_equal(f->annotations, "");
  assert_false(f->condition);
  assert_int_equal(f->m.n_evicted, 2);
  assert_false(nl_eviction_memory_pressure(&f->m) || nl_eviction_disk_pressure(&f->m));
  nl_buf_t text = NL_BUF_INIT;
  nl_metrics_encode(&f->metrics.reg, &text);
  assert_non_null(strstr(text.data, "\nkubelet_evictions{eviction_signal=\"ephemeralpodfs.limit\"} 1\n"));
  assert_non_null(strstr(text.data, "\nkubelet_evictions{eviction_signal=\"emptydirfs.limit\"} 1\n"));
  nl_buf_free(&text);
  teardown(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_quantities_and_percentages),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_rank_memory),
      cmocka_unit_test(test_rank_pids),
      cmocka_unit_test(test_rank_disk),
      cmocka_unit_test(test_hard_memory),
      cmocka_unit_test(test_allocatable_memory),
      cmocka_unit_test(test_soft_grace_period),
      cmocka_unit_test(test_transition_period),
      cmocka_unit_test(test_disk_reclaim_then_evict),
      cmocka_unit_test(test_minimum_reclaim),
      cmocka_unit_test(test_admission),
      cmocka_unit_test(test_critical_skipped),
      cmocka_unit_test(test_memory_threshold_notification),
      cmocka_unit_test(test_local_storage_empty_dir),
      cmocka_unit_test(test_local_storage_pod_total),
      cmocka_unit_test(test_local_storage_container),
      cmocka_unit_test(test_local_storage_eviction),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
