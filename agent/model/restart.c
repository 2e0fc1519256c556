/* Whether a container that exited is started again (upstream podutil's
 * ContainerShouldRestart, FindMatchingContainerRestartRule and
 * IsContainerRestartable, with ContainerRestartRules on): the container's own
 * restartPolicyRules first, then its restartPolicy, then the pod's. One answer
 * for the runtime manager (what to start), the status generator (the phase,
 * CrashLoopBackOff) and the prober (whether to go on probing). */
#include <string.h>

#include "agent/model/internal.h"

static bool is(const char *s, const char *want) { return s && strcmp(s, want) == 0; }

const nl_restart_rule_t *nl_container_restart_rule(const nl_container_t *c, int32_t exit_code) {
  for (size_t i = 0; i < c->n_restart_policy_rules; i++) {
    const nl_restart_rule_t *r = &c->restart_policy_rules[i];
    if (!r->has_exit_codes) continue;
    bool listed = false;
    for (size_t j = 0; j < r->n_values; j++) listed |= r->values[j] == exit_code;
    if ((is(r->operator_, "In") && listed) || (is(r->operator_, "NotIn") && !listed)) return r;
  }
  return NULL;
}

static bool pod_policy(const nl_pod_spec_t *spec, int32_t exit_code) {
  if (is(spec->restart_policy, "Never")) return false;
  if (is(spec->restart_policy, "OnFailure")) return exit_code != 0;
  return true; /* Always, and the default */
}

bool nl_container_should_restart(const nl_pod_spec_t *spec, const nl_container_t *c,
                                 int32_t exit_code) {
  if (!c->restart_policy) return pod_policy(spec, exit_code);
  const nl_restart_rule_t *r = nl_container_restart_rule(c, exit_code);
  /* RestartAllContainers (on in 1.36) starts it again too, with the rest of
   * the pod */
  if (r && (is(r->action, "Restart") || is(r->action, "RestartAllContainers"))) return true;
  if (is(c->restart_policy, "Always")) return true;
  if (is(c->restart_policy, "OnFailure")) return exit_code != 0;
  if (is(c->restart_policy, "Never")) return false;
  return pod_policy(spec, exit_code);
}

bool nl_container_restarts_all(const nl_container_t *c, int32_t exit_code) {
  const nl_restart_rule_t *r = nl_container_restart_rule(c, exit_code);
  return r && is(r->action, "RestartAllContainers");
}

bool nl_container_restartable(const nl_pod_spec_t *spec, const nl_container_t *c) {
  if (!c->restart_policy) return !is(spec->restart_policy, "Never");
  for (size_t i = 0; i < c->n_restart_policy_rules; i++)
    if (is(c->restart_policy_rules[i].action, "Restart")) return true;
  return !is(c->restart_policy, "Never");
}

bool nl_container_on_failure_only(const nl_pod_spec_t *spec, const nl_container_t *c) {
  return c->restart_policy ? is(c->restart_policy, "OnFailure") : is(spec->restart_policy, "OnFailure");
}

bool nl_container_restarts_when_killed(const nl_pod_spec_t *spec, const nl_container_t *c) {
  return c->restart_policy ? !is(c->restart_policy, "Never") : !is(spec->restart_policy, "Never");
}

bool nl_pod_has_restart_all_rule(const nl_pod_spec_t *spec) {
  for (int k = 0; k < 2; k++) {
    const nl_container_t *v = k ? spec->containers : spec->init_containers;
    size_t n = k ? spec->n_containers : spec->n_init_containers;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < v[i].n_restart_policy_rules; j++)
        if (is(v[i].restart_policy_rules[j].action, "RestartAllContainers")) return true;
  }
  return false;
}
