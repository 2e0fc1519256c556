/* Differential libFuzzer target: the fast YAML reader (reactor/tree_yamlfast.c)
 * against libyaml. Whenever the fast reader takes an input, libyaml must accept
 * it too and build the same tree (kinds, typing, lines, keys, values). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nl_arena_t *a = nl_arena_new(4096);
  const char *in = (const char *)data;
  nl_tnode_t *fast = nl_tree_parse_yaml_fast(a, in, size);
  if (fast) {
    nl_err_t *err = NULL;
    nl_tnode_t *slow = nl_tree_parse_libyaml(a, in, size, &err);
    if (!slow) {
      fprintf(stderr, "fast reader took input libyaml rejects (%s):\n%.*s\n", nl_err_msg(err),
              (int)size, in);
      abort();
    }
    nl_buf_t x = NL_BUF_INIT, y = NL_BUF_INIT;
    nl__tree_dump(slow, &x);
    nl__tree_dump(fast, &y);
    nl_buf_puts(&x, "");
    nl_buf_puts(&y, "");
    if (strcmp(x.data, y.data) != 0) {
      fprintf(stderr, "trees differ\nlibyaml: %s\nfast:    %s\ninput:\n%.*s\n", x.data, y.data,
              (int)size, in);
      abort();
    }
    nl_buf_free(&x);
    nl_buf_free(&y);
  }
  nl_arena_free(a);
  return 0;
}
