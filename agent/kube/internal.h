/* Shared inside agent/kube/ only. */
#ifndef NL_KUBE_INTERNAL_H
#define NL_KUBE_INTERNAL_H

#include "agent/kube/status.h"
#include "reactor/tree.h"

typedef struct nl__kube_status {
  int code;                /* Status.code; 0 when absent */
  nl_kube_reason_t reason; /* the reason sent, else the one code implies */
  const char *message;     /* NULL when absent or empty; points into the tree */
} nl__kube_status_t;

/* Reads a metav1.Status from a parsed object; -1 when obj is not one (kind). */
int nl__kube_status_read(const nl_tnode_t *obj, nl__kube_status_t *out);

#endif
