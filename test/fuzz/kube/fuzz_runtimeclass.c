/* libFuzzer target over the RuntimeClass decoder and the cache it feeds
 * (managers/runtimeclass.c): RuntimeClasses come from the API server's list
 * and watch. */
#include <stdint.h>
#include <stdlib.h>

#include "managers/runtimeclass.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nl_runtimeclasses_t rc = {0};
  nl_map_init(&rc.by_name);
  nl_runtimeclasses_put(&rc, (const char *)data, size);
  char *name = NULL, *handler = NULL;
  nl_err_t *err = NULL;
  if (nl_runtimeclass_decode((const char *)data, size, &name, &handler, &err) == 0) {
    const char *h;
    if (nl_runtimeclasses_lookup(&rc, name, &h, &err) < 0) abort(); /* put must have held it */
    nl_runtimeclasses_delete(&rc, (const char *)data, size);
    if (nl_map_size(&rc.by_name) != 0) abort();
    free(name);
    free(handler);
  }
  nl_err_free(&err);
  nl_map_free(&rc.by_name, free);
  return 0;
}
