#include "cri/runtime.h"

#include "cri/call.h"

#define DEFINE(...) NL_CRI__DEFINE_RPC_IN("RuntimeService", __VA_ARGS__)
NL_CRI_RUNTIME_RPCS(DEFINE)

static void deliver_sandboxes_brief(const nl_grpc_status_t *st, ProtobufCMessage *resp,
                                    nl_cri__fn fn, void *ctx) {
  ((nl_cri_list_pod_sandbox_brief_cb)fn)(st, (Runtime__V1__Brief__ListPodSandboxResponse *)resp, ctx);
}

void nl_cri_list_pod_sandbox_brief(nl_cri_client_t *c, const Runtime__V1__ListPodSandboxRequest *req,
                                   uint64_t same, uint64_t *fp,
                                   nl_cri_list_pod_sandbox_brief_cb cb, void *ctx) {
  nl_cri__call_fp(c, "/runtime.v1.RuntimeService/ListPodSandbox", &req->base,
                  &runtime__v1__brief__list_pod_sandbox_response__descriptor, same, fp,
                  deliver_sandboxes_brief, (nl_cri__fn)cb, ctx);
}

static void deliver_containers_brief(const nl_grpc_status_t *st, ProtobufCMessage *resp,
                                     nl_cri__fn fn, void *ctx) {
  ((nl_cri_list_containers_brief_cb)fn)(st, (Runtime__V1__Brief__ListContainersResponse *)resp, ctx);
}

void nl_cri_list_containers_brief(nl_cri_client_t *c, const Runtime__V1__ListContainersRequest *req,
                                  uint64_t same, uint64_t *fp,
                                  nl_cri_list_containers_brief_cb cb, void *ctx) {
  nl_cri__call_fp(c, "/runtime.v1.RuntimeService/ListContainers", &req->base,
                  &runtime__v1__brief__list_containers_response__descriptor, same, fp,
                  deliver_containers_brief, (nl_cri__fn)cb, ctx);
}
