/* The heap one watched object costs the objects manager (docs/PERFORMANCE.md,
 * "ConfigMaps and Secrets"): N pods each referencing a ConfigMap and a Secret
 * of their own are registered against the API client's test double, every
 * list is answered with the object (three keys of 40 bytes) and every watch is
 * opened; the growth of the heap (mallinfo2), less what the test double keeps
 * per request, divided by 2N. The client's own request and HTTP/2 stream are
 * not in it (docs/PERFORMANCE.md gives their size).
 *   ./build/tools/bench/objects_mem [N]   (default 50, at most 64) */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "managers/objects.h"
#include "reactor/xalloc.h"
#include "test/unit/kube/fake_client.h"

static size_t heap(void) { return mallinfo2().uordblks; }

static size_t fake_bytes(void) {
  size_t n = 0;
  for (size_t i = 0; i < fake_nreqs; i++)
    n += malloc_usable_size(fake_reqs[i]) + malloc_usable_size(fake_reqs[i]->method) +
         malloc_usable_size(fake_reqs[i]->path);
  return n;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 50;
  if (n < 1 || n > FAKE_MAX / 4) return 2; /* a list and a watch per object */
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_objects_t *m;
  nl_objects_opts_t o = {.max_watches = 100000};
  if (nl_objects_new(&m, &loop, NULL, &o, NULL) < 0) return 1;
  size_t before = heap();
  for (int i = 0; i < n; i++) {
    char *json = nl_xasprintf(
        "{\"metadata\":{\"namespace\":\"bench\",\"name\":\"p%d\",\"uid\":\"u%d\"},\"spec\":"
        "{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"envFrom\":[{\"configMapRef\":"
        "{\"name\":\"cm-%d\"}},{\"secretRef\":{\"name\":\"s-%d\"}}]}]}}",
        i, i, i, i);
    nl_pod_t *pod;
    if (nl_pod_decode_api(json, strlen(json), &pod, NULL) < 0) return 1;
    nl_objects_register_pod(m, pod);
    nl_pod_free(pod);
    free(json);
  }
  const char *v = "0123456789012345678901234567890123456789";
  size_t lists = fake_nreqs;
  for (size_t i = 0; i < lists; i++) {
    fake_req_t *r = fake_reqs[i];
    bool secret = strstr(r->path, "/secrets") != NULL;
    char name[64];
    snprintf(name, sizeof name, "%s", strstr(r->path, "%3D") + 3);
    name[strcspn(name, "&")] = 0;
    char *item = secret
        ? nl_xasprintf("{\"metadata\":{\"namespace\":\"bench\",\"name\":\"%s\"},\"data\":{\"A\":"
                       "\"MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDEyMzQ1Njc4OQ==\",\"B\":"
                       "\"MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDEyMzQ1Njc4OQ==\",\"C\":"
                       "\"MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDEyMzQ1Njc4OQ==\"}}",
                       name)
        : nl_xasprintf("{\"metadata\":{\"namespace\":\"bench\",\"name\":\"%s\"},\"data\":"
                       "{\"A\":\"%s\",\"B\":\"%s\",\"C\":\"%s\"}}",
                       name, v, v, v);
    char *list = nl_xasprintf("{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[%s]}", item);
    fake_respond(r, 200, list);
    free(list);
    free(item);
  }
  for (size_t i = lists; i < fake_nreqs; i++) fake_head(fake_reqs[i], 200);
  malloc_trim(0);
  size_t grown = heap() - before, fake = fake_bytes();
  printf("%d pods, %d objects watched: heap +%zu bytes, the test double's %zu; "
         "%zu bytes per object\n",
         n, 2 * n, grown, fake, (grown - fake) / (size_t)(2 * n));
  return 0;
}
