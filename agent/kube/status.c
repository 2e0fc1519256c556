/* Failed responses to nl_err_t, as client-go's transformResponse: a Status body
 * gives its message; anything else gets apimachinery's NewGenericServerResponse
 * wording for the HTTP code. */
#include "agent/kube/internal.h"

#include <stdlib.h>

#include <stdio.h>
#include <string.h>

#include "agent/kube/pb.h"

/* client-go's maxUnstructuredResponseTextBytes: how much of a non-Status body
 * reaches a message. */
#define MAX_TEXT 2048

static const char *const names[] = {
    [NL_KUBE_REASON_UNKNOWN] = "",
    [NL_KUBE_REASON_UNAUTHORIZED] = "Unauthorized",
    [NL_KUBE_REASON_FORBIDDEN] = "Forbidden",
    [NL_KUBE_REASON_NOT_FOUND] = "NotFound",
    [NL_KUBE_REASON_ALREADY_EXISTS] = "AlreadyExists",
    [NL_KUBE_REASON_CONFLICT] = "Conflict",
    [NL_KUBE_REASON_GONE] = "Gone",
    [NL_KUBE_REASON_EXPIRED] = "Expired",
    [NL_KUBE_REASON_INVALID] = "Invalid",
    [NL_KUBE_REASON_BAD_REQUEST] = "BadRequest",
    [NL_KUBE_REASON_METHOD_NOT_ALLOWED] = "MethodNotAllowed",
    [NL_KUBE_REASON_NOT_ACCEPTABLE] = "NotAcceptable",
    [NL_KUBE_REASON_REQUEST_ENTITY_TOO_LARGE] = "RequestEntityTooLarge",
    [NL_KUBE_REASON_UNSUPPORTED_MEDIA_TYPE] = "UnsupportedMediaType",
    [NL_KUBE_REASON_TOO_MANY_REQUESTS] = "TooManyRequests",
    [NL_KUBE_REASON_INTERNAL_ERROR] = "InternalError",
    [NL_KUBE_REASON_SERVICE_UNAVAILABLE] = "ServiceUnavailable",
    [NL_KUBE_REASON_TIMEOUT] = "Timeout",
    [NL_KUBE_REASON_SERVER_TIMEOUT] = "ServerTimeout",
};

const char *nl_kube_reason_name(nl_kube_reason_t r) {
  return (size_t)r < sizeof names / sizeof names[0] ? names[r] : "";
}

nl_kube_reason_t nl_kube_reason_parse(const char *s, size_t len) {
  for (size_t i = 1; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return (nl_kube_reason_t)i;
  return NL_KUBE_REASON_UNKNOWN;
}

nl_kube_reason_t nl_kube_reason_for_code(int code) {
  switch (code) {
  case 400: return NL_KUBE_REASON_BAD_REQUEST;
  case 401: return NL_KUBE_REASON_UNAUTHORIZED;
  case 403: return NL_KUBE_REASON_FORBIDDEN;
  case 404: return NL_KUBE_REASON_NOT_FOUND;
  case 405: return NL_KUBE_REASON_METHOD_NOT_ALLOWED;
  case 406: return NL_KUBE_REASON_NOT_ACCEPTABLE;
  case 409: return NL_KUBE_REASON_CONFLICT;
  case 410: return NL_KUBE_REASON_GONE;
  case 413: return NL_KUBE_REASON_REQUEST_ENTITY_TOO_LARGE;
  case 415: return NL_KUBE_REASON_UNSUPPORTED_MEDIA_TYPE;
  case 422: return NL_KUBE_REASON_INVALID;
  case 429: return NL_KUBE_REASON_TOO_MANY_REQUESTS;
  case 503: return NL_KUBE_REASON_SERVICE_UNAVAILABLE;
  case 504: return NL_KUBE_REASON_TIMEOUT;
  default: return code >= 500 ? NL_KUBE_REASON_INTERNAL_ERROR : NL_KUBE_REASON_UNKNOWN;
  }
}

int nl__kube_status_read(const nl_tnode_t *obj, nl__kube_status_t *out) {
  memset(out, 0, sizeof *out);
  const nl_tnode_t *kind = nl_tree_get(obj, "kind");
  if (!kind || kind->kind != NL_T_STR || strcmp(kind->s, "Status") != 0) return -1;
  const nl_tnode_t *code = nl_tree_get(obj, "code");
  if (code && code->kind == NL_T_INT && code->i > 0 && code->i < 1000) out->code = (int)code->i;
  const nl_tnode_t *reason = nl_tree_get(obj, "reason");
  if (reason && reason->kind == NL_T_STR)
    out->reason = nl_kube_reason_parse(reason->s, reason->len);
  if (!out->reason) out->reason = nl_kube_reason_for_code(out->code);
  const nl_tnode_t *msg = nl_tree_get(obj, "message");
  if (msg && msg->kind == NL_T_STR && msg->len && strlen(msg->s) == msg->len) out->message = msg->s;
  return 0;
}

/* Parses resp's body as a Status into st (strings in a); -1 when it is none. */
static int body_status(nl_arena_t *a, const nl_kube_response_t *resp, nl__kube_status_t *st) {
  if (!resp->body_len) return -1;
  nl_err_t *err = NULL;
  const char *body = resp->body;
  size_t len = resp->body_len;
  char *text = NULL;
  if (nl_kube_pb_wanted(resp->content_type)) { /* a protobuf Status, read as its JSON */
    json_t *o = NULL;
    if (nl_kube_pb_to_json(body, len, &o, &err) == 0) text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    nl_err_free(&err);
    if (!text) return -1;
    body = text;
    len = strlen(text);
  }
  nl_tnode_t *root = nl_tree_parse_json(a, body, len, &err);
  free(text);
  nl_err_free(&err);
  return root ? nl__kube_status_read(root, st) : -1;
}

nl_kube_reason_t nl_kube_status_reason(const nl_kube_response_t *resp) {
  nl_arena_t *a = nl_arena_new(1024);
  nl__kube_status_t st;
  nl_kube_reason_t r = body_status(a, resp, &st) == 0 && st.reason ? st.reason
                                                                    : nl_kube_reason_for_code(resp->status);
  nl_arena_free(a);
  return r;
}

static bool is_text(const char *content_type) {
  return !content_type || !*content_type || strncmp(content_type, "text/", 5) == 0;
}

/* apimachinery's NewGenericServerResponse, for a body that is no Status. */
static int generic(const nl_kube_response_t *resp, nl_err_t **err) {
  int code = resp->status;
  char text[MAX_TEXT + 1] = "unknown";
  if (is_text(resp->content_type)) {
    size_t n = resp->body_len < MAX_TEXT ? resp->body_len : MAX_TEXT;
    const char *s = resp->body;
    while (n && strchr(" \t\r\n", *s)) s++, n--;
    while (n && strchr(" \t\r\n", s[n - 1])) n--;
    memcpy(text, s, n);
    text[n] = 0;
    if (strlen(text) != n) snprintf(text, sizeof text, "unknown");
  }
  switch (code) {
  case 400: return nl_err_set(err, code, "the server rejected our request for an unknown reason");
  case 401: return nl_err_set(err, code, "the server has asked for the client to provide credentials");
  case 403:
  case 415:
    if (!*text) break; /* the server's text says who may not do what: kept */
    return nl_err_set(err, code, "%s", text);
  case 404: return nl_err_set(err, code, "the server could not find the requested resource");
  case 405: return nl_err_set(err, code, "the server does not allow this method on the requested resource");
  case 406:
    if (*text && strcmp(text, "unknown") != 0) return nl_err_set(err, code, "%s", text);
    return nl_err_set(err, code, "the server was unable to respond with a content type that the client supports");
  case 409: return nl_err_set(err, code, "the server reported a conflict");
  case 422: return nl_err_set(err, code, "the server rejected our request due to an error in our request");
  case 429: return nl_err_set(err, code, "the server has received too many requests and has asked us to try again later");
  case 503: return nl_err_set(err, code, "the server is currently unable to handle the request");
  case 504: return nl_err_set(err, code, "the server was unable to return a response in the time allotted, but may still be processing the request");
  default:
    if (code >= 500)
      return nl_err_set(err, code, "an error on the server (\"%s\") has prevented the request from succeeding", text);
    break;
  }
  return nl_err_set(err, code, "the server responded with the status code %d but did not return more information", code);
}

int nl_kube_status_err(const nl_kube_response_t *resp, nl_err_t **err) {
  nl_arena_t *a = nl_arena_new(1024);
  nl__kube_status_t st;
  int rc;
  if (body_status(a, resp, &st) == 0 && st.message)
    rc = nl_err_set(err, resp->status, "%s", st.message);
  else
    rc = generic(resp, err);
  nl_arena_free(a);
  return rc;
}
