/* Kubernetes protobuf on the wire (application/vnd.kubernetes.protobuf), as
 * upstream's k8s.io/apimachinery/pkg/runtime/serializer/protobuf: the 4-byte
 * magic "k8s\0", then a runtime.Unknown whose typeMeta names the object and
 * whose raw holds the object's own message (agent/kube/k8s.proto).
 *
 * nanolet's model works on JSON trees, so protobuf is a transport encoding
 * here: an answer is decoded into the same json_t the JSON path gives (field
 * names and values as the apiserver writes them in JSON), and an object is
 * encoded from one. Only the kinds in k8s.proto are known (Lease); a caller
 * that asks for protobuf also accepts JSON, which the apiserver answers for
 * every other kind. */
#ifndef NL_KUBE_PB_H
#define NL_KUBE_PB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/kube/client.h"
#include "reactor/error.h"

#define NL_KUBE_PB_TYPE "application/vnd.kubernetes.protobuf"
/* Accept header of a request that prefers protobuf: JSON for objects and
 * servers without it (client-go's AcceptContentTypes). */
#define NL_KUBE_PB_ACCEPT NL_KUBE_PB_TYPE ", application/json"
/* Accept headers of a request that wants only the answer's metadata (a
 * PartialObjectMetadata, as client-go's metadata client asks), the whole
 * object from a server that cannot. */
#define NL_KUBE_AS_META ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
#define NL_KUBE_PB_ACCEPT_META \
  NL_KUBE_PB_TYPE NL_KUBE_AS_META ", application/json" NL_KUBE_AS_META ", application/json"
#define NL_KUBE_JSON_ACCEPT_META "application/json" NL_KUBE_AS_META ", application/json"

/* The envelope, decoded: pointers into the input (raw) or into *u. */
typedef struct nl_kube_pb_env {
  const char *api_version, *kind; /* "" when absent */
  const uint8_t *raw;
  size_t raw_len;
  void *u; /* the unpacked runtime.Unknown; nl_kube_pb_env_free releases it */
} nl_kube_pb_env_t;

/* Decodes the envelope. Returns 0, or -1 with *err (EPROTO) naming what is
 * wrong: a missing magic, an undecodable Unknown, a contentEncoding (upstream
 * writes none) or a missing kind. */
int nl_kube_pb_unwrap(const void *data, size_t len, nl_kube_pb_env_t *env, nl_err_t **err);
void nl_kube_pb_env_free(nl_kube_pb_env_t *env);

/* Wraps raw (an encoded message) in the envelope; returns malloc'ed bytes
 * (*len set), owned by the caller. */
uint8_t *nl_kube_pb_wrap(const char *api_version, const char *kind, const uint8_t *raw,
                         size_t raw_len, size_t *len);

/* Decodes an enveloped object of a known kind into its JSON form (apiVersion
 * and kind set). Returns 0 with *out owned by the caller, or -1 with *err: an
 * unknown kind ("protobuf: coordination.k8s.io/v1 Foo: kind not known"), or a
 * message that does not decode ("Lease: metadata.creationTimestamp: ..."). */
int nl_kube_pb_to_json(const void *data, size_t len, json_t **out, nl_err_t **err);

/* Encodes obj (a known kind, by its apiVersion and kind) to enveloped protobuf;
 * returns 0 with *out malloc'ed (*len set), or -1 with *err naming the field
 * that cannot be encoded (an unknown field, a wrong type, a bad time): the
 * caller then sends JSON. */
int nl_kube_pb_from_json(const json_t *obj, uint8_t **out, size_t *len, nl_err_t **err);

/* The body of a response as JSON, whichever encoding the server chose (by its
 * Content-Type). Returns 0 with *out owned by the caller, or -1 with *err. */
int nl_kube_resp_json(const nl_kube_response_t *resp, json_t **out, nl_err_t **err);

/* True when pb.c encodes and decodes apiVersion/kind. */
bool nl_kube_pb_known(const char *api_version, const char *kind);

/* True when content_type (a --kube-api-content-type value) selects protobuf. */
bool nl_kube_pb_wanted(const char *content_type);

#endif
