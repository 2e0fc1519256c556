/* resource.Quantity, following k8s.io/apimachinery/pkg/api/resource: parse into
 * (digits, suffix), take the exact int64 fast path when it fits, otherwise round
 * up to nano precision in 128-bit arithmetic (upstream uses inf.Dec there). */
#include "agent/model/quantity.h"

#include <stdio.h>
#include <string.h>

#define QERR "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

typedef __int128 i128;

static const struct {
  const char *s;
  int base;
  int exp;
} suffixes[] = {
    {"", 10, 0},    {"n", 10, -9},  {"u", 10, -6},  {"m", 10, -3},  {"k", 10, 3},
    {"M", 10, 6},   {"G", 10, 9},   {"T", 10, 12},  {"P", 10, 15},  {"E", 10, 18},
    {"Ki", 2, 10},  {"Mi", 2, 20},  {"Gi", 2, 30},  {"Ti", 2, 40},  {"Pi", 2, 50},
    {"Ei", 2, 60},
};

static bool interpret_suffix(const char *s, size_t len, int *base, int *exp,
                             nl_quantity_format_t *fmt) {
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    if (strlen(suffixes[i].s) == len && memcmp(suffixes[i].s, s, len) == 0) {
      *base = suffixes[i].base;
      *exp = suffixes[i].exp;
      *fmt = *base == 2 ? NL_QUANTITY_BINARY_SI : NL_QUANTITY_DECIMAL_SI;
      return true;
    }
  }
  /* e<int>, as strconv.ParseInt(s[1:], 10, 32) */
  if (len > 1 && (s[0] == 'e' || s[0] == 'E')) {
    size_t i = 1;
    bool neg = false;
    if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
    if (i == len) return false;
    int64_t v = 0;
    for (; i < len; i++) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
      if (v > (int64_t)INT32_MAX + 1) return false;
    }
    if (!neg && v > INT32_MAX) return false;
    *base = 10;
    *exp = (int)(neg ? -v : v);
    *fmt = NL_QUANTITY_DECIMAL_EXPONENT;
    return true;
  }
  return false;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

int nl_quantity_parse(const char *str, nl_quantity_t *q, nl_err_t **err) {
  size_t end = strlen(str), pos = 0;
  if (end == 0) return nl_err_set(err, NL_EINVAL, QERR);
  if (strcmp(str, "0") == 0) {
    *q = (nl_quantity_t){0, 0, NL_QUANTITY_DECIMAL_SI};
    return 0;
  }
  /* parseQuantityString */
  bool positive = true;
  if (str[0] == '-') positive = false, pos++;
  else if (str[0] == '+') pos++;
  while (pos < end && str[pos] == '0') pos++;
  size_t num = pos, num_len = 0, den = 0, den_len = 0, suf = end;
  if (pos < end) {
    while (pos < end && is_digit(str[pos])) pos++;
    num_len = pos - num;
    if (pos < end && str[pos] == '.') {
      den = ++pos;
      while (pos < end && is_digit(str[pos])) pos++;
      den_len = pos - den;
    }
    suf = pos;
    while (pos < end && strchr("eEinumkKMGTP", str[pos])) pos++;
    if (pos < end && (str[pos] == '-' || str[pos] == '+')) pos++;
    while (pos < end && is_digit(str[pos])) pos++;
    if (pos < end) return nl_err_set(err, NL_EINVAL, QERR);
  }
  int base, exp;
  nl_quantity_format_t fmt;
  if (!interpret_suffix(str + suf, end - suf, &base, &exp, &fmt))
    return nl_err_set(err, NL_EINVAL, "unable to parse quantity's suffix");
  /* Note: like upstream, "-", "." and "m" parse as zero (no digits is zero). */

  /* the fast path: an exact int64 amount at a scale >= nano */
  int precision = -1, scale = 0;
  int64_t mantissa = 1;
  if (fmt != NL_QUANTITY_BINARY_SI) {
    scale = exp;
    precision = 18 - (int)(num_len + den_len);
  } else if (den_len == 0) {
    mantissa = (int64_t)1 << exp;
    precision = 15 - (int)num_len - (int)((float)exp * 3 / 10) - 1;
  }
  if (precision >= 0) {
    scale -= (int)den_len;
    if (scale >= -9) {
      int64_t v = 0;
      for (size_t i = 0; i < num_len; i++) v = v * 10 + (str[num + i] - '0');
      for (size_t i = 0; i < den_len; i++) v = v * 10 + (str[den + i] - '0');
      i128 r = (i128)v * mantissa;
      if (r <= INT64_MAX) {
        *q = (nl_quantity_t){positive ? (int64_t)r : -(int64_t)r, scale, fmt};
        return 0;
      }
    }
  }

  /* the slow path: value * base^exp, rounded up to nano, in 128 bits */
  i128 v = 0;
  const i128 lim = ((i128)1 << 120);
  int vscale = 0; /* the amount is v * 10^vscale */
  for (size_t i = 0; i < num_len; i++) {
    if (v > lim / 10) return nl_err_set(err, NL_EINVAL, "quantity %s is too large", str);
    v = v * 10 + (str[num + i] - '0');
  }
  for (size_t i = 0; i < den_len; i++) {
    if (v > lim / 10) { /* further digits only matter for rounding up */
      bool nonzero = false;
      for (; i < den_len; i++) nonzero |= str[den + i] != '0';
      if (nonzero) v++;
      break;
    }
    v = v * 10 + (str[den + i] - '0');
    vscale--;
  }
  if (base == 10) {
    vscale += exp;
  } else {
    for (int i = 0; i < exp; i++) {
      if (v > lim / 2) { /* capped below anyway */
        v = INT64_MAX, vscale = 0;
        break;
      }
      v *= 2;
    }
  }
  /* round up (away from zero) to scale -9 */
  if (v != 0 && vscale < -9) {
    bool rem = false;
    while (vscale < -9) {
      rem |= v % 10 != 0;
      v /= 10;
      vscale++;
    }
    if (rem) v++;
  }
  /* bring to int64 by trading trailing zeros for scale */
  while (v != 0 && v % 10 == 0 && (v > INT64_MAX || vscale < 0)) v /= 10, vscale++;
  if (fmt == NL_QUANTITY_BINARY_SI) {
    /* upstream caps binary amounts at 2^63-1 and shows amounts in (0, 1) as DecimalSI */
    i128 whole = v;
    for (int s = vscale; s > 0 && whole <= INT64_MAX; s--) whole *= 10;
    if (whole > INT64_MAX) v = INT64_MAX, vscale = 0;
    if (v != 0 && vscale < 0) {
      i128 p = 1;
      for (int k = 0; k < -vscale; k++) p *= 10;
      if (v < p) fmt = NL_QUANTITY_DECIMAL_SI;
    }
  }
  if (v > INT64_MAX) return nl_err_set(err, NL_EINVAL, "quantity %s is too large", str);
  *q = (nl_quantity_t){positive ? (int64_t)v : -(int64_t)v, vscale, fmt};
  return 0;
}

/* value * 10^scale as a 128-bit integer at scale `to` (to <= scale), or false on
 * overflow. */
static bool at_scale(const nl_quantity_t *q, int32_t to, i128 *out) {
  i128 v = q->value;
  for (int32_t s = q->scale; s > to; s--) {
    if (v > ((i128)1 << 100) || v < -((i128)1 << 100)) return false;
    v *= 10;
  }
  *out = v;
  return true;
}

int nl_quantity_cmp(const nl_quantity_t *a, const nl_quantity_t *b) {
  int32_t s = a->scale < b->scale ? a->scale : b->scale;
  i128 x, y;
  bool ox = at_scale(a, s, &x), oy = at_scale(b, s, &y);
  if (!ox || !oy) { /* one is astronomically large; its sign decides */
    if (!ox && !oy) return (a->value > 0) - (b->value > 0);
    int sg = !ox ? nl_quantity_sign(a) : -nl_quantity_sign(b);
    return sg;
  }
  return x < y ? -1 : x > y;
}

bool nl_quantity_is_zero(const nl_quantity_t *q) { return q->value == 0; }

int64_t nl_quantity_scaled_value(const nl_quantity_t *q, int32_t scale) {
  i128 v = q->value;
  int32_t s = q->scale;
  while (s > scale) {
    v *= 10;
    s--;
    if (v > INT64_MAX) return INT64_MAX;
    if (v < INT64_MIN) return INT64_MIN;
  }
  bool rem = false;
  while (s < scale && v != 0) {
    rem |= v % 10 != 0;
    v /= 10;
    s++;
  }
  if (rem && q->value > 0) v++; /* ceil */
  return (int64_t)v;
}

int64_t nl_quantity_milli_value(const nl_quantity_t *q) { return nl_quantity_scaled_value(q, -3); }
int64_t nl_quantity_value(const nl_quantity_t *q) { return nl_quantity_scaled_value(q, 0); }

static const char *dec_suffix(int exp) {
  switch (exp) {
  case -9: return "n";
  case -6: return "u";
  case -3: return "m";
  case 0: return "";
  case 3: return "k";
  case 6: return "M";
  case 9: return "G";
  case 12: return "T";
  case 15: return "P";
  case 18: return "E";
  }
  return NULL;
}

char *nl_quantity_format(const nl_quantity_t *q, char out[NL_QUANTITY_STRLEN]) {
  if (q->value == 0) {
    strcpy(out, "0");
    return out;
  }
  nl_quantity_format_t fmt = q->format;
  i128 whole = 0;
  if (fmt == NL_QUANTITY_BINARY_SI) {
    i128 v;
    bool ok = q->scale >= -40 && at_scale(q, 0, &v);
    /* |q| < 1024, or not a whole number: DecimalSI, so nothing is lost */
    bool exact = ok;
    if (ok && q->scale < 0) {
      i128 p = 1;
      for (int32_t s = q->scale; s < 0; s++) p *= 10;
      exact = q->value % p == 0;
      v = q->value / p;
    }
    if (!exact || (v > -1024 && v < 1024)) fmt = NL_QUANTITY_DECIMAL_SI;
    else whole = v;
  }
  if (fmt == NL_QUANTITY_BINARY_SI) {
    int e = 0;
    bool neg = whole < 0;
    if (neg) whole = -whole;
    while (whole >= 1024 && whole % 1024 == 0 && e < 6) whole /= 1024, e++;
    static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    snprintf(out, NL_QUANTITY_STRLEN, "%s%lld%s", neg ? "-" : "", (long long)whole, bin[e]);
    return out;
  }
  /* AsCanonicalBytes: strip factors of ten, then make the exponent a multiple of 3 */
  i128 v = q->value;
  int64_t e = q->scale;
  bool neg = v < 0;
  if (neg) v = -v;
  while (v >= 10 && v % 10 == 0) v /= 10, e++;
  int r = (int)(((e % 3) + 3) % 3);
  for (int i = 0; i < r; i++) v *= 10, e--;
  const char *suf = fmt == NL_QUANTITY_DECIMAL_SI ? dec_suffix((int)e) : NULL;
  /* beyond E or below n a DecimalSI amount has no suffix: use the exponent form */
  char digits[48];
  int n = 0;
  do digits[n++] = (char)('0' + (int)(v % 10)), v /= 10; while (v);
  char *w = out;
  if (neg) *w++ = '-';
  while (n) *w++ = digits[--n];
  if (suf) snprintf(w, (size_t)(NL_QUANTITY_STRLEN - (w - out)), "%s", suf);
  else if (e == 0) *w = 0;
  else snprintf(w, (size_t)(NL_QUANTITY_STRLEN - (w - out)), "e%lld", (long long)e);
  return out;
}
