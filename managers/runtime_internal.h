/* Helpers shared by the runtime_*.c files; not a public interface. */
#ifndef NL_RUNTIME_INTERNAL_H
#define NL_RUNTIME_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "managers/runtime.h"

/* A small ordered string map with replace-on-put (labels, annotations, env). */
typedef struct nl__kvs {
  nl_env_t *items;
  size_t n, cap;
} nl__kvs_t;

void nl__kvs_put(nl__kvs_t *m, const char *k, const char *v);
void nl__kvs_put_take(nl__kvs_t *m, const char *k, char *v); /* takes v */
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

/* A string list appender. */
void nl__strv_push(char ***v, size_t *n, const char *s);
bool nl__strv_has(char *const *v, size_t n, const char *s);

/* Pod-level helpers. */
bool nl__is_restartable_init(const nl_container_t *c);
bool nl__pod_restart_never(const nl_pod_t *pod);
bool nl__pod_restart_on_failure(const nl_pod_t *pod); /* shouldRestartOnFailure */
const char *nl__kv_get(const nl_kvlist_t *l, const char *key);
/* "<name>_<namespace>(<uid>)" as upstream format.Pod. New string. */
char *nl__pod_desc(const nl_pod_t *pod);

/* Deep copy of a runtime pod status (NULL in, NULL out). */
nl_rt_pod_status_t *nl__rt_pod_status_dup(const nl_rt_pod_status_t *s);

/* The "<name>_<namespace>_<uid>" directory name upstream uses for logs. */
char *nl__pod_full_dir_name(const nl_pod_t *pod);

/* Sync results. */
nl_sync_step_t *nl__result_add(nl_sync_result_t *r, nl_sync_action_t a, const char *target,
                               bool init);
void nl__sync_result_clear(nl_sync_result_t *r);
void nl__step_fail(nl_sync_step_t *s, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Namespace options for a pod (runtimeutil.NamespacesForPod). */
Runtime__V1__NamespaceOption *nl__namespaces_for_pod(const nl_pod_t *pod);
/* upstream ConvertSysctlVariableToDotsSeparator; new string. */
char *nl__sysctl_dots(const char *name);

/* Realtime clock in ms (the default rt->now_ms). */
uint64_t nl__wall_ms(void *ctx);

#endif
