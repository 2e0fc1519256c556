/* A fast reader for the YAML subset Kubernetes manifests are written in, giving
 * the same tree as the libyaml path (tree.c) about ten times faster: libyaml's
 * scanner alone costs more than the whole decode budget (docs/PERFORMANCE.md).
 *
 * The subset: block mappings and sequences by indentation (indentless sequences
 * under a key, `- key: v` compact mappings, `- - x`), one-line flow collections
 * (`["sh", "-c", "x"]`, `{a: b}`, `[]`, `{}`), one-line plain, single- and
 * double-quoted scalars, comments, one leading `---`. Anything else - anchors,
 * aliases, tags, block scalars, multi-line scalars or flows, complex keys, tabs,
 * non-ASCII bytes, directives, a second document, empty documents, anything
 * doubtful - is "not handled" (NULL) and the caller runs libyaml, so messages
 * and behaviour for unusual input stay libyaml's. The rule when in doubt is to
 * give up: test/fuzz/manifest/fuzz_yamlfast.c checks the two paths against
 * each other. Nodes allocated before giving up stay in the scratch arena. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "reactor/tree.h"

/* The libyaml path refuses more than 64 nested collections; give up well before. */
#define FAST_MAX_DEPTH 48
/* libyaml drops a simple key that starts more than 1024 bytes before its ':'. */
#define FAST_MAX_KEY 1000

typedef struct yf {
  nl_arena_t *a;
  const char *next; /* start of the line after the current one */
  const char *end;
  const char *p;   /* current line: first non-space byte */
  const char *eol; /* current line: end of content (before "\r\n" or "\n") */
  int line;        /* current line, 1-based */
  int next_line;
  int indent; /* column of p; -1 at the end of input */
  bool started;
  int depth;
} yf_t;

typedef enum ctx {
  OWN_LINE,    /* first thing on its line: a collection (a scalar may go on) */
  AFTER_DASH,  /* after "- ": anything on this line */
  AFTER_COLON, /* after "key: ": a scalar or a flow collection */
} ctx_t;

static inline bool blank_or_end(const char *s, const char *eol) { return s == eol || *s == ' '; }

static const char *skip_spaces(const char *s, const char *eol) {
  while (s < eol && *s == ' ') s++;
  return s;
}

static bool is_doc_marker(const char *s, const char *eol) {
  return eol - s >= 3 && (memcmp(s, "---", 3) == 0 || memcmp(s, "...", 3) == 0) &&
         blank_or_end(s + 3, eol);
}

/* Move to the next line with content, skipping blank and comment lines. false:
 * give up (a document marker past the first content line). */
static bool advance(yf_t *P) {
  while (P->next < P->end) {
    const char *s = P->next;
    const char *nl = memchr(s, '\n', (size_t)(P->end - s));
    const char *eol = nl ? nl : P->end;
    P->next = nl ? nl + 1 : P->end;
    int line = P->next_line++;
    if (eol > s && eol[-1] == '\r') eol--;
    const char *c = skip_spaces(s, eol);
    if (c == eol || *c == '#') continue;
    if (c == s && is_doc_marker(c, eol)) {
      if (P->started || *c == '.') return false;
      const char *r = skip_spaces(c + 3, eol);
      if (r != eol && *r != '#') return false;
      P->started = true;
      continue;
    }
    P->started = true;
    P->p = c;
    P->eol = eol;
    P->line = line;
    P->indent = (int)(c - s);
    return true;
  }
  P->indent = -1;
  P->p = P->eol = P->end;
  return true;
}

static inline int col_of(const yf_t *P, const char *s) { return P->indent + (int)(s - P->p); }

static inline bool is_seq_entry(const char *s, const char *eol) {
  return *s == '-' && blank_or_end(s + 1, eol);
}

/* ---- scalars ---- */

static nl_tnode_t *scalar(yf_t *P, nl_tkind_t kind, const char *s, size_t len) {
  nl_tnode_t *n = nl__tree_node_new(P->a, kind, P->line);
  n->s = nl_arena_strndup(P->a, s, len);
  n->len = len;
  return n;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A quoted scalar starting at *sp (the quote), closed on this line. Moves *sp
 * past the closing quote. NULL: give up. */
static nl_tnode_t *quoted(yf_t *P, const char **sp) {
  const char *s = *sp, *eol = P->eol;
  char q = *s++;
  const char *e = s;
  bool plain_copy = true;
  if (q == '\'') {
    for (;; e++) {
      if (e == eol) return NULL;
      if (*e != '\'') continue;
      if (e + 1 < eol && e[1] == '\'') { plain_copy = false; e++; continue; }
      break;
    }
  } else {
    for (;; e++) {
      if (e == eol) return NULL;
      if (*e == '"') break;
      if (*e == '\\') {
        plain_copy = false;
        if (++e == eol) return NULL; /* an escaped line break */
      }
    }
  }
  *sp = e + 1;
  if (plain_copy) return scalar(P, NL_T_STR, s, (size_t)(e - s));
  /* escapes never produce more bytes than they take (\x: 4 -> <=2, \u: 6 -> <=3,
   * \U: 10 -> <=4, \N \_: 2 -> 2, \L \P: 2 -> 3 is the exception) */
  char *o = nl_arena_alloc(P->a, (size_t)(e - s) * 2 + 1), *w = o;
  for (const char *r = s; r < e;) {
    char c = *r++;
    if (q == '\'') {
      *w++ = c;
      if (c == '\'') r++;
      continue;
    }
    if (c != '\\') { *w++ = c; continue; }
    c = *r++;
    int digits = 0;
    switch (c) {
    case '0': *w++ = 0; break;
    case 'a': *w++ = '\a'; break;
    case 'b': *w++ = '\b'; break;
    case 't': *w++ = '\t'; break;
    case 'n': *w++ = '\n'; break;
    case 'v': *w++ = '\v'; break;
    case 'f': *w++ = '\f'; break;
    case 'r': *w++ = '\r'; break;
    case 'e': *w++ = 0x1B; break;
    case ' ': *w++ = ' '; break;
    case '"': *w++ = '"'; break;
    case '\\': *w++ = '\\'; break;
    case 'N': w += nl__tree_put_utf8(w, 0x85); break;
    case '_': w += nl__tree_put_utf8(w, 0xA0); break;
    case 'L': w += nl__tree_put_utf8(w, 0x2028); break;
    case 'P': w += nl__tree_put_utf8(w, 0x2029); break;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default: return NULL; /* unknown, or one that differs between libyaml versions */
    }
    if (!digits) continue;
    if (e - r < digits) return NULL;
    uint32_t cp = 0;
    for (int i = 0; i < digits; i++) {
      int h = hexval(*r++);
      if (h < 0) return NULL;
      cp = cp << 4 | (uint32_t)h;
    }
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return NULL;
    w += nl__tree_put_utf8(w, cp);
  }
  nl_tnode_t *n = nl__tree_node_new(P->a, NL_T_STR, P->line);
  n->s = o;
  n->len = (size_t)(w - o);
  *w = 0;
  return n;
}

/* Bytes that cannot start a plain scalar we take (YAML's indicators; '-' is
 * checked apart). */
static bool indicator(char c) {
  switch (c) {
  case '?': case ':': case ',': case '[': case ']': case '{': case '}': case '#':
  case '&': case '*': case '!': case '|': case '>': case '\'': case '"': case '%':
  case '@': case '`':
    return true;
  default:
    return false;
  }
}

/* A plain scalar in block context from s: up to ": ", " #" or the end of the
 * line, trailing spaces dropped. NULL: not one we take. Left untyped: keys stay
 * text; values go through nl__tree_resolve_plain. */
static nl_tnode_t *plain_block(yf_t *P, const char **sp) {
  const char *s = *sp, *eol = P->eol;
  if (indicator(*s)) return NULL;
  if (*s == '-' && blank_or_end(s + 1, eol)) return NULL;
  const char *e = s, *last = s; /* last: one past the last non-space */
  while (e < eol) {
    if (*e == ' ') {
      if (e + 1 < eol && e[1] == '#') break;
      e++;
      continue;
    }
    if (*e == ':' && blank_or_end(e + 1, eol)) break;
    last = ++e;
  }
  *sp = last;
  return scalar(P, NL_T_STR, s, (size_t)(last - s));
}

/* A plain scalar inside a flow collection, stricter than YAML needs; a key
 * stops at ':'. */
static nl_tnode_t *plain_flow(yf_t *P, const char **sp, bool key) {
  const char *s = *sp, *eol = P->eol;
  if ((indicator(*s) || *s == '-' || *s == ' ') &&
      !(*s == '-' && s + 1 < eol && (hexval(s[1]) >= 0 || s[1] == '.')))
    return NULL;
  const char *e = s, *last = s;
  for (; e < eol && *e != ',' && *e != ']' && *e != '}'; e++) {
    if (key && *e == ':') break;
    if (*e == ':' || *e == '#' || *e == '[' || *e == '{' || *e == '\'' || *e == '"') return NULL;
    if (*e != ' ') last = e + 1;
  }
  if (e == eol) return NULL;
  *sp = last;
  nl_tnode_t *n = scalar(P, NL_T_STR, s, (size_t)(last - s));
  if (!key) nl__tree_resolve_plain(n);
  return n;
}

/* ---- collections ---- */

static nl_tnode_t *flow(yf_t *P, const char **sp);

static nl_tnode_t *flow_item(yf_t *P, const char **sp, bool key) {
  char c = **sp;
  if (c == '[' || c == '{') return key ? NULL : flow(P, sp);
  if (c == '"' || c == '\'') return quoted(P, sp);
  return plain_flow(P, sp, key);
}

/* A flow collection that ends on this line; *sp at '[' or '{'. */
static nl_tnode_t *flow(yf_t *P, const char **sp) {
  const char *s = *sp, *eol = P->eol;
  bool map = *s == '{';
  char close = map ? '}' : ']';
  if (++P->depth > FAST_MAX_DEPTH) return NULL;
  nl_tnode_t *n = nl__tree_node_new(P->a, map ? NL_T_MAP : NL_T_SEQ, P->line);
  s = skip_spaces(s + 1, eol);
  if (s < eol && *s == close) {
    *sp = s + 1;
    P->depth--;
    return n;
  }
  for (;;) {
    if (s == eol) return NULL;
    nl_tnode_t *key = NULL;
    if (map) {
      const char *k = s;
      key = flow_item(P, &s, true);
      if (!key) return NULL;
      s = skip_spaces(s, eol);
      if (s + 1 >= eol || s[0] != ':' || s[1] != ' ' || s - k > FAST_MAX_KEY) return NULL;
      s = skip_spaces(s + 1, eol);
      if (s == eol) return NULL;
    }
    nl_tnode_t *v = flow_item(P, &s, false);
    if (!v) return NULL;
    s = skip_spaces(s, eol);
    if (s == eol) return NULL;
    if (key) nl__tree_add(P->a, n, key->s, key->len, v);
    else nl__tree_add(P->a, n, NULL, 0, v);
    if (*s == close) break;
    if (*s != ',') return NULL; /* includes a "key: value" pair in a sequence */
    s = skip_spaces(s + 1, eol);
    if (s == eol || *s == close || *s == ',') return NULL; /* [a, ] and [a,,b]: libyaml's */
  }
  *sp = s + 1;
  P->depth--;
  return n;
}

static nl_tnode_t *node(yf_t *P, const char *s, ctx_t ctx);

static nl_tnode_t *block_seq(yf_t *P, const char *s, bool indentless);

/* The value after "key:" or "-" with nothing more on the line: the next lines
 * hold it if indented deeper (or, under a key, a sequence at the key's column). */
static nl_tnode_t *value_below(yf_t *P, int col, int line, bool under_key) {
  if (!advance(P)) return NULL;
  if (P->indent > col) return node(P, P->p, OWN_LINE);
  if (under_key && P->indent == col && is_seq_entry(P->p, P->eol)) return block_seq(P, P->p, true);
  nl_tnode_t *n = nl__tree_node_new(P->a, NL_T_NULL, line); /* an empty value */
  n->s = "";
  return n;
}

/* After a value that ended its line: the rest of the line must be empty or a
 * comment (after a space). Moves to the next line. */
static bool end_of_value(yf_t *P, const char *s) {
  const char *r = skip_spaces(s, P->eol);
  if (r != P->eol && !(*r == '#' && r > s)) return false;
  return advance(P);
}

/* indentless: a sequence at its key's column (YAML's "- " under "containers:"),
 * which ends at a line of that column that is not "- ". */
static nl_tnode_t *block_seq(yf_t *P, const char *s, bool indentless) {
  int col = col_of(P, s);
  if (++P->depth > FAST_MAX_DEPTH) return NULL;
  nl_tnode_t *n = nl__tree_node_new(P->a, NL_T_SEQ, P->line);
  for (;;) {
    const char *v = skip_spaces(s + 1, P->eol);
    nl_tnode_t *item;
    if (v == P->eol || *v == '#') item = value_below(P, col, P->line, false);
    else item = node(P, v, AFTER_DASH);
    if (!item) return NULL;
    nl__tree_add(P->a, n, NULL, 0, item);
    if (P->indent < col) break;
    if (P->indent > col) return NULL;
    if (!is_seq_entry(P->p, P->eol)) {
      if (indentless) break;
      return NULL;
    }
    s = P->p;
  }
  P->depth--;
  return n;
}

/* A key at *sp (plain or quoted) and its ':'; NULL when *sp does not start a
 * key. *sp ends after the ':'. */
static nl_tnode_t *key_at(yf_t *P, const char **sp) {
  const char *s = *sp;
  nl_tnode_t *k = (*s == '"' || *s == '\'') ? quoted(P, &s) : plain_block(P, &s);
  if (!k) return NULL;
  s = skip_spaces(s, P->eol);
  if (s == P->eol || *s != ':' || !blank_or_end(s + 1, P->eol) || s - *sp > FAST_MAX_KEY)
    return NULL;
  *sp = s + 1;
  return k;
}

/* A block mapping whose first key k starts at column col; s is after its ':'. */
static nl_tnode_t *block_map(yf_t *P, int col, nl_tnode_t *k, const char *s) {
  if (++P->depth > FAST_MAX_DEPTH) return NULL;
  nl_tnode_t *n = nl__tree_node_new(P->a, NL_T_MAP, P->line);
  for (;;) {
    const char *v = skip_spaces(s, P->eol);
    nl_tnode_t *val;
    if (v == P->eol || *v == '#') val = value_below(P, col, P->line, true);
    else val = node(P, v, AFTER_COLON);
    if (!val) return NULL;
    nl__tree_add(P->a, n, k->s, k->len, val);
    if (P->indent < col) break;
    if (P->indent > col) return NULL;
    s = P->p; /* a "- " here (a sequence not under a key) fails in key_at */
    if (!(k = key_at(P, &s))) return NULL;
  }
  P->depth--;
  return n;
}

/* The node starting at s on the current line. Leaves the reader on the first
 * line after it. */
static nl_tnode_t *node(yf_t *P, const char *s, ctx_t ctx) {
  if (is_seq_entry(s, P->eol)) return ctx == AFTER_COLON ? NULL : block_seq(P, s, false);
  if (*s == '[' || *s == '{') {
    if (ctx == OWN_LINE) return NULL;
    const char *r = s;
    nl_tnode_t *n = flow(P, &r);
    if (!n) return NULL;
    const char *t = skip_spaces(r, P->eol);
    if (t < P->eol && *t == ':') return NULL; /* a complex key */
    return end_of_value(P, r) ? n : NULL;
  }
  const char *r = s;
  bool is_plain = *s != '"' && *s != '\'';
  nl_tnode_t *n = is_plain ? plain_block(P, &r) : quoted(P, &r);
  if (!n) return NULL;
  const char *t = skip_spaces(r, P->eol);
  if (t < P->eol && *t == ':') { /* a key: s starts a mapping */
    if (ctx == AFTER_COLON || !blank_or_end(t + 1, P->eol) || t - s > FAST_MAX_KEY) return NULL;
    return block_map(P, col_of(P, s), n, t + 1);
  }
  if (ctx == OWN_LINE) return NULL; /* a scalar alone on its line may go on below */
  if (is_plain) nl__tree_resolve_plain(n);
  return end_of_value(P, r) ? n : NULL;
}

nl_tnode_t *nl_tree_parse_yaml_fast(nl_arena_t *a, const char *data, size_t len) {
  /* a quick pass over bytes the subset never holds (all but printable ASCII and
   * '\n'); the exact check only if there are any */
  static const unsigned char outside[256] = {
    [0 ... 0x09] = 1, [0x0B ... 0x1F] = 1, [0x7F ... 0xFF] = 1,
  };
  unsigned odd = 0;
  for (size_t i = 0; i < len; i++) odd |= outside[(unsigned char)data[i]];
  for (size_t i = 0; odd && i < len; i++) {
    unsigned char c = (unsigned char)data[i];
    if (c >= 0x20 && c < 0x7F) continue;
    if (c == '\n' || (c == '\r' && i + 1 < len && data[i + 1] == '\n')) continue;
    return NULL; /* tabs, control characters, non-ASCII, a lone CR */
  }
  yf_t P = {.a = a, .next = data, .end = data + len, .next_line = 1};
  if (!advance(&P) || P.indent < 0) return NULL;
  nl_tnode_t *root = node(&P, P.p, OWN_LINE);
  if (!root || P.indent >= 0) return NULL; /* anything after the root: libyaml decides */
  return root;
}

/* ---- for the tests ---- */

static void dump_str(nl_buf_t *out, const char *s, size_t len) {
  nl_buf_puts(out, "\"");
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c >= 0x7F || c == '"' || c == '\\') nl_buf_printf(out, "\\x%02x", c);
    else nl_buf_append(out, &s[i], 1);
  }
  nl_buf_puts(out, "\"");
}

void nl__tree_dump(const nl_tnode_t *n, nl_buf_t *out) {
  static const char *const kinds[] = {"null", "bool", "int", "float", "str", "map", "seq"};
  nl_buf_printf(out, "%s@%d", kinds[n->kind], n->line);
  switch (n->kind) {
  case NL_T_BOOL: nl_buf_printf(out, "(%d)", n->b); break;
  case NL_T_INT: nl_buf_printf(out, "(%lld)", (long long)n->i); break;
  default: break;
  }
  if (n->kind != NL_T_MAP && n->kind != NL_T_SEQ) {
    if (n->s) dump_str(out, n->s, n->len);
    return;
  }
  nl_buf_printf(out, "%c", n->kind == NL_T_MAP ? '{' : '[');
  size_t count = 0;
  for (const nl_tentry_t *e = n->first; e; e = e->next, count++) {
    if (e != n->first) nl_buf_puts(out, ", ");
    if (n->kind == NL_T_MAP) {
      dump_str(out, e->key, e->key_len);
      nl_buf_puts(out, ": ");
    }
    nl__tree_dump(e->val, out);
  }
  nl_buf_printf(out, "%c", n->kind == NL_T_MAP ? '}' : ']');
  if (count != n->n) nl_buf_printf(out, "<n=%zu!>", n->n);
}
