/* The little of the D-Bus wire format (the specification's "Message Protocol")
 * that the logind client needs, without I/O: encoding a message with the
 * standard header fields and a body of basic types, and parsing one received
 * message (either byte order) with readers for its body.
 *
 * Ownership: nl_dbus_msg_t points into the caller's buffer; its strings are
 * valid (and NUL-terminated) while that buffer is. */
#ifndef NL_MANAGERS_DBUS_H
#define NL_MANAGERS_DBUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "reactor/buf.h"

typedef enum nl_dbus_type {
  NL_DBUS_METHOD_CALL = 1,
  NL_DBUS_METHOD_RETURN = 2,
  NL_DBUS_ERROR = 3,
  NL_DBUS_SIGNAL = 4,
} nl_dbus_type_t;

/* Messages longer than this are refused (the client's are a few hundred bytes). */
#define NL_DBUS_MAX_MESSAGE 65536

/* The header of a message to send; NULL strings and zero numbers are left out. */
typedef struct nl_dbus_hdr {
  nl_dbus_type_t type;
  uint32_t serial, reply_serial, unix_fds;
  const char *path, *interface, *member, *error_name, *destination, *sender;
  const char *signature; /* of the body */
} nl_dbus_hdr_t;

/* Body items, appended in order; the body starts 8-aligned, so alignment
 * within it is alignment within the message. */
void nl_dbus_put_u32(nl_buf_t *body, uint32_t v);
void nl_dbus_put_bool(nl_buf_t *body, bool v);
void nl_dbus_put_str(nl_buf_t *body, const char *s); /* also an object path */
/* A variant holding a uint64 ("t"). */
void nl_dbus_put_variant_u64(nl_buf_t *body, uint64_t v);

/* Appends the little-endian message to out. */
void nl_dbus_encode(const nl_dbus_hdr_t *h, const nl_buf_t *body, nl_buf_t *out);

typedef struct nl_dbus_msg {
  nl_dbus_type_t type;
  bool big_endian;
  uint32_t serial, reply_serial, unix_fds;
  const char *path, *interface, *member, *error_name, *sender, *destination;
  const char *signature; /* "" when the body is empty */
  const uint8_t *body;
  size_t body_len;
} nl_dbus_msg_t;

/* Parses the message at the start of buf. Returns its length when whole, 0
 * when more bytes are needed, -1 when it is malformed or too long. */
ssize_t nl_dbus_parse(const uint8_t *buf, size_t len, nl_dbus_msg_t *m);

/* Reads a message's body item by item; each returns 0, or -1 past the end or
 * on a bad item. */
typedef struct nl_dbus_reader {
  const nl_dbus_msg_t *m;
  size_t off;
} nl_dbus_reader_t;
int nl_dbus_read_u32(nl_dbus_reader_t *r, uint32_t *v);
int nl_dbus_read_bool(nl_dbus_reader_t *r, bool *v);
int nl_dbus_read_str(nl_dbus_reader_t *r, const char **s);
int nl_dbus_read_variant_u64(nl_dbus_reader_t *r, uint64_t *v);

#endif
