/* Upstream's AtomicWriter (pkg/volume/util/atomic_writer.go): the content of a
 * configMap, secret, downwardAPI or projected volume is written to a new
 * timestamped directory `..<YYYY_MM_DD_HH_MM_SS>.<random>`, then the `..data`
 * symlink is swapped to it with one rename, so a reader sees either the old or
 * the new set of files, never half of each. Each top-level path of the payload
 * is a symlink `<name> -> ..data/<name>`. A payload equal to what `..data`
 * holds (content and mode) writes nothing: an agent restart or a periodic
 * re-sync costs reads only. Blocking: it runs on the thread pool. */
#ifndef NL_ATOMIC_WRITER_H
#define NL_ATOMIC_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reactor/error.h"

/* One file of a payload. Owned by whoever holds the array (nl_aw_files_free). */
typedef struct nl_aw_file {
  char *path; /* relative, validated by nl_atomic_write */
  unsigned char *data;
  size_t len;
  uint32_t mode; /* permission bits (defaultMode / mode) */
} nl_aw_file_t;

/* Adds a file (copies path and data); a path already present is replaced, as
 * a later source of a projected volume overrides an earlier one. */
void nl_aw_files_add(nl_aw_file_t **files, size_t *n, const char *path, const void *data,
                     size_t len, uint32_t mode);
void nl_aw_files_free(nl_aw_file_t *files, size_t n);

/* Writes the payload into dir (which must exist). fs_group >= 0: every file and
 * directory of the new content gets that group, group read (directories also
 * group search and setgid), as upstream's SetVolumeOwnership for a read-only
 * volume. what names the volume in errors ("pod ns/name volume v").
 * Returns 1 when the content changed, 0 when it was already there, or -1 with
 * *err (the previous content stays in place). */
int nl_atomic_write(const char *dir, const nl_aw_file_t *files, size_t n, int64_t fs_group,
                    const char *what, nl_err_t **err);

/* upstream SetVolumeOwnership on path (and, with recurse, everything under
 * it): group gid; mode plus group and owner read (read_only) or read-write,
 * directories also search and setgid, so that new files get the group.
 * Symlinks only change their group. Blocking. Returns 0, or -1 with *err. */
int nl_volume_set_ownership(const char *path, unsigned gid, bool read_only, bool recurse,
                            nl_err_t **err);

#endif
