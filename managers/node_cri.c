/* The node manager's view of the runtime over CRI: Status (RuntimeReady,
 * NetworkReady, the runtime handlers' features, the runtime's features),
 * Version and ListImages, one after the other. */
#include <stdlib.h>
#include <string.h>

#include "cri/image.h"
#include "cri/runtime.h"
#include "managers/node.h"
#include "managers/node_cri.h"
#include "reactor/xalloc.h"

typedef struct query {
  nl_cri_client_t *cri;
  nl_node_runtime_done done;
  void *done_ctx;
  nl_node_runtime_info_t info;
  char *strs[6]; /* owned copies behind info's strings */
  nl_node_image_t *images;
  size_t n_images;
  nl_node_runtime_handler_t *handlers; /* owned names */
  size_t n_handlers;
} query_t;

static const char *keep(query_t *q, int slot, const char *s) {
  free(q->strs[slot]);
  return q->strs[slot] = nl_xstrdup(s ? s : "");
}

static void finish(query_t *q) {
  q->info.images = q->images;
  q->info.n_images = q->n_images;
  q->info.handlers = q->handlers;
  q->info.n_handlers = q->n_handlers;
  q->done(q->done_ctx, &q->info);
  for (size_t i = 0; i < 6; i++) free(q->strs[i]);
  for (size_t i = 0; i < q->n_images; i++) {
    for (size_t j = 0; j < q->images[i].n_names; j++) free((char *)q->images[i].names[j]);
    free((void *)q->images[i].names);
  }
  free(q->images);
  for (size_t i = 0; i < q->n_handlers; i++) free((char *)q->handlers[i].name);
  free(q->handlers);
  free(q);
}

/* An image and its runtime id, for sorting. */
typedef struct sized {
  nl_node_image_t image;
  const char *id;
} sized_t;

static int by_size(const void *a, const void *b) {
  const sized_t *x = a, *y = b;
  int64_t sx = x->image.size_bytes, sy = y->image.size_bytes;
  if (sx != sy) return sx < sy ? 1 : -1;
  return -strcmp(x->id, y->id);
}

/* Equal sizes by id: untagged images of equal size swapped places from one
 * ListImages to the next, and the status was patched every 10 s, image list
 * and all (uplink_impaired). */
void nl_node_images_sort(nl_node_image_t *images, const char *const *ids, size_t n) {
  sized_t *s = nl_xcalloc(n ? n : 1, sizeof *s);
  for (size_t i = 0; i < n; i++) s[i] = (sized_t){images[i], ids[i] ? ids[i] : ""};
  qsort(s, n, sizeof *s, by_size);
  for (size_t i = 0; i < n; i++) images[i] = s[i].image;
  free(s);
}

static void on_images(const nl_grpc_status_t *st, Runtime__V1__ListImagesResponse *resp, void *ctx) {
  query_t *q = ctx;
  if (resp) {
    q->info.images_ok = true;
    q->images = nl_xcalloc(resp->n_images ? resp->n_images : 1, sizeof *q->images);
    const char **ids = nl_xcalloc(resp->n_images ? resp->n_images : 1, sizeof *ids);
    for (size_t i = 0; i < resp->n_images; i++) {
      const Runtime__V1__Image *im = resp->images[i];
      size_t n = im->n_repo_digests + im->n_repo_tags;
      const char **names = nl_xcalloc(n ? n : 1, sizeof *names);
      for (size_t j = 0; j < im->n_repo_digests; j++) names[j] = nl_xstrdup(im->repo_digests[j]);
      for (size_t j = 0; j < im->n_repo_tags; j++)
        names[im->n_repo_digests + j] = nl_xstrdup(im->repo_tags[j]);
      q->images[q->n_images++] = (nl_node_image_t){names, n, (int64_t)im->size};
      ids[i] = im->id;
    }
    nl_node_images_sort(q->images, ids, q->n_images);
    free(ids);
  }
  finish(q);
}

static void on_version(const nl_grpc_status_t *st, Runtime__V1__VersionResponse *resp, void *ctx) {
  query_t *q = ctx;
  if (resp) {
    q->info.runtime_name = keep(q, 4, resp->runtime_name);
    q->info.runtime_version = keep(q, 5, resp->runtime_version);
  }
  Runtime__V1__ListImagesRequest req = RUNTIME__V1__LIST_IMAGES_REQUEST__INIT;
  nl_cri_list_images(q->cri, &req, on_images, q);
}

static void on_status(const nl_grpc_status_t *st, Runtime__V1__StatusResponse *resp, void *ctx) {
  query_t *q = ctx;
  if (resp && resp->status) {
    q->info.status_ok = true;
    for (size_t i = 0; i < resp->status->n_conditions; i++) {
      const Runtime__V1__RuntimeCondition *c = resp->status->conditions[i];
      int slot = strcmp(c->type, "RuntimeReady") == 0 ? 0 : strcmp(c->type, "NetworkReady") == 0 ? 2 : -1;
      if (slot < 0) continue;
      nl_node_cri_cond_t *dst = slot == 0 ? &q->info.runtime_ready : &q->info.network_ready;
      *dst = (nl_node_cri_cond_t){true, c->status, keep(q, slot, c->reason),
                                  keep(q, slot + 1, c->message)};
    }
    size_t n = resp->n_runtime_handlers;
    q->handlers = nl_xcalloc(n ? n : 1, sizeof *q->handlers);
    for (size_t i = 0; i < n; i++) {
      const Runtime__V1__RuntimeHandler *h = resp->runtime_handlers[i];
      const Runtime__V1__RuntimeHandlerFeatures *f = h->features;
      q->handlers[q->n_handlers++] = (nl_node_runtime_handler_t){
          nl_xstrdup(h->name ? h->name : ""), f && f->recursive_read_only_mounts,
          f && f->user_namespaces};
    }
    if (resp->features)
      q->info.features = (nl_node_runtime_features_t){
          true, resp->features->supplemental_groups_policy};
  }
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  nl_cri_version(q->cri, &req, on_version, q);
}

void nl_node_cri_query(void *cri, nl_node_runtime_done done, void *done_ctx) {
  query_t *q = nl_xcalloc(1, sizeof *q);
  q->cri = cri;
  q->done = done;
  q->done_ctx = done_ctx;
  Runtime__V1__StatusRequest req = RUNTIME__V1__STATUS_REQUEST__INIT;
  nl_cri_status(q->cri, &req, on_status, q);
}
