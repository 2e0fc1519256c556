/* The node log query of the kubelet server's /logs/ (upstream's
 * NodeLogQuery, `kubectl get --raw /api/v1/nodes/N/proxy/logs/?query=S`): the
 * query's parsing and validation, the files a service's log may be under the
 * node's log directory, and the line filter of the query's options. Pure
 * functions but nl_nodelog_open_beneath (an open, for the thread pool): the
 * request is served by agent/kserver_nodelog.c.
 *
 * This node has no journal to ask (nanolet never runs journalctl, nor any
 * command): a service's log is a file, as upstream finds it on a host without
 * journald: /var/log/S, /var/log/S.log or /var/log/S/S.log. */
#ifndef NL_NODELOG_H
#define NL_NODELOG_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NL_NODELOG_MAX_SERVICES 4   /* upstream's maxServices */
#define NL_NODELOG_MAX_NAME 256     /* upstream's maxServiceLength */
#define NL_NODELOG_MAX_TAIL 100000  /* upstream's maxTailLines */
#define NL_NODELOG_MAX_PATTERN 256  /* nanolet's: the pattern compiles on the loop */

typedef struct nl_nodelog_query {
  char *services[NL_NODELOG_MAX_SERVICES];
  size_t n_services;
  char *file; /* a query with a '/' (a path under the log directory); NULL: none */
  bool has_since, has_until, has_boot, has_tail;
  int64_t since_ns, until_ns; /* wall clock */
  int64_t boot;               /* 0: this boot; -1 the one before... */
  int64_t tail;               /* the last lines that pass the other filters */
  char *pattern;              /* NULL: none */
  regex_t re;                 /* compiled pattern (POSIX extended) when pattern */
} nl_nodelog_query_t;

/* Parses the query string of a /logs/ request as upstream's newNodeLogQuery
 * and validate do. Returns:
 *   0    a node log query, *q filled (free with nl_nodelog_query_free);
 *   1    no node log query in it (neither query= nor an option): the request
 *        is for the file or directory of its path;
 *   400  a value that does not parse (an empty query, a time not RFC 3339, a
 *        number that is not one), *msg says which (owned);
 *   406  a query that parses but is not valid (an unsafe service name, more
 *        than 4 services, a file with options or with services, tailLines out
 *        of 0..100000, boot above 0, untilTime before sinceTime, a pattern
 *        that does not compile), *msg says which (owned).
 * *q needs no freeing unless 0 is returned. */
int nl_nodelog_query_parse(const char *query, nl_nodelog_query_t *q, char **msg);
void nl_nodelog_query_free(nl_nodelog_query_t *q);

/* Whether the query has an option that filters lines. */
bool nl_nodelog_query_filters(const nl_nodelog_query_t *q);

/* The files, relative to the log directory, where service's log may be, in
 * the order they are tried; own (nanolet's own log, relative too, or NULL)
 * first for the names "kubelet" and "nanolet", which both name this node
 * agent. Returns how many were set in out (at most NL_NODELOG_MAX_CANDIDATES),
 * each owned. */
#define NL_NODELOG_MAX_CANDIDATES 8
size_t nl_nodelog_candidates(const char *service, const char *own,
                             char *out[NL_NODELOG_MAX_CANDIDATES]);

/* Opens rel (a path relative to the directory dirfd; leading '/' ignored)
 * for reading, never leaving that directory: ".." and symbolic links are
 * refused on every component. Returns the descriptor, or -errno (-ENOENT
 * when it is not there, -ELOOP for a link, -EACCES for ".."). */
int nl_nodelog_open_beneath(int dirfd, const char *rel);

/* A log line's time as the line writes it at its start: the klog header of
 * nanolet and the kubelet ("I1203 09:00:41.123456", local time, the year
 * the one of now_ns unless that puts it more than a day ahead), RFC 3339
 * ("2026-12-03T09:00:41.5Z"), svlogd's -tt stamp ("2026-12-03_09:00:41.12345",
 * UTC). Returns false when the line starts with none of them. */
bool nl_nodelog_line_time(const char *line, size_t len, int64_t now_ns, int64_t *ns);

/* The line filter of a query's options but tailLines. A line without a time
 * of its own (a continuation) has the time of the line before; a line before
 * any time is left out when a time option is set. */
typedef struct nl_nodelog_filter {
  const nl_nodelog_query_t *q;
  int64_t now_ns, boot_ns; /* boot_ns: when this boot began (boot=0) */
  bool have_time;
  int64_t time_ns;         /* the last line time seen */
} nl_nodelog_filter_t;

void nl_nodelog_filter_init(nl_nodelog_filter_t *f, const nl_nodelog_query_t *q, int64_t now_ns,
                            int64_t boot_ns);
/* Whether the line (without its '\n') passes; it also moves the time on. */
bool nl_nodelog_filter_line(nl_nodelog_filter_t *f, const char *line, size_t len);

#endif
