/* The list of settings nanolet parses but ignores: each names a real field,
 * start-up warns for exactly those the user set, --help marks them, and
 * docs/DIFFERENCES.md (argv[1]) lists the same ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/config.h"
#include "agent/config_ignored.h"
#include "reactor/buf.h"
#include "reactor/log.h"

static const char *differences_path;

#define BEGIN_MARK "<!-- ignored settings: begin (from agent/config_ignored.c) -->\n"
#define END_MARK "<!-- ignored settings: end -->\n"

static void every_entry_names_one_field(void **state) {
  (void)state;
  size_t n = 0;
  for (const nl_config_ignored_t *ig = nl__config_ignored; ig->name; ig++, n++) {
    const nl_config_field_t *f = nl__config_ignored_field(ig);
    if (!f) fail_msg("agent/config_ignored.c: \"%s\" is no field or flag of config_fields.c", ig->name);
    assert_ptr_equal(nl__config_ignored_find(f), ig); /* and only once */
    if (ig->file) assert_int_equal(f->type, NL_F_STRING);
  }
  assert_true(n > 0);
}

/* The markdown lines docs/DIFFERENCES.md must hold between the markers. */
static void expected_doc(nl_buf_t *b) {
  for (const nl_config_ignored_t *ig = nl__config_ignored; ig->name; ig++) {
    const nl_config_field_t *f = nl__config_ignored_field(ig);
    if (f->name && f->flag) nl_buf_printf(b, "- `%s` (`--%s`)", f->name, f->flag);
    else if (f->name) nl_buf_printf(b, "- `%s` (file only)", f->name);
    else nl_buf_printf(b, "- `--%s`", f->flag);
    if (ig->file)
      nl_buf_printf(b, ": must name a readable file, which is then ignored: %s\n", ig->note);
    else if (ig->note)
      nl_buf_printf(b, ": only partly supported: %s\n", ig->note);
    else
      nl_buf_puts(b, "\n");
  }
}

static void differences_md_lists_the_same_settings(void **state) {
  (void)state;
  assert_non_null(differences_path);
  FILE *f = fopen(differences_path, "r");
  if (!f) fail_msg("cannot read %s", differences_path);
  nl_buf_t doc = NL_BUF_INIT, want = NL_BUF_INIT;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) nl_buf_append(&doc, chunk, n);
  fclose(f);
  nl_buf_append(&doc, "", 1);
  expected_doc(&want);
  nl_buf_append(&want, "", 1);
  const char *begin = strstr(doc.data, BEGIN_MARK);
  const char *end = begin ? strstr(begin, END_MARK) : NULL;
  if (!end)
    fail_msg("docs/DIFFERENCES.md has lost its markers %s and %s", BEGIN_MARK, END_MARK);
  begin += strlen(BEGIN_MARK);
  size_t len = (size_t)(end - begin);
  if (len != strlen(want.data) || memcmp(begin, want.data, len)) {
    /* Say which lines to delete and which to add, then the whole block. */
    char *have = strndup(begin, len);
    fprintf(stderr, "docs/DIFFERENCES.md does not list the settings of agent/config_ignored.c:\n");
    for (char *l = strtok(have, "\n"); l; l = strtok(NULL, "\n")) {
      char *line = NULL;
      if (asprintf(&line, "%s\n", l) < 0) abort();
      if (!strstr(want.data, line)) fprintf(stderr, "  delete the line: %s", line);
      free(line);
    }
    free(have);
    have = strndup(begin, len);
    char *w = strdup(want.data);
    for (char *l = strtok(w, "\n"); l; l = strtok(NULL, "\n"))
      if (!strstr(have, l)) fprintf(stderr, "  add the line:    %s\n", l);
    fprintf(stderr, "The lines between the markers, in this order:\n%s", want.data);
    free(w);
    free(have);
    fail_msg("docs/DIFFERENCES.md is out of step with agent/config_ignored.c (see above)");
  }
  nl_buf_free(&doc);
  nl_buf_free(&want);
}

/* Runs the start-up check with the log captured; returns its result. */
static int check(const nl_kubelet_config_t *c, nl_buf_t *log, nl_err_t **err) {
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  nl_log_set_fd(fileno(tmp));
  int rc = nl_config_check_ignored(c, err);
  nl_log_set_fd(-1);
  rewind(tmp);
  char line[512];
  while (fgets(line, sizeof line, tmp)) {
    const char *msg = strstr(line, "] ");
    nl_buf_puts(log, msg ? msg + 2 : line);
  }
  fclose(tmp);
  nl_buf_append(log, "", 1);
  return rc;
}

static size_t field_index(const char *file_name) {
  for (size_t i = 0; i < nl__config_nfields; i++)
    if (nl__config_fields[i].name && !strcmp(nl__config_fields[i].name, file_name)) return i;
  fail_msg("no field %s", file_name);
  return 0;
}

static void parsing_records_what_the_user_set(void **state) {
  (void)state;
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  bool help, version;
  nl_config_defaults(&c);
  const char *yaml = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                     "maxPods: 20\ncgroupDriver: ~\nsyncFrequency: 1m\n";
  assert_int_equal(nl_config_load_bytes(&c, "k.yaml", yaml, strlen(yaml), &err), 0);
  char *argv[] = {"nanolet", "--sync-frequency=5s", "--image-gc-high-threshold", "90", NULL};
  assert_int_equal(nl_flags_parse(&c, 4, argv, &help, &version, &err), 0);
  assert_int_equal(c.set_by[field_index("maxPods")], NL_CONFIG_FILE);
  assert_int_equal(c.set_by[field_index("cgroupDriver")], NL_CONFIG_UNSET); /* null: default */
  assert_int_equal(c.set_by[field_index("syncFrequency")], NL_CONFIG_FLAG); /* the flag wins */
  assert_int_equal(c.set_by[field_index("imageGCHighThresholdPercent")], NL_CONFIG_FLAG);
  assert_int_equal(c.set_by[field_index("evictionHard")], NL_CONFIG_UNSET);
  nl_config_free(&c);
}

/* Each setting alone, set in the file and as a flag: one warning naming it as
 * the user wrote it when it is ignored, nothing otherwise. */
static void warns_only_for_ignored_settings_the_user_set(void **state) {
  (void)state;
  nl_kubelet_config_t c;
  nl_err_t *err = NULL;
  nl_buf_t log = NL_BUF_INIT;
  nl_config_defaults(&c);
  assert_int_equal(check(&c, &log, &err), 0);
  assert_string_equal(log.data, ""); /* defaults alone say nothing */
  nl_buf_free(&log);
  for (size_t i = 0; i < nl__config_nfields; i++) {
    const nl_config_field_t *f = &nl__config_fields[i];
    const nl_config_ignored_t *ig = nl__config_ignored_find(f);
    if (ig && ig->file) continue; /* next test */
    for (int src = NL_CONFIG_FILE; src <= NL_CONFIG_FLAG; src++) {
      if ((src == NL_CONFIG_FILE && !f->name) || (src == NL_CONFIG_FLAG && !f->flag)) continue;
      c.set_by[i] = (uint8_t)src;
      assert_int_equal(check(&c, &log, &err), 0);
      c.set_by[i] = NL_CONFIG_UNSET;
      char want[256] = "";
      char as[64];
      snprintf(as, sizeof as, src == NL_CONFIG_FILE ? "%s" : "--%s",
               src == NL_CONFIG_FILE ? f->name : f->flag);
      if (ig && ig->note)
        snprintf(want, sizeof want, "%s is set but only partly supported: %s\n", as, ig->note);
      else if (ig)
        snprintf(want, sizeof want, "%s is set but not supported yet; it is ignored\n", as);
      if (strcmp(log.data, want))
        fail_msg("%s set: logged \"%s\", want \"%s\"", f->name ? f->name : f->flag, log.data, want);
      nl_buf_free(&log);
    }
  }
  nl_config_free(&c);
}

/* Files of features not built yet (--bootstrap-kubeconfig): readable, then ignored. */
static void ignored_files_must_be_readable(void **state) {
  (void)state;
  char path[] = "/tmp/nanolet-kubeconfig.XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  for (const nl_config_ignored_t *ig = nl__config_ignored; ig->name; ig++) {
    if (!ig->file) continue;
    const nl_config_field_t *f = nl__config_ignored_field(ig);
    nl_kubelet_config_t c;
    nl_err_t *err = NULL;
    nl_buf_t log = NL_BUF_INIT;
    bool help, version;
    char flag[64], want[256];
    snprintf(flag, sizeof flag, "--%s", f->flag);
    nl_config_defaults(&c);
    char *missing[] = {"nanolet", flag, "/nonexistent/kubeconfig", NULL};
    assert_int_equal(nl_flags_parse(&c, 3, missing, &help, &version, &err), 0);
    assert_int_equal(check(&c, &log, &err), -1);
    snprintf(want, sizeof want, "%s /nonexistent/kubeconfig: cannot read: No such file or directory",
             flag);
    assert_string_equal(nl_err_msg(err), want);
    nl_err_free(&err);
    nl_buf_free(&log);

    char *readable[] = {"nanolet", flag, path, NULL};
    assert_int_equal(nl_flags_parse(&c, 3, readable, &help, &version, &err), 0);
    assert_int_equal(check(&c, &log, &err), 0);
    snprintf(want, sizeof want, "%s %s is ignored: %s\n", flag, path, ig->note);
    assert_string_equal(log.data, want); /* once */
    nl_buf_free(&log);

    char *empty[] = {"nanolet", flag, "", NULL}; /* "" is unset, as upstream */
    assert_int_equal(nl_flags_parse(&c, 3, empty, &help, &version, &err), 0);
    assert_int_equal(check(&c, &log, &err), 0);
    assert_string_equal(log.data, "");
    nl_buf_free(&log);
    nl_config_free(&c);
  }
  unlink(path);
}

static void help_marks_ignored_flags(void **state) {
  (void)state;
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  nl_flags_usage(f);
  fclose(f);
  for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
    const char *flag = strstr(line, "--");
    if (!flag || strstr(line, "--help") || strstr(line, "--version")) continue;
    size_t n = strcspn(flag + 2, " ");
    const nl_config_field_t *field = NULL;
    for (size_t i = 0; i < nl__config_nfields; i++)
      if (nl__config_fields[i].flag && strlen(nl__config_fields[i].flag) == n &&
          !strncmp(nl__config_fields[i].flag, flag + 2, n))
        field = &nl__config_fields[i];
    assert_non_null(field);
    bool marked = strstr(line, "(not supported yet") || strstr(line, "(only partly supported)");
    if (marked != (nl__config_ignored_find(field) != NULL))
      fail_msg("--help line for --%s: %s", field->flag, line);
  }
  free(out);
}

int main(int argc, char **argv) {
  differences_path = argc > 1 ? argv[1] : NULL;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_entry_names_one_field),
      cmocka_unit_test(differences_md_lists_the_same_settings),
      cmocka_unit_test(parsing_records_what_the_user_set),
      cmocka_unit_test(warns_only_for_ignored_settings_the_user_set),
      cmocka_unit_test(ignored_files_must_be_readable),
      cmocka_unit_test(help_marks_ignored_flags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
