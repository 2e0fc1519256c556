/* The pod and container of a runtime container no source knows, rebuilt from
 * the labels and annotations SyncPod put on it (upstream
 * restoreSpecsFromContainerLabels), so that KillPod can run its preStop hook. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "managers/runtime_internal.h"
#include "reactor/log.h"

/* A JSON value from an annotation, or NULL when absent or not JSON. */
static json_t *ann_json(const Runtime__V1__ContainerStatus *s, const char *key) {
  const char *v = NL_RT_ANNOTATION(s, key);
  return v ? json_loads(v, 0, NULL) : NULL;
}

nl_pod_t *nl__restore_pod(const Runtime__V1__ContainerStatus *s) {
  json_t *pre_stop = ann_json(s, NL_ANN_CONTAINER_PRESTOP_HANDLER);
  if (!pre_stop) return NULL; /* nothing to run: the grace period is read directly */
  const char *name = NL_RT_LABEL(s, NL_LABEL_POD_NAME);
  const char *ns = NL_RT_LABEL(s, NL_LABEL_POD_NAMESPACE);
  const char *uid = NL_RT_LABEL(s, NL_LABEL_POD_UID);
  const char *cname = NL_RT_LABEL(s, NL_LABEL_CONTAINER_NAME);
  json_t *c = json_pack("{s:s, s:s, s:{s:o}}", "name", cname ? cname : "",
                        "image", s->image && s->image->image ? s->image->image : "",
                        "lifecycle", "preStop", pre_stop);
  json_t *ports = ann_json(s, NL_ANN_CONTAINER_PORTS);
  if (ports) json_object_set_new(c, "ports", ports);
  json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:[o]}}", "apiVersion", "v1",
                          "kind", "Pod", "metadata", "name", name ? name : "", "namespace",
                          ns ? ns : "", "uid", uid ? uid : "", "spec", "containers", c);
  const char *grace = NL_RT_ANNOTATION(s, NL_ANN_POD_TERMINATION_GRACE);
  if (grace)
    json_object_set_new(json_object_get(pod, "spec"), "terminationGracePeriodSeconds",
                        json_integer(strtoll(grace, NULL, 10)));
  char *text = json_dumps(pod, JSON_COMPACT);
  json_decref(pod);
  nl_pod_t *out = NULL;
  nl_err_t *err = NULL;
  if (text && nl_pod_decode(text, strlen(text), "container annotations", &out, &err) < 0) {
    nl_warn("container %s of pod %s_%s: cannot restore its spec for the PreStop hook: %s",
            cname ? cname : "?", name ? name : "?", ns ? ns : "?", nl_err_msg(err));
    nl_err_free(&err);
    out = NULL;
  }
  free(text);
  return out;
}
