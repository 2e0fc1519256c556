#include "reactor/metrics.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

const double nl_metrics_def_buckets[11] = {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10};

void nl_metrics_exponential_buckets(double *out, double start, double factor, size_t n) {
  /* Repeated multiplication, as client_golang, so the bounds print the same. */
  for (size_t i = 0; i < n; i++) out[i] = i ? out[i - 1] * factor : start;
}

void nl_metrics_init(nl_metrics_t *r) { memset(r, 0, sizeof *r); }

static void series_free(nl_metric_t *m) {
  for (size_t i = 0; i < m->family->nlabels; i++) free(m->values[i]);
  free(m->counts);
  free(m);
}

void nl_metric_reset(nl_metric_family_t *f) {
  for (nl_metric_t *m = f->first, *n; m; m = n) {
    n = m->next;
    series_free(m);
  }
  f->first = f->last = NULL;
  nl_map_free(&f->index, NULL);
  nl_map_init(&f->index);
}

void nl_metrics_free(nl_metrics_t *r) {
  for (size_t i = 0; i < r->nfamilies; i++) {
    nl_metric_family_t *f = r->families[i];
    nl_metric_reset(f);
    nl_map_free(&f->index, NULL);
    for (size_t j = 0; j < f->nlabels; j++) free(f->labels[j]);
    free(f->name);
    free(f->help);
    for (size_t j = 0; j < f->nbuckets; j++) free(f->le[j]);
    free(f->le);
    free(f->buckets);
    free(f);
  }
  free(r->families);
  memset(r, 0, sizeof *r);
}

static nl_metric_family_t *family_new(nl_metrics_t *r, nl_metric_kind_t kind, const char *name,
                                      const char *help, const char *const *labels) {
  for (size_t i = 0; i < r->nfamilies; i++) assert(strcmp(r->families[i]->name, name) != 0);
  nl_metric_family_t *f = nl_xcalloc(1, sizeof *f);
  f->kind = kind;
  f->name = nl_xstrdup(name);
  f->help = nl_xstrdup(help);
  for (; labels && labels[f->nlabels]; f->nlabels++) {
    assert(f->nlabels < NL_METRIC_MAX_LABELS);
    f->labels[f->nlabels] = nl_xstrdup(labels[f->nlabels]);
  }
  nl_map_init(&f->index);
  if (r->nfamilies == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 16;
    r->families = nl_xrealloc(r->families, r->cap * sizeof *r->families);
  }
  r->families[r->nfamilies++] = f;
  return f;
}

nl_metric_family_t *nl_metrics_counter(nl_metrics_t *r, const char *name, const char *help,
                                       const char *const *labels) {
  return family_new(r, NL_METRIC_COUNTER, name, help, labels);
}

nl_metric_family_t *nl_metrics_gauge(nl_metrics_t *r, const char *name, const char *help,
                                     const char *const *labels) {
  return family_new(r, NL_METRIC_GAUGE, name, help, labels);
}

nl_metric_family_t *nl_metrics_histogram(nl_metrics_t *r, const char *name, const char *help,
                                         const char *const *labels, const double *buckets,
                                         size_t n) {
  nl_metric_family_t *f = family_new(r, NL_METRIC_HISTOGRAM, name, help, labels);
  f->buckets = nl_xmalloc((n ? n : 1) * sizeof *f->buckets);
  for (size_t i = 0; i < n; i++) {
    assert(i == 0 || buckets[i] > buckets[i - 1]);
    f->buckets[i] = buckets[i];
  }
  f->nbuckets = n;
  f->le = nl_xcalloc(n ? n : 1, sizeof *f->le);
  for (size_t i = 0; i < n; i++) {
    nl_buf_t b = NL_BUF_INIT;
    nl_metrics_format_float(&b, buckets[i]);
    f->le[i] = nl_buf_steal(&b);
  }
  return f;
}

/* The index key: label values joined by a unit separator (which no sane label
 * value carries; a value that does only shares a key with an identical join). */
static void series_key(const nl_metric_family_t *f, const char *const *values, nl_buf_t *key) {
  for (size_t i = 0; i < f->nlabels; i++) {
    if (i) nl_buf_append(key, "\x1f", 1);
    nl_buf_puts(key, values[i]);
  }
  nl_buf_append(key, "", 0); /* terminated even when empty */
}

nl_metric_t *nl_metric_series(nl_metric_family_t *f, const char *const *values) {
  assert(f->nlabels == 0 || values);
  nl_buf_t key = NL_BUF_INIT;
  series_key(f, values, &key);
  nl_metric_t *m = nl_map_get(&f->index, key.data);
  if (!m) {
    m = nl_xcalloc(1, sizeof *m);
    m->family = f;
    for (size_t i = 0; i < f->nlabels; i++) m->values[i] = nl_xstrdup(values[i]);
    if (f->kind == NL_METRIC_HISTOGRAM) m->counts = nl_xcalloc(f->nbuckets + 1, sizeof *m->counts);
    if (f->last)
      f->last->next = m;
    else
      f->first = m;
    f->last = m;
    nl_map_put(&f->index, key.data, m);
  }
  nl_buf_free(&key);
  return m;
}

nl_metric_t *nl_metric_series1(nl_metric_family_t *f, const char *value) {
  assert(f->nlabels == 1);
  const char *v[] = {value};
  return nl_metric_series(f, v);
}

void nl_metric_remove(nl_metric_family_t *f, const char *const *values) {
  nl_buf_t key = NL_BUF_INIT;
  series_key(f, values, &key);
  nl_metric_t *m = nl_map_del(&f->index, key.data);
  nl_buf_free(&key);
  if (!m) return;
  nl_metric_t **pp = &f->first, *prev = NULL;
  while (*pp != m) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  *pp = m->next;
  if (f->last == m) f->last = prev;
  series_free(m);
}

void nl_metric_remove_where(nl_metric_family_t *f, size_t label, const char *value) {
  assert(label < f->nlabels);
  for (nl_metric_t *m = f->first, *next; m; m = next) {
    next = m->next;
    if (strcmp(m->values[label], value) == 0) nl_metric_remove(f, (const char *const *)m->values);
  }
}

void nl_metric_add(nl_metric_t *m, double v) {
  assert(m->family->kind != NL_METRIC_HISTOGRAM);
  assert(m->family->kind == NL_METRIC_GAUGE || v >= 0);
  m->value += v;
}

void nl_metric_set(nl_metric_t *m, double v) {
  assert(m->family->kind == NL_METRIC_GAUGE || (m->family->kind == NL_METRIC_COUNTER && v >= 0));
  m->value = v;
}

void nl_metric_observe(nl_metric_t *m, double v) {
  const nl_metric_family_t *f = m->family;
  assert(f->kind == NL_METRIC_HISTOGRAM);
  size_t i = 0;
  while (i < f->nbuckets && v > f->buckets[i]) i++; /* le: v <= bound */
  m->counts[i]++;
  m->count++;
  m->sum += v;
}

double nl_metric_value(const nl_metric_t *m) {
  return m->family->kind == NL_METRIC_HISTOGRAM ? (double)m->count : m->value;
}

/* ---- encoding ------------------------------------------------------------ */

void nl_metrics_format_float(nl_buf_t *out, double v) {
  if (isnan(v)) return nl_buf_puts(out, "NaN");
  if (isinf(v)) return nl_buf_puts(out, v > 0 ? "+Inf" : "-Inf");
  if (v == 0) return nl_buf_puts(out, signbit(v) ? "-0" : "0");
  if (v == (double)(long long)v && v > -1e6 && v < 1e6) /* the common case: a count */
    return nl_buf_printf(out, "%lld", (long long)v);
  /* The fewest significant digits that read back as v. */
  char e[40];
  int p = 1;
  for (; p < 17; p++) {
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    if (strtod(e, NULL) == v) break;
  }
  snprintf(e, sizeof e, "%.*e", p - 1, v);
  int exp = atoi(strchr(e, 'e') + 1);
  /* Go's 'g' with the shortest precision switches to %e outside [-4, 6). */
  if (exp < -4 || exp >= 6) return nl_buf_puts(out, e);
  int decimals = p - 1 - exp;
  nl_buf_printf(out, "%.*f", decimals > 0 ? decimals : 0, v);
}

static void put_escaped(nl_buf_t *out, const char *s, int quote) {
  for (;;) {
    size_t n = strcspn(s, quote ? "\\\n\"" : "\\\n");
    nl_buf_append(out, s, n);
    s += n;
    if (!*s) return;
    nl_buf_puts(out, *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : "\\\"");
    s++;
  }
}

void nl_metrics_format_label(nl_buf_t *out, const char *s) { put_escaped(out, s, 1); }

/* name{l1="v1",...,extra="x"} — extra may be NULL. */
static void put_series_name(nl_buf_t *out, const nl_metric_t *m, const char *suffix,
                            const char *extra_name, const char *extra_value) {
  const nl_metric_family_t *f = m->family;
  nl_buf_puts(out, f->name);
  nl_buf_puts(out, suffix);
  if (!f->nlabels && !extra_name) return;
  nl_buf_puts(out, "{");
  for (size_t i = 0; i < f->nlabels; i++) {
    nl_buf_printf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
    put_escaped(out, m->values[i], 1);
    nl_buf_puts(out, "\"");
  }
  if (extra_name) nl_buf_printf(out, "%s%s=\"%s\"", f->nlabels ? "," : "", extra_name, extra_value);
  nl_buf_puts(out, "}");
}

static void put_sample(nl_buf_t *out, const nl_metric_t *m, const char *suffix,
                       const char *extra_name, const char *extra_value, double v) {
  put_series_name(out, m, suffix, extra_name, extra_value);
  nl_buf_puts(out, " ");
  nl_metrics_format_float(out, v);
  nl_buf_puts(out, "\n");
}

static void encode_series(nl_buf_t *out, const nl_metric_t *m) {
  const nl_metric_family_t *f = m->family;
  if (f->kind != NL_METRIC_HISTOGRAM) return put_sample(out, m, "", NULL, NULL, m->value);
  uint64_t cum = 0;
  for (size_t i = 0; i < f->nbuckets; i++) {
    cum += m->counts[i];
    put_sample(out, m, "_bucket", "le", f->le[i], (double)cum);
  }
  put_sample(out, m, "_bucket", "le", "+Inf", (double)m->count);
  put_sample(out, m, "_sum", NULL, NULL, m->sum);
  put_sample(out, m, "_count", NULL, NULL, (double)m->count);
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(nl_metric_family_t *const *)a)->name, (*(nl_metric_family_t *const *)b)->name);
}

void nl_metrics_encode(nl_metrics_t *r, nl_buf_t *out) {
  static const char *const types[] = {"counter", "gauge", "histogram"};
  if (r->collect) r->collect(r->collect_ctx);
  qsort(r->families, r->nfamilies, sizeof *r->families, by_name);
  for (size_t i = 0; i < r->nfamilies; i++) {
    nl_metric_family_t *f = r->families[i];
    if (!f->nlabels && !f->first) nl_metric_series(f, NULL);
    if (!f->first) continue;
    nl_buf_printf(out, "# HELP %s ", f->name);
    put_escaped(out, f->help, 0);
    nl_buf_printf(out, "\n# TYPE %s %s\n", f->name, types[f->kind]);
    for (const nl_metric_t *m = f->first; m; m = m->next) encode_series(out, m);
  }
}
