/* The RuntimeClass cache behind a pod's runtime handler. */
#include "managers/runtimeclass.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

#define NAME_MAX_LEN 253   /* a DNS subdomain: the class's metadata.name */
#define HANDLER_MAX_LEN 63 /* a DNS label: the API server's handler validation */

static bool dns_label(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > HANDLER_MAX_LEN) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (c != '-' || i == 0 || i == n - 1)) return false;
  }
  return true;
}

int nl_runtimeclass_decode(const char *json, size_t len, char **name, char **handler,
                           nl_err_t **err) {
  json_error_t je;
  json_t *j = json_loadb(json, len, 0, &je);
  if (!json_is_object(j)) {
    json_decref(j);
    return nl_err_set(err, NL_EINVAL, "runtimeclass: not a JSON object: %s", je.text);
  }
  const char *n = json_string_value(json_object_get(json_object_get(j, "metadata"), "name"));
  const char *h = json_string_value(json_object_get(j, "handler"));
  int rc = 0;
  if (!n || !*n || strlen(n) > NAME_MAX_LEN)
    rc = nl_err_set(err, NL_EINVAL, "runtimeclass: metadata.name: required, at most %d bytes",
                    NAME_MAX_LEN);
  else if (!h || !dns_label(h))
    rc = nl_err_set(err, NL_EINVAL, "runtimeclass %s: handler: must be a DNS label", n);
  if (rc == 0) {
    *name = nl_xstrdup(n);
    *handler = nl_xstrdup(h);
  }
  json_decref(j);
  return rc;
}

void nl_runtimeclasses_put(nl_runtimeclasses_t *rc, const char *json, size_t len) {
  char *name, *handler;
  nl_err_t *err = NULL;
  if (nl_runtimeclass_decode(json, len, &name, &handler, &err) < 0) {
    nl_warn("runtimeclasses: %s", nl_err_msg(err));
    nl_err_free(&err);
    return;
  }
  if (!nl_map_has(&rc->by_name, name) && nl_map_size(&rc->by_name) >= NL_RUNTIMECLASS_MAX) {
    if (!rc->full_warned)
      nl_warn("runtimeclasses: more than %d RuntimeClasses: %s and those after it are not held",
              NL_RUNTIMECLASS_MAX, name);
    rc->full_warned = true;
    free(name);
    free(handler);
    return;
  }
  free(nl_map_put(&rc->by_name, name, handler));
  free(name);
}

void nl_runtimeclasses_delete(nl_runtimeclasses_t *rc, const char *json, size_t len) {
  char *name, *handler;
  nl_err_t *err = NULL;
  if (nl_runtimeclass_decode(json, len, &name, &handler, &err) < 0) {
    nl_err_free(&err);
    return;
  }
  free(nl_map_del(&rc->by_name, name));
  free(name);
  free(handler);
}

void nl_runtimeclasses_replace(nl_runtimeclasses_t *rc, const nl_kube_raw_t *items, size_t n) {
  nl_map_free(&rc->by_name, free);
  nl_map_init(&rc->by_name);
  rc->full_warned = false;
  for (size_t i = 0; i < n; i++) nl_runtimeclasses_put(rc, items[i].json, items[i].len);
}

static void on_list(void *ctx, const nl_kube_raw_t *items, size_t n, const char *rv) {
  nl_runtimeclasses_t *rc = ctx;
  nl_runtimeclasses_replace(rc, items, n);
  if (!rc->synced) nl_vlog(2, "runtimeclasses: %zu listed (resourceVersion %s)", n, rv);
  rc->synced = true;
}

static void on_event(void *ctx, const nl_kube_watch_event_t *ev) {
  nl_runtimeclasses_t *rc = ctx;
  if (ev->type == NL_KUBE_WATCH_DELETED) nl_runtimeclasses_delete(rc, ev->object, ev->object_len);
  else nl_runtimeclasses_put(rc, ev->object, ev->object_len);
}

int nl_runtimeclasses_init(nl_runtimeclasses_t *rc, uv_loop_t *loop, nl_kube_client_t *kube,
                           nl_err_t **err) {
  memset(rc, 0, sizeof *rc);
  nl_map_init(&rc->by_name);
  nl_reflector_opts_t o = {.path = "/apis/node.k8s.io/v1/runtimeclasses"};
  nl_reflector_cbs_t cbs = {.on_list = on_list, .on_event = on_event};
  return nl_reflector_new(&rc->refl, loop, kube, &o, &cbs, rc, err);
}

void nl_runtimeclasses_start(nl_runtimeclasses_t *rc) {
  if (rc->refl) nl_reflector_start(rc->refl);
}

static void finish(nl_runtimeclasses_t *rc) {
  nl_map_free(&rc->by_name, free);
  nl_map_init(&rc->by_name);
  rc->refl = NULL;
  rc->synced = false;
  if (rc->done) rc->done(rc);
}

static void on_refl_stopped(void *ctx) { finish(ctx); }

void nl_runtimeclasses_stop(nl_runtimeclasses_t *rc, nl_runtimeclasses_done_cb done) {
  rc->done = done;
  if (rc->refl) nl_reflector_stop(rc->refl, on_refl_stopped, rc);
  else finish(rc);
}

int nl_runtimeclasses_lookup(void *ctx, const char *class_name, const char **handler,
                             nl_err_t **err) {
  nl_runtimeclasses_t *rc = ctx;
  *handler = "";
  if (!class_name || !*class_name) return 0; /* the default class: the default handler */
  const char *h = nl_map_get(&rc->by_name, class_name);
  if (!h) return nl_err_set(err, ENOENT, "runtimeclass.node.k8s.io \"%s\" not found", class_name);
  *handler = h;
  return 0;
}
