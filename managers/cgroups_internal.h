/* Shared by cgroups.c and cgroups_fs.c: the blocking filesystem layer. A path
 * is the cgroup's directory below a hierarchy's top, in the driver's form. */
#ifndef NL_CGROUPS_INTERNAL_H
#define NL_CGROUPS_INTERNAL_H

#include <stdbool.h>

#include "managers/cgroups.h"

/* Sets cg->v2 from what is under cg->fs_root; -1 with *err when the cpu or
 * memory controller is missing. */
int nl_cgroups__detect(nl_cgroups_t *cg, nl_err_t **err);
/* The hugetlb controller is there: its v1 hierarchy, or v2's cgroup.controllers
 * lists it. */
bool nl_cgroups__hugetlb(const nl_cgroups_t *cg);
/* In every controller the manager uses (v1), or in the unified tree. */
bool nl_cgroups__exists(const nl_cgroups_t *cg, const char *path);
/* mkdir -p in each controller (v2: enabling the controllers on the way down),
 * then nl_cgroups__set. Idempotent. */
/* Creates path (no limits) and moves process pid into it, in every
 * hierarchy (upstream's ensureProcessInContainerWithOOMScore). */
int nl_cgroups__join(const nl_cgroups_t *cg, const char *path, int pid, nl_err_t **err);
int nl_cgroups__create(const nl_cgroups_t *cg, const char *path, const nl_cgroup_res_t *r,
                       nl_err_t **err);
/* Writes the non-zero fields of r. */
int nl_cgroups__set(const nl_cgroups_t *cg, const char *path, const nl_cgroup_res_t *r,
                    nl_err_t **err);
/* Kills every process left in the tree and removes it from every hierarchy. */
/* Reads cpu shares, quota and period and the memory limit of path (memory 0:
 * no limit; quota -1: none). 0, or -1 with *err when cpu is unreadable. */
int nl_cgroups__get(const nl_cgroups_t *cg, const char *path, nl_cgroup_res_t *r, nl_err_t **err);
/* The memory usage of path in bytes, -1 when unreadable. */
int64_t nl_cgroups__memory_usage(const nl_cgroups_t *cg, const char *path);
int nl_cgroups__destroy(const nl_cgroups_t *cg, const char *path, nl_err_t **err);
/* /proc/swaps lists a device. */
bool nl_cgroups__swap_on(const char *swaps);

#endif
