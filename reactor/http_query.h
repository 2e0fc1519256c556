/* URL query strings and path segments as Go's net/url reads them. */
#ifndef NL_HTTP_QUERY_H
#define NL_HTTP_QUERY_H

#include <stdbool.h>
#include <stddef.h>

/* The first value of name in query ("a=1&b=x%20y"), percent-decoded with '+'
 * as a space (url.ParseQuery), or NULL when absent. "a" alone gives "".
 * Caller frees. A malformed escape gives NULL and sets *bad (may be NULL). */
char *nl_http_query_get(const char *query, const char *name, bool *bad);

/* Percent-decodes len bytes of s (a path segment: '+' stays). Returns NULL on
 * a malformed escape or a decoded NUL. Caller frees. */
char *nl_http_unescape(const char *s, size_t len);

#endif
