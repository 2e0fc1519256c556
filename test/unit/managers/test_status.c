/* v1 PodStatus generation: every phase rule of getPhase, every waiting reason
 * path, container status fields, conditions, QoS, IPs, continuity with the old
 * status, and the JSON encoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "managers/status.h"
#include "reactor/xalloc.h"

#define S(x) ((int64_t)(x) * 1000000000)
#define T0 1700000000 /* 2023-11-14T22:13:20Z */

static nl_pod_t *pod_of(const char *yaml) {
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(yaml, strlen(yaml), "test.yaml", &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  nl_pod_set_defaults(pod);
  return pod;
}

static nl_pod_t *pod2(const char *policy) { /* containers a and b */
  char y[512];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
           "spec:\n  restartPolicy: %s\n  containers:\n  - {name: b, image: busybox:1}\n"
           "  - {name: a, image: busybox:2}\n",
           policy);
  return pod_of(y);
}

static nl_pod_t *pod_init(const char *policy, bool sidecar) {
  char y[640];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
           "spec:\n  restartPolicy: %s\n  initContainers:\n  - {name: init, image: busybox%s}\n"
           "  containers:\n  - {name: app, image: busybox}\n",
           policy, sidecar ? ", restartPolicy: Always" : "");
  return pod_of(y);
}

static nl_rt_pod_status_t *rt_new(void) {
  nl_rt_pod_status_t *rt = nl_xcalloc(1, sizeof(*rt));
  rt->uid = nl_xstrdup("u1");
  return rt;
}

static void rt_sandbox(nl_rt_pod_status_t *rt, const char *id, bool ready, const char *ip) {
  rt->sandboxes = nl_xrealloc(rt->sandboxes, (rt->n_sandboxes + 1) * sizeof(*rt->sandboxes));
  nl_rt_sandbox_t *s = &rt->sandboxes[rt->n_sandboxes++];
  memset(s, 0, sizeof(*s));
  s->id = nl_xstrdup(id);
  s->state = ready ? NL_RT_SANDBOX_READY : NL_RT_SANDBOX_NOTREADY;
  s->ip = ip ? nl_xstrdup(ip) : NULL;
  if (ready && ip) {
    rt->ips = nl_xrealloc(rt->ips, (rt->n_ips + 1) * sizeof(char *));
    rt->ips[rt->n_ips++] = nl_xstrdup(ip);
  }
}

/* Containers are added newest first by the callers, as PLEG stores them. */
static nl_rt_container_t *rt_c(nl_rt_pod_status_t *rt, const char *id, const char *name,
                               nl_rt_container_state_t st, int exit_code, int rc) {
  rt->containers = nl_xrealloc(rt->containers, (rt->n_containers + 1) * sizeof(*rt->containers));
  nl_rt_container_t *c = &rt->containers[rt->n_containers++];
  memset(c, 0, sizeof(*c));
  c->id = nl_xstrdup(id);
  c->name = nl_xstrdup(name);
  c->state = st;
  c->created_at = S(T0) - (int64_t)rt->n_containers; /* later added = older */
  if (st != NL_RT_CONTAINER_CREATED) c->started_at = S(T0 + 10);
  if (st == NL_RT_CONTAINER_EXITED) {
    c->finished_at = S(T0 + 20);
    c->exit_code = exit_code;
    c->reason = nl_xstrdup(exit_code == 0 ? "Completed" : "Error");
  }
  c->image = nl_xstrdup("localhost/busybox:1");
  c->image_ref = nl_xstrdup("sha256:feed");
  c->restart_count = rc;
  c->sandbox_id = rt->n_sandboxes ? nl_xstrdup(rt->sandboxes[0].id) : NULL;
  return c;
}

static nl_pod_status_t *gen(const nl_pod_t *pod, const nl_rt_pod_status_t *rt,
                            const nl_status_reasons_t *r, const nl_pod_status_t *old, bool terminal) {
  return nl_pod_status_generate(pod, rt, r, old, terminal, S(T0 + 100), NULL, NULL);
}

static const nl_container_status_t *cs(const nl_pod_status_t *s, const char *name) {
  for (size_t i = 0; i < s->n_container_statuses; i++)
    if (!strcmp(s->container_statuses[i].name, name)) return &s->container_statuses[i];
  for (size_t i = 0; i < s->n_init_container_statuses; i++)
    if (!strcmp(s->init_container_statuses[i].name, name)) return &s->init_container_statuses[i];
  fail_msg("no status for %s", name);
  return NULL;
}

static const nl_pod_condition_t *cond(const nl_pod_status_t *s, const char *type) {
  for (size_t i = 0; i < s->n_conditions; i++)
    if (!strcmp(s->conditions[i].type, type)) return &s->conditions[i];
  fail_msg("no condition %s", type);
  return NULL;
}

/* ---- phases ---- */

static nl_pod_phase_t phase_with(const char *policy, nl_rt_container_state_t a, int ea,
                                 nl_rt_container_state_t b, int eb, bool terminal) {
  nl_pod_t *pod = pod2(policy);
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca", "a", a, ea, 0);
  rt_c(rt, "cb", "b", b, eb, 0);
  nl_pod_status_t *s = gen(pod, rt, NULL, NULL, terminal);
  nl_pod_phase_t ph = s->phase;
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
  return ph;
}

static void phase_rules_regular_containers(void **state) {
  const nl_rt_container_state_t R = NL_RT_CONTAINER_RUNNING, E = NL_RT_CONTAINER_EXITED,
                                C = NL_RT_CONTAINER_CREATED;
  /* nothing yet: Pending */
  nl_pod_t *pod = pod2("Always");
  nl_pod_status_t *s = gen(pod, NULL, NULL, NULL, false);
  assert_int_equal(s->phase, NL_POD_PENDING);
  nl_pod_status_free(s);
  nl_pod_free(pod);
  /* all running */
  assert_int_equal(phase_with("Always", R, 0, R, 0, false), NL_POD_RUNNING);
  /* one created (waiting): Pending */
  assert_int_equal(phase_with("Always", R, 0, C, 0, false), NL_POD_PENDING);
  /* one running, one exited: Running whatever the policy */
  assert_int_equal(phase_with("Never", R, 0, E, 1, false), NL_POD_RUNNING);
  /* all exited, success */
  assert_int_equal(phase_with("Always", E, 0, E, 0, false), NL_POD_RUNNING);
  assert_int_equal(phase_with("OnFailure", E, 0, E, 0, false), NL_POD_SUCCEEDED);
  assert_int_equal(phase_with("Never", E, 0, E, 0, false), NL_POD_SUCCEEDED);
  /* all exited, one failed */
  assert_int_equal(phase_with("Always", E, 0, E, 1, false), NL_POD_RUNNING);
  assert_int_equal(phase_with("OnFailure", E, 0, E, 1, false), NL_POD_RUNNING);
  assert_int_equal(phase_with("Never", E, 0, E, 1, false), NL_POD_FAILED);
  /* a terminal pod is not restarted: Succeeded/Failed even under Always */
  assert_int_equal(phase_with("Always", E, 0, E, 0, true), NL_POD_SUCCEEDED);
  assert_int_equal(phase_with("Always", E, 0, E, 137, true), NL_POD_FAILED);
}

static void phase_container_restart_rules(void **state) {
  (void)state;
  /* an Always pod whose one container may not restart (its own Never): Failed
   * once it exits 1, Succeeded once it exits 0; no longer Running */
  nl_pod_t *pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
                         "spec:\n  restartPolicy: Always\n  containers:\n"
                         "  - {name: a, image: busybox, restartPolicy: Never, restartPolicyRules: "
                         "[{action: Restart, exitCodes: {operator: In, values: [42]}}]}\n");
  nl_container_status_t st = {.name = "a", .state = {.kind = NL_CSTATE_TERMINATED, .exit_code = 1}};
  assert_int_equal(nl_pod_status_phase(pod, &st, 1, false, true), NL_POD_FAILED);
  st.state.exit_code = 0;
  assert_int_equal(nl_pod_status_phase(pod, &st, 1, false, true), NL_POD_SUCCEEDED);
  /* exit 42 matches the rule: restarting, Running (also while waiting in back-off) */
  st.state.exit_code = 42;
  assert_int_equal(nl_pod_status_phase(pod, &st, 1, false, true), NL_POD_RUNNING);
  nl_container_status_t w = {.name = "a", .state = {.kind = NL_CSTATE_WAITING},
                             .last_state = {.kind = NL_CSTATE_TERMINATED, .exit_code = 42}};
  assert_int_equal(nl_pod_status_phase(pod, &w, 1, false, true), NL_POD_RUNNING);
  nl_pod_free(pod);
  /* a Never pod whose container's own Always restarts it */
  pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
               "spec:\n  restartPolicy: Never\n  containers:\n  - {name: a, image: busybox, restartPolicy: Always}\n");
  st.state.exit_code = 1;
  assert_int_equal(nl_pod_status_phase(pod, &st, 1, false, true), NL_POD_RUNNING);
  nl_pod_free(pod);
  /* an init container that failed and may not restart fails the Always pod */
  pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
               "spec:\n  restartPolicy: Always\n  initContainers:\n  - {name: init, image: busybox, restartPolicy: Never}\n"
               "  containers:\n  - {name: app, image: busybox}\n");
  nl_container_status_t v[2] = {{.name = "init", .state = {.kind = NL_CSTATE_TERMINATED, .exit_code = 3}},
                                {.name = "app", .state = {.kind = NL_CSTATE_WAITING}}};
  assert_int_equal(nl_pod_status_phase(pod, v, 2, false, false), NL_POD_FAILED);
  nl_pod_free(pod);
}

/* An in-place restart of all containers (RestartAllContainers), step by step
 * as the runtime shows it: the source container exits 42 (the condition turns
 * True, the Never pod stays Running), the containers are removed (each waits
 * with the removal as its last state and one more restart; the condition
 * False), then they run again (the count and the last state stay). */
static void restart_all_containers_in_place(void **state) {
  (void)state;
  nl_pod_t *pod = pod_of(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
      "spec:\n  restartPolicy: Never\n  initContainers:\n  - {name: init, image: busybox}\n"
      "  containers:\n  - {name: src, image: busybox, restartPolicy: Never, restartPolicyRules: "
      "[{action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}]}\n"
      "  - {name: app, image: busybox}\n");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.9");
  rt_c(rt, "c-src", "src", NL_RT_CONTAINER_EXITED, 42, 0);
  rt_c(rt, "c-app", "app", NL_RT_CONTAINER_RUNNING, 0, 0);
  rt_c(rt, "c-init", "init", NL_RT_CONTAINER_EXITED, 0, 0);
  nl_pod_status_t *s1 = gen(pod, rt, NULL, NULL, false);
  const nl_pod_condition_t *c = cond(s1, "AllContainersRestarting");
  assert_string_equal(c->status, "True");
  assert_string_equal(c->reason, "RestartAllContainersStarted");
  assert_true(nl_pod_status_restarting_all(s1));
  assert_int_equal(s1->phase, NL_POD_RUNNING);

  /* removed: only the sandbox is left */
  nl_rt_pod_status_free(rt);
  rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.9");
  nl_pod_status_t *s2 = gen(pod, rt, NULL, s1, false);
  assert_false(nl_pod_status_restarting_all(s2));
  assert_string_equal(cond(s2, "AllContainersRestarting")->status, "False");
  assert_string_equal(cond(s2, "Initialized")->status, "True");
  assert_int_equal(s2->phase, NL_POD_RUNNING);
  const char *names[] = {"init", "src", "app"};
  for (size_t i = 0; i < 3; i++) {
    const nl_container_status_t *x = cs(s2, names[i]);
    assert_int_equal(x->state.kind, NL_CSTATE_WAITING);
    assert_string_equal(x->state.reason, "RestartingAllContainers");
    assert_int_equal(x->last_state.kind, NL_CSTATE_TERMINATED);
    assert_string_equal(x->last_state.reason, "RestartingAllContainers");
    assert_int_equal(x->last_state.exit_code, 137);
    assert_int_equal(x->restart_count, 1);
  }

  /* started again: the init container from its logs' count (1), the others
   * running with theirs */
  nl_rt_pod_status_free(rt);
  rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.9");
  rt_c(rt, "c-src2", "src", NL_RT_CONTAINER_RUNNING, 0, 0)->restart_count = 1;
  rt_c(rt, "c-app2", "app", NL_RT_CONTAINER_RUNNING, 0, 0)->restart_count = 1;
  rt_c(rt, "c-init2", "init", NL_RT_CONTAINER_EXITED, 0, 0)->restart_count = 1;
  nl_pod_status_t *s3 = gen(pod, rt, NULL, s2, false);
  assert_false(nl_pod_status_restarting_all(s3));
  assert_int_equal(s3->phase, NL_POD_RUNNING);
  for (size_t i = 0; i < 3; i++) {
    const nl_container_status_t *x = cs(s3, names[i]);
    assert_int_equal(x->restart_count, 1);
    assert_int_equal(x->last_state.kind, NL_CSTATE_TERMINATED);
    assert_string_equal(x->last_state.reason, "RestartingAllContainers");
  }
  assert_int_equal(cs(s3, "src")->state.kind, NL_CSTATE_RUNNING);
  /* and no second restart: a status from this one stays calm */
  nl_pod_status_t *s4 = gen(pod, rt, NULL, s3, false);
  assert_false(nl_pod_status_restarting_all(s4));
  assert_int_equal(cs(s4, "app")->restart_count, 1);

  /* after an agent restart (no status of its own yet) the API's condition
   * says a restart is under way: it goes on */
  nl_pod_t *api = pod_of(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
      "spec:\n  restartPolicy: Never\n  containers:\n  - {name: src, image: busybox, restartPolicy: Never, "
      "restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}]}\n"
      "status:\n  conditions:\n  - {type: AllContainersRestarting, status: \"True\"}\n");
  nl_pod_status_t *s6 = gen(api, rt, NULL, NULL, false);
  assert_true(nl_pod_status_restarting_all(s6));
  nl_pod_status_free(s6);
  nl_pod_free(api);

  /* a pod without such a rule has no AllContainersRestarting condition */
  nl_pod_t *plain = pod2("Always");
  nl_pod_status_t *s5 = gen(plain, rt, NULL, NULL, false);
  for (size_t i = 0; i < s5->n_conditions; i++)
    assert_string_not_equal(s5->conditions[i].type, "AllContainersRestarting");
  nl_pod_status_free(s5);
  nl_pod_free(plain);
  nl_pod_status_free(s4);
  nl_pod_status_free(s3);
  nl_pod_status_free(s2);
  nl_pod_status_free(s1);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

static void phase_rules_static_pods_and_unknown(void **state) {
  /* TODO upstream #116484: static pods get no terminal phase from podIsTerminal */
  nl_pod_t *pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  uid: u1\n"
                         "  annotations: {kubernetes.io/config.source: file}\n"
                         "spec:\n  containers:\n  - {name: a, image: busybox}\n");
  nl_container_status_t st = {.name = "a", .state = {.kind = NL_CSTATE_TERMINATED}};
  assert_int_equal(nl_pod_status_phase(pod, &st, 1, true, true), NL_POD_RUNNING);
  st.state.exit_code = 2;
  assert_int_equal(nl_pod_status_phase(pod, &st, 1, true, true), NL_POD_RUNNING);
  /* a container without any status is unknown: Pending */
  assert_int_equal(nl_pod_status_phase(pod, NULL, 0, false, false), NL_POD_PENDING);
  /* waiting after a termination counts as stopped (restarting) */
  nl_container_status_t w = {.name = "a", .state = {.kind = NL_CSTATE_WAITING},
                             .last_state = {.kind = NL_CSTATE_TERMINATED, .exit_code = 1}};
  assert_int_equal(nl_pod_status_phase(pod, &w, 1, false, true), NL_POD_RUNNING);
  w.last_state.kind = NL_CSTATE_NONE;
  assert_int_equal(nl_pod_status_phase(pod, &w, 1, false, true), NL_POD_PENDING);
  nl_pod_free(pod);
}

static void phase_rules_init_containers(void **state) {
  nl_container_status_t v[2] = {{.name = "init"}, {.name = "app"}};
  /* init running, app waiting */
  nl_pod_t *pod = pod_init("Always", false);
  v[0].state.kind = NL_CSTATE_RUNNING;
  v[1].state.kind = NL_CSTATE_WAITING;
  assert_int_equal(nl_pod_status_phase(pod, v, 2, false, false), NL_POD_PENDING);
  /* init without status: pending */
  assert_int_equal(nl_pod_status_phase(pod, v + 1, 1, false, false), NL_POD_PENDING);
  /* init done, app running */
  v[0].state.kind = NL_CSTATE_TERMINATED;
  v[1].state.kind = NL_CSTATE_RUNNING;
  assert_int_equal(nl_pod_status_phase(pod, v, 2, false, true), NL_POD_RUNNING);
  /* init failed: Failed only under Never */
  v[0].state.exit_code = 1;
  v[1].state.kind = NL_CSTATE_WAITING;
  assert_int_equal(nl_pod_status_phase(pod, v, 2, false, false), NL_POD_PENDING);
  nl_pod_free(pod);
  pod = pod_init("Never", false);
  assert_int_equal(nl_pod_status_phase(pod, v, 2, false, false), NL_POD_FAILED);
  /* ... also when the failure is the lastState of a waiting init container */
  v[0].state.kind = NL_CSTATE_WAITING;
  v[0].last_state.kind = NL_CSTATE_TERMINATED;
  v[0].last_state.exit_code = 1;
  assert_int_equal(nl_pod_status_phase(pod, v, 2, false, false), NL_POD_FAILED);
  nl_pod_free(pod);

  /* sidecars: running but not started keeps the pod Pending until initialized */
  pod = pod_init("Always", true);
  memset(v, 0, sizeof v);
  v[0].name = "init";
  v[1].name = "app";
  v[0].state.kind = NL_CSTATE_RUNNING;
  v[0].started = 0;
  v[1].state.kind = NL_CSTATE_WAITING;
  assert_int_equal(nl_pod_status_phase(pod, v, 2, false, false), NL_POD_PENDING);
  v[1].state.kind = NL_CSTATE_RUNNING;
  assert_int_equal(nl_pod_status_phase(pod, v, 2, false, true), NL_POD_RUNNING);
  /* a stopped sidecar does not count; the app finishing decides */
  v[0].state.kind = NL_CSTATE_TERMINATED;
  v[1].state.kind = NL_CSTATE_TERMINATED;
  assert_int_equal(nl_pod_status_phase(pod, v, 2, true, true), NL_POD_SUCCEEDED);
  /* sidecar without status: unknown -> Pending */
  assert_int_equal(nl_pod_status_phase(pod, v + 1, 1, false, true), NL_POD_PENDING);
  nl_pod_free(pod);
}

static void terminal_phase_is_kept(void **state) {
  nl_pod_t *pod = pod2("Never");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_EXITED, 0, 0);
  rt_c(rt, "cb", "b", NL_RT_CONTAINER_EXITED, 0, 0);
  nl_pod_status_t *old = gen(pod, rt, NULL, NULL, false);
  assert_int_equal(old->phase, NL_POD_SUCCEEDED);
  free(old->reason);
  old->reason = nl_xstrdup("Done");
  /* the runtime forgot everything: still Succeeded, with its reason */
  nl_pod_status_t *s = gen(pod, NULL, NULL, old, false);
  assert_int_equal(s->phase, NL_POD_SUCCEEDED);
  assert_string_equal(s->reason, "Done");
  nl_pod_status_free(s);
  nl_pod_status_free(old);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

/* A pod the kubelet stopped itself (node shutdown), from the runtime status
 * after the kill: Failed with the reason and message when a container died of
 * the signal; Succeeded without them when all exited 0 (upstream's status
 * after the kill keeps the reason only with the phase Failed); the
 * DisruptionTarget condition either way. */
static void terminated_by_kubelet_keeps_the_reason_with_failed(void **state) {
  const char *msg = "Pod was terminated in response to imminent node shutdown.";
  for (int exit_b = 0; exit_b <= 143; exit_b += 143) {
    nl_pod_t *pod = pod2("Always");
    nl_rt_pod_status_t *rt = rt_new();
    rt_sandbox(rt, "sb", false, NULL);
    rt_c(rt, "ca", "a", NL_RT_CONTAINER_EXITED, 0, 0);
    rt_c(rt, "cb", "b", NL_RT_CONTAINER_EXITED, exit_b, 0);
    nl_pod_status_t *s = gen(pod, rt, NULL, NULL, true);
    nl_pod_status_terminated_by_kubelet(s, NULL, "Terminated", msg, NULL, S(T0 + 100));
    if (exit_b == 0) {
      assert_int_equal(s->phase, NL_POD_SUCCEEDED);
      assert_null(s->reason);
      assert_null(s->message);
    } else {
      assert_int_equal(s->phase, NL_POD_FAILED);
      assert_string_equal(s->reason, "Terminated");
      assert_string_equal(s->message, msg);
    }
    const nl_pod_condition_t *c = cond(s, "DisruptionTarget");
    assert_string_equal(c->status, "True");
    assert_string_equal(c->reason, "TerminationByKubelet");
    assert_string_equal(c->message, msg);
    nl_pod_status_free(s);
    /* preemption: the condition says more than the message */
    s = gen(pod, rt, NULL, NULL, true);
    nl_pod_status_terminated_by_kubelet(s, NULL, "Preempting", "Preempted in order to admit critical pod",
                                        "Pod was preempted by Kubelet to accommodate a critical pod.",
                                        S(T0 + 100));
    if (exit_b) assert_string_equal(s->message, "Preempted in order to admit critical pod");
    assert_string_equal(cond(s, "DisruptionTarget")->message,
                        "Pod was preempted by Kubelet to accommodate a critical pod.");
    nl_pod_status_free(s);
    nl_rt_pod_status_free(rt);
    nl_pod_free(pod);
  }
  (void)state;
}

/* upstream TerminatePod: a pod that never ran still ends Failed, its
 * containers terminated; containers that never started behind a failing init
 * container stay waiting; a terminal phase is kept. */
static void terminate_gives_a_terminal_phase(void **state) {
  /* an image that cannot be pulled: Pending, then Failed, the container 137 */
  nl_pod_t *pod = pod2("Always");
  nl_status_reason_t r = {"a", "ImagePullBackOff", "Back-off pulling image"};
  nl_status_reasons_t rs = {&r, 1};
  nl_pod_status_t *s = gen(pod, NULL, &rs, NULL, true);
  assert_int_equal(s->phase, NL_POD_PENDING);
  nl_pod_status_terminate(s, pod);
  assert_int_equal(s->phase, NL_POD_FAILED);
  assert_int_equal(cs(s, "a")->state.kind, NL_CSTATE_TERMINATED);
  assert_string_equal(cs(s, "a")->state.reason, "ContainerStatusUnknown");
  assert_string_equal(cs(s, "a")->state.message,
                      "The container could not be located when the pod was terminated");
  assert_int_equal(cs(s, "a")->state.exit_code, 137);
  assert_int_equal(cs(s, "b")->state.kind, NL_CSTATE_TERMINATED);
  nl_pod_status_free(s);
  nl_pod_free(pod);

  /* an init container that crash-loops: the init container is terminated, the
   * app container (never started) stays waiting */
  pod = pod_init("Always", false);
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", false, NULL);
  rt_c(rt, "i2", "init", NL_RT_CONTAINER_EXITED, 1, 1);
  s = gen(pod, rt, NULL, NULL, true);
  assert_int_equal(s->phase, NL_POD_PENDING);
  nl_pod_status_terminate(s, pod);
  assert_int_equal(s->phase, NL_POD_FAILED);
  assert_int_equal(cs(s, "init")->state.kind, NL_CSTATE_TERMINATED);
  assert_int_equal(cs(s, "init")->state.exit_code, 1); /* its own, kept */
  assert_int_equal(cs(s, "app")->state.kind, NL_CSTATE_WAITING);
  assert_string_equal(cs(s, "app")->state.reason, "PodInitializing");
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);

  /* nothing ever started: the first init container is marked terminated */
  s = gen(pod, NULL, NULL, NULL, true);
  nl_pod_status_terminate(s, pod);
  assert_int_equal(s->phase, NL_POD_FAILED);
  assert_string_equal(cs(s, "init")->state.reason, "ContainerStatusUnknown");
  assert_int_equal(cs(s, "app")->state.kind, NL_CSTATE_WAITING);
  nl_pod_status_free(s);
  nl_pod_free(pod);

  /* Succeeded stays Succeeded */
  pod = pod2("Never");
  rt = rt_new();
  rt_sandbox(rt, "sb", false, NULL);
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_EXITED, 0, 0);
  rt_c(rt, "cb", "b", NL_RT_CONTAINER_EXITED, 0, 0);
  s = gen(pod, rt, NULL, NULL, true);
  nl_pod_status_terminate(s, pod);
  assert_int_equal(s->phase, NL_POD_SUCCEEDED);
  assert_string_equal(cs(s, "a")->state.reason, "Completed");
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);

  /* a static pod keeps its phase (upstream's TODO) */
  pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1, "
               "annotations: {kubernetes.io/config.source: file}}\n"
               "spec:\n  containers:\n  - {name: a, image: busybox}\n");
  s = gen(pod, NULL, NULL, NULL, true);
  nl_pod_status_terminate(s, pod);
  assert_int_equal(s->phase, NL_POD_PENDING);
  assert_int_equal(cs(s, "a")->state.kind, NL_CSTATE_TERMINATED);
  nl_pod_status_free(s);
  nl_pod_free(pod);
}

/* upstream GeneratePodReadyCondition: with ready containers, Ready is True only
 * once every readiness gate's condition (in the API's status) is True; and
 * NeedToReconcilePodReadiness tells when the API's Ready disagrees. */
static nl_pod_t *gated_pod(const char *c1, const char *c2, const char *ready, const char *msg) {
  char y[1400], conds[700] = "";
  size_t n = 0;
  if (c1) n += (size_t)snprintf(conds + n, sizeof conds - n, "  - {type: example.com/one, status: \"%s\"}\n", c1);
  if (c2) n += (size_t)snprintf(conds + n, sizeof conds - n, "  - {type: example.com/two, status: \"%s\"}\n", c2);
  if (ready)
    snprintf(conds + n, sizeof conds - n,
             "  - {type: ContainersReady, status: \"True\"}\n"
             "  - {type: Ready, status: \"%s\", message: '%s'}\n", ready, msg);
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
           "spec:\n  containers:\n  - {name: a, image: busybox}\n"
           "  readinessGates: [{conditionType: example.com/one}, {conditionType: example.com/two}]\n"
           "status:\n  conditions:\n%s", conds[0] ? conds : "    []\n");
  return pod_of(y);
}

static void readiness_gates(void **state) {
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_RUNNING, 0, 0);
  nl_pod_t *pod = gated_pod(NULL, NULL, NULL, NULL);
  nl_pod_status_t *s = gen(pod, rt, NULL, NULL, false);
  assert_string_equal(cond(s, "ContainersReady")->status, "True");
  assert_string_equal(cond(s, "Ready")->status, "False");
  assert_string_equal(cond(s, "Ready")->reason, "ReadinessGatesNotReady");
  assert_string_equal(cond(s, "Ready")->message,
                      "corresponding condition of pod readiness gate \"example.com/one\" does not "
                      "exist., corresponding condition of pod readiness gate \"example.com/two\" "
                      "does not exist.");
  nl_pod_status_free(s);
  nl_pod_free(pod);

  pod = gated_pod("True", "False", NULL, NULL);
  s = gen(pod, rt, NULL, NULL, false);
  assert_string_equal(cond(s, "Ready")->status, "False");
  assert_string_equal(cond(s, "Ready")->message,
                      "the status of pod readiness gate \"example.com/two\" is not \"True\", but False");
  nl_pod_status_free(s);
  nl_pod_free(pod);

  pod = gated_pod("True", "True", NULL, NULL);
  s = gen(pod, rt, NULL, NULL, false);
  assert_string_equal(cond(s, "Ready")->status, "True");
  assert_null(cond(s, "Ready")->reason);
  nl_pod_status_free(s);
  nl_pod_free(pod);

  /* the API's Ready agrees with the gates: nothing to do; a gate set since: sync */
  pod = gated_pod("True", "True", "True", "");
  assert_false(nl_pod_status_ready_needs_reconcile(pod));
  nl_pod_free(pod);
  pod = gated_pod("True", "True", "False", "whatever");
  assert_true(nl_pod_status_ready_needs_reconcile(pod));
  nl_pod_free(pod);
  pod = gated_pod("False", "True", "True", "");
  assert_true(nl_pod_status_ready_needs_reconcile(pod));
  nl_pod_free(pod);
  pod = gated_pod("True", NULL, NULL, NULL); /* no Ready in the API yet */
  assert_false(nl_pod_status_ready_needs_reconcile(pod));
  nl_pod_free(pod);
  nl_rt_pod_status_free(rt);
}

/* ephemeralContainerStatuses: in spec order, after qosClass in JSON; the phase
 * and the conditions are the regular containers' alone. */
static void ephemeral_container_statuses(void **state) {
  nl_pod_t *pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
                         "spec:\n  containers:\n  - {name: a, image: busybox}\n"
                         "  ephemeralContainers:\n  - {name: dbg, image: busybox}\n"
                         "  - {name: late, image: busybox}\n");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_RUNNING, 0, 0);
  rt_c(rt, "cd", "dbg", NL_RT_CONTAINER_EXITED, 1, 0);
  nl_pod_status_t *s = gen(pod, rt, NULL, NULL, false);
  assert_int_equal(s->phase, NL_POD_RUNNING);
  assert_string_equal(cond(s, "Ready")->status, "True");
  assert_int_equal(s->n_container_statuses, 1);
  assert_int_equal(s->n_ephemeral_container_statuses, 2);
  assert_string_equal(s->ephemeral_container_statuses[0].name, "dbg");
  assert_int_equal(s->ephemeral_container_statuses[0].state.kind, NL_CSTATE_TERMINATED);
  assert_int_equal(s->ephemeral_container_statuses[0].state.exit_code, 1);
  assert_string_equal(s->ephemeral_container_statuses[1].name, "late");
  assert_int_equal(s->ephemeral_container_statuses[1].state.kind, NL_CSTATE_WAITING);
  nl_pod_status_t *d = nl_pod_status_dup(s);
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_status_encode_json(d, &b);
  assert_non_null(strstr(b.data, "\"qosClass\":\"BestEffort\",\"ephemeralContainerStatuses\":[{"));
  nl_buf_free(&b);
  nl_pod_status_free(d);
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

/* ---- waiting reasons ---- */

static void waiting_default_reasons(void **state) {
  nl_pod_t *pod = pod2("Always");
  nl_pod_status_t *s = gen(pod, NULL, NULL, NULL, false);
  assert_int_equal(cs(s, "a")->state.kind, NL_CSTATE_WAITING);
  assert_string_equal(cs(s, "a")->state.reason, "ContainerCreating");
  assert_string_equal(cs(s, "a")->image, "busybox:2"); /* the spec's image */
  assert_string_equal(cs(s, "a")->image_id, "");
  assert_null(cs(s, "a")->container_id);
  assert_int_equal(cs(s, "a")->started, 0);
  nl_pod_status_free(s);
  nl_pod_free(pod);

  pod = pod_init("Always", false);
  s = gen(pod, NULL, NULL, NULL, false);
  assert_string_equal(cs(s, "app")->state.reason, "PodInitializing");
  assert_string_equal(cs(s, "init")->state.reason, "PodInitializing");
  nl_pod_status_free(s);
  nl_pod_free(pod);

  /* created but not started: waiting without a reason */
  pod = pod2("Always");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_CREATED, 0, 0);
  s = gen(pod, rt, NULL, NULL, false);
  assert_int_equal(cs(s, "a")->state.kind, NL_CSTATE_WAITING);
  assert_null(cs(s, "a")->state.reason);
  assert_string_equal(cs(s, "a")->container_id, "containerd://ca");
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

static void waiting_reasons_from_sync(void **state) {
  static const char *const reasons[] = {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull",
                                        "InvalidImageName", "CreateContainerConfigError",
                                        "CreateContainerError", "RunContainerError",
                                        "PreStartHookError", "PostStartHookError"};
  nl_pod_t *pod = pod2("Always");
  for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++) {
    nl_status_reason_t r = {"a", reasons[i], "details here"};
    nl_status_reasons_t rs = {&r, 1};
    nl_pod_status_t *s = gen(pod, NULL, &rs, NULL, false);
    assert_int_equal(cs(s, "a")->state.kind, NL_CSTATE_WAITING);
    assert_string_equal(cs(s, "a")->state.reason, reasons[i]);
    assert_string_equal(cs(s, "a")->state.message, "details here");
    assert_string_equal(cs(s, "b")->state.reason, "ContainerCreating"); /* only "a" */
    assert_int_equal(s->phase, NL_POD_PENDING);
    nl_pod_status_free(s);
  }
  nl_pod_free(pod);
}

static void crash_loop_back_off_moves_terminated_to_last_state(void **state) {
  nl_pod_t *pod = pod2("Always");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca2", "a", NL_RT_CONTAINER_EXITED, 2, 3);
  rt_c(rt, "cb", "b", NL_RT_CONTAINER_RUNNING, 0, 0);
  nl_status_reason_t r = {"a", "CrashLoopBackOff",
                          "back-off 40s restarting failed container=a pod=p_default(u1)"};
  nl_status_reasons_t rs = {&r, 1};
  nl_pod_status_t *s = gen(pod, rt, &rs, NULL, false);
  const nl_container_status_t *a = cs(s, "a");
  assert_int_equal(a->state.kind, NL_CSTATE_WAITING);
  assert_string_equal(a->state.reason, "CrashLoopBackOff");
  assert_int_equal(a->last_state.kind, NL_CSTATE_TERMINATED);
  assert_int_equal(a->last_state.exit_code, 2);
  assert_string_equal(a->last_state.reason, "Error");
  assert_string_equal(a->last_state.container_id, "containerd://ca2");
  assert_int_equal(a->restart_count, 3);
  assert_false(a->ready);
  assert_int_equal(s->phase, NL_POD_RUNNING); /* b runs, a is stopped (restarting) */
  /* a running container keeps its state whatever the reason cache says */
  nl_status_reason_t rb = {"b", "CrashLoopBackOff", "x"};
  nl_status_reasons_t rsb = {&rb, 1};
  nl_pod_status_t *s2 = gen(pod, rt, &rsb, NULL, false);
  assert_int_equal(cs(s2, "b")->state.kind, NL_CSTATE_RUNNING);
  nl_pod_status_free(s2);
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);

  /* Never: a dead container will not be restarted, so no waiting reason */
  pod = pod2("Never");
  rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_EXITED, 1, 0);
  s = gen(pod, rt, &rs, NULL, false);
  assert_int_equal(cs(s, "a")->state.kind, NL_CSTATE_TERMINATED);
  nl_pod_status_free(s);
  /* deleted pods are not restarted either */
  nl_status_opts_t o = {.deleted = true};
  s = nl_pod_status_generate(pod, rt, &rs, NULL, false, S(T0), NULL, &o);
  assert_string_equal(cs(s, "b")->state.reason, "ContainerCreating");
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

/* ---- container status fields ---- */

static void container_fields_and_history(void **state) {
  nl_pod_t *pod = pod2("Always");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca3", "a", NL_RT_CONTAINER_RUNNING, 0, 2); /* newest */
  rt_c(rt, "ca2", "a", NL_RT_CONTAINER_EXITED, 1, 1);
  rt_c(rt, "ca1", "a", NL_RT_CONTAINER_EXITED, 1, 0); /* ignored: only two kept */
  nl_status_opts_t o = {.runtime_name = "cri-o"};
  nl_pod_status_t *s = nl_pod_status_generate(pod, rt, NULL, NULL, false, S(T0), NULL, &o);
  const nl_container_status_t *a = cs(s, "a");
  assert_string_equal(a->container_id, "cri-o://ca3");
  assert_int_equal(a->state.kind, NL_CSTATE_RUNNING);
  assert_int_equal(a->state.started_at, T0 + 10);
  assert_int_equal(a->last_state.kind, NL_CSTATE_TERMINATED);
  assert_string_equal(a->last_state.container_id, "cri-o://ca2");
  assert_int_equal(a->last_state.started_at, T0 + 10);
  assert_int_equal(a->last_state.finished_at, T0 + 20);
  assert_int_equal(a->restart_count, 2);
  assert_string_equal(a->image, "localhost/busybox:1");
  assert_string_equal(a->image_id, "sha256:feed");
  assert_true(a->ready);
  assert_int_equal(a->started, 1);
  /* sorted by name */
  assert_string_equal(s->container_statuses[0].name, "a");
  assert_string_equal(s->container_statuses[1].name, "b");
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

static nl_status_probe_t probe(void *ctx, const char *name, const char *id, bool startup) {
  int *mode = ctx;
  assert_string_equal(id, "ca"); /* the CRI id, without scheme */
  if (startup) return *mode == 0 ? NL_STATUS_PROBE_PENDING : NL_STATUS_PROBE_SUCCESS;
  return *mode == 2 ? NL_STATUS_PROBE_SUCCESS : NL_STATUS_PROBE_FAILURE;
}

static void probes_set_started_and_ready(void **state) {
  nl_pod_t *pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, uid: u1}\n"
                         "spec:\n  containers:\n  - {name: a, image: busybox}\n");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_RUNNING, 0, 0);
  int mode = 0;
  nl_status_opts_t o = {.probe = probe, .probe_ctx = &mode};
  const char *expect_reason[] = {"ContainersNotReady", "ContainersNotReady", NULL};
  for (mode = 0; mode < 3; mode++) {
    nl_pod_status_t *s = nl_pod_status_generate(pod, rt, NULL, NULL, false, S(T0), NULL, &o);
    assert_int_equal(cs(s, "a")->started, mode > 0);
    assert_int_equal(cs(s, "a")->ready, mode == 2);
    const nl_pod_condition_t *c = cond(s, "Ready");
    assert_string_equal(c->status, mode == 2 ? "True" : "False");
    if (expect_reason[mode]) {
      assert_string_equal(c->reason, expect_reason[mode]);
      assert_string_equal(c->message, "containers with unready status: [a]");
    }
    nl_pod_status_free(s);
  }
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

static void lost_containers(void **state) {
  nl_pod_t *pod = pod2("Always");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_RUNNING, 0, 4);
  rt_c(rt, "cb", "b", NL_RT_CONTAINER_RUNNING, 0, 1);
  nl_pod_status_t *old = gen(pod, rt, NULL, NULL, false);
  nl_rt_pod_status_free(rt);

  /* a: the runtime says unknown; b: gone altogether */
  rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_UNKNOWN, 0, 4);
  nl_pod_status_t *s = gen(pod, rt, NULL, old, false);
  const nl_container_status_t *a = cs(s, "a");
  assert_int_equal(a->state.kind, NL_CSTATE_TERMINATED);
  assert_string_equal(a->state.reason, "ContainerStatusUnknown");
  assert_string_equal(a->state.message, "The container could not be located when the pod was terminated");
  assert_int_equal(a->state.exit_code, 137);
  assert_int_equal(a->restart_count, 5);
  const nl_container_status_t *b = cs(s, "b");
  assert_int_equal(b->state.kind, NL_CSTATE_WAITING);
  assert_int_equal(b->last_state.kind, NL_CSTATE_TERMINATED);
  assert_string_equal(b->last_state.reason, "ContainerStatusUnknown");
  assert_int_equal(b->last_state.exit_code, 137);
  assert_int_equal(b->restart_count, 2);
  assert_int_not_equal(s->phase, NL_POD_PENDING);
  nl_pod_status_free(s);
  nl_pod_status_free(old);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

static void removed_init_container_counts_as_completed(void **state) {
  nl_pod_t *pod = pod_init("Always", false);
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "capp", "app", NL_RT_CONTAINER_RUNNING, 0, 0);
  nl_pod_status_t *s = gen(pod, rt, NULL, NULL, false);
  const nl_container_status_t *i = cs(s, "init");
  assert_int_equal(i->state.kind, NL_CSTATE_TERMINATED);
  assert_string_equal(i->state.reason, "Completed");
  assert_int_equal(i->state.exit_code, 0);
  assert_true(i->ready);
  assert_string_equal(cond(s, "Initialized")->status, "True");
  assert_int_equal(s->phase, NL_POD_RUNNING);
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

/* ---- conditions, IPs, QoS, continuity ---- */

static void conditions_and_continuity(void **state) {
  nl_pod_t *pod = pod_init("Always", false);
  nl_pod_status_t *s1 = nl_pod_status_generate(pod, NULL, NULL, NULL, false, S(T0), NULL, NULL);
  assert_int_equal(s1->n_conditions, 5);
  const char *order[] = {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                         "PodScheduled"};
  for (int k = 0; k < 5; k++) assert_string_equal(s1->conditions[k].type, order[k]);
  assert_string_equal(cond(s1, "PodReadyToStartContainers")->status, "False");
  const nl_pod_condition_t *ini = cond(s1, "Initialized");
  assert_string_equal(ini->status, "False");
  assert_string_equal(ini->reason, "ContainersNotInitialized");
  assert_string_equal(ini->message, "containers with incomplete status: [init]");
  assert_string_equal(cond(s1, "Ready")->reason, "ContainersNotReady");
  assert_string_equal(cond(s1, "Ready")->message, "containers with unready status: [app]");
  assert_string_equal(cond(s1, "PodScheduled")->status, "True");
  assert_int_equal(s1->start_time, T0);
  for (int k = 0; k < 5; k++) assert_int_equal(s1->conditions[k].last_transition_time, T0);

  /* sandbox up, init running: only PodReadyToStartContainers changes */
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ci", "init", NL_RT_CONTAINER_RUNNING, 0, 0);
  nl_pod_status_t *s2 = nl_pod_status_generate(pod, rt, NULL, s1, false, S(T0 + 5), NULL, NULL);
  assert_string_equal(cond(s2, "PodReadyToStartContainers")->status, "True");
  assert_int_equal(cond(s2, "PodReadyToStartContainers")->last_transition_time, T0 + 5);
  assert_int_equal(cond(s2, "Initialized")->last_transition_time, T0);
  assert_int_equal(s2->start_time, T0);
  assert_int_equal(s2->phase, NL_POD_PENDING);
  nl_rt_pod_status_free(rt);

  /* init done, app running: everything True */
  rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "capp", "app", NL_RT_CONTAINER_RUNNING, 0, 0);
  rt_c(rt, "ci", "init", NL_RT_CONTAINER_EXITED, 0, 0);
  nl_pod_status_t *s3 = nl_pod_status_generate(pod, rt, NULL, s2, false, S(T0 + 9), NULL, NULL);
  for (int k = 0; k < 5; k++) assert_string_equal(s3->conditions[k].status, "True");
  assert_null(cond(s3, "Ready")->reason);
  assert_int_equal(cond(s3, "Ready")->last_transition_time, T0 + 9);
  assert_int_equal(cond(s3, "PodReadyToStartContainers")->last_transition_time, T0 + 5);
  assert_int_equal(s3->phase, NL_POD_RUNNING);
  assert_true(cs(s3, "init")->ready);
  assert_int_equal(cs(s3, "init")->started, 0);
  nl_pod_status_free(s1);
  nl_pod_status_free(s2);
  nl_pod_status_free(s3);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);

  /* terminal phases */
  pod = pod2("Never");
  rt = rt_new();
  rt_sandbox(rt, "sb", false, NULL);
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_EXITED, 0, 0);
  rt_c(rt, "cb", "b", NL_RT_CONTAINER_EXITED, 3, 0);
  nl_pod_status_t *s = gen(pod, rt, NULL, NULL, false);
  assert_int_equal(s->phase, NL_POD_FAILED);
  assert_string_equal(cond(s, "Ready")->reason, "PodFailed");
  assert_string_equal(cond(s, "ContainersReady")->reason, "PodFailed");
  assert_string_equal(cond(s, "PodReadyToStartContainers")->status, "False");
  nl_pod_status_free(s);
  rt->containers[1].exit_code = 0;
  s = gen(pod, rt, NULL, NULL, false);
  assert_int_equal(s->phase, NL_POD_SUCCEEDED);
  assert_string_equal(cond(s, "Ready")->reason, "PodCompleted");
  assert_string_equal(cond(s, "Initialized")->reason, "PodCompleted");
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

/* upstream's PodObservedGenerationTracking: the status and each condition
 * carry the metadata.generation they were computed from; a pod without one
 * (a static pod) has none, and the JSON omits it. */
static void observed_generation(void **state) {
  (void)state;
  nl_pod_t *pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1,"
                         " generation: 7}\nspec:\n  containers:\n  - {name: a, image: busybox}\n");
  nl_pod_status_t *s = nl_pod_status_generate(pod, NULL, NULL, NULL, false, S(T0), NULL, NULL);
  assert_int_equal(s->observed_generation, 7);
  for (size_t k = 0; k < s->n_conditions; k++) assert_int_equal(s->conditions[k].observed_generation, 7);
  nl_pod_status_terminated_by_kubelet(s, NULL, "Evicted", "m", NULL, S(T0));
  assert_int_equal(cond(s, "DisruptionTarget")->observed_generation, 7);
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_status_encode_json(s, &b);
  assert_ptr_equal(strstr(b.data, "{\"observedGeneration\":7,\"phase\":"), b.data);
  assert_non_null(strstr(b.data, "{\"type\":\"PodScheduled\",\"observedGeneration\":7,\"status\""));
  nl_pod_status_free(s);
  nl_pod_free(pod);

  pod = pod2("Always"); /* no generation */
  s = nl_pod_status_generate(pod, NULL, NULL, NULL, false, S(T0), NULL, NULL);
  nl_buf_reset(&b);
  nl_pod_status_encode_json(s, &b);
  assert_null(strstr(b.data, "observedGeneration"));
  nl_buf_free(&b);
  nl_pod_status_free(s);
  nl_pod_free(pod);
}

static void ips(void **state) {
  nl_pod_t *pod = pod2("Always");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "fd00::5");
  rt->ips = nl_xrealloc(rt->ips, 2 * sizeof(char *));
  rt->ips[rt->n_ips++] = nl_xstrdup("10.88.0.5");
  nl_pod_status_t *s = nl_pod_status_generate(pod, rt, NULL, NULL, false, S(T0), "192.168.1.10", NULL);
  assert_string_equal(s->pod_ip, "10.88.0.5"); /* the node's family first */
  assert_int_equal(s->n_pod_ips, 2);
  assert_string_equal(s->pod_ips[1], "fd00::5");
  assert_string_equal(s->host_ip, "192.168.1.10");
  assert_int_equal(s->n_host_ips, 1);
  nl_pod_status_free(s);
  /* an IPv6 node prefers IPv6 */
  s = nl_pod_status_generate(pod, rt, NULL, NULL, false, S(T0), "fd00::1", NULL);
  assert_string_equal(s->pod_ip, "fd00::5");
  nl_pod_status_free(s);
  /* without an API server upstream sets no hostIP */
  s = gen(pod, rt, NULL, NULL, false);
  assert_null(s->host_ip);
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);

  pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, uid: u1}\n"
               "spec:\n  hostNetwork: true\n  containers:\n  - {name: a, image: busybox}\n");
  rt = rt_new();
  rt_sandbox(rt, "sb", true, NULL);
  rt->sandboxes[0].host_network = true;
  s = nl_pod_status_generate(pod, rt, NULL, NULL, false, S(T0), "192.168.1.10", NULL);
  assert_string_equal(s->pod_ip, "192.168.1.10");
  assert_int_equal(s->n_pod_ips, 1);
  assert_string_equal(cond(s, "PodReadyToStartContainers")->status, "True");
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

static const char *qos_of(const char *resources_a, const char *resources_b) {
  char y[1024];
  snprintf(y, sizeof y,
           "apiVersion: v1\nkind: Pod\nmetadata: {name: p, uid: u1}\nspec:\n  containers:\n"
           "  - name: a\n    image: busybox\n    resources: %s\n"
           "  - name: b\n    image: busybox\n    resources: %s\n",
           resources_a, resources_b);
  nl_pod_t *pod = pod_of(y);
  const char *q = nl_pod_qos_class(pod);
  nl_pod_free(pod);
  return q;
}

static void qos_classes(void **state) {
  assert_string_equal(qos_of("{}", "{}"), "BestEffort");
  assert_string_equal(qos_of("{requests: {cpu: '0'}}", "{}"), "BestEffort"); /* zero ignored */
  assert_string_equal(qos_of("{requests: {cpu: 100m}}", "{}"), "Burstable");
  const char *g = "{limits: {cpu: 100m, memory: 64Mi}, requests: {cpu: 100m, memory: 64Mi}}";
  assert_string_equal(qos_of(g, g), "Guaranteed");
  /* limits only: requests default to limits */
  assert_string_equal(qos_of("{limits: {cpu: '1', memory: 1Gi}}", "{limits: {cpu: 500m, memory: 1G}}"),
                      "Guaranteed");
  assert_string_equal(qos_of(g, "{}"), "Burstable");
  assert_string_equal(qos_of("{limits: {cpu: 200m, memory: 64Mi}, requests: {cpu: 100m, memory: 64Mi}}", g),
                      "Burstable");
  assert_string_equal(qos_of("{limits: {memory: 64Mi}}", "{limits: {memory: 64Mi}}"), "Burstable");
  /* other resources do not count */
  assert_string_equal(qos_of("{limits: {ephemeral-storage: 1Gi}}", "{}"), "BestEffort");
}

/* ---- JSON ---- */

static void json_encoding(void **state) {
  nl_pod_t *pod = pod2("Always");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "cb", "b", NL_RT_CONTAINER_RUNNING, 0, 0);
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_EXITED, 1, 0);
  rt->containers[1].message = nl_xstrdup("bad <thing> & \"quote\"\n");
  nl_status_reason_t r = {"a", "CrashLoopBackOff", "back-off 10s"};
  nl_status_reasons_t rs = {&r, 1};
  nl_pod_status_t *s = nl_pod_status_generate(pod, rt, &rs, NULL, false, S(T0), "192.168.1.10", NULL);
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_status_encode_json(s, &b);
  const char *want =
      "{\"phase\":\"Running\",\"conditions\":["
      "{\"type\":\"PodReadyToStartContainers\",\"status\":\"True\",\"lastProbeTime\":null,"
      "\"lastTransitionTime\":\"2023-11-14T22:13:20Z\"},"
      "{\"type\":\"Initialized\",\"status\":\"True\",\"lastProbeTime\":null,"
      "\"lastTransitionTime\":\"2023-11-14T22:13:20Z\"},"
      "{\"type\":\"Ready\",\"status\":\"False\",\"lastProbeTime\":null,"
      "\"lastTransitionTime\":\"2023-11-14T22:13:20Z\",\"reason\":\"ContainersNotReady\","
      "\"message\":\"containers with unready status: [a]\"},"
      "{\"type\":\"ContainersReady\",\"status\":\"False\",\"lastProbeTime\":null,"
      "\"lastTransitionTime\":\"2023-11-14T22:13:20Z\",\"reason\":\"ContainersNotReady\","
      "\"message\":\"containers with unready status: [a]\"},"
      "{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastProbeTime\":null,"
      "\"lastTransitionTime\":\"2023-11-14T22:13:20Z\"}],"
      "\"hostIP\":\"192.168.1.10\",\"hostIPs\":[{\"ip\":\"192.168.1.10\"}],"
      "\"podIP\":\"10.88.0.2\",\"podIPs\":[{\"ip\":\"10.88.0.2\"}],"
      "\"startTime\":\"2023-11-14T22:13:20Z\",\"containerStatuses\":["
      "{\"name\":\"a\",\"state\":{\"waiting\":{\"reason\":\"CrashLoopBackOff\",\"message\":\"back-off 10s\"}},"
      "\"lastState\":{\"terminated\":{\"exitCode\":1,\"reason\":\"Error\","
      "\"message\":\"bad \\u003cthing\\u003e \\u0026 \\\"quote\\\"\\n\","
      "\"startedAt\":\"2023-11-14T22:13:30Z\",\"finishedAt\":\"2023-11-14T22:13:40Z\","
      "\"containerID\":\"containerd://ca\"}},\"ready\":false,\"restartCount\":0,"
      "\"image\":\"localhost/busybox:1\",\"imageID\":\"sha256:feed\","
      "\"containerID\":\"containerd://ca\",\"started\":false},"
      "{\"name\":\"b\",\"state\":{\"running\":{\"startedAt\":\"2023-11-14T22:13:30Z\"}},"
      "\"lastState\":{},\"ready\":true,\"restartCount\":0,"
      "\"image\":\"localhost/busybox:1\",\"imageID\":\"sha256:feed\","
      "\"containerID\":\"containerd://cb\",\"started\":true}],"
      "\"qosClass\":\"BestEffort\"}";
  assert_string_equal(b.data, want);

  /* a PodList with the pod and its status */
  nl_buf_reset(&b);
  const nl_pod_t *pods[] = {pod, pod};
  const nl_pod_status_t *sts[] = {s, NULL};
  nl_pod_list_encode_json(pods, sts, 2, &b);
  const char *head = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":[{";
  assert_int_equal(strncmp(b.data, head, strlen(head)), 0);
  assert_non_null(strstr(b.data, ",\"status\":{\"phase\":\"Running\""));
  assert_int_equal(strcmp(b.data + b.len - 3, "}]}"), 0);
  /* one status: the second item has none */
  const char *first = strstr(b.data, "\"status\":{\"phase\"");
  assert_non_null(first);
  assert_null(strstr(first + 1, "\"status\":{\"phase\""));
  nl_buf_free(&b);

  char t[32];
  assert_string_equal(nl_status_format_time(0, t, sizeof t), "1970-01-01T00:00:00Z");
  nl_pod_status_t *d = nl_pod_status_dup(s);
  nl_buf_t b1 = NL_BUF_INIT, b2 = NL_BUF_INIT;
  nl_pod_status_encode_json(s, &b1);
  nl_pod_status_encode_json(d, &b2);
  assert_string_equal(b1.data, b2.data);
  nl_buf_free(&b1);
  nl_buf_free(&b2);
  nl_pod_status_free(d);
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

/* user as upstream's convertContainerStatusUser: the runtime's user of the
 * container's current instance, uid, gid and every group; left out when the
 * runtime reports none (containerd 1.6); kept by a copy of the status. */
static void container_user(void **state) {
  (void)state;
  nl_pod_t *pod = pod2("Always");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "cb", "b", NL_RT_CONTAINER_RUNNING, 0, 0);
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_RUNNING, 0, 0);
  int64_t groups[] = {1000, 60000};
  nl_rt_user_t u = {.present = true, .linux = true, .uid = 1000, .gid = 1000,
                    .groups = groups, .n_groups = 2};
  nl_rt_user_copy(&rt->containers[0].user, &u); /* b's */
  nl_pod_status_t *s = gen(pod, rt, NULL, NULL, false);
  nl_pod_status_t *d = nl_pod_status_dup(s);
  nl_pod_status_free(s);
  nl_buf_t out = NL_BUF_INIT;
  nl_pod_status_encode_json(d, &out);
  json_t *j = json_loads(out.data, 0, NULL);
  assert_non_null(j);
  json_t *st = json_object_get(j, "containerStatuses");
  json_t *ja = json_array_get(st, 0), *jb = json_array_get(st, 1);
  assert_string_equal(json_string_value(json_object_get(ja, "name")), "a");
  assert_null(json_object_get(ja, "user"));
  char *got = json_dumps(json_object_get(jb, "user"), JSON_COMPACT);
  assert_string_equal(got, "{\"linux\":{\"uid\":1000,\"gid\":1000,\"supplementalGroups\":[1000,60000]}}");
  free(got);
  json_decref(j);
  nl_buf_free(&out);
  nl_pod_status_free(d);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

/* volumeMounts as upstream's convertToAPIContainerStatuses: each mount's name,
 * mountPath and readOnly; a read-only one's recursiveReadOnly as resolved
 * against the runtime's support (Enabled, IfPossible: Enabled when
 * supported; Disabled, unset, or Enabled that cannot be: Disabled); none for a
 * read-write one; no list for a container without mounts. Made once: a later
 * status keeps it (upstream's "immutable"), a running container's too. */
static void volume_mounts(void **state) {
  nl_pod_t *pod = pod_of(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
      "spec:\n  restartPolicy: Never\n  volumes: [{name: mnt, emptyDir: {}}]\n"
      "  initContainers:\n  - name: test\n    image: busybox\n    volumeMounts:\n"
      "    - {name: mnt, mountPath: /mnt-rro, readOnly: true, recursiveReadOnly: Enabled}\n"
      "    - {name: mnt, mountPath: /mnt-rro-if-possible, readOnly: true, recursiveReadOnly: IfPossible}\n"
      "    - {name: mnt, mountPath: /mnt-rro-disabled, readOnly: true, recursiveReadOnly: Disabled}\n"
      "    - {name: mnt, mountPath: /mnt-ro, readOnly: true}\n"
      "    - {name: mnt, mountPath: /mnt-rw}\n"
      "  containers:\n  - {name: completion, image: busybox}\n");
  const char *enabled =
      "[{\"name\":\"mnt\",\"mountPath\":\"/mnt-rro\",\"readOnly\":true,\"recursiveReadOnly\":\"Enabled\"},"
      "{\"name\":\"mnt\",\"mountPath\":\"/mnt-rro-if-possible\",\"readOnly\":true,\"recursiveReadOnly\":\"Enabled\"},"
      "{\"name\":\"mnt\",\"mountPath\":\"/mnt-rro-disabled\",\"readOnly\":true,\"recursiveReadOnly\":\"Disabled\"},"
      "{\"name\":\"mnt\",\"mountPath\":\"/mnt-ro\",\"readOnly\":true,\"recursiveReadOnly\":\"Disabled\"},"
      "{\"name\":\"mnt\",\"mountPath\":\"/mnt-rw\"}]";
  const char *disabled =
      "[{\"name\":\"mnt\",\"mountPath\":\"/mnt-rro\",\"readOnly\":true,\"recursiveReadOnly\":\"Disabled\"},"
      "{\"name\":\"mnt\",\"mountPath\":\"/mnt-rro-if-possible\",\"readOnly\":true,\"recursiveReadOnly\":\"Disabled\"},"
      "{\"name\":\"mnt\",\"mountPath\":\"/mnt-rro-disabled\",\"readOnly\":true,\"recursiveReadOnly\":\"Disabled\"},"
      "{\"name\":\"mnt\",\"mountPath\":\"/mnt-ro\",\"readOnly\":true,\"recursiveReadOnly\":\"Disabled\"},"
      "{\"name\":\"mnt\",\"mountPath\":\"/mnt-rw\"}]";
  nl_status_opts_t yes = {.supports_rro = true}, no = {.supports_rro = false};
  nl_pod_status_t *s = nl_pod_status_generate(pod, NULL, NULL, NULL, false, S(T0), NULL, &yes);
  assert_string_equal(cs(s, "test")->volume_mounts_json, enabled);
  assert_null(cs(s, "completion")->volume_mounts_json);
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_status_encode_json(s, &b);
  char *want = nl_xasprintf("\"imageID\":\"\",\"started\":false,\"volumeMounts\":%s}", enabled);
  if (!strstr(b.data, want)) fail_msg("%s", b.data);
  free(want);
  nl_buf_free(&b);

  nl_pod_status_t *s2 = nl_pod_status_generate(pod, NULL, NULL, NULL, false, S(T0), NULL, &no);
  assert_string_equal(cs(s2, "test")->volume_mounts_json, disabled);
  nl_pod_status_free(s2);
  s2 = nl_pod_status_generate(pod, NULL, NULL, NULL, false, S(T0), NULL, NULL);
  assert_string_equal(cs(s2, "test")->volume_mounts_json, disabled);
  nl_pod_status_free(s2);

  /* kept: the container runs, then ends, the support gone meanwhile */
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ct", "test", NL_RT_CONTAINER_RUNNING, 0, 0);
  s2 = nl_pod_status_generate(pod, rt, NULL, s, false, S(T0 + 1), NULL, &no);
  assert_int_equal(cs(s2, "test")->state.kind, NL_CSTATE_RUNNING);
  assert_string_equal(cs(s2, "test")->volume_mounts_json, enabled);
  nl_rt_pod_status_free(rt);
  rt = rt_new();
  rt_sandbox(rt, "sb", true, "10.88.0.2");
  rt_c(rt, "ct", "test", NL_RT_CONTAINER_EXITED, 0, 0);
  nl_pod_status_t *s3 = nl_pod_status_generate(pod, rt, NULL, s2, false, S(T0 + 2), NULL, &no);
  assert_int_equal(cs(s3, "test")->state.kind, NL_CSTATE_TERMINATED);
  assert_string_equal(cs(s3, "test")->volume_mounts_json, enabled);
  nl_pod_status_t *d = nl_pod_status_dup(s3);
  assert_string_equal(cs(d, "test")->volume_mounts_json, enabled);
  nl_pod_status_free(d);
  nl_pod_status_free(s3);
  nl_pod_status_free(s2);
  nl_rt_pod_status_free(rt);
  nl_pod_status_free(s);
  nl_pod_free(pod);
}

/* The status manager's normalizeStatus: 12 KiB per pod, shared evenly (here
 * an init container and two containers: 4096 bytes each), and JSON that stays
 * valid whatever bytes a container wrote. */
static void termination_messages_are_limited_per_pod(void **state) {
  (void)state;
  nl_pod_t *pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u1}\n"
                         "spec:\n  restartPolicy: Never\n  initContainers: [{name: i, image: busybox}]\n"
                         "  containers:\n  - {name: a, image: busybox}\n  - {name: b, image: busybox}\n");
  nl_rt_pod_status_t *rt = rt_new();
  rt_sandbox(rt, "sb", false, NULL);
  char big[5000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  rt_c(rt, "ca", "a", NL_RT_CONTAINER_EXITED, 1, 0)->message = nl_xstrdup(big);
  rt_c(rt, "cb", "b", NL_RT_CONTAINER_EXITED, 0, 0)->message = nl_xstrdup("ok \xff\xc3\xa9");
  rt_c(rt, "ci", "i", NL_RT_CONTAINER_EXITED, 0, 0)->message = nl_xstrdup("init done");
  nl_pod_status_t *s = gen(pod, rt, NULL, NULL, true);
  assert_int_equal(strlen(cs(s, "a")->state.message), 12 * 1024 / 3);
  assert_string_equal(cs(s, "b")->state.message, "ok \xff\xc3\xa9");
  assert_string_equal(cs(s, "i")->state.message, "init done");
  nl_buf_t b = NL_BUF_INIT;
  nl_pod_status_encode_json(s, &b);
  assert_non_null(strstr(b.data, "\"message\":\"ok \\ufffd\xc3\xa9\""));
  nl_buf_free(&b);
  nl_pod_status_free(s);
  nl_rt_pod_status_free(rt);
  nl_pod_free(pod);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(phase_rules_regular_containers),
      cmocka_unit_test(phase_rules_static_pods_and_unknown),
      cmocka_unit_test(phase_container_restart_rules),
      cmocka_unit_test(phase_rules_init_containers),
      cmocka_unit_test(terminal_phase_is_kept),
      cmocka_unit_test(terminate_gives_a_terminal_phase),
      cmocka_unit_test(terminated_by_kubelet_keeps_the_reason_with_failed),
      cmocka_unit_test(readiness_gates),
      cmocka_unit_test(ephemeral_container_statuses),
      cmocka_unit_test(waiting_default_reasons),
      cmocka_unit_test(waiting_reasons_from_sync),
      cmocka_unit_test(crash_loop_back_off_moves_terminated_to_last_state),
      cmocka_unit_test(container_fields_and_history),
      cmocka_unit_test(probes_set_started_and_ready),
      cmocka_unit_test(lost_containers),
      cmocka_unit_test(removed_init_container_counts_as_completed),
      cmocka_unit_test(conditions_and_continuity),
      cmocka_unit_test(restart_all_containers_in_place),
      cmocka_unit_test(observed_generation),
      cmocka_unit_test(ips),
      cmocka_unit_test(qos_classes),
      cmocka_unit_test(json_encoding),
      cmocka_unit_test(volume_mounts),
      cmocka_unit_test(container_user),
      cmocka_unit_test(termination_messages_are_limited_per_pod),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
