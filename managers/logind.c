#include "managers/logind.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "managers/dbus.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define LOGIND "org.freedesktop.login1"
#define LOGIND_PATH "/org/freedesktop/login1"
#define LOGIND_MANAGER "org.freedesktop.login1.Manager"
#define BUS "org.freedesktop.DBus"

void nl_logind_init(nl_logind_t *l, uv_loop_t *loop, const char *path, int64_t period_s,
                    nl_logind_cb cb, void *ctx) {
  memset(l, 0, sizeof *l);
  l->loop = loop;
  l->path = path;
  l->period_s = period_s;
  l->cb = cb;
  l->ctx = ctx;
  l->fd = l->lock_fd = -1;
}

static void on_event(uv_poll_t *h, int status, int events);

static void call(nl_logind_t *l, const char *dest, const char *path, const char *iface,
                 const char *member, const char *sig, const nl_buf_t *body) {
  nl_dbus_hdr_t h = {.type = NL_DBUS_METHOD_CALL, .serial = ++l->serial, .destination = dest,
                     .path = path, .interface = iface, .member = member, .signature = sig};
  nl_dbus_encode(&h, body, &l->out);
  if (l->polling) uv_poll_start(&l->poll, UV_READABLE | UV_WRITABLE, on_event);
}

static void close_fds(nl_logind_t *l) {
  for (int i = 0; i < l->n_fds; i++) close(l->fds[i]);
  l->n_fds = 0;
}

static void on_closed(uv_handle_t *h) {
  nl_logind_t *l = container_of((uv_poll_t *)h, nl_logind_t, poll);
  close(l->fd);
  l->fd = -1;
  close_fds(l);
  nl_buf_free(&l->in);
  nl_buf_free(&l->out);
  l->closing = false;
  if (l->done_cb) l->done_cb(l);
}

static void close_handle(nl_logind_t *l) {
  l->polling = false;
  l->closing = true;
  uv_close((uv_handle_t *)&l->poll, on_closed);
}

/* Gives up on logind: said once; the shutdown hook still works. The lock, if
 * held, goes with the connection's end, as logind drops it then too. */
static void fail(nl_logind_t *l, const char *why) {
  nl_warn("systemd-logind: %s; graceful node shutdown waits for the shutdown hook", why);
  l->state = NL_LOGIND_IDLE;
  nl_logind_release(l);
  if (l->polling) close_handle(l);
}

static void inhibit(nl_logind_t *l) {
  nl_buf_t b = NL_BUF_INIT;
  /* upstream's words */
  nl_dbus_put_str(&b, "shutdown");
  nl_dbus_put_str(&b, "kubelet");
  nl_dbus_put_str(&b, "Kubelet needs time for critical node operations.");
  nl_dbus_put_str(&b, "delay");
  call(l, LOGIND, LOGIND_PATH, LOGIND_MANAGER, "Inhibit", "ssss", &b);
  nl_buf_free(&b);
  l->state = NL_LOGIND_INHIBIT;
}

/* The reply to the call in flight moves the exchange on. fds: the message's. */
static void on_reply(nl_logind_t *l, const nl_dbus_msg_t *m, int *fds, int n_fds) {
  nl_dbus_reader_t r = {m, 0};
  nl_buf_t b = NL_BUF_INIT;
  switch (l->state) {
  case NL_LOGIND_HELLO:
    nl_dbus_put_str(&b, "type='signal',sender='" LOGIND "',interface='" LOGIND_MANAGER
                        "',member='PrepareForShutdown',path='" LOGIND_PATH "'");
    call(l, BUS, "/org/freedesktop/DBus", BUS, "AddMatch", "s", &b);
    l->state = NL_LOGIND_MATCH;
    break;
  case NL_LOGIND_MATCH:
    nl_dbus_put_str(&b, LOGIND_MANAGER);
    nl_dbus_put_str(&b, "InhibitDelayMaxUSec");
    call(l, LOGIND, LOGIND_PATH, "org.freedesktop.DBus.Properties", "Get", "ss", &b);
    l->state = NL_LOGIND_DELAY;
    break;
  case NL_LOGIND_DELAY:
    if (strcmp(m->signature, "v") != 0 || nl_dbus_read_variant_u64(&r, &l->delay_max_usec) < 0) {
      fail(l, "InhibitDelayMaxUSec: not a uint64");
      break;
    }
    if (l->delay_max_usec < (uint64_t)l->period_s * 1000000)
      nl_warn("systemd-logind: InhibitDelayMaxSec is %llus, less than shutdownGracePeriod %llds: "
              "logind will not wait that long (raise it in logind.conf)",
              (unsigned long long)(l->delay_max_usec / 1000000), (long long)l->period_s);
    inhibit(l);
    break;
  case NL_LOGIND_INHIBIT: {
    uint32_t idx;
    if (strcmp(m->signature, "h") != 0 || nl_dbus_read_u32(&r, &idx) < 0 || (int)idx >= n_fds) {
      fail(l, "Inhibit: no file descriptor in the reply");
      break;
    }
    l->lock_fd = fds[idx];
    fds[idx] = -1;
    l->state = NL_LOGIND_WATCHING;
    nl_info("systemd-logind: holding a delay inhibitor lock for shutdown (up to %llus)",
            (unsigned long long)(l->delay_max_usec / 1000000));
    break;
  }
  default:
    break;
  }
  nl_buf_free(&b);
}

static void dispatch(nl_logind_t *l, const nl_dbus_msg_t *m, int *fds, int n_fds) {
  if ((m->type == NL_DBUS_METHOD_RETURN || m->type == NL_DBUS_ERROR) && m->reply_serial == l->serial) {
    if (m->type == NL_DBUS_ERROR) {
      nl_dbus_reader_t r = {m, 0};
      const char *text = "";
      if (strncmp(m->signature, "s", 1) == 0) nl_dbus_read_str(&r, &text);
      char why[512];
      snprintf(why, sizeof why, "%s: %s", m->error_name ? m->error_name : "error", text);
      fail(l, why);
      return;
    }
    on_reply(l, m, fds, n_fds);
    return;
  }
  if (m->type != NL_DBUS_SIGNAL || !m->member || strcmp(m->member, "PrepareForShutdown") != 0 ||
      !m->interface || strcmp(m->interface, LOGIND_MANAGER) != 0)
    return;
  nl_dbus_reader_t r = {m, 0};
  bool down;
  if (strcmp(m->signature, "b") != 0 || nl_dbus_read_bool(&r, &down) < 0) return;
  nl_info("systemd-logind: PrepareForShutdown(%s)", down ? "true" : "false");
  /* after a cancellation the lock is taken again, as upstream */
  if (!down && l->lock_fd < 0 && l->state == NL_LOGIND_WATCHING) inhibit(l);
  l->cb(l->ctx, down);
}

/* SASL replies, one line each, until fd passing is agreed. */
static int auth_lines(nl_logind_t *l) {
  char *eol;
  while (l->state == NL_LOGIND_AUTH && (eol = memmem(l->in.data, l->in.len, "\r\n", 2))) {
    size_t n = (size_t)(eol - l->in.data);
    if (n >= 3 && memcmp(l->in.data, "OK ", 3) == 0) {
      /* the next line answers NEGOTIATE_UNIX_FD */
    } else if (n == 13 && memcmp(l->in.data, "AGREE_UNIX_FD", 13) == 0) {
      l->state = NL_LOGIND_HELLO;
    } else {
      fail(l, "the system bus refused EXTERNAL authentication or fd passing");
      return -1;
    }
    nl_buf_consume(&l->in, n + 2);
  }
  return 0;
}

static void on_readable(nl_logind_t *l) {
  char data[4096];
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int) * 4)];
  } ctl;
  struct iovec iov = {data, sizeof data};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                      .msg_controllen = sizeof ctl.buf};
  ssize_t n = recvmsg(l->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int *in = (int *)CMSG_DATA(c);
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      if (l->n_fds < (int)(sizeof l->fds / sizeof l->fds[0])) l->fds[l->n_fds++] = in[i];
      else close(in[i]);
    }
  }
  if (n <= 0) {
    fail(l, n == 0 ? "the system bus closed the connection" : strerror(errno));
    return;
  }
  nl_buf_append(&l->in, data, (size_t)n);
  if (l->state == NL_LOGIND_AUTH && auth_lines(l) < 0) return;
  while (l->polling && l->state != NL_LOGIND_AUTH) {
    nl_dbus_msg_t m;
    ssize_t len = nl_dbus_parse((const uint8_t *)l->in.data, l->in.len, &m);
    if (len == 0) break;
    if (len < 0) {
      fail(l, "a malformed message from the system bus");
      return;
    }
    int fds[4] = {-1, -1, -1, -1}, k = 0;
    for (; k < (int)m.unix_fds && k < l->n_fds && k < 4; k++) fds[k] = l->fds[k];
    memmove(l->fds, l->fds + k, (size_t)(l->n_fds - k) * sizeof(int));
    l->n_fds -= k;
    dispatch(l, &m, fds, k);
    for (int i = 0; i < k; i++)
      if (fds[i] >= 0) close(fds[i]);
    if (l->polling) nl_buf_consume(&l->in, (size_t)len);
  }
}

static void on_event(uv_poll_t *h, int status, int events) {
  nl_logind_t *l = container_of(h, nl_logind_t, poll);
  if (status < 0) {
    fail(l, uv_strerror(status));
    return;
  }
  if ((events & UV_WRITABLE) && l->out.len) {
    ssize_t n = send(l->fd, l->out.data, l->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      fail(l, strerror(errno));
      return;
    }
    if (n > 0) nl_buf_consume(&l->out, (size_t)n);
  }
  if (events & UV_READABLE) on_readable(l);
  if (l->polling) uv_poll_start(&l->poll, UV_READABLE | (l->out.len ? UV_WRITABLE : 0), on_event);
}

int nl_logind_start(nl_logind_t *l) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", l->path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EAGAIN &&
      errno != EINPROGRESS) {
    nl_vlog(1, "systemd-logind: no system bus at %s: %s", l->path, strerror(errno));
    close(fd);
    return -1;
  }
  l->fd = fd;
  /* SASL, pipelined with Hello as sd-bus does: EXTERNAL with our uid in hex. */
  char uid[16];
  snprintf(uid, sizeof uid, "%u", (unsigned)getuid());
  nl_buf_append(&l->out, "", 1);
  nl_buf_puts(&l->out, "AUTH EXTERNAL ");
  for (const char *p = uid; *p; p++) nl_buf_printf(&l->out, "%02x", (unsigned char)*p);
  nl_buf_puts(&l->out, "\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n");
  uv_poll_init(l->loop, &l->poll, fd);
  l->polling = true;
  l->state = NL_LOGIND_AUTH;
  call(l, BUS, "/org/freedesktop/DBus", BUS, "Hello", NULL, NULL);
  return 0;
}

void nl_logind_release(nl_logind_t *l) {
  if (l->lock_fd < 0) return;
  close(l->lock_fd);
  l->lock_fd = -1;
  nl_info("systemd-logind: inhibitor lock released");
}

void nl_logind_stop(nl_logind_t *l, nl_logind_done_cb done_cb) {
  l->done_cb = done_cb;
  if (l->lock_fd >= 0) {
    close(l->lock_fd);
    l->lock_fd = -1;
  }
  l->state = NL_LOGIND_IDLE;
  if (l->polling) close_handle(l);
  else if (!l->closing && done_cb) done_cb(l); /* closing: on_closed calls it */
}
