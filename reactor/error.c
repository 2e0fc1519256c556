#include "reactor/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"

int nl_err_setv(nl_err_t **err, int code, const char *fmt, va_list ap) {
  if (!err) return -1;
  nl_err_free(err);
  nl_err_t *e = nl_xmalloc(sizeof *e);
  e->code = code;
  if (vasprintf(&e->msg, fmt, ap) < 0) abort();
  *err = e;
  return -1;
}

int nl_err_set(nl_err_t **err, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nl_err_setv(err, code, fmt, ap);
  va_end(ap);
  return -1;
}

nl_err_t *nl_err_newf(int code, const char *fmt, ...) {
  nl_err_t *err = NULL;
  va_list ap;
  va_start(ap, fmt);
  nl_err_setv(&err, code, fmt, ap);
  va_end(ap);
  return err;
}

int nl_err_wrap(nl_err_t **err, const char *fmt, ...) {
  if (!err || !*err) return -1;
  char *ctx = NULL;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&ctx, fmt, ap) < 0) abort();
  va_end(ap);
  char *msg = nl_xasprintf("%s: %s", ctx, (*err)->msg);
  free(ctx);
  free((*err)->msg);
  (*err)->msg = msg;
  return -1;
}

void nl_err_free(nl_err_t **err) {
  if (!err || !*err) return;
  free((*err)->msg);
  free(*err);
  *err = NULL;
}

const char *nl_err_msg(const nl_err_t *err) {
  return err && err->msg ? err->msg : "";
}
