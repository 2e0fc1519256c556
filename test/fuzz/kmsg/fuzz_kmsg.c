/* libFuzzer target over what the OOM watcher reads from /dev/kmsg
 * (docs/FUZZING.md, "Kernel messages"): the input is a run of records separated
 * by NUL bytes, each parsed as one read of /dev/kmsg and, when it parses, fed to
 * the OOM state machine. A record's message must lie inside the record, and a
 * completed OOM's strings must be terminated within their arrays. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "managers/oom.h"

static void check_str(const char *s, size_t cap) { assert(memchr(s, 0, cap)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nl_oom_parser_t p = {0};
  const char *s = (const char *)data, *end = s + size;
  while (s < end) {
    const char *nul = memchr(s, 0, (size_t)(end - s));
    size_t len = (size_t)((nul ? nul : end) - s);
    nl_kmsg_record_t r;
    nl_oom_instance_t o;
    if (nl_kmsg_parse(s, len, &r) == 0) {
      assert(r.message >= s && r.message + r.message_len <= s + len);
      if (nl_oom_parser_feed(&p, r.message, r.message_len, r.usec, &o)) {
        check_str(o.process_name, sizeof o.process_name);
        check_str(o.container_name, sizeof o.container_name);
        check_str(o.victim_container, sizeof o.victim_container);
        check_str(o.constraint, sizeof o.constraint);
        assert(o.pid >= 0);
      }
    }
    s += len + 1;
  }
  return 0;
}
