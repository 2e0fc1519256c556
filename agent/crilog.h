/* CRI container log files as the kubelet serves them (upstream
 * pkg/kubelet/kuberuntime/logs): the query of /containerLogs
 * (v1.PodLogOptions), the records of a file (`<RFC3339Nano> <stream> <P|F>
 * <msg>`) and the writer that applies sinceTime, timestamps and limitBytes.
 * Pure functions: the reading and following is agent/kserver_logs.c. */
#ifndef NL_CRILOG_H
#define NL_CRILOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reactor/buf.h"

typedef struct nl_crilog_opts {
  bool follow, timestamps, previous;
  int64_t tail_lines;  /* -1: all */
  int64_t limit_bytes; /* -1: no limit */
  int64_t since_ns;    /* wall clock; 0: from the start */
} nl_crilog_opts_t;

/* Parses a query as upstream decodes v1.PodLogOptions ("tail" as the old
 * name of tailLines, "all" for all). now_ns turns sinceSeconds into a time.
 * Returns 0; 400 when a value does not decode; 422 when the options are
 * invalid (tailLines < 0, limitBytes < 1, sinceSeconds < 1, both since*). */
int nl_crilog_opts_parse(const char *query, int64_t now_ns, nl_crilog_opts_t *o);

/* The n decimal digits at s as a number; -1 when one is not a digit (the
 * time parsers' fields). */
int nl_crilog_digits(const char *s, int n);

/* RFC 3339 with optional fraction and offset ("2024-05-01T10:00:00.5+02:00")
 * to ns since the epoch. Returns false when s is not one. */
bool nl_crilog_parse_time(const char *s, size_t len, int64_t *ns);

typedef struct nl_crilog_rec {
  const char *ts; /* as written in the file */
  size_t ts_len;
  int64_t ts_ns;
  bool partial;   /* P: the line goes on in the next record */
  const char *msg;
  size_t msg_len;
} nl_crilog_rec_t;

/* One line of a file, without its '\n'. Returns false for a malformed one
 * (skipped, as upstream does). */
bool nl_crilog_parse(const char *line, size_t len, nl_crilog_rec_t *r);

typedef struct nl_crilog_writer {
  nl_crilog_opts_t opts;
  int64_t remain;  /* of limitBytes; -1: unlimited */
  bool new_line;   /* the next record starts a line (timestamps go there) */
} nl_crilog_writer_t;

void nl_crilog_writer_init(nl_crilog_writer_t *w, const nl_crilog_opts_t *o);
/* Appends what one file line gives to out. Returns false once limitBytes is
 * used up (nothing more may be written). */
bool nl_crilog_write(nl_crilog_writer_t *w, const char *line, size_t len, nl_buf_t *out);

#endif
