/* Probes (upstream pkg/kubelet/prober and pkg/probe/{exec,http,tcp,grpc}): the
 * one-shot checks that run a ProbeHandler (also used by lifecycle hooks,
 * managers/hooks.h), and the probe manager: one worker per (pod, container,
 * probe type), each a timer and a state machine on the loop, never a thread.
 *
 * Results are cached per container id (upstream results.Manager) and only
 * changes are reported (nl_probe_changed_cb); the runtime reads liveness and
 * startup through nl_probe_manager_runtime_result() (computePodActions), the
 * status generator reads startup and readiness through
 * nl_probe_manager_status_probe() (UpdatePodStatus). */
#ifndef NL_PROBE_H
#define NL_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "agent/model/pod.h"
#include "cri/conn.h"
#include "managers/runtime.h"
#include "managers/runtime_types.h"
#include "managers/status.h"
#include "reactor/list.h"
#include "reactor/map.h"
#include "reactor/tls.h"

/* ---- one-shot checks -------------------------------------------------------- */

/* upstream probe.Result. WARNING counts as success (a 3xx the client did not
 * follow); ERROR means the check could not run (bad port, CRI failure): the
 * worker throws such a result away, as upstream does. */
typedef enum nl_check_result {
  NL_CHECK_SUCCESS,
  NL_CHECK_WARNING,
  NL_CHECK_FAILURE,
  NL_CHECK_ERROR,
} nl_check_result_t;

#define NL_PROBE_MAX_OUTPUT (10 * 1024) /* exec output and HTTP body cap (10 KiB) */

typedef struct nl_check_env {
  uv_loop_t *loop;
  nl_cri_client_t *cri;   /* exec (ExecSync); may be NULL when no exec runs */
  nl_tls_config_t *tls;   /* an insecure client config for HTTPS; NULL: each
                           * HTTPS check makes its own (hooks: rare) */
  const char *user_agent; /* NULL: "kube-probe/1.30" */
} nl_check_env_t;

typedef struct nl_check_req {
  const nl_handler_t *handler;     /* exec, httpGet, tcpSocket or grpc (sleep: hooks) */
  const nl_container_t *container; /* for named ports */
  const char *container_id;        /* exec */
  const char *pod_ip;              /* the host when the handler names none */
  uint64_t timeout_ms;             /* 0: none (exec hooks, as upstream) */
  bool hook;                       /* lifecycle semantics: any HTTP answer succeeds,
                                    * a non-zero exit is an error message */
} nl_check_req_t;

typedef struct nl_check nl_check_t;

/* output is borrowed for the callback: the exec output, the HTTP body, or the
 * failure message upstream puts in its event ("HTTP probe failed with
 * statuscode: 500", "dial tcp 10.88.0.5:80: connect: connection refused"). */
typedef void (*nl_check_cb)(void *ctx, nl_check_result_t r, const char *output);

/* Starts a check; everything in req is copied. cb runs exactly once, never
 * inside this call, unless nl_check_cancel() comes first. Never returns NULL. */
nl_check_t *nl_check_start(const nl_check_env_t *env, const nl_check_req_t *req, nl_check_cb cb,
                           void *ctx);
/* Abandons a check whose callback has not run: cb is never called; the check
 * frees itself once its handles close and its CRI call or HTTP request ends
 * (the CRI client completes every call when it stops). */
void nl_check_cancel(nl_check_t *c);

/* upstream probe.ResolveContainerPort: a number, a named container port, or a
 * number in a string. Returns 1..65535, or -1 with *err. */
int nl_probe_resolve_port(const nl_intorstr_t *port, const nl_container_t *c, nl_err_t **err);

/* The grpc.health.v1 wire format (exported for tests and the fuzz target).
 * Encodes HealthCheckRequest{service} into a new buffer (*len bytes). */
uint8_t *nl_probe_grpc_encode_request(const char *service, size_t *len);
/* Decodes HealthCheckResponse.status (0 UNKNOWN, 1 SERVING, 2 NOT_SERVING,
 * 3 SERVICE_UNKNOWN; other values kept). Returns 0, or -1 for malformed input. */
int nl_probe_grpc_decode_response(const uint8_t *p, size_t n, int *status);
const char *nl_probe_grpc_status_name(int status);

/* ---- the probe manager ---------------------------------------------------- */

typedef enum nl_probe_type {
  NL_PROBE_TYPE_LIVENESS,
  NL_PROBE_TYPE_READINESS,
  NL_PROBE_TYPE_STARTUP,
} nl_probe_type_t;

const char *nl_probe_type_name(nl_probe_type_t t); /* "Liveness", "Readiness", "Startup" */

/* The latest runtime view of a pod (the PLEG cache): borrowed for the call. */
typedef const nl_rt_pod_status_t *(*nl_probe_status_fn)(void *ctx, const char *uid);
/* A cached result changed (upstream's results.Manager Updates()): the kubelet
 * syncs the pod. Strings are borrowed. */
typedef void (*nl_probe_changed_cb)(void *ctx, const char *uid, const char *container,
                                    nl_probe_type_t type, nl_probe_result_t result);
/* An event as upstream records it: type "Warning", reason "Unhealthy" or
 * "ProbeWarning" (upstream events.ContainerProbeWarning), message "Liveness probe failed: ...". */
typedef void (*nl_probe_event_cb)(void *ctx, const nl_pod_t *pod, const char *container,
                                  const char *type, const char *reason, const char *message);

typedef struct nl_probe_manager_opts {
  nl_probe_status_fn status;  /* required */
  void *status_ctx;
  nl_probe_changed_cb changed;  /* may be NULL */
  nl_probe_event_cb event;      /* may be NULL: events are logged */
  void *ctx;
  const char *host_ip;          /* probe target of hostNetwork pods; NULL: 127.0.0.1 */
  /* Wall clock in ns (CRI startedAt is wall clock); NULL: CLOCK_REALTIME. */
  int64_t (*now_ns)(void *ctx);
  void *now_ctx;
  /* First-probe spread: a worker created within one period of the manager's
   * start waits a random part of its period first (upstream); 0: that rule,
   * 1: never wait (tests). */
  int no_jitter;
  uint64_t seed; /* 0: from the clock */
  uint32_t ms_per_period_second; /* periods only: 0 is 1000 (tests and benchmarks shrink it) */
  struct nl_kmetrics *metrics;   /* prober_probe_total and _duration_seconds; may be NULL */
} nl_probe_manager_opts_t;

typedef struct nl_probe_manager nl_probe_manager_t;
typedef void (*nl_probe_manager_stop_cb)(nl_probe_manager_t *m);

struct nl_probe_manager {
  uv_loop_t *loop;
  nl_cri_client_t *cri;       /* borrowed: stopped after the manager */
  nl_probe_manager_opts_t opts;
  char *host_ip;
  nl_tls_config_t *tls;       /* insecure client config, made on the first HTTPS probe */
  nl_map_t pods;              /* uid -> probe pod (workers) */
  nl_map_t results;           /* "<type>/<container id>" -> worker */
  uint64_t started_ms;        /* uv_now at init */
  uint64_t rng;
  int closing;                /* handles still closing after stop */
  bool stopping;
  nl_probe_manager_stop_cb stop_cb;
  /* counters (benchmarks, tests) */
  uint64_t checks_started, checks_done;
  size_t workers;
};

/* Initializes m (embedded by the caller). Copies opts. Returns 0, or -1 with *err
 * (NL_EINVAL) when opts->status is missing. */
int nl_probe_manager_init(nl_probe_manager_t *m, uv_loop_t *loop, nl_cri_client_t *cri,
                          const nl_probe_manager_opts_t *opts, nl_err_t **err);
/* upstream AddPod: a worker per probe of each container (and sidecar init
 * container). The pod is referenced. A pod already known is left alone (probes are
 * immutable). */
void nl_probe_manager_add_pod(nl_probe_manager_t *m, const nl_pod_t *pod);
/* The pod's API status changed (a RECONCILE): its workers point into this
 * version (referenced) instead of the one they had, so that one decoded copy of
 * the pod is kept. A version whose containers or probes differ is not taken.
 * No-op for unknown pods. */
void nl_probe_manager_reconcile_pod(nl_probe_manager_t *m, const nl_pod_t *pod);
/* upstream RemovePod: stops the pod's workers and forgets their results. */
void nl_probe_manager_remove_pod(nl_probe_manager_t *m, const char *uid);
/* upstream StopLivenessAndStartup (the pod is terminating): those workers stop,
 * their containers count as live. */
void nl_probe_manager_stop_liveness(nl_probe_manager_t *m, const char *uid);
bool nl_probe_manager_has_pod(const nl_probe_manager_t *m, const char *uid);
/* Stops every worker, waits for their handles, then calls done_cb (may be NULL).
 * Checks still waiting for the CRI client end when that client stops. */
void nl_probe_manager_stop(nl_probe_manager_t *m, nl_probe_manager_stop_cb done_cb);

/* nl_runtime_probe_fn over the cache (ctx is the manager). */
nl_probe_result_t nl_probe_manager_runtime_result(void *ctx, const char *container_id,
                                                  nl_probe_kind_t kind);
/* The latest cached result of a container's probe, or NL_PROBE_RESULT_NONE. */
nl_probe_result_t nl_probe_manager_result(const nl_probe_manager_t *m, const char *container_id,
                                          nl_probe_type_t type);

/* nl_status_probe_fn for one pod: opts->probe_ctx points to this. */
typedef struct nl_probe_status_ctx {
  nl_probe_manager_t *m;
  const nl_pod_t *pod;
} nl_probe_status_ctx_t;
/* Started/ready inputs of the status generator (upstream UpdatePodStatus): NONE
 * when the container has no such probe, PENDING until its worker has a result
 * for this container id, else the result. Asking for the readiness of a
 * started container without a result makes its worker probe at once (upstream's
 * manual trigger). */
nl_status_probe_t nl_probe_manager_status_probe(void *ctx, const char *container_name,
                                                const char *container_id, bool startup);

#endif
