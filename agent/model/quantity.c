/* resource.Quantity, following k8s.io/apimachinery/pkg/api/resource: parse into
 * (digits, suffix), take the exact int64 fast path when it fits, otherwise round
 * up to nano precision in 128-bit arithmetic (upstream uses inf.Dec there). */
#include "agent/model/quantity.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define QERR "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

/* An unsigned 128-bit magnitude in two halves: 32-bit ARM has no __int128, and
 * only the slow paths (huge or over-precise amounts) need more than 64 bits. */
typedef struct {
  uint64_t hi, lo;
} u128_t;

#define U128(lo) ((u128_t){0, (lo)})

static int u128_cmp(u128_t a, u128_t b) {
  if (a.hi != b.hi) return a.hi < b.hi ? -1 : 1;
  return (a.lo > b.lo) - (a.lo < b.lo);
}

/* a * m + add; callers keep the result below 2^128. */
static u128_t u128_muladd(u128_t a, uint32_t m, uint32_t add) {
  uint64_t l0 = (a.lo & 0xffffffff) * m + add;
  uint64_t l1 = (a.lo >> 32) * m + (l0 >> 32);
  return (u128_t){a.hi * m + (l1 >> 32), l1 << 32 | (l0 & 0xffffffff)};
}

/* a / d, the remainder in *rem: long division in 32-bit digits. */
static u128_t u128_divmod(u128_t a, uint32_t d, uint32_t *rem) {
  uint64_t c1 = (a.hi % d) << 32 | a.lo >> 32;
  uint64_t c0 = (c1 % d) << 32 | (a.lo & 0xffffffff);
  *rem = (uint32_t)(c0 % d);
  return (u128_t){a.hi / d, (c1 / d) << 32 | c0 / d};
}

static bool u128_is_zero(u128_t a) { return (a.hi | a.lo) == 0; }

static uint64_t magnitude(int64_t v) { return v < 0 ? 0 - (uint64_t)v : (uint64_t)v; }

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
      int64_t r;
      if (!__builtin_mul_overflow(v, mantissa, &r)) {
        *q = (nl_quantity_t){positive ? (int64_t)r : -(int64_t)r, scale, fmt};
        return 0;
      }
    }
  }

  /* the slow path: value * base^exp, rounded up to nano, in 128 bits */
  const u128_t lim10 = {0x19999999999999, 0x9999999999999999}; /* 2^120 / 10 */
  const u128_t lim2 = {(uint64_t)1 << 55, 0};                   /* 2^120 / 2 */
  const u128_t max = U128(INT64_MAX);
  u128_t v = U128(0);
  int vscale = 0; /* the amount is v * 10^vscale */
  uint32_t rem;
  for (size_t i = 0; i < num_len; i++) {
    if (u128_cmp(v, lim10) > 0) return nl_err_set(err, NL_EINVAL, "quantity %s is too large", str);
    v = u128_muladd(v, 10, (uint32_t)(str[num + i] - '0'));
  }
  for (size_t i = 0; i < den_len; i++) {
    if (u128_cmp(v, lim10) > 0) { /* further digits only matter for rounding up */
      bool nonzero = false;
      for (; i < den_len; i++) nonzero |= str[den + i] != '0';
      if (nonzero) v = u128_muladd(v, 1, 1);
      break;
    }
    v = u128_muladd(v, 10, (uint32_t)(str[den + i] - '0'));
    vscale--;
  }
  if (base == 10) {
    vscale += exp;
  } else {
    for (int i = 0; i < exp; i++) {
      if (u128_cmp(v, lim2) > 0) { /* capped below anyway */
        v = max, vscale = 0;
        break;
      }
      v = u128_muladd(v, 2, 0);
    }
  }
  /* round up (away from zero) to scale -9 */
  if (!u128_is_zero(v) && vscale < -9) {
    bool inexact = false;
    while (vscale < -9 && !u128_is_zero(v)) { /* vscale can be INT32_MIN */
      v = u128_divmod(v, 10, &rem);
      inexact |= rem != 0;
      vscale++;
    }
    vscale = -9;
    if (inexact) v = u128_muladd(v, 1, 1);
  }
  /* bring to int64 by trading trailing zeros for scale */
  while (!u128_is_zero(v) && (u128_cmp(v, max) > 0 || vscale < 0)) {
    u128_t tenth = u128_divmod(v, 10, &rem);
    if (rem != 0) break;
    v = tenth, vscale++;
  }
  if (fmt == NL_QUANTITY_BINARY_SI) {
    /* upstream caps binary amounts at 2^63-1 and shows amounts in (0, 1) as DecimalSI */
    u128_t whole = v;
    for (int s = vscale; s > 0 && u128_cmp(whole, max) <= 0; s--) whole = u128_muladd(whole, 10, 0);
    if (u128_cmp(whole, max) > 0) v = max, vscale = 0;
    if (!u128_is_zero(v) && vscale < 0) { /* vscale >= -9 after the rounding */
      uint64_t p = 1;
      for (int k = 0; k < -vscale; k++) p *= 10;
      if (u128_cmp(v, U128(p)) < 0) fmt = NL_QUANTITY_DECIMAL_SI;
    }
  }
  if (u128_cmp(v, max) > 0) return nl_err_set(err, NL_EINVAL, "quantity %s is too large", str);
  *q = (nl_quantity_t){positive ? (int64_t)v.lo : -(int64_t)v.lo, vscale, fmt};
  return 0;
}

/* |value| * 10^(scale - to) (to <= scale), or false past 2^100. */
static bool magnitude_at(const nl_quantity_t *q, int32_t to, u128_t *out) {
  const u128_t bound = {(uint64_t)1 << 36, 0}; /* 2^100 */
  u128_t v = U128(magnitude(q->value));
  for (int32_t s = q->scale; s > to; s--) {
    if (u128_cmp(v, bound) > 0) return false;
    v = u128_muladd(v, 10, 0);
  }
  *out = v;
  return true;
}

int nl_quantity_cmp(const nl_quantity_t *a, const nl_quantity_t *b) {
  int sa = nl_quantity_sign(a), sb = nl_quantity_sign(b);
  if (sa != sb || sa == 0) return (sa > sb) - (sa < sb);
  int32_t s = a->scale < b->scale ? a->scale : b->scale;
  u128_t x, y;
  bool ox = magnitude_at(a, s, &x), oy = magnitude_at(b, s, &y);
  /* past 2^100 an amount is astronomically larger than one that is not */
  int c = ox && oy ? u128_cmp(x, y) : (int)oy - (int)ox;
  return sa * c;
}

bool nl_quantity_is_zero(const nl_quantity_t *q) { return q->value == 0; }

int64_t nl_quantity_scaled_value(const nl_quantity_t *q, int32_t scale) {
  int64_t v = q->value;
  int32_t s = q->scale;
  for (; s > scale && v != 0; s--) /* a zero can carry any int32 scale */
    if (__builtin_mul_overflow(v, 10, &v)) return q->value > 0 ? INT64_MAX : INT64_MIN;
  bool rem = false;
  while (s < scale && v != 0) {
    rem |= v % 10 != 0;
    v /= 10;
    s++;
  }
  if (rem && q->value > 0) v++; /* ceil */
  return v;
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
  int64_t whole = 0;
  if (fmt == NL_QUANTITY_BINARY_SI) {
    /* |q| < 1024, or not a whole number in int64: DecimalSI, so nothing is lost */
    int64_t v = q->value;
    bool exact = q->scale >= -18; /* else 10^-scale > |value| */
    for (int32_t s = q->scale; s > 0 && exact; s--) exact = !__builtin_mul_overflow(v, 10, &v);
    if (exact && q->scale < 0) {
      int64_t p = 1;
      for (int32_t s = q->scale; s < 0; s++) p *= 10;
      exact = v % p == 0;
      v /= p;
    }
    if (!exact || (v > -1024 && v < 1024)) fmt = NL_QUANTITY_DECIMAL_SI;
    else whole = v;
  }
  if (fmt == NL_QUANTITY_BINARY_SI) {
    int e = 0;
    uint64_t m = magnitude(whole);
    while (m >= 1024 && m % 1024 == 0 && e < 6) m /= 1024, e++;
    static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    snprintf(out, NL_QUANTITY_STRLEN, "%s%" PRIu64 "%s", whole < 0 ? "-" : "", m, bin[e]);
    return out;
  }
  /* AsCanonicalBytes: strip factors of ten, then make the exponent a multiple of 3
   * with trailing zeros */
  uint64_t v = magnitude(q->value);
  int64_t e = q->scale;
  while (v >= 10 && v % 10 == 0) v /= 10, e++;
  int zeros = (int)(((e % 3) + 3) % 3);
  e -= zeros;
  const char *suf = fmt == NL_QUANTITY_DECIMAL_SI ? dec_suffix((int)e) : NULL;
  /* beyond E or below n a DecimalSI amount has no suffix: use the exponent form */
  char digits[24];
  int n = 0;
  do digits[n++] = (char)('0' + (int)(v % 10)), v /= 10; while (v);
  char *w = out;
  if (q->value < 0) *w++ = '-';
  while (n) *w++ = digits[--n];
  while (zeros--) *w++ = '0';
  if (suf) snprintf(w, (size_t)(NL_QUANTITY_STRLEN - (w - out)), "%s", suf);
  else if (e == 0) *w = 0;
  else snprintf(w, (size_t)(NL_QUANTITY_STRLEN - (w - out)), "e%" PRId64, e);
  return out;
}
