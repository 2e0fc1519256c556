#include "managers/apparmor.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "reactor/xalloc.h"

#define ANNOTATION_PREFIX "container.apparmor.security.beta.kubernetes.io/"

bool nl_apparmor_host_enabled(void) {
  struct stat st;
  if (stat("/sys/kernel/security/apparmor", &st) != 0) return false;
  FILE *f = fopen("/sys/module/apparmor/parameters/enabled", "re");
  if (!f) return false;
  int c = fgetc(f);
  fclose(f);
  return c == 'Y';
}

static const nl_seccomp_profile_t *from_annotation(const nl_pod_t *pod, const char *container,
                                                   nl_seccomp_profile_t *tmp) {
  char key[sizeof ANNOTATION_PREFIX + 256];
  snprintf(key, sizeof key, ANNOTATION_PREFIX "%s", container);
  const char *v = nl_kvlist_get(&pod->metadata.annotations, key);
  if (!v) return NULL;
  *tmp = (nl_seccomp_profile_t){0};
  if (strcmp(v, "runtime/default") == 0) tmp->type = "RuntimeDefault";
  else if (strcmp(v, "unconfined") == 0) tmp->type = "Unconfined";
  else if (strncmp(v, "localhost/", 10) == 0 && v[10]) tmp->type = "Localhost", tmp->localhost_profile = (char *)v + 10;
  else return NULL; /* upstream: an unknown value (or no profile name) is no profile */
  return tmp;
}

const nl_seccomp_profile_t *nl_apparmor_profile(const nl_pod_t *pod, const nl_container_t *c,
                                                nl_seccomp_profile_t *tmp) {
  if (c->security_context && c->security_context->app_armor_profile)
    return c->security_context->app_armor_profile;
  const nl_seccomp_profile_t *a = from_annotation(pod, c->name, tmp);
  if (a) return a;
  const nl_pod_security_context_t *ps = pod->spec.security_context;
  return ps ? ps->app_armor_profile : NULL;
}

static bool confined(const nl_seccomp_profile_t *p) {
  return p && p->type && strcmp(p->type, "Unconfined") != 0;
}

/* One container: true when it asks for a confining profile; *bad set when
 * its Localhost profile has no name. */
static bool container_needs(const nl_pod_t *pod, const nl_container_t *c, bool *bad) {
  nl_seccomp_profile_t tmp;
  const nl_seccomp_profile_t *p = nl_apparmor_profile(pod, c, &tmp);
  if (p && p->type && strcmp(p->type, "Localhost") == 0) {
    const char *n = p->localhost_profile ? p->localhost_profile : "";
    while (*n == ' ' || *n == '\t' || *n == '\n') n++;
    if (!*n) *bad = true;
  }
  return confined(p);
}

bool nl_apparmor_admit(const nl_pod_t *pod, bool host_enabled, char **msg) {
  *msg = NULL;
  const nl_pod_spec_t *s = &pod->spec;
  bool needed = s->security_context && confined(s->security_context->app_armor_profile), bad = false;
  const struct {
    const nl_container_t *v;
    size_t n;
  } lists[] = {{s->init_containers, s->n_init_containers},
               {s->containers, s->n_containers},
               {s->ephemeral_containers, s->n_ephemeral_containers}};
  for (size_t l = 0; l < 3; l++)
    for (size_t i = 0; i < lists[l].n; i++) needed |= container_needs(pod, &lists[l].v[i], &bad);
  /* upstream isRequired also counts an annotation of a container the pod
   * does not have */
  for (size_t i = 0; !needed && i < pod->metadata.annotations.n; i++) {
    const nl_kv_t *kv = &pod->metadata.annotations.items[i];
    if (strncmp(kv->key, ANNOTATION_PREFIX, strlen(ANNOTATION_PREFIX)) == 0)
      needed = strcmp(kv->value, "unconfined") != 0;
  }
  if (!needed) return true;
  if (!host_enabled) {
    *msg = nl_xstrdup("Cannot enforce AppArmor: AppArmor is not enabled on the host");
    return false;
  }
  if (bad) {
    *msg = nl_xstrdup("Cannot enforce AppArmor: invalid empty AppArmor profile name");
    return false;
  }
  return true;
}
