/* The watch stream decoder: a protocol engine (bytes in, events out, no I/O).
 * The apiserver sends one JSON object per line,
 *   {"type":"ADDED","object":{...}}\n
 * in whatever pieces the transport hands over. Each event reaches the callback
 * with its type, the object's JSON text (in place: no copy when the event lies
 * within one fed piece), the object's metadata.resourceVersion and, for ERROR,
 * the embedded Status.
 *
 * A protobuf stream (application/vnd.kubernetes.protobuf;stream=watch, after
 * nl_kube_watch_decoder_protobuf()) is framed instead: a 4-byte big-endian
 * length, then a metav1.WatchEvent whose object.raw is the enveloped object
 * (agent/kube/pb.h). The object, of a kind pb.c knows, reaches the callback as
 * the same JSON text the JSON stream would give (field names and values as the
 * apiserver writes them), so callers do not see the difference.
 *
 * Malformed input, an unknown type or an event larger than the bound ends the
 * stream with an error (the reflector re-watches); the decoder then refuses more
 * input. Nothing here asserts on input. */
#ifndef NL_KUBE_WATCH_DECODE_H
#define NL_KUBE_WATCH_DECODE_H

#include <stdbool.h>
#include <stddef.h>

#include "agent/kube/status.h"
#include "reactor/buf.h"
#include "reactor/error.h"

/* client-go's streaming decoder refuses objects over 16 MiB. */
#define NL_KUBE_WATCH_MAX_EVENT (16u << 20)

typedef enum nl_kube_watch_type {
  NL_KUBE_WATCH_ADDED,
  NL_KUBE_WATCH_MODIFIED,
  NL_KUBE_WATCH_DELETED,
  NL_KUBE_WATCH_BOOKMARK,
  NL_KUBE_WATCH_ERROR,
} nl_kube_watch_type_t;

/* Everything points into the decoder or the fed bytes: valid during the callback only. */
typedef struct nl_kube_watch_event {
  nl_kube_watch_type_t type;
  const char *object;           /* the object's JSON text, not NUL-terminated */
  size_t object_len;
  const char *resource_version; /* object.metadata.resourceVersion; "" when absent */
  /* ERROR only, from the Status object (410 "Expired"/"Gone": the caller re-lists) */
  int code;                /* Status.code; 0 when absent */
  nl_kube_reason_t reason; /* the reason sent, else the one code implies */
  const char *message;     /* "" when absent */
} nl_kube_watch_event_t;

/* Returns 0 to go on; anything else stops: feed() returns 1 at once and the rest
 * of the fed bytes is dropped (the caller is ending the stream). */
typedef int (*nl_kube_watch_event_fn)(void *ctx, const nl_kube_watch_event_t *ev);

typedef struct nl_kube_watch_decoder {
  nl_buf_t partial; /* an event whose newline has not arrived yet */
  size_t max_event;
  nl_kube_watch_event_fn cb;
  void *ctx;
  bool failed;
  bool protobuf;  /* length-prefixed protobuf frames, not JSON lines */
  size_t frame;   /* protobuf: the length of the frame in partial, once its 4 bytes are in */
} nl_kube_watch_decoder_t;

/* max_event: the largest event line in bytes (0: NL_KUBE_WATCH_MAX_EVENT). */
void nl_kube_watch_decoder_init(nl_kube_watch_decoder_t *d, size_t max_event,
                                nl_kube_watch_event_fn cb, void *ctx);
/* The stream is protobuf (its Content-Type said so): call before the first feed. */
void nl_kube_watch_decoder_protobuf(nl_kube_watch_decoder_t *d);
/* True when content_type is a protobuf watch stream's. */
bool nl_kube_watch_is_protobuf(const char *content_type);
/* Decodes every complete event in data, in order. Returns 0 when all of data is
 * taken, 1 when the callback asked to stop, or -1 with *err:
 *   "malformed watch event: line 1: JSON: expected ',' or '}'"
 *   "watch event of type \"FOO\" is not supported"
 *   "watch event larger than 16777216 bytes"
 *   "malformed watch event: protobuf: the frame (WatchEvent) does not decode"
 *   "malformed watch event: MODIFIED: protobuf: v1 Pod: kind not known"
 * After -1 every further call fails. */
int nl_kube_watch_decoder_feed(nl_kube_watch_decoder_t *d, const char *data, size_t len,
                               nl_err_t **err);
/* The stream ended: -1 with *err when it stopped inside an event (a torn stream). */
int nl_kube_watch_decoder_finish(nl_kube_watch_decoder_t *d, nl_err_t **err);
void nl_kube_watch_decoder_free(nl_kube_watch_decoder_t *d);

#endif
