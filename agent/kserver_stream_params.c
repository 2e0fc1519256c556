/* The request side of /exec, /attach and /portForward: path and query as
 * upstream reads them, and the head forwarded to the runtime. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/kserver_stream.h"
#include "reactor/buf.h"
#include "reactor/http_query.h"
#include "reactor/xalloc.h"

typedef struct query_ctx {
  nl_stream_params_t *p;
  char *ports_bad; /* the first port value that failed, owned */
  bool ports_seen;
} query_ctx_t;

static void add_port_list(query_ctx_t *c, const char *v) {
  nl_stream_params_t *p = c->p;
  c->ports_seen = true;
  if (!*v) {
    if (!c->ports_bad) c->ports_bad = nl_xstrdup("");
    return;
  }
  for (const char *s = v; !c->ports_bad;) {
    char *end;
    errno = 0;
    unsigned long port = strtoul(s, &end, 10);
    if (end == s || (*end && *end != ',') || errno || port > 65535 || port < 1 || *s == '-' ||
        *s == '+') {
      c->ports_bad = nl_xstrdup(v);
      return;
    }
    p->ports = nl_xrealloc(p->ports, (p->n_ports + 1) * sizeof *p->ports);
    p->ports[p->n_ports++] = (int)port;
    if (!*end) break;
    s = end + 1;
  }
}

static void on_pair(void *ctx, const char *k, const char *v) {
  query_ctx_t *c = ctx;
  nl_stream_params_t *p = c->p;
  if (strcmp(k, "command") == 0) {
    p->cmd = nl_xrealloc(p->cmd, (p->n_cmd + 2) * sizeof *p->cmd);
    p->cmd[p->n_cmd++] = nl_xstrdup(v);
    p->cmd[p->n_cmd] = NULL;
  } else if (strcmp(k, "port") == 0) {
    add_port_list(c, v);
  }
}

/* url.Values.Get(name) == "1" */
static bool flag(const char *query, const char *name) {
  char *v = nl_http_query_get(query, name, NULL);
  bool on = v && strcmp(v, "1") == 0;
  free(v);
  return on;
}

/* Splits "a/b/c" into at most 4 decoded segments. Returns the count, or -1. */
static int segments(const char *path, char *seg[4]) {
  int n = 0;
  for (const char *s = path; *s && n <= 4; n++) {
    size_t len = strcspn(s, "/");
    if (n == 4 || len == 0 || !(seg[n] = nl_http_unescape(s, len))) {
      for (int i = 0; i < n; i++) free(seg[i]);
      return -1;
    }
    s += len;
    if (*s) s++;
  }
  return n;
}

int nl_stream_params_parse(nl_stream_params_t *p, nl_stream_kind_t kind, const char *path,
                           const char *query, bool websocket, char **msg) {
  memset(p, 0, sizeof *p);
  *msg = NULL;
  char *seg[4] = {0};
  int n = segments(path, seg);
  bool pf = kind == NL_STREAM_PORT_FORWARD;
  if (pf ? n < 2 || n > 3 : n < 3) {
    for (int i = 0; i < n; i++) free(seg[i]);
    *msg = nl_xstrdup("404 page not found");
    return 404;
  }
  p->ns = seg[0];
  p->pod = seg[1];
  if (pf) {
    p->uid = n == 3 ? seg[2] : NULL;
  } else {
    p->uid = n == 4 ? seg[2] : NULL;
    p->container = seg[n - 1];
  }
  query_ctx_t c = {.p = p};
  nl_http_query_each(query, on_pair, &c);
  if (pf) {
    int status = 0;
    if (websocket && !c.ports_seen) {
      *msg = nl_xstrdup("query parameter \"port\" is required");
    } else if (websocket && c.ports_bad && !*c.ports_bad) {
      *msg = nl_xstrdup("query parameter \"port\" cannot be empty");
    } else if (websocket && c.ports_bad) {
      *msg = nl_xasprintf("unable to parse \"%s\" as a port", c.ports_bad);
    }
    if (!websocket) { /* SPDY names its ports in the streams */
      free(p->ports);
      p->ports = NULL;
      p->n_ports = 0;
    }
    free(c.ports_bad);
    if (*msg) status = 400, nl_stream_params_free(p);
    return status;
  }
  free(c.ports_bad);
  p->tty = flag(query, "tty");
  p->in = flag(query, "input");
  p->out = flag(query, "output");
  p->err = flag(query, "error") && !p->tty; /* no stderr with a tty */
  if (!p->in && !p->out && !p->err) {
    *msg = nl_xstrdup("you must specify at least 1 of stdin, stdout, stderr");
    nl_stream_params_free(p);
    return 400;
  }
  return 0;
}

void nl_stream_params_free(nl_stream_params_t *p) {
  free(p->ns);
  free(p->pod);
  free(p->uid);
  free(p->container);
  for (size_t i = 0; i < p->n_cmd; i++) free(p->cmd[i]);
  free(p->cmd);
  free(p->ports);
  memset(p, 0, sizeof *p);
}

char *nl_stream_forward_head(const nl_http_req_t *req, const char *host_port, const char *target) {
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_printf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", req->method, target, host_port);
  for (size_t i = 0; i < req->headers->n; i++) {
    const nl_http_header_t *h = &req->headers->v[i];
    if (strcasecmp(h->name, "Host") == 0 || strcasecmp(h->name, "Authorization") == 0) continue;
    nl_buf_printf(&b, "%s: %s\r\n", h->name, h->value);
  }
  nl_buf_puts(&b, "\r\n");
  return nl_buf_steal(&b);
}
