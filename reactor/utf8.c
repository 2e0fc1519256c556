#include "reactor/utf8.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

void nl_utf8_append_rune(nl_buf_t *b, uint32_t r) {
  unsigned char s[4];
  size_t n;
  if (r == 0) {
    nl_buf_append(b, "\xc0\x80", 2);
    return;
  }
  if (r > 0x10ffff || (r >= 0xd800 && r <= 0xdfff)) r = 0xfffd;
  if (r < 0x80) {
    s[0] = (unsigned char)r;
    n = 1;
  } else if (r < 0x800) {
    s[0] = (unsigned char)(0xc0 | r >> 6);
    s[1] = (unsigned char)(0x80 | (r & 0x3f));
    n = 2;
  } else if (r < 0x10000) {
    s[0] = (unsigned char)(0xe0 | r >> 12);
    s[1] = (unsigned char)(0x80 | ((r >> 6) & 0x3f));
    s[2] = (unsigned char)(0x80 | (r & 0x3f));
    n = 3;
  } else {
    s[0] = (unsigned char)(0xf0 | r >> 18);
    s[1] = (unsigned char)(0x80 | ((r >> 12) & 0x3f));
    s[2] = (unsigned char)(0x80 | ((r >> 6) & 0x3f));
    s[3] = (unsigned char)(0x80 | (r & 0x3f));
    n = 4;
  }
  nl_buf_append(b, s, n);
}

static bool cont(unsigned char c) { return c >= 0x80 && c <= 0xbf; }

/* RFC 3629's table (Go's utf8.first and acceptRanges): no overlong forms, no
 * surrogates, nothing above U+10FFFF. */
size_t nl_utf8_seq(const unsigned char *p, size_t n) {
  if (n == 0) return 0;
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return n >= 2 && cont(p[1]) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (n < 3 || !cont(p[2])) return 0;
    unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return p[1] >= lo && p[1] <= hi ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (n < 4 || !cont(p[2]) || !cont(p[3])) return 0;
    unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return p[1] >= lo && p[1] <= hi ? 4 : 0;
  }
  return 0;
}

bool nl_utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s);
  for (size_t i = 0, k; i < n; i += k)
    if (!(k = nl_utf8_seq(p + i, n - i))) return false;
  return true;
}

char *nl_utf8_from_bytes(const void *p, size_t len) {
  const unsigned char *s = p;
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_reserve(&b, len + 1);
  b.data[0] = 0; /* an empty value is "" */
  for (size_t i = 0; i < len;) {
    size_t k = nl_utf8_seq(s + i, len - i);
    if (k == 1 && s[i] == 0) nl_buf_append(&b, "\xc0\x80", 2);
    else if (k) nl_buf_append(&b, s + i, k);
    else nl_buf_append(&b, replacement, 3);
    i += k ? k : 1;
  }
  return nl_buf_steal(&b);
}

json_t *nl_json_str(const char *s) {
  nl_buf_t b = NL_BUF_INIT;
  size_t len = strlen(s);
  nl_buf_reserve(&b, len + 1);
  b.data[0] = 0; /* an empty value is "" */
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    size_t k = nl_utf8_seq(u + i, len - i);
    if (k) {
      nl_buf_append(&b, u + i, k);
      i += k;
    } else if (u[i] == 0xc0 && i + 1 < len && u[i + 1] == 0x80) {
      nl_buf_append(&b, "", 1);
      i += 2;
    } else {
      nl_buf_append(&b, replacement, 3);
      i++;
    }
  }
  json_t *j = json_stringn(b.data ? b.data : "", b.len);
  nl_buf_free(&b);
  if (!j) abort();
  return j;
}

char *nl_json_text(const json_t *j) {
  if (!json_is_string(j)) return nl_xstrdup("");
  return nl_utf8_from_bytes(json_string_value(j), json_string_length(j));
}

char *nl_json_xdumps(const json_t *j, size_t flags) {
  char *s = json_dumps(j, flags);
  if (!s) abort();
  return s;
}
