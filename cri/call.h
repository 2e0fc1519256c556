/* Internal to cri/: the generic call used by the typed wrappers of runtime.c and
 * image.c, and the macro that defines one wrapper per table row. */
#ifndef NL_CRI_CALL_H
#define NL_CRI_CALL_H

#include "cri/conn.h"

typedef void (*nl_cri__fn)(void);
/* Calls the typed callback fn with the response cast to its type. */
typedef void (*nl_cri__deliver)(const nl_grpc_status_t *st, ProtobufCMessage *resp,
                                nl_cri__fn fn, void *ctx);

void nl_cri__call(nl_cri_client_t *c, const char *path, const ProtobufCMessage *req,
                  const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                  nl_cri__deliver deliver, nl_cri__fn fn, void *ctx);
/* The same for the brief lists, with their fingerprints (runtime.h). */
void nl_cri__call_fp(nl_cri_client_t *c, const char *path, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc, uint64_t same, uint64_t *fp,
                     nl_cri__deliver deliver, nl_cri__fn fn, void *ctx);

/* Per-kind deadline (see enum nl_cri_deadline_kind); 0 means opts.timeout_ms. */
#define NL_CRI__TIMEOUT_DEFAULT(c, req) 0
#define NL_CRI__TIMEOUT_PULL(c, req) ((c)->opts.pull_timeout_ms)
#define NL_CRI__TIMEOUT_EXEC(c, req)                                           \
  ((req)->timeout > 0 ? (c)->opts.timeout_ms + (uint64_t)(req)->timeout * 1000 \
                      : UINT64_MAX)

#define NL_CRI__DEFINE_RPC_IN(service, name, Method, Req, Resp, resp_snake, kind)               \
  static void deliver_##name(const nl_grpc_status_t *st, ProtobufCMessage *resp,                \
                             nl_cri__fn fn, void *ctx) {                                         \
    ((nl_cri_##name##_cb)fn)(st, (Runtime__V1__##Resp *)resp, ctx);                             \
  }                                                                                              \
  void nl_cri_##name(nl_cri_client_t *c, const Runtime__V1__##Req *req, nl_cri_##name##_cb cb,  \
                     void *ctx) {                                                                \
    nl_cri__call(c, "/runtime.v1." service "/" #Method, &req->base,                             \
                 &runtime__v1__##resp_snake##__descriptor, NL_CRI__TIMEOUT_##kind(c, req),       \
                 deliver_##name, (nl_cri__fn)cb, ctx);                                           \
  }

#endif
