/* The plugin manager (upstream pkg/kubelet/pluginmanager): kubelet plugins
 * (DRA drivers) announce themselves with a socket in <root-dir>/plugins_registry
 * that serves the registration API (cri/pluginregistration.proto).
 *
 * The directory is scanned on the thread pool every scan_ms, on the agent's
 * grid (upstream's reconciler runs every second; its fsnotify watch only fills the desired
 * state it reads): a socket file not seen before is dialled with the
 * project's gRPC client (cri/conn.h) and asked GetInfo; its type picks a
 * handler (a type no handler takes is refused: "RegisterPlugin error -- no
 * handler registered for plugin type: T at socket S"), the handler validates
 * the name, endpoint and supported versions and registers the plugin, and the
 * plugin is told the outcome with NotifyRegistrationStatus (registered true,
 * or false and upstream's error text). A socket that goes away, or is made
 * again (another inode or time), deregisters its plugin; a registration that
 * failed is tried again after a back-off (1 s doubling to 2 min, upstream's
 * operation back-off) while the same socket stays.
 *
 * Each socket is one state machine (INFO, NOTIFY, REGISTERED, FAILED,
 * CLOSING: plugins.c's step()); the registration connection is closed once the
 * plugin was told. Bounds: at most max_sockets sockets are followed (the rest
 * are logged and left), GetInfo and the notification have call_timeout_ms.
 * Nothing a plugin does blocks the loop.
 *
 * Lifetime: nl_plugins_t is embedded in its owner; nl_plugins_stop() closes the
 * timer and every connection (registered plugins are not deregistered: their
 * handlers stop on their own) and calls done once every close callback ran. */
#ifndef NL_PLUGINS_H
#define NL_PLUGINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "cri/conn.h"
#include "cri/pluginregistration.pb-c.h"
#include "reactor/error.h"
#include "reactor/list.h"

#define NL_PLUGINS_DIR "plugins_registry"

/* One plugin type's handler (upstream's cache.PluginHandler). validate and
 * register_ return 0, or -1 with *msg (allocated) saying why; endpoint is the
 * plugin's own service socket (its GetInfo endpoint, or the registration
 * socket when it gave none). deregister is told once per plugin registered. */
typedef struct nl_plugin_handler {
  const char *type; /* "DRAPlugin" */
  int (*validate)(void *ctx, const char *name, const char *endpoint, char *const *versions,
                  size_t n, char **msg);
  int (*register_)(void *ctx, const char *name, const char *endpoint, char *const *versions,
                   size_t n, char **msg);
  void (*deregister)(void *ctx, const char *name, const char *endpoint);
  void *ctx;
} nl_plugin_handler_t;

typedef struct nl_plugins_opts {
  const char *dir;           /* <root-dir>/plugins_registry (copied; made if missing) */
  uint64_t scan_ms;          /* 0: 1 s */
  uint64_t call_timeout_ms;  /* GetInfo, NotifyRegistrationStatus; 0: 10 s */
  uint64_t backoff_max_ms;   /* 0: 2 min */
  size_t max_sockets;        /* 0: 256 */
  size_t max_msg;            /* a GetInfo answer; 0: 64 KiB */
  const nl_plugin_handler_t *handlers; /* borrowed; must outlive the manager */
  size_t n_handlers;
} nl_plugins_opts_t;

typedef struct nl_plugins nl_plugins_t;
typedef void (*nl_plugins_done_fn)(nl_plugins_t *m, void *ctx);

struct nl_plugins {
  uv_loop_t *loop;
  nl_plugins_opts_t opts; /* dir owned, defaults filled in */
  bool stopping;
  uv_timer_t timer;       /* the next scan */
  struct nl_plugins_scan *scan; /* the scan on the thread pool, or NULL */
  nl_list_t socks;        /* struct nl_plugin_sock */
  size_t n_socks;
  int open;               /* timer, scan, socket clients: done at 0 */
  bool over_logged;       /* max_sockets reached was said */
  nl_plugins_done_fn done;
  void *done_ctx;
  uint64_t scans;         /* finished scans (tests) */
  uint64_t attempts;      /* registrations that ended: registered, refused or failed (tests) */
};

/* Makes the directory and starts scanning it (the first scan at once).
 * Returns 0, or -1 with *err when the directory cannot be made (then m needs
 * no stop). */
int nl_plugins_start(nl_plugins_t *m, uv_loop_t *loop, const nl_plugins_opts_t *opts,
                     nl_err_t **err);
void nl_plugins_stop(nl_plugins_t *m, nl_plugins_done_fn done, void *ctx);

/* How many plugins are registered now (tests). */
size_t nl_plugins_registered(const nl_plugins_t *m);

/* upstream's checks of a GetInfo answer before its handler's: the handler for
 * info->type, or NULL with *msg (allocated) as the plugin is told. sock is the
 * registration socket's path (for the message). Pure: for the fuzz target. */
const nl_plugin_handler_t *nl_plugins_handler(const nl_plugins_opts_t *opts,
                                              const Pluginregistration__PluginInfo *info,
                                              const char *sock, char **msg);

#endif
