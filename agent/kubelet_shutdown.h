/* Graceful node shutdown in the agent: what starts it and what it does.
 *
 * Started by systemd-logind's PrepareForShutdown where logind runs (its delay
 * inhibitor, managers/logind.h, released when done), by the shutdown hook
 * (`nanolet shutdown-hook`, agent/cmd_shutdown.c), which connects to
 * <rootDir>/shutdown.sock and writes "shutdown\n", or by SIGUSR1 (as
 * upstream). Then, as upstream's node shutdown manager: a
 * NodeShutdown event on the node, the node's Ready condition False ("node is
 * shutting down") at once, new pods rejected (NodeShutdown), and the active pods
 * stopped group by group (managers/shutdown.h), each marked Failed with reason
 * Terminated and the DisruptionTarget condition. Every hook connected gets
 * "done in <ms> ms\n" when the last group has finished (or its period has run
 * out) and the connection closes. The loop runs on meanwhile: probes, PLEG,
 * status and API writes go on. The node stays shutting down until the agent
 * exits.
 *
 * Internal to agent/: kubelet.c owns it through nl_kubelet_t.shutdown. */
#ifndef NL_KUBELET_SHUTDOWN_H
#define NL_KUBELET_SHUTDOWN_H

#include <stdbool.h>

#include "agent/kubelet.h"

/* The hook's socket under the root dir (new string). */
char *nl_kshutdown_socket_path(const char *root_dir);

/* Sets up the manager (k->shutdown). Returns 0 or -1 with *err. */
int nl__kubelet_shutdown_init(nl_kubelet_t *k, nl_err_t **err);
/* Listens on the socket and for SIGUSR1. Returns 0 or -1 with *err. */
int nl__kubelet_shutdown_start(nl_kubelet_t *k, nl_err_t **err);
/* Closes its handles (each releases one of k->pending) and frees it. */
void nl__kubelet_shutdown_stop(nl_kubelet_t *k);
/* Starts the shutdown (idempotent). */
void nl__kubelet_shutdown_begin(nl_kubelet_t *k, const char *why);
/* Whether graceful node shutdown has begun. */
bool nl__kubelet_shutting_down(const nl_kubelet_t *k);
/* A pod's worker has finished: its containers are stopped. */
void nl__kubelet_shutdown_pod_finished(nl_kubelet_t *k, const char *uid);

#endif
