#include "reactor/tree.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 64

const char *nl_tree_kind_name(nl_tkind_t k) {
  switch (k) {
  case NL_T_NULL: return "null";
  case NL_T_BOOL: return "a boolean";
  case NL_T_INT: return "a number";
  case NL_T_FLOAT: return "a number";
  case NL_T_STR: return "a string";
  case NL_T_MAP: return "an object";
  case NL_T_SEQ: return "a list";
  }
  return "?";
}

nl_tnode_t *nl_tree_get(const nl_tnode_t *map, const char *key) {
  if (!map || map->kind != NL_T_MAP) return NULL;
  nl_tnode_t *found = NULL;
  size_t kl = strlen(key);
  for (nl_tentry_t *e = map->first; e; e = e->next)
    if (e->key_len == kl && memcmp(e->key, key, kl) == 0) found = e->val; /* last wins */
  return found;
}

void nl__tree_add(nl_arena_t *a, nl_tnode_t *parent, const char *key, size_t key_len,
                      nl_tnode_t *val) {
  nl_tentry_t *e = nl_arena_alloc(a, sizeof *e);
  e->key = key;
  e->key_len = key_len;
  e->val = val;
  if (parent->last) parent->last->next = e;
  else parent->first = e;
  parent->last = e;
  parent->n++;
}

/* ---- YAML 1.1 plain-scalar resolution, as go-yaml v2 (which upstream's
 * yaml.ToJSON uses): null, booleans (yes/no/on/off too), ints, floats. ---- */

static bool in_list(const char *s, const char *const *list) {
  for (; *list; list++)
    if (strcmp(s, *list) == 0) return true;
  return false;
}

static bool parse_int(const char *s, int64_t *out) {
  char buf[80];
  size_t n = 0;
  for (const char *p = s; *p; p++) {
    if (*p == '_') continue;
    if (n + 1 >= sizeof buf) return false;
    buf[n++] = *p;
  }
  buf[n] = 0;
  if (n == 0) return false;
  const char *p = buf;
  bool neg = false;
  if (*p == '+' || *p == '-') neg = *p++ == '-';
  int base = 10;
  if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) base = 2, p += 2;
  else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O')) base = 8, p += 2;
  else if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) base = 16, p += 2;
  else if (p[0] == '0' && p[1]) base = 8, p += 1;
  if (!*p || *p == '+' || *p == '-' || *p == ' ') return false;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(p, &end, base);
  if (*end || errno) return false;
  if (neg ? v > (unsigned long long)INT64_MAX + 1 : v > INT64_MAX) return false;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

static bool is_float(const char *s) {
  static const char *const special[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
                                        "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN",
                                        NULL};
  if (in_list(s, special)) return true;
  /* ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ */
  const char *p = s;
  if (*p == '+' || *p == '-') p++;
  if (*p == '.') {
    p++;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
  } else {
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == '.') {
      p++;
      while (*p >= '0' && *p <= '9') p++;
    }
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
  }
  return *p == 0;
}

void nl__tree_resolve_plain(nl_tnode_t *n) {
  static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
  static const char *const trues[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE",
                                      "on", "On", "ON", NULL};
  static const char *const falses[] = {"n", "N", "no", "No", "NO", "false", "False", "FALSE",
                                       "off", "Off", "OFF", NULL};
  const char *s = n->s;
  /* most scalars are names and paths: only a few first bytes can start anything else */
  if (n->len > 5 && !strchr("0123456789+-.", s[0])) return;
  if (n->len && !strchr("~nNtTfFyYoO0123456789+-.", s[0])) return;
  bool word = !n->len || !strchr("0123456789+-.", s[0]); /* numbers skip the word lists */
  if (word && in_list(s, nulls)) n->kind = NL_T_NULL;
  else if (word && in_list(s, trues)) n->kind = NL_T_BOOL, n->b = 1;
  else if (word && in_list(s, falses)) n->kind = NL_T_BOOL, n->b = 0;
  else if (((s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '+') && parse_int(s, &n->i))
    n->kind = NL_T_INT;
  else if (is_float(s)) n->kind = NL_T_FLOAT;
}

nl_tnode_t *nl__tree_node_new(nl_arena_t *a, nl_tkind_t kind, int line) {
  nl_tnode_t *n = nl_arena_alloc(a, sizeof *n);
  n->kind = kind;
  n->line = line;
  return n;
}

typedef struct frame {
  nl_tnode_t *node;
  const char *key; /* a map key waiting for its value */
  size_t key_len;
} frame_t;

nl_tnode_t *nl_tree_parse_libyaml(nl_arena_t *a, const char *data, size_t len, nl_err_t **err) {
  yaml_parser_t p;
  yaml_event_t ev;
  frame_t stack[MAX_DEPTH];
  int depth = 0;
  nl_tnode_t *root = NULL;
  bool done = false;

  if (!yaml_parser_initialize(&p)) {
    nl_err_set(err, NL_EINVAL, "cannot initialise the YAML parser");
    return NULL;
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
  while (!done) {
    if (!yaml_parser_parse(&p, &ev)) {
      nl_err_set(err, NL_EINVAL, "line %zu: YAML: %s%s%s", p.problem_mark.line + 1,
                 p.problem ? p.problem : "syntax error", p.context ? " " : "",
                 p.context ? p.context : "");
      yaml_parser_delete(&p);
      return NULL;
    }
    int line = (int)ev.start_mark.line + 1;
    nl_tnode_t *n = NULL;
    switch (ev.type) {
    case YAML_STREAM_END_EVENT:
    case YAML_DOCUMENT_END_EVENT: /* upstream reads the first document only */
      done = true;
      break;
    case YAML_ALIAS_EVENT:
      nl_err_set(err, NL_EINVAL, "line %d: YAML aliases are not supported", line);
      goto fail;
    case YAML_SCALAR_EVENT: {
      n = nl__tree_node_new(a, NL_T_STR, line);
      n->s = nl_arena_strndup(a, (const char *)ev.data.scalar.value, ev.data.scalar.length);
      n->len = ev.data.scalar.length;
      const char *tag = (const char *)ev.data.scalar.tag;
      if (ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
          !(tag && strcmp(tag, YAML_STR_TAG) == 0) && strlen(n->s) == n->len)
        nl__tree_resolve_plain(n);
      break;
    }
    case YAML_MAPPING_START_EVENT:
      n = nl__tree_node_new(a, NL_T_MAP, line);
      break;
    case YAML_SEQUENCE_START_EVENT:
      n = nl__tree_node_new(a, NL_T_SEQ, line);
      break;
    case YAML_MAPPING_END_EVENT:
    case YAML_SEQUENCE_END_EVENT:
      depth--;
      break;
    default:
      break;
    }
    if (n) {
      if (depth == 0) {
        if (!root) root = n;
      } else {
        frame_t *f = &stack[depth - 1];
        if (f->node->kind == NL_T_SEQ) {
          nl__tree_add(a, f->node, NULL, 0, n);
        } else if (!f->key) {
          if (n->kind == NL_T_MAP || n->kind == NL_T_SEQ) {
            nl_err_set(err, NL_EINVAL, "line %d: a mapping key must be a scalar", line);
            goto fail;
          }
          f->key = n->s;
          f->key_len = n->len;
        } else {
          nl__tree_add(a, f->node, f->key, f->key_len, n);
          f->key = NULL;
        }
      }
      if (n->kind == NL_T_MAP || n->kind == NL_T_SEQ) {
        if (depth == MAX_DEPTH) {
          nl_err_set(err, NL_EINVAL, "line %d: nested deeper than %d levels", line, MAX_DEPTH);
          goto fail;
        }
        stack[depth++] = (frame_t){n, NULL, 0};
      }
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&p);
  return root ? root : nl__tree_node_new(a, NL_T_NULL, 1);
fail:
  yaml_event_delete(&ev);
  yaml_parser_delete(&p);
  return NULL;
}

/* The fast reader takes the common subset; everything else, and every error
 * message, is libyaml's. */
nl_tnode_t *nl_tree_parse_yaml(nl_arena_t *a, const char *data, size_t len, nl_err_t **err) {
  nl_tnode_t *n = nl_tree_parse_yaml_fast(a, data, len);
  return n ? n : nl_tree_parse_libyaml(a, data, len, err);
}

/* ---- JSON (RFC 8259), own parser: keeps numbers as written, which quantities
 * need ("0.1" must not become 0.1000000000000000055). ---- */

typedef struct jp {
  nl_arena_t *a;
  const char *s, *end;
  int line;
  nl_err_t **err;
} jp_t;

static int jfail(jp_t *j, const char *what) {
  if (j->s >= j->end) return nl_err_set(j->err, NL_EINVAL, "line %d: JSON: unexpected end of input", j->line);
  return nl_err_set(j->err, NL_EINVAL, "line %d: JSON: %s", j->line, what);
}

static void jws(jp_t *j) {
  while (j->s < j->end && (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r')) {
    if (*j->s == '\n') j->line++;
    j->s++;
  }
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

size_t nl__tree_put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* After the opening quote. Unescaped output is never longer than the input. */
static int jstring(jp_t *j, const char **out, size_t *out_len) {
  const char *start = j->s;
  const char *p = start;
  while (p < j->end && *p != '"' && *p != '\\') p++;
  if (p < j->end && *p == '"') { /* the common case: no escapes */
    *out = nl_arena_strndup(j->a, start, (size_t)(p - start));
    *out_len = (size_t)(p - start);
    for (const char *q = start; q < p; q++)
      if ((unsigned char)*q < 0x20) return jfail(j, "control character in string");
    j->s = p + 1;
    return 0;
  }
  const char *q = start;
  while (q < j->end && *q != '"') q += *q == '\\' ? 2 : 1;
  if (q >= j->end) { j->s = j->end; return jfail(j, "unterminated string"); }
  char *o = nl_arena_alloc(j->a, (size_t)(q - start) + 1), *w = o;
  p = start;
  while (p < q) {
    unsigned char c = (unsigned char)*p++;
    if (c < 0x20) return jfail(j, "control character in string");
    if (c != '\\') { *w++ = (char)c; continue; }
    switch (*p++) {
    case '"': *w++ = '"'; break;
    case '\\': *w++ = '\\'; break;
    case '/': *w++ = '/'; break;
    case 'b': *w++ = '\b'; break;
    case 'f': *w++ = '\f'; break;
    case 'n': *w++ = '\n'; break;
    case 'r': *w++ = '\r'; break;
    case 't': *w++ = '\t'; break;
    case 'u': {
      unsigned cp, lo;
      if (q - p < 4 || hex4(p, &cp)) return jfail(j, "bad \\u escape");
      p += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && q - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
          !hex4(p + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        p += 6;
      } else if (cp >= 0xD800 && cp < 0xE000) {
        cp = 0xFFFD; /* a lone surrogate, as Go's decoder */
      }
      w += nl__tree_put_utf8(w, cp);
      break;
    }
    default: return jfail(j, "bad escape");
    }
  }
  *w = 0;
  *out = o;
  *out_len = (size_t)(w - o);
  j->s = q + 1;
  return 0;
}

static nl_tnode_t *jvalue(jp_t *j, int depth);

static nl_tnode_t *jnumber(jp_t *j) {
  const char *p = j->s;
  bool is_int = true;
  if (p < j->end && *p == '-') p++;
  if (p < j->end && *p == '0') p++;
  else if (p < j->end && *p >= '1' && *p <= '9') while (p < j->end && *p >= '0' && *p <= '9') p++;
  else { jfail(j, "bad number"); return NULL; }
  if (p < j->end && *p == '.') {
    is_int = false;
    p++;
    if (p >= j->end || *p < '0' || *p > '9') { jfail(j, "bad number"); return NULL; }
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < j->end && (*p == 'e' || *p == 'E')) {
    is_int = false;
    p++;
    if (p < j->end && (*p == '+' || *p == '-')) p++;
    if (p >= j->end || *p < '0' || *p > '9') { jfail(j, "bad number"); return NULL; }
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  }
  nl_tnode_t *n = nl__tree_node_new(j->a, NL_T_FLOAT, j->line);
  n->len = (size_t)(p - j->s);
  n->s = nl_arena_strndup(j->a, j->s, n->len);
  if (is_int) {
    errno = 0;
    char *end;
    long long v = strtoll(n->s, &end, 10);
    if (!errno && !*end) n->kind = NL_T_INT, n->i = v;
  }
  j->s = p;
  return n;
}

static bool jlit(jp_t *j, const char *lit) {
  size_t l = strlen(lit);
  if ((size_t)(j->end - j->s) < l || memcmp(j->s, lit, l)) return false;
  j->s += l;
  return true;
}

/* A closed map or sequence keeps its text, so that callers can hand an embedded
 * object on without re-encoding it (watch events, list items). */
static nl_tnode_t *jspan(jp_t *j, nl_tnode_t *n) {
  n->len = (size_t)(j->s - n->s);
  return n;
}

static nl_tnode_t *jvalue(jp_t *j, int depth) {
  jws(j);
  if (j->s >= j->end) { jfail(j, ""); return NULL; }
  if (depth > MAX_DEPTH) { jfail(j, "nested too deeply"); return NULL; }
  nl_tnode_t *n;
  char c = *j->s;
  if (c == '{' || c == '[') {
    bool map = c == '{';
    n = nl__tree_node_new(j->a, map ? NL_T_MAP : NL_T_SEQ, j->line);
    n->s = j->s;
    j->s++;
    jws(j);
    if (j->s < j->end && *j->s == (map ? '}' : ']')) { j->s++; return jspan(j, n); }
    for (;;) {
      const char *key = NULL;
      size_t key_len = 0;
      if (map) {
        jws(j);
        if (j->s >= j->end || *j->s != '"') { jfail(j, "expected a string key"); return NULL; }
        j->s++;
        if (jstring(j, &key, &key_len)) return NULL;
        jws(j);
        if (j->s >= j->end || *j->s != ':') { jfail(j, "expected ':'"); return NULL; }
        j->s++;
      }
      nl_tnode_t *v = jvalue(j, depth + 1);
      if (!v) return NULL;
      nl__tree_add(j->a, n, key, key_len, v);
      jws(j);
      if (j->s < j->end && *j->s == ',') { j->s++; continue; }
      if (j->s < j->end && *j->s == (map ? '}' : ']')) { j->s++; return jspan(j, n); }
      jfail(j, map ? "expected ',' or '}'" : "expected ',' or ']'");
      return NULL;
    }
  }
  if (c == '"') {
    n = nl__tree_node_new(j->a, NL_T_STR, j->line);
    j->s++;
    return jstring(j, &n->s, &n->len) ? NULL : n;
  }
  if (c == '-' || (c >= '0' && c <= '9')) return jnumber(j);
  n = nl__tree_node_new(j->a, NL_T_NULL, j->line);
  if (jlit(j, "null")) return n;
  n->kind = NL_T_BOOL;
  if (jlit(j, "true")) { n->b = 1; return n; }
  if (jlit(j, "false")) return n;
  jfail(j, "unexpected character");
  return NULL;
}

nl_tnode_t *nl_tree_parse_json(nl_arena_t *a, const char *data, size_t len, nl_err_t **err) {
  jp_t j = {a, data, data + len, 1, err};
  nl_tnode_t *n = jvalue(&j, 0);
  if (!n) return NULL;
  jws(&j);
  if (j.s != j.end) {
    jfail(&j, "trailing data after the object");
    return NULL;
  }
  return n;
}

nl_tnode_t *nl_tree_parse(nl_arena_t *a, const char *data, size_t len, nl_err_t **err) {
  size_t i = 0;
  if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) i = 3; /* a UTF-8 BOM */
  while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r')) i++;
  if (i < len && (data[i] == '{' || data[i] == '['))
    return nl_tree_parse_json(a, data + i, len - i, err);
  return nl_tree_parse_yaml(a, data, len, err);
}
