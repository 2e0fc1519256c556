/* Writes seed inputs for fuzz_kube_h2 into DIR: the bytes a real HTTP/2 server
 * (an nghttp2 server session, in memory) sends in answer to the target's three
 * requests, for a few shapes of answer, each whole and cut in pieces.
 *   fuzz_kube_seeds DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "reactor/buf.h"
#include "test/fuzz/seeds.h"
#include "test/fuzz/kube/fuzz_common.h"

enum shape {
  OK_ALL,         /* 200, 201 and a watch of three events, one DATA frame each */
  CONTINUE_429,   /* 100 then 200; 429 with Retry-After; a watch with trailers */
  SPLIT_DATA,     /* every body in 7-byte DATA frames */
  RST_STREAMS,    /* REFUSED_STREAM; INTERNAL_ERROR after the head; GOAWAY mid-watch */
  GOAWAY_PING,    /* a PING, then GOAWAY(last 1): streams 3 and 5 refused */
  BIG_BODY,       /* a body past the target's limit on the buffered request */
  NSHAPES
};

static const char node_json[] =
    "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"n1\","
    "\"resourceVersion\":\"7\"},\"status\":{\"conditions\":[]}}";
static const char event_json[] =
    "{\"kind\":\"Event\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"e1\"}}";
static const char status_429[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
    "\"message\":\"Too many requests, please try again later.\",\"reason\":\"TooManyRequests\","
    "\"code\":429}";
static const char *const watch_events[] = {
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\","
    "\"resourceVersion\":\"8\"}}}\n",
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\","
    "\"resourceVersion\":\"9\"}}}\n",
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{"
    "\"resourceVersion\":\"10\"}}}\n",
};

typedef struct gen {
  nghttp2_session *srv;
  nl_buf_t out; /* server -> client */
  nl_buf_t c2s; /* client -> server */
  enum shape shape;
  nl_buf_t body[6];
  size_t off[6];
  int watch_part; /* watch events sent as DATA frames so far */
} gen_t;

static int client_write(void *user, const uint8_t *data, size_t len) {
  gen_t *g = user;
  nl_buf_append(&g->c2s, data, len);
  return 0;
}

static void drain(gen_t *g) {
  for (;;) {
    const uint8_t *p;
    ssize_t n = nghttp2_session_mem_send(g->srv, &p);
    if (n <= 0) break;
    nl_buf_append(&g->out, p, (size_t)n);
  }
}

static ssize_t read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *user) {
  gen_t *g = user;
  size_t rem = g->body[id].len - g->off[id];
  size_t n = rem < len ? rem : len;
  if (g->shape == SPLIT_DATA && n > 7) n = 7;
  /* A watch sends each event in its own DATA frame, as the apiserver flushes. */
  if (id == 5 && g->shape != SPLIT_DATA && g->watch_part < 3 &&
      n > strlen(watch_events[g->watch_part]))
    n = strlen(watch_events[g->watch_part]);
  if (id == 5) g->watch_part++;
  memcpy(buf, g->body[id].data + g->off[id], n);
  g->off[id] += n;
  if (g->off[id] == g->body[id].len) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (g->shape == CONTINUE_429 && id == 5) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      nghttp2_nv tr[] = {{(uint8_t *)"x-trailer", (uint8_t *)"done", 9, 4, 0}};
      nghttp2_submit_trailer(h2, id, tr, 1);
    }
  }
  return (ssize_t)n;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}

static void respond(gen_t *g, int32_t id) {
  const char *status = id == 3 ? "201" : "200";
  nl_buf_t *b = &g->body[id];
  if (id == 1) {
    nl_buf_append(b, node_json, strlen(node_json));
    if (g->shape == BIG_BODY)
      for (int i = 0; i < 60; i++) nl_buf_append(b, node_json, strlen(node_json));
  } else if (id == 3) {
    nl_buf_append(b, event_json, strlen(event_json));
  } else {
    for (int i = 0; i < 3; i++) nl_buf_append(b, watch_events[i], strlen(watch_events[i]));
  }
  if (g->shape == CONTINUE_429 && id == 1) {
    nghttp2_nv c[] = {NV(":status", "100")};
    nghttp2_submit_headers(g->srv, NGHTTP2_FLAG_NONE, id, NULL, c, 1, NULL);
  }
  if (g->shape == CONTINUE_429 && id == 3) {
    status = "429";
    nl_buf_reset(b);
    nl_buf_append(b, status_429, strlen(status_429));
  }
  if (g->shape == RST_STREAMS && id == 1) {
    nghttp2_submit_rst_stream(g->srv, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
    return;
  }
  if (g->shape == GOAWAY_PING && id != 1) return;
  char len[24];
  snprintf(len, sizeof len, "%zu", b->len);
  nghttp2_nv h[] = {NV(":status", status), NV("content-type", "application/json"),
                    NV("retry-after", "1"), NV("content-length", len)};
  size_t nh = 2;
  if (g->shape == CONTINUE_429 && id == 3) nh = 3;
  if (id != 5) h[nh++] = h[3];
  nghttp2_data_provider prd = {.read_callback = read_body};
  if (g->shape == RST_STREAMS && id == 3) {
    nghttp2_submit_headers(g->srv, NGHTTP2_FLAG_NONE, id, NULL, h, nh, NULL);
    return; /* RST_STREAM follows once the head is out */
  }
  nghttp2_submit_response(g->srv, id, h, nh, &prd);
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *user) {
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
    respond(user, f->hd.stream_id);
  return 0;
}

static void one(const char *dir, int shape, uint8_t cut) {
  gen_t g = {.shape = shape};
  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_server_new(&g.srv, cbs, &g);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_submit_settings(g.srv, NGHTTP2_FLAG_NONE, NULL, 0);
  if (shape == GOAWAY_PING) nghttp2_submit_ping(g.srv, NGHTTP2_FLAG_NONE, NULL);
  nl_h2_cbs_t ccbs = {.write = client_write};
  nl_h2_opts_t opts = nl_kube_h2_opts(FUZZ_WINDOW);
  nl_kube_h2_t *cli = nl_h2_new(&opts, &ccbs, &g);
  nl_kube_h2_stream_t st[FUZZ_NREQ];
  memset(st, 0, sizeof st);
  for (int i = 0; i < FUZZ_NREQ; i++) fuzz_submit(cli, &st[i], i);
  nl_h2_flush(cli);
  nghttp2_session_mem_recv(g.srv, (const uint8_t *)g.c2s.data, g.c2s.len);
  if (shape == GOAWAY_PING)
    nghttp2_submit_goaway(g.srv, NGHTTP2_FLAG_NONE, 1, NGHTTP2_NO_ERROR, NULL, 0);
  drain(&g);
  if (shape == RST_STREAMS) {
    nghttp2_submit_rst_stream(g.srv, NGHTTP2_FLAG_NONE, 3, NGHTTP2_INTERNAL_ERROR);
    nghttp2_submit_goaway(g.srv, NGHTTP2_FLAG_NONE, 5, NGHTTP2_NO_ERROR, NULL, 0);
  }
  drain(&g);
  fuzz_seed_write(dir, shape, cut, g.out.data, g.out.len);
  nl_kube_h2_forget(cli);
  nl_h2_free(cli);
  nghttp2_session_del(g.srv);
  for (int i = 0; i < 6; i++) nl_buf_free(&g.body[i]);
  nl_buf_free(&g.out);
  nl_buf_free(&g.c2s);
}

int main(int argc, char **argv) { return fuzz_seeds_main(argc, argv, NSHAPES, one); }
