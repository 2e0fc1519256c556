/* Internal to `nanolet cri`: crictl's human formats (tables, "2 minutes ago",
 * "1.23MB", 13-character IDs) and the reader of CRI container log files. */
#ifndef NL_CMD_CRI_FMT_H
#define NL_CMD_CRI_FMT_H

#include <stddef.h>
#include <stdint.h>

#include "reactor/buf.h"

#define NL_CMD_CRI_TRUNC_ID 13 /* crictl's truncatedIDLen */

/* A table of strings printed with columns padded by three spaces (crictl's
 * tabwriter). Cells are copied. */
typedef struct nl_cmd_cri_table {
  size_t ncols, nrows;
  char **cells; /* nrows * ncols, owned */
} nl_cmd_cri_table_t;

void nl_cmd_cri__table_init(nl_cmd_cri_table_t *t, size_t ncols, const char *const *header);
/* Appends a row of t->ncols cells (NULL prints as ""). */
void nl_cmd_cri__table_row(nl_cmd_cri_table_t *t, const char *const *cells);
/* Writes the table to out and frees it. */
void nl_cmd_cri__table_flush(nl_cmd_cri_table_t *t, nl_buf_t *out);

/* go-units HumanDuration of (now - then) nanoseconds plus " ago", as crictl's
 * CREATED column. Writes into buf (>= 32 bytes); returns buf. */
char *nl_cmd_cri__ago(int64_t now_ns, int64_t then_ns, char *buf, size_t len);
/* go-units HumanSizeWithPrecision(size, 3): decimal units, "5.18MB". */
char *nl_cmd_cri__size(uint64_t size, char *buf, size_t len);
/* The first 13 characters of id (after a "sha256:" prefix when strip_digest),
 * or the whole of it when no_trunc. Returns a pointer into buf or id. */
const char *nl_cmd_cri__short_id(const char *id, int strip_digest, int no_trunc, char *buf,
                                 size_t len);

/* One logical line of a CRI log file: partial (P) records joined up to the full
 * (F) one; text ends with '\n' unless the file ended inside the line. */
typedef struct nl_cmd_cri_log_line {
  int stream; /* 1 stdout, 2 stderr */
  char *text; /* owned */
  size_t len;
} nl_cmd_cri_log_line_t;

/* Parses a CRI log file's contents (`<RFC3339Nano> <stdout|stderr> <P|F>[:tags]
 * <msg>` per line). Records that do not have this shape are skipped and
 * counted in *bad (may be NULL), as the kubelet's log reader skips them.
 * Returns the number of lines in *lines (owned; free with
 * nl_cmd_cri__log_free). */
size_t nl_cmd_cri__log_parse(const char *data, size_t len, nl_cmd_cri_log_line_t **lines,
                             size_t *bad);
void nl_cmd_cri__log_free(nl_cmd_cri_log_line_t *lines, size_t n);
/* Writes the last `tail` lines (-1: all) straight to stdout and stderr, in file
 * order, so a terminal shows them interleaved as they were written. */
void nl_cmd_cri__log_print(const nl_cmd_cri_log_line_t *lines, size_t n, long tail);

#endif
