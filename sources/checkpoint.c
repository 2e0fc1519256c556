/* The checkpoint file (see checkpoint.h). work() functions run on the thread
 * pool and touch only their job; everything else runs on the loop. */
#include "sources/checkpoint.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/arena.h"
#include "reactor/tree.h"
#include "reactor/digest.h"
#include "reactor/fs.h"
#include "reactor/xalloc.h"

#define MAGIC "nanolet-pod-checkpoint v1 sha256:"
#define BODY_HEAD "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":["

static void sha256_hex(const char *data, size_t len, char out[65]) {
  unsigned char sum[32];
  nl_sha256(data, len, sum);
  nl_hex(sum, sizeof sum, out);
}

void nl_pod_checkpoint_encode(const nl_kube_raw_t *items, size_t n, nl_buf_t *out) {
  nl_buf_t body = NL_BUF_INIT;
  nl_buf_puts(&body, BODY_HEAD);
  for (size_t i = 0; i < n; i++) {
    if (i) nl_buf_puts(&body, ",");
    nl_buf_append(&body, items[i].json, items[i].len);
  }
  nl_buf_puts(&body, "]}\n");
  char hex[65];
  sha256_hex(body.data, body.len, hex);
  nl_buf_printf(out, MAGIC "%s %zu\n", hex, body.len);
  nl_buf_append(out, body.data, body.len);
  nl_buf_free(&body);
}

int nl_pod_checkpoint_verify(const char *data, size_t len, size_t *body_off, nl_err_t **err) {
  const char *nl = memchr(data, '\n', len < 256 ? len : 256);
  size_t ml = sizeof MAGIC - 1;
  if (!nl || (size_t)(nl - data) < ml + 64 + 2 || memcmp(data, MAGIC, ml) != 0)
    return nl_err_set(err, NL_EINVAL, "not a nanolet pod checkpoint (bad header)");
  char want[65], *end;
  memcpy(want, data + ml, 64);
  want[64] = 0;
  unsigned long long blen = strtoull(data + ml + 65, &end, 10);
  size_t off = (size_t)(nl - data) + 1;
  if (data[ml + 64] != ' ' || end != nl || blen != len - off)
    return nl_err_set(err, NL_EINVAL, "truncated or padded: the header says %llu body bytes, "
                      "the file has %zu", blen, len - off);
  char got[65];
  sha256_hex(data + off, len - off, got);
  if (strcmp(got, want) != 0)
    return nl_err_set(err, NL_EINVAL, "checksum mismatch (sha256 %s, expected %s)", got, want);
  *body_off = off;
  return 0;
}

int nl_pod_checkpoint_items(const char *body, size_t len, nl_kube_raw_t **items, size_t *n,
                            nl_err_t **err) {
  *items = NULL;
  *n = 0;
  nl_arena_t *a = nl_arena_new(len / 2 + 1024);
  nl_tnode_t *root = nl_tree_parse_json(a, body, len, err);
  const nl_tnode_t *list = root ? nl_tree_get(root, "items") : NULL;
  int rc = -1;
  if (!root) {
    nl_err_wrap(err, "checkpoint body");
  } else if (!list || list->kind != NL_T_SEQ) {
    nl_err_set(err, NL_EINVAL, "checkpoint body: no items list");
  } else {
    nl_kube_raw_t *out = nl_xcalloc(list->n ? list->n : 1, sizeof *out);
    size_t i = 0;
    for (const nl_tentry_t *e = list->first; e; e = e->next)
      if (e->val->kind == NL_T_MAP) out[i++] = (nl_kube_raw_t){e->val->s, e->val->len};
    *items = out;
    *n = i;
    rc = 0;
  }
  nl_arena_free(a);
  return rc;
}

/* ---- jobs ---- */

typedef struct job {
  uv_work_t w;
  char *path;
  char *data;
  size_t len, body_off;
  int err;          /* errno of the failed step, 0 */
  const char *step; /* which step failed */
  nl_err_t *verr;   /* verification error (read) */
  bool missing;     /* read: no file */
  nl_pod_checkpoint_write_cb wcb;
  nl_pod_checkpoint_read_cb rcb;
  void *ctx;
} job_t;

static void job_free(job_t *j) {
  free(j->path);
  free(j->data);
  nl_err_free(&j->verr);
  free(j);
}

static void write_work(uv_work_t *w) {
  job_t *j = container_of(w, job_t, w);
  j->err = nl_fs_replace(j->path, j->data, j->len, &j->step);
}

static void write_done(uv_work_t *w, int status) {
  job_t *j = container_of(w, job_t, w);
  nl_err_t *err = NULL;
  if (status < 0)
    nl_err_set(&err, NL_ECLOSED, "pod checkpoint %s: write cancelled", j->path);
  else if (j->err)
    nl_err_set(&err, j->err, "pod checkpoint %s: %s: %s", j->path, j->step, strerror(j->err));
  j->wcb(j->ctx, err);
  nl_err_free(&err);
  job_free(j);
}

void nl_pod_checkpoint_write(uv_loop_t *loop, const char *path, char *data, size_t len,
                             nl_pod_checkpoint_write_cb cb, void *ctx) {
  job_t *j = nl_xcalloc(1, sizeof *j);
  j->path = nl_xstrdup(path);
  j->data = data;
  j->len = len;
  j->wcb = cb;
  j->ctx = ctx;
  int r = uv_queue_work(loop, &j->w, write_work, write_done);
  assert(r == 0); /* only fails for a NULL work_cb */
  (void)r;
}

static void read_work(uv_work_t *w) {
  job_t *j = container_of(w, job_t, w);
  int fd = open(j->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) j->missing = true;
    else j->err = errno, j->step = "open";
    return;
  }
  struct stat st;
  if (fstat(fd, &st) < 0) {
    j->err = errno, j->step = "stat";
  } else if ((uint64_t)st.st_size > NL_POD_CHECKPOINT_MAX_BYTES) {
    nl_err_set(&j->verr, NL_EINVAL, "larger than the %u-byte limit", NL_POD_CHECKPOINT_MAX_BYTES);
  } else {
    j->data = nl_xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, j->data + got, (size_t)st.st_size - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    j->len = got;
    j->data[got] = 0;
    nl_pod_checkpoint_verify(j->data, j->len, &j->body_off, &j->verr);
  }
  close(fd);
}

static void read_done(uv_work_t *w, int status) {
  job_t *j = container_of(w, job_t, w);
  nl_err_t *err = NULL;
  if (status < 0) nl_err_set(&err, NL_ECLOSED, "pod checkpoint %s: read cancelled", j->path);
  else if (j->err) nl_err_set(&err, j->err, "pod checkpoint %s: %s: %s", j->path, j->step, strerror(j->err));
  else if (j->verr) nl_err_set(&err, NL_EINVAL, "pod checkpoint %s: %s", j->path, nl_err_msg(j->verr));
  if (err || j->missing) {
    j->rcb(j->ctx, NULL, 0, 0, err);
  } else {
    char *data = j->data;
    j->data = NULL;
    j->rcb(j->ctx, data, j->len, j->body_off, NULL);
  }
  nl_err_free(&err);
  job_free(j);
}

void nl_pod_checkpoint_read(uv_loop_t *loop, const char *path, nl_pod_checkpoint_read_cb cb,
                            void *ctx) {
  job_t *j = nl_xcalloc(1, sizeof *j);
  j->path = nl_xstrdup(path);
  j->rcb = cb;
  j->ctx = ctx;
  int r = uv_queue_work(loop, &j->w, read_work, read_done);
  assert(r == 0);
  (void)r;
}
