/* The node manager's runtime query over the CRI client (nl_node_deps_t's
 * query_runtime): Status, then Version, then ListImages (images largest
 * first, repo digests then repo tags as upstream's names). A failed call leaves
 * its part unset (status_ok, runtime_name, images_ok). */
#ifndef NL_MANAGERS_NODE_CRI_H
#define NL_MANAGERS_NODE_CRI_H

#include "managers/node.h"

/* cri is the nl_cri_client_t; done runs once, from a CRI completion. */
void nl_node_cri_query(void *cri, nl_node_runtime_done done, void *done_ctx);

#endif
