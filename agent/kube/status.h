/* metav1.Status, the apiserver's error body: its reason as an enum callers can
 * branch on (as apimachinery's errors.IsNotFound, IsConflict, IsGone, ...), and
 * nl_kube_status_err() (declared in client.h) that turns a failed response into an
 * nl_err_t with client-go's messages. */
#ifndef NL_KUBE_STATUS_H
#define NL_KUBE_STATUS_H

#include "agent/kube/client.h"

typedef enum nl_kube_reason {
  NL_KUBE_REASON_UNKNOWN = 0,
  NL_KUBE_REASON_UNAUTHORIZED,
  NL_KUBE_REASON_FORBIDDEN,
  NL_KUBE_REASON_NOT_FOUND,
  NL_KUBE_REASON_ALREADY_EXISTS,
  NL_KUBE_REASON_CONFLICT,
  NL_KUBE_REASON_GONE,
  NL_KUBE_REASON_EXPIRED, /* "Expired": a resourceVersion too old (also means re-list) */
  NL_KUBE_REASON_INVALID,
  NL_KUBE_REASON_BAD_REQUEST,
  NL_KUBE_REASON_METHOD_NOT_ALLOWED,
  NL_KUBE_REASON_NOT_ACCEPTABLE,
  NL_KUBE_REASON_REQUEST_ENTITY_TOO_LARGE,
  NL_KUBE_REASON_UNSUPPORTED_MEDIA_TYPE,
  NL_KUBE_REASON_TOO_MANY_REQUESTS,
  NL_KUBE_REASON_INTERNAL_ERROR,
  NL_KUBE_REASON_SERVICE_UNAVAILABLE,
  NL_KUBE_REASON_TIMEOUT,        /* "Timeout" (504) */
  NL_KUBE_REASON_SERVER_TIMEOUT, /* "ServerTimeout": retry later */
} nl_kube_reason_t;

/* The reason of a failed response: the Status body's reason when it names one we
 * know, else the one its HTTP code implies (upstream's Is* helpers do the same
 * for an unknown reason: 404 is NotFound, 409 Conflict, 410 Gone, ...). */
nl_kube_reason_t nl_kube_status_reason(const nl_kube_response_t *resp);
/* "Forbidden", "NotFound", ...; "" for NL_KUBE_REASON_UNKNOWN. */
const char *nl_kube_reason_name(nl_kube_reason_t r);
/* The enum for a reason as sent ("AlreadyExists"); UNKNOWN for anything else. */
nl_kube_reason_t nl_kube_reason_parse(const char *s, size_t len);
/* The reason an HTTP code implies when the server named none. */
nl_kube_reason_t nl_kube_reason_for_code(int code);

#endif
