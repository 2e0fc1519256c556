#include "agent/nodelog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/crilog.h"
#include "reactor/buf.h"
#include "reactor/http_query.h"
#include "reactor/xalloc.h"

#define NS 1000000000LL
/* Interval repetitions ({n,m}) multiply a compiled pattern's size: their
 * counts' product is held to this, so that a pattern of a few hundred bytes
 * cannot make a huge automaton (glibc expands each repetition). */
#define MAX_REPEAT_PRODUCT 1000

/* What the query string holds, before validation. */
typedef struct raw {
  bool has_query;  /* query= appeared, even empty */
  nl_buf_t queries; /* each query value as given, for the message */
  char *services[NL_NODELOG_MAX_SERVICES + 1];
  size_t n_services; /* all of them, though only the first 5 are kept */
  char *files[2];
  size_t n_files;
  char *since, *until, *boot, *tail, *pattern; /* first values, as Go's Get */
} raw_t;

static void take_first(char **dst, const char *v) {
  if (!*dst) *dst = nl_xstrdup(v);
}

static bool blank(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != '\v' && *s != '\f') return false;
  return true;
}

static void on_pair(void *ctx, const char *name, const char *value) {
  raw_t *r = ctx;
  if (!strcmp(name, "query")) {
    r->has_query = true;
    if (r->queries.len) nl_buf_puts(&r->queries, ", ");
    nl_buf_printf(&r->queries, "\"%s\"", value);
    /* A '/' (or upstream's '\', a Windows path) means a file. */
    if (strpbrk(value, "/\\")) {
      if (r->n_files < 2) r->files[r->n_files] = nl_xstrdup(value);
      r->n_files++;
    } else if (!blank(value)) {
      if (r->n_services <= NL_NODELOG_MAX_SERVICES) r->services[r->n_services] = nl_xstrdup(value);
      r->n_services++;
    }
  } else if (!strcmp(name, "sinceTime")) {
    take_first(&r->since, value);
  } else if (!strcmp(name, "untilTime")) {
    take_first(&r->until, value);
  } else if (!strcmp(name, "boot")) {
    take_first(&r->boot, value);
  } else if (!strcmp(name, "tailLines")) {
    take_first(&r->tail, value);
  } else if (!strcmp(name, "pattern")) {
    take_first(&r->pattern, value);
  }
}

static void raw_free(raw_t *r) {
  nl_buf_free(&r->queries);
  for (size_t i = 0; i < r->n_services && i <= NL_NODELOG_MAX_SERVICES; i++) free(r->services[i]);
  for (size_t i = 0; i < r->n_files && i < 2; i++) free(r->files[i]);
  free(r->since);
  free(r->until);
  free(r->boot);
  free(r->tail);
  free(r->pattern);
}

/* Go's strconv.Atoi: an optional sign and decimal digits, in range. */
static bool atoi_go(const char *s, int64_t *v) {
  const char *d = *s == '+' || *s == '-' ? s + 1 : s;
  if (!*d) return false;
  for (const char *p = d; *p; p++)
    if (*p < '0' || *p > '9') return false;
  errno = 0;
  char *end;
  long long x = strtoll(s, &end, 10);
  if (errno || *end) return false;
  *v = x;
  return true;
}

/* One error of upstream's field.ErrorList, appended to the list. */
__attribute__((format(printf, 3, 4))) static void add_err(nl_buf_t *errs, size_t *n, const char *fmt,
                                                          ...) {
  if ((*n)++) nl_buf_puts(errs, ", ");
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) abort(); /* out of memory, as nl_x* */
  va_end(ap);
  nl_buf_puts(errs, s);
  free(s);
}
#define INVALID "%s: Invalid value: \"%s\": %s"
#define INVALID_LIST "%s: Invalid value: %s: %s"

/* Upstream's reServiceNameUnsafeCharacters, kept out: only these pass. */
static bool safe_name(const char *s) {
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          strchr("-_.:@", *s)))
      return false;
  return true;
}

/* Why the pattern cannot be used, or NULL (its regex compiled into re). */
static const char *pattern_check(const char *p, regex_t *re) {
  if (strlen(p) > NL_NODELOG_MAX_PATTERN) return "must be no more than 256 bytes";
  long product = 1;
  for (const char *s = p; *s; s++) {
    if (*s == '\\' && s[1] >= '1' && s[1] <= '9') return "back-references are not supported";
    if (*s == '\\' && s[1]) {
      s++;
      continue;
    }
    if (*s != '{') continue;
    /* {n}, {n,} or {n,m}: the largest count given */
    char *end;
    long lo = strtol(s + 1, &end, 10), hi = lo;
    if (*end == ',') hi = end[1] == '}' ? lo : strtol(end + 1, &end, 10);
    if (hi < 1) hi = 1;
    if (hi > MAX_REPEAT_PRODUCT || (product *= hi) > MAX_REPEAT_PRODUCT)
      return "repetitions must multiply to no more than 1000";
  }
  if (regcomp(re, p, REG_EXTENDED | REG_NOSUB) != 0) return "not a valid extended regular expression";
  return NULL;
}

int nl_nodelog_query_parse(const char *query, nl_nodelog_query_t *q, char **msg) {
  memset(q, 0, sizeof(*q));
  *msg = NULL;
  raw_t r = {0};
  nl_http_query_each(query, on_pair, &r);
  nl_buf_t errs = NL_BUF_INIT;
  size_t n = 0;
  /* Go's %#v of the []string, as upstream's field errors print it */
  char *queries = nl_xasprintf("[]string{%s}", r.queries.data ? r.queries.data : "");
  /* ---- newNodeLogQuery: what does not parse (400) ---- */
  if (r.has_query && r.n_services == 0 && r.n_files == 0)
    add_err(&errs, &n, INVALID_LIST, "query", queries, "may not be empty");
  if (r.since && *r.since && !nl_crilog_parse_time(r.since, strlen(r.since), &q->since_ns))
    add_err(&errs, &n, INVALID, "sinceTime", r.since, "invalid time format");
  q->has_since = r.since && *r.since;
  if (r.until && *r.until && !nl_crilog_parse_time(r.until, strlen(r.until), &q->until_ns))
    add_err(&errs, &n, INVALID, "untilTime", r.until, "invalid time format");
  q->has_until = r.until && *r.until;
  if (r.boot && *r.boot && !atoi_go(r.boot, &q->boot))
    add_err(&errs, &n, INVALID, "boot", r.boot, "invalid syntax");
  q->has_boot = r.boot && *r.boot;
  if (r.tail && *r.tail && !atoi_go(r.tail, &q->tail))
    add_err(&errs, &n, INVALID, "tailLines", r.tail, "invalid syntax");
  q->has_tail = r.tail && *r.tail;
  bool has_pattern = r.pattern && *r.pattern;
  int rc = 0;
  if (n) {
    rc = 400;
    goto out;
  }
  if (!r.has_query && !q->has_since && !q->has_until && !q->has_boot && !q->has_tail &&
      !has_pattern) {
    rc = 1;
    goto out;
  }
  /* ---- validate: what is not allowed (406) ---- */
  for (size_t i = 0; i < r.n_services && i < NL_NODELOG_MAX_SERVICES; i++) {
    if (strlen(r.services[i]) > NL_NODELOG_MAX_NAME)
      add_err(&errs, &n, INVALID, "query", r.services[i], "length must be less than 256");
    else if (!safe_name(r.services[i]))
      add_err(&errs, &n, INVALID, "query", r.services[i], "input contains unsupported characters");
  }
  if (r.n_services > NL_NODELOG_MAX_SERVICES) {
    char count[24];
    snprintf(count, sizeof count, "%zu", r.n_services);
    add_err(&errs, &n, "query: Too many: %s: must have at most 4 items", count);
  }
  bool options = q->has_since || q->has_until || q->has_boot || q->has_tail || has_pattern;
  if (r.n_files == 0 && r.n_services == 0)
    add_err(&errs, &n, "query: Required value: cannot be empty with options");
  else if (r.n_files > 0 && r.n_services > 0)
    add_err(&errs, &n, INVALID_LIST, "query", queries, "cannot specify a file and service");
  else if (r.n_files > 1)
    add_err(&errs, &n, INVALID_LIST, "query", queries, "cannot specify more than one file");
  else if (r.n_files == 1 && options)
    add_err(&errs, &n, INVALID_LIST, "query", queries, "cannot specify file with options");
  if (q->has_since && q->has_until && q->since_ns > q->until_ns)
    add_err(&errs, &n, INVALID, "untilTime", r.until, "must be after `sinceTime`");
  if (q->has_boot && q->boot > 0) add_err(&errs, &n, INVALID, "boot", r.boot, "must be less than 1");
  if (q->has_tail && (q->tail < 0 || q->tail > NL_NODELOG_MAX_TAIL))
    add_err(&errs, &n, INVALID, "tailLines", r.tail, "must be between 0 and 100000, inclusive");
  if (has_pattern) {
    const char *why = pattern_check(r.pattern, &q->re);
    if (why) add_err(&errs, &n, INVALID, "pattern", r.pattern, why);
    else q->pattern = nl_steal(&r.pattern);
  }
  if (n) {
    rc = 406;
    goto out;
  }
  for (size_t i = 0; i < r.n_services; i++) q->services[i] = nl_steal(&r.services[i]);
  q->n_services = r.n_services;
  if (r.n_files) q->file = nl_steal(&r.files[0]);
out:
  if (rc > 1) {
    if (q->pattern) {
      regfree(&q->re);
      free(q->pattern);
      q->pattern = NULL;
    }
    *msg = n > 1 ? nl_xasprintf("[%s]", errs.data) : nl_buf_steal(&errs);
  }
  nl_buf_free(&errs);
  free(queries);
  raw_free(&r);
  return rc;
}

void nl_nodelog_query_free(nl_nodelog_query_t *q) {
  for (size_t i = 0; i < q->n_services; i++) free(q->services[i]);
  free(q->file);
  if (q->pattern) regfree(&q->re);
  free(q->pattern);
  memset(q, 0, sizeof(*q));
}

bool nl_nodelog_query_filters(const nl_nodelog_query_t *q) {
  return q->has_since || q->has_until || q->has_boot || q->pattern;
}

size_t nl_nodelog_candidates(const char *service, const char *own,
                             char *out[NL_NODELOG_MAX_CANDIDATES]) {
  size_t n = 0;
  bool agent = !strcmp(service, "kubelet") || !strcmp(service, "nanolet");
  if (agent && own) out[n++] = nl_xstrdup(own);
  /* Upstream's heuristics, in its order. */
  const char *names[2] = {service, agent ? (!strcmp(service, "kubelet") ? "nanolet" : "kubelet") : NULL};
  for (int i = 0; i < 2 && names[i]; i++) {
    out[n++] = nl_xstrdup(names[i]);
    out[n++] = nl_xasprintf("%s.log", names[i]);
    out[n++] = nl_xasprintf("%s/%s.log", names[i], names[i]);
  }
  /* runit's svlogd (dist/runit/log) keeps the current file as "current". */
  if (agent) out[n++] = nl_xstrdup("nanolet/current");
  return n;
}

int nl_nodelog_open_beneath(int dirfd, const char *rel) {
  int fd = dup(dirfd);
  if (fd < 0) return -errno;
  const char *p = rel;
  while (*p) {
    while (*p == '/') p++;
    if (!*p) break;
    size_t len = strcspn(p, "/");
    char comp[NAME_MAX + 1];
    if (len > NAME_MAX) {
      close(fd);
      return -ENAMETOOLONG;
    }
    memcpy(comp, p, len);
    comp[len] = 0;
    p += len;
    if (!strcmp(comp, ".")) continue;
    if (!strcmp(comp, "..")) {
      close(fd);
      return -EACCES;
    }
    while (*p == '/') p++;
    /* O_NOFOLLOW: a link fails with ELOOP (with O_DIRECTORY, ENOTDIR: told
     * apart below). O_NONBLOCK: a FIFO must not hold the thread. */
    int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (*p ? O_DIRECTORY : 0);
    int next = openat(fd, comp, flags);
    int e = errno;
    struct stat st;
    if (next < 0 && e == ENOTDIR && fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
      e = ELOOP;
    close(fd);
    if (next < 0) return -e;
    fd = next;
  }
  return fd;
}

/* ---- line times ---------------------------------------------------------- */


/* "I1203 09:00:41.123456": klog's header, local time without a year. */
static bool klog_time(const char *s, size_t len, int64_t now_ns, int64_t *ns) {
  if (len < 21 || !strchr("IWEF", s[0]) || s[5] != ' ' || s[8] != ':' || s[11] != ':' || s[14] != '.')
    return false;
  int mo = nl_crilog_digits(s + 1, 2), d = nl_crilog_digits(s + 3, 2),
      h = nl_crilog_digits(s + 6, 2), mi = nl_crilog_digits(s + 9, 2),
      se = nl_crilog_digits(s + 12, 2), us = nl_crilog_digits(s + 15, 6);
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 ||
      se > 60 || us < 0)
    return false;
  time_t now = (time_t)(now_ns / NS);
  struct tm tm;
  localtime_r(&now, &tm);
  for (int back = 0; back < 2; back++) {
    struct tm t = {.tm_year = tm.tm_year - back, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                   .tm_min = mi, .tm_sec = se, .tm_isdst = -1};
    time_t v = mktime(&t);
    if (v == (time_t)-1) return false;
    if (back == 0 && (int64_t)v > (int64_t)now + 86400) continue; /* last year's December */
    *ns = (int64_t)v * NS + (int64_t)us * 1000;
    return true;
  }
  return false;
}

bool nl_nodelog_line_time(const char *line, size_t len, int64_t now_ns, int64_t *ns) {
  if (klog_time(line, len, now_ns, ns)) return true;
  size_t tok = 0;
  while (tok < len && line[tok] != ' ' && line[tok] != '\t') tok++;
  if (tok > 40) return false;
  if (tok >= 20 && line[10] == '_') { /* svlogd -tt, UTC */
    char rfc[48];
    memcpy(rfc, line, tok);
    rfc[10] = 'T';
    rfc[tok] = 'Z';
    return nl_crilog_parse_time(rfc, tok + 1, ns);
  }
  return nl_crilog_parse_time(line, tok, ns);
}

void nl_nodelog_filter_init(nl_nodelog_filter_t *f, const nl_nodelog_query_t *q, int64_t now_ns,
                            int64_t boot_ns) {
  *f = (nl_nodelog_filter_t){.q = q, .now_ns = now_ns, .boot_ns = boot_ns};
}

bool nl_nodelog_filter_line(nl_nodelog_filter_t *f, const char *line, size_t len) {
  const nl_nodelog_query_t *q = f->q;
  int64_t t;
  if (nl_nodelog_line_time(line, len, f->now_ns, &t)) {
    f->have_time = true;
    f->time_ns = t;
  }
  if (q->has_since || q->has_until || q->has_boot) {
    if (!f->have_time) return false;
    if (q->has_since && f->time_ns < q->since_ns) return false;
    if (q->has_until && f->time_ns > q->until_ns) return false;
    /* A file does not tell earlier boots apart: the server says so. */
    if (q->has_boot && (q->boot < 0 || f->time_ns < f->boot_ns)) return false;
  }
  if (q->pattern) {
    /* regexec needs a string: lines with a NUL are matched up to it. */
    char small[1024];
    char *s = len < sizeof small ? small : nl_xmalloc(len + 1);
    memcpy(s, line, len);
    s[len] = 0;
    bool match = regexec(&q->re, s, 0, NULL, 0) == 0;
    if (s != small) free(s);
    if (!match) return false;
  }
  return true;
}
