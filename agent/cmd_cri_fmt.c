/* crictl's human formats, kept byte-compatible where operators compare them by
 * eye, and the CRI log-file format (kubernetes/cri-api, "CRI logging"). */
#include "agent/cmd_cri_fmt.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

void nl_cmd_cri__table_init(nl_cmd_cri_table_t *t, size_t ncols, const char *const *header) {
  t->ncols = ncols;
  t->nrows = 0;
  t->cells = NULL;
  nl_cmd_cri__table_row(t, header);
}

void nl_cmd_cri__table_row(nl_cmd_cri_table_t *t, const char *const *cells) {
  t->cells = nl_xrealloc(t->cells, (t->nrows + 1) * t->ncols * sizeof *t->cells);
  for (size_t c = 0; c < t->ncols; c++)
    t->cells[t->nrows * t->ncols + c] = nl_xstrdup(cells[c] ? cells[c] : "");
  t->nrows++;
}

void nl_cmd_cri__table_flush(nl_cmd_cri_table_t *t, nl_buf_t *out) {
  size_t *w = nl_xcalloc(t->ncols, sizeof *w);
  for (size_t r = 0; r < t->nrows; r++)
    for (size_t c = 0; c < t->ncols; c++) {
      size_t n = strlen(t->cells[r * t->ncols + c]);
      if (n > w[c]) w[c] = n;
    }
  for (size_t r = 0; r < t->nrows; r++) {
    for (size_t c = 0; c < t->ncols; c++) {
      char *cell = t->cells[r * t->ncols + c];
      if (c + 1 < t->ncols)
        nl_buf_printf(out, "%-*s   ", (int)w[c], cell);
      else
        nl_buf_puts(out, cell);
      free(cell);
    }
    nl_buf_puts(out, "\n");
  }
  free(w);
  free(t->cells);
  t->cells = NULL;
  t->nrows = 0;
}

char *nl_cmd_cri__ago(int64_t now_ns, int64_t then_ns, char *buf, size_t len) {
  double d = (double)(now_ns - then_ns) / 1e9; /* seconds */
  long s = (long)d, m = (long)(d / 60), h = (long)(d / 3600 + 0.5);
  if (s < 1)
    snprintf(buf, len, "Less than a second ago");
  else if (s == 1)
    snprintf(buf, len, "1 second ago");
  else if (s < 60)
    snprintf(buf, len, "%ld seconds ago", s);
  else if (m == 1)
    snprintf(buf, len, "About a minute ago");
  else if (m < 60)
    snprintf(buf, len, "%ld minutes ago", m);
  else if (h == 1)
    snprintf(buf, len, "About an hour ago");
  else if (h < 48)
    snprintf(buf, len, "%ld hours ago", h);
  else if (h < 24 * 7 * 2)
    snprintf(buf, len, "%ld days ago", h / 24);
  else if (h < 24 * 30 * 2)
    snprintf(buf, len, "%ld weeks ago", h / 24 / 7);
  else if (h < 24 * 365 * 2)
    snprintf(buf, len, "%ld months ago", h / 24 / 30);
  else
    snprintf(buf, len, "%ld years ago", (long)(d / 3600) / 24 / 365);
  return buf;
}

char *nl_cmd_cri__size(uint64_t size, char *buf, size_t len) {
  static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  double v = (double)size;
  size_t i = 0;
  while (v >= 1000 && i + 1 < sizeof units / sizeof *units) {
    v /= 1000;
    i++;
  }
  snprintf(buf, len, "%.3g%s", v, units[i]);
  return buf;
}

const char *nl_cmd_cri__short_id(const char *id, int strip_digest, int no_trunc, char *buf,
                                 size_t len) {
  if (!id) return "";
  if (strip_digest && !strncmp(id, "sha256:", 7)) id += 7;
  if (no_trunc || strlen(id) <= NL_CMD_CRI_TRUNC_ID) return id;
  snprintf(buf, len, "%.*s", NL_CMD_CRI_TRUNC_ID, id);
  return buf;
}

/* ---- CRI log files ---------------------------------------------------------- */

/* Splits "<ts> <stream> <tag> <msg>": returns 0 and the parts, -1 when malformed.
 * The message may be empty (and its separating space missing). */
static int parse_record(const char *p, size_t n, int *stream, bool *partial, const char **msg,
                        size_t *msg_len) {
  const char *end = p + n;
  const char *sp = memchr(p, ' ', n);
  if (!sp || sp == p) return -1; /* timestamp: not validated further, as the kubelet */
  p = sp + 1;
  sp = memchr(p, ' ', (size_t)(end - p));
  if (!sp) return -1;
  if (sp - p == 6 && !memcmp(p, "stdout", 6))
    *stream = 1;
  else if (sp - p == 6 && !memcmp(p, "stderr", 6))
    *stream = 2;
  else
    return -1;
  p = sp + 1;
  sp = memchr(p, ' ', (size_t)(end - p));
  const char *tag_end = sp ? sp : end;
  const char *colon = memchr(p, ':', (size_t)(tag_end - p)); /* "F:more:tags" */
  if (colon) tag_end = colon;
  if (tag_end - p != 1 || (*p != 'P' && *p != 'F')) return -1;
  *partial = *p == 'P';
  *msg = sp ? sp + 1 : end;
  *msg_len = (size_t)(end - *msg);
  return 0;
}

static void push(nl_cmd_cri_log_line_t **lines, size_t *n, size_t *cap, int stream, nl_buf_t *b) {
  if (*n == *cap) {
    *cap = *cap ? *cap * 2 : 64;
    *lines = nl_xrealloc(*lines, *cap * sizeof **lines);
  }
  nl_cmd_cri_log_line_t *l = &(*lines)[(*n)++];
  l->stream = stream;
  l->len = b->len;
  l->text = b->len ? nl_buf_steal(b) : nl_xstrdup("");
}

size_t nl_cmd_cri__log_parse(const char *data, size_t len, nl_cmd_cri_log_line_t **lines,
                             size_t *bad) {
  size_t n = 0, cap = 0, nbad = 0;
  nl_buf_t pending[3] = {NL_BUF_INIT, NL_BUF_INIT, NL_BUF_INIT}; /* per stream */
  *lines = NULL;
  for (size_t off = 0; off < len;) {
    const char *rec = data + off;
    const char *nl = memchr(rec, '\n', len - off);
    size_t rlen = nl ? (size_t)(nl - rec) : len - off;
    off += rlen + (nl ? 1 : 0);
    int stream;
    bool partial;
    const char *msg;
    size_t mlen;
    if (parse_record(rec, rlen, &stream, &partial, &msg, &mlen) < 0) {
      nbad++;
      continue;
    }
    nl_buf_append(&pending[stream], msg, mlen);
    if (partial) continue;
    nl_buf_append(&pending[stream], "\n", 1);
    push(lines, &n, &cap, stream, &pending[stream]);
  }
  for (int s = 1; s <= 2; s++) /* the file ended inside a line: print what there is */
    if (pending[s].len) push(lines, &n, &cap, s, &pending[s]);
  for (int s = 0; s < 3; s++) nl_buf_free(&pending[s]);
  if (bad) *bad = nbad;
  return n;
}

void nl_cmd_cri__log_free(nl_cmd_cri_log_line_t *lines, size_t n) {
  for (size_t i = 0; i < n; i++) free(lines[i].text);
  free(lines);
}

void nl_cmd_cri__log_print(const nl_cmd_cri_log_line_t *lines, size_t n, long tail) {
  size_t first = tail >= 0 && (size_t)tail < n ? n - (size_t)tail : 0;
  FILE *last = NULL;
  for (size_t i = first; i < n; i++) {
    FILE *to = lines[i].stream == 2 ? stderr : stdout;
    if (last && to != last) fflush(last);
    fwrite(lines[i].text, 1, lines[i].len, to);
    last = to;
  }
  fflush(stdout);
  fflush(stderr);
}
