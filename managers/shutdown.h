/* Graceful node shutdown (upstream pkg/kubelet/nodeshutdown): the order and the
 * timing of the pod kills once the node is going down, as an engine without I/O
 * or clock of its own. The agent (agent/kubelet_shutdown.c) feeds it the active
 * pods, the completions of their kills and the time, and runs its timer to
 * nl_shutdown_deadline().
 *
 * The grace periods form priority groups (upstream migrateConfig): with
 * shutdownGracePeriod G and shutdownGracePeriodCriticalPods C, pods below
 * priority 2000000000 (system-cluster-critical) get G - C seconds, critical pods
 * the last C. A pod joins the highest group whose priority is <= its own (the
 * lowest when below all). Groups run one after another, lowest priority first:
 * every pod of the group is killed with the group's period as its grace (the
 * pod's terminationGracePeriodSeconds when shorter), and the next group starts
 * when all of them have stopped or the group's period has run out, whichever
 * comes first. Empty groups take no time. The whole sequence ends within the
 * sum of the periods (G).
 *
 * Ownership: a nl_shutdown_t owns its groups and pod list; strings passed in are
 * copied. */
#ifndef NL_MANAGERS_SHUTDOWN_H
#define NL_MANAGERS_SHUTDOWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/model/pod.h"

/* scheduling.SystemCriticalPriority, and the two classes above it. */
#define NL_PRIORITY_SYSTEM_CRITICAL 2000000000
#define NL_PRIORITY_SYSTEM_NODE_CRITICAL 2000001000

typedef struct nl_shutdown_group {
  int32_t priority;   /* the lowest priority of the group */
  int64_t grace_s;    /* its period */
} nl_shutdown_group_t;

typedef enum nl_shutdown_state {
  NL_SHUTDOWN_IDLE,    /* the node is not shutting down */
  NL_SHUTDOWN_KILLING, /* a group is being stopped */
  NL_SHUTDOWN_DONE,    /* every group is done: the node may go down */
} nl_shutdown_state_t;

/* One pod to stop (borrowed for nl_shutdown_begin). */
typedef struct nl_shutdown_pod {
  const char *uid, *namespace_, *name;
  int32_t priority;
  int64_t termination_grace_s; /* spec.terminationGracePeriodSeconds; -1 unset */
} nl_shutdown_pod_t;

/* Kill one pod with grace_s as its grace period; its end is reported with
 * nl_shutdown_pod_done(), possibly from inside this call. */
typedef void (*nl_shutdown_kill_fn)(void *ctx, const nl_shutdown_pod_t *pod, int64_t grace_s);

typedef struct nl_shutdown__pod {
  nl_shutdown_pod_t pod; /* strings owned */
  size_t group;
  bool done;
} nl_shutdown__pod_t;

typedef struct nl_shutdown {
  nl_shutdown_group_t *groups; /* by priority, low to high */
  size_t n_groups;
  nl_shutdown_state_t state;
  size_t group;                /* KILLING: the group being stopped */
  uint64_t group_deadline_ms;  /* KILLING: when its period runs out */
  uint64_t started_ms, ended_ms;
  nl_shutdown__pod_t *pods;
  size_t n_pods;
  int stepping;                /* re-entrance guard of step() */
  nl_shutdown_kill_fn kill;
  void *ctx;
} nl_shutdown_t;

/* grace_ns, critical_ns: shutdownGracePeriod and shutdownGracePeriodCriticalPods.
 * Zero groups (disabled) when grace_ns is 0, as upstream. */
void nl_shutdown_init(nl_shutdown_t *m, int64_t grace_ns, int64_t critical_ns,
                      nl_shutdown_kill_fn kill, void *ctx);
void nl_shutdown_free(nl_shutdown_t *m);
/* Whether a shutdown grace period is configured. */
bool nl_shutdown_enabled(const nl_shutdown_t *m);
/* The sum of the groups' periods, in seconds (upstream periodRequested). */
int64_t nl_shutdown_period_s(const nl_shutdown_t *m);

/* The node is going down: stop pods[] (copied) group by group. Only from IDLE;
 * without groups, or without pods, it is DONE at once. */
void nl_shutdown_begin(nl_shutdown_t *m, const nl_shutdown_pod_t *pods, size_t n, uint64_t now_ms);
/* The kill of uid has ended (its containers are stopped). Unknown uids and
 * repeats are ignored. */
void nl_shutdown_pod_done(nl_shutdown_t *m, const char *uid, uint64_t now_ms);
/* Time has passed: a group whose period has run out gives way to the next. */
void nl_shutdown_tick(nl_shutdown_t *m, uint64_t now_ms);
/* When the running group's period runs out (0 when nothing waits). */
uint64_t nl_shutdown_deadline(const nl_shutdown_t *m);

/* A pod's priority as the shutdown groups see it: spec.priority; without it
 * (a static pod: the Priority admission plugin never saw it) the value of the
 * built-in class it names, system-node-critical or system-cluster-critical;
 * else 0. */
int32_t nl_shutdown_pod_priority(const nl_pod_t *pod);

#endif
