/* libFuzzer target over the ConfigMap and Secret decoder (managers/objects.h,
 * nl_object_decode): every input is decoded as both kinds, as list items and
 * watch objects are. The target aborts when a decoded object breaks what the
 * environment and volume code rely on: keys sorted and distinct, each found by
 * nl_object_find, every value followed by a NUL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "managers/objects.h"

static void check(const nl_object_t *o) {
  for (size_t i = 0; i < o->n_items; i++) {
    const nl_object_item_t *it = &o->items[i];
    if (i && strcmp(o->items[i - 1].key, it->key) >= 0) abort();
    if (nl_object_find(o, it->key) != it) abort();
    if (it->value[it->len] != 0) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int k = 0; k < 2; k++) {
    nl_object_t *o = NULL;
    nl_err_t *err = NULL;
    bool immutable;
    if (nl_object_decode(k ? NL_OBJECT_SECRET : NL_OBJECT_CONFIG_MAP, (const char *)data, size, &o,
                         &immutable, &err) == 0) {
      check(o);
      nl_object_free(o);
    } else if (!err || !*nl_err_msg(err)) {
      abort(); /* a failure names its cause */
    }
    nl_err_free(&err);
  }
  return 0;
}
