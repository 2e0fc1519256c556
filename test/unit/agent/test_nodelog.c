/* The node log query (agent/nodelog.c): its parsing and validation as
 * upstream's, the files a service's log is looked for in, the containment
 * of every open in the log directory, line times and the option filters;
 * then /logs/ (agent/kserver_nodelog.c) on a real HTTP server over a log
 * directory of the test's own. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/crilog.h"
#include "agent/kserver_nodelog.h"
#include "agent/nodelog.h"
#include "file_tree.h"
#include "reactor/http_client.h"
#include "reactor/http_parse.h"
#include "reactor/xalloc.h"

#define S 1000000000LL

/* parse: its return, and the message's start when it is an error */
static int parse(const char *query, nl_nodelog_query_t *q, const char *want_msg) {
  char *msg = NULL;
  int rc = nl_nodelog_query_parse(query, q, &msg);
  if (want_msg) {
    if (!msg || strstr(msg, want_msg) == NULL) fail_msg("%s: message %s, want %s", query, msg, want_msg);
  }
  free(msg);
  return rc;
}

static void query_parse(void **state) {
  nl_nodelog_query_t q;
  /* No query: the path's file. */
  assert_int_equal(parse("", &q, NULL), 1);
  assert_int_equal(parse("foo=bar", &q, NULL), 1);
  /* Services, options. */
  assert_int_equal(parse("query=kubelet&query=containerd&tailLines=3&boot=0&pattern=c.nt"
                         "&sinceTime=2026-12-03T09:00:00Z&untilTime=2026-12-03T10:00:00Z",
                         &q, NULL),
                   0);
  assert_int_equal(q.n_services, 2);
  assert_string_equal(q.services[0], "kubelet");
  assert_string_equal(q.services[1], "containerd");
  assert_null(q.file);
  assert_true(q.has_tail && q.tail == 3);
  assert_true(q.has_boot && q.boot == 0);
  assert_true(q.has_since && q.has_until);
  assert_int_equal(q.until_ns - q.since_ns, 3600 * S);
  assert_string_equal(q.pattern, "c.nt");
  assert_true(nl_nodelog_query_filters(&q));
  nl_nodelog_query_free(&q);
  /* A '/' makes it a file; blank queries are dropped. */
  assert_int_equal(parse("query=/foo.log&query=%20", &q, NULL), 0);
  assert_string_equal(q.file, "/foo.log");
  assert_int_equal(q.n_services, 0);
  assert_false(nl_nodelog_query_filters(&q));
  nl_nodelog_query_free(&q);
  /* 400: does not parse. */
  assert_int_equal(parse("query", &q, "query: Invalid value: []string{\"\"}: may not be empty"), 400);
  assert_int_equal(parse("query=%20%20", &q, "may not be empty"), 400);
  assert_int_equal(parse("query=kubelet&sinceTime=yesterday", &q, "sinceTime: Invalid value"), 400);
  assert_int_equal(parse("query=kubelet&untilTime=2026-12-03", &q, "untilTime"), 400);
  assert_int_equal(parse("query=kubelet&tailLines=3x", &q, "tailLines"), 400);
  assert_int_equal(parse("query=kubelet&boot=-", &q, "boot"), 400);
  assert_int_equal(parse("query=kubelet&tailLines=99999999999999999999", &q, "tailLines"), 400);
  /* 406: parses, not valid. */
  assert_int_equal(parse("query=kube%20let", &q, "input contains unsupported characters"), 406);
  assert_int_equal(parse("query=kubelet%3Breboot", &q, "unsupported characters"), 406);
  assert_int_equal(parse("query=$(id)", &q, "unsupported characters"), 406);
  assert_int_equal(parse("query=a&query=b&query=c&query=d&query=e", &q, "Too many: 5"), 406);
  assert_int_equal(parse("tailLines=3", &q, "query: Required value"), 406);
  assert_int_equal(parse("query=/a.log&query=kubelet", &q, "cannot specify a file and service"), 406);
  assert_int_equal(parse("query=/a.log&query=/b.log", &q, "more than one file"), 406);
  assert_int_equal(parse("query=/a.log&tailLines=1", &q, "cannot specify file with options"), 406);
  assert_int_equal(parse("query=kubelet&boot=1", &q, "boot: Invalid value: \"1\": must be less than 1"),
                   406);
  assert_int_equal(parse("query=kubelet&tailLines=-1", &q, "tailLines"), 406);
  assert_int_equal(parse("query=kubelet&tailLines=100001", &q, "tailLines"), 406);
  assert_int_equal(parse("query=kubelet&sinceTime=2026-12-03T10:00:00Z&untilTime=2026-12-03T09:00:00Z",
                         &q, "must be after `sinceTime`"),
                   406);
  assert_int_equal(parse("query=kubelet&pattern=(a", &q, "pattern: Invalid value"), 406);
  assert_int_equal(parse("query=kubelet&pattern=(a)%5C1", &q, "back-references"), 406);
  assert_int_equal(parse("query=kubelet&pattern=((a%7B100%7D)%7B100%7D)", &q, "multiply"), 406);
  /* Several errors at once, as a list. */
  assert_int_equal(parse("query=a%20b&boot=1", &q, "[query: Invalid value"), 406);
}

static void candidates(void **state) {
  char *c[NL_NODELOG_MAX_CANDIDATES];
  size_t n = nl_nodelog_candidates("containerd", "nanolet.log", c);
  const char *want[] = {"containerd", "containerd.log", "containerd/containerd.log"};
  assert_int_equal(n, 3);
  for (size_t i = 0; i < n; i++) {
    assert_string_equal(c[i], want[i]);
    free(c[i]);
  }
  /* "kubelet" is this node agent: its own log first, then both names. */
  n = nl_nodelog_candidates("kubelet", "nanolet-x.log", c);
  const char *want2[] = {"nanolet-x.log", "kubelet",           "kubelet.log",        "kubelet/kubelet.log",
                         "nanolet",       "nanolet.log",       "nanolet/nanolet.log", "nanolet/current"};
  assert_int_equal(n, 8);
  for (size_t i = 0; i < n; i++) {
    assert_string_equal(c[i], want2[i]);
    free(c[i]);
  }
  n = nl_nodelog_candidates("nanolet", NULL, c);
  assert_int_equal(n, 7);
  assert_string_equal(c[0], "nanolet");
  assert_string_equal(c[6], "nanolet/current");
  for (size_t i = 0; i < n; i++) free(c[i]);
}

static char *make_tree(void) {
  char *root = nl_xstrdup("/tmp/nl-nodelog.XXXXXX");
  assert_non_null(mkdtemp(root));
  put_file(root, "log/kubelet.log", "I1203 09:00:00.000000 1 a.go:1] kubelet one\n");
  put_file(root, "log/svc/svc.log", "svc's\n");
  put_file(root, "secret", "outside\n");
  char p[256], t[256];
  snprintf(p, sizeof p, "%s/log/link", root);
  snprintf(t, sizeof t, "%s/secret", root);
  assert_int_equal(symlink(t, p), 0);
  snprintf(p, sizeof p, "%s/log/up", root);
  assert_int_equal(symlink("..", p), 0);
  snprintf(p, sizeof p, "%s/log/inside", root);
  assert_int_equal(symlink("kubelet.log", p), 0);
  return root;
}

static void open_beneath(void **state) {
  char *root = make_tree();
  char p[256];
  snprintf(p, sizeof p, "%s/log", root);
  int dir = open(p, O_RDONLY | O_DIRECTORY);
  assert_true(dir >= 0);
  int fd = nl_nodelog_open_beneath(dir, "kubelet.log");
  assert_true(fd >= 0);
  close(fd);
  fd = nl_nodelog_open_beneath(dir, "//svc/./svc.log"); /* a leading '/' is the directory's */
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(nl_nodelog_open_beneath(dir, "nope.log"), -ENOENT);
  assert_int_equal(nl_nodelog_open_beneath(dir, "../secret"), -EACCES);
  assert_int_equal(nl_nodelog_open_beneath(dir, "svc/../../secret"), -EACCES);
  assert_int_equal(nl_nodelog_open_beneath(dir, "link"), -ELOOP);
  assert_int_equal(nl_nodelog_open_beneath(dir, "up/secret"), -ELOOP);
  assert_int_equal(nl_nodelog_open_beneath(dir, "inside"), -ELOOP); /* links are refused, all */
  assert_int_equal(nl_nodelog_open_beneath(dir, "kubelet.log/x"), -ENOTDIR);
  close(dir);
  rm_tree(root);
}

static bool at(const char *rfc3339, int64_t *ns) {
  return nl_crilog_parse_time(rfc3339, strlen(rfc3339), ns);
}

static void line_times(void **state) {
  int64_t now, ns;
  assert_true(at("2026-12-03T12:00:00Z", &now));
  assert_true(nl_nodelog_line_time("2026-12-03T09:00:41.5Z msg", 26, now, &ns));
  assert_int_equal(now - ns, (3 * 3600 - 41) * S - S / 2);
  assert_true(nl_nodelog_line_time("2026-12-03_09:00:41.50000 msg", 29, now, &ns));
  int64_t sv = ns;
  assert_true(nl_nodelog_line_time("2026-12-03T09:00:41.5Z", 22, now, &ns));
  assert_int_equal(sv, ns);
  /* klog: local time, this year unless that is more than a day ahead. */
  setenv("TZ", "UTC", 1);
  tzset();
  assert_true(nl_nodelog_line_time("I1203 09:00:41.500000 123 main.c:1] x", 37, now, &ns));
  assert_int_equal(sv, ns);
  assert_true(nl_nodelog_line_time("E1231 23:00:00.000000 1 x.c:1] x", 32, now, &ns));
  assert_true(ns < now); /* last year's */
  assert_false(nl_nodelog_line_time("  at frame 3", 12, now, &ns));
  assert_false(nl_nodelog_line_time("X1203 09:00:41.500000", 21, now, &ns));
  assert_false(nl_nodelog_line_time("", 0, now, &ns));
}

static void filter(void **state) {
  setenv("TZ", "UTC", 1);
  tzset();
  const char *lines[] = {
      "before any time",
      "I1203 08:00:00.000000 1 a.c:1] booting",
      "I1203 09:00:00.000000 1 a.c:1] container one",
      "  continued",
      "W1203 10:00:00.000000 1 a.c:1] pod two",
  };
  const struct {
    const char *query;
    const char *keep; /* a letter per line: 1 kept */
  } cases[] = {
      {"query=kubelet", "11111"},
      {"query=kubelet&pattern=contain|pod", "00101"},
      {"query=kubelet&sinceTime=2026-12-03T09:00:00Z", "00111"},
      {"query=kubelet&untilTime=2026-12-03T09:30:00Z", "01110"},
      {"query=kubelet&boot=0", "00111"},  /* this boot began at 08:30 */
      {"query=kubelet&boot=-1", "00000"}, /* the server says why */
      {"query=kubelet&sinceTime=2026-12-03T09:00:00Z&pattern=one$|%5E%20%20cont", "00110"},
  };
  int64_t now, boot;
  assert_true(at("2026-12-03T12:00:00Z", &now));
  assert_true(at("2026-12-03T08:30:00Z", &boot));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nl_nodelog_query_t q;
    assert_int_equal(parse(cases[i].query, &q, NULL), 0);
    nl_nodelog_filter_t f;
    nl_nodelog_filter_init(&f, &q, now, boot);
    char got[6] = {0};
    for (int l = 0; l < 5; l++)
      got[l] = nl_nodelog_filter_line(&f, lines[l], strlen(lines[l])) ? '1' : '0';
    if (strcmp(got, cases[i].keep)) fail_msg("%s: kept %s, want %s", cases[i].query, got, cases[i].keep);
    nl_nodelog_query_free(&q);
  }
}

/* ---- /logs/ over HTTP ----------------------------------------------------- */

typedef struct world {
  uv_loop_t loop;
  nl_http_server_t srv;
  nl_kserver_nodelog_t nodelog;
  int status;
  char *ctype;
  nl_buf_t body;
  bool done;
} world_t;

static void route(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  static const char *const groups[] = {NULL};
  nl_kserver_user_t u = {"tester", "", groups};
  nl_kserver_nodelog_handler(ctx, req, &u, resp);
}

static void done(void *ctx, nl_http_response_t *resp, const nl_err_t *err) {
  world_t *w = ctx;
  assert_null(err);
  w->status = resp->status;
  const char *ct = nl_http_headers_get(&resp->headers, "Content-Type");
  w->ctype = ct ? nl_xstrdup(ct) : NULL;
  nl_buf_append(&w->body, resp->body, resp->body_len);
  nl_buf_puts(&w->body, "");
  w->done = true;
  nl_http_server_stop(&w->srv, NULL, NULL);
}

static void get(const char *logdir, bool query, const char *target, world_t *w) {
  memset(w, 0, sizeof(*w));
  assert_int_equal(uv_loop_init(&w->loop), 0);
  w->nodelog = (nl_kserver_nodelog_t){.loop = &w->loop, .log_dir = logdir, .query = query};
  nl_err_t *err = NULL;
  assert_int_equal(nl_http_server_init(&w->srv, &w->loop, NULL, &err), 0);
  nl_http_server_route(&w->srv, "GET", "/logs/", route, &w->nodelog);
  assert_int_equal(nl_http_server_listen(&w->srv, "127.0.0.1", 0, &err), 0);
  char url[512];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", nl_http_server_port(&w->srv), target);
  nl_http_request_opts_t o = {.url = url, .timeout_ms = 10000};
  nl_http_request(&w->loop, &o, done, w);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_true(w->done);
  assert_int_equal(uv_loop_close(&w->loop), 0);
}

static void server(void **state) {
  char *root = make_tree();
  char logdir[256];
  snprintf(logdir, sizeof logdir, "%s/log", root);
  /* A long log: 3000 numbered lines, a klog header on each. */
  nl_buf_t big = NL_BUF_INIT;
  for (int i = 1; i <= 3000; i++)
    nl_buf_printf(&big, "I1203 09:%02d:%02d.000000 1 c.c:1] line %d\n", i / 60 % 60, i % 60, i);
  put_file(root, "log/containerd.log", big.data);
  const struct {
    bool query;
    const char *target;
    int status;
    const char *body; /* the whole body; NULL: see contains */
    const char *contains;
  } cases[] = {
      {true, "/logs/?query=kubelet", 200, "I1203 09:00:00.000000 1 a.go:1] kubelet one\n", NULL},
      {true, "/logs/?query=svc", 200, "svc's\n", NULL},
      {true, "/logs/?query=nothere", 200, "\nlog not found for nothere\n", NULL},
      {true, "/logs/?query=containerd&tailLines=2", 200,
       "I1203 09:49:59.000000 1 c.c:1] line 2999\nI1203 09:50:00.000000 1 c.c:1] line 3000\n", NULL},
      {true, "/logs/?query=containerd&pattern=line%20(7|77)$&tailLines=5", 200,
       "I1203 09:00:07.000000 1 c.c:1] line 7\nI1203 09:01:17.000000 1 c.c:1] line 77\n", NULL},
      {true, "/logs/?query=containerd&boot=-1", 200,
       "\nboot -1: the log file of containerd does not tell earlier boots apart\n", NULL},
      {true, "/logs/?query=kubelet&query=svc", 200,
       "I1203 09:00:00.000000 1 a.go:1] kubelet one\nsvc's\n", NULL},
      {true, "/logs/?query=/svc/svc.log", 200, "svc's\n", NULL},
      {true, "/logs/?query=/../secret", 406,
       "query: Invalid value: []string{\"/../secret\"}: Permission denied\n",
       NULL},
      /* the link refused for what it is (ELOOP: its text is the libc's) */
      {true, "/logs/?query=/link", 406, NULL, "query: Invalid value: []string{\"/link\"}: "},
      {true, "/logs/?query=/nope.log", 406, NULL, "No such file or directory"},
      {true, "/logs/?query=a%2Fb&tailLines=1", 406, NULL, "cannot specify file with options"},
      {true, "/logs/?query=", 400, "query: Invalid value: []string{\"\"}: may not be empty\n", NULL},
      {true, "/logs/svc/?query=svc", 406, "path not allowed in query mode\n", NULL},
      {true, "/logs/kubelet.log", 200, "I1203 09:00:00.000000 1 a.go:1] kubelet one\n", NULL},
      {true, "/logs/%2E%2E/secret", 403, "403 Forbidden\n", NULL},
      {true, "/logs/link", 403, "403 Forbidden\n", NULL},
      {true, "/logs/up/secret", 403, "403 Forbidden\n", NULL},
      {true, "/logs/nope", 404, "404 page not found\n", NULL},
      {true, "/logs/", 200, NULL, "<a href=\"svc/\">svc/</a>\n"},
      /* Without enableSystemLogQuery the query is not looked at. */
      {false, "/logs/?query=kubelet", 200, NULL, "<a href=\"kubelet.log\">kubelet.log</a>"},
      {false, "/logs/svc/svc.log?query=x", 200, "svc's\n", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    world_t w;
    get(logdir, cases[i].query, cases[i].target, &w);
    if (w.status != cases[i].status)
      fail_msg("%s: %d, want %d: %s", cases[i].target, w.status, cases[i].status, w.body.data);
    if (cases[i].body && strcmp(w.body.data, cases[i].body))
      fail_msg("%s: body %s, want %s", cases[i].target, w.body.data, cases[i].body);
    if (cases[i].contains && !strstr(w.body.data, cases[i].contains))
      fail_msg("%s: body %s, want %s in it", cases[i].target, w.body.data, cases[i].contains);
    if (cases[i].contains && cases[i].contains[0] == '<')
      assert_string_equal(w.ctype, "text/html; charset=utf-8");
    free(w.ctype);
    nl_buf_free(&w.body);
  }
  /* The whole long file, as it is, through more than one work item. */
  world_t w;
  get(logdir, true, "/logs/?query=containerd", &w);
  assert_int_equal(w.status, 200);
  assert_int_equal(w.body.len, big.len);
  assert_memory_equal(w.body.data, big.data, big.len);
  free(w.ctype);
  nl_buf_free(&w.body);
  nl_buf_free(&big);
  rm_tree(root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(query_parse), cmocka_unit_test(candidates), cmocka_unit_test(open_beneath),
      cmocka_unit_test(line_times),  cmocka_unit_test(filter),     cmocka_unit_test(server),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
