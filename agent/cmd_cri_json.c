/* Descriptor-driven protobuf-c to JSON, following protojson's mapping so that
 * scripts written against `crictl ... -o json` read nanolet's output too. */
#include "agent/cmd_cri_json.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/buf.h"
#include "reactor/xalloc.h"

/* protoc's json_name: underscores dropped, the next letter upper-cased. */
static char *camel(const char *name) {
  char *out = nl_xmalloc(strlen(name) + 1), *o = out;
  bool up = false;
  for (const char *p = name; *p; p++) {
    if (*p == '_') {
      up = true;
      continue;
    }
    *o++ = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
    up = false;
  }
  *o = 0;
  return out;
}

/* jansson refuses strings that are not UTF-8 (a label, a log path); protojson
 * would fail the whole output. Print them with U+FFFD for each bad byte. */
static json_t *str(const char *s) {
  json_t *v = json_string(s);
  if (v) return v;
  nl_buf_t b = NL_BUF_INIT;
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    int n = *p < 0x80             ? 1
            : (*p & 0xE0) == 0xC0 ? 2
            : (*p & 0xF0) == 0xE0 ? 3
            : (*p & 0xF8) == 0xF0 ? 4
                                  : 0;
    int ok = n > 0;
    for (int i = 1; ok && i < n; i++) ok = (p[i] & 0xC0) == 0x80;
    if (ok && (v = json_stringn((const char *)p, (size_t)n))) { /* also rejects overlongs */
      json_decref(v);
      nl_buf_append(&b, p, (size_t)n);
      p += n;
    } else {
      nl_buf_puts(&b, "\xEF\xBF\xBD");
      p++;
    }
  }
  v = json_string(b.data ? b.data : "");
  nl_buf_free(&b);
  return v ? v : json_string("");
}

static json_t *base64(const ProtobufCBinaryData *b) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t n = b->len, olen = (n + 2) / 3 * 4;
  char *out = nl_xmalloc(olen + 1), *o = out;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)b->data[i] << 16;
    if (i + 1 < n) v |= (uint32_t)b->data[i + 1] << 8;
    if (i + 2 < n) v |= b->data[i + 2];
    *o++ = tab[v >> 18 & 63];
    *o++ = tab[v >> 12 & 63];
    *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
    *o++ = i + 2 < n ? tab[v & 63] : '=';
  }
  *o = 0;
  json_t *s = json_stringn(out, olen);
  free(out);
  return s;
}

static json_t *int64_string(int64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%" PRId64, v);
  return json_string(b);
}

static json_t *uint64_string(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%" PRIu64, v);
  return json_string(b);
}

static json_t *enum_name(const ProtobufCEnumDescriptor *d, int v) {
  const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
  return ev ? str(ev->name) : json_integer(v); /* protojson: unknown as number */
}

/* One value of field f stored at p. */
static json_t *scalar(const ProtobufCFieldDescriptor *f, const void *p) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return json_integer(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return json_integer(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return int64_string(*(const int64_t *)p);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return uint64_string(*(const uint64_t *)p);
    case PROTOBUF_C_TYPE_FLOAT: return json_real(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE: return json_real(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL: return json_boolean(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: return enum_name(f->descriptor, *(const int *)p);
    case PROTOBUF_C_TYPE_STRING: {
      const char *s = *(char *const *)p;
      return str(s ? s : "");
    }
    case PROTOBUF_C_TYPE_BYTES: return base64(p);
    case PROTOBUF_C_TYPE_MESSAGE: return nl_cmd_cri__to_json(*(ProtobufCMessage *const *)p);
  }
  return json_null();
}

static size_t type_size(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM: return sizeof(int);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    default: return 4;
  }
}

/* protoc-c turns map<K,V> into a repeated nested "...Entry" message of
 * {key = 1, value = 2}; the descriptor keeps no map flag. */
static bool is_map(const ProtobufCFieldDescriptor *f) {
  if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE) return false;
  const ProtobufCMessageDescriptor *d = f->descriptor;
  size_t n = strlen(d->name);
  return d->n_fields == 2 && n > 5 && !strcmp(d->name + n - 5, "Entry") &&
         !strcmp(d->fields[0].name, "key") && !strcmp(d->fields[1].name, "value");
}

static json_t *map_object(const ProtobufCFieldDescriptor *f, size_t n, ProtobufCMessage **entries) {
  const ProtobufCMessageDescriptor *d = f->descriptor;
  json_t *o = json_object();
  for (size_t i = 0; i < n; i++) {
    const char *base = (const char *)entries[i];
    json_t *k = scalar(&d->fields[0], base + d->fields[0].offset);
    const char *key = json_is_string(k) ? json_string_value(k) : NULL;
    char *tmp = NULL;
    if (!key) key = tmp = json_dumps(k, JSON_ENCODE_ANY); /* non-string keys as text */
    json_object_set_new(o, key, scalar(&d->fields[1], base + d->fields[1].offset));
    free(tmp);
    json_decref(k);
  }
  return o;
}

json_t *nl_cmd_cri__to_json(const ProtobufCMessage *msg) {
  if (!msg) return json_null();
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  const char *base = (const char *)msg;
  json_t *o = json_object();
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const void *p = base + f->offset;
    json_t *v;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(base + f->quantifier_offset);
      const char *arr = *(char *const *)p;
      if (is_map(f)) {
        v = map_object(f, n, (ProtobufCMessage **)arr);
      } else {
        v = json_array();
        for (size_t j = 0; j < n; j++)
          json_array_append_new(v, scalar(f, arr + j * type_size(f->type)));
      }
    } else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      if (*(const uint32_t *)(base + f->quantifier_offset) != f->id) continue;
      v = scalar(f, p);
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_MESSAGE &&
               f->type != PROTOBUF_C_TYPE_STRING && f->quantifier_offset &&
               !*(const protobuf_c_boolean *)(base + f->quantifier_offset)) {
      continue; /* proto3 `optional` left unset */
    } else {
      v = scalar(f, p);
    }
    char *name = camel(f->name);
    json_object_set_new(o, name, v);
    free(name);
  }
  return o;
}

static int cmp_entry(const void *a, const void *b) {
  /* Every protoc-c map<string,string> entry is {base, key, value}. */
  const ProtobufCMessage *const *x = a, *const *y = b;
  const char *kx = *(char *const *)((const char *)*x + sizeof(ProtobufCMessage));
  const char *ky = *(char *const *)((const char *)*y + sizeof(ProtobufCMessage));
  return strcmp(kx, ky);
}

json_t *nl_cmd_cri__with_info(json_t *status, size_t n_info, void **info) {
  json_t *o = json_object();
  json_object_set_new(o, "status", status);
  void **sorted = nl_xcalloc(n_info ? n_info : 1, sizeof *sorted);
  if (n_info) memcpy(sorted, info, n_info * sizeof *sorted);
  qsort(sorted, n_info, sizeof *sorted, cmp_entry);
  for (size_t i = 0; i < n_info; i++) {
    const char *e = sorted[i];
    const char *key = *(char *const *)(e + sizeof(ProtobufCMessage));
    const char *val = *(char *const *)(e + sizeof(ProtobufCMessage) + sizeof(char *));
    json_t *v = json_loads(val, JSON_DECODE_ANY, NULL);
    json_t *k = str(key); /* keys must be UTF-8 too */
    json_object_set_new(o, json_string_value(k), v ? v : str(val));
    json_decref(k);
  }
  free(sorted);
  return o;
}

void nl_cmd_cri__print_json(json_t *v) {
  json_dumpf(v, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY);
  fputc('\n', stdout);
  json_decref(v);
}
