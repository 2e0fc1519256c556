/* computePodActions: every branch of upstream's, with hand-made runtime statuses. */
#include "rt_test_util.h"

#include "reactor/xalloc.h"

static nl_pod_t *mkpod(const char *policy, const char *inits, const char *containers) {
  char *y = nl_xasprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u}\n"
                         "spec:\n  restartPolicy: %s\n%s  containers:\n%s",
                         policy, inits ? inits : "", containers);
  nl_pod_t *p = pod_from_yaml(y);
  free(y);
  return p;
}

#define ONE "  - {name: a, image: busybox}\n"
#define TWO "  - {name: a, image: busybox}\n  - {name: b, image: busybox}\n"

static nl_rt_pod_status_t *st_new(int sandbox_state /* -1: none */, const char *ip) {
  nl_rt_pod_status_t *s = nl_xcalloc(1, sizeof *s);
  s->uid = nl_xstrdup("u");
  if (sandbox_state >= 0) {
    s->sandboxes = nl_xcalloc(1, sizeof *s->sandboxes);
    s->n_sandboxes = 1;
    s->sandboxes[0].id = nl_xstrdup("sb1");
    s->sandboxes[0].state = sandbox_state;
    s->sandboxes[0].attempt = 1;
    s->sandboxes[0].ip = ip ? nl_xstrdup(ip) : NULL;
  }
  return s;
}

static void st_add(nl_rt_pod_status_t *s, const char *name, nl_rt_container_state_t state,
                   int exit_code, uint32_t hash) {
  s->containers = nl_xrealloc(s->containers, (s->n_containers + 1) * sizeof *s->containers);
  nl_rt_container_t *c = &s->containers[s->n_containers++];
  memset(c, 0, sizeof *c);
  c->id = nl_xasprintf("id-%s-%zu", name, s->n_containers);
  c->name = nl_xstrdup(name);
  c->state = state;
  c->exit_code = exit_code;
  c->hash = hash;
}

static uint32_t hash_of(const nl_pod_t *p, const char *name) {
  for (size_t i = 0; i < p->spec.n_containers; i++)
    if (strcmp(p->spec.containers[i].name, name) == 0)
      return nl_container_hash(&p->spec.containers[i]);
  for (size_t i = 0; i < p->spec.n_init_containers; i++)
    if (strcmp(p->spec.init_containers[i].name, name) == 0)
      return nl_container_hash(&p->spec.init_containers[i]);
  return 0;
}

static void test_new_pod(void **state) {
  (void)state;
  nl_pod_t *p = mkpod("Always", NULL, TWO);
  nl_pod_actions_t a;
  nl_runtime_compute_actions(p, NULL, NULL, NULL, &a);
  assert_true(a.create_sandbox);
  assert_true(a.kill_pod);
  assert_null(a.sandbox_id);
  assert_int_equal(a.attempt, 0);
  assert_int_equal(a.n_to_start, 2);
  assert_int_equal(a.n_init_to_start, 0);
  nl_pod_actions_free(&a);
  nl_pod_free(p);
  /* with init containers: only the first init container */
  p = mkpod("Always", "  initContainers:\n  - {name: i0, image: busybox}\n  - {name: i1, image: busybox}\n", ONE);
  nl_runtime_compute_actions(p, NULL, NULL, NULL, &a);
  assert_true(a.create_sandbox);
  assert_int_equal(a.n_to_start, 0);
  assert_int_equal(a.n_init_to_start, 1);
  assert_int_equal(a.init_to_start[0], 0);
  nl_pod_actions_free(&a);
  nl_pod_free(p);
}

static void test_steady_and_changed(void **state) {
  (void)state;
  nl_pod_t *p = mkpod("Always", NULL, TWO);
  nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
  st_add(s, "a", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "a"));
  st_add(s, "b", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "b") + 1);
  nl_pod_actions_t a;
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_false(a.create_sandbox);
  assert_false(a.kill_pod);
  assert_string_equal(a.sandbox_id, "sb1");
  assert_int_equal(a.attempt, 1);
  assert_int_equal(a.n_to_start, 1);
  assert_int_equal(a.to_start[0], 1);
  assert_int_equal(a.n_to_kill, 1);
  assert_string_equal(a.to_kill[0].name, "b");
  assert_string_equal(a.to_kill[0].message, "Container b definition changed, will be restarted");
  nl_pod_actions_free(&a);
  /* a hash change restarts even under Never */
  nl_pod_free(p);
  p = mkpod("Never", NULL, TWO);
  s->containers[0].hash = hash_of(p, "a");
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_to_start, 1);
  assert_int_equal(a.n_to_kill, 1);
  nl_pod_actions_free(&a);
  nl_rt_pod_status_free(s);
  nl_pod_free(p);
}

static void test_restart_policies(void **state) {
  (void)state;
  const char *pol[] = {"Always", "OnFailure", "Never"};
  /* exit 0 / exit 1: started? */
  bool want[3][2] = {{true, true}, {false, true}, {false, false}};
  for (int i = 0; i < 3; i++)
    for (int code = 0; code < 2; code++) {
      nl_pod_t *p = mkpod(pol[i], NULL, ONE);
      nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
      st_add(s, "a", NL_RT_CONTAINER_EXITED, code, hash_of(p, "a"));
      nl_pod_actions_t a;
      nl_runtime_compute_actions(p, s, NULL, NULL, &a);
      assert_int_equal(a.n_to_start, want[i][code] ? 1 : 0);
      /* nothing to keep and nothing to start: the pod is killed (sandbox stopped) */
      assert_int_equal(a.kill_pod, !want[i][code]);
      assert_false(a.create_sandbox);
      assert_int_equal(nl_runtime_should_restart(&p->spec.containers[0], p, s), want[i][code]);
      nl_pod_actions_free(&a);
      nl_rt_pod_status_free(s);
      nl_pod_free(p);
    }
}

static void test_sandbox_changed(void **state) {
  (void)state;
  nl_pod_t *p = mkpod("Always", NULL, ONE);
  nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_NOTREADY, "10.88.0.2");
  st_add(s, "a", NL_RT_CONTAINER_EXITED, 0, hash_of(p, "a"));
  nl_pod_actions_t a;
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_true(a.create_sandbox);
  assert_true(a.kill_pod);
  assert_string_equal(a.sandbox_id, "sb1");
  assert_int_equal(a.attempt, 2);
  assert_int_equal(a.n_to_start, 1);
  nl_pod_actions_free(&a);
  /* Never: don't recreate a sandbox for containers that are done */
  nl_pod_free(p);
  p = mkpod("Never", NULL, ONE);
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_false(a.create_sandbox);
  assert_true(a.kill_pod);
  nl_pod_actions_free(&a);
  /* OnFailure with all succeeded: nothing to start, containers exist */
  nl_pod_free(p);
  p = mkpod("OnFailure", NULL, ONE);
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_false(a.create_sandbox);
  assert_int_equal(a.n_to_start, 0);
  nl_pod_actions_free(&a);
  /* ready but no IP (not host network) */
  nl_pod_free(p);
  p = mkpod("Always", NULL, ONE);
  s->sandboxes[0].state = NL_RT_SANDBOX_READY;
  free(s->sandboxes[0].ip);
  s->sandboxes[0].ip = NULL;
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_true(a.create_sandbox);
  nl_pod_actions_free(&a);
  /* network namespace changed: no sandbox id */
  s->sandboxes[0].host_network = true;
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_true(a.create_sandbox);
  assert_null(a.sandbox_id);
  nl_pod_actions_free(&a);
  nl_rt_pod_status_free(s);
  nl_pod_free(p);
}

static nl_probe_result_t fail_liveness(void *ctx, const char *id, nl_probe_kind_t k) {
  (void)ctx;
  return k == NL_PROBE_LIVENESS && strcmp(id, "id-a-1") == 0 ? NL_PROBE_RESULT_FAILURE
                                                               : NL_PROBE_RESULT_NONE;
}

static void test_probes_and_unknown(void **state) {
  (void)state;
  nl_pod_t *p = mkpod("Always", NULL, TWO);
  nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
  st_add(s, "a", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "a"));
  st_add(s, "b", NL_RT_CONTAINER_UNKNOWN, 0, hash_of(p, "b"));
  nl_pod_actions_t a;
  nl_runtime_compute_actions(p, s, fail_liveness, NULL, &a);
  assert_int_equal(a.n_to_start, 2);
  assert_int_equal(a.n_to_kill, 2);
  assert_string_equal(a.to_kill[1].name, "b"); /* unknown: killed before restart */
  assert_string_equal(a.to_kill[1].reason, "Unknown");
  assert_string_equal(a.to_kill[0].name, "a");
  assert_string_equal(a.to_kill[0].reason, "LivenessProbe");
  assert_string_equal(a.to_kill[0].message,
                      "Container a failed liveness probe, will be restarted");
  nl_pod_actions_free(&a);
  nl_rt_pod_status_free(s);
  nl_pod_free(p);
}

#define INITS "  initContainers:\n  - {name: i0, image: busybox}\n  - {name: i1, image: busybox}\n"

static void test_init_containers(void **state) {
  (void)state;
  nl_pod_t *p = mkpod("Always", INITS, ONE);
  nl_pod_actions_t a;
  /* sandbox up, nothing ran yet: the first init container */
  nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_init_to_start, 1);
  assert_int_equal(a.init_to_start[0], 0);
  assert_int_equal(a.n_to_start, 0);
  nl_pod_actions_free(&a);
  /* i0 running: wait */
  st_add(s, "i0", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "i0"));
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_init_to_start, 0);
  assert_int_equal(a.n_to_start, 0);
  assert_false(a.kill_pod);
  nl_pod_actions_free(&a);
  /* i0 done: i1 next */
  s->containers[0].state = NL_RT_CONTAINER_EXITED;
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_init_to_start, 1);
  assert_int_equal(a.init_to_start[0], 1);
  nl_pod_actions_free(&a);
  /* i1 failed: retried under Always */
  st_add(s, "i1", NL_RT_CONTAINER_EXITED, 1, hash_of(p, "i1"));
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_init_to_start, 1);
  assert_int_equal(a.init_to_start[0], 1);
  nl_pod_actions_free(&a);
  /* ... and kills the pod under Never */
  nl_pod_t *pn = mkpod("Never", INITS, ONE);
  nl_runtime_compute_actions(pn, s, NULL, NULL, &a);
  assert_true(a.kill_pod);
  assert_int_equal(a.n_init_to_start, 0);
  nl_pod_actions_free(&a);
  nl_pod_free(pn);
  /* i1 done: the regular container */
  s->containers[1].exit_code = 0;
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_init_to_start, 0);
  assert_int_equal(a.n_to_start, 1);
  nl_pod_actions_free(&a);
  /* once a regular container runs, removed init containers are not re-run */
  nl_rt_pod_status_free(s);
  s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
  st_add(s, "a", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "a"));
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_init_to_start, 0);
  assert_int_equal(a.n_to_start, 0);
  assert_false(a.kill_pod);
  nl_pod_actions_free(&a);
  nl_rt_pod_status_free(s);
  nl_pod_free(p);
}

/* Ephemeral containers: started when the runtime has no instance of them, even
 * before initialization completes, never restarted, never a reason to keep or
 * kill the pod; none while a new sandbox is needed. */
static void test_ephemeral_containers(void **state) {
  (void)state;
  nl_pod_t *p = mkpod("Always", "  initContainers:\n  - {name: i, image: busybox}\n",
                      ONE "  ephemeralContainers:\n  - {name: dbg, image: busybox, "
                          "targetContainerName: a}\n  - {name: done, image: busybox}\n");
  assert_int_equal(p->spec.n_ephemeral_containers, 2);
  assert_string_equal(p->spec.ephemeral_containers[0].target_container_name, "a");
  assert_string_equal(p->spec.ephemeral_containers[0].image_pull_policy, "Always"); /* defaulted */
  nl_pod_actions_t a;
  nl_runtime_compute_actions(p, NULL, NULL, NULL, &a);
  assert_true(a.create_sandbox);
  assert_int_equal(a.n_ephemeral_to_start, 0);
  nl_pod_actions_free(&a);
  /* the init container still runs: both ephemeral containers start */
  nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
  st_add(s, "i", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "i"));
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_ephemeral_to_start, 2);
  assert_int_equal(a.ephemeral_to_start[0], 0);
  assert_int_equal(a.ephemeral_to_start[1], 1);
  assert_int_equal(a.n_to_start, 0);
  nl_pod_actions_free(&a);
  /* one runs, one exited: neither starts again; the pod is left alone */
  s->containers[0].state = NL_RT_CONTAINER_EXITED;
  st_add(s, "a", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "a"));
  st_add(s, "dbg", NL_RT_CONTAINER_RUNNING, 0, 1);
  st_add(s, "done", NL_RT_CONTAINER_EXITED, 1, 2);
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_ephemeral_to_start, 0);
  assert_int_equal(a.n_to_start + a.n_to_kill, 0);
  assert_false(a.kill_pod);
  nl_pod_actions_free(&a);
  nl_rt_pod_status_free(s);
  nl_pod_free(p);
}

static void test_sidecars(void **state) {
  (void)state;
  nl_pod_t *p = mkpod("Always",
                      "  initContainers:\n  - {name: side, image: busybox, restartPolicy: Always}\n"
                      "  - {name: i1, image: busybox}\n", ONE);
  nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
  st_add(s, "side", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "side"));
  nl_pod_actions_t a;
  /* a running sidecar (no startup probe) lets the next init container start */
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_init_to_start, 1);
  assert_int_equal(a.init_to_start[0], 1);
  nl_pod_actions_free(&a);
  /* initialized: the sidecar exited and is restarted alongside the main container */
  st_add(s, "i1", NL_RT_CONTAINER_EXITED, 0, hash_of(p, "i1"));
  st_add(s, "a", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "a"));
  s->containers[0].state = NL_RT_CONTAINER_EXITED;
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_init_to_start, 1);
  assert_int_equal(a.init_to_start[0], 0);
  assert_int_equal(a.n_to_start, 0);
  assert_false(a.kill_pod);
  nl_pod_actions_free(&a);
  /* definition change of a running sidecar: killed and restarted */
  s->containers[0].state = NL_RT_CONTAINER_RUNNING;
  s->containers[0].hash ^= 1;
  nl_runtime_compute_actions(p, s, NULL, NULL, &a);
  assert_int_equal(a.n_to_kill, 1);
  assert_string_equal(a.to_kill[0].message, "Init container side definition changed");
  assert_true(a.to_kill[0].init);
  assert_int_equal(a.n_init_to_start, 1);
  nl_pod_actions_free(&a);
  /* main container done under OnFailure: pod killed, sidecar not restarted */
  nl_pod_t *po = mkpod("OnFailure",
                       "  initContainers:\n  - {name: side, image: busybox, restartPolicy: Always}\n"
                       "  - {name: i1, image: busybox}\n", ONE);
  s->containers[0].hash = hash_of(po, "side");
  s->containers[2].state = NL_RT_CONTAINER_EXITED;
  nl_runtime_compute_actions(po, s, NULL, NULL, &a);
  assert_true(a.kill_pod);
  assert_int_equal(a.n_init_to_start, 0);
  nl_pod_actions_free(&a);
  nl_pod_free(po);
  nl_rt_pod_status_free(s);
  nl_pod_free(p);
}

/* ContainerRestartRules: the container's rules, then its policy, then the pod's. */
static void test_container_restart_rules(void **state) {
  (void)state;
  static const struct {
    const char *pod_policy, *container, *why;
    int exit_code;
    bool started;
  } cases[] = {
      {"Always", "restartPolicy: Never", "own Never beats the pod's Always", 1, false},
      {"Always", "restartPolicy: Never", "own Never, exit 0", 0, false},
      {"Never", "restartPolicy: Always", "own Always beats the pod's Never", 1, true},
      {"Never", "restartPolicy: OnFailure", "own OnFailure, failed", 3, true},
      {"Never", "restartPolicy: OnFailure", "own OnFailure, succeeded", 0, false},
      {"Never", "restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]",
       "rule In [42] matches 42", 42, true},
      {"Never", "restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]",
       "rule In [42] does not match 1", 1, false},
      {"Always", "restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: NotIn, values: [0, 7]}}]",
       "rule NotIn [0, 7] matches 3", 3, true},
      {"Always", "restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: NotIn, values: [0, 7]}}]",
       "rule NotIn [0, 7] does not match 7", 7, false},
      {"Never", "restartPolicy: Always, restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}]",
       "RestartAllContainers on 42, own Always", 42, true},
      {"Always", "restartPolicy: Never, restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}]",
       "RestartAllContainers on 42, own Never: runs again with the others", 42, true},
      {"Always", "restartPolicy: Never, restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}]",
       "RestartAllContainers on 42 does not match 1: own Never", 1, false},
      {"Never", NULL, "no policy of its own: the pod's Never", 42, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *c = cases[i].container ? nl_xasprintf("  - {name: a, image: busybox, %s}\n", cases[i].container)
                                 : nl_xstrdup(ONE);
    nl_pod_t *p = mkpod(cases[i].pod_policy, NULL, c);
    free(c);
    nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
    st_add(s, "a", NL_RT_CONTAINER_EXITED, cases[i].exit_code, hash_of(p, "a"));
    nl_pod_actions_t a;
    nl_runtime_compute_actions(p, s, NULL, NULL, &a);
    if (a.n_to_start != (cases[i].started ? 1u : 0u)) fail_msg("case %zu (%s): started %zu", i, cases[i].why, a.n_to_start);
    assert_int_equal(a.kill_pod, !cases[i].started);
    assert_int_equal(nl_runtime_should_restart(&p->spec.containers[0], p, s), cases[i].started);
    nl_pod_actions_free(&a);
    nl_rt_pod_status_free(s);
    nl_pod_free(p);
  }
}

/* A running container killed by its liveness probe: its own policy decides,
 * with no exit code for the rules. */
static void test_container_policy_on_probe_failure(void **state) {
  (void)state;
  nl_pod_t *p = mkpod("Always", NULL,
                      "  - {name: a, image: busybox, restartPolicy: Never}\n  - {name: b, image: busybox}\n");
  nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
  st_add(s, "a", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "a"));
  st_add(s, "b", NL_RT_CONTAINER_RUNNING, 0, hash_of(p, "b"));
  nl_pod_actions_t a;
  nl_runtime_compute_actions(p, s, fail_liveness, NULL, &a);
  assert_int_equal(a.n_to_kill, 1);
  assert_int_equal(a.n_to_start, 0); /* a is not started again; b runs on */
  assert_false(a.kill_pod);
  assert_string_equal(a.to_kill[0].message, "Container a failed liveness probe");
  nl_pod_actions_free(&a);
  nl_rt_pod_status_free(s);
  nl_pod_free(p);
}

/* An init container's own policy and rules: restarted under a Never pod on
 * a matching rule, the pod killed when not. */
static void test_init_container_rules(void **state) {
  (void)state;
  const char *inits = "  initContainers:\n  - {name: i0, image: busybox, restartPolicy: Never, restartPolicyRules: "
                      "[{action: Restart, exitCodes: {operator: In, values: [42]}}]}\n";
  for (int code = 1; code <= 42; code += 41) {
    nl_pod_t *p = mkpod("Never", inits, ONE);
    nl_rt_pod_status_t *s = st_new(NL_RT_SANDBOX_READY, "10.88.0.2");
    st_add(s, "i0", NL_RT_CONTAINER_EXITED, code, hash_of(p, "i0"));
    nl_pod_actions_t a;
    nl_runtime_compute_actions(p, s, NULL, NULL, &a);
    assert_int_equal(a.kill_pod, code != 42);
    assert_int_equal(a.n_init_to_start, code == 42 ? 1 : 0);
    nl_pod_actions_free(&a);
    nl_rt_pod_status_free(s);
    nl_pod_free(p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_pod),          cmocka_unit_test(test_steady_and_changed),
      cmocka_unit_test(test_restart_policies), cmocka_unit_test(test_sandbox_changed),
      cmocka_unit_test(test_probes_and_unknown), cmocka_unit_test(test_init_containers),
      cmocka_unit_test(test_sidecars),         cmocka_unit_test(test_ephemeral_containers),
      cmocka_unit_test(test_container_restart_rules),
      cmocka_unit_test(test_container_policy_on_probe_failure),
      cmocka_unit_test(test_init_container_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
