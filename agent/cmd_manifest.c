/* Thin command over the model: an operator's check of static pod manifests. It
 * runs before any loop exists, so plain blocking reads are fine here. */
#include "agent/cmd_manifest.h"

#include <stdio.h>
#include <string.h>

#include "agent/model/pod.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

static void usage(FILE *f) {
  fprintf(f, "usage: nanolet manifest check [--hostname-override NAME] FILE...\n"
             "Decodes, defaults and validates static pod manifests as the file source "
             "does; prints each pod as JSON, or its errors.\n"
             "Exit status: 0 when every file is good, 1 when any is bad, 2 on usage errors.\n");
}

static int usage_error(const char *what, const char *arg) {
  fprintf(stderr, "nanolet manifest: %s%s\nRun 'nanolet manifest --help' for usage.\n", what,
          arg ? arg : "");
  return 2;
}

static int read_file(const char *path, nl_buf_t *b) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char chunk[8192];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) nl_buf_append(b, chunk, n);
  int bad = ferror(f);
  fclose(f);
  return bad ? -1 : 0;
}

/* Prints the pod of one file on stdout or its errors on stderr; 0 or 1. */
static int check_file(const char *path, const char *node_name) {
  nl_buf_t data = NL_BUF_INIT, out = NL_BUF_INIT;
  nl_err_t *err = NULL;
  nl_pod_t *pod = NULL;
  int rc = 0;
  if (read_file(path, &data) < 0) {
    fprintf(stderr, "%s: cannot read: %m\n", path);
    rc = 1;
  } else {
    nl_static_source_t src = {"file", path, node_name};
    if (nl_pod_load_static(data.data ? data.data : "", data.len, &src, &pod, &err) < 0) {
      fprintf(stderr, "%s\n", nl_err_msg(err));
      rc = 1;
    } else {
      nl_pod_encode_json(pod, &out, NL_POD_JSON_PRETTY);
      fwrite(out.data, 1, out.len, stdout);
    }
  }
  nl_err_free(&err);
  nl_pod_free(pod);
  nl_buf_free(&data);
  nl_buf_free(&out);
  return rc;
}

static bool is_help(const char *a) {
  return !strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "--help=true");
}

int nl_cmd_manifest(int argc, char **argv) {
  /* argv[0] is "manifest"; flags go anywhere after the verb, as with pflag. */
  if (argc < 2) return usage_error("missing command (check)", NULL);
  if (is_help(argv[1]) || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "check") != 0) return usage_error("unknown command ", argv[1]);
  const char *node = NULL;
  const char **files = nl_xcalloc((size_t)argc, sizeof *files);
  size_t n = 0;
  bool flags_done = false;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (flags_done || a[0] != '-' || !a[1]) {
      files[n++] = a;
    } else if (!strcmp(a, "--")) {
      flags_done = true;
    } else if (is_help(a)) {
      free(files);
      usage(stdout);
      return 0;
    } else if (!strncmp(a, "--hostname-override=", 20)) {
      node = a + 20;
    } else if (!strcmp(a, "--hostname-override")) {
      if (i + 1 >= argc) {
        free(files);
        return usage_error("flag needs an argument: ", a);
      }
      node = argv[++i];
    } else {
      free(files);
      return usage_error("unknown flag: ", a);
    }
  }
  if (!n) {
    free(files);
    return usage_error("check: no manifest files given", NULL);
  }
  char *node_name = node && *node ? nl_xstrdup(node) : nl_node_name_default();
  int rc = 0;
  for (size_t i = 0; i < n; i++) rc |= check_file(files[i], node_name);
  free(node_name);
  free(files);
  return rc;
}
