/* The generic document tree that YAML and JSON parse into, in an arena: the
 * model's typed decoder (agent/model/decode.c), the API client (kubeconfig,
 * Status, watch events) and the sources (checkpoint) walk it. Knows nothing of
 * Kubernetes. */
#ifndef NL_REACTOR_TREE_H
#define NL_REACTOR_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "reactor/arena.h"
#include "reactor/buf.h"
#include "reactor/error.h"

typedef enum nl_tkind {
  NL_T_NULL,
  NL_T_BOOL,
  NL_T_INT,   /* s holds the text as written; i its value */
  NL_T_FLOAT, /* s holds the text as written */
  NL_T_STR,
  NL_T_MAP,
  NL_T_SEQ,
} nl_tkind_t;

typedef struct nl_tentry {
  struct nl_tentry *next;
  const char *key; /* maps only */
  size_t key_len;
  struct nl_tnode *val;
} nl_tentry_t;

typedef struct nl_tnode {
  nl_tkind_t kind;
  int line; /* 1-based, for messages */
  int b;
  int64_t i;
  /* scalars: NUL-terminated; may contain NULs in JSON (len). Maps and sequences
   * parsed from JSON: their text in the input (not NUL-terminated, valid as long
   * as the input); NULL from YAML. */
  const char *s;
  size_t len;
  nl_tentry_t *first, *last; /* maps and sequences */
  size_t n;
} nl_tnode_t;

/* Parse into a tree allocated in a. Return the root (NL_T_NULL for an empty
 * document), or NULL with *err ("line N: ..."). */
nl_tnode_t *nl_tree_parse_yaml(nl_arena_t *a, const char *data, size_t len, nl_err_t **err);
/* The two halves of nl_tree_parse_yaml: the fast reader (tree_yamlfast.c) for the
 * subset manifests use returns NULL, without an error, for anything it does not
 * take (nodes it made stay in a); libyaml takes everything. Tests call each. */
nl_tnode_t *nl_tree_parse_yaml_fast(nl_arena_t *a, const char *data, size_t len);
nl_tnode_t *nl_tree_parse_libyaml(nl_arena_t *a, const char *data, size_t len, nl_err_t **err);
nl_tnode_t *nl_tree_parse_json(nl_arena_t *a, const char *data, size_t len, nl_err_t **err);
/* JSON when the first non-blank byte is '{' or '[', else YAML. */
nl_tnode_t *nl_tree_parse(nl_arena_t *a, const char *data, size_t len, nl_err_t **err);

/* The value under key in a map, or NULL. */
nl_tnode_t *nl_tree_get(const nl_tnode_t *map, const char *key);
const char *nl_tree_kind_name(nl_tkind_t k);

/* Building blocks shared by the parsers. */
nl_tnode_t *nl__tree_node_new(nl_arena_t *a, nl_tkind_t kind, int line);
void nl__tree_add(nl_arena_t *a, nl_tnode_t *parent, const char *key, size_t key_len,
                  nl_tnode_t *val);
/* YAML 1.1 typing of a plain scalar n (NL_T_STR with s set): null, bool, int, float. */
void nl__tree_resolve_plain(nl_tnode_t *n);
/* Writes code point cp as UTF-8 at o (room for 4 bytes); returns the length. */
size_t nl__tree_put_utf8(char *o, unsigned cp);

/* A canonical text form of a tree (kinds, lines, keys, values escaped), for the
 * tests that compare the two YAML readers. */
void nl__tree_dump(const nl_tnode_t *n, nl_buf_t *out);

#endif
