/* The settings nanolet parses but does not act on yet, and the start-up check
 * that says so. This list is the truth of what is ignored: --help marks these
 * flags, start-up warns for each one the user set, and the unit test
 * agent_config_ignored keeps docs/DIFFERENCES.md in step with it. A change that
 * makes a setting work deletes its line here (and the test then says which line
 * of docs/DIFFERENCES.md to delete). */
#include "agent/config_ignored.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "reactor/log.h"

/* One line per setting: the file field's name, or the flag's for flag-only
 * settings. `.file = true`: a file nanolet will read once the feature lands;
 * until then it must be readable and is then ignored. `.note`: see the header. */
const nl_config_ignored_t nl__config_ignored[] = {
    {"imageServiceEndpoint"},
    {"streamingConnectionIdleTimeout"},
    {"hairpinMode"},
    {"makeIPTablesUtilChains"},
    {"registryPullQPS"},
    {"registryBurst"},
    {"cpuCFSQuotaPeriod", .note = "CPU limits always use the 100ms period"},
    {"cpuManagerReconcilePeriod"},
    {"shutdownGracePeriodByPodPriority"},
    {NULL},
};

const nl_config_field_t *nl__config_ignored_field(const nl_config_ignored_t *ig) {
  for (size_t i = 0; i < nl__config_nfields; i++) {
    const nl_config_field_t *f = &nl__config_fields[i];
    if (f->name ? !strcmp(f->name, ig->name) : !strcmp(f->flag, ig->name)) return f;
  }
  return NULL;
}

const nl_config_ignored_t *nl__config_ignored_find(const nl_config_field_t *f) {
  for (const nl_config_ignored_t *ig = nl__config_ignored; ig->name; ig++)
    if (nl__config_ignored_field(ig) == f) return ig;
  return NULL;
}

int nl_config_check_ignored(const nl_kubelet_config_t *cfg, nl_err_t **err) {
  for (const nl_config_ignored_t *ig = nl__config_ignored; ig->name; ig++) {
    const nl_config_field_t *f = nl__config_ignored_field(ig);
    assert(f); /* the unit test checks every name */
    nl_config_source_t src = cfg->set_by[f - nl__config_fields];
    if (src == NL_CONFIG_UNSET) continue;
    /* As the user wrote it: --flag on the command line, name in the file. */
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", f->flag ? f->flag : "");
    const char *as = src == NL_CONFIG_FLAG || !f->name ? flag : f->name;
    if (!ig->file) {
      if (ig->note)
        nl_warn("%s is set but only partly supported: %s", as, ig->note);
      else
        nl_warn("%s is set but not supported yet; it is ignored", as);
      continue;
    }
    const char *path = *(char *const *)((const char *)cfg + f->offset);
    if (!path || !*path) continue; /* "" means unset, as upstream */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return nl_err_set(err, errno, "%s %s: cannot read: %s", as, path, strerror(errno));
    close(fd);
    nl_warn("%s %s is ignored: %s", as, path, ig->note);
  }
  return 0;
}
