/* Services for the pods' environment (upstream's service informer and
 * getServiceEnvVarMap, pkg/kubelet/envvars): one reflector on /api/v1/services
 * keeps every Service of the cluster (namespace, name, clusterIP, ports: all the
 * environment needs); a pod gets the Docker-link-style variables of the
 * services in its namespace when enableServiceLinks is true, and those of the
 * `kubernetes` service in `default` always.
 *
 * Without an API client there are no services and no variables (upstream:
 * "Kubelets without masters ... don't set env vars"). With one, a pod from the
 * API server fails its container config ("services have not yet been read at
 * least once, cannot construct envvars", retried by its sync) until the first
 * list arrived; static pods never wait, as upstream.
 *
 * Ownership: nl_services_t is embedded by its owner and borrows the client,
 * which must outlive nl_services_stop()'s done callback. */
#ifndef NL_MANAGERS_SERVICES_H
#define NL_MANAGERS_SERVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent/kube/reflector.h"
#include "managers/runtime.h"
#include "reactor/map.h"

typedef struct nl_service_port {
  char *name;     /* "" when unnamed */
  int32_t port;
  char *protocol; /* "TCP" when unset */
} nl_service_port_t;

typedef struct nl_service {
  char *namespace_, *name;
  char *cluster_ip; /* "" or "None": no variables */
  nl_service_port_t *ports;
  size_t n_ports;
} nl_service_t;

/* The parts of a v1 Service JSON object the environment needs. Returns 0 with
 * a new service, or -1 with *err. */
int nl_service_decode(const char *json, size_t len, nl_service_t **out, nl_err_t **err);
void nl_service_free(nl_service_t *s);

/* envvars.FromServices: appends to *env (a new array when NULL) the variables
 * of each service with a cluster IP, in upstream's order. */
void nl_service_env_from(const nl_service_t *const *svcs, size_t n, nl_env_t **env,
                         size_t *n_env);

typedef struct nl_services nl_services_t;
typedef void (*nl_services_done_cb)(nl_services_t *s);

struct nl_services {
  bool enabled;           /* an API client was given */
  nl_reflector_t *refl;
  nl_map_t by_key;        /* "<namespace>/<name>" -> nl_service_t */
  bool synced;            /* a first list arrived */
  bool unreachable;       /* the first list got no answer: pods start without
                           * the services' variables until one arrives */
  nl_services_done_cb done;
};

/* kube NULL: disabled (no variables). Returns 0, or -1 with *err. */
int nl_services_init(nl_services_t *s, uv_loop_t *loop, nl_kube_client_t *kube, nl_err_t **err);
void nl_services_start(nl_services_t *s);
/* Stops the watch, frees the services, then calls done (may be NULL; at once
 * when disabled). */
void nl_services_stop(nl_services_t *s, nl_services_done_cb done);

/* For nl_runtime_opts_t.service_env (ctx is the nl_services_t): the variables
 * for pod, sorted by name. A zeroed, never initialised nl_services_t gives none. */
int nl_services_env(void *ctx, const nl_pod_t *pod, nl_env_t **out, size_t *n, nl_err_t **err);

#endif
