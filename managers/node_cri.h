/* The node manager's runtime query over the CRI client (nl_node_deps_t's
 * query_runtime): Status, then Version, then ListImages (images largest
 * first, repo digests then repo tags as upstream's names). A failed call leaves
 * its part unset (status_ok, runtime_name, images_ok). */
#ifndef NL_MANAGERS_NODE_CRI_H
#define NL_MANAGERS_NODE_CRI_H

#include "managers/node.h"

/* cri is the nl_cri_client_t; done runs once, from a CRI completion. */
void nl_node_cri_query(void *cri, nl_node_runtime_done done, void *done_ctx);

/* Sorts images as upstream's sliceutils.ByImageSize: largest first, equal sizes
 * by runtime id (ids[i] is images[i]'s), descending, so that the list is the
 * same from one status round to the next whatever order the runtime lists
 * them in. */
void nl_node_images_sort(nl_node_image_t *images, const char *const *ids, size_t n);

#endif
