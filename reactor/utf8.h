/* Text from outside (tokens, header values, certificate names, names from the
 * runtime) on its way into JSON. jansson refuses a string that is not valid
 * UTF-8 (json_string() returns NULL, json_pack() fails, json_dumps() of what
 * contains it too), so every such string goes through here, and it is encoded
 * as Go's json.Marshal does: each byte that does not start a valid UTF-8
 * sequence becomes U+FFFD.
 *
 * Decoded text may hold U+0000 (a certificate CN "admin\0evil"), which a C
 * string cannot carry; it is kept as the two bytes C0 80 (the "modified UTF-8"
 * of Java's JNI, never valid UTF-8 itself), so that the whole string survives
 * strcmp and strdup and never equals the string cut at the NUL, and
 * nl_json_str() turns it back into U+0000. */
#ifndef NL_UTF8_H
#define NL_UTF8_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reactor/buf.h"

/* Appends the code point r as UTF-8: U+0000 as C0 80, a surrogate or a value
 * above U+10FFFF as U+FFFD (Go's utf8.AppendRune). */
void nl_utf8_append_rune(nl_buf_t *b, uint32_t r);

/* The length of the valid UTF-8 sequence at p (1 to 4, of at most n bytes),
 * or 0 when p[0] does not start one (Go's utf8.DecodeRune's RuneError). */
size_t nl_utf8_seq(const unsigned char *p, size_t n);

/* Whether the C string s is valid UTF-8 throughout: what a protobuf string
 * field must hold for Go's gRPC, which refuses a message that has another. */
bool nl_utf8_valid(const char *s);

/* len bytes as text (owned, NUL-terminated): valid sequences kept, each other
 * byte U+FFFD, NUL as C0 80. */
char *nl_utf8_from_bytes(const void *p, size_t len);

/* A JSON string of s: C0 80 as U+0000, each byte that is not valid UTF-8 as
 * U+FFFD. Never NULL (aborts on allocation failure, as nl_xmalloc). */
json_t *nl_json_str(const char *s);

/* The text of a JSON string (owned; U+0000 as C0 80, so that a name is never
 * cut at it), or "" when j is not a string. */
char *nl_json_text(const json_t *j);

/* json_dumps() that never returns NULL: with every string made by
 * nl_json_str() it fails only on allocation, and aborts then. Caller frees. */
char *nl_json_xdumps(const json_t *j, size_t flags);

#endif
