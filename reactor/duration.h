/* Go-style durations ("20s", "1m30s", "1.5h", "300ms"), as time.ParseDuration and
 * Duration.String, because the kubelet's flags and config file use them. */
#ifndef NL_DURATION_H
#define NL_DURATION_H

#include <stddef.h>
#include <stdint.h>

#include "reactor/error.h"

#define NL_NS_PER_MS INT64_C(1000000)
#define NL_NS_PER_S INT64_C(1000000000)

/* Parses s into nanoseconds. Returns 0, or -1 with *err naming what is wrong. */
int nl_duration_parse(const char *s, int64_t *out_ns, nl_err_t **err);
/* Writes Go's rendering of ns ("1m0s", "1.5s", "0s") into buf; returns buf. */
char *nl_duration_format(int64_t ns, char *buf, size_t len);

#endif
