/* The CRI messages (cri/api.pb-c.h, generated from api.proto), for whoever
 * reaches their fields. musl's <stdio.h> defines stdin, stdout and stderr as
 * (stdin), (stdout) and (stderr), so the fields of those names
 * (ExecSyncResponse.stdout, ContainerConfig.stdin, ExecRequest.stderr) could
 * not be reached as r->stdout. The objects keep their names: without the
 * macros, stdout is still stdout. */
#ifndef NL_CRI_API_H
#define NL_CRI_API_H

#include <stdio.h>

#include "cri/api.pb-c.h"

#undef stdin
#undef stdout
#undef stderr

#endif
