/* Pod volumes a node can serve by itself: emptyDir (a directory under the pod
 * directory, or a tmpfs for medium Memory with sizeLimit) and hostPath (with
 * upstream's type checks). The pod directories follow upstream:
 *   <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>
 *   <root>/pods/<uid>/containers/<container>/<random id>   (termination messages)
 * All filesystem work runs on libuv's thread pool; callbacks come back on the
 * loop, exactly once. The pod is held by reference; other inputs are copied
 * at the call. */
#ifndef NL_VOLUMES_H
#define NL_VOLUMES_H

#include <stdbool.h>

#include <uv.h>

#include "agent/model/pod.h"
#include "managers/atomic_writer.h"
#include "reactor/error.h"

/* The resolved content of one API volume (configMap, secret, downwardAPI,
 * projected; managers/volumes_api.h). Owns its strings and files. */
typedef struct nl_api_volume {
  char *name;
  nl_aw_file_t *files;
  size_t n_files;
} nl_api_volume_t;

typedef struct nl_api_volumes {
  nl_api_volume_t *v;
  size_t n;
  int64_t fs_group; /* securityContext.fsGroup; -1: none */
  bool changed;     /* set by nl__volumes_setup_sync: some content was rewritten */
} nl_api_volumes_t;

void nl_api_volumes_free(nl_api_volumes_t *a);

/* err is borrowed during the callback; NULL on success. */
typedef void (*nl_volumes_cb)(const nl_err_t *err, void *ctx);

/* Creates <root>/pods/<uid>/{volumes,plugins,containers}, every emptyDir
 * (mounting a tmpfs for medium Memory, size = sizeLimit when set), and checks or
 * creates every hostPath per its type (DirectoryOrCreate, Directory,
 * FileOrCreate, File, Socket, CharDevice, BlockDevice, "" = no check). API
 * volumes need their content (nl__volumes_setup_sync's api): this entry point
 * fails them. Volume types nanolet does not serve fail with a message naming
 * them. Idempotent. */
int nl_volumes_setup(uv_loop_t *loop, const char *root_dir, const nl_pod_t *pod,
                     nl_volumes_cb cb, void *ctx);

/* Unmounts the tmpfs volumes (emptyDirs, secret, downwardAPI, projected) of pod uid and removes <root>/pods/<uid>
 * recursively (without crossing into other mounts). */
int nl_volumes_teardown(uv_loop_t *loop, const char *root_dir, const char *uid,
                        nl_volumes_cb cb, void *ctx);

/* The same for a terminated pod that stays (an evicted one): its volumes go,
 * its directory stays, empty (it marks the runtime pod as this agent's). */
int nl_volumes_release(uv_loop_t *loop, const char *root_dir, const char *uid,
                       nl_volumes_cb cb, void *ctx);

/* Where a volume of the pod lives on the host (a new string), or NULL with *err
 * when the pod has no such volume or nanolet cannot serve its type. *read_only
 * (may be NULL) is set for API volumes, which upstream always mounts read-only. */
char *nl_volumes_host_path(const char *root_dir, const nl_pod_t *pod, const char *name,
                           bool *read_only, nl_err_t **err);

/* Checks a subPath as upstream validation does (relative, no ".." element).
 * Returns 0 or -1 with *err. */
int nl_volumes_check_subpath(const char *sub_path, nl_err_t **err);

/* The blocking part of nl_volumes_setup, for the thread pool and for tests.
 * api: the content of the pod's API volumes (NULL: none resolved), written
 * with the atomic writer, secret, downwardAPI and projected ones on a tmpfs of
 * their own as upstream (configMap on disk). */
int nl__volumes_setup_sync(const char *root_dir, const nl_pod_t *pod, nl_api_volumes_t *api,
                           nl_err_t **err);
int nl__volumes_teardown_sync(const char *root_dir, const char *uid, nl_err_t **err);
/* rm -rf that crosses no mount; 0 or -1 with errno. */
int nl__rm_rf(const char *path);

#endif
