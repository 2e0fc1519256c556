/* Typed async wrappers for runtime.v1.RuntimeService. One function per RPC:
 *   nl_cri_version, nl_cri_status, nl_cri_update_runtime_config,
 *   nl_cri_runtime_config, nl_cri_run_pod_sandbox, nl_cri_stop_pod_sandbox,
 *   nl_cri_remove_pod_sandbox, nl_cri_pod_sandbox_status, nl_cri_list_pod_sandbox,
 *   nl_cri_create_container, nl_cri_start_container, nl_cri_stop_container,
 *   nl_cri_remove_container, nl_cri_list_containers, nl_cri_container_status,
 *   nl_cri_update_container_resources, nl_cri_update_pod_sandbox_resources,
 *   nl_cri_reopen_container_log,
 *   nl_cri_exec_sync, nl_cri_exec, nl_cri_attach, nl_cri_port_forward,
 *   nl_cri_container_stats, nl_cri_list_container_stats,
 *   nl_cri_pod_sandbox_stats, nl_cri_list_pod_sandbox_stats
 * each `void nl_cri_x(nl_cri_client_t *c, const Runtime__V1__XRequest *req,
 * nl_cri_x_cb cb, void *ctx)` with
 * `void (*nl_cri_x_cb)(const nl_grpc_status_t *st, Runtime__V1__XResponse *resp,
 * void *ctx)`. Ownership and the completion contract: cri/conn.h (the request is
 * borrowed during the call only; resp is borrowed during the callback and NULL
 * unless st->code is NL_GRPC_OK). GetContainerEvents: nl_cri_client_watch_events. */
#ifndef NL_CRI_RUNTIME_H
#define NL_CRI_RUNTIME_H

#include "cri/brief.pb-c.h"
#include "cri/conn.h"

#define NL_CRI_RUNTIME_RPCS(X)                                                                  \
  X(version, Version, VersionRequest, VersionResponse, version_response, DEFAULT)               \
  X(status, Status, StatusRequest, StatusResponse, status_response, DEFAULT)                    \
  X(update_runtime_config, UpdateRuntimeConfig, UpdateRuntimeConfigRequest,                     \
    UpdateRuntimeConfigResponse, update_runtime_config_response, DEFAULT)                       \
  X(runtime_config, RuntimeConfig, RuntimeConfigRequest, RuntimeConfigResponse,                 \
    runtime_config_response, DEFAULT)                                                           \
  X(run_pod_sandbox, RunPodSandbox, RunPodSandboxRequest, RunPodSandboxResponse,                \
    run_pod_sandbox_response, DEFAULT)                                                          \
  X(stop_pod_sandbox, StopPodSandbox, StopPodSandboxRequest, StopPodSandboxResponse,            \
    stop_pod_sandbox_response, DEFAULT)                                                         \
  X(remove_pod_sandbox, RemovePodSandbox, RemovePodSandboxRequest, RemovePodSandboxResponse,    \
    remove_pod_sandbox_response, DEFAULT)                                                       \
  X(pod_sandbox_status, PodSandboxStatus, PodSandboxStatusRequest, PodSandboxStatusResponse,    \
    pod_sandbox_status_response, DEFAULT)                                                       \
  X(list_pod_sandbox, ListPodSandbox, ListPodSandboxRequest, ListPodSandboxResponse,            \
    list_pod_sandbox_response, DEFAULT)                                                         \
  X(create_container, CreateContainer, CreateContainerRequest, CreateContainerResponse,         \
    create_container_response, DEFAULT)                                                         \
  X(start_container, StartContainer, StartContainerRequest, StartContainerResponse,             \
    start_container_response, DEFAULT)                                                          \
  X(stop_container, StopContainer, StopContainerRequest, StopContainerResponse,                 \
    stop_container_response, DEFAULT)                                                           \
  X(remove_container, RemoveContainer, RemoveContainerRequest, RemoveContainerResponse,         \
    remove_container_response, DEFAULT)                                                         \
  X(list_containers, ListContainers, ListContainersRequest, ListContainersResponse,             \
    list_containers_response, DEFAULT)                                                          \
  X(container_status, ContainerStatus, ContainerStatusRequest, ContainerStatusResponse,         \
    container_status_response, DEFAULT)                                                         \
  X(update_container_resources, UpdateContainerResources, UpdateContainerResourcesRequest,      \
    UpdateContainerResourcesResponse, update_container_resources_response, DEFAULT)             \
  X(update_pod_sandbox_resources, UpdatePodSandboxResources, UpdatePodSandboxResourcesRequest,  \
    UpdatePodSandboxResourcesResponse, update_pod_sandbox_resources_response, DEFAULT)          \
  X(reopen_container_log, ReopenContainerLog, ReopenContainerLogRequest,                        \
    ReopenContainerLogResponse, reopen_container_log_response, DEFAULT)                         \
  X(exec_sync, ExecSync, ExecSyncRequest, ExecSyncResponse, exec_sync_response, EXEC)           \
  X(exec, Exec, ExecRequest, ExecResponse, exec_response, DEFAULT)                              \
  X(attach, Attach, AttachRequest, AttachResponse, attach_response, DEFAULT)                    \
  X(port_forward, PortForward, PortForwardRequest, PortForwardResponse, port_forward_response,  \
    DEFAULT)                                                                                    \
  X(container_stats, ContainerStats, ContainerStatsRequest, ContainerStatsResponse,             \
    container_stats_response, DEFAULT)                                                          \
  X(list_container_stats, ListContainerStats, ListContainerStatsRequest,                        \
    ListContainerStatsResponse, list_container_stats_response, DEFAULT)                         \
  X(pod_sandbox_stats, PodSandboxStats, PodSandboxStatsRequest, PodSandboxStatsResponse,        \
    pod_sandbox_stats_response, DEFAULT)                                                        \
  X(list_pod_sandbox_stats, ListPodSandboxStats, ListPodSandboxStatsRequest,                    \
    ListPodSandboxStatsResponse, list_pod_sandbox_stats_response, DEFAULT)

NL_CRI_RUNTIME_RPCS(NL_CRI__DECLARE_RPC)

/* ListPodSandbox and ListContainers decoded as cri/brief.proto: id, state,
 * createdAt, labels (and a container's sandbox id) only. For callers that list
 * often and read no more (PLEG); the same requests and completion contract.
 * The answer's fingerprint (nl_cri_brief_fingerprint: the same items in any
 * order, the same value) goes to *fp when fp is not NULL; when it is same
 * (nonzero), the answer is not decoded and resp is NULL with status OK: it is
 * the answer whose fingerprint same was. An idle node's relist then costs its
 * bytes' hash, not their decoding and comparing. */
typedef void (*nl_cri_list_pod_sandbox_brief_cb)(const nl_grpc_status_t *status,
                                                 Runtime__V1__Brief__ListPodSandboxResponse *resp,
                                                 void *ctx);
void nl_cri_list_pod_sandbox_brief(nl_cri_client_t *c, const Runtime__V1__ListPodSandboxRequest *req,
                                   uint64_t same, uint64_t *fp,
                                   nl_cri_list_pod_sandbox_brief_cb cb, void *ctx);
typedef void (*nl_cri_list_containers_brief_cb)(const nl_grpc_status_t *status,
                                                Runtime__V1__Brief__ListContainersResponse *resp,
                                                void *ctx);
void nl_cri_list_containers_brief(nl_cri_client_t *c, const Runtime__V1__ListContainersRequest *req,
                                  uint64_t same, uint64_t *fp,
                                  nl_cri_list_containers_brief_cb cb, void *ctx);

#endif
