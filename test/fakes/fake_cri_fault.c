/* Fault rules of the fake CRI server and their one-line control syntax. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/xalloc.h"
#include "test/fakes/fake_cri_int.h"

static void rule_free(void *p) {
  fake_cri_rule_t *r = p;
  if (!r) return;
  free(r->msg);
  free(r);
}

static bool is_global(const char *method) {
  return !method || strcmp(method, "*") == 0;
}

void fake_cri_set_fault(fake_cri_t *f, const char *method, const fake_cri_fault_t *fault) {
  fake_cri_rule_t *r = NULL;
  if (fault->kind != FAKE_CRI_ANSWER || fault->delay_ms > 0) {
    r = nl_xcalloc(1, sizeof(*r));
    r->fault = *fault;
    r->msg = nl_xstrdup(fault->message ? fault->message : "");
    r->fault.message = r->msg;
  }
  if (is_global(method)) {
    rule_free(f->global);
    f->global = r;
  } else if (r) {
    rule_free(nl_map_put(&f->rules, method, r));
  } else {
    rule_free(nl_map_del(&f->rules, method));
  }
}

void fake_cri_clear_faults(fake_cri_t *f) {
  rule_free(f->global);
  f->global = NULL;
  nl_map_free(&f->rules, rule_free);
  nl_map_init(&f->rules);
}

void fake_cri__faults_free(fake_cri_t *f) {
  rule_free(f->global);
  f->global = NULL;
  nl_map_free(&f->rules, rule_free);
}

bool fake_cri__fault_take(fake_cri_t *f, const char *method, fake_cri_fault_t *out) {
  fake_cri_rule_t *r = nl_map_get(&f->rules, method);
  bool global = false;
  if (!r) {
    r = f->global;
    global = true;
  }
  if (!r) return false;
  *out = r->fault;
  out->message = nl_xstrdup(r->msg);
  if (r->fault.times > 0 && --r->fault.times == 0) {
    if (global) {
      rule_free(f->global);
      f->global = NULL;
    } else {
      rule_free(nl_map_del(&f->rules, method));
    }
  }
  return true;
}

/* ---- control syntax -------------------------------------------------------- */

static const struct {
  const char *name;
  fake_cri_fault_kind_t kind;
} kinds[] = {
    {"ok", FAKE_CRI_ANSWER},          {"delay", FAKE_CRI_ANSWER},
    {"status", FAKE_CRI_STATUS},      {"drop", FAKE_CRI_DROP},
    {"malformed", FAKE_CRI_MALFORMED}, {"bad-message", FAKE_CRI_BAD_MESSAGE},
    {"oversize", FAKE_CRI_OVERSIZE},  {"stall", FAKE_CRI_STALL},
};

/* Next whitespace-separated token of *p into tok (size n); false at the end. */
static bool next_tok(const char **p, char *tok, size_t n) {
  const char *s = *p;
  while (*s && isspace((unsigned char)*s)) s++;
  if (!*s) return false;
  size_t i = 0;
  while (*s && !isspace((unsigned char)*s)) {
    if (i + 1 < n) tok[i++] = *s;
    s++;
  }
  tok[i] = 0;
  *p = s;
  return true;
}

static int parse_u64(const char *s, uint64_t *v) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(s, &end, 10);
  if (errno || end == s || *end || *s == '-') return -1;
  *v = x;
  return 0;
}

int fake_cri_apply_line(fake_cri_t *f, const char *line, nl_err_t **err) {
  const char *p = line;
  char method[96], kind[32], tok[64];
  if (!next_tok(&p, method, sizeof(method)) || method[0] == '#') return 0;
  if (strcmp(method, "clear") == 0) {
    fake_cri_clear_faults(f);
    return 0;
  }
  if (!next_tok(&p, kind, sizeof(kind)))
    return nl_err_set(err, NL_EINVAL, "fake-cri control: \"%s\": missing fault kind", line);
  fake_cri_fault_t fault = {.kind = FAKE_CRI_STATUS + 100};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (strcmp(kind, kinds[i].name) == 0) fault.kind = kinds[i].kind;
  if ((int)fault.kind == FAKE_CRI_STATUS + 100)
    return nl_err_set(err, NL_EINVAL, "fake-cri control: unknown fault kind \"%s\"", kind);
  if (strcmp(kind, "delay") == 0) {
    if (!next_tok(&p, tok, sizeof(tok)) || parse_u64(tok, &fault.delay_ms) < 0)
      return nl_err_set(err, NL_EINVAL, "fake-cri control: \"%s\": delay needs milliseconds",
                        line);
  } else if (fault.kind == FAKE_CRI_STATUS) {
    uint64_t code;
    if (!next_tok(&p, tok, sizeof(tok)) || parse_u64(tok, &code) < 0 || code < 1 || code > 16)
      return nl_err_set(err, NL_EINVAL, "fake-cri control: \"%s\": status needs a code 1..16",
                        line);
    fault.code = (int)code;
  }
  /* Options, then (for status) the message: the rest of the line. */
  for (;;) {
    const char *save = p;
    if (!next_tok(&p, tok, sizeof(tok))) break;
    uint64_t v;
    if (strncmp(tok, "after=", 6) == 0 && parse_u64(tok + 6, &v) == 0) {
      fault.delay_ms = v;
    } else if (strncmp(tok, "times=", 6) == 0 && parse_u64(tok + 6, &v) == 0) {
      fault.times = (unsigned)v;
    } else if (fault.kind == FAKE_CRI_STATUS) {
      p = save;
      break;
    } else {
      return nl_err_set(err, NL_EINVAL, "fake-cri control: \"%s\": unexpected \"%s\"", line,
                        tok);
    }
  }
  while (*p && isspace((unsigned char)*p)) p++;
  size_t mlen = strlen(p);
  while (mlen > 0 && isspace((unsigned char)p[mlen - 1])) mlen--;
  char *msg = nl_xstrndup(p, mlen);
  fault.message = msg;
  fake_cri_set_fault(f, method, &fault);
  free(msg);
  return 0;
}

int fake_cri_apply_text(fake_cri_t *f, const char *text, nl_err_t **err) {
  fake_cri_clear_faults(f);
  int n = 0, lineno = 0;
  const char *s = text;
  while (*s) {
    const char *e = strchr(s, '\n');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    char *line = nl_xstrndup(s, len);
    lineno++;
    const char *q = line;
    while (*q && isspace((unsigned char)*q)) q++;
    bool rule = *q && *q != '#';
    int rv = fake_cri_apply_line(f, line, err);
    free(line);
    if (rv < 0) return nl_err_wrap(err, "line %d", lineno);
    n += rule;
    s += len;
    if (*s == '\n') s++;
  }
  return n;
}
