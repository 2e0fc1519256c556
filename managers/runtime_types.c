#include "managers/runtime_types.h"

#include <stdlib.h>
#include <string.h>

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
