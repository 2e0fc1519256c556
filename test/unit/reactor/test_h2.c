/* The HTTP/2 engine on bytes alone: the peer is an in-process nghttp2 server
 * session fed through memory (nghttp2's own tests do the same), so SETTINGS,
 * PINGs, GOAWAY, resets and windows are checked frame by frame. The server
 * side is tested against the engine's own client, and against hostile frames
 * written by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "reactor/buf.h"
#include "reactor/h2.h"
#include "reactor/xalloc.h"

typedef struct peer {
  nghttp2_session *srv;
  nl_h2_t *cli;
  nl_buf_t to_srv;
  /* what the server saw */
  uint32_t push, window;  /* the client's SETTINGS */
  int settings, ping_acks, pings, rsts, goaways, window_updates, requests;
  uint32_t rst_code;
  int32_t last_request;
  /* the body the server's data provider serves */
  size_t body_len;
  /* what the client's owner heard */
  int cli_ping_acks, cli_pings, cli_goaways;
  int32_t goaway_last;
} peer_t;

typedef struct stream {
  nl_h2_stream_t h2;
  int status, closes;
  size_t got;
  uint32_t error_code;
  bool refused, complete, headers_end;
} stream_t;

/* ---- the client's owner ---------------------------------------------------- */

static int cli_write(void *user, const uint8_t *data, size_t len) {
  peer_t *p = user;
  nl_buf_append(&p->to_srv, data, len);
  return 0;
}
static void cli_ping_ack(void *user) { ((peer_t *)user)->cli_ping_acks++; }
static void cli_ping(void *user) { ((peer_t *)user)->cli_pings++; }
static void cli_goaway(void *user, uint32_t code, int32_t last) {
  peer_t *p = user;
  p->cli_goaways++;
  p->goaway_last = last;
}

static void st_header(nl_h2_stream_t *h, const uint8_t *n, size_t nl, const uint8_t *v, size_t vl) {
  stream_t *st = container_of(h, stream_t, h2);
  if (nl == 7 && !memcmp(n, ":status", 7)) st->status = atoi((const char *)v);
}
static void st_headers(nl_h2_stream_t *h) { container_of(h, stream_t, h2)->headers_end = true; }
static void st_data(nl_h2_stream_t *h, const uint8_t *d, size_t n) {
  container_of(h, stream_t, h2)->got += n;
}
static void st_close(nl_h2_stream_t *h, uint32_t code, bool refused) {
  stream_t *st = container_of(h, stream_t, h2);
  st->closes++;
  st->error_code = code;
  st->refused = refused;
  st->complete = h->complete;
  assert_null(h->session);
}
static const nl_h2_stream_cbs_t st_cbs = {st_header, st_headers, st_data, st_close};

/* ---- the peer ---------------------------------------------------------------- */

static ssize_t srv_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *user) {
  size_t *left = src->ptr;
  size_t n = *left < len ? *left : len;
  memset(buf, 'x', n);
  *left -= n;
  if (*left == 0) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

static int srv_frame(nghttp2_session *s, const nghttp2_frame *f, void *user) {
  peer_t *p = user;
  switch (f->hd.type) {
  case NGHTTP2_SETTINGS:
    if (f->hd.flags & NGHTTP2_FLAG_ACK) break;
    p->settings++;
    for (size_t i = 0; i < f->settings.niv; i++) {
      if (f->settings.iv[i].settings_id == NGHTTP2_SETTINGS_ENABLE_PUSH)
        p->push = f->settings.iv[i].value;
      if (f->settings.iv[i].settings_id == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE)
        p->window = f->settings.iv[i].value;
    }
    break;
  case NGHTTP2_PING:
    if (f->hd.flags & NGHTTP2_FLAG_ACK) p->ping_acks++;
    else p->pings++;
    break;
  case NGHTTP2_RST_STREAM:
    p->rsts++;
    p->rst_code = f->rst_stream.error_code;
    break;
  case NGHTTP2_WINDOW_UPDATE:
    p->window_updates++;
    break;
  case NGHTTP2_HEADERS:
    if (f->headers.cat == NGHTTP2_HCAT_REQUEST) {
      p->requests++;
      p->last_request = f->hd.stream_id;
    }
    break;
  }
  return 0;
}

static void peer_init(peer_t *p, const nl_h2_opts_t *opts, bool defer_pings) {
  memset(p, 0, sizeof *p);
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_frame);
  assert_int_equal(nghttp2_session_server_new(&p->srv, cb, p), 0);
  nghttp2_session_callbacks_del(cb);
  assert_int_equal(nghttp2_submit_settings(p->srv, NGHTTP2_FLAG_NONE, NULL, 0), 0);
  nl_h2_cbs_t cbs = {.write = cli_write, .ping_ack = cli_ping_ack, .goaway = cli_goaway,
                     .ping = defer_pings ? cli_ping : NULL};
  p->cli = nl_h2_new(opts, &cbs, p);
  assert_non_null(p->cli);
}

static void peer_free(peer_t *p) {
  nl_h2_free(p->cli);
  nghttp2_session_del(p->srv);
  nl_buf_free(&p->to_srv);
}

/* Moves bytes both ways until neither side has anything to say. */
static void pump(peer_t *p) {
  for (int guard = 0; guard < 100; guard++) {
    assert_int_equal(nl_h2_flush(p->cli), 0);
    bool moved = p->to_srv.len > 0;
    if (moved) {
      assert_true(nghttp2_session_mem_recv(p->srv, (uint8_t *)p->to_srv.data, p->to_srv.len) >= 0);
      nl_buf_reset(&p->to_srv);
    }
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(p->srv, &d)) > 0) {
      moved = true;
      assert_int_equal(nl_h2_recv(p->cli, d, (size_t)n), 0);
    }
    if (!moved) return;
  }
  fail_msg("pump: the two sides never went quiet");
}

/* A session past the exchange of SETTINGS. */
static void peer_start(peer_t *p, const nl_h2_opts_t *opts, bool defer_pings) {
  peer_init(p, opts, defer_pings);
  pump(p);
}

static void submit(peer_t *p, stream_t *st) {
  memset(st, 0, sizeof *st);
  st->h2.cbs = &st_cbs;
  nghttp2_nv nv[] = {
      {(uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0},
      {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
      {(uint8_t *)":path", (uint8_t *)"/", 5, 1, 0},
      {(uint8_t *)":authority", (uint8_t *)"x", 10, 1, 0},
  };
  assert_int_equal(nl_h2_submit(p->cli, &st->h2, nv, 4, NULL, 0), 0);
}

static void respond_with(peer_t *p, int32_t id, const char *status, size_t *body) {
  nghttp2_nv nv[] = {{(uint8_t *)":status", (uint8_t *)status, 7, strlen(status), 0}};
  nghttp2_data_provider prd = {.source.ptr = body, .read_callback = srv_body};
  assert_int_equal(nghttp2_submit_response(p->srv, id, nv, 1, body ? &prd : NULL), 0);
}

static void respond(peer_t *p, int32_t id, size_t *body) { respond_with(p, id, "200", body); }

/* ---- tests ----------------------------------------------------------------- */

static void settings_and_a_request(void **state) {
  peer_t p;
  peer_init(&p, &(nl_h2_opts_t){.window = 1 << 20}, false);
  /* Until the peer's SETTINGS: the RFC's suggested minimum. */
  assert_int_equal(nl_h2_max_streams(p.cli), 100);
  pump(&p);
  assert_int_equal(p.settings, 1);
  assert_int_equal(p.push, 0);
  assert_int_equal(p.window, 1 << 20);
  /* The connection window is opened as wide as a stream's. */
  assert_int_equal(nghttp2_session_get_remote_window_size(p.srv), 1 << 20);

  stream_t st;
  submit(&p, &st);
  assert_int_equal(nl_h2_active(p.cli), 1);
  assert_ptr_equal(nl_h2_first_stream(p.cli), &st.h2);
  pump(&p);
  assert_true(st.h2.sent);
  size_t body = 1000;
  respond(&p, p.last_request, &body);
  pump(&p);
  assert_int_equal(st.status, 200);
  assert_true(st.headers_end);
  assert_int_equal(st.got, 1000);
  assert_int_equal(st.closes, 1);
  assert_true(st.complete);
  assert_false(st.refused);
  assert_int_equal(nl_h2_active(p.cli), 0);
  assert_null(nl_h2_first_stream(p.cli));
  peer_free(&p);
}

static void peer_stream_limit(void **state) {
  peer_t p;
  peer_init(&p, NULL, false);
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 2}};
  nghttp2_submit_settings(p.srv, NGHTTP2_FLAG_NONE, iv, 1);
  pump(&p);
  assert_int_equal(nl_h2_max_streams(p.cli), 2);
  stream_t a, b, c;
  submit(&p, &a);
  assert_int_equal(nl_h2_free_streams(p.cli), 1);
  submit(&p, &b);
  assert_int_equal(nl_h2_free_streams(p.cli), 0);
  memset(&c, 0, sizeof c);
  c.h2.cbs = &st_cbs;
  assert_int_equal(nl_h2_submit(p.cli, &c.h2, NULL, 0, NULL, 0), NL_H2_EBUSY);
  pump(&p);
  assert_int_equal(p.requests, 2);
  /* A cancelled stream holds its place until the peer has seen the reset. */
  nl_h2_stream_cancel(&a.h2);
  assert_int_equal(nl_h2_active(p.cli), 1);
  assert_int_equal(nl_h2_free_streams(p.cli), 0);
  pump(&p);
  assert_int_equal(p.rsts, 1);
  assert_int_equal(p.rst_code, NGHTTP2_CANCEL);
  assert_int_equal(a.closes, 0); /* cancelled: no callback */
  assert_int_equal(nl_h2_free_streams(p.cli), 1);
  nl_h2_stream_cancel(&b.h2);
  pump(&p);
  peer_free(&p);
}

static void pings_at_once(void **state) {
  peer_t p;
  peer_start(&p, NULL, false);
  nghttp2_submit_ping(p.srv, NGHTTP2_FLAG_NONE, NULL);
  pump(&p);
  assert_int_equal(p.ping_acks, 1);
  assert_int_equal(p.cli_pings, 0);
  /* Our own PING: the peer (nghttp2) acknowledges it. */
  assert_int_equal(nl_h2_ping(p.cli), 0);
  pump(&p);
  assert_int_equal(p.pings, 1);
  assert_int_equal(p.cli_ping_acks, 1);
  peer_free(&p);
}

static void pings_deferred(void **state) {
  peer_t p;
  peer_start(&p, NULL, true);
  for (int i = 0; i < 4; i++) nghttp2_submit_ping(p.srv, NGHTTP2_FLAG_NONE, NULL);
  pump(&p);
  assert_int_equal(p.cli_pings, 4);
  assert_int_equal(p.ping_acks, 0); /* held for the owner */
  /* A fifth while four are held is answered at once: a flood costs nothing. */
  nghttp2_submit_ping(p.srv, NGHTTP2_FLAG_NONE, NULL);
  pump(&p);
  assert_int_equal(p.cli_pings, 4);
  assert_int_equal(p.ping_acks, 1);
  assert_int_equal(nl_h2_ack_pings(p.cli), 0);
  pump(&p);
  assert_int_equal(p.ping_acks, 5);
  assert_int_equal(nl_h2_ack_pings(p.cli), 0); /* nothing left */
  pump(&p);
  assert_int_equal(p.ping_acks, 5);
  peer_free(&p);
}

static void goaway_refuses_later_streams(void **state) {
  peer_t p;
  peer_start(&p, NULL, false);
  stream_t a, b;
  submit(&p, &a);
  submit(&p, &b);
  pump(&p);
  assert_int_equal(p.requests, 2);
  nghttp2_submit_goaway(p.srv, NGHTTP2_FLAG_NONE, a.h2.id, NGHTTP2_NO_ERROR, NULL, 0);
  pump(&p);
  assert_int_equal(p.cli_goaways, 1);
  assert_int_equal(p.goaway_last, a.h2.id);
  assert_int_equal(b.closes, 1);
  assert_true(b.refused); /* above the last stream id: may be sent again */
  assert_int_equal(a.closes, 0);
  assert_int_equal(nl_h2_free_streams(p.cli), 0);
  stream_t c;
  memset(&c, 0, sizeof c);
  c.h2.cbs = &st_cbs;
  assert_int_equal(nl_h2_submit(p.cli, &c.h2, NULL, 0, NULL, 0), NL_H2_EBUSY);
  /* The stream below it finishes normally. */
  respond(&p, a.h2.id, NULL);
  pump(&p);
  assert_int_equal(a.closes, 1);
  assert_true(a.complete);
  peer_free(&p);
}

static void resets(void **state) {
  peer_t p;
  peer_start(&p, NULL, false);
  stream_t a, b, c;
  submit(&p, &a);
  submit(&p, &b);
  submit(&p, &c);
  pump(&p);
  nghttp2_submit_rst_stream(p.srv, NGHTTP2_FLAG_NONE, a.h2.id, NGHTTP2_REFUSED_STREAM);
  nghttp2_submit_rst_stream(p.srv, NGHTTP2_FLAG_NONE, b.h2.id, NGHTTP2_INTERNAL_ERROR);
  pump(&p);
  assert_int_equal(a.closes, 1);
  assert_true(a.refused);
  assert_false(a.complete);
  assert_int_equal(b.closes, 1);
  assert_false(b.refused);
  assert_int_equal(b.error_code, NGHTTP2_INTERNAL_ERROR);
  /* Our own reset: the owner still hears the close. */
  nl_h2_stream_reset(&c.h2, NGHTTP2_CANCEL);
  pump(&p);
  assert_int_equal(p.rst_code, NGHTTP2_CANCEL);
  assert_int_equal(c.closes, 1);
  assert_int_equal(c.error_code, NGHTTP2_CANCEL);
  /* Our GOAWAY: no new streams. */
  assert_int_equal(nl_h2_goaway(p.cli, NGHTTP2_NO_ERROR), 0);
  assert_int_equal(nl_h2_free_streams(p.cli), 0);
  pump(&p);
  peer_free(&p);
}

/* Without per-stream flow control nghttp2 gives received bytes back at once. */
static void windows_given_back(void **state) {
  peer_t p;
  peer_start(&p, &(nl_h2_opts_t){.window = 65535}, false);
  stream_t a;
  submit(&p, &a);
  pump(&p);
  size_t body = 200000; /* three windows */
  respond(&p, a.h2.id, &body);
  pump(&p);
  assert_int_equal(a.got, 200000);
  assert_true(a.complete);
  assert_true(p.window_updates > 0);
  peer_free(&p);
}

/* With it, a stream whose reader does not consume stops its sender alone. */
static void back_pressure_per_stream(void **state) {
  peer_t p;
  peer_start(&p, &(nl_h2_opts_t){.window = 65535, .stream_flow_control = true}, false);
  stream_t a, b;
  submit(&p, &a);
  submit(&p, &b);
  pump(&p);
  size_t body_a = 100000, body_b = 30000;
  respond(&p, a.h2.id, &body_a);
  pump(&p);
  assert_int_equal(a.got, 65535); /* its window, no more */
  assert_int_equal(a.h2.held, 65535);
  assert_int_equal(nghttp2_session_get_stream_remote_window_size(p.srv, a.h2.id), 0);
  /* The connection window was given back: another stream still flows. */
  respond(&p, b.h2.id, &body_b);
  pump(&p);
  assert_int_equal(b.got, 30000);
  assert_true(b.complete);
  assert_int_equal(a.closes, 0);
  /* The reader catches up: the rest arrives. */
  assert_int_equal(nl_h2_stream_consume(&a.h2, 65535), 0);
  assert_int_equal(a.h2.held, 0);
  pump(&p);
  assert_true(a.got > 65535);
  while (!a.closes) {
    assert_int_equal(nl_h2_stream_consume(&a.h2, a.h2.held), 0);
    pump(&p);
  }
  assert_int_equal(a.got, 100000);
  assert_true(a.complete);
  peer_free(&p);
}

/* A request cancelled before it left: nothing of it is sent, and nothing
 * reads its owner's memory (freed at once) afterwards. */
static void cancel_with_body_queued(void **state) {
  peer_t p;
  peer_start(&p, NULL, false);
  stream_t *st = calloc(1, sizeof *st);
  st->h2.cbs = &st_cbs;
  static const uint8_t body[100] = {0};
  nghttp2_nv nv[] = {
      {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
      {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
      {(uint8_t *)":path", (uint8_t *)"/", 5, 1, 0},
      {(uint8_t *)":authority", (uint8_t *)"x", 10, 1, 0},
  };
  assert_int_equal(nl_h2_submit(p.cli, &st->h2, nv, 4, body, sizeof body), 0);
  nl_h2_stream_cancel(&st->h2);
  free(st);
  pump(&p);
  assert_int_equal(p.requests, 0);
  assert_int_equal(p.rsts, 0);
  assert_int_equal(nl_h2_active(p.cli), 0);
  assert_int_equal(nl_h2_free_streams(p.cli), nl_h2_max_streams(p.cli));
  peer_free(&p);
}

/* head_only: the owner of a write whose answer would echo what it sent hears
 * the answer's head and never its body. */
static void st_headers_body_on_error(nl_h2_stream_t *h) {
  stream_t *st = container_of(h, stream_t, h2);
  st->headers_end = true;
  if (st->status != 200) assert_int_equal(nl_h2_stream_want_body(h), 0);
}
static const nl_h2_stream_cbs_t st_head_only_cbs = {st_header, st_headers_body_on_error, st_data,
                                                    st_close};

static void submit_head_only(peer_t *p, stream_t *st) {
  submit(p, st);
  /* (set before the submit in real use; nothing has left yet here) */
  st->h2.cbs = &st_head_only_cbs;
  st->h2.head_only = true;
}

static void head_only_streams(void **state) {
  peer_t p;
  peer_start(&p, &(nl_h2_opts_t){.window = 1 << 20, .head_only_streams = true}, false);
  /* Every stream's window starts closed; the connection's is open. */
  assert_int_equal(p.window, 0);
  assert_int_equal(nghttp2_session_get_remote_window_size(p.srv), 1 << 20);
  p.window_updates = 0;
  stream_t a, b;
  submit_head_only(&p, &a);
  submit(&p, &b);
  pump(&p);
  /* b's window opened after its HEADERS; a's stays closed. */
  assert_int_equal(p.window_updates, 1);
  assert_int_equal(nghttp2_session_get_stream_remote_window_size(p.srv, a.h2.id), 0);
  assert_int_equal(nghttp2_session_get_stream_remote_window_size(p.srv, b.h2.id), 1 << 20);
  size_t body_a = 300, body_b = 300;
  respond(&p, a.h2.id, &body_a);
  respond(&p, b.h2.id, &body_b);
  pump(&p);
  /* a: the head, a reset (CANCEL), closed as complete; not a byte of its body. */
  assert_int_equal(a.status, 200);
  assert_true(a.headers_end);
  assert_int_equal(a.closes, 1);
  assert_true(a.complete);
  assert_int_equal(a.error_code, NGHTTP2_NO_ERROR);
  assert_false(a.refused);
  assert_int_equal(a.got, 0);
  assert_int_equal(body_a, 300); /* the peer never read it to send */
  assert_int_equal(p.rsts, 1);
  assert_int_equal(p.rst_code, NGHTTP2_CANCEL);
  /* b: its body, as on any session. */
  assert_int_equal(b.got, 300);
  assert_true(b.complete);
  assert_int_equal(nl_h2_active(p.cli), 0);
  assert_int_equal(nl_h2_free_streams(p.cli), nl_h2_max_streams(p.cli));

  /* An error's body is wanted after all: asked for from on_headers. */
  stream_t c;
  submit_head_only(&p, &c);
  pump(&p);
  size_t body_c = 100;
  respond_with(&p, c.h2.id, "409", &body_c);
  pump(&p);
  assert_int_equal(c.status, 409);
  assert_int_equal(c.got, 100);
  assert_true(c.complete);
  assert_int_equal(p.rsts, 1);
  /* An answer without a body ends as any other. */
  stream_t d;
  submit_head_only(&p, &d);
  pump(&p);
  respond(&p, d.h2.id, NULL);
  pump(&p);
  assert_int_equal(d.status, 200);
  assert_int_equal(d.closes, 1);
  assert_true(d.complete);
  assert_int_equal(p.rsts, 1);
  peer_free(&p);
}

/* Failed allocations in nghttp2 (through the hook) fail the set-up cleanly. */
typedef struct failmem {
  int n, fail_at;
} failmem_t;
static void *fm_malloc(size_t n, void *ud) {
  failmem_t *m = ud;
  return ++m->n == m->fail_at ? NULL : malloc(n);
}
static void fm_free(void *p, void *ud) { free(p); }
static void *fm_calloc(size_t a, size_t b, void *ud) {
  failmem_t *m = ud;
  return ++m->n == m->fail_at ? NULL : calloc(a, b);
}
static void *fm_realloc(void *p, size_t n, void *ud) {
  failmem_t *m = ud;
  return ++m->n == m->fail_at ? NULL : realloc(p, n);
}

static void allocator_hook(void **state) {
  int failed = 0;
  for (int i = 1; i < 100; i++) {
    failmem_t fm = {0, i};
    nghttp2_mem mem = {&fm, fm_malloc, fm_free, fm_calloc, fm_realloc};
    nl_h2_cbs_t cbs = {.write = cli_write};
    nl_h2_t *s = nl_h2_new(&(nl_h2_opts_t){.mem = &mem}, &cbs, NULL);
    if (!s) {
      failed++;
      continue;
    }
    assert_true(fm.n > 0); /* nghttp2 allocated through the hook */
    nl_h2_free(s);
    if (fm.n < i) break; /* the set-up needs fewer than i allocations */
  }
  assert_true(failed > 0);
}


/* ---- the server side: two engines talking in memory --------------------------- */

typedef struct pair {
  nl_h2_t *cli, *srv;
  nl_buf_t to_srv, to_cli;
  /* what the server's owner heard */
  struct sstream *first, *last; /* the streams attached first and last */
  int srv_streams, refuse;
  int cli_goaways, cli_ping_acks;
} pair_t;

typedef struct sstream {
  nl_h2_stream_t h2;
  pair_t *pair;
  char path[64];
  nl_buf_t body;
  int headers, ends, closes;
  uint32_t error_code;
} sstream_t;

static int pair_to_srv(void *user, const uint8_t *d, size_t n) {
  nl_buf_append(&((pair_t *)user)->to_srv, d, n);
  return 0;
}
static int pair_to_cli(void *user, const uint8_t *d, size_t n) {
  nl_buf_append(&((pair_t *)user)->to_cli, d, n);
  return 0;
}
static void pair_goaway(void *user, uint32_t code, int32_t last) { ((pair_t *)user)->cli_goaways++; }
static void pair_ping_ack(void *user) { ((pair_t *)user)->cli_ping_acks++; }

static void ss_header(nl_h2_stream_t *h, const uint8_t *n, size_t nl, const uint8_t *v, size_t vl) {
  sstream_t *st = container_of(h, sstream_t, h2);
  if (nl == 5 && !memcmp(n, ":path", 5) && vl < sizeof st->path) {
    memcpy(st->path, v, vl);
    st->path[vl] = 0;
  }
}
static void ss_headers(nl_h2_stream_t *h) { container_of(h, sstream_t, h2)->headers++; }
static void ss_data(nl_h2_stream_t *h, const uint8_t *d, size_t n) {
  nl_buf_append(&container_of(h, sstream_t, h2)->body, d, n);
}
static void ss_end(nl_h2_stream_t *h) {
  assert_true(h->complete);
  container_of(h, sstream_t, h2)->ends++;
}
static void ss_close(nl_h2_stream_t *h, uint32_t code, bool refused) {
  sstream_t *st = container_of(h, sstream_t, h2);
  st->closes++;
  st->error_code = code;
  assert_null(h->session);
}
static const nl_h2_stream_cbs_t ss_cbs = {.on_header = ss_header, .on_headers = ss_headers,
                                          .on_data = ss_data, .on_close = ss_close,
                                          .on_end = ss_end};

static nl_h2_stream_t *pair_on_stream(void *user) {
  pair_t *p = user;
  if (p->refuse) return NULL;
  sstream_t *st = calloc(1, sizeof *st);
  st->h2.cbs = &ss_cbs;
  st->pair = p;
  if (!p->first) p->first = st;
  p->last = st;
  p->srv_streams++;
  return &st->h2;
}

static void sstream_free(sstream_t *st) {
  nl_buf_free(&st->body);
  free(st);
}

static void pair_init(pair_t *p, const nl_h2_opts_t *srv_opts, const nl_h2_opts_t *mem_opts) {
  memset(p, 0, sizeof *p);
  nl_h2_cbs_t scbs = {.write = pair_to_cli, .on_stream = pair_on_stream};
  p->srv = nl_h2_server_new(srv_opts, &scbs, p);
  assert_non_null(p->srv);
  nl_h2_cbs_t ccbs = {.write = pair_to_srv, .goaway = pair_goaway, .ping_ack = pair_ping_ack};
  p->cli = nl_h2_new(mem_opts, &ccbs, p);
  assert_non_null(p->cli);
}

static void pair_free(pair_t *p) {
  nl_h2_free(p->cli);
  nl_h2_free(p->srv);
  nl_buf_free(&p->to_srv);
  nl_buf_free(&p->to_cli);
}

static void pair_pump(pair_t *p) {
  for (int guard = 0; guard < 100; guard++) {
    assert_int_equal(nl_h2_flush(p->cli), 0);
    assert_int_equal(nl_h2_flush(p->srv), 0);
    if (!p->to_srv.len && !p->to_cli.len) return;
    if (p->to_srv.len) {
      nl_buf_t b = p->to_srv;
      p->to_srv = (nl_buf_t)NL_BUF_INIT;
      assert_int_equal(nl_h2_recv(p->srv, (uint8_t *)b.data, b.len), 0);
      nl_buf_free(&b);
    }
    if (p->to_cli.len) {
      nl_buf_t b = p->to_cli;
      p->to_cli = (nl_buf_t)NL_BUF_INIT;
      assert_int_equal(nl_h2_recv(p->cli, (uint8_t *)b.data, b.len), 0);
      nl_buf_free(&b);
    }
  }
  fail_msg("pair_pump: the two sides never went quiet");
}

typedef struct cstream {
  nl_h2_stream_t h2;
  int status, closes, trailers_seen;
  nl_buf_t body;
  char grpc_status[8];
  uint32_t error_code;
  bool complete;
} cstream_t;

static void cs_header(nl_h2_stream_t *h, const uint8_t *n, size_t nl, const uint8_t *v, size_t vl) {
  cstream_t *st = container_of(h, cstream_t, h2);
  if (nl == 7 && !memcmp(n, ":status", 7)) st->status = atoi((const char *)v);
  if (nl == 11 && !memcmp(n, "grpc-status", 11) && vl < sizeof st->grpc_status) {
    memcpy(st->grpc_status, v, vl);
    st->trailers_seen++;
  }
}
static void cs_data(nl_h2_stream_t *h, const uint8_t *d, size_t n) {
  nl_buf_append(&container_of(h, cstream_t, h2)->body, d, n);
}
static void cs_close(nl_h2_stream_t *h, uint32_t code, bool refused) {
  cstream_t *st = container_of(h, cstream_t, h2);
  st->closes++;
  st->error_code = code;
  st->complete = h->complete;
}
static const nl_h2_stream_cbs_t cs_cbs = {.on_header = cs_header, .on_data = cs_data,
                                          .on_close = cs_close};

static void cs_submit(pair_t *p, cstream_t *st, const char *path, const char *body) {
  memset(st, 0, sizeof *st);
  st->h2.cbs = &cs_cbs;
  nghttp2_nv nv[] = {
      {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
      {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
      {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
      {(uint8_t *)":authority", (uint8_t *)"x", 10, 1, 0},
  };
  assert_int_equal(nl_h2_submit(p->cli, &st->h2, nv, 4, body, body ? strlen(body) : 0), 0);
}

#define NV_(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), 0}

static void server_answers_with_trailers(void **state) {
  pair_t p;
  pair_init(&p, NULL, NULL);
  pair_pump(&p);
  assert_true(nl_h2_peer_settled(p.srv));
  /* The client heard the server's limit. */
  assert_int_equal(nl_h2_max_streams(p.cli), 32);
  cstream_t c;
  cs_submit(&p, &c, "/x.Y/Z", "hello");
  pair_pump(&p);
  sstream_t *s = p.last;
  assert_non_null(s);
  assert_string_equal(s->path, "/x.Y/Z");
  assert_int_equal(s->headers, 1);
  assert_int_equal(s->ends, 1);
  assert_int_equal(s->body.len, 5);
  assert_memory_equal(s->body.data, "hello", 5);
  assert_int_equal(nl_h2_active(p.srv), 1);
  nghttp2_nv head[] = {NV_(":status", "200"), NV_("content-type", "application/grpc")};
  assert_int_equal(nl_h2_respond(&s->h2, head, 2, false), 0);
  assert_int_equal(nl_h2_respond(&s->h2, head, 2, false), NGHTTP2_ERR_INVALID_STATE);
  assert_int_equal(nl_h2_respond_data(&s->h2, "wor", 3), 0);
  assert_int_equal(nl_h2_respond_data(&s->h2, "ld", 2), 0);
  assert_int_equal(nl_h2_respond_queued(&s->h2), 5);
  nghttp2_nv tr[] = {NV_("grpc-status", "0")};
  assert_int_equal(nl_h2_respond_end(&s->h2, tr, 1), 0);
  assert_int_equal(nl_h2_respond_data(&s->h2, "!", 1), NGHTTP2_ERR_INVALID_STATE);
  pair_pump(&p);
  assert_int_equal(c.status, 200);
  assert_int_equal(c.body.len, 5);
  assert_memory_equal(c.body.data, "world", 5);
  assert_string_equal(c.grpc_status, "0");
  assert_int_equal(c.closes, 1);
  assert_true(c.complete);
  assert_int_equal(s->closes, 1);
  assert_int_equal(s->error_code, NGHTTP2_NO_ERROR);
  assert_true(s->h2.out_done);
  assert_int_equal(nl_h2_active(p.srv), 0);
  sstream_free(s);
  nl_buf_free(&c.body);
  pair_free(&p);
}

/* A server-streaming answer: the stream stays open, more comes later. */
static void server_streams_more_later(void **state) {
  pair_t p;
  pair_init(&p, &(nl_h2_opts_t){.window = 1 << 20}, NULL);
  pair_pump(&p);
  cstream_t c;
  cs_submit(&p, &c, "/x.Y/Watch", NULL);
  pair_pump(&p);
  sstream_t *s = p.last;
  assert_int_equal(s->ends, 1);
  nghttp2_nv head[] = {NV_(":status", "200")};
  assert_int_equal(nl_h2_respond(&s->h2, head, 1, false), 0);
  pair_pump(&p);
  assert_int_equal(c.status, 200);
  assert_int_equal(c.body.len, 0);
  for (int i = 1; i <= 3; i++) {
    assert_int_equal(nl_h2_respond_data(&s->h2, "abc", 3), 0);
    pair_pump(&p);
    assert_int_equal(c.body.len, 3 * i);
    assert_int_equal(nl_h2_respond_queued(&s->h2), 0);
    assert_int_equal(c.closes, 0);
  }
  /* An end without trailers: END_STREAM on the last DATA. */
  assert_int_equal(nl_h2_respond_end(&s->h2, NULL, 0), 0);
  pair_pump(&p);
  assert_int_equal(c.closes, 1);
  assert_true(c.complete);
  assert_int_equal(c.trailers_seen, 0);
  assert_int_equal(s->closes, 1);
  sstream_free(s);
  nl_buf_free(&c.body);
  pair_free(&p);
}

/* An answer before the request's end: the client is told to stop sending
 * (RST_STREAM(NO_ERROR)) and hears a complete answer. */
static void server_answers_early(void **state) {
  pair_t p;
  pair_init(&p, &(nl_h2_opts_t){.window = 65535}, NULL);
  pair_pump(&p);
  static char big[200000];
  memset(big, 'b', sizeof big - 1);
  cstream_t c;
  cs_submit(&p, &c, "/x.Y/Big", big);
  /* One round: the server reads the head and one window's worth. */
  assert_int_equal(nl_h2_flush(p.cli), 0);
  nl_buf_t b = p.to_srv;
  p.to_srv = (nl_buf_t)NL_BUF_INIT;
  assert_int_equal(nl_h2_recv(p.srv, (uint8_t *)b.data, b.len), 0);
  nl_buf_free(&b);
  sstream_t *s = p.last;
  assert_int_equal(s->ends, 0);
  nghttp2_nv head[] = {NV_(":status", "200"), NV_("grpc-status", "8")};
  assert_int_equal(nl_h2_respond(&s->h2, head, 2, true), 0);
  pair_pump(&p);
  assert_string_equal(c.grpc_status, "8");
  assert_int_equal(c.closes, 1);
  assert_true(c.complete);
  assert_int_equal(c.error_code, NGHTTP2_NO_ERROR);
  assert_int_equal(s->closes, 1);
  assert_int_equal(s->ends, 0);
  assert_true(s->body.len < sizeof big - 1);
  sstream_free(s);
  nl_buf_free(&c.body);
  pair_free(&p);
}

/* The owner refuses a stream; the peer may send it again. PINGs and GOAWAY
 * as on a client. */
static void server_refuses_pings_goaway(void **state) {
  pair_t p;
  pair_init(&p, NULL, NULL);
  pair_pump(&p);
  p.refuse = 1;
  cstream_t c;
  cs_submit(&p, &c, "/x.Y/Z", NULL);
  pair_pump(&p);
  assert_int_equal(c.closes, 1);
  assert_int_equal(c.error_code, NGHTTP2_REFUSED_STREAM);
  assert_int_equal(p.srv_streams, 0);
  assert_int_equal(nl_h2_ping(p.cli), 0);
  pair_pump(&p);
  assert_int_equal(p.cli_ping_acks, 1);
  p.refuse = 0;
  cstream_t d;
  cs_submit(&p, &d, "/x.Y/Z", NULL);
  pair_pump(&p);
  sstream_t *s = p.last;
  assert_int_equal(nl_h2_goaway(p.srv, NGHTTP2_NO_ERROR), 0);
  pair_pump(&p);
  assert_int_equal(p.cli_goaways, 1);
  /* The stream below the GOAWAY is still answered. */
  nghttp2_nv head[] = {NV_(":status", "200")};
  assert_int_equal(nl_h2_respond(&s->h2, head, 1, true), 0);
  pair_pump(&p);
  assert_int_equal(d.closes, 1);
  assert_true(d.complete);
  assert_int_equal(d.status, 200);
  sstream_free(s);
  pair_free(&p);
}

/* ---- hostile clients, frame by frame ------------------------------------------ */

typedef struct raw {
  nl_buf_t in;            /* what the hostile client sends */
  nghttp2_hd_deflater *hd;
} raw_t;

static void raw_frame(nl_buf_t *b, uint8_t type, uint8_t flags, int32_t id, const void *payload,
                      size_t len) {
  uint8_t h[9] = {(uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, type, flags,
                  (uint8_t)(id >> 24), (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id};
  nl_buf_append(b, h, 9);
  nl_buf_append(b, payload, len);
}

static void raw_start(raw_t *r) {
  memset(r, 0, sizeof *r);
  nl_buf_append(&r->in, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
  raw_frame(&r->in, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
  assert_int_equal(nghttp2_hd_deflate_new(&r->hd, 4096), 0);
}

static void raw_headers(raw_t *r, int32_t id, uint8_t flags, const char *path, size_t pad) {
  char *padv = calloc(1, pad + 1);
  memset(padv, 'p', pad);
  nghttp2_nv nv[] = {NV_(":method", "POST"), NV_(":scheme", "http"), NV_(":path", path),
                     NV_(":authority", "x"), NV_("x-pad", padv)};
  size_t n = pad ? 5 : 4;
  uint8_t block[8192];
  ssize_t len = nghttp2_hd_deflate_hd(r->hd, block, sizeof block, nv, n);
  assert_true(len > 0);
  raw_frame(&r->in, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | flags, id, block, (size_t)len);
  free(padv);
}

static void raw_free(raw_t *r) {
  nghttp2_hd_deflate_del(r->hd);
  nl_buf_free(&r->in);
}

/* Counts the RST_STREAM frames in the server's output, by code. */
static int count_rst(const nl_buf_t *out, uint32_t code) {
  int n = 0;
  for (size_t off = 0; off + 9 <= out->len;) {
    const uint8_t *f = (const uint8_t *)out->data + off;
    size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
    if (f[3] == NGHTTP2_RST_STREAM && len == 4) {
      uint32_t c = (uint32_t)f[9] << 24 | (uint32_t)f[10] << 16 | (uint32_t)f[11] << 8 | f[12];
      if (c == code) n++;
    }
    off += 9 + len;
  }
  return n;
}

static void hostile_streams_over_the_limit(void **state) {
  pair_t p;
  pair_init(&p, &(nl_h2_opts_t){.max_streams = 2}, NULL);
  assert_int_equal(nl_h2_flush(p.srv), 0); /* the server's SETTINGS */
  raw_t r;
  raw_start(&r);
  /* Three streams at once, none ended. */
  raw_headers(&r, 1, 0, "/a", 0);
  raw_headers(&r, 3, 0, "/b", 0);
  raw_headers(&r, 5, 0, "/c", 0);
  nl_buf_reset(&p.to_cli);
  assert_int_equal(nl_h2_recv(p.srv, (uint8_t *)r.in.data, r.in.len), 0);
  assert_int_equal(nl_h2_flush(p.srv), 0);
  assert_int_equal(p.srv_streams, 2);
  assert_int_equal(nl_h2_active(p.srv), 2);
  /* (before the client acknowledged our SETTINGS: it may not know the limit) */
  assert_int_equal(count_rst(&p.to_cli, NGHTTP2_REFUSED_STREAM), 1);
  /* Their owners hear of them when the session goes (detached first, as an
   * owner does). */
  while (nl_h2_first_stream(p.srv)) {
    nl_h2_stream_t *h = nl_h2_first_stream(p.srv);
    nl_h2_stream_detach(h);
    sstream_free(container_of(h, sstream_t, h2));
  }
  /* Once it has acknowledged them, a stream over the limit is a connection
   * error (nghttp2, RFC 9113 5.1.2): GOAWAY, and the session reads no more.
   * (Streams 1 and 3, let go by their owners, are still open in nghttp2.) */
  nl_buf_reset(&r.in);
  raw_frame(&r.in, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 0);
  raw_headers(&r, 7, 0, "/d", 0);
  raw_headers(&r, 9, 0, "/e", 0);
  raw_headers(&r, 11, 0, "/f", 0);
  nl_buf_reset(&p.to_cli);
  assert_int_equal(nl_h2_recv(p.srv, (uint8_t *)r.in.data, r.in.len), 0);
  assert_int_equal(nl_h2_flush(p.srv), 0);
  assert_int_equal(p.srv_streams, 2);
  assert_true(p.to_cli.len > 0 && (uint8_t)p.to_cli.data[3] == NGHTTP2_GOAWAY);
  assert_false(nl_h2_want_io(p.srv));
  while (nl_h2_first_stream(p.srv)) {
    nl_h2_stream_t *h = nl_h2_first_stream(p.srv);
    nl_h2_stream_detach(h);
    sstream_free(container_of(h, sstream_t, h2));
  }
  raw_free(&r);
  pair_free(&p);
}

static void hostile_header_list(void **state) {
  pair_t p;
  pair_init(&p, &(nl_h2_opts_t){.max_header_list = 1024}, NULL);
  assert_int_equal(nl_h2_flush(p.srv), 0);
  raw_t r;
  raw_start(&r);
  raw_headers(&r, 1, NGHTTP2_FLAG_END_STREAM, "/a", 2000);
  raw_headers(&r, 3, NGHTTP2_FLAG_END_STREAM, "/b", 500);
  nl_buf_reset(&p.to_cli);
  assert_int_equal(nl_h2_recv(p.srv, (uint8_t *)r.in.data, r.in.len), 0);
  assert_int_equal(nl_h2_flush(p.srv), 0);
  /* Stream 1 is reset; its owner hears the close and no end. Stream 3 goes on. */
  assert_int_equal(count_rst(&p.to_cli, NGHTTP2_INTERNAL_ERROR), 1);
  assert_int_equal(p.srv_streams, 2);
  sstream_t *b = p.last;
  assert_string_equal(b->path, "/b");
  assert_int_equal(b->ends, 1);
  assert_int_equal(nl_h2_active(p.srv), 1);
  /* The reset stream's owner was told. */
  assert_int_equal(p.first->closes, 1);
  assert_int_equal(p.first->error_code, NGHTTP2_INTERNAL_ERROR);
  assert_int_equal(p.first->ends, 0);
  sstream_free(p.first);
  nl_h2_stream_t *h = nl_h2_first_stream(p.srv);
  assert_ptr_equal(h, &b->h2);
  nl_h2_stream_detach(h);
  sstream_free(b);
  raw_free(&r);
  pair_free(&p);
}

/* A client that never sends its preface, or garbage for one. */
static void hostile_preface(void **state) {
  pair_t p;
  pair_init(&p, NULL, NULL);
  assert_false(nl_h2_peer_settled(p.srv));
  const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_true(nl_h2_recv(p.srv, (const uint8_t *)junk, sizeof junk - 1) < 0);
  assert_false(nl_h2_peer_settled(p.srv));
  assert_int_equal(p.srv_streams, 0);
  pair_free(&p);
}

static void server_allocator_hook(void **state) {
  int failed = 0;
  for (int i = 1; i < 100; i++) {
    failmem_t fm = {0, i};
    nghttp2_mem mem = {&fm, fm_malloc, fm_free, fm_calloc, fm_realloc};
    nl_h2_cbs_t cbs = {.write = cli_write, .on_stream = pair_on_stream};
    nl_h2_t *s = nl_h2_server_new(&(nl_h2_opts_t){.mem = &mem}, &cbs, NULL);
    if (!s) {
      failed++;
      continue;
    }
    assert_true(fm.n > 0);
    nl_h2_free(s);
    if (fm.n < i) break;
  }
  assert_true(failed > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(settings_and_a_request),
      cmocka_unit_test(peer_stream_limit),
      cmocka_unit_test(pings_at_once),
      cmocka_unit_test(pings_deferred),
      cmocka_unit_test(goaway_refuses_later_streams),
      cmocka_unit_test(resets),
      cmocka_unit_test(windows_given_back),
      cmocka_unit_test(back_pressure_per_stream),
      cmocka_unit_test(cancel_with_body_queued),
      cmocka_unit_test(head_only_streams),
      cmocka_unit_test(allocator_hook),
      cmocka_unit_test(server_answers_with_trailers),
      cmocka_unit_test(server_streams_more_later),
      cmocka_unit_test(server_answers_early),
      cmocka_unit_test(server_refuses_pings_goaway),
      cmocka_unit_test(hostile_streams_over_the_limit),
      cmocka_unit_test(hostile_header_list),
      cmocka_unit_test(hostile_preface),
      cmocka_unit_test(server_allocator_hook),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
