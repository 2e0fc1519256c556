/* One core/v1 Event: references, construction, JSON, the log line, and the
 * sink entry point managers call. */
#include "managers/events.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/model/node.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static void vrecord(const nl_event_sink_t *s, const nl_event_ref_t *obj,
                    const nl_kvlist_t *annotations, const char *type, const char *reason,
                    const char *fmt, va_list ap) __attribute__((format(printf, 6, 0)));
static void vrecord(const nl_event_sink_t *s, const nl_event_ref_t *obj,
                    const nl_kvlist_t *annotations, const char *type, const char *reason,
                    const char *fmt, va_list ap) {
  char msg[1024]; /* longer messages are cut: events.k8s.io's note limit is 1 KiB */
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (s && s->fn) s->fn(s->ctx, obj, annotations, type, reason, msg);
  else nl_event_log(obj, type, reason, msg);
}

void nl_event_vrecord(const nl_event_sink_t *s, const nl_event_ref_t *obj, const char *type,
                      const char *reason, const char *fmt, va_list ap) {
  vrecord(s, obj, NULL, type, reason, fmt, ap);
}

void nl_event_annotated_record(const nl_event_sink_t *s, const nl_event_ref_t *obj,
                               const nl_kvlist_t *annotations, const char *type,
                               const char *reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vrecord(s, obj, annotations, type, reason, fmt, ap);
  va_end(ap);
}

void nl_event_record(const nl_event_sink_t *s, const nl_event_ref_t *obj, const char *type,
                     const char *reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nl_event_vrecord(s, obj, type, reason, fmt, ap);
  va_end(ap);
}

nl_event_ref_t nl_event_pod_ref(const nl_pod_t *pod) {
  return (nl_event_ref_t){
      .kind = "Pod",
      .namespace_ = pod->metadata.namespace_,
      .name = pod->metadata.name,
      .uid = pod->metadata.uid,
      .api_version = "v1",
  };
}

static bool has_container(const nl_container_t *c, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(c[i].name, name)) return true;
  return false;
}

nl_event_ref_t nl_event_container_ref(const nl_pod_t *pod, const char *container, char *buf,
                                      size_t len) {
  nl_event_ref_t r = nl_event_pod_ref(pod);
  const char *list = has_container(pod->spec.containers, pod->spec.n_containers, container)
                         ? "containers"
                     : has_container(pod->spec.init_containers, pod->spec.n_init_containers,
                                     container)
                         ? "initContainers"
                         : NULL;
  if (list) {
    snprintf(buf, len, "spec.%s{%s}", list, container);
    r.field_path = buf;
  }
  return r;
}

nl_event_ref_t nl_event_node_ref(const char *node_name) {
  return (nl_event_ref_t){.kind = "Node", .name = node_name, .uid = node_name};
}

static char *dup_or_null(const char *s) { return s ? nl_xstrdup(s) : NULL; }

nl_event_ref_t nl_event_ref_dup(const nl_event_ref_t *r) {
  return (nl_event_ref_t){dup_or_null(r->kind),        dup_or_null(r->namespace_),
                          dup_or_null(r->name),        dup_or_null(r->uid),
                          dup_or_null(r->api_version), dup_or_null(r->resource_version),
                          dup_or_null(r->field_path)};
}

void nl_event_ref_free(nl_event_ref_t *r) {
  const char *s[] = {r->kind, r->namespace_, r->name, r->uid, r->api_version,
                     r->resource_version, r->field_path};
  for (size_t i = 0; i < sizeof s / sizeof *s; i++) free((char *)s[i]);
  *r = (nl_event_ref_t){0};
}

static const char *or_empty(const char *s) { return s ? s : ""; }

void nl_event_log(const nl_event_ref_t *o, const char *type, const char *reason,
                  const char *message) {
  nl_vlog(3, "Event occurred object=\"%s%s%s\" fieldPath=\"%s\" kind=\"%s\" apiVersion=\"%s\" "
             "type=\"%s\" reason=\"%s\" message=\"%s\"",
          or_empty(o->namespace_), o->namespace_ && *o->namespace_ ? "/" : "", or_empty(o->name),
          or_empty(o->field_path), or_empty(o->kind), or_empty(o->api_version), type, reason,
          message);
}

static char *dup0(const char *s) { return s && *s ? nl_xstrdup(s) : NULL; }

void nl_event_make(nl_event_t *ev, const nl_event_ref_t *o, const nl_kvlist_t *annotations,
                   const char *type, const char *reason, const char *message, int64_t now_ns) {
  *ev = (nl_event_t){
      .name = nl_xasprintf("%s.%" PRIx64, or_empty(o->name), (uint64_t)now_ns),
      .namespace_ = nl_xstrdup(o->namespace_ && *o->namespace_ ? o->namespace_ : "default"),
      .kind = dup0(o->kind),
      .obj_namespace = dup0(o->namespace_),
      .obj_name = dup0(o->name),
      .uid = dup0(o->uid),
      .api_version = dup0(o->api_version),
      .resource_version = dup0(o->resource_version),
      .field_path = dup0(o->field_path),
      .type = nl_xstrdup(type),
      .reason = nl_xstrdup(reason),
      .message = nl_xstrdup(message),
      .first_ns = now_ns,
      .last_ns = now_ns,
      .count = 1,
  };
  size_t n = annotations ? annotations->n : 0;
  if (!n) return;
  ev->annotations = nl_xcalloc(n, sizeof *ev->annotations);
  for (size_t i = 0; i < n; i++)
    ev->annotations[i] = (nl_kv_t){nl_xstrdup(annotations->items[i].key),
                                   nl_xstrdup(annotations->items[i].value)};
  ev->n_annotations = n;
}

void nl_event_drop_annotations(nl_event_t *ev) {
  for (size_t i = 0; i < ev->n_annotations; i++) {
    free(ev->annotations[i].key);
    free(ev->annotations[i].value);
  }
  free(ev->annotations);
  ev->annotations = NULL;
  ev->n_annotations = 0;
}

void nl_event_free(nl_event_t *ev) {
  char **s[] = {&ev->name, &ev->namespace_, &ev->kind, &ev->obj_namespace, &ev->obj_name,
                &ev->uid, &ev->api_version, &ev->resource_version, &ev->field_path, &ev->type,
                &ev->reason, &ev->message};
  for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
    free(*s[i]);
    *s[i] = NULL;
  }
  nl_event_drop_annotations(ev);
}

static void set_opt(json_t *o, const char *key, const char *v) {
  if (v && *v) json_object_set_new(o, key, json_string(v));
}

static json_t *jtime(int64_t ns) {
  char b[40];
  return json_string(nl_node_time(ns, false, b, sizeof b));
}

char *nl_event_json(const nl_event_t *ev, const char *component, const char *host) {
  json_t *meta = json_object(), *obj = json_object(), *src = json_object();
  set_opt(meta, "name", ev->name);
  set_opt(meta, "namespace", ev->namespace_);
  if (ev->n_annotations) {
    json_t *a = json_object();
    for (size_t i = 0; i < ev->n_annotations; i++)
      json_object_set_new(a, ev->annotations[i].key, json_string(ev->annotations[i].value));
    json_object_set_new(meta, "annotations", a);
  }
  set_opt(obj, "kind", ev->kind);
  set_opt(obj, "namespace", ev->obj_namespace);
  set_opt(obj, "name", ev->obj_name);
  set_opt(obj, "uid", ev->uid);
  set_opt(obj, "apiVersion", ev->api_version);
  set_opt(obj, "resourceVersion", ev->resource_version);
  set_opt(obj, "fieldPath", ev->field_path);
  set_opt(src, "component", component);
  set_opt(src, "host", host);
  json_t *e = json_pack("{s:s, s:s, s:o, s:o, s:s, s:s, s:o, s:o, s:o, s:I, s:s, s:s, s:s}",
                        "kind", "Event", "apiVersion", "v1", "metadata", meta, "involvedObject",
                        obj, "reason", ev->reason, "message", ev->message, "source", src,
                        "firstTimestamp", jtime(ev->first_ns), "lastTimestamp",
                        jtime(ev->last_ns), "count", (json_int_t)ev->count, "type", ev->type,
                        "reportingComponent", or_empty(component), "reportingInstance",
                        or_empty(host));
  char *out = json_dumps(e, JSON_COMPACT);
  json_decref(e);
  return out;
}

char *nl_event_patch_json(const nl_event_t *ev) {
  json_t *p = json_pack("{s:I, s:o, s:s}", "count", (json_int_t)ev->count, "lastTimestamp",
                        jtime(ev->last_ns), "message", ev->message);
  char *out = json_dumps(p, JSON_COMPACT);
  json_decref(p);
  return out;
}
