/* The fast YAML reader (reactor/tree_yamlfast.c) against libyaml: on every fixture
 * and on a set of tricky snippets, either the fast reader gives up or both give
 * the same tree (kinds, typing, lines, keys, values), and it never takes input
 * libyaml rejects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <string.h>

#include "agent/model/pod.h"
#include "reactor/tree.h"
#include "fixture.h"

typedef enum { EITHER, FAST, FALLBACK } expect_t;

/* Returns true when the fast reader took the input. */
static bool compare(const char *what, const char *data, size_t len) {
  nl_arena_t *a = nl_arena_new(4096);
  nl_err_t *err = NULL;
  nl_tnode_t *slow = nl_tree_parse_libyaml(a, data, len, &err);
  nl_tnode_t *fast = nl_tree_parse_yaml_fast(a, data, len);
  if (fast) {
    if (!slow) fail_msg("%s: fast reader took input libyaml rejects: %s", what, nl_err_msg(err));
    nl_buf_t x = NL_BUF_INIT, y = NL_BUF_INIT;
    nl__tree_dump(slow, &x);
    nl__tree_dump(fast, &y);
    nl_buf_puts(&x, "");
    nl_buf_puts(&y, "");
    if (strcmp(x.data, y.data) != 0)
      fail_msg("%s: trees differ\nlibyaml: %s\nfast:    %s", what, x.data, y.data);
    nl_buf_free(&x);
    nl_buf_free(&y);
  }
  nl_err_free(&err);
  nl_arena_free(a);
  return fast != NULL;
}

static int fixtures_in(const char *dir, bool all_fast) {
  char path[1024];
  snprintf(path, sizeof path, "%s%s", FIXTURES, dir);
  DIR *d = opendir(path);
  assert_non_null(d);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    bool yaml = l > 5 && strcmp(de->d_name + l - 5, ".yaml") == 0;
    if (!yaml && !(l > 5 && strcmp(de->d_name + l - 5, ".json") == 0)) continue;
    char name[512];
    if (dir[0]) snprintf(name, sizeof name, "%s/%s", dir + 1, de->d_name);
    else snprintf(name, sizeof name, "%s", de->d_name);
    size_t len = 0;
    char *data = fixture_read(name, &len);
    assert_non_null(data);
    bool fast = compare(name, data, len);
    /* every well-formed YAML fixture is in the subset (the speed depends on it) */
    if (all_fast && yaml && strcmp(de->d_name, "yaml-syntax.yaml") != 0 && !fast)
      fail_msg("%s: the fast reader gave up", name);
    if (strcmp(de->d_name, "yaml-syntax.yaml") == 0) assert_false(fast);
    free(data);
    n++;
  }
  closedir(d);
  return n;
}

static void fixtures_agree(void **state) {
  (void)state;
  assert_true(fixtures_in("", true) >= 7);
  assert_true(fixtures_in("/invalid", true) >= 60);
}

/* nl_pod_decode takes the fast path for the typical manifest (the typed decoder
 * sees the same tree either way, so the pods are the same), and a syntax error
 * still carries libyaml's message. */
static void decode_uses_fast_path(void **state) {
  (void)state;
  size_t len = 0;
  char *data = fixture_read("typical-3k.yaml", &len);
  assert_non_null(data);
  nl_arena_t *a = nl_arena_new(4096);
  assert_non_null(nl_tree_parse_yaml_fast(a, data, len));
  nl_arena_free(a);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_decode(data, len, "t", &pod, &err), 0);
  assert_string_equal(pod->metadata.name, "sensor-gateway");
  assert_int_equal(pod->spec.n_containers, 2);
  nl_pod_free(pod);
  free(data);
  data = fixture_read("invalid/yaml-syntax.yaml", &len);
  assert_int_equal(nl_pod_decode(data, len, "s.yaml", &pod, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "s.yaml: line 8: YAML: did not find expected node content"));
  nl_err_free(&err);
  free(data);
}

static const struct {
  const char *yaml;
  expect_t expect;
} snippets[] = {
  {"a: b\n", FAST},
  {"key: \"a: b\"\n", FAST},
  {"key: 'a: b'\n", FAST},
  {"key: 'it''s'\n", FAST},
  {"key: \"tab\\there \\\"q\\\" \\\\ \\x41\\u00e9\\U0001F600 \\0 \\N\\_\\L\\P\"\n", FAST},
  {"key: \"\\/\"\n", EITHER},
  {"key: \"\\q\"\n", FALLBACK},
  {"key: \"\\ud800\"\n", FALLBACK},
  {"url: http://x:80/a?b=c#frag\n", FAST},
  {"image: registry.local/a/b:1.2\n", FAST},
  {"- - nested\n  - two\n- x\n", FAST},
  {"- - - deep\n", FAST},
  {"a: b   \nc: d  \n", FAST},
  {"a: b # comment\nc: 'd' # c\n# whole line\n  # indented comment\ne: [x] # c\n", FAST},
  {"key:    value\n", FAST},
  {"key:\nnext: 1\n", FAST},
  {"key:\n", FAST},
  {"key: # only a comment\n  sub: 1\n", FAST},
  {"a: 1\r\nb:\r\n- x\r\n- y: z\r\n  w: 'v'\r\n", FAST},
  {"a: 1\rb: 2\n", FALLBACK},
  {"---\na: 1\n", FAST},
  {"--- # doc\na: 1\n", FAST},
  {"--- a\n", FALLBACK},
  {"a: 1\n---\nb: 2\n", FALLBACK},
  {"a: 1\n...\n", FALLBACK},
  {"", FALLBACK},
  {"---\n", FALLBACK},
  {"# just a comment\n", FALLBACK},
  {"   \n\n", FALLBACK},
  {"a: yes\nb: No\nc: on\nd: ~\ne: null\nf: 0x1F\ng: 017\nh: 1_000\ni: 1.5\nj: .inf\nk: 1e3\n"
   "l: -7\nm: +3\nn: 0b101\no: 9223372036854775808\np: \"yes\"\nq: '1'\nr: -\n", FALLBACK},
  {"a: yes\nb: No\nc: on\nd: ~\ne: null\nf: 0x1F\ng: 017\nh: 1_000\ni: 1.5\nj: .inf\nk: 1e3\n"
   "l: -7\nm: +3\nn: 0b101\no: 9223372036854775808\np: \"yes\"\nq: '1'\n", FAST},
  {"cmd: [\"sh\", \"-c\", \"x\"]\nempty: []\nobj: {}\nm: {a: 1, 'b': [c, d], c: {}}\n", FAST},
  {"s: [a b, -1, .5, ~, yes]\n", FAST},
  {"s: [a, ]\n", FALLBACK},
  {"s: [a,,b]\n", FALLBACK},
  {"s: [a: b]\n", FALLBACK},
  {"s: [a\n  , b]\n", FALLBACK},
  {"s: {a: b\n", FALLBACK},
  {"s: [a]]\n", FALLBACK},
  {"[a]: b\n", FALLBACK},
  {"a: &x 1\nb: *x\n", FALLBACK},
  {"a: !!str 1\n", FALLBACK},
  {"a: |\n  text\n", FALLBACK},
  {"a: >\n  text\n", FALLBACK},
  {"a: multi\n  line\n", FALLBACK},
  {"a: \"multi\n  line\"\n", FALLBACK},
  {"a:\n  value\n", FALLBACK},
  {"? a\n: b\n", FALLBACK},
  {"a:\n\tb: 1\n", FALLBACK},
  {"a: b\tc\n", FALLBACK},
  {"%YAML 1.1\n---\na: 1\n", FALLBACK},
  {"a: b: c\n", FALLBACK},
  {"a: - b\n", FALLBACK},
  {"a:\n  - x\n  b: 1\n", FALLBACK},
  {"a:\n    b: 1\n  c: 2\n", FALLBACK},
  {"- a\n  - b\n", FALLBACK},
  {"- a: 1\n  b:\n  - x\n  c: 2\n- d\n", FAST},
  {"a:\n- 1\n-\n- - 2\nb: {}\n", FAST},
  {"  a: 1\n  b: 2\n", FAST},
  {"  a: 1\nb: 2\n", FALLBACK},
  {"a: 1\n a2: 2\n", FALLBACK},
  {"a#b: c # d\n", FAST},
  {"a: b#c\n", FAST},
  {"\"quoted key\": 1\n'single': 2\n", FAST},
  {"\"k\":v\n", FALLBACK},
  {"a: \"x\"#c\n", FALLBACK},
  {"a: 'unterminated\n", FALLBACK},
  {"caf\xc3\xa9: 1\n", FALLBACK},
  {"a: 1\n- b\n", FALLBACK},
  {"-\n  a: 1\n-\n", FAST},
  {"a: -1\nb: --x\nc: -.5\n", FAST},
  {"a: :x\n", FALLBACK},
  {"a: @x\n", FALLBACK},
  {"a: 'x' 'y'\n", FALLBACK},
  {"a: [x] y\n", FALLBACK},
  {"a: x\n\n\n   \nb: y\n", FAST},
  {"a: b\n  # deeper comment\nc: d\n", FAST},
};

static void snippets_agree(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof snippets / sizeof *snippets; i++) {
    const char *y = snippets[i].yaml;
    bool fast = compare(y, y, strlen(y));
    if (snippets[i].expect == FAST && !fast) fail_msg("snippet %zu: fast reader gave up: %s", i, y);
    if (snippets[i].expect == FALLBACK && fast) fail_msg("snippet %zu: fast reader took: %s", i, y);
  }
}

/* libyaml's 1024-byte simple-key limit: a long key is libyaml's to refuse. */
static void long_key_falls_back(void **state) {
  (void)state;
  nl_buf_t b = NL_BUF_INIT;
  for (int i = 0; i < 1100; i++) nl_buf_puts(&b, "k");
  nl_buf_puts(&b, ": v\n");
  assert_false(compare("long key", b.data, b.len));
  nl_buf_free(&b);
  /* the same in a flow mapping (found by fuzz_yamlfast) */
  nl_buf_puts(&b, "a: {");
  for (int i = 0; i < 1100; i++) nl_buf_puts(&b, "k");
  nl_buf_puts(&b, ": v}\n");
  assert_false(compare("long flow key", b.data, b.len));
  nl_buf_free(&b);
}

/* Deep nesting is left to libyaml (and the tree's depth limit). */
static void deep_nesting_falls_back(void **state) {
  (void)state;
  nl_buf_t b = NL_BUF_INIT;
  for (int i = 0; i < 70; i++) nl_buf_printf(&b, "%*sk:\n", i, "");
  nl_buf_printf(&b, "%*sk: v\n", 70, "");
  assert_false(compare("deep", b.data, b.len));
  nl_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(fixtures_agree),
    cmocka_unit_test(decode_uses_fast_path),
    cmocka_unit_test(snippets_agree),
    cmocka_unit_test(long_key_falls_back),
    cmocka_unit_test(deep_nesting_falls_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
