/* Small blocking file-system helpers. Blocking: call them from the thread pool
 * (uv_queue_work) or at start-up, never from a loop callback. */
#ifndef NL_REACTOR_FS_H
#define NL_REACTOR_FS_H

#include <sys/types.h>

/* mkdir -p: creates path and its missing parents with mode. Returns 0 when
 * path is a directory afterwards, else -errno (-ENOTDIR when it is something
 * else, -ENAMETOOLONG past PATH_MAX). */
int nl_mkdir_p(const char *path, mode_t mode);

#endif
