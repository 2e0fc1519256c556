/* `nanolet shutdown-hook [the agent's flags]`: tells the running agent that the
 * node is shutting down, and waits until it has stopped the pods. */
#ifndef NL_CMD_SHUTDOWN_H
#define NL_CMD_SHUTDOWN_H

/* argv[0] is "shutdown-hook"; the rest are the agent's own flags (--config,
 * --root-dir, ...), read as the agent reads them, for rootDir (the agent's
 * socket, <rootDir>/shutdown.sock) and shutdownGracePeriod (how long to wait:
 * that, plus one second). Prints what the agent says. Returns 0 when the agent
 * has finished, when graceful shutdown is off, or when no agent runs (nothing
 * to stop); 1 when the agent does not answer in time or the connection fails
 * midway; 2 on usage errors. */
int nl_cmd_shutdown_hook(int argc, char **argv);

#endif
