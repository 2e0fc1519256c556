/* A small Prometheus metrics registry: counters, gauges and histograms with
 * label sets, encoded in the text exposition format 0.0.4 as client_golang
 * writes it (families sorted by name, HELP and TYPE lines, Go's shortest float
 * formatting, cumulative histogram buckets with le="+Inf", _sum and _count).
 *
 * Hot paths pay no allocation: a caller looks a series up once
 * (nl_metric_series), keeps the pointer, and then only adds to a double. A
 * series lives until nl_metric_remove() or nl_metrics_free(); whoever caches a
 * pointer must drop it before removing the series.
 *
 * A family with labels and no series prints nothing (client_golang's vectors
 * do the same); a family without labels always prints its one series. */
#ifndef NL_METRICS_H
#define NL_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "reactor/buf.h"
#include "reactor/map.h"

typedef enum nl_metric_kind {
  NL_METRIC_COUNTER,
  NL_METRIC_GAUGE,
  NL_METRIC_HISTOGRAM,
} nl_metric_kind_t;

#define NL_METRIC_MAX_LABELS 8

/* One series. Fields are private; use the functions below. */
typedef struct nl_metric {
  struct nl_metric *next; /* in its family, in creation order */
  struct nl_metric_family *family;
  double value;     /* counter and gauge */
  double sum;       /* histogram */
  uint64_t count;   /* histogram */
  uint64_t *counts; /* histogram: per bucket, not cumulative */
  char *values[NL_METRIC_MAX_LABELS];
} nl_metric_t;

typedef struct nl_metric_family {
  char *name, *help;
  nl_metric_kind_t kind;
  size_t nlabels;
  char *labels[NL_METRIC_MAX_LABELS];
  double *buckets; /* upper bounds, ascending, without +Inf */
  char **le;       /* the bounds as the le label prints them */
  size_t nbuckets;
  nl_metric_t *first, *last;
  nl_map_t index; /* label values joined by '\x1f' -> series */
} nl_metric_family_t;

typedef void (*nl_metrics_collect_fn)(void *ctx);

typedef struct nl_metrics {
  nl_metric_family_t **families;
  size_t nfamilies, cap;
  /* Runs before each encoding, to refresh gauges computed on demand. */
  nl_metrics_collect_fn collect;
  void *collect_ctx;
} nl_metrics_t;

void nl_metrics_init(nl_metrics_t *r);
void nl_metrics_free(nl_metrics_t *r);

/* Registers a family. labels is NULL or a NULL-terminated list of label names
 * (at most NL_METRIC_MAX_LABELS). Names are the caller's to get right (program
 * constants); registering a name twice is a programming error (asserted).
 * help is written as given; upstream's component-base prefixes "[ALPHA] " and
 * callers that mirror upstream pass that prefix themselves. */
nl_metric_family_t *nl_metrics_counter(nl_metrics_t *r, const char *name, const char *help,
                                       const char *const *labels);
nl_metric_family_t *nl_metrics_gauge(nl_metrics_t *r, const char *name, const char *help,
                                     const char *const *labels);
/* buckets: n ascending upper bounds (copied). */
nl_metric_family_t *nl_metrics_histogram(nl_metrics_t *r, const char *name, const char *help,
                                         const char *const *labels, const double *buckets,
                                         size_t n);

/* Prometheus's DefBuckets and ExponentialBuckets(start, factor, n). out holds n. */
extern const double nl_metrics_def_buckets[11];
void nl_metrics_exponential_buckets(double *out, double start, double factor, size_t n);

/* The series with these label values (as many as the family has labels; NULL
 * for a family without labels), created at zero when missing. Values are
 * copied. Never NULL. */
nl_metric_t *nl_metric_series(nl_metric_family_t *f, const char *const *values);
/* A convenience for families with one label. */
nl_metric_t *nl_metric_series1(nl_metric_family_t *f, const char *value);
/* Removes the series if present (pointers to it become invalid). */
void nl_metric_remove(nl_metric_family_t *f, const char *const *values);
/* Removes every series whose label at index `label` has the value. */
void nl_metric_remove_where(nl_metric_family_t *f, size_t label, const char *value);
/* Removes every series of the family. */
void nl_metric_reset(nl_metric_family_t *f);

/* Counters: v >= 0 (asserted). Gauges: any v. */
void nl_metric_add(nl_metric_t *m, double v);
static inline void nl_metric_inc(nl_metric_t *m) { nl_metric_add(m, 1); }
/* Gauges, and counters that mirror a count kept elsewhere (the process's CPU
 * time), v >= 0. */
void nl_metric_set(nl_metric_t *m, double v);
/* Histograms only. */
void nl_metric_observe(nl_metric_t *m, double v);
double nl_metric_value(const nl_metric_t *m);

/* Appends the text exposition of every family to out (after the collect hook). */
void nl_metrics_encode(nl_metrics_t *r, nl_buf_t *out);

/* The content type of the text format. */
#define NL_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Appends v as Go's strconv.FormatFloat(v, 'g', -1, 64) does, with Prometheus's
 * +Inf, -Inf and NaN. */
void nl_metrics_format_float(nl_buf_t *out, double v);
/* Appends s as a label value: backslash, newline and double quote escaped. */
void nl_metrics_format_label(nl_buf_t *out, const char *s);

#endif
