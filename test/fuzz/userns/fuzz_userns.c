/* libFuzzer target over the user namespaces' parsers (managers/userns.c):
 * getsubids' output (a tool's, which a remote subid source may answer) and the
 * pod directory's userns file (read back at start). Byte 0 picks the parser
 * (even: getsubids, odd: the file); a file that parses is recorded in a small
 * allocator, whose slot must then be the one it holds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "managers/userns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *in = (const char *)data + 1;
  size_t n = size - 1;
  nl_err_t *err = NULL;
  uint32_t a = 0, b = 0;
  if (data[0] % 2 == 0) {
    int rc = nl_userns_parse_getsubids(in, n, &a, &b, &err);
    if ((rc < 0) != (err != NULL)) abort();
    nl_err_free(&err);
    return 0;
  }
  int rc = nl_userns_file_parse(in, n, &a, &b, &err);
  if ((rc < 0) != (err != NULL)) abort();
  if (rc == 0) {
    nl_userns_t m;
    if (nl_userns_init(&m, 65536, 8 * 65536, 65536, 8, &err) < 0) abort();
    if (nl_userns_record(&m, "pod", a, b, &err) == 0) {
      uint32_t h;
      if (!nl_userns_get(&m, "pod", &h) || h != a || b != 65536) abort();
      /* the file this agent would write for it parses to the same */
      char *s = nl_userns_file_format(a, b);
      uint32_t a2, b2;
      if (nl_userns_file_parse(s, strlen(s), &a2, &b2, &err) < 0 || a2 != a || b2 != b) abort();
      free(s);
    }
    nl_err_free(&err);
    nl_userns_free(&m);
  }
  nl_err_free(&err);
  return 0;
}
