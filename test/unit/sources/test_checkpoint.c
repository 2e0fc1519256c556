/* The checkpoint file: format, checksum, atomic replacement, round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "reactor/buf.h"
#include "sources/checkpoint.h"

static const char *objs[] = {"{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\"}}",
                             "{ \"metadata\" : {\"uid\":\"u2\", \"name\":\"b\\u00e9\"} }"};

static void encode(nl_buf_t *b) {
  nl_kube_raw_t items[2] = {{objs[0], strlen(objs[0])}, {objs[1], strlen(objs[1])}};
  nl_pod_checkpoint_encode(items, 2, b);
}

/* The items come back byte for byte, as the API server sent them. */
static void round_trip(void **state) {
  (void)state;
  nl_buf_t b = NL_BUF_INIT;
  encode(&b);
  assert_memory_equal(b.data, "nanolet-pod-checkpoint v1 sha256:", 33);
  size_t off;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_checkpoint_verify(b.data, b.len, &off, &err), 0);
  nl_kube_raw_t *items;
  size_t n;
  assert_int_equal(nl_pod_checkpoint_items(b.data + off, b.len - off, &items, &n, &err), 0);
  assert_int_equal(n, 2);
  for (size_t i = 0; i < 2; i++) {
    assert_int_equal(items[i].len, strlen(objs[i]));
    assert_memory_equal(items[i].json, objs[i], items[i].len);
  }
  free(items);
  nl_buf_free(&b);
}

static void expect_bad(const char *data, size_t len, const char *msg) {
  size_t off;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_checkpoint_verify(data, len, &off, &err), -1);
  if (!strstr(nl_err_msg(err), msg)) fail_msg("got \"%s\", want \"%s\"", nl_err_msg(err), msg);
  nl_err_free(&err);
}

/* Any flipped byte, a cut, padding or a foreign file is refused. */
static void corruption_detected(void **state) {
  (void)state;
  nl_buf_t b = NL_BUF_INIT;
  encode(&b);
  size_t body = (size_t)(strchr(b.data, '\n') - b.data) + 1;
  for (size_t i = body; i < b.len; i++) {
    b.data[i] ^= 0x20;
    expect_bad(b.data, b.len, "checksum mismatch");
    b.data[i] ^= 0x20;
  }
  expect_bad(b.data, b.len - 1, "truncated or padded");
  expect_bad(b.data, body + 3, "truncated or padded");
  nl_buf_puts(&b, "\n");
  expect_bad(b.data, b.len, "truncated or padded");
  expect_bad("{\"kind\":\"PodList\"}\n", 19, "bad header");
  expect_bad("", 0, "bad header");
  b.data[40] = 'g'; /* inside the hex digest */
  expect_bad(b.data, b.len - 1, "checksum mismatch");
  nl_buf_free(&b);
}

typedef struct io {
  int writes, reads;
  char *err;
  char *data;
  size_t len, off;
  bool missing;
} io_t;

static void on_write(void *ctx, const nl_err_t *err) {
  io_t *io = ctx;
  io->writes++;
  if (err) io->err = strdup(nl_err_msg(err));
}

static void on_read(void *ctx, char *data, size_t len, size_t off, const nl_err_t *err) {
  io_t *io = ctx;
  io->reads++;
  io->data = data;
  io->len = len;
  io->off = off;
  io->missing = !data && !err;
  if (err) io->err = strdup(nl_err_msg(err));
}

/* Written on the thread pool, replaced atomically (no temporary file left), read
 * back and verified; a missing file is "no checkpoint", a bad one an error. */
static void write_then_read(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  char dir[] = "/tmp/nl-ckpt-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[64], tmp[80];
  snprintf(path, sizeof path, "%s/pods", dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  io_t io = {0};

  nl_pod_checkpoint_read(&loop, path, on_read, &io);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(io.missing);

  for (int round = 0; round < 2; round++) { /* the second replaces the first */
    nl_buf_t b = NL_BUF_INIT;
    if (round == 0) nl_buf_puts(&b, "old");
    else encode(&b);
    size_t len = b.len;
    nl_pod_checkpoint_write(&loop, path, nl_buf_steal(&b), len, on_write, &io);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_null(io.err);
  }
  assert_int_equal(io.writes, 2);
  struct stat st;
  assert_int_equal(stat(tmp, &st), -1);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);

  nl_pod_checkpoint_read(&loop, path, on_read, &io);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_null(io.err);
  assert_non_null(io.data);
  assert_non_null(strstr(io.data + io.off, "\"uid\":\"u2\""));
  free(io.data);

  FILE *fp = fopen(path, "r+b");
  fseek(fp, -4, SEEK_END);
  fputc('X', fp);
  fclose(fp);
  nl_pod_checkpoint_read(&loop, path, on_read, &io);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_null(io.data);
  assert_non_null(strstr(io.err, "checksum mismatch"));
  assert_non_null(strstr(io.err, path));
  free(io.err);
  io.err = NULL;

  char nodir[96];
  snprintf(nodir, sizeof nodir, "%s/missing/pods", dir);
  nl_pod_checkpoint_write(&loop, nodir, strdup("x"), 1, on_write, &io);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_non_null(io.err);
  assert_non_null(strstr(io.err, "create: No such file or directory"));
  free(io.err);

  unlink(path);
  rmdir(dir);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip),
      cmocka_unit_test(corruption_detected),
      cmocka_unit_test(write_then_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
