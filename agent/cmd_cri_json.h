/* Internal to `nanolet cri`: protobuf-c messages as JSON the way crictl prints
 * them (protojson with unpopulated fields emitted): lowerCamelCase field names,
 * 64-bit integers as strings, enums by name, bytes as base64, maps as objects,
 * unset sub-messages as null. Walks the descriptors, so every CRI message works
 * without per-message code. */
#ifndef NL_CMD_CRI_JSON_H
#define NL_CMD_CRI_JSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* Returns a new JSON object for msg (never NULL; NULL msg gives json null). */
json_t *nl_cmd_cri__to_json(const ProtobufCMessage *msg);

/* crictl's verbose layout: {"status": <status>, <key>: <value>...} with the
 * runtime's info map values parsed as JSON when they are JSON (kept as strings
 * otherwise), keys sorted. entries are protoc-c map entries ({base, key, value}).
 * Returns a new object. */
json_t *nl_cmd_cri__with_info(json_t *status, size_t n_info, void **info);

/* Prints v indented by two spaces and a newline on stdout, then releases it. */
void nl_cmd_cri__print_json(json_t *v);

#endif
