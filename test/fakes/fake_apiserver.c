#include "test/fakes/fake_apiserver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "reactor/buf.h"
#include "reactor/io.h"
#include "reactor/http_server.h"
#include "reactor/list.h"
#include "reactor/tls.h"
#include "reactor/xalloc.h"

#define FIX(name) FIXTURES "/tls/" name

typedef struct fconn fconn_t;

typedef struct fstream {
  fconn_t *conn;
  nl_list_t link;
  int32_t id;
  size_t rec;            /* index of its record */
  nl_fake_as_rule_t rule;
  nl_buf_t body;         /* the request body */
  nl_buf_t out;          /* response bytes not yet taken by nghttp2 */
  bool eof, answered;
  size_t next_chunk;
  uv_timer_t timer;
} fstream_t;

struct fconn {
  nl_fake_as_t *f;
  nl_list_t link;
  nl_io_t io;
  nghttp2_session *h2;
  nl_list_t streams;
  int num, live;
  bool closed, silent;
};

struct nl_fake_as {
  uv_loop_t *loop;
  nl_fake_as_opts_t opts;
  nl_tls_config_t *tls;
  uv_tcp_t *listener;
  nl_http_server_t h1;
  bool h1_on;
  int port, live, nconns, npings;
  bool stopping;
  char url[64];
  nl_list_t conns;
  nl_fake_as_rule_t *rules;
  size_t nrules;
  nl_fake_as_req_t *reqs;
  size_t nreqs;
};

static void fake_maybe_free(nl_fake_as_t *f) {
  if (!f->stopping || f->live > 0) return;
  for (size_t i = 0; i < f->nreqs; i++) {
    nl_fake_as_req_t *r = &f->reqs[i];
    free(r->method);
    free(r->path);
    free(r->authority);
    free(r->authorization);
    free(r->user_agent);
    free(r->content_type);
    free(r->accept);
    free(r->body);
  }
  free(f->reqs);
  free(f->rules);
  nl_tls_config_unref(f->tls);
  free(f);
}

static const nl_fake_as_rule_t *match(nl_fake_as_t *f, const char *method, const char *path) {
  for (size_t i = 0; i < f->nrules; i++) {
    nl_fake_as_rule_t *r = &f->rules[i];
    if (r->method && strcmp(r->method, method)) continue;
    if (r->path && strncmp(path, r->path, strlen(r->path))) continue;
    static nl_fake_as_rule_t hit;
    hit = *r;
    if (!r->repeat) {
      memmove(r, r + 1, (f->nrules - i - 1) * sizeof *r);
      f->nrules--;
    }
    return &hit;
  }
  static const nl_fake_as_rule_t not_found = {
      .status = 404,
      .body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
              "\"message\":\"the server could not find the requested resource\","
              "\"reason\":\"NotFound\",\"code\":404}"};
  return &not_found;
}

static nl_fake_as_req_t *record(nl_fake_as_t *f, size_t *idx) {
  f->reqs = nl_xrealloc(f->reqs, (f->nreqs + 1) * sizeof *f->reqs);
  nl_fake_as_req_t *r = &f->reqs[f->nreqs];
  memset(r, 0, sizeof *r);
  *idx = f->nreqs++;
  return r;
}

/* ---- HTTP/2 connections ----------------------------------------------- */

static void conn_close(fconn_t *fc);

static void conn_flush(fconn_t *fc) {
  if (fc->closed || fc->silent) return;
  for (;;) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(fc->h2, &data);
    if (n <= 0) return;
    if (nl_io_write(&fc->io, data, (size_t)n, NULL) < 0) return;
  }
}

static void conn_maybe_free(fconn_t *fc) {
  if (fc->live > 0) return;
  nl_fake_as_t *f = fc->f;
  while (!nl_list_empty(&fc->streams)) {
    fstream_t *st = nl_list_entry(fc->streams.next, fstream_t, link);
    nl_list_remove(&st->link);
    nl_buf_free(&st->body);
    nl_buf_free(&st->out);
    free(st);
  }
  if (fc->h2) nghttp2_session_del(fc->h2);
  free(fc);
  f->live--;
  fake_maybe_free(f);
}

static void conn_handle_closed(uv_handle_t *h) {
  fconn_t *fc = h->data;
  if (h == (uv_handle_t *)&fc->io.tcp) nl_io_release(&fc->io);
  fc->live--;
  conn_maybe_free(fc);
}

static void stream_timer_closed(uv_handle_t *h) {
  fconn_t *fc = ((fstream_t *)h->data)->conn;
  fc->live--;
  conn_maybe_free(fc);
}

static void conn_close(fconn_t *fc) {
  if (fc->closed) return;
  fc->closed = true;
  nl_list_remove(&fc->link);
  nl_list_t *p;
  for (p = fc->streams.next; p != &fc->streams; p = p->next) {
    fstream_t *st = nl_list_entry(p, fstream_t, link);
    uv_close((uv_handle_t *)&st->timer, stream_timer_closed);
  }
  nl_io_close(&fc->io, conn_handle_closed);
}

static ssize_t read_out(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len,
                        uint32_t *flags, nghttp2_data_source *src, void *user) {
  fstream_t *st = src->ptr;
  size_t n = st->out.len < len ? st->out.len : len;
  if (n) {
    memcpy(buf, st->out.data, n);
    nl_buf_consume(&st->out, n);
  }
  if (st->out.len == 0) {
    if (st->eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
    else if (n == 0) return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

static void end_action(fstream_t *st) {
  fconn_t *fc = st->conn;
  if (st->rule.action == FAKE_AS_RST) {
    nghttp2_submit_rst_stream(fc->h2, NGHTTP2_FLAG_NONE, st->id, st->rule.rst_code);
  } else if (st->rule.action == FAKE_AS_CLOSE) {
    conn_flush(fc);
    conn_close(fc);
    return;
  } else if (!st->rule.hold) {
    st->eof = true;
    nghttp2_session_resume_data(fc->h2, st->id);
  }
  conn_flush(fc);
}

static void on_chunk_timer(uv_timer_t *t) {
  fstream_t *st = t->data;
  fconn_t *fc = st->conn;
  if (fc->closed || fc->silent) return;
  const char *c = st->rule.chunks[st->next_chunk++];
  nl_buf_append(&st->out, c, strlen(c));
  nghttp2_session_resume_data(fc->h2, st->id);
  conn_flush(fc);
  if (st->next_chunk < st->rule.n_chunks) uv_timer_start(&st->timer, on_chunk_timer, st->rule.chunk_ms, 0);
  else end_action(st);
}

static void send_head(uv_timer_t *t) {
  fstream_t *st = t->data;
  fconn_t *fc = st->conn;
  if (fc->closed || fc->silent) return;
  const nl_fake_as_rule_t *r = &st->rule;
  bool action_first = (r->action == FAKE_AS_RST || r->action == FAKE_AS_CLOSE) && !r->n_chunks;
  if (action_first) {
    end_action(st);
    return;
  }
  char status[8];
  snprintf(status, sizeof status, "%d", r->status ? r->status : 200);
  const char *ct = r->content_type ? r->content_type : "application/json";
  nghttp2_nv nv[3] = {
      {(uint8_t *)":status", (uint8_t *)status, 7, strlen(status), 0},
      {(uint8_t *)"content-type", (uint8_t *)ct, 12, strlen(ct), 0},
  };
  size_t n = 2;
  if (r->retry_after)
    nv[n++] = (nghttp2_nv){(uint8_t *)"retry-after", (uint8_t *)r->retry_after, 11,
                           strlen(r->retry_after), 0};
  if (r->body) nl_buf_append(&st->out, r->body, r->body_len ? r->body_len : strlen(r->body));
  nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_out};
  st->answered = true;
  nghttp2_submit_response(fc->h2, st->id, nv, n, &prd);
  if (r->n_chunks) uv_timer_start(&st->timer, on_chunk_timer, r->chunk_ms, 0);
  else end_action(st);
  conn_flush(fc);
}

static void request_done(fconn_t *fc, fstream_t *st) {
  nl_fake_as_t *f = fc->f;
  nl_fake_as_req_t *rec = &f->reqs[st->rec];
  rec->body_len = st->body.len;
  nl_buf_puts(&st->body, "");
  rec->body = nl_buf_steal(&st->body);
  st->rule = *match(f, rec->method ? rec->method : "", rec->path ? rec->path : "");
  switch (st->rule.action) {
  case FAKE_AS_GOAWAY: {
    int32_t last = st->rule.goaway_refuse ? st->id - 2 : st->id;
    nghttp2_submit_goaway(fc->h2, NGHTTP2_FLAG_NONE, last < 0 ? 0 : last, NGHTTP2_NO_ERROR, NULL, 0);
    conn_flush(fc);
    if (st->rule.goaway_refuse) return;
    break;
  }
  case FAKE_AS_SILENT:
    fc->silent = true;
    uv_read_stop((uv_stream_t *)&fc->io.tcp);
    return;
  case FAKE_AS_NOTHING:
    return;
  default:
    break;
  }
  uv_timer_start(&st->timer, send_head, st->rule.delay_ms, 0);
}

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  fconn_t *fc = user;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  fstream_t *st = nl_xcalloc(1, sizeof *st);
  st->conn = fc;
  st->id = frame->hd.stream_id;
  uv_timer_init(fc->f->loop, &st->timer);
  st->timer.data = st;
  fc->live++;
  nl_list_insert_tail(&fc->streams, &st->link);
  record(fc->f, &st->rec)->conn = fc->num;
  nghttp2_session_set_stream_user_data(h2, st->id, st);
  return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user) {
  fconn_t *fc = user;
  fstream_t *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
  if (!st) return 0;
  nl_fake_as_req_t *r = &fc->f->reqs[st->rec];
  struct { const char *n; char **slot; } map[] = {
      {":method", &r->method}, {":path", &r->path}, {":authority", &r->authority},
      {"authorization", &r->authorization}, {"user-agent", &r->user_agent},
      {"content-type", &r->content_type}, {"accept", &r->accept}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    if (strlen(map[i].n) == namelen && !memcmp(map[i].n, name, namelen)) {
      free(*map[i].slot);
      *map[i].slot = nl_xstrndup((const char *)value, valuelen);
    }
  }
  return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *user) {
  fstream_t *st = nghttp2_session_get_stream_user_data(h2, id);
  if (st) nl_buf_append(&st->body, data, len);
  return 0;
}

static int on_frame(nghttp2_session *h2, const nghttp2_frame *frame, void *user) {
  fconn_t *fc = user;
  if (frame->hd.type == NGHTTP2_PING && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) fc->f->npings++;
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    fstream_t *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (st) request_done(fc, st);
  }
  return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *user) {
  nghttp2_session_set_stream_user_data(h2, id, NULL);
  return 0;
}

static void io_ready(nl_io_t *io) {
  fconn_t *fc = container_of(io, fconn_t, io);
  nl_fake_as_t *f = fc->f;
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
  nghttp2_option *opt;
  nghttp2_option_new(&opt);
  if (f->opts.stall_window) nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_session_server_new2(&fc->h2, cb, fc, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry iv[2] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, f->opts.max_streams ? f->opts.max_streams : 100}};
  size_t n = 1;
  if (f->opts.stall_window) iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, f->opts.stall_window};
  nghttp2_submit_settings(fc->h2, NGHTTP2_FLAG_NONE, iv, n);
  conn_flush(fc);
}

static void io_data(nl_io_t *io, const char *p, size_t n) {
  fconn_t *fc = container_of(io, fconn_t, io);
  if (fc->closed || fc->silent || !fc->h2) return;
  if (nghttp2_session_mem_recv(fc->h2, (const uint8_t *)p, n) < 0) {
    conn_close(fc);
    return;
  }
  conn_flush(fc);
}

static void io_end(nl_io_t *io, nl_err_t *err) { conn_close(container_of(io, fconn_t, io)); }

static const nl_io_cbs_t io_cbs = {.on_ready = io_ready, .on_data = io_data, .on_end = io_end};

static void on_conn(uv_stream_t *server, int status) {
  nl_fake_as_t *f = server->data;
  if (status < 0) return;
  fconn_t *fc = nl_xcalloc(1, sizeof *fc);
  fc->f = f;
  nl_list_init(&fc->streams);
  nl_io_init(&fc->io, f->loop, &io_cbs);
  fc->io.tcp.data = fc;
  fc->live = 1;
  f->live++;
  fc->num = ++f->nconns;
  nl_list_insert_tail(&f->conns, &fc->link);
  if (uv_accept(server, (uv_stream_t *)&fc->io.tcp) < 0) {
    conn_close(fc);
    return;
  }
  nl_io_set_tls(&fc->io, nl_tls_new(f->tls, NULL));
  if (nl_io_start(&fc->io, NULL) < 0) conn_close(fc);
}

/* ---- HTTP/1.1 ------------------------------------------------------------ */

static void h1_handler(void *ctx, const nl_http_req_t *req, nl_http_resp_t *resp) {
  nl_fake_as_t *f = ctx;
  size_t idx;
  nl_fake_as_req_t *r = record(f, &idx);
  r->method = nl_xstrdup(req->method);
  r->path = nl_xstrdup(req->target);
  const char *v;
  if ((v = nl_http_headers_get(req->headers, "Host"))) r->authority = nl_xstrdup(v);
  if ((v = nl_http_headers_get(req->headers, "Authorization"))) r->authorization = nl_xstrdup(v);
  if ((v = nl_http_headers_get(req->headers, "User-Agent"))) r->user_agent = nl_xstrdup(v);
  if ((v = nl_http_headers_get(req->headers, "Content-Type"))) r->content_type = nl_xstrdup(v);
  if ((v = nl_http_headers_get(req->headers, "Accept"))) r->accept = nl_xstrdup(v);
  r->body = nl_xstrndup(req->body, req->body_len);
  r->body_len = req->body_len;
  const nl_fake_as_rule_t *rule = match(f, req->method, req->target);
  nl_http_resp_header(resp, "Content-Type", rule->content_type ? rule->content_type : "application/json");
  if (rule->retry_after) nl_http_resp_header(resp, "Retry-After", rule->retry_after);
  nl_buf_t b = NL_BUF_INIT;
  if (rule->body) nl_buf_append(&b, rule->body, rule->body_len ? rule->body_len : strlen(rule->body));
  for (size_t i = 0; i < rule->n_chunks; i++) nl_buf_puts(&b, rule->chunks[i]);
  nl_http_resp_send(resp, rule->status ? rule->status : 200, b.data, b.len);
  nl_buf_free(&b);
}

static void h1_stopped(nl_http_server_t *srv, void *ctx) {
  nl_fake_as_t *f = ctx;
  f->live--;
  fake_maybe_free(f);
}

/* ---- life cycle ---------------------------------------------------------- */

static void listener_closed(uv_handle_t *h) {
  nl_fake_as_t *f = h->data;
  free(h);
  f->live--;
  fake_maybe_free(f);
}

void nl_fake_as_listen(nl_fake_as_t *f) {
  nl_err_t *err = NULL;
  if (f->opts.http1_only) {
    nl_http_server_opts_t so = {.tls = f->tls};
    if (nl_http_server_init(&f->h1, f->loop, &so, &err) < 0) abort();
    nl_http_server_route(&f->h1, NULL, "/", h1_handler, f);
    if (nl_http_server_listen(&f->h1, "127.0.0.1", f->port, &err) < 0) {
      fprintf(stderr, "fake apiserver: %s\n", nl_err_msg(err));
      abort();
    }
    f->port = nl_http_server_port(&f->h1);
    f->h1_on = true;
    f->live++;
  } else {
    f->listener = nl_xcalloc(1, sizeof *f->listener);
    uv_tcp_init(f->loop, f->listener);
    f->listener->data = f;
    f->live++;
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", f->port, &a);
    if (uv_tcp_bind(f->listener, (const struct sockaddr *)&a, 0) < 0 ||
        uv_listen((uv_stream_t *)f->listener, 128, on_conn) < 0)
      abort();
    struct sockaddr_storage ss;
    int len = sizeof ss;
    uv_tcp_getsockname(f->listener, (struct sockaddr *)&ss, &len);
    f->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  }
  snprintf(f->url, sizeof f->url, "https://127.0.0.1:%d", f->port);
}

nl_fake_as_t *nl_fake_as_start(uv_loop_t *loop, const nl_fake_as_opts_t *opts) {
  nl_fake_as_t *f = nl_xcalloc(1, sizeof *f);
  f->loop = loop;
  if (opts) f->opts = *opts;
  nl_list_init(&f->conns);
  static const char *const h2[] = {"h2", NULL};
  nl_tls_config_opts_t to = {.server = true, .cert_file = FIX("server.crt"),
                             .key_file = FIX("server.key"),
                             .verify = f->opts.require_client_cert,
                             .ca_file = f->opts.require_client_cert ? FIX("ca.crt") : NULL,
                             .alpn = f->opts.http1_only ? NULL : h2};
  nl_err_t *err = NULL;
  if (nl_tls_config_new(&f->tls, &to, &err) < 0) {
    fprintf(stderr, "fake apiserver: %s\n", nl_err_msg(err));
    abort();
  }
  nl_fake_as_listen(f);
  return f;
}

void nl_fake_as_down(nl_fake_as_t *f) {
  if (f->h1_on) {
    f->h1_on = false;
    nl_http_server_stop(&f->h1, h1_stopped, f);
  }
  if (f->listener) {
    uv_close((uv_handle_t *)f->listener, listener_closed);
    f->listener = NULL;
  }
  while (!nl_list_empty(&f->conns)) conn_close(nl_list_entry(f->conns.next, fconn_t, link));
}

void nl_fake_as_stop(nl_fake_as_t *f) {
  f->stopping = true;
  f->live++;
  nl_fake_as_down(f);
  f->live--;
  fake_maybe_free(f);
}

int nl_fake_as_port(const nl_fake_as_t *f) { return f->port; }
const char *nl_fake_as_url(const nl_fake_as_t *f) { return f->url; }

void nl_fake_as_add(nl_fake_as_t *f, const nl_fake_as_rule_t *rule) {
  f->rules = nl_xrealloc(f->rules, (f->nrules + 1) * sizeof *f->rules);
  f->rules[f->nrules++] = *rule;
}

size_t nl_fake_as_nreqs(const nl_fake_as_t *f) { return f->nreqs; }
const nl_fake_as_req_t *nl_fake_as_req(const nl_fake_as_t *f, size_t i) {
  return i < f->nreqs ? &f->reqs[i] : NULL;
}
int nl_fake_as_nconns(const nl_fake_as_t *f) { return f->nconns; }
int nl_fake_as_nopen(const nl_fake_as_t *f) {
  int n = 0;
  const nl_list_t *p;
  for (p = f->conns.next; p != &f->conns; p = p->next) n++;
  return n;
}
int nl_fake_as_npings(const nl_fake_as_t *f) { return f->npings; }
