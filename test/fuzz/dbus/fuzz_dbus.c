/* libFuzzer target over what the logind client reads from the system bus
 * (docs/FUZZING.md, "D-Bus messages"): the input is a byte stream of messages,
 * parsed one after another as the client does; each body is read as every
 * reply and signal the client expects (a bool, a uint32, strings, a variant
 * holding a uint64). Parsed strings must lie in the input and be terminated;
 * a message's length must not exceed what was given. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "managers/dbus.h"

static void inside(const uint8_t *data, size_t size, const char *s) {
  if (!s || !*s) return; /* "" may be the parser's own (no signature) */
  assert((const uint8_t *)s >= data && (const uint8_t *)s < data + size);
  assert(memchr(s, 0, size - (size_t)((const uint8_t *)s - data)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t off = 0;
  while (off < size) {
    nl_dbus_msg_t m;
    ssize_t n = nl_dbus_parse(data + off, size - off, &m);
    if (n <= 0) break;
    assert((size_t)n <= size - off);
    const char *fields[] = {m.path, m.interface, m.member, m.error_name, m.sender, m.destination,
                            m.signature};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) inside(data, size, fields[i]);
    assert(m.body + m.body_len <= data + off + (size_t)n);
    nl_dbus_reader_t r = {&m, 0};
    bool b;
    uint32_t u;
    uint64_t v;
    const char *s;
    (void)nl_dbus_read_bool(&r, &b);
    r.off = 0;
    (void)nl_dbus_read_u32(&r, &u);
    r.off = 0;
    (void)nl_dbus_read_variant_u64(&r, &v);
    r.off = 0;
    while (nl_dbus_read_str(&r, &s) == 0) inside(data, size, s);
    off += (size_t)n;
  }
  return 0;
}
