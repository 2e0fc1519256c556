/* The gRPC engine on bytes alone: a byte-level fake peer (an in-process nghttp2
 * server session fed through memory, as nghttp2's own tests) answers each
 * request with a scripted response. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/grpc.h"
#include "cri/api.pb-c.h"
#include "reactor/buf.h"

typedef struct peer peer_t;

/* The session as the CRI client makes it (cri/conn.c): the engine's, with
 * gRPC's window and the allocator; max_recv_msg_size goes to the channel. */
typedef struct session_opts {
  size_t max_recv_msg_size;
  nl_grpc_mem_t *mem;
} session_opts_t;

static nl_h2_t *session_new(const session_opts_t *o, const nl_h2_cbs_t *cbs, void *user) {
  nl_h2_opts_t ho = {.window = NL_GRPC_WINDOW, .mem = o && o->mem ? &o->mem->nghttp2 : NULL};
  return nl_h2_new(&ho, cbs, user);
}

/* The connection is gone: its streams end with reason, then the session. */
static void session_free(nl_h2_t *s, const char *reason) {
  nl_grpc_fail_streams(s, reason);
  nl_h2_free(s);
}
typedef void (*respond_fn)(peer_t *p, int32_t id);

struct peer {
  nghttp2_session *srv;
  nl_h2_t *cli;
  nl_grpc_channel_t ch;
  nl_buf_t to_srv;
  respond_fn respond;
  /* what the server saw */
  char path[128], te[32], ctype[64], timeout[32];
  nl_buf_t body;
  uint32_t rst_code;
  bool got_rst;
  int ping_acks;        /* PING ACKs the server received */
  uint8_t ack_data[8];  /* payload of the last one */
  int pings_to_ack;     /* client cbs.ping calls */
  /* response body the data provider serves, chunk bytes per DATA frame */
  uint8_t *out;
  size_t out_len, out_off, chunk;
  const nghttp2_nv *trailers;
  size_t ntrailers;
};

typedef struct result {
  int closes;
  int code;
  char message[512];
  bool refused;
  int messages;
  size_t last_len;
  ProtobufCMessage *msg;
  nl_grpc_mem_t *mem;
} result_t;

static int cli_write(void *user, const uint8_t *data, size_t len) {
  peer_t *p = user;
  nl_buf_append(&p->to_srv, data, len);
  return 0;
}

static void pump(peer_t *p) {
  for (int guard = 0; guard < 1000; guard++) {
    if (nl_h2_flush(p->cli) < 0) return;
    bool moved = false;
    if (p->to_srv.len) {
      nghttp2_session_mem_recv(p->srv, (uint8_t *)p->to_srv.data, p->to_srv.len);
      nl_buf_reset(&p->to_srv);
      moved = true;
    }
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(p->srv, &d)) > 0) {
      moved = true;
      if (nl_h2_recv(p->cli, d, (size_t)n) < 0) return;
    }
    if (!moved) return;
  }
  fail_msg("pump does not settle");
}

/* ---- server side ---- */

static int srv_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                      size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud) {
  peer_t *p = ud;
  char *dst = NULL;
  size_t cap = 0;
  if (nlen == 5 && !memcmp(name, ":path", 5)) dst = p->path, cap = sizeof p->path;
  else if (nlen == 2 && !memcmp(name, "te", 2)) dst = p->te, cap = sizeof p->te;
  else if (nlen == 12 && !memcmp(name, "content-type", 12)) dst = p->ctype, cap = sizeof p->ctype;
  else if (nlen == 12 && !memcmp(name, "grpc-timeout", 12)) dst = p->timeout, cap = sizeof p->timeout;
  if (dst && vlen < cap) {
    memcpy(dst, value, vlen);
    dst[vlen] = 0;
  }
  return 0;
}

static int srv_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                    size_t len, void *ud) {
  nl_buf_append(&((peer_t *)ud)->body, data, len);
  return 0;
}

static int srv_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  peer_t *p = ud;
  if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK)) {
    p->ping_acks++;
    memcpy(p->ack_data, f->ping.opaque_data, 8);
  }
  if (f->hd.type == NGHTTP2_RST_STREAM) {
    p->got_rst = true;
    p->rst_code = f->rst_stream.error_code;
  }
  if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM) && p->respond)
    p->respond(p, f->hd.stream_id);
  return 0;
}

static ssize_t srv_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *ud) {
  peer_t *p = ud;
  size_t n = p->out_len - p->out_off;
  if (n > p->chunk) n = p->chunk;
  if (n > length) n = length;
  memcpy(buf, p->out + p->out_off, n);
  p->out_off += n;
  if (p->out_off == p->out_len) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (p->trailers) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      nghttp2_submit_trailer(s, id, p->trailers, p->ntrailers);
    }
  }
  return (ssize_t)n;
}

#define HV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, 0}
static const nghttp2_nv resp_headers[] = {HV(":status", "200"),
                                          HV("content-type", "application/grpc")};
static const nghttp2_nv ok_trailers[] = {HV("grpc-status", "0")};

static void on_peer_ping(void *user) { ((peer_t *)user)->pings_to_ack++; }

/* defer_acks: the client acknowledges PINGs through cbs.ping (as cri/conn.c). */
static void peer_init_acks(peer_t *p, const session_opts_t *opts, respond_fn respond,
                           bool defer_acks) {
  memset(p, 0, sizeof *p);
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, srv_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, srv_data);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_frame);
  assert_int_equal(nghttp2_session_server_new(&p->srv, cb, p), 0);
  nghttp2_session_callbacks_del(cb);
  nghttp2_submit_settings(p->srv, NGHTTP2_FLAG_NONE, NULL, 0);
  nl_h2_cbs_t cbs = {.write = cli_write, .ping = defer_acks ? on_peer_ping : NULL};
  p->cli = session_new(opts, &cbs, p);
  p->ch.max_recv_msg_size = opts ? opts->max_recv_msg_size : 0;
  p->respond = respond;
  p->chunk = 16384;
}

static void peer_init(peer_t *p, const session_opts_t *opts, respond_fn respond) {
  peer_init_acks(p, opts, respond, false);
}

static void peer_free(peer_t *p) {
  if (p->cli) session_free(p->cli, "test over");
  nghttp2_session_del(p->srv);
  nl_buf_free(&p->to_srv);
  nl_buf_free(&p->body);
  free(p->out);
}

/* Serves out (already framed) in chunk-byte DATA frames, then trailers. */
static void respond_body(peer_t *p, int32_t id) {
  nghttp2_data_provider prd = {.read_callback = srv_read};
  p->out_off = 0;
  nghttp2_submit_response(p->srv, id, resp_headers, 2, &prd);
}

static void set_body_msg(peer_t *p, const ProtobufCMessage *m, int copies) {
  size_t one = nl_grpc_frame_size(m);
  p->out = malloc(one * copies);
  for (int i = 0; i < copies; i++) nl_grpc_frame(m, p->out + i * one);
  p->out_len = one * copies;
  p->trailers = ok_trailers;
  p->ntrailers = 1;
}

/* ---- client side ---- */

static void on_message(nl_grpc_stream_t *st, const uint8_t *data, size_t len) {
  result_t *r = st->user;
  r->messages++;
  r->last_len = len;
  if (!r->msg)
    r->msg = protobuf_c_message_unpack(&runtime__v1__version_response__descriptor,
                                       r->mem ? &r->mem->protobuf : NULL, len, data);
}

static void on_close(nl_grpc_stream_t *st, const nl_grpc_status_t *status, bool refused) {
  result_t *r = st->user;
  r->closes++;
  r->code = status->code;
  r->refused = refused;
  strncpy(r->message, status->message, sizeof r->message - 1);
}

typedef struct call {
  nl_grpc_stream_t st;
  uint8_t *framed;
  size_t len;
  result_t r;
} call_t;

static int start(peer_t *p, call_t *c, uint64_t timeout_ms) {
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  req.version = "v1";
  c->len = nl_grpc_frame_size(&req.base);
  c->framed = malloc(c->len);
  nl_grpc_frame(&req.base, c->framed);
  c->st.on_message = on_message;
  c->st.on_close = on_close;
  c->st.user = &c->r;
  return nl_grpc_submit(p->cli, &p->ch, &c->st, "/runtime.v1.RuntimeService/Version", c->framed,
                        c->len, timeout_ms);
}

static void call_free(call_t *c) {
  free(c->framed);
  if (c->r.msg) protobuf_c_message_free_unpacked(c->r.msg, c->r.mem ? &c->r.mem->protobuf : NULL);
}

static Runtime__V1__VersionResponse version_resp(void) {
  Runtime__V1__VersionResponse v = RUNTIME__V1__VERSION_RESPONSE__INIT;
  v.version = "0.1.0";
  v.runtime_name = "containerd";
  v.runtime_version = "1.6.20";
  v.runtime_api_version = "v1";
  return v;
}

/* ---- tests ---- */

static void unary_across_many_data_frames(void **state) {
  peer_t p;
  peer_init(&p, NULL, respond_body);
  Runtime__V1__VersionResponse v = version_resp();
  set_body_msg(&p, &v.base, 1);
  p.chunk = 3; /* the 5-byte prefix itself is split */
  call_t c = {0};
  assert_int_equal(start(&p, &c, 120000), 0);
  assert_int_equal(nl_h2_active(p.cli), 1);
  pump(&p);
  /* the request as the server saw it */
  assert_string_equal(p.path, "/runtime.v1.RuntimeService/Version");
  assert_string_equal(p.te, "trailers");
  assert_string_equal(p.ctype, "application/grpc");
  assert_string_equal(p.timeout, "120000m");
  assert_int_equal(p.body.len, c.len);
  assert_memory_equal(p.body.data, c.framed, c.len);
  /* the response */
  assert_int_equal(c.r.closes, 1);
  assert_int_equal(c.r.code, NL_GRPC_OK);
  assert_int_equal(c.r.messages, 1);
  assert_non_null(c.r.msg);
  assert_string_equal(((Runtime__V1__VersionResponse *)c.r.msg)->runtime_name, "containerd");
  assert_int_equal(nl_h2_active(p.cli), 0);
  call_free(&c);
  peer_free(&p);
}

static void streaming_messages_in_one_frame(void **state) {
  peer_t p;
  peer_init(&p, NULL, respond_body);
  Runtime__V1__VersionResponse v = version_resp();
  set_body_msg(&p, &v.base, 3);
  call_t c = {0};
  assert_int_equal(start(&p, &c, 0), 0);
  pump(&p);
  assert_string_equal(p.timeout, ""); /* no deadline, no header */
  assert_int_equal(c.r.messages, 3);
  assert_int_equal(c.r.code, NL_GRPC_OK);
  call_free(&c);
  peer_free(&p);
}

static void respond_trailers_only(peer_t *p, int32_t id) {
  static const nghttp2_nv nv[] = {
      HV(":status", "200"), HV("content-type", "application/grpc"), HV("grpc-status", "5"),
      HV("grpc-message", "container \"abc\" not%20found%3A %E2%9C%93 100%% %zz")};
  nghttp2_submit_response(p->srv, id, nv, 4, NULL);
}

static void trailers_only_and_percent_decoding(void **state) {
  peer_t p;
  peer_init(&p, NULL, respond_trailers_only);
  call_t c = {0};
  assert_int_equal(start(&p, &c, 1000), 0);
  pump(&p);
  assert_int_equal(c.r.closes, 1);
  assert_int_equal(c.r.messages, 0);
  assert_int_equal(c.r.code, NL_GRPC_NOT_FOUND);
  assert_string_equal(c.r.message, "container \"abc\" not found: \xe2\x9c\x93 100%% %zz");
  call_free(&c);
  peer_free(&p);
}

static void oversize_message_is_rejected(void **state) {
  session_opts_t o = {.max_recv_msg_size = 16};
  peer_t p;
  peer_init(&p, &o, respond_body);
  Runtime__V1__VersionResponse v = version_resp();
  set_body_msg(&p, &v.base, 1);
  call_t c = {0};
  assert_int_equal(start(&p, &c, 0), 0);
  pump(&p);
  assert_int_equal(c.r.closes, 1);
  assert_int_equal(c.r.messages, 0);
  assert_int_equal(c.r.code, NL_GRPC_RESOURCE_EXHAUSTED);
  char want[128];
  snprintf(want, sizeof want, "grpc: received message larger than max (%zu vs. 16)",
           p.out_len - 5);
  assert_string_equal(c.r.message, want);
  assert_true(p.got_rst);
  assert_int_equal(p.rst_code, NGHTTP2_CANCEL);
  call_free(&c);
  peer_free(&p);
}

static void respond_rst(peer_t *p, int32_t id) {
  nghttp2_submit_rst_stream(p->srv, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
}

static void respond_http_404(peer_t *p, int32_t id) {
  static const nghttp2_nv nv[] = {HV(":status", "404")};
  nghttp2_submit_response(p->srv, id, nv, 1, NULL);
}

static void respond_no_trailers(peer_t *p, int32_t id) {
  respond_body(p, id);
}

static void abnormal_ends(void **state) {
  peer_t p;
  call_t c = {0};
  peer_init(&p, NULL, respond_rst);
  start(&p, &c, 0);
  pump(&p);
  assert_int_equal(c.r.code, NL_GRPC_INTERNAL);
  assert_string_equal(c.r.message, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR");
  call_free(&c);
  peer_free(&p);

  memset(&c, 0, sizeof c);
  peer_init(&p, NULL, respond_http_404);
  start(&p, &c, 0);
  pump(&p);
  assert_int_equal(c.r.code, NL_GRPC_UNIMPLEMENTED);
  assert_string_equal(c.r.message, "unexpected HTTP status code received from server: 404");
  call_free(&c);
  peer_free(&p);

  memset(&c, 0, sizeof c);
  peer_init(&p, NULL, respond_no_trailers);
  Runtime__V1__VersionResponse v = version_resp();
  set_body_msg(&p, &v.base, 1);
  p.trailers = NULL;
  start(&p, &c, 0);
  pump(&p);
  assert_int_equal(c.r.code, NL_GRPC_INTERNAL);
  assert_string_equal(c.r.message, "server closed the stream without sending trailers");
  call_free(&c);
  peer_free(&p);
}

static void free_fails_open_streams(void **state) {
  peer_t p;
  peer_init(&p, NULL, NULL); /* never answers */
  call_t c = {0};
  start(&p, &c, 0);
  pump(&p);
  assert_int_equal(c.r.closes, 0);
  session_free(p.cli, "error reading from server: EOF");
  p.cli = NULL;
  assert_int_equal(c.r.closes, 1);
  assert_int_equal(c.r.code, NL_GRPC_UNAVAILABLE);
  assert_false(c.r.refused); /* the request went out: the server may have run it */
  assert_string_equal(c.r.message, "error reading from server: EOF");
  call_free(&c);
  peer_free(&p);
}

static void cancel_sends_rst_and_no_callback(void **state) {
  peer_t p;
  peer_init(&p, NULL, NULL);
  call_t c = {0};
  start(&p, &c, 0);
  pump(&p);
  nl_grpc_stream_cancel(&c.st);
  pump(&p);
  assert_true(p.got_rst);
  assert_int_equal(p.rst_code, NGHTTP2_CANCEL);
  assert_int_equal(c.r.closes, 0);
  assert_int_equal(nl_h2_active(p.cli), 0);
  call_free(&c);
  peer_free(&p);
}

static void status_formatting(void **state) {
  nl_grpc_status_t st = {NL_GRPC_UNKNOWN, "boom"};
  char *s = nl_grpc_status_format(&st);
  assert_string_equal(s, "rpc error: code = Unknown desc = boom");
  free(s);
  st.code = NL_GRPC_DEADLINE_EXCEEDED;
  st.message = "context deadline exceeded";
  s = nl_grpc_status_format(&st);
  assert_string_equal(s, "rpc error: code = DeadlineExceeded desc = context deadline exceeded");
  free(s);
  st.code = 42;
  s = nl_grpc_status_format(&st);
  assert_string_equal(s, "rpc error: code = Code(42) desc = context deadline exceeded");
  free(s);
  nl_err_t *err = NULL;
  st.code = NL_GRPC_OK;
  assert_int_equal(nl_grpc_status_to_err(&st, &err), 0);
  assert_null(err);
  st.code = NL_GRPC_NOT_FOUND;
  st.message = "x";
  assert_int_equal(nl_grpc_status_to_err(&st, &err), -1);
  assert_int_equal(err->code, NL_GRPC_NOT_FOUND);
  assert_string_equal(err->msg, "rpc error: code = NotFound desc = x");
  nl_err_free(&err);
  s = nl_grpc_percent_decode("%41%4", 5);
  assert_string_equal(s, "A%4");
  free(s);
}

/* Fails each allocation of a whole exchange in turn (nghttp2's failmalloc): the
 * engine must report, never crash or leak (ASan checks the leaks). */
static void failing_allocations(void **state) {
  nl_grpc_mem_t mem;
  for (uint64_t i = 1; i < 200; i++) {
    nl_grpc_mem_init(&mem);
    mem.fail_at = i;
    session_opts_t o = {.mem = &mem};
    peer_t p;
    peer_init(&p, &o, respond_body);
    Runtime__V1__VersionResponse v = version_resp();
    set_body_msg(&p, &v.base, 1);
    call_t c = {0};
    c.r.mem = &mem;
    if (!p.cli) {
      peer_free(&p);
      continue;
    }
    if (start(&p, &c, 0) == 0) {
      pump(&p);
      session_free(p.cli, "done");
      p.cli = NULL;
      assert_int_equal(c.r.closes, 1);
    }
    call_free(&c);
    peer_free(&p);
    assert_int_equal(mem.in_use, 0);
    if (mem.nfailed == 0) break; /* past the last allocation */
  }
  assert_int_equal(mem.nfailed, 0);
}

static void server_ping(peer_t *p, const char payload[8]) {
  assert_int_equal(nghttp2_submit_ping(p->srv, NGHTTP2_FLAG_NONE, (const uint8_t *)payload), 0);
}

/* Without cbs.ping every PING is acknowledged at once, payload echoed. */
static void pings_acked_at_once(void **state) {
  peer_t p;
  peer_init(&p, NULL, respond_body);
  pump(&p);
  server_ping(&p, "pingpng1");
  pump(&p);
  assert_int_equal(p.ping_acks, 1);
  assert_memory_equal(p.ack_data, "pingpng1", 8);
  peer_free(&p);
}

/* With cbs.ping the ACKs wait for nl_h2_ack_pings; a flood beyond
 * the few the engine keeps is acknowledged at once; none is lost. */
static void pings_acked_when_asked(void **state) {
  peer_t p;
  peer_init_acks(&p, NULL, respond_body, true);
  pump(&p);
  server_ping(&p, "pingpng1");
  pump(&p);
  assert_int_equal(p.pings_to_ack, 1);
  assert_int_equal(p.ping_acks, 0);
  assert_int_equal(nl_h2_ack_pings(p.cli), 0);
  pump(&p);
  assert_int_equal(p.ping_acks, 1);
  assert_memory_equal(p.ack_data, "pingpng1", 8);
  assert_int_equal(nl_h2_ack_pings(p.cli), 0); /* nothing left: no second ACK */
  pump(&p);
  assert_int_equal(p.ping_acks, 1);

  char payload[9];
  for (int i = 0; i < 7; i++) {
    snprintf(payload, sizeof payload, "flood%03d", i);
    server_ping(&p, payload);
  }
  pump(&p);
  assert_int_equal(p.ping_acks, 1 + 3); /* 4 kept, 3 acknowledged at once */
  assert_int_equal(nl_h2_ack_pings(p.cli), 0);
  pump(&p);
  assert_int_equal(p.ping_acks, 1 + 7);
  peer_free(&p);
}

/* ---- malformed responses, as raw frames ---- */

/* nghttp2's HTTP messaging rules on a response, which the engine must keep:
 * each case is a scripted exchange of raw frames on stream 1 and the status
 * the call ends with. */
typedef struct raw {
  nl_h2_t *cli;
  nghttp2_hd_deflater *def;
  nl_buf_t out;
} raw_t;

static int discard_write(void *user, const uint8_t *data, size_t len) { return 0; }

static void raw_frame(raw_t *r, uint8_t type, uint8_t flags, int32_t id, const uint8_t *p,
                      size_t len) {
  uint8_t h[9] = {(uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, type, flags,
                  (uint8_t)(id >> 24), (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id};
  nl_buf_append(&r->out, h, 9);
  if (len) nl_buf_append(&r->out, p, len);
}

static void raw_headers(raw_t *r, uint8_t flags, const nghttp2_nv *nv, size_t n) {
  uint8_t block[512];
  ssize_t len = nghttp2_hd_deflate_hd(r->def, block, sizeof block, (nghttp2_nv *)nv, n);
  assert_true(len >= 0);
  raw_frame(r, NGHTTP2_HEADERS, flags | NGHTTP2_FLAG_END_HEADERS, 1, block, (size_t)len);
}

static void raw_data(raw_t *r, uint8_t flags) {
  Runtime__V1__VersionResponse v = version_resp();
  uint8_t buf[128];
  size_t n = nl_grpc_frame_size(&v.base);
  nl_grpc_frame(&v.base, buf);
  raw_frame(r, NGHTTP2_DATA, flags, 1, buf, n);
}

#define END NGHTTP2_FLAG_END_STREAM
enum step { H_OK, H_NOSTATUS, H_STATUS2, H_DUPSTATUS, H_LATESTATUS, H_PATH, H_100, H_CONN,
            H_TE, H_CLEN3, H_CLEN_BAD, H_UPPER, H_BADNAME, D, D_END, T_OK, T_OK_NOEND,
            T_PSEUDO, T_UPPER, T_BADMSG, T_BADSTATUS, T_MSG, STOP };

static void raw_step(raw_t *r, enum step s) {
  static const nghttp2_nv ok[] = {HV(":status", "200"), HV("content-type", "application/grpc")};
  static const nghttp2_nv nostatus[] = {HV("content-type", "application/grpc")};
  static const nghttp2_nv status2[] = {HV(":status", "20")};
  static const nghttp2_nv dup[] = {HV(":status", "200"), HV(":status", "200")};
  static const nghttp2_nv late[] = {HV("content-type", "application/grpc"), HV(":status", "200")};
  static const nghttp2_nv path[] = {HV(":status", "200"), HV(":path", "/x")};
  static const nghttp2_nv h100[] = {HV(":status", "100")};
  static const nghttp2_nv conn[] = {HV(":status", "200"), HV("connection", "close")};
  static const nghttp2_nv te[] = {HV(":status", "200"), HV("te", "gzip")};
  static const nghttp2_nv clen3[] = {HV(":status", "200"), HV("content-length", "3")};
  static const nghttp2_nv clenbad[] = {HV(":status", "200"), HV("content-length", "x")};
  static const nghttp2_nv upper[] = {HV(":status", "200"), HV("Content-Type", "application/grpc")};
  static const nghttp2_nv badname[] = {HV(":status", "200"), HV("x y", "1")};
  static const nghttp2_nv tok[] = {HV("grpc-status", "0")};
  static const nghttp2_nv tpseudo[] = {HV("grpc-status", "0"), HV(":status", "200")};
  static const nghttp2_nv tupper[] = {HV("Grpc-Status", "0")};
  static const nghttp2_nv tbadmsg[] = {HV("grpc-status", "5"), HV("grpc-message", "a\nb")};
  static const nghttp2_nv tbadstatus[] = {HV("grpc-status", "5\x01")};
  static const nghttp2_nv tmsg[] = {HV("grpc-status", "5"), HV("grpc-message", "gone%21")};
#define RH(fl, a) raw_headers(r, fl, a, sizeof a / sizeof *a)
  switch (s) {
  case H_OK: RH(0, ok); break;
  case H_NOSTATUS: RH(0, nostatus); break;
  case H_STATUS2: RH(0, status2); break;
  case H_DUPSTATUS: RH(0, dup); break;
  case H_LATESTATUS: RH(0, late); break;
  case H_PATH: RH(0, path); break;
  case H_100: RH(0, h100); break;
  case H_CONN: RH(0, conn); break;
  case H_TE: RH(0, te); break;
  case H_CLEN3: RH(0, clen3); break;
  case H_CLEN_BAD: RH(0, clenbad); break;
  case H_UPPER: RH(0, upper); break;
  case H_BADNAME: RH(0, badname); break;
  case D: raw_data(r, 0); break;
  case D_END: raw_data(r, END); break;
  case T_OK: RH(END, tok); break;
  case T_OK_NOEND: RH(0, tok); break;
  case T_PSEUDO: RH(END, tpseudo); break;
  case T_UPPER: RH(END, tupper); break;
  case T_BADMSG: RH(END, tbadmsg); break;
  case T_BADSTATUS: RH(END, tbadstatus); break;
  case T_MSG: RH(END, tmsg); break;
  case STOP: break;
  }
#undef RH
}

#define PROTO "stream terminated by RST_STREAM with error code: PROTOCOL_ERROR"
static const struct raw_case {
  enum step steps[6];
  int code;
  const char *message;
  int messages;
} raw_cases[] = {
    {{H_OK, D, T_OK, STOP}, NL_GRPC_OK, "", 1},
    {{H_NOSTATUS, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_STATUS2, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_DUPSTATUS, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_LATESTATUS, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_PATH, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_100, H_OK, D, T_OK, STOP}, NL_GRPC_OK, "", 1},
    {{H_100, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_100, T_OK, STOP}, NL_GRPC_OK, "", 0}, /* nghttp2 1.52 takes it as trailers */
    {{H_CONN, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_TE, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_CLEN3, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_CLEN_BAD, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_UPPER, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{H_BADNAME, D, T_OK, STOP}, NL_GRPC_INTERNAL, PROTO, 0},
    {{D, T_OK, STOP}, -1, "", 0}, /* a connection error: the call ends at session free */
    {{H_OK, D, T_OK_NOEND, D_END, STOP}, NL_GRPC_OK, "", 1}, /* nghttp2 1.52 lets it pass */
    {{H_OK, D, T_PSEUDO, STOP}, NL_GRPC_OK, "", 1}, /* ditto */
    {{H_OK, D, T_UPPER, STOP}, NL_GRPC_INTERNAL, PROTO, 1},
    {{H_OK, D, T_BADMSG, STOP}, NL_GRPC_NOT_FOUND, "", 1},
    {{H_OK, D, T_BADSTATUS, STOP}, NL_GRPC_INTERNAL, PROTO, 1},
    {{H_OK, D, T_MSG, STOP}, NL_GRPC_NOT_FOUND, "gone!", 1},
    {{H_OK, D_END, STOP}, NL_GRPC_INTERNAL, "server closed the stream without sending trailers", 1},
};

static void malformed_responses(void **state) {
  for (size_t i = 0; i < sizeof raw_cases / sizeof *raw_cases; i++) {
    const struct raw_case *k = &raw_cases[i];
    raw_t r = {0};
    nl_h2_cbs_t cbs = {.write = discard_write};
    r.cli = session_new(NULL, &cbs, NULL);
    assert_int_equal(nghttp2_hd_deflate_new(&r.def, 4096), 0);
    call_t c = {0};
    assert_int_equal(start(&(peer_t){.cli = r.cli}, &c, 0), 0);
    assert_int_equal(nl_h2_flush(r.cli), 0);
    raw_frame(&r, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
    for (size_t j = 0; k->steps[j] != STOP; j++) raw_step(&r, k->steps[j]);
    assert_int_equal(nl_h2_recv(r.cli, (uint8_t *)r.out.data, r.out.len), 0);
    assert_int_equal(nl_h2_flush(r.cli), 0); /* our RST_STREAM, if any */
    bool conn_error = k->code < 0;
    if (c.r.closes != !conn_error || (!conn_error && c.r.code != k->code) ||
        strcmp(c.r.message, k->message) || c.r.messages != k->messages)
      fail_msg("case %zu: closes %d code %d message \"%s\" messages %d", i, c.r.closes,
               c.r.code, c.r.message, c.r.messages);
    /* A stream error leaves the session working; after a connection error
     * nghttp2 sent GOAWAY and wants no more I/O (cri/conn.c then drops it). */
    assert_true(nl_h2_want_io(r.cli) == !conn_error);
    session_free(r.cli, "test over");
    nghttp2_hd_deflate_del(r.def);
    nl_buf_free(&r.out);
    call_free(&c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unary_across_many_data_frames),
      cmocka_unit_test(streaming_messages_in_one_frame),
      cmocka_unit_test(trailers_only_and_percent_decoding),
      cmocka_unit_test(oversize_message_is_rejected),
      cmocka_unit_test(abnormal_ends),
      cmocka_unit_test(free_fails_open_streams),
      cmocka_unit_test(cancel_sends_rst_and_no_callback),
      cmocka_unit_test(status_formatting),
      cmocka_unit_test(failing_allocations),
      cmocka_unit_test(pings_acked_at_once),
      cmocka_unit_test(pings_acked_when_asked),
      cmocka_unit_test(malformed_responses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
