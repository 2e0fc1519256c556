/* Termination messages of dead containers, as upstream's getTerminationMessage
 * and readLastStringFromContainerLogs (kuberuntime_container.go), with its
 * limits (pkg/kubelet/container/runtime.go). */
#ifndef NL_TERMMSG_H
#define NL_TERMMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#define NL_TERMMSG_MAX_BYTES 4096         /* MaxContainerTerminationMessageLength */
#define NL_TERMMSG_MAX_LOG_BYTES 2048     /* MaxContainerTerminationMessageLogLength */
#define NL_TERMMSG_MAX_LOG_LINES 80       /* MaxContainerTerminationMessageLogLines */
#define NL_TERMMSG_MAX_POD_BYTES (12 * 1024) /* MaxPodTerminationMessageLogLength */

typedef void (*nl_termmsg_cb)(const char *message, void *ctx);

/* Reads a dead container's termination message on the thread pool: the last
 * 4096 bytes of host_path (the host file mounted at its terminationMessagePath;
 * NULL when it has none). With fallback_to_logs (FallbackToLogsOnError and a
 * failed container), a missing host path, a missing file or an empty one give
 * the last 80 lines / 2048 bytes of the CRI log at log_path instead. A file that
 * cannot be read otherwise gives upstream's "Error on reading termination log
 * ..." as the message. cb runs once on the loop with the message (borrowed, ""
 * when none). Returns 0, or a negative libuv error (and cb is never called). */
int nl_termmsg_read(uv_loop_t *loop, const char *host_path, bool fallback_to_logs,
                    const char *log_path, nl_termmsg_cb cb, void *ctx);

/* The pure part of the log fallback: the content of the last max_lines lines of
 * CRI log text (partial records joined), then its last max_bytes bytes. Returns
 * a new string. */
char *nl_termmsg_tail_cri_log(const char *data, size_t len, size_t max_lines, size_t max_bytes);

#endif
