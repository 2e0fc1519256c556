/* Internal to `nanolet cri`: logs -f. */
#ifndef NL_CMD_CRI_FOLLOW_H
#define NL_CMD_CRI_FOLLOW_H

#include "agent/cmd_cri_impl.h"

typedef struct nl_cmd_cri_follow nl_cmd_cri_follow_t;

/* Prints x->log_path (the last x->tail lines of what is there, then every new
 * line) until the container x->id is no longer running or is gone, then
 * finishes x with 0; with 1 and a message in x->err when the file cannot be
 * read. Owns its state and frees it before finishing x. */
void nl_cmd_cri__follow_start(nl_cmd_cri_ctx_t *x);

#endif
