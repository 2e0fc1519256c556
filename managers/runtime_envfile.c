/* The env files of the container being started (fileKeyRef, EnvFiles):
 * planned on the loop (each reference's volume directory), read on the thread
 * pool with the container's other preparations, then given to its config as
 * ready values (nl_runtime_make_env). Errors are upstream's, and fail the
 * container's config (CreateContainerConfigError): it never starts without
 * a variable it requires. */
#include <stdlib.h>
#include <string.h>

#include "managers/envfile.h"
#include "managers/runtime_internal.h"
#include "managers/volumes.h"
#include "reactor/xalloc.h"

int nl__envfiles_plan(const nl_runtime_opts_t *o, const nl_pod_t *pod, const nl_container_t *c,
                      nl__envfile_t **out, size_t *n, nl_err_t **err) {
  *out = NULL;
  *n = 0;
  for (size_t i = 0; i < c->n_env; i++) {
    const nl_env_var_t *e = &c->env[i];
    const nl_file_key_ref_t *r = e->value_from ? e->value_from->file_key_ref : NULL;
    if (!r) continue;
    const char *vol = r->volume_name ? r->volume_name : "";
    nl_err_t *why = NULL;
    char *root = nl_volumes_host_path(o->root_dir, pod, vol, NULL, &why);
    nl_err_free(&why);
    if (!root) {
      nl__envfiles_free(*out, *n);
      *out = NULL;
      *n = 0;
      return nl_err_set(err, NL_EINVAL, "cannot find the volume \"%s\" referenced by FileKeyRef", vol);
    }
    *out = nl_xrealloc(*out, (*n + 1) * sizeof **out);
    (*out)[(*n)++] = (nl__envfile_t){
        .name = nl_xstrdup(e->name),
        .root = root,
        .path = nl_xstrdup(r->path ? r->path : ""),
        .key = nl_xstrdup(r->key ? r->key : ""),
        .optional = r->optional == 1,
    };
  }
  return 0;
}

int nl__envfiles_read(nl__envfile_t *v, size_t n, nl_err_t **err) {
  for (size_t i = 0; i < n; i++) {
    nl_err_t *why = NULL;
    int rc = nl_envfile_read(v[i].root, v[i].path, v[i].key, &v[i].value, &why);
    if (rc < 0) {
      nl_err_set(err, NL_EINVAL, "couldn't parse env file %s/%s for %s: %s", v[i].root, v[i].path,
                 v[i].name, why->msg);
      nl_err_free(&why);
      return -1;
    }
    if (rc == 0 && !v[i].optional)
      return nl_err_set(err, NL_EINVAL, "environment variable key \"%s\" not found in file \"%s/%s\"",
                        v[i].key, v[i].root, v[i].path);
  }
  return 0;
}

nl_env_t *nl__envfiles_values(nl__envfile_t *v, size_t n, size_t *n_out) {
  nl_env_t *env = n ? nl_xcalloc(n, sizeof *env) : NULL;
  *n_out = 0;
  for (size_t i = 0; i < n; i++) {
    if (!v[i].value) continue; /* optional and absent: not set */
    env[*n_out].name = v[i].name;
    env[(*n_out)++].value = v[i].value;
    v[i].name = v[i].value = NULL;
  }
  return env;
}

void nl__envfiles_free(nl__envfile_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].name);
    free(v[i].root);
    free(v[i].path);
    free(v[i].key);
    free(v[i].value);
  }
  free(v);
}
