/* Recursive read-only mounts (upstream resolveRecursiveReadOnly): one answer
 * for the runtime manager (the CRI Mount's recursive_read_only, or the
 * container's CreateContainerConfigError) and the status generator (the
 * container status' volumeMounts[].recursiveReadOnly). */
#include <string.h>

#include "agent/model/internal.h"
#include "reactor/error.h"

static bool is(const char *s, const char *want) { return s && strcmp(s, want) == 0; }

int nl_volume_mount_rro(const nl_volume_mount_t *m, bool runtime_supports, bool *rro,
                        nl_err_t **err) {
  *rro = false;
  const char *mode = m->recursive_read_only;
  if (!mode || is(mode, "Disabled")) return 0;
  if (!m->read_only)
    return nl_err_set(err, NL_EINVAL,
                      "volume \"%s\" requested recursive read-only mode, but it is not read-only",
                      m->name);
  if (m->mount_propagation && !is(m->mount_propagation, "None"))
    return nl_err_set(err, NL_EINVAL,
                      "volume \"%s\" requested recursive read-only mode, but it is not compatible "
                      "with propagation \"%s\"",
                      m->name, m->mount_propagation);
  if (is(mode, "IfPossible")) {
    *rro = runtime_supports;
    return 0;
  }
  if (!is(mode, "Enabled"))
    return nl_err_set(err, NL_EINVAL, "unknown recursive read-only mode \"%s\"", mode);
  if (!runtime_supports)
    return nl_err_set(err, NL_EINVAL,
                      "volume \"%s\" requested recursive read-only mode, but it is not supported "
                      "by the runtime",
                      m->name);
  *rro = true;
  return 0;
}
