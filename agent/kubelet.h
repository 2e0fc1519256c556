/* The agent: the only place that wires managers and sources together, and the
 * sync-loop dispatch (docs/ARCHITECTURE.md). Owns every handle of the process through its
 * managers; nl_kubelet_stop closes them all. */
#ifndef NL_KUBELET_H
#define NL_KUBELET_H

#include <stdbool.h>
#include <uv.h>

#include "agent/config.h"
#include "agent/kube/client.h"
#include "agent/kube/kubeconfig.h"
#include "agent/kubelet_certs.h"
#include "agent/kserver_logs.h"
#include "agent/kserver_nodelog.h"
#include "agent/server.h"
#include "managers/logrotate.h"
#include "cri/conn.h"
#include "managers/events.h"
#include "managers/devices.h"
#include "managers/dra.h"
#include "managers/plugins.h"
#include "managers/podresources.h"
#include "managers/eviction.h"
#include "managers/gc.h"
#include "managers/mirror.h"
#include "managers/node.h"
#include "managers/objects.h"
#include "managers/oom.h"
#include "agent/kserver_stream.h"
#include "agent/stats.h"
#include "managers/metrics.h"
#include "managers/runtimeclass.h"
#include "managers/services.h"
#include "managers/pleg.h"
#include "managers/pod_manager.h"
#include "managers/pod_workers.h"
#include "managers/probe.h"
#include "managers/resize.h"
#include "managers/userns.h"
#include "managers/runtime.h"
#include "managers/status_manager.h"
#include "managers/sysctl.h"
#include "managers/tokens.h"
#include "reactor/list.h"
#include "sources/apiserver.h"
#include "sources/config.h"
#include "sources/file.h"
#include "sources/url.h"
#include "reactor/error.h"

typedef struct nl_kubelet nl_kubelet_t;
typedef void (*nl_kubelet_done_cb)(nl_kubelet_t *k);

struct nl_kubelet {
  uv_loop_t *loop;
  const nl_kubelet_config_t *cfg; /* borrowed; outlives the kubelet */
  const nl_kubelet_creds_t *creds; /* borrowed, or NULL (standalone) */
  char *node_name;                /* owned */
  bool standalone;
  int stopping;        /* 0 running, 1 stopping, 2 stopped */
  int pending;         /* handles and managers still closing */
  nl_kubelet_done_cb done_cb;
  uv_signal_t sigterm, sigint;
  int signals_seen;
  uv_timer_t sync_ticker;  /* 1 s: pods due for resync (upstream syncCh) */
  uv_timer_t housekeeping; /* 2 s: forget what is gone (housekeepingCh) */
  uint64_t last_sync_loop_ms;
  uint64_t heap_trimmed_ms; /* loop time of the last malloc_trim */
  bool server_up;
  nl_agent_server_t server;   /* the local /healthz listener */
  struct nl_kserver *kserver; /* the kubelet server on port 10250, or NULL; owned */
  nl_kserver_logs_t logs;     /* its /containerLogs handler's context */
  nl_kserver_nodelog_t nodelog; /* its /logs/ handler's context */
  bool cri_up;
  nl_cri_client_t cri;
  char *runtime_version; /* "containerd 1.6.20" once the runtime answered */
  bool runtime_config_known; /* RuntimeConfig answered, or said it is not implemented */
  nl_kmetrics_t metrics;  /* /metrics and /metrics/probes; freed last */
  /* The kubelet server's CRI users (kubelet_stream.c, kubelet_metrics.c):
   * /exec, /attach, /portForward sessions and /stats, /metrics/resource,
   * /metrics/cadvisor. */
  bool streams_up, stats_up;
  nl_kserver_stream_t streams;
  nl_stats_server_t stats;
  uv_timer_t runtime_retry;

  /* Pods (kubelet_pods.c). */
  int64_t started_ns;          /* the PLEG clock at start: the first syncs wait for a
                                * relist after it, so adoption sees the runtime */
  nl_pod_config_t pod_config;  /* the sources, merged */
  bool file_source_up;
  nl_file_source_t file_source;
  bool url_source_up;
  nl_url_source_t url_source;  /* staticPodURL */
  nl_pod_manager_t pods;       /* what the sources want */
  nl_pod_workers_t workers;
  bool cgroups_up;
  bool evict_alloc_memory; /* an allocatableMemory.available threshold: the pods cgroup is read */
  nl_cgroups_t cgroups;        /* the container manager; outlives the runtime manager */
  bool credprov_up;
  nl_credprov_t credprov;       /* image credential provider plugins (kubelet_credprov.c) */
  bool resize_up;
  nl_resize_t resize;          /* in-place resize (kubelet_resize.c); outlives the runtime */
  bool userns_up;
  nl_userns_t userns;          /* pod user namespaces (kubelet_userns.c); outlives the runtime */
  uint64_t resize_retry_ms;    /* loop time of the last retry of pending resizes */
  bool runtime_up, pleg_up;
  nl_runtime_t runtime;
  nl_pleg_t pleg;
  int cri_users;               /* runtime and pleg still stopping: the CRI
                                * client is stopped after them */
  nl_sysctl_allowlist_t sysctls; /* safe + allowedUnsafeSysctls (admission) */
  bool apparmor_host;            /* the kernel has AppArmor enabled (admission) */
  nl_map_t pod_states;         /* uid -> status, reasons, last sync */
  nl_map_t orphans;            /* uid -> housekeeping kill in flight */
  /* "namespace/name" -> uid (owned) of a static pod that a source no longer
   * wants and whose worker has not finished: a static pod of the same name
   * waits for it, and its mirror pod stays (upstream allowStaticPodStart,
   * deleteOrphanedMirrorPods). */
  nl_map_t static_terminating;
  /* uid -> the pods (uids) a critical pod preempted: it starts once they
   * have finished (kubelet_preempt.c) */
  nl_map_t preempt_waits;
  uv_fs_t pods_dir_scan;       /* <root-dir>/pods, for orphaned pod directories */
  bool pods_dir_scanning;
  nl_list_t calls;             /* syncer calls in flight */

  struct nl_kshutdown *shutdown; /* graceful node shutdown (kubelet_shutdown.c); owned */
  nl_oom_watcher_t oom;          /* kernel OOM kills from /dev/kmsg */

  /* --runonce: check the pods every second until all run or time is up. */
  uv_timer_t runonce_timer;
  int runonce_checks;
  int exit_code; /* the process's exit status once stopped */

  /* --exit-on-lock-contention: an inotify watch of the lock file. */
  int lock_watch_fd;
  bool lock_watch_up;
  uv_poll_t lock_watch;

  /* Device plugins and the pod resources API (kubelet_devices.c). */
  bool devices_up, podres_up;
  bool resource_health; /* featureGates ResourceHealthStatus: device health in pod status */
  nl_devices_t devices;
  nl_podres_t podres;

  /* Dynamic Resource Allocation: the plugin manager and the DRA manager
   * (kubelet_dra.c). */
  bool plugins_up, dra_up;
  nl_plugins_t plugins;
  nl_dra_t dra;

  /* Eviction and garbage collection (kubelet_evict.c): CRI users. */
  bool gc_up, eviction_up;
  nl_gc_t gc;
  nl_eviction_t eviction;

  /* Probes (kubelet_pods.c, nl__kubelet_probes_*): a CRI user (exec). */
  bool logrotate_up;
  nl_logrotate_t logrotate;    /* container log rotation, a CRI user */
  bool probes_up;
  nl_probe_manager_t probes;

  /* Events (kubelet_node.c): logged always, sent when joined. */
  bool events_up;
  nl_events_t events;
  /* Services for the pods' environment (kubelet_node.c): watched when joined. */
  bool services_up;
  nl_services_t services;
  bool tokens_up;
  nl_tokens_t tokens; /* projected service-account tokens */
  /* RuntimeClasses for the pods' runtime handlers (kubelet_node.c): joined only. */
  bool runtimeclasses_up;
  nl_runtimeclasses_t runtimeclasses;

  /* The cluster (kubelet_node.c); none of it when standalone. */
  nl_kube_client_t *kube;    /* owned */
  nl_kube_client_t *bootstrap_kube; /* --bootstrap-kubeconfig's, or NULL; owned */
  struct nl_certmgr *client_certs;  /* client certificate (bootstrap, rotation), or NULL */
  struct nl_certmgr *server_certs;  /* serverTLSBootstrap, or NULL */
  bool joined;               /* the cluster half runs (it waits for a client certificate) */
  int kube_users;            /* node manager, API source, Services watch and event
                              * recorder still stopping: the API client is
                              * stopped after them */
  nl_api_source_t *api_source; /* owned; the "api" pod source */
  nl_objects_t *objects;       /* owned; the ConfigMaps and Secrets pods reference */
  bool node_up;
  nl_node_t node;            /* a CRI user */
  nl_node_taint_t *taints;   /* --register-with-taints, owned */
  size_t n_taints;
  nl_status_manager_t statuses; /* pod statuses to the API (with node_up) */
  nl_mirror_manager_t mirrors;  /* static pods' mirror pods (with node_up) */
  int api_users_stopping;       /* of statuses and mirrors: the node manager
                                 * stops after them */
};

/* creds: the client credentials (borrowed; outlive the kubelet), or NULL to run
 * standalone. Returns 0, or -1 with *err. Takes nothing from cfg. */
int nl_kubelet_init(nl_kubelet_t *k, uv_loop_t *loop, const nl_kubelet_config_t *cfg,
                    const char *node_name, const nl_kubelet_creds_t *creds, nl_err_t **err);
/* Starts managers, servers and signal handling. Returns 0 or -1 with *err (the
 * caller then calls nl_kubelet_stop to release what started). */
int nl_kubelet_start(nl_kubelet_t *k, nl_err_t **err);
/* Stops everything; done_cb runs once every handle has closed. Idempotent. */
void nl_kubelet_stop(nl_kubelet_t *k, nl_kubelet_done_cb done_cb);

#endif
