#include "agent/crilog.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reactor/http_query.h"

#define NS 1000000000LL

/* Go's strconv.ParseBool. */
static int parse_bool(const char *s, bool *out) {
  static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True", NULL};
  static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False", NULL};
  for (int i = 0; t[i]; i++)
    if (strcmp(s, t[i]) == 0) return *out = true, 0;
  for (int i = 0; f[i]; i++)
    if (strcmp(s, f[i]) == 0) return *out = false, 0;
  return -1;
}

static int parse_int(const char *s, int64_t *out) {
  char *end;
  if (!*s) return -1;
  long long v = strtoll(s, &end, 10);
  if (*end) return -1;
  *out = v;
  return 0;
}

int nl_crilog_digits(const char *s, int n) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

bool nl_crilog_parse_time(const char *s, size_t len, int64_t *ns) {
  if (len < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
      s[16] != ':')
    return false;
  struct tm tm = {0};
  int y = nl_crilog_digits(s, 4), mo = nl_crilog_digits(s + 5, 2), d = nl_crilog_digits(s + 8, 2),
      h = nl_crilog_digits(s + 11, 2), mi = nl_crilog_digits(s + 14, 2),
      se = nl_crilog_digits(s + 17, 2);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
      se < 0 || se > 60)
    return false;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  size_t i = 19;
  int64_t frac = 0;
  if (i < len && s[i] == '.') {
    int64_t scale = NS;
    i++;
    size_t start = i;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
      if (scale > 1) {
        scale /= 10;
        frac += (s[i] - '0') * scale;
      }
    }
    if (i == start) return false;
  }
  int64_t off = 0;
  if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
    i++;
  } else if (i + 6 <= len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int oh = nl_crilog_digits(s + i + 1, 2), om = nl_crilog_digits(s + i + 4, 2);
    if (oh < 0 || om < 0) return false;
    off = (oh * 3600 + om * 60) * (s[i] == '-' ? -1 : 1);
    i += 6;
  } else {
    return false;
  }
  if (i != len) return false;
  /* A year far in the future would overflow nanoseconds: refuse it. */
  int64_t v;
  if (__builtin_mul_overflow((int64_t)timegm(&tm) - off, (int64_t)NS, &v) ||
      __builtin_add_overflow(v, (int64_t)frac, &v))
    return false;
  *ns = v;
  return true;
}

int nl_crilog_opts_parse(const char *query, int64_t now_ns, nl_crilog_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->tail_lines = -1;
  o->limit_bytes = -1;
  bool bad = false, have_since_s = false, have_since_t = false;
  int rc = 0;
  int64_t since_s = 0;
  static const char *const bools[] = {"follow", "timestamps", "previous", NULL};
  bool *bool_dst[] = {&o->follow, &o->timestamps, &o->previous};
  for (int i = 0; bools[i]; i++) {
    char *v = nl_http_query_get(query, bools[i], &bad);
    if (v && parse_bool(v, bool_dst[i]) < 0) rc = 400;
    free(v);
  }
  /* "tail", the old name, wins when set; "all" means no limit. */
  char *v = nl_http_query_get(query, "tail", &bad);
  if (!v || !*v) {
    free(v);
    v = nl_http_query_get(query, "tailLines", &bad);
  } else if (strcmp(v, "all") == 0) {
    free(v);
    v = NULL;
  }
  if (v) {
    if (parse_int(v, &o->tail_lines) < 0) rc = 400;
    else if (o->tail_lines < 0 && !rc) rc = 422;
  }
  free(v);
  v = nl_http_query_get(query, "limitBytes", &bad);
  if (v) {
    if (parse_int(v, &o->limit_bytes) < 0) rc = 400;
    else if (o->limit_bytes < 1 && !rc) rc = 422;
  }
  free(v);
  v = nl_http_query_get(query, "sinceSeconds", &bad);
  if (v) {
    have_since_s = true;
    if (parse_int(v, &since_s) < 0) rc = 400;
    else if (since_s < 1 && !rc) rc = 422;
  }
  free(v);
  v = nl_http_query_get(query, "sinceTime", &bad);
  if (v) {
    have_since_t = true;
    if (!nl_crilog_parse_time(v, strlen(v), &o->since_ns)) rc = 400;
  }
  free(v);
  if (bad) return 400;
  if (rc) return rc;
  if (have_since_s && have_since_t) return 422;
  if (have_since_s) o->since_ns = now_ns - since_s * NS;
  return 0;
}

bool nl_crilog_parse(const char *line, size_t len, nl_crilog_rec_t *r) {
  const char *sp1 = memchr(line, ' ', len);
  if (!sp1) return false;
  r->ts = line;
  r->ts_len = (size_t)(sp1 - line);
  if (!nl_crilog_parse_time(line, r->ts_len, &r->ts_ns)) return false;
  const char *p = sp1 + 1, *end = line + len;
  const char *sp2 = memchr(p, ' ', (size_t)(end - p));
  if (!sp2) return false;
  size_t sl = (size_t)(sp2 - p);
  if (!((sl == 6 && memcmp(p, "stdout", 6) == 0) || (sl == 6 && memcmp(p, "stderr", 6) == 0)))
    return false;
  p = sp2 + 1;
  const char *sp3 = memchr(p, ' ', (size_t)(end - p));
  /* The tag may carry more after ':' (P:extra); a line may end after it. */
  size_t tl = sp3 ? (size_t)(sp3 - p) : (size_t)(end - p);
  if (tl < 1 || (p[0] != 'P' && p[0] != 'F') || (tl > 1 && p[1] != ':')) return false;
  r->partial = p[0] == 'P';
  r->msg = sp3 ? sp3 + 1 : end;
  r->msg_len = (size_t)(end - r->msg);
  return true;
}

void nl_crilog_writer_init(nl_crilog_writer_t *w, const nl_crilog_opts_t *o) {
  w->opts = *o;
  w->remain = o->limit_bytes;
  w->new_line = true;
}

static bool put(nl_crilog_writer_t *w, const char *p, size_t n, nl_buf_t *out) {
  if (w->remain >= 0 && (int64_t)n > w->remain) n = (size_t)w->remain;
  nl_buf_append(out, p, n);
  if (w->remain >= 0) w->remain -= (int64_t)n;
  return w->remain != 0;
}

bool nl_crilog_write(nl_crilog_writer_t *w, const char *line, size_t len, nl_buf_t *out) {
  if (w->remain == 0) return false;
  nl_crilog_rec_t r;
  if (!nl_crilog_parse(line, len, &r)) return true;
  if (w->opts.since_ns && r.ts_ns < w->opts.since_ns) return true;
  bool prefix = w->opts.timestamps && w->new_line;
  w->new_line = !r.partial;
  if (prefix && (!put(w, r.ts, r.ts_len, out) || !put(w, " ", 1, out))) return false;
  if (!put(w, r.msg, r.msg_len, out)) return false;
  return r.partial || put(w, "\n", 1, out);
}
