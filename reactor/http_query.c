#include "reactor/http_query.h"

#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static char *decode(const char *s, size_t len, bool plus_is_space) {
  char *out = nl_xmalloc(len + 1), *o = out;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '%') {
      if (i + 2 >= len) {
        free(out);
        return NULL;
      }
      int a = hex(s[i + 1]), b = hex(s[i + 2]);
      if (a < 0 || b < 0 || (a == 0 && b == 0)) {
        free(out);
        return NULL;
      }
      *o++ = (char)(a << 4 | b);
      i += 2;
    } else {
      *o++ = plus_is_space && s[i] == '+' ? ' ' : s[i];
    }
  }
  *o = 0;
  return out;
}

char *nl_http_unescape(const char *s, size_t len) { return decode(s, len, false); }

char *nl_http_query_get(const char *query, const char *name, bool *bad) {
  size_t nlen = strlen(name);
  for (const char *p = query; p && *p;) {
    const char *end = strpbrk(p, "&;");
    size_t plen = end ? (size_t)(end - p) : strlen(p);
    const char *eq = memchr(p, '=', plen);
    size_t klen = eq ? (size_t)(eq - p) : plen;
    char *key = decode(p, klen, true);
    bool match = key && strlen(key) == nlen && memcmp(key, name, nlen) == 0;
    free(key);
    if (match) {
      char *v = eq ? decode(eq + 1, plen - klen - 1, true) : nl_xstrdup("");
      if (!v && bad) *bad = true;
      return v;
    }
    p = end ? end + 1 : NULL;
  }
  return NULL;
}

void nl_http_query_each(const char *query, nl_http_query_fn fn, void *ctx) {
  for (const char *p = query; p && *p;) {
    const char *end = strpbrk(p, "&;");
    size_t plen = end ? (size_t)(end - p) : strlen(p);
    const char *eq = memchr(p, '=', plen);
    size_t klen = eq ? (size_t)(eq - p) : plen;
    char *key = decode(p, klen, true);
    char *v = eq ? decode(eq + 1, plen - klen - 1, true) : nl_xstrdup("");
    if (key && v && *key) fn(ctx, key, v);
    free(key);
    free(v);
    p = end ? end + 1 : NULL;
  }
}
