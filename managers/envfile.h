/* Env files (upstream's EnvFiles, beta and on in 1.36): a container's
 * env[].valueFrom.fileKeyRef reads one variable from a file in one of its
 * pod's volumes, typically written there by an init container. The file is
 * outside input. */
#ifndef NL_ENVFILE_H
#define NL_ENVFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "reactor/error.h"

/* Files larger than this are refused (upstream reads lines of at most 64 KiB). */
#define NL_ENVFILE_MAX_BYTES (1024 * 1024)

/* Finds key in the env file data (len bytes), in upstream's format (its
 * ParseEnv): one `NAME='value'` per line, the value in single quotes and
 * possibly spanning lines, blank lines and `#` comments skipped, leading
 * blanks ignored, no blank before `=`; `NAME= 'x'` (a blank after `=`) sets
 * NAME empty, as a shell would. Returns 1 with *value (new string, never
 * empty), 0 when the key is absent or empty (both mean "not found" to the
 * kubelet, as upstream), or -1 with *err naming the line for a file not in
 * that format (up to the key's line: a format error after it is not seen)
 * or for a value holding a NUL byte, which no environment can carry. */
int nl_envfile_find(const char *data, size_t len, const char *key, char **value, nl_err_t **err);

/* Reads path below the directory root without following any symbolic link
 * and without leaving root (path is relative, without `..`; upstream
 * SecureJoin resolves links inside the root instead: nanolet refuses them),
 * at most NL_ENVFILE_MAX_BYTES, and finds key in it (nl_envfile_find).
 * Blocking: for the thread pool. */
int nl_envfile_read(const char *root, const char *path, const char *key, char **value,
                    nl_err_t **err);

#endif
