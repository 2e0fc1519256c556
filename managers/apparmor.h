/* AppArmor profiles of containers (upstream pkg/security/apparmor): the
 * effective profile of a container (its securityContext.appArmorProfile, else
 * the pod's, else the deprecated container.apparmor.security.beta.kubernetes.io
 * annotation), and the admission of a pod that needs one (upstream's AppArmor
 * admit handler: reason "AppArmor", "Cannot enforce AppArmor: ..."). */
#ifndef NL_APPARMOR_H
#define NL_APPARMOR_H

#include <stdbool.h>

#include "agent/model/pod.h"

#define NL_APPARMOR_REASON "AppArmor"

/* upstream apparmor.IsEnabled (runc): the kernel has AppArmor loaded and
 * enabled. Blocking (two sysfs reads): once, at start. */
bool nl_apparmor_host_enabled(void);

/* The container's effective profile, or NULL when none is asked for. A profile
 * from the annotation ("runtime/default", "unconfined", "localhost/NAME") is
 * written into *tmp, whose strings point into the pod. */
const nl_seccomp_profile_t *nl_apparmor_profile(const nl_pod_t *pod, const nl_container_t *c,
                                                nl_seccomp_profile_t *tmp);

/* upstream's appArmorAdmitHandler for a pending pod: false with a new message
 * in *msg when the pod needs AppArmor (a profile other than Unconfined) and
 * the host has none, or names an empty Localhost profile. */
bool nl_apparmor_admit(const nl_pod_t *pod, bool host_enabled, char **msg);

#endif
