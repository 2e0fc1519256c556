/* The one error contract (as crun's libcrun_error_t): a function that can fail
 * takes `nl_err_t **err`, returns a negative value, and fills *err with an
 * allocated error. Callers add context on the way up with nl_err_wrap(), and the
 * error is printed once, at the top, then released with nl_err_free(). */
#ifndef NL_ERROR_H
#define NL_ERROR_H

#include <stdarg.h>

typedef struct nl_err {
  int code;  /* a category: an errno value, a gRPC status, or NL_E* below */
  char *msg; /* owned, never NULL */
} nl_err_t;

/* Categories that are not errno values. gRPC codes are kept as they are (1..16)
 * by the CRI client, so a code means what its producer says it means. */
enum {
  NL_EINVAL = 1000, /* bad input: a manifest, a flag, a config field */
  NL_ERUNTIME,      /* the container runtime answered with an error */
  NL_ETIMEOUT,
  NL_ECLOSED,       /* the owner was stopped while the call was in flight */
};

/* Sets *err (if err is not NULL; an existing error there is freed) and returns -1. */
int nl_err_set(nl_err_t **err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int nl_err_setv(nl_err_t **err, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* A new error (owned by the caller), for a function that takes one. */
nl_err_t *nl_err_newf(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes "<context>: " to (*err)->msg and returns -1. A NULL err or *err is
 * left alone. */
int nl_err_wrap(nl_err_t **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frees *err and sets it to NULL. */
void nl_err_free(nl_err_t **err);

/* The message, or "" when there is none. */
const char *nl_err_msg(const nl_err_t *err);

#define nl_cleanup_err __attribute__((cleanup(nl_err_free)))

#endif
