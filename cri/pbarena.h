/* Internal to cri/: unpacks a response message into one arena. protobuf-c
 * allocates every string, repeated array and sub-message of a message on its
 * own (5 allocations for a VersionResponse) and frees them one by one by
 * walking the message; here the pieces are carved from a chunk sized from the
 * wire length, and the whole message goes with one free. */
#ifndef NL_CRI_PBARENA_H
#define NL_CRI_PBARENA_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "cri/grpc.h"

typedef struct nl_pb_arena nl_pb_arena_t;

/* Unpacks data (len bytes) as a desc message. The chunks come from mem (NULL:
 * malloc). Returns the message and sets *arena to its owner; returns NULL with
 * nothing left allocated when the bytes are not such a message or an
 * allocation failed. The message stays valid until nl_pb_arena_free(*arena);
 * never pass it to protobuf_c_message_free_unpacked. */
ProtobufCMessage *nl_pb_arena_unpack(const ProtobufCMessageDescriptor *desc, nl_grpc_mem_t *mem,
                                     const uint8_t *data, size_t len, nl_pb_arena_t **arena);

/* Frees the arena and the message in it. NULL is a no-op. */
void nl_pb_arena_free(nl_pb_arena_t *a);

#endif
