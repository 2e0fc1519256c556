#include "reactor/duration.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const struct {
  const char *name;
  int64_t ns;
} units[] = {
    {"ns", 1}, {"us", 1000}, {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000},
    {"ms", NL_NS_PER_MS}, {"s", NL_NS_PER_S}, {"m", 60 * NL_NS_PER_S},
    {"h", 3600 * NL_NS_PER_S},
};

int nl_duration_parse(const char *s, int64_t *out_ns, nl_err_t **err) {
  const char *orig = s;
  bool neg = false;
  if (!s) return nl_err_set(err, NL_EINVAL, "invalid duration \"\"");
  if (*s == '-' || *s == '+') neg = *s++ == '-';
  if (strcmp(s, "0") == 0) {
    *out_ns = 0;
    return 0;
  }
  if (!*s) return nl_err_set(err, NL_EINVAL, "invalid duration \"%s\"", orig);
  double total = 0;
  while (*s) {
    const char *start = s;
    double v = 0, scale = 1;
    bool digits = false;
    while (*s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0'), digits = true;
    if (*s == '.') {
      s++;
      while (*s >= '0' && *s <= '9') scale /= 10, v += (*s++ - '0') * scale, digits = true;
    }
    if (!digits) return nl_err_set(err, NL_EINVAL, "invalid duration \"%s\"", orig);
    const char *u = s;
    while (*s && !(*s >= '0' && *s <= '9') && *s != '.') s++;
    size_t ulen = (size_t)(s - u);
    if (ulen == 0)
      return nl_err_set(err, NL_EINVAL, "missing unit in duration \"%s\"", orig);
    int64_t mult = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (strlen(units[i].name) == ulen && memcmp(units[i].name, u, ulen) == 0) mult = units[i].ns;
    if (!mult)
      return nl_err_set(err, NL_EINVAL, "unknown unit \"%.*s\" in duration \"%s\"", (int)ulen, u,
                        orig);
    (void)start;
    total += v * (double)mult;
    if (total > 9.2e18)
      return nl_err_set(err, NL_EINVAL, "invalid duration \"%s\": out of range", orig);
  }
  *out_ns = (int64_t)(neg ? -total : total);
  return 0;
}

/* Appends v/10^prec with trailing zeros (and a bare '.') removed. */
static int fmt_frac(char *p, size_t len, int64_t v, int prec) {
  int64_t div = 1;
  for (int i = 0; i < prec; i++) div *= 10;
  int n = snprintf(p, len, "%lld", (long long)(v / div));
  int64_t frac = v % div;
  if (frac && (size_t)n < len) {
    char f[24];
    snprintf(f, sizeof f, "%0*lld", prec, (long long)frac);
    size_t fl = strlen(f);
    while (fl && f[fl - 1] == '0') f[--fl] = '\0';
    n += snprintf(p + n, len - (size_t)n, ".%s", f);
  }
  return n;
}

char *nl_duration_format(int64_t ns, char *buf, size_t len) {
  char *p = buf;
  uint64_t u = ns < 0 ? (uint64_t)(-(ns + 1)) + 1 : (uint64_t)ns;
  if (ns < 0 && len > 1) *p++ = '-', len--;
  if (u == 0) {
    snprintf(p, len, "0s");
  } else if (u < (uint64_t)NL_NS_PER_S) {
    if (u < 1000)
      snprintf(p, len, "%lluns", (unsigned long long)u);
    else if (u < (uint64_t)NL_NS_PER_MS)
      { int n = fmt_frac(p, len, (int64_t)u, 3); snprintf(p + n, len - (size_t)n, "\xc2\xb5s"); }
    else {
      int n = fmt_frac(p, len, (int64_t)u, 6);
      snprintf(p + n, len - (size_t)n, "ms");
    }
  } else {
    uint64_t h = u / (3600 * (uint64_t)NL_NS_PER_S);
    u -= h * 3600 * (uint64_t)NL_NS_PER_S;
    uint64_t m = u / (60 * (uint64_t)NL_NS_PER_S);
    u -= m * 60 * (uint64_t)NL_NS_PER_S;
    int n = 0;
    if (h) n += snprintf(p + n, len - (size_t)n, "%lluh", (unsigned long long)h);
    if (h || m) n += snprintf(p + n, len - (size_t)n, "%llum", (unsigned long long)m);
    n += fmt_frac(p + n, len - (size_t)n, (int64_t)u, 9);
    snprintf(p + n, len - (size_t)n, "s");
  }
  return buf;
}
