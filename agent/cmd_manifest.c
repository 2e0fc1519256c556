/* Thin command over the model: an operator's check of static pod manifests. It
 * runs before any loop exists, so plain blocking reads are fine here. */
#include "agent/cmd_manifest.h"

#include <stdio.h>
#include <string.h>

#include "agent/model/pod.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

static void usage(FILE *f) {
  fprintf(f, "usage: nanolet manifest check [--hostname-override=NAME] FILE...\n"
             "Decodes, defaults and validates static pod manifests as the file source "
             "does; prints each pod as JSON, or its errors. Exits 1 when any file is bad.\n");
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

int nl_cmd_manifest(int argc, char **argv) {
  if (argc < 1 || strcmp(argv[0], "check") != 0) {
    usage(stderr);
    return 2;
  }
  const char *node = NULL;
  int first = 1, rc = 0, files = 0;
  for (; first < argc && strncmp(argv[first], "--", 2) == 0; first++) {
    const char *a = argv[first];
    if (strcmp(a, "--") == 0) { first++; break; }
    if (strncmp(a, "--hostname-override=", 20) == 0) node = a + 20;
    else if (strcmp(a, "--hostname-override") == 0 && first + 1 < argc) node = argv[++first];
    else if (strcmp(a, "--help") == 0) { usage(stdout); return 0; }
    else { usage(stderr); return 2; }
  }
  char *node_name = node ? nl_xstrdup(node) : nl_node_name_default();
  for (int i = first; i < argc; i++, files++) {
    nl_buf_t data = NL_BUF_INIT, out = NL_BUF_INIT;
    nl_err_t *err = NULL;
    nl_pod_t *pod = NULL;
    if (read_file(argv[i], &data) < 0) {
      fprintf(stderr, "%s: cannot read: %m\n", argv[i]);
      rc = 1;
    } else {
      nl_static_source_t src = {"file", argv[i], node_name};
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
  }
  free(node_name);
  if (!files) {
    usage(stderr);
    return 2;
  }
  return rc;
}
