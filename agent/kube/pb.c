/* Kubernetes protobuf on the wire (agent/kube/pb.h). The conversion between a
 * message and its JSON form walks protobuf-c's descriptors: k8s.proto keeps
 * upstream's field names, which are the JSON names too, so one walk serves
 * every kind; only metav1.Time, metav1.MicroTime (RFC 3339 strings in JSON),
 * metav1.FieldsV1 (raw JSON), resource.Quantity (a string) and map entries
 * (JSON objects) differ. */
#include "agent/kube/pb.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/kube/k8s.pb-c.h"
#include "reactor/xalloc.h"

static const uint8_t magic[4] = {'k', '8', 's', 0};

/* The kinds nanolet exchanges as protobuf. */
static const struct kind {
  const char *api_version, *kind;
  const ProtobufCMessageDescriptor *desc;
} kinds[] = {
    {"coordination.k8s.io/v1", "Lease", &nlk8s__lease__descriptor},
    {"v1", "Node", &nlk8s__node__descriptor},
    {"v1", "Status", &nlk8s__status__descriptor},
    {"meta.k8s.io/v1", "PartialObjectMetadata", &nlk8s__partial_object_metadata__descriptor},
};

static const struct kind *find_kind(const char *api_version, const char *kind) {
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(kinds[i].api_version, api_version) == 0 && strcmp(kinds[i].kind, kind) == 0)
      return &kinds[i];
  return NULL;
}

bool nl_kube_pb_known(const char *api_version, const char *kind) {
  return find_kind(api_version, kind) != NULL;
}

bool nl_kube_pb_wanted(const char *content_type) {
  return content_type && strncmp(content_type, NL_KUBE_PB_TYPE, strlen(NL_KUBE_PB_TYPE)) == 0;
}

/* ---- the envelope ---- */

int nl_kube_pb_unwrap(const void *data, size_t len, nl_kube_pb_env_t *env, nl_err_t **err) {
  memset(env, 0, sizeof *env);
  if (len < sizeof magic || memcmp(data, magic, sizeof magic) != 0)
    return nl_err_set(err, EPROTO, "protobuf: the body does not start with the k8s magic");
  Nlk8s__Unknown *u = nlk8s__unknown__unpack(NULL, len - sizeof magic, (const uint8_t *)data + 4);
  if (!u) return nl_err_set(err, EPROTO, "protobuf: the envelope (runtime.Unknown) does not decode");
  if (u->contentencoding && *u->contentencoding) {
    nl_err_set(err, EPROTO, "protobuf: contentEncoding %s is not supported", u->contentencoding);
    nlk8s__unknown__free_unpacked(u, NULL);
    return -1;
  }
  if (!u->typemeta || !u->typemeta->kind || !*u->typemeta->kind) {
    nlk8s__unknown__free_unpacked(u, NULL);
    return nl_err_set(err, EPROTO, "protobuf: the envelope names no kind (typeMeta.kind)");
  }
  env->u = u;
  env->kind = u->typemeta->kind;
  env->api_version = u->typemeta->apiversion ? u->typemeta->apiversion : "";
  env->raw = u->has_raw ? u->raw.data : (const uint8_t *)"";
  env->raw_len = u->has_raw ? u->raw.len : 0;
  return 0;
}

void nl_kube_pb_env_free(nl_kube_pb_env_t *env) {
  if (env->u) nlk8s__unknown__free_unpacked(env->u, NULL);
  memset(env, 0, sizeof *env);
}

uint8_t *nl_kube_pb_wrap(const char *api_version, const char *kind, const uint8_t *raw,
                         size_t raw_len, size_t *len) {
  Nlk8s__TypeMeta tm = NLK8S__TYPE_META__INIT;
  tm.apiversion = (char *)api_version;
  tm.kind = (char *)kind;
  Nlk8s__Unknown u = NLK8S__UNKNOWN__INIT;
  u.typemeta = &tm;
  u.has_raw = true;
  u.raw = (ProtobufCBinaryData){raw_len, (uint8_t *)raw};
  /* Upstream writes empty contentEncoding and contentType (the raw bytes are
   * protobuf): fields 3 and 4 go out as empty strings there, omitted here. */
  size_t n = nlk8s__unknown__get_packed_size(&u);
  uint8_t *out = nl_xmalloc(sizeof magic + n);
  memcpy(out, magic, sizeof magic);
  nlk8s__unknown__pack(&u, out + sizeof magic);
  *len = sizeof magic + n;
  return out;
}

/* ---- times ---- */

#define ZERO_TIME_S INT64_C(-62135596800) /* Go's zero time.Time, 0001-01-01 */

static bool is_time(const ProtobufCMessageDescriptor *d) {
  return d == &nlk8s__time__descriptor || d == &nlk8s__micro_time__descriptor;
}

/* Days since 1970-01-01 of a proleptic Gregorian date, and back (H. Hinnant's
 * civil calendar algorithms): in int64_t, since a 32-bit time_t (armhf) cannot
 * hold Go's zero time, year 1. */
static int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

#define DAY_S INT64_C(86400)

/* RFC 3339 as metav1.Time (seconds) or metav1.MicroTime (microseconds) write it. */
static int fmt_time(int64_t s, int32_t ns, bool micro, char *buf, size_t len) {
  /* Years 0 to 9999: what four digits write. */
  if (ns < 0 || ns > 999999999 || s < INT64_C(-62167219200) || s > INT64_C(253402300799))
    return -1;
  int64_t days = s >= 0 ? s / DAY_S : -((-s + DAY_S - 1) / DAY_S), rem = s - days * DAY_S, y;
  int m, d;
  civil_from_days(days, &y, &m, &d);
  /* %04: years before 1000 are padded, as Go writes them. */
  int n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d", (int)y, m, d, (int)(rem / 3600),
                   (int)(rem / 60 % 60), (int)(rem % 60));
  if (micro) n += snprintf(buf + n, len - (size_t)n, ".%06d", ns / 1000);
  snprintf(buf + n, len - (size_t)n, "Z");
  return 0;
}

/* Parses RFC 3339 ("2026-11-26T20:07:34Z", "...34.123456+01:00"). */
static int parse_time(const char *s, int64_t *sec, int32_t *nsec) {
  struct tm tm = {0};
  int used = 0;
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec, &used) != 6 || used != 19)
    return -1;
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const char *p = s + used;
  int32_t ns = 0;
  if (*p == '.') {
    int digits = 0;
    for (p++; *p >= '0' && *p <= '9'; p++, digits++)
      if (digits < 9) ns = ns * 10 + (*p - '0');
    if (digits == 0) return -1;
    for (; digits < 9; digits++) ns *= 10;
  }
  int64_t off = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int hh, mm, n = 0;
    if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5 || hh > 23 || mm > 59) return -1;
    off = (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
    p += 6;
  } else {
    return -1;
  }
  if (*p) return -1;
  *sec = days_from_civil(tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday) * DAY_S +
         tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec - off;
  *nsec = ns;
  return 0;
}

/* ---- message -> JSON ---- */

/* A map<string, V> field's entry: {key, value}. */
static bool is_map_entry(const ProtobufCMessageDescriptor *d) {
  return d->n_fields == 2 && strcmp(d->fields[0].name, "key") == 0 &&
         strcmp(d->fields[1].name, "value") == 0 && d->fields[0].type == PROTOBUF_C_TYPE_STRING &&
         (d->fields[1].type == PROTOBUF_C_TYPE_STRING || d->fields[1].type == PROTOBUF_C_TYPE_MESSAGE);
}

/* Every map entry has this layout: the base, the key, then the value (a
 * string or a message pointer). */
typedef struct map_entry {
  ProtobufCMessage base;
  char *key;
  void *value;
} map_entry_t;

static json_t *msg_to_json(const ProtobufCMessage *m, const char *path, nl_err_t **err);

/* One value of field f at p (a pointer to the field's storage or an element). */
static json_t *value_to_json(const ProtobufCFieldDescriptor *f, const void *p, const char *path,
                             nl_err_t **err) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING:
    return json_string(*(char *const *)p) ?: (nl_err_set(err, EPROTO, "%s: not UTF-8", path), NULL);
  case PROTOBUF_C_TYPE_INT32: return json_integer(*(const int32_t *)p);
  case PROTOBUF_C_TYPE_INT64: return json_integer(*(const int64_t *)p);
  case PROTOBUF_C_TYPE_BOOL: return json_boolean(*(const protobuf_c_boolean *)p);
  case PROTOBUF_C_TYPE_MESSAGE: return msg_to_json(*(ProtobufCMessage *const *)p, path, err);
  default:
    nl_err_set(err, EPROTO, "%s: field type %d not supported", path, (int)f->type);
    return NULL;
  }
}

static json_t *msg_to_json(const ProtobufCMessage *m, const char *path, nl_err_t **err) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  if (is_time(d)) {
    const Nlk8s__Time *t = (const Nlk8s__Time *)m; /* MicroTime has the same layout */
    bool micro = d == &nlk8s__micro_time__descriptor;
    /* Zero at the precision JSON keeps (whole seconds, microseconds): null,
     * as Go writes a zero time, so that it reads back the same. */
    if (t->seconds == ZERO_TIME_S && (!micro || (t->nanos >= 0 && t->nanos < 1000)))
      return json_null();
    /* An empty message is how Go writes its zero time (Time.Marshal: no
     * bytes), as in a watch bookmark's object: null too, not 1970. */
    if (!t->has_seconds && !t->has_nanos) return json_null();
    char buf[64];
    if (fmt_time(t->seconds, t->nanos, micro, buf, sizeof buf) < 0) {
      nl_err_set(err, EPROTO, "%s: time %" PRId64 "s %dns out of range", path, t->seconds, t->nanos);
      return NULL;
    }
    return json_string(buf);
  }
  if (d == &nlk8s__quantity__descriptor) {
    const Nlk8s__Quantity *q = (const Nlk8s__Quantity *)m;
    json_t *s = json_string(q->string && *q->string ? q->string : "0"); /* Go's zero Quantity */
    if (!s) nl_err_set(err, EPROTO, "%s: not UTF-8", path);
    return s;
  }
  if (d == &nlk8s__fields_v1__descriptor) {
    const Nlk8s__FieldsV1 *f = (const Nlk8s__FieldsV1 *)m;
    json_t *v = json_loadb((const char *)f->raw.data, f->raw.len, JSON_DECODE_ANY, NULL);
    if (!v) nl_err_set(err, EPROTO, "%s: Raw is no JSON", path);
    return v;
  }
  json_t *o = json_object();
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const char *field = (const char *)m + f->offset;
    char *sub = nl_xasprintf("%s%s%s", path, *path ? "." : "", f->name);
    json_t *v = NULL;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
      if (n == 0) goto next;
      const char *arr = *(char *const *)field;
      size_t step = f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING
                        ? sizeof(void *)
                        : f->type == PROTOBUF_C_TYPE_INT64 ? 8 : 4;
      if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor)) {
        const ProtobufCMessageDescriptor *ed = f->descriptor;
        const ProtobufCFieldDescriptor *vf = &ed->fields[1];
        v = json_object();
        for (size_t j = 0; j < n; j++) {
          const map_entry_t *e = ((map_entry_t *const *)arr)[j];
          json_t *k = e->key ? json_string(e->key) : NULL;
          if (!k) {
            nl_err_set(err, EPROTO, "%s: key %zu is not UTF-8", sub, j);
            json_decref(v);
            v = NULL;
            break;
          }
          json_decref(k);
          char *el = nl_xasprintf("%s.%s", sub, e->key);
          /* An absent value is Go's zero value: "", a zero Quantity. */
          json_t *x = e->value ? value_to_json(vf, &e->value, el, err)
                      : vf->type == PROTOBUF_C_TYPE_STRING ? json_string("")
                      : vf->descriptor == &nlk8s__quantity__descriptor ? json_string("0")
                                                                      : json_object();
          free(el);
          if (!x) {
            json_decref(v);
            v = NULL;
            break;
          }
          json_object_set_new(v, e->key, x);
        }
      } else {
        v = json_array();
        for (size_t j = 0; j < n; j++) {
          char *el = nl_xasprintf("%s[%zu]", sub, j);
          json_t *x = value_to_json(f, arr + j * step, el, err);
          free(el);
          if (!x) {
            json_decref(v);
            v = NULL;
            break;
          }
          json_array_append_new(v, x);
        }
      }
    } else if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) {
      /* Absent, or empty (Go writes every non-pointer string): omitempty. */
      const void *ptr = *(void *const *)field;
      if (!ptr || (f->type == PROTOBUF_C_TYPE_STRING && !*(const char *)ptr)) goto next;
      v = value_to_json(f, field, sub, err);
    } else {
      /* Scalars with their has_ flag: written when set, zero included (a Go
       * pointer field such as leaseTransitions keeps its 0 that way). */
      if (!*(const protobuf_c_boolean *)((const char *)m + f->quantifier_offset)) goto next;
      v = value_to_json(f, field, sub, err);
    }
    if (!v) {
      free(sub);
      json_decref(o);
      return NULL;
    }
    if (json_is_null(v))
      json_decref(v);
    else
      json_object_set_new(o, f->name, v);
  next:
    free(sub);
  }
  return o;
}

int nl_kube_pb_to_json(const void *data, size_t len, json_t **out, nl_err_t **err) {
  nl_kube_pb_env_t env;
  if (nl_kube_pb_unwrap(data, len, &env, err) < 0) return -1;
  const struct kind *k = find_kind(env.api_version, env.kind);
  if (!k) {
    nl_err_set(err, EPROTO, "protobuf: %s %s: kind not known", env.api_version, env.kind);
    nl_kube_pb_env_free(&env);
    return -1;
  }
  ProtobufCMessage *m = protobuf_c_message_unpack(k->desc, NULL, env.raw_len, env.raw);
  if (!m) {
    nl_err_set(err, EPROTO, "protobuf: %s does not decode", env.kind);
    nl_kube_pb_env_free(&env);
    return -1;
  }
  json_t *o = msg_to_json(m, "", err);
  protobuf_c_message_free_unpacked(m, NULL);
  if (!o) {
    nl_err_wrap(err, "protobuf: %s", env.kind);
    nl_kube_pb_env_free(&env);
    return -1;
  }
  json_object_set_new(o, "apiVersion", json_string(k->api_version));
  json_object_set_new(o, "kind", json_string(k->kind));
  nl_kube_pb_env_free(&env);
  *out = o;
  return 0;
}

/* ---- JSON -> message ---- */

static ProtobufCMessage *msg_from_json(const ProtobufCMessageDescriptor *d, const json_t *v,
                                       const char *path, nl_err_t **err);

/* Fills the storage p of one value of field f from v. */
static int value_from_json(const ProtobufCFieldDescriptor *f, const json_t *v, void *p,
                           const char *path, nl_err_t **err) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING:
    if (!json_is_string(v)) return nl_err_set(err, NL_EINVAL, "%s: not a string", path);
    *(char **)p = nl_xstrdup(json_string_value(v));
    return 0;
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_INT64: {
    if (!json_is_integer(v)) return nl_err_set(err, NL_EINVAL, "%s: not an integer", path);
    json_int_t i = json_integer_value(v);
    if (f->type == PROTOBUF_C_TYPE_INT32) {
      if (i < INT32_MIN || i > INT32_MAX) return nl_err_set(err, NL_EINVAL, "%s: out of range", path);
      *(int32_t *)p = (int32_t)i;
    } else {
      *(int64_t *)p = (int64_t)i;
    }
    return 0;
  }
  case PROTOBUF_C_TYPE_BOOL:
    if (!json_is_boolean(v)) return nl_err_set(err, NL_EINVAL, "%s: not a boolean", path);
    *(protobuf_c_boolean *)p = json_is_true(v);
    return 0;
  case PROTOBUF_C_TYPE_MESSAGE:
    *(ProtobufCMessage **)p = msg_from_json(f->descriptor, v, path, err);
    return *(ProtobufCMessage **)p ? 0 : -1;
  default:
    return nl_err_set(err, NL_EINVAL, "%s: field type %d not supported", path, (int)f->type);
  }
}

static size_t elem_size(const ProtobufCFieldDescriptor *f) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT32: return sizeof(int32_t);
  case PROTOBUF_C_TYPE_INT64: return sizeof(int64_t);
  case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
  default: return sizeof(void *);
  }
}

/* Fills repeated field f of m from v (an array, or an object for a map). */
static int repeated_from_json(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                              const json_t *v, const char *path, nl_err_t **err) {
  size_t *n = (size_t *)((char *)m + f->quantifier_offset);
  char **arr = (char **)((char *)m + f->offset);
  if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor)) {
    if (!json_is_object(v)) return nl_err_set(err, NL_EINVAL, "%s: not an object", path);
    *arr = nl_xcalloc(json_object_size(v) + 1, sizeof(void *));
    const ProtobufCMessageDescriptor *ed = f->descriptor;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
      map_entry_t *e = nl_xmalloc(ed->sizeof_message);
      protobuf_c_message_init(ed, e);
      ((void **)*arr)[(*n)++] = e; /* freed with m from here on */
      e->key = nl_xstrdup(key);
      char *sub = nl_xasprintf("%s.%s", path, key);
      int rc = value_from_json(&ed->fields[1], val, &e->value, sub, err);
      free(sub);
      if (rc < 0) return -1;
    }
    return 0;
  }
  if (!json_is_array(v)) return nl_err_set(err, NL_EINVAL, "%s: not an array", path);
  *arr = nl_xcalloc(json_array_size(v) + 1, elem_size(f));
  size_t i;
  json_t *el;
  json_array_foreach(v, i, el) {
    char *sub = nl_xasprintf("%s[%zu]", path, i);
    int rc = value_from_json(f, el, *arr + i * elem_size(f), sub, err);
    free(sub);
    if (rc < 0) return -1;
    (*n)++;
  }
  return 0;
}

static ProtobufCMessage *msg_from_json(const ProtobufCMessageDescriptor *d, const json_t *v,
                                       const char *path, nl_err_t **err) {
  if (is_time(d)) {
    int64_t s;
    int32_t ns;
    if (!json_is_string(v) || parse_time(json_string_value(v), &s, &ns) < 0) {
      nl_err_set(err, NL_EINVAL, "%s: not an RFC 3339 time", path);
      return NULL;
    }
    Nlk8s__Time *t = nl_xmalloc(d->sizeof_message);
    protobuf_c_message_init(d, t);
    t->has_seconds = t->has_nanos = true;
    t->seconds = s;
    /* Time is whole seconds in JSON and MicroTime microseconds, as upstream rounds them. */
    t->nanos = d == &nlk8s__time__descriptor ? 0 : ns / 1000 * 1000;
    return &t->base;
  }
  if (d == &nlk8s__quantity__descriptor) {
    if (!json_is_string(v)) {
      nl_err_set(err, NL_EINVAL, "%s: not a quantity string", path);
      return NULL;
    }
    Nlk8s__Quantity *q = nl_xmalloc(d->sizeof_message);
    nlk8s__quantity__init(q);
    q->string = nl_xstrdup(json_string_value(v));
    return &q->base;
  }
  if (d == &nlk8s__fields_v1__descriptor) {
    Nlk8s__FieldsV1 *f = nl_xmalloc(d->sizeof_message);
    nlk8s__fields_v1__init(f);
    char *raw = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!raw) abort();
    f->has_raw = true;
    f->raw = (ProtobufCBinaryData){strlen(raw), (uint8_t *)raw};
    return &f->base;
  }
  if (!json_is_object(v)) {
    nl_err_set(err, NL_EINVAL, "%s: not an object", *path ? path : d->short_name);
    return NULL;
  }
  ProtobufCMessage *m = nl_xmalloc(d->sizeof_message);
  protobuf_c_message_init(d, m);
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)v, key, val) {
    if (!*path && (strcmp(key, "apiVersion") == 0 || strcmp(key, "kind") == 0)) continue;
    char *sub = nl_xasprintf("%s%s%s", path, *path ? "." : "", key);
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, key);
    int rc = 0;
    if (!f) {
      rc = nl_err_set(err, NL_EINVAL, "%s: field not known to nanolet's protobuf", sub);
    } else if (json_is_null(val)) {
      /* as absent */
    } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      rc = repeated_from_json(m, f, val, sub, err);
    } else {
      rc = value_from_json(f, val, (char *)m + f->offset, sub, err);
      if (rc == 0 && f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
        *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = true;
    }
    free(sub);
    if (rc < 0) {
      protobuf_c_message_free_unpacked(m, NULL);
      return NULL;
    }
  }
  return m;
}

int nl_kube_pb_from_json(const json_t *obj, uint8_t **out, size_t *len, nl_err_t **err) {
  const char *av = json_string_value(json_object_get(obj, "apiVersion"));
  const char *kd = json_string_value(json_object_get(obj, "kind"));
  const struct kind *k = av && kd ? find_kind(av, kd) : NULL;
  if (!k)
    return nl_err_set(err, NL_EINVAL, "protobuf: %s %s: kind not known", av ? av : "(no apiVersion)",
                      kd ? kd : "(no kind)");
  ProtobufCMessage *m = msg_from_json(k->desc, obj, "", err);
  if (!m) return nl_err_wrap(err, "protobuf: %s", k->kind);
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *raw = nl_xmalloc(n ? n : 1);
  protobuf_c_message_pack(m, raw);
  protobuf_c_message_free_unpacked(m, NULL);
  *out = nl_kube_pb_wrap(k->api_version, k->kind, raw, n, len);
  free(raw);
  return 0;
}

int nl_kube_resp_json(const nl_kube_response_t *resp, json_t **out, nl_err_t **err) {
  if (nl_kube_pb_wanted(resp->content_type))
    return nl_kube_pb_to_json(resp->body, resp->body_len, out, err);
  json_error_t je;
  *out = json_loadb(resp->body, resp->body_len, 0, &je);
  if (!*out) return nl_err_set(err, EPROTO, "JSON: %s (line %d)", je.text, je.line);
  return 0;
}
