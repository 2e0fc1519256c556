#include "managers/sysctl.h"

#include <string.h>

#include "reactor/xalloc.h"

char *nl_sysctl_normalize(const char *name) {
  char *out = nl_xstrdup(name);
  size_t sep = strcspn(out, "./");
  if (out[sep] != '/') return out; /* no '/' first: already dotted */
  for (char *p = out; *p; p++) {
    if (*p == '.')
      *p = '/';
    else if (*p == '/')
      *p = '.';
  }
  return out;
}

/* upstream SafeSysctlAllowlist (all of them: the newest needs kernel 4.15). */
static const char *const safe[] = {
    "kernel.shm_rmid_forced",       "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",      "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",  "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",            "net.ipv4.tcp_wmem",
};

/* namespaceOf */
static nl_sysctl_ns_t namespace_of(const char *s) {
  static const char *const ipc[] = {"kernel.sem",    "kernel.shmall", "kernel.shmmax",
                                    "kernel.shmmni", "kernel.shm_rmid_forced", "kernel.shm",
                                    "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni",
                                    "kernel.msg"};
  for (size_t i = 0; i < sizeof ipc / sizeof *ipc; i++)
    if (strcmp(s, ipc[i]) == 0) return NL_SYSCTL_NS_IPC;
  if (strncmp(s, "net.", 4) == 0) return NL_SYSCTL_NS_NET;
  if (strncmp(s, "fs.mqueue.", 10) == 0) return NL_SYSCTL_NS_IPC;
  return NL_SYSCTL_NS_UNKNOWN;
}

static bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* policy validation IsValidSysctlPattern:
 * ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$, at
 * most 253 characters. */
static bool valid_pattern(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 253) return false;
  if (!lower_alnum(s[n - 1]) && s[n - 1] != '*') return false;
  size_t seg = 0; /* length of the current segment */
  for (size_t i = 0; i + 1 < n; i++) {
    char c = s[i];
    if (c == '.' || c == '/') {
      if (seg == 0 || !lower_alnum(s[i - 1])) return false;
      seg = 0;
    } else if (lower_alnum(c) || ((c == '-' || c == '_') && seg > 0)) {
      seg++;
    } else {
      return false;
    }
  }
  return true;
}

static int add(nl_sysctl_allowlist_t *w, const char *pattern, nl_err_t **err) {
  if (!valid_pattern(pattern))
    return nl_err_set(err, NL_EINVAL,
                      "sysctl \"%s\" must have at most 253 characters and match regex "
                      "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$",
                      pattern);
  char *name = nl_sysctl_normalize(pattern);
  char *star = strchr(name, '*');
  if (star) *star = 0;
  nl_sysctl_ns_t ns = namespace_of(name);
  if (ns == NL_SYSCTL_NS_UNKNOWN) {
    nl_err_set(err, NL_EINVAL, "the sysctls \"%s\" are not known to be namespaced", name);
    free(name);
    return -1;
  }
  w->items = nl_xrealloc(w->items, (w->n + 1) * sizeof *w->items);
  w->items[w->n++] = (nl_sysctl_pattern_t){name, star != NULL, ns};
  return 0;
}

int nl_sysctl_allowlist_init(nl_sysctl_allowlist_t *w, char *const *unsafe, size_t n_unsafe,
                             nl_err_t **err) {
  *w = (nl_sysctl_allowlist_t){0};
  for (size_t i = 0; i < sizeof safe / sizeof *safe; i++)
    if (add(w, safe[i], err) < 0) goto fail;
  for (size_t i = 0; i < n_unsafe; i++)
    if (add(w, unsafe[i], err) < 0) goto fail;
  return 0;
fail:
  nl_sysctl_allowlist_free(w);
  return -1;
}

void nl_sysctl_allowlist_free(nl_sysctl_allowlist_t *w) {
  for (size_t i = 0; i < w->n; i++) free(w->items[i].name);
  free(w->items);
  *w = (nl_sysctl_allowlist_t){0};
}

/* validateSysctl: NULL when allowed, else the reason (new string). Exact names
 * first, then prefixes. */
static char *validate(const nl_sysctl_allowlist_t *w, const char *raw, bool host_net,
                      bool host_ipc) {
  char *s = nl_sysctl_normalize(raw);
  const nl_sysctl_pattern_t *hit = NULL;
  for (size_t i = 0; i < w->n && !hit; i++)
    if (!w->items[i].prefix && strcmp(w->items[i].name, s) == 0) hit = &w->items[i];
  for (size_t i = 0; i < w->n && !hit; i++)
    if (w->items[i].prefix && strncmp(s, w->items[i].name, strlen(w->items[i].name)) == 0)
      hit = &w->items[i];
  char *why = NULL;
  if (!hit)
    why = nl_xasprintf("\"%s\" not allowlisted", s);
  else if (hit->ns == NL_SYSCTL_NS_IPC && host_ipc)
    why = nl_xasprintf("\"%s\" not allowed with host IPC enabled", s);
  else if (hit->ns == NL_SYSCTL_NS_NET && host_net)
    why = nl_xasprintf("\"%s\" not allowed with host Net enabled", s);
  free(s);
  return why;
}

bool nl_sysctl_admit(const nl_sysctl_allowlist_t *w, const nl_pod_t *pod, char **message) {
  const nl_pod_security_context_t *sc = pod->spec.security_context;
  if (!sc) return true;
  for (size_t i = 0; i < sc->n_sysctls; i++) {
    char *why = validate(w, sc->sysctls[i].key ? sc->sysctls[i].key : "", pod->spec.host_network,
                         pod->spec.host_ipc);
    if (why) {
      *message = nl_xasprintf("forbidden sysctl: %s", why);
      free(why);
      return false;
    }
  }
  return true;
}
