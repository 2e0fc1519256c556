/* Small blocking file-system helpers. Blocking: call them from the thread pool
 * (uv_queue_work) or at start-up, never from a loop callback. */
#ifndef NL_REACTOR_FS_H
#define NL_REACTOR_FS_H

#include <stddef.h>
#include <sys/types.h>

/* mkdir -p: creates path and its missing parents with mode. Returns 0 when
 * path is a directory afterwards, else -errno (-ENOTDIR when it is something
 * else, -ENAMETOOLONG past PATH_MAX). */
int nl_mkdir_p(const char *path, mode_t mode);

/* Replaces path's content with len bytes of data so that a crash or a power
 * cut leaves the old content or the new, never a torn one: path.tmp is
 * written (mode 0600) and fsynced, renamed over path, and path's directory
 * fsynced. Returns 0, or an errno value with *step naming what failed
 * ("create", "write", "rename", "open directory", "fsync directory"); the
 * temporary file is removed on failure. */
int nl_fs_replace(const char *path, const void *data, size_t len, const char **step);

#endif
