/* URL query strings and path segments as Go's net/url reads them. */
#ifndef NL_HTTP_QUERY_H
#define NL_HTTP_QUERY_H

#include <stdbool.h>
#include <stddef.h>

/* The first value of name in query ("a=1&b=x%20y"), percent-decoded with '+'
 * as a space (url.ParseQuery), or NULL when absent. "a" alone gives "".
 * Caller frees. A malformed escape gives NULL and sets *bad (may be NULL). */
char *nl_http_query_get(const char *query, const char *name, bool *bad);

/* Calls fn with every name=value pair of query, both decoded (borrowed for
 * the call), in order; a pair with a malformed escape or an empty name is
 * skipped, as Go's Request.FormValue does. */
typedef void (*nl_http_query_fn)(void *ctx, const char *name, const char *value);
void nl_http_query_each(const char *query, nl_http_query_fn fn, void *ctx);

/* Percent-decodes len bytes of s (a path segment: '+' stays). Returns NULL on
 * a malformed escape or a decoded NUL. Caller frees. */
char *nl_http_unescape(const char *s, size_t len);

#endif
