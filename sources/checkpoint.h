/* The checkpoint of the API pods bound to this node (nanolet's own: upstream has
 * none), so that a node that restarts while the API server is unreachable runs
 * its pods again (docs/SOURCES.md, "The checkpoint").
 *
 * The file is one line of header and a body:
 *
 *   nanolet-pod-checkpoint v1 sha256:<64 hex digits of the body> <body bytes>\n
 *   {"kind":"PodList","apiVersion":"v1","metadata":{},"items":[<pod JSON>,...]}
 *
 * Each item is the pod's JSON exactly as the API server sent it, so writing needs
 * no encoding and reading is the API source's own decode. Writes replace the
 * file atomically (a temporary file, fsync, rename, fsync of the directory); a
 * file that fails the header or checksum is reported and ignored.
 *
 * The file I/O runs on the libuv thread pool; callbacks run on the loop. */
#ifndef NL_SOURCES_CHECKPOINT_H
#define NL_SOURCES_CHECKPOINT_H

#include <stddef.h>
#include <uv.h>

#include "agent/kube/reflector.h"
#include "reactor/buf.h"
#include "reactor/error.h"

/* A checkpoint larger than this is refused unread (110 pods are ~0.5 MiB). */
#define NL_POD_CHECKPOINT_MAX_BYTES (64u << 20)

/* Appends the whole file (header and body) for these pod objects to out. */
void nl_pod_checkpoint_encode(const nl_kube_raw_t *items, size_t n, nl_buf_t *out);

/* Checks the header and checksum of a whole file. Returns 0 with *body_off (the
 * body starts there and runs to the end), or -1 with *err (NL_EINVAL) naming
 * what is wrong. */
int nl_pod_checkpoint_verify(const char *data, size_t len, size_t *body_off, nl_err_t **err);

/* The items of a verified body: a new array (free() it) of spans into body.
 * Returns 0, or -1 with *err when the body is not a list of objects. */
int nl_pod_checkpoint_items(const char *body, size_t len, nl_kube_raw_t **items, size_t *n,
                            nl_err_t **err);

/* Writes data (taken; freed by the job) to path atomically. cb runs on the loop,
 * with err NULL on success (err is valid during the call only). */
typedef void (*nl_pod_checkpoint_write_cb)(void *ctx, const nl_err_t *err);
void nl_pod_checkpoint_write(uv_loop_t *loop, const char *path, char *data, size_t len,
                             nl_pod_checkpoint_write_cb cb, void *ctx);

/* Reads and verifies path. cb gets the whole file (owned by the callee, free()
 * it) and the body's offset; or data NULL and err NULL when there is no file;
 * or data NULL and err set when it cannot be read or fails verification. */
typedef void (*nl_pod_checkpoint_read_cb)(void *ctx, char *data, size_t len, size_t body_off,
                                          const nl_err_t *err);
void nl_pod_checkpoint_read(uv_loop_t *loop, const char *path, nl_pod_checkpoint_read_cb cb,
                            void *ctx);

#endif
