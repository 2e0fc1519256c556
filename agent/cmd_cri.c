/* `nanolet cri`: options, usage and the driver. The invocation owns one loop
 * and one CRI client; a command is a chain of calls on it (cmd_cri_verbs.c),
 * and output is written only once the loop has run dry. */
#include "agent/cmd_cri.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cmd_cri_impl.h"
#include "reactor/duration.h"
#include "reactor/xalloc.h"

#define DEFAULT_ENDPOINT "unix:///run/containerd/containerd.sock"
#define DEFAULT_TIMEOUT_MS 10000
#define MAX_CONNECT_WAIT_MS 2000 /* a stopped runtime is reported after this */

typedef struct opt {
  char key;         /* letter used in nl_cmd_cri_verb_t.opts; upper case: global */
  const char *name; /* --name */
  char shrt;        /* -x, or 0 */
  bool arg;
  const char *help;
} opt_t;

static const opt_t opts[] = {
    {'R', "runtime-endpoint", 'r', true,
     "CRI endpoint (default $CONTAINER_RUNTIME_ENDPOINT, else " DEFAULT_ENDPOINT ")"},
    {'T', "timeout", 0, true, "deadline of each call, Go duration (default 10s)"},
    {'H', "help", 'h', false, "show this help"},
    {'o', "output", 'o', true, "output format: table (default) or json"},
    {'a', "all", 'a', false, "ps: show all containers, not only running ones"},
    {'q', "quiet", 'q', false, "pods, ps, images: print full IDs only"},
    {'n', "no-trunc", 0, false, "pods, ps, images: do not truncate IDs"},
    {'l', "tail", 0, true, "logs: print the last N lines only (default -1: all)"},
    {'f', "follow", 'f', false, "logs: keep printing new lines until the container stops"},
    {'t', "tty", 't', false, "exec: not supported"},
    {'i', "interactive", 'i', false, "exec: not supported"},
};
#define NOPTS (sizeof opts / sizeof *opts)

static void usage(FILE *f) {
  fprintf(f,
          "usage: nanolet cri [GLOBAL OPTIONS] COMMAND [OPTIONS] [ARGS]\n"
          "A small crictl for nodes that have none: talks CRI to the container runtime.\n\n"
          "Commands:\n");
  for (const nl_cmd_cri_verb_t *v = nl_cmd_cri__verbs; v->name; v++) {
    char head[64];
    snprintf(head, sizeof head, "%s %s", v->name, v->args_help);
    fprintf(f, "  %-46s %s\n", head, v->help);
  }
  fprintf(f, "\nOptions:\n");
  for (size_t i = 0; i < NOPTS; i++) {
    char head[64], sh[8] = "    ";
    if (opts[i].shrt) snprintf(sh, sizeof sh, "-%c, ", opts[i].shrt);
    snprintf(head, sizeof head, "%s--%s%s", sh, opts[i].name, opts[i].arg ? " VALUE" : "");
    fprintf(f, "  %-30s %s\n", head, opts[i].help);
  }
  fprintf(f,
          "\nExit status: 0 ok, 1 when the runtime or a call fails, 2 on usage errors;\n"
          "exec exits with the command's exit code.\n");
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "nanolet cri: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nRun 'nanolet cri --help' for usage.\n");
  va_end(ap);
  return 2;
}

static const opt_t *find_opt(const char *a, const char **val) {
  *val = NULL;
  if (a[1] == '-') {
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t n = eq ? (size_t)(eq - name) : strlen(name);
    for (size_t i = 0; i < NOPTS; i++)
      if (strlen(opts[i].name) == n && !strncmp(opts[i].name, name, n)) {
        if (eq) *val = eq + 1;
        return &opts[i];
      }
    return NULL;
  }
  for (size_t i = 0; i < NOPTS; i++)
    if (opts[i].shrt && a[1] == opts[i].shrt && (a[2] == 0 || a[2] == '=')) {
      if (a[2] == '=') *val = a + 3;
      return &opts[i];
    }
  return NULL;
}

typedef struct parsed {
  const char *endpoint;
  bool help;
} parsed_t;

/* Applies one option; returns 0 or 2 (usage error, already reported). */
static int apply(nl_cmd_cri_ctx_t *x, parsed_t *p, const opt_t *o, const char *a, const char *val) {
  nl_err_t *err = NULL;
  switch (o->key) {
    case 'R': p->endpoint = val; break;
    case 'T': {
      int64_t ns;
      if (nl_duration_parse(val, &ns, &err) < 0 || ns <= 0) {
        int rc = usage_error("invalid --timeout %s: %s", val,
                             err ? nl_err_msg(err) : "must be positive");
        nl_err_free(&err);
        return rc;
      }
      x->timeout_ms = (uint64_t)(ns + 999999) / 1000000;
      x->timeout_set = true;
      break;
    }
    case 'H': p->help = true; break;
    case 'o':
      if (strcmp(val, "json") && strcmp(val, "table"))
        return usage_error("unsupported output format %s (json or table)", val);
      if (x->verb->json_only && strcmp(val, "json"))
        return usage_error("%s: prints JSON only (-o json)", x->verb->name);
      x->json = !strcmp(val, "json");
      break;
    case 'a': x->all = true; break;
    case 'f': x->follow = true; break;
    case 'q': x->quiet = true; break;
    case 'n': x->no_trunc = true; break;
    case 'l': {
      char *end;
      long n = strtol(val, &end, 10);
      if (!*val || *end || n < -1)
        return usage_error("invalid --tail %s: want a number of lines", val);
      x->tail = n;
      break;
    }
    case 't':
    case 'i':
      return usage_error(
          "exec: %s is not supported: nanolet cri exec runs the command with ExecSync "
          "(no terminal, no stdin)",
          a);
  }
  return 0;
}

static int parse(nl_cmd_cri_ctx_t *x, parsed_t *p, int argc, char **argv) {
  x->args = nl_xcalloc((size_t)argc, sizeof *x->args);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool exec_cmd = x->verb && x->verb->max_args < 0 && x->nargs >= 1;
    if (exec_cmd || !strcmp(a, "--")) {
      /* exec: what follows the ID is the command, options and all (as crictl). */
      if (!strcmp(a, "--") && (!exec_cmd || x->nargs == 1)) i++;
      if (!x->verb) return usage_error("missing command before %s", a);
      while (i < argc) x->args[x->nargs++] = argv[i++];
      break;
    }
    if (a[0] == '-' && a[1]) {
      const char *val;
      const opt_t *o = find_opt(a, &val);
      bool global = o && o->key >= 'A' && o->key <= 'Z';
      if (!o || (!global && (!x->verb || !strchr(x->verb->opts, o->key))))
        return x->verb ? usage_error("%s: unknown option %s", x->verb->name, a)
                       : usage_error("unknown global option %s", a);
      if (o->arg && !val) {
        if (i + 1 >= argc) return usage_error("option %s needs a value", a);
        val = argv[++i];
      }
      if (!o->arg && val) return usage_error("option %s takes no value", a);
      int rc = apply(x, p, o, a, val);
      if (rc) return rc;
      continue;
    }
    if (!x->verb) {
      if (!strcmp(a, "help")) {
        p->help = true;
        continue;
      }
      for (const nl_cmd_cri_verb_t *v = nl_cmd_cri__verbs; v->name; v++)
        if (!strcmp(v->name, a)) x->verb = v;
      if (!x->verb) return usage_error("unknown command \"%s\"", a);
      continue;
    }
    x->args[x->nargs++] = argv[i];
  }
  if (p->help) return 0;
  if (!x->verb) return usage_error("missing command");
  if (x->nargs < x->verb->min_args || (x->verb->max_args >= 0 && x->nargs > x->verb->max_args))
    return usage_error("%s: wrong number of arguments (usage: nanolet cri %s%s%s)", x->verb->name,
                       x->verb->name, x->verb->args_help[0] ? " " : "", x->verb->args_help);
  return 0;
}

int nl_cmd_cri(int argc, char **argv) {
  nl_cmd_cri_ctx_t x;
  memset(&x, 0, sizeof x);
  x.timeout_ms = DEFAULT_TIMEOUT_MS;
  x.tail = -1;
  parsed_t p = {0};
  int rc = parse(&x, &p, argc, argv);
  if (rc || p.help) {
    if (!rc) usage(stdout);
    free(x.args);
    return rc;
  }
  const char *endpoint = p.endpoint;
  if (!endpoint || !*endpoint) endpoint = getenv("CONTAINER_RUNTIME_ENDPOINT");
  if (!endpoint || !*endpoint) endpoint = DEFAULT_ENDPOINT;

  uv_loop_init(&x.loop);
  nl_cri_opts_t o = {
      .timeout_ms = x.timeout_ms,
      .connect_wait_ms = x.timeout_ms < MAX_CONNECT_WAIT_MS ? x.timeout_ms : MAX_CONNECT_WAIT_MS,
  };
  nl_err_t *err = NULL;
  if (nl_cri_client_init(&x.client, &x.loop, endpoint, &o, &err) < 0) {
    rc = usage_error("--runtime-endpoint: %s", nl_err_msg(err));
    nl_err_free(&err);
    uv_loop_close(&x.loop);
    free(x.args);
    return rc;
  }
  x.verb->start(&x);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&x.loop) != 0) {
    nl_buf_puts(&x.err, "nanolet cri: internal error: loop closed with handles open\n");
    x.rc = 1;
  }
  fwrite(x.out.data ? x.out.data : "", 1, x.out.len, stdout);
  fflush(stdout);
  fwrite(x.err.data ? x.err.data : "", 1, x.err.len, stderr);
  if (x.rc == 0 && !x.err.len && x.verb->after) x.verb->after(&x);
  rc = x.rc;
  nl_buf_free(&x.out);
  nl_buf_free(&x.err);
  free(x.id);
  free(x.log_path);
  free(x.args);
  return rc;
}
