/* Helpers shared by the runtime_*.c files; not a public interface. */
#ifndef NL_RUNTIME_INTERNAL_H
#define NL_RUNTIME_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cri/runtime.h"
#include "managers/runtime.h"

/* A small ordered string map with replace-on-put (labels, annotations, env). */
typedef struct nl__kvs {
  nl_env_t *items;
  size_t n, cap;
} nl__kvs_t;

void nl__kvs_put(nl__kvs_t *m, const char *k, const char *v);
void nl__kvs_put_take(nl__kvs_t *m, const char *k, char *v); /* takes v */
void nl__kvs_put_all(nl__kvs_t *m, const nl_kvlist_t *l);  /* each of l, in order */
const char *nl__kvs_get(const nl__kvs_t *m, const char *k);
void nl__kvs_free(nl__kvs_t *m);

/* Map entries for protobuf-c (LabelsEntry, AnnotationsEntry, ...: all are
 * {base, key, value}). Returns a new array of n new messages of desc. */
void **nl__kv_entries(const ProtobufCMessageDescriptor *desc, const nl__kvs_t *m);

/* A copy for a protobuf string field: "" (the shared empty string, not freed by
 * protobuf_c_message_free_unpacked) for NULL or "". */
char *nl__pstr(const char *s);
/* A new char*[] of copies (NULL when n is 0). */
char **nl__pstrv(char *const *v, size_t n);
/* A new message of type T, initialized. */
#define NL__NEW(T, INIT)                     \
  ({                                         \
    T *nl__m = nl_xmalloc(sizeof(T));        \
    T nl__i = INIT;                          \
    *nl__m = nl__i;                          \
    nl__m;                                   \
  })

/* The LinuxContainerResources of c in pod (upstream
 * generateLinuxContainerResources): CreateContainer's and
 * UpdateContainerResources'. Free with protobuf_c_message_free_unpacked. */
Runtime__V1__LinuxContainerResources *nl__container_resources(const nl_runtime_opts_t *opts,
                                                               const nl_pod_t *pod,
                                                               const nl_container_t *c);

/* A string list appender. */
void nl__strv_push(char ***v, size_t *n, const char *s);
bool nl__strv_has(char *const *v, size_t n, const char *s);

/* Pod-level helpers. */
bool nl__is_restartable_init(const nl_container_t *c);
bool nl__pod_restart_on_failure(const nl_pod_t *pod); /* shouldRestartOnFailure */
const char *nl__kv_get(const nl_kvlist_t *l, const char *key);
/* "<name>_<namespace>(<uid>)" as upstream format.Pod. New string. */
char *nl__pod_desc(const nl_pod_t *pod);

/* The "<name>_<namespace>_<uid>" directory name upstream uses for logs. */
char *nl__pod_full_dir_name(const nl_pod_t *pod);

/* Sync results. */
nl_sync_step_t *nl__result_add(nl_sync_result_t *r, nl_sync_action_t a, const char *target,
                               bool init);
void nl__sync_result_clear(nl_sync_result_t *r);
void nl__step_fail(nl_sync_step_t *s, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* computePodActions' lists (runtime_actions.c): appends i to *v; records a
 * container to kill (the last reason for an id wins, as upstream's map;
 * message is taken). */
void nl__push_idx(size_t **v, size_t *n, size_t i);
void nl__to_kill(nl_pod_actions_t *a, const nl_rt_container_t *st, const nl_container_t *spec,
                 bool init, const char *reason, char *message);

/* Namespace options for a pod (runtimeutil.NamespacesForPod). */
Runtime__V1__NamespaceOption *nl__namespaces_for_pod(const nl_pod_t *pod);
/* The pod's user namespace for its sandbox and containers (upstream
 * GetOrCreateUserNamespaceMappings after its allocation): NODE unless
 * hostUsers is false; then POD with the slot opts->userns holds for it, or an
 * error when the pod's runtime handler does not support user namespaces (in
 * upstream's words) or the pod has no slot. */
int nl__userns_for_pod(const nl_runtime_opts_t *opts, const nl_pod_t *pod,
                       Runtime__V1__UserNamespace **out, nl_err_t **err);
/* The handler check alone: 0 when the pod may have a user namespace. */
int nl__userns_check_handler(const nl_runtime_opts_t *opts, const nl_pod_t *pod, nl_err_t **err);

/* The pod's groups for a sandbox's or a container's security context: fsGroup
 * then supplementalGroups (a new array in *groups, NULL when none), and
 * supplementalGroupsPolicy (Merge when unset). psc may be NULL. */
void nl__pod_groups(const nl_pod_security_context_t *psc, int64_t **groups, size_t *n,
                    Runtime__V1__SupplementalGroupsPolicy *policy);

/* ---- env files (runtime_envfile.c) ---- */

/* One fileKeyRef of the container being started. */
typedef struct nl__envfile {
  char *name;           /* the variable */
  char *root;           /* the volume's directory */
  char *path, *key;
  bool optional;
  char *value;          /* read: the value; NULL: absent (optional) */
} nl__envfile_t;

/* On the loop: the container's fileKeyRefs with their volumes' directories
 * (a new array, NULL when none), or -1 with *err for a volume the pod does not
 * have. */
int nl__envfiles_plan(const nl_runtime_opts_t *o, const nl_pod_t *pod, const nl_container_t *c,
                      nl__envfile_t **out, size_t *n, nl_err_t **err);
/* On the thread pool: reads each; -1 with *err (upstream's messages) for a
 * file that cannot be read or parsed, or a required key it lacks. */
int nl__envfiles_read(nl__envfile_t *v, size_t n, nl_err_t **err);
/* The values found, moved into a new array (*n_out entries) for
 * nl_runtime_make_env. */
nl_env_t *nl__envfiles_values(nl__envfile_t *v, size_t n, size_t *n_out);
void nl__envfiles_free(nl__envfile_t *v, size_t n);

/* ---- operations (runtime.c, runtime_sync.c, runtime_kill.c) ---- */

typedef enum { NL__OP_SYNC, NL__OP_KILL, NL__OP_REMOVE, NL__OP_RESET } nl__op_kind_t;

/* One container of an in-place restart (runtime_reset.c): its index in the
 * op's status, whether it is an init container, whether to stop it first. */
typedef struct nl__reset_step {
  size_t idx;
  bool init, kill;
} nl__reset_step_t;

typedef struct nl__resize_run nl__resize_run_t; /* runtime_resize.c */

struct nl_runtime_op {
  nl_list_t link;          /* in rt->ops */
  nl_runtime_t *rt;
  nl__op_kind_t kind;
  nl_pod_t *pod;               /* a reference; NULL for an orphan */
  nl_rt_pod_status_t *status;  /* owned copy; may be NULL */
  char *uid;                   /* the pod's uid (from pod or status) */
  char *desc;                  /* "<name>_<ns>(<uid>)" */
  nl_runtime_sync_cb cb;
  void *ctx;
  nl_sync_result_t result;
  bool cancelled;              /* the caller is gone: no callback */
  bool finished;               /* the callback ran (or was dropped) */
  int pending;                 /* async work outstanding; freed at 0 once finished */
  int stage;
  /* kill / remove */
  int64_t grace_override;      /* -1: none */
  bool remove_dirs;
  size_t kill_todo;            /* items outstanding in a parallel group */
  int kill_phase;
  void (*after_kill)(nl_runtime_op_t *op, bool ok);
  struct nl__kill_order *kill_order; /* sidecars' turn to stop (runtime_kill.c); owned */
  /* reset (runtime_reset.c): the containers to remove, in order (owned) */
  nl__reset_step_t *reset;
  size_t n_reset;
  /* sync */
  nl_pod_actions_t actions;
  char *sandbox_id;
  char **pod_ips;
  size_t n_pod_ips;
  nl_host_dns_t host_dns;
  Runtime__V1__PodSandboxConfig *sandbox_config;
  nl_err_t *userns_err;         /* the pod's user namespace could not be had (runtime_sync.c) */
  size_t cursor;               /* index into the list being worked on */
  bool in_init;                /* starting init containers */
  bool in_ephemeral;           /* starting ephemeral containers (before the init ones) */
  const nl_container_t *cur;   /* the container being started */
  nl_sync_step_t *cur_step;    /* borrowed pointer into result: re-fetched by index */
  size_t cur_step_idx;
  char *cur_image_ref;
  char *cur_term_path;
  char *cur_hosts_path;        /* the pod's etc-hosts when the container mounts it */
  int32_t cur_restart;
  nl_env_t *cur_file_env;      /* op->cur's fileKeyRef values, read (runtime_envfile.c) */
  size_t n_cur_file_env;
  nl_images_req_t img;
  struct nl__image_volume *image_volumes; /* the pod's, pulled before its containers start */
  size_t n_image_volumes;
  size_t image_volume_cursor;          /* into pod->spec.volumes while pulling */
  void (*image_volumes_next)(nl_runtime_op_t *op);
  nl_image_volume_ref_t *cur_image_volumes; /* op->cur's, from nl__image_volumes_for */
  size_t n_cur_image_volumes;
  nl_keyring_t keyring;        /* the pod's pull secrets (runtime_pull.c), read at the first pull */
  bool keyring_built;
  int keyring_rc;              /* as nl_images_creds_fn returns */
  char *keyring_msg;
  char *cur_id;                /* the container just created (postStart) */
  nl_list_t hooks;             /* lifecycle hooks running (hooks_runtime.c; lazily set up) */
  nl__resize_run_t *resize_run; /* the in-place resize, once started (owned) */
};

/* Creates and registers an operation (copies pod and status). */
nl_runtime_op_t *nl__op_new(nl_runtime_t *rt, nl__op_kind_t kind, const nl_pod_t *pod,
                            const nl_rt_pod_status_t *status, nl_runtime_sync_cb cb, void *ctx);
/* Starts op with fn on the next loop turn (the callback never runs inside
 * the call that made op); returns op. */
nl_runtime_op_t *nl__op_kick(nl_runtime_op_t *op, void (*fn)(nl_runtime_op_t *op));
/* Delivers the result (unless cancelled) once; frees the op when nothing is pending. */
void nl__op_finish(nl_runtime_op_t *op);
/* Called at the top of every async completion: pending--, and returns false when
 * the op must not go on (cancelled or stopping; it is freed if it can be). */
bool nl__op_resume(nl_runtime_op_t *op);
/* Fails the operation with a sync-wide error and finishes it. */
void nl__op_fail(nl_runtime_op_t *op, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Kill every running container (in parallel) then stop every sandbox; then calls
 * op->after_kill(op, ok). Used by SyncPod (KillPod) and nl_runtime_kill_pod. */
void nl__kill_pod_start(nl_runtime_op_t *op, void (*after)(nl_runtime_op_t *, bool));
/* StopContainer with timeout grace, after telling rt's stop listener. */
void nl__stop_container(nl_runtime_t *rt, const char *id, int64_t grace,
                        nl_cri_stop_container_cb cb, void *ctx);
/* The grace period for a container, as upstream setTerminationGracePeriod. */
int64_t nl__grace_for(const nl_pod_t *pod, const nl_container_t *spec, const char *reason);
/* The nl_images_creds_fn of a SyncPod (ctx: the op). */
int nl__op_pull_creds(void *ctx, const nl_keyring_t **keyring, char **msg);
/* Image volumes (runtime_imagevol.c). nl__image_volumes_pull ensures every
 * image volume of op's pod exists (upstream getImageVolumes: each pulled with
 * its pullPolicy and the pod's pull secrets), then calls next(op).
 * nl__image_volumes_for resolves those op->cur mounts: 0 with a new array in
 * *out (n in *n, NULL when none), or -1 after failing op->cur's step with
 * the pull's reason and message (upstream toKubeContainerImageVolumes) or,
 * when the runtime cannot mount images (nothing is pulled then),
 * CreateContainerConfigError. */
void nl__image_volumes_pull(nl_runtime_op_t *op, void (*next)(nl_runtime_op_t *op));
int nl__image_volumes_for(nl_runtime_op_t *op, nl_sync_step_t *step, nl_image_volume_ref_t **out,
                          size_t *n);
void nl__image_volumes_free(nl_runtime_op_t *op);
/* Starts the SyncPod state machine of op. */
void nl__sync_start(nl_runtime_op_t *op);
/* The in-place resize of op's actions (runtime_resize.c): the pod cgroup and
 * the containers updated in order, then next(op), which also follows a
 * failure (recorded as the ResizePodInPlace step). Once per operation. */
void nl__resize_start(nl_runtime_op_t *op, void (*next)(nl_runtime_op_t *op));
void nl__resize_run_free(nl__resize_run_t *run);
/* Starts removing containers/sandboxes of op (kind REMOVE). */
void nl__remove_start(nl_runtime_op_t *op);

/* Records an event on a container of pod (the pod itself when container is
 * NULL) through the runtime's sink; pod NULL (an orphan): nothing. */
void nl__op_event(nl_runtime_op_t *op, const nl_pod_t *pod, const char *container,
                  const char *type, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Realtime clock in ms (the default rt->now_ms). */
uint64_t nl__wall_ms(void *ctx);

/* A pod with the one container of s, rebuilt from its labels and annotations
 * (upstream restoreSpecsFromContainerLabels), when s has a preStop handler
 * annotation; NULL otherwise. Free with nl_pod_free. */
nl_pod_t *nl__restore_pod(const Runtime__V1__ContainerStatus *s);

#endif
