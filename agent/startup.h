/* The host-facing steps of the kubelet's start-up: lock file, node name, the
 * agent's own oom_score_adj, readiness notification and pid file. */
#ifndef NL_STARTUP_H
#define NL_STARTUP_H

#include <stdbool.h>

#include "reactor/error.h"

/* Takes an exclusive flock on path, waiting for it as upstream does (this runs
 * before the loop starts). Returns the fd (kept open for the process's life), or
 * -1 with *err. */
int nl_startup_lock(const char *path, nl_err_t **err);

/* The node name: the override if given, else the hostname, lowercased as upstream.
 * Returns an allocated string, or NULL with *err. */
char *nl_startup_node_name(const char *hostname_override, nl_err_t **err);

/* Writes /proc/self/oom_score_adj. Returns 0, or -1 with *err (denied here: the
 * caller warns and goes on). */
int nl_startup_oom_score_adj(int value, nl_err_t **err);

/* Sends READY=1 to $NOTIFY_SOCKET when set (sd_notify protocol). Returns 0 when
 * sent or not asked for, -1 with *err otherwise. */
int nl_startup_notify_ready(nl_err_t **err);

int nl_startup_write_pid_file(const char *path, nl_err_t **err);

/* Creates the root directory and its pods/ directory, as upstream's
 * setupDataDirs, so that what reads them (the node's ephemeral-storage capacity
 * among others) finds them from the start. Returns 0, or -1 with *err naming
 * the directory. */
int nl_startup_data_dirs(const char *root_dir, nl_err_t **err);

/* Whether path lies on a shared mount: the last mount of mountinfo (the text of
 * /proc/self/mountinfo) whose mount point holds path has a "shared:" peer
 * group among its optional fields (upstream's isShared). path is absolute
 * and canonical. */
bool nl_startup_path_shared(const char *mountinfo, const char *path);

/* upstream's MakeRShared of the root directory at start: when it is not on a
 * shared mount, it is bind-mounted on itself and made rshared, so that the
 * Bidirectional mounts of pods under it reach the host and the host's mounts
 * there reach HostToContainer ones. Returns 0 (already shared, or made so),
 * or -1 with *err. */
int nl_startup_make_rshared(const char *root_dir, nl_err_t **err);

/* The node's IP when --node-ip does not give one, as upstream's NodeAddress
 * setter: the hostname override if it is an IP, else the first global unicast
 * IPv4 address of the interface holding the default route in route_file
 * (/proc/net/route). Upstream tries a DNS lookup of the node name in between;
 * nanolet does not block start-up on DNS. Returns an allocated string, or NULL
 * when nothing qualifies. */
char *nl_startup_node_ip(const char *hostname_override, const char *route_file);

/* Checks --node-ip (one address or a dual-stack pair, comma separated) as
 * upstream: its parse (ParseNodeIPArgument) and, for each address that is not
 * 0.0.0.0 or :: ("choose one"), its node status's validateNodeIP — not
 * loopback, multicast or link-local unicast, and an address of one of this
 * host's interfaces. Upstream logs the latter at every node status update and
 * reports no address; nanolet refuses to start. NULL or "" passes. Returns 0,
 * or -1 with *err in upstream's words ("failed to validate nodeIP: nodeIP can't
 * be loopback address"). */
int nl_startup_check_node_ip(const char *node_ip, nl_err_t **err);

#endif
