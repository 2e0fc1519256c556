/* Internal to `nanolet cri`: the state of one invocation, shared by the option
 * parser (cmd_cri.c) and the commands (cmd_cri_verbs.c). */
#ifndef NL_CMD_CRI_IMPL_H
#define NL_CMD_CRI_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "cri/conn.h"
#include "reactor/buf.h"

typedef struct nl_cmd_cri_ctx nl_cmd_cri_ctx_t;
typedef void (*nl_cmd_cri_step)(nl_cmd_cri_ctx_t *x);

/* One command: the options it takes (letters of the option table in
 * cmd_cri.c), its positional argument count, and its steps. */
typedef struct nl_cmd_cri_verb {
  const char *name;
  const char *opts;       /* allowed command options, e.g. "oqn" */
  int min_args, max_args; /* max -1: any, and what follows the first is a command */
  bool json_only;
  const char *args_help, *help;
  nl_cmd_cri_step start; /* starts the first call (from inside the loop's setup) */
  nl_cmd_cri_step after; /* runs after the loop ended when rc is 0; may be NULL */
} nl_cmd_cri_verb_t;

struct nl_cmd_cri_ctx {
  uv_loop_t loop;
  nl_cri_client_t client;
  const nl_cmd_cri_verb_t *verb;
  char **args; /* positional arguments after the command word (borrowed argv) */
  int nargs;
  bool json, all, quiet, no_trunc;
  long tail;            /* logs --tail; -1: all */
  bool follow;          /* logs -f: printed while the loop runs, not after */
  uint64_t timeout_ms;  /* per call */
  bool timeout_set;     /* --timeout given: exec passes it to ExecSync too */
  char *id;             /* the argument resolved to a full ID, owned */
  nl_cmd_cri_step next; /* what runs once id is resolved */
  char *log_path;       /* logs: the file to read after the loop, owned */
  nl_buf_t out, err;    /* written to stdout/stderr once the loop has ended */
  int rc;
  bool finished;
};

/* The command table, ending with a {NULL} row. */
extern const nl_cmd_cri_verb_t nl_cmd_cri__verbs[];

/* Ends the invocation with exit status rc: stops the client (the loop then
 * runs dry). Later calls are ignored: the first outcome wins. */
void nl_cmd_cri__finish(nl_cmd_cri_ctx_t *x, int rc);
/* Queues "nanolet cri: <command>: <message>" for stderr and finishes with 1. */
void nl_cmd_cri__fail(nl_cmd_cri_ctx_t *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
