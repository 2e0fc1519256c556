/* The credentials of a pod's image pulls: upstream getPullSecretsForPod (the
 * Secrets named by spec.imagePullSecrets, through the objects lookup) and
 * MakeDockerKeyring (their docker configs), once per SyncPod. */
#include <string.h>

#include "managers/runtime_internal.h"
#include "reactor/buf.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

/* Adds a pull secret's docker config, if it has one of the two types. */
static int add_secret(nl_keyring_t *k, const nl_object_t *s, nl_err_t **err) {
  const char *type = s->type ? s->type : "";
  bool config_json = !strcmp(type, NL_SECRET_TYPE_DOCKER_CONFIG_JSON);
  const char *key = config_json                               ? NL_SECRET_KEY_DOCKER_CONFIG_JSON
                    : !strcmp(type, NL_SECRET_TYPE_DOCKERCFG) ? NL_SECRET_KEY_DOCKERCFG
                                                              : NULL;
  const nl_object_item_t *it = key ? nl_object_find(s, key) : NULL;
  if (!it || !it->len) return 0; /* another type, or empty: no credentials */
  if (nl_keyring_add(k, (const char *)it->value, it->len, config_json, err) < 0)
    return nl_err_wrap(err, "image pull secret \"%s/%s\": %s", s->namespace_, s->name, key);
  return 0;
}

/* Reads the pull secrets into op->keyring; the result goes to
 * op->keyring_rc/_msg as nl_images_creds_fn returns it. */
static void build(nl_runtime_op_t *op) {
  const nl_pod_t *pod = op->pod;
  const nl_objects_lookup_t *lk = &op->rt->opts.objects;
  const char *ns = pod->metadata.namespace_ ? pod->metadata.namespace_ : "";
  nl_buf_t failed = NL_BUF_INIT;
  for (size_t i = 0; i < pod->spec.image_pull_secrets.n; i++) {
    const char *name = pod->spec.image_pull_secrets.items[i];
    if (!name || !*name) continue; /* the API once let empty names through: ignored */
    const nl_object_t *s = NULL;
    nl_err_t *err = NULL;
    int r = lk->fn ? lk->fn(lk->ctx, NL_OBJECT_SECRET, ns, name, &s, &err) : 0;
    if (r < 0) {
      /* Not fetched yet: a pull without it would fail and start a back-off;
       * the pod is synced again when the secret arrives. */
      op->keyring_rc = 1;
      op->keyring_msg = nl_xasprintf("image pull secret \"%s\" not available yet: %s", name,
                                     nl_err_msg(err));
      nl_err_free(&err);
      break;
    }
    if (r == 0) {
      nl_info("pod %s: unable to retrieve pull secret %s/%s, the image pull may not succeed",
              op->desc, ns, name);
      nl_buf_printf(&failed, "%s%s", failed.len ? ", " : "", name);
      continue;
    }
    if (add_secret(&op->keyring, s, &err) < 0) {
      op->keyring_rc = -1;
      op->keyring_msg = nl_xstrdup(nl_err_msg(err));
      nl_err_free(&err);
      break;
    }
  }
  if (failed.len && op->keyring_rc == 0)
    nl__op_event(op, pod, NULL, NL_EVENT_WARNING, "FailedToRetrieveImagePullSecret",
                 "Unable to retrieve some image pull secrets (%s); attempting to pull the image "
                 "may not succeed.",
                 failed.data);
  nl_buf_free(&failed);
}

int nl__op_pull_creds(void *ctx, const nl_keyring_t **keyring, char **msg) {
  nl_runtime_op_t *op = ctx;
  if (!op->keyring_built) {
    op->keyring_built = true;
    build(op);
  }
  if (op->keyring_rc != 0) {
    *msg = nl_xstrdup(op->keyring_msg);
    return op->keyring_rc;
  }
  *keyring = &op->keyring;
  return 0;
}
