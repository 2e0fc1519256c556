/* Resource quantities ("100m", "1.5", "64Mi", "1G", "1e3"), parsed like upstream's
 * k8s.io/apimachinery resource.ParseQuantity and printed in its canonical form.
 *
 * A quantity is value * 10^scale plus the format it was written in. Upstream falls
 * back to arbitrary precision for values that do not fit an int64 at nano scale;
 * nanolet rejects those (they are far beyond anything a node has). */
#ifndef NL_QUANTITY_H
#define NL_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reactor/error.h"

typedef enum nl_quantity_format {
  NL_QUANTITY_DECIMAL_SI = 0,  /* "", m, k, M, G, ... */
  NL_QUANTITY_BINARY_SI,       /* Ki, Mi, Gi, ... */
  NL_QUANTITY_DECIMAL_EXPONENT /* 1e3, 2E-6 */
} nl_quantity_format_t;

typedef struct nl_quantity {
  int64_t value; /* the amount is value * 10^scale, exactly */
  int32_t scale;
  nl_quantity_format_t format;
} nl_quantity_t;

/* Longest canonical string nl_quantity_format() writes, with its NUL. */
#define NL_QUANTITY_STRLEN 32

/* Parses str. Returns 0, or -1 with *err (NL_EINVAL, message
 * `quantities must match the regular expression ...` or `... too large`) and *q
 * untouched. Values with more than nano precision round up (away from zero),
 * as upstream. */
int nl_quantity_parse(const char *str, nl_quantity_t *q, nl_err_t **err);

/* The canonical form ("1500m" for "1.5", "1536Mi" for "1.5Gi") into out, which
 * holds NL_QUANTITY_STRLEN bytes. Returns out. */
char *nl_quantity_format(const nl_quantity_t *q, char out[NL_QUANTITY_STRLEN]);

/* ceil(q * 1000) and ceil(q), saturated at INT64_MIN/INT64_MAX, as upstream's
 * MilliValue() and Value(). */
int64_t nl_quantity_milli_value(const nl_quantity_t *q);
int64_t nl_quantity_value(const nl_quantity_t *q);
/* ceil(q / 10^scale) for any scale (-9 gives nanos), saturated. */
int64_t nl_quantity_scaled_value(const nl_quantity_t *q, int32_t scale);

/* -1, 0, 1 as a <, =, > b (numerically; formats are ignored). */
int nl_quantity_cmp(const nl_quantity_t *a, const nl_quantity_t *b);
bool nl_quantity_is_zero(const nl_quantity_t *q);
static inline int nl_quantity_sign(const nl_quantity_t *q) {
  return q->value > 0 ? 1 : q->value < 0 ? -1 : 0;
}

#endif
