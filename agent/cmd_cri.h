/* `nanolet cri [GLOBAL OPTIONS] COMMAND [OPTIONS] [ARGS]`: a small crictl for
 * edge nodes that have none: version, info, pods, ps, images, inspectp,
 * inspect, exec, logs against the CRI runtime, human tables or `-o json`. */
#ifndef NL_CMD_CRI_H
#define NL_CMD_CRI_H

/* argv[0] is "cri". Runs its own loop and CRI client for the calls and returns
 * the exit status: 0 ok, 1 when the runtime or a call fails (message on
 * stderr, "nanolet cri: <command>: <error>"), 2 on usage errors; for `exec`,
 * the command's exit code. */
int nl_cmd_cri(int argc, char **argv);

#endif
