/* Writes seed inputs for fuzz_grpc_server into DIR: what the project's own
 * gRPC client (cri/grpc.h on the HTTP/2 engine) sends for a few shapes of calls on the
 * target's method table.
 *   fuzz_grpc_server_seeds DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/grpc.h"
#include "reactor/buf.h"
#include "test/fuzz/seeds.h"

enum shape { ECHO, LATER_AND_STREAM, HOLD_WITH_DEADLINE, UNKNOWN_AND_OVERSIZE, MANY, NSHAPES };

static int to_buf(void *user, const uint8_t *data, size_t len) {
  nl_buf_append(user, data, len);
  return 0;
}

static void on_close(nl_grpc_stream_t *st, const nl_grpc_status_t *status, bool refused) {}

static void call(nl_h2_t *s, nl_grpc_stream_t *st, const char *path, const char *msg,
                 size_t len, uint64_t timeout_ms, uint8_t **keep) {
  uint8_t *framed = malloc(5 + len);
  framed[0] = 0;
  framed[1] = (uint8_t)(len >> 24);
  framed[2] = (uint8_t)(len >> 16);
  framed[3] = (uint8_t)(len >> 8);
  framed[4] = (uint8_t)len;
  memcpy(framed + 5, msg, len);
  st->on_close = on_close;
  static const nl_grpc_channel_t ch = {0};
  if (nl_grpc_submit(s, &ch, st, path, framed, 5 + len, timeout_ms) != 0) abort();
  *keep = framed;
}

static void one(const char *dir, int shape, uint8_t cut) {
  nl_buf_t out = NL_BUF_INIT;
  nl_h2_cbs_t cbs = {.write = to_buf};
  nl_h2_t *s = nl_h2_new(&(nl_h2_opts_t){.window = NL_GRPC_WINDOW}, &cbs, &out);
  nl_grpc_stream_t st[8];
  uint8_t *keep[8] = {0};
  memset(st, 0, sizeof st);
  static char big[2000];
  memset(big, 'b', sizeof big);
  switch (shape) {
  case ECHO:
    call(s, &st[0], "/x.Y/Echo", "hello", 5, 0, &keep[0]);
    break;
  case LATER_AND_STREAM:
    call(s, &st[0], "/x.Y/Later", "a", 1, 0, &keep[0]);
    call(s, &st[1], "/x.Y/Stream", "s", 1, 1000, &keep[1]);
    break;
  case HOLD_WITH_DEADLINE:
    call(s, &st[0], "/x.Y/Hold", "", 0, 5, &keep[0]);
    break;
  case UNKNOWN_AND_OVERSIZE:
    call(s, &st[0], "/x.Y/Nope", "", 0, 0, &keep[0]);
    call(s, &st[1], "/a.B/C", "", 0, 0, &keep[1]);
    call(s, &st[2], "/x.Y/Echo", big, sizeof big, 0, &keep[2]);
    break;
  case MANY:
    for (int i = 0; i < 8; i++) call(s, &st[i], i % 2 ? "/x.Y/Echo" : "/x.Y/Later", "m", 1, 0, &keep[i]);
    break;
  }
  if (nl_h2_flush(s) != 0) abort();
  /* The server's SETTINGS acknowledged, and a PING, as a client does. */
  static const uint8_t ack[] = {0, 0, 0, 4, 1, 0, 0, 0, 0};
  static const uint8_t ping[] = {0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  nl_buf_append(&out, ack, sizeof ack);
  nl_buf_append(&out, ping, sizeof ping);
  fuzz_seed_write(dir, shape, cut, out.data, out.len);
  nl_grpc_fail_streams(s, "done");
  nl_h2_free(s);
  for (int i = 0; i < 8; i++) free(keep[i]);
  nl_buf_free(&out);
}

int main(int argc, char **argv) { return fuzz_seeds_main(argc, argv, NSHAPES, one); }
