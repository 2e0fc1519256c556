/* The node manager: registers the Node (upstream's registerWithAPIServer),
 * keeps its status (updateNodeStatus) and renews its Lease in kube-node-lease
 * (the nodelease controller), each an explicit state machine on the loop.
 *
 * Node: gather facts (thread pool) -> ask the runtime -> POST the Node; 409 ->
 * GET it and PATCH the labels and annotation upstream reconciles; failures back
 * off 100 ms doubling to 7 s. Once the Node is known, a watch on its
 * metadata.name keeps it (upstream's node informer). Then every
 * nodeStatusUpdateFrequency (every 1 s until the node is Ready, so that it turns
 * Ready within seconds): take the Node from the watch (a GET from the
 * apiserver's cache while the watch has none), compute its status, PATCH it
 * (strategic merge) when it changed or nodeStatusReportFrequency passed; 5 tries
 * per round as upstream, the retries reading the Node with a GET from etcd; a
 * 404 registers again.
 *
 * Lease: once the Node's uid is known, GET the Lease; 404 -> create it with an
 * owner reference to the Node; then renew it every nodeLeaseDurationSeconds / 4
 * (stretched by up to 4%, as upstream)
 * with a merge PATCH on the last resourceVersion (upstream PUTs the whole
 * Lease: nl_node_lease_renewal) or, when only renewTime moves, a JSON patch
 * that tests holder and duration before it replaces renewTime
 * (nl_node_lease_renewal_tested). A failed renewal is retried 5 times (a 409,
 * or the test's 422, re-GETs first), then the Lease is fetched again with
 * back-off 200 ms doubling to 7 s.
 *
 * Nothing here blocks the loop or waits for the apiserver: requests time out
 * after min(nodeStatusUpdateFrequency, nodeLeaseDurationSeconds), as upstream's
 * heartbeat client. Failures are logged when they start, then at most once a
 * minute (every one at -v=4), and recovery is logged once.
 *
 * Ownership: nl_node_t is embedded by its owner; it borrows the kube client,
 * the configuration strings and the callbacks' context, which must outlive
 * nl_node_stop()'s done callback. */
#ifndef NL_MANAGERS_NODE_H
#define NL_MANAGERS_NODE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent/kube/client.h"
#include "agent/kube/reflector.h"
#include "agent/model/node.h"
#include "managers/events.h"
#include "reactor/backoff.h"

/* Where the host facts are read from; tests point them at fixtures. */
typedef struct nl_node_paths {
  const char *machine_id;   /* /etc/machine-id */
  const char *product_uuid; /* /sys/class/dmi/id/product_uuid (root only: may fail) */
  const char *boot_id;      /* /proc/sys/kernel/random/boot_id */
  const char *os_release;   /* /etc/os-release */
  const char *meminfo;      /* /proc/meminfo */
  const char *cpu_online;   /* /sys/devices/system/cpu/online */
  const char *hugepages;    /* /sys/kernel/mm/hugepages */
  const char *root_dir;     /* statfs'd for ephemeral-storage (--root-dir) */
} nl_node_paths_t;

/* The host's paths, with root_dir as given. */
nl_node_paths_t nl_node_paths_host(const char *root_dir);

/* Reads the facts (blocking: run it on the thread pool). Unreadable files leave
 * their fields "" (0 or -1 for numbers), as upstream reports what cadvisor has.
 * kernelVersion comes from uname(2). */
void nl_node_facts_read(const nl_node_paths_t *p, nl_node_facts_t *out);

/* What the runtime said for one status round (borrowed for the callback). */
typedef struct nl_node_runtime_info {
  bool status_ok;                 /* the CRI Status call succeeded */
  nl_node_cri_cond_t runtime_ready, network_ready;
  const char *runtime_name;       /* Version: "containerd"; NULL when it failed */
  const char *runtime_version;    /* "1.6.20" */
  bool images_ok;                 /* ListImages succeeded */
  const nl_node_image_t *images;  /* largest first */
  size_t n_images;
  const nl_node_runtime_handler_t *handlers; /* Status' runtime_handlers (with status_ok) */
  size_t n_handlers;
  nl_node_runtime_features_t features; /* Status' features (with status_ok) */
} nl_node_runtime_info_t;

typedef void (*nl_node_runtime_done)(void *done_ctx, const nl_node_runtime_info_t *info);

/* What the manager needs from the rest of the agent. */
typedef struct nl_node_deps {
  nl_kube_client_t *kube;
  /* Asks the runtime for Status, Version and ListImages (nl_node_cri_query does
   * it over the CRI client). Must call done exactly once, from the loop and never
   * from inside the call; it may do so after nl_node_stop() (the manager then
   * ignores it). */
  void (*query_runtime)(void *ctx, nl_node_runtime_done done, void *done_ctx);
  /* The pressure conditions (memory, disk, pid) of the eviction manager. NULL:
   * none. */
  void (*pressure)(void *ctx, bool *memory, bool *disk, bool *pid);
  /* PLEG's health (nl_pleg_healthy). NULL: always healthy. */
  bool (*pleg_healthy)(void *ctx, int64_t now_ns, nl_err_t **err);
  /* The device plugins' resources for capacity and allocatable: a new array
   * of *n entries (the manager frees the array, not the names, which must
   * stay valid until the next call). NULL: none. */
  nl_node_extended_t *(*extended)(void *ctx, size_t *n);
  void *ctx;
  /* Wall clock, ns since the epoch; NULL: the real one. */
  int64_t (*now_ns)(void *ctx);
  /* Node events (NodeReady, NodeHasSufficientMemory, Rebooted, ...); fn NULL:
   * logged only. */
  nl_event_sink_t events;
} nl_node_deps_t;

typedef struct nl_node_opts {
  nl_node_conf_t conf;          /* the Node's configuration (borrowed strings) */
  nl_node_paths_t paths;
  bool register_node;           /* registerNode */
  uint64_t update_ms;           /* nodeStatusUpdateFrequency */
  uint64_t report_ms;           /* nodeStatusReportFrequency */
  int32_t lease_duration_s;     /* nodeLeaseDurationSeconds */
  /* Back-offs (0: upstream's 100 ms..7 s for registration, 200 ms..7 s for the
   * Lease) and the fast status period before Ready (0: 1 s); tests shorten them. */
  uint64_t register_backoff_ms, lease_backoff_ms, backoff_max_ms, fast_ms;
} nl_node_opts_t;

typedef enum nl_node_state {
  NL_NODE_IDLE,
  NL_NODE_FACTS,        /* reading host facts on the thread pool */
  NL_NODE_RUNTIME,      /* asking the runtime */
  NL_NODE_REGISTER,     /* POST /api/v1/nodes */
  NL_NODE_GET_EXISTING, /* 409: GET the Node to reconcile */
  NL_NODE_RECONCILE,    /* PATCH labels/annotations of the existing Node */
  NL_NODE_BACKOFF,      /* registration failed; timer */
  NL_NODE_WAIT,         /* registered; timer to the next status round */
  NL_NODE_STATUS_GET,   /* GET the Node */
  NL_NODE_STATUS_PATCH, /* PATCH its status */
  NL_NODE_STOPPED,
} nl_node_state_t;

typedef enum nl_node_lease_state {
  NL_LEASE_WAIT_NODE, /* no Node uid yet */
  NL_LEASE_GET,
  NL_LEASE_CREATE,
  NL_LEASE_UPDATE,
  NL_LEASE_BACKOFF,
  NL_LEASE_IDLE,      /* timer to the next renewal */
  NL_LEASE_STOPPED,
} nl_node_lease_state_t;

/* A failure series, logged at a bounded rate. */
typedef struct nl_node_faillog {
  const char *what;
  unsigned failures;
  uint64_t last_log_ms;
} nl_node_faillog_t;

typedef struct nl_node nl_node_t;
typedef void (*nl_node_done_cb)(nl_node_t *n);

typedef struct nl_node_lease {
  nl_node_t *node;
  nl_node_lease_state_t state;
  uv_timer_t timer;
  nl_kube_req_t *req;
  json_t *base;       /* the last Lease the server returned */
  json_t *sent;       /* the Lease a renewal in flight makes of base */
  bool created;       /* the last ensure created it */
  bool tested;        /* the renewal in flight is the JSON patch that tests holder and duration */
  int update_tries;
  nl_backoff_t backoff;
  nl_node_faillog_t log;
} nl_node_lease_t;

struct nl_node {
  uv_loop_t *loop;
  nl_node_opts_t opts;
  nl_node_deps_t deps;
  nl_node_state_t state;
  uv_timer_t timer;
  nl_kube_req_t *req;
  struct nl_node__runtime_q *rq; /* the runtime query in flight, or NULL */
  uv_work_t facts_work;
  bool facts_busy;
  nl_node_facts_t facts;
  /* The runtime as last seen (upstream's runtimeState). */
  int64_t runtime_sync_ns;
  bool status_seen;
  nl_node_cri_cond_t runtime_ready, network_ready; /* owned strings */
  char *runtime_version; /* "containerd://1.6.20", owned */
  char *runtime_type;
  nl_node_runtime_handler_t *handlers; /* the last Status' handlers, owned (names too) */
  size_t n_handlers;
  nl_node_runtime_features_t features; /* the last Status' features */
  nl_node_image_t *images; /* the last image list, owned (names too) */
  size_t n_images;
  nl_node_extended_t *extended; /* the last deps.extended answer, owned */
  size_t n_extended;
  bool images_known;
  /* The Node. */
  json_t *initial;       /* the body last POSTed (for the reconcile) */
  json_t *prev;          /* the Node as the status round read it */
  /* The Node as the watch on its metadata.name last delivered it (upstream's
   * node informer), JSON text; NULL before the first list and while the Node is
   * absent. Kept as text: parsed once a round, it costs a third of the objects. */
  nl_reflector_t *watch;
  char *watched;
  bool watch_started;
  /* The next round reads the Node from the apiserver, not from the watch: the
   * link just came back (a Lease renewal succeeded after failures), and the
   * watch may not have caught up with what others wrote meanwhile (the node
   * lifecycle controller's Ready=Unknown). */
  bool read_fresh;
  char *uid;             /* the Node's uid, once known */
  bool registered;
  bool ready;            /* the last status sent said Ready=True */
  bool shutting_down;    /* graceful node shutdown: Ready=False from now on */
  uint64_t last_report_ms;
  int status_tries;
  bool status_retry;     /* the runtime query is a retry within the round */
  nl_backoff_t backoff;
  nl_node_faillog_t log;
  nl_node_lease_t lease;
  int pending;           /* handles, requests and work still to finish on stop */
  nl_node_done_cb done_cb;
};

/* Initializes n (embedded by the caller); copies opts and deps. Nothing runs
 * until nl_node_start(). Returns 0, or -1 with *err naming a bad reservation
 * (kubeReserved, systemReserved, evictionHard). */
int nl_node_init(nl_node_t *n, uv_loop_t *loop, const nl_node_opts_t *opts,
                 const nl_node_deps_t *deps, nl_err_t **err);
/* Starts the node machine (facts, registration) and, once the Node is known,
 * the Lease. */
void nl_node_start(nl_node_t *n);
/* Cancels requests in flight, closes the timers, waits for a facts read in
 * flight, frees what n owns and calls done_cb (may be NULL). Idempotent. */
void nl_node_stop(nl_node_t *n, nl_node_done_cb done_cb);

/* The Node as last read from the API server, else the registration body, else
 * NULL (borrowed until the next status round). */
const json_t *nl_node_object(const nl_node_t *n);
/* Graceful node shutdown has begun: Ready turns False ("node is shutting
 * down") and a status round starts now when the manager is waiting for one. */
void nl_node_set_shutting_down(nl_node_t *n);
/* Something in the status changed (a device's health): a status round starts
 * now when the manager is waiting for one. */
void nl_node_status_kick(nl_node_t *n);
/* The Node's uid ("" until known), and whether the last status said Ready. */
const char *nl_node_uid(const nl_node_t *n);
/* Whether the runtime's handler of that name ("": the default) supports
 * recursive read-only mounts, as its last Status said (upstream
 * runtimeHandlerSupportsRecursiveReadOnlyMounts): false while no Status has
 * listed handlers, or for a handler it does not list. */
bool nl_node_supports_rro(const nl_node_t *n, const char *handler);
/* Whether the runtime handler supports user namespaces (upstream
 * HandlerSupportsUserNamespaces): 1 yes; 0 no, or the runtime lists no
 * handlers (containerd 1.6); -1 the runtime lists others but not it; -2 no
 * Status has answered yet. */
int nl_node_supports_userns(const nl_node_t *n, const char *handler);
bool nl_node_ready(const nl_node_t *n);

const char *nl_node_state_name(nl_node_state_t s);
const char *nl_node_lease_state_name(nl_node_lease_state_t s);

/* internal: shared by node.c and node_lease.c */
void nl_node__lease_kick(nl_node_lease_t *l);
void nl_node__lease_stop(nl_node_lease_t *l);
void nl_node__link_back(nl_node_t *n);
void nl_node__closed(nl_node_t *n);
uint64_t nl_node__timeout_ms(const nl_node_t *n);
/* How much of a write's answer the caller needs. */
typedef enum {
  NL_NODE_ANSWER_OBJECT, /* the object */
  NL_NODE_ANSWER_META,   /* its metadata only (nl_node__partial() tells) */
  NL_NODE_ANSWER_STATUS, /* the status only: a 2xx has no body (or any: HTTP/1.1) */
} nl_node_answer_t;
/* Sends body (stolen, may be NULL) with the heartbeat timeout: an object of
 * kind (ctype NULL) as protobuf or JSON by the client's content type, a patch
 * (ctype set) as JSON; the answer, an object of kind, read by nl_node__object. */
nl_kube_req_t *nl_node__request(nl_node_t *n, const char *method, const char *path,
                                const char *kind, const char *ctype, json_t *body,
                                nl_node_answer_t answer, nl_kube_done_fn cb, void *ctx);
/* True when obj (an answer) is a PartialObjectMetadata: metadata only. */
bool nl_node__partial(const json_t *obj);
/* The object of a 2xx answer (JSON or protobuf), or NULL (logged) when it does
 * not decode. */
json_t *nl_node__object(const nl_kube_response_t *resp);
int64_t nl_node__now_ns(const nl_node_t *n);
/* A period as upstream's wait.JitterUntil(f, period, 0.04, true) waits it:
 * stretched by up to 4%, drawn from rng, so that nodes started together (or
 * reconnected together) do not send in step. */
uint64_t nl_node__jittered(nl_backoff_t *rng, uint64_t period_ms);
void nl_node__fail(nl_node_faillog_t *l, uint64_t now_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void nl_node__ok(nl_node_faillog_t *l);
/* The apiserver's message of a failed request (resp or err), into *out. */
void nl_node__req_err(const nl_kube_response_t *resp, const nl_err_t *err, nl_err_t **out);

#endif
