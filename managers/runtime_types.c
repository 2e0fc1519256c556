#include "managers/runtime_types.h"

#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "reactor/xalloc.h"

typedef struct kv_entry {
  ProtobufCMessage base;
  char *key;
  char *value;
} kv_entry_t;

const char *nl_rt_kv_get(void *const *entries, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++) {
    const kv_entry_t *e = entries[i];
    if (e && e->key && strcmp(e->key, key) == 0) return e->value;
  }
  return NULL;
}

void nl_rt_pod_status_free(nl_rt_pod_status_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_sandboxes; i++) {
    nl_rt_sandbox_t *sb = &s->sandboxes[i];
    free(sb->id);
    free(sb->ip);
    for (size_t j = 0; j < sb->n_ips; j++) free(sb->ips[j]);
    free(sb->ips);
  }
  for (size_t i = 0; i < s->n_containers; i++) {
    nl_rt_container_t *c = &s->containers[i];
    free(c->id);
    free(c->name);
    free(c->reason);
    free(c->message);
    free(c->image);
    free(c->image_ref);
    free(c->log_path);
    free(c->termination_message_path);
    free(c->sandbox_id);
    nl_rt_user_free(&c->user);
  }
  free(s->sandboxes);
  free(s->containers);
  free(s->uid);
  free(s->name);
  free(s->namespace_);
  for (size_t i = 0; i < s->n_ips; i++) free(s->ips[i]);
  free(s->ips);
  free(s);
}

const nl_rt_container_t *nl_rt_pod_status_find(const nl_rt_pod_status_t *s, const char *name) {
  if (!s) return NULL;
  for (size_t i = 0; i < s->n_containers; i++)
    if (s->containers[i].name && strcmp(s->containers[i].name, name) == 0)
      return &s->containers[i];
  return NULL;
}

static char *dup0(const char *s) { return s ? nl_xstrdup(s) : NULL; }

static char **dup_strv(char *const *v, size_t n) {
  if (!n) return NULL;
  char **out = nl_xcalloc(n, sizeof *out);
  for (size_t i = 0; i < n; i++) out[i] = dup0(v[i]);
  return out;
}

/* Kept next to nl_rt_pod_status_free so that a field added to the struct is
 * copied and freed in one place. */
nl_rt_pod_status_t *nl_rt_pod_status_dup(const nl_rt_pod_status_t *s) {
  if (!s) return NULL;
  nl_rt_pod_status_t *d = nl_xcalloc(1, sizeof *d);
  *d = *s;
  d->uid = dup0(s->uid);
  d->name = dup0(s->name);
  d->namespace_ = dup0(s->namespace_);
  d->ips = dup_strv(s->ips, s->n_ips);
  d->sandboxes = nl_xcalloc(s->n_sandboxes + 1, sizeof *d->sandboxes);
  for (size_t i = 0; i < s->n_sandboxes; i++) {
    const nl_rt_sandbox_t *a = &s->sandboxes[i];
    nl_rt_sandbox_t *b = &d->sandboxes[i];
    *b = *a;
    b->id = dup0(a->id);
    b->ip = dup0(a->ip);
    b->ips = dup_strv(a->ips, a->n_ips);
  }
  d->containers = nl_xcalloc(s->n_containers + 1, sizeof *d->containers);
  for (size_t i = 0; i < s->n_containers; i++) {
    const nl_rt_container_t *a = &s->containers[i];
    nl_rt_container_t *b = &d->containers[i];
    *b = *a;
    b->id = dup0(a->id);
    b->name = dup0(a->name);
    b->reason = dup0(a->reason);
    b->message = dup0(a->message);
    b->image = dup0(a->image);
    b->image_ref = dup0(a->image_ref);
    b->log_path = dup0(a->log_path);
    b->termination_message_path = dup0(a->termination_message_path);
    b->sandbox_id = dup0(a->sandbox_id);
    nl_rt_user_copy(&b->user, &a->user);
  }
  return d;
}

void nl_rt_user_copy(nl_rt_user_t *dst, const nl_rt_user_t *src) {
  *dst = *src;
  dst->groups = NULL;
  if (src->n_groups) {
    dst->groups = nl_xcalloc(src->n_groups, sizeof *dst->groups);
    memcpy(dst->groups, src->groups, src->n_groups * sizeof *dst->groups);
  }
}

void nl_rt_user_free(nl_rt_user_t *u) {
  free(u->groups);
  memset(u, 0, sizeof *u);
}

char *nl_rt_log_links_dir(const char *pod_logs_dir) {
  size_t n = strlen(pod_logs_dir);
  while (n > 1 && pod_logs_dir[n - 1] == '/') n--;
  while (n > 0 && pod_logs_dir[n - 1] != '/') n--; /* drop the last element, keep its '/' */
  return nl_xasprintf("%.*scontainers", (int)n, pod_logs_dir);
}

#define LOG_LINK_NAME_MAX 255

char *nl_rt_log_link_path(const char *links_dir, const char *pod, const char *namespace_,
                          const char *container, const char *container_id) {
  char *name = nl_xasprintf("%s_%s_%s-%s", pod, namespace_, container, container_id);
  if (strlen(name) > LOG_LINK_NAME_MAX - 4) name[LOG_LINK_NAME_MAX - 4] = 0;
  char *out = nl_xasprintf("%s/%s.log", links_dir, name);
  free(name);
  return out;
}
