/* Writes seed inputs for fuzz_cri_response into DIR: the bytes a real HTTP/2
 * gRPC server (an nghttp2 server session, in memory) sends in answer to the
 * target's two calls, for a few shapes of answer.
 *   fuzz_cri_seeds DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/buf.h"
#include "test/fuzz/seeds.h"
#include "test/fuzz/cri/fuzz_common.h"

enum shape { OK_BOTH, TRAILERS_ONLY, SPLIT_DATA, RST_AND_GOAWAY, TWO_MESSAGES, NSHAPES };

typedef struct gen {
  nghttp2_session *srv;
  nl_buf_t out;      /* server -> client */
  nl_buf_t c2s;      /* client -> server */
  enum shape shape;
  uint8_t *body[4];
  size_t body_len[4], body_off[4];
} gen_t;

static int client_write(void *user, const uint8_t *data, size_t len) {
  gen_t *g = user;
  nl_buf_append(&g->c2s, data, len);
  return 0;
}

static ssize_t read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *user) {
  gen_t *g = user;
  int i = id == 1 ? 1 : 3;
  size_t rem = g->body_len[i] - g->body_off[i];
  size_t n = rem < len ? rem : len;
  if (g->shape == SPLIT_DATA && n > 7) n = 7;
  memcpy(buf, g->body[i] + g->body_off[i], n);
  g->body_off[i] += n;
  if (g->body_off[i] == g->body_len[i]) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    nghttp2_nv tr[] = {{(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, 0}};
    nghttp2_submit_trailer(h2, id, tr, 1);
  }
  return (ssize_t)n;
}

static void frame_into(gen_t *g, int i, const ProtobufCMessage *m, int copies) {
  size_t one = nl_grpc_frame_size(m);
  g->body[i] = malloc(one * copies);
  for (int k = 0; k < copies; k++) nl_grpc_frame(m, g->body[i] + one * k);
  g->body_len[i] = one * copies;
}

static void respond(gen_t *g, int32_t id) {
  nghttp2_nv hdrs[] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
                       {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0}};
  if (g->shape == TRAILERS_ONLY && id == 1) {
    nghttp2_nv t[] = {hdrs[0], hdrs[1],
                      {(uint8_t *)"grpc-status", (uint8_t *)"5", 11, 1, 0},
                      {(uint8_t *)"grpc-message", (uint8_t *)"container %22x%22 not%20found", 12,
                       29, 0}};
    nghttp2_submit_response(g->srv, id, t, 4, NULL);
    return;
  }
  if (g->shape == RST_AND_GOAWAY) {
    if (id == 1) nghttp2_submit_rst_stream(g->srv, 0, id, NGHTTP2_REFUSED_STREAM);
    else nghttp2_submit_goaway(g->srv, 0, 1, NGHTTP2_NO_ERROR, NULL, 0);
    return;
  }
  if (id == 1) {
    Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
    md.name = "app";
    md.attempt = 2;
    Runtime__V1__Container__LabelsEntry l = RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT;
    l.key = "io.kubernetes.pod.name";
    l.value = "web";
    Runtime__V1__Container__LabelsEntry *ls[] = {&l};
    Runtime__V1__ImageSpec im = RUNTIME__V1__IMAGE_SPEC__INIT;
    im.image = "localhost/busybox:latest";
    Runtime__V1__Container c = RUNTIME__V1__CONTAINER__INIT;
    c.id = "0123456789abcdef";
    c.pod_sandbox_id = "fedcba9876543210";
    c.metadata = &md;
    c.image = &im;
    c.state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
    c.created_at = 1700000000000000000;
    c.n_labels = 1;
    c.labels = ls;
    Runtime__V1__Container *cs[] = {&c, &c};
    Runtime__V1__ListContainersResponse r = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
    r.n_containers = 2;
    r.containers = cs;
    frame_into(g, 1, &r.base, g->shape == TWO_MESSAGES ? 2 : 1);
  } else {
    Runtime__V1__ContainerStatus st = RUNTIME__V1__CONTAINER_STATUS__INIT;
    st.id = "c0ffee";
    st.state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
    st.exit_code = 137;
    st.reason = "OOMKilled";
    Runtime__V1__ContainerStatusResponse r = RUNTIME__V1__CONTAINER_STATUS_RESPONSE__INIT;
    r.status = &st;
    frame_into(g, 3, &r.base, 1);
  }
  nghttp2_data_provider prd = {.read_callback = read_body};
  nghttp2_submit_response(g->srv, id, hdrs, 2, &prd);
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *user) {
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
    respond(user, f->hd.stream_id);
  return 0;
}

static void on_message(nl_grpc_stream_t *st, const uint8_t *d, size_t n) {}
static void on_close(nl_grpc_stream_t *st, const nl_grpc_status_t *s, bool refused) {}

static void one(const char *dir, int shape, uint8_t cut) {
  gen_t g = {.shape = shape};
  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_server_new(&g.srv, cbs, &g);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_submit_settings(g.srv, 0, NULL, 0);
  nl_h2_cbs_t ccbs = {.write = client_write};
  nl_h2_t *cli = nl_h2_new(&(nl_h2_opts_t){.window = NL_GRPC_WINDOW}, &ccbs, &g);
  nl_grpc_channel_t ch = {0};
  nl_grpc_stream_t s1 = {.on_message = on_message, .on_close = on_close};
  nl_grpc_stream_t s3 = s1;
  uint8_t r1[64], r3[64];
  size_t n1 = fuzz_request(r1, sizeof(r1), 1), n3 = fuzz_request(r3, sizeof(r3), 3);
  nl_grpc_submit(cli, &ch, &s1, FUZZ_PATH_1, r1, n1, 1000);
  nl_grpc_submit(cli, &ch, &s3, FUZZ_PATH_3, r3, n3, 0);
  nl_h2_flush(cli);
  nghttp2_session_mem_recv(g.srv, (const uint8_t *)g.c2s.data, g.c2s.len);
  for (;;) {
    const uint8_t *p;
    ssize_t n = nghttp2_session_mem_send(g.srv, &p);
    if (n <= 0) break;
    nl_buf_append(&g.out, p, (size_t)n);
  }
  fuzz_seed_write(dir, shape, cut, g.out.data, g.out.len);
  nl_grpc_fail_streams(cli, "done");
  nl_h2_free(cli);
  nghttp2_session_del(g.srv);
  for (int i = 0; i < 4; i++) free(g.body[i]);
  nl_buf_free(&g.out);
  nl_buf_free(&g.c2s);
}

int main(int argc, char **argv) { return fuzz_seeds_main(argc, argv, NSHAPES, one); }
