/* libFuzzer target over env files (managers/envfile.c): a container writes the
 * file, the agent reads it. The input's first line is the key looked up, the
 * rest the file; the key of each line of the file is looked up too, so that
 * values spanning lines and errors after a match are reached. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "managers/envfile.h"
#include "reactor/xalloc.h"

static void look(const char *data, size_t len, const char *key) {
  char *v = NULL;
  nl_err_t *err = NULL;
  int rc = nl_envfile_find(data, len, key, &v, &err);
  if ((rc == 1) != (v != NULL) || (rc < 0) != (err != NULL)) abort();
  if (v && !*v) abort(); /* an empty value is "not found" */
  free(v);
  nl_err_free(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *nl = memchr(data, '\n', size);
  if (!nl) return 0;
  char *key = nl_xstrndup((const char *)data, (size_t)(nl - (const char *)data));
  const char *file = nl + 1;
  size_t len = size - (size_t)(file - (const char *)data);
  look(file, len, key);
  free(key);
  for (const char *p = file; p < file + len;) {
    const char *e = memchr(p, '\n', (size_t)(file + len - p));
    const char *eq = memchr(p, '=', (size_t)((e ? e : file + len) - p));
    if (eq && eq - p < 256) {
      char *k = nl_xstrndup(p, (size_t)(eq - p));
      look(file, len, k);
      free(k);
    }
    p = e ? e + 1 : file + len;
  }
  return 0;
}
