/* --config-dir: the drop-in directory upstream's kubelet merges over its
 * --config file (mergeKubeletConfigurations): every "*.conf" file under it,
 * its subdirectories too, in lexical order of their paths, as Go's
 * filepath.WalkDir visits them. Read once at start-up, before the loop runs. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/config.h"
#include "agent/config_fields.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* Deep enough for any sane tree (bind mounts can make loops). */
#define MAX_DEPTH 16

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name); /* bytes, as Go sorts names */
}

static bool is_dropin(const char *name) {
  size_t n = strlen(name);
  return n >= 5 && strcmp(name + n - 5, ".conf") == 0;
}

static int walk(nl_kubelet_config_t *cfg, const char *dir, int depth, nl_err_t **err) {
  if (depth > MAX_DEPTH)
    return nl_err_set(err, NL_EINVAL, "%s: more than %d directories deep", dir, MAX_DEPTH);
  struct dirent **names;
  int n = scandir(dir, &names, NULL, by_name);
  if (n < 0) return nl_err_set(err, errno, "%s: %s", dir, strerror(errno));
  int rc = 0;
  for (int i = 0; i < n; i++) {
    const char *name = names[i]->d_name;
    if (rc == 0 && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
      char *path = nl_xasprintf("%s/%s", dir, name);
      struct stat st; /* lstat: a link to a directory is not entered, as WalkDir */
      if (lstat(path, &st) < 0)
        rc = nl_err_set(err, errno, "%s: %s", path, strerror(errno));
      else if (S_ISDIR(st.st_mode))
        rc = walk(cfg, path, depth + 1, err);
      else if (!is_dropin(name))
        nl_info("kubelet config drop-in %s skipped: only *.conf files are read", path);
      else if ((rc = nl__config_load_path(cfg, path, true, err)) == 0)
        nl_info("kubelet config drop-in %s merged", path);
      free(path);
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int nl_config_load_dir(nl_kubelet_config_t *cfg, const char *dir, nl_err_t **err) {
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') len--;
  char *root = nl_xstrndup(dir, len);
  int rc = walk(cfg, root, 0, err);
  if (rc < 0) nl_err_wrap(err, "failed to merge the kubelet config drop-ins of --config-dir %s", root);
  free(root);
  return rc;
}

int nl_config_read(nl_kubelet_config_t *cfg, int argc, char **argv, nl_err_t **err) {
  nl_config_defaults(cfg);
  const char *file = nl_flags_find(argc, argv, "config");
  const char *dir = nl_flags_find(argc, argv, "config-dir");
  /* As upstream: without a file, the flags' defaults are the base the
   * drop-ins merge over. */
  if (!file || !*file) nl_config_legacy_defaults(cfg);
  if (file && *file && nl_config_load_file(cfg, file, err) < 0) return -1;
  if (dir && *dir && nl_config_load_dir(cfg, dir, err) < 0) return -1;
  return 0;
}
