/* Image volumes (upstream kuberuntime_manager.go getImageVolumes and
 * toKubeContainerImageVolumes): each image volume of the pod is ensured
 * through the image manager, with its pullPolicy and the pod's pull secrets,
 * once per SyncPod that starts a container, before the first one. A failed
 * pull fails only the containers that mount the volume, with the pull's
 * reason (ErrImagePull, ImagePullBackOff, ErrImageNeverPull) and message, as
 * a container's own image does; the others start. A runtime known not to
 * mount images gets no pull: the containers that mount one fail with
 * CreateContainerConfigError. */
#include <stdio.h>
#include <string.h>

#include "managers/runtime_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

struct nl__image_volume {
  const char *name;      /* borrowed from op->pod */
  const char *reference; /* borrowed from op->pod */
  char *image_ref;       /* the runtime's image id; NULL: failed */
  char *reason, *message;
  bool unsupported;      /* not pulled: the runtime cannot mount it */
};

void nl__image_volumes_free(nl_runtime_op_t *op) {
  for (size_t i = 0; i < op->n_image_volumes; i++) {
    free(op->image_volumes[i].image_ref);
    free(op->image_volumes[i].reason);
    free(op->image_volumes[i].message);
  }
  free(op->image_volumes);
  op->image_volumes = NULL;
  op->n_image_volumes = 0;
  free(op->cur_image_volumes);
  op->cur_image_volumes = NULL;
  op->n_cur_image_volumes = 0;
}

static void pull_next(nl_runtime_op_t *op);

static void pulled(const char *ref, const char *reason, const char *message, void *ctx) {
  nl_runtime_op_t *op = ctx;
  if (!nl__op_resume(op)) return;
  struct nl__image_volume *v = &op->image_volumes[op->n_image_volumes - 1];
  if (ref) {
    v->image_ref = nl_xstrdup(ref);
  } else {
    v->reason = nl_xstrdup(reason ? reason : NL_IMAGE_ERR_PULL);
    v->message = nl_xstrdup(message ? message : "");
    nl_error("pod %s: image volume %s (%s): %s: %s", op->desc, v->name, v->reference, v->reason,
             v->message);
  }
  pull_next(op);
}

static void pull_next(nl_runtime_op_t *op) {
  const nl_pod_spec_t *spec = &op->pod->spec;
  while (op->image_volume_cursor < spec->n_volumes &&
         !spec->volumes[op->image_volume_cursor].image)
    op->image_volume_cursor++;
  if (op->image_volume_cursor >= spec->n_volumes) {
    op->image_volumes_next(op);
    return;
  }
  const nl_volume_t *vol = &spec->volumes[op->image_volume_cursor++];
  op->image_volumes = nl_xrealloc(op->image_volumes,
                                  (op->n_image_volumes + 1) * sizeof *op->image_volumes);
  op->image_volumes[op->n_image_volumes++] = (struct nl__image_volume){
      .name = vol->name, .reference = vol->image->reference};
  /* upstream's reference is the pod's: the pull's events name the pod */
  nl_event_ref_t ref = nl_event_pod_ref(op->pod);
  op->pending++;
  nl_images_ensure(&op->rt->images, &op->img, &ref, op->desc, vol->image->reference,
                   vol->image->pull_policy, nl__op_pull_creds, pulled, op);
}

/* A runtime that ignores the Mount's image field would start the container
 * without the volume (or fail on the empty host path): nothing is pulled, and
 * each container that mounts an image volume fails with why. */
static void refuse_all(nl_runtime_op_t *op, const char *why) {
  const nl_pod_spec_t *spec = &op->pod->spec;
  for (size_t i = 0; i < spec->n_volumes; i++) {
    const nl_volume_t *vol = &spec->volumes[i];
    if (!vol->image) continue;
    op->image_volumes = nl_xrealloc(op->image_volumes,
                                    (op->n_image_volumes + 1) * sizeof *op->image_volumes);
    op->image_volumes[op->n_image_volumes++] = (struct nl__image_volume){
        .name = vol->name,
        .reference = vol->image->reference,
        .reason = nl_xstrdup(NL_REASON_CREATE_CONTAINER_CONFIG),
        .message = nl_xasprintf("image volume \"%s\": %s", vol->name, why),
        .unsupported = true};
  }
}

void nl__image_volumes_pull(nl_runtime_op_t *op, void (*next)(nl_runtime_op_t *op)) {
  nl__image_volumes_free(op);
  op->image_volume_cursor = 0;
  op->image_volumes_next = next;
  /* upstream pulls at every SyncPod; a sync that starts nothing uses no
   * pull result, so nanolet pulls only when a container is to start */
  const nl_pod_actions_t *a = &op->actions;
  if (a->n_to_start + a->n_init_to_start + a->n_ephemeral_to_start == 0) {
    next(op);
    return;
  }
  char *why = nl_runtime_image_volumes_unsupported(op->rt->runtime_name, op->rt->runtime_version);
  if (why) {
    refuse_all(op, why);
    free(why);
    next(op);
    return;
  }
  pull_next(op);
}

char *nl_runtime_image_volumes_unsupported(const char *runtime_name, const char *runtime_version) {
  static const struct { const char *name; int major, minor; } first[] = {
      {"containerd", 2, 1}, {"cri-o", 1, 31}};
  if (!runtime_name || !runtime_version) return NULL;
  const char *v = runtime_version[0] == 'v' ? runtime_version + 1 : runtime_version;
  int major, minor;
  if (sscanf(v, "%d.%d", &major, &minor) != 2) return NULL;
  for (size_t i = 0; i < sizeof first / sizeof *first; i++) {
    if (strcmp(runtime_name, first[i].name) != 0) continue;
    if (major > first[i].major || (major == first[i].major && minor >= first[i].minor)) return NULL;
    return nl_xasprintf("the container runtime %s %s does not mount images (%s %d.%d or later "
                        "does)",
                        runtime_name, runtime_version, runtime_name, first[i].major,
                        first[i].minor);
  }
  return NULL;
}

static const struct nl__image_volume *find(const nl_runtime_op_t *op, const char *name) {
  for (size_t i = 0; i < op->n_image_volumes; i++)
    if (strcmp(op->image_volumes[i].name, name) == 0) return &op->image_volumes[i];
  return NULL;
}

int nl__image_volumes_for(nl_runtime_op_t *op, nl_sync_step_t *step, nl_image_volume_ref_t **out,
                          size_t *n) {
  const nl_container_t *c = op->cur;
  const struct nl__image_volume *failed = NULL;
  nl_image_volume_ref_t *refs = NULL;
  size_t k = 0;
  *out = NULL;
  *n = 0;
  for (size_t i = 0; i < c->n_volume_mounts; i++) {
    const struct nl__image_volume *v = find(op, c->volume_mounts[i].name);
    if (!v) continue;
    if (!v->image_ref) {
      /* upstream's event: the error's text, a pull error's being its name */
      nl__op_event(op, op->pod, c->name, NL_EVENT_WARNING, "Failed", "Error: %s",
                   v->unsupported ? v->message : v->reason);
      if (v->unsupported) nl_error("pod %s: container %s: %s", op->desc, c->name, v->message);
      failed = v;
      continue;
    }
    refs = nl_xrealloc(refs, (k + 1) * sizeof *refs);
    refs[k++] = (nl_image_volume_ref_t){v->name, v->image_ref, v->reference};
  }
  if (failed) {
    free(refs);
    nl__step_fail(step, failed->reason, "%s", failed->message);
    return -1;
  }
  *out = refs;
  *n = k;
  return 0;
}
