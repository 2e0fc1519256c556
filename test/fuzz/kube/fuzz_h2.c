/* libFuzzer target: arbitrary bytes from the API server on the API client's
 * HTTP/2 response path (agent/kube/h2.h). Three requests are in flight (a
 * buffered GET, a POST with a body, a streamed watch); the input goes through
 * nl_h2_recv() (frames, HPACK, flow control, 1xx and final heads, DATA,
 * trailers, RST_STREAM, GOAWAY, PING) the way agent/kube/conn.c drives it:
 * output flushed after every piece, refused requests submitted again, the
 * buffered request cancelled from its own data callback when its body passes a
 * limit (as the client does past NL_KUBE_MAX_BODY), a PING now and then.
 * Checks: no crash or sanitizer report or leak; a stream ends at most once and
 * never after a cancel or the session's free; heads and body pieces arrive in
 * order; a complete response had a final head; the engine's count
 * of active streams matches ours. */
#include <stdio.h>
#include <stdlib.h>

#include "test/fuzz/kube/fuzz_common.h"

#define BODY_LIMIT 4096

typedef struct req {
  nl_kube_h2_stream_t st;
  int index;
  bool open;       /* submitted, not yet closed or cancelled */
  bool head;       /* on_head seen */
  bool resubmit;   /* refused: submit again after recv */
  size_t body;
} req_t;

typedef struct fuzz {
  nl_kube_h2_t *s;
  req_t reqs[FUZZ_NREQ];
  size_t open;
} fuzz_t;

static fuzz_t *current;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                              \
    }                                                                       \
  } while (0)

static int discard(void *user, const uint8_t *data, size_t len) { return 0; }

static void ended(req_t *r) {
  r->open = false;
  current->open--;
}

static void on_head(nl_kube_h2_stream_t *st) {
  req_t *r = (req_t *)st;
  CHECK(r->open && !r->head);
  CHECK(st->status / 100 != 1 && st->status <= 999);
  r->head = true;
}

static void on_data(nl_kube_h2_stream_t *st, const uint8_t *p, size_t n) {
  req_t *r = (req_t *)st;
  CHECK(r->open && r->head);
  r->body += n;
  if (r->index == 0 && r->body > BODY_LIMIT) {
    nl_kube_h2_cancel(st);
    ended(r);
  }
}

static void on_close(nl_kube_h2_stream_t *st, uint32_t code, bool refused) {
  req_t *r = (req_t *)st;
  CHECK(r->open && st->h2.session == NULL);
  CHECK(!refused || !r->head);
  if (st->complete) CHECK(r->head);
  ended(r);
  r->resubmit = refused;
}

static void submit(fuzz_t *f, int i) {
  req_t *r = &f->reqs[i];
  r->st.on_head = on_head;
  r->st.on_data = on_data;
  r->st.on_close = on_close;
  r->head = r->resubmit = false;
  r->body = 0;
  int rc = fuzz_submit(f->s, &r->st, i);
  if (rc == 0) {
    r->open = true;
    f->open++;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  fuzz_t f = {0};
  current = &f;
  nl_h2_cbs_t cbs = {.write = discard};
  nl_h2_opts_t opts = nl_kube_h2_opts(FUZZ_WINDOW);
  f.s = nl_h2_new(&opts, &cbs, &f);
  CHECK(f.s);
  for (int i = 0; i < FUZZ_NREQ; i++) {
    f.reqs[i].index = i;
    submit(&f, i);
    CHECK(f.reqs[i].open);
  }
  int rc = nl_h2_flush(f.s);
  if (rc == 0) rc = nl_h2_recv(f.s, fuzz_server_preface, sizeof(fuzz_server_preface));
  size_t step = data[0] ? (size_t)data[0] * 7 : size;
  for (size_t off = 1, chunk = 0; rc == 0 && off < size; off += step, chunk++) {
    size_t n = size - off < step ? size - off : step;
    rc = nl_h2_recv(f.s, data + off, n);
    CHECK(nl_h2_active(f.s) == f.open);
    if (rc != 0) break;
    for (int i = 0; i < FUZZ_NREQ; i++)
      if (f.reqs[i].resubmit && nl_h2_free_streams(f.s) > 0) submit(&f, i);
    if (chunk % 4 == 3) rc = nl_h2_ping(f.s);
    if (rc == 0) rc = nl_h2_flush(f.s);
  }
  CHECK(nl_h2_active(f.s) == f.open);
  /* Free: open streams get no callback (on_close would trip its check). */
  for (int i = 0; i < FUZZ_NREQ; i++) f.reqs[i].open = false;
  nl_kube_h2_forget(f.s);
  nl_h2_free(f.s);
  current = NULL;
  return 0;
}
