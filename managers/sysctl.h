/* Pod sysctls (upstream pkg/kubelet/sysctl and component-helpers
 * node/util/sysctl): the name normalisation the runtime and admission share,
 * and the admission of a pod's sysctls against the safe ones and
 * allowedUnsafeSysctls. */
#ifndef NL_SYSCTL_H
#define NL_SYSCTL_H

#include <stdbool.h>
#include <stddef.h>

#include "agent/model/pod.h"
#include "reactor/error.h"

/* NormalizeName: "net/ipv4/conf/eno2.100/rp_filter" is
 * "net.ipv4.conf.eno2/100.rp_filter"; a name whose first separator is '.' is
 * kept. Returns a new string. */
char *nl_sysctl_normalize(const char *name);

/* The allowed sysctls (upstream patternAllowlist): exact names and prefixes
 * (a pattern ending in '*'), each with its namespace. Owns its strings. */
typedef enum { NL_SYSCTL_NS_UNKNOWN = 0, NL_SYSCTL_NS_IPC, NL_SYSCTL_NS_NET } nl_sysctl_ns_t;

typedef struct nl_sysctl_pattern {
  char *name; /* normalised; a prefix when prefix is set */
  bool prefix;
  nl_sysctl_ns_t ns;
} nl_sysctl_pattern_t;

typedef struct nl_sysctl_allowlist {
  nl_sysctl_pattern_t *items;
  size_t n;
} nl_sysctl_allowlist_t;

/* NewAllowlist(SafeSysctlAllowlist() + unsafe): 0, or -1 with *err as upstream
 * ("sysctl \"x\" must have at most 253 characters and match regex ...", "the
 * sysctls \"x\" are not known to be namespaced"); *w is empty then. */
int nl_sysctl_allowlist_init(nl_sysctl_allowlist_t *w, char *const *unsafe, size_t n_unsafe,
                             nl_err_t **err);
void nl_sysctl_allowlist_free(nl_sysctl_allowlist_t *w);

/* patternAllowlist.Admit: true when every sysctl of the pod is allowed (and not
 * of the host's IPC or network namespace the pod shares); false with *message
 * (new string) "forbidden sysctl: \"kernel.msgmax\" not allowlisted" or
 * "forbidden sysctl: \"net.x\" not allowed with host Net enabled" otherwise.
 * The reason is NL_SYSCTL_FORBIDDEN_REASON. */
#define NL_SYSCTL_FORBIDDEN_REASON "SysctlForbidden"
bool nl_sysctl_admit(const nl_sysctl_allowlist_t *w, const nl_pod_t *pod, char **message);

#endif
