/* Watch events are framed by newlines (the apiserver's JSON encoder ends every
 * event with one, and JSON text holds no raw newline) and parsed with the model's
 * JSON tree rather than jansson. Both parse the whole event; the tree allocates
 * from one arena (a few chunk allocations per event against one malloc per node
 * and string with jansson, whose objects also hash every key), keeps numbers as
 * written, and keeps each map's text, which is what the caller needs: the
 * object's JSON as it came, for the model's decoders, with no re-encoding
 * (jansson would need a json_dumps copy). */
#include "agent/kube/watch_decode.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "agent/kube/internal.h"
#include "agent/kube/k8s.pb-c.h"
#include "agent/kube/pb.h"

static const char *const types[] = {
    [NL_KUBE_WATCH_ADDED] = "ADDED",
    [NL_KUBE_WATCH_MODIFIED] = "MODIFIED",
    [NL_KUBE_WATCH_DELETED] = "DELETED",
    [NL_KUBE_WATCH_BOOKMARK] = "BOOKMARK",
    [NL_KUBE_WATCH_ERROR] = "ERROR",
};

void nl_kube_watch_decoder_init(nl_kube_watch_decoder_t *d, size_t max_event,
                                nl_kube_watch_event_fn cb, void *ctx) {
  memset(d, 0, sizeof *d);
  d->max_event = max_event ? max_event : NL_KUBE_WATCH_MAX_EVENT;
  d->cb = cb;
  d->ctx = ctx;
}

void nl_kube_watch_decoder_free(nl_kube_watch_decoder_t *d) { nl_buf_free(&d->partial); }

static const char *str_at(const nl_tnode_t *map, const char *key) {
  const nl_tnode_t *v = nl_tree_get(map, key);
  return v && v->kind == NL_T_STR && strlen(v->s) == v->len ? v->s : "";
}

static int event(nl_kube_watch_decoder_t *d, nl_arena_t *a, const char *line, size_t len,
                 nl_err_t **err) {
  nl_tnode_t *root = nl_tree_parse_json(a, line, len, err);
  if (!root) return nl_err_wrap(err, "malformed watch event");
  if (root->kind != NL_T_MAP)
    return nl_err_set(err, NL_EINVAL, "malformed watch event: not an object");
  const nl_tnode_t *type = nl_tree_get(root, "type"), *obj = nl_tree_get(root, "object");
  if (!type || type->kind != NL_T_STR)
    return nl_err_set(err, NL_EINVAL, "malformed watch event: no type");
  nl_kube_watch_event_t ev = {.resource_version = "", .message = ""};
  size_t t = 0;
  while (t < sizeof types / sizeof types[0] && strcmp(types[t], type->s) != 0) t++;
  if (t == sizeof types / sizeof types[0] || strlen(type->s) != type->len)
    return nl_err_set(err, NL_EINVAL, "watch event of type \"%.40s\" is not supported", type->s);
  ev.type = (nl_kube_watch_type_t)t;
  if (!obj || obj->kind != NL_T_MAP)
    return nl_err_set(err, NL_EINVAL, "malformed watch event: %s without an object", types[t]);
  ev.object = obj->s;
  ev.object_len = obj->len;
  ev.resource_version = str_at(nl_tree_get(obj, "metadata"), "resourceVersion");
  nl__kube_status_t st;
  if (ev.type == NL_KUBE_WATCH_ERROR && nl__kube_status_read(obj, &st) == 0) {
    ev.code = st.code;
    ev.reason = st.reason;
    if (st.message) ev.message = st.message;
  }
  return d->cb(d->ctx, &ev) ? 1 : 0;
}

static bool blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strchr(" \t\r", s[i])) return false;
  return true;
}

static int line(nl_kube_watch_decoder_t *d, const char *s, size_t n, nl_err_t **err) {
  if (blank(s, n)) return 0;
  /* the tree holds about the object's size again; start near it */
  nl_arena_t *a = nl_arena_new(n < 1024 ? 1024 : 4096);
  int rc = event(d, a, s, n, err);
  nl_arena_free(a);
  return rc;
}

static int too_large(nl_kube_watch_decoder_t *d, nl_err_t **err) {
  d->failed = true;
  nl_buf_free(&d->partial);
  return nl_err_set(err, EMSGSIZE, "watch event larger than %zu bytes", d->max_event);
}

/* After an event (rc: -1 failed, 0 go on, 1 the caller stops): the partial
 * buffer emptied, and freed after one big event; a failure ends the stream.
 * Returns rc. */
static int event_done(nl_kube_watch_decoder_t *d, int rc) {
  nl_buf_reset(&d->partial);
  if (d->partial.cap > (64u << 10) || rc < 0) nl_buf_free(&d->partial);
  if (rc < 0) d->failed = true;
  return rc;
}

void nl_kube_watch_decoder_protobuf(nl_kube_watch_decoder_t *d) { d->protobuf = true; }

bool nl_kube_watch_is_protobuf(const char *content_type) {
  return nl_kube_pb_wanted(content_type);
}

/* One protobuf frame: the event is rewritten as the JSON line the JSON stream
 * would carry and goes the same way, so the object's text, its
 * resourceVersion and an ERROR's Status are read by one path. Objects on a
 * node's watches are few and small (its Node); the conversion is cheap. */
static int pb_event(nl_kube_watch_decoder_t *d, const uint8_t *p, size_t n, nl_err_t **err) {
  Nlk8s__WatchEvent *we = nlk8s__watch_event__unpack(NULL, n, p);
  if (!we)
    return nl_err_set(err, NL_EINVAL,
                      "malformed watch event: protobuf: the frame (WatchEvent) does not decode");
  int rc = -1;
  json_t *obj = NULL;
  char *text = NULL;
  nl_buf_t ev = NL_BUF_INIT;
  size_t t = 0;
  if (!we->type) {
    nl_err_set(err, NL_EINVAL, "malformed watch event: no type");
    goto out;
  }
  while (t < sizeof types / sizeof types[0] && strcmp(types[t], we->type) != 0) t++;
  if (t == sizeof types / sizeof types[0]) {
    nl_err_set(err, NL_EINVAL, "watch event of type \"%.40s\" is not supported", we->type);
    goto out;
  }
  if (!we->object || !we->object->has_raw) {
    nl_err_set(err, NL_EINVAL, "malformed watch event: %s without an object", types[t]);
    goto out;
  }
  if (nl_kube_pb_to_json(we->object->raw.data, we->object->raw.len, &obj, err) < 0) {
    nl_err_wrap(err, "malformed watch event: %s", types[t]);
    goto out;
  }
  text = json_dumps(obj, JSON_COMPACT);
  if (!text) abort();
  nl_buf_printf(&ev, "{\"type\":\"%s\",\"object\":%s}", types[t], text);
  rc = line(d, ev.data, ev.len, err);
out:
  nl_buf_free(&ev);
  free(text);
  json_decref(obj);
  nlk8s__watch_event__free_unpacked(we, NULL);
  return rc;
}

static int pb_feed(nl_kube_watch_decoder_t *d, const uint8_t *data, size_t len, nl_err_t **err) {
  while (len) {
    if (d->partial.len < 4) { /* the frame's length */
      size_t take = 4 - d->partial.len < len ? 4 - d->partial.len : len;
      nl_buf_append(&d->partial, data, take);
      data += take;
      len -= take;
      if (d->partial.len < 4) return 0;
      const uint8_t *h = (const uint8_t *)d->partial.data;
      d->frame = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
      if (d->frame > d->max_event) return too_large(d, err);
    }
    size_t have = d->partial.len - 4;
    int rc;
    if (have == 0 && len >= d->frame) { /* the common case: in place */
      rc = pb_event(d, data, d->frame, err);
      data += d->frame;
      len -= d->frame;
    } else {
      size_t take = d->frame - have < len ? d->frame - have : len;
      nl_buf_append(&d->partial, data, take);
      data += take;
      len -= take;
      if (d->partial.len - 4 < d->frame) return 0;
      rc = pb_event(d, (const uint8_t *)d->partial.data + 4, d->frame, err);
    }
    if (event_done(d, rc)) return rc;
  }
  return 0;
}

int nl_kube_watch_decoder_feed(nl_kube_watch_decoder_t *d, const char *data, size_t len,
                               nl_err_t **err) {
  if (d->failed) return nl_err_set(err, NL_EINVAL, "watch stream already failed");
  if (d->protobuf) return pb_feed(d, (const uint8_t *)data, len, err);
  while (len) {
    const char *nl = memchr(data, '\n', len);
    size_t take = nl ? (size_t)(nl - data) : len;
    if (d->partial.len + take > d->max_event) return too_large(d, err);
    if (!nl) {
      nl_buf_append(&d->partial, data, len);
      return 0;
    }
    int rc;
    if (d->partial.len == 0) {
      rc = line(d, data, take, err); /* the common case: in place */
    } else {
      nl_buf_append(&d->partial, data, take);
      rc = line(d, d->partial.data, d->partial.len, err);
    }
    if (event_done(d, rc)) return rc;
    data += take + 1;
    len -= take + 1;
  }
  return 0;
}

int nl_kube_watch_decoder_finish(nl_kube_watch_decoder_t *d, nl_err_t **err) {
  if (d->failed) return nl_err_set(err, NL_EINVAL, "watch stream already failed");
  if (d->protobuf ? d->partial.len > 0
                 : !blank(d->partial.data ? d->partial.data : "", d->partial.len)) {
    d->failed = true;
    return nl_err_set(err, EPROTO, "watch stream ended inside an event (%zu bytes)",
                      d->partial.len);
  }
  return 0;
}
