/* Requests of a kind (nl_kube_request_kind): protobuf or JSON by the client's
 * content type (agent/kube/pb.h). A file of its own so that tests which fake
 * nl_kube_request() can fake this too without pulling request.c in. */
#include <stdlib.h>
#include <string.h>

#include "agent/kube/client_int.h"
#include "agent/kube/pb.h"
#include "reactor/log.h"

bool nl_kube_client_protobuf(const nl_kube_client_t *c) { return c->protobuf; }

nl_kube_req_t *nl_kube_request_kind(nl_kube_client_t *c, const nl_kube_request_opts_t *opts,
                                    const char *api_version, const char *kind, const json_t *obj,
                                    nl_kube_done_fn cb, void *ctx) {
  nl_kube_request_opts_t o = *opts;
  o.body_len = 0;
  o.accept_protobuf = c->protobuf && nl_kube_pb_known(api_version, kind);
  uint8_t *pb = NULL;
  char *text = NULL;
  if (obj && o.accept_protobuf && !o.content_type) {
    nl_cleanup_err nl_err_t *err = NULL;
    if (nl_kube_pb_from_json(obj, &pb, &o.body_len, &err) == 0)
      o.content_type = NL_KUBE_PB_TYPE;
    else /* a field k8s.proto lacks: JSON carries it */
      nl_vlog(4, "%s %s: sent as JSON: %s", o.method, o.path, nl_err_msg(err));
  }
  if (obj && !pb) {
    text = json_dumps(obj, JSON_COMPACT);
    if (!text) abort();
    o.body_len = strlen(text);
  }
  o.body = pb ? (const void *)pb : text;
  nl_kube_req_t *r = nl_kube_request(c, &o, cb, ctx);
  free(pb);
  free(text);
  return r;
}
