#include "agent/kubelet.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <sys/inotify.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/kubelet_cgroups.h"
#include "agent/kubelet_resize.h"
#include "agent/kubelet_userns.h"
#include "agent/kubelet_evict.h"
#include "agent/kubelet_metrics.h"
#include "agent/kubelet_credprov.h"
#include "agent/kubelet_devices.h"
#include "agent/kubelet_dra.h"
#include "agent/kubelet_node.h"
#include "agent/kubelet_pods.h"
#include "agent/kubelet_stream.h"
#include "agent/kubelet_server.h"
#include "agent/kubelet_shutdown.h"
#include "agent/model/quantity.h"
#include "cri/runtime.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

void nl__kubelet_release(nl_kubelet_t *k) {
  if (--k->pending > 0) return;
  k->stopping = 2;
  nl__kubelet_pods_free(k);
  nl__kubelet_userns_free(k);
  nl_kmetrics_free(&k->metrics);
  free(k->runtime_version);
  k->runtime_version = NULL;
  nl_info("all managers stopped");
  if (k->done_cb) k->done_cb(k);
}

static void on_handle_closed(uv_handle_t *h) { nl__kubelet_release(h->data); }

static void on_server_stopped(nl_http_server_t *srv, void *ctx) {
  (void)srv;
  nl__kubelet_release(ctx);
}

/* Upstream's syncLoopHealthCheck: the loop must have iterated within twice the
 * resync interval, and never less than 5 minutes. */
static int syncloop_check(void *ctx, nl_err_t **err) {
  nl_kubelet_t *k = ctx;
  uint64_t limit = (uint64_t)(k->cfg->sync_frequency / 1000000) * 2;
  if (limit < 5 * 60 * 1000) limit = 5 * 60 * 1000;
  uint64_t since = uv_now(k->loop) - k->last_sync_loop_ms;
  if (since > limit)
    return nl_err_set(err, NL_ETIMEOUT, "sync Loop took longer than expected (%llums)",
                      (unsigned long long)since);
  return 0;
}

static int pleg_check(void *ctx, nl_err_t **err) {
  nl_kubelet_t *k = ctx;
  return nl_pleg_healthy(&k->pleg, nl_pleg_monotonic_ns(NULL), err) ? 0 : -1;
}

static void on_sync_tick(uv_timer_t *t) {
  nl_kubelet_t *k = container_of(t, nl_kubelet_t, sync_ticker);
  k->last_sync_loop_ms = uv_now(k->loop);
  nl__kubelet_pods_sync_tick(k);
}

/* glibc gives memory back to the kernel only from the top of its heap; the
 * pages of chunks freed below stay mapped. Bursts (a start's lists, syncs and
 * status patches; 100 object lists at once) leave a few hundred KiB of them
 * that no later peak may need, so every HEAP_TRIM_MS the free pages go back
 * (a walk of glibc's free lists and a madvise per free run of pages). */
enum { HEAP_TRIM_MS = 10000 };

static void heap_trim(nl_kubelet_t *k) {
#ifdef __GLIBC__
  if (uv_now(k->loop) - k->heap_trimmed_ms < HEAP_TRIM_MS) return;
  k->heap_trimmed_ms = uv_now(k->loop);
  malloc_trim(0);
#else
  (void)k;
#endif
}

static void on_housekeeping(uv_timer_t *t) {
  nl_kubelet_t *k = container_of(t, nl_kubelet_t, housekeeping);
  if (!k->cfg->runonce) nl__kubelet_pods_housekeeping(k);
  heap_trim(k);
}

/* upstream runOnce: the static pods are started once, the agent waits for them
 * to run (up to RUNONCE_MAX_CHECKS seconds) and exits; the pods keep running.
 * Housekeeping never removes anything in this mode. */
enum { RUNONCE_MAX_CHECKS = 120 };

static void on_runonce_check(uv_timer_t *t) {
  nl_kubelet_t *k = container_of(t, nl_kubelet_t, runonce_timer);
  size_t total;
  if (!nl_pod_config_sources_ready(&k->pod_config)) return;
  size_t waiting = nl__kubelet_pods_not_running(k, &total);
  if (waiting && ++k->runonce_checks < RUNONCE_MAX_CHECKS) return;
  if (waiting) {
    nl_error("runonce: %zu of %zu pods did not start", waiting, total);
    k->exit_code = 1;
  } else {
    nl_info("runonce: all %zu pods are running", total);
  }
  nl_kubelet_stop(k, k->done_cb);
}

/* upstream watchForLockfileContention: another process opening (or deleting)
 * the lock file asks this agent to go away and hand the lock over. */
static void on_lock_event(uv_poll_t *p, int status, int events) {
  nl_kubelet_t *k = container_of(p, nl_kubelet_t, lock_watch);
  char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  ssize_t n = read(k->lock_watch_fd, buf, sizeof buf);
  if (n <= 0 && status == 0) return;
  nl_info("lock file %s is wanted by another process: exiting", k->cfg->lock_file);
  nl_kubelet_stop(k, k->done_cb);
}

static void on_lock_watch_closed(uv_handle_t *h) {
  nl_kubelet_t *k = h->data;
  close(k->lock_watch_fd);
  nl__kubelet_release(k);
}

static int watch_lock_file(nl_kubelet_t *k, nl_err_t **err) {
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return nl_err_set(err, errno, "inotify: %s", strerror(errno));
  if (inotify_add_watch(fd, k->cfg->lock_file, IN_OPEN | IN_DELETE_SELF) < 0) {
    int e = errno;
    close(fd);
    return nl_err_set(err, e, "watch lock file %s: %s", k->cfg->lock_file, strerror(e));
  }
  k->lock_watch_fd = fd;
  uv_poll_init(k->loop, &k->lock_watch, fd);
  k->lock_watch.data = k;
  k->lock_watch_up = true;
  k->pending++;
  uv_poll_start(&k->lock_watch, UV_READABLE, on_lock_event);
  return 0;
}

static void on_cri_stopped(nl_cri_client_t *c) {
  nl__kubelet_release(container_of(c, nl_kubelet_t, cri));
}

/* The CRI client goes last: the runtime manager, PLEG, probes and the node
 * manager use it until they stop. */
void nl__kubelet_cri_user_stopped(nl_kubelet_t *k) {
  if (--k->cri_users > 0) return;
  if (k->cri_up) nl_cri_client_stop(&k->cri, on_cri_stopped);
  nl__kubelet_release(k);
}

static void on_runtime_stopped(nl_runtime_t *rt) {
  nl_kubelet_t *k = container_of(rt, nl_kubelet_t, runtime);
  nl__kubelet_cgroups_stop(k); /* the runtime's work on pod cgroups is over */
  nl__kubelet_resize_stop(k);  /* and its updates of the actuated resources */
  nl__kubelet_cri_user_stopped(k);
}

static void on_pleg_stopped(nl_pleg_t *p) { nl__kubelet_cri_user_stopped(container_of(p, nl_kubelet_t, pleg)); }

static void on_logrotate_stopped(nl_logrotate_t *r) {
  nl__kubelet_cri_user_stopped(container_of(r, nl_kubelet_t, logrotate));
}

static void on_probes_stopped(nl_probe_manager_t *m) {
  nl__kubelet_cri_user_stopped(container_of(m, nl_kubelet_t, probes));
}

static void on_oom_stopped(nl_oom_watcher_t *w) {
  nl__kubelet_release(container_of(w, nl_kubelet_t, oom));
}

static void on_file_source_stopped(nl_file_source_t *src) {
  nl__kubelet_release(container_of(src, nl_kubelet_t, file_source));
}

static void on_url_source_stopped(nl_url_source_t *src) {
  nl__kubelet_release(container_of(src, nl_kubelet_t, url_source));
}

/* A source's full set to the merger (which takes the pods). */
static void set_pods(nl_kubelet_t *k, const char *source, nl_pod_t **pods, size_t n) {
  nl_err_t *err = NULL;
  if (nl_pod_config_set(&k->pod_config, source, pods, n, &err) < 0) {
    nl_error("%s source: %s", source, nl_err_msg(err));
    nl_err_free(&err);
  }
}

static void on_url_pods(nl_pod_t **pods, size_t n, void *ctx) {
  set_pods(ctx, NL_SOURCE_HTTP, pods, n);
}

/* featureGates (each value true or false, which the config parser checks):
 * nanolet knows EventedPLEG (upstream's, off by default),
 * ResourceHealthStatus and KubeletCrashLoopBackOffMax (beta, on by default)
 * and ReduceDefaultCrashLoopBackOffDecay (alpha, off): any other gate is
 * ignored, and said so at start-up. */
static void feature_gates(const nl_kubelet_config_t *cfg) {
  static const char *const known[] = {"EventedPLEG", "ResourceHealthStatus",
                                      "KubeletCrashLoopBackOffMax",
                                      "ReduceDefaultCrashLoopBackOffDecay"};
  const nl_config_map_t *m = &cfg->feature_gates;
  for (size_t i = 0; i < m->n; i++) {
    size_t j = 0;
    while (j < sizeof known / sizeof *known && strcmp(m->keys[i], known[j]) != 0) j++;
    if (j == sizeof known / sizeof *known)
      nl_warn("featureGates: %s is not known to nanolet: ignored", m->keys[i]);
  }
}

/* staticPodURLHeader (map[string][]string): one header per value. */
static int url_source_init(nl_kubelet_t *k, nl_err_t **err) {
  const nl_config_map_t *hm = &k->cfg->static_pod_url_header;
  size_t n = 0;
  for (size_t i = 0; i < hm->n; i++) n += hm->values[i].n;
  nl_http_header_t h[n ? n : 1];
  n = 0;
  for (size_t i = 0; i < hm->n; i++)
    for (size_t j = 0; j < hm->values[i].n; j++)
      h[n++] = (nl_http_header_t){hm->keys[i], hm->values[i].v[j]};
  if (nl_url_source_init(&k->url_source, k->loop, k->cfg->static_pod_url, h, n,
                         (uint64_t)(k->cfg->http_check_frequency / 1000000), k->node_name,
                         on_url_pods, k, err) < 0)
    return nl_err_wrap(err, "staticPodURL");
  k->url_source_up = true;
  k->pending++;
  nl_pod_config_add_source(&k->pod_config, NL_SOURCE_HTTP);
  return 0;
}

static void on_file_pods(nl_pod_t **pods, size_t n, void *ctx) {
  set_pods(ctx, NL_SOURCE_FILE, pods, n);
}

static void check_runtime(nl_kubelet_t *k);

static void on_runtime_retry(uv_timer_t *t) {
  check_runtime(container_of(t, nl_kubelet_t, runtime_retry));
}

/* The runtime's cgroup driver (RuntimeConfig), which upstream's kubelet takes
 * in place of its cgroupDriver. nanolet's cgroups are made before the runtime
 * answers (it starts before the runtime does), so it keeps its own and says
 * when the two differ (docs/DIFFERENCES.md). A runtime without RuntimeConfig
 * (containerd before 1.7) is counted as upstream counts it:
 * kubelet_cri_losing_support{version="1.37.0"}. */
static void on_runtime_config(const nl_grpc_status_t *st, Runtime__V1__RuntimeConfigResponse *resp,
                              void *ctx) {
  nl_kubelet_t *k = ctx;
  if (k->stopping) return;
  if (st->code == NL_GRPC_UNIMPLEMENTED) {
    k->runtime_config_known = true;
    nl_kmetrics_cri_losing_support(&k->metrics, "1.37.0");
    nl_info("CRI implementation should be updated to support RuntimeConfig. Falling back to using "
            "cgroupDriver from kubelet config.");
    return;
  }
  if (st->code != NL_GRPC_OK) { /* asked again with the next Version */
    char *msg = nl_grpc_status_format(st);
    nl_warn("container runtime's RuntimeConfig failed: %s; asking again in 5s", msg);
    free(msg);
    uv_timer_start(&k->runtime_retry, on_runtime_retry, 5000, 0);
    return;
  }
  k->runtime_config_known = true;
  if (!resp->linux) return;
  const char *theirs =
      resp->linux->cgroup_driver == RUNTIME__V1__CGROUP_DRIVER__SYSTEMD ? "systemd" : "cgroupfs";
  if (strcmp(theirs, k->cfg->cgroup_driver) != 0)
    nl_error("the container runtime uses the %s cgroup driver and cgroupDriver is %s: the pods' "
             "cgroups will not be where the runtime puts their containers; set cgroupDriver: %s",
             theirs, k->cfg->cgroup_driver, theirs);
  else
    nl_info("the container runtime's cgroup driver is %s, as cgroupDriver", theirs);
}

/* Upstream validates the runtime with Version at start and exits when it fails;
 * an edge agent keeps trying instead, so that it comes up before containerd
 * does and rides out a runtime restart (docs/DIFFERENCES.md). */
static void on_version(const nl_grpc_status_t *st, Runtime__V1__VersionResponse *resp, void *ctx) {
  nl_kubelet_t *k = ctx;
  if (k->stopping) return;
  if (st->code != NL_GRPC_OK) {
    char *msg = nl_grpc_status_format(st);
    nl_error("container runtime is not ready: %s; retrying in 5s", msg);
    free(msg);
    uv_timer_start(&k->runtime_retry, on_runtime_retry, 5000, 0);
    return;
  }
  free(k->runtime_version);
  k->runtime_version = nl_xasprintf("%s %s", resp->runtime_name, resp->runtime_version);
  if (k->runtime_up) nl_runtime_set_version(&k->runtime, resp->runtime_name, resp->runtime_version);
  nl_info("container runtime %s (CRI %s) at %s", k->runtime_version, resp->runtime_api_version,
          k->cfg->container_runtime_endpoint);
  if (!k->runtime_config_known) {
    Runtime__V1__RuntimeConfigRequest req = RUNTIME__V1__RUNTIME_CONFIG_REQUEST__INIT;
    nl_cri_runtime_config(&k->cri, &req, on_runtime_config, k);
  }
}

static void check_runtime(nl_kubelet_t *k) {
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  req.version = "v1";
  nl_cri_version(&k->cri, &req, on_version, k);
}

static void on_signal(uv_signal_t *s, int signum) {
  nl_kubelet_t *k = s->data;
  if (++k->signals_seen > 1) {
    /* As upstream: a second signal exits at once. */
    static const char msg[] = "nanolet: second signal, exiting now\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
  }
  nl_info("received %s, shutting down (pods keep running)", strsignal(signum));
  nl_kubelet_stop(k, k->done_cb);
}

static void pleg_stopping(void *pleg, const char *container_id) {
  nl_pleg_stopping(pleg, container_id);
}

static bool oom_killed_in(void *oom, const char *container_id) {
  return nl_oom_watcher_killed_in(oom, container_id);
}

int nl_kubelet_init(nl_kubelet_t *k, uv_loop_t *loop, const nl_kubelet_config_t *cfg,
                    const char *node_name, const nl_kubelet_creds_t *creds, nl_err_t **err) {
  memset(k, 0, sizeof *k);
  k->loop = loop;
  k->cfg = cfg;
  k->creds = creds;
  k->node_name = nl_xstrdup(node_name);
  nl__kubelet_metrics_init(k);
  if (nl__kubelet_pods_init(k, err) < 0) return -1;
  k->workers.metrics = &k->metrics;
  uv_signal_init(loop, &k->sigterm);
  uv_signal_init(loop, &k->sigint);
  uv_timer_init(loop, &k->sync_ticker);
  uv_timer_init(loop, &k->housekeeping);
  uv_timer_init(loop, &k->runtime_retry);
  uv_timer_init(loop, &k->runonce_timer);
  k->sigterm.data = k->sigint.data = k->sync_ticker.data = k->housekeeping.data = k;
  k->runtime_retry.data = k->runonce_timer.data = k;
  k->pending = 6;
  if (nl__kubelet_shutdown_init(k, err) < 0) return -1;
  /* Events are the recorder's, made with the API client below; nothing
   * records before the loop runs. */
  nl_oom_watcher_init(&k->oom, loop, "/dev/kmsg", k->node_name, nl_events_sink(&k->events));
  k->pending++;
  nl_cri_opts_t cri_opts = {.timeout_ms = (uint64_t)(cfg->runtime_request_timeout / 1000000)};
  if (nl_cri_client_init(&k->cri, loop, cfg->container_runtime_endpoint, &cri_opts, err) < 0)
    return nl_err_wrap(err, "containerRuntimeEndpoint");
  k->cri_up = true;
  k->pending++;
  nl_cri_client_observe(&k->cri, nl_kmetrics_runtime_op, &k->metrics);
  if (nl_agent_server_init(&k->server, loop, err) < 0) return -1;
  k->server_up = true;
  k->pending++;
  nl_agent_server_add_check(&k->server, "syncloop", syncloop_check, k);
  nl_agent_server_add_check(&k->server, "pleg", pleg_check, k);

  if (nl__kubelet_cgroups_init(k, err) < 0) return -1;
  if (nl__kubelet_resize_init(k, err) < 0) return -1;
  if (nl__kubelet_credprov_init(k, err) < 0) return -1;
  if (nl__kubelet_userns_init(k, err) < 0) return -1;
  nl_runtime_opts_t ro = {
      .node_name = node_name,
      .root_dir = cfg->root_dir,
      .pod_logs_dir = cfg->pod_logs_dir,
      .cluster_dns = cfg->cluster_dns.v,
      .n_cluster_dns = cfg->cluster_dns.n,
      .cluster_domain = cfg->cluster_domain,
      .resolv_conf = cfg->resolv_conf,
      .serialize_image_pulls = cfg->serialize_image_pulls,
      .seccomp_default = cfg->seccomp_default,
      .max_parallel_image_pulls = cfg->max_parallel_image_pulls,
      .max_dead_per_container = cfg->maximum_dead_containers_per_container,
      .runtime_request_timeout_ms = (uint64_t)(cfg->runtime_request_timeout / 1000000),
      .node_ip = cfg->node_ip,
      /* The recorder is made with the API client (nl__kubelet_node_init, below);
       * nothing records before the loop runs. */
      .events = nl_events_sink(&k->events),
      /* Set up with the API client too; without one there are no services. */
      .service_env = nl_services_env,
      .service_env_ctx = &k->services,
      .cgroups = &k->cgroups,
      .resize = &k->resize,
      .credprov = k->credprov_up ? &k->credprov : NULL,
      .cpu_cfs_quota = cfg->cpu_cfs_quota,
      .cpu_cfs_quota_set = true,
      /* Its API client is set with the others; standalone, tokens fail. */
      .tokens = nl_tokens_source(&k->tokens),
      .allocatable = nl__kubelet_allocatable,
      .allocatable_ctx = k,
      .supports_rro = nl__kubelet_supports_rro,
      .supports_rro_ctx = k,
      .userns = &k->userns,
      .supports_userns = nl__kubelet_supports_userns,
      .supports_userns_ctx = k,
      .devices = nl__kubelet_container_devices,
      .devices_ctx = k,
      .dra_prepare = nl__kubelet_dra_prepare,
      .dra_ctx = k,
      .sandbox_ready = nl__kubelet_sandbox_ready,
      .sandbox_ready_ctx = k,
  };
  nl_config_crash_loop_backoff(cfg, &ro.backoff_initial_ms, &ro.backoff_max_ms);
  if (nl_runtime_init(&k->runtime, loop, &k->cri, &ro, err) < 0) return -1;
  k->runtime_up = true;
  k->cri_users++;
  feature_gates(cfg);
  nl_pleg_init(&k->pleg, loop, &k->cri, 1000, nl__kubelet_pleg_event, k);
  if (nl_config_gate(cfg, "EventedPLEG", false)) nl_pleg_use_events(&k->pleg);
  k->resource_health = nl_config_gate(cfg, "ResourceHealthStatus", true);
  k->pleg.metrics = &k->metrics;
  k->pleg_up = true;
  nl_runtime_set_stop_listener(&k->runtime, pleg_stopping, &k->pleg);
  nl_pleg_set_oom_source(&k->pleg, oom_killed_in, &k->oom);
  k->cri_users++;
  if (nl__kubelet_probes_init(k, err) < 0) return -1;
  nl__kubelet_streams_init(k);
  nl__kubelet_stats_init(k);
  nl_quantity_t max_size;
  if (nl_quantity_parse(cfg->container_log_max_size, &max_size, err) < 0)
    return nl_err_wrap(err, "containerLogMaxSize");
  nl_logrotate_init(&k->logrotate, loop, &k->cri, nl_quantity_value(&max_size),
                    cfg->container_log_max_files, 0);
  k->logrotate_up = true;
  k->cri_users++;
  k->pending++; /* released when the last CRI user has stopped */
  if (nl__kubelet_evict_init(k, err) < 0) return -1;
  if (nl__kubelet_node_init(k, creds, err) < 0) return -1;
  if (nl__kubelet_server_init(k, err) < 0) return -1;
  if (nl__kubelet_server_certs_init(k, creds, err) < 0) return -1;
  if (cfg->static_pod_path && *cfg->static_pod_path) {
    if (nl_file_source_init(&k->file_source, loop, cfg->static_pod_path,
                            (uint64_t)(cfg->file_check_frequency / 1000000), node_name,
                            on_file_pods, k, err) < 0)
      return nl_err_wrap(err, "staticPodPath");
    k->file_source_up = true;
    k->pending++;
    nl_pod_config_add_source(&k->pod_config, NL_SOURCE_FILE);
  }
  if (cfg->static_pod_url && *cfg->static_pod_url && url_source_init(k, err) < 0) return -1;
  return 0;
}

int nl_kubelet_start(nl_kubelet_t *k, nl_err_t **err) {
  int r;
  if ((r = uv_signal_start(&k->sigterm, on_signal, SIGTERM)) < 0 ||
      (r = uv_signal_start(&k->sigint, on_signal, SIGINT)) < 0)
    return nl_err_set(err, -r, "signal handling: %s", uv_strerror(r));
  k->last_sync_loop_ms = uv_now(k->loop);
  k->started_ns = nl_pleg_monotonic_ns(NULL);
  check_runtime(k);
  /* before the pod sources: admission and containers need the checkpoint */
  if (nl__kubelet_devices_start(k, err) < 0) return -1;
  if (nl__kubelet_dra_start(k, err) < 0) return -1;
  if (nl__kubelet_podres_start(k, err) < 0) return -1; /* it reads both */
  nl_cgroups_start(&k->cgroups);
  nl_pleg_start(&k->pleg);
  nl_logrotate_start(&k->logrotate);
  nl__kubelet_evict_start(k);
  nl_oom_watcher_start(&k->oom); /* without it the agent goes on: it said why */
  nl__kubelet_node_start(k);
  if (k->cfg->runonce) uv_timer_start(&k->runonce_timer, on_runonce_check, 1000, 1000);
  if (k->cfg->exit_on_lock_contention && k->cfg->lock_file && *k->cfg->lock_file &&
      watch_lock_file(k, err) < 0)
    return -1;
  if (k->file_source_up && nl_file_source_start(&k->file_source, err) < 0)
    return nl_err_wrap(err, "staticPodPath");
  if (k->url_source_up) nl_url_source_start(&k->url_source);
  uv_timer_start(&k->sync_ticker, on_sync_tick, 1000, 1000);
  uv_timer_start(&k->housekeeping, on_housekeeping, 2000, 2000);
  if (k->cfg->healthz_port > 0) {
    if (nl_agent_server_listen(&k->server, k->cfg->healthz_bind_address, k->cfg->healthz_port,
                               err) < 0)
      return nl_err_wrap(err, "healthz server");
    nl_info("serving healthz on %s:%d", k->cfg->healthz_bind_address, k->cfg->healthz_port);
  }
  if (nl__kubelet_server_listen(k, err) < 0) return -1;
  if (nl__kubelet_shutdown_start(k, err) < 0) return -1;
  return 0;
}

void nl_kubelet_stop(nl_kubelet_t *k, nl_kubelet_done_cb done_cb) {
  k->done_cb = done_cb;
  if (k->stopping) return;
  k->stopping = 1;
  k->pending++; /* held until every stop below has been issued */
  uv_close((uv_handle_t *)&k->sigterm, on_handle_closed);
  uv_close((uv_handle_t *)&k->sigint, on_handle_closed);
  uv_close((uv_handle_t *)&k->sync_ticker, on_handle_closed);
  uv_close((uv_handle_t *)&k->housekeeping, on_handle_closed);
  uv_close((uv_handle_t *)&k->runtime_retry, on_handle_closed);
  uv_close((uv_handle_t *)&k->runonce_timer, on_handle_closed);
  if (k->lock_watch_up) uv_close((uv_handle_t *)&k->lock_watch, on_lock_watch_closed);
  if (k->server_up) nl_agent_server_stop(&k->server, on_server_stopped, k);
  nl__kubelet_shutdown_stop(k);
  if (k->oom.loop) nl_oom_watcher_stop(&k->oom, on_oom_stopped); /* init got that far */
  nl__kubelet_server_stop(k);
  if (k->file_source_up) nl_file_source_stop(&k->file_source, on_file_source_stopped);
  if (k->url_source_up) nl_url_source_stop(&k->url_source, on_url_source_stopped);
  nl__kubelet_podres_stop(k); /* before the device and DRA managers it reads */
  nl__kubelet_devices_stop(k); /* before the runtime: it answers what the runtime waits for */
  nl__kubelet_dra_stop(k);     /* the same */
  nl__kubelet_credprov_stop(k); /* before the runtime: its pulls wait for the plugins */
  if (k->pleg_up) nl_pleg_stop(&k->pleg, on_pleg_stopped);
  if (k->runtime_up) nl_runtime_stop(&k->runtime, on_runtime_stopped);
  else {
    nl__kubelet_cgroups_stop(k);
    nl__kubelet_resize_stop(k);
  }
  if (k->probes_up) nl_probe_manager_stop(&k->probes, on_probes_stopped);
  nl__kubelet_streams_stop(k);
  nl__kubelet_stats_stop(k);
  if (k->logrotate_up) nl_logrotate_stop(&k->logrotate, on_logrotate_stopped);
  nl__kubelet_evict_stop(k);
  nl__kubelet_node_stop(k);
  if (!k->pleg_up && !k->runtime_up) { /* init failed before them */
    k->cri_users = 1;
    k->pending++;
    nl__kubelet_cri_user_stopped(k);
  }
  nl__kubelet_release(k);
}
