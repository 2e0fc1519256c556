#include "managers/dbus.h"

#include <string.h>

enum { F_PATH = 1, F_INTERFACE, F_MEMBER, F_ERROR_NAME, F_REPLY_SERIAL, F_DESTINATION, F_SENDER,
       F_SIGNATURE, F_UNIX_FDS };

/* ---- encoding (little-endian) ---- */

static void pad(nl_buf_t *b, size_t a) {
  static const char zeros[8];
  if (b->len % a) nl_buf_append(b, zeros, a - b->len % a);
}

static void u32(nl_buf_t *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  pad(b, 4);
  nl_buf_append(b, x, 4);
}

static void str(nl_buf_t *b, const char *s) {
  u32(b, (uint32_t)strlen(s));
  nl_buf_append(b, s, strlen(s) + 1);
}

static void sig(nl_buf_t *b, const char *s) {
  uint8_t n = (uint8_t)strlen(s);
  nl_buf_append(b, &n, 1);
  nl_buf_append(b, s, (size_t)n + 1);
}

void nl_dbus_put_u32(nl_buf_t *body, uint32_t v) { u32(body, v); }
void nl_dbus_put_bool(nl_buf_t *body, bool v) { u32(body, v ? 1 : 0); }
void nl_dbus_put_str(nl_buf_t *body, const char *s) { str(body, s); }

void nl_dbus_put_variant_u64(nl_buf_t *body, uint64_t v) {
  sig(body, "t");
  pad(body, 8);
  u32(body, (uint32_t)v);
  u32(body, (uint32_t)(v >> 32));
}

/* One header field: (code, variant of type t holding s). */
static void field(nl_buf_t *b, uint8_t code, const char *t, const char *s, uint32_t n) {
  pad(b, 8);
  nl_buf_append(b, &code, 1);
  sig(b, t);
  if (*t == 'u') u32(b, n);
  else if (*t == 'g') sig(b, s);
  else str(b, s);
}

void nl_dbus_encode(const nl_dbus_hdr_t *h, const nl_buf_t *body, nl_buf_t *out) {
  nl_buf_t m = NL_BUF_INIT;
  uint8_t fixed[4] = {'l', (uint8_t)h->type, 0, 1};
  nl_buf_append(&m, fixed, 4);
  u32(&m, (uint32_t)(body ? body->len : 0));
  u32(&m, h->serial);
  u32(&m, 0); /* the fields' length, set below */
  size_t start = m.len;
  if (h->path) field(&m, F_PATH, "o", h->path, 0);
  if (h->interface) field(&m, F_INTERFACE, "s", h->interface, 0);
  if (h->member) field(&m, F_MEMBER, "s", h->member, 0);
  if (h->error_name) field(&m, F_ERROR_NAME, "s", h->error_name, 0);
  if (h->reply_serial) field(&m, F_REPLY_SERIAL, "u", NULL, h->reply_serial);
  if (h->destination) field(&m, F_DESTINATION, "s", h->destination, 0);
  if (h->sender) field(&m, F_SENDER, "s", h->sender, 0);
  if (h->signature && *h->signature) field(&m, F_SIGNATURE, "g", h->signature, 0);
  if (h->unix_fds) field(&m, F_UNIX_FDS, "u", NULL, h->unix_fds);
  uint32_t flen = (uint32_t)(m.len - start);
  uint8_t x[4] = {(uint8_t)flen, (uint8_t)(flen >> 8), (uint8_t)(flen >> 16), (uint8_t)(flen >> 24)};
  memcpy(m.data + 12, x, 4);
  pad(&m, 8);
  if (body && body->len) nl_buf_append(&m, body->data, body->len);
  nl_buf_append(out, m.data, m.len);
  nl_buf_free(&m);
}

/* ---- parsing ---- */

typedef struct cur {
  const uint8_t *p;
  size_t len, off;
  bool be;
} cur_t;

static int get_align(cur_t *c, size_t a) {
  size_t o = (c->off + a - 1) / a * a;
  if (o > c->len) return -1;
  c->off = o;
  return 0;
}

static int get_u32(cur_t *c, uint32_t *v) {
  if (get_align(c, 4) < 0 || c->len - c->off < 4) return -1;
  const uint8_t *q = c->p + c->off;
  *v = c->be ? (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]
             : (uint32_t)q[3] << 24 | (uint32_t)q[2] << 16 | (uint32_t)q[1] << 8 | q[0];
  c->off += 4;
  return 0;
}

/* A string of n bytes and its NUL at the cursor. */
static int get_chars(cur_t *c, size_t n, const char **s) {
  if (c->len - c->off < n + 1 || c->p[c->off + n] != 0 || memchr(c->p + c->off, 0, n)) return -1;
  *s = (const char *)c->p + c->off;
  c->off += n + 1;
  return 0;
}

static int get_str(cur_t *c, const char **s) {
  uint32_t n;
  return get_u32(c, &n) < 0 ? -1 : get_chars(c, n, s);
}

static int get_sig(cur_t *c, const char **s) {
  if (c->off >= c->len) return -1;
  size_t n = c->p[c->off++];
  return get_chars(c, n, s);
}

static int header_field(cur_t *c, nl_dbus_msg_t *m) {
  if (get_align(c, 8) < 0 || c->off >= c->len) return -1;
  uint8_t code = c->p[c->off++];
  const char *t, *s;
  uint32_t n;
  if (get_sig(c, &t) < 0) return -1;
  if (strcmp(t, "u") == 0) {
    if (get_u32(c, &n) < 0) return -1;
    if (code == F_REPLY_SERIAL) m->reply_serial = n;
    else if (code == F_UNIX_FDS) m->unix_fds = n;
    return 0;
  }
  if (strcmp(t, "g") == 0 ? get_sig(c, &s) < 0
      : strcmp(t, "s") == 0 || strcmp(t, "o") == 0 ? get_str(c, &s) < 0
                                                    : 1)
    return -1; /* no field of another type exists */
  switch (code) {
  case F_PATH: m->path = s; break;
  case F_INTERFACE: m->interface = s; break;
  case F_MEMBER: m->member = s; break;
  case F_ERROR_NAME: m->error_name = s; break;
  case F_DESTINATION: m->destination = s; break;
  case F_SENDER: m->sender = s; break;
  case F_SIGNATURE: m->signature = s; break;
  default: break;
  }
  return 0;
}

ssize_t nl_dbus_parse(const uint8_t *buf, size_t len, nl_dbus_msg_t *m) {
  if (len < 16) return 0;
  if ((buf[0] != 'l' && buf[0] != 'B') || buf[3] != 1 || buf[1] < 1 || buf[1] > 4) return -1;
  cur_t c = {buf, len, 4, buf[0] == 'B'};
  uint32_t body_len, serial, flen;
  get_u32(&c, &body_len);
  get_u32(&c, &serial);
  get_u32(&c, &flen);
  if (serial == 0 || flen > NL_DBUS_MAX_MESSAGE || body_len > NL_DBUS_MAX_MESSAGE) return -1;
  size_t head = (16 + (size_t)flen + 7) / 8 * 8, total = head + body_len;
  if (total > NL_DBUS_MAX_MESSAGE) return -1;
  if (len < total) return 0;
  memset(m, 0, sizeof *m);
  m->type = (nl_dbus_type_t)buf[1];
  m->big_endian = c.be;
  m->serial = serial;
  m->signature = "";
  c.len = 16 + flen;
  while (c.off < c.len)
    if (header_field(&c, m) < 0) return -1;
  m->body = buf + head;
  m->body_len = body_len;
  return (ssize_t)total;
}

static cur_t body_cur(const nl_dbus_reader_t *r) {
  return (cur_t){r->m->body, r->m->body_len, r->off, r->m->big_endian};
}

int nl_dbus_read_u32(nl_dbus_reader_t *r, uint32_t *v) {
  cur_t c = body_cur(r);
  if (get_u32(&c, v) < 0) return -1;
  r->off = c.off;
  return 0;
}

int nl_dbus_read_bool(nl_dbus_reader_t *r, bool *v) {
  uint32_t n;
  if (nl_dbus_read_u32(r, &n) < 0 || n > 1) return -1;
  *v = n == 1;
  return 0;
}

int nl_dbus_read_str(nl_dbus_reader_t *r, const char **s) {
  cur_t c = body_cur(r);
  if (get_str(&c, s) < 0) return -1;
  r->off = c.off;
  return 0;
}

int nl_dbus_read_variant_u64(nl_dbus_reader_t *r, uint64_t *v) {
  cur_t c = body_cur(r);
  const char *t;
  uint32_t lo, hi;
  if (get_sig(&c, &t) < 0 || strcmp(t, "t") != 0 || get_align(&c, 8) < 0) return -1;
  if (get_u32(&c, c.be ? &hi : &lo) < 0 || get_u32(&c, c.be ? &lo : &hi) < 0) return -1;
  *v = (uint64_t)hi << 32 | lo;
  r->off = c.off;
  return 0;
}
