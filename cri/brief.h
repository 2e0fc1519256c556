/* Internal to cri/: decoding the brief list answers (cri/brief.proto) without
 * protobuf-c. Only labels whose key starts with "io.kubernetes." are kept (the
 * first of each key, at most NL_CRI_BRIEF_MAX_LABELS); unknown fields are
 * checked for framing and dropped. */
#ifndef NL_CRI_BRIEF_H
#define NL_CRI_BRIEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cri/brief.pb-c.h"

#define NL_CRI_BRIEF_MAX_LABELS 8

/* A fingerprint of what the decoding of a brief list answer (desc: one of the
 * two) keeps: a keyed hash of each item's id, sandbox id, state, creation time
 * and labels, summed, so that the same items in another order (containerd
 * lists from Go maps) and the same labels in another order (containerd 1.6
 * writes them from a Go map) give the same value. What the decoding skips
 * (metadata, image, annotations) is not read. 0 when the bytes are not framed
 * as protobuf. */
uint64_t nl_cri_brief_fingerprint(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                  size_t len);

/* Whether desc is one of the two brief list answers. */
bool nl_cri_brief_is(const ProtobufCMessageDescriptor *desc);
/* protobuf_c_message_unpack's contract for those two: the message, allocated
 * from pa, or NULL when the bytes are not one (or an allocation failed; what
 * was allocated is not freed: pa is expected to be an arena). */
ProtobufCMessage *nl_cri_brief_unpack(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *pa,
                                      size_t len, const uint8_t *data);

#endif
