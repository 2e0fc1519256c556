/* nanolet's entry: subcommands, flags over the config file, the start-up sequence
 * of the upstream kubelet's run(), and the exit status. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "agent/cmd_cri.h"
#include "agent/cmd_manifest.h"
#include "agent/cmd_shutdown.h"
#include "agent/config.h"
#include "agent/kubelet.h"
#include "agent/startup.h"
#include "agent/stats.h"
#include "managers/cgroups.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static int usage_error(const char *msg) {
  fprintf(stderr, "Error: %s\n", msg);
  nl_flags_usage(stderr);
  return 2;
}

static void on_stopped(nl_kubelet_t *k) { (void)k; }

static int run(nl_kubelet_config_t *cfg, const nl_kubelet_creds_t *creds) {
  nl_err_t *err = NULL;
  int lock_fd = -1;
  if (cfg->lock_file && *cfg->lock_file) {
    if ((lock_fd = nl_startup_lock(cfg->lock_file, &err)) < 0) goto fail;
  }
  char *node_name = nl_startup_node_name(cfg->hostname_override, &err);
  if (!node_name) goto fail;
  nl_info("nanolet %s starting, node name %s", NANOLET_VERSION, node_name);
  if (geteuid() != 0) nl_warn("not running as root: pods may fail to start");
  if (nl_startup_oom_score_adj(cfg->oom_score_adj, &err) < 0) {
    nl_warn("failed to set oom_score_adj to %d: %s", cfg->oom_score_adj, nl_err_msg(err));
    nl_err_free(&err);
  }

  if (nl_startup_data_dirs(cfg->root_dir, &err) < 0) goto fail;
  /* As upstream's setupDataDirs: the root directory on a shared mount, so that
   * Bidirectional and HostToContainer mounts under it propagate. Here, before
   * the loop runs, as the other start-up file work: two mount calls and one
   * read of /proc/self/mountinfo, once. Upstream refuses to start when it
   * fails; nanolet warns (not root, a locked-down host) and runs on: only pods
   * that ask for propagation fail, with the runtime's message. */
  if (nl_startup_make_rshared(cfg->root_dir, &err) < 0) {
    nl_warn("%s: mount propagation under it will not work", nl_err_msg(err));
    nl_err_free(&err);
  }

  /* 0.0.0.0 and :: mean "choose one" upstream, as does no --node-ip at all. */
  if (!cfg->node_ip || !*cfg->node_ip || strcmp(cfg->node_ip, "0.0.0.0") == 0 ||
      strcmp(cfg->node_ip, "::") == 0) {
    free(cfg->node_ip);
    cfg->node_ip = nl_startup_node_ip(cfg->hostname_override, "/proc/net/route");
    if (cfg->node_ip)
      nl_info("node IP %s (set --node-ip to choose another)", cfg->node_ip);
    else
      nl_warn("no node IP found: pods see no hostIP (set --node-ip)");
  }

  /* A peer that hangs up (the runtime, a probe target, an HTTP client) must be an
   * error on that connection, not the end of the agent. */
  signal(SIGPIPE, SIG_IGN);
  /* One malloc arena: the loop does nearly all allocation, and the thread
   * pool's few jobs (file reads, host facts) would otherwise each get an arena
   * of their own, tens of KiB of RSS apiece for a handful of small buffers. */
#ifdef M_ARENA_MAX /* glibc's; musl's malloc has no arenas */
  mallopt(M_ARENA_MAX, 1);
#endif
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_kubelet_t k;
  int rc = 0;
  if (nl_kubelet_init(&k, &loop, cfg, node_name, creds, &err) < 0 || nl_kubelet_start(&k, &err) < 0) {
    nl_error("failed to run nanolet: %s", nl_err_msg(err));
    nl_err_free(&err);
    nl_kubelet_stop(&k, on_stopped);
    rc = 1;
  } else {
    if (cfg->pid_file && *cfg->pid_file && nl_startup_write_pid_file(cfg->pid_file, &err) < 0) {
      nl_warn("%s", nl_err_msg(err));
      nl_err_free(&err);
    }
    if (nl_startup_notify_ready(&err) < 0) {
      nl_warn("%s", nl_err_msg(err));
      nl_err_free(&err);
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  if (k.exit_code) rc = k.exit_code;
  int close_rc = uv_loop_close(&loop);
  if (close_rc != 0) {
    nl_error("loop closed with handles still open: %s", uv_strerror(close_rc));
    rc = 1;
  }
  free(k.node_name);
  free(node_name);
  if (lock_fd >= 0) close(lock_fd);
  return rc;
fail:
  nl_error("failed to run nanolet: %s", nl_err_msg(err));
  nl_err_free(&err);
  if (lock_fd >= 0) close(lock_fd);
  return 1;
}

int main(int argc, char **argv) {
  nl_kubelet_config_t cfg;
  nl_err_t *err = NULL;
  bool help, version;

  if (argc > 1 && strcmp(argv[1], "manifest") == 0) return nl_cmd_manifest(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "cri") == 0) return nl_cmd_cri(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "shutdown-hook") == 0)
    return nl_cmd_shutdown_hook(argc - 1, argv + 1);

  if (nl_config_read(&cfg, argc, argv, &err) < 0) {
    fprintf(stderr, "Error: %s\n", nl_err_msg(err));
    nl_err_free(&err);
    nl_config_free(&cfg);
    return 2;
  }
  if (nl_flags_parse(&cfg, argc, argv, &help, &version, &err) < 0) {
    int rc = usage_error(nl_err_msg(err));
    nl_err_free(&err);
    nl_config_free(&cfg);
    return rc;
  }
  if (help || version) {
    if (help)
      nl_flags_usage(stdout);
    else
      printf("nanolet v%s (kubelet-compatible node agent)\n", NANOLET_VERSION);
    nl_config_free(&cfg);
    return 0;
  }
  if (nl_config_validate(&cfg, &err) < 0) {
    fprintf(stderr, "Error: invalid configuration: %s\n", nl_err_msg(err));
    nl_err_free(&err);
    nl_config_free(&cfg);
    return 2;
  }
  nl_log_set_verbosity(cfg.verbosity);
  if (nl_config_check_ignored(&cfg, &err) < 0) {
    fprintf(stderr, "Error: %s\n", nl_err_msg(err));
    nl_err_free(&err);
    nl_config_free(&cfg);
    return 2;
  }
  /* Upstream's node status would refuse it at every update, and the apiserver
   * could not reach the node at it: refused before anything starts. */
  if (nl_startup_check_node_ip(cfg.node_ip, &err) < 0) {
    fprintf(stderr, "Error: %s\n", nl_err_msg(err));
    nl_err_free(&err);
    nl_config_free(&cfg);
    return 2;
  }
  /* kubeletCgroups before anything else. The kernel charges a page to the
   * memory cgroup that first touched it, and what the start so far touched
   * (the program's relocated data, its libraries', the configuration) stays
   * where it was: when the move changed its cgroups, nanolet starts over from
   * exec, so that its cgroup holds all of its memory. The second start finds
   * itself in place and goes on (no loop, also where a hierarchy is missing). */
  if (cfg.kubelet_cgroups && *cfg.kubelet_cgroups) {
    char *before = nl__stats_slurp("/proc/self/cgroup");
    if (nl_cgroups_join_self(NULL, cfg.kubelet_cgroups, &err) < 0) {
      fprintf(stderr, "Error: %s\n", nl_err_msg(err));
      nl_err_free(&err);
      free(before);
      nl_config_free(&cfg);
      return 1;
    }
    char *after = nl__stats_slurp("/proc/self/cgroup");
    bool moved = before && after && strcmp(before, after) != 0;
    free(before);
    free(after);
    if (moved) {
      execv("/proc/self/exe", argv);
      nl_warn("kubeletCgroups: exec /proc/self/exe again: %s; going on", strerror(errno));
    }
  }
  /* A kubeconfig that cannot be used is a configuration error, as upstream. */
  nl_kubelet_creds_t creds = {0};
  bool joined = cfg.kubeconfig && *cfg.kubeconfig;
  if (!joined && cfg.bootstrap_kubeconfig && *cfg.bootstrap_kubeconfig)
    nl_warn("--bootstrap-kubeconfig is ignored without --kubeconfig (the file the bootstrap "
            "writes)");
  if (joined && nl_kubelet_creds_load(&creds, &cfg, &err) < 0) {
    fprintf(stderr, "Error: invalid kubeconfig: %s\n", nl_err_msg(err));
    nl_err_free(&err);
    nl_config_free(&cfg);
    return 2;
  }
  int rc = run(&cfg, joined ? &creds : NULL);
  nl_kubelet_creds_free(&creds);
  nl_config_free(&cfg);
  return rc;
}
